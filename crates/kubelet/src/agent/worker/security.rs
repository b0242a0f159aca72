//! The pod worker's side of securityContext (`agent/security.rs` holds the
//! rules): the agent's sysctl/AppArmor admission, the sandbox checks
//! (`hostUsers: false`, the pod's seccomp profile) and the image user that
//! runAsNonRoot is verified against.

use berth_runtime::events::EventType;
use k8s_openapi::api::core::v1::{Container, Pod};

use super::{Worker, pod_ref};
use crate::agent::security;
use crate::runtime::ContainerConfig;

impl Worker {
    /// Upstream's sysctl and AppArmor admit handlers: a refused pod is
    /// Failed with the handler's reason and `Pod was rejected: <message>`;
    /// `true` when it was (the sync is over).
    pub(super) async fn security_admission(&mut self, pod: &Pod) -> bool {
        let refused = self
            .shared
            .admission
            .admit(pod)
            .map(|(r, m)| (r.to_string(), m));
        self.reject(pod, refused).await
    }

    /// The Device Manager's admission: devices allocated, or the pod fails
    /// (`OutOf<resource>`, `UnexpectedAdmissionError`) as upstream's kubelet
    /// rejects it.
    pub(super) async fn device_admission(&mut self, pod: &Pod) -> bool {
        let refused = self.shared.devices.admit(pod).await;
        self.reject(pod, refused).await
    }

    /// The Topology Manager's admission with the CPU Manager as hint
    /// provider: exclusive CPUs allocated, or the pod fails with
    /// `TopologyAffinityError`, `SMTAlignmentError` or
    /// `UnexpectedAdmissionError` as upstream's.
    pub(super) async fn topology_admission(&mut self, pod: &Pod) -> bool {
        let qos = crate::agent::podspec::qos(pod);
        let refused = self.shared.topology.admit(pod, qos);
        self.reject(pod, refused).await
    }

    /// An admit handler's refusal: the pod ends Failed with its reason and
    /// `Pod was rejected: <message>`; `true` when it was refused.
    async fn reject(&mut self, pod: &Pod, refused: Option<(String, String)>) -> bool {
        let Some((reason, msg)) = refused else {
            return false;
        };
        self.shared
            .recorder
            .event(&pod_ref(pod), EventType::Warning, &reason, msg.clone());
        let st = k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Failed".into()),
            reason: Some(reason),
            message: Some(format!("Pod was rejected: {msg}")),
            qos_class: pod.status.as_ref().and_then(|s| s.qos_class.clone()),
            ..Default::default()
        };
        self.post_terminal(pod, st).await;
        true
    }

    /// Why the sandbox cannot be created as the pod asks (reported as
    /// FailedCreatePodSandBox), None when it can.
    pub(super) fn sandbox_security_error(&self, pod: &Pod) -> Option<String> {
        let userns = self.shared.admission.runtime.user_namespaces;
        security::sandbox_error(pod, &self.shared.ctx.seccomp_root, userns)
    }

    /// With runAsNonRoot and no runAsUser, looks the image's user up, hands it
    /// to the runtime (upstream's RunAsUser / RunAsUsername) and verifies it
    /// is not root; the error is a CreateContainerConfigError message.
    pub(super) async fn apply_image_user(
        &self,
        pod: &Pod,
        c: &Container,
        cfg: &mut ContainerConfig,
    ) -> Result<(), String> {
        if !security::needs_image_user(pod, c) {
            return security::verify_run_as_non_root(pod, c, None, "");
        }
        let image = self
            .rt()
            .image_status(&cfg.image)
            .await
            .map_err(|e| format!("failed to get image user: {e}"))?;
        let (uid, username) = image.map(|i| (i.uid, i.username)).unwrap_or_default();
        match (uid, username.as_str()) {
            (Some(u), _) => cfg.run_as_user = Some(u),
            (None, u) if !u.is_empty() => cfg.run_as_username = u.to_string(),
            _ => {}
        }
        security::verify_run_as_non_root(pod, c, uid, &username)
    }
}
