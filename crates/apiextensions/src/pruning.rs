//! Pruning of unknown fields, as upstream's `pkg/apiserver/schema/pruning`
//! (`PruneWithOptions`), and the metadata coercion the CR handler runs after
//! it (`pkg/apiserver/schema/objectmeta` `CoerceWithOptions`).
//!
//! Pruned paths are reported as upstream tracks them
//! (`UnknownFieldPathOptions`): `spec.foo`, `spec.items[0].bar`, keys of
//! additionalProperties maps as `.key`, no leading dot; sorted. The CR handler
//! turns each into `unknown field "<path>"` for `fieldValidation=Strict|Warn`
//! ([`unknown_field_message`]).

use serde_json::{Map, Value};

use crate::schema as sch;

/// The root (and embedded resources') fields pruning never touches.
const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// `unknown field "<path>"`, upstream's strict decoding error and warning
/// text for one pruned path.
pub fn unknown_field_message(path: &str) -> String {
    format!("unknown field \"{path}\"")
}

struct Tracker {
    parent: Vec<String>,
    unknown: Vec<String>,
}

impl Tracker {
    fn key(&mut self, k: &str) {
        if !self.parent.is_empty() {
            self.parent.push(".".into());
        }
        self.parent.push(k.to_string());
    }

    fn index(&mut self, i: usize) {
        self.parent.push(format!("[{i}]"));
    }

    fn record(&mut self, k: &str) {
        let l = self.parent.len();
        self.key(k);
        self.unknown.push(self.parent.concat());
        self.parent.truncate(l);
    }
}

/// Removes every object field `schema` does not specify, unless
/// `x-kubernetes-preserve-unknown-fields: true`. apiVersion, kind and
/// metadata stay at the root when `is_resource_root` and in
/// `x-kubernetes-embedded-resource` objects (metadata's own fields are
/// [`coerce_object_meta`]'s). Returns the pruned paths, sorted.
pub fn prune(obj: &mut Value, schema: &Value, is_resource_root: bool) -> Vec<String> {
    let mut t = Tracker {
        parent: Vec::new(),
        unknown: Vec::new(),
    };
    let root_embedded = is_resource_root || sch::embedded_resource(schema);
    prune_value(obj, Some(schema), root_embedded, &mut t, 0);
    t.unknown.sort();
    t.unknown
}

fn prune_value(x: &mut Value, s: Option<&Value>, embedded: bool, t: &mut Tracker, depth: usize) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    if let Some(s) = s
        && sch::preserve_unknown_fields(s)
    {
        skip_prune(x, s, embedded, t, depth);
        return;
    }
    let origin = t.parent.len();
    match x {
        Value::Object(m) => {
            let Some(s) = s else {
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    t.record(&k);
                }
                m.clear();
                return;
            };
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(prop) = sch::property(s, &k) {
                    t.key(&k);
                    if let Some(v) = m.get_mut(&k) {
                        prune_value(v, Some(prop), sch::embedded_resource(prop), t, depth + 1);
                    }
                    t.parent.truncate(origin);
                } else if let Some(sub) = sch::additional_structural(s) {
                    t.key(&k);
                    if let Some(v) = m.get_mut(&k) {
                        let emb = sub.is_some_and(sch::embedded_resource);
                        prune_value(v, sub, emb, t, depth + 1);
                    }
                    t.parent.truncate(origin);
                } else {
                    if !META_FIELDS.contains(&k.as_str()) || !t.parent.is_empty() {
                        t.record(&k);
                    }
                    m.shift_remove(&k);
                }
            }
        }
        Value::Array(a) => {
            let items = s.and_then(sch::items);
            for (i, v) in a.iter_mut().enumerate() {
                t.index(i);
                let emb = items.is_some_and(sch::embedded_resource);
                prune_value(v, items, emb, t, depth + 1);
                t.parent.truncate(origin);
            }
        }
        _ => {}
    }
}

/// Under `x-kubernetes-preserve-unknown-fields`: unknown fields stay, known
/// ones are pruned by their own schemas.
fn skip_prune(x: &mut Value, s: &Value, embedded: bool, t: &mut Tracker, depth: usize) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    let origin = t.parent.len();
    match x {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(prop) = sch::property(s, &k) {
                    t.key(&k);
                    if let Some(v) = m.get_mut(&k) {
                        prune_value(v, Some(prop), sch::embedded_resource(prop), t, depth + 1);
                    }
                    t.parent.truncate(origin);
                } else if let Some(sub) = sch::additional_structural(s) {
                    t.key(&k);
                    if let Some(v) = m.get_mut(&k) {
                        let emb = sub.is_some_and(sch::embedded_resource);
                        prune_value(v, sub, emb, t, depth + 1);
                    }
                    t.parent.truncate(origin);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = sch::items(s) {
                for (i, v) in a.iter_mut().enumerate() {
                    t.index(i);
                    skip_prune(v, items, sch::embedded_resource(items), t, depth + 1);
                    t.parent.truncate(origin);
                }
            }
        }
        _ => {}
    }
}

/// The fields of `metav1.ObjectMeta` (JSON names) and, for the nested
/// structs, theirs; anything else is dropped when metadata round-trips
/// through the Go type.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];
const OWNER_REFERENCE_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "name",
    "uid",
    "controller",
    "blockOwnerDeletion",
];
const MANAGED_FIELDS_ENTRY_FIELDS: &[&str] = &[
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
];

/// Drops what decoding into `metav1.ObjectMeta` drops: unknown fields, null
/// fields, empty strings and zero numbers (Go's `omitempty` on re-encoding),
/// and a zero creationTimestamp. Unknown paths are pushed as upstream's
/// strict decoder names them (`<prefix>metadata.foo`).
fn coerce_meta(meta: &mut Map<String, Value>, prefix: &str, unknown: &mut Vec<String>) {
    let keys: Vec<String> = meta.keys().cloned().collect();
    for k in keys {
        if !OBJECT_META_FIELDS.contains(&k.as_str()) {
            unknown.push(format!("{prefix}metadata.{k}"));
            meta.shift_remove(&k);
            continue;
        }
        let drop = match meta.get(&k) {
            Some(Value::Null) => true,
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Number(n)) => n.as_f64() == Some(0.0),
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        if drop {
            meta.shift_remove(&k);
            continue;
        }
        let nested = match k.as_str() {
            "ownerReferences" => Some(OWNER_REFERENCE_FIELDS),
            "managedFields" => Some(MANAGED_FIELDS_ENTRY_FIELDS),
            _ => None,
        };
        if let (Some(fields), Some(Value::Array(items))) = (nested, meta.get_mut(&k)) {
            for (i, item) in items.iter_mut().enumerate() {
                if let Value::Object(m) = item {
                    let item_keys: Vec<String> = m.keys().cloned().collect();
                    for ik in item_keys {
                        if !fields.contains(&ik.as_str()) {
                            unknown.push(format!("{prefix}metadata.{k}[{i}].{ik}"));
                            m.shift_remove(&ik);
                        }
                    }
                }
            }
        }
    }
}

/// Upstream's metadata coercion (`objectmeta.CoerceWithOptions` with
/// `DropInvalidFields: false`, and the root handling of the CR handler when
/// `is_resource_root`): apiVersion and kind of embedded resources must be
/// strings, and their metadata keeps only ObjectMeta's fields. Returns the
/// dropped metadata paths, sorted, or upstream's error for a bad type
/// (boxed: a `FieldError` is large).
pub fn coerce_object_meta(
    obj: &mut Value,
    schema: &Value,
    is_resource_root: bool,
) -> Result<Vec<String>, Box<berth_api::validation::FieldError>> {
    let mut unknown = Vec::new();
    let embedded = is_resource_root || sch::embedded_resource(schema);
    coerce(obj, Some(schema), embedded, "", &mut unknown, 0)?;
    unknown.sort();
    Ok(unknown)
}

fn coerce(
    x: &mut Value,
    s: Option<&Value>,
    embedded: bool,
    path: &str,
    unknown: &mut Vec<String>,
    depth: usize,
) -> Result<(), Box<berth_api::validation::FieldError>> {
    use berth_api::validation::FieldError;
    let Some(s) = s else { return Ok(()) };
    if depth > crate::MAX_DEPTH {
        return Ok(());
    }
    match x {
        Value::Object(m) => {
            if embedded {
                for k in ["apiVersion", "kind"] {
                    if let Some(v) = m.get(k)
                        && !v.is_string()
                    {
                        return Err(Box::new(FieldError::invalid(
                            sch::child(path, k),
                            crate::validation::go_value(v),
                            "must be a string",
                        )));
                    }
                }
                if let Some(v) = m.get_mut("metadata") {
                    if let Some(e) = crate::validation::object_meta_decode_error(v) {
                        return Err(Box::new(FieldError::invalid(
                            sch::child(path, "metadata"),
                            crate::validation::go_value(v),
                            e,
                        )));
                    }
                    match v {
                        Value::Object(meta) => {
                            let prefix = if path.is_empty() {
                                String::new()
                            } else {
                                format!("{path}.")
                            };
                            coerce_meta(meta, &prefix, unknown);
                        }
                        _ => *v = Value::Object(Map::new()),
                    }
                }
            }
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let Some(v) = m.get_mut(&k) else { continue };
                if let Some(prop) = sch::property(s, &k) {
                    let emb = sch::embedded_resource(prop);
                    coerce(
                        v,
                        Some(prop),
                        emb,
                        &sch::child(path, &k),
                        unknown,
                        depth + 1,
                    )?;
                } else if let Some(sub) = sch::additional_structural(s) {
                    let emb = sub.is_some_and(sch::embedded_resource);
                    coerce(v, sub, emb, &sch::key(path, &k), unknown, depth + 1)?;
                }
            }
        }
        Value::Array(a) => {
            let items = sch::items(s);
            for (i, v) in a.iter_mut().enumerate() {
                let emb = items.is_some_and(sch::embedded_resource);
                coerce(v, items, emb, &sch::index(path, i), unknown, depth + 1)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// name, object, schema, is_resource_root, expected object, pruned paths.
    type Case = (&'static str, Value, Value, bool, Value, Vec<&'static str>);

    #[test]
    fn prune_table() {
        // Cases after upstream's pruning/algorithm_test.go (TestPrune).
        let cases: Vec<Case> = vec![
            (
                "empty schema prunes all",
                json!({"a": 1, "b": {"c": 2}}),
                json!({}),
                false,
                json!({}),
                vec!["a", "b"],
            ),
            (
                "root meta kept",
                json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"x": 1}, "foo": 1}),
                json!({}),
                true,
                json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"x": 1}}),
                vec!["foo"],
            ),
            (
                "root meta dropped silently when not resource root",
                json!({"apiVersion": "a/v1", "foo": 1}),
                json!({}),
                false,
                json!({}),
                vec!["foo"],
            ),
            (
                "nested properties",
                json!({"spec": {"a": 1, "b": 2, "c": [{"d": 1, "e": 2}]}}),
                json!({"properties": {"spec": {"properties": {"a": {}, "c": {"items": {"properties": {"d": {}}}}}}}}),
                false,
                json!({"spec": {"a": 1, "c": [{"d": 1}]}}),
                vec!["spec.b", "spec.c[0].e"],
            ),
            (
                "preserve unknown fields",
                json!({"spec": {"a": 1, "b": {"x": 1}, "known": {"y": 1, "z": 2}}}),
                json!({"properties": {"spec": {"x-kubernetes-preserve-unknown-fields": true, "properties": {"known": {"properties": {"y": {}}}}}}}),
                false,
                json!({"spec": {"a": 1, "b": {"x": 1}, "known": {"y": 1}}}),
                vec!["spec.known.z"],
            ),
            (
                "additionalProperties",
                json!({"m": {"k1": {"a": 1, "b": 2}}}),
                json!({"properties": {"m": {"additionalProperties": {"properties": {"a": {}}}}}}),
                false,
                json!({"m": {"k1": {"a": 1}}}),
                vec!["m.k1.b"],
            ),
            (
                "additionalProperties true prunes objects below",
                json!({"m": {"k1": {"a": 1}, "k2": 3}}),
                json!({"properties": {"m": {"additionalProperties": true}}}),
                false,
                json!({"m": {"k1": {}, "k2": 3}}),
                vec!["m.k1.a"],
            ),
            (
                "embedded resource keeps type and object meta",
                json!({"t": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {}, "x": 1}}),
                json!({"properties": {"t": {"x-kubernetes-embedded-resource": true, "properties": {"spec": {}}}}}),
                false,
                json!({"t": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {}}}),
                vec!["t.x"],
            ),
            (
                "meta fields below the root are unknown",
                json!({"spec": {"kind": "x"}}),
                json!({"properties": {"spec": {}}}),
                false,
                json!({"spec": {}}),
                vec!["spec.kind"],
            ),
            (
                "scalars untouched",
                json!({"a": [1, "x", null]}),
                json!({"properties": {"a": {"items": {}}}}),
                false,
                json!({"a": [1, "x", null]}),
                vec![],
            ),
            (
                "array without items prunes objects",
                json!({"a": [{"x": 1}]}),
                json!({"properties": {"a": {}}}),
                false,
                json!({"a": [{}]}),
                vec!["a[0].x"],
            ),
        ];
        for (name, mut obj, schema, root, expected, paths) in cases {
            let got = prune(&mut obj, &schema, root);
            assert_eq!(obj, expected, "{name}");
            assert_eq!(got, paths, "{name}");
        }
        assert_eq!(
            unknown_field_message("spec.foo"),
            r#"unknown field "spec.foo""#
        );
    }

    #[test]
    fn coerce_meta_table() {
        let schema = json!({"properties": {"t": {"x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}});
        let mut obj = json!({"metadata": {"name": "a", "foo": 1, "labels": {}}, "t": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b", "bar": true, "ownerReferences": [{"name": "o", "zzz": 1}]}}});
        let got = coerce_object_meta(&mut obj, &schema, true).unwrap_or_default();
        assert_eq!(
            got,
            vec![
                "metadata.foo",
                "t.metadata.bar",
                "t.metadata.ownerReferences[0].zzz"
            ]
        );
        assert_eq!(
            obj,
            json!({"metadata": {"name": "a"}, "t": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b", "ownerReferences": [{"name": "o"}]}}})
        );
        let mut bad = json!({"t": {"kind": 1}});
        let err = coerce_object_meta(&mut bad, &schema, false)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("t.kind: Invalid value: 1: must be a string")
        );
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let mut obj = json!({});
        for _ in 0..(crate::MAX_DEPTH * 2) {
            obj = json!({ "a": obj });
        }
        let mut schema = json!({"x-kubernetes-preserve-unknown-fields": true});
        for _ in 0..(crate::MAX_DEPTH * 2) {
            schema = json!({"properties": {"a": schema}});
        }
        let _ = prune(&mut obj, &schema, true);
        let _ = coerce_object_meta(&mut obj, &schema, true);
    }
}
