//! delete (preconditions, finalizers, propagation, graceful pods) and
//! deletecollection.

use super::*;

impl Rest {
    pub async fn delete(
        &self,
        rp: &ResourcePath,
        body: Option<Value>,
        q: &Query,
    ) -> ApiResult<Reply> {
        self.delete_with(rp, body, q, Admission::Run).await
    }

    /// [`Rest::delete`], with or without the admission chain (an eviction's
    /// delete is admitted as the eviction, as upstream's store delete).
    pub(super) async fn delete_with(
        &self,
        rp: &ResourcePath,
        body: Option<Value>,
        q: &Query,
        admission: Admission,
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
            if admission == Admission::Run {
                self.admission.admit(self, &attrs, &mut Value::Null).await?;
                self.admission.validate(self, &attrs, None).await?;
            }
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
            let kind_strategy = strategy::for_resource(rt);
            kind_strategy.before_delete(&mut finalizers, &mut pending, !objects::is_deleting(&cur));
            let grace = kind_strategy.grace_period(&cur, opts.grace_period);
            let waits = kind_strategy.delete_waits(&pending);
            let immediate = finalizers.is_empty() && grace == 0 && !waits;
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
                    m.insert(
                        "deletionTimestamp".into(),
                        json!(strategy::deletion_timestamp(chrono::Utc::now(), grace)),
                    );
                    m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                } else if let Some(old) =
                    m.get("deletionGracePeriodSeconds").and_then(Value::as_i64)
                {
                    // A shorter grace period may replace a longer one, never the reverse.
                    if grace < old {
                        m.insert(
                            "deletionTimestamp".into(),
                            json!(strategy::deletion_timestamp(chrono::Utc::now(), grace)),
                        );
                        m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                    }
                }
                if !finalizers.is_empty() {
                    m.insert("finalizers".into(), json!(finalizers));
                }
            }
            kind_strategy.mark_deleting(&mut pending);
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

/// Whether a delete runs the admission chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    Run,
    Skip,
}

pub(super) struct DeleteOptions {
    grace_period: Option<i64>,
    propagation: Option<String>,
    precondition_uid: Option<String>,
    precondition_rv: Option<String>,
    dry_run: bool,
}

impl DeleteOptions {
    pub(super) fn from(body: Option<&Value>, q: &Query) -> ApiResult<Self> {
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
