//! ResourceQuota (upstream's `plugin/pkg/admission/resourcequota` over
//! `k8s.io/apiserver/pkg/admission/plugin/resourcequota`): a write that adds
//! usage is checked against every quota of its namespace that matches it
//! (`berth_api::quota::check_request`) and the quotas' `status.used` is
//! charged before the object is stored, each status write guarded by the
//! quota's resourceVersion (a conflict re-reads the quota from the store and
//! evaluates again), so two concurrent creates can never both take the last
//! unit. As upstream's per-namespace evaluation queue, requests of one
//! namespace are evaluated one at a time. The resource quota controller
//! later recomputes `status.used` from the objects themselves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use berth_api::quota::{self, Evaluator};
use berth_api::registry::ResourceType;
use berth_store::{RangeRequest, StoreError};
use serde_json::Value;

use super::{Attributes, Operation, Plugin, forbidden};
use crate::objects;
use crate::rest::Rest;
use crate::status::ApiResult;

/// How many times a charge is evaluated again after a conflicting write.
const RETRIES: usize = 10;

#[derive(Default)]
pub struct ResourceQuota {
    /// One lock per namespace (upstream's per-namespace work queue).
    namespaces: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl ResourceQuota {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock_for(&self, ns: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.namespaces.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(ns.to_string()).or_default().clone()
    }
}

/// A namespace's objects of `rt`, read from the watch cache once it has
/// caught up with the store's current revision (so an object created just
/// before is seen), else from the store.
pub(super) async fn consistent_list(
    rest: &Rest,
    rt: &ResourceType,
    ns: &str,
) -> ApiResult<Vec<Value>> {
    let prefix = objects::list_prefix(rt, Some(ns));
    let rev = rest.store.current_revision().await?;
    if rest.cache.wait_for(rev).await.is_ok() {
        let (items, _) = rest.cache.snapshot(&prefix);
        return items
            .iter()
            .map(|(_, s)| objects::decode_at(&s.bytes, s.mod_revision))
            .collect();
    }
    stored_list(rest, &prefix).await
}

async fn stored_list(rest: &Rest, prefix: &str) -> ApiResult<Vec<Value>> {
    let resp = rest
        .store
        .range(RangeRequest {
            prefix: prefix.to_string(),
            ..Default::default()
        })
        .await?;
    resp.kvs.iter().map(objects::decode).collect()
}

/// A quota status write's failure: the store's (a conflict is retried) or
/// the encoding's.
enum WriteError {
    Store(StoreError),
    Api(crate::status::ApiError),
}

fn revision_of(obj: &Value) -> i64 {
    objects::resource_version(obj)
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

#[async_trait]
impl Plugin for ResourceQuota {
    fn name(&self) -> &'static str {
        "ResourceQuota"
    }

    async fn validate(
        &self,
        rest: &Rest,
        a: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> ApiResult<()> {
        let (Some(obj), Some(ns)) = (obj, a.namespace) else {
            return Ok(());
        };
        // Upstream ignores events.
        if a.rt.group.is_empty() && a.rt.plural == "events" || a.rt.group == "events.k8s.io" {
            return Ok(());
        }
        let op = match a.operation {
            Operation::Create => quota::Operation::Create,
            Operation::Update => quota::Operation::Update,
            Operation::Delete => return Ok(()),
        };
        let evaluator = Evaluator::for_resource(a.rt.group, a.rt.plural);
        if !evaluator.handles(op, a.subresource) {
            return Ok(());
        }
        let Some(quota_rt) = berth_api::registry::lookup("", "v1", "resourcequotas") else {
            return Ok(());
        };
        let lock = self.lock_for(ns);
        let _serial = lock.lock().await;
        let mut quotas = consistent_list(rest, quota_rt, ns).await?;
        let old = match op {
            quota::Operation::Update => a.old,
            quota::Operation::Create => None,
        };
        for _ in 0..RETRIES {
            if quotas.is_empty() {
                return Ok(());
            }
            let charges = quota::check_request(&quotas, &evaluator, obj, old, chrono::Utc::now())
                .map_err(|why| forbidden(a, why))?;
            if charges.is_empty() || a.dry_run {
                return Ok(());
            }
            // The charged quotas are written together (the store commits
            // concurrent writes as one group), each guarded by its own revision.
            let writes = charges.into_iter().map(|(i, used)| {
                let mut q = quotas[i].clone();
                q["status"]["used"] = quota::list_to_json(&used);
                let name = objects::name(&q).unwrap_or("").to_string();
                let key = objects::key(quota_rt, Some(ns), &name);
                let rev = revision_of(&quotas[i]);
                async move {
                    let written = match objects::encode(&q) {
                        Ok(bytes) => rest
                            .store
                            .update(&key, bytes, rev)
                            .await
                            .map_err(WriteError::Store),
                        Err(e) => Err(WriteError::Api(e)),
                    };
                    (name, written)
                }
            });
            let mut failed = Vec::new();
            for (name, written) in futures::future::join_all(writes).await {
                match written {
                    Ok(_) => {}
                    Err(WriteError::Store(StoreError::Conflict { .. })) => failed.push(name),
                    // Deleted meanwhile: it constrains nothing any more.
                    Err(WriteError::Store(StoreError::NotFound(_))) => {}
                    Err(WriteError::Store(e)) => return Err(e.into()),
                    Err(WriteError::Api(e)) => return Err(e),
                }
            }
            if failed.is_empty() {
                return Ok(());
            }
            // As upstream: only the quotas whose write conflicted are
            // evaluated again, from their latest stored state.
            let fresh = stored_list(rest, &objects::list_prefix(quota_rt, Some(ns))).await?;
            quotas = fresh
                .into_iter()
                .filter(|q| objects::name(q).is_some_and(|n| failed.iter().any(|f| f == n)))
                .collect();
        }
        Err(forbidden(
            a,
            "unable to update quota status: too many conflicting writes",
        ))
    }
}
