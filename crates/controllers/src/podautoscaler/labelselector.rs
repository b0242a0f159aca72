//! metav1.LabelSelector helpers: conversion to a selector
//! (`LabelSelectorAsSelector`) and Go's `%+v` rendering, which upstream
//! prints in external metric names and errors
//! (`external metric qps(&LabelSelector{MatchLabels:map[string]string{queue: a,},MatchExpressions:[]LabelSelectorRequirement{},})`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as MetaSelector;

use berth_api::selector::{LabelSelector, SelectorError};

/// Upstream's `LabelSelectorAsSelector`: none selects nothing.
pub fn as_selector(selector: Option<&MetaSelector>) -> Result<LabelSelector, SelectorError> {
    let value = serde_json::to_value(selector).map_err(|e| SelectorError(e.to_string()))?;
    LabelSelector::from_meta(&value)
}

/// The gogo-protobuf `String()` of a `*metav1.LabelSelector` (`nil` when none).
pub fn go_string(selector: Option<&MetaSelector>) -> String {
    let Some(s) = selector else {
        return "nil".into();
    };
    let mut labels = String::from("map[string]string{");
    // A Go map prints sorted by key; BTreeMap already is.
    for (k, v) in s.match_labels.iter().flatten() {
        labels.push_str(&format!("{k}: {v},"));
    }
    labels.push('}');
    let mut exprs = String::from("[]LabelSelectorRequirement{");
    for r in s.match_expressions.iter().flatten() {
        let values = r.values.as_deref().unwrap_or_default().join(" ");
        exprs.push_str(&format!(
            "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{values}],}},",
            r.key, r.operator
        ));
    }
    exprs.push('}');
    format!("&LabelSelector{{MatchLabels:{labels},MatchExpressions:{exprs},}}")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    #[test]
    fn go_string_table() {
        let labels = |pairs: &[(&str, &str)]| -> Option<BTreeMap<String, String>> {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            )
        };
        let cases = [
            (None, "nil"),
            (
                Some(MetaSelector::default()),
                "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}",
            ),
            (
                Some(MetaSelector {
                    match_labels: labels(&[("queue", "worker_tasks"), ("a", "b")]),
                    match_expressions: None,
                }),
                "&LabelSelector{MatchLabels:map[string]string{a: b,queue: worker_tasks,},MatchExpressions:[]LabelSelectorRequirement{},}",
            ),
            (
                Some(MetaSelector {
                    match_labels: None,
                    match_expressions: Some(vec![LabelSelectorRequirement {
                        key: "tier".into(),
                        operator: "In".into(),
                        values: Some(vec!["a".into(), "b".into()]),
                    }]),
                }),
                "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:tier,Operator:In,Values:[a b],},},}",
            ),
        ];
        for (sel, want) in cases {
            assert_eq!(go_string(sel.as_ref()), want);
        }
    }

    #[test]
    fn none_selects_nothing_and_empty_everything() {
        assert!(as_selector(None).is_ok_and(|s| s.matches_nothing()));
        let all = as_selector(Some(&MetaSelector::default()));
        assert!(all.is_ok_and(|s| !s.matches_nothing() && s.is_empty()));
    }
}
