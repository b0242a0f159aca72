//! Every Role, ClusterRole and binding, indexed for the per-request check
//! (upstream's `DefaultRuleResolver` over listers, and `RBACAuthorizer`).
//!
//! The index is rebuilt whenever an RBAC object changes, but `authorize` runs on
//! every request. So the work is done at build time: roles are looked up by name
//! once per binding and shared, role bindings are grouped by namespace so a request
//! only walks its own namespace's bindings, and a binding to a missing role carries
//! upstream's error text ready-made. A request then compares borrowed strings and
//! allocates only the reason of an allowed request.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use berth_api::user::{MASTERS, UserInfo};
use berth_api::validation::go_quote;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject,
};

use crate::escalation::{EscalationError, confirm_covered};
use crate::rule::{list, rule_allows};
use crate::{Attributes, Decision};

/// A role's rules, shared between the role table and every binding to it.
type Rules = Arc<[PolicyRule]>;

/// What `user` may do in one namespace (a SelfSubjectRulesReview's status).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RulesReview {
    /// Rules with resources, as upstream's ResourceRule (verbs, apiGroups,
    /// resources, resourceNames; nonResourceURLs dropped).
    pub resource_rules: Vec<PolicyRule>,
    /// Rules with nonResourceURLs, as upstream's NonResourceRule (verbs and
    /// nonResourceURLs only).
    pub non_resource_rules: Vec<PolicyRule>,
    /// True when some binding could not be resolved, so the lists may lack rules.
    pub incomplete: bool,
    /// The resolution errors, as upstream aggregates them.
    pub evaluation_error: String,
}

/// One ClusterRoleBinding or RoleBinding, its role already resolved.
#[derive(Debug)]
struct Binding {
    /// False for a ClusterRoleBinding.
    namespaced: bool,
    name: String,
    namespace: String,
    role_ref_kind: String,
    role_ref_name: String,
    subjects: Vec<Subject>,
    /// The referenced role's rules, or upstream's error for resolving it.
    rules: Result<Rules, String>,
}

/// A rule found for a user, or a binding that could not be resolved.
type Visited<'a> = Result<(&'a Binding, &'a Subject, &'a PolicyRule), &'a str>;

/// Every Role/ClusterRole/binding, indexed for the per-request check.
#[derive(Debug, Default)]
pub struct PolicyIndex {
    cluster_roles: HashMap<String, Rules>,
    /// namespace → name → rules.
    roles: HashMap<String, HashMap<String, Rules>>,
    cluster_role_bindings: Vec<Binding>,
    /// namespace → its role bindings, in the order given.
    role_bindings: HashMap<String, Vec<Binding>>,
}

fn shared_rules(rules: Option<Vec<PolicyRule>>) -> Rules {
    rules.unwrap_or_default().into()
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn namespace_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_default()
}

impl PolicyIndex {
    pub fn new(
        cluster_roles: Vec<ClusterRole>,
        roles: Vec<Role>,
        cluster_role_bindings: Vec<ClusterRoleBinding>,
        role_bindings: Vec<RoleBinding>,
    ) -> Self {
        let mut index = PolicyIndex::default();
        for cr in cluster_roles {
            index
                .cluster_roles
                .insert(name_of(&cr.metadata), shared_rules(cr.rules));
        }
        for r in roles {
            index
                .roles
                .entry(namespace_of(&r.metadata))
                .or_default()
                .insert(name_of(&r.metadata), shared_rules(r.rules));
        }
        let mut crbs = Vec::with_capacity(cluster_role_bindings.len());
        for b in cluster_role_bindings {
            let rules = index.resolve("", &b.role_ref.kind, &b.role_ref.name);
            crbs.push(Binding {
                namespaced: false,
                name: name_of(&b.metadata),
                namespace: String::new(),
                role_ref_kind: b.role_ref.kind,
                role_ref_name: b.role_ref.name,
                subjects: b.subjects.unwrap_or_default(),
                rules,
            });
        }
        index.cluster_role_bindings = crbs;
        let mut rbs: HashMap<String, Vec<Binding>> = HashMap::new();
        for b in role_bindings {
            let namespace = namespace_of(&b.metadata);
            let rules = index.resolve(&namespace, &b.role_ref.kind, &b.role_ref.name);
            rbs.entry(namespace.clone()).or_default().push(Binding {
                namespaced: true,
                name: name_of(&b.metadata),
                namespace,
                role_ref_kind: b.role_ref.kind,
                role_ref_name: b.role_ref.name,
                subjects: b.subjects.unwrap_or_default(),
                rules,
            });
        }
        index.role_bindings = rbs;
        index
    }

    /// Upstream's `GetRoleReferenceRules`, with the lister's NotFound text.
    fn resolve(&self, namespace: &str, kind: &str, name: &str) -> Result<Rules, String> {
        match kind {
            "Role" => self
                .roles
                .get(namespace)
                .and_then(|by_name| by_name.get(name))
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "role.rbac.authorization.k8s.io {} not found",
                        go_quote(name)
                    )
                }),
            "ClusterRole" => self.cluster_roles.get(name).cloned().ok_or_else(|| {
                format!(
                    "clusterrole.rbac.authorization.k8s.io {} not found",
                    go_quote(name)
                )
            }),
            other => Err(format!(
                "unsupported role reference kind: {}",
                go_quote(other)
            )),
        }
    }

    /// RBAC's decision and reason. Members of system:masters are always allowed
    /// (upstream's privileged-group authorizer, which runs before RBAC and gives no
    /// reason). RBAC never denies: no matching rule is NoOpinion, whose reason is ""
    /// or, when some binding's role is missing, upstream's `RBAC: <errors>`.
    pub fn authorize(&self, a: &Attributes) -> (Decision, String) {
        if a.user.in_group(MASTERS) {
            return (Decision::Allow, String::new());
        }
        let mut allowed = None;
        let mut errors: Vec<&str> = Vec::new();
        self.visit(&a.user, &a.namespace, |item| match item {
            Ok((binding, subject, rule)) => {
                if rule_allows(a, rule) {
                    allowed = Some((binding, subject));
                    false
                } else {
                    true
                }
            }
            Err(e) => {
                errors.push(e);
                true
            }
        });
        if let Some((binding, subject)) = allowed {
            return (
                Decision::Allow,
                format!("RBAC: allowed by {}", Described { binding, subject }),
            );
        }
        let reason = if errors.is_empty() {
            String::new()
        } else {
            format!("RBAC: {}", aggregate_errors(&errors))
        };
        (Decision::NoOpinion, reason)
    }

    /// What `user` may do in `namespace` (SelfSubjectRulesReview): the rules of
    /// every cluster role binding and every role binding in `namespace` that
    /// applies. A binding to a missing role puts its error in
    /// `evaluation_error`; `incomplete` stays false, as upstream's RBAC reports
    /// it (its RulesFor never says incomplete).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesReview {
        let mut review = RulesReview::default();
        let mut errors: Vec<&str> = Vec::new();
        self.visit(user, namespace, |item| {
            match item {
                Ok((_, _, rule)) => {
                    if !list(&rule.resources).is_empty() {
                        review.resource_rules.push(PolicyRule {
                            non_resource_urls: None,
                            ..rule.clone()
                        });
                    }
                    if !list(&rule.non_resource_urls).is_empty() {
                        review.non_resource_rules.push(PolicyRule {
                            verbs: rule.verbs.clone(),
                            non_resource_urls: rule.non_resource_urls.clone(),
                            ..Default::default()
                        });
                    }
                }
                Err(e) => errors.push(e),
            }
            true
        });
        if !errors.is_empty() {
            review.evaluation_error = aggregate_errors(&errors);
        }
        review
    }

    /// Upstream's escalation check (`ConfirmNoEscalation` over `validation.Covers`):
    /// Err with upstream's message when `rules` grant anything `user` does not
    /// already hold in `namespace` ("" = cluster-wide). Members of system:masters
    /// may grant anything (upstream's `EscalationAllowed`); the `escalate` and
    /// `bind` verb checks that also bypass this need the request's resource and
    /// are the caller's.
    pub fn confirm_no_escalation(
        &self,
        user: &UserInfo,
        namespace: &str,
        rules: &[PolicyRule],
    ) -> Result<(), EscalationError> {
        if user.in_group(MASTERS) {
            return Ok(());
        }
        let mut owner: Vec<&PolicyRule> = Vec::new();
        let mut errors: Vec<&str> = Vec::new();
        self.visit(user, namespace, |item| {
            match item {
                Ok((_, _, rule)) => owner.push(rule),
                Err(e) => errors.push(e),
            }
            true
        });
        let resolution = if errors.is_empty() {
            None
        } else {
            Some(aggregate_errors(&errors))
        };
        confirm_covered(user, &owner, rules, resolution.as_deref())
    }

    /// The rules of a binding's role reference (kind Role in `namespace`, or
    /// ClusterRole), None when it does not exist.
    pub fn role_ref_rules(
        &self,
        namespace: &str,
        kind: &str,
        name: &str,
    ) -> Option<Vec<PolicyRule>> {
        self.get_role_reference_rules(namespace, kind, name).ok()
    }

    /// Like [`PolicyIndex::role_ref_rules`], with upstream's error text when the
    /// reference does not resolve (`role.rbac.authorization.k8s.io "x" not found`,
    /// `unsupported role reference kind: "X"`), which upstream wraps in the 403 of a
    /// binding write.
    pub fn get_role_reference_rules(
        &self,
        namespace: &str,
        kind: &str,
        name: &str,
    ) -> Result<Vec<PolicyRule>, String> {
        self.resolve(namespace, kind, name)
            .map(|rules| rules.to_vec())
    }

    /// Upstream's `VisitRulesFor`: cluster role bindings, then the role bindings of
    /// `namespace`, each binding's rules in order; `f` returns false to stop.
    fn visit<'a>(
        &'a self,
        user: &UserInfo,
        namespace: &str,
        mut f: impl FnMut(Visited<'a>) -> bool,
    ) {
        let namespaced: &[Binding] = if namespace.is_empty() {
            &[]
        } else {
            self.role_bindings
                .get(namespace)
                .map(Vec::as_slice)
                .unwrap_or(&[])
        };
        let bindings = self
            .cluster_role_bindings
            .iter()
            .map(|b| (b, ""))
            .chain(namespaced.iter().map(|b| (b, namespace)));
        for (binding, subject_namespace) in bindings {
            let Some(subject) = applies_to(user, &binding.subjects, subject_namespace) else {
                continue;
            };
            match &binding.rules {
                Ok(rules) => {
                    for rule in rules.iter() {
                        if !f(Ok((binding, subject, rule))) {
                            return;
                        }
                    }
                }
                Err(e) => {
                    if !f(Err(e)) {
                        return;
                    }
                }
            }
        }
    }
}

/// The first subject that names `user` (upstream's `appliesTo`). `namespace` is
/// the role binding's, which a ServiceAccount subject without one defaults to;
/// "" for cluster role bindings.
fn applies_to<'a>(
    user: &UserInfo,
    subjects: &'a [Subject],
    namespace: &str,
) -> Option<&'a Subject> {
    subjects
        .iter()
        .find(|s| applies_to_user(user, s, namespace))
}

fn applies_to_user(user: &UserInfo, subject: &Subject, namespace: &str) -> bool {
    match subject.kind.as_str() {
        "User" => user.name == subject.name,
        "Group" => user.in_group(&subject.name),
        "ServiceAccount" => {
            let sa_namespace = match subject.namespace.as_deref() {
                Some(ns) if !ns.is_empty() => ns,
                _ => namespace,
            };
            !sa_namespace.is_empty() && is_service_account(&user.name, sa_namespace, &subject.name)
        }
        _ => false,
    }
}

/// `username == "system:serviceaccount:<namespace>:<name>"`, without building it
/// (upstream's `serviceaccount.MatchesUsername`).
fn is_service_account(username: &str, namespace: &str, name: &str) -> bool {
    username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.strip_prefix(namespace))
        .and_then(|rest| rest.strip_prefix(':'))
        .is_some_and(|rest| rest == name)
}

/// Upstream's `clusterRoleBindingDescriber` / `roleBindingDescriber`.
struct Described<'a> {
    binding: &'a Binding,
    subject: &'a Subject,
}

impl fmt::Display for Described<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.binding;
        if b.namespaced {
            write!(
                f,
                "RoleBinding {}",
                go_quote(&format!("{}/{}", b.name, b.namespace))
            )?;
        } else {
            write!(f, "ClusterRoleBinding {}", go_quote(&b.name))?;
        }
        write!(
            f,
            " of {} {} to ",
            b.role_ref_kind,
            go_quote(&b.role_ref_name)
        )?;
        let s = self.subject;
        if s.kind == "ServiceAccount" {
            // Upstream prints name/namespace, in that order.
            let ns = match s.namespace.as_deref() {
                Some(ns) if !ns.is_empty() => ns,
                _ => &b.namespace,
            };
            write!(f, "{} {}", s.kind, go_quote(&format!("{}/{}", s.name, ns)))
        } else {
            write!(f, "{} {}", s.kind, go_quote(&s.name))
        }
    }
}

/// Upstream's `utilerrors.NewAggregate(errs).Error()`: one message as is, several
/// deduplicated, joined by ", " and bracketed.
pub(crate) fn aggregate_errors(errors: &[&str]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(e) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [] => String::new(),
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::rbac::v1::RoleRef;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn s(v: &[&str]) -> Option<Vec<String>> {
        Some(v.iter().map(|x| x.to_string()).collect())
    }

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|x| x.to_string()).collect(),
            api_groups: s(groups),
            resources: s(resources),
            ..Default::default()
        }
    }

    fn meta(ns: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: (!ns.is_empty()).then(|| ns.to_string()),
            ..Default::default()
        }
    }

    fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
        ClusterRole {
            metadata: meta("", name),
            rules: Some(rules),
            ..Default::default()
        }
    }

    fn role(ns: &str, name: &str, rules: Vec<PolicyRule>) -> Role {
        Role {
            metadata: meta(ns, name),
            rules: Some(rules),
        }
    }

    fn subject(kind: &str, ns: &str, name: &str) -> Subject {
        Subject {
            api_group: None,
            kind: kind.into(),
            name: name.into(),
            namespace: (!ns.is_empty()).then(|| ns.to_string()),
        }
    }

    fn role_ref(kind: &str, name: &str) -> RoleRef {
        RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: kind.into(),
            name: name.into(),
        }
    }

    fn crb(name: &str, role: &str, subjects: Vec<Subject>) -> ClusterRoleBinding {
        ClusterRoleBinding {
            metadata: meta("", name),
            role_ref: role_ref("ClusterRole", role),
            subjects: Some(subjects),
        }
    }

    fn rb(ns: &str, name: &str, kind: &str, role: &str, subjects: Vec<Subject>) -> RoleBinding {
        RoleBinding {
            metadata: meta(ns, name),
            role_ref: role_ref(kind, role),
            subjects: Some(subjects),
        }
    }

    fn req(user: &UserInfo, verb: &str, ns: &str, group: &str, resource: &str) -> Attributes {
        Attributes {
            user: user.clone(),
            verb: verb.into(),
            namespace: ns.into(),
            api_group: group.into(),
            resource: resource.into(),
            resource_request: true,
            ..Default::default()
        }
    }

    fn fixture() -> PolicyIndex {
        PolicyIndex::new(
            vec![
                cluster_role("pod-reader", vec![rule(&["get", "list"], &[""], &["pods"])]),
                cluster_role("node-reader", vec![rule(&["get"], &[""], &["nodes"])]),
                cluster_role("secret-reader", vec![rule(&["get"], &[""], &["secrets"])]),
            ],
            vec![role(
                "dev",
                "cm-writer",
                vec![rule(&["create"], &[""], &["configmaps"])],
            )],
            vec![
                crb("nodes", "node-reader", vec![subject("Group", "", "ops")]),
                crb("broken", "missing", vec![subject("Group", "", "ops")]),
                crb(
                    "robots",
                    "node-reader",
                    vec![subject("ServiceAccount", "kube-system", "robot")],
                ),
            ],
            vec![
                rb(
                    "dev",
                    "readers",
                    "ClusterRole",
                    "pod-reader",
                    vec![subject("User", "", "jane")],
                ),
                rb(
                    "dev",
                    "writers",
                    "Role",
                    "cm-writer",
                    vec![subject("Group", "", "devs")],
                ),
                rb(
                    "dev",
                    "local-sa",
                    "ClusterRole",
                    "secret-reader",
                    vec![subject("ServiceAccount", "", "builder")],
                ),
                rb(
                    "dev",
                    "foreign-role",
                    "Role",
                    "cm-writer-elsewhere",
                    vec![subject("User", "", "jane")],
                ),
                rb(
                    "prod",
                    "other-ns-role",
                    "Role",
                    "cm-writer",
                    vec![subject("User", "", "jane")],
                ),
            ],
        )
    }

    #[test]
    fn authorize_follows_bindings_as_upstream() {
        let index = fixture();
        let jane = UserInfo::new("jane", &["system:authenticated"]);
        let ops = UserInfo::new("olga", &["ops"]);
        let dev = UserInfo::new("dan", &["devs"]);
        let robot = UserInfo::new("system:serviceaccount:kube-system:robot", &[]);
        let builder = UserInfo::new("system:serviceaccount:dev:builder", &[]);
        let other_builder = UserInfo::new("system:serviceaccount:prod:builder", &[]);
        let admin = UserInfo::admin();
        let cases: &[(&str, Attributes, Decision, &str)] = &[
            (
                "role binding to a cluster role grants in its namespace",
                req(&jane, "list", "dev", "", "pods"),
                Decision::Allow,
                r#"RBAC: allowed by RoleBinding "readers/dev" of ClusterRole "pod-reader" to User "jane""#,
            ),
            (
                "role binding to a cluster role grants nothing elsewhere",
                req(&jane, "list", "prod", "", "pods"),
                Decision::NoOpinion,
                r#"RBAC: role.rbac.authorization.k8s.io "cm-writer" not found"#,
            ),
            (
                "role binding grants nothing cluster-wide",
                req(&jane, "list", "", "", "pods"),
                Decision::NoOpinion,
                "",
            ),
            (
                "cluster role binding grants everywhere",
                req(&ops, "get", "anywhere", "", "nodes"),
                Decision::Allow,
                r#"RBAC: allowed by ClusterRoleBinding "nodes" of ClusterRole "node-reader" to Group "ops""#,
            ),
            (
                "cluster role binding grants at the cluster scope",
                req(&ops, "get", "", "", "nodes"),
                Decision::Allow,
                r#"RBAC: allowed by ClusterRoleBinding "nodes" of ClusterRole "node-reader" to Group "ops""#,
            ),
            (
                "a binding to a missing role is skipped and reported",
                req(&ops, "delete", "", "", "nodes"),
                Decision::NoOpinion,
                r#"RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found"#,
            ),
            (
                "role in the binding's namespace",
                req(&dev, "create", "dev", "", "configmaps"),
                Decision::Allow,
                r#"RBAC: allowed by RoleBinding "writers/dev" of Role "cm-writer" to Group "devs""#,
            ),
            (
                "verb the role lacks",
                req(&dev, "delete", "dev", "", "configmaps"),
                Decision::NoOpinion,
                "",
            ),
            (
                "service account subject",
                req(&robot, "get", "", "", "nodes"),
                Decision::Allow,
                r#"RBAC: allowed by ClusterRoleBinding "robots" of ClusterRole "node-reader" to ServiceAccount "robot/kube-system""#,
            ),
            (
                "service account subject defaults to the binding's namespace",
                req(&builder, "get", "dev", "", "secrets"),
                Decision::Allow,
                r#"RBAC: allowed by RoleBinding "local-sa/dev" of ClusterRole "secret-reader" to ServiceAccount "builder/dev""#,
            ),
            (
                "same service account name in another namespace",
                req(&other_builder, "get", "dev", "", "secrets"),
                Decision::NoOpinion,
                "",
            ),
            (
                "system:masters is always allowed",
                req(&admin, "delete", "", "", "nodes"),
                Decision::Allow,
                "",
            ),
        ];
        for (name, attrs, decision, reason) in cases {
            let (got, got_reason) = index.authorize(attrs);
            assert_eq!(got, *decision, "{name}");
            assert_eq!(got_reason, *reason, "{name}");
        }
    }

    #[test]
    fn several_missing_roles_aggregate_as_upstream() {
        let index = PolicyIndex::new(
            vec![],
            vec![],
            vec![
                crb("a", "gone", vec![subject("User", "", "u")]),
                crb("b", "gone", vec![subject("User", "", "u")]),
                ClusterRoleBinding {
                    metadata: meta("", "c"),
                    role_ref: role_ref("Thing", "x"),
                    subjects: Some(vec![subject("User", "", "u")]),
                },
            ],
            vec![],
        );
        let u = UserInfo::new("u", &[]);
        let (d, reason) = index.authorize(&req(&u, "get", "", "", "pods"));
        assert_eq!(d, Decision::NoOpinion);
        assert_eq!(
            reason,
            r#"RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, unsupported role reference kind: "Thing"]"#
        );
    }

    #[test]
    fn subjects_match_as_upstream() {
        let sa = UserInfo::new("system:serviceaccount:ns:name", &["g"]);
        let cases: &[(&str, Subject, &str, bool)] = &[
            (
                "user",
                subject("User", "", "system:serviceaccount:ns:name"),
                "",
                true,
            ),
            ("other user", subject("User", "", "bob"), "", false),
            ("group", subject("Group", "", "g"), "", true),
            ("other group", subject("Group", "", "h"), "", false),
            ("sa", subject("ServiceAccount", "ns", "name"), "", true),
            (
                "sa other name",
                subject("ServiceAccount", "ns", "nam"),
                "",
                false,
            ),
            (
                "sa other namespace",
                subject("ServiceAccount", "n", "s:name"),
                "",
                false,
            ),
            (
                "sa defaults to binding namespace",
                subject("ServiceAccount", "", "name"),
                "ns",
                true,
            ),
            (
                "sa without any namespace",
                subject("ServiceAccount", "", "name"),
                "",
                false,
            ),
            (
                "unknown kind",
                subject("Robot", "", "system:serviceaccount:ns:name"),
                "",
                false,
            ),
        ];
        for (name, subj, ns, want) in cases {
            assert_eq!(applies_to_user(&sa, subj, ns), *want, "{name}");
        }
    }

    #[test]
    fn rules_for_lists_what_applies_and_reports_missing_roles() {
        let index = fixture();
        let jane = UserInfo::new("jane", &[]);
        let review = index.rules_for(&jane, "dev");
        assert_eq!(
            review.resource_rules,
            vec![rule(&["get", "list"], &[""], &["pods"])]
        );
        assert!(review.non_resource_rules.is_empty());
        assert!(
            !review.incomplete,
            "upstream's RBAC never reports incomplete"
        );
        assert_eq!(
            review.evaluation_error,
            r#"role.rbac.authorization.k8s.io "cm-writer-elsewhere" not found"#
        );

        let ops = UserInfo::new("olga", &["ops"]);
        let review = index.rules_for(&ops, "dev");
        assert_eq!(
            review.resource_rules,
            vec![rule(&["get"], &[""], &["nodes"])]
        );
        assert!(!review.incomplete);
        assert!(!review.evaluation_error.is_empty());

        let nobody = index.rules_for(&UserInfo::new("nobody", &[]), "dev");
        assert_eq!(nobody, RulesReview::default());
    }

    #[test]
    fn rules_for_splits_resource_and_non_resource_rules() {
        let mixed = PolicyRule {
            verbs: vec!["get".into()],
            api_groups: s(&[""]),
            resources: s(&["pods"]),
            non_resource_urls: s(&["/healthz"]),
            resource_names: None,
        };
        let index = PolicyIndex::new(
            vec![cluster_role("mixed", vec![mixed])],
            vec![],
            vec![crb("m", "mixed", vec![subject("User", "", "u")])],
            vec![],
        );
        let review = index.rules_for(&UserInfo::new("u", &[]), "");
        assert_eq!(
            review.resource_rules,
            vec![rule(&["get"], &[""], &["pods"])]
        );
        assert_eq!(
            review.non_resource_rules,
            vec![PolicyRule {
                verbs: vec!["get".into()],
                non_resource_urls: s(&["/healthz"]),
                ..Default::default()
            }]
        );
    }

    #[test]
    fn role_ref_rules_resolve_roles_and_cluster_roles() {
        let index = fixture();
        let cases: &[(&str, &str, &str, Option<Vec<PolicyRule>>)] = &[
            (
                "dev",
                "Role",
                "cm-writer",
                Some(vec![rule(&["create"], &[""], &["configmaps"])]),
            ),
            ("prod", "Role", "cm-writer", None),
            ("", "Role", "cm-writer", None),
            (
                "prod",
                "ClusterRole",
                "node-reader",
                Some(vec![rule(&["get"], &[""], &["nodes"])]),
            ),
            ("", "ClusterRole", "missing", None),
            ("dev", "Thing", "cm-writer", None),
        ];
        for (ns, kind, name, want) in cases {
            assert_eq!(
                &index.role_ref_rules(ns, kind, name),
                want,
                "{ns} {kind} {name}"
            );
        }
        assert_eq!(
            index.get_role_reference_rules("dev", "Thing", "x"),
            Err(r#"unsupported role reference kind: "Thing""#.to_string())
        );
    }

    #[test]
    fn the_index_can_be_shared_across_request_tasks() {
        fn shared<T: Send + Sync + 'static>() {}
        shared::<PolicyIndex>();
    }

    #[test]
    fn a_thousand_role_bindings_across_a_hundred_namespaces() {
        let mut role_bindings = Vec::new();
        for n in 0..100 {
            for b in 0..10 {
                let ns = format!("ns-{n}");
                role_bindings.push(rb(
                    &ns,
                    &format!("rb-{b}"),
                    "ClusterRole",
                    "pod-reader",
                    vec![subject("User", "", &format!("user-{n}-{b}"))],
                ));
            }
        }
        assert_eq!(role_bindings.len(), 1000);
        let index = PolicyIndex::new(
            vec![cluster_role(
                "pod-reader",
                vec![rule(&["get", "list"], &[""], &["pods"])],
            )],
            vec![],
            vec![],
            role_bindings,
        );
        let hit = UserInfo::new("user-57-3", &[]);
        let (d, reason) = index.authorize(&req(&hit, "list", "ns-57", "", "pods"));
        assert_eq!(d, Decision::Allow);
        assert_eq!(
            reason,
            r#"RBAC: allowed by RoleBinding "rb-3/ns-57" of ClusterRole "pod-reader" to User "user-57-3""#
        );
        // The same user elsewhere, and another namespace's user here, are misses.
        let (d, _) = index.authorize(&req(&hit, "list", "ns-58", "", "pods"));
        assert_eq!(d, Decision::NoOpinion);
        let (d, reason) = index.authorize(&req(
            &UserInfo::new("user-58-3", &[]),
            "list",
            "ns-57",
            "",
            "pods",
        ));
        assert_eq!((d, reason.as_str()), (Decision::NoOpinion, ""));
        // The check walks only the request's namespace: ten bindings, not a thousand.
        assert_eq!(index.role_bindings.get("ns-57").map(Vec::len), Some(10));
        for _ in 0..10_000 {
            assert_eq!(
                index.authorize(&req(&hit, "get", "ns-57", "", "pods")).0,
                Decision::Allow
            );
        }
    }
}
