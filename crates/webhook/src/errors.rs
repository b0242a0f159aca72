//! Upstream's webhook errors: `ErrCallingWebhook` (the webhook could not be
//! asked: failurePolicy decides), `ErrWebhookRejection` (it said no), and the
//! `metav1.Status` the API server finally answers with.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::Outcome;

/// A refused admission: what the API server turns into a Kubernetes Status.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct AdmissionError {
    /// The HTTP status code (`status.code`).
    pub code: u16,
    /// `status.reason` (`InternalError`, `BadRequest`, …); a rejecting webhook
    /// chooses its own and may leave it empty.
    pub reason: String,
    pub message: String,
    /// `status.details`, when there are any.
    pub details: Option<Value>,
    /// Warnings and audit annotations gathered before the request failed:
    /// upstream sends the warnings with the error response too.
    pub outcome: Outcome,
}

impl AdmissionError {
    /// The `metav1.Status` body for this error.
    pub fn status(&self) -> Value {
        let mut s = Map::new();
        s.insert("kind".into(), json!("Status"));
        s.insert("apiVersion".into(), json!("v1"));
        s.insert("metadata".into(), json!({}));
        s.insert("status".into(), json!("Failure"));
        s.insert("message".into(), json!(self.message));
        if !self.reason.is_empty() {
            s.insert("reason".into(), json!(self.reason));
        }
        if let Some(d) = &self.details {
            s.insert("details".into(), d.clone());
        }
        s.insert("code".into(), json!(self.code));
        Value::Object(s)
    }

    /// `apierrors.NewInternalError`.
    pub(crate) fn internal(err: impl std::fmt::Display) -> Self {
        let err = err.to_string();
        AdmissionError {
            code: 500,
            reason: "InternalError".into(),
            message: format!("Internal error occurred: {err}"),
            details: Some(json!({"causes": [{"message": err}]})),
            outcome: Outcome::default(),
        }
    }

    /// `apierrors.NewBadRequest`.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        AdmissionError {
            code: 400,
            reason: "BadRequest".into(),
            message: message.into(),
            details: None,
            outcome: Outcome::default(),
        }
    }

    /// `apierrors.NewNotFound` for a namespace a selector needed.
    pub(crate) fn namespace_not_found(name: &str) -> Self {
        AdmissionError {
            code: 404,
            reason: "NotFound".into(),
            message: format!("namespaces \"{name}\" not found"),
            details: Some(json!({"name": name, "kind": "namespaces"})),
            outcome: Outcome::default(),
        }
    }

    /// `apierrors.NewForbidden` (match conditions that failed to evaluate).
    pub(crate) fn forbidden(group: &str, resource: &str, name: &str, err: &str) -> Self {
        let gr = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        let message = if name.is_empty() {
            format!("{gr} is forbidden: {err}")
        } else {
            format!("{gr} \"{name}\" is forbidden: {err}")
        };
        AdmissionError {
            code: 403,
            reason: "Forbidden".into(),
            message,
            details: Some(json!({"name": name, "group": group, "kind": resource})),
            outcome: Outcome::default(),
        }
    }

    /// `webhookerrors.NewDryRunUnsupportedErr`.
    pub(crate) fn dry_run_unsupported(webhook: &str) -> Self {
        Self::bad_request(format!(
            "admission webhook \"{webhook}\" does not support dry run"
        ))
    }

    pub(crate) fn with_outcome(mut self, outcome: Outcome) -> Self {
        self.outcome = outcome;
        self
    }
}

/// The `status` a webhook returned with `allowed: false` (a subset of
/// `metav1.Status`; everything else in it is dropped).
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub(crate) struct WebhookStatus {
    #[serde(default)]
    pub code: Option<i64>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub details: Option<Value>,
}

/// Upstream's `ToStatusErr`: the webhook's own status with its message
/// prefixed by `admission webhook "<name>" denied the request`. A code below
/// 400 becomes 400 (upstream never answers a rejection with a success code);
/// one above 599 too, since no HTTP server can send it.
pub(crate) fn to_status_err(webhook: &str, result: Option<&WebhookStatus>) -> AdmissionError {
    let denied = format!("admission webhook \"{webhook}\" denied the request");
    let empty = WebhookStatus::default();
    let r = result.unwrap_or(&empty);
    let message = match (r.message.as_deref(), r.reason.as_deref()) {
        (Some(m), _) if !m.is_empty() => format!("{denied}: {m}"),
        (_, Some(reason)) if !reason.is_empty() => format!("{denied}: {reason}"),
        _ => format!("{denied} without explanation"),
    };
    let code = match r.code {
        Some(c @ 400..=599) => c as u16,
        _ => 400,
    };
    AdmissionError {
        code,
        reason: r.reason.clone().unwrap_or_default(),
        message,
        // Only a StatusDetails object can be sent on; anything else a webhook
        // put there would make the API server's Status undecodable.
        details: r.details.clone().filter(Value::is_object),
        outcome: Outcome::default(),
    }
}

/// Why one webhook call did not allow the request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum HookError {
    /// `ErrCallingWebhook`: the reason after `failed calling webhook "<name>": `.
    Calling(String),
    /// `ErrWebhookRejection`: the webhook denied the request.
    Rejection(AdmissionError),
    /// Any other error, returned as it is whatever the failurePolicy
    /// (dry run unsupported, a patch that does not apply, …).
    Other(AdmissionError),
}

impl HookError {
    /// The text of an `ErrCallingWebhook`.
    pub(crate) fn calling_message(webhook: &str, reason: &str) -> String {
        format!("failed calling webhook \"{webhook}\": {reason}")
    }
}

/// Adds an audit annotation as upstream's `AddAnnotation`: the key must be
/// `<prefix>/<name>` (exactly one slash), and an existing key keeps its first
/// value.
pub(crate) fn add_annotation(map: &mut BTreeMap<String, String>, key: String, value: String) {
    if key.split('/').count() != 2 {
        tracing::warn!(%key, "dropping webhook audit annotation with an invalid key");
        return;
    }
    match map.get(&key) {
        Some(v) if *v != value => {
            tracing::warn!(%key, "admission annotations are not allowed to be overwritten")
        }
        Some(_) => {}
        None => {
            map.insert(key, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: Option<i64>, message: &str, reason: &str) -> WebhookStatus {
        WebhookStatus {
            code,
            message: (!message.is_empty()).then(|| message.to_string()),
            reason: (!reason.is_empty()).then(|| reason.to_string()),
            details: None,
        }
    }

    #[test]
    fn rejections_read_as_upstreams() {
        let cases: &[(Option<WebhookStatus>, u16, &str, &str)] = &[
            (
                None,
                400,
                "",
                "admission webhook \"w.example.com\" denied the request without explanation",
            ),
            (
                Some(status(Some(403), "no privileged pods", "Forbidden")),
                403,
                "Forbidden",
                "admission webhook \"w.example.com\" denied the request: no privileged pods",
            ),
            (
                Some(status(None, "", "NotAllowed")),
                400,
                "NotAllowed",
                "admission webhook \"w.example.com\" denied the request: NotAllowed",
            ),
            // A success code with a rejection is made a client error.
            (
                Some(status(Some(200), "nope", "")),
                400,
                "",
                "admission webhook \"w.example.com\" denied the request: nope",
            ),
            (
                Some(status(Some(422), "bad", "Invalid")),
                422,
                "Invalid",
                "",
            ),
            (Some(status(Some(99999), "x", "")), 400, "", ""),
            (Some(status(Some(-1), "x", "")), 400, "", ""),
        ];
        for (st, code, reason, message) in cases {
            let e = to_status_err("w.example.com", st.as_ref());
            assert_eq!(e.code, *code, "{st:?}");
            assert_eq!(e.reason, *reason, "{st:?}");
            if !message.is_empty() {
                assert_eq!(e.message, *message);
            }
        }
    }

    #[test]
    fn status_body() {
        let e = AdmissionError::internal("failed calling webhook \"a.b.c\": boom");
        assert_eq!(
            e.status(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Internal error occurred: failed calling webhook \"a.b.c\": boom",
                "reason": "InternalError",
                "details": {"causes": [{"message": "failed calling webhook \"a.b.c\": boom"}]},
                "code": 500})
        );
    }

    #[test]
    fn annotations_keep_their_first_value() {
        let mut m = BTreeMap::new();
        add_annotation(&mut m, "a.b.c/k".into(), "1".into());
        add_annotation(&mut m, "a.b.c/k".into(), "2".into());
        add_annotation(&mut m, "no-prefix".into(), "3".into());
        add_annotation(&mut m, "a/b/c".into(), "4".into());
        assert_eq!(m.len(), 1);
        assert_eq!(m["a.b.c/k"], "1");
    }
}
