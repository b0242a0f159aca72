//! A reflector over every object of a kind that wakes a [`Notify`] after each
//! change: the shape of the node-side controllers (ingress, service proxy, DNS),
//! which rebuild one snapshot from several stores whenever any of them changes.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::debug;

/// The watcher configuration of every informer: lists at resourceVersion=0
/// ("any version", answered from the API server's watch cache in one
/// response), as client-go's reflector lists first and relists after its
/// watch expired. The default (a quorum list in pages of 500) makes a relist of
/// 150,000 pods hundreds of store reads, whose continue tokens compaction can
/// expire before the last page ("The provided continue parameter is too old").
pub fn informer_config() -> watcher::Config {
    watcher::Config::default().any_semantic()
}

/// Starts a cluster-wide reflector for `K` (watch failures are retried with
/// back-off) and returns its store and the task feeding it (abort it to stop).
pub fn notifying_store<K>(client: &kube::Client, changed: Arc<Notify>) -> (Store<K>, JoinHandle<()>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    let stream = reflector::reflector(
        writer,
        watcher::watcher(Api::<K>::all(client.clone()), informer_config()).default_backoff(),
    );
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(_) => changed.notify_one(),
                Err(e) => debug!(kind = %K::kind(&()), error = %e, "watch failed; retrying"),
            }
        }
    });
    (reader, task)
}
