//! CustomResourceDefinitions, served as upstream's apiextensions-apiserver serves
//! them, inside the one API server:
//! - the CRD strategy here (status reset on create, `storedVersions` kept, the
//!   cleanup finalizer added on delete);
//! - a controller that accepts names and establishes CRDs ([`naming`]), installs the
//!   Established ones into the registry (`berth_api::registry::set_custom`) before it
//!   reports them Established, and on deletion removes every custom object before
//!   the CRD goes ([`finalizer`]);
//! - the custom objects' own rules in [`customresource`] (schema pruning,
//!   defaulting and validation, status and scale subresources).

pub mod customresource;
mod finalizer;
pub mod naming;
pub mod openapi;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use berth_api::crd;
use berth_api::registry::{self, ResourceType};
use serde_json::{Value, json};

use crate::objects;
use crate::request::{Query, ResourcePath};
use crate::rest::Rest;

/// Where CRDs are stored.
pub const CRD_PREFIX: &str = "/registry/customresourcedefinitions.apiextensions.k8s.io/";

fn crd_rt() -> Option<&'static ResourceType> {
    registry::lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

/// The CRD strategy's create rules: status starts empty but for the
/// `storedVersions` the storage version is recorded in (upstream's PrepareForCreate).
pub fn prepare_for_create(obj: &mut Value) {
    let stored: Vec<String> = crd::storage_version(obj)
        .map(|v| vec![v.to_string()])
        .unwrap_or_default();
    obj["status"] = json!({
        "acceptedNames": {"plural": "", "kind": ""},
        "conditions": [],
        "storedVersions": stored,
    });
}

/// The CRD strategy's update rules on the main endpoint: a new storage version
/// is added to `status.storedVersions` (the rest of status is kept from `old`
/// by the status-subresource rule).
pub fn prepare_for_update(new: &mut Value, old: &Value) {
    let mut stored: Vec<Value> = old
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(v) = crd::storage_version(new)
        && !stored.iter().any(|s| s == v)
    {
        stored.push(json!(v));
    }
    if !new.get("status").is_some_and(Value::is_object) {
        new["status"] = json!({});
    }
    new["status"]["storedVersions"] = Value::Array(stored);
}

/// The CEL rules of every version's schema compile and fit the cost limits,
/// reported where upstream's v1 conversion puts them: under
/// `spec.validation.openAPIV3Schema` when all versions share one schema.
pub fn validate_cel_rules(crd: &Value) -> Vec<berth_api::validation::FieldError> {
    let versions: Vec<&Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    let schemas: Vec<Option<&Value>> = versions
        .iter()
        .map(|v| v.pointer("/schema/openAPIV3Schema"))
        .collect();
    let shared = schemas.windows(2).all(|w| w[0] == w[1]);
    match (shared, schemas.first()) {
        (true, Some(Some(schema))) => {
            berth_cel::validate_rules(schema, "spec.validation.openAPIV3Schema")
        }
        _ => schemas
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|s| (i, s)))
            .flat_map(|(i, s)| {
                berth_cel::validate_rules(s, &format!("spec.versions[{i}].schema.openAPIV3Schema"))
            })
            .collect(),
    }
}

/// Upstream's CRD delete: the first delete adds the cleanup finalizer and the
/// `Terminating` condition; the controller removes the objects, then the finalizer.
pub fn mark_for_deletion(finalizers: &mut Vec<String>, pending: &mut Value, first: bool) {
    if !finalizers.iter().any(|f| f == crd::CLEANUP_FINALIZER) {
        finalizers.push(crd::CLEANUP_FINALIZER.to_string());
    }
    if first {
        let mut status = pending.get("status").cloned().unwrap_or(json!({}));
        naming::set_condition(
            &mut status,
            naming::new_condition(
                "Terminating",
                true,
                "InstanceDeletionPending",
                "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
            ),
            &objects::now_rfc3339(),
        );
        pending["status"] = status;
    }
}

/// Every CRD in the watch cache.
fn all_crds(rest: &Rest) -> Vec<Value> {
    let (items, _) = rest.cache.snapshot(CRD_PREFIX);
    items
        .iter()
        .filter_map(|(_, s)| objects::decode_at(&s.bytes, s.mod_revision).ok())
        .collect()
}

/// The served resources built for each CRD, by name, with what they were built
/// from: a CRD whose spec and names did not change keeps its resources (their
/// strings and facts live for the process, so they are built once per change).
static BUILT: Mutex<Option<HashMap<String, Built>>> = Mutex::new(None);

/// A CRD's fingerprint and the resources built from it.
type Built = (String, Vec<&'static ResourceType>);

fn fingerprint(crd: &Value) -> String {
    json!([
        crd.pointer("/metadata/uid"),
        crd.get("spec"),
        crd.pointer("/status/acceptedNames"),
        crd.pointer("/metadata/deletionTimestamp").is_some(),
    ])
    .to_string()
}

/// Serves exactly the Established CRDs among `crds`.
fn install(crds: &[Value]) {
    let mut guard = match BUILT.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    let built = guard.get_or_insert_with(HashMap::new);
    let mut served = Vec::new();
    let mut keep = std::collections::HashSet::new();
    let mut established: Vec<&Value> = crds.iter().filter(|c| crd::is_established(c)).collect();
    established.sort_by_key(|c| objects::name(c).unwrap_or("").to_string());
    for c in established {
        let name = objects::name(c).unwrap_or("").to_string();
        let fp = fingerprint(c);
        let entry = built
            .entry(name.clone())
            .or_insert_with(|| (String::new(), Vec::new()));
        if entry.0 != fp {
            let rts = crd::resource_types(c)
                .into_iter()
                .map(|rt| &*Box::leak(Box::new(rt)))
                .collect();
            *entry = (fp, rts);
        }
        served.extend(entry.1.iter().copied());
        keep.insert(name);
    }
    built.retain(|k, _| keep.contains(k));
    registry::set_custom(served);
}

/// Installs the CRDs the cache holds at start, so their resources are served
/// from the first request.
pub fn install_from_cache(rest: &Rest) {
    install(&all_crds(rest));
}

/// The CRD controllers: names, establishing, cleanup on deletion. Runs for the
/// life of the server.
pub async fn run(state: Arc<crate::server::State>) {
    let rest = &state.rest;
    loop {
        let sub = match rest.cache.subscribe(CRD_PREFIX, None).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = ?e, "CRD controller: watching CRDs");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut rev = sub.revision;
        let mut feed = sub.feed;
        loop {
            let pending = reconcile(rest).await;
            let next = if pending {
                // Objects of a deleted CRD are still going: look again soon.
                match tokio::time::timeout(std::time::Duration::from_secs(1), feed.next(rev)).await
                {
                    Ok(r) => r,
                    Err(_) => continue,
                }
            } else {
                feed.next(rev).await
            };
            match next {
                Ok((_, latest)) => rev = rev.max(latest),
                Err(e) => {
                    tracing::debug!(error = ?e, "CRD controller: resubscribing");
                    break;
                }
            }
        }
    }
}

/// One pass over every CRD; `true` while a deleted CRD still has objects.
async fn reconcile(rest: &Rest) -> bool {
    let mut crds = all_crds(rest);
    // Older CRDs win a name both ask for, as upstream's queue order does.
    crds.sort_by_key(|c| {
        (
            objects::meta_str(c, "creationTimestamp")
                .unwrap_or("")
                .to_string(),
            objects::name(c).unwrap_or("").to_string(),
        )
    });
    let now = objects::now_rfc3339();
    let stored = crds.clone();
    for i in 0..crds.len() {
        if objects::is_deleting(&crds[i]) {
            continue;
        }
        let status = naming::desired_status(&crds[i], &crds, &now);
        crds[i]["status"] = status;
    }
    // Serve first, then say so: a client that sees Established finds the resource.
    install(&crds);
    for (want, had) in crds.iter().zip(&stored) {
        if want.get("status") != had.get("status")
            && let Err(e) = write_status(rest, want).await
        {
            tracing::debug!(crd = objects::name(want).unwrap_or(""), error = %e.message, "CRD status");
        }
    }
    // Local APIServices follow the served custom group-versions.
    crate::aggregator::autoregister::sync(rest).await;
    let mut pending = false;
    for c in crds.iter().filter(|c| objects::is_deleting(c)) {
        if objects::finalizers(c)
            .iter()
            .any(|f| f == crd::CLEANUP_FINALIZER)
        {
            pending |= finalizer::finalize(rest, c).await;
        }
    }
    pending
}

fn crd_path(name: &str, subresource: Option<&str>) -> Option<ResourcePath> {
    Some(ResourcePath {
        rt: crd_rt()?,
        namespace: None,
        name: Some(name.to_string()),
        subresource: subresource.map(String::from),
        legacy_watch: false,
    })
}

/// Writes a CRD's status (guarded by its resourceVersion: a newer CRD is
/// reconciled again from its own event).
async fn write_status(rest: &Rest, crd: &Value) -> crate::status::ApiResult<Value> {
    let name = objects::name(crd).unwrap_or("").to_string();
    let rp = crd_path(&name, Some("status"))
        .ok_or_else(|| crate::status::ApiError::internal("CRDs are not registered"))?;
    rest.update(&rp, crd.clone(), &Query::default())
        .await
        .map(|r| r.body)
}
