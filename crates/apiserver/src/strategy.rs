//! Per-kind behaviour on create, update and delete (upstream's "REST strategies"):
//! what a create resets, which changes bump `metadata.generation`, which parts of
//! an object each endpoint may change, and how deletion is graceful.

use berth_api::registry::ResourceType;
use berth_api::user::UserInfo;
use berth_api::validation::FieldError;
use serde_json::{Value, json};

use crate::objects;

/// Create-time rules: upstream's strategy mutations (status reset, generation 1,
/// namespace finalizer, job selector) from `berth_api::defaults`, then the
/// server-owned namespace name label.
/// `user` is the requester (a CertificateSigningRequest records it).
pub fn prepare_for_create(rt: &ResourceType, obj: &mut Value, user: Option<&UserInfo>) {
    if rt.custom.is_some() {
        crate::apiextensions::customresource::prepare_for_create(rt, obj);
        return;
    }
    berth_api::defaults::prepare_for_create(rt, obj);
    if crate::apiextensions::is_crd(rt) {
        crate::apiextensions::prepare_for_create(obj);
    }
    if rt.kind == "Namespace" {
        namespace_name_label(obj);
    }
    if crate::csr::is_csr(rt) {
        crate::csr::prepare_for_create(obj, user);
    }
    if is_persistent_volume(rt) {
        stamp_phase_transition(obj, None, &objects::now_rfc3339());
    }
}

fn is_persistent_volume(rt: &ResourceType) -> bool {
    rt.custom.is_none() && rt.group.is_empty() && rt.kind == "PersistentVolume"
}

/// Upstream's PersistentVolumeLastPhaseTransitionTime (on by default): a new
/// volume, and one whose phase a status write changes, records when, unless
/// the writer set a new time itself.
fn stamp_phase_transition(new: &mut Value, old: Option<&Value>, now: &str) {
    let phase = |v: &Value| v.pointer("/status/phase").cloned();
    let stamp = |v: &Value| v.pointer("/status/lastPhaseTransitionTime").cloned();
    if let Some(old) = old
        && (phase(old) == phase(new) || (stamp(new).is_some() && stamp(new) != stamp(old)))
    {
        return;
    }
    if let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) {
        status.insert("lastPhaseTransitionTime".into(), json!(now));
    }
}

/// Which part of the object an update through `subresource` may change.
#[derive(Debug, Clone, Copy)]
pub enum UpdateScope {
    /// The main resource: everything but status (for kinds with a status subresource).
    Main,
    /// `…/status`: only status (and, as upstream, labels/annotations are kept from old).
    Status,
    /// `namespaces/<name>/finalize`: only `spec.finalizers`.
    Finalize,
    /// `pods/<name>/ephemeralcontainers`: only `spec.ephemeralContainers`.
    EphemeralContainers,
    /// `certificatesigningrequests/<name>/approval`: only `status.conditions`.
    Approval,
}

impl UpdateScope {
    /// The subresource admission sees for this scope.
    pub fn subresource(self) -> Option<&'static str> {
        match self {
            UpdateScope::Main => None,
            UpdateScope::Status => Some("status"),
            UpdateScope::Finalize => Some("finalize"),
            UpdateScope::EphemeralContainers => Some("ephemeralcontainers"),
            UpdateScope::Approval => Some("approval"),
        }
    }
}

/// Carries over from `old` what the endpoint may not change, and fixes up
/// metadata that only the server sets.
pub fn prepare_for_update(rt: &ResourceType, scope: UpdateScope, new: &mut Value, old: &Value) {
    // Server-owned metadata.
    for k in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        let old_v = old.get("metadata").and_then(|m| m.get(k)).cloned();
        if let Some(m) = objects::meta_mut(new) {
            match old_v {
                Some(v) => {
                    m.insert(k.into(), v);
                }
                None => {
                    m.remove(k);
                }
            }
        }
    }
    match scope {
        UpdateScope::Main if rt.custom.is_some() => {
            crate::apiextensions::customresource::prepare_for_update_main(rt, new, old)
        }
        UpdateScope::Main => {
            berth_api::defaults::prepare_for_update(rt, new, old);
            if crate::apiextensions::is_crd(rt) {
                crate::apiextensions::prepare_for_update(new, old);
            }
        }
        UpdateScope::Status => {
            let status = new.get("status").cloned();
            let mut merged = old.clone();
            match status {
                Some(s) => merged["status"] = s,
                None => {
                    if let Some(o) = merged.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
            // Only status changes; resourceVersion comes from the request for the precondition.
            if let Some(rv) = objects::resource_version(new).map(String::from)
                && let Some(m) = objects::meta_mut(&mut merged)
            {
                m.insert("resourceVersion".into(), json!(rv));
            }
            *new = merged;
            if is_persistent_volume(rt) {
                stamp_phase_transition(new, Some(old), &objects::now_rfc3339());
            }
        }
        UpdateScope::Finalize => keep_only_spec_field(new, old, "finalizers"),
        UpdateScope::EphemeralContainers => keep_only_spec_field(new, old, "ephemeralContainers"),
        // Only a CertificateSigningRequest has it; its rules follow.
        UpdateScope::Approval => {}
    }
    if crate::csr::is_csr(rt) {
        crate::csr::prepare_for_update(scope, new, old, &objects::now_rfc3339());
    }
    if rt.kind == "Namespace" {
        namespace_name_label(new);
    }
    if rt.kind == "Pod" {
        // qosClass is computed once, at creation; resources of a running pod are immutable.
        if let Some(q) = old.get("status").and_then(|s| s.get("qosClass")).cloned()
            && new.get("status").is_some_and(Value::is_object)
        {
            new["status"]["qosClass"] = q;
        }
    }
}

/// Kind-specific validation beyond `berth_api::validation` (`scope` is `None`
/// on create, `old` the stored object on update).
pub fn validate(
    rt: &ResourceType,
    scope: Option<UpdateScope>,
    obj: &Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    if crate::csr::is_csr(rt) {
        return crate::csr::validate(obj, old, scope);
    }
    if rt.group == "admissionregistration.k8s.io"
        && matches!(
            rt.kind,
            "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration"
        )
    {
        return match old {
            None => berth_webhook::validate_configuration(obj),
            Some(old) => berth_webhook::validate_configuration_update(obj, old),
        };
    }
    if rt.group == "apiregistration.k8s.io"
        && rt.kind == "APIService"
        && !matches!(scope, Some(UpdateScope::Status))
    {
        return crate::aggregator::validate(obj);
    }
    if rt.group == "admissionregistration.k8s.io" && rt.kind == "ValidatingAdmissionPolicy" {
        use crate::admission::validating_admission_policy as vap;
        return match (scope, old) {
            (Some(UpdateScope::Status), _) => vap::validate_policy_status(obj),
            (_, Some(old)) => vap::validate_policy_update(obj, old),
            (_, None) => vap::validate_policy(obj),
        };
    }
    if rt.group == "admissionregistration.k8s.io" && rt.kind == "ValidatingAdmissionPolicyBinding" {
        return crate::admission::validating_admission_policy::validate_binding(obj);
    }
    if crate::apiextensions::is_crd(rt) && !matches!(scope, Some(UpdateScope::Status)) {
        let mut errs = match old {
            None => berth_apiextensions::validate_crd(obj),
            Some(old) => berth_apiextensions::validate_crd_update(obj, old),
        };
        errs.extend(crate::apiextensions::validate_cel_rules(obj));
        // Conversion webhooks are not called yet: refuse them rather than
        // serve every version with `None`'s rules.
        if obj
            .pointer("/spec/conversion/strategy")
            .and_then(Value::as_str)
            == Some("Webhook")
        {
            errs.push(FieldError::not_supported(
                "spec.conversion.strategy",
                "Webhook",
                &["None"],
            ));
        }
        return errs;
    }
    Vec::new()
}

/// A subresource that may change one spec field: `old` with `new`'s value of
/// `spec.<field>` (absent → empty list) and `new`'s resourceVersion (the precondition).
fn keep_only_spec_field(new: &mut Value, old: &Value, field: &str) {
    let value = new
        .get("spec")
        .and_then(|s| s.get(field))
        .cloned()
        .unwrap_or_else(|| json!([]));
    let rv = objects::resource_version(new).map(String::from);
    let mut merged = old.clone();
    if !merged["spec"].is_object() {
        merged["spec"] = json!({});
    }
    merged["spec"][field] = value;
    if let (Some(rv), Some(m)) = (rv, objects::meta_mut(&mut merged)) {
        m.insert("resourceVersion".into(), json!(rv));
    }
    *new = merged;
}

/// Every namespace carries `kubernetes.io/metadata.name`, set by the server.
fn namespace_name_label(obj: &mut Value) {
    let Some(name) = objects::name(obj).map(String::from) else {
        return;
    };
    if let Some(m) = objects::meta_mut(obj) {
        let labels = m.entry("labels").or_insert_with(|| json!({}));
        if !labels.is_object() {
            *labels = json!({});
        }
        labels["kubernetes.io/metadata.name"] = json!(name);
    }
}

/// How long a delete waits before the object goes, per upstream's graceful
/// deletion: only pods bound to a node and still running are deleted gracefully.
pub fn grace_period(rt: &ResourceType, obj: &Value, requested: Option<i64>) -> i64 {
    if rt.kind != "Pod" {
        return 0;
    }
    let scheduled = obj
        .get("spec")
        .and_then(|s| s.get("nodeName"))
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let phase = obj
        .get("status")
        .and_then(|s| s.get("phase"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if !scheduled || phase == "Succeeded" || phase == "Failed" {
        return 0;
    }
    let default = obj
        .get("spec")
        .and_then(|s| s.get("terminationGracePeriodSeconds"))
        .and_then(Value::as_i64)
        .unwrap_or(30);
    requested.unwrap_or(default).max(0)
}

/// The latest `deletionTimestamp` Berth writes: 9999-12-30T22:00:00Z, the last
/// instant every client can decode (Go's `metav1.Time` goes to the end of year
/// 9999, but jiff's `Timestamp`, which kube-rs clients and Berth's own
/// controllers decode into, stops there).
pub const LATEST_TIMESTAMP: i64 = 253_402_207_200;

/// The `deletionTimestamp` of a graceful delete: now + grace, saturating at
/// [`LATEST_TIMESTAMP`], so a grace period near `i64::MAX` seconds means "never
/// forced" instead of an overflow.
pub fn deletion_timestamp(now: chrono::DateTime<chrono::Utc>, grace: i64) -> String {
    let latest = chrono::DateTime::<chrono::Utc>::from_timestamp(LATEST_TIMESTAMP, 0);
    let at = chrono::TimeDelta::try_seconds(grace)
        .and_then(|d| now.checked_add_signed(d))
        .filter(|at| latest.is_none_or(|l| *at <= l))
        .or(latest)
        .unwrap_or(now);
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_api::registry::lookup;

    #[test]
    fn generation_bumps_on_spec_change_only() {
        let rt = lookup("apps", "v1", "deployments").unwrap();
        let old = json!({"metadata": {"name": "d", "generation": 3, "uid": "u"}, "spec": {"replicas": 1}, "status": {"replicas": 1}});
        let mut same = json!({"metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {"replicas": 1}, "status": {"replicas": 7}});
        prepare_for_update(rt, UpdateScope::Main, &mut same, &old);
        assert_eq!(same["metadata"]["generation"], 3);
        assert_eq!(same["metadata"]["uid"], "u");
        assert_eq!(
            same["status"]["replicas"], 1,
            "main resource may not change status"
        );
        let mut changed = json!({"metadata": {"name": "d"}, "spec": {"replicas": 2}});
        prepare_for_update(rt, UpdateScope::Main, &mut changed, &old);
        assert_eq!(changed["metadata"]["generation"], 4);
    }

    #[test]
    fn status_update_changes_only_status() {
        let rt = lookup("apps", "v1", "deployments").unwrap();
        let old = json!({"metadata": {"name": "d", "generation": 1}, "spec": {"replicas": 1}, "status": {}});
        let mut new = json!({"metadata": {"name": "d", "resourceVersion": "5"}, "spec": {"replicas": 9}, "status": {"replicas": 1}});
        prepare_for_update(rt, UpdateScope::Status, &mut new, &old);
        assert_eq!(new["spec"]["replicas"], 1);
        assert_eq!(new["status"]["replicas"], 1);
        assert_eq!(new["metadata"]["generation"], 1);
        assert_eq!(new["metadata"]["resourceVersion"], "5");
    }

    #[test]
    fn volume_phase_transitions_are_stamped() {
        let now = "2026-01-02T03:04:05Z";
        let pending = json!({"status": {"phase": "Pending", "lastPhaseTransitionTime": "2026-01-01T00:00:00Z"}});
        let cases = [
            // (old, new, stamped now?)
            (None, json!({"status": {"phase": "Pending"}}), true),
            (
                Some(pending.clone()),
                json!({"status": {"phase": "Available", "lastPhaseTransitionTime": "2026-01-01T00:00:00Z"}}),
                true,
            ),
            (
                Some(pending.clone()),
                json!({"status": {"phase": "Available"}}),
                true,
            ),
            (
                Some(pending.clone()),
                json!({"status": {"phase": "Pending", "lastPhaseTransitionTime": "2026-01-01T00:00:00Z", "message": "m"}}),
                false,
            ),
            (
                Some(pending.clone()),
                json!({"status": {"phase": "Bound", "lastPhaseTransitionTime": "2025-12-31T00:00:00Z"}}),
                false,
            ),
        ];
        for (old, mut new, stamped) in cases {
            stamp_phase_transition(&mut new, old.as_ref(), now);
            assert_eq!(
                new["status"]["lastPhaseTransitionTime"] == now,
                stamped,
                "{old:?} -> {new}"
            );
        }
    }

    #[test]
    fn deletion_timestamps_saturate() {
        let now = chrono::DateTime::<chrono::Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        for (grace, want) in [
            (0, "2027-01-15T08:00:00Z"),
            (30, "2027-01-15T08:00:30Z"),
            (i64::MAX, "9999-12-30T22:00:00Z"),
            (i64::MAX / 1000, "9999-12-30T22:00:00Z"),
            (300_000_000_000, "9999-12-30T22:00:00Z"),
        ] {
            let got = deletion_timestamp(now, grace);
            assert_eq!(got, want, "grace {grace}");
            // What clients decode pods into must accept it.
            let typed: Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time, _> =
                serde_json::from_value(json!(got));
            assert!(typed.is_ok(), "{got}: {typed:?}");
        }
    }

    #[test]
    fn pod_grace_periods() {
        let rt = lookup("", "v1", "pods").unwrap();
        let unscheduled = json!({"spec": {}});
        assert_eq!(grace_period(rt, &unscheduled, None), 0);
        let running = json!({"spec": {"nodeName": "n", "terminationGracePeriodSeconds": 45}, "status": {"phase": "Running"}});
        assert_eq!(grace_period(rt, &running, None), 45);
        assert_eq!(grace_period(rt, &running, Some(0)), 0);
        let done = json!({"spec": {"nodeName": "n"}, "status": {"phase": "Succeeded"}});
        assert_eq!(grace_period(rt, &done, None), 0);
    }
}
