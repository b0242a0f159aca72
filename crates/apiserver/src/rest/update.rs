//! update, patch (JSON, merge, strategic, server-side apply), scale, binding,
//! and the read-modify-write every one of them goes through.

use super::*;

impl Rest {
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

    pub(super) async fn update_scale(
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
                set_scale_replicas(rp.rt, &mut cur, replicas)?;
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
                    // Custom objects have no patch strategies (upstream: 415).
                    if rt.custom.is_some() {
                        return Err(ApiError::unsupported_media_type(
                            "application/strategic-merge-patch+json",
                        ));
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
                    set_scale_replicas(rt, &mut cur, replicas)?;
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
    pub(super) async fn apply(
        &self,
        rp: &ResourcePath,
        body: &[u8],
        q: &Query,
    ) -> ApiResult<Reply> {
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
    pub(super) async fn write(
        &self,
        rp: &ResourcePath,
        name: &str,
        opts: &WriteOpts,
        mutate: impl Fn(Value) -> ApiResult<Value>,
    ) -> ApiResult<Value> {
        let dry_run = opts.dry_run;
        let Some(scope) = strategy::update_scope(rp.rt, rp.subresource.as_deref()) else {
            return Err(ApiError::method_not_allowed());
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
    pub(super) async fn write_once(
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
        apply_defaults(rt, &mut new);
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
    pub(super) async fn write_stored(
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
        let key = objects::key(rt, ns, name);
        if unchanged {
            // A cached copy may be behind: confirm against the store, as upstream does.
            if cached {
                return Ok(None);
            }
            // Stored under an older encryption key: written anyway, so that
            // `kubectl replace` of every object re-encrypts (upstream's `stale`).
            if !self.store.is_stale(&key).await? {
                return Ok(Some(self.to_version(rt, stored)));
            }
        }
        // The last finalizer removed from an object being deleted: it goes now.
        if objects::is_deleting(&stored)
            && objects::finalizers(&stored).is_empty()
            && deletion_ready(rt, &stored)
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
    pub(super) async fn write_main(
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
    pub(super) async fn write_raw(
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
}
