//! The Node authorizer (`--authorization-mode Node`): what a node agent
//! (`system:node:<name>` in `system:nodes`) may do. Everything in upstream's
//! `system:node` rules, except that Secrets, ConfigMaps, PersistentVolumeClaims
//! and PersistentVolumes may only be read, and ServiceAccount tokens only
//! requested, when a pod bound to that node uses them, and Leases only its
//! own. Upstream keeps a graph of these edges; here they are found on demand
//! in the watch cache (the pods of one namespace), which is cheap enough for
//! the few reads a node makes per pod. Writes are narrowed further by the
//! NodeRestriction admission plugin.

use std::sync::OnceLock;

use berth_api::user::UserInfo;
use berth_authz::{Attributes, Decision};
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::Value;

use crate::objects;
use crate::rest::Rest;

pub const NODES_GROUP: &str = "system:nodes";
const NODE_PREFIX: &str = "system:node:";

/// The node a user is, if it is one (upstream's `NodeIdentifier`).
pub fn node_name(user: &UserInfo) -> Option<&str> {
    let name = user.name.strip_prefix(NODE_PREFIX)?;
    (user.in_group(NODES_GROUP) && !name.is_empty()).then_some(name)
}

/// Upstream's `system:node` rules, from the bootstrap policy.
fn node_rules() -> &'static [PolicyRule] {
    static RULES: OnceLock<Vec<PolicyRule>> = OnceLock::new();
    RULES.get_or_init(|| {
        berth_authz::bootstrap::cluster_roles()
            .into_iter()
            .find(|r| r.metadata.name.as_deref() == Some("system:node"))
            .and_then(|r| r.rules)
            .unwrap_or_default()
    })
}

pub fn authorize(rest: &Rest, a: &Attributes) -> (Decision, String) {
    let Some(node) = node_name(&a.user) else {
        return (Decision::NoOpinion, String::new());
    };
    if a.resource_request && a.api_group.is_empty() {
        match a.resource.as_str() {
            "secrets" | "configmaps" => return read_used(rest, node, a, uses_object),
            "persistentvolumeclaims" if a.subresource.is_empty() => {
                return get_used(rest, node, a, uses_claim);
            }
            "persistentvolumes" => return persistent_volume(rest, node, a),
            "serviceaccounts" => return token(rest, node, a),
            _ => {}
        }
    }
    if a.resource_request && a.api_group == "coordination.k8s.io" && a.resource == "leases" {
        let own = a.namespace == "kube-node-lease" && (a.name == node || a.verb == "create");
        if !own {
            return no_opinion(
                node,
                "can only access node lease with the same name as the requesting node",
            );
        }
    }
    if berth_authz::rules_allow(a, node_rules()) {
        return (Decision::Allow, String::new());
    }
    (Decision::NoOpinion, String::new())
}

/// No opinion, with the reason RBAC's 403 appends (upstream's texts).
fn no_opinion(_node: &str, why: &str) -> (Decision, String) {
    (Decision::NoOpinion, why.to_string())
}

/// Pods of `ns` bound to `node`, from the watch cache.
fn pods_on(rest: &Rest, ns: &str, node: &str) -> Vec<Value> {
    let Some(rt) = berth_api::registry::lookup("", "v1", "pods") else {
        return Vec::new();
    };
    let (items, _) = rest.cache.snapshot(&objects::list_prefix(rt, Some(ns)));
    items
        .iter()
        .filter_map(|(_, s)| objects::decode_at(&s.bytes, s.mod_revision).ok())
        .filter(|p| p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node))
        .collect()
}

/// get/list/watch of one named object a pod on the node uses.
fn read_used(
    rest: &Rest,
    node: &str,
    a: &Attributes,
    uses: fn(&Value, &str, &str) -> bool,
) -> (Decision, String) {
    if !matches!(a.verb.as_str(), "get" | "list" | "watch") || !a.subresource.is_empty() {
        return no_opinion(node, "can only read namespaced object of this type");
    }
    if a.name.is_empty() {
        return no_opinion(node, "cannot read all objects of this type");
    }
    used_by_pod(rest, node, a, uses)
}

fn get_used(
    rest: &Rest,
    node: &str,
    a: &Attributes,
    uses: fn(&Value, &str, &str) -> bool,
) -> (Decision, String) {
    if a.verb != "get" {
        return no_opinion(node, "can only get individual resources of this type");
    }
    used_by_pod(rest, node, a, uses)
}

fn used_by_pod(
    rest: &Rest,
    node: &str,
    a: &Attributes,
    uses: fn(&Value, &str, &str) -> bool,
) -> (Decision, String) {
    let kind = a.resource.trim_end_matches('s');
    if pods_on(rest, &a.namespace, node)
        .iter()
        .any(|p| uses(p, &a.resource, &a.name))
    {
        return (Decision::Allow, String::new());
    }
    no_opinion(
        node,
        &format!(
            "no relationship found between node '{node}' and this object ({kind} {}/{})",
            a.namespace, a.name
        ),
    )
}

/// Does the pod reference this Secret or ConfigMap (volumes, projected
/// sources, env, envFrom, image pull secrets)?
fn uses_object(pod: &Value, resource: &str, name: &str) -> bool {
    let secret = resource == "secrets";
    let str_at = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str) == Some(name);
    let arr = |v: &Value, p: &str| -> Vec<Value> {
        v.pointer(p)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for v in arr(pod, "/spec/volumes") {
        let direct = if secret {
            str_at(&v, "/secret/secretName")
        } else {
            str_at(&v, "/configMap/name")
        };
        let projected = arr(&v, "/projected/sources").iter().any(|s| {
            if secret {
                str_at(s, "/secret/name")
            } else {
                str_at(s, "/configMap/name")
            }
        });
        if direct || projected {
            return true;
        }
    }
    if secret
        && arr(pod, "/spec/imagePullSecrets")
            .iter()
            .any(|s| str_at(s, "/name"))
    {
        return true;
    }
    let containers = [
        "/spec/initContainers",
        "/spec/containers",
        "/spec/ephemeralContainers",
    ];
    containers.iter().flat_map(|p| arr(pod, p)).any(|c| {
        let env = arr(&c, "/env").iter().any(|e| {
            if secret {
                str_at(e, "/valueFrom/secretKeyRef/name")
            } else {
                str_at(e, "/valueFrom/configMapKeyRef/name")
            }
        });
        let env_from = arr(&c, "/envFrom").iter().any(|e| {
            if secret {
                str_at(e, "/secretRef/name")
            } else {
                str_at(e, "/configMapRef/name")
            }
        });
        env || env_from
    })
}

/// Does the pod use this claim (directly or as its generic ephemeral volume)?
fn uses_claim(pod: &Value, _resource: &str, name: &str) -> bool {
    let pod_name = objects::name(pod).unwrap_or("");
    pod.pointer("/spec/volumes")
        .and_then(Value::as_array)
        .is_some_and(|vs| {
            vs.iter().any(|v| {
                v.pointer("/persistentVolumeClaim/claimName")
                    .and_then(Value::as_str)
                    == Some(name)
                    || (v.get("ephemeral").is_some()
                        && v.get("name")
                            .and_then(Value::as_str)
                            .is_some_and(|vn| format!("{pod_name}-{vn}") == name))
            })
        })
}

/// A PersistentVolume: bound to a claim that a pod on the node uses.
fn persistent_volume(rest: &Rest, node: &str, a: &Attributes) -> (Decision, String) {
    if a.verb != "get" {
        return no_opinion(node, "can only get individual resources of this type");
    }
    let Some(pv_rt) = berth_api::registry::lookup("", "v1", "persistentvolumes") else {
        return (Decision::NoOpinion, String::new());
    };
    let pv = rest
        .cache
        .get(&objects::key(pv_rt, None, &a.name))
        .and_then(|s| objects::decode_at(&s.bytes, s.mod_revision).ok());
    let claim = pv.as_ref().and_then(|pv| {
        let ns = pv
            .pointer("/spec/claimRef/namespace")
            .and_then(Value::as_str)?;
        let name = pv.pointer("/spec/claimRef/name").and_then(Value::as_str)?;
        Some((ns.to_string(), name.to_string()))
    });
    if let Some((ns, claim)) = claim
        && pods_on(rest, &ns, node)
            .iter()
            .any(|p| uses_claim(p, "", &claim))
    {
        return (Decision::Allow, String::new());
    }
    no_opinion(
        node,
        &format!(
            "no relationship found between node '{node}' and this object (persistentvolume /{})",
            a.name
        ),
    )
}

/// `create serviceaccounts/<n>/token` for a ServiceAccount a pod on the node
/// runs as (NodeRestriction checks that the token is bound to such a pod).
fn token(rest: &Rest, node: &str, a: &Attributes) -> (Decision, String) {
    if a.subresource != "token" || a.verb != "create" {
        return no_opinion(
            node,
            "can only create tokens for individual service accounts",
        );
    }
    let runs_as = |p: &Value| {
        p.pointer("/spec/serviceAccountName")
            .and_then(Value::as_str)
            .unwrap_or("default")
            == a.name
    };
    if pods_on(rest, &a.namespace, node).iter().any(runs_as) {
        return (Decision::Allow, String::new());
    }
    no_opinion(
        node,
        &format!(
            "no relationship found between node '{node}' and this object (serviceaccount {}/{})",
            a.namespace, a.name
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn node_identity_needs_name_and_group() {
        let cases = [
            (UserInfo::new("system:node:n1", &[NODES_GROUP]), Some("n1")),
            (UserInfo::new("system:node:n1", &[]), None),
            (UserInfo::new("system:node:", &[NODES_GROUP]), None),
            (UserInfo::new("jane", &[NODES_GROUP]), None),
        ];
        for (u, want) in cases {
            assert_eq!(node_name(&u), want, "{u:?}");
        }
    }

    #[test]
    fn pod_references() {
        let pod = json!({"metadata": {"name": "web"}, "spec": {
            "imagePullSecrets": [{"name": "pull"}],
            "volumes": [
                {"name": "a", "secret": {"secretName": "vol-secret"}},
                {"name": "b", "configMap": {"name": "vol-cm"}},
                {"name": "c", "projected": {"sources": [{"secret": {"name": "proj-secret"}}, {"configMap": {"name": "kube-root-ca.crt"}}]}},
                {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}
            ],
            "containers": [{"name": "c", "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}}],
                "envFrom": [{"configMapRef": {"name": "env-cm"}}]}]
        }});
        let cases = [
            ("secrets", "pull", true),
            ("secrets", "vol-secret", true),
            ("secrets", "proj-secret", true),
            ("secrets", "env-secret", true),
            ("secrets", "vol-cm", false),
            ("secrets", "other", false),
            ("configmaps", "vol-cm", true),
            ("configmaps", "kube-root-ca.crt", true),
            ("configmaps", "env-cm", true),
            ("configmaps", "vol-secret", false),
        ];
        for (resource, name, want) in cases {
            assert_eq!(uses_object(&pod, resource, name), want, "{resource}/{name}");
        }
        assert!(uses_claim(&pod, "", "data"));
        assert!(uses_claim(&pod, "", "web-scratch"));
        assert!(!uses_claim(&pod, "", "other"));
    }
}
