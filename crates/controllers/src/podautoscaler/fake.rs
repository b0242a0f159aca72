//! In-memory [`Cluster`] and [`EventRecorder`] for tests: scale targets by
//! kind and name, pods, and a log of every write and event.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::autoscaling::v1::{Scale, ScaleSpec, ScaleStatus};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::discovery::ApiResource;

use berth_api::selector::LabelSelector;
use berth_runtime::events::EventType;

use super::cluster::{Cluster, EventRecorder};

#[derive(Default)]
struct ClusterState {
    /// Kinds served, by (group, kind), and whether they serve `scale`.
    kinds: BTreeMap<(String, String), (ApiResource, bool)>,
    /// Scale of each object, by (kind, name).
    scales: BTreeMap<(String, String), Scale>,
    pods: Vec<Pod>,
    update_scale_error: Option<String>,
    update_status_error: Option<String>,
    scale_writes: Vec<i32>,
    status_writes: Vec<HorizontalPodAutoscaler>,
}

/// Cheap to clone; clones share their state.
#[derive(Clone, Default)]
pub struct FakeCluster {
    state: Arc<Mutex<ClusterState>>,
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

impl FakeCluster {
    /// Serves Deployments, StatefulSets and ReplicaSets (with `scale`) and
    /// ConfigMaps (without).
    pub fn new() -> Self {
        let c = FakeCluster::default();
        c.serve("apps", "v1", "Deployment", "deployments", true);
        c.serve("apps", "v1", "StatefulSet", "statefulsets", true);
        c.serve("apps", "v1", "ReplicaSet", "replicasets", true);
        c.serve("", "v1", "ConfigMap", "configmaps", false);
        c
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClusterState> {
        // Test state only; a panicking test cannot leave it half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serves a kind (a CRD, say), with or without the scale subresource.
    pub fn serve(&self, group: &str, version: &str, kind: &str, plural: &str, scale: bool) {
        self.lock().kinds.insert(
            (group.into(), kind.into()),
            (resource(group, version, kind, plural), scale),
        );
    }

    /// Sets an object's scale: `spec.replicas`, `status.replicas`, selector.
    pub fn set_scale(&self, kind: &str, name: &str, spec: i32, status: i32, selector: &str) {
        let scale = Scale {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(ScaleSpec {
                replicas: Some(spec),
            }),
            status: Some(ScaleStatus {
                replicas: status,
                selector: (!selector.is_empty()).then(|| selector.to_string()),
            }),
        };
        self.lock().scales.insert((kind.into(), name.into()), scale);
    }

    pub fn set_pods(&self, pods: Vec<Pod>) {
        self.lock().pods = pods;
    }

    pub fn fail_update_scale(&self, err: Option<&str>) {
        self.lock().update_scale_error = err.map(str::to_string);
    }

    pub fn fail_update_status(&self, err: Option<&str>) {
        self.lock().update_status_error = err.map(str::to_string);
    }

    /// `spec.replicas` of every scale update, in order.
    pub fn scale_writes(&self) -> Vec<i32> {
        self.lock().scale_writes.clone()
    }

    /// Every HPA written through its status, in order.
    pub fn status_writes(&self) -> Vec<HorizontalPodAutoscaler> {
        self.lock().status_writes.clone()
    }

    /// The scale's current `spec.replicas`.
    pub fn replicas(&self, kind: &str, name: &str) -> Option<i32> {
        self.lock()
            .scales
            .get(&(kind.to_string(), name.to_string()))
            .and_then(|s| s.spec.as_ref()?.replicas)
    }
}

impl Cluster for FakeCluster {
    async fn get_scale(
        &self,
        _namespace: &str,
        group: &str,
        _version: &str,
        kind: &str,
        name: &str,
    ) -> Result<(Scale, ApiResource), String> {
        let state = self.lock();
        let Some((ar, has_scale)) = state.kinds.get(&(group.to_string(), kind.to_string())) else {
            return Err(format!("no matches for kind {kind:?} in group {group:?}"));
        };
        if !has_scale {
            return Err("the server could not find the requested resource".into());
        }
        let gr = if ar.group.is_empty() {
            ar.plural.clone()
        } else {
            format!("{}.{}", ar.plural, ar.group)
        };
        match state.scales.get(&(kind.to_string(), name.to_string())) {
            Some(s) => Ok((s.clone(), ar.clone())),
            None => Err(format!("{gr} {name:?} not found")),
        }
    }

    async fn update_scale(
        &self,
        _namespace: &str,
        resource: &ApiResource,
        scale: &Scale,
    ) -> Result<(), String> {
        let mut state = self.lock();
        if let Some(e) = &state.update_scale_error {
            return Err(e.clone());
        }
        let replicas = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        state.scale_writes.push(replicas);
        let name = scale.metadata.name.clone().unwrap_or_default();
        state
            .scales
            .insert((resource.kind.clone(), name), scale.clone());
        Ok(())
    }

    async fn list_pods(
        &self,
        _namespace: &str,
        selector: &LabelSelector,
    ) -> Result<Vec<Pod>, String> {
        let empty = BTreeMap::new();
        Ok(self
            .lock()
            .pods
            .iter()
            .filter(|p| selector.matches(p.metadata.labels.as_ref().unwrap_or(&empty)))
            .cloned()
            .collect())
    }

    async fn update_status(&self, hpa: &HorizontalPodAutoscaler) -> Result<(), String> {
        let mut state = self.lock();
        if let Some(e) = &state.update_status_error {
            return Err(e.clone());
        }
        state.status_writes.push(hpa.clone());
        Ok(())
    }
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedEvent {
    pub type_: EventType,
    pub reason: String,
    pub message: String,
}

/// Records events in memory; clones share the log.
#[derive(Clone, Default)]
pub struct FakeEvents {
    events: Arc<Mutex<Vec<RecordedEvent>>>,
}

impl FakeEvents {
    /// Takes the events recorded so far.
    pub fn take(&self) -> Vec<RecordedEvent> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The reasons recorded so far (kept).
    pub fn reasons(&self) -> BTreeSet<String> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|e| e.reason.clone())
            .collect()
    }
}

impl EventRecorder for FakeEvents {
    fn event(
        &self,
        _hpa: &HorizontalPodAutoscaler,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(RecordedEvent {
                type_,
                reason: reason.into(),
                message,
            });
    }
}
