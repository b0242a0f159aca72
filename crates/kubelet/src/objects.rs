//! The API objects a pod's containers and volumes are made from: ConfigMaps
//! and Secrets (env, volumes), claims and their PersistentVolumes (upstream's
//! configmap and secret managers and the volume manager's client). The node
//! authorizer lets a node read exactly the ones its pods reference. Behind a
//! trait so the pod worker's tests serve them from memory.

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, PersistentVolumeClaim, Secret};
use kube::api::Api;

/// Reads one object: `Ok(None)` when it does not exist, the API server's
/// error (as text) when it cannot be read.
#[async_trait::async_trait]
pub trait ObjectSource: Send + Sync {
    async fn config_map(&self, namespace: &str, name: &str) -> Result<Option<ConfigMap>, String>;
    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, String>;
    async fn claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<PersistentVolumeClaim>, String>;
    async fn volume(&self, name: &str) -> Result<Option<PersistentVolume>, String>;
}

/// Reads through kube-rs as the node's own user.
pub struct ApiObjects(pub kube::Client);

#[async_trait::async_trait]
impl ObjectSource for ApiObjects {
    async fn config_map(&self, namespace: &str, name: &str) -> Result<Option<ConfigMap>, String> {
        let api: Api<ConfigMap> = Api::namespaced(self.0.clone(), namespace);
        api.get_opt(name).await.map_err(|e| e.to_string())
    }

    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, String> {
        let api: Api<Secret> = Api::namespaced(self.0.clone(), namespace);
        api.get_opt(name).await.map_err(|e| e.to_string())
    }

    async fn claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<PersistentVolumeClaim>, String> {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.0.clone(), namespace);
        api.get_opt(name).await.map_err(|e| e.to_string())
    }

    async fn volume(&self, name: &str) -> Result<Option<PersistentVolume>, String> {
        let api: Api<PersistentVolume> = Api::all(self.0.clone());
        api.get_opt(name).await.map_err(|e| e.to_string())
    }
}
