//! The Endpoints controller (upstream `pkg/controller/endpoint`): for every
//! Service with a selector, an Endpoints object of the same name listing the
//! selected pods' addresses — ready ones in `addresses`, the rest in
//! `notReadyAddresses` — per resolved target port, at most 1000 addresses
//! (`endpoints.kubernetes.io/over-capacity: truncated` beyond). Services
//! without a selector are left alone; a deleted Service's Endpoints go.
//!
//! `pods` and `driver` are shared with the EndpointSlice controller.

pub mod compute;
pub mod driver;
pub mod pods;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Endpoints;
use kube::api::{Api, DeleteParams, PostParams};
use tokio::sync::mpsc;
use tracing::debug;

use crate::Error;
use driver::{Caches, Key};

pub async fn run(client: kube::Client) {
    let (tx, rx) = mpsc::unbounded_channel();
    let owned = tokio::spawn(driver::watch_deleted(
        Api::<Endpoints>::all(client.clone()),
        |e: &Endpoints| Some((e.metadata.namespace.clone()?, e.metadata.name.clone()?)),
        tx.clone(),
    ));
    let c = client.clone();
    driver::run(
        client,
        "endpoints-controller",
        rx,
        tx,
        move |caches, key| sync(c.clone(), caches, key),
    )
    .await;
    owned.abort();
}

async fn sync(client: kube::Client, caches: Arc<Caches>, key: Key) -> Result<(), Error> {
    let (ns, name) = &key;
    let api: Api<Endpoints> = Api::namespaced(client, ns);
    let Some(svc) = caches.service(&key) else {
        // The Service is gone: so are its Endpoints.
        return match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        };
    };
    if !compute::managed(&svc) || svc.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let pods = caches.pods_in(ns);
    let selected = compute::selected(&svc, &pods);
    let mut want = compute::desired(&svc, &selected);
    let current = api.get_opt(name).await?;
    if let Some(cur) = &current
        && compute::up_to_date(cur, &want)
    {
        return Ok(());
    }
    // Annotations other than ours are kept; the trigger time says when the
    // change behind this write happened.
    let mut annotations: BTreeMap<String, String> = current
        .as_ref()
        .and_then(|c| c.metadata.annotations.clone())
        .unwrap_or_default();
    annotations.remove(compute::OVER_CAPACITY);
    annotations.remove(compute::TRIGGER_TIME);
    annotations.extend(want.metadata.annotations.take().unwrap_or_default());
    match pods::last_change_trigger_time(&svc, &selected) {
        Some(t) => {
            annotations.insert(compute::TRIGGER_TIME.into(), pods::format_time(t));
        }
        None => {
            annotations.remove(compute::TRIGGER_TIME);
        }
    }
    want.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    match current {
        Some(cur) => {
            want.metadata.resource_version = cur.metadata.resource_version.clone();
            want.metadata.uid = cur.metadata.uid.clone();
            api.replace(name, &PostParams::default(), &want).await?;
            debug!(namespace = %ns, service = %name, "updated Endpoints");
        }
        None => match api.create(&PostParams::default(), &want).await {
            Ok(_) => debug!(namespace = %ns, service = %name, "created Endpoints"),
            // The namespace is terminating, or a concurrent create: nothing to do now.
            Err(kube::Error::Api(e)) if e.code == 403 || e.code == 409 => {}
            Err(e) => return Err(e.into()),
        },
    }
    Ok(())
}
