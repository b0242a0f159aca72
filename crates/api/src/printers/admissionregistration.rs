//! `admissionregistration.k8s.io/v1` kinds.

use super::format::{arr, name};
use super::{AGE, NAME, Printer, age, col};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    match kind {
        "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => {
            Some(&WEBHOOK_CONFIGURATION)
        }
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
