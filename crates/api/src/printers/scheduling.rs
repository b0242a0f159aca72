//! `scheduling.k8s.io/v1` kinds.

use super::format::{bool_at, int_at, name, str_at};
use super::{AGE, NAME, Printer, age, col};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    match kind {
        "PriorityClass" => Some(&PRIORITY_CLASS),
        _ => None,
    }
}

static PRIORITY_CLASS: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Value",
            "integer",
            "value represents the integer value of this priority class.",
        ),
        col(
            "Global-Default",
            "boolean",
            "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class.",
        ),
        AGE,
        // Priority 0 upstream too, though only filled for wide output (always, server-side).
        col(
            "PreemptionPolicy",
            "string",
            "preemptionPolicy is the Policy for preempting pods with lower priority.",
        ),
    ],
    cells: |o, now| {
        vec![
            name(o).into(),
            int_at(o, &["value"]).into(),
            bool_at(o, &["globalDefault"]).into(),
            age(o, now).into(),
            str_at(o, &["preemptionPolicy"]).into(),
        ]
    },
};

#[cfg(test)]
mod tests {
    use super::super::testutil::now;
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn priority_class_row() {
        let pc = json!({"metadata": {"name": "system-node-critical"}, "value": 2000001000, "globalDefault": false,
            "preemptionPolicy": "PreemptLowerPriority"});
        assert_eq!(
            Value::from((PRIORITY_CLASS.cells)(&pc, now())),
            json!([
                "system-node-critical",
                2000001000,
                false,
                "<unknown>",
                "PreemptLowerPriority"
            ])
        );
    }
}
