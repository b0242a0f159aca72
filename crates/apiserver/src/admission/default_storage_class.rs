//! DefaultStorageClass (upstream's `plugin/pkg/admission/storage/storageclass/setdefault`):
//! a new claim that names no class (neither `spec.storageClassName` nor the
//! beta annotation) gets the default StorageClass's name. With several
//! defaults the newest wins (upstream ≥ 1.26); with none the claim is left
//! alone, and the PV controller gives it the default class later
//! (RetroactiveDefaultStorageClass).

use async_trait::async_trait;
use berth_api::storage::{ANN_BETA_STORAGE_CLASS, is_default_class};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{Value, json};

use super::{Attributes, Operation, Plugin};
use crate::objects;
use crate::rest::Rest;
use crate::status::ApiResult;

pub struct DefaultStorageClass;

/// The default class among `classes` as upstream's `GetDefaultClass`: the
/// most recently created of those marked default, ties broken by name.
pub fn default_class(classes: &[StorageClass]) -> Option<&StorageClass> {
    classes
        .iter()
        .filter(|c| is_default_class(c))
        .min_by(|a, b| {
            let created = |c: &StorageClass| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(b)
                .cmp(&created(a))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        })
}

/// Upstream's `PersistentVolumeClaimHasClass`: an explicit class, even "",
/// or the beta annotation.
fn has_class(pvc: &Value) -> bool {
    pvc.pointer("/spec/storageClassName")
        .is_some_and(|v| !v.is_null())
        || pvc
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(ANN_BETA_STORAGE_CLASS))
            .is_some()
}

/// Sets the default class on a claim that has none.
pub fn admit_claim(pvc: &mut Value, classes: &[StorageClass]) {
    if has_class(pvc) {
        return;
    }
    let Some(name) = default_class(classes).and_then(|c| c.metadata.name.clone()) else {
        return;
    };
    if let Some(m) = pvc.as_object_mut() {
        let spec = m.entry("spec").or_insert_with(|| json!({}));
        if let Some(s) = spec.as_object_mut() {
            s.insert("storageClassName".into(), json!(name));
        }
    }
}

/// Every StorageClass in the watch cache (upstream reads its informer); one
/// that does not decode is skipped, as the lister would never hold it.
pub(super) fn storage_classes(rest: &Rest) -> ApiResult<Vec<StorageClass>> {
    let Some(rt) = berth_api::registry::lookup("storage.k8s.io", "v1", "storageclasses") else {
        return Ok(Vec::new());
    };
    let (cached, _) = rest.cache.snapshot(&objects::prefix(rt));
    let mut out = Vec::with_capacity(cached.len());
    for (_, s) in cached {
        let v = objects::decode_at(&s.bytes, s.mod_revision)?;
        if let Ok(c) = serde_json::from_value(v) {
            out.push(c);
        }
    }
    Ok(out)
}

#[async_trait]
impl Plugin for DefaultStorageClass {
    fn name(&self) -> &'static str {
        "DefaultStorageClass"
    }

    async fn admit(&self, rest: &Rest, a: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        if a.operation != Operation::Create || !a.is("", "PersistentVolumeClaim") || has_class(obj)
        {
            return Ok(());
        }
        let classes = storage_classes(rest)?;
        admit_claim(obj, &classes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, created: &str, annotations: Value) -> StorageClass {
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": created, "annotations": annotations},
            "provisioner": "example.com/p"
        }))
        .unwrap()
    }

    #[test]
    fn claims_without_a_class_get_the_newest_default() {
        let default = json!({"storageclass.kubernetes.io/is-default-class": "true"});
        let beta = json!({"storageclass.beta.kubernetes.io/is-default-class": "true"});
        let old = class("old", "2026-01-01T00:00:00Z", default.clone());
        let new = class("new", "2026-02-01T00:00:00Z", beta.clone());
        let twin = class("a-twin", "2026-02-01T00:00:00Z", default.clone());
        let plain = class("plain", "2026-03-01T00:00:00Z", json!({}));
        let not_true = class(
            "capital",
            "2026-03-01T00:00:00Z",
            json!({"storageclass.kubernetes.io/is-default-class": "True"}),
        );
        let claim = json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"]}});
        let cases: Vec<(&str, Value, Vec<StorageClass>, Option<&str>)> = vec![
            ("no classes", claim.clone(), vec![], None),
            (
                "no default",
                claim.clone(),
                vec![plain.clone(), not_true.clone()],
                None,
            ),
            (
                "one default",
                claim.clone(),
                vec![plain.clone(), old.clone()],
                Some("old"),
            ),
            (
                "newest of several",
                claim.clone(),
                vec![old.clone(), new.clone(), plain.clone()],
                Some("new"),
            ),
            (
                "same age: by name",
                claim.clone(),
                vec![new.clone(), twin.clone()],
                Some("a-twin"),
            ),
            (
                "explicit class kept",
                json!({"spec": {"storageClassName": "gold"}}),
                vec![old.clone()],
                Some("gold"),
            ),
            (
                "explicit empty class kept (no dynamic provisioning)",
                json!({"spec": {"storageClassName": ""}}),
                vec![old.clone()],
                Some(""),
            ),
            (
                "beta annotation counts as a class",
                json!({"metadata": {"annotations": {ANN_BETA_STORAGE_CLASS: "silver"}}, "spec": {}}),
                vec![old.clone()],
                None,
            ),
            (
                "no spec yet",
                json!({"metadata": {"name": "c"}}),
                vec![old.clone()],
                Some("old"),
            ),
        ];
        for (name, mut pvc, classes, want) in cases {
            admit_claim(&mut pvc, &classes);
            assert_eq!(
                pvc.pointer("/spec/storageClassName")
                    .and_then(Value::as_str),
                want,
                "{name}"
            );
        }
    }
}
