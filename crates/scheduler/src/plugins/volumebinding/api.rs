//! What PreBind needs from the cluster: the informers' current view (to
//! wait on) and two writes. A trait, so the plugin is tested against a fake;
//! `KubeVolumeApi` is the real one.

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, PostParams};

use crate::framework::{SharedStorage, StorageSnapshot};

pub trait VolumeApi: Send + Sync {
    /// The informers' storage objects now.
    fn storage(&self) -> Arc<StorageSnapshot>;

    /// Whether the pod (`namespace/name`) still waits to be bound; a deleted
    /// pod's volume binding is abandoned.
    fn pod_exists(&self, key: &str) -> bool;

    /// Replaces the volume (guarded by its resourceVersion) and returns what
    /// the server stored.
    fn update_volume<'a>(
        &'a self,
        pv: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<PersistentVolume, String>>;

    /// Replaces the claim (guarded by its resourceVersion).
    fn update_claim<'a>(
        &'a self,
        pvc: &'a PersistentVolumeClaim,
    ) -> BoxFuture<'a, Result<PersistentVolumeClaim, String>>;
}

/// For frameworks built without a cluster (tools, tests of other plugins):
/// it sees no storage and refuses to write.
pub struct NoVolumeApi;

impl VolumeApi for NoVolumeApi {
    fn storage(&self) -> Arc<StorageSnapshot> {
        Arc::default()
    }

    fn pod_exists(&self, _: &str) -> bool {
        true
    }

    fn update_volume<'a>(
        &'a self,
        _: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<PersistentVolume, String>> {
        Box::pin(async { Err("the scheduler has no API client".to_string()) })
    }

    fn update_claim<'a>(
        &'a self,
        _: &'a PersistentVolumeClaim,
    ) -> BoxFuture<'a, Result<PersistentVolumeClaim, String>> {
        Box::pin(async { Err("the scheduler has no API client".to_string()) })
    }
}

/// The scheduler's: writes through its client, reads its informers.
pub struct KubeVolumeApi {
    pub client: kube::Client,
    pub storage: Arc<SharedStorage>,
    pub pod_exists: Arc<dyn Fn(&str) -> bool + Send + Sync>,
}

impl VolumeApi for KubeVolumeApi {
    fn storage(&self) -> Arc<StorageSnapshot> {
        self.storage.current()
    }

    fn pod_exists(&self, key: &str) -> bool {
        (self.pod_exists)(key)
    }

    fn update_volume<'a>(
        &'a self,
        pv: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<PersistentVolume, String>> {
        Box::pin(async move {
            let api: Api<PersistentVolume> = Api::all(self.client.clone());
            let name = pv.metadata.name.as_deref().unwrap_or_default();
            api.replace(name, &PostParams::default(), pv)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn update_claim<'a>(
        &'a self,
        pvc: &'a PersistentVolumeClaim,
    ) -> BoxFuture<'a, Result<PersistentVolumeClaim, String>> {
        Box::pin(async move {
            let ns = pvc.metadata.namespace.as_deref().unwrap_or("default");
            let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
            let name = pvc.metadata.name.as_deref().unwrap_or_default();
            api.replace(name, &PostParams::default(), pvc)
                .await
                .map_err(|e| e.to_string())
        })
    }
}
