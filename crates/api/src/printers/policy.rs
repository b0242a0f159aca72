//! `policy/v1` kinds.

use super::format::{get, int_at, int_or_string, name};
use super::{AGE, NAME, Printer, age, col};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    match kind {
        "PodDisruptionBudget" => Some(&PDB),
        _ => None,
    }
}

static PDB: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Min Available",
            "string",
            "The minimum number of pods that must be available.",
        ),
        col(
            "Max Unavailable",
            "string",
            "The maximum number of pods that may be unavailable.",
        ),
        col(
            "Allowed Disruptions",
            "integer",
            "Calculated number of pods that may be disrupted at this time.",
        ),
        AGE,
    ],
    cells: |o, now| {
        let int_or_na = |field: &str| {
            get(o, &["spec", field])
                .filter(|v| !v.is_null())
                .map_or_else(|| "N/A".to_string(), int_or_string)
        };
        vec![
            name(o).into(),
            int_or_na("minAvailable").into(),
            int_or_na("maxUnavailable").into(),
            int_at(o, &["status", "disruptionsAllowed"]).into(),
            age(o, now).into(),
        ]
    },
};

#[cfg(test)]
mod tests {
    use super::super::testutil::now;
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn pdb_rows() {
        let p = json!({"metadata": {"name": "zk"}, "spec": {"minAvailable": 2}, "status": {"disruptionsAllowed": 1}});
        assert_eq!(
            Value::from((PDB.cells)(&p, now())),
            json!(["zk", "2", "N/A", 1, "<unknown>"])
        );
        let p = json!({"metadata": {"name": "zk"}, "spec": {"maxUnavailable": "25%"}});
        assert_eq!(
            Value::from((PDB.cells)(&p, now())),
            json!(["zk", "N/A", "25%", 0, "<unknown>"])
        );
    }
}
