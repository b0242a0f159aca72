//! What the `clusterrole-aggregation` controller writes into a ClusterRole with an
//! `aggregationRule` (upstream's `ClusterRoleAggregationController.syncClusterRole`).

use std::collections::BTreeMap;

use berth_api::selector::LabelSelector;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};

use crate::rule::list;

/// The union, deduplicated and in order, of the rules of every ClusterRole whose
/// labels match any of `role`'s clusterRoleSelectors, excluding `role` itself;
/// None when `role` has no aggregationRule.
///
/// As upstream, each selector is evaluated in turn over the roles sorted by name,
/// and an empty selector matches every role. A selector upstream cannot convert
/// (an unknown operator, `In` without values) makes the controller give up on the
/// role, leaving it as it is: so then this returns the role's current rules.
pub fn aggregate(role: &ClusterRole, all: &[ClusterRole]) -> Option<Vec<PolicyRule>> {
    let rule = role.aggregation_rule.as_ref()?;
    let own_name = role.metadata.name.as_deref().unwrap_or("");
    let mut sorted: Vec<&ClusterRole> = all.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let no_labels = BTreeMap::new();
    let mut rules: Vec<PolicyRule> = Vec::new();
    for selector in rule.cluster_role_selectors.as_deref().unwrap_or(&[]) {
        let selector = match serde_json::to_value(selector)
            .ok()
            .and_then(|v| LabelSelector::from_meta(&v).ok())
        {
            Some(s) => s,
            None => return Some(role.rules.clone().unwrap_or_default()),
        };
        for candidate in &sorted {
            if candidate.metadata.name.as_deref().unwrap_or("") == own_name {
                continue;
            }
            let labels = candidate.metadata.labels.as_ref().unwrap_or(&no_labels);
            if !selector.matches(labels) {
                continue;
            }
            for r in candidate.rules.as_deref().unwrap_or(&[]) {
                if !rules.iter().any(|have| rules_equal(have, r)) {
                    rules.push(r.clone());
                }
            }
        }
    }
    Some(rules)
}

/// Runs [`aggregate`] over `roles` until nothing changes, as the controller does by
/// requeueing every aggregated role whenever any ClusterRole changes: `edit`
/// includes `view`, `admin` includes `edit`, so one pass is not enough.
pub fn aggregate_all(roles: &mut [ClusterRole]) {
    // Each pass can only add rules that some role already has, so this settles
    // within as many passes as there are roles; the bound guards a bad chain.
    for _ in 0..=roles.len() {
        let mut changed = false;
        for i in 0..roles.len() {
            let Some(rules) = aggregate(&roles[i], roles) else {
                continue;
            };
            let current = roles[i].rules.as_deref().unwrap_or(&[]);
            let same = current.len() == rules.len()
                && current.iter().zip(&rules).all(|(a, b)| rules_equal(a, b));
            if !same {
                roles[i].rules = Some(rules);
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}

/// Upstream compares with `equality.Semantic.DeepEqual`, for which an absent list
/// and an empty one are the same.
pub fn rules_equal(a: &PolicyRule, b: &PolicyRule) -> bool {
    a.verbs == b.verbs
        && list(&a.api_groups) == list(&b.api_groups)
        && list(&a.resources) == list(&b.resources)
        && list(&a.resource_names) == list(&b.resource_names)
        && list(&a.non_resource_urls) == list(&b.non_resource_urls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::rbac::v1::AggregationRule;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        LabelSelector as MetaSelector, LabelSelectorRequirement, ObjectMeta,
    };

    fn rule(verb: &str, resource: &str) -> PolicyRule {
        PolicyRule {
            verbs: vec![verb.into()],
            api_groups: Some(vec![String::new()]),
            resources: Some(vec![resource.into()]),
            ..Default::default()
        }
    }

    fn labelled(name: &str, labels: &[(&str, &str)], rules: Vec<PolicyRule>) -> ClusterRole {
        ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            rules: Some(rules),
            aggregation_rule: None,
        }
    }

    fn match_labels(pairs: &[(&str, &str)]) -> MetaSelector {
        MetaSelector {
            match_labels: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            match_expressions: None,
        }
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> MetaSelector {
        MetaSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.into(),
                operator: op.into(),
                values: (!values.is_empty())
                    .then(|| values.iter().map(|v| v.to_string()).collect()),
            }]),
        }
    }

    fn aggregated(
        name: &str,
        labels: &[(&str, &str)],
        selectors: Vec<MetaSelector>,
    ) -> ClusterRole {
        ClusterRole {
            aggregation_rule: Some(AggregationRule {
                cluster_role_selectors: Some(selectors),
            }),
            ..labelled(name, labels, vec![rule("stale", "stale")])
        }
    }

    fn pool() -> Vec<ClusterRole> {
        vec![
            labelled(
                "b-pods",
                &[("agg", "yes"), ("tier", "gold")],
                vec![rule("get", "pods"), rule("list", "pods")],
            ),
            labelled(
                "a-secrets",
                &[("agg", "yes"), ("tier", "silver")],
                vec![rule("get", "secrets"), rule("get", "pods")],
            ),
            labelled("c-nodes", &[("tier", "bronze")], vec![rule("get", "nodes")]),
            labelled("d-plain", &[], vec![rule("get", "plain")]),
        ]
    }

    #[test]
    fn aggregates_as_the_controller() {
        let cases: &[(&str, Vec<MetaSelector>, Vec<PolicyRule>)] = &[
            (
                "matchLabels, roles in name order, duplicates dropped",
                vec![match_labels(&[("agg", "yes")])],
                vec![
                    rule("get", "secrets"),
                    rule("get", "pods"),
                    rule("list", "pods"),
                ],
            ),
            (
                "matchLabels needs every label",
                vec![match_labels(&[("agg", "yes"), ("tier", "gold")])],
                vec![rule("get", "pods"), rule("list", "pods")],
            ),
            (
                "selectors are ORed, in order",
                vec![
                    match_labels(&[("tier", "bronze")]),
                    match_labels(&[("tier", "gold")]),
                ],
                vec![
                    rule("get", "nodes"),
                    rule("get", "pods"),
                    rule("list", "pods"),
                ],
            ),
            (
                "In",
                vec![expr("tier", "In", &["bronze", "silver"])],
                vec![
                    rule("get", "secrets"),
                    rule("get", "pods"),
                    rule("get", "nodes"),
                ],
            ),
            (
                "NotIn matches roles without the label",
                vec![expr("tier", "NotIn", &["gold", "silver"])],
                vec![rule("get", "nodes"), rule("get", "plain")],
            ),
            (
                "Exists",
                vec![expr("agg", "Exists", &[])],
                vec![
                    rule("get", "secrets"),
                    rule("get", "pods"),
                    rule("list", "pods"),
                ],
            ),
            (
                "DoesNotExist",
                vec![expr("agg", "DoesNotExist", &[])],
                vec![rule("get", "nodes"), rule("get", "plain")],
            ),
            ("no selectors select nothing", vec![], vec![]),
            (
                "an invalid selector leaves the role as it is",
                vec![expr("tier", "In", &[])],
                vec![rule("stale", "stale")],
            ),
        ];
        for (name, selectors, want) in cases {
            let role = aggregated("target", &[("agg", "yes")], selectors.clone());
            let mut all = pool();
            all.push(role.clone());
            assert_eq!(aggregate(&role, &all).as_ref(), Some(want), "{name}");
        }
    }

    #[test]
    fn an_empty_selector_matches_every_role_but_itself() {
        let role = aggregated("target", &[], vec![MetaSelector::default()]);
        let mut all = pool();
        all.push(role.clone());
        let got = aggregate(&role, &all).unwrap_or_default();
        assert_eq!(got.len(), 5);
        assert!(!got.contains(&rule("stale", "stale")));
    }

    #[test]
    fn a_role_without_an_aggregation_rule_is_not_aggregated() {
        assert_eq!(aggregate(&pool()[0], &pool()), None);
    }

    #[test]
    fn aggregate_all_settles_chains() {
        let mut roles = vec![
            aggregated("outer", &[], vec![match_labels(&[("to", "outer")])]),
            aggregated(
                "inner",
                &[("to", "outer")],
                vec![match_labels(&[("to", "inner")])],
            ),
            labelled("leaf", &[("to", "inner")], vec![rule("get", "pods")]),
        ];
        aggregate_all(&mut roles);
        assert_eq!(roles[1].rules, Some(vec![rule("get", "pods")]));
        assert_eq!(roles[0].rules, Some(vec![rule("get", "pods")]));
    }
}
