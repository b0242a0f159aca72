//! The namespace controller: when a namespace is deleted, delete everything in
//! it, then remove the `kubernetes` finalizer through `namespaces/<ns>/finalize`
//! so the API server can remove the namespace (upstream's NamespacedResourcesDeleter).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::discovery::{Scope, verbs};
use kube::runtime::controller::{Action, Controller};
use tracing::{info, warn};

use crate::Error;

/// The finalizer the API server puts on every namespace.
pub const FINALIZER: &str = "kubernetes";

struct Ctx {
    client: kube::Client,
}

pub async fn run(client: kube::Client) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    Controller::new(namespaces, berth_runtime::reflect::informer_config())
        .run(reconcile, error_policy, Arc::new(Ctx { client }))
        .for_each(|_| async {})
        .await;
}

fn error_policy(_ns: Arc<Namespace>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    warn!(error = %err, "namespace deletion failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if ns.metadata.deletion_timestamp.is_none() {
        return Ok(Action::await_change());
    }
    let name = ns.metadata.name.clone().unwrap_or_default();
    let has_finalizer = ns
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.as_ref())
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER));
    if !has_finalizer {
        return Ok(Action::await_change());
    }
    let remaining = delete_content(&ctx.client, &name).await?;
    if !remaining.is_empty() {
        info!(namespace = %name, remaining = ?remaining, "namespace content remaining");
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    finalize(&ctx.client, &ns).await?;
    info!(namespace = %name, "namespace finalized");
    Ok(Action::await_change())
}

/// Deletes every namespaced object in `ns`; returns the resources that still
/// have objects (being deleted gracefully or held by finalizers).
async fn delete_content(client: &kube::Client, ns: &str) -> Result<Vec<String>, Error> {
    let found = crate::discovery::run(client)
        .await
        .map_err(|e| Error::Discovery(e.to_string()))?;
    let discovery = found.discovery;
    let mut remaining = Vec::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if caps.scope != Scope::Namespaced || !caps.supports_operation(verbs::LIST) {
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
            let list = api.list(&ListParams::default()).await?;
            if list.items.is_empty() {
                continue;
            }
            if caps.supports_operation(verbs::DELETE_COLLECTION) {
                api.delete_collection(&DeleteParams::background(), &ListParams::default())
                    .await?;
            } else if caps.supports_operation(verbs::DELETE) {
                for obj in &list.items {
                    if let Some(n) = &obj.metadata.name {
                        match api.delete(n, &DeleteParams::background()).await {
                            Ok(_) => {}
                            Err(kube::Error::Api(e)) if e.code == 404 => {}
                            Err(e) => return Err(e.into()),
                        }
                    }
                }
            }
            if !api
                .list(&ListParams::default().limit(1))
                .await?
                .items
                .is_empty()
            {
                remaining.push(ar.plural.clone());
            }
        }
    }
    // Objects of a group that did not answer may still be there: the
    // namespace stays until discovery succeeds, as upstream's.
    if !found.failed.is_empty() {
        return Err(Error::Discovery(format!(
            "Discovery failed for some groups, {} failing: {}",
            found.failed.len(),
            found.failed.join(", ")
        )));
    }
    Ok(remaining)
}

async fn finalize(client: &kube::Client, ns: &Namespace) -> Result<(), Error> {
    let name = ns.metadata.name.clone().unwrap_or_default();
    let mut updated = ns.clone();
    if let Some(spec) = updated.spec.as_mut()
        && let Some(f) = spec.finalizers.as_mut()
    {
        f.retain(|x| x != FINALIZER);
    }
    let api: Api<Namespace> = Api::all(client.clone());
    match api
        .replace_subresource("finalize", &name, &PostParams::default(), &updated)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
