//! The verbs on stored resources: get, list, create, update, patch, delete,
//! deletecollection — with upstream's preconditions, defaulting, validation and
//! graceful deletion.

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

/// Core Services: their writes claim and release cluster IPs and node ports.
fn is_service(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.kind == "Service"
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

/// Label and field selectors of a list or watch request.
pub struct Selectors {
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
    rt: &'static ResourceType,
}

impl Selectors {
    pub fn from_query(rt: &'static ResourceType, q: &Query) -> ApiResult<Self> {
        let labels =
            match q.get("labelSelector") {
                Some(s) => Some(LabelSelector::parse(s).map_err(|e| {
                    ApiError::bad_request(format!("unable to parse requirement: {e}"))
                })?),
                None => None,
            };
        let fields = match q.get("fieldSelector") {
            Some(s) => {
                let fs = FieldSelector::parse(s)
                    .map_err(|e| ApiError::bad_request(format!("invalid field selector: {e}")))?;
                for f in fs.terms().iter().map(|t| t.field.as_str()) {
                    if !berth_api::selector::supported_field((rt.kind, rt.group), f) {
                        return Err(ApiError::bad_request(format!(
                            "field label not supported: {f}"
                        )));
                    }
                }
                Some(fs)
            }
            None => None,
        };
        Ok(Selectors { labels, fields, rt })
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_none() && self.fields.is_none()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        if let Some(l) = &self.labels
            && !l.matches(&objects::labels(obj))
        {
            return false;
        }
        if let Some(f) = &self.fields {
            let key = (self.rt.kind, self.rt.group);
            if !f.matches(|field| berth_api::selector::field_value(key, obj, field)) {
                return false;
            }
        }
        true
    }
}

/// The continue token: where the next page starts and at which revision.
#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: i64,
    start: String,
}

fn encode_continue(rv: i64, last_key: &str) -> String {
    let t = ContinueToken {
        v: "meta.k8s.io/v1".into(),
        rv,
        start: last_key.to_string(),
    };
    base64::engine::general_purpose::URL_SAFE.encode(serde_json::to_vec(&t).unwrap_or_default())
}

fn decode_continue(token: &str, prefix: &str) -> ApiResult<ContinueToken> {
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: the continue token is malformed".to_string(),
        )
    };
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .map_err(|_| bad())?;
    let t: ContinueToken = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    if t.v != "meta.k8s.io/v1" || !t.start.starts_with(prefix) {
        return Err(bad());
    }
    Ok(t)
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

    pub async fn get(&self, rp: &ResourcePath) -> ApiResult<Value> {
        let name = name_of(rp)?;
        let (obj, _) = self.current(rp.rt, ns_of(rp), name).await?;
        match rp.subresource.as_deref() {
            Some("scale") => Ok(scale_of(rp.rt, &obj)),
            None | Some("status") | Some("ephemeralcontainers") | Some("resize") => {
                Ok(self.to_version(rp.rt, obj))
            }
            Some(_) => Err(ApiError::method_not_allowed()),
        }
    }

    /// The stored objects a list request selects, and the list's metadata.
    async fn list_kvs(&self, rp: &ResourcePath, q: &Query) -> ApiResult<(Vec<KeyValue>, Value)> {
        let rt = rp.rt;
        let prefix = objects::list_prefix(rt, ns_of(rp));
        let sel = Selectors::from_query(rt, q)?;
        let limit = q.int("limit")?.unwrap_or(0).max(0) as usize;
        let (mut start_after, mut revision) = (None, 0i64);
        if let Some(token) = q.get("continue") {
            let t = decode_continue(token, &prefix)?;
            start_after = Some(t.start);
            revision = t.rv;
        } else if let Some(rv) = q.get("resourceVersion") {
            let rv: i64 = rv
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?;
            match q.get("resourceVersionMatch") {
                Some("Exact") => revision = rv,
                None | Some("NotOlderThan") => {
                    let current = self.store.current_revision().await?;
                    if rv > current {
                        return Err(ApiError::timeout(format!(
                            "Too large resource version: {rv}, current: {current}"
                        )));
                    }
                }
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "invalid resourceVersionMatch: {other}"
                    )));
                }
            }
        }
        // A whole list (no paging, no exact revision) comes from the watch cache
        // once it has caught up with the store, as upstream's consistent reads do.
        // So does any list at resourceVersion=0 ("any version", what informers
        // send when they relist), whose limit upstream's cache ignores: a relist
        // of 100,000 pods is then one snapshot, not 200 paged store reads.
        let any_version = q.get("resourceVersion") == Some("0");
        if (limit == 0 || any_version) && revision == 0 && q.get("continue").is_none() {
            let target = match q.get("resourceVersion") {
                Some("0") => None,
                Some(rv) => rv.parse::<i64>().ok(),
                None => Some(self.store.current_revision().await?),
            };
            let ready = match target {
                Some(t) => self.cache.wait_for(t).await.is_ok(),
                None => true,
            };
            if ready {
                let (objs, rev) = self.cache.snapshot(&prefix);
                let mut items = Vec::with_capacity(objs.len());
                for (key, stored) in objs {
                    let kv = KeyValue {
                        key,
                        value: stored.bytes.clone(),
                        create_revision: 0,
                        mod_revision: stored.mod_revision,
                        version: 0,
                    };
                    if sel.is_empty() || sel.matches(&objects::decode(&kv)?) {
                        items.push(kv);
                    }
                }
                return Ok((items, json!({ "resourceVersion": rev.to_string() })));
            }
        }
        let mut items = Vec::new();
        let mut more = false;
        let mut last_key = None;
        let mut read_rev = revision;
        let mut remaining = None;
        loop {
            let want = if limit == 0 { 0 } else { limit - items.len() };
            let resp = self
                .store
                .range(RangeRequest { prefix: prefix.clone(), start_after: start_after.clone(), limit: want, revision: read_rev })
                .await
                .map_err(|e| match e {
                    StoreError::Compacted { .. } if q.get("continue").is_some() => ApiError::gone(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                    ),
                    other => other.into(),
                })?;
            read_rev = resp.revision;
            for kv in resp.kvs.iter() {
                last_key = Some(kv.key.clone());
                if sel.is_empty() || sel.matches(&objects::decode(kv)?) {
                    items.push(kv.clone());
                }
                if limit > 0 && items.len() >= limit {
                    break;
                }
            }
            let consumed_all = last_key.as_ref() == resp.kvs.last().map(|kv| &kv.key);
            if limit > 0 && items.len() >= limit {
                more = resp.more || !consumed_all;
                if more && sel.is_empty() {
                    remaining = Some(resp.count.saturating_sub(resp.kvs.len()) as i64);
                }
                break;
            }
            if !resp.more {
                break;
            }
            start_after = last_key.clone();
        }
        let mut meta = json!({ "resourceVersion": read_rev.to_string() });
        if more {
            if let Some(k) = &last_key {
                meta["continue"] = json!(encode_continue(read_rev, k));
            }
            if let Some(r) = remaining {
                meta["remainingItemCount"] = json!(r);
            }
        }
        Ok((items, meta))
    }

    pub async fn list(&self, rp: &ResourcePath, q: &Query) -> ApiResult<Value> {
        let rt = rp.rt;
        let (kvs, meta) = self.list_kvs(rp, q).await?;
        let items = kvs
            .iter()
            .map(|kv| objects::decode(kv).map(|o| self.to_version(rt, o)))
            .collect::<ApiResult<Vec<_>>>()?;
        Ok(json!({
            "kind": rt.list_kind,
            "apiVersion": rt.api_version(),
            "metadata": meta,
            "items": items,
        }))
    }

    /// A plain JSON list assembled from the stored bytes without decoding them,
    /// for the common `GET` of a list (`None` when a conversion is needed).
    pub async fn list_bytes(&self, rp: &ResourcePath, q: &Query) -> ApiResult<Option<Vec<u8>>> {
        let rt = rp.rt;
        if !rt.is_storage_version() {
            return Ok(None);
        }
        let (kvs, meta) = self.list_kvs(rp, q).await?;
        let head = json!({"kind": rt.list_kind, "apiVersion": rt.api_version(), "metadata": meta})
            .to_string();
        let mut out = Vec::with_capacity(
            head.len() + kvs.iter().map(|kv| kv.value.len() + 32).sum::<usize>() + 16,
        );
        // `{...}` → `{..., "items":[a,b]}`
        out.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
        out.extend_from_slice(b",\"items\":[");
        for (i, kv) in kvs.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match objects::with_resource_version(&kv.value, kv.mod_revision) {
                Some(bytes) => out.extend_from_slice(&bytes),
                None => out.extend_from_slice(
                    &serde_json::to_vec(&objects::decode(kv)?).unwrap_or_default(),
                ),
            }
        }
        out.extend_from_slice(b"]}");
        Ok(Some(out))
    }

    /// Validation, after defaulting and the strategy's mutations; 422 with field causes.
    fn validate(&self, rt: &ResourceType, obj: &Value, old: Option<&Value>) -> ApiResult<()> {
        let errs = berth_api::validation::validate(rt.group, rt.kind, obj, old);
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

    pub async fn create(&self, rp: &ResourcePath, body: Value, q: &Query) -> ApiResult<Reply> {
        self.create_with(rp, body, q, &Managed::update(q, None))
            .await
    }

    async fn create_with(
        &self,
        rp: &ResourcePath,
        body: Value,
        q: &Query,
        managed: &Managed,
    ) -> ApiResult<Reply> {
        let rt = rp.rt;
        if rp.name.is_some() {
            return Err(ApiError::method_not_allowed());
        }
        let validation = FieldValidation::parse(q.get("fieldValidation"))?;
        let dry_run = q.dry_run()?;
        let decode::Decoded { mut obj, warnings } = decode::decode_object(rt, body, validation)?;
        let meta = objects::meta_mut(&mut obj)
            .ok_or_else(|| ApiError::bad_request("object is not a JSON object"))?;
        // Namespace: from the URL; a different one in the body is an error.
        if rt.namespaced {
            let url_ns = rp
                .namespace
                .clone()
                .ok_or_else(ApiError::method_not_allowed)?;
            match meta.get("namespace").and_then(Value::as_str) {
                Some(ns) if !ns.is_empty() && ns != url_ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    meta.insert("namespace".into(), json!(url_ns));
                }
            }
        } else {
            meta.remove("namespace");
        }
        let generated = meta
            .get("name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        let name = match meta
            .get("name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            Some(n) => n.to_string(),
            None => match meta
                .get("generateName")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                Some(g) => {
                    let n = berth_api::validation::generate_name(g, rand::random::<u64>);
                    meta.insert("name".into(), json!(n));
                    n
                }
                None => String::new(),
            },
        };
        for k in [
            "uid",
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            meta.remove(k);
        }
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".into(), json!(objects::now_rfc3339()));
        // Upstream's order: defaulting (decode), mutating admission, strategy, validation.
        berth_api::defaults::apply_defaults(rt.group, rt.version, rt.kind, &mut obj);
        let attrs = admission::Attributes {
            operation: admission::Operation::Create,
            rt,
            subresource: None,
            namespace: ns_of(rp),
            name: &name,
            user: q.user.as_ref(),
            old: None,
            dry_run,
        };
        self.admission.admit(self, &attrs, &mut obj).await?;
        strategy::prepare_for_create(rt, &mut obj, q.user.as_ref());
        self.validate(rt, &obj, None)?;
        self.invalid_if_any(rt, &obj, strategy::validate(rt, None, &obj, None))?;
        managed.record(rt, None, &mut obj)?;
        crate::rbac::confirm_no_escalation(self, &attrs, &obj)?;
        self.admission.validate(self, &attrs, Some(&obj)).await?;
        // As upstream's BeginCreate: after field management, so the fields the
        // allocator fills are not the client's.
        let claims = if is_service(rt) {
            self.services.prepare_create(&mut obj)?;
            self.services.claim(&mut obj, None, dry_run).await?
        } else {
            Default::default()
        };
        let created = self.create_stored(rp, obj, name, generated, dry_run).await;
        if created.is_err() {
            self.services.undo(claims).await;
        }
        Ok(Reply {
            code: 201,
            body: created?,
            warnings,
        })
    }

    /// The store write of a create (a colliding generated name is generated again).
    async fn create_stored(
        &self,
        rp: &ResourcePath,
        obj: Value,
        name: String,
        generated: bool,
        dry_run: bool,
    ) -> ApiResult<Value> {
        let rt = rp.rt;
        let mut stored = self.to_storage(rt, obj);
        let mut name = name;
        let generate = objects::meta_str(&stored, "generateName")
            .map(String::from)
            .filter(|_| generated);
        let out = if dry_run {
            if self
                .store
                .get(&objects::key(rt, ns_of(rp), &name))
                .await?
                .is_some()
            {
                return Err(ApiError::already_exists(rt, &name));
            }
            stored
        } else {
            // A generated name that collides is generated again, as upstream does.
            let mut attempts = 0;
            loop {
                let key = objects::key(rt, ns_of(rp), &name);
                match self.store.create(&key, objects::encode(&stored)?).await {
                    Ok(kv) => {
                        objects::set_resource_version(&mut stored, kv.mod_revision);
                        break stored;
                    }
                    Err(StoreError::AlreadyExists(_)) => match &generate {
                        Some(base) if attempts < GENERATE_NAME_RETRIES => {
                            attempts += 1;
                            name = berth_api::validation::generate_name(base, rand::random::<u64>);
                            if let Some(m) = objects::meta_mut(&mut stored) {
                                m.insert("name".into(), json!(name));
                            }
                        }
                        _ => return Err(ApiError::already_exists(rt, &name)),
                    },
                    Err(e) => return Err(e.into()),
                }
            }
        };
        Ok(self.to_version(rt, out))
    }

    /// PUT: replaces the object (or its status / scale).
    pub async fn update(&self, rp: &ResourcePath, body: Value, q: &Query) -> ApiResult<Reply> {
        let rt = rp.rt;
        let name = name_of(rp)?.to_string();
        let validation = FieldValidation::parse(q.get("fieldValidation"))?;
        let dry_run = q.dry_run()?;
        if rp.subresource.as_deref() == Some("scale") {
            return self.update_scale(rp, body, dry_run, q).await;
        }
        let decode::Decoded { obj, warnings } = decode::decode_object(rt, body, validation)?;
        match objects::name(&obj) {
            Some(n) if n == name => {}
            Some(n) if !n.is_empty() => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => {}
        }
        if let (Some(url_ns), Some(body_ns)) = (ns_of(rp), objects::namespace(&obj))
            && !body_ns.is_empty()
            && body_ns != url_ns
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let opts = WriteOpts {
            precondition: objects::resource_version(&obj).map(String::from),
            dry_run,
            user: q.user.clone(),
            managed: Managed::update(q, rp.subresource.as_deref()),
        };
        let out = self.write(rp, &name, &opts, |_| Ok(obj.clone())).await?;
        Ok(Reply {
            code: 200,
            body: out,
            warnings,
        })
    }

    async fn update_scale(
        &self,
        rp: &ResourcePath,
        body: Value,
        dry_run: bool,
        q: &Query,
    ) -> ApiResult<Reply> {
        let name = name_of(rp)?.to_string();
        let replicas = body
            .get("spec")
            .and_then(|s| s.get("replicas"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let opts = WriteOpts {
            precondition: objects::resource_version(&body).map(String::from),
            dry_run,
            user: q.user.clone(),
            managed: Managed::update(q, Some("scale")),
        };
        let out = self
            .write_main(rp, &name, &opts, move |mut cur| {
                cur["spec"]["replicas"] = json!(replicas);
                Ok(cur)
            })
            .await?;
        Ok(Reply::ok(scale_of(rp.rt, &out)))
    }

    pub async fn patch(
        &self,
        rp: &ResourcePath,
        content_type: &str,
        body: &[u8],
        q: &Query,
    ) -> ApiResult<Reply> {
        let rt = rp.rt;
        let name = name_of(rp)?.to_string();
        let ct = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        let validation = FieldValidation::parse(q.get("fieldValidation"))?;
        let dry_run = q.dry_run()?;
        if ct == "application/apply-patch+yaml" {
            return self.apply(rp, body, q).await;
        }
        let patch = decode::parse(&ct, body)?;
        let is_scale = rp.subresource.as_deref() == Some("scale");
        let apply_patch = move |doc: &mut Value| -> ApiResult<()> {
            match ct.as_str() {
                "application/json-patch+json" => {
                    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                        .map_err(|e| ApiError::bad_request(format!("the server rejected our request due to an error in our request: {e}")))?;
                    json_patch::patch(doc, &ops).map_err(|e| {
                        ApiError::new(422, "Invalid", format!("the server rejected our request due to an error in our request: {e}"))
                    })
                }
                "application/merge-patch+json" => {
                    if !patch.is_object() {
                        return Err(ApiError::bad_request("the patch must be a JSON object"));
                    }
                    json_patch::merge(doc, &patch);
                    Ok(())
                }
                "application/strategic-merge-patch+json" => {
                    if !patch.is_object() {
                        return Err(ApiError::bad_request("the patch must be a JSON object"));
                    }
                    // Scale has no lists: a strategic merge on it is a merge.
                    if is_scale {
                        json_patch::merge(doc, &patch);
                        return Ok(());
                    }
                    berth_api::strategic::apply(doc, &patch, rt.group, rt.version, rt.kind).map_err(
                        |e| {
                            let code = e.status_code();
                            ApiError::new(code, reason_for(code), e.to_string())
                        },
                    )
                }
                other => Err(ApiError::unsupported_media_type(other)),
            }
        };
        let warnings = std::sync::Mutex::new(Vec::new());
        if is_scale {
            let opts = WriteOpts {
                precondition: None,
                dry_run,
                user: q.user.clone(),
                managed: Managed::update(q, Some("scale")),
            };
            let out = self
                .write_main(rp, &name, &opts, |cur| {
                    let mut scale = scale_of(rt, &cur);
                    apply_patch(&mut scale)?;
                    let replicas = scale
                        .get("spec")
                        .and_then(|s| s.get("replicas"))
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                    let mut cur = cur;
                    cur["spec"]["replicas"] = json!(replicas);
                    Ok(cur)
                })
                .await?;
            return Ok(Reply::ok(scale_of(rt, &out)));
        }
        let opts = WriteOpts {
            precondition: None,
            dry_run,
            user: q.user.clone(),
            managed: Managed::update(q, rp.subresource.as_deref()),
        };
        let out = self
            .write(rp, &name, &opts, |cur| {
                let rv_before = objects::resource_version(&cur).map(String::from);
                let mut doc = cur;
                apply_patch(&mut doc)?;
                // A patch that sets resourceVersion makes it a precondition.
                let rv_after = objects::resource_version(&doc).map(String::from);
                if rv_after.is_some() && rv_after != rv_before {
                    return Err(ApiError::conflict(rt, &name));
                }
                let decoded = decode::decode_object(rt, doc, validation)?;
                // Each attempt's warnings replace the last's (a retry repeats none).
                if let Ok(mut w) = warnings.lock() {
                    *w = decoded.warnings;
                }
                Ok(decoded.obj)
            })
            .await?;
        let warnings = warnings.into_inner().unwrap_or_default();
        Ok(Reply {
            code: 200,
            body: out,
            warnings,
        })
    }

    /// Server-side apply (`application/apply-patch+yaml`): merges the applied
    /// configuration by the schema, tracks ownership in managedFields, and
    /// refuses to change another manager's field unless `force=true`.
    async fn apply(&self, rp: &ResourcePath, body: &[u8], q: &Query) -> ApiResult<Reply> {
        let rt = rp.rt;
        let name = name_of(rp)?.to_string();
        let manager = q.get("fieldManager").map(String::from).ok_or_else(|| {
            ApiError::new(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch")
        })?;
        let force = q.flag("force");
        let validation = FieldValidation::parse(q.get("fieldValidation"))?;
        let dry_run = q.dry_run()?;
        let applied = decode::parse("application/apply-patch+yaml", body)?;
        if !applied.is_object() {
            return Err(ApiError::bad_request(
                "the applied configuration must be an object",
            ));
        }
        if let Some(n) = objects::name(&applied).filter(|n| *n != name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        let subresource = rp.subresource.clone();
        let api_version = rt.api_version();
        let run = |live: Option<&Value>| -> ApiResult<Value> {
            let now = objects::now_rfc3339();
            let ignored =
                berth_api::ssa::reset_fields(rt.has_subresource("status"), subresource.as_deref());
            let req = berth_api::ssa::Request {
                manager: &manager,
                api_version: &api_version,
                now: &now,
                subresource: subresource.as_deref(),
                ignored: &ignored,
            };
            berth_api::ssa::apply(live, &applied, &req, force).map_err(|e| ssa_error(rt, &name, e))
        };
        let exists = self
            .store
            .get(&objects::key(rt, ns_of(rp), &name))
            .await?
            .is_some();
        if !exists && rp.subresource.is_none() {
            let mut merged = run(None)?;
            if let Some(m) = objects::meta_mut(&mut merged) {
                m.insert("name".into(), json!(name));
            }
            let collection = ResourcePath {
                name: None,
                ..rp.clone()
            };
            return self
                .create_with(&collection, merged, q, &Managed::AsIs)
                .await;
        }
        let warnings = std::sync::Mutex::new(Vec::new());
        let opts = WriteOpts {
            precondition: None,
            dry_run,
            user: q.user.clone(),
            managed: Managed::AsIs,
        };
        let out = self
            .write(rp, &name, &opts, |cur| {
                let merged = run(Some(&cur))?;
                let decoded = decode::decode_object(rt, merged, validation)?;
                // Each attempt's warnings replace the last's (a retry repeats none).
                if let Ok(mut w) = warnings.lock() {
                    *w = decoded.warnings;
                }
                Ok(decoded.obj)
            })
            .await?;
        Ok(Reply {
            code: 200,
            body: out,
            warnings: warnings.into_inner().unwrap_or_default(),
        })
    }

    /// Read-modify-write of one object with the endpoint's scope, retried on
    /// concurrent writes unless the caller gave a resourceVersion precondition.
    async fn write(
        &self,
        rp: &ResourcePath,
        name: &str,
        opts: &WriteOpts,
        mutate: impl Fn(Value) -> ApiResult<Value>,
    ) -> ApiResult<Value> {
        let dry_run = opts.dry_run;
        let scope = match rp.subresource.as_deref() {
            None => UpdateScope::Main,
            Some("status") => UpdateScope::Status,
            Some("ephemeralcontainers") if rp.rt.kind == "Pod" => UpdateScope::EphemeralContainers,
            Some("resize") => UpdateScope::Main,
            Some("finalize") if rp.rt.kind == "Namespace" => UpdateScope::Finalize,
            Some("approval") if crate::csr::is_csr(rp.rt) => UpdateScope::Approval,
            Some(_) => return Err(ApiError::method_not_allowed()),
        };
        let rt = rp.rt;
        let ns = ns_of(rp);
        let at = At { rt, ns, name };
        // Services claim addresses on the way: they always start from the store.
        let mut cached = !dry_run && !is_service(rt);
        for _ in 0..PATCH_RETRIES {
            let base = self.current_for_write(&at, cached).await?;
            cached = false;
            let from_cache = base.cached;
            match self.write_once(&at, opts, scope, &mutate, base).await {
                Ok(Some(v)) => return Ok(v),
                Ok(None) => continue,
                // Judged on a cached copy: decide again on the store's.
                Err(_) if from_cache => continue,
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::conflict(rt, name))
    }

    /// One attempt of [`Rest::write`] from `base`: `None` when the caller
    /// should read again and retry.
    async fn write_once(
        &self,
        at: &At<'_>,
        opts: &WriteOpts,
        scope: UpdateScope,
        mutate: &impl Fn(Value) -> ApiResult<Value>,
        base: Base,
    ) -> ApiResult<Option<Value>> {
        let (rt, ns, name) = (at.rt, at.ns, at.name);
        let (precondition, dry_run) = (&opts.precondition, opts.dry_run);
        let Base {
            obj: cur_stored,
            kv,
            cached,
        } = base;
        let cur = self.to_version(rt, cur_stored);
        if let Some(rv) = &precondition
            && rv != &kv.mod_revision.to_string()
        {
            return Err(ApiError::conflict(rt, name));
        }
        let mut new = mutate(cur.clone())?;
        if let Some(m) = objects::meta_mut(&mut new) {
            m.insert("name".into(), json!(name));
            match ns {
                Some(ns) => m.insert("namespace".into(), json!(ns)),
                None => m.remove("namespace"),
            };
        }
        berth_api::defaults::apply_defaults(rt.group, rt.version, rt.kind, &mut new);
        let attrs = admission::Attributes {
            operation: admission::Operation::Update,
            rt,
            subresource: scope.subresource(),
            namespace: ns,
            name,
            user: opts.user.as_ref(),
            old: Some(&cur),
            dry_run,
        };
        self.admission.admit(self, &attrs, &mut new).await?;
        strategy::prepare_for_update(rt, scope, &mut new, &cur);
        let service_spec = is_service(rt) && matches!(scope, UpdateScope::Main);
        if service_spec {
            self.services.prepare_update(&mut new, &cur)?;
        }
        if matches!(scope, UpdateScope::EphemeralContainers) {
            let errs = berth_api::validation::validate_ephemeral_containers_update(&new, &cur);
            self.invalid_if_any(rt, &new, errs)?;
        } else {
            self.validate(rt, &new, Some(&cur))?;
            let errs = strategy::validate(rt, Some(scope), &new, Some(&cur));
            self.invalid_if_any(rt, &new, errs)?;
        }
        opts.managed.record(rt, Some(&cur), &mut new)?;
        crate::rbac::confirm_no_escalation(self, &attrs, &new)?;
        self.admission.validate(self, &attrs, Some(&new)).await?;
        let claims = if service_spec {
            self.services.claim(&mut new, Some(&cur), dry_run).await?
        } else {
            Default::default()
        };
        let stored = self.to_storage(rt, new);
        if dry_run {
            let mut v = stored;
            objects::set_resource_version(&mut v, kv.mod_revision);
            return Ok(Some(self.to_version(rt, v)));
        }
        let written = self
            .write_stored(at, stored, &cur, &kv, cached, precondition.is_some())
            .await;
        match &written {
            Ok(Some(v)) if is_service(rt) => {
                let gone = objects::is_deleting(v) && objects::finalizers(v).is_empty();
                self.services
                    .release_unused(&cur, (!gone).then_some(v))
                    .await;
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => self.services.undo(claims).await,
        }
        written
    }

    /// The store half of [`Rest::write`]: `None` when a concurrent write
    /// won and the caller may retry (no precondition).
    async fn write_stored(
        &self,
        at: &At<'_>,
        stored: Value,
        cur: &Value,
        kv: &KeyValue,
        cached: bool,
        has_precondition: bool,
    ) -> ApiResult<Option<Value>> {
        let (rt, ns, name) = (at.rt, at.ns, at.name);
        // Compared and returned with the base's resourceVersion (encoding leaves it out).
        let mut stored = stored;
        objects::set_resource_version(&mut stored, kv.mod_revision);
        // Nothing changed: upstream writes nothing and returns the object as is.
        // `cur` is the decoded `kv` when no conversion applies.
        let unchanged = if rt.is_storage_version() {
            &stored == cur
        } else {
            stored == objects::decode(kv)?
        };
        if unchanged {
            // A cached copy may be behind: confirm against the store, as upstream does.
            if cached {
                return Ok(None);
            }
            return Ok(Some(self.to_version(rt, stored)));
        }
        let key = objects::key(rt, ns, name);
        // The last finalizer removed from an object being deleted: it goes now.
        if objects::is_deleting(&stored)
            && objects::finalizers(&stored).is_empty()
            && deletion_ready(&stored)
        {
            return match self.store.delete(&key, Some(kv.mod_revision)).await {
                Ok(_) => Ok(Some(self.to_version(rt, stored))),
                Err(StoreError::Conflict { .. }) if !has_precondition => Ok(None),
                Err(StoreError::Conflict { .. }) => Err(ApiError::conflict(rt, name)),
                Err(e) => Err(e.into()),
            };
        }
        match self
            .store
            .update(&key, objects::encode(&stored)?, kv.mod_revision)
            .await
        {
            Ok(new_kv) => {
                let mut v = stored;
                objects::set_resource_version(&mut v, new_kv.mod_revision);
                Ok(Some(self.to_version(rt, v)))
            }
            Err(StoreError::Conflict { .. }) if !has_precondition => Ok(None),
            Err(StoreError::Conflict { .. }) => Err(ApiError::conflict(rt, name)),
            Err(StoreError::NotFound(_)) => Err(ApiError::not_found(rt, name)),
            Err(e) => Err(e.into()),
        }
    }

    /// Like [`Rest::write`] but on the main resource whatever the URL's subresource (scale).
    async fn write_main(
        &self,
        rp: &ResourcePath,
        name: &str,
        opts: &WriteOpts,
        mutate: impl Fn(Value) -> ApiResult<Value>,
    ) -> ApiResult<Value> {
        let main = ResourcePath {
            subresource: None,
            ..rp.clone()
        };
        self.write(&main, name, opts, mutate).await
    }

    pub async fn delete(
        &self,
        rp: &ResourcePath,
        body: Option<Value>,
        q: &Query,
    ) -> ApiResult<Reply> {
        let rt = rp.rt;
        let name = name_of(rp)?.to_string();
        if rp.subresource.is_some() {
            return Err(ApiError::method_not_allowed());
        }
        let opts = DeleteOptions::from(body.as_ref(), q)?;
        let ns = ns_of(rp);
        let key = objects::key(rt, ns, &name);
        for _ in 0..PATCH_RETRIES {
            let (cur, kv) = self.current(rt, ns, &name).await?;
            let attrs = admission::Attributes {
                operation: admission::Operation::Delete,
                rt,
                subresource: None,
                namespace: ns,
                name: &name,
                user: q.user.as_ref(),
                old: Some(&cur),
                dry_run: opts.dry_run,
            };
            self.admission.admit(self, &attrs, &mut Value::Null).await?;
            self.admission.validate(self, &attrs, None).await?;
            if let Some(uid) = &opts.precondition_uid
                && objects::meta_str(&cur, "uid") != Some(uid.as_str())
            {
                return Err(ApiError::conflict_msg(
                    rt,
                    &name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        objects::meta_str(&cur, "uid").unwrap_or("")
                    ),
                ));
            }
            if let Some(rv) = &opts.precondition_rv
                && rv != &kv.mod_revision.to_string()
            {
                return Err(ApiError::conflict_msg(
                    rt,
                    &name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        kv.mod_revision
                    ),
                ));
            }
            let mut pending = cur.clone();
            let mut finalizers = objects::finalizers(&cur);
            match opts.propagation.as_deref() {
                Some("Foreground") if !finalizers.iter().any(|f| f == "foregroundDeletion") => {
                    finalizers.push("foregroundDeletion".into())
                }
                Some("Orphan") if !finalizers.iter().any(|f| f == "orphan") => {
                    finalizers.push("orphan".into())
                }
                _ => {}
            }
            let grace = strategy::grace_period(rt, &cur, opts.grace_period);
            let namespace_lifecycle = rt.kind == "Namespace"
                && pending
                    .get("spec")
                    .and_then(|s| s.get("finalizers"))
                    .and_then(Value::as_array)
                    .is_some_and(|f| !f.is_empty());
            let immediate = finalizers.is_empty() && grace == 0 && !namespace_lifecycle;
            if opts.dry_run {
                return Ok(Reply::ok(if immediate {
                    success_status(rt, &name, &cur)
                } else {
                    cur
                }));
            }
            if immediate {
                match self.store.delete(&key, Some(kv.mod_revision)).await {
                    Ok(_) => {
                        if is_service(rt) {
                            self.services.release_unused(&cur, None).await;
                        }
                        // Some resources answer with the deleted object, the rest with a Status (upstream's ReturnDeletedObject).
                        let body = if berth_api::openapi::RETURNS_DELETED_OBJECT
                            .contains(&(rt.group, rt.plural))
                        {
                            self.to_version(rt, cur)
                        } else {
                            success_status(rt, &name, &cur)
                        };
                        return Ok(Reply::ok(body));
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(StoreError::NotFound(_)) => return Err(ApiError::not_found(rt, &name)),
                    Err(e) => return Err(e.into()),
                }
            }
            // Graceful or finalized: mark, and let the owner of the finalizer or the node finish.
            if let Some(m) = objects::meta_mut(&mut pending) {
                if !m.contains_key("deletionTimestamp")
                    || m.get("deletionTimestamp").is_some_and(Value::is_null)
                {
                    let at = chrono::Utc::now() + chrono::Duration::seconds(grace);
                    m.insert(
                        "deletionTimestamp".into(),
                        json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                    );
                    m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                } else if let Some(old) =
                    m.get("deletionGracePeriodSeconds").and_then(Value::as_i64)
                {
                    // A shorter grace period may replace a longer one, never the reverse.
                    if grace < old {
                        let at = chrono::Utc::now() + chrono::Duration::seconds(grace);
                        m.insert(
                            "deletionTimestamp".into(),
                            json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                        );
                        m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                    }
                }
                if !finalizers.is_empty() {
                    m.insert("finalizers".into(), json!(finalizers));
                }
            }
            if rt.kind == "Namespace" {
                pending["status"]["phase"] = json!("Terminating");
            }
            match self
                .store
                .update(&key, objects::encode(&pending)?, kv.mod_revision)
                .await
            {
                Ok(new_kv) => {
                    objects::set_resource_version(&mut pending, new_kv.mod_revision);
                    return Ok(Reply::ok(self.to_version(rt, pending)));
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::conflict(rt, &name))
    }

    /// `POST pods/<name>/binding`: assigns a node, once (the scheduler's Bind).
    pub async fn bind(&self, rp: &ResourcePath, body: Value) -> ApiResult<Reply> {
        let rt = rp.rt;
        let name = name_of(rp)?.to_string();
        let node = body
            .pointer("/target/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                ApiError::new(
                    422,
                    "Invalid",
                    format!("Binding.core \"{name}\" is invalid: target.name: Required value"),
                )
            })?
            .to_string();
        let main = ResourcePath {
            subresource: None,
            ..rp.clone()
        };
        let pod_name = name.clone();
        let annotations = body.pointer("/metadata/annotations").cloned();
        self.write_raw(&main, &name, move |mut pod| {
            let name = &pod_name;
            if objects::is_deleting(&pod) {
                return Err(ApiError::conflict_msg(rt, name, "pod is being deleted, cannot be assigned to a host"));
            }
            match pod.pointer("/spec/nodeName").and_then(Value::as_str) {
                Some(n) if !n.is_empty() => {
                    return Err(ApiError::conflict_msg(rt, name, &format!("pod {name} is already assigned to node \"{n}\"")));
                }
                _ => {}
            }
            pod["spec"]["nodeName"] = json!(node);
            // As upstream's assignPod: the Binding's annotations land on the pod.
            if let Some(Value::Object(annotations)) = annotations.as_ref()
                && !annotations.is_empty()
            {
                let meta = &mut pod["metadata"];
                if !meta["annotations"].is_object() {
                    meta["annotations"] = json!({});
                }
                for (k, v) in annotations {
                    meta["annotations"][k] = v.clone();
                }
            }
            set_condition(&mut pod, json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": objects::now_rfc3339()}));
            Ok(pod)
        })
        .await?;
        Ok(Reply {
            code: 201,
            body: json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
            warnings: Vec::new(),
        })
    }

    /// A server-side read-modify-write that bypasses the endpoint's scope rules
    /// (for subresources that change both spec and status, like binding).
    async fn write_raw(
        &self,
        rp: &ResourcePath,
        name: &str,
        mutate: impl Fn(Value) -> ApiResult<Value>,
    ) -> ApiResult<Value> {
        let rt = rp.rt;
        let ns = ns_of(rp);
        let at = At { rt, ns, name };
        let mut cached = true;
        for _ in 0..PATCH_RETRIES {
            let Base {
                obj: cur,
                kv,
                cached: from_cache,
            } = self.current_for_write(&at, cached).await?;
            cached = false;
            let new = match mutate(cur) {
                Ok(new) => new,
                // Judged on a cached copy: decide again on the store's.
                Err(_) if from_cache => continue,
                Err(e) => return Err(e),
            };
            match self
                .store
                .update(&kv.key, objects::encode(&new)?, kv.mod_revision)
                .await
            {
                Ok(new_kv) => {
                    let mut v = new;
                    objects::set_resource_version(&mut v, new_kv.mod_revision);
                    return Ok(v);
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(StoreError::NotFound(_)) => return Err(ApiError::not_found(rt, name)),
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::conflict(rt, name))
    }

    pub async fn delete_collection(
        &self,
        rp: &ResourcePath,
        body: Option<Value>,
        q: &Query,
    ) -> ApiResult<Reply> {
        let list = self
            .list(
                &ResourcePath {
                    name: None,
                    ..rp.clone()
                },
                q,
            )
            .await?;
        let mut deleted = Vec::new();
        for item in list["items"].as_array().cloned().unwrap_or_default() {
            let Some(name) = objects::name(&item).map(String::from) else {
                continue;
            };
            let item_rp = ResourcePath {
                name: Some(name),
                namespace: objects::namespace(&item).map(String::from),
                ..rp.clone()
            };
            match self.delete(&item_rp, body.clone(), q).await {
                Ok(r) if r.body.get("kind").and_then(Value::as_str) != Some("Status") => {
                    deleted.push(r.body)
                }
                Ok(_) => deleted.push(item),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Reply::ok(json!({
            "kind": rp.rt.list_kind,
            "apiVersion": rp.rt.api_version(),
            "metadata": {"resourceVersion": list["metadata"]["resourceVersion"].clone()},
            "items": deleted,
        })))
    }
}

/// An object under deletion may go once its finalizers are gone — except a
/// graceful pod, which the node deletes (with grace 0) when its containers stopped.
fn deletion_ready(obj: &Value) -> bool {
    let grace = obj
        .get("metadata")
        .and_then(|m| m.get("deletionGracePeriodSeconds"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let is_ns = obj.get("kind").and_then(Value::as_str) == Some("Namespace");
    let ns_finalizers = obj
        .get("spec")
        .and_then(|s| s.get("finalizers"))
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    grace == 0 && !(is_ns && ns_finalizers)
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

struct DeleteOptions {
    grace_period: Option<i64>,
    propagation: Option<String>,
    precondition_uid: Option<String>,
    precondition_rv: Option<String>,
    dry_run: bool,
}

impl DeleteOptions {
    fn from(body: Option<&Value>, q: &Query) -> ApiResult<Self> {
        let b = body.cloned().unwrap_or(Value::Null);
        let grace_period = match b.get("gracePeriodSeconds").and_then(Value::as_i64) {
            Some(g) => Some(g),
            None => q.int("gracePeriodSeconds")?,
        };
        let orphan = b
            .get("orphanDependents")
            .and_then(Value::as_bool)
            .or_else(|| q.get("orphanDependents").map(|v| v == "true"));
        let propagation = b
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(String::from)
            .or_else(|| q.get("propagationPolicy").map(String::from))
            .or_else(|| {
                orphan.map(|o| {
                    if o {
                        "Orphan".to_string()
                    } else {
                        "Background".to_string()
                    }
                })
            });
        if let Some(p) = &propagation
            && !matches!(p.as_str(), "Orphan" | "Background" | "Foreground")
        {
            return Err(ApiError::new(
                422,
                "Invalid",
                format!(
                    "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                ),
            ));
        }
        let dry_run = match b.get("dryRun").and_then(Value::as_array) {
            Some(a) => a.iter().any(|v| v == "All"),
            None => q.dry_run()?,
        };
        Ok(DeleteOptions {
            grace_period,
            propagation,
            precondition_uid: b
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(String::from),
            precondition_rv: b
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(String::from),
            dry_run,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_roundtrip_and_reject_garbage() {
        let t = encode_continue(42, "/registry/pods/a/x");
        let back = decode_continue(&t, "/registry/pods/").unwrap();
        assert_eq!((back.rv, back.start.as_str()), (42, "/registry/pods/a/x"));
        assert_eq!(
            decode_continue("!!!", "/registry/pods/")
                .err()
                .unwrap()
                .code,
            400
        );
        // A token from another resource cannot page this one.
        assert_eq!(
            decode_continue(&t, "/registry/secrets/")
                .err()
                .unwrap()
                .code,
            400
        );
    }

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
