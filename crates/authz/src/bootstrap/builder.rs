//! Small builders for the bootstrap policy, in the spirit of upstream's
//! `rbacv1helpers.NewRule(...).Groups(...).Resources(...).RuleOrDie()`.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef,
    Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::{AUTOUPDATE_ANNOTATION, BOOTSTRAPPING_LABEL, BOOTSTRAPPING_VALUE};

pub(crate) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

pub(crate) const READ: &[&str] = &["get", "list", "watch"];
pub(crate) const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
pub(crate) const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

pub(crate) const LEGACY: &str = "";
pub(crate) const APPS: &str = "apps";
pub(crate) const AUTHENTICATION: &str = "authentication.k8s.io";
pub(crate) const AUTHORIZATION: &str = "authorization.k8s.io";
pub(crate) const AUTOSCALING: &str = "autoscaling";
pub(crate) const BATCH: &str = "batch";
pub(crate) const CERTIFICATES: &str = "certificates.k8s.io";
pub(crate) const COORDINATION: &str = "coordination.k8s.io";
pub(crate) const DISCOVERY: &str = "discovery.k8s.io";
pub(crate) const EVENTS: &str = "events.k8s.io";
pub(crate) const EXTENSIONS: &str = "extensions";
pub(crate) const NETWORKING: &str = "networking.k8s.io";
pub(crate) const NODE: &str = "node.k8s.io";
pub(crate) const POLICY: &str = "policy";
pub(crate) const STORAGE: &str = "storage.k8s.io";

/// A rule under construction.
pub(crate) struct Rule {
    verbs: Vec<String>,
    groups: Vec<String>,
    resources: Vec<String>,
    names: Vec<String>,
    urls: Vec<String>,
}

/// Starts a rule with `verbs`.
pub(crate) fn rule(verbs: &[&str]) -> Rule {
    Rule {
        verbs: owned(verbs),
        groups: Vec::new(),
        resources: Vec::new(),
        names: Vec::new(),
        urls: Vec::new(),
    }
}

fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Upstream's builder sorts every list, so the stored objects (and what `kubectl
/// get clusterrole -o yaml` shows) list them alphabetically.
fn sorted(mut v: Vec<String>) -> Option<Vec<String>> {
    if v.is_empty() {
        return None;
    }
    v.sort();
    Some(v)
}

impl Rule {
    pub(crate) fn groups(mut self, groups: &[&str]) -> Self {
        self.groups.extend(owned(groups));
        self
    }

    pub(crate) fn resources(mut self, resources: &[&str]) -> Self {
        self.resources.extend(owned(resources));
        self
    }

    pub(crate) fn names(mut self, names: &[&str]) -> Self {
        self.names.extend(owned(names));
        self
    }

    pub(crate) fn urls(mut self, urls: &[&str]) -> Self {
        self.urls.extend(owned(urls));
        self
    }

    pub(crate) fn build(self) -> PolicyRule {
        let mut verbs = self.verbs;
        verbs.sort();
        PolicyRule {
            verbs,
            api_groups: sorted(self.groups),
            resources: sorted(self.resources),
            resource_names: sorted(self.names),
            non_resource_urls: sorted(self.urls),
        }
    }
}

/// Upstream's `eventsRule()`: write events in both event groups.
pub(crate) fn events_rule() -> PolicyRule {
    rule(&["create", "update", "patch"])
        .groups(&[LEGACY, EVENTS])
        .resources(&["events"])
        .build()
}

/// Bootstrap metadata: upstream's `addDefaultMetadata` label and annotation,
/// plus `labels`.
pub(crate) fn meta(namespace: Option<&str>, name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    let mut all: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    all.insert(BOOTSTRAPPING_LABEL.into(), BOOTSTRAPPING_VALUE.into());
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(str::to_string),
        labels: Some(all),
        annotations: Some(BTreeMap::from([(
            AUTOUPDATE_ANNOTATION.to_string(),
            "true".to_string(),
        )])),
        ..Default::default()
    }
}

pub(crate) fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    labelled_cluster_role(name, &[], rules)
}

pub(crate) fn labelled_cluster_role(
    name: &str,
    labels: &[(&str, &str)],
    rules: Vec<PolicyRule>,
) -> ClusterRole {
    ClusterRole {
        metadata: meta(None, name, labels),
        rules: Some(rules),
        aggregation_rule: None,
    }
}

/// A role whose rules the aggregation controller fills from the roles labelled
/// `selects: "true"`.
pub(crate) fn aggregated_cluster_role(
    name: &str,
    labels: &[(&str, &str)],
    selects: &str,
) -> ClusterRole {
    ClusterRole {
        metadata: meta(None, name, labels),
        rules: None,
        aggregation_rule: Some(AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector {
                match_labels: Some(BTreeMap::from([(selects.to_string(), "true".to_string())])),
                match_expressions: None,
            }]),
        }),
    }
}

pub(crate) fn role(namespace: &str, name: &str, rules: Vec<PolicyRule>) -> Role {
    Role {
        metadata: meta(Some(namespace), name, &[]),
        rules: Some(rules),
    }
}

pub(crate) fn user(name: &str) -> Subject {
    Subject {
        api_group: Some(RBAC_GROUP.into()),
        kind: "User".into(),
        name: name.into(),
        namespace: None,
    }
}

pub(crate) fn group(name: &str) -> Subject {
    Subject {
        api_group: Some(RBAC_GROUP.into()),
        kind: "Group".into(),
        name: name.into(),
        namespace: None,
    }
}

pub(crate) fn service_account(namespace: &str, name: &str) -> Subject {
    Subject {
        api_group: None,
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: Some(namespace.into()),
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: RBAC_GROUP.into(),
        kind: kind.into(),
        name: name.into(),
    }
}

/// A ClusterRoleBinding named after its ClusterRole, as upstream's
/// `NewClusterBinding`; no subjects is stored as an absent list.
pub(crate) fn cluster_binding(role: &str, subjects: Vec<Subject>) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(None, role, &[]),
        role_ref: role_ref("ClusterRole", role),
        subjects: (!subjects.is_empty()).then_some(subjects),
    }
}

pub(crate) fn role_binding(
    namespace: &str,
    name: &str,
    role: &str,
    subjects: Vec<Subject>,
) -> RoleBinding {
    RoleBinding {
        metadata: meta(Some(namespace), name, &[]),
        role_ref: role_ref("Role", role),
        subjects: Some(subjects),
    }
}
