//! The AdmissionReview a webhook receives and the checks on the one it sends
//! back (upstream's `webhook/request/admissionreview.go`).

use std::collections::BTreeMap;

use base64::Engine;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::attributes::{Attributes, GroupVersionKind, GroupVersionResource, Operation};
use crate::errors::WebhookStatus;

/// What one webhook is asked about: the request's resource, or the
/// equivalent one its rules matched (matchPolicy Equivalent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invocation {
    pub resource: GroupVersionResource,
    pub subresource: String,
    pub kind: GroupVersionKind,
}

/// The AdmissionReview version a webhook is sent: the first it lists that
/// the API server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReviewVersion {
    V1,
    V1beta1,
}

impl ReviewVersion {
    pub fn choose(accepted: &[String]) -> Result<ReviewVersion, String> {
        accepted
            .iter()
            .find_map(|v| match v.as_str() {
                "v1" => Some(ReviewVersion::V1),
                "v1beta1" => Some(ReviewVersion::V1beta1),
                _ => None,
            })
            .ok_or_else(|| {
                "webhook does not accept known AdmissionReview versions (v1, v1beta1)".to_string()
            })
    }

    fn api_version(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "admission.k8s.io/v1",
            ReviewVersion::V1beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

/// The `request` of an AdmissionReview, field for field as upstream fills it
/// (Go's `omitempty` respected, so `subResource`, `name` and `namespace` are
/// absent when empty, while `object`, `oldObject` and `options` are `null`).
pub(crate) fn admission_request(
    uid: &str,
    attrs: &Attributes<'_>,
    inv: &Invocation,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> Value {
    let mut r = Map::new();
    r.insert("uid".into(), json!(uid));
    r.insert("kind".into(), gvk(&inv.kind));
    r.insert("resource".into(), gvr(&inv.resource));
    if !inv.subresource.is_empty() {
        r.insert("subResource".into(), json!(inv.subresource));
    }
    r.insert("requestKind".into(), gvk(attrs.kind));
    r.insert("requestResource".into(), gvr(attrs.resource));
    if !attrs.subresource.is_empty() {
        r.insert("requestSubResource".into(), json!(attrs.subresource));
    }
    if !attrs.name.is_empty() {
        r.insert("name".into(), json!(attrs.name));
    }
    let ns = attrs.effective_namespace();
    if !ns.is_empty() {
        r.insert("namespace".into(), json!(ns));
    }
    r.insert("operation".into(), json!(attrs.operation.as_str()));
    r.insert("userInfo".into(), user_info(attrs.user));
    r.insert("object".into(), object.cloned().unwrap_or(Value::Null));
    r.insert(
        "oldObject".into(),
        old_object.cloned().unwrap_or(Value::Null),
    );
    r.insert("dryRun".into(), json!(attrs.dry_run));
    r.insert("options".into(), options(attrs));
    Value::Object(r)
}

/// The whole review for `request`.
pub(crate) fn review(version: ReviewVersion, request: Value) -> Value {
    json!({
        "kind": "AdmissionReview",
        "apiVersion": version.api_version(),
        "request": request,
    })
}

fn gvk(k: &GroupVersionKind) -> Value {
    json!({"group": k.group, "version": k.version, "kind": k.kind})
}

fn gvr(r: &GroupVersionResource) -> Value {
    json!({"group": r.group, "version": r.version, "resource": r.resource})
}

/// authentication.k8s.io/v1 UserInfo (every field `omitempty`).
fn user_info(u: &berth_api::user::UserInfo) -> Value {
    let mut m = Map::new();
    if !u.name.is_empty() {
        m.insert("username".into(), json!(u.name));
    }
    if !u.uid.is_empty() {
        m.insert("uid".into(), json!(u.uid));
    }
    if !u.groups.is_empty() {
        m.insert("groups".into(), json!(u.groups));
    }
    if !u.extra.is_empty() {
        m.insert("extra".into(), json!(u.extra));
    }
    Value::Object(m)
}

/// The operation's options with their type set (`meta.k8s.io/v1`), as
/// upstream's scheme encodes them; a minimal one when the caller has none.
fn options(attrs: &Attributes<'_>) -> Value {
    let kind = match attrs.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
        // Connect options (PodExecOptions, …) are the caller's own object.
        Operation::Connect => return attrs.options.cloned().unwrap_or(Value::Null),
    };
    let mut m = match attrs.options {
        Some(Value::Object(m)) => m.clone(),
        _ => {
            let mut m = Map::new();
            if attrs.dry_run {
                m.insert("dryRun".into(), json!(["All"]));
            }
            m
        }
    };
    m.insert("kind".into(), json!(kind));
    m.insert("apiVersion".into(), json!("meta.k8s.io/v1"));
    Value::Object(m)
}

/// A webhook's answer, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Verified {
    pub allowed: bool,
    /// The decoded `patch` bytes (empty when none).
    pub patch: Vec<u8>,
    pub patch_type: String,
    pub status: Option<WebhookStatus>,
    pub audit_annotations: BTreeMap<String, String>,
    pub warnings: Vec<String>,
}

/// Why an answer was refused, split as upstream's dispatchers word it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum VerifyError {
    /// The body did not decode (`failed to call webhook: …`).
    Decode(String),
    /// It decoded but breaks the protocol (`received invalid webhook response: …`).
    Invalid(String),
}

#[derive(Deserialize)]
struct ReviewIn {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
    response: Option<ResponseIn>,
}

#[derive(Deserialize)]
struct ResponseIn {
    uid: Option<String>,
    allowed: Option<bool>,
    status: Option<WebhookStatus>,
    patch: Option<String>,
    #[serde(rename = "patchType")]
    patch_type: Option<String>,
    #[serde(rename = "auditAnnotations")]
    audit_annotations: Option<BTreeMap<String, String>>,
    warnings: Option<Vec<String>>,
}

/// Upstream's `VerifyAdmissionResponse` on the raw body.
pub(crate) fn verify_response(
    uid: &str,
    version: ReviewVersion,
    mutating: bool,
    body: &[u8],
) -> Result<Verified, VerifyError> {
    let review: ReviewIn = serde_json::from_slice(body).map_err(|e| {
        VerifyError::Decode(format!("couldn't get version/kind; json parse error: {e}"))
    })?;
    let kind = review.kind.unwrap_or_default();
    if kind.is_empty() {
        let shown = String::from_utf8_lossy(&body[..body.len().min(256)]).into_owned();
        return Err(VerifyError::Decode(format!(
            "Object 'Kind' is missing in '{shown}'"
        )));
    }
    let Some(resp) = review.response else {
        return Err(VerifyError::Invalid("webhook response was absent".into()));
    };
    let patch = match resp.patch.as_deref() {
        None | Some("") => Vec::new(),
        Some(p) => base64::engine::general_purpose::STANDARD
            .decode(p)
            .map_err(|e| {
                VerifyError::Decode(format!("illegal base64 data in response.patch: {e}"))
            })?,
    };
    let mut patch_type = String::new();
    match version {
        ReviewVersion::V1 => {
            let got_uid = resp.uid.unwrap_or_default();
            if got_uid != uid {
                return Err(VerifyError::Invalid(format!(
                    "expected response.uid=\"{uid}\", got \"{got_uid}\""
                )));
            }
            let api_version = review.api_version.unwrap_or_default();
            if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
                let (g, v) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
                return Err(VerifyError::Invalid(format!(
                    "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {g}/{v}, Kind={kind}"
                )));
            }
            if mutating {
                match (&resp.patch_type, patch.is_empty()) {
                    (None, false) => {
                        return Err(VerifyError::Invalid(
                            "webhook returned response.patch but not response.patchType".into(),
                        ));
                    }
                    (Some(_), true) => {
                        return Err(VerifyError::Invalid(
                            "webhook returned response.patchType but not response.patch".into(),
                        ));
                    }
                    (Some(t), false) if t.is_empty() => {
                        return Err(VerifyError::Invalid(
                            "webhook returned invalid response.patchType of \"\"".into(),
                        ));
                    }
                    (Some(t), false) => patch_type = t.clone(),
                    (None, true) => {}
                }
            } else {
                if !patch.is_empty() {
                    return Err(VerifyError::Invalid(
                        "validating webhook may not return response.patch".into(),
                    ));
                }
                if resp.patch_type.is_some() {
                    return Err(VerifyError::Invalid(
                        "validating webhook may not return response.patchType".into(),
                    ));
                }
            }
        }
        // v1beta1 checked neither uid nor kind; its only patch type is JSONPatch.
        ReviewVersion::V1beta1 => {
            if mutating && !patch.is_empty() {
                patch_type = "JSONPatch".into();
            }
        }
    }
    Ok(Verified {
        allowed: resp.allowed.unwrap_or(false),
        patch: if mutating { patch } else { Vec::new() },
        patch_type,
        status: resp.status,
        audit_annotations: resp.audit_annotations.unwrap_or_default(),
        warnings: resp.warnings.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_api::user::UserInfo;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn request_fields_as_upstream() {
        let kind = GroupVersionKind::new("apps", "v1", "Deployment");
        let resource = GroupVersionResource::new("apps", "v1", "deployments");
        let mut user = UserInfo::new("jane", &["dev", "system:authenticated"]);
        user.extra.insert("scopes".into(), vec!["a".into()]);
        let obj = json!({"kind": "Deployment"});
        let attrs = Attributes {
            operation: Operation::Create,
            kind: &kind,
            resource: &resource,
            subresource: "",
            namespace: "default",
            name: "web",
            user: &user,
            object: None,
            old_object: None,
            dry_run: true,
            options: Some(&json!({"fieldManager": "kubectl"})),
        };
        let inv = Invocation {
            resource: GroupVersionResource::new("apps", "v1beta1", "deployments"),
            subresource: String::new(),
            kind: GroupVersionKind::new("apps", "v1beta1", "Deployment"),
        };
        let r = admission_request("u-1", &attrs, &inv, Some(&obj), None);
        assert_eq!(
            r,
            json!({
                "uid": "u-1",
                "kind": {"group": "apps", "version": "v1beta1", "kind": "Deployment"},
                "resource": {"group": "apps", "version": "v1beta1", "resource": "deployments"},
                "requestKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                "requestResource": {"group": "apps", "version": "v1", "resource": "deployments"},
                "name": "web",
                "namespace": "default",
                "operation": "CREATE",
                "userInfo": {"username": "jane", "groups": ["dev", "system:authenticated"],
                    "extra": {"scopes": ["a"]}},
                "object": {"kind": "Deployment"},
                "oldObject": null,
                "dryRun": true,
                "options": {"fieldManager": "kubectl", "kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
            })
        );
        let text = serde_json::to_string(&review(ReviewVersion::V1, r)).unwrap();
        assert!(text.starts_with(
            r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u-1""#
        ));
    }

    #[test]
    fn namespaces_are_in_themselves_and_deletes_get_options() {
        let kind = GroupVersionKind::new("", "v1", "Namespace");
        let resource = GroupVersionResource::new("", "v1", "namespaces");
        let user = UserInfo::default();
        let attrs = Attributes {
            operation: Operation::Delete,
            kind: &kind,
            resource: &resource,
            subresource: "",
            namespace: "",
            name: "team-a",
            user: &user,
            object: None,
            old_object: None,
            dry_run: false,
            options: None,
        };
        let inv = Invocation {
            resource: resource.clone(),
            subresource: String::new(),
            kind: kind.clone(),
        };
        let r = admission_request("u", &attrs, &inv, None, Some(&json!({})));
        assert_eq!(r["namespace"], "team-a");
        let create = Attributes {
            operation: Operation::Create,
            ..attrs
        };
        let c = admission_request("u", &create, &inv, Some(&json!({})), None);
        assert_eq!(c.get("namespace"), None);
        assert_eq!(r["userInfo"], json!({}));
        assert_eq!(
            r["options"],
            json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"})
        );
    }

    #[test]
    fn review_versions() {
        let v = |l: &[&str]| {
            ReviewVersion::choose(&l.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(v(&["v2", "v1beta1", "v1"]), Ok(ReviewVersion::V1beta1));
        assert_eq!(v(&["v1", "v1beta1"]), Ok(ReviewVersion::V1));
        assert!(v(&["v2"]).is_err());
        assert!(v(&[]).is_err());
    }

    #[test]
    fn responses_checked_as_upstream() {
        let ok = |extra: Value| {
            let mut resp = json!({"uid": "u", "allowed": true});
            if let (Some(r), Some(e)) = (resp.as_object_mut(), extra.as_object()) {
                r.extend(e.clone());
            }
            serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp})).unwrap()
        };
        use VerifyError::*;
        let patch = b64(r#"[{"op":"add","path":"/x","value":1}]"#);
        let cases: Vec<(Vec<u8>, bool, Result<(), VerifyError>)> = vec![
            (ok(json!({})), true, Ok(())),
            (b"garbage".to_vec(), true, Err(Decode("couldn't get version/kind; json parse error: expected value at line 1 column 1".into()))),
            (br#"{"response":{}}"#.to_vec(), true, Err(Decode(r#"Object 'Kind' is missing in '{"response":{}}'"#.into()))),
            (br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}"#.to_vec(), true, Err(Invalid("webhook response was absent".into()))),
            (ok(json!({"uid": "other"})), true, Err(Invalid("expected response.uid=\"u\", got \"other\"".into()))),
            (serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "response": {"uid": "u"}})).unwrap(), true,
                Err(Invalid("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got admission.k8s.io/v1beta1, Kind=AdmissionReview".into()))),
            (ok(json!({"patch": patch})), true, Err(Invalid("webhook returned response.patch but not response.patchType".into()))),
            (ok(json!({"patchType": "JSONPatch"})), true, Err(Invalid("webhook returned response.patchType but not response.patch".into()))),
            (ok(json!({"patch": patch, "patchType": ""})), true, Err(Invalid("webhook returned invalid response.patchType of \"\"".into()))),
            (ok(json!({"patch": patch, "patchType": "JSONPatch"})), true, Ok(())),
            (ok(json!({"patch": patch})), false, Err(Invalid("validating webhook may not return response.patch".into()))),
            (ok(json!({"patchType": "JSONPatch"})), false, Err(Invalid("validating webhook may not return response.patchType".into()))),
            // Any decode error (serde's wording).
            (ok(json!({"allowed": "yes"})), false, Err(Decode(String::new()))),
        ];
        for (body, mutating, want) in cases {
            let got = verify_response("u", ReviewVersion::V1, mutating, &body).map(|_| ());
            match (&got, &want) {
                (Err(Decode(_)), Err(Decode(w))) if w.is_empty() => {}
                _ => assert_eq!(got, want, "{}", String::from_utf8_lossy(&body)),
            }
        }
        let v = verify_response(
            "u",
            ReviewVersion::V1,
            true,
            &ok(json!({
            "patch": patch, "patchType": "JSONPatch", "warnings": ["w1"],
            "auditAnnotations": {"k": "v"}, "status": {"code": 403, "message": "m"}})),
        )
        .unwrap();
        assert_eq!(v.patch, br#"[{"op":"add","path":"/x","value":1}]"#);
        assert_eq!(v.warnings, ["w1"]);
        assert_eq!(v.audit_annotations["k"], "v");
        assert_eq!(v.status.and_then(|s| s.code), Some(403));

        // v1beta1 answers are not checked for uid or kind.
        let body = br#"{"kind":"AdmissionReview","response":{"allowed":true,"patch":"W10="}}"#;
        let v = verify_response("u", ReviewVersion::V1beta1, true, body).unwrap();
        assert_eq!((v.allowed, v.patch_type.as_str()), (true, "JSONPatch"));
    }
}
