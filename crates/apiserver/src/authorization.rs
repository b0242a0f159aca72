//! Authorization as kube-apiserver's union of authorizers
//! (`--authorization-mode`, default `Node,RBAC`): each mode in turn may allow or deny; no opinion from
//! all of them is a denial. Also the request attributes every check is made
//! of (upstream's RequestInfo) and impersonation (`Impersonate-*` headers,
//! each checked with the `impersonate` verb).

use std::sync::{Arc, RwLock};

use berth_api::user::{self, UserInfo};
use berth_authz::{Attributes, Decision, PolicyIndex};
use http::{HeaderMap, Method};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};

use crate::objects;
use crate::request::{ResourcePath, Target};
use crate::rest::Rest;
use crate::status::ApiError;

/// One `--authorization-mode` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    AlwaysAllow,
    AlwaysDeny,
    Node,
    Rbac,
}

/// Parses `--authorization-mode` (comma-separated, upstream's names).
pub fn parse_modes(s: &str) -> Result<Vec<Mode>, String> {
    let mut out = Vec::new();
    for m in s.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let mode = match m {
            "AlwaysAllow" => Mode::AlwaysAllow,
            "AlwaysDeny" => Mode::AlwaysDeny,
            "RBAC" => Mode::Rbac,
            "Node" => Mode::Node,
            "ABAC" | "Webhook" => {
                return Err(format!(
                    "authorization mode {m:?} is not implemented by Berth yet (use Node, RBAC, AlwaysAllow or AlwaysDeny)"
                ));
            }
            other => {
                return Err(format!(
                    "authorization-mode {other:?} is not a valid mode (valid: AlwaysAllow, AlwaysDeny, Node, RBAC)"
                ));
            }
        };
        if out.contains(&mode) {
            return Err(format!(
                "authorization-mode {m:?} has mode specified more than once"
            ));
        }
        out.push(mode);
    }
    if out.is_empty() {
        return Err("at least one authorization-mode must be passed".into());
    }
    Ok(out)
}

/// The four RBAC resources, as the watch cache names them.
const RBAC_RESOURCES: [&str; 4] = [
    "clusterroles.rbac.authorization.k8s.io",
    "roles.rbac.authorization.k8s.io",
    "clusterrolebindings.rbac.authorization.k8s.io",
    "rolebindings.rbac.authorization.k8s.io",
];

pub struct Authorizer {
    modes: Vec<Mode>,
    /// The RBAC index and the revisions of the RBAC resources it was built at:
    /// rebuilt (from the watch cache) only when one of them moved.
    rbac: RwLock<Option<([i64; 4], Arc<PolicyIndex>)>>,
}

impl Authorizer {
    pub fn new(modes: Vec<Mode>) -> Self {
        Authorizer {
            modes,
            rbac: RwLock::new(None),
        }
    }

    pub fn modes(&self) -> &[Mode] {
        &self.modes
    }

    /// The union's decision and the reason of the authorizer that decided;
    /// when none did, the reasons of all of them (upstream's union joins the
    /// non-empty ones with newlines: RBAC's names missing roles).
    pub fn authorize(&self, rest: &Rest, a: &Attributes) -> (Decision, String) {
        // Upstream's privileged-group authorizer comes before every mode.
        if a.user.in_group(user::MASTERS) {
            return (Decision::Allow, String::new());
        }
        let mut reasons = Vec::new();
        for mode in &self.modes {
            let (d, why) = match mode {
                Mode::AlwaysAllow => (Decision::Allow, String::new()),
                Mode::AlwaysDeny => (Decision::Deny, "Everything is forbidden.".into()),
                Mode::Node => crate::node_authorizer::authorize(rest, a),
                Mode::Rbac => self.index(rest).authorize(a),
            };
            if d != Decision::NoOpinion {
                return (d, why);
            }
            if !why.is_empty() {
                reasons.push(why);
            }
        }
        (Decision::NoOpinion, reasons.join("\n"))
    }

    pub fn allowed(&self, rest: &Rest, a: &Attributes) -> bool {
        self.authorize(rest, a).0 == Decision::Allow
    }

    /// The RBAC policy as the watch cache has it now.
    pub fn index(&self, rest: &Rest) -> Arc<PolicyIndex> {
        let revs = RBAC_RESOURCES.map(|r| rest.cache.resource_revision(r));
        if let Ok(g) = self.rbac.read()
            && let Some((at, idx)) = g.as_ref()
            && *at == revs
        {
            return idx.clone();
        }
        let idx = Arc::new(PolicyIndex::new(
            decode_all::<ClusterRole>(rest, "clusterroles"),
            decode_all::<Role>(rest, "roles"),
            decode_all::<ClusterRoleBinding>(rest, "clusterrolebindings"),
            decode_all::<RoleBinding>(rest, "rolebindings"),
        ));
        if let Ok(mut g) = self.rbac.write() {
            *g = Some((revs, idx.clone()));
        }
        idx
    }

    /// Upstream's 403 for a denied request.
    pub fn forbidden(a: &Attributes, reason: &str) -> ApiError {
        let mut e = ApiError::forbidden(berth_authz::forbidden_message(a, reason));
        if a.resource_request {
            let mut d = serde_json::json!({});
            if !a.name.is_empty() {
                d["name"] = serde_json::json!(a.name);
            }
            if !a.api_group.is_empty() {
                d["group"] = serde_json::json!(a.api_group);
            }
            d["kind"] = serde_json::json!(a.resource);
            e.details = Some(d);
        } else {
            e.details = Some(serde_json::json!({}));
        }
        e
    }

    /// Checks the request (403 unless allowed).
    pub fn check(&self, rest: &Rest, a: &Attributes) -> Result<(), ApiError> {
        match self.authorize(rest, a) {
            (Decision::Allow, _) => Ok(()),
            (_, why) => Err(Self::forbidden(a, &why)),
        }
    }
}

fn decode_all<T: serde::de::DeserializeOwned>(rest: &Rest, plural: &str) -> Vec<T> {
    let Some(rt) = berth_api::registry::lookup("rbac.authorization.k8s.io", "v1", plural) else {
        return Vec::new();
    };
    let (items, _) = rest.cache.snapshot(&objects::prefix(rt));
    items
        .iter()
        .filter_map(|(_, s)| serde_json::from_slice(&s.bytes).ok())
        .collect()
}

/// The verb of a resource request, as upstream's RequestInfo names it.
pub fn resource_verb(method: &Method, rp: &ResourcePath, watch: bool) -> &'static str {
    match rp.subresource.as_deref() {
        // Upgraded streams need `create` whichever method opened them (upstream
        // checks `create` for WebSocket GETs too).
        Some("exec" | "attach" | "portforward") => return "create",
        Some("log") => return "get",
        _ => {}
    }
    match *method {
        Method::GET | Method::HEAD if watch => "watch",
        Method::GET | Method::HEAD if rp.name.is_some() => "get",
        Method::GET | Method::HEAD => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if rp.name.is_some() || rp.subresource.is_some() => "delete",
        Method::DELETE => "deletecollection",
        _ => "",
    }
}

/// The verb of a non-resource request: the method, lowercased.
fn path_verb(method: &Method) -> String {
    match *method {
        Method::HEAD => "get".into(),
        _ => method.as_str().to_ascii_lowercase(),
    }
}

/// The attributes of a request by `user`.
pub fn attributes(user: &UserInfo, method: &Method, path: &str, watch_param: bool) -> Attributes {
    let target = if path == "/api"
        || path.starts_with("/api/")
        || path == "/apis"
        || path.starts_with("/apis/")
    {
        crate::request::parse_path(path).ok()
    } else {
        None
    };
    match target {
        Some(Target::Resource(rp)) => {
            let watch = rp.legacy_watch || (watch_param && matches!(*method, Method::GET));
            Attributes {
                user: user.clone(),
                verb: resource_verb(method, &rp, watch).into(),
                namespace: rp.namespace.clone().unwrap_or_default(),
                api_group: rp.rt.group.into(),
                api_version: rp.rt.version.into(),
                resource: rp.rt.plural.into(),
                subresource: rp.subresource.clone().unwrap_or_default(),
                name: rp.name.clone().unwrap_or_default(),
                resource_request: true,
                path: path.into(),
            }
        }
        _ => Attributes {
            user: user.clone(),
            verb: path_verb(method),
            path: path.into(),
            ..Default::default()
        },
    }
}

/// An impersonation check: may `by` act as `name` of `resource`?
fn impersonate_attrs(
    by: &UserInfo,
    resource: &str,
    group: &str,
    namespace: &str,
    name: &str,
) -> Attributes {
    let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
    Attributes {
        user: by.clone(),
        verb: "impersonate".into(),
        namespace: namespace.into(),
        api_group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        name: name.into(),
        resource_request: true,
        ..Default::default()
    }
}

/// The user a request acts as: `user` itself, or the one its `Impersonate-*`
/// headers name when `user` may impersonate every part of it (403 otherwise,
/// naming the first part refused, as upstream).
pub fn impersonate(
    authz: &Authorizer,
    rest: &Rest,
    user: UserInfo,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect()
    };
    let as_user = values("impersonate-user").into_iter().next();
    let groups = values("impersonate-group");
    let uid = values("impersonate-uid").into_iter().next();
    let mut extra = std::collections::BTreeMap::<String, Vec<String>>::new();
    for (k, v) in headers {
        if let Some(key) = k.as_str().strip_prefix("impersonate-extra-")
            && let Ok(v) = v.to_str()
        {
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .into_owned();
            extra.entry(key).or_default().push(v.to_string());
        }
    }
    let Some(name) = as_user else {
        if groups.is_empty() && uid.is_none() && extra.is_empty() {
            return Ok(user);
        }
        return Err(ApiError::internal(
            "requested impersonation of groups, uid or extra without impersonating a user",
        ));
    };
    let mut checks = Vec::new();
    let sa = berth_authn::serviceaccount::parse_username(&name);
    match &sa {
        Some((ns, sa_name)) => {
            checks.push(impersonate_attrs(&user, "serviceaccounts", "", ns, sa_name))
        }
        None => checks.push(impersonate_attrs(&user, "users", "", "", &name)),
    }
    for g in &groups {
        checks.push(impersonate_attrs(&user, "groups", "", "", g));
    }
    if let Some(u) = &uid {
        checks.push(impersonate_attrs(
            &user,
            "uids",
            "authentication.k8s.io",
            "",
            u,
        ));
    }
    for (k, vs) in &extra {
        for v in vs {
            checks.push(impersonate_attrs(
                &user,
                &format!("userextras/{k}"),
                "authentication.k8s.io",
                "",
                v,
            ));
        }
    }
    for a in &checks {
        authz.check(rest, a)?;
    }
    let mut groups = groups;
    if let Some((ns, _)) = &sa
        && groups.is_empty()
    {
        groups = vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
        ];
    }
    let mut acting = UserInfo {
        name,
        uid: uid.unwrap_or_default(),
        groups,
        extra,
    };
    if acting.name == user::ANONYMOUS {
        if !acting.in_group(user::UNAUTHENTICATED) {
            acting.groups.push(user::UNAUTHENTICATED.into());
        }
    } else {
        acting = acting.with_authenticated_group();
    }
    Ok(acting)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_as_upstreams_flag() {
        let cases: &[(&str, Result<Vec<Mode>, &str>)] = &[
            ("RBAC", Ok(vec![Mode::Rbac])),
            ("AlwaysAllow", Ok(vec![Mode::AlwaysAllow])),
            ("RBAC,AlwaysDeny", Ok(vec![Mode::Rbac, Mode::AlwaysDeny])),
            ("Node,RBAC", Ok(vec![Mode::Node, Mode::Rbac])),
            (
                "RBAC,RBAC",
                Err("authorization-mode \"RBAC\" has mode specified more than once"),
            ),
            (
                "Bogus",
                Err(
                    "authorization-mode \"Bogus\" is not a valid mode (valid: AlwaysAllow, AlwaysDeny, Node, RBAC)",
                ),
            ),
            ("", Err("at least one authorization-mode must be passed")),
        ];
        for (s, want) in cases {
            assert_eq!(
                parse_modes(s).as_ref().map_err(String::as_str),
                want.as_ref().map_err(|e| *e),
                "{s}"
            );
        }
    }

    #[test]
    fn request_attributes_follow_request_info() {
        let u = UserInfo::new("jane", &[]);
        let cases = [
            (
                Method::GET,
                "/api/v1/namespaces/dev/pods",
                false,
                "list",
                "dev",
                "",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/dev/pods",
                true,
                "watch",
                "dev",
                "",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/watch/namespaces/dev/pods",
                false,
                "watch",
                "dev",
                "",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/dev/pods/web",
                false,
                "get",
                "dev",
                "",
                "pods",
                "",
                "web",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/dev/pods/web/log",
                false,
                "get",
                "dev",
                "",
                "pods",
                "log",
                "web",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/dev/pods/web/exec",
                false,
                "create",
                "dev",
                "",
                "pods",
                "exec",
                "web",
            ),
            (
                Method::POST,
                "/apis/apps/v1/namespaces/dev/deployments",
                false,
                "create",
                "dev",
                "apps",
                "deployments",
                "",
                "",
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/dev/deployments/d/scale",
                false,
                "patch",
                "dev",
                "apps",
                "deployments",
                "scale",
                "d",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/dev/pods",
                false,
                "deletecollection",
                "dev",
                "",
                "pods",
                "",
                "",
            ),
            (
                Method::DELETE,
                "/api/v1/nodes/n1",
                false,
                "delete",
                "",
                "",
                "nodes",
                "",
                "n1",
            ),
            (
                Method::GET,
                "/api/v1/pods",
                false,
                "list",
                "",
                "",
                "pods",
                "",
                "",
            ),
        ];
        for (m, path, watch, verb, ns, group, resource, sub, name) in cases {
            let a = attributes(&u, &m, path, watch);
            assert!(a.resource_request, "{path}");
            assert_eq!(
                (
                    a.verb.as_str(),
                    a.namespace.as_str(),
                    a.api_group.as_str(),
                    a.resource.as_str(),
                    a.subresource.as_str(),
                    a.name.as_str()
                ),
                (verb, ns, group, resource, sub, name),
                "{m} {path}"
            );
        }
        for (m, path, verb) in [
            (Method::GET, "/healthz", "get"),
            (Method::GET, "/apis", "get"),
            (Method::GET, "/api/v1", "get"),
            (Method::POST, "/logs", "post"),
            (Method::HEAD, "/version", "get"),
        ] {
            let a = attributes(&u, &m, path, false);
            assert!(!a.resource_request, "{path}");
            assert_eq!((a.verb.as_str(), a.path.as_str()), (verb, path));
        }
    }
}
