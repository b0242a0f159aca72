//! API aggregation (upstream's kube-aggregator, in the one API server):
//! APIServices (apiregistration.k8s.io/v1) name who serves a group-version.
//! - Local ones (no `spec.service`) stand for what this server serves itself:
//!   [`autoregister`] keeps one per built-in group-version (upstream's priority
//!   table) and per served custom group-version.
//! - Remote ones send every request for their group-version to the Service's
//!   endpoint over HTTPS ([`proxy`]), with the caller's identity in
//!   `X-Remote-User`/`X-Remote-Group`/`X-Remote-Extra-*` and the front proxy's
//!   client certificate (the `extension-apiserver-authentication` ConfigMap tells
//!   aggregated servers which CA signs it).
//! - [`available`] checks each one and keeps its `Available` condition; it also
//!   keeps the discovery document of each available remote group-version, which
//!   discovery merges (`/apis`, `/apis/<group>`, aggregated discovery).

pub mod autoregister;
pub mod available;
pub mod proxy;

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};

use serde_json::{Value, json};

use crate::objects;
use crate::rest::Rest;

/// Where APIServices are stored.
pub const PREFIX: &str = "/registry/apiservices.apiregistration.k8s.io/";

/// A remote APIService, as the router needs it.
#[derive(Debug, Clone)]
pub struct Remote {
    pub name: String,
    pub group: String,
    pub version: String,
    pub namespace: String,
    pub service: String,
    pub port: u16,
    pub ca_bundle: Option<Vec<u8>>,
    pub insecure: bool,
    pub available: bool,
    pub group_priority: i64,
    pub version_priority: i64,
}

fn remote_of(obj: &Value) -> Option<Remote> {
    let spec = obj.get("spec")?;
    let svc = spec.get("service").filter(|s| s.is_object())?;
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    Some(Remote {
        name: objects::name(obj).unwrap_or("").to_string(),
        group: s(spec, "group"),
        version: s(spec, "version"),
        namespace: s(svc, "namespace"),
        service: s(svc, "name"),
        port: svc
            .get("port")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(443),
        ca_bundle: spec
            .get("caBundle")
            .and_then(Value::as_str)
            .filter(|b| !b.is_empty())
            .and_then(|b| {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD.decode(b).ok()
            }),
        insecure: spec.get("insecureSkipTLSVerify").and_then(Value::as_bool) == Some(true),
        available: available_condition(obj)
            .is_some_and(|c| c.get("status").and_then(Value::as_str) == Some("True")),
        group_priority: spec
            .get("groupPriorityMinimum")
            .and_then(Value::as_i64)
            .unwrap_or(0),
        version_priority: spec
            .get("versionPriority")
            .and_then(Value::as_i64)
            .unwrap_or(0),
    })
}

fn available_condition(obj: &Value) -> Option<&Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Available"))
}

/// Every APIService in the cache.
pub fn all(rest: &Rest) -> Vec<Value> {
    let (items, _) = rest.cache.snapshot(PREFIX);
    items
        .iter()
        .filter_map(|(_, s)| objects::decode_at(&s.bytes, s.mod_revision).ok())
        .collect()
}

/// The remote APIServices, by the watch cache's latest copy; rebuilt only
/// when an APIService changes.
pub fn remotes(rest: &Rest) -> Vec<Remote> {
    static CACHED: Mutex<(i64, Vec<Remote>)> = Mutex::new((-1, Vec::new()));
    let rev = rest
        .cache
        .resource_revision("apiservices.apiregistration.k8s.io");
    let mut guard = CACHED.lock().unwrap_or_else(|p| p.into_inner());
    if guard.0 != rev {
        *guard = (rev, all(rest).iter().filter_map(remote_of).collect());
    }
    guard.1.clone()
}

/// The remote APIService serving `/apis/<group>/<version>[/…]`, if any (the
/// built-in and custom resources this server serves itself always win).
pub fn route(rest: &Rest, path: &str) -> Option<Remote> {
    let rest_of = path.strip_prefix("/apis/")?;
    let mut segs = rest_of.split('/');
    let group = segs.next()?;
    let version = segs.next()?;
    if group.is_empty() || version.is_empty() {
        return None;
    }
    if berth_api::registry::resources_in(group, version)
        .next()
        .is_some()
    {
        return None;
    }
    remotes(rest)
        .into_iter()
        .find(|r| r.group == group && r.version == version)
}

/// The APIResourceList each available remote group-version last answered
/// (kept by [`available`]; merged into aggregated discovery).
static DISCOVERY: RwLock<Option<HashMap<(String, String), Value>>> = RwLock::new(None);

pub(crate) fn set_discovery(group: &str, version: &str, doc: Option<Value>) {
    let mut guard = DISCOVERY.write().unwrap_or_else(|p| p.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    match doc {
        Some(d) => {
            map.insert((group.to_string(), version.to_string()), d);
        }
        None => {
            map.remove(&(group.to_string(), version.to_string()));
        }
    }
}

/// A remote group: its name and versions, each with its last discovery document.
pub type RemoteGroup = (String, Vec<(String, Option<Value>)>);

/// Each available remote group-version's OpenAPI v3 document URL (with its
/// hash), as its server's `/openapi/v3` index gave it.
static OPENAPI: RwLock<Option<HashMap<String, Value>>> = RwLock::new(None);

pub(crate) fn set_openapi(group: &str, version: &str, entry: Option<Value>) {
    let mut guard = OPENAPI.write().unwrap_or_else(|p| p.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    let key = format!("apis/{group}/{version}");
    match entry {
        Some(e) => {
            map.insert(key, e);
        }
        None => {
            map.remove(&key);
        }
    }
}

/// The `/openapi/v3` index with the remote group-versions' documents added, as
/// upstream's aggregator merges them (their documents are proxied).
pub fn openapi_index(local: bytes::Bytes) -> bytes::Bytes {
    let guard = OPENAPI.read().unwrap_or_else(|p| p.into_inner());
    let Some(remote) = guard.as_ref().filter(|m| !m.is_empty()) else {
        return local;
    };
    let Ok(mut index) = serde_json::from_slice::<Value>(&local) else {
        return local;
    };
    if let Some(paths) = index.get_mut("paths").and_then(Value::as_object_mut) {
        for (k, v) in remote {
            paths.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    serde_json::to_vec(&index)
        .map(bytes::Bytes::from)
        .unwrap_or(local)
}

/// What discovery lists for remote groups: (group, versions preferred first,
/// each with its last APIResourceList if the backend answered one).
pub fn discovery_groups(rest: &Rest) -> Vec<RemoteGroup> {
    let mut remotes = remotes(rest);
    // Upstream's order: higher group priority first, then by name; versions by
    // version priority, then by version name as Kubernetes sorts them.
    remotes.sort_by(|a, b| {
        b.group_priority
            .cmp(&a.group_priority)
            .then_with(|| a.group.cmp(&b.group))
            .then_with(|| b.version_priority.cmp(&a.version_priority))
            .then_with(|| berth_api::crd::compare_versions(&a.version, &b.version))
    });
    let docs = DISCOVERY.read().unwrap_or_else(|p| p.into_inner());
    let mut out: Vec<RemoteGroup> = Vec::new();
    for r in remotes {
        // A group this server serves itself keeps its own discovery.
        if berth_api::registry::groups()
            .iter()
            .any(|g| g.name == r.group)
        {
            continue;
        }
        let doc = docs
            .as_ref()
            .and_then(|m| m.get(&(r.group.clone(), r.version.clone())))
            .cloned();
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, vs)) => vs.push((r.version.clone(), doc)),
            None => out.push((r.group.clone(), vec![(r.version.clone(), doc)])),
        }
    }
    out
}

/// The `extension-apiserver-authentication` ConfigMap (kube-system): how
/// aggregated API servers authenticate this server's proxied requests.
pub fn authentication_config_map(client_ca: &str, request_header_ca: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
        "data": {
            "client-ca-file": client_ca,
            "requestheader-client-ca-file": request_header_ca,
            "requestheader-allowed-names": json!([crate::pki::PROXY_CLIENT_NAME]).to_string(),
            "requestheader-extra-headers-prefix": json!(["X-Remote-Extra-"]).to_string(),
            "requestheader-group-headers": json!(["X-Remote-Group"]).to_string(),
            "requestheader-username-headers": json!(["X-Remote-User"]).to_string(),
            "requestheader-uid-headers": json!(["X-Remote-Uid"]).to_string(),
        },
    })
}

/// Upstream's `ValidateAPIService` (the rules that apply to v1 objects).
pub fn validate(obj: &Value) -> Vec<berth_api::validation::FieldError> {
    use berth_api::validation::{FieldError, is_dns1035_label, is_dns1123_subdomain};
    let mut errs = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let s = |k: &str| {
        spec.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (group, version) = (s("group"), s("version"));
    let name = objects::name(obj).unwrap_or("");
    let required = format!("{version}.{group}");
    if name != required {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            format!("must be `spec.version+\".\"+spec.group`: \"{required}\""),
        ));
    }
    if group.is_empty() && version != "v1" {
        errs.push(FieldError::required(
            "spec.group",
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !group.is_empty() {
        for msg in is_dns1123_subdomain(&group) {
            errs.push(FieldError::invalid("spec.group", group.as_str(), msg));
        }
    }
    for msg in is_dns1035_label(&version) {
        errs.push(FieldError::invalid("spec.version", version.as_str(), msg));
    }
    let gp = spec
        .get("groupPriorityMinimum")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if !(1..=20000).contains(&gp) {
        errs.push(FieldError::invalid(
            "spec.groupPriorityMinimum",
            gp,
            "must be positive and less than 20000",
        ));
    }
    let vp = spec
        .get("versionPriority")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if !(1..=1000).contains(&vp) {
        errs.push(FieldError::invalid(
            "spec.versionPriority",
            vp,
            "must be positive and less than 1000",
        ));
    }
    if let Some(svc) = spec.get("service").filter(|v| v.is_object()) {
        for k in ["namespace", "name"] {
            if svc.get(k).and_then(Value::as_str).unwrap_or("").is_empty() {
                errs.push(FieldError::required(format!("spec.service.{k}"), ""));
            }
        }
        if let Some(p) = svc.get("port").and_then(Value::as_i64)
            && !(1..=65535).contains(&p)
        {
            errs.push(FieldError::invalid(
                "spec.service.port",
                p,
                "must be a valid port number between 1 and 65535, inclusive",
            ));
        }
        let insecure = spec.get("insecureSkipTLSVerify").and_then(Value::as_bool) == Some(true);
        let ca = spec
            .get("caBundle")
            .and_then(Value::as_str)
            .is_some_and(|c| !c.is_empty());
        if insecure && ca {
            errs.push(FieldError::invalid(
                "spec.insecureSkipTLSVerify",
                true,
                "may not be true if caBundle is present",
            ));
        }
    } else if spec
        .get("caBundle")
        .and_then(Value::as_str)
        .is_some_and(|c| !c.is_empty())
    {
        errs.push(FieldError::forbidden(
            "spec.caBundle",
            "local APIService may not have a caBundle",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_apiservices_are_read_from_their_spec() {
        let obj = json!({
            "metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "insecureSkipTLSVerify": true,
                     "service": {"namespace": "kube-system", "name": "metrics-server"},
                     "groupPriorityMinimum": 100, "versionPriority": 100},
            "status": {"conditions": [{"type": "Available", "status": "True"}]}
        });
        let r = remote_of(&obj).unwrap();
        assert_eq!(
            (r.group.as_str(), r.version.as_str(), r.port),
            ("metrics.k8s.io", "v1beta1", 443)
        );
        assert!(r.insecure && r.available);
        let local =
            json!({"metadata": {"name": "v1.apps"}, "spec": {"group": "apps", "version": "v1"}});
        assert!(remote_of(&local).is_none());
    }
}
