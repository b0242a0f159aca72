//! Just enough of Go's `net/url.Parse` for webhook URLs
//! (`scheme://[user@]host[:port][/path][?query][#fragment]`): validation
//! reports each part upstream refuses, and the client dials the host.

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    pub scheme: String,
    /// The user information before `@`, when present.
    pub user: Option<String>,
    /// `host[:port]` as written (IPv6 literals keep their brackets).
    pub host_port: String,
    /// The host alone (no brackets, no port).
    pub host: String,
    pub port: Option<u16>,
    pub path: String,
    pub query: String,
    pub fragment: String,
}

/// Parses `s`; errors read as Go's (`parse "<url>": …`).
pub(crate) fn parse(s: &str) -> Result<Url, String> {
    let fail = |why: &str| format!("parse \"{s}\": {why}");
    if s.chars().any(|c| c.is_control()) {
        return Err(fail("net/url: invalid control character in URL"));
    }
    let (rest, fragment) = match s.split_once('#') {
        Some((r, f)) => (r, f.to_string()),
        None => (s, String::new()),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, q.to_string()),
        None => (rest, String::new()),
    };
    let (scheme, rest) = match rest.split_once("://") {
        Some((sch, r)) if valid_scheme(sch) => (sch.to_ascii_lowercase(), r),
        Some(("", _)) => return Err(fail("missing protocol scheme")),
        Some(_) => return Err(fail("first path segment in URL cannot contain colon")),
        // No authority: everything is a path, as Go reads "host/path".
        None => {
            return Ok(Url {
                scheme: String::new(),
                user: None,
                host_port: String::new(),
                host: String::new(),
                port: None,
                path: rest.to_string(),
                query,
                fragment,
            });
        }
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, String::new()),
    };
    let (user, host_port) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u.to_string()), h),
        None => (None, authority),
    };
    if host_port.contains(' ') {
        return Err(fail("invalid character \" \" in host name"));
    }
    let (host, port) = split_host_port(host_port).map_err(|e| fail(&e))?;
    Ok(Url {
        scheme,
        user,
        host_port: host_port.to_string(),
        host,
        port,
        path,
        query,
        fragment,
    })
}

fn valid_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

fn split_host_port(hp: &str) -> Result<(String, Option<u16>), String> {
    let (host, port) = if let Some(rest) = hp.strip_prefix('[') {
        let Some((h, after)) = rest.split_once(']') else {
            return Err("missing ']' in host".to_string());
        };
        match after {
            "" => (h, None),
            p if p.starts_with(':') => (h, Some(&p[1..])),
            _ => return Err(format!("invalid port {after:?} after host")),
        }
    } else {
        match hp.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hp, None),
        }
    };
    let port = match port {
        None | Some("") => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if p.bytes().all(|b| b.is_ascii_digit()) => Some(n),
            _ => return Err(format!("invalid port \":{p}\" after host")),
        },
    };
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts() {
        let u = parse("https://user:pw@hook.example.com:8443/a/b?x=1#frag").unwrap();
        assert_eq!(u.scheme, "https");
        assert_eq!(u.user.as_deref(), Some("user:pw"));
        assert_eq!(u.host_port, "hook.example.com:8443");
        assert_eq!(u.host, "hook.example.com");
        assert_eq!(u.port, Some(8443));
        assert_eq!(u.path, "/a/b");
        assert_eq!(u.query, "x=1");
        assert_eq!(u.fragment, "frag");

        let u = parse("https://[::1]:9443").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("::1", Some(9443), "")
        );
        let u = parse("https://10.0.0.1").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("10.0.0.1", None));

        let u = parse("hook.example.com/path").unwrap();
        assert_eq!((u.scheme.as_str(), u.host.as_str()), ("", ""));

        assert!(parse("https://h:99999/").is_err());
        assert!(parse("https://h:abc/").is_err());
        assert!(parse("https://h\n/").is_err());
        assert!(parse("://h/").is_err());
    }
}
