//! `coordination.k8s.io/v1` kinds.

use super::format::{name, str_at};
use super::{AGE, NAME, Printer, age, col};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    match kind {
        "Lease" => Some(&LEASE),
        _ => None,
    }
}

static LEASE: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Holder",
            "string",
            "holderIdentity contains the identity of the holder of a current lease.",
        ),
        AGE,
    ],
    cells: |o, now| {
        vec![
            name(o).into(),
            str_at(o, &["spec", "holderIdentity"]).into(),
            age(o, now).into(),
        ]
    },
};

#[cfg(test)]
mod tests {
    use super::super::testutil::{ago, now};
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn lease_row() {
        let l = json!({"metadata": {"name": "node-1", "creationTimestamp": ago(3)}, "spec": {"holderIdentity": "node-1"}});
        assert_eq!(
            Value::from((LEASE.cells)(&l, now())),
            json!(["node-1", "node-1", "3s"])
        );
        assert_eq!(
            (LEASE.cells)(&json!({"metadata": {"name": "x"}}), now())[1],
            json!("")
        );
    }
}
