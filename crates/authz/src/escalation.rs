//! The RBAC escalation check: a user may only grant what they already hold
//! (upstream's `ConfirmNoEscalation`, `validation.Covers`, `CompactRules` and
//! `CompactString`).

use berth_api::user::UserInfo;
use berth_api::validation::go_quote;
use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::rule::{ALL, list};

/// A write that would grant permissions its author lacks; Display is upstream's
/// message, which the API server wraps in the 403 of the role or binding write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EscalationError(String);

/// Whether `owner_rules` cover `servant_rules`, and the atomic rules (one group,
/// resource, verb and name each) they do not (upstream's `validation.Covers`).
pub fn covers(owner_rules: &[PolicyRule], servant_rules: &[PolicyRule]) -> (bool, Vec<PolicyRule>) {
    let owner: Vec<&PolicyRule> = owner_rules.iter().collect();
    covers_refs(&owner, servant_rules)
}

fn covers_refs(owner: &[&PolicyRule], servant: &[PolicyRule]) -> (bool, Vec<PolicyRule>) {
    // Broken down to single tuples, each one is covered by a single owner rule or
    // not at all, so comparing against owner rules one at a time is exact.
    let uncovered: Vec<PolicyRule> = servant
        .iter()
        .flat_map(breakdown_rule)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect();
    (uncovered.is_empty(), uncovered)
}

/// The ConfirmNoEscalation message when `owner` does not cover `rules`.
pub(crate) fn confirm_covered(
    user: &UserInfo,
    owner: &[&PolicyRule],
    rules: &[PolicyRule],
    resolution_errors: Option<&str>,
) -> Result<(), EscalationError> {
    let (covered, missing) = covers_refs(owner, rules);
    if covered {
        return Ok(());
    }
    // Upstream lists the compacted rules as a sorted set of strings.
    let mut descriptions: Vec<String> = compact_rules(missing).iter().map(compact_string).collect();
    descriptions.sort();
    descriptions.dedup();
    let mut msg = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        go_quote(&user.name),
        quote_list(&user.groups),
        descriptions.join("\n")
    );
    if let Some(errors) = resolution_errors {
        // Upstream formats a one-element []error with %v: the aggregate, bracketed.
        msg.push_str(&format!("; resolution errors: [{errors}]"));
    }
    Err(EscalationError(msg))
}

/// One rule per (group, resource, verb, name) and per (url, verb).
fn breakdown_rule(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &String| Some(vec![s.clone()]);
    let mut subrules = Vec::new();
    for group in list(&rule.api_groups) {
        for resource in list(&rule.resources) {
            for verb in &rule.verbs {
                let base = PolicyRule {
                    api_groups: one(group),
                    resources: one(resource),
                    verbs: vec![verb.clone()],
                    ..Default::default()
                };
                let names = list(&rule.resource_names);
                if names.is_empty() {
                    subrules.push(base);
                } else {
                    for name in names {
                        subrules.push(PolicyRule {
                            resource_names: one(name),
                            ..base.clone()
                        });
                    }
                }
            }
        }
    }
    for url in list(&rule.non_resource_urls) {
        for verb in &rule.verbs {
            subrules.push(PolicyRule {
                non_resource_urls: one(url),
                verbs: vec![verb.clone()],
                ..Default::default()
            });
        }
    }
    subrules
}

fn has(set: &[String], element: &str) -> bool {
    set.iter().any(|s| s == element)
}

fn has_all(set: &[String], contains: &[String]) -> bool {
    contains.iter().all(|c| has(set, c))
}

fn resource_covers_all(set: &[String], covers: &[String]) -> bool {
    if has(set, ALL) || has_all(set, covers) {
        return true;
    }
    covers.iter().all(|path| {
        if has(set, path) {
            return true;
        }
        // A subresource is also covered by `*/subresource`.
        match path.split_once('/') {
            Some((_, sub)) => set.iter().any(|s| s.strip_prefix("*/") == Some(sub)),
            None => false,
        }
    })
}

fn non_resource_url_covers(owner: &str, path: &str) -> bool {
    owner == path || (owner.ends_with('*') && path.starts_with(owner.trim_end_matches('*')))
}

/// Whether `owner` (any shape) covers `sub` (at most one of each field).
fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, ALL) || has_all(&owner.verbs, &sub.verbs);
    let owner_groups = list(&owner.api_groups);
    let groups = has(owner_groups, ALL) || has_all(owner_groups, list(&sub.api_groups));
    let resources = resource_covers_all(list(&owner.resources), list(&sub.resources));
    let urls = list(&sub.non_resource_urls).iter().all(|p| {
        list(&owner.non_resource_urls)
            .iter()
            .any(|o| non_resource_url_covers(o, p))
    });
    let owner_names = list(&owner.resource_names);
    let sub_names = list(&sub.resource_names);
    // A rule limited to names never covers one that is not.
    let names = if sub_names.is_empty() {
        owner_names.is_empty()
    } else {
        owner_names.is_empty() || has_all(owner_names, sub_names)
    };
    verbs && groups && resources && names && urls
}

/// Merges rules of one group and one resource, and nothing else, that differ only
/// in verbs (upstream's `CompactRules`); others stay as they are.
fn compact_rules(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut compacted = Vec::with_capacity(rules.len());
    let mut simple: Vec<PolicyRule> = Vec::new();
    for rule in rules {
        let is_simple = list(&rule.resource_names).is_empty()
            && list(&rule.non_resource_urls).is_empty()
            && list(&rule.api_groups).len() == 1
            && list(&rule.resources).len() == 1;
        if !is_simple {
            compacted.push(rule);
            continue;
        }
        match simple
            .iter_mut()
            .find(|s| s.api_groups == rule.api_groups && s.resources == rule.resources)
        {
            Some(existing) => existing.verbs.extend(rule.verbs),
            None => simple.push(rule),
        }
    }
    compacted.extend(simple);
    compacted
}

/// Upstream's `CompactString`: `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}`.
pub fn compact_string(rule: &PolicyRule) -> String {
    let mut parts = Vec::new();
    let fields = [
        ("APIGroups", list(&rule.api_groups)),
        ("Resources", list(&rule.resources)),
        ("NonResourceURLs", list(&rule.non_resource_urls)),
        ("ResourceNames", list(&rule.resource_names)),
        ("Verbs", rule.verbs.as_slice()),
    ];
    for (label, values) in fields {
        if !values.is_empty() {
            parts.push(format!("{label}:{}", quote_list(values)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn quote_list(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
    format!("[{}]", quoted.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PolicyIndex;
    use k8s_openapi::api::rbac::v1::{
        ClusterRole, ClusterRoleBinding, RoleBinding, RoleRef, Subject,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn s(v: &[&str]) -> Option<Vec<String>> {
        if v.is_empty() {
            None
        } else {
            Some(v.iter().map(|x| x.to_string()).collect())
        }
    }

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|x| x.to_string()).collect(),
            api_groups: s(groups),
            resources: s(resources),
            resource_names: s(names),
            non_resource_urls: None,
        }
    }

    fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|x| x.to_string()).collect(),
            non_resource_urls: s(urls),
            ..Default::default()
        }
    }

    #[test]
    fn covers_as_upstream() {
        let cases: &[(&str, Vec<PolicyRule>, Vec<PolicyRule>, bool)] = &[
            (
                "get does not cover list",
                vec![rule(&["get"], &[""], &["pods"], &[])],
                vec![rule(&["list"], &[""], &["pods"], &[])],
                false,
            ),
            (
                "exact",
                vec![rule(&["get", "list"], &[""], &["pods"], &[])],
                vec![rule(&["list"], &[""], &["pods"], &[])],
                true,
            ),
            (
                "star covers everything",
                vec![rule(&["*"], &["*"], &["*"], &[]), url_rule(&["*"], &["*"])],
                vec![
                    rule(
                        &["escalate", "bind"],
                        &["rbac.authorization.k8s.io"],
                        &["clusterroles"],
                        &["x"],
                    ),
                    rule(&["get"], &["apps"], &["deployments/scale"], &[]),
                    url_rule(&["get", "post"], &["/metrics", "/apis/*"]),
                ],
                true,
            ),
            (
                "resource star does not cover non-resource URLs",
                vec![rule(&["*"], &["*"], &["*"], &[])],
                vec![url_rule(&["get"], &["/healthz"])],
                false,
            ),
            (
                "star/subresource covers any resource's subresource",
                vec![rule(&["get"], &["*"], &["*/scale"], &[])],
                vec![rule(
                    &["get"],
                    &["apps"],
                    &["deployments/scale", "statefulsets/scale"],
                    &[],
                )],
                true,
            ),
            (
                "star/subresource does not cover the resource",
                vec![rule(&["get"], &["*"], &["*/scale"], &[])],
                vec![rule(&["get"], &["apps"], &["deployments"], &[])],
                false,
            ),
            (
                "names cover the same names",
                vec![rule(&["get"], &[""], &["configmaps"], &["a", "b"])],
                vec![rule(&["get"], &[""], &["configmaps"], &["b"])],
                true,
            ),
            (
                "names do not cover all names",
                vec![rule(&["get"], &[""], &["configmaps"], &["a"])],
                vec![rule(&["get"], &[""], &["configmaps"], &[])],
                false,
            ),
            (
                "no names cover any name",
                vec![rule(&["get"], &[""], &["configmaps"], &[])],
                vec![rule(&["get"], &[""], &["configmaps"], &["a"])],
                true,
            ),
            (
                "split across owner rules",
                vec![
                    rule(&["get"], &[""], &["pods"], &[]),
                    rule(&["list"], &[""], &["pods"], &[]),
                ],
                vec![rule(&["get", "list"], &[""], &["pods"], &[])],
                true,
            ),
            (
                "url prefix",
                vec![url_rule(&["get"], &["/apis/*"])],
                vec![url_rule(&["get"], &["/apis/apps"])],
                true,
            ),
            (
                "url exact does not cover a longer url",
                vec![url_rule(&["get"], &["/apis"])],
                vec![url_rule(&["get"], &["/apis/apps"])],
                false,
            ),
            ("nothing covers nothing", vec![], vec![], true),
        ];
        for (name, owner, servant, want) in cases {
            assert_eq!(covers(owner, servant).0, *want, "{name}");
        }
    }

    fn meta(ns: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: (!ns.is_empty()).then(|| ns.to_string()),
            ..Default::default()
        }
    }

    fn user_subject(name: &str) -> Subject {
        Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "User".into(),
            name: name.into(),
            namespace: None,
        }
    }

    fn index() -> PolicyIndex {
        let role = |name: &str, rules| ClusterRole {
            metadata: meta("", name),
            rules: Some(rules),
            ..Default::default()
        };
        let role_ref = |name: &str| RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: name.into(),
        };
        PolicyIndex::new(
            vec![
                role("pod-getter", vec![rule(&["get"], &[""], &["pods"], &[])]),
                role(
                    "cluster-admin",
                    vec![rule(&["*"], &["*"], &["*"], &[]), url_rule(&["*"], &["*"])],
                ),
            ],
            vec![],
            vec![
                ClusterRoleBinding {
                    metadata: meta("", "root"),
                    role_ref: role_ref("cluster-admin"),
                    subjects: Some(vec![user_subject("root")]),
                },
                ClusterRoleBinding {
                    metadata: meta("", "broken"),
                    role_ref: role_ref("gone"),
                    subjects: Some(vec![user_subject("broken")]),
                },
            ],
            vec![RoleBinding {
                metadata: meta("dev", "getter"),
                role_ref: role_ref("pod-getter"),
                subjects: Some(vec![user_subject("jane"), user_subject("broken")]),
            }],
        )
    }

    #[test]
    fn confirm_no_escalation_as_upstream() {
        let index = index();
        let jane = UserInfo::new("jane", &["system:authenticated"]);
        let root = UserInfo::new("root", &[]);
        let broken = UserInfo::new("broken", &[]);
        // (case, user, namespace, rules to grant, upstream's answer)
        type Case<'a> = (
            &'a str,
            &'a UserInfo,
            &'a str,
            Vec<PolicyRule>,
            Result<(), &'a str>,
        );
        let cases: &[Case] = &[
            (
                "get pods grants get pods",
                &jane,
                "dev",
                vec![rule(&["get"], &[""], &["pods"], &[])],
                Ok(()),
            ),
            (
                "get pods cannot grant list pods",
                &jane,
                "dev",
                vec![rule(&["get", "list", "watch"], &[""], &["pods"], &[])],
                Err(
                    "user \"jane\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"list\" \"watch\"]}",
                ),
            ),
            (
                "a role binding's rights do not reach the cluster scope",
                &jane,
                "",
                vec![rule(&["get"], &[""], &["pods"], &[])],
                Err(
                    "user \"jane\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\"]}",
                ),
            ),
            (
                "missing rules are listed sorted, names and urls uncompacted",
                &jane,
                "dev",
                vec![
                    rule(&["get"], &["apps"], &["deployments"], &["web"]),
                    url_rule(&["get"], &["/metrics"]),
                    rule(&["delete"], &[""], &["pods", "secrets"], &[]),
                ],
                Err(
                    "user \"jane\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"delete\"]}\n{APIGroups:[\"apps\"], Resources:[\"deployments\"], ResourceNames:[\"web\"], Verbs:[\"get\"]}\n{NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}",
                ),
            ),
            (
                "cluster-admin can grant anything",
                &root,
                "",
                vec![
                    rule(&["*"], &["*"], &["*"], &[]),
                    url_rule(&["*"], &["*"]),
                    rule(
                        &["escalate"],
                        &["rbac.authorization.k8s.io"],
                        &["roles"],
                        &["x"],
                    ),
                ],
                Ok(()),
            ),
            (
                "system:masters can grant anything without a binding",
                &UserInfo::admin(),
                "dev",
                vec![rule(&["*"], &["*"], &["*"], &[])],
                Ok(()),
            ),
            (
                "resolution errors are appended",
                &broken,
                "dev",
                vec![rule(&["list"], &[""], &["pods"], &[])],
                Err(
                    "user \"broken\" (groups=[]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"list\"]}; resolution errors: [clusterrole.rbac.authorization.k8s.io \"gone\" not found]",
                ),
            ),
            (
                "resolution errors do not matter when covered",
                &broken,
                "dev",
                vec![rule(&["get"], &[""], &["pods"], &[])],
                Ok(()),
            ),
        ];
        for (name, user, ns, rules, want) in cases {
            let got = index
                .confirm_no_escalation(user, ns, rules)
                .map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(str::to_string), "{name}");
        }
    }

    #[test]
    fn compact_string_as_upstream() {
        let cases: &[(PolicyRule, &str)] = &[
            (
                rule(&["get", "list"], &["", "apps"], &["pods"], &["a"]),
                r#"{APIGroups:["" "apps"], Resources:["pods"], ResourceNames:["a"], Verbs:["get" "list"]}"#,
            ),
            (
                url_rule(&["get"], &["/healthz"]),
                r#"{NonResourceURLs:["/healthz"], Verbs:["get"]}"#,
            ),
            (PolicyRule::default(), "{}"),
        ];
        for (rule, want) in cases {
            assert_eq!(compact_string(rule), *want);
        }
    }
}
