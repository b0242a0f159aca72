//! PersistentVolumeClaimResize (upstream's
//! `plugin/pkg/admission/storage/persistentvolume/resize`): a claim's storage
//! request may grow only once it is bound, and only when the class it was
//! provisioned from (unchanged by the update) has `allowVolumeExpansion: true`.

use async_trait::async_trait;
use berth_api::quantity::Quantity;
use berth_api::storage::claim_class;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::Value;

use super::{Attributes, Operation, Plugin, forbidden};
use crate::objects;
use crate::rest::Rest;
use crate::status::ApiResult;

pub const NOT_BOUND: &str = "Only bound persistent volume claims can be expanded";
pub const NOT_EXPANDABLE: &str = "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize";

pub struct PersistentVolumeClaimResize;

fn storage_request(pvc: &Value) -> Quantity {
    pvc.pointer("/spec/resources/requests/storage")
        .and_then(|q| Quantity::from_json(q).ok())
        .unwrap_or_else(Quantity::zero)
}

fn class_of(pvc: &Value) -> String {
    serde_json::from_value::<PersistentVolumeClaim>(pvc.clone())
        .map(|c| claim_class(&c))
        .unwrap_or_default()
}

/// What the request needs of the claim's class: `None` when it is no
/// expansion, else the class name whose `allowVolumeExpansion` decides.
/// Refused outright when the claim is not bound or its class is none or
/// changed.
pub fn expansion_class(new: &Value, old: &Value) -> Result<Option<String>, &'static str> {
    if storage_request(new) <= storage_request(old) {
        return Ok(None);
    }
    if old.pointer("/status/phase").and_then(Value::as_str) != Some("Bound") {
        return Err(NOT_BOUND);
    }
    let (class, old_class) = (class_of(new), class_of(old));
    if class.is_empty() || class != old_class {
        return Err(NOT_EXPANDABLE);
    }
    Ok(Some(class))
}

/// The class allows expansion (a missing class does not).
pub fn allows_expansion(class: Option<&StorageClass>) -> bool {
    class
        .and_then(|c| c.allow_volume_expansion)
        .unwrap_or(false)
}

/// The named StorageClass from the watch cache, else the store.
async fn storage_class(rest: &Rest, name: &str) -> ApiResult<Option<StorageClass>> {
    let Some(rt) = berth_api::registry::lookup("storage.k8s.io", "v1", "storageclasses") else {
        return Ok(None);
    };
    let key = objects::key(rt, None, name);
    let value = match rest.cache.get(&key) {
        Some(s) => Some(objects::decode_at(&s.bytes, s.mod_revision)?),
        None => match rest.store.get(&key).await? {
            Some(kv) => Some(objects::decode(&kv)?),
            None => None,
        },
    };
    Ok(value.and_then(|v| serde_json::from_value(v).ok()))
}

#[async_trait]
impl Plugin for PersistentVolumeClaimResize {
    fn name(&self) -> &'static str {
        "PersistentVolumeClaimResize"
    }

    async fn validate(
        &self,
        rest: &Rest,
        a: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> ApiResult<()> {
        if a.operation != Operation::Update || !a.is("", "PersistentVolumeClaim") {
            return Ok(());
        }
        let (Some(new), Some(old)) = (obj, a.old) else {
            return Ok(());
        };
        match expansion_class(new, old) {
            Ok(None) => Ok(()),
            Err(why) => Err(forbidden(a, why)),
            Ok(Some(name)) => {
                if allows_expansion(storage_class(rest, &name).await?.as_ref()) {
                    Ok(())
                } else {
                    Err(forbidden(a, NOT_EXPANDABLE))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(size: &str, phase: &str, class: Option<&str>) -> Value {
        json!({
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}, "storageClassName": class},
            "status": {"phase": phase}
        })
    }

    #[test]
    fn only_bound_claims_of_expandable_classes_grow() {
        let annotated = json!({
            "metadata": {"name": "c", "annotations": {"volume.beta.kubernetes.io/storage-class": "gold"}},
            "spec": {"resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound"}
        });
        let mut annotated_grown = annotated.clone();
        annotated_grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        type Case = (
            &'static str,
            Value,
            Value,
            Result<Option<&'static str>, &'static str>,
        );
        let cases: Vec<Case> = vec![
            (
                "same size",
                claim("1Gi", "Bound", Some("gold")),
                claim("1Gi", "Bound", Some("gold")),
                Ok(None),
            ),
            (
                "same size, other units",
                claim("1Gi", "Bound", Some("gold")),
                claim("1024Mi", "Bound", Some("gold")),
                Ok(None),
            ),
            (
                "shrink is validation's business",
                claim("2Gi", "Bound", Some("gold")),
                claim("1Gi", "Bound", Some("gold")),
                Ok(None),
            ),
            (
                "grow bound",
                claim("1Gi", "Bound", Some("gold")),
                claim("2Gi", "Bound", Some("gold")),
                Ok(Some("gold")),
            ),
            (
                "grow pending",
                claim("1Gi", "Pending", Some("gold")),
                claim("2Gi", "Pending", Some("gold")),
                Err(NOT_BOUND),
            ),
            (
                "grow without class",
                claim("1Gi", "Bound", None),
                claim("2Gi", "Bound", None),
                Err(NOT_EXPANDABLE),
            ),
            (
                "grow with empty class",
                claim("1Gi", "Bound", Some("")),
                claim("2Gi", "Bound", Some("")),
                Err(NOT_EXPANDABLE),
            ),
            (
                "grow and change class",
                claim("1Gi", "Bound", Some("gold")),
                claim("2Gi", "Bound", Some("silver")),
                Err(NOT_EXPANDABLE),
            ),
            (
                "grow, class by annotation",
                annotated,
                annotated_grown,
                Ok(Some("gold")),
            ),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(
                expansion_class(&new, &old),
                want.map(|c| c.map(String::from)),
                "{name}"
            );
        }
        let class = |allow: Value| -> StorageClass {
            serde_json::from_value(json!({"metadata": {"name": "gold"}, "provisioner": "p", "allowVolumeExpansion": allow})).unwrap()
        };
        assert!(allows_expansion(Some(&class(json!(true)))));
        assert!(!allows_expansion(Some(&class(json!(false)))));
        assert!(!allows_expansion(Some(&class(Value::Null))));
        assert!(!allows_expansion(None));
    }
}
