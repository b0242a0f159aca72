//! Structural schema rules, as upstream's `pkg/apiserver/schema`
//! (`NewStructural` in convert.go, `ValidateStructural` in validation.go and
//! complete.go): every specified field has a type, value validations
//! (allOf/anyOf/oneOf/not) only restrict what the structure already
//! specifies, the root metadata may only restrict name and generateName.

use berth_api::validation::FieldError;
use regex::Regex;
use serde_json::{Value, json};

use crate::schema as sch;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// Upstream's `NewStructural` conversion errors: fields structural schemas
/// cannot carry.
pub(crate) fn new_structural_error(s: &Value, depth: usize) -> Option<String> {
    if depth > crate::MAX_DEPTH {
        return None;
    }
    let Value::Object(m) = s else { return None };
    let non_empty_str = |k: &str| {
        m.get(k)
            .and_then(Value::as_str)
            .is_some_and(|x| !x.is_empty())
    };
    let non_empty_map = |k: &str| {
        m.get(k)
            .and_then(Value::as_object)
            .is_some_and(|x| !x.is_empty())
    };
    if non_empty_str("id") {
        return Some("OpenAPIV3Schema 'id' is not supported".into());
    }
    if non_empty_str("$schema") {
        return Some("OpenAPIV3Schema 'schema' is not supported".into());
    }
    if m.get("$ref").is_some_and(|v| !v.is_null()) {
        return Some("OpenAPIV3Schema '$ref' is not supported".into());
    }
    if non_empty_map("patternProperties") {
        return Some("OpenAPIV3Schema 'patternProperties' is not supported".into());
    }
    if non_empty_map("dependencies") {
        return Some("OpenAPIV3Schema 'dependencies' is not supported".into());
    }
    if m.get("additionalItems").is_some_and(|v| !v.is_null()) {
        return Some("OpenAPIV3Schema 'additionalItems' is not supported".into());
    }
    if non_empty_map("definitions") {
        return Some("OpenAPIV3Schema 'definitions' is not supported".into());
    }
    if let Some(not) = m.get("not").filter(|v| v.is_object())
        && let Some(e) = new_structural_error(not, depth + 1)
    {
        return Some(e);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for sub in sch::schema_list(s, key) {
            if let Some(e) = new_structural_error(sub, depth + 1) {
                return Some(e);
            }
        }
    }
    if m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        return Some(
            "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
                .into(),
        );
    }
    match m.get("items") {
        Some(Value::Array(a)) if !a.is_empty() => {
            return Some("OpenAPIV3Schema 'items' must be a schema, but is an array".into());
        }
        Some(items @ Value::Object(_)) => {
            if let Some(e) = new_structural_error(items, depth + 1) {
                return Some(e);
            }
        }
        _ => {}
    }
    if let Some(props) = sch::properties(s) {
        for p in props.values() {
            if let Some(e) = new_structural_error(p, depth + 1) {
                return Some(e);
            }
        }
    }
    if let sch::Additional::Schema(a) = sch::additional(s) {
        return new_structural_error(a, depth + 1);
    }
    None
}

/// Validates that `schema` is structural, as upstream's `NewStructural`
/// followed by `ValidateStructural` (errors sorted by their text, as
/// upstream sorts them). `path` is the schema's field path, e.g.
/// `spec.versions[0].schema.openAPIV3Schema`.
pub fn validate_structural(schema: &Value, path: &str) -> Vec<FieldError> {
    if let Some(e) = new_structural_error(schema, 0) {
        return vec![FieldError::invalid(path, "", e)];
    }
    let mut errs = Vec::new();
    invariants(schema, Level::Root, path, &mut errs, 0);
    value_validation_completeness(schema, Some(schema), path, path, &mut errs, 0);
    errs.sort_by_key(ToString::to_string);
    errs
}

fn props_path(path: &str, k: &str) -> String {
    format!("{path}.properties[{k}]")
}

fn is_int_or_string_any_of(any_of: &[Value]) -> bool {
    fn only_type(v: &Value, t: &str) -> bool {
        v.as_object().is_some_and(|m| {
            m.iter().all(|(k, x)| match k.as_str() {
                "type" => x == t,
                "example" | "externalDocs" => true,
                _ => is_zero(x),
            }) && m.get("type").is_some_and(|x| x == t)
        })
    }
    any_of.len() == 2 && only_type(&any_of[0], "integer") && only_type(&any_of[1], "string")
}

/// Whether a JSON value decodes to Go's zero value for its field.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

fn invariants(s: &Value, lvl: Level, path: &str, errs: &mut Vec<FieldError>, depth: usize) {
    if depth > crate::MAX_DEPTH || !s.is_object() {
        return;
    }
    let ty = sch::str_field(s, "type");
    let items = sch::items(s);
    if ty == "array" && items.is_none() {
        errs.push(FieldError::required(
            format!("{path}.items"),
            "must be specified",
        ));
    }
    if let Some(items) = items {
        invariants(
            items,
            Level::Item,
            &format!("{path}.items"),
            errs,
            depth + 1,
        );
    }
    if let Some(props) = sch::properties(s) {
        for (k, v) in props {
            invariants(v, Level::Field, &props_path(path, k), errs, depth + 1);
        }
    }
    let additional = sch::additional_structural(s);
    if let Some(sub) = additional {
        if lvl == Level::Root {
            errs.push(FieldError::forbidden(
                format!("{path}.additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Some(sub) = sub {
            invariants(
                sub,
                Level::Field,
                &format!("{path}.additionalProperties"),
                errs,
                depth + 1,
            );
        }
    }
    let int_or_string = sch::int_or_string(s);
    let preserve = sch::preserve_unknown_fields(s);
    let embedded = sch::embedded_resource(s);
    if int_or_string && preserve {
        errs.push(FieldError::invalid(
            format!("{path}.x-kubernetes-preserve-unknown-fields"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(FieldError::invalid(
            format!("{path}.x-kubernetes-embedded-resource"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = is_int_or_string_any_of(sch::schema_list(s, "anyOf"));
    let skip_first_all_of_any_of = sch::schema_list(s, "allOf")
        .first()
        .is_some_and(|a| is_int_or_string_any_of(sch::schema_list(a, "anyOf")));
    value_validation(s, skip_any_of, skip_first_all_of_any_of, path, errs, depth);

    let check_metadata = lvl == Level::Root || embedded;
    if embedded && ty != "object" {
        if ty.is_empty() {
            errs.push(FieldError::required(
                format!("{path}.type"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            errs.push(FieldError::invalid(
                format!("{path}.type"),
                ty,
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if ty.is_empty() && !int_or_string && !preserve {
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(format!("{path}.type"), detail));
    }
    if embedded && additional.is_some() {
        errs.push(FieldError::forbidden(
            format!("{path}.additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !ty.is_empty() && ty != "object" {
        errs.push(FieldError::invalid(
            format!("{path}.type"),
            ty,
            "must be object at the root",
        ));
    }
    if check_metadata {
        for k in ["kind", "apiVersion"] {
            if let Some(p) = sch::property(s, k) {
                let t = sch::str_field(p, "type");
                if t != "string" {
                    errs.push(FieldError::invalid(
                        format!("{}.type", props_path(path, k)),
                        t,
                        "must be string",
                    ));
                }
            }
        }
    }
    if let Some(meta) = sch::property(s, "metadata") {
        metadata_invariants(
            meta,
            check_metadata,
            lvl,
            &props_path(path, "metadata"),
            errs,
        );
    }
    if embedded && !preserve && sch::properties(s).is_none_or(|p| p.is_empty()) {
        errs.push(FieldError::required(
            format!("{path}.properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// Whether a key of a schema carries anything in upstream's `Structural`
/// (keys the Go type drops, like `example`, do not count).
fn counts_in_structural(k: &str, v: &Value) -> bool {
    match k {
        "example" | "externalDocs" | "default" | "type" => false,
        "exclusiveMaximum" | "exclusiveMinimum" | "uniqueItems" | "nullable" => v == &json!(true),
        "x-kubernetes-preserve-unknown-fields"
        | "x-kubernetes-embedded-resource"
        | "x-kubernetes-int-or-string" => v == &json!(true),
        "enum"
        | "allOf"
        | "anyOf"
        | "oneOf"
        | "x-kubernetes-list-map-keys"
        | "x-kubernetes-validations" => v.as_array().is_some_and(|a| !a.is_empty()),
        "description" | "title" | "format" | "pattern" => v.as_str().is_some_and(|s| !s.is_empty()),
        _ => !v.is_null(),
    }
}

fn metadata_invariants(
    s: &Value,
    check_metadata: bool,
    lvl: Level,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let ty = sch::str_field(s, "type");
    if check_metadata && ty != "object" {
        errs.push(FieldError::invalid(
            format!("{path}.type"),
            ty,
            "must be object",
        ));
    }
    if lvl != Level::Root {
        return;
    }
    let Some(m) = s.as_object() else { return };
    let only_names = sch::properties(s).is_none_or(|p| {
        let name = p.contains_key("name");
        let generate = p.contains_key("generateName");
        p.is_empty() || (name && generate && p.len() == 2) || ((name || generate) && p.len() == 1)
    });
    let other = m
        .iter()
        .any(|(k, v)| k != "properties" && counts_in_structural(k, v));
    if !only_names || other {
        errs.push(FieldError::forbidden(
            path,
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
}

fn value_validation(
    s: &Value,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    path: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    if !skip_any_of {
        for (i, sub) in sch::schema_list(s, "anyOf").iter().enumerate() {
            nested(sub, false, &format!("{path}.anyOf[{i}]"), errs, depth + 1);
        }
    }
    for (i, sub) in sch::schema_list(s, "allOf").iter().enumerate() {
        let skip = skip_first_all_of_any_of && i == 0;
        nested(sub, skip, &format!("{path}.allOf[{i}]"), errs, depth + 1);
    }
    for (i, sub) in sch::schema_list(s, "oneOf").iter().enumerate() {
        nested(sub, false, &format!("{path}.oneOf[{i}]"), errs, depth + 1);
    }
    if let Some(not) = s.get("not").filter(|v| v.is_object()) {
        nested(not, false, &format!("{path}.not"), errs, depth + 1);
    }
    let pattern = sch::str_field(s, "pattern");
    if !pattern.is_empty()
        && let Err(e) = Regex::new(pattern)
    {
        errs.push(FieldError::invalid(
            format!("{path}.pattern"),
            pattern,
            format!(
                "must be a valid regular expression, but isn't: {}",
                crate::validation::go_regexp_error(pattern, &e)
            ),
        ));
    }
}

fn nested(v: &Value, skip_any_of: bool, path: &str, errs: &mut Vec<FieldError>, depth: usize) {
    if depth > crate::MAX_DEPTH || !v.is_object() {
        return;
    }
    value_validation(v, skip_any_of, false, path, errs, depth);
    if let Some(items) = sch::items(v) {
        nested(items, false, &format!("{path}.items"), errs, depth + 1);
    }
    if let Some(props) = sch::properties(v) {
        for (k, p) in props {
            nested(p, false, &props_path(path, k), errs, depth + 1);
        }
    }
    let forbid = |errs: &mut Vec<FieldError>, key: &str, detail: &str| {
        errs.push(FieldError::forbidden(format!("{path}.{key}"), detail));
    };
    if !sch::str_field(v, "type").is_empty() {
        forbid(errs, "type", "must be empty to be structural");
    }
    match sch::additional(v) {
        sch::Additional::Schema(_) | sch::Additional::Bool(true) => {
            forbid(
                errs,
                "additionalProperties",
                "must be undefined to be structural",
            );
        }
        _ => {}
    }
    if sch::default(v).is_some() {
        forbid(errs, "default", "must be undefined to be structural");
    }
    if !sch::str_field(v, "title").is_empty() {
        forbid(errs, "title", "must be empty to be structural");
    }
    if !sch::str_field(v, "description").is_empty() {
        forbid(errs, "description", "must be empty to be structural");
    }
    if sch::nullable(v) {
        forbid(errs, "nullable", "must be false to be structural");
    }
    if sch::preserve_unknown_fields(v) {
        forbid(
            errs,
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        );
    }
    if sch::embedded_resource(v) {
        forbid(
            errs,
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        );
    }
    if sch::int_or_string(v) {
        forbid(
            errs,
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        );
    }
    if !sch::list_map_keys(v).is_empty() {
        forbid(
            errs,
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        );
    }
    if v.get("x-kubernetes-list-type")
        .is_some_and(|x| !x.is_null())
    {
        forbid(
            errs,
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        );
    }
    if v.get("x-kubernetes-map-type").is_some_and(|x| !x.is_null()) {
        forbid(
            errs,
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        );
    }
    if !sch::schema_list(v, "x-kubernetes-validations").is_empty() {
        forbid(
            errs,
            "x-kubernetes-validations",
            "must be empty to be structural",
        );
    }
    if sch::property(v, "metadata").is_some() {
        errs.push(FieldError::forbidden(
            props_path(path, "metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// Upstream's `validateValueValidationCompleteness`: everything a value
/// validation mentions must be specified by the structure.
fn value_validation_completeness(
    v: &Value,
    s: Option<&Value>,
    s_path: &str,
    v_path: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    let Some(s) = s else {
        errs.push(FieldError::required(
            s_path,
            format!("because it is defined in {v_path}"),
        ));
        return;
    };
    if let Some(not) = v.get("not").filter(|x| x.is_object()) {
        nested_completeness(
            not,
            Some(s),
            s_path,
            &format!("{v_path}.not"),
            errs,
            depth + 1,
        );
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for (i, sub) in sch::schema_list(v, key).iter().enumerate() {
            nested_completeness(
                sub,
                Some(s),
                s_path,
                &format!("{v_path}.{key}[{i}]"),
                errs,
                depth + 1,
            );
        }
    }
}

fn nested_completeness(
    v: &Value,
    s: Option<&Value>,
    s_path: &str,
    v_path: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > crate::MAX_DEPTH || !v.is_object() {
        return;
    }
    let Some(s) = s else {
        errs.push(FieldError::required(
            s_path,
            format!("because it is defined in {v_path}"),
        ));
        return;
    };
    value_validation_completeness(v, Some(s), s_path, v_path, errs, depth + 1);
    if let Some(items) = sch::items(v) {
        nested_completeness(
            items,
            sch::items(s),
            &format!("{s_path}.items"),
            &format!("{v_path}.items"),
            errs,
            depth + 1,
        );
    }
    if let Some(props) = sch::properties(v) {
        for (k, p) in props {
            let sp = props_path(s_path, k);
            let vp = props_path(v_path, k);
            match sch::property(s, k) {
                Some(sf) => nested_completeness(p, Some(sf), &sp, &vp, errs, depth + 1),
                None => errs.push(FieldError::required(
                    sp,
                    format!("because it is defined in {vp}"),
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests;
