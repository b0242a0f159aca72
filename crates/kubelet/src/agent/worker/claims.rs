//! The pod worker's claim-backed volumes: fetches each claim and its bound
//! PersistentVolume (the node authorizer lets a node read exactly these),
//! resolves them with `volumes::claims`, and applies the pod's `fsGroup` to
//! volumes whose plugin manages ownership — once per pod, as upstream's volume
//! manager mounts a volume once and only remounts after a restart.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Volume};
use kube::api::Api;

use super::Worker;
use crate::agent::podspec;
use crate::volumes::VolumeError;
use crate::volumes::claims::{self, claim_of, unsupported_source};

impl Worker {
    /// Resolves the claim volumes not resolved yet; the failing volume and its
    /// error otherwise (also for a volume source the agent has no plugin for).
    pub(super) async fn mount_claims(
        &mut self,
        pod: &Pod,
        volumes: &[Volume],
    ) -> Result<(), (String, VolumeError)> {
        let ns = podspec::meta(pod).1.to_string();
        let security = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
        let fs_group = security.and_then(|s| s.fs_group);
        let policy = security.and_then(|s| s.fs_group_change_policy.as_deref());
        for v in volumes {
            if let Some(kind) = unsupported_source(v) {
                return Err((v.name.clone(), VolumeError::Unsupported(kind)));
            }
            let Some(r) = claim_of(pod, v) else { continue };
            if self.claims.contains_key(&v.name) {
                continue;
            }
            let fetch_err = |e: kube::Error| {
                (
                    v.name.clone(),
                    VolumeError::Claim(format!("error processing PVC {ns}/{}: {e}", r.claim)),
                )
            };
            let claim = Api::<PersistentVolumeClaim>::namespaced(self.shared.client.clone(), &ns)
                .get_opt(&r.claim)
                .await
                .map_err(fetch_err)?;
            let pv_name = claim
                .as_ref()
                .and_then(|c| c.spec.as_ref())
                .and_then(|s| s.volume_name.clone())
                .filter(|n| !n.is_empty());
            let pv = match pv_name {
                Some(n) => Api::<PersistentVolume>::all(self.shared.client.clone())
                    .get_opt(&n)
                    .await
                    .map_err(fetch_err)?,
                None => None,
            };
            let mount = claims::resolve(pod, &r, claim.as_ref(), pv.as_ref())
                .map_err(|e| (v.name.clone(), e))?;
            if mount.supports_ownership
                && let Some(gid) = fs_group
            {
                crate::volumes::ownership::apply(&mount.path, gid, policy, mount.read_only)
                    .map_err(|e| (v.name.clone(), e))?;
            }
            self.claims.insert(v.name.clone(), mount);
        }
        Ok(())
    }
}
