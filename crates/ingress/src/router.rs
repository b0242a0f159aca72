//! Request routing as the Ingress specification defines it: hosts exact or
//! wildcard, paths Exact/Prefix/ImplementationSpecific, longest match first.
//!
//! Choices where the specification leaves room (as ingress-nginx makes them):
//! - `ImplementationSpecific` is matched as `Prefix` (ingress-nginx's default
//!   without regular expressions), and an empty path is `/`.
//! - A request is routed within the most specific host that has rules: an exact
//!   host, else a wildcard host, else the rules without a host. When no path of
//!   that host matches, the default backend answers (else 404); a request never
//!   falls through to a less specific host's paths.
//! - Rules of several Ingresses for one host are merged; when two name the same
//!   path and type, the one added first (the caller adds the oldest Ingress
//!   first) wins and the other is reported as a conflict.

use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PathType {
    Exact,
    Prefix,
    ImplementationSpecific,
}

impl PathType {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Exact" => Some(Self::Exact),
            "Prefix" => Some(Self::Prefix),
            "ImplementationSpecific" => Some(Self::ImplementationSpecific),
            _ => None,
        }
    }

    /// How the path is matched: ImplementationSpecific is Prefix here.
    fn effective(self) -> Self {
        match self {
            Self::ImplementationSpecific => Self::Prefix,
            t => t,
        }
    }
}

/// A host rule as written: exact (`foo.bar.com`), wildcard (`*.bar.com`) or any.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HostMatch {
    Any,
    Exact(String),
    /// The suffix after `*`, e.g. `.bar.com`.
    Wildcard(String),
}

impl HostMatch {
    pub fn parse(host: &str) -> Self {
        let host = normalize_host(host);
        if host.is_empty() {
            Self::Any
        } else if let Some(rest) = host.strip_prefix('*') {
            Self::Wildcard(rest.to_string())
        } else {
            Self::Exact(host)
        }
    }

    /// Whether `host` (normalised) is covered: a wildcard covers exactly one
    /// more DNS label (`*.foo.com` covers `bar.foo.com`, not `foo.com` nor
    /// `baz.bar.foo.com`).
    pub fn covers(&self, host: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Exact(h) => h == host,
            Self::Wildcard(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|label| !label.is_empty() && !label.contains('.')),
        }
    }
}

/// Lower case, without a port or a trailing dot.
pub fn normalize_host(host: &str) -> String {
    let host = host.trim();
    let without_port = if host.starts_with('[') {
        // An IPv6 literal: keep the brackets' content.
        host.split(']')
            .next()
            .unwrap_or(host)
            .trim_start_matches('[')
    } else {
        host.rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map(|(h, _)| h)
            .unwrap_or(host)
    };
    without_port.trim_end_matches('.').to_ascii_lowercase()
}

/// One path rule of one host.
#[derive(Clone, Debug)]
struct Route<B> {
    /// Exact: the path as written. Prefix: its elements (empty for `/`).
    path: String,
    elements: Vec<String>,
    path_type: PathType,
    backend: B,
}

impl<B> Route<B> {
    fn matches(&self, request: &str, request_elements: &[&str]) -> bool {
        match self.path_type.effective() {
            PathType::Exact => self.path == request,
            _ => {
                self.elements.len() <= request_elements.len()
                    && self
                        .elements
                        .iter()
                        .zip(request_elements)
                        .all(|(a, b)| a == b)
            }
        }
    }

    /// Longest path first; Exact over Prefix at equal length.
    fn precedence(&self) -> (usize, bool) {
        let len = match self.path_type.effective() {
            PathType::Exact => self.path.len(),
            // `/foo/` and `/foo` are one prefix.
            _ => self.path.trim_end_matches('/').len().max(1),
        };
        (len, self.path_type.effective() == PathType::Exact)
    }

    fn same_rule(&self, other: &Route<B>) -> bool {
        self.path_type.effective() == other.path_type.effective()
            && match self.path_type.effective() {
                PathType::Exact => self.path == other.path,
                _ => self.elements == other.elements,
            }
    }
}

fn elements(path: &str) -> Vec<&str> {
    path.split('/').filter(|e| !e.is_empty()).collect()
}

/// The rules of one host, most precedent first.
#[derive(Clone, Debug)]
struct HostRoutes<B> {
    routes: Vec<Route<B>>,
}

impl<B> Default for HostRoutes<B> {
    fn default() -> Self {
        Self { routes: Vec::new() }
    }
}

impl<B> HostRoutes<B> {
    fn find(&self, path: &str) -> Option<&B> {
        let els = elements(path);
        self.routes
            .iter()
            .find(|r| r.matches(path, &els))
            .map(|r| &r.backend)
    }
}

/// Why a rule was not added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub host: String,
    pub path: String,
    pub path_type: PathType,
}

/// The routing table of every served Ingress.
#[derive(Clone, Debug)]
pub struct Router<B> {
    exact: HashMap<String, HostRoutes<B>>,
    /// Keyed by the suffix after `*` (`.foo.com`).
    wildcard: HashMap<String, HostRoutes<B>>,
    any: Option<HostRoutes<B>>,
    default_backend: Option<B>,
}

impl<B> Default for Router<B> {
    fn default() -> Self {
        Self {
            exact: HashMap::new(),
            wildcard: HashMap::new(),
            any: None,
            default_backend: None,
        }
    }
}

/// What a request was routed to.
#[derive(Debug, PartialEq, Eq)]
pub enum Routed<'a, B> {
    Rule(&'a B),
    Default(&'a B),
    NotFound,
}

impl<B> Router<B> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a path rule for `host` ("" for any host). A rule with the same
    /// host, path and type as an earlier one is refused.
    pub fn add(
        &mut self,
        host: &str,
        path: &str,
        path_type: PathType,
        backend: B,
    ) -> Result<(), Conflict> {
        let path = if path.is_empty() { "/" } else { path };
        let route = Route {
            path: path.to_string(),
            elements: elements(path).into_iter().map(String::from).collect(),
            path_type,
            backend,
        };
        let bucket = match HostMatch::parse(host) {
            HostMatch::Any => self.any.get_or_insert_with(HostRoutes::default),
            HostMatch::Exact(h) => self.exact.entry(h).or_default(),
            HostMatch::Wildcard(s) => self.wildcard.entry(s).or_default(),
        };
        if bucket.routes.iter().any(|r| r.same_rule(&route)) {
            return Err(Conflict {
                host: host.to_string(),
                path: path.to_string(),
                path_type,
            });
        }
        // Stable: among equals, the earlier rule stays first.
        let at = bucket
            .routes
            .iter()
            .position(|r| r.precedence() < route.precedence())
            .unwrap_or(bucket.routes.len());
        bucket.routes.insert(at, route);
        Ok(())
    }

    /// Sets the default backend; false (and unchanged) if one is already set.
    pub fn set_default(&mut self, backend: B) -> bool {
        if self.default_backend.is_some() {
            return false;
        }
        self.default_backend = Some(backend);
        true
    }

    /// Routes a request by its Host header and path (without the query).
    pub fn route(&self, host: &str, path: &str) -> Routed<'_, B> {
        let host = normalize_host(host);
        let bucket = self.exact.get(&host).or_else(|| {
            // The one label a wildcard may stand for is the first.
            host.find('.')
                .and_then(|i| self.wildcard.get(&host[i..]))
                .filter(|_| !host.starts_with('.'))
        });
        let bucket = bucket.or(self.any.as_ref());
        let path = if path.is_empty() { "/" } else { path };
        match bucket.and_then(|b| b.find(path)) {
            Some(b) => Routed::Rule(b),
            None => match &self.default_backend {
                Some(b) => Routed::Default(b),
                None => Routed::NotFound,
            },
        }
    }

    /// Whether any rule or default backend exists.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty()
            && self.wildcard.is_empty()
            && self.any.is_none()
            && self.default_backend.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use PathType::{Exact, ImplementationSpecific, Prefix};

    /// Every row of the "Examples" table under "Path types" in upstream's Ingress
    /// documentation: (kind, paths, request paths, matches).
    #[test]
    fn upstream_path_matching_table() {
        type Row<'a> = (
            &'a [(&'a str, PathType)],
            &'a [&'a str],
            Option<(&'a str, PathType)>,
        );
        let rows: &[Row] = &[
            // Prefix / (all paths) → Yes
            (
                &[("/", Prefix)],
                &["/", "/foo", "/aaa/bbb", "/x/y/z/"],
                Some(("/", Prefix)),
            ),
            (&[("/foo", Exact)], &["/foo"], Some(("/foo", Exact))),
            (&[("/foo", Exact)], &["/bar"], None),
            (&[("/foo", Exact)], &["/foo/"], None),
            (&[("/foo/", Exact)], &["/foo"], None),
            (
                &[("/foo", Prefix)],
                &["/foo", "/foo/"],
                Some(("/foo", Prefix)),
            ),
            (
                &[("/foo/", Prefix)],
                &["/foo", "/foo/"],
                Some(("/foo/", Prefix)),
            ),
            (&[("/aaa/bb", Prefix)], &["/aaa/bbb"], None),
            (
                &[("/aaa/bbb", Prefix)],
                &["/aaa/bbb"],
                Some(("/aaa/bbb", Prefix)),
            ),
            // Yes, ignores trailing slash
            (
                &[("/aaa/bbb/", Prefix)],
                &["/aaa/bbb"],
                Some(("/aaa/bbb/", Prefix)),
            ),
            // Yes, matches trailing slash
            (
                &[("/aaa/bbb", Prefix)],
                &["/aaa/bbb/"],
                Some(("/aaa/bbb", Prefix)),
            ),
            // Yes, matches subpath
            (
                &[("/aaa/bbb", Prefix)],
                &["/aaa/bbb/ccc"],
                Some(("/aaa/bbb", Prefix)),
            ),
            // No, does not match string prefix
            (&[("/aaa/bbb", Prefix)], &["/aaa/bbbxyz"], None),
            // Yes, matches /aaa prefix
            (
                &[("/", Prefix), ("/aaa", Prefix)],
                &["/aaa/ccc"],
                Some(("/aaa", Prefix)),
            ),
            // Yes, matches /aaa/bbb prefix
            (
                &[("/", Prefix), ("/aaa", Prefix), ("/aaa/bbb", Prefix)],
                &["/aaa/bbb"],
                Some(("/aaa/bbb", Prefix)),
            ),
            // Yes, matches / prefix
            (
                &[("/", Prefix), ("/aaa", Prefix), ("/aaa/bbb", Prefix)],
                &["/ccc"],
                Some(("/", Prefix)),
            ),
            // No, uses default backend
            (&[("/aaa", Prefix)], &["/ccc"], None),
            // Mixed: Yes, prefers Exact
            (
                &[("/foo", Prefix), ("/foo", Exact)],
                &["/foo"],
                Some(("/foo", Exact)),
            ),
        ];
        for (paths, requests, want) in rows {
            let mut r: Router<(String, PathType)> = Router::new();
            for (p, t) in *paths {
                r.add("", p, *t, (p.to_string(), *t)).unwrap();
            }
            for req in *requests {
                let got = match r.route("example.com", req) {
                    Routed::Rule((p, t)) => Some((p.as_str(), *t)),
                    Routed::Default(_) | Routed::NotFound => None,
                };
                assert_eq!(got, *want, "paths {paths:?} request {req}");
            }
        }
    }

    #[test]
    fn exact_wins_whichever_order_it_was_added_in() {
        for order in [[Exact, Prefix], [Prefix, Exact]] {
            let mut r = Router::new();
            for t in order {
                r.add("", "/foo", t, t).unwrap();
            }
            assert_eq!(r.route("h", "/foo"), Routed::Rule(&Exact));
            assert_eq!(r.route("h", "/foo/x"), Routed::Rule(&Prefix));
        }
    }

    #[test]
    fn implementation_specific_is_prefix() {
        let mut r = Router::new();
        r.add("", "/app", ImplementationSpecific, "app").unwrap();
        r.add("", "", ImplementationSpecific, "root").unwrap();
        let cases = [
            ("/app", "app"),
            ("/app/", "app"),
            ("/app/x", "app"),
            ("/apple", "root"),
            ("/", "root"),
        ];
        for (path, want) in cases {
            assert_eq!(r.route("h", path), Routed::Rule(&want), "{path}");
        }
    }

    /// The hostname wildcard table of upstream's documentation, and exact hosts.
    #[test]
    fn hosts() {
        let cases = [
            ("*.foo.com", "bar.foo.com", true),
            ("*.foo.com", "baz.bar.foo.com", false),
            ("*.foo.com", "foo.com", false),
            ("*.foo.com", ".foo.com", false),
            ("foo.bar.com", "foo.bar.com", true),
            ("foo.bar.com", "FOO.bar.com:8080", true),
            ("foo.bar.com", "foo.bar.com.", true),
            ("foo.bar.com", "x.foo.bar.com", false),
        ];
        for (rule, host, want) in cases {
            assert_eq!(
                HostMatch::parse(rule).covers(&normalize_host(host)),
                want,
                "{rule} {host}"
            );
            let mut r = Router::new();
            r.add(rule, "/", Prefix, rule).unwrap();
            let got = matches!(r.route(host, "/"), Routed::Rule(_));
            assert_eq!(got, want, "router: {rule} {host}");
        }
    }

    #[test]
    fn most_specific_host_then_default_backend() {
        let mut r = Router::new();
        r.add("foo.bar.com", "/exact-host", Prefix, "exact")
            .unwrap();
        r.add("*.bar.com", "/", Prefix, "wildcard").unwrap();
        r.add("", "/", Prefix, "any").unwrap();
        assert!(r.set_default("default"));
        assert!(!r.set_default("second"));
        let cases = [
            ("foo.bar.com", "/exact-host/x", Routed::Rule(&"exact")),
            // The exact host has rules: no fall-through to the wildcard's.
            ("foo.bar.com", "/other", Routed::Default(&"default")),
            ("baz.bar.com", "/x", Routed::Rule(&"wildcard")),
            ("a.b.bar.com", "/x", Routed::Rule(&"any")),
            ("unknown.example", "/", Routed::Rule(&"any")),
        ];
        for (host, path, want) in cases {
            assert_eq!(r.route(host, path), want, "{host}{path}");
        }
        let mut only = Router::new();
        only.add("foo.com", "/", Prefix, "x").unwrap();
        assert_eq!(only.route("other.com", "/"), Routed::NotFound);
    }

    #[test]
    fn rules_of_several_ingresses_merge_and_the_first_wins_a_conflict() {
        let mut r = Router::new();
        r.add("foo.com", "/a", Prefix, "first").unwrap();
        r.add("foo.com", "/b", Prefix, "second").unwrap();
        let err = r.add("foo.com", "/a/", Prefix, "third").unwrap_err();
        assert_eq!(err.path, "/a/");
        r.add("foo.com", "/a", Exact, "exact").unwrap();
        assert_eq!(r.route("foo.com", "/a/x"), Routed::Rule(&"first"));
        assert_eq!(r.route("foo.com", "/b"), Routed::Rule(&"second"));
        assert_eq!(r.route("foo.com", "/a"), Routed::Rule(&"exact"));
    }

    #[test]
    fn normalizes_hosts() {
        let cases = [
            ("Foo.COM", "foo.com"),
            ("foo.com:80", "foo.com"),
            ("foo.com.", "foo.com"),
            ("[::1]:8080", "::1"),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(normalize_host(input), want);
        }
    }
}
