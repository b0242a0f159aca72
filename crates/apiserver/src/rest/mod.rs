//! The verbs on stored resources, one file per verb family: `read.rs` (get,
//! list), `create.rs`, `update.rs` (update, patch, apply, the read-modify-write
//! every write shares, binding), `delete.rs` (delete, deletecollection),
//! `eviction.rs` (the pods' eviction subresource and its disruption budgets) — with
//! upstream's preconditions, defaulting, admission, validation and graceful
//! deletion. This file holds what they share.

mod create;
mod delete;
mod eviction;
mod read;
mod update;

pub use read::Selectors;

use std::sync::Arc;

use base64::Engine;
use berth_api::registry::ResourceType;
use berth_api::selector::{FieldSelector, LabelSelector};
use berth_api::user::UserInfo;
use berth_store::{KeyValue, RangeRequest, Store, StoreError};
use serde_json::{Value, json};

use crate::admission;
use crate::decode::{self, FieldValidation};
use crate::objects;
use crate::request::{Query, ResourcePath};
use crate::status::{ApiError, ApiResult};
use crate::strategy::{self, UpdateScope};

/// A successful reply: HTTP code, body, and `Warning` headers.
pub struct Reply {
    pub code: u16,
    pub body: Value,
    pub warnings: Vec<String>,
}

impl Reply {
    pub fn ok(body: Value) -> Self {
        Reply {
            code: 200,
            body,
            warnings: Vec::new(),
        }
    }
}

/// How many times a colliding generated name is generated again.
const GENERATE_NAME_RETRIES: usize = 7;

/// How many times a patch re-reads and re-applies after a concurrent write.
const PATCH_RETRIES: usize = 16;

pub struct Rest {
    pub store: Arc<dyn Store>,
    pub cache: Arc<crate::watchcache::WatchCache>,
    /// Service cluster IPs and node ports.
    pub services: Arc<crate::alloc::Allocator>,
    /// The enabled admission plugins, run on every write.
    pub admission: crate::admission::Chain,
    /// The authorizers (RBAC's escalation checks ask them too).
    pub authorizer: Arc<crate::authorization::Authorizer>,
}

/// Defaulting on decode: upstream's SetDefaults_* for built-in kinds, the
/// schema's `default`s for custom ones.
pub(crate) fn apply_defaults(rt: &ResourceType, obj: &mut Value) {
    match rt.custom {
        Some(cr) => crate::apiextensions::customresource::apply_defaults(cr, obj),
        None => berth_api::defaults::apply_defaults(rt.group, rt.version, rt.kind, obj),
    }
}

/// Sets the replica count a scale write asks for: `spec.replicas` for built-in
/// kinds, the CRD's `specReplicasPath` for custom ones.
fn set_scale_replicas(rt: &ResourceType, obj: &mut Value, replicas: i64) -> ApiResult<()> {
    match rt.custom {
        Some(cr) => crate::apiextensions::customresource::set_replicas(cr, obj, replicas),
        None => {
            obj["spec"]["replicas"] = json!(replicas);
            Ok(())
        }
    }
}

/// Core Services: their writes claim and release cluster IPs and node ports.
fn is_service(rt: &ResourceType) -> bool {
    rt.strategy == berth_api::registry::Strategy::Service
}

fn name_of(rp: &ResourcePath) -> ApiResult<&str> {
    rp.name.as_deref().ok_or_else(ApiError::method_not_allowed)
}

fn ns_of(rp: &ResourcePath) -> Option<&str> {
    if rp.rt.namespaced {
        rp.namespace.as_deref()
    } else {
        None
    }
}

impl Rest {
    /// Every stored object of a cluster-scoped resource (admission reads classes).
    pub(crate) async fn all_stored(&self, rt: &ResourceType) -> ApiResult<Vec<Value>> {
        let resp = self
            .store
            .range(RangeRequest {
                prefix: objects::prefix(rt),
                ..Default::default()
            })
            .await?;
        resp.kvs.iter().map(objects::decode).collect()
    }

    async fn current(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> ApiResult<(Value, KeyValue)> {
        match self.store.get(&objects::key(rt, ns, name)).await? {
            Some(kv) => Ok((objects::decode(&kv)?, kv)),
            None => Err(ApiError::not_found(rt, name)),
        }
    }

    /// The object a write starts from: from the watch cache when `cached` (as
    /// upstream's GuaranteedUpdate starts from its cache), else from the store.
    /// Every write based on it is guarded by its mod revision, so a cached
    /// copy that is behind only costs a retry; the flag says which it was.
    async fn current_for_write(&self, at: &At<'_>, cached: bool) -> ApiResult<Base> {
        if cached {
            let key = objects::key(at.rt, at.ns, at.name);
            if let Some(s) = self.cache.get(&key) {
                let kv = KeyValue {
                    key,
                    value: s.bytes.clone(),
                    create_revision: 0,
                    mod_revision: s.mod_revision,
                    version: 0,
                };
                return Ok(Base {
                    obj: objects::decode(&kv)?,
                    kv,
                    cached: true,
                });
            }
        }
        let (obj, kv) = self.current(at.rt, at.ns, at.name).await?;
        Ok(Base {
            obj,
            kv,
            cached: false,
        })
    }

    /// Converts a stored object to the version the request asked for.
    fn to_version(&self, rt: &ResourceType, obj: Value) -> Value {
        berth_api::conversion::to_version(rt, obj)
    }

    fn to_storage(&self, rt: &ResourceType, obj: Value) -> Value {
        berth_api::conversion::to_storage(rt, obj)
    }
    /// Validation, after defaulting and the strategy's mutations; 422 with field causes.
    fn validate(&self, rt: &ResourceType, obj: &Value, old: Option<&Value>) -> ApiResult<()> {
        let errs = match rt.custom {
            Some(cr) => crate::apiextensions::customresource::validate(rt, cr, obj, old),
            None => berth_api::validation::validate(rt, obj, old),
        };
        self.invalid_if_any(rt, obj, errs)
    }

    /// 422 Invalid with field causes when `errs` is not empty.
    fn invalid_if_any(
        &self,
        rt: &ResourceType,
        obj: &Value,
        errs: Vec<berth_api::validation::FieldError>,
    ) -> ApiResult<()> {
        if errs.is_empty() {
            return Ok(());
        }
        let name = objects::name(obj).unwrap_or("").to_string();
        let causes = errs.iter().map(|e| e.to_cause()).collect();
        let message = berth_api::validation::invalid_message(
            &berth_api::validation::qualified_kind(rt.group, rt.kind),
            &name,
            &errs,
        );
        Err(ApiError::invalid(rt, &name, message, causes))
    }
}

/// An object under deletion may go once its finalizers are gone — except a
/// graceful pod, which the node deletes (with grace 0) when its containers
/// stopped, and what its strategy holds back (a namespace still being emptied).
fn deletion_ready(rt: &ResourceType, obj: &Value) -> bool {
    let grace = obj
        .get("metadata")
        .and_then(|m| m.get("deletionGracePeriodSeconds"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    grace == 0 && !strategy::for_resource(rt).delete_waits(obj)
}

/// Sets a condition in `status.conditions`, replacing one of the same type.
fn set_condition(obj: &mut Value, cond: Value) {
    if !obj["status"].is_object() {
        obj["status"] = json!({});
    }
    if !obj["status"]["conditions"].is_array() {
        obj["status"]["conditions"] = json!([]);
    }
    if let Some(list) = obj["status"]["conditions"].as_array_mut() {
        list.retain(|c| c.get("type") != cond.get("type"));
        list.push(cond);
    }
}

fn success_status(rt: &ResourceType, name: &str, obj: &Value) -> Value {
    let mut details = json!({"name": name, "kind": rt.plural, "uid": objects::meta_str(obj, "uid").unwrap_or("")});
    if !rt.group.is_empty() {
        details["group"] = json!(rt.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// The autoscaling/v1 Scale of a scalable object.
pub fn scale_of(rt: &ResourceType, obj: &Value) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let mut scale_meta = json!({});
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(k) {
            scale_meta[k] = v.clone();
        }
    }
    if let Some(cr) = rt.custom {
        return crate::apiextensions::customresource::scale_of(cr, obj, scale_meta);
    }
    let selector = match rt.kind {
        "ReplicationController" => obj["spec"]["selector"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default(),
        _ => obj
            .get("spec")
            .and_then(|s| s.get("selector"))
            .and_then(|sel| berth_api::selector::LabelSelector::from_meta(sel).ok())
            .map(|sel| sel.to_string())
            .unwrap_or_default(),
    };
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": {"replicas": obj.get("spec").and_then(|s| s.get("replicas")).cloned().unwrap_or(json!(0))},
        "status": {
            "replicas": obj.get("status").and_then(|s| s.get("replicas")).cloned().unwrap_or(json!(0)),
            "selector": selector,
        },
    })
}

/// The object a write names.
struct At<'a> {
    rt: &'a ResourceType,
    ns: Option<&'a str>,
    name: &'a str,
}

/// What a write starts from: the current object, its key-value, and whether
/// it came from the watch cache (then possibly behind the store).
struct Base {
    obj: Value,
    kv: KeyValue,
    cached: bool,
}

/// How one read-modify-write behaves.
struct WriteOpts {
    /// The resourceVersion the client based its write on (then no retry on conflict).
    precondition: Option<String>,
    dry_run: bool,
    managed: Managed,
    /// Who writes (None: the API server itself), for admission.
    user: Option<UserInfo>,
}

/// How a write updates `metadata.managedFields`.
enum Managed {
    /// An Update entry for this manager (from `fieldManager` or the user agent).
    Update {
        manager: String,
        subresource: Option<String>,
    },
    /// The write set managedFields itself (server-side apply).
    AsIs,
}

impl Managed {
    fn update(q: &Query, subresource: Option<&str>) -> Self {
        let manager = q
            .get("fieldManager")
            .map(String::from)
            .unwrap_or_else(|| berth_api::ssa::manager_from_user_agent(&q.user_agent));
        Managed::Update {
            manager,
            subresource: subresource.map(String::from),
        }
    }

    fn record(&self, rt: &ResourceType, old: Option<&Value>, new: &mut Value) -> ApiResult<()> {
        let Managed::Update {
            manager,
            subresource,
        } = self
        else {
            return Ok(());
        };
        let now = objects::now_rfc3339();
        let api_version = rt.api_version();
        let ignored =
            berth_api::ssa::reset_fields(rt.has_subresource("status"), subresource.as_deref());
        let req = berth_api::ssa::Request {
            manager,
            api_version: &api_version,
            now: &now,
            subresource: subresource.as_deref(),
            ignored: &ignored,
        };
        let name = objects::name(new).unwrap_or("").to_string();
        // managedFields a client wrote itself must at least decode.
        let sent = new.pointer("/metadata/managedFields");
        if sent.is_some() && sent != old.and_then(|o| o.pointer("/metadata/managedFields")) {
            berth_api::ssa::validate_managed_fields(new)
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
        }
        berth_api::ssa::update_managed_fields(old, new, &req).map_err(|e| ssa_error(rt, &name, e))
    }
}

fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        409 => "Conflict",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        _ => "InternalError",
    }
}

/// An apply conflict is a 409 with one `FieldManagerConflict` cause per field.
fn ssa_error(rt: &ResourceType, name: &str, e: berth_api::ssa::SsaError) -> ApiError {
    let code = e.status_code();
    let mut err = ApiError::new(code, reason_for(code), e.to_string());
    if let berth_api::ssa::SsaError::Conflicts(c) = &e {
        let mut details = json!({"name": name, "kind": rt.plural, "causes": c.causes()});
        if !rt.group.is_empty() {
            details["group"] = json!(rt.group);
        }
        err.details = Some(details);
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_of_deployment() {
        let rt = berth_api::registry::lookup("apps", "v1", "deployments").unwrap();
        let d = json!({"metadata": {"name": "d", "namespace": "n", "resourceVersion": "3"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}}, "status": {"replicas": 1}});
        let s = scale_of(rt, &d);
        assert_eq!(s["spec"]["replicas"], 2);
        assert_eq!(s["status"]["replicas"], 1);
        assert_eq!(s["status"]["selector"], "app=x");
        assert_eq!(s["metadata"]["resourceVersion"], "3");
    }
}
