//! Pod helpers shared by the StatefulSet, DaemonSet and Job controllers:
//! state predicates (upstream `podutil`) and claiming pods by selector
//! (upstream's `PodControllerRefManager`).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Resource;
use kube::api::{Api, ListParams, Patch, PatchParams};
use tracing::info;

use crate::Error;
use crate::replicaset::{controller_ref, owner_ref, owner_refs_patch, selector_matches};

pub fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn is_running_ready(p: &Pod) -> bool {
    phase(p) == "Running" && is_ready(p)
}

pub fn is_terminating(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some()
}

/// Succeeded or Failed: the pod will not run again.
pub fn is_finished(p: &Pod) -> bool {
    matches!(phase(p), "Succeeded" | "Failed")
}

pub fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

pub fn label<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// Pods controlled by `owner` that match `selector`, after adopting matching
/// orphans (for which `adoptable` holds) and releasing ours that stopped
/// matching. An owner being deleted neither adopts nor releases.
pub async fn claim<K: Resource<DynamicType = ()>>(
    api: &Api<Pod>,
    owner: &K,
    selector: &LabelSelector,
    adoptable: impl Fn(&Pod) -> bool,
) -> Result<Vec<Pod>, Error> {
    let uid = owner.meta().uid.clone().unwrap_or_default();
    let deleting = owner.meta().deletion_timestamp.is_some();
    let mut out = Vec::new();
    for pod in api.list(&ListParams::default()).await?.items {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let matches = selector_matches(selector, &labels);
        let refs = pod.metadata.owner_references.clone().unwrap_or_default();
        let patch = match controller_ref(&pod.metadata) {
            Some(r) if r.uid == uid && (matches || deleting) => {
                out.push(pod);
                continue;
            }
            Some(r) if r.uid == uid => owner_refs_patch(
                &pod.metadata,
                refs.into_iter().filter(|r| r.uid != uid).collect(),
            ),
            None if matches && !deleting && !is_terminating(&pod) && adoptable(&pod) => {
                let mut refs = refs;
                refs.push(owner_ref(owner));
                owner_refs_patch(&pod.metadata, refs)
            }
            _ => continue,
        };
        let pname = name(&pod);
        match api
            .patch(&pname, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(p) if matches => {
                info!(pod = %pname, "adopted pod");
                out.push(p);
            }
            Ok(_) => info!(pod = %pname, "released pod that no longer matches"),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

/// Deletes a pod, guarded by its uid; a pod already gone is fine.
pub async fn delete(api: &Api<Pod>, p: &Pod) -> Result<(), Error> {
    let dp = kube::api::DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: p.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&name(p), &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
