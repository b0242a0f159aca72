//! ServiceAccount: a new pod runs as a ServiceAccount that exists (`default`
//! unless it names one), and unless the pod or its ServiceAccount turns
//! automounting off, every container gets upstream's `kube-api-access-<5>`
//! projected volume at `/var/run/secrets/kubernetes.io/serviceaccount`: a
//! bound token (which the node agent requests and rotates), the cluster CA from
//! the `kube-root-ca.crt` ConfigMap and the namespace.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Attributes, Operation, Plugin, forbidden};
use crate::objects;
use crate::rest::Rest;
use crate::status::{ApiError, ApiResult};

/// Where upstream mounts the token, CA and namespace.
pub const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The volume's name prefix, as upstream's `ServiceAccountVolumeName`.
const VOLUME_PREFIX: &str = "kube-api-access-";
/// Upstream's token lifetime for the projected volume: one hour and 7 s, so a
/// kubelet that refreshes at 80 % is recognisable in audit logs.
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// The `default` ServiceAccount is made by a controller right after its
/// namespace: upstream looks for it this many times before refusing the pod.
const DEFAULT_LOOKUPS: usize = 10;

pub struct ServiceAccount;

#[async_trait]
impl Plugin for ServiceAccount {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }

    async fn admit(&self, rest: &Rest, a: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        if a.operation != Operation::Create || !a.is("", "Pod") {
            return Ok(());
        }
        // Mirror pods (static pods) have no API identity, as upstream.
        if obj
            .pointer("/metadata/annotations/kubernetes.io~1config.mirror")
            .is_some()
        {
            return Ok(());
        }
        let ns = a.namespace.unwrap_or("default");
        let sa_name = berth_api::defaults::default_service_account_name(obj);
        let sa = lookup(rest, ns, &sa_name).await?.ok_or_else(|| {
            forbidden(
                a,
                format!(
                    "error looking up service account {ns}/{sa_name}: serviceaccount \"{sa_name}\" not found"
                ),
            )
        })?;
        if automount(obj, &sa) {
            mount_token(obj, &rand_suffix());
        }
        Ok(())
    }
}

/// The ServiceAccount from the watch cache, else the store; `default` is
/// looked for again a few times, since its controller may not have made it yet.
async fn lookup(rest: &Rest, ns: &str, name: &str) -> ApiResult<Option<Value>> {
    let rt = berth_api::registry::lookup("", "v1", "serviceaccounts")
        .ok_or_else(|| ApiError::internal("no serviceaccounts"))?;
    let key = objects::key(rt, Some(ns), name);
    if let Some(s) = rest.cache.get(&key) {
        return Ok(Some(objects::decode_at(&s.bytes, s.mod_revision)?));
    }
    let attempts = if name == "default" {
        DEFAULT_LOOKUPS
    } else {
        1
    };
    for i in 0..attempts {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(100 + rand::random::<u64>() % 100)).await;
        }
        if let Some(kv) = rest.store.get(&key).await? {
            return Ok(Some(objects::decode(&kv)?));
        }
    }
    Ok(None)
}

/// The pod's `automountServiceAccountToken`, else the ServiceAccount's, else true.
fn automount(pod: &Value, sa: &Value) -> bool {
    pod.pointer("/spec/automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| {
            sa.get("automountServiceAccountToken")
                .and_then(Value::as_bool)
        })
        .unwrap_or(true)
}

/// Five characters from upstream's `utilrand` alphabet (no vowels, no
/// look-alikes).
fn rand_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random::<u32>() as usize % ALPHABET.len()] as char)
        .collect()
}

/// Adds the projected volume and mounts it read-only in every init and app
/// container that does not already mount something at [`MOUNT_PATH`]. A pod
/// that already has a `kube-api-access-` volume keeps it (and gets no second).
fn mount_token(pod: &mut Value, suffix: &str) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .filter_map(|v| v.get("name").and_then(Value::as_str))
                .find(|n| n.starts_with(VOLUME_PREFIX))
                .map(String::from)
        });
    let name = match existing {
        Some(n) => n,
        None => {
            let name = format!("{VOLUME_PREFIX}{suffix}");
            let volume = json!({"name": name, "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
            ]}});
            match spec.get_mut("volumes") {
                Some(Value::Array(vs)) => vs.push(volume),
                _ => {
                    spec.insert("volumes".into(), json!([volume]));
                }
            }
            name
        }
    };
    for list in ["initContainers", "containers"] {
        let Some(Value::Array(containers)) = spec.get_mut(list) else {
            continue;
        };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let mounted = c
                .get("volumeMounts")
                .and_then(Value::as_array)
                .is_some_and(|ms| {
                    ms.iter()
                        .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(MOUNT_PATH))
                });
            if mounted {
                continue;
            }
            let mount = json!({"name": name, "readOnly": true, "mountPath": MOUNT_PATH});
            match c.get_mut("volumeMounts") {
                Some(Value::Array(ms)) => ms.push(mount),
                _ => {
                    c.insert("volumeMounts".into(), json!([mount]));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automount_follows_pod_then_service_account() {
        let sa_off = json!({"automountServiceAccountToken": false});
        let sa = json!({});
        let cases = [
            (json!({"spec": {}}), &sa, true),
            (json!({"spec": {}}), &sa_off, false),
            (
                json!({"spec": {"automountServiceAccountToken": true}}),
                &sa_off,
                true,
            ),
            (
                json!({"spec": {"automountServiceAccountToken": false}}),
                &sa,
                false,
            ),
        ];
        for (pod, sa, want) in cases {
            assert_eq!(automount(&pod, sa), want, "{pod} {sa}");
        }
    }

    #[test]
    fn token_volume_is_mounted_where_nothing_else_is() {
        let mut pod = json!({"spec": {
            "initContainers": [{"name": "init"}],
            "containers": [
                {"name": "app", "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                {"name": "own", "volumeMounts": [{"name": "mine", "mountPath": MOUNT_PATH}]}
            ],
            "volumes": [{"name": "data", "emptyDir": {}}]
        }});
        mount_token(&mut pod, "x2b4z");
        let volumes = pod["spec"]["volumes"].as_array().unwrap();
        assert_eq!(volumes.len(), 2);
        assert_eq!(volumes[1]["name"], "kube-api-access-x2b4z");
        assert_eq!(
            volumes[1]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            3607
        );
        let mount =
            json!({"name": "kube-api-access-x2b4z", "readOnly": true, "mountPath": MOUNT_PATH});
        assert_eq!(
            pod["spec"]["initContainers"][0]["volumeMounts"],
            json!([mount])
        );
        assert_eq!(pod["spec"]["containers"][0]["volumeMounts"][1], mount);
        assert_eq!(
            pod["spec"]["containers"][1]["volumeMounts"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        // Admitting twice adds nothing.
        let once = pod.clone();
        mount_token(&mut pod, "other");
        assert_eq!(pod, once);
    }

    #[test]
    fn suffixes_use_upstreams_alphabet() {
        for _ in 0..100 {
            let s = rand_suffix();
            assert_eq!(s.len(), 5);
            assert!(
                s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
                "{s}"
            );
        }
    }
}
