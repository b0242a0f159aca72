//! What the controller reads and writes besides metrics, as a boundary:
//! the target's scale subresource (found through API discovery, so any
//! kind serving `scale` works: Deployments, StatefulSets, ReplicaSets,
//! custom resources), the pods it selects, the HPA's status and events.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use kube::runtime::reflector::Store;

use berth_api::selector::LabelSelector;
use berth_runtime::events::{EventType, Recorder};

use super::metrics::client::api_error_text;

/// The API server as the HPA controller uses it.
pub trait Cluster: Send + Sync {
    /// Upstream's RESTMappings + scaleForResourceMappings: the `scale` of
    /// `name`, a `kind` of `group` (`version` tried first), and the resource
    /// that served it. Errors are the text upstream shows.
    fn get_scale(
        &self,
        namespace: &str,
        group: &str,
        version: &str,
        kind: &str,
        name: &str,
    ) -> impl Future<Output = Result<(Scale, ApiResource), String>> + Send;

    /// Writes `scale` back (an update, conflicting when it changed).
    fn update_scale(
        &self,
        namespace: &str,
        resource: &ApiResource,
        scale: &Scale,
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// The pods of `namespace` that `selector` matches.
    fn list_pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> impl Future<Output = Result<Vec<Pod>, String>> + Send;

    /// Writes `hpa.status` through the status subresource.
    fn update_status(
        &self,
        hpa: &HorizontalPodAutoscaler,
    ) -> impl Future<Output = Result<(), String>> + Send;
}

/// Where the controller's events go.
pub trait EventRecorder: Send + Sync {
    fn event(&self, hpa: &HorizontalPodAutoscaler, type_: EventType, reason: &str, message: String);
}

impl EventRecorder for Recorder {
    fn event(
        &self,
        hpa: &HorizontalPodAutoscaler,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        Recorder::event(self, hpa, type_, reason, message);
    }
}

/// [`Cluster`] through kube-rs. Discovery answers are kept for one sync
/// ([`KubeCluster::begin_sync`] forgets them), as upstream's RESTMapper is
/// reset periodically; pods come from a reflector, as upstream's pod lister
/// (a sync lists no pods from the API server).
pub struct KubeCluster {
    client: kube::Client,
    mappings: Mutex<HashMap<(String, String), Vec<ApiResource>>>,
    pods: Store<Pod>,
    pod_reflector: tokio::task::JoinHandle<()>,
}

impl Drop for KubeCluster {
    fn drop(&mut self) {
        self.pod_reflector.abort();
    }
}

impl KubeCluster {
    /// Starts the pod reflector (within a Tokio runtime).
    pub fn new(client: kube::Client) -> Self {
        let (pods, pod_reflector) = berth_runtime::reflect::notifying_store(
            &client,
            std::sync::Arc::new(tokio::sync::Notify::new()),
        );
        KubeCluster {
            client,
            mappings: Mutex::new(HashMap::new()),
            pods,
            pod_reflector,
        }
    }

    /// Forgets discovery, so kinds served since (a new CRD) are found.
    pub fn begin_sync(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Vec<ApiResource>>> {
        // A cache of discovery answers; a panic cannot corrupt it.
        self.mappings.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Upstream's RESTMappings(GroupKind): every version of the group that
    /// serves `kind`, the requested and then the preferred first.
    async fn rest_mappings(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Vec<ApiResource>, String> {
        let key = (group.to_string(), kind.to_string());
        if let Some(found) = self.lock().get(&key) {
            return Ok(found.clone());
        }
        let no_match = || format!("no matches for kind {kind:?} in group {group:?}");
        let api_group = match kube::discovery::group(&self.client, group).await {
            Ok(g) => g,
            Err(kube::Error::Discovery(_)) => return Err(no_match()),
            Err(e) => return Err(api_error_text(&e, "", "")),
        };
        let mut versions: Vec<String> = Vec::new();
        for v in std::iter::once(version)
            .chain(api_group.preferred_version())
            .chain(api_group.versions())
        {
            if !v.is_empty() && !versions.iter().any(|x| x == v) {
                versions.push(v.to_string());
            }
        }
        let found: Vec<ApiResource> = versions
            .iter()
            .flat_map(|v| api_group.versioned_resources(v))
            .filter(|(ar, _)| ar.kind == kind)
            .map(|(ar, _)| ar)
            .collect();
        if found.is_empty() {
            return Err(no_match());
        }
        self.lock().insert(key, found.clone());
        Ok(found)
    }
}

fn kube_text(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => api_error_text(other, "", ""),
    }
}

impl Cluster for KubeCluster {
    async fn get_scale(
        &self,
        namespace: &str,
        group: &str,
        version: &str,
        kind: &str,
        name: &str,
    ) -> Result<(Scale, ApiResource), String> {
        let mappings = self.rest_mappings(group, version, kind).await?;
        let mut first_err = None;
        for ar in mappings {
            let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), namespace, &ar);
            match api.get_scale(name).await {
                Ok(scale) => return Ok((scale, ar)),
                Err(e) => {
                    first_err.get_or_insert_with(|| kube_text(&e));
                }
            }
        }
        Err(first_err.unwrap_or_else(|| "unrecognized resource".to_string()))
    }

    async fn update_scale(
        &self,
        namespace: &str,
        resource: &ApiResource,
        scale: &Scale,
    ) -> Result<(), String> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, resource);
        let name = scale.metadata.name.clone().unwrap_or_default();
        api.replace_scale(&name, &PostParams::default(), scale)
            .await
            .map(|_| ())
            .map_err(|e| kube_text(&e))
    }

    async fn list_pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<Vec<Pod>, String> {
        self.pods
            .wait_until_ready()
            .await
            .map_err(|e| format!("waiting for the pod cache: {e}"))?;
        let empty = std::collections::BTreeMap::new();
        Ok(self
            .pods
            .state()
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
            .filter(|p| selector.matches(p.metadata.labels.as_ref().unwrap_or(&empty)))
            .map(|p| (**p).clone())
            .collect())
    }

    async fn update_status(&self, hpa: &HorizontalPodAutoscaler) -> Result<(), String> {
        let ns = hpa.metadata.namespace.clone().unwrap_or_default();
        let name = hpa.metadata.name.clone().unwrap_or_default();
        let api: Api<HorizontalPodAutoscaler> = Api::namespaced(self.client.clone(), &ns);
        match api.replace_status(&name, &PostParams::default(), hpa).await {
            Ok(_) => Ok(()),
            // The watch had not yet delivered this controller's previous
            // write (or a spec change): the status just computed still
            // holds, so it goes onto the latest object once.
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let mut latest = api.get(&name).await.map_err(|e| kube_text(&e))?;
                latest.status = hpa.status.clone();
                api.replace_status(&name, &PostParams::default(), &latest)
                    .await
                    .map(|_| ())
                    .map_err(|e| kube_text(&e))
            }
            Err(e) => Err(kube_text(&e)),
        }
    }
}
