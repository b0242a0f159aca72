//! Defaulting of custom resources, as upstream's
//! `pkg/apiserver/schema/defaulting` (`Default`,
//! `PruneNonNullableNullsWithoutDefaults`), and the validation of the
//! defaults in a CRD schema (`ValidateDefaults` with `isResourceRoot` and
//! `requirePrunedDefaults`, as v1 CRDs run it).

use berth_api::validation::{FieldError, aggregate_message};
use serde_json::{Value, json};

use crate::pruning::{coerce_object_meta, prune};
use crate::schema as sch;
use crate::validation::{Options, validate_embedded_resources, validate_value_with};

fn is_non_nullable_null(x: &Value, s: Option<&Value>) -> bool {
    x.is_null() && s.is_some_and(|s| !sch::nullable(s))
}

/// Applies the schema's defaults to `obj` (upstream's `Default`): a property
/// with a `default` is set when absent, or when null and not `nullable`;
/// null items and additionalProperties values that are not nullable take
/// their schema's default; defaulting continues into the result.
pub fn apply_defaults(obj: &mut Value, schema: &Value) {
    default_value(obj, Some(schema), 0);
}

fn default_value(x: &mut Value, s: Option<&Value>, depth: usize) {
    let Some(s) = s else { return };
    if depth > crate::MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => {
            if let Some(props) = sch::properties(s) {
                for (k, prop) in props {
                    let Some(d) = sch::default(prop) else {
                        continue;
                    };
                    let missing = match m.get(k) {
                        None => true,
                        Some(v) => is_non_nullable_null(v, Some(prop)),
                    };
                    if missing {
                        m.insert(k.clone(), d.clone());
                    }
                }
            }
            let additional = sch::additional_structural(s);
            for (k, v) in m.iter_mut() {
                if let Some(prop) = sch::property(s, k) {
                    default_value(v, Some(prop), depth + 1);
                } else if let Some(sub) = additional {
                    if is_non_nullable_null(v, sub) {
                        *v = sub.and_then(sch::default).cloned().unwrap_or(Value::Null);
                    }
                    default_value(v, sub, depth + 1);
                }
            }
        }
        Value::Array(a) => {
            let items = sch::items(s);
            for v in a.iter_mut() {
                if is_non_nullable_null(v, items) {
                    *v = items.and_then(sch::default).cloned().unwrap_or(Value::Null);
                }
                default_value(v, items, depth + 1);
            }
        }
        _ => {}
    }
}

/// Upstream's `PruneNonNullableNullsWithoutDefaults`: object fields that are
/// null where the schema is neither nullable nor defaulted are removed (the
/// CR handler runs it right after pruning).
pub fn prune_non_nullable_nulls_without_defaults(obj: &mut Value, schema: &Value) {
    prune_nulls(obj, Some(schema), 0);
}

fn field_schema<'a>(k: &str, s: Option<&'a Value>) -> Option<&'a Value> {
    let s = s?;
    if let Some(p) = sch::property(s, k) {
        return Some(p);
    }
    sch::additional_structural(s).flatten()
}

fn prune_nulls(x: &mut Value, s: Option<&Value>, depth: usize) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let fs = field_schema(&k, s);
                let drop = m.get(&k).is_some_and(|v| {
                    v.is_null()
                        && fs.is_some_and(|f| !sch::nullable(f) && sch::default(f).is_none())
                });
                if drop {
                    m.shift_remove(&k);
                } else if let Some(v) = m.get_mut(&k) {
                    prune_nulls(v, fs, depth + 1);
                }
            }
        }
        Value::Array(a) => {
            let items = s.and_then(sch::items);
            for v in a.iter_mut() {
                prune_nulls(v, items, depth + 1);
            }
        }
        _ => {}
    }
}

/// One step from the root of the surrounding object down to a default
/// (upstream's `SurroundingObjectFunc` chain).
#[derive(Clone)]
enum Step {
    Child(String),
    Index,
}

/// Wraps `focus` into the object around it, up to the nearest resource
/// root, and adds upstream's placeholder TypeMeta.
fn surrounding_object(steps: &[Step], focus: &Value) -> Result<Value, String> {
    let mut x = focus.clone();
    for step in steps.iter().rev() {
        x = match step {
            Step::Child(k) => json!({ k.clone(): x }),
            Step::Index => json!([x]),
        };
    }
    let Value::Object(mut obj) = x else {
        return Err("object root default value must be of object type".to_string());
    };
    obj.entry("kind").or_insert(json!("Validation"));
    obj.entry("apiVersion").or_insert(json!("validation/v1"));
    Ok(Value::Object(obj))
}

/// Validates every `default` in a CRD schema as upstream's `ValidateDefaults`
/// for v1 (resource root, pruned defaults required): a default must survive
/// pruning unchanged (`must not have unknown fields`), make valid embedded
/// metadata, and validate against its own schema. `path` is the schema's
/// field path, e.g. `spec.versions[0].schema.openAPIV3Schema`.
pub fn validate_defaults(schema: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut root = schema.clone();
    if let Value::Object(m) = &mut root {
        m.insert("x-kubernetes-embedded-resource".into(), json!(true));
    }
    let mut w = DefaultsWalk {
        errs: &mut errs,
        steps: Vec::new(),
    };
    w.walk(path, &root, &root, false, 0);
    errs
}

struct DefaultsWalk<'e> {
    errs: &'e mut Vec<FieldError>,
    steps: Vec<Step>,
}

impl DefaultsWalk<'_> {
    fn walk(&mut self, pth: &str, s: &Value, root: &Value, inside_meta: bool, depth: usize) {
        if depth > crate::MAX_DEPTH || !s.is_object() {
            return;
        }
        let (root, inside_meta, saved_steps) = if sch::embedded_resource(s) {
            (s, false, Some(std::mem::take(&mut self.steps)))
        } else {
            (root, inside_meta, None)
        };
        if let Some(d) = sch::default(s) {
            let default_path = format!("{pth}.default");
            let opts = Options {
                strip_unsupported_formats: false,
            };
            if inside_meta {
                self.check_meta_default(&default_path, s, d, root, opts);
            } else {
                let embedded = sch::embedded_resource(s);
                let mut pruned = d.clone();
                prune(&mut pruned, s, embedded);
                if &pruned != d {
                    self.errs.push(FieldError::invalid(
                        &default_path,
                        crate::validation::go_value(d),
                        "must not have unknown fields",
                    ));
                }
                let mut coerced = d.clone();
                if let Err(mut e) = coerce_object_meta(&mut coerced, s, embedded) {
                    e.field = prefixed(&default_path, &e.field);
                    self.errs.push(*e);
                } else {
                    let meta_errs = validate_embedded_resources(d, s, &default_path, embedded);
                    if !meta_errs.is_empty() {
                        self.errs.extend(meta_errs);
                    } else {
                        self.errs
                            .extend(validate_value_with(d, s, Some(&default_path), opts));
                    }
                }
            }
        }
        if let Some(items) = sch::items(s) {
            self.steps.push(Step::Index);
            self.walk(&format!("{pth}.items"), items, root, inside_meta, depth + 1);
            self.steps.pop();
        }
        if let Some(props) = sch::properties(s) {
            let embedded = sch::embedded_resource(s);
            for (k, sub) in props {
                let sub_inside = inside_meta
                    || (embedded && matches!(k.as_str(), "metadata" | "apiVersion" | "kind"));
                self.steps.push(Step::Child(k.clone()));
                self.walk(
                    &format!("{pth}.properties[{k}]"),
                    sub,
                    root,
                    sub_inside,
                    depth + 1,
                );
                self.steps.pop();
            }
        }
        if let Some(steps) = saved_steps {
            self.steps = steps;
        }
    }

    /// A default inside an embedded resource's apiVersion, kind or metadata:
    /// checked within the whole surrounding object.
    fn check_meta_default(&mut self, pth: &str, s: &Value, d: &Value, root: &Value, opts: Options) {
        let obj = match surrounding_object(&self.steps, d) {
            Ok(o) => o,
            Err(e) => {
                self.errs.push(FieldError::internal(
                    pth,
                    format!("failed to validate default value inside metadata: {e}"),
                ));
                return;
            }
        };
        let mut coerced = obj.clone();
        if let Err(e) = coerce_object_meta(&mut coerced, root, true) {
            self.errs.push(FieldError::invalid(
                pth,
                crate::validation::go_value(d),
                format!("must result in valid metadata: {e}"),
            ));
            return;
        }
        let meta_errs = validate_embedded_resources(&obj, root, "", true);
        if !meta_errs.is_empty() {
            self.errs.push(FieldError::invalid(
                pth,
                crate::validation::go_value(d),
                format!(
                    "must result in valid metadata: {}",
                    aggregate_message(&meta_errs)
                ),
            ));
            return;
        }
        self.errs.extend(validate_value_with(d, s, Some(pth), opts));
    }
}

fn prefixed(prefix: &str, field: &str) -> String {
    if field.is_empty() {
        prefix.to_string()
    } else if field.starts_with('[') {
        format!("{prefix}{field}")
    } else {
        format!("{prefix}.{field}")
    }
}

#[cfg(test)]
mod tests;
