//! PersistentVolume (upstream's `pkg/registry/core/persistentvolume/strategy.go`).

use berth_api::registry::ResourceType;
use berth_api::user::UserInfo;
use serde_json::{Value, json};

use super::{RestStrategy, UpdateScope};
use crate::objects;

pub(super) struct PersistentVolume;

impl RestStrategy for PersistentVolume {
    fn prepare_for_create(&self, _rt: &ResourceType, obj: &mut Value, _user: Option<&UserInfo>) {
        stamp_phase_transition(obj, None, &objects::now_rfc3339());
    }

    fn prepare_for_update(
        &self,
        _rt: &ResourceType,
        scope: UpdateScope,
        new: &mut Value,
        old: &Value,
    ) {
        if matches!(scope, UpdateScope::Status) {
            stamp_phase_transition(new, Some(old), &objects::now_rfc3339());
        }
    }
}

/// Upstream's PersistentVolumeLastPhaseTransitionTime (on by default): a new
/// volume, and one whose phase a status write changes, records when, unless
/// the writer set a new time itself.
fn stamp_phase_transition(new: &mut Value, old: Option<&Value>, now: &str) {
    let phase = |v: &Value| v.pointer("/status/phase").cloned();
    let stamp = |v: &Value| v.pointer("/status/lastPhaseTransitionTime").cloned();
    if let Some(old) = old
        && (phase(old) == phase(new) || (stamp(new).is_some() && stamp(new) != stamp(old)))
    {
        return;
    }
    if let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) {
        status.insert("lastPhaseTransitionTime".into(), json!(now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_phase_transitions_are_stamped() {
        let now = "2026-01-02T03:04:05Z";
        let pending = json!({"status": {"phase": "Pending", "lastPhaseTransitionTime": "2026-01-01T00:00:00Z"}});
        let cases = [
            // (old, new, stamped now?)
            (None, json!({"status": {"phase": "Pending"}}), true),
            (
                Some(pending.clone()),
                json!({"status": {"phase": "Available", "lastPhaseTransitionTime": "2026-01-01T00:00:00Z"}}),
                true,
            ),
            (
                Some(pending.clone()),
                json!({"status": {"phase": "Available"}}),
                true,
            ),
            (
                Some(pending.clone()),
                json!({"status": {"phase": "Pending", "lastPhaseTransitionTime": "2026-01-01T00:00:00Z", "message": "m"}}),
                false,
            ),
            (
                Some(pending.clone()),
                json!({"status": {"phase": "Bound", "lastPhaseTransitionTime": "2025-12-31T00:00:00Z"}}),
                false,
            ),
        ];
        for (old, mut new, stamped) in cases {
            stamp_phase_transition(&mut new, old.as_ref(), now);
            assert_eq!(
                new["status"]["lastPhaseTransitionTime"] == now,
                stamped,
                "{old:?} -> {new}"
            );
        }
    }
}
