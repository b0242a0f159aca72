//! The controller's loop: reflectors for Pods (every node's: peers live
//! anywhere), Namespaces and NetworkPolicies wake a sync (at most one per
//! min sync period, so a burst of pod changes is one transaction); a timer
//! checks the table and repairs it; stop deletes the table.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_proxy::nft::{Nft, NftBackend};
use berth_proxy::syncer::{SyncKind, Syncer};
use berth_proxy::sysctl::{self, Sysctl};
use berth_runtime::reflect::notifying_store;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::runtime::reflector::Store;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::{Config, Error, convert, model, ruleset};

/// A running controller; [`NetworkPolicyController::shutdown`] removes its table.
pub struct NetworkPolicyController {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl NetworkPolicyController {
    /// Stops syncing and deletes the table.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        if tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .is_err()
        {
            warn!("network policy controller did not stop within 10s");
        }
    }
}

/// Whether bridged pod traffic reaches the table's forward hook: sets
/// `net.bridge.bridge-nf-call-iptables=1`, or says why it cannot.
pub fn prepare_node(sysctl: &dyn Sysctl) -> Option<String> {
    let key = sysctl::BRIDGE_NF_CALL_IPTABLES;
    let why = "traffic between pods on one node is not filtered (load br_netfilter)";
    match sysctl.get(key).as_deref() {
        Some("1") => None,
        Some(_) => sysctl
            .set(key, "1")
            .err()
            .map(|e| format!("cannot set {key}=1 ({e}): {why}")),
        None => Some(format!("{key} does not exist: {why}")),
    }
}

/// Checks nft, prepares the node and starts the controller with the real
/// nft backend.
pub async fn start(client: kube::Client, cfg: Config) -> Result<NetworkPolicyController, Error> {
    let nft = Nft::default();
    let probe = nft.clone();
    tokio::task::spawn_blocking(move || probe.probe())
        .await
        .map_err(|e| berth_proxy::Error::Nft(e.to_string()))??;
    if let Some(w) = prepare_node(&sysctl::ProcSysctl) {
        warn!("network policy: {w}");
    }
    Ok(start_with(client, cfg, Arc::new(nft)))
}

/// Starts the loop over `backend`.
pub fn start_with(
    client: kube::Client,
    cfg: Config,
    backend: Arc<dyn NftBackend>,
) -> NetworkPolicyController {
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(run(client, cfg, backend, stopped));
    NetworkPolicyController { stop, task }
}

async fn blocking<T: Send + 'static>(
    syncer: &Arc<Mutex<Syncer>>,
    f: impl FnOnce(&mut Syncer) -> Result<T, berth_proxy::Error> + Send + 'static,
) -> Result<T, berth_proxy::Error> {
    let s = syncer.clone();
    tokio::task::spawn_blocking(move || {
        let mut guard = s.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    })
    .await
    .unwrap_or_else(|e| Err(berth_proxy::Error::Nft(format!("nft task failed: {e}"))))
}

struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// The desired ruleset from the reflectors' current state.
pub fn desired(
    node: &str,
    pods: &Store<Pod>,
    namespaces: &Store<Namespace>,
    policies: &Store<NetworkPolicy>,
) -> berth_proxy::ruleset::Ruleset {
    let pods: Vec<model::Pod> = pods.state().iter().map(|p| convert::pod(p)).collect();
    let namespaces: Vec<model::Namespace> = namespaces
        .state()
        .iter()
        .map(|n| convert::namespace(n))
        .collect();
    let policies: Vec<model::Policy> = policies
        .state()
        .iter()
        .map(|p| convert::policy(p))
        .collect();
    ruleset::build(&model::build(&pods, &namespaces, &policies, Some(node)))
}

async fn run(
    client: kube::Client,
    cfg: Config,
    backend: Arc<dyn NftBackend>,
    mut stop: watch::Receiver<bool>,
) {
    let changed = Arc::new(Notify::new());
    let (pods, pods_task) = notifying_store::<Pod>(&client, changed.clone());
    let (namespaces, ns_task) = notifying_store::<Namespace>(&client, changed.clone());
    let (policies, np_task) = notifying_store::<NetworkPolicy>(&client, changed.clone());
    let _watches = AbortOnDrop(vec![pods_task, ns_task, np_task]);
    let syncer = Arc::new(Mutex::new(Syncer::new(backend, ruleset::table(&cfg.table))));
    // Nothing is written before all three lists are in: a partial view of
    // policies would open traffic a policy not seen yet closes.
    let ready = async {
        pods.wait_until_ready().await.is_ok()
            && namespaces.wait_until_ready().await.is_ok()
            && policies.wait_until_ready().await.is_ok()
    };
    tokio::select! {
        ok = ready => if !ok {
            warn!("network policy: watches never became ready");
            return;
        },
        _ = stop.wait_for(|s| *s) => return,
    }
    info!(node = %cfg.node_name, table = %cfg.table, "network policy controller running");
    let mut last_sync: Option<Instant> = None;
    let mut next_check = Instant::now() + cfg.sync_period;
    let mut due = true;
    loop {
        let wake = if due {
            last_sync.map_or_else(Instant::now, |t| t + cfg.min_sync_period)
        } else {
            next_check
        };
        tokio::select! {
            _ = changed.notified() => { due = true; continue; }
            _ = tokio::time::sleep_until(wake.min(next_check)) => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        if Instant::now() >= next_check {
            next_check = Instant::now() + cfg.sync_period;
            match blocking(&syncer, |s| s.check()).await {
                Ok(d) if d.is_empty() => {}
                Ok(d) => {
                    warn!(differences = ?d, "network policy: table {} was changed outside Berth; rewriting it", cfg.table);
                    due = true;
                }
                Err(e) => warn!(error = %e, "network policy: cannot check the table"),
            }
            if !due {
                continue;
            }
        }
        let desired = desired(&cfg.node_name, &pods, &namespaces, &policies);
        let started = Instant::now();
        let r = blocking(&syncer, move |s| Ok((s.sync(&desired)?, s.has_pending()))).await;
        last_sync = Some(Instant::now());
        match r {
            Ok((kind, pending)) => {
                if kind != SyncKind::Unchanged {
                    debug!(?kind, elapsed = ?started.elapsed(), "network policy synced");
                }
                due = pending;
            }
            Err(e) => {
                warn!(error = %e, "network policy: sync failed; retrying");
                due = true;
            }
        }
    }
    match blocking(&syncer, |s| s.cleanup()).await {
        Ok(()) => info!(table = %cfg.table, "network policy controller stopped; table removed"),
        Err(e) => warn!(error = %e, "network policy: could not remove its table"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use berth_proxy::sysctl::FakeSysctl;

    #[test]
    fn prepare_node_turns_bridge_filtering_on_or_says_why_not() {
        let key = sysctl::BRIDGE_NF_CALL_IPTABLES;
        // (value before, warning expected, value after)
        let cases = [
            (Some("0"), false, Some("1")),
            (Some("1"), false, Some("1")),
            (None, true, None),
        ];
        for (before, warns, after) in cases {
            let fake = FakeSysctl(Mutex::new(
                before
                    .map(|v| BTreeMap::from([(key.to_string(), v.to_string())]))
                    .unwrap_or_default(),
            ));
            assert_eq!(prepare_node(&fake).is_some(), warns, "{before:?}");
            assert_eq!(fake.get(key).as_deref(), after, "{before:?}");
        }
    }
}
