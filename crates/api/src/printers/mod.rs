//! Server-side Table printing (`application/json;as=Table;v=v1;g=meta.k8s.io`),
//! what `kubectl get` shows: upstream's `pkg/printers/internalversion`.
//!
//! Each served kind has column definitions and a cell function over the wire
//! form. Cells always include the priority-1 (wide) columns, as upstream's
//! server generates tables with `Wide: true` and kubectl drops those columns
//! unless `-o wide`. Kinds upstream has no printer for (Role, ClusterRole,
//! LimitRange, anything unknown) get the default table: Name and Created At.
//!
//! One file per API group; `format` holds the shared field and cell helpers.

mod admissionregistration;
mod apiregistration;
mod apps;
mod autoscaling;
mod batch;
mod certificates;
mod coordination;
mod core;
pub mod custom;
mod discovery;
mod events;
mod format;
mod networking;
mod policy;
mod rbac;
mod scheduling;
mod storage;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

/// A Table column definition (`meta.k8s.io/v1` TableColumnDefinition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    /// OpenAPI type: "string", "integer", "boolean", "date", …
    pub type_: &'static str,
    /// "name" for the column that names the object, "" otherwise.
    pub format: &'static str,
    pub description: &'static str,
    /// 0 always shown; 1 only with `-o wide`.
    pub priority: i32,
}

impl Column {
    /// The column as it appears in a Table's `columnDefinitions`.
    pub fn definition(&self) -> Value {
        serde_json::json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// The printer of one kind: its columns and how one object fills them.
struct Printer {
    columns: &'static [Column],
    cells: fn(&Value, DateTime<Utc>) -> Vec<Value>,
}

fn printer(group: &str, kind: &str) -> Option<&'static Printer> {
    match group {
        "" => core::printer(kind),
        "admissionregistration.k8s.io" => admissionregistration::printer(kind),
        "apiregistration.k8s.io" => apiregistration::printer(kind),
        "apps" => apps::printer(kind),
        "autoscaling" => autoscaling::printer(kind),
        "batch" => batch::printer(kind),
        "certificates.k8s.io" => certificates::printer(kind),
        "coordination.k8s.io" => coordination::printer(kind),
        "discovery.k8s.io" => discovery::printer(kind),
        "events.k8s.io" => events::printer(kind),
        "networking.k8s.io" => networking::printer(kind),
        "policy" => policy::printer(kind),
        "rbac.authorization.k8s.io" => rbac::printer(kind),
        "scheduling.k8s.io" => scheduling::printer(kind),
        "storage.k8s.io" => storage::printer(kind),
        _ => None,
    }
}

/// The Table columns of a kind, wide ones included (priority 1).
pub fn columns(group: &str, kind: &str) -> Vec<Column> {
    printer(group, kind)
        .map_or(DEFAULT_COLUMNS, |p| p.columns)
        .to_vec()
}

/// One Table row's cells for `obj`, one per entry of [`columns`]. Never panics:
/// missing or wrong-typed fields print as upstream prints their zero value.
pub fn cells(group: &str, kind: &str, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    match printer(group, kind) {
        Some(p) => (p.cells)(obj, now),
        None => default_cells(obj),
    }
}

/// Whether upstream has a dedicated printer for the kind (otherwise the
/// default Name / Created At table is used).
pub fn has_printer(group: &str, kind: &str) -> bool {
    printer(group, kind).is_some()
}

/// Upstream `duration.HumanDuration`: about two significant figures.
pub fn human_duration(d: chrono::Duration) -> String {
    // Go truncates toward zero; a deviation under 2s in the past is clock skew.
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d.num_minutes();
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d.num_hours();
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The Age cell: time since `metadata.creationTimestamp`, "<unknown>" when absent.
pub fn age(obj: &Value, now: DateTime<Utc>) -> String {
    format::since(
        format::time_at(obj, &["metadata", "creationTimestamp"]),
        now,
    )
}

pub(crate) const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
pub(crate) const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const CONTAINERS_DESC: &str = "Names of each container in the template.";
const IMAGES_DESC: &str = "Images referenced by each container in the template.";

/// A priority-0 column.
const fn col(name: &'static str, type_: &'static str, description: &'static str) -> Column {
    Column {
        name,
        type_,
        format: "",
        description,
        priority: 0,
    }
}

/// A priority-1 (`-o wide`) column.
const fn wide(name: &'static str, type_: &'static str, description: &'static str) -> Column {
    Column {
        name,
        type_,
        format: "",
        description,
        priority: 1,
    }
}

const NAME: Column = Column {
    name: "Name",
    type_: "string",
    format: "name",
    description: NAME_DESC,
    priority: 0,
};
const AGE: Column = col("Age", "string", AGE_DESC);
const WIDE_CONTAINERS: Column = wide("Containers", "string", CONTAINERS_DESC);
const WIDE_IMAGES: Column = wide("Images", "string", IMAGES_DESC);

/// Upstream's default table convertor (`rest.NewDefaultTableConvertor`).
const DEFAULT_COLUMNS: &[Column] = &[NAME, col("Created At", "date", AGE_DESC)];

fn default_cells(obj: &Value) -> Vec<Value> {
    // Go formats the zero time too, as 0001-01-01T00:00:00Z.
    let created = format::time_at(obj, &["metadata", "creationTimestamp"]).map_or_else(
        || "0001-01-01T00:00:00Z".to_string(),
        |t| t.to_rfc3339_opts(SecondsFormat::Secs, true),
    );
    vec![format::name(obj).into(), created.into()]
}

#[cfg(test)]
pub(crate) mod testutil {
    use chrono::{DateTime, Utc};

    /// A fixed "now" for tests.
    pub fn now() -> DateTime<Utc> {
        "2025-06-01T12:00:00Z".parse().unwrap()
    }

    /// An RFC3339 timestamp `secs` seconds before [`now`].
    pub fn ago(secs: i64) -> String {
        (now() - chrono::Duration::seconds(secs)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::{ago, now};
    use super::*;
    use crate::registry::RESOURCES;
    use chrono::Duration;
    use serde_json::json;

    #[test]
    fn human_duration_matches_upstream_table() {
        let ms = Duration::milliseconds;
        let s = Duration::seconds;
        let m = Duration::minutes;
        let h = Duration::hours;
        let d = |n: i64| Duration::hours(24 * n);
        let y = |n: i64| Duration::hours(24 * 365 * n);
        let cases = [
            // TestHumanDuration
            (s(1), "1s"),
            (s(70), "70s"),
            (s(190), "3m10s"),
            (m(70), "70m"),
            (h(47), "47h"),
            (h(49), "2d1h"),
            (h(8 * 24 + 2), "8d"),
            (h(367 * 24), "367d"),
            (h(365 * 2 * 24 + 25), "2y1d"),
            (h(365 * 8 * 24 + 2), "8y"),
            // TestHumanDurationBoundaries
            (s(-2), "<invalid>"),
            (s(-2) + Duration::nanoseconds(1), "0s"),
            (s(0), "0s"),
            (s(1) - ms(1), "0s"),
            (m(2) - ms(1), "119s"),
            (m(2), "2m"),
            (m(2) + s(1), "2m1s"),
            (m(10) - ms(1), "9m59s"),
            (m(10), "10m"),
            (m(10) + s(1), "10m"),
            (h(3) - ms(1), "179m"),
            (h(3), "3h"),
            (h(3) + m(1), "3h1m"),
            (h(8) - ms(1), "7h59m"),
            (h(8), "8h"),
            (h(8) + m(59), "8h"),
            (d(2) - ms(1), "47h"),
            (d(2), "2d"),
            (d(2) + h(1), "2d1h"),
            (d(8) - ms(1), "7d23h"),
            (d(8), "8d"),
            (d(8) + h(23), "8d"),
            (y(2) - ms(1), "729d"),
            (y(2), "2y"),
            (y(2) + h(23), "2y"),
            (y(2) + h(23) + m(59), "2y"),
            (y(2) + h(24) - ms(1), "2y"),
            (y(2) + h(24), "2y1d"),
            (y(3), "3y"),
            (y(4), "4y"),
            (y(5), "5y"),
            (y(6), "6y"),
            (y(7), "7y"),
            (y(8) - ms(1), "7y364d"),
            (y(8), "8y"),
            (y(8) + d(364), "8y"),
            (y(9), "9y"),
        ];
        for (dur, want) in cases {
            assert_eq!(human_duration(dur), want, "{dur:?}");
        }
    }

    #[test]
    fn age_and_unknown() {
        let o = json!({"metadata": {"name": "x", "creationTimestamp": ago(3 * 3600)}});
        assert_eq!(age(&o, now()), "3h");
        assert_eq!(age(&json!({"metadata": {}}), now()), "<unknown>");
        assert_eq!(
            age(
                &json!({"metadata": {"creationTimestamp": "garbage"}}),
                now()
            ),
            "<unknown>"
        );
    }

    #[test]
    fn unknown_kinds_get_the_default_table() {
        let cols = columns("example.com", "Widget");
        assert_eq!(
            cols.iter().map(|c| c.name).collect::<Vec<_>>(),
            ["Name", "Created At"]
        );
        assert_eq!(cols[1].type_, "date");
        let o = json!({"metadata": {"name": "w", "creationTimestamp": "2024-01-02T03:04:05Z"}});
        assert_eq!(
            cells("example.com", "Widget", &o, now()),
            vec![json!("w"), json!("2024-01-02T03:04:05Z")]
        );
        assert_eq!(
            cells("x", "Y", &json!({}), now()),
            vec![json!(""), json!("0001-01-01T00:00:00Z")]
        );
        // Upstream has no printer for these either.
        for (g, k) in [
            ("rbac.authorization.k8s.io", "Role"),
            ("rbac.authorization.k8s.io", "ClusterRole"),
            ("", "LimitRange"),
        ] {
            assert!(!has_printer(g, k), "{k}");
            assert_eq!(columns(g, k)[1].name, "Created At");
        }
    }

    /// Column names per kind as upstream defines them; `*` marks priority 1.
    #[test]
    fn column_names_match_upstream() {
        let expected: &[(&str, &str, &str)] = &[
            (
                "",
                "Pod",
                "Name Ready Status Restarts Age *IP *Node *Nominated_Node *Readiness_Gates",
            ),
            ("", "PodTemplate", "Name Containers Images Pod_Labels"),
            (
                "",
                "ReplicationController",
                "Name Desired Current Ready Age *Containers *Images *Selector",
            ),
            (
                "",
                "Service",
                "Name Type Cluster-IP External-IP Port(s) Age *Selector",
            ),
            ("", "Endpoints", "Name Endpoints Age"),
            (
                "",
                "Node",
                "Name Status Roles Age Version *Internal-IP *External-IP *OS-Image *Kernel-Version *Container-Runtime",
            ),
            (
                "",
                "Event",
                "Last_Seen Type Reason Object *Subobject *Source Message *First_Seen *Count *Name",
            ),
            ("", "Namespace", "Name Status Age"),
            ("", "Secret", "Name Type Data Age"),
            ("", "ServiceAccount", "Name Secrets Age"),
            ("", "ConfigMap", "Name Data Age"),
            (
                "admissionregistration.k8s.io",
                "MutatingWebhookConfiguration",
                "Name Webhooks Age",
            ),
            (
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration",
                "Name Webhooks Age",
            ),
            (
                "admissionregistration.k8s.io",
                "ValidatingAdmissionPolicy",
                "Name Validations ParamKind Age",
            ),
            (
                "admissionregistration.k8s.io",
                "ValidatingAdmissionPolicyBinding",
                "Name PolicyName ParamRef Age",
            ),
            (
                "apiregistration.k8s.io",
                "APIService",
                "Name Service Available Age",
            ),
            // Upstream has no printer for CRDs: the default table.
            (
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                "Name Created_At",
            ),
            (
                "",
                "PersistentVolume",
                "Name Capacity Access_Modes Reclaim_Policy Status Claim StorageClass VolumeAttributesClass Reason Age *VolumeMode",
            ),
            (
                "",
                "PersistentVolumeClaim",
                "Name Status Volume Capacity Access_Modes StorageClass VolumeAttributesClass Age *VolumeMode",
            ),
            ("", "ResourceQuota", "Name Request Limit Age"),
            ("", "LimitRange", "Name Created_At"),
            (
                "apps",
                "Deployment",
                "Name Ready Up-to-date Available Age *Containers *Images *Selector",
            ),
            (
                "apps",
                "ReplicaSet",
                "Name Desired Current Ready Age *Containers *Images *Selector",
            ),
            ("apps", "StatefulSet", "Name Ready Age *Containers *Images"),
            (
                "apps",
                "DaemonSet",
                "Name Desired Current Ready Up-to-date Available Node_Selector Age *Containers *Images *Selector",
            ),
            ("apps", "ControllerRevision", "Name Controller Revision Age"),
            (
                "autoscaling",
                "HorizontalPodAutoscaler",
                "Name Reference Targets MinPods MaxPods Replicas Age",
            ),
            (
                "batch",
                "Job",
                "Name Status Completions Duration Age *Containers *Images *Selector",
            ),
            (
                "batch",
                "CronJob",
                "Name Schedule Timezone Suspend Active Last_Schedule Age *Containers *Images *Selector",
            ),
            ("coordination.k8s.io", "Lease", "Name Holder Age"),
            (
                "discovery.k8s.io",
                "EndpointSlice",
                "Name AddressType Ports Endpoints Age",
            ),
            (
                "events.k8s.io",
                "Event",
                "Last_Seen Type Reason Object *Subobject *Source Message *First_Seen *Count *Name",
            ),
            (
                "networking.k8s.io",
                "Ingress",
                "Name Class Hosts Address Ports Age",
            ),
            (
                "networking.k8s.io",
                "IngressClass",
                "Name Controller Parameters Age",
            ),
            (
                "networking.k8s.io",
                "NetworkPolicy",
                "Name Pod-Selector Age",
            ),
            (
                "policy",
                "PodDisruptionBudget",
                "Name Min_Available Max_Unavailable Allowed_Disruptions Age",
            ),
            (
                "certificates.k8s.io",
                "CertificateSigningRequest",
                "Name Age SignerName Requestor RequestedDuration Condition",
            ),
            ("rbac.authorization.k8s.io", "Role", "Name Created_At"),
            (
                "rbac.authorization.k8s.io",
                "ClusterRole",
                "Name Created_At",
            ),
            (
                "rbac.authorization.k8s.io",
                "RoleBinding",
                "Name Role Age *Users *Groups *ServiceAccounts",
            ),
            (
                "rbac.authorization.k8s.io",
                "ClusterRoleBinding",
                "Name Role Age *Users *Groups *ServiceAccounts",
            ),
            (
                "scheduling.k8s.io",
                "PriorityClass",
                "Name Value Global-Default Age PreemptionPolicy",
            ),
            (
                "storage.k8s.io",
                "StorageClass",
                "Name Provisioner ReclaimPolicy VolumeBindingMode AllowVolumeExpansion Age",
            ),
            (
                "storage.k8s.io",
                "CSIDriver",
                "Name AttachRequired PodInfoOnMount StorageCapacity TokenRequests RequiresRepublish Modes Age",
            ),
            ("storage.k8s.io", "CSINode", "Name Drivers Age"),
            (
                "storage.k8s.io",
                "VolumeAttachment",
                "Name Attacher PV Node Attached Age",
            ),
        ];
        for (group, kind, want) in expected {
            let got: Vec<String> = columns(group, kind)
                .iter()
                .map(|c| {
                    format!(
                        "{}{}",
                        if c.priority == 1 { "*" } else { "" },
                        c.name.replace(' ', "_")
                    )
                })
                .collect();
            assert_eq!(got.join(" "), *want, "{group}/{kind}");
        }
        // Every served kind is listed above (reviews are never listed).
        for r in RESOURCES.iter().filter(|r| !r.is_review()) {
            assert!(
                expected
                    .iter()
                    .any(|(g, k, _)| *g == r.group && *k == r.kind),
                "{}/{}",
                r.group,
                r.kind
            );
        }
    }

    #[test]
    fn column_definition_json() {
        assert_eq!(
            columns("", "Pod")[5].definition(),
            json!({"name": "IP", "type": "string", "format": "", "description": columns("", "Pod")[5].description, "priority": 1})
        );
    }

    /// Objects that are empty, oddly typed or nonsense must print a full row.
    #[test]
    fn every_served_kind_prints_a_full_row_without_panicking() {
        let weird = [
            json!(null),
            json!(42),
            json!({}),
            json!({"metadata": "x", "spec": [], "status": "y"}),
            json!({"metadata": {"name": 5, "creationTimestamp": 7, "labels": [], "annotations": "a", "ownerReferences": {}},
                   "spec": {"containers": "x", "initContainers": [1, null], "ports": [{"port": "x"}], "selector": 3,
                            "template": {"spec": {"containers": [null, {"name": 1}]}}, "metrics": [{"type": "Resource"}],
                            "rules": [null], "tls": 1, "replicas": "3", "subjects": [null], "drivers": 2},
                   "status": {"conditions": [null, {"type": 1}], "containerStatuses": [{"state": 1, "lastState": {"terminated": 3}}],
                              "initContainerStatuses": [{"state": {"terminated": {}}}], "loadBalancer": {"ingress": [null]},
                              "hard": {"cpu": 1}, "currentMetrics": "x", "addresses": [1]},
                   "subsets": [{"addresses": [{"ip": 1}], "ports": [null]}], "endpoints": [{"addresses": "x"}],
                   "series": {}, "involvedObject": 1, "regarding": [], "data": [], "webhooks": 1}),
        ];
        let mut seen = 0;
        for r in RESOURCES {
            let cols = columns(r.group, r.kind);
            assert!(
                cols.iter().filter(|c| c.format == "name").count() <= 2,
                "{}",
                r.kind
            );
            let minimal = json!({"apiVersion": r.api_version(), "kind": r.kind, "metadata": {"name": "n", "creationTimestamp": ago(5)}});
            let row = cells(r.group, r.kind, &minimal, now());
            assert_eq!(row.len(), cols.len(), "{}/{}", r.group, r.kind);
            assert!(
                row.contains(&json!("n")),
                "{}: name cell missing in {row:?}",
                r.kind
            );
            for w in &weird {
                assert_eq!(
                    cells(r.group, r.kind, w, now()).len(),
                    cols.len(),
                    "{} {w}",
                    r.kind
                );
            }
            seen += 1;
        }
        assert!(seen >= 40);
    }
}
