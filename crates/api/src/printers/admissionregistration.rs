//! `admissionregistration.k8s.io/v1` kinds.

use serde_json::Value;

use super::format::{arr, get, name, obj, str_at};
use super::{AGE, NAME, Printer, age, col};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    match kind {
        "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => {
            Some(&WEBHOOK_CONFIGURATION)
        }
        "ValidatingAdmissionPolicy" => Some(&VALIDATING_ADMISSION_POLICY),
        "ValidatingAdmissionPolicyBinding" => Some(&VALIDATING_ADMISSION_POLICY_BINDING),
        _ => None,
    }
}

/// Upstream's `printMutatingWebhook` / `printValidatingWebhook`: the number of webhooks.
static WEBHOOK_CONFIGURATION: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Webhooks",
            "integer",
            "Webhooks indicates the number of webhooks included in this configuration",
        ),
        AGE,
    ],
    cells: |o, now| {
        vec![
            name(o).into(),
            (arr(o, &["webhooks"]).len() as i64).into(),
            age(o, now).into(),
        ]
    },
};

/// Upstream's `printValidatingAdmissionPolicy`.
static VALIDATING_ADMISSION_POLICY: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Validations",
            "integer",
            "Validations indicates the number of validation rules defined in this configuration",
        ),
        col(
            "ParamKind",
            "string",
            "ParamKind specifies the kind of resources used to parameterize this policy",
        ),
        AGE,
    ],
    cells: |o, now| {
        let param_kind = match obj(o, &["spec", "paramKind"]) {
            Some(_) => format!(
                "{}/{}",
                str_at(o, &["spec", "paramKind", "apiVersion"]),
                str_at(o, &["spec", "paramKind", "kind"])
            ),
            None => "<unset>".to_string(),
        };
        vec![
            name(o).into(),
            (arr(o, &["spec", "validations"]).len() as i64).into(),
            param_kind.into(),
            age(o, now).into(),
        ]
    },
};

/// Upstream's `printValidatingAdmissionPolicyBinding` (the column descriptions
/// keep upstream's wording, typos included: clients may compare them).
static VALIDATING_ADMISSION_POLICY_BINDING: Printer = Printer {
    columns: &[
        NAME,
        col(
            "PolicyName",
            "string",
            "PolicyName indicates the policy definition which the policy binding binded to",
        ),
        col(
            "ParamRef",
            "string",
            "ParamRef indicates the param resource which sets the configration param",
        ),
        AGE,
    ],
    cells: |o, now| {
        vec![
            name(o).into(),
            str_at(o, &["spec", "policyName"]).into(),
            param_ref(o).into(),
            age(o, now).into(),
        ]
    },
};

/// The binding's param: `<namespace>/<name>`, `*/<name>` without a namespace
/// (the param may be cluster-scoped: the printer cannot tell), or the
/// selector as Go prints a `metav1.LabelSelector` struct.
fn param_ref(o: &Value) -> String {
    if obj(o, &["spec", "paramRef"]).is_none() {
        return "<unset>".to_string();
    }
    let pr_name = str_at(o, &["spec", "paramRef", "name"]);
    if !pr_name.is_empty() {
        let ns = str_at(o, &["spec", "paramRef", "namespace"]);
        return if ns.is_empty() {
            format!("*/{pr_name}")
        } else {
            format!("{ns}/{pr_name}")
        };
    }
    match get(o, &["spec", "paramRef", "selector"]) {
        Some(sel) if sel.is_object() => go_label_selector_string(sel),
        _ => "<unset>".to_string(),
    }
}

/// The gogo-protobuf `String()` of a `metav1.LabelSelector`, which is what
/// upstream's printer shows: `&LabelSelector{MatchLabels:map[string]string{a: b,},MatchExpressions:[]LabelSelectorRequirement{},}`.
fn go_label_selector_string(sel: &Value) -> String {
    let mut labels: Vec<(&String, &str)> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k, v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    labels.sort();
    let labels: String = labels.iter().map(|(k, v)| format!("{k}: {v},")).collect();
    let exprs: String = arr(sel, &["matchExpressions"])
        .iter()
        .map(|e| {
            let values: Vec<&str> = arr(e, &["values"])
                .iter()
                .map(|v| v.as_str().unwrap_or(""))
                .collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                str_at(e, &["key"]),
                str_at(e, &["operator"]),
                values.join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn binding_param_ref_as_upstream_prints_it() {
        let cases = [
            (json!({"spec": {}}), "<unset>"),
            (
                json!({"spec": {"paramRef": {"name": "p", "namespace": "ns"}}}),
                "ns/p",
            ),
            (json!({"spec": {"paramRef": {"name": "p"}}}), "*/p"),
            (
                json!({"spec": {"paramRef": {"selector": {"matchLabels": {"b": "2", "a": "1"},
                    "matchExpressions": [{"key": "env", "operator": "In", "values": ["x", "y"]}]}}}}),
                "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:env,Operator:In,Values:[x y],},},}",
            ),
            (
                json!({"spec": {"paramRef": {"selector": {}}}}),
                "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}",
            ),
        ];
        for (o, want) in cases {
            assert_eq!(param_ref(&o), want, "{o}");
        }
    }
}
