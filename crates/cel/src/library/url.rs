//! `k8s.io/apiserver/pkg/cel/library/urls.go`: `url()`, `isURL()` and the URL
//! accessors, over Go's `url.ParseRequestURI` rules (an absolute URI, or an
//! absolute path; no fragment).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::EvalError;
use crate::functions::CallResult;
use crate::value::{EvalValue, Key};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub raw: String,
    pub scheme: String,
    /// `host[:port]` as written (brackets kept for IPv6).
    pub host: String,
    pub path: String,
    pub query: String,
}

impl Url {
    /// Go's `url.ParseRequestURI`, as far as rules observe it.
    pub fn parse(s: &str) -> Option<Url> {
        if s.is_empty() || s.chars().any(|c| c.is_ascii_control() || c == ' ') {
            return None;
        }
        let (rest, query) = match s.split_once('?') {
            Some((r, q)) => (r, q.to_string()),
            None => (s, String::new()),
        };
        if rest.starts_with('/') {
            return Some(Url {
                raw: s.into(),
                scheme: String::new(),
                host: String::new(),
                path: rest.into(),
                query,
            });
        }
        let (scheme, after) = rest.split_once(':')?;
        let mut chars = scheme.chars();
        if !chars.next()?.is_ascii_alphabetic()
            || !chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        {
            return None;
        }
        let (host, path) = match after.strip_prefix("//") {
            Some(a) => match a.find('/') {
                Some(i) => (a[..i].to_string(), a[i..].to_string()),
                None => (a.to_string(), String::new()),
            },
            // An opaque URI (`mailto:x`) must still not be relative.
            None if after.is_empty() => return None,
            None => (String::new(), after.to_string()),
        };
        // Drop userinfo from the host.
        let host = host
            .rsplit_once('@')
            .map_or(host.clone(), |(_, h)| h.to_string());
        if host.starts_with('[') && !host.contains(']') {
            return None;
        }
        Some(Url {
            raw: s.into(),
            scheme: scheme.into(),
            host,
            path,
            query,
        })
    }

    fn hostname(&self) -> &str {
        if let Some(rest) = self.host.strip_prefix('[') {
            return rest.split_once(']').map_or(rest, |(h, _)| h);
        }
        self.host.rsplit_once(':').map_or(&self.host, |(h, _)| h)
    }

    fn port(&self) -> &str {
        if self.host.starts_with('[') {
            return self.host.split_once("]:").map_or("", |(_, p)| p);
        }
        self.host.rsplit_once(':').map_or("", |(_, p)| p)
    }
}

fn query_map(q: &str) -> EvalValue {
    let mut m: BTreeMap<String, Vec<EvalValue>> = BTreeMap::new();
    for pair in q.split(['&', ';']).filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        m.entry(unescape(k))
            .or_default()
            .push(EvalValue::from(unescape(v)));
    }
    EvalValue::map(
        m.into_iter()
            .map(|(k, v)| (Key::String(Arc::from(k.as_str())), EvalValue::list(v)))
            .collect(),
    )
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn call(
    name: &str,
    target: Option<&EvalValue>,
    args: &[EvalValue],
) -> Option<CallResult> {
    use EvalValue as V;
    match (name, target, args) {
        ("url", None, [V::String(s)]) => {
            return Some(
                Url::parse(s)
                    .map(|u| V::Url(Arc::new(u)))
                    .ok_or_else(|| EvalError::Other(format!("URL parse error during conversion from string: parse \"{s}\": invalid URI for request"))),
            );
        }
        ("isURL", None, [V::String(s)]) => return Some(Ok(V::Bool(Url::parse(s).is_some()))),
        _ => {}
    }
    let Some(V::Url(u)) = target else {
        return None;
    };
    let r = match (name, args) {
        ("getScheme", []) => V::from(u.scheme.as_str()),
        ("getHost", []) => V::from(u.host.as_str()),
        ("getHostname", []) => V::from(u.hostname()),
        ("getPort", []) => V::from(u.port()),
        ("getEscapedPath", []) => V::from(u.path.as_str()),
        ("getQuery", []) => query_map(&u.query),
        _ => return None,
    };
    Some(Ok(r))
}
