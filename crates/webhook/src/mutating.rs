//! MutatingAdmissionWebhook: the webhooks are called one after the other,
//! each seeing the object as the previous ones left it (upstream's
//! `mutating/dispatcher.go` and `reinvocationcontext.go`).

use std::collections::HashSet;

use berth_api::validation::go_quote;
use serde_json::{Map, Value, json};

use crate::Outcome;
use crate::attributes::{Attributes, Hooks};
use crate::call::{self, check_dry_run, new_uid, review_version, versioned};
use crate::client::ServiceResolver;
use crate::config::{FailurePolicy, Registry, Webhook};
use crate::errors::{AdmissionError, HookError, add_annotation};
use crate::predicates::{is_exempt, match_conditions, should_call_hook};
use crate::request::{Invocation, admission_request};

/// Audit annotation prefixes upstream records for each call.
pub const PATCH_AUDIT_ANNOTATION_PREFIX: &str = "patch.webhook.admission.k8s.io/";
pub const MUTATION_AUDIT_ANNOTATION_PREFIX: &str = "mutation.webhook.admission.k8s.io/";
pub const MUTATION_FAILED_OPEN_ANNOTATION_PREFIX: &str =
    "failed-open.mutation.webhook.admission.k8s.io/";

/// `reinvocationPolicy: IfNeeded` bookkeeping: webhooks called since the
/// last change, and those to call again because a later one changed the
/// object.
#[derive(Default)]
struct Reinvocation {
    previously_invoked: HashSet<String>,
    reinvoke: HashSet<String>,
}

impl Reinvocation {
    fn object_changed(&mut self) {
        self.reinvoke.extend(self.previously_invoked.drain());
    }
}

struct Context<'a> {
    attrs: &'a Attributes<'a>,
    hooks: &'a dyn Hooks,
    resolver: &'a dyn ServiceResolver,
}

/// Runs every mutating webhook on `obj` (`Value::Null` when the operation
/// has none, e.g. DELETE), then, if one changed it, once more those with
/// `reinvocationPolicy: IfNeeded` that ran before the change.
pub(crate) async fn dispatch(
    registry: &Registry,
    resolver: &dyn ServiceResolver,
    attrs: &Attributes<'_>,
    obj: &mut Value,
    hooks: &dyn Hooks,
) -> Result<Outcome, AdmissionError> {
    let mut out = Outcome::default();
    if is_exempt(attrs) || registry.mutating.is_empty() {
        return Ok(out);
    }
    let cx = Context {
        attrs,
        hooks,
        resolver,
    };
    let mut state = Reinvocation::default();
    for round in 0..2 {
        // Upstream's second round calls only webhooks asked to be reinvoked.
        if round == 1 && state.reinvoke.is_empty() {
            break;
        }
        for (i, hook) in registry.mutating.iter().enumerate() {
            if let Err(e) = run_hook(&cx, round, i, hook, obj, &mut state, &mut out).await {
                return Err(e.with_outcome(out));
            }
        }
    }
    Ok(out)
}

async fn run_hook(
    cx: &Context<'_>,
    round: usize,
    idx: usize,
    hook: &Webhook,
    obj: &mut Value,
    state: &mut Reinvocation,
    out: &mut Outcome,
) -> Result<(), AdmissionError> {
    let attrs = cx.attrs;
    let object = (!obj.is_null()).then_some(&*obj);
    let Some(inv) = should_call_hook(hook, attrs, object, cx.hooks).await? else {
        return Ok(());
    };
    let (versioned_obj, versioned_old) = versioned(attrs, &inv, object, cx.hooks)?;
    let uid = new_uid();
    let request = admission_request(
        &uid,
        attrs,
        &inv,
        versioned_obj.as_ref(),
        versioned_old.as_ref(),
    );
    if !hook.match_conditions.is_empty() && !match_conditions(hook, attrs, &request, cx.hooks)? {
        return Ok(());
    }
    // A webhook is never called for the first time in the second round, even
    // if the object now matches it.
    if round == 1 && !state.reinvoke.contains(&hook.uid) {
        return Ok(());
    }
    let result = call_hook(
        cx,
        hook,
        &inv,
        versioned_obj,
        request,
        &uid,
        round,
        idx,
        out,
    )
    .await;
    let changed = matches!(result, Ok(Some((_, true))));
    add_annotation(
        &mut out.audit_annotations,
        format!("{MUTATION_AUDIT_ANNOTATION_PREFIX}round_{round}_index_{idx}"),
        json!({"configuration": hook.configuration, "webhook": hook.name, "mutated": changed})
            .to_string(),
    );
    if changed {
        state.object_changed();
    }
    if hook.reinvoke_if_needed {
        state.previously_invoked.insert(hook.uid.clone());
    }
    match result {
        Ok(Some((new, _))) => {
            // Back to the request's version: the caller stores that one.
            *obj = if inv.kind == *attrs.kind {
                new
            } else {
                cx.hooks
                    .convert(&new, attrs.kind)
                    .map_err(AdmissionError::internal)?
            };
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(HookError::Calling(reason)) => {
            let msg = HookError::calling_message(&hook.name, &reason);
            if hook.failure_policy == FailurePolicy::Ignore {
                tracing::warn!(webhook = %hook.name, error = %msg, "failed calling webhook, failing open");
                add_annotation(
                    &mut out.audit_annotations,
                    format!("{MUTATION_FAILED_OPEN_ANNOTATION_PREFIX}round_{round}_index_{idx}"),
                    hook.name.clone(),
                );
                Ok(())
            } else {
                tracing::warn!(webhook = %hook.name, error = %msg, "failed calling webhook, failing closed");
                Err(AdmissionError::internal(msg))
            }
        }
        Err(HookError::Rejection(e) | HookError::Other(e)) => Err(e),
    }
}

/// One call; on a patch, the patched object (at the invocation's version)
/// and whether it differs from what the webhook was sent.
#[allow(clippy::too_many_arguments)]
async fn call_hook(
    cx: &Context<'_>,
    hook: &Webhook,
    inv: &Invocation,
    current: Option<Value>,
    request: Value,
    uid: &str,
    round: usize,
    idx: usize,
    out: &mut Outcome,
) -> Result<Option<(Value, bool)>, HookError> {
    check_dry_run(hook, cx.attrs)?;
    let version = review_version(hook)?;
    let verified = call::call(hook, uid, version, request, true, cx.resolver, out).await?;
    if verified.patch.is_empty() {
        return Ok(None);
    }
    // Upstream's decoder only insists on a list of objects; operations it
    // cannot apply fail later, as internal errors.
    let ops: Vec<Map<String, Value>> = serde_json::from_slice(&verified.patch).map_err(|e| {
        HookError::Calling(format!(
            "received undecodable patch in webhook response: {e}"
        ))
    })?;
    if ops.is_empty() {
        return Ok(None);
    }
    let Some(current) = current else {
        return Err(HookError::Other(AdmissionError::internal(format!(
            "admission webhook {} attempted to modify the object, which is not supported for this operation",
            go_quote(&hook.name)
        ))));
    };
    if verified.patch_type != "JSONPatch" {
        return Err(HookError::Calling(format!(
            "unsupported patch type {}",
            go_quote(&verified.patch_type)
        )));
    }
    let ops_value = Value::Array(ops.into_iter().map(sorted_keys).collect());
    let patch: json_patch::Patch = serde_json::from_value(ops_value.clone())
        .map_err(|e| HookError::Other(AdmissionError::internal(format!("JSONPatch: {e}"))))?;
    let mut new = current.clone();
    json_patch::patch(&mut new, &patch)
        .map_err(|e| HookError::Other(AdmissionError::internal(format!("JSONPatch: {e}"))))?;
    cx.hooks
        .after_patch(&inv.kind, &mut new)
        .map_err(|e| HookError::Other(AdmissionError::internal(e)))?;
    let changed = new != current;
    add_annotation(
        &mut out.audit_annotations,
        format!("{PATCH_AUDIT_ANNOTATION_PREFIX}round_{round}_index_{idx}"),
        json!({"configuration": hook.configuration, "webhook": hook.name,
            "patch": ops_value, "patchType": "JSONPatch"})
        .to_string(),
    );
    Ok(Some((new, changed)))
}

/// A patch operation with its keys sorted, as Go marshals the map upstream
/// records in the patch audit annotation.
fn sorted_keys(op: Map<String, Value>) -> Value {
    let mut entries: Vec<(String, Value)> = op.into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Value::Object(entries.into_iter().collect())
}
