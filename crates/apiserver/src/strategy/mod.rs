//! Per-kind behaviour on create, update and delete (upstream's "REST strategies"):
//! what a create resets, which changes bump `metadata.generation`, which parts of
//! an object each endpoint may change, and how deletion is graceful.
//!
//! What every kind shares is here; facts that are plain data (generation,
//! status, name rule, validation) are in its registry entry, and a kind with
//! rules of its own has a [`RestStrategy`] in a file named after it (upstream's
//! `pkg/registry/<group>/<kind>/strategy.go`), chosen by [`for_resource`] from
//! the entry's [`Strategy`] key. Adding such a kind is its registry entry, its
//! file and one line of that table.

use berth_api::registry::{ResourceType, Strategy};
use berth_api::user::UserInfo;
use berth_api::validation::FieldError;
use serde_json::{Value, json};

use crate::objects;

mod apiservice;
mod certificatesigningrequest;
mod customresource;
mod customresourcedefinition;
mod namespace;
mod persistentvolume;
mod pod;
mod validatingadmissionpolicy;
mod validatingadmissionpolicybinding;
mod webhookconfiguration;

/// A kind's own rules, run after what every kind shares. Every hook defaults
/// to doing nothing.
pub trait RestStrategy: Sync {
    /// After the registry's create preparation (`berth_api::defaults`);
    /// `user` is the requester (a CertificateSigningRequest records it).
    fn prepare_for_create(&self, _rt: &ResourceType, _obj: &mut Value, _user: Option<&UserInfo>) {}

    /// After the server-owned metadata is carried over and `scope` has cut the
    /// update down to what its endpoint may change.
    fn prepare_for_update(
        &self,
        _rt: &ResourceType,
        _scope: UpdateScope,
        _new: &mut Value,
        _old: &Value,
    ) {
    }

    /// Validation beyond `berth_api::validation` (`scope` is `None` on create,
    /// `old` the stored object on update).
    fn validate(
        &self,
        _scope: Option<UpdateScope>,
        _obj: &Value,
        _old: Option<&Value>,
    ) -> Vec<FieldError> {
        Vec::new()
    }

    /// The scope of an update through a subresource other than `status`
    /// (which every kind that lists it has); `None`: not writable there.
    fn update_scope(&self, _subresource: &str) -> Option<UpdateScope> {
        None
    }

    /// The grace period of a delete (`requested` is the caller's); 0: at once.
    fn grace_period(&self, _obj: &Value, _requested: Option<i64>) -> i64 {
        0
    }

    /// Before a delete decides whether the object goes at once: finalizers
    /// the server adds (`first`: the object was not being deleted yet).
    fn before_delete(&self, _finalizers: &mut Vec<String>, _pending: &mut Value, _first: bool) {}

    /// Whether the object waits for someone else even without finalizers or
    /// a grace period.
    fn delete_waits(&self, _pending: &Value) -> bool {
        false
    }

    /// The object as marked for deletion, after its `deletionTimestamp`.
    fn mark_deleting(&self, _pending: &mut Value) {}
}

/// The kinds whose rules are all in their registry entry.
struct Plain;

impl RestStrategy for Plain {}

/// The strategy of a served resource: the one table from registry entries to
/// strategies.
pub fn for_resource(rt: &ResourceType) -> &'static dyn RestStrategy {
    match rt.strategy {
        // Their rules are the pure ones `berth_api::defaults` keys on the same name.
        Strategy::Default
        | Strategy::Service
        | Strategy::PersistentVolumeClaim
        | Strategy::VolumeAttachment
        | Strategy::Job => &Plain,
        Strategy::Namespace => &namespace::Namespace,
        Strategy::Pod => &pod::Pod,
        Strategy::PersistentVolume => &persistentvolume::PersistentVolume,
        Strategy::CertificateSigningRequest => {
            &certificatesigningrequest::CertificateSigningRequest
        }
        Strategy::WebhookConfiguration => &webhookconfiguration::WebhookConfiguration,
        Strategy::ValidatingAdmissionPolicy => {
            &validatingadmissionpolicy::ValidatingAdmissionPolicy
        }
        Strategy::ValidatingAdmissionPolicyBinding => {
            &validatingadmissionpolicybinding::ValidatingAdmissionPolicyBinding
        }
        Strategy::APIService => &apiservice::APIService,
        Strategy::CustomResourceDefinition => &customresourcedefinition::CustomResourceDefinition,
        Strategy::CustomResource => &customresource::CustomResource,
    }
}

/// Create-time rules: upstream's strategy mutations (status reset, generation 1,
/// namespace finalizer, job selector) from `berth_api::defaults`, then the
/// kind's own (a namespace's name label, a CSR's requester, …).
pub fn prepare_for_create(rt: &ResourceType, obj: &mut Value, user: Option<&UserInfo>) {
    berth_api::defaults::prepare_for_create(rt, obj);
    for_resource(rt).prepare_for_create(rt, obj, user);
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
        UpdateScope::Main => berth_api::defaults::prepare_for_update(rt, new, old),
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
        }
        UpdateScope::Finalize => keep_only_spec_field(new, old, "finalizers"),
        UpdateScope::EphemeralContainers => keep_only_spec_field(new, old, "ephemeralContainers"),
        // Only a CertificateSigningRequest has it; its rules follow.
        UpdateScope::Approval => {}
    }
    for_resource(rt).prepare_for_update(rt, scope, new, old);
}

/// The scope of an update through `subresource` (`None`: the main resource),
/// or `None` when the resource takes no writes there.
pub fn update_scope(rt: &ResourceType, subresource: Option<&str>) -> Option<UpdateScope> {
    match subresource {
        None => Some(UpdateScope::Main),
        Some("status") => Some(UpdateScope::Status),
        Some(sub) => for_resource(rt).update_scope(sub),
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
    for_resource(rt).validate(scope, obj, old)
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

/// How long a delete waits before the object goes, per upstream's graceful
/// deletion (only pods have one: see `pod.rs`).
pub fn grace_period(rt: &ResourceType, obj: &Value, requested: Option<i64>) -> i64 {
    for_resource(rt).grace_period(obj, requested)
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
