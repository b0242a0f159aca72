//! `events.k8s.io/v1` Event: upstream converts it to the internal core Event
//! and prints it with the same columns; only the field names differ.

use super::Printer;
use super::core::{EVENT, EventFields, event_cells};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    match kind {
        "Event" => Some(&EVENTS_EVENT),
        _ => None,
    }
}

const FIELDS: EventFields = EventFields {
    involved_object: "regarding",
    message: "note",
    source: "deprecatedSource",
    first_timestamp: "deprecatedFirstTimestamp",
    last_timestamp: "deprecatedLastTimestamp",
    count: "deprecatedCount",
    reporting_controller: "reportingController",
};

static EVENTS_EVENT: Printer = Printer {
    columns: EVENT.columns,
    cells: |o, now| event_cells(o, &FIELDS, now),
};

#[cfg(test)]
mod tests {
    use super::super::testutil::{ago, now};
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn events_k8s_io_event_row() {
        let ev = json!({"metadata": {"name": "web.1"}, "eventTime": "2025-06-01T11:58:00.000000Z",
            "regarding": {"kind": "Deployment", "name": "web"}, "reason": "ScalingReplicaSet", "type": "Normal",
            "note": "Scaled up replica set web-1 to 3", "reportingController": "deployment-controller",
            "reportingInstance": "cp-1", "action": "Scale"});
        assert_eq!(
            Value::from((EVENTS_EVENT.cells)(&ev, now())),
            json!([
                "2m",
                "Normal",
                "ScalingReplicaSet",
                "deployment/web",
                "",
                "deployment-controller, cp-1",
                "Scaled up replica set web-1 to 3",
                "2m",
                1,
                "web.1"
            ])
        );
        let legacy = json!({"metadata": {"name": "e"}, "regarding": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{c}"},
            "deprecatedSource": {"component": "kubelet"}, "deprecatedFirstTimestamp": ago(600),
            "deprecatedLastTimestamp": ago(5), "deprecatedCount": 4});
        let c = (EVENTS_EVENT.cells)(&legacy, now());
        assert_eq!(
            (&c[0], &c[4], &c[5], &c[7], &c[8]),
            (
                &json!("5s"),
                &json!("spec.containers{c}"),
                &json!("kubelet"),
                &json!("10m"),
                &json!(4)
            )
        );
    }
}
