//! `apiregistration.k8s.io/v1` kinds.

use serde_json::Value;

use super::format::{arr, get, name, str_at};
use super::{AGE, NAME, Printer, age, col};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    match kind {
        "APIService" => Some(&API_SERVICE),
        _ => None,
    }
}

/// kube-aggregator's APIService table: `Local` for APIServices this server
/// serves itself; `False (Reason)` while a remote one is not available.
static API_SERVICE: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Service",
            "string",
            "The reference to the service that hosts this API endpoint.",
        ),
        col("Available", "string", "Whether this service is available."),
        AGE,
    ],
    cells: |o, now| {
        let service = match get(o, &["spec", "service"]).filter(|s| s.is_object()) {
            Some(s) => format!("{}/{}", str_at(s, &["namespace"]), str_at(s, &["name"])),
            None => "Local".to_string(),
        };
        let available = arr(o, &["status", "conditions"])
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some("Available"))
            .map_or_else(
                || "Unknown".to_string(),
                |c| match str_at(c, &["status"]) {
                    "True" => "True".to_string(),
                    s => format!("{s} ({})", str_at(c, &["reason"])),
                },
            );
        vec![
            name(o).into(),
            service.into(),
            available.into(),
            age(o, now).into(),
        ]
    },
};
