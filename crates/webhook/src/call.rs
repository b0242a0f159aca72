//! What the mutating and validating dispatchers share: versioned objects,
//! the dry-run rule, the call itself and what it reports back.

use serde_json::Value;

use crate::Outcome;
use crate::attributes::{Attributes, Hooks};
use crate::client::{self, ServiceResolver};
use crate::config::Webhook;
use crate::errors::{AdmissionError, HookError, add_annotation, to_status_err};
use crate::request::{self, Invocation, ReviewVersion, Verified, VerifyError};

/// The request's object and old object at the invocation's version
/// (upstream's `VersionedAttributes`).
pub(crate) fn versioned(
    attrs: &Attributes<'_>,
    inv: &Invocation,
    object: Option<&Value>,
    hooks: &dyn Hooks,
) -> Result<(Option<Value>, Option<Value>), AdmissionError> {
    let convert = |o: Option<&Value>| -> Result<Option<Value>, AdmissionError> {
        match o {
            None => Ok(None),
            Some(o) if inv.kind == *attrs.kind => Ok(Some(o.clone())),
            Some(o) => hooks
                .convert(o, &inv.kind)
                .map(Some)
                .map_err(AdmissionError::internal),
        }
    };
    Ok((convert(object)?, convert(attrs.old_object)?))
}

/// A fresh request UID.
pub(crate) fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Upstream refuses to call webhooks with side effects on dry-run requests:
/// an unset sideEffects is a calling error (failurePolicy applies), one
/// other than None/NoneOnDryRun a 400 whatever the policy.
pub(crate) fn check_dry_run(hook: &Webhook, attrs: &Attributes<'_>) -> Result<(), HookError> {
    if !attrs.dry_run {
        return Ok(());
    }
    match hook.side_effects.as_deref() {
        None => Err(HookError::Calling("Webhook SideEffects is nil".into())),
        Some("None" | "NoneOnDryRun") => Ok(()),
        Some(_) => Err(HookError::Other(AdmissionError::dry_run_unsupported(
            &hook.name,
        ))),
    }
}

/// The AdmissionReview version for `hook`, or upstream's calling error.
pub(crate) fn review_version(hook: &Webhook) -> Result<ReviewVersion, HookError> {
    ReviewVersion::choose(&hook.admission_review_versions)
        .map_err(|e| HookError::Calling(format!("could not create admission objects: {e}")))
}

/// Sends `request` to `hook` and checks the answer. Audit annotations
/// (prefixed `<webhook>/`) and warnings go to `out` whether or not the
/// webhook allowed the request, as upstream records them before deciding.
pub(crate) async fn call(
    hook: &Webhook,
    uid: &str,
    version: ReviewVersion,
    request: Value,
    mutating: bool,
    resolver: &dyn ServiceResolver,
    out: &mut Outcome,
) -> Result<Verified, HookError> {
    let endpoint = hook
        .endpoint
        .as_ref()
        .map_err(|e| HookError::Calling(format!("could not get REST client: {e}")))?;
    let body = serde_json::to_vec(&request::review(version, request))
        .map_err(|e| HookError::Calling(format!("could not create admission objects: {e}")))?;
    let bytes = client::post(endpoint, resolver, body, hook.timeout)
        .await
        .map_err(|e| HookError::Calling(format!("failed to call webhook: {}", e.0)))?;
    let v = request::verify_response(uid, version, mutating, &bytes).map_err(|e| match e {
        VerifyError::Decode(m) => HookError::Calling(format!("failed to call webhook: {m}")),
        VerifyError::Invalid(m) => {
            HookError::Calling(format!("received invalid webhook response: {m}"))
        }
    })?;
    for (k, val) in &v.audit_annotations {
        add_annotation(
            &mut out.audit_annotations,
            format!("{}/{k}", hook.name),
            val.clone(),
        );
    }
    for w in &v.warnings {
        out.add_warning(w);
    }
    if !v.allowed {
        return Err(HookError::Rejection(to_status_err(
            &hook.name,
            v.status.as_ref(),
        )));
    }
    Ok(v)
}
