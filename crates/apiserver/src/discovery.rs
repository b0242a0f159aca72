//! Discovery: `/version`, the legacy lists (`/api`, `/apis`, `/apis/<g>`,
//! `/api/v1`, `/apis/<g>/<v>`) and aggregated discovery v2.

use berth_api::registry::{self, ResourceType};
use serde_json::{Value, json};

pub const AGGREGATED_V2: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const AGGREGATED_V2BETA1: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// The Kubernetes version Berth serves.
pub const KUBE_MINOR: &str = "33";

pub fn version() -> Value {
    // Build metadata (`+berth…`) keeps the version a release for semver range checks (helm).
    json!({
        "major": "1",
        "minor": KUBE_MINOR,
        "gitVersion": format!("v1.{KUBE_MINOR}.0+berth{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "none (Berth is written in Rust)",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    })
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Which aggregated discovery version `Accept` asks for, if any.
pub fn wants_aggregated(accept: &str) -> Option<&'static str> {
    for item in accept.split(',') {
        let item = item.trim();
        if item.contains("as=APIGroupDiscoveryList") && item.contains("g=apidiscovery.k8s.io") {
            if item.contains("v=v2beta1") {
                return Some(AGGREGATED_V2BETA1);
            }
            if item.contains("v=v2") {
                return Some(AGGREGATED_V2);
            }
        }
    }
    None
}

fn sub_verbs(sub: &str) -> &'static [&'static str] {
    match sub {
        "status" | "scale" | "ephemeralcontainers" => &["get", "patch", "update"],
        "log" => &["get"],
        "exec" | "attach" | "portforward" => &["create", "get"],
        "binding" | "eviction" | "token" => &["create"],
        "proxy" => &["create", "delete", "get", "patch", "update"],
        "finalize" => &["update"],
        _ => &["get"],
    }
}

/// (group, version, kind) a subresource's responses have.
fn sub_kind(rt: &ResourceType, sub: &str) -> (&'static str, &'static str, &'static str) {
    match sub {
        "scale" => ("autoscaling", "v1", "Scale"),
        "eviction" => ("policy", "v1", "Eviction"),
        "binding" => ("", "v1", "Binding"),
        "token" => ("authentication.k8s.io", "v1", "TokenRequest"),
        "exec" => ("", "v1", "PodExecOptions"),
        "attach" => ("", "v1", "PodAttachOptions"),
        "portforward" => ("", "v1", "PodPortForwardOptions"),
        "proxy" if rt.kind == "Pod" => ("", "v1", "PodProxyOptions"),
        "proxy" if rt.kind == "Node" => ("", "v1", "NodeProxyOptions"),
        "proxy" => ("", "v1", "ServiceProxyOptions"),
        _ => (rt.group, rt.version, rt.kind),
    }
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// `/api`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn api_group(g: &registry::Group) -> Value {
    let versions: Vec<Value> = g
        .versions
        .iter()
        .map(|v| json!({"groupVersion": group_version(g.name, v), "version": v}))
        .collect();
    json!({
        "name": g.name,
        "versions": versions,
        "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
    })
}

/// Groups served by remote APIServices: (group, versions preferred first, each
/// with the APIResourceList its server last answered).
pub type RemoteGroups = [crate::aggregator::RemoteGroup];

fn remote_group(name: &str, versions: &[(String, Option<Value>)]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|(v, _)| json!({"groupVersion": group_version(name, v), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": versions,
        "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`: the groups served here, then those of remote APIServices.
pub fn api_group_list(remote: &RemoteGroups) -> Value {
    let mut groups: Vec<Value> = registry::groups()
        .iter()
        .filter(|g| !g.name.is_empty())
        .map(api_group)
        .collect();
    groups.extend(remote.iter().map(|(g, vs)| remote_group(g, vs)));
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub fn api_group_doc(name: &str, remote: &RemoteGroups) -> Option<Value> {
    let mut doc = match registry::groups()
        .into_iter()
        .find(|g| g.name == name && !name.is_empty())
    {
        Some(g) => api_group(&g),
        None => remote
            .iter()
            .find(|(g, _)| g == name)
            .map(|(g, vs)| remote_group(g, vs))?,
    };
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// A remote group-version in aggregated discovery, from its APIResourceList
/// (`Stale` until its server has answered one).
fn aggregated_remote_version(version: &str, doc: Option<&Value>) -> Value {
    let Some(doc) = doc else {
        return json!({"version": version, "resources": [], "freshness": "Stale"});
    };
    let list: Vec<Value> = doc
        .get("resources")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut resources: Vec<Value> = Vec::new();
    for r in &list {
        let name = r.get("name").and_then(Value::as_str).unwrap_or("");
        if name.contains('/') {
            continue;
        }
        let subs: Vec<Value> = list
            .iter()
            .filter_map(|s| {
                let n = s.get("name").and_then(Value::as_str)?;
                let sub = n.strip_prefix(&format!("{name}/"))?;
                Some(json!({
                    "subresource": sub,
                    "responseKind": {"group": s.get("group").cloned().unwrap_or(json!("")), "version": s.get("version").cloned().unwrap_or(json!("")), "kind": s.get("kind").cloned().unwrap_or(json!(""))},
                    "verbs": s.get("verbs").cloned().unwrap_or(json!([])),
                }))
            })
            .collect();
        let mut out = json!({
            "resource": name,
            "responseKind": {"group": "", "version": "", "kind": r.get("kind").cloned().unwrap_or(json!(""))},
            "scope": if r.get("namespaced").and_then(Value::as_bool) == Some(true) { "Namespaced" } else { "Cluster" },
            "singularResource": r.get("singularName").cloned().unwrap_or(json!("")),
            "verbs": r.get("verbs").cloned().unwrap_or(json!([])),
        });
        for k in ["shortNames", "categories"] {
            if let Some(v) = r
                .get(k)
                .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
            {
                out[k] = v.clone();
            }
        }
        if !subs.is_empty() {
            out["subresources"] = Value::Array(subs);
        }
        resources.push(out);
    }
    json!({"version": version, "resources": resources, "freshness": "Current"})
}

/// `/api/v1` or `/apis/<group>/<version>`.
pub fn api_resource_list(group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for rt in registry::resources_in(group, version) {
        let mut r = json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": rt.verbs,
        });
        if !rt.short_names.is_empty() {
            r["shortNames"] = json!(rt.short_names);
        }
        if !rt.categories.is_empty() {
            r["categories"] = json!(rt.categories);
        }
        resources.push(r);
        for sub in rt.subresources {
            let (g, v, k) = sub_kind(rt, sub);
            let mut s = json!({
                "name": format!("{}/{}", rt.plural, sub),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": k,
                "verbs": sub_verbs(sub),
            });
            if g != rt.group || v != rt.version {
                s["group"] = json!(g);
                s["version"] = json!(v);
            }
            resources.push(s);
        }
    }
    if resources.is_empty() {
        return None;
    }
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version(group, version),
        "resources": resources,
    }))
}

/// Aggregated discovery for the core group (`legacy`) or every named group.
pub fn aggregated(legacy: bool, api_version: &str, remote: &RemoteGroups) -> Value {
    let mut items: Vec<Value> = registry::groups()
        .iter()
        .filter(|g| g.name.is_empty() == legacy)
        .map(|g| {
            let versions: Vec<Value> = g
                .versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = registry::resources_in(g.name, v)
                        .map(|rt| {
                            let subs: Vec<Value> = rt
                                .subresources
                                .iter()
                                .map(|sub| {
                                    let (sg, sv, sk) = sub_kind(rt, sub);
                                    json!({
                                        "subresource": sub,
                                        "responseKind": {"group": sg, "version": sv, "kind": sk},
                                        "verbs": sub_verbs(sub),
                                    })
                                })
                                .collect();
                            let mut r = json!({
                                "resource": rt.plural,
                                "responseKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
                                "scope": if rt.namespaced { "Namespaced" } else { "Cluster" },
                                "singularResource": rt.singular,
                                "verbs": rt.verbs,
                            });
                            if !rt.short_names.is_empty() {
                                r["shortNames"] = json!(rt.short_names);
                            }
                            if !rt.categories.is_empty() {
                                r["categories"] = json!(rt.categories);
                            }
                            if !subs.is_empty() {
                                r["subresources"] = Value::Array(subs);
                            }
                            r
                        })
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g.name}, "versions": versions})
        })
        .collect();
    if !legacy {
        items.extend(remote.iter().map(|(g, vs)| {
            let versions: Vec<Value> = vs
                .iter()
                .map(|(v, doc)| aggregated_remote_version(v, doc.as_ref()))
                .collect();
            json!({"metadata": {"name": g}, "versions": versions})
        }));
    }
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": api_version,
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_lists() {
        let v1 = api_resource_list("", "v1").unwrap();
        let pods = v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "pods")
            .unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["categories"], json!(["all"]));
        assert!(
            v1["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == "pods/status")
        );
        let scale = api_resource_list("apps", "v1").unwrap()["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "deployments/scale")
            .cloned()
            .unwrap();
        assert_eq!(
            (scale["group"].as_str(), scale["kind"].as_str()),
            (Some("autoscaling"), Some("Scale"))
        );
        assert!(api_resource_list("nope", "v1").is_none());
        let groups = api_group_list(&[]);
        assert!(
            groups["groups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == "apps")
        );
        assert_eq!(
            api_group_doc("autoscaling", &[]).unwrap()["preferredVersion"]["version"],
            "v2"
        );
    }

    #[test]
    fn aggregated_discovery() {
        assert_eq!(
            wants_aggregated(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
            ),
            Some(AGGREGATED_V2)
        );
        assert_eq!(wants_aggregated("application/json"), None);
        let core = aggregated(true, "apidiscovery.k8s.io/v2", &[]);
        assert_eq!(core["items"].as_array().unwrap().len(), 1);
        assert_eq!(core["items"][0]["metadata"]["name"], "");
        let named = aggregated(false, "apidiscovery.k8s.io/v2", &[]);
        assert!(
            named["items"]
                .as_array()
                .unwrap()
                .iter()
                .all(|g| g["metadata"]["name"] != "")
        );
    }
}
