//! Taints and tolerations, shared by the scheduler, the DaemonSet controller and
//! taint eviction so they agree on what "tolerated" means.

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Upstream's `Toleration.ToleratesTaint`: an empty effect matches every effect, an
/// empty key matches every key, `Exists` ignores the value, `Equal` (or no operator)
/// compares it.
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(e) = t.effect.as_deref()
        && !e.is_empty()
        && e != taint.effect
    {
        return false;
    }
    let key = t.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        let s = |v: &str| (!v.is_empty()).then(|| v.to_string());
        Toleration {
            key: s(key),
            operator: s(op),
            value: s(value),
            effect: s(effect),
            ..Default::default()
        }
    }

    #[test]
    fn toleration_table() {
        let taint = Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let cases = [
            (tol("dedicated", "Equal", "gpu", "NoSchedule"), true),
            (tol("dedicated", "", "gpu", ""), true),
            (tol("dedicated", "Equal", "cpu", "NoSchedule"), false),
            (tol("dedicated", "Exists", "", ""), true),
            (tol("dedicated", "Exists", "", "NoExecute"), false),
            (tol("other", "Exists", "", ""), false),
            (tol("", "Exists", "", ""), true),
            (tol("", "Exists", "", "NoSchedule"), true),
            (tol("dedicated", "Lt", "gpu", ""), false),
        ];
        for (i, (t, want)) in cases.iter().enumerate() {
            assert_eq!(tolerates(t, &taint), *want, "case {i}: {t:?}");
        }
    }
}
