//! URL query strings as the components' HTTPS servers read them.

/// Query parameters in order, repeated ones kept (`command=a&command=b`),
/// percent-decoded with `+` as a space.
pub fn pairs(raw: Option<&str>) -> Vec<(String, String)> {
    let dec = |s: &str| {
        percent_encoding::percent_decode_str(&s.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    raw.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (dec(k), dec(v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn decoded_in_order() {
        assert_eq!(
            super::pairs(Some("command=a+b&command=%2Fbin&flag&=x")),
            [
                ("command", "a b"),
                ("command", "/bin"),
                ("flag", ""),
                ("", "x")
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        assert!(super::pairs(None).is_empty());
    }
}
