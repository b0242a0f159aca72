//! get and list (selectors, limit/continue from one snapshot, resourceVersion
//! semantics, whole lists served as stored bytes).

use super::*;

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
                    let supported = match rt.custom {
                        Some(cr) => {
                            matches!(f, "metadata.name" | "metadata.namespace")
                                || cr.selectable_fields.iter().any(|s| s == f)
                        }
                        None => berth_api::selector::supported_field((rt.kind, rt.group), f),
                    };
                    if !supported {
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
            let matched = match self.rt.custom {
                Some(_) => f.matches(|field| custom_field_value(obj, field)),
                None => f.matches(|field| berth_api::selector::field_value(key, obj, field)),
            };
            if !matched {
                return false;
            }
        }
        true
    }

    /// Whether matching needs more of an object than `objects::selectable`
    /// projects (a custom resource's selectable field deeper than one level).
    pub fn needs_whole_object(&self) -> bool {
        self.rt.custom.is_some()
            && self
                .fields
                .as_ref()
                .is_some_and(|f| f.terms().iter().any(|t| t.field.matches('.').count() > 1))
    }
}

/// A custom object's field as a field selector compares it: strings as they
/// are, numbers and booleans printed (upstream's selectableFields are scalars).
fn custom_field_value(obj: &Value, field: &str) -> Option<String> {
    match obj.pointer(&berth_api::crd::json_pointer(field))? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
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
    pub async fn get(&self, rp: &ResourcePath) -> ApiResult<Value> {
        let name = name_of(rp)?;
        let (obj, _) = self.current(rp.rt, ns_of(rp), name).await?;
        match rp.subresource.as_deref() {
            Some("scale") => Ok(scale_of(rp.rt, &obj)),
            None | Some("status") | Some("ephemeralcontainers") => Ok(self.to_version(rp.rt, obj)),
            // A CertificateSigningRequest's `approval` reads as the object too.
            Some("approval") if strategy::update_scope(rp.rt, Some("approval")).is_some() => {
                Ok(self.to_version(rp.rt, obj))
            }
            Some(_) => Err(ApiError::method_not_allowed()),
        }
    }

    /// The stored objects a list request selects, and the list's metadata.
    pub(super) async fn list_kvs(
        &self,
        rp: &ResourcePath,
        q: &Query,
    ) -> ApiResult<(Vec<KeyValue>, Value)> {
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
}
