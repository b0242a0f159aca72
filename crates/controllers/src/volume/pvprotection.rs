//! The PV protection controller (upstream's
//! `pkg/controller/volume/pvprotection`, `pv-protection-controller`): a
//! volume being deleted keeps its `kubernetes.io/pv-protection` finalizer
//! while it is Bound to a claim and loses it once it is not; volumes the
//! StorageObjectInUseProtection admission plugin did not see get it here.

use std::time::Duration;

use berth_api::storage::PV_PROTECTION_FINALIZER;
use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::endpoints::driver::Queue;

const CONTROLLER: &str = "pv-protection";
/// Wait before a failed volume is tried again (upstream's rate-limited requeue).
const RETRY: Duration = Duration::from_secs(1);

fn has_finalizer(v: &PersistentVolume) -> bool {
    v.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == PV_PROTECTION_FINALIZER)
}

/// Upstream's `NeedToAddFinalizer`.
pub fn needs_finalizer(v: &PersistentVolume) -> bool {
    v.metadata.deletion_timestamp.is_none() && !has_finalizer(v)
}

/// Upstream's `IsDeletionCandidate`.
pub fn is_deletion_candidate(v: &PersistentVolume) -> bool {
    v.metadata.deletion_timestamp.is_some() && has_finalizer(v)
}

/// Upstream's `isBeingUsed`: a Bound volume is in use.
pub fn is_being_used(v: &PersistentVolume) -> bool {
    v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

/// The volume's finalizers with the protection one added or removed.
pub fn with_finalizer(v: &PersistentVolume, present: bool) -> PersistentVolume {
    let mut out = v.clone();
    let list = out.metadata.finalizers.get_or_insert_with(Vec::new);
    list.retain(|f| f != PV_PROTECTION_FINALIZER);
    if present {
        list.push(PV_PROTECTION_FINALIZER.to_string());
    }
    out.metadata.managed_fields = None;
    out
}

pub async fn run(client: kube::Client) {
    let (volumes, pv_w) = reflector::store::<PersistentVolume>();
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let watch_client = client.clone();
    let task = tokio::spawn(async move {
        let stream = reflector::reflector(
            pv_w,
            watcher::watcher(
                Api::<PersistentVolume>::all(watch_client),
                berth_runtime::reflect::informer_config(),
            )
            .default_backoff(),
        );
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(Event::Apply(v) | Event::InitApply(v))
                    if needs_finalizer(&v) || is_deletion_candidate(&v) =>
                {
                    let _ = tx.send(v.metadata.name.clone().unwrap_or_default());
                }
                Ok(_) => {}
                Err(e) => warn!(controller = CONTROLLER, error = %e, "watch failed"),
            }
        }
    });
    if volumes.wait_until_ready().await.is_err() {
        warn!(controller = CONTROLLER, "informer never synced");
        return;
    }
    let mut queue = Queue::default();
    let mut retries: Vec<String> = Vec::new();
    let mut retry_tick = tokio::time::interval(RETRY);
    loop {
        while let Ok(n) = rx.try_recv() {
            queue.push((String::new(), n));
        }
        if let Some((_, name)) = queue.pop() {
            if let Err(e) = sync(&client, &volumes, &name).await {
                warn!(controller = CONTROLLER, volume = %name, error = %e, "sync failed; retrying");
                retries.push(name);
            }
            continue;
        }
        tokio::select! {
            n = rx.recv() => match n {
                Some(n) => queue.push((String::new(), n)),
                None => break,
            },
            _ = retry_tick.tick() => {
                for n in retries.drain(..) {
                    queue.push((String::new(), n));
                }
            }
        }
    }
    task.abort();
}

async fn sync(
    client: &kube::Client,
    volumes: &Store<PersistentVolume>,
    name: &str,
) -> Result<(), kube::Error> {
    let Some(volume) = volumes.get(&ObjectRef::new(name)) else {
        return Ok(());
    };
    let api: Api<PersistentVolume> = Api::all(client.clone());
    if is_deletion_candidate(&volume) {
        if is_being_used(&volume) {
            debug!(controller = CONTROLLER, volume = %name, "keeping the volume: it is Bound");
            return Ok(());
        }
        api.replace(
            name,
            &PostParams::default(),
            &with_finalizer(&volume, false),
        )
        .await?;
        info!(controller = CONTROLLER, volume = %name, "removed the protection finalizer");
        return Ok(());
    }
    if needs_finalizer(&volume) {
        api.replace(name, &PostParams::default(), &with_finalizer(&volume, true))
            .await?;
        debug!(controller = CONTROLLER, volume = %name, "added the protection finalizer");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pv(v: serde_json::Value) -> PersistentVolume {
        serde_json::from_value(v).expect("pv")
    }

    #[test]
    fn finalizer_decisions() {
        let ts = "2024-01-01T00:00:00Z";
        let cases = [
            (
                "new volume",
                pv(json!({"metadata": {"name": "v"}})),
                true,
                false,
                false,
            ),
            (
                "protected, available",
                pv(
                    json!({"metadata": {"name": "v", "finalizers": [PV_PROTECTION_FINALIZER]}, "status": {"phase": "Available"}}),
                ),
                false,
                false,
                false,
            ),
            (
                "deleting while Bound",
                pv(
                    json!({"metadata": {"name": "v", "deletionTimestamp": ts, "finalizers": [PV_PROTECTION_FINALIZER]}, "status": {"phase": "Bound"}}),
                ),
                false,
                true,
                true,
            ),
            (
                "deleting once Released",
                pv(
                    json!({"metadata": {"name": "v", "deletionTimestamp": ts, "finalizers": [PV_PROTECTION_FINALIZER]}, "status": {"phase": "Released"}}),
                ),
                false,
                true,
                false,
            ),
            (
                "deleting without the finalizer",
                pv(
                    json!({"metadata": {"name": "v", "deletionTimestamp": ts, "finalizers": ["x"]}}),
                ),
                false,
                false,
                false,
            ),
        ];
        for (name, v, add, candidate, used) in cases {
            assert_eq!(needs_finalizer(&v), add, "{name}: add");
            assert_eq!(is_deletion_candidate(&v), candidate, "{name}: candidate");
            assert_eq!(is_being_used(&v), used, "{name}: in use");
        }
        let v =
            pv(json!({"metadata": {"name": "v", "finalizers": [PV_PROTECTION_FINALIZER, "x"]}}));
        assert_eq!(
            with_finalizer(&v, false).metadata.finalizers,
            Some(vec!["x".to_string()])
        );
        assert_eq!(
            with_finalizer(&pv(json!({"metadata": {"name": "v"}})), true)
                .metadata
                .finalizers,
            Some(vec![PV_PROTECTION_FINALIZER.to_string()])
        );
    }
}
