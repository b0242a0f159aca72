//! Custom objects: the rules upstream's `customresource` strategy and codec apply.
//! - decoding: `metadata` through ObjectMeta, everything else pruned by the
//!   version's structural schema (fields it does not name are dropped, or refused
//!   with `fieldValidation=Strict`), then defaulted from the schema;
//! - validation: metadata, the OpenAPI schema, then the CEL rules
//!   (`x-kubernetes-validations`);
//! - the status subresource (the main endpoint keeps status, `/status` changes only
//!   status) and `metadata.generation` (bumped when anything but metadata and
//!   status changes);
//! - the scale subresource at the CRD's `specReplicasPath`, `statusReplicasPath`
//!   and `labelSelectorPath`.

use berth_api::crd::{CustomResource, json_pointer};
use berth_api::registry::ResourceType;
use berth_api::validation::FieldError;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value, json};

use crate::status::{ApiError, ApiResult};

/// `body` with `metadata` decoded through ObjectMeta and the rest pruned by the
/// schema: what a client sent that the CRD does not describe is gone.
pub fn prune(rt: &ResourceType, cr: &CustomResource, body: Value) -> ApiResult<Value> {
    let mut obj = body;
    let Some(map) = obj.as_object_mut() else {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    };
    if let Some(meta) = map.get("metadata").cloned() {
        let typed: ObjectMeta = serde_json::from_value(meta).map_err(|e| {
            ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: {e}",
                rt.kind, rt.version, rt.kind
            ))
        })?;
        let mut meta = serde_json::to_value(typed).unwrap_or_else(|_| json!({}));
        drop_empty(&mut meta);
        map.insert("metadata".into(), meta);
    }
    if let Some(schema) = &cr.schema {
        berth_apiextensions::pruning::prune(&mut obj, schema, true);
    }
    Ok(obj)
}

/// ObjectMeta's Go omitempty: empty strings, maps and lists are not written.
fn drop_empty(meta: &mut Value) {
    if let Some(m) = meta.as_object_mut() {
        m.retain(|_, v| match v {
            Value::Null => false,
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            _ => true,
        });
    }
}

/// Schema defaults (`default:`), as upstream applies them on every decode.
pub fn apply_defaults(cr: &CustomResource, obj: &mut Value) {
    if let Some(schema) = &cr.schema {
        berth_apiextensions::defaulting::apply_defaults(obj, schema);
        berth_apiextensions::defaulting::prune_non_nullable_nulls_without_defaults(obj, schema);
    }
}

/// Every validation error of a custom object: metadata (names as DNS
/// subdomains), the OpenAPI schema, then the CEL rules (with `old` for
/// transition rules on update).
pub fn validate(
    rt: &ResourceType,
    cr: &'static CustomResource,
    obj: &Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    let mut errs = berth_api::validation::validate(rt, obj, old);
    if let Some(schema) = &cr.schema {
        // Metadata was checked above; the schema speaks for the rest.
        let mut body = obj.clone();
        if let Some(m) = body.as_object_mut() {
            m.remove("metadata");
        }
        let mut root_schema = schema.clone();
        if let Some(props) = root_schema
            .get_mut("properties")
            .and_then(Value::as_object_mut)
        {
            props.remove("metadata");
        }
        errs.extend(berth_apiextensions::validation::validate_custom_resource(
            &body,
            &root_schema,
        ));
        if errs.is_empty() {
            // The schema lives as long as the served resource: rules compile once.
            errs.extend(berth_cel::validate_static(schema, obj, old, ""));
        }
    }
    errs
}

fn has_status(rt: &ResourceType) -> bool {
    rt.has_subresource("status")
}

/// Create: status is the controller's (dropped when the status subresource is on),
/// generation starts at 1.
pub fn prepare_for_create(rt: &ResourceType, obj: &mut Value) {
    if let Some(m) = obj.as_object_mut() {
        if has_status(rt) {
            m.remove("status");
        }
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("generation".into(), json!(1));
        }
    }
}

/// Update through the main endpoint: status kept from `old` when the status
/// subresource is on; generation bumped when the spec (everything but metadata
/// and, with the subresource, status) changed.
pub fn prepare_for_update_main(rt: &ResourceType, new: &mut Value, old: &Value) {
    let status = has_status(rt);
    if status && let Some(m) = new.as_object_mut() {
        match old.get("status") {
            Some(s) => {
                m.insert("status".into(), s.clone());
            }
            None => {
                m.remove("status");
            }
        }
    }
    bump_generation(new, old, status);
}

/// Update through `/status`: the generation stays (the caller keeps the rest).
pub fn generation_of(old: &Value) -> i64 {
    old.pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn bump_generation(new: &mut Value, old: &Value, skip_status: bool) {
    let strip = |v: &Value| -> Map<String, Value> {
        let mut m = v.as_object().cloned().unwrap_or_default();
        m.remove("metadata");
        if skip_status {
            m.remove("status");
        }
        m
    };
    let gen_old = generation_of(old);
    let generation = if strip(new) != strip(old) {
        gen_old + 1
    } else {
        gen_old
    };
    if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("generation".into(), json!(generation));
    }
}

/// The autoscaling/v1 Scale of a custom object, read at the CRD's paths (a
/// missing replica count reads 0, as upstream).
pub fn scale_of(cr: &CustomResource, obj: &Value, meta: Value) -> Value {
    let Some(s) = &cr.scale else {
        return Value::Null;
    };
    let at = |p: &str| obj.pointer(&json_pointer(p)).cloned();
    let mut status =
        json!({"replicas": at(&s.status_replicas_path).filter(Value::is_i64).unwrap_or(json!(0))});
    if let Some(sel) = s
        .label_selector_path
        .as_deref()
        .and_then(&at)
        .filter(Value::is_string)
    {
        status["selector"] = sel;
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": {"replicas": at(&s.spec_replicas_path).filter(Value::is_i64).unwrap_or(json!(0))},
        "status": status,
    })
}

/// Sets the replica count at `specReplicasPath`, creating the objects on the way.
pub fn set_replicas(cr: &CustomResource, obj: &mut Value, replicas: i64) -> ApiResult<()> {
    let Some(s) = &cr.scale else {
        return Err(ApiError::path_not_found());
    };
    let path = json_pointer(&s.spec_replicas_path);
    let mut cur = obj;
    let segs: Vec<String> = path
        .split('/')
        .skip(1)
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect();
    let Some((last, parents)) = segs.split_last() else {
        return Err(ApiError::internal("empty specReplicasPath"));
    };
    for p in parents {
        match cur.get(p.as_str()) {
            Some(Value::Object(_)) => {}
            // Upstream's SetNestedField: a value in the way is an error.
            Some(v) if !v.is_null() => {
                return Err(ApiError::bad_request(format!(
                    "value cannot be set because {} is not a map",
                    s.spec_replicas_path
                )));
            }
            _ => {
                if !cur.is_object() {
                    return Err(ApiError::internal("specReplicasPath crosses a non-object"));
                }
                cur[p.as_str()] = json!({});
            }
        }
        cur = &mut cur[p.as_str()];
    }
    if !cur.is_object() {
        return Err(ApiError::internal("specReplicasPath crosses a non-object"));
    }
    cur[last.as_str()] = json!(replicas);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_api::crd::ScaleSubresource;

    fn cr(scale: bool) -> CustomResource {
        CustomResource {
            crd_name: "crontabs.stable.example.com",
            crd_uid: "u",
            schema: None,
            printer_columns: vec![],
            scale: scale.then(|| ScaleSubresource {
                spec_replicas_path: ".spec.replicas".into(),
                status_replicas_path: ".status.replicas".into(),
                label_selector_path: Some(".status.labelSelector".into()),
            }),
            selectable_fields: vec![],
            deprecation_warning: None,
            terminating: false,
        }
    }

    #[test]
    fn scale_reads_and_writes_the_crd_paths() {
        let c = cr(true);
        let obj =
            json!({"spec": {"replicas": 3}, "status": {"replicas": 2, "labelSelector": "app=x"}});
        let s = scale_of(&c, &obj, json!({"name": "a"}));
        assert_eq!(s["spec"]["replicas"], 3);
        assert_eq!(s["status"], json!({"replicas": 2, "selector": "app=x"}));
        let mut empty = json!({});
        set_replicas(&c, &mut empty, 5).unwrap();
        assert_eq!(empty, json!({"spec": {"replicas": 5}}));
        let s = scale_of(&c, &json!({}), json!({}));
        assert_eq!(s["spec"]["replicas"], 0);
        assert_eq!(s["status"], json!({"replicas": 0}));
        let mut bad = json!({"spec": 3});
        assert!(set_replicas(&c, &mut bad, 1).is_err());
    }

    #[test]
    fn generation_follows_the_spec() {
        let old = json!({"metadata": {"generation": 4}, "spec": {"a": 1}, "status": {"x": 1}});
        let cases = [
            (
                json!({"metadata": {"labels": {"a": "b"}}, "spec": {"a": 1}, "status": {"x": 1}}),
                true,
                4,
            ),
            (
                json!({"metadata": {}, "spec": {"a": 2}, "status": {"x": 1}}),
                true,
                5,
            ),
            // Without the status subresource a status change is a change.
            (
                json!({"metadata": {}, "spec": {"a": 1}, "status": {"x": 2}}),
                false,
                5,
            ),
            (
                json!({"metadata": {}, "spec": {"a": 1}, "status": {"x": 2}}),
                true,
                4,
            ),
            (
                json!({"metadata": {}, "spec": {"a": 1}, "status": {"x": 1}, "extra": 1}),
                true,
                5,
            ),
        ];
        for (mut new, skip_status, want) in cases {
            bump_generation(&mut new, &old, skip_status);
            assert_eq!(new["metadata"]["generation"], want, "{new}");
        }
    }
}
