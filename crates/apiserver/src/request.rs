//! Parsing of resource URLs and their query parameters.

use std::collections::HashMap;

use berth_api::registry::{self, ResourceType};

use crate::status::{ApiError, ApiResult};

/// A request aimed at a resource: `/api/v1/namespaces/ns/pods/name/status`.
#[derive(Debug, Clone)]
pub struct ResourcePath {
    pub rt: &'static ResourceType,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// Legacy `/api/v1/watch/...` form.
    pub legacy_watch: bool,
}

/// What a URL under `/api` or `/apis` names.
#[derive(Debug)]
pub enum Target {
    /// `/api` or `/apis`.
    Root {
        legacy: bool,
    },
    /// `/apis/<group>`.
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`.
    GroupVersion {
        group: String,
        version: String,
    },
    Resource(ResourcePath),
}

/// Parses a path beginning with `/api` or `/apis`.
pub fn parse_path(path: &str) -> ApiResult<Target> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest): (&str, &str, &[&str]) = match segs.as_slice() {
        ["api"] => return Ok(Target::Root { legacy: true }),
        ["apis"] => return Ok(Target::Root { legacy: false }),
        ["apis", g] => return Ok(Target::Group(g.to_string())),
        ["api", v] => {
            return Ok(Target::GroupVersion {
                group: String::new(),
                version: v.to_string(),
            });
        }
        ["apis", g, v] => {
            return Ok(Target::GroupVersion {
                group: g.to_string(),
                version: v.to_string(),
            });
        }
        ["api", v, rest @ ..] => ("", v, rest),
        ["apis", g, v, rest @ ..] => (g, v, rest),
        _ => return Err(ApiError::path_not_found()),
    };
    let (legacy_watch, rest) = match rest {
        ["watch", r @ ..] => (true, r),
        r => (false, r),
    };
    let lookup = |plural: &str| {
        registry::lookup(group, version, plural).ok_or_else(ApiError::path_not_found)
    };
    let rp = match rest {
        // `/api/v1/namespaces/{ns}/{plural}[/{name}[/{sub}]]` when {plural} is namespaced.
        ["namespaces", ns, plural, tail @ ..]
            if registry::lookup(group, version, plural).is_some_and(|rt| rt.namespaced) =>
        {
            let rt = lookup(plural)?;
            match tail {
                [] => ResourcePath {
                    rt,
                    namespace: Some(ns.to_string()),
                    name: None,
                    subresource: None,
                    legacy_watch,
                },
                [name] => ResourcePath {
                    rt,
                    namespace: Some(ns.to_string()),
                    name: Some(name.to_string()),
                    subresource: None,
                    legacy_watch,
                },
                [name, sub, ..] => ResourcePath {
                    rt,
                    namespace: Some(ns.to_string()),
                    name: Some(name.to_string()),
                    subresource: Some(sub.to_string()),
                    legacy_watch,
                },
            }
        }
        [plural] => ResourcePath {
            rt: lookup(plural)?,
            namespace: None,
            name: None,
            subresource: None,
            legacy_watch,
        },
        [plural, name] => {
            let rt = lookup(plural)?;
            if rt.namespaced {
                return Err(ApiError::path_not_found());
            }
            ResourcePath {
                rt,
                namespace: None,
                name: Some(name.to_string()),
                subresource: None,
                legacy_watch,
            }
        }
        [plural, name, sub, ..] => {
            let rt = lookup(plural)?;
            if rt.namespaced {
                return Err(ApiError::path_not_found());
            }
            ResourcePath {
                rt,
                namespace: None,
                name: Some(name.to_string()),
                subresource: Some(sub.to_string()),
                legacy_watch,
            }
        }
        _ => return Err(ApiError::path_not_found()),
    };
    if let Some(sub) = &rp.subresource
        && !rp.rt.has_subresource(sub)
    {
        return Err(ApiError::path_not_found());
    }
    Ok(Target::Resource(rp))
}

/// Query parameters shared by the verbs.
#[derive(Debug, Default, Clone)]
pub struct Query {
    pub params: HashMap<String, String>,
    /// The client's User-Agent: names the field manager of writes without `fieldManager`.
    pub user_agent: String,
    /// Who makes the request (None: the API server itself), for admission.
    pub user: Option<berth_api::user::UserInfo>,
}

impl Query {
    pub fn parse(raw: Option<&str>) -> Self {
        let mut params = HashMap::new();
        if let Some(q) = raw {
            for pair in q.split('&').filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                let dec = |s: &str| {
                    percent_encoding::percent_decode_str(&s.replace('+', " "))
                        .decode_utf8_lossy()
                        .into_owned()
                };
                params.insert(dec(k), dec(v));
            }
        }
        Query {
            params,
            user_agent: String::new(),
            user: None,
        }
    }

    pub fn get(&self, k: &str) -> Option<&str> {
        self.params
            .get(k)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    pub fn flag(&self, k: &str) -> bool {
        matches!(
            self.params.get(k).map(String::as_str),
            Some("true") | Some("1") | Some("")
        ) && self.params.contains_key(k)
    }

    pub fn dry_run(&self) -> ApiResult<bool> {
        match self.get("dryRun") {
            None => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "Invalid dryRun parameter: unsupported dry run option: {other:?}"
            ))),
        }
    }

    pub fn int(&self, k: &str) -> ApiResult<Option<i64>> {
        match self.get(k) {
            None => Ok(None),
            Some(v) => v
                .parse::<i64>()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("invalid value for {k}: {v:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(p: &str) -> ResourcePath {
        match parse_path(p).unwrap() {
            Target::Resource(r) => r,
            other => panic!("{p}: {other:?}"),
        }
    }

    #[test]
    fn resource_paths() {
        let r = res("/api/v1/namespaces/default/pods/x/status");
        assert_eq!(
            (
                r.rt.plural,
                r.namespace.as_deref(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            ("pods", Some("default"), Some("x"), Some("status"))
        );
        let r = res("/api/v1/namespaces/default");
        assert_eq!(
            (r.rt.plural, r.name.as_deref()),
            ("namespaces", Some("default"))
        );
        let r = res("/api/v1/namespaces/kube-system/finalize");
        assert_eq!(
            (r.rt.plural, r.name.as_deref(), r.subresource.as_deref()),
            ("namespaces", Some("kube-system"), Some("finalize"))
        );
        let r = res("/api/v1/pods");
        assert_eq!((r.rt.plural, r.namespace.as_deref()), ("pods", None));
        let r = res("/apis/apps/v1/namespaces/a/deployments/d/scale");
        assert_eq!(
            (r.rt.kind, r.subresource.as_deref()),
            ("Deployment", Some("scale"))
        );
        let r = res("/api/v1/watch/namespaces/a/pods");
        assert!(r.legacy_watch);
        let r = res("/api/v1/nodes/n1");
        assert_eq!((r.rt.kind, r.name.as_deref()), ("Node", Some("n1")));
    }

    #[test]
    fn bad_paths_are_404() {
        for p in [
            "/api/v1/foos",
            "/apis/apps/v1/deployments/x",
            "/api/v1/namespaces/a/pods/x/nosuch",
            "/apis/nope/v1/things",
        ] {
            let err = parse_path(p).unwrap_err();
            assert_eq!(err.code, 404, "{p}");
        }
    }

    #[test]
    fn query_decoding() {
        let q = Query::parse(Some(
            "labelSelector=app%3Dweb&watch=true&limit=5&fieldSelector=a+b",
        ));
        assert_eq!(q.get("labelSelector"), Some("app=web"));
        assert!(q.flag("watch"));
        assert_eq!(q.int("limit").unwrap(), Some(5));
        assert_eq!(q.get("fieldSelector"), Some("a b"));
        assert!(!q.flag("force"));
    }
}
