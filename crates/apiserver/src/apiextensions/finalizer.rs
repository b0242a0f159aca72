//! Upstream's CRD finalizer controller: a deleted CRD first loses every object of
//! its resource (each deleted as a client would, so their own finalizers are
//! honoured), then its `customresourcecleanup.apiextensions.k8s.io` finalizer,
//! which lets the store remove it.

use berth_api::crd;
use berth_api::registry;
use serde_json::Value;

use super::naming;
use crate::objects;
use crate::request::{Query, ResourcePath};
use crate::rest::Rest;

/// One pass for a CRD being deleted; `true` while objects remain.
pub(super) async fn finalize(rest: &Rest, c: &Value) -> bool {
    let name = objects::name(c).unwrap_or("").to_string();
    let group = c
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    let plural = c
        .pointer("/status/acceptedNames/plural")
        .and_then(Value::as_str)
        .unwrap_or("");
    let storage = crd::storage_version(c).unwrap_or("");
    let now = objects::now_rfc3339();
    // A CRD that was never served has no objects.
    if let Some(rt) = registry::lookup(group, storage, plural).filter(|rt| rt.custom.is_some()) {
        let (items, _) = rest.cache.snapshot(&objects::prefix(rt));
        if !items.is_empty() {
            for (_, s) in &items {
                let Ok(obj) = objects::decode_at(&s.bytes, s.mod_revision) else {
                    continue;
                };
                if objects::is_deleting(&obj) {
                    continue;
                }
                let rp = ResourcePath {
                    rt,
                    namespace: objects::namespace(&obj).map(String::from),
                    name: objects::name(&obj).map(String::from),
                    subresource: None,
                    legacy_watch: false,
                };
                if let Err(e) = rest.delete(&rp, None, &Query::default()).await
                    && e.code != 404
                {
                    tracing::debug!(crd = %name, error = %e.message, "deleting a custom object");
                }
            }
            set_terminating(
                rest,
                c,
                "InstanceDeletionInProgress",
                "CustomResource deletion is in progress",
                true,
                &now,
            )
            .await;
            return true;
        }
    }
    let Some(done) = set_terminating(
        rest,
        c,
        "InstanceDeletionCompleted",
        "removed all instances",
        false,
        &now,
    )
    .await
    else {
        return true;
    };
    let mut without = done;
    let rest_of: Vec<String> = objects::finalizers(&without)
        .into_iter()
        .filter(|f| f != crd::CLEANUP_FINALIZER)
        .collect();
    if let Some(m) = objects::meta_mut(&mut without) {
        m.insert("finalizers".into(), serde_json::json!(rest_of));
    }
    let Some(rp) = super::crd_path(&name, None) else {
        return false;
    };
    match rest.update(&rp, without, &Query::default()).await {
        Ok(_) => false,
        Err(e) if e.code == 404 => false,
        Err(e) => {
            tracing::debug!(crd = %name, error = %e.message, "removing the cleanup finalizer");
            true
        }
    }
}

/// Sets the Terminating condition (writing only if it changes); the CRD as
/// stored afterwards, `None` if the write failed.
async fn set_terminating(
    rest: &Rest,
    c: &Value,
    reason: &str,
    message: &str,
    status: bool,
    now: &str,
) -> Option<Value> {
    let mut want = c.clone();
    let mut st = want.get("status").cloned().unwrap_or(Value::Null);
    naming::set_condition(
        &mut st,
        naming::new_condition("Terminating", status, reason, message),
        now,
    );
    if c.get("status") == Some(&st) {
        return Some(c.clone());
    }
    want["status"] = st;
    match super::write_status(rest, &want).await {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::debug!(error = %e.message, "CRD Terminating condition");
            None
        }
    }
}
