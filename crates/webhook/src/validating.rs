//! ValidatingAdmissionWebhook: every matching webhook is called at once and
//! any one of them may refuse (upstream's `validating/dispatcher.go`).

use std::collections::HashMap;

use futures::future::join_all;
use serde_json::Value;

use crate::Outcome;
use crate::attributes::{Attributes, GroupVersionKind, Hooks};
use crate::call::{self, check_dry_run, new_uid, review_version, versioned};
use crate::client::ServiceResolver;
use crate::config::{FailurePolicy, Registry, Webhook};
use crate::errors::{AdmissionError, HookError, add_annotation};
use crate::predicates::{is_exempt, match_conditions, should_call_hook};
use crate::request::admission_request;

pub const VALIDATING_FAILED_OPEN_ANNOTATION_PREFIX: &str =
    "failed-open.validating.webhook.admission.k8s.io/";

type Versioned = (Option<Value>, Option<Value>);

/// Calls the validating webhooks that match, concurrently. When several
/// refuse, the first in upstream's webhook order is returned (upstream takes
/// whichever answered first).
pub(crate) async fn dispatch(
    registry: &Registry,
    resolver: &dyn ServiceResolver,
    attrs: &Attributes<'_>,
    hooks: &dyn Hooks,
) -> Result<Outcome, AdmissionError> {
    let mut out = Outcome::default();
    if is_exempt(attrs) || registry.validating.is_empty() {
        return Ok(out);
    }
    // Objects converted once per kind, as upstream's versionedAttrs map.
    let mut by_kind: HashMap<GroupVersionKind, Versioned> = HashMap::new();
    let mut relevant: Vec<(&Webhook, String, Value)> = Vec::new();
    for hook in &registry.validating {
        let Some(inv) = should_call_hook(hook, attrs, attrs.object, hooks).await? else {
            continue;
        };
        if !by_kind.contains_key(&inv.kind) {
            let v = versioned(attrs, &inv, attrs.object, hooks)?;
            by_kind.insert(inv.kind.clone(), v);
        }
        let (obj, old) = by_kind.get(&inv.kind).cloned().unwrap_or_default();
        let uid = new_uid();
        let request = admission_request(&uid, attrs, &inv, obj.as_ref(), old.as_ref());
        if !hook.match_conditions.is_empty() && !match_conditions(hook, attrs, &request, hooks)? {
            continue;
        }
        relevant.push((hook, uid, request));
    }
    let calls = relevant.into_iter().map(|(hook, uid, request)| async move {
        let mut out = Outcome::default();
        let r = call_hook(hook, attrs, &uid, request, resolver, &mut out).await;
        (hook, r, out)
    });
    let mut first_error = None;
    for (idx, (hook, result, hook_out)) in join_all(calls).await.into_iter().enumerate() {
        out.merge(hook_out);
        let err = match result {
            Ok(()) => continue,
            Err(HookError::Calling(reason)) => {
                let msg = HookError::calling_message(&hook.name, &reason);
                if hook.failure_policy == FailurePolicy::Ignore {
                    tracing::warn!(webhook = %hook.name, error = %msg, "failed calling webhook, failing open");
                    add_annotation(
                        &mut out.audit_annotations,
                        format!("{VALIDATING_FAILED_OPEN_ANNOTATION_PREFIX}round_0_index_{idx}"),
                        hook.name.clone(),
                    );
                    continue;
                }
                tracing::warn!(webhook = %hook.name, error = %msg, "failed calling webhook, failing closed");
                AdmissionError::internal(msg)
            }
            Err(HookError::Rejection(e) | HookError::Other(e)) => {
                tracing::debug!(webhook = %hook.name, message = %e.message, "rejected by webhook");
                e
            }
        };
        first_error.get_or_insert(err);
    }
    match first_error {
        Some(e) => Err(e.with_outcome(out)),
        None => Ok(out),
    }
}

async fn call_hook(
    hook: &Webhook,
    attrs: &Attributes<'_>,
    uid: &str,
    request: Value,
    resolver: &dyn ServiceResolver,
    out: &mut Outcome,
) -> Result<(), HookError> {
    check_dry_run(hook, attrs)?;
    let version = review_version(hook)?;
    call::call(hook, uid, version, request, false, resolver, out).await?;
    Ok(())
}
