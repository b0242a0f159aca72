//! Local APIServices, as upstream's autoregister and CRD registration
//! controllers keep them: one per group-version this server serves itself,
//! with upstream's group and version priorities for the built-in ones
//! (`automanaged: onstart`) and 1000/100 for custom ones (`automanaged: true`,
//! removed again when their CRD stops serving the version).

use serde_json::{Value, json};

use crate::objects;
use crate::request::{Query, ResourcePath};
use crate::rest::Rest;

const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// Upstream's `apiVersionPriorities` (group minimum, version) for the built-in
/// group-versions Berth serves.
const PRIORITIES: &[(&str, &str, i64, i64)] = &[
    ("", "v1", 18000, 1),
    ("apiregistration.k8s.io", "v1", 18000, 15),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v2", 17500, 30),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2beta2", 17500, 1),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("networking.k8s.io", "v1", 17200, 15),
    ("networking.k8s.io", "v1beta1", 17200, 9),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
];

fn rp(name: Option<&str>) -> Option<ResourcePath> {
    Some(ResourcePath {
        rt: berth_api::registry::lookup("apiregistration.k8s.io", "v1", "apiservices")?,
        namespace: None,
        name: name.map(String::from),
        subresource: None,
        legacy_watch: false,
    })
}

fn local(
    group: &str,
    version: &str,
    group_priority: i64,
    version_priority: i64,
    managed: &str,
) -> Value {
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": format!("{version}.{group}"), "labels": {AUTOMANAGED: managed}},
        "spec": {"group": group, "version": version,
                 "groupPriorityMinimum": group_priority, "versionPriority": version_priority},
    })
}

/// Makes the local APIServices match what is served: creates the missing
/// ones, removes custom ones nothing serves any more.
pub async fn sync(rest: &Rest) {
    let Some(list_rp) = rp(None) else {
        return;
    };
    let existing = super::all(rest);
    let have = |name: &str| existing.iter().any(|o| objects::name(o) == Some(name));
    let mut want: Vec<Value> = Vec::new();
    for g in berth_api::registry::builtin_groups() {
        for v in g.versions {
            let (gp, vp) = PRIORITIES
                .iter()
                .find(|(pg, pv, ..)| *pg == g.name && *pv == v)
                .map(|(_, _, gp, vp)| (*gp, *vp))
                .unwrap_or((15000, 9));
            want.push(local(g.name, v, gp, vp, "onstart"));
        }
    }
    for rt in berth_api::registry::custom() {
        let name = format!("{}.{}", rt.version, rt.group);
        if !want.iter().any(|w| objects::name(w) == Some(name.as_str())) {
            want.push(local(rt.group, rt.version, 1000, 100, "true"));
        }
    }
    for w in &want {
        let name = objects::name(w).unwrap_or("");
        if have(name) {
            continue;
        }
        if let Err(e) = rest.create(&list_rp, w.clone(), &Query::default()).await
            && e.code != 409
        {
            tracing::debug!(apiservice = name, error = %e.message, "registering a local APIService");
        }
    }
    for o in &existing {
        let name = objects::name(o).unwrap_or("");
        let custom_managed =
            objects::labels(o).get(AUTOMANAGED).and_then(Value::as_str) == Some("true");
        if custom_managed
            && o.pointer("/spec/service").is_none_or(Value::is_null)
            && !want.iter().any(|w| objects::name(w) == Some(name))
            && let Some(one) = rp(Some(name))
            && let Err(e) = rest.delete(&one, None, &Query::default()).await
            && e.code != 404
        {
            tracing::debug!(apiservice = name, error = %e.message, "removing a local APIService");
        }
    }
}
