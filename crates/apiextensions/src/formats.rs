//! String formats, as kube-openapi's `pkg/validation/strfmt` default registry
//! (with its bundled govalidator) checks them, and the set of formats
//! apiextensions-apiserver keeps in CRD schemas (`pkg/apiserver/validation/formats.go`).

use std::sync::OnceLock;

use regex::Regex;

/// The formats upstream (1.33) validates in CRD schemas; any other format is
/// dropped before validation (`StripUnsupportedFormatsPostProcess`). Names are
/// normalized as go-openapi does (dashes removed).
const SUPPORTED: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// go-openapi's format name normalization.
pub fn normalize(name: &str) -> String {
    name.replace('-', "")
}

/// Whether a CRD schema keeps this format (1.33's supported set).
pub fn is_supported(format: &str) -> bool {
    SUPPORTED.contains(&normalize(format).as_str())
}

/// Whether strfmt's default registry knows this format (the format
/// validator applies only then).
pub fn is_known(format: &str) -> bool {
    // The 1.33 registry holds exactly the supported set.
    is_supported(format)
}

/// Validates `data` against a known format; unknown formats pass.
pub fn validates(format: &str, data: &str) -> bool {
    match normalize(format).as_str() {
        "bsonobjectid" => data.len() == 24 && data.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_request_uri(data),
        "email" => is_email(data),
        "hostname" => is_hostname(data),
        "ipv4" => parse_ip_sloppy(data).is_some() && data.contains('.'),
        "ipv6" => parse_ip_strict(data).is_some() && data.contains(':'),
        "cidr" => is_cidr(data),
        "mac" => is_mac(data),
        "uuid" => re(&UUID, r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
            .is_match(data),
        "uuid3" => re(
            &UUID3,
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
        )
        .is_match(data),
        "uuid4" => re(
            &UUID4,
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
        )
        .is_match(data),
        "uuid5" => re(
            &UUID5,
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
        )
        .is_match(data),
        "isbn" => is_isbn(data, 10) || is_isbn(data, 13),
        "isbn10" => is_isbn(data, 10),
        "isbn13" => is_isbn(data, 13),
        "creditcard" => is_credit_card(data),
        "ssn" => data.len() == 11 && re(&SSN, r"^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$").is_match(data),
        "hexcolor" => re(&HEXCOLOR, r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$").is_match(data),
        "rgbcolor" => re(
            &RGBCOLOR,
            r"^rgb\(\s*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])\s*,\s*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])\s*,\s*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])\s*\)$",
        )
        .is_match(data),
        "byte" => re(
            &BASE64,
            r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$",
        )
        .is_match(data),
        "password" => true,
        "date" => is_date(data),
        "datetime" => is_date_time(data),
        "duration" => is_duration(data),
        _ => true,
    }
}

static UUID: OnceLock<Option<Regex>> = OnceLock::new();
static UUID3: OnceLock<Option<Regex>> = OnceLock::new();
static UUID4: OnceLock<Option<Regex>> = OnceLock::new();
static UUID5: OnceLock<Option<Regex>> = OnceLock::new();
static SSN: OnceLock<Option<Regex>> = OnceLock::new();
static HEXCOLOR: OnceLock<Option<Regex>> = OnceLock::new();
static RGBCOLOR: OnceLock<Option<Regex>> = OnceLock::new();
static BASE64: OnceLock<Option<Regex>> = OnceLock::new();
static HOSTNAME: OnceLock<Option<Regex>> = OnceLock::new();
static DATETIME: OnceLock<Option<Regex>> = OnceLock::new();
static DURATION: OnceLock<Option<Regex>> = OnceLock::new();

/// A lazily compiled constant regex; a pattern that failed to compile (never
/// expected) matches nothing.
struct Re<'a>(Option<&'a Regex>);

impl Re<'_> {
    fn is_match(&self, s: &str) -> bool {
        self.0.is_some_and(|r| r.is_match(s))
    }
}

fn re<'a>(cell: &'a OnceLock<Option<Regex>>, pattern: &str) -> Re<'a> {
    Re(cell.get_or_init(|| Regex::new(pattern).ok()).as_ref())
}

fn re_raw<'a>(cell: &'a OnceLock<Option<Regex>>, pattern: &str) -> Option<&'a Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

/// strfmt's `IsHostname`.
fn is_hostname(s: &str) -> bool {
    let ok = re(
        &HOSTNAME,
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9\-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
    .is_match(s);
    ok && s.len() <= 255 && s.split('.').all(|p| p.len() <= 63)
}

/// Go's `time.Parse("2006-01-02", s)`.
pub fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = s.get(r)?;
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let (Some(y), Some(m), Some(d)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    if !(1..=12).contains(&m) || d == 0 {
        return false;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    d <= days
}

/// strfmt's `IsDateTime` (split on `t`, date, then a time regex).
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let Some(rx) = re_raw(
        &DATETIME,
        r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$",
    ) else {
        return false;
    };
    let Some(m) = rx.captures(parts[1]) else {
        return false;
    };
    let g = |i: usize| m.get(i).map(|x| x.as_str()).unwrap_or("");
    g(1) <= "23" && g(2) <= "59" && g(3) <= "59"
}

/// Go's `time.ParseDuration`.
fn go_parse_duration(s: &str) -> bool {
    let mut rest = s;
    if let Some(r) = rest.strip_prefix(['-', '+']) {
        rest = r;
    }
    if rest == "0" {
        return true;
    }
    if rest.is_empty() {
        return false;
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let b = rest.as_bytes();
        if !(b[0] == b'.' || b[0].is_ascii_digit()) {
            return false;
        }
        let int_len = b.iter().take_while(|c| c.is_ascii_digit()).count();
        let mut i = int_len;
        let mut frac_len = 0;
        if i < b.len() && b[i] == b'.' {
            i += 1;
            frac_len = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            i += frac_len;
        }
        if int_len == 0 && frac_len == 0 {
            return false;
        }
        let number: f64 = rest[..i].parse().unwrap_or(0.0);
        if int_len > 0 && rest[..int_len].parse::<u64>().is_err() {
            return false;
        }
        let unit_len = rest[i..]
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map(|(j, _)| j)
            .unwrap_or(rest.len() - i);
        let unit = &rest[i..i + unit_len];
        let ns: f64 = match unit {
            "ns" => 1.0,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return false,
        };
        total += number * ns;
        if total > i64::MAX as f64 {
            return false;
        }
        rest = &rest[i + unit_len..];
    }
    true
}

/// strfmt's `ParseDuration`: Go durations, or any `<digits> <unit>` run.
fn is_duration(s: &str) -> bool {
    if go_parse_duration(s) {
        return true;
    }
    let Some(rx) = re_raw(&DURATION, "(([0-9]+)\\s*([A-Za-z\u{b5}]+))") else {
        return false;
    };
    const UNITS: &[&[&str]] = &[
        &["ns", "nano"],
        &["us", "\u{b5}s", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    let mut ok = false;
    for m in rx.captures_iter(s) {
        let factor = m.get(2).map(|x| x.as_str()).unwrap_or("");
        if factor.parse::<i64>().is_err() {
            return false;
        }
        let unit = m
            .get(3)
            .map(|x| x.as_str())
            .unwrap_or("")
            .trim()
            .to_lowercase();
        for variants in UNITS {
            let last = variants.len() - 1;
            for (i, v) in variants.iter().enumerate() {
                if (i == last && unit.starts_with(v)) || v.to_lowercase() == unit {
                    ok = true;
                }
            }
        }
    }
    ok
}

/// IPv4 as the pre-1.17 `net.ParseIP` (`netutils.ParseIPSloppy`) reads it:
/// leading zeros allowed.
fn parse_ipv4_sloppy(s: &str) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let digits = p.trim_start_matches('0');
        if digits.len() > 3 {
            return None;
        }
        let n: u32 = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        if n > 255 {
            return None;
        }
        out[i] = n as u8;
    }
    Some(out)
}

#[derive(Clone, Copy)]
enum Ip {
    V4,
    V6,
}

fn parse_ipv6(s: &str, sloppy: bool) -> Option<Ip> {
    if s.parse::<std::net::Ipv6Addr>().is_ok() {
        return Some(Ip::V6);
    }
    if sloppy {
        // An embedded IPv4 tail with leading zeros.
        let (head, tail) = s.rsplit_once(':')?;
        if tail.contains('.') {
            let v4 = parse_ipv4_sloppy(tail)?;
            let normalized = format!("{head}:{}.{}.{}.{}", v4[0], v4[1], v4[2], v4[3]);
            if normalized.parse::<std::net::Ipv6Addr>().is_ok() {
                return Some(Ip::V6);
            }
        }
    }
    None
}

fn parse_ip_sloppy(s: &str) -> Option<Ip> {
    if s.contains(':') {
        parse_ipv6(s, true)
    } else {
        parse_ipv4_sloppy(s).map(|_| Ip::V4)
    }
}

/// Go's `net.ParseIP` (1.17+: no leading zeros in IPv4).
fn parse_ip_strict(s: &str) -> Option<Ip> {
    if s.contains(':') {
        parse_ipv6(s, false)
    } else {
        s.parse::<std::net::Ipv4Addr>().ok().map(|_| Ip::V4)
    }
}

/// `netutils.ParseCIDRSloppy`.
fn is_cidr(s: &str) -> bool {
    let Some((addr, mask)) = s.split_once('/') else {
        return false;
    };
    let Some(ip) = parse_ip_sloppy(addr) else {
        return false;
    };
    let bits = match ip {
        Ip::V4 => 32,
        Ip::V6 => 128,
    };
    if mask.is_empty() || !mask.bytes().all(|c| c.is_ascii_digit()) {
        return false;
    }
    let digits = mask.trim_start_matches('0');
    if digits.len() > 3 {
        return false;
    }
    let n: u32 = if digits.is_empty() {
        0
    } else {
        digits.parse().unwrap_or(u32::MAX)
    };
    n <= bits
}

/// Go's `net.ParseMAC`.
fn is_mac(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 14 {
        return false;
    }
    let hex = |x: &[u8]| x.iter().all(|c| c.is_ascii_hexdigit());
    if b[2] == b':' || b[2] == b'-' {
        if !(b.len() + 1).is_multiple_of(3) {
            return false;
        }
        let n = (b.len() + 1) / 3;
        if n != 6 && n != 8 && n != 20 {
            return false;
        }
        let sep = b[2];
        for i in 0..n {
            let x = i * 3;
            if !hex(&b[x..x + 2]) {
                return false;
            }
            if i + 1 < n && b[x + 2] != sep {
                return false;
            }
        }
        true
    } else if b[4] == b'.' {
        if !(b.len() + 1).is_multiple_of(5) {
            return false;
        }
        let n = 2 * (b.len() + 1) / 5;
        if n != 6 && n != 8 && n != 20 {
            return false;
        }
        for i in 0..n / 2 {
            let x = i * 5;
            if !hex(&b[x..x + 4]) {
                return false;
            }
            if i + 1 < n / 2 && b[x + 4] != b'.' {
                return false;
            }
        }
        true
    } else {
        false
    }
}

/// govalidator's `IsISBN`.
fn is_isbn(s: &str, version: u32) -> bool {
    let sanitized: Vec<u8> = s
        .bytes()
        .filter(|c| !(c.is_ascii_whitespace() || *c == b'-'))
        .collect();
    // Go's `\s` also strips \v; is_ascii_whitespace strips \x0c but not \v.
    let sanitized: Vec<u8> = sanitized.into_iter().filter(|c| *c != 0x0b).collect();
    let digit = |c: u8| (c - b'0') as u32;
    match version {
        10 => {
            if sanitized.len() != 10
                || !sanitized[..9].iter().all(u8::is_ascii_digit)
                || !(sanitized[9].is_ascii_digit() || sanitized[9] == b'X')
            {
                return false;
            }
            let mut sum: u32 = (0..9).map(|i| (i as u32 + 1) * digit(sanitized[i])).sum();
            sum += if sanitized[9] == b'X' {
                100
            } else {
                10 * digit(sanitized[9])
            };
            sum.is_multiple_of(11)
        }
        _ => {
            if sanitized.len() != 13 || !sanitized.iter().all(u8::is_ascii_digit) {
                return false;
            }
            let factor = [1, 3];
            let sum: u32 = (0..12).map(|i| factor[i % 2] * digit(sanitized[i])).sum();
            digit(sanitized[12]) == (10 - (sum % 10)) % 10
        }
    }
}

static CREDITCARD: OnceLock<Option<Regex>> = OnceLock::new();

/// govalidator's `IsCreditCard` (pattern, then Luhn).
fn is_credit_card(s: &str) -> bool {
    let sanitized: String = s.chars().filter(char::is_ascii_digit).collect();
    if !re(
        &CREDITCARD,
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11})$",
    )
    .is_match(&sanitized)
    {
        return false;
    }
    let mut sum = 0u32;
    let mut double = false;
    for c in sanitized.bytes().rev() {
        let mut d = (c - b'0') as u32;
        if double {
            d *= 2;
            sum += if d >= 10 { d % 10 + 1 } else { d };
        } else {
            sum += d;
        }
        double = !double;
    }
    sum.is_multiple_of(10)
}

/// Go's `net/mail.ParseAddress`, for the common shapes: `local@domain` or
/// `Name <local@domain>`.
fn is_email(s: &str) -> bool {
    let s = s.trim_matches(|c: char| c == ' ' || c == '\t');
    let addr = if let Some(stripped) = s.strip_suffix('>') {
        match stripped.rfind('<') {
            Some(i) => &stripped[i + 1..],
            None => return false,
        }
    } else {
        s
    };
    let Some(at) = addr.rfind('@') else {
        return false;
    };
    let (local, domain) = (&addr[..at], &addr[at + 1..]);
    let atext = |c: char| c.is_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || !c.is_ascii();
    let dot_atom =
        |x: &str| !x.is_empty() && x.split('.').all(|p| !p.is_empty() && p.chars().all(atext));
    let local_ok = if local.len() >= 2 && local.starts_with('"') && local.ends_with('"') {
        true
    } else {
        dot_atom(local)
    };
    let domain_ok = if domain.starts_with('[') && domain.ends_with(']') {
        domain.len() > 2
    } else {
        dot_atom(domain)
    };
    local_ok && domain_ok
}

/// Go's `url.ParseRequestURI(s) == nil`.
fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    if s == "*" {
        return true;
    }
    // Scheme.
    let mut rest = s;
    let mut has_scheme = false;
    for (i, c) in s.char_indices() {
        if c.is_ascii_alphabetic() {
            continue;
        }
        if c.is_ascii_digit() || c == '+' || c == '-' || c == '.' {
            if i == 0 {
                break;
            }
            continue;
        }
        if c == ':' {
            if i == 0 {
                return false; // missing protocol scheme
            }
            has_scheme = true;
            rest = &s[i + 1..];
        }
        break;
    }
    // Fragment is split off first by url.Parse; it must unescape.
    let (rest, frag) = match rest.split_once('#') {
        Some((a, b)) => (a, Some(b)),
        None => (rest, None),
    };
    if frag.is_some_and(|f| !valid_escapes(f)) {
        return false;
    }
    let (rest, _query) = match rest.split_once('?') {
        Some((a, b)) => (a, Some(b)),
        None => (rest, None),
    };
    if !rest.starts_with('/') {
        // Opaque with a scheme; an error for a request without one.
        return has_scheme;
    }
    let mut path = rest;
    if has_scheme && let Some(after) = rest.strip_prefix("//") {
        let end = after.find('/').unwrap_or(after.len());
        let authority = &after[..end];
        path = &after[end..];
        let host = match authority.rfind('@') {
            Some(i) => {
                let userinfo = &authority[..i];
                if !userinfo.chars().all(|c| {
                    c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c) || !c.is_ascii()
                }) {
                    return false;
                }
                &authority[i + 1..]
            }
            None => authority,
        };
        if !valid_host(host) {
            return false;
        }
    }
    valid_escapes(path)
}

fn valid_escapes(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if i + 2 >= b.len() || !b[i + 1].is_ascii_hexdigit() || !b[i + 2].is_ascii_hexdigit() {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

/// Go's `parseHost` + host unescaping rules.
fn valid_host(host: &str) -> bool {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let Some(i) = rest.find(']') else {
            return false;
        };
        let port = &rest[i + 1..];
        if !port.is_empty() && !port.starts_with(':') {
            return false;
        }
        (&rest[..i], port)
    } else if let Some(i) = host.rfind(':') {
        (&host[..i], &host[i..])
    } else {
        (host, "")
    };
    if let Some(p) = port.strip_prefix(':')
        && !p.bytes().all(|c| c.is_ascii_digit())
    {
        return false;
    }
    if !port.is_empty() && !port.starts_with(':') {
        return false;
    }
    if !valid_escapes(name) {
        return false;
    }
    name.chars().all(|c| {
        !c.is_ascii() || c.is_ascii_alphanumeric() || "-_.~!$&'()*+,;=:[]<>\"%".contains(c)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_table() {
        // Cases from kube-openapi strfmt/default_test.go and Go's net package.
        let cases: &[(&str, &str, bool)] = &[
            ("uuid", "a8098c1a-f86e-11da-bd1a-00112444be1e", true),
            ("uuid", "A8098C1AF86E11DABD1A00112444BE1E", true),
            ("uuid", "not-a-uuid", false),
            ("uuid4", "13cdee9a-3d25-4e6a-a5d5-8aa3b0e3b5ab", true),
            ("uuid4", "a8098c1a-f86e-11da-bd1a-00112444be1e", false),
            ("date", "2014-12-15", true),
            ("date", "2014-02-29", false),
            ("date", "2016-02-29", true),
            ("date", "2014-13-01", false),
            ("date-time", "2014-12-15T19:30:20.000Z", true),
            ("date-time", "2014-12-15T19:30:20+01:00", true),
            ("date-time", "2014-12-15T25:30:20Z", false),
            ("date-time", "2014-12-15", false),
            ("duration", "3 weeks", true),
            ("duration", "1h30m", true),
            ("duration", "0", true),
            ("duration", "-1.5h", true),
            ("duration", "abc", false),
            ("ipv4", "192.168.0.1", true),
            ("ipv4", "192.168.000.001", true),
            ("ipv4", "256.0.0.1", false),
            ("ipv4", "::1", false),
            ("ipv6", "::1", true),
            ("ipv6", "fe80::1:2", true),
            ("ipv6", "1.2.3.4", false),
            ("cidr", "10.0.0.0/8", true),
            ("cidr", "10.0.0.0/33", false),
            ("cidr", "fd00::/64", true),
            ("cidr", "10.0.0.0", false),
            ("mac", "01:23:45:67:89:ab", true),
            ("mac", "01-23-45-67-89-ab", true),
            ("mac", "0123.4567.89ab", true),
            ("mac", "01:23:45:67:89", false),
            ("hostname", "www.example.com", true),
            ("hostname", "localhost", true),
            ("hostname", "-bad", false),
            ("hostname", "a_b.com", false),
            ("email", "a@b.com", true),
            ("email", "John <john@example.com>", true),
            ("email", "not-an-email", false),
            ("uri", "http://example.com/path?q=1", true),
            ("uri", "/relative/path", true),
            ("uri", "mailto:x@y", true),
            ("uri", "relative", false),
            ("uri", "", false),
            ("uri", "http://host:port/", false),
            ("byte", "aGVsbG8=", true),
            ("byte", "aGVsbG8", false),
            ("byte", "", false),
            ("isbn10", "0321751043", true),
            ("isbn10", "0321751044", false),
            ("isbn13", "978-0321751041", true),
            ("isbn", "978-0321751041", true),
            ("creditcard", "4111 1111 1111 1111", true),
            ("creditcard", "4111 1111 1111 1112", false),
            ("ssn", "111-11-1111", true),
            ("ssn", "111111111", false),
            ("hexcolor", "#FFF", true),
            ("hexcolor", "#FFFF", false),
            ("rgbcolor", "rgb(255,255,255)", true),
            ("rgbcolor", "rgb(256,255,255)", false),
            ("bsonobjectid", "507f1f77bcf86cd799439011", true),
            ("bsonobjectid", "507f1f77bcf86cd79943901", false),
            ("password", "anything", true),
        ];
        for (format, data, want) in cases {
            assert_eq!(validates(format, data), *want, "{format} {data:?}");
        }
    }

    #[test]
    fn supported_set() {
        assert!(is_supported("date-time"));
        assert!(is_supported("uuid"));
        assert!(!is_supported("int32"));
        assert!(!is_supported("int-or-string"));
        assert!(!is_supported("k8s-short-name"));
    }
}
