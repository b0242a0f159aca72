//! The EndpointSlice controller (upstream `pkg/controller/endpointslice`):
//! for every Service with a selector, `discovery.k8s.io/v1` EndpointSlices
//! labelled `kubernetes.io/service-name` and managed by
//! `endpointslice-controller.k8s.io`, owned by the Service (the garbage
//! collector removes them with it), at most 100 endpoints each, with the
//! ready/serving/terminating conditions. `compute` decides; this writes.

pub mod compute;
pub mod mirroring;

use std::sync::Arc;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use tokio::sync::mpsc;
use tracing::debug;

use crate::Error;
use crate::endpoints::compute::{TRIGGER_TIME, managed, selected};
use crate::endpoints::driver::{self, Caches, Key};
use crate::endpoints::pods;

/// Runs the EndpointSlice controller (the mirroring controller, [`mirroring::run`],
/// runs beside it under its own identity).
pub async fn run(client: kube::Client) {
    let (tx, rx) = mpsc::unbounded_channel();
    let owned = tokio::spawn(driver::watch_owned(
        Api::<EndpointSlice>::all(client.clone()),
        |s: &EndpointSlice| {
            let labels = s.metadata.labels.as_ref()?;
            if labels.get(compute::MANAGED_BY).map(String::as_str) != Some(compute::CONTROLLER) {
                return None;
            }
            Some((
                s.metadata.namespace.clone()?,
                labels.get(compute::SERVICE_NAME)?.clone(),
            ))
        },
        tx.clone(),
    ));
    let c = client.clone();
    driver::run(
        client,
        "endpointslice-controller",
        rx,
        tx,
        move |caches, key| sync(c.clone(), caches, key),
    )
    .await;
    owned.abort();
}

async fn sync(client: kube::Client, caches: Arc<Caches>, key: Key) -> Result<(), Error> {
    let (ns, name) = &key;
    // A deleted Service's slices are its dependents: the garbage collector's.
    let Some(svc) = caches.service(&key) else {
        return Ok(());
    };
    if !managed(&svc) || svc.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let api: Api<EndpointSlice> = Api::namespaced(client, ns);
    let existing = api
        .list(&ListParams::default().labels(&format!(
            "{}={name},{}={}",
            compute::SERVICE_NAME,
            compute::MANAGED_BY,
            compute::CONTROLLER
        )))
        .await?
        .items;
    let pods = caches.pods_in(ns);
    let selected = selected(&svc, &pods);
    let zone_of = |node: &str| {
        caches
            .nodes
            .get(&kube::runtime::reflector::ObjectRef::new(node))
            .and_then(|n| {
                n.metadata
                    .labels
                    .as_ref()?
                    .get("topology.kubernetes.io/zone")
                    .cloned()
            })
    };
    let changes = compute::reconcile(&svc, &selected, &existing, &zone_of);
    if changes.is_empty() {
        return Ok(());
    }
    let trigger = pods::last_change_trigger_time(&svc, &selected).map(pods::format_time);
    apply(&api, changes, trigger.as_deref()).await?;
    debug!(namespace = %ns, service = %name, "synced EndpointSlices");
    Ok(())
}

/// Writes `changes`, stamping written slices with the trigger time.
pub(crate) async fn apply(
    api: &Api<EndpointSlice>,
    changes: compute::Changes,
    trigger: Option<&str>,
) -> Result<(), Error> {
    let stamp = |s: &mut EndpointSlice| {
        let ann = s.metadata.annotations.get_or_insert_with(Default::default);
        match trigger {
            Some(t) => {
                ann.insert(TRIGGER_TIME.into(), t.to_string());
            }
            None => {
                ann.remove(TRIGGER_TIME);
            }
        }
    };
    let pp = PostParams::default();
    for mut s in changes.update {
        stamp(&mut s);
        let n = s.metadata.name.clone().unwrap_or_default();
        api.replace(&n, &pp, &s).await?;
    }
    for mut s in changes.create {
        stamp(&mut s);
        match api.create(&pp, &s).await {
            Ok(_) => {}
            // The namespace is terminating.
            Err(kube::Error::Api(e)) if e.code == 403 => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
    for n in changes.delete {
        match api.delete(&n, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
