//! The pod worker's side of node-pressure eviction (upstream's killPodFunc with
//! the eviction manager's status function, and its admit handler's rejectPod):
//! a child module of the worker so the worker's own file keeps one call.

use berth_runtime::events::EventType;
use k8s_openapi::api::core::v1::Pod;

use super::{Worker, pod_ref};
use crate::agent::podspec;
use crate::eviction::{PodEviction, message};

impl Worker {
    /// Runs a pending eviction or the admission check; `true` when the pod is
    /// now terminal and the sync is over.
    pub(super) async fn eviction_hook(&mut self, pod: &Pod) -> bool {
        let evictions = self.shared.evictions.clone();
        if let Some((ev, done)) = evictions.take(&self.uid) {
            self.evict(pod, &ev).await;
            if let Some(done) = done {
                let _ = done.send(());
            }
            return true;
        }
        if let Some(msg) = evictions.admit_once(pod) {
            self.shared.recorder.event(
                &pod_ref(pod),
                EventType::Warning,
                message::REASON,
                msg.clone(),
            );
            let mut st = pod.status.clone().unwrap_or_default();
            st.phase = Some("Failed".into());
            st.reason = Some(message::REASON.into());
            st.message = Some(format!("Pod was rejected: {msg}"));
            self.post_terminal(pod, st).await;
            return true;
        }
        false
    }

    /// Kills the pod within the eviction's grace period and posts it Failed,
    /// `Evicted`, with the DisruptionTarget condition; its volumes are removed
    /// (what a terminated pod's volume teardown reclaims), its containers kept.
    async fn evict(&mut self, pod: &Pod, ev: &PodEviction) {
        self.shared.recorder.event(
            &pod_ref(pod),
            EventType::Warning,
            message::REASON,
            ev.message.clone(),
        );
        self.shared.probes.remove_pod(&self.uid);
        self.stop_containers(Some(pod), ev.grace.min(self.shared.max_grace))
            .await;
        let views = self.views().await;
        let st = self.generated_status(pod, &views, false, true);
        let st = message::evicted_status(st, &ev.message, k8s_openapi::jiff::Timestamp::now());
        self.post_terminal(pod, st).await;
        let volumes = podspec::pod_dir(&self.shared.ctx, pod).join("volumes");
        if volumes.exists()
            && let Err(e) = std::fs::remove_dir_all(&volumes)
        {
            tracing::debug!(error = %e, "removing an evicted pod's volumes");
        }
    }

    /// Posts a terminal status and stops the sandbox: no container runs again
    /// (evictions, and `activeDeadlineSeconds` in the worker).
    pub(super) async fn post_terminal(
        &mut self,
        pod: &Pod,
        st: k8s_openapi::api::core::v1::PodStatus,
    ) {
        self.shared.statuses.set_pod_status(pod, st).await;
        self.terminal = true;
        self.wake_at = None;
        self.shared.evictions.finished(&self.uid);
        self.stop_sandboxes().await;
    }
}
