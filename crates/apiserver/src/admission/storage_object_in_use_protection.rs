//! StorageObjectInUseProtection (upstream's
//! `plugin/pkg/admission/storage/storageobjectinuseprotection`): every new
//! claim gets `kubernetes.io/pvc-protection` and every new volume
//! `kubernetes.io/pv-protection`, so neither goes while a pod (or a claim)
//! still uses it; the protection controllers remove them once unused.

use async_trait::async_trait;
use berth_api::storage::{PV_PROTECTION_FINALIZER, PVC_PROTECTION_FINALIZER};
use serde_json::{Value, json};

use super::{Attributes, Operation, Plugin};
use crate::rest::Rest;
use crate::status::ApiResult;

pub struct StorageObjectInUseProtection;

/// Appends `finalizer` unless the object already has it.
pub fn add_finalizer(obj: &mut Value, finalizer: &str) {
    let Some(m) = obj.as_object_mut() else {
        return;
    };
    let meta = m.entry("metadata").or_insert_with(|| json!({}));
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    let list = meta.entry("finalizers").or_insert_with(|| json!([]));
    if list.is_null() {
        *list = json!([]);
    }
    if let Some(list) = list.as_array_mut()
        && !list.iter().any(|f| f == finalizer)
    {
        list.push(json!(finalizer));
    }
}

#[async_trait]
impl Plugin for StorageObjectInUseProtection {
    fn name(&self) -> &'static str {
        "StorageObjectInUseProtection"
    }

    async fn admit(&self, _rest: &Rest, a: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        if a.operation != Operation::Create {
            return Ok(());
        }
        if a.is("", "PersistentVolumeClaim") {
            add_finalizer(obj, PVC_PROTECTION_FINALIZER);
        } else if a.is("", "PersistentVolume") {
            add_finalizer(obj, PV_PROTECTION_FINALIZER);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalizer_is_added_once() {
        let f = PVC_PROTECTION_FINALIZER;
        let cases = [
            (json!({}), json!([f])),
            (json!({"metadata": {"name": "c"}}), json!([f])),
            (json!({"metadata": {"finalizers": null}}), json!([f])),
            (
                json!({"metadata": {"finalizers": ["example.com/x"]}}),
                json!(["example.com/x", f]),
            ),
            (json!({"metadata": {"finalizers": [f]}}), json!([f])),
        ];
        for (mut obj, want) in cases {
            add_finalizer(&mut obj, f);
            assert_eq!(obj["metadata"]["finalizers"], want);
        }
        let mut pv = json!({"metadata": {"finalizers": [PVC_PROTECTION_FINALIZER]}});
        add_finalizer(&mut pv, PV_PROTECTION_FINALIZER);
        assert_eq!(
            pv["metadata"]["finalizers"],
            json!([PVC_PROTECTION_FINALIZER, PV_PROTECTION_FINALIZER])
        );
    }
}
