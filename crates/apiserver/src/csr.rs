//! certificates.k8s.io/v1 CertificateSigningRequest: upstream's REST strategies
//! (`pkg/registry/certificates/certificates/strategy.go`) and validation
//! (`pkg/apis/certificates/validation`).
//!
//! - create: `spec.username/uid/groups/extra` are the requester's, whatever the
//!   body says (approvers trust them), and status starts empty;
//! - the main endpoint changes neither spec nor status;
//! - `status` changes the certificate and conditions other than
//!   Approved/Denied (a signer's Failed);
//! - `approval` changes only `status.conditions`.
//!
//! Pure: the caller passes the user and the time.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use berth_api::user::UserInfo;
use berth_api::validation::{FieldError, is_dns1123_label, is_dns1123_subdomain};
use serde_json::{Map, Value, json};
use x509_parser::prelude::FromDer;

use crate::strategy::UpdateScope;

pub const GROUP: &str = "certificates.k8s.io";
pub const KIND: &str = "CertificateSigningRequest";

pub const APPROVED: &str = "Approved";
pub const DENIED: &str = "Denied";
pub const FAILED: &str = "Failed";

/// The signer upstream keeps only for v1beta1 objects.
const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";

/// Every usage upstream accepts, sorted as its error lists them.
pub const VALID_USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// Condition types that may only be "True".
const TRUE_ONLY_TYPES: &[&str] = &[APPROVED, DENIED, FAILED];
const ALL_STATUSES: &[&str] = &["False", "True", "Unknown"];

/// Upstream's `PrepareForCreate`: the requester's identity replaces whatever
/// the caller put in spec, and no request is created approved or issued.
pub fn prepare_for_create(obj: &mut Value, user: Option<&UserInfo>) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    if let Some(spec) = spec.as_object_mut() {
        for k in ["username", "uid", "groups", "extra"] {
            spec.remove(k);
        }
        if let Some(u) = user {
            spec.insert("username".into(), json!(u.name));
            if !u.uid.is_empty() {
                spec.insert("uid".into(), json!(u.uid));
            }
            if !u.groups.is_empty() {
                spec.insert("groups".into(), json!(u.groups));
            }
            if !u.extra.is_empty() {
                spec.insert("extra".into(), json!(u.extra));
            }
        }
    }
    map.insert("status".into(), json!({}));
}

/// Upstream's `PrepareForUpdate` of each endpoint; `now` (RFC 3339) fills
/// condition timestamps left unset.
pub fn prepare_for_update(scope: UpdateScope, new: &mut Value, old: &Value, now: &str) {
    let Some(map) = new.as_object_mut() else {
        return;
    };
    let old_spec = old.get("spec").cloned().unwrap_or_else(|| json!({}));
    let old_status = old.get("status").cloned().unwrap_or_else(|| json!({}));
    map.insert("spec".into(), old_spec);
    match scope {
        UpdateScope::Approval => {
            let conditions = map.get("status").and_then(|s| s.get("conditions")).cloned();
            let mut status = old_status;
            set_conditions(&mut status, conditions);
            map.insert("status".into(), status);
        }
        UpdateScope::Status => {
            let status = map.entry("status").or_insert_with(|| json!({}));
            if !status.is_object() {
                *status = json!({});
            }
            // Approval is not this endpoint's to change: the old instances
            // stay when their count is unchanged (validation refuses the rest).
            for t in [APPROVED, DENIED] {
                preserve_condition_instances(status, &old_status, t);
            }
        }
        _ => {
            map.insert("status".into(), old_status);
            return;
        }
    }
    if let Some(status) = map.get_mut("status") {
        default_condition_status(status);
        populate_condition_timestamps(status, old.get("status"), now);
    }
}

fn set_conditions(status: &mut Value, conditions: Option<Value>) {
    if !status.is_object() {
        *status = json!({});
    }
    if let Some(m) = status.as_object_mut() {
        match conditions {
            Some(c) if !c.is_null() => {
                m.insert("conditions".into(), c);
            }
            _ => {
                m.remove("conditions");
            }
        }
    }
}

fn conditions(status: Option<&Value>) -> &[Value] {
    status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn cond_str<'a>(c: &'a Value, key: &str) -> &'a str {
    c.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Upstream's `preserveConditionInstances`.
fn preserve_condition_instances(status: &mut Value, old_status: &Value, t: &str) {
    let old: Vec<Value> = conditions(Some(old_status))
        .iter()
        .filter(|c| cond_str(c, "type") == t)
        .cloned()
        .collect();
    let Some(new) = status.get_mut("conditions").and_then(Value::as_array_mut) else {
        return;
    };
    let indices: Vec<usize> = (0..new.len())
        .filter(|&i| cond_str(&new[i], "type") == t)
        .collect();
    if indices.len() != old.len() {
        return;
    }
    for (i, o) in indices.into_iter().zip(old) {
        new[i] = o;
    }
}

/// v1's `SetDefaults_CertificateSigningRequestCondition`: status "True".
fn default_condition_status(status: &mut Value) {
    if let Some(list) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in list.iter_mut().filter_map(Value::as_object_mut) {
            if c.get("status")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                c.insert("status".into(), json!("True"));
            }
        }
    }
}

/// Upstream's `populateConditionTimestamps`: unset update times are now;
/// an unset transition time is kept from the old condition of the same type
/// and status, else now.
fn populate_condition_timestamps(status: &mut Value, old_status: Option<&Value>, now: &str) {
    let old = conditions(old_status);
    let Some(list) = status.get_mut("conditions").and_then(Value::as_array_mut) else {
        return;
    };
    for c in list.iter_mut().filter_map(Value::as_object_mut) {
        let unset = |m: &Map<String, Value>, k: &str| {
            m.get(k).and_then(Value::as_str).is_none_or(str::is_empty)
        };
        if unset(c, "lastUpdateTime") {
            c.insert("lastUpdateTime".into(), json!(now));
        }
        if unset(c, "lastTransitionTime") {
            let (t, s) = (
                c.get("type").and_then(Value::as_str).unwrap_or(""),
                c.get("status").and_then(Value::as_str).unwrap_or(""),
            );
            let kept = old
                .iter()
                .find(|o| {
                    cond_str(o, "type") == t
                        && cond_str(o, "status") == s
                        && !cond_str(o, "lastTransitionTime").is_empty()
                })
                .map(|o| cond_str(o, "lastTransitionTime").to_string());
            c.insert(
                "lastTransitionTime".into(),
                json!(kept.unwrap_or_else(|| now.to_string())),
            );
        }
    }
}

/// The bytes of a `[]byte` field (base64 in JSON); `None` when absent or not base64.
fn bytes_at(obj: &Value, path: &[&str]) -> Option<Vec<u8>> {
    let mut v = obj;
    for p in path {
        v = v.get(*p)?;
    }
    STANDARD.decode(v.as_str()?).ok()
}

/// Upstream's `ParseCSR` + `CheckSignature`: the first PEM block must be a
/// CERTIFICATE REQUEST whose signature verifies.
pub fn check_request(pem: &[u8]) -> Result<(), String> {
    let der = request_der(pem)?;
    let (_, req) = x509_parser::certification_request::X509CertificationRequest::from_der(&der)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    req.verify_signature()
        .map_err(|e| format!("x509: signature verification failure: {e}"))
}

/// The DER of the request's first PEM block.
pub fn request_der(pem: &[u8]) -> Result<Vec<u8>, String> {
    const WANT: &str = "PEM block type must be CERTIFICATE REQUEST";
    match x509_parser::pem::Pem::iter_from_buffer(pem).next() {
        Some(Ok(block)) if block.label == "CERTIFICATE REQUEST" => Ok(block.contents),
        _ => Err(WANT.to_string()),
    }
}

/// Upstream's `validateCertificate`: empty, or only CERTIFICATE blocks that parse.
fn check_certificate(pem: &[u8]) -> Result<(), String> {
    if pem.is_empty() {
        return Ok(());
    }
    let mut blocks = 0;
    for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let Ok(block) = block else { break };
        if block.label != "CERTIFICATE" {
            return Err(format!(
                "only CERTIFICATE PEM blocks are allowed, found {:?}",
                block.label
            ));
        }
        blocks += 1;
        x509_parser::certificate::X509Certificate::from_der(&block.contents)
            .map_err(|e| format!("x509: malformed certificate: {e}"))?;
    }
    if blocks == 0 {
        return Err("must contain at least one CERTIFICATE PEM block".into());
    }
    Ok(())
}

/// Upstream's `ValidateSignerName`.
fn validate_signer_name(path: &str, signer: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if signer.is_empty() {
        errs.push(FieldError::required(path, ""));
        return errs;
    }
    let segments: Vec<&str> = signer.split('/').collect();
    let [domain, rest] = segments[..] else {
        errs.push(FieldError::invalid(
            path,
            signer,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return errs;
    };
    if domain.len() > 253 {
        errs.push(FieldError::too_long(path, 253));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    for l in &labels {
        let e = is_dns1123_label(l);
        if !e.is_empty() {
            errs.extend(e.into_iter().map(|msg| {
                FieldError::invalid(path, domain, format!("validating label {l:?}: {msg}"))
            }));
            break;
        }
    }
    if labels.len() < 2 {
        errs.push(FieldError::invalid(
            path,
            domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    for l in rest.split('.') {
        let e = is_dns1123_subdomain(l);
        if !e.is_empty() {
            errs.extend(e.into_iter().map(|msg| {
                FieldError::invalid(path, rest, format!("validating label {l:?}: {msg}"))
            }));
            break;
        }
    }
    let max = 253 + (253 + 63 + 1) + 1;
    if signer.len() > max {
        errs.push(FieldError::too_long(path, max));
    }
    errs
}

fn usages(obj: &Value) -> Vec<&str> {
    obj.pointer("/spec/usages")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|u| u.as_str().unwrap_or("")).collect())
        .unwrap_or_default()
}

fn has_duplicates<'a>(items: impl Iterator<Item = &'a str>) -> bool {
    let mut seen = std::collections::HashSet::new();
    items.into_iter().any(|i| !seen.insert(i))
}

/// Upstream's compatibility options: what old stored objects may keep.
#[derive(Default)]
struct Options {
    both_approved_and_denied: bool,
    legacy_signer: bool,
    duplicate_condition_types: bool,
    empty_condition_type: bool,
    arbitrary_certificate: bool,
    unknown_usages: bool,
    duplicate_usages: bool,
    setting_certificate: bool,
    setting_approval: bool,
}

fn options(new: &Value, old: Option<&Value>, scope: Option<UpdateScope>) -> Options {
    let Some(old) = old else {
        return Options::default();
    };
    let old_conds = conditions(old.get("status"));
    let has_type = |t: &str| old_conds.iter().any(|c| cond_str(c, "type") == t);
    let old_cert = bytes_at(old, &["status", "certificate"]).unwrap_or_default();
    let new_cert = bytes_at(new, &["status", "certificate"]).unwrap_or_default();
    let old_usages = usages(old);
    Options {
        both_approved_and_denied: has_type(APPROVED) && has_type(DENIED),
        legacy_signer: old.pointer("/spec/signerName").and_then(Value::as_str)
            == Some(LEGACY_UNKNOWN_SIGNER),
        duplicate_condition_types: has_duplicates(old_conds.iter().map(|c| cond_str(c, "type"))),
        empty_condition_type: old_conds.iter().any(|c| cond_str(c, "type").is_empty()),
        arbitrary_certificate: new_cert == old_cert || check_certificate(&old_cert).is_err(),
        unknown_usages: old_usages.iter().any(|u| !VALID_USAGES.contains(u)),
        duplicate_usages: has_duplicates(old_usages.into_iter()),
        setting_certificate: matches!(scope, Some(UpdateScope::Status)),
        setting_approval: matches!(scope, Some(UpdateScope::Approval)),
    }
}

/// Upstream's create and update validation of the endpoint `scope` (`None`
/// on create); `old` is the stored object on update.
pub fn validate(obj: &Value, old: Option<&Value>, scope: Option<UpdateScope>) -> Vec<FieldError> {
    let opts = options(obj, old, scope);
    let mut errs = Vec::new();
    match bytes_at(obj, &["spec", "request"]) {
        Some(pem) => {
            if let Err(e) = check_request(&pem) {
                let shown = obj.pointer("/spec/request").cloned().unwrap_or(Value::Null);
                errs.push(FieldError::invalid("spec.request", shown, e));
            }
        }
        None => errs.push(FieldError::invalid(
            "spec.request",
            Value::Null,
            "PEM block type must be CERTIFICATE REQUEST",
        )),
    }
    let u = usages(obj);
    if u.is_empty() {
        errs.push(FieldError::required("spec.usages", ""));
    }
    if !opts.unknown_usages {
        for (i, usage) in u.iter().enumerate() {
            if !VALID_USAGES.contains(usage) {
                errs.push(FieldError::not_supported(
                    format!("spec.usages[{i}]"),
                    *usage,
                    VALID_USAGES,
                ));
            }
        }
    }
    if !opts.duplicate_usages {
        let mut seen = std::collections::HashSet::new();
        for (i, usage) in u.iter().enumerate() {
            if !seen.insert(*usage) {
                errs.push(FieldError::duplicate(format!("spec.usages[{i}]"), *usage));
            }
        }
    }
    let signer = obj
        .pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !opts.legacy_signer && signer == LEGACY_UNKNOWN_SIGNER {
        errs.push(FieldError::invalid(
            "spec.signerName",
            signer,
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        errs.extend(validate_signer_name("spec.signerName", signer));
    }
    if let Some(s) = obj
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        && s < 600
    {
        errs.push(FieldError::invalid(
            "spec.expirationSeconds",
            s,
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    errs.extend(validate_conditions(obj, &opts));
    if !opts.arbitrary_certificate {
        let cert = bytes_at(obj, &["status", "certificate"]).unwrap_or_default();
        if let Err(e) = check_certificate(&cert) {
            errs.push(FieldError::invalid(
                "status.certificate",
                "<certificate data>",
                e,
            ));
        }
    }
    if let Some(old) = old {
        errs.extend(validate_update(obj, old, &opts));
    }
    errs
}

fn validate_conditions(obj: &Value, opts: &Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (mut approved, mut denied) = (false, false);
    let mut seen = std::collections::HashSet::new();
    for (i, c) in conditions(obj.get("status")).iter().enumerate() {
        let path = format!("status.conditions[{i}]");
        let t = cond_str(c, "type");
        if !opts.empty_condition_type && t.is_empty() {
            errs.push(FieldError::required(format!("{path}.type"), ""));
        }
        let allowed: &[&str] = if TRUE_ONLY_TYPES.contains(&t) {
            &["True"]
        } else {
            ALL_STATUSES
        };
        match cond_str(c, "status") {
            "" => errs.push(FieldError::required(format!("{path}.status"), "")),
            s if !allowed.contains(&s) => errs.push(FieldError::not_supported(
                format!("{path}.status"),
                s,
                allowed,
            )),
            _ => {}
        }
        if !opts.both_approved_and_denied {
            let clash = match t {
                APPROVED => {
                    approved = true;
                    denied
                }
                DENIED => {
                    denied = true;
                    approved
                }
                _ => false,
            };
            if clash {
                errs.push(FieldError::invalid(
                    format!("{path}.type"),
                    t,
                    "Approved and Denied conditions are mutually exclusive",
                ));
            }
        }
        if !opts.duplicate_condition_types && !seen.insert(t) {
            errs.push(FieldError::duplicate(format!("{path}.type"), t));
        }
    }
    errs
}

fn of_type<'a>(obj: &'a Value, t: &str) -> Vec<&'a Value> {
    conditions(obj.get("status"))
        .iter()
        .filter(|c| cond_str(c, "type") == t)
        .collect()
}

fn validate_update(new: &Value, old: &Value, opts: &Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for t in [APPROVED, DENIED, FAILED] {
        if of_type(new, t).len() < of_type(old, t).len() {
            errs.push(FieldError::forbidden(
                "status.conditions",
                format!("updates may not remove a condition of type {t:?}"),
            ));
        }
    }
    if !opts.setting_approval {
        for t in [APPROVED, DENIED] {
            let (o, n) = (of_type(old, t), of_type(new, t));
            if n.len() > o.len() {
                errs.push(FieldError::forbidden(
                    "status.conditions",
                    format!("updates may not add a condition of type {t:?}"),
                ));
            } else if n.len() == o.len() && n != o {
                errs.push(FieldError::forbidden(
                    "status.conditions",
                    format!("updates may not modify a condition of type {t:?}"),
                ));
            }
        }
    }
    let old_cert = bytes_at(old, &["status", "certificate"]).unwrap_or_default();
    let new_cert = bytes_at(new, &["status", "certificate"]).unwrap_or_default();
    if new_cert != old_cert {
        if !opts.setting_certificate {
            errs.push(FieldError::forbidden(
                "status.certificate",
                "updates may not set certificate content",
            ));
        } else if !old_cert.is_empty() {
            errs.push(FieldError::forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_api::validation::FieldErrorType;

    const NOW: &str = "2025-06-01T12:00:00Z";

    /// (what is wrong, the object, the field and kind of the first error).
    type CreateCase = (&'static str, Value, Option<(&'static str, FieldErrorType)>);
    /// (what, endpoint, old status, new status, the first error's field and detail).
    type UpdateCase = (
        &'static str,
        Option<UpdateScope>,
        Value,
        Value,
        Option<(&'static str, &'static str)>,
    );

    fn request_pem(cn: &str, orgs: &[&str]) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        let mut dn = rcgen::DistinguishedName::new();
        for o in orgs {
            dn.push(rcgen::DnType::OrganizationName, *o);
        }
        dn.push(rcgen::DnType::CommonName, cn);
        params.distinguished_name = dn;
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    fn b64(s: &str) -> String {
        STANDARD.encode(s.as_bytes())
    }

    fn csr(request: &str) -> Value {
        json!({
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": {"name": "node-csr-1"},
            "spec": {
                "request": b64(request),
                "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                "usages": ["digital signature", "key encipherment", "client auth"],
            },
        })
    }

    fn self_signed_pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        rcgen::CertificateParams::default()
            .self_signed(&key)
            .unwrap()
            .pem()
    }

    #[test]
    fn create_takes_the_requester_from_the_request_not_the_body() {
        let user = UserInfo {
            name: "system:bootstrap:abcdef".into(),
            uid: String::new(),
            groups: vec!["system:bootstrappers".into(), "system:authenticated".into()],
            extra: [("k".to_string(), vec!["v".to_string()])].into(),
        };
        let mut obj = csr("x");
        obj["spec"]["username"] = json!("system:admin");
        obj["spec"]["uid"] = json!("forged");
        obj["spec"]["groups"] = json!(["system:masters"]);
        obj["status"] =
            json!({"conditions": [{"type": "Approved", "status": "True"}], "certificate": "eA=="});
        prepare_for_create(&mut obj, Some(&user));
        assert_eq!(obj["spec"]["username"], "system:bootstrap:abcdef");
        assert!(obj["spec"].get("uid").is_none());
        assert_eq!(
            obj["spec"]["groups"],
            json!(["system:bootstrappers", "system:authenticated"])
        );
        assert_eq!(obj["spec"]["extra"], json!({"k": ["v"]}));
        assert_eq!(obj["status"], json!({}));
        assert_eq!(
            obj["spec"]["signerName"],
            "kubernetes.io/kube-apiserver-client-kubelet"
        );

        let mut anon = csr("x");
        anon["spec"]["username"] = json!("someone");
        prepare_for_create(&mut anon, None);
        assert!(anon["spec"].get("username").is_none());
    }

    #[test]
    fn each_endpoint_changes_only_its_part() {
        let approved = json!({"type": "Approved", "status": "True", "reason": "KubectlApprove",
            "lastUpdateTime": "2025-01-01T00:00:00Z", "lastTransitionTime": "2025-01-01T00:00:00Z"});
        let mut old = csr("x");
        old["status"] = json!({"conditions": [approved.clone()]});
        let mut body = old.clone();
        body["spec"]["signerName"] = json!("example.com/other");
        body["status"] = json!({"certificate": "eA==", "conditions": [
            {"type": "Denied", "status": "True"},
            {"type": "Failed", "reason": "SignerValidationFailure"},
        ]});
        body["metadata"]["labels"] = json!({"a": "b"});

        // Main: metadata only.
        let mut main = body.clone();
        prepare_for_update(UpdateScope::Main, &mut main, &old, NOW);
        assert_eq!(main["spec"], old["spec"]);
        assert_eq!(main["status"], old["status"]);
        assert_eq!(main["metadata"]["labels"], json!({"a": "b"}));

        // Approval: the conditions as sent (defaulted, timestamped), nothing else.
        let mut approval = body.clone();
        prepare_for_update(UpdateScope::Approval, &mut approval, &old, NOW);
        assert_eq!(approval["spec"], old["spec"]);
        assert!(approval["status"].get("certificate").is_none());
        assert_eq!(
            approval["status"]["conditions"][1],
            json!({"type": "Failed", "status": "True", "reason": "SignerValidationFailure",
                   "lastUpdateTime": NOW, "lastTransitionTime": NOW})
        );

        // Status: the certificate and Failed; an approval edit is put back when
        // the count of Approved/Denied conditions is unchanged.
        let mut st = old.clone();
        st["status"] = json!({"certificate": "eA==", "conditions": [
            {"type": "Approved", "status": "True", "reason": "Edited"},
            {"type": "Failed", "status": "True"},
        ]});
        prepare_for_update(UpdateScope::Status, &mut st, &old, NOW);
        assert_eq!(st["status"]["certificate"], "eA==");
        assert_eq!(st["status"]["conditions"][0], approved);
        assert_eq!(st["status"]["conditions"][1]["lastUpdateTime"], NOW);
    }

    #[test]
    fn transition_time_is_kept_for_an_unchanged_condition() {
        let mut old = csr("x");
        old["status"] = json!({"conditions": [{"type": "Approved", "status": "True",
            "lastTransitionTime": "2025-01-01T00:00:00Z"}]});
        let mut new = old.clone();
        new["status"]["conditions"][0]
            .as_object_mut()
            .unwrap()
            .remove("lastTransitionTime");
        prepare_for_update(UpdateScope::Approval, &mut new, &old, NOW);
        assert_eq!(
            new["status"]["conditions"][0]["lastTransitionTime"],
            "2025-01-01T00:00:00Z"
        );
        assert_eq!(new["status"]["conditions"][0]["lastUpdateTime"], NOW);
    }

    /// (what is wrong, the object, the field and kind of the first error).
    #[test]
    fn create_validation() {
        let good = request_pem("system:node:n1", &["system:nodes"]);
        let with = |f: &dyn Fn(&mut Value)| {
            let mut o = csr(&good);
            f(&mut o);
            o
        };
        let mut tampered = good.clone().into_bytes();
        // Flip a byte inside the base64 body: the signature no longer verifies
        // (or the DER no longer parses); either way the request is refused.
        let mid = tampered.len() / 2;
        tampered[mid] = if tampered[mid] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        let cases: Vec<CreateCase> = vec![
            ("a good request", csr(&good), None),
            (
                "not PEM",
                csr("hello"),
                Some(("spec.request", FieldErrorType::Invalid)),
            ),
            (
                "a certificate, not a request",
                csr(&self_signed_pem()),
                Some(("spec.request", FieldErrorType::Invalid)),
            ),
            (
                "a bad signature",
                csr(&tampered),
                Some(("spec.request", FieldErrorType::Invalid)),
            ),
            (
                "no usages",
                with(&|o| o["spec"]["usages"] = json!([])),
                Some(("spec.usages", FieldErrorType::Required)),
            ),
            (
                "an unknown usage",
                with(&|o| o["spec"]["usages"] = json!(["client auth", "flying"])),
                Some(("spec.usages[1]", FieldErrorType::NotSupported)),
            ),
            (
                "a duplicate usage",
                with(&|o| o["spec"]["usages"] = json!(["client auth", "client auth"])),
                Some(("spec.usages[1]", FieldErrorType::Duplicate)),
            ),
            (
                "no signer",
                with(&|o| o["spec"]["signerName"] = json!("")),
                Some(("spec.signerName", FieldErrorType::Required)),
            ),
            (
                "a signer without a path",
                with(&|o| o["spec"]["signerName"] = json!("example.com")),
                Some(("spec.signerName", FieldErrorType::Invalid)),
            ),
            (
                "a signer domain without dots",
                with(&|o| o["spec"]["signerName"] = json!("example/signer")),
                Some(("spec.signerName", FieldErrorType::Invalid)),
            ),
            (
                "the legacy signer",
                with(&|o| o["spec"]["signerName"] = json!("kubernetes.io/legacy-unknown")),
                Some(("spec.signerName", FieldErrorType::Invalid)),
            ),
            (
                "a custom signer",
                with(&|o| o["spec"]["signerName"] = json!("example.com/my-signer")),
                None,
            ),
            (
                "under ten minutes",
                with(&|o| o["spec"]["expirationSeconds"] = json!(599)),
                Some(("spec.expirationSeconds", FieldErrorType::Invalid)),
            ),
            (
                "ten minutes",
                with(&|o| o["spec"]["expirationSeconds"] = json!(600)),
                None,
            ),
            (
                "approved and denied",
                with(&|o| {
                    o["status"] = json!({"conditions": [
                        {"type": "Approved", "status": "True"},
                        {"type": "Denied", "status": "True"}]})
                }),
                Some(("status.conditions[1].type", FieldErrorType::Invalid)),
            ),
            (
                "approved False",
                with(&|o| {
                    o["status"] = json!({"conditions": [{"type": "Approved", "status": "False"}]})
                }),
                Some(("status.conditions[0].status", FieldErrorType::NotSupported)),
            ),
            (
                "a condition without type",
                with(&|o| o["status"] = json!({"conditions": [{"status": "True"}]})),
                Some(("status.conditions[0].type", FieldErrorType::Required)),
            ),
            (
                "a certificate that is not one",
                with(&|o| o["status"] = json!({"certificate": b64("junk")})),
                Some(("status.certificate", FieldErrorType::Invalid)),
            ),
        ];
        for (what, obj, want) in cases {
            let errs = validate(&obj, None, None);
            match want {
                None => assert!(errs.is_empty(), "{what}: {errs:?}"),
                Some((field, kind)) => {
                    let first = errs.first().unwrap_or_else(|| panic!("{what}: no error"));
                    assert_eq!(
                        (first.field.as_str(), first.kind),
                        (field, kind),
                        "{what}: {errs:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn request_errors_read_as_upstream() {
        assert_eq!(
            check_request(b"hello").unwrap_err(),
            "PEM block type must be CERTIFICATE REQUEST"
        );
        let e = validate(&csr("hello"), None, None);
        assert_eq!(
            e[0].detail, "PEM block type must be CERTIFICATE REQUEST",
            "{e:?}"
        );
        let e = validate(&with_usages(&["flying"]), None, None);
        assert!(
            e[0].detail
                .starts_with("supported values: \"any\", \"cert sign\""),
            "{e:?}"
        );
    }

    fn with_usages(u: &[&str]) -> Value {
        let mut o = csr(&request_pem("x", &[]));
        o["spec"]["usages"] = json!(u);
        o
    }

    /// (endpoint, old status, new status, the first error's field and detail).
    #[test]
    fn update_validation() {
        let pem = request_pem("system:node:n1", &["system:nodes"]);
        let cert = b64(&self_signed_pem());
        let other_cert = b64(&self_signed_pem());
        let approved = json!({"type": "Approved", "status": "True", "reason": "AutoApproved"});
        let denied = json!({"type": "Denied", "status": "True"});
        let failed = json!({"type": "Failed", "status": "True"});
        let cases: Vec<UpdateCase> = vec![
            (
                "approve",
                Some(UpdateScope::Approval),
                json!({}),
                json!({"conditions": [approved.clone()]}),
                None,
            ),
            (
                "approve through status",
                Some(UpdateScope::Status),
                json!({}),
                json!({"conditions": [approved.clone()]}),
                Some((
                    "status.conditions",
                    "updates may not add a condition of type \"Approved\"",
                )),
            ),
            (
                "approve through the main endpoint",
                Some(UpdateScope::Main),
                json!({}),
                json!({"conditions": [approved.clone()]}),
                Some((
                    "status.conditions",
                    "updates may not add a condition of type \"Approved\"",
                )),
            ),
            (
                "un-approve",
                Some(UpdateScope::Approval),
                json!({"conditions": [approved.clone()]}),
                json!({}),
                Some((
                    "status.conditions",
                    "updates may not remove a condition of type \"Approved\"",
                )),
            ),
            (
                "deny an approved one",
                Some(UpdateScope::Approval),
                json!({"conditions": [approved.clone()]}),
                json!({"conditions": [approved.clone(), denied.clone()]}),
                Some((
                    "status.conditions[1].type",
                    "Approved and Denied conditions are mutually exclusive",
                )),
            ),
            (
                "issue",
                Some(UpdateScope::Status),
                json!({"conditions": [approved.clone()]}),
                json!({"conditions": [approved.clone()], "certificate": cert}),
                None,
            ),
            (
                "fail",
                Some(UpdateScope::Status),
                json!({"conditions": [approved.clone()]}),
                json!({"conditions": [approved.clone(), failed.clone()]}),
                None,
            ),
            (
                "issue through approval",
                Some(UpdateScope::Approval),
                json!({"conditions": [approved.clone()]}),
                json!({"conditions": [approved.clone()], "certificate": cert}),
                Some((
                    "status.certificate",
                    "updates may not set certificate content",
                )),
            ),
            (
                "re-issue",
                Some(UpdateScope::Status),
                json!({"conditions": [approved.clone()], "certificate": cert}),
                json!({"conditions": [approved.clone()], "certificate": other_cert}),
                Some((
                    "status.certificate",
                    "updates may not modify existing certificate content",
                )),
            ),
            (
                "unfail",
                Some(UpdateScope::Status),
                json!({"conditions": [approved.clone(), failed.clone()]}),
                json!({"conditions": [approved.clone()]}),
                Some((
                    "status.conditions",
                    "updates may not remove a condition of type \"Failed\"",
                )),
            ),
        ];
        for (what, scope, old_status, new_status, want) in cases {
            let mut old = csr(&pem);
            old["status"] = old_status;
            let mut new = csr(&pem);
            new["status"] = new_status;
            let errs = validate(&new, Some(&old), scope);
            match want {
                None => assert!(errs.is_empty(), "{what}: {errs:?}"),
                Some((field, detail)) => {
                    let first = errs.first().unwrap_or_else(|| panic!("{what}: no error"));
                    assert_eq!(
                        (first.field.as_str(), first.detail.as_str()),
                        (field, detail),
                        "{what}"
                    );
                }
            }
        }
    }
}
