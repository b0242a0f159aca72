//! The status manager (upstream's `pkg/kubelet/status`): the one place pod
//! workers hand their generated statuses to. It caches each pod's latest
//! status (what the probe manager and the next generation read), sends it to
//! the API server only when it changed, and confirms a terminated pod's
//! deletion (upstream's `canBeDeleted` then a grace-0 delete guarded by the
//! pod's uid). The API side sits behind [`StatusWriter`] so the worker's
//! tests record what it would send.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::{Value, json};
use tracing::{debug, warn};

use crate::prober::manager::PodStatusProvider;

/// Why a write did not take: the API server's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The pod is gone (404) or is another pod by now (409 on the uid precondition).
    #[error("pod {0}")]
    Gone(String),
    #[error("{0}")]
    Other(String),
}

/// What the status manager asks of the API server.
#[async_trait::async_trait]
pub trait StatusWriter: Send + Sync {
    /// `PATCH pods/<name>/status` with a strategic merge patch of `status`.
    async fn patch_status(
        &self,
        namespace: &str,
        name: &str,
        status: &Value,
    ) -> Result<(), WriteError>;
    /// `DELETE pods/<name>` with grace period 0 and a uid precondition.
    async fn delete(&self, namespace: &str, name: &str, uid: &str) -> Result<(), WriteError>;
}

/// Writes through kube-rs as the node's own user.
pub struct ApiStatusWriter(pub kube::Client);

fn write_error(e: kube::Error) -> WriteError {
    match e {
        kube::Error::Api(s) if s.code == 404 || s.code == 409 => WriteError::Gone(s.reason),
        e => WriteError::Other(e.to_string()),
    }
}

#[async_trait::async_trait]
impl StatusWriter for ApiStatusWriter {
    async fn patch_status(
        &self,
        namespace: &str,
        name: &str,
        status: &Value,
    ) -> Result<(), WriteError> {
        let api: Api<Pod> = Api::namespaced(self.0.clone(), namespace);
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(json!({ "status": status })),
        )
        .await
        .map(|_| ())
        .map_err(write_error)
    }

    async fn delete(&self, namespace: &str, name: &str, uid: &str) -> Result<(), WriteError> {
        let api: Api<Pod> = Api::namespaced(self.0.clone(), namespace);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        api.delete(name, &dp).await.map(|_| ()).map_err(write_error)
    }
}

#[derive(Default)]
struct Entry {
    status: PodStatus,
    /// What the API server last accepted, serialised: an unchanged status
    /// serialises identically (transition times change only with statuses).
    sent: Option<Value>,
}

/// The cache and the writer; one per node agent.
pub struct StatusManager {
    writer: Arc<dyn StatusWriter>,
    pods: Mutex<HashMap<String, Entry>>,
}

impl StatusManager {
    pub fn new(writer: Arc<dyn StatusWriter>) -> Self {
        StatusManager {
            writer,
            pods: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.pods.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Caches `status` as the pod's and sends it unless the API server has it
    /// already. A failed write is retried by the next call (the worker syncs
    /// every second).
    pub async fn set_pod_status(&self, pod: &Pod, status: PodStatus) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let value = serde_json::to_value(&status).unwrap_or_default();
        let unchanged = {
            let mut pods = self.lock();
            let e = pods.entry(uid.clone()).or_default();
            e.status = status;
            e.sent.as_ref() == Some(&value)
        };
        if unchanged {
            return;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        match self.writer.patch_status(ns, name, &value).await {
            Ok(()) => {
                if let Some(e) = self.lock().get_mut(&uid) {
                    e.sent = Some(value);
                }
            }
            Err(e) => debug!(pod = %name, error = %e, "pod status patch failed"),
        }
    }

    /// Sends the cached status again if the API server has not accepted it
    /// (a terminal pod's worker writes its status once, then only retries).
    pub async fn retry_unsent(&self, pod: &Pod) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let status = self.lock().get(uid).map(|e| e.status.clone());
        if let Some(status) = status {
            self.set_pod_status(pod, status).await;
        }
    }

    /// Confirms that a terminated pod may go (its containers are stopped and
    /// its resources released), then forgets it. A pod that is gone already
    /// or was replaced under the same name is not an error.
    pub async fn confirm_deletion(&self, pod: &Pod) {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        match self.writer.delete(ns, name, uid).await {
            Ok(()) => debug!(pod = %name, "pod deleted"),
            Err(WriteError::Gone(_)) => {}
            Err(e) => warn!(pod = %name, error = %e, "confirming pod deletion failed"),
        }
    }

    /// Forgets a pod whose worker has ended.
    pub fn remove(&self, uid: &str) {
        self.lock().remove(uid);
    }
}

impl PodStatusProvider for StatusManager {
    fn pod_status(&self, pod_uid: &str) -> Option<PodStatus> {
        self.lock().get(pod_uid).map(|e| e.status.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::RecordingWriter;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"}
        }))
        .unwrap()
    }

    fn phase(p: &str) -> PodStatus {
        PodStatus {
            phase: Some(p.into()),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn unchanged_statuses_are_sent_once_and_failures_are_retried() {
        let w = Arc::new(RecordingWriter::default());
        let m = StatusManager::new(w.clone());
        m.set_pod_status(&pod(), phase("Pending")).await;
        m.set_pod_status(&pod(), phase("Pending")).await;
        assert_eq!(w.patches().len(), 1);
        w.fail_next(WriteError::Other("connection refused".into()));
        m.set_pod_status(&pod(), phase("Running")).await;
        // Cached even though the write failed: probes read it.
        assert_eq!(
            m.pod_status("u1").unwrap().phase.as_deref(),
            Some("Running")
        );
        m.retry_unsent(&pod()).await;
        m.retry_unsent(&pod()).await;
        let sent: Vec<String> = w
            .patches()
            .iter()
            .map(|(_, _, v)| v["phase"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(sent, ["Pending", "Running", "Running"]);
        m.remove("u1");
        assert!(m.pod_status("u1").is_none());
    }

    #[tokio::test]
    async fn deletion_is_confirmed_with_the_pods_uid_and_a_gone_pod_is_fine() {
        let w = Arc::new(RecordingWriter::default());
        let m = StatusManager::new(w.clone());
        w.fail_next(WriteError::Gone("NotFound".into()));
        m.confirm_deletion(&pod()).await;
        m.confirm_deletion(&pod()).await;
        assert_eq!(
            w.deletes(),
            [
                ("ns".to_string(), "p".to_string(), "u1".to_string()),
                ("ns".to_string(), "p".to_string(), "u1".to_string())
            ]
        );
    }
}
