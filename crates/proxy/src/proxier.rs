//! The proxy's loop: reflectors for Services and EndpointSlices wake a sync
//! (at most one per min sync period); a timer checks the table and repairs it;
//! stop deletes the table.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_runtime::reflect::notifying_store;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::conntrack::{self, Conntrack, ConntrackCli};
use crate::nft::{Nft, NftBackend};
use crate::ruleset::Table;
use crate::syncer::{SyncKind, Syncer};
use crate::{Config, Error, convert, model, sysctl};

/// A running proxy; [`Proxy::shutdown`] removes its rules.
pub struct Proxy {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Stops syncing and deletes the table.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        if tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .is_err()
        {
            warn!("service proxy did not stop within 10s");
        }
    }
}

/// Checks nft, prepares the node's sysctls and starts the proxy with the real
/// nft backend. `client` should name kube-proxy in its User-Agent.
pub async fn start(client: kube::Client, cfg: Config) -> Result<Proxy, Error> {
    let nft = Nft::default();
    let probe = nft.clone();
    tokio::task::spawn_blocking(move || probe.probe())
        .await
        .map_err(|e| Error::Nft(e.to_string()))??;
    for w in sysctl::prepare_node(&sysctl::ProcSysctl) {
        warn!("service proxy: {w}");
    }
    Ok(start_with(
        client,
        cfg,
        Arc::new(nft),
        Arc::new(ConntrackCli),
    ))
}

/// Starts the proxy loop over `backend` and `conntrack`.
pub fn start_with(
    client: kube::Client,
    cfg: Config,
    backend: Arc<dyn NftBackend>,
    conntrack: Arc<dyn Conntrack>,
) -> Proxy {
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(run(client, cfg, backend, conntrack, stopped));
    Proxy { stop, task }
}

/// Runs one blocking syncer operation (it runs nft) off the async threads.
async fn blocking<T: Send + 'static>(
    syncer: &Arc<Mutex<Syncer>>,
    f: impl FnOnce(&mut Syncer) -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    let s = syncer.clone();
    tokio::task::spawn_blocking(move || {
        let mut guard = s.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    })
    .await
    .unwrap_or_else(|e| Err(Error::Nft(format!("nft task failed: {e}"))))
}

struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

async fn run(
    client: kube::Client,
    cfg: Config,
    backend: Arc<dyn NftBackend>,
    conntrack: Arc<dyn Conntrack>,
    mut stop: watch::Receiver<bool>,
) {
    let changed = Arc::new(Notify::new());
    let (services, services_task) = notifying_store::<Service>(&client, changed.clone());
    let (slices, slices_task) = notifying_store::<EndpointSlice>(&client, changed.clone());
    // The watches stop with the proxy, however it returns.
    let _watches = AbortOnDrop(vec![services_task, slices_task]);
    let syncer = Arc::new(Mutex::new(Syncer::new(
        backend,
        Table::ip(cfg.table.clone()),
    )));
    // Nothing is written before both lists are in: a partial view would
    // reject Services whose endpoints are not seen yet.
    let ready = async {
        services.wait_until_ready().await.is_ok() && slices.wait_until_ready().await.is_ok()
    };
    tokio::select! {
        ok = ready => if !ok {
            warn!("service proxy: watches never became ready");
            return;
        },
        _ = stop.wait_for(|s| *s) => return,
    }
    info!(node = %cfg.node.node_name, table = %cfg.table, "service proxy running");
    let mut last_sync: Option<Instant> = None;
    // The Service ports of the last applied sync, for stale UDP conntrack entries.
    let mut applied_inputs: Option<Vec<_>> = None;
    let mut conntrack_warned = false;
    let mut next_check = Instant::now() + cfg.sync_period;
    // A sync is owed: at start, after a change, after a failure, for pending deletes.
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
                    warn!(differences = ?d, "service proxy: table {} was changed outside Berth; rewriting it", cfg.table);
                    due = true;
                }
                Err(e) => warn!(error = %e, "service proxy: cannot check the table"),
            }
            // A repair runs at once, not a min sync period later.
            if !due {
                continue;
            }
        }
        let inputs = convert::inputs(&services.state(), &slices.state());
        let desired = model::build(&cfg.node, &inputs);
        let started = Instant::now();
        let r = blocking(&syncer, move |s| Ok((s.sync(&desired)?, s.has_pending()))).await;
        last_sync = Some(Instant::now());
        match r {
            Ok((kind, pending)) => {
                if kind != SyncKind::Unchanged {
                    debug!(?kind, elapsed = ?started.elapsed(), "service proxy synced");
                }
                due = pending;
                let flushes =
                    conntrack::stale(&cfg.node.node_name, applied_inputs.as_deref(), &inputs);
                applied_inputs = Some(inputs);
                if !flushes.is_empty() {
                    let ct = conntrack.clone();
                    let errors = tokio::task::spawn_blocking(move || {
                        flushes
                            .iter()
                            .filter_map(|f| ct.delete(f).err())
                            .collect::<Vec<_>>()
                    })
                    .await
                    .unwrap_or_default();
                    // A missing conntrack program says so once, not every sync.
                    if let Some(e) = errors.first()
                        && !conntrack_warned
                    {
                        warn!(error = %e, "service proxy: cannot clear stale UDP conntrack entries");
                        conntrack_warned = true;
                    }
                }
            }
            Err(e) => {
                warn!(error = %e, "service proxy: sync failed; retrying");
                due = true;
            }
        }
    }
    match blocking(&syncer, |s| s.cleanup()).await {
        Ok(()) => info!(table = %cfg.table, "service proxy stopped; table removed"),
        Err(e) => warn!(error = %e, "service proxy: could not remove its table"),
    }
}
