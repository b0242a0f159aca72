//! Node selector terms (`NodeSelectorTerm`) against a node's labels and name:
//! required node affinity of pods (scheduler, DaemonSet controller) and of
//! PersistentVolumes (`spec.nodeAffinity`), as upstream's
//! component-helpers nodeaffinity.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

/// One requirement against the value of its key (None: the label is absent).
pub fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let vals = r.values.as_deref().unwrap_or_default();
    let num = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| vals.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !vals.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        // Gt/Lt compare integers; a missing or non-numeric value never matches.
        "Gt" | "Lt" => {
            let (Some(v), [bound]) = (value.and_then(num), vals) else {
                return false;
            };
            let Some(bound) = num(bound) else {
                return false;
            };
            if r.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// A term matches when all its expressions (labels) and fields
/// (`metadata.name`, the only field) do; an empty term matches nothing.
pub fn term_matches(t: &NodeSelectorTerm, labels: &BTreeMap<String, String>, name: &str) -> bool {
    let exprs = t.match_expressions.as_deref().unwrap_or_default();
    let fields = t.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            let v = (r.key == "metadata.name").then_some(name);
            requirement_matches(r, v)
        })
}

/// A selector matches when any of its terms does.
pub fn selector_matches(s: &NodeSelector, labels: &BTreeMap<String, String>, name: &str) -> bool {
    s.node_selector_terms
        .iter()
        .any(|t| term_matches(t, labels, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn requirements() {
        let cases = [
            (req("k", "In", &["a", "b"]), Some("a"), true),
            (req("k", "In", &["a"]), None, false),
            (req("k", "NotIn", &["a"]), Some("b"), true),
            (req("k", "NotIn", &["a"]), None, true),
            (req("k", "NotIn", &["a"]), Some("a"), false),
            (req("k", "Exists", &[]), Some(""), true),
            (req("k", "DoesNotExist", &[]), Some("x"), false),
            (req("k", "Gt", &["4"]), Some("8"), true),
            (req("k", "Gt", &["4"]), Some("4"), false),
            (req("k", "Lt", &["4"]), Some("2"), true),
            (req("k", "Gt", &["4"]), Some("x"), false),
            (req("k", "Gt", &["4", "5"]), Some("8"), false),
            (req("k", "Bogus", &[]), Some("x"), false),
        ];
        for (r, v, want) in cases {
            assert_eq!(requirement_matches(&r, v), want, "{r:?} {v:?}");
        }
    }

    #[test]
    fn terms_and_selectors() {
        let labels = BTreeMap::from([("zone".to_string(), "a".to_string())]);
        let term = |exprs: Vec<NodeSelectorRequirement>, fields: Vec<NodeSelectorRequirement>| {
            NodeSelectorTerm {
                match_expressions: Some(exprs),
                match_fields: Some(fields),
            }
        };
        assert!(!term_matches(&term(vec![], vec![]), &labels, "n1"));
        assert!(term_matches(
            &term(vec![req("zone", "In", &["a"])], vec![]),
            &labels,
            "n1"
        ));
        assert!(term_matches(
            &term(vec![], vec![req("metadata.name", "In", &["n1"])]),
            &labels,
            "n1"
        ));
        assert!(!term_matches(
            &term(
                vec![req("zone", "In", &["a"])],
                vec![req("metadata.name", "In", &["n2"])]
            ),
            &labels,
            "n1"
        ));
        let sel = NodeSelector {
            node_selector_terms: vec![
                term(vec![req("zone", "In", &["b"])], vec![]),
                term(vec![req("zone", "In", &["a"])], vec![]),
            ],
        };
        assert!(selector_matches(&sel, &labels, "n1"));
        assert!(!selector_matches(
            &NodeSelector {
                node_selector_terms: vec![]
            },
            &labels,
            "n1"
        ));
    }
}
