//! create: names (generateName retried on collision), defaulting, admission,
//! the strategy, validation, field management, Service address claims.

use super::*;

impl Rest {
    pub async fn create(&self, rp: &ResourcePath, body: Value, q: &Query) -> ApiResult<Reply> {
        self.create_with(rp, body, q, &Managed::update(q, None))
            .await
    }

    pub(super) async fn create_with(
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
        if rt.custom.is_some_and(|cr| cr.terminating) {
            return Err(ApiError::new(
                405,
                "MethodNotAllowed",
                "create not allowed while custom resource definition is terminating",
            ));
        }
        // Upstream's order: defaulting (decode), mutating admission, strategy, validation.
        apply_defaults(rt, &mut obj);
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
    pub(super) async fn create_stored(
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
}
