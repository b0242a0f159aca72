//! The volume manager's per-pod side (upstream's `volumemanager`
//! `WaitForAttachAndMount` and the volume plugins' SetUp): claim-backed
//! volumes are resolved once (the claim and its bound PersistentVolume, the
//! pod's `fsGroup` applied where the plugin manages ownership), payload
//! volumes (configMap, secret, downwardAPI, projected with service account
//! tokens) are written and re-written every [`VOLUME_RESYNC`]. A volume that
//! cannot be set up holds the pod's sandbox back and records one FailedMount
//! event per distinct message.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use berth_runtime::events::{EventType, Recorder};
use k8s_openapi::api::core::v1::{Pod, Volume};

use super::podspec::{self, ClaimMounts, NodeContext};
use crate::envvars;
use crate::objects::ObjectSource;
use crate::token::{TokenKey, TokenManager};
use crate::volumes::VolumeError;
use crate::volumes::claims::{self, claim_of, unsupported_source};

/// How often configMap/secret/downwardAPI/projected contents are re-written
/// (upstream's kubelet sync period is 1 min). Each re-write asks the token
/// manager again, so it must come round well within a token's refresh window
/// (`token::MIN_REFRESH_WINDOW`, tested below): a refreshed token then
/// reaches its file before the old one expires.
pub const VOLUME_RESYNC: Duration = Duration::from_secs(10);

/// What setting up a pod's volumes reads and where it reports.
pub struct VolumeContext<'a> {
    pub objects: &'a dyn ObjectSource,
    pub tokens: &'a TokenManager,
    pub node: &'a NodeContext,
    pub recorder: &'a Recorder,
    /// The pod's IPs and the node's, for downwardAPI `status.podIP(s)`/`hostIP(s)`.
    pub pod_ips: &'a [String],
    pub host_ip: &'a str,
    pub allocatable: &'a crate::node::Resources,
}

/// One pod's volumes as the manager has set them up so far.
#[derive(Default)]
pub struct PodVolumes {
    /// The claim-backed volumes, resolved once.
    claims: ClaimMounts,
    /// When the payload volumes were last written.
    synced: Option<Instant>,
    /// The last FailedMount message (recorded once per change).
    error: Option<String>,
}

/// The pod's service account: `spec.serviceAccountName`, else `default`
/// (what upstream's ServiceAccount admission sets).
pub fn service_account_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.service_account_name.as_deref())
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
}

impl PodVolumes {
    /// The claim-backed mounts resolved so far (container configs bind them).
    pub fn claims(&self) -> &ClaimMounts {
        &self.claims
    }

    /// Sets up every volume of the pod that needs it; false (with a
    /// FailedMount event) while one cannot be.
    pub async fn mount(&mut self, pod: &Pod, cx: &VolumeContext<'_>) -> bool {
        match self.try_mount(pod, cx).await {
            Ok(()) => {
                self.error = None;
                true
            }
            Err((volume, e)) => {
                let msg = format!("MountVolume.SetUp failed for volume {volume:?} : {e}");
                if self.error.as_deref() != Some(msg.as_str()) {
                    cx.recorder
                        .event(pod, EventType::Warning, "FailedMount", msg.clone());
                }
                self.error = Some(msg);
                false
            }
        }
    }

    async fn try_mount(
        &mut self,
        pod: &Pod,
        cx: &VolumeContext<'_>,
    ) -> Result<(), (String, VolumeError)> {
        let volumes = pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.clone())
            .unwrap_or_default();
        self.mount_claims(pod, &volumes, cx.objects).await?;
        let needs = volumes.iter().any(|v| {
            v.config_map.is_some()
                || v.secret.is_some()
                || v.downward_api.is_some()
                || v.projected.is_some()
        });
        if !needs || self.synced.is_some_and(|t| t.elapsed() < VOLUME_RESYNC) {
            return Ok(());
        }
        let ns = podspec::meta(pod).1;
        let (cm_names, secret_names) = crate::volumes::referenced_objects(pod);
        let mut cms = BTreeMap::new();
        for n in cm_names {
            if let Ok(Some(cm)) = cx.objects.config_map(ns, &n).await {
                cms.insert(n, cm);
            }
        }
        let mut secrets = BTreeMap::new();
        for n in secret_names {
            if let Ok(Some(s)) = cx.objects.secret(ns, &n).await {
                secrets.insert(n, s);
            }
        }
        let host_ips = vec![cx.host_ip.to_string()];
        let empty = BTreeMap::new();
        let env = envvars::EnvSources {
            config_maps: &cms,
            secrets: &secrets,
            pod_ips: cx.pod_ips,
            host_ips: &host_ips,
            node_allocatable: cx.allocatable,
            service_env: &empty,
        };
        let tokens = service_account_tokens(pod, cx.tokens).await;
        let src = crate::volumes::ProjectedSources {
            config_maps: &cms,
            secrets: &secrets,
            env: &env,
            service_account_tokens: &tokens,
        };
        let pod_dir = podspec::pod_dir(cx.node, pod);
        for v in &volumes {
            let Some(payload) = crate::volumes::volume_payload(v, pod, &src) else {
                continue;
            };
            let Some(dir) = crate::volumes::volume_dir(&pod_dir, v) else {
                continue;
            };
            payload
                .and_then(|p| crate::volumes::writer::write(&dir, &p))
                .map_err(|e| (v.name.clone(), e))?;
        }
        self.synced = Some(Instant::now());
        Ok(())
    }

    /// Resolves the claim volumes not resolved yet (the node authorizer lets
    /// a node read exactly these claims and volumes); the failing volume and
    /// its error otherwise, also for a volume source the agent has no plugin for.
    async fn mount_claims(
        &mut self,
        pod: &Pod,
        volumes: &[Volume],
        objects: &dyn ObjectSource,
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
            let fetch_err = |e: String| {
                (
                    v.name.clone(),
                    VolumeError::Claim(format!("error processing PVC {ns}/{}: {e}", r.claim)),
                )
            };
            let claim = objects.claim(&ns, &r.claim).await.map_err(fetch_err)?;
            let pv_name = claim
                .as_ref()
                .and_then(|c| c.spec.as_ref())
                .and_then(|s| s.volume_name.clone())
                .filter(|n| !n.is_empty());
            let pv = match pv_name {
                Some(n) => objects.volume(&n).await.map_err(fetch_err)?,
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

/// A token for every serviceAccountToken source of the pod's volumes, for its
/// service account and bound to it (upstream's projected volume plugin asking
/// the token manager).
async fn service_account_tokens(
    pod: &Pod,
    manager: &TokenManager,
) -> crate::volumes::ServiceAccountTokens {
    let (name, ns, uid) = podspec::meta(pod);
    let service_account = service_account_name(pod);
    let mut tokens = crate::volumes::ServiceAccountTokens::new();
    for source in crate::volumes::token_sources(pod) {
        let key = TokenKey {
            namespace: ns.to_string(),
            service_account: service_account.to_string(),
            pod_name: name.to_string(),
            pod_uid: uid.to_string(),
            source,
        };
        let token = manager.get_service_account_token(&key).await;
        tokens.insert(key.source, token);
    }
    tokens
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn volume_resync_comes_within_the_token_refresh_window() {
        // The re-write after a refresh falls due comes before expiry.
        let window = crate::token::MIN_REFRESH_WINDOW.as_secs();
        assert!(window > 0 && (VOLUME_RESYNC.as_secs() as i64) < window);
    }

    #[test]
    fn service_account_defaults() {
        for (spec, want) in [
            (json!({"containers": []}), "default"),
            (
                json!({"containers": [], "serviceAccountName": ""}),
                "default",
            ),
            (
                json!({"containers": [], "serviceAccountName": "robot"}),
                "robot",
            ),
        ] {
            let pod: Pod = serde_json::from_value(json!({"spec": spec})).unwrap();
            assert_eq!(service_account_name(&pod), want, "{spec}");
        }
    }
}
