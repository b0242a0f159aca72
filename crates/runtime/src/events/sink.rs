//! Where correlated events are written: the API server, or a fake in tests.

use std::future::Future;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::Value;

use crate::error::Error;

/// Stores events in the namespace each event names (upstream's `EventSink`).
pub trait EventSink: Send + Sync + 'static {
    /// Creates `event`.
    fn create(&self, event: &Event) -> impl Future<Output = Result<Event, Error>> + Send;

    /// Applies the strategic merge `patch` to the existing Event named by `event`.
    fn patch(
        &self,
        event: &Event,
        patch: &Value,
    ) -> impl Future<Output = Result<Event, Error>> + Send;
}

/// Writes core/v1 Events through kube-rs.
#[derive(Clone)]
pub struct KubeSink {
    client: kube::Client,
}

impl KubeSink {
    pub fn new(client: kube::Client) -> Self {
        KubeSink { client }
    }

    fn api(&self, event: &Event) -> Api<Event> {
        let ns = event.metadata.namespace.as_deref().unwrap_or("default");
        Api::namespaced(self.client.clone(), ns)
    }
}

impl EventSink for KubeSink {
    async fn create(&self, event: &Event) -> Result<Event, Error> {
        Ok(self
            .api(event)
            .create(&PostParams::default(), event)
            .await?)
    }

    async fn patch(&self, event: &Event, patch: &Value) -> Result<Event, Error> {
        let name = event.metadata.name.as_deref().unwrap_or_default();
        // Upstream sends application/strategic-merge-patch+json; for the
        // scalar fields patched here it is the same as a merge patch.
        Ok(self
            .api(event)
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await?)
    }
}
