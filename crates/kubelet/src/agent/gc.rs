//! Garbage collection as the node agent runs it (upstream's
//! `StartGarbageCollection`): dead containers and sandboxes every minute, images
//! every five minutes, both again when the eviction manager reclaims disk
//! ([`NodeReclaimer`]) before it evicts pods. Pod state comes from the agent's
//! pod watch; failures become the Node's events with upstream's reasons.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use berth_runtime::events::{EventType, Recorder};
use k8s_openapi::api::core::v1::ObjectReference;
use tracing::{info, warn};

use crate::eviction::Evictions;
use crate::eviction::manager::{NodeReclaimer, SummaryProvider};
use crate::eviction::signals::Signal;
use crate::images::gc::{GcError, IMAGE_GC_PERIOD, ImageGcManager, log_failure};
use crate::runtime::Runtime;
use crate::runtime::gc::{CONTAINER_GC_PERIOD, ContainerGcPolicy, PodStateProvider};

/// [`PodStateProvider`] over the pods the agent's watch has seen.
pub struct PodStates(pub Arc<Evictions>);

impl PodStateProvider for PodStates {
    fn should_pod_content_be_removed(&self, uid: &str) -> bool {
        let Some(pod) = self.0.pod(uid) else {
            return true;
        };
        let status = pod.status.as_ref();
        let evicted = status.is_some_and(|s| {
            s.phase.as_deref() == Some("Failed") && s.reason.as_deref() == Some("Evicted")
        });
        let running = status
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.state.as_ref().is_some_and(|st| st.running.is_some()))
            });
        evicted || (pod.metadata.deletion_timestamp.is_some() && !running)
    }

    fn should_pod_runtime_be_removed(&self, uid: &str) -> bool {
        let Some(pod) = self.0.pod(uid) else {
            return true;
        };
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        self.0.is_terminal(uid)
            || matches!(phase, Some("Succeeded" | "Failed"))
            || self.should_pod_content_be_removed(uid)
    }
}

/// The agent's collectors.
pub struct GarbageCollector {
    pub runtime: Arc<dyn Runtime>,
    pub containers: ContainerGcPolicy,
    pub images: tokio::sync::Mutex<ImageGcManager>,
    pub pods: PodStates,
    pub stats: Arc<dyn SummaryProvider>,
    pub recorder: Recorder,
    pub node_name: String,
    /// The agent's root (nodefs): nodefs pressure reclaims images only when
    /// images live on the same filesystem.
    pub root_dir: PathBuf,
}

impl GarbageCollector {
    fn node_event(&self, type_: EventType, reason: &'static str, message: String) {
        let node = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(self.node_name.clone()),
            // Upstream's nodeRef carries the node's name as its uid.
            uid: Some(self.node_name.clone()),
            ..Default::default()
        };
        self.recorder.event(&node, type_, reason, message);
    }

    async fn collect_containers(&self, evict_non_deleted: bool) {
        let ready = self.pods.0.synced();
        match crate::runtime::gc::garbage_collect(
            self.runtime.as_ref(),
            &self.containers,
            &self.pods,
            ready,
            evict_non_deleted,
        )
        .await
        {
            Ok(p) if !p.containers.is_empty() || !p.sandboxes.is_empty() => info!(
                containers = p.containers.len(),
                sandboxes = p.sandboxes.len(),
                "container garbage collection removed dead containers and sandboxes"
            ),
            Ok(_) => {}
            Err(e) => warn!(error = %e, "container garbage collection failed"),
        }
    }

    /// One periodic image collection; `Err` as upstream's `GarbageCollect`.
    async fn collect_images(&self) -> Result<u64, GcError> {
        let summary = self.stats.summary().await;
        let fs = summary
            .as_ref()
            .and_then(|s| s.node.runtime.as_ref())
            .and_then(|r| r.image_fs.as_ref());
        let r = self
            .images
            .lock()
            .await
            .garbage_collect(self.runtime.as_ref(), fs, Instant::now())
            .await;
        if let Err(e) = &r
            && let Some(reason) = e.event_reason()
        {
            self.node_event(EventType::Warning, reason, e.to_string());
        }
        r
    }

    /// Do images live on the agent's root filesystem?
    async fn images_on_nodefs(&self) -> bool {
        let Ok(root) = std::fs::metadata(&self.root_dir) else {
            return true;
        };
        let fs = self.runtime.image_fs_info().await.unwrap_or_default();
        fs.first()
            .and_then(|f| std::fs::metadata(&f.mountpoint).ok())
            .is_none_or(|m| m.dev() == root.dev())
    }
}

#[async_trait::async_trait]
impl NodeReclaimer for GarbageCollector {
    async fn reclaim(&self, signal: Signal) -> bool {
        let disk = match signal {
            Signal::ImageFsAvailable | Signal::ImageFsInodesFree => true,
            Signal::NodeFsAvailable | Signal::NodeFsInodesFree => self.images_on_nodefs().await,
            Signal::MemoryAvailable | Signal::PidAvailable => false,
        };
        if !disk {
            return false;
        }
        // Upstream's DeleteAllUnusedContainers, then DeleteUnusedImages.
        self.collect_containers(true).await;
        let freed = self
            .images
            .lock()
            .await
            .delete_unused(self.runtime.as_ref(), Instant::now())
            .await;
        if let Err(e) = freed {
            info!(signal = signal.as_str(), error = %e, "eviction manager: unexpected error when attempting to reduce resource pressure");
        }
        true
    }
}

/// Collects dead containers every minute, forever.
pub async fn run_containers(gc: Arc<GarbageCollector>) {
    loop {
        gc.collect_containers(false).await;
        tokio::time::sleep(CONTAINER_GC_PERIOD).await;
    }
}

/// Collects images every five minutes, forever (not at all with a high
/// threshold of 100 and no maximum age, as upstream).
pub async fn run_images(gc: Arc<GarbageCollector>) {
    if gc.images.lock().await.policy().periodic_disabled() {
        info!(
            "image-gc-high-threshold is 100 and image-maximum-gc-age is 0: image garbage collection is off"
        );
        return;
    }
    let mut failed_before = false;
    loop {
        match gc.collect_images().await {
            Ok(_) => failed_before = false,
            Err(e) => {
                log_failure(&e, failed_before);
                if failed_before {
                    gc.node_event(EventType::Warning, "ImageGCFailed", e.to_string());
                }
                failed_before = true;
            }
        }
        tokio::time::sleep(IMAGE_GC_PERIOD).await;
    }
}
