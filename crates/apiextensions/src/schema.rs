//! Read-only views of a `JSONSchemaProps` JSON value, as upstream's
//! `Structural` type exposes them (`pkg/apiserver/schema/structural.go`):
//! anything of the wrong JSON type reads as absent, never a panic.

use serde_json::{Map, Value};

/// The structural `additionalProperties`: a schema, or only a boolean.
pub enum Additional<'a> {
    /// `additionalProperties` absent.
    None,
    /// `additionalProperties: true|false` (no schema).
    Bool(bool),
    /// `additionalProperties: {…}`.
    Schema(&'a Value),
}

pub fn str_field<'a>(s: &'a Value, key: &str) -> &'a str {
    s.get(key).and_then(Value::as_str).unwrap_or("")
}

pub fn bool_field(s: &Value, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool).unwrap_or(false)
}

pub fn properties(s: &Value) -> Option<&Map<String, Value>> {
    s.get("properties").and_then(Value::as_object)
}

pub fn property<'a>(s: &'a Value, name: &str) -> Option<&'a Value> {
    properties(s).and_then(|p| p.get(name))
}

/// `items` when it is one schema (the only form structural schemas allow).
pub fn items(s: &Value) -> Option<&Value> {
    s.get("items").filter(|v| v.is_object())
}

pub fn additional(s: &Value) -> Additional<'_> {
    match s.get("additionalProperties") {
        Some(Value::Bool(b)) => Additional::Bool(*b),
        Some(v @ Value::Object(_)) => Additional::Schema(v),
        _ => Additional::None,
    }
}

/// `additionalProperties` as upstream's `s.AdditionalProperties.Structural`:
/// `Some(None)` when only a boolean is given.
pub fn additional_structural(s: &Value) -> Option<Option<&Value>> {
    match additional(s) {
        Additional::None => None,
        Additional::Bool(_) => Some(None),
        Additional::Schema(v) => Some(Some(v)),
    }
}

pub fn preserve_unknown_fields(s: &Value) -> bool {
    bool_field(s, "x-kubernetes-preserve-unknown-fields")
}

pub fn embedded_resource(s: &Value) -> bool {
    bool_field(s, "x-kubernetes-embedded-resource")
}

pub fn int_or_string(s: &Value) -> bool {
    bool_field(s, "x-kubernetes-int-or-string")
}

pub fn nullable(s: &Value) -> bool {
    bool_field(s, "nullable")
}

/// The `default`, absent when missing or `null` (upstream decodes
/// `default: null` as no default).
pub fn default(s: &Value) -> Option<&Value> {
    s.get("default").filter(|v| !v.is_null())
}

pub fn list_type(s: &Value) -> Option<&str> {
    s.get("x-kubernetes-list-type").and_then(Value::as_str)
}

pub fn list_map_keys(s: &Value) -> Vec<&str> {
    s.get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// An integer-valued keyword (`maxLength`, `minItems`, …). Go decodes these
/// as `int64`; an integral float reads the same way.
pub fn int_field(s: &Value, key: &str) -> Option<i64> {
    let v = s.get(key)?;
    if let Some(i) = v.as_i64() {
        return Some(i);
    }
    let f = v.as_f64()?;
    (f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i64)
}

pub fn float_field(s: &Value, key: &str) -> Option<f64> {
    s.get(key).and_then(Value::as_f64)
}

pub fn string_list<'a>(s: &'a Value, key: &str) -> Vec<&'a str> {
    s.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

pub fn schema_list<'a>(s: &'a Value, key: &str) -> &'a [Value] {
    s.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Upstream's field path helpers (`field.Path`): `Child`, `Key`, `Index`.
pub fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

pub fn key(path: &str, k: &str) -> String {
    format!("{path}[{k}]")
}

pub fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}
