//! The PVC protection controller (upstream's
//! `pkg/controller/volume/pvcprotection`, `pvc-protection-controller`): a
//! claim being deleted keeps its `kubernetes.io/pvc-protection` finalizer
//! while a scheduled pod of its namespace still uses it — by
//! `persistentVolumeClaim.claimName`, or as the `<pod>-<volume>` claim of a
//! generic ephemeral volume the pod controls — and loses it once none does
//! (looked up in the cache, then confirmed by a live list, as upstream).
//! A finished pod (Succeeded or Failed) still holds its claims until it is
//! deleted, as upstream: its object still names them.
//! Claims the StorageObjectInUseProtection admission plugin did not see
//! (created before it was on) get the finalizer here.

use std::time::Duration;

use berth_api::storage::{PVC_PROTECTION_FINALIZER, volume_is_for_pod};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::endpoints::driver::Queue;

const CONTROLLER: &str = "pvc-protection";
/// Wait before a failed claim is tried again (upstream's rate-limited requeue).
const RETRY: Duration = Duration::from_secs(1);

type Key = (String, String);

fn has_finalizer(c: &PersistentVolumeClaim) -> bool {
    c.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == PVC_PROTECTION_FINALIZER)
}

/// Upstream's `NeedToAddFinalizer`: not being deleted, finalizer missing.
pub fn needs_finalizer(c: &PersistentVolumeClaim) -> bool {
    c.metadata.deletion_timestamp.is_none() && !has_finalizer(c)
}

/// Upstream's `IsDeletionCandidate`: being deleted, finalizer present.
pub fn is_deletion_candidate(c: &PersistentVolumeClaim) -> bool {
    c.metadata.deletion_timestamp.is_some() && has_finalizer(c)
}

/// Upstream's `podIsShutDown`: the kubelet is done with the pod (deleted
/// with a zero grace period) or it was force-deleted.
fn pod_is_shut_down(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
        && pod.metadata.deletion_grace_period_seconds == Some(0)
}

/// Upstream's `podUsesPVC`: only a scheduled pod counts (the kubelet never
/// starts a pod whose claim is being deleted); an ephemeral claim only when
/// the pod controls it and is not shut down.
pub fn pod_uses_claim(pod: &Pod, claim: &PersistentVolumeClaim) -> bool {
    if pod.metadata.namespace != claim.metadata.namespace {
        return false;
    }
    let scheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if !scheduled {
        return false;
    }
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    super::pod_claims(pod).iter().any(|(c, ephemeral)| {
        c == name
            && (!ephemeral || (!pod_is_shut_down(pod) && volume_is_for_pod(pod, claim).is_ok()))
    })
}

/// The claim's finalizers with the protection one added or removed.
pub fn with_finalizer(c: &PersistentVolumeClaim, present: bool) -> PersistentVolumeClaim {
    let mut out = c.clone();
    let list = out.metadata.finalizers.get_or_insert_with(Vec::new);
    list.retain(|f| f != PVC_PROTECTION_FINALIZER);
    if present {
        list.push(PVC_PROTECTION_FINALIZER.to_string());
    }
    out.metadata.managed_fields = None;
    out
}

fn key_of(meta: &kube::api::ObjectMeta) -> Key {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

pub async fn run(client: kube::Client) {
    let (claims, pvc_w) = reflector::store::<PersistentVolumeClaim>();
    let (pods, pod_w) = reflector::store::<Pod>();
    let (tx, mut rx) = mpsc::unbounded_channel::<Key>();
    let t = tx.clone();
    let claim_client = client.clone();
    let claim_task = tokio::spawn(async move {
        let stream = reflector::reflector(
            pvc_w,
            watcher::watcher(
                Api::<PersistentVolumeClaim>::all(claim_client),
                berth_runtime::reflect::informer_config(),
            )
            .default_backoff(),
        );
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(Event::Apply(c) | Event::InitApply(c))
                    if needs_finalizer(&c) || is_deletion_candidate(&c) =>
                {
                    let _ = t.send(key_of(&c.metadata));
                }
                Ok(_) => {}
                Err(e) => warn!(controller = CONTROLLER, error = %e, "watch failed"),
            }
        }
    });
    let t = tx.clone();
    let pod_client = client.clone();
    let pod_task = tokio::spawn(async move {
        let stream = reflector::reflector(
            pod_w,
            watcher::watcher(
                Api::<Pod>::all(pod_client),
                berth_runtime::reflect::informer_config(),
            )
            .default_backoff(),
        );
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            // Upstream's enqueuePVCs: only a pod that went away, finished or
            // is not scheduled can let a claim go.
            let pod = match ev {
                Ok(Event::Delete(p)) => p,
                Ok(Event::Apply(p) | Event::InitApply(p))
                    if super::pod_is_terminated(&p)
                        || p.spec
                            .as_ref()
                            .and_then(|s| s.node_name.as_deref())
                            .is_none_or(str::is_empty) =>
                {
                    p
                }
                Ok(_) => continue,
                Err(e) => {
                    warn!(controller = CONTROLLER, error = %e, "watch failed");
                    continue;
                }
            };
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            for (claim, _) in super::pod_claims(&pod) {
                let _ = t.send((ns.clone(), claim));
            }
        }
    });
    if claims.wait_until_ready().await.is_err() || pods.wait_until_ready().await.is_err() {
        warn!(controller = CONTROLLER, "informers never synced");
        return;
    }
    let mut queue = Queue::default();
    let mut retries: Vec<Key> = Vec::new();
    let mut retry_tick = tokio::time::interval(RETRY);
    loop {
        while let Ok(k) = rx.try_recv() {
            queue.push(k);
        }
        if let Some(k) = queue.pop() {
            if let Err(e) = sync(&client, &claims, &pods, &k).await {
                warn!(controller = CONTROLLER, claim = %format!("{}/{}", k.0, k.1), error = %e, "sync failed; retrying");
                retries.push(k);
            }
            continue;
        }
        tokio::select! {
            k = rx.recv() => match k {
                Some(k) => queue.push(k),
                None => break,
            },
            _ = retry_tick.tick() => {
                for k in retries.drain(..) {
                    queue.push(k);
                }
            }
        }
    }
    claim_task.abort();
    pod_task.abort();
}

async fn sync(
    client: &kube::Client,
    claims: &Store<PersistentVolumeClaim>,
    pods: &Store<Pod>,
    key: &Key,
) -> Result<(), kube::Error> {
    let Some(claim) = claims.get(&ObjectRef::new(&key.1).within(&key.0)) else {
        return Ok(());
    };
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &key.0);
    if is_deletion_candidate(&claim) {
        let cached = pods.state().iter().any(|p| pod_uses_claim(p, &claim));
        if cached {
            debug!(controller = CONTROLLER, claim = %format!("{}/{}", key.0, key.1), "keeping the claim: a pod uses it");
            return Ok(());
        }
        // The cache may not have the newest pod yet: a live list decides.
        let live = Api::<Pod>::namespaced(client.clone(), &key.0)
            .list(&ListParams::default())
            .await?;
        if live.items.iter().any(|p| pod_uses_claim(p, &claim)) {
            return Ok(());
        }
        let name = claim.metadata.name.clone().unwrap_or_default();
        api.replace(
            &name,
            &PostParams::default(),
            &with_finalizer(&claim, false),
        )
        .await?;
        info!(controller = CONTROLLER, claim = %format!("{}/{}", key.0, key.1), "removed the protection finalizer");
        return Ok(());
    }
    if needs_finalizer(&claim) {
        let name = claim.metadata.name.clone().unwrap_or_default();
        api.replace(&name, &PostParams::default(), &with_finalizer(&claim, true))
            .await?;
        debug!(controller = CONTROLLER, claim = %format!("{}/{}", key.0, key.1), "added the protection finalizer");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        let mut base = json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "pod-uid"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                                 {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]},
            "status": {"phase": "Running"}
        });
        merge(&mut base, v);
        serde_json::from_value(base).expect("pod")
    }

    fn claim(name: &str, v: serde_json::Value) -> PersistentVolumeClaim {
        let mut base =
            json!({"metadata": {"name": name, "namespace": "ns", "uid": "c-uid"}, "spec": {}});
        merge(&mut base, v);
        serde_json::from_value(base).expect("claim")
    }

    fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
        match (a, b) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    #[test]
    fn which_pods_hold_a_claim() {
        let owned = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "pod-uid", "controller": true}]}});
        let cases = [
            (
                "running pod, claimName",
                pod(json!({})),
                claim("data", json!({})),
                true,
            ),
            (
                "unscheduled pod",
                pod(json!({"spec": {"nodeName": null}})),
                claim("data", json!({})),
                false,
            ),
            (
                "succeeded pod: still holds it until deleted",
                pod(json!({"status": {"phase": "Succeeded"}})),
                claim("data", json!({})),
                true,
            ),
            (
                "failed pod: still holds it until deleted",
                pod(json!({"status": {"phase": "Failed"}})),
                claim("data", json!({})),
                true,
            ),
            (
                "pending scheduled pod",
                pod(json!({"status": {"phase": "Pending"}})),
                claim("data", json!({})),
                true,
            ),
            (
                "other namespace",
                pod(json!({"metadata": {"namespace": "other"}})),
                claim("data", json!({})),
                false,
            ),
            (
                "other claim",
                pod(json!({})),
                claim("logs", json!({})),
                false,
            ),
            (
                "ephemeral claim the pod controls",
                pod(json!({})),
                claim("web-scratch", owned.clone()),
                true,
            ),
            (
                "ephemeral name, not controlled",
                pod(json!({})),
                claim("web-scratch", json!({})),
                false,
            ),
            (
                "ephemeral claim of a shut-down pod",
                pod(
                    json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z", "deletionGracePeriodSeconds": 0}}),
                ),
                claim("web-scratch", owned.clone()),
                false,
            ),
            (
                "claimName of a terminating pod still counts",
                pod(
                    json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z", "deletionGracePeriodSeconds": 30}}),
                ),
                claim("data", json!({})),
                true,
            ),
        ];
        for (name, p, c, want) in cases {
            assert_eq!(pod_uses_claim(&p, &c), want, "{name}");
        }
    }

    #[test]
    fn finalizer_states() {
        let deleting = json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}});
        let protected = json!({"metadata": {"finalizers": [PVC_PROTECTION_FINALIZER]}});
        let cases = [
            (
                "new claim without finalizer",
                claim("a", json!({})),
                true,
                false,
            ),
            (
                "protected claim",
                claim("a", protected.clone()),
                false,
                false,
            ),
            (
                "deleting protected claim",
                {
                    let mut c = claim("a", protected.clone());
                    c.metadata.deletion_timestamp =
                        claim("a", deleting.clone()).metadata.deletion_timestamp;
                    c
                },
                false,
                true,
            ),
            (
                "deleting without finalizer",
                claim("a", deleting.clone()),
                false,
                false,
            ),
        ];
        for (name, c, add, remove) in cases {
            assert_eq!(needs_finalizer(&c), add, "{name}: add");
            assert_eq!(is_deletion_candidate(&c), remove, "{name}: remove");
        }
        let c = claim(
            "a",
            json!({"metadata": {"finalizers": ["other", PVC_PROTECTION_FINALIZER]}}),
        );
        assert_eq!(
            with_finalizer(&c, false).metadata.finalizers,
            Some(vec!["other".to_string()])
        );
        assert_eq!(
            with_finalizer(&claim("a", json!({})), true)
                .metadata
                .finalizers,
            Some(vec![PVC_PROTECTION_FINALIZER.to_string()])
        );
    }
}
