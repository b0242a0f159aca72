//! VolumeBinding (upstream `plugins/volumebinding`): a pod's
//! PersistentVolumeClaims decide where it may run and are bound for it.
//!
//! PreFilter sorts the claims (missing, lost, deleting or unbound Immediate
//! claims turn the pod away); Filter asks each node whether its bound
//! volumes' node affinity fits and whether its WaitForFirstConsumer claims
//! find a static volume or can be provisioned there; Reserve assumes the
//! chosen node's volumes so the next cycles do not hand them out again;
//! PreBind writes the bindings (a PV's claimRef, a claim's selected-node)
//! and waits for the PV controller to finish them. Score is not registered:
//! upstream's VolumeCapacityPriority is alpha and off.

pub mod api;
pub mod assume_cache;
pub mod binder;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde::Deserialize;

use crate::Error;
use crate::framework::{
    Code, CycleState, Filter, NodeInfo, Plugin, PodInfo, PreBind, PreFilter, Reserve, Snapshot,
    Status, StorageSnapshot,
};
use api::VolumeApi;
use assume_cache::{AssumeCache, View};
use binder::{
    ClaimsError, PodVolumeClaims, PodVolumes, bind_volume_to_claim, check_bindings,
    claim_with_selected_node, find_pod_volumes, pod_has_claims, pod_volume_claims,
};

pub const NAME: &str = "VolumeBinding";
/// Upstream's `bindTimeoutSeconds` default.
pub const DEFAULT_BIND_TIMEOUT_SECONDS: i64 = 600;
/// How often PreBind looks at the claims while it waits (upstream's 1 s poll).
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// `VolumeBindingArgs` (kubescheduler.config.k8s.io/v1); the alpha `shape`
/// of VolumeCapacityPriority is not read.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeBindingArgs {
    #[serde(default)]
    pub bind_timeout_seconds: Option<i64>,
}

impl VolumeBindingArgs {
    /// The timeout, validated as upstream's ValidateVolumeBindingArgs.
    pub fn bind_timeout(&self) -> Result<Duration, Error> {
        match self.bind_timeout_seconds {
            None => Ok(Duration::from_secs(DEFAULT_BIND_TIMEOUT_SECONDS as u64)),
            Some(s) if s < 0 => Err(Error::Config(format!(
                "{NAME} args: bindTimeoutSeconds: Invalid value: {s}: invalid BindTimeoutSeconds, should not be a negative value"
            ))),
            Some(s) => Ok(Duration::from_secs(s as u64)),
        }
    }
}

pub struct VolumeBinding {
    api: Arc<dyn VolumeApi>,
    assumed: Mutex<AssumeCache>,
    bind_timeout: Duration,
    poll_interval: Duration,
}

/// What the cycle carries from PreFilter to PreBind (shared by the parallel
/// Filter calls, hence the locks).
#[derive(Default)]
struct StateData {
    claims: PodVolumeClaims,
    storage: Arc<StorageSnapshot>,
    by_node: Mutex<HashMap<String, Arc<PodVolumes>>>,
    reserved: Mutex<Option<Reserved>>,
}

#[derive(Clone, Debug)]
struct Reserved {
    all_bound: bool,
    /// What PreBind writes: the volumes with their new claimRef, the
    /// claims with their selected node.
    volumes: Option<Arc<PodVolumes>>,
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl VolumeBinding {
    pub fn new(api: Arc<dyn VolumeApi>, bind_timeout: Duration) -> Self {
        Self {
            api,
            assumed: Mutex::new(AssumeCache::default()),
            bind_timeout,
            poll_interval: POLL_INTERVAL,
        }
    }

    /// Polls faster than upstream's second (tests).
    pub fn with_poll_interval(mut self, d: Duration) -> Self {
        self.poll_interval = d;
        self
    }

    fn state(state: &CycleState) -> Result<&StateData, Status> {
        state
            .read::<StateData>(NAME)
            .ok_or_else(|| Status::error(format!("cannot read {NAME:?} from cycleState")))
    }

    /// Upstream's BindPodVolumes: the API writes, then the wait for the PV
    /// controller.
    async fn bind_pod_volumes(
        &self,
        pod: &PodInfo,
        node: &str,
        v: &PodVolumes,
    ) -> Result<(), String> {
        let mut bindings = Vec::with_capacity(v.static_bindings.len());
        for (claim, pv) in &v.static_bindings {
            let stored = self.api.update_volume(pv).await?;
            bindings.push((claim.clone(), Arc::new(stored)));
        }
        let mut provisions = Vec::with_capacity(v.dynamic_provisions.len());
        for claim in &v.dynamic_provisions {
            provisions.push(Arc::new(self.api.update_claim(claim).await?));
        }
        let key = pod.key();
        let deadline = Instant::now() + self.bind_timeout;
        loop {
            if !self.api.pod_exists(&key) {
                return Err("binding volumes: pod does not exist any more".into());
            }
            let storage = self.api.storage();
            match check_bindings(node, &v.node_labels, &bindings, &provisions, &storage) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => return Err(format!("binding volumes: {e}")),
            }
            if Instant::now() >= deadline {
                return Err("binding volumes: timed out waiting for the condition".into());
            }
            tokio::time::sleep(self.poll_interval).await;
        }
    }
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl PreFilter for VolumeBinding {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snap: &Snapshot) -> Status {
        if !pod_has_claims(&pod.pod) {
            state.write(NAME, StateData::default());
            return Status::new(Code::Skip, Vec::new());
        }
        let claims = {
            let cache = guard(&self.assumed);
            let view = cache.view(&snap.storage);
            pod_volume_claims(&pod.pod, &view)
        };
        match claims {
            Ok(claims) => {
                state.write(
                    NAME,
                    StateData {
                        claims,
                        storage: snap.storage.clone(),
                        ..Default::default()
                    },
                );
                Status::success()
            }
            Err(ClaimsError::Unresolvable(m)) => Status::unresolvable(m),
            Err(ClaimsError::Error(m)) => Status::error(m),
        }
    }
}

impl Filter for VolumeBinding {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let data = match Self::state(state) {
            Ok(d) => d,
            Err(s) => return s,
        };
        let view = View::plain(&data.storage);
        match find_pod_volumes(&data.claims, node.name(), node.labels(), &view) {
            Err(e) => Status::error(e),
            Ok((_, reasons)) if !reasons.is_empty() => Status::new(
                Code::UnschedulableAndUnresolvable,
                reasons.into_iter().map(String::from).collect(),
            ),
            Ok((volumes, _)) => {
                guard(&data.by_node).insert(node.name().to_string(), Arc::new(volumes));
                Status::success()
            }
        }
    }
}

impl Reserve for VolumeBinding {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let data = match Self::state(state) {
            Ok(d) => d,
            Err(s) => return s,
        };
        let found = guard(&data.by_node).get(node).cloned();
        let reserved = match found {
            // The pod has no claims (Filter was skipped).
            None => Reserved {
                all_bound: true,
                volumes: None,
            },
            Some(_) if data.claims.all_bound() => Reserved {
                all_bound: true,
                volumes: None,
            },
            Some(v) => {
                let key = pod.key();
                let mut cache = guard(&self.assumed);
                let mut out = PodVolumes {
                    node_labels: v.node_labels.clone(),
                    ..Default::default()
                };
                for (claim, pv) in &v.static_bindings {
                    let pv = match bind_volume_to_claim(pv, claim) {
                        Some(new) => {
                            cache.assume_volume(&key, new.clone());
                            Arc::new(new)
                        }
                        None => pv.clone(),
                    };
                    out.static_bindings.push((claim.clone(), pv));
                }
                for claim in &v.dynamic_provisions {
                    let new = claim_with_selected_node(claim, node);
                    cache.assume_claim(&key, new.clone());
                    out.dynamic_provisions.push(Arc::new(new));
                }
                Reserved {
                    all_bound: false,
                    volumes: Some(Arc::new(out)),
                }
            }
        };
        *guard(&data.reserved) = Some(reserved);
        Status::success()
    }

    fn unreserve(&self, _state: &mut CycleState, pod: &PodInfo, _node: &str) {
        guard(&self.assumed).restore_pod(&pod.key());
    }
}

impl PreBind for VolumeBinding {
    fn pre_bind<'a>(
        &'a self,
        state: &'a CycleState,
        pod: &'a PodInfo,
        node: &'a str,
    ) -> BoxFuture<'a, Status> {
        Box::pin(async move {
            let reserved = match Self::state(state) {
                Ok(d) => guard(&d.reserved).clone(),
                Err(s) => return s,
            };
            let volumes = match reserved {
                Some(r) if r.all_bound => return Status::success(),
                Some(Reserved {
                    volumes: Some(v), ..
                }) => v,
                _ => return Status::error(format!("no pod volumes found for node {node:?}")),
            };
            match self.bind_pod_volumes(pod, node, &volumes).await {
                Ok(()) => {
                    // The informers now show the bindings: nothing left to hide.
                    guard(&self.assumed).restore_pod(&pod.key());
                    Status::success()
                }
                Err(e) => Status::error(e),
            }
        })
    }
}
