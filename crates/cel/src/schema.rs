//! CEL declarations from a structural schema (upstream's `SchemaDeclType`) and
//! the conversion of JSON data under that schema into CEL values
//! (`UnstructuredToVal`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::value::{EvalValue, Key, ListType, ListValue, MapValue};

/// Upstream's `DefaultMaxRequestSizeBytes`: the size bound used where a schema
/// declares none.
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;
const MAX_DURATION_SIZE_JSON: u64 = 32;
const MAX_DATETIME_SIZE_JSON: u64 = 32;
const MIN_DURATION_SIZE_JSON: u64 = 3;
const JSON_DATE_SIZE: u64 = 12;
const MIN_DATETIME_SIZE_JSON: u64 = 21;
const MIN_STRING_SIZE: u64 = 2;
const MIN_BOOL_SIZE: u64 = 4;
const MIN_NUMBER_SIZE: u64 = 1;

/// The CEL type of a schema node, with upstream's size bounds for the cost
/// estimator.
#[derive(Debug, Clone)]
pub struct DeclType {
    pub kind: DeclKind,
    /// Most elements: bytes of a string, items of a list, entries of a map.
    pub max_elements: u64,
    /// Fewest bytes the value takes serialized in JSON.
    pub min_serialized_size: u64,
}

#[derive(Debug, Clone)]
pub enum DeclKind {
    /// `x-kubernetes-int-or-string`: typed at runtime.
    Dyn,
    Bool,
    Int,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    List {
        elem: Arc<DeclType>,
        list_type: ListType,
    },
    Map {
        elem: Arc<DeclType>,
    },
    Object {
        name: Arc<str>,
        /// By escaped CEL field name.
        fields: BTreeMap<String, Arc<DeclType>>,
    },
}

impl DeclType {
    fn simple(kind: DeclKind, min: u64, max: u64) -> DeclType {
        DeclType {
            kind,
            max_elements: max,
            min_serialized_size: min,
        }
    }
}

/// Reads the schema keywords this crate looks at.
pub(crate) fn str_of<'a>(s: &'a Value, key: &str) -> Option<&'a str> {
    s.get(key).and_then(Value::as_str)
}

pub(crate) fn bool_of(s: &Value, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn u64_of(s: &Value, key: &str) -> Option<u64> {
    let v = s.get(key)?;
    // Negative bounds count as zero, as upstream's zeroIfNegative.
    v.as_u64()
        .or_else(|| v.as_i64().map(|i| i.max(0) as u64))
        .or_else(|| v.as_f64().map(|f| if f > 0.0 { f as u64 } else { 0 }))
}

pub(crate) fn additional_properties_schema(s: &Value) -> Option<&Value> {
    s.get("additionalProperties").filter(|a| a.is_object())
}

/// `type: object` with the root additions upstream makes for resources:
/// `apiVersion`, `kind`, `metadata.name` and `metadata.generateName` are
/// always visible at the root of a resource (and of embedded resources).
pub(crate) fn with_type_and_object_meta(s: &Value) -> Value {
    let mut out = s.clone();
    let Some(obj) = out.as_object_mut() else {
        return out;
    };
    let string = serde_json::json!({"type": "string"});
    let props = obj
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if !props.is_object() {
        *props = Value::Object(Map::new());
    }
    if let Some(props) = props.as_object_mut() {
        for k in ["apiVersion", "kind"] {
            let is_string = props.get(k).and_then(|p| str_of(p, "type")) == Some("string");
            if !is_string {
                props.insert(k.into(), string.clone());
            }
        }
        let meta_ok = props.get("metadata").is_some_and(|m| {
            str_of(m, "type") == Some("object")
                && ["name", "generateName"].iter().all(|f| {
                    m.get("properties")
                        .and_then(|p| p.get(*f))
                        .and_then(|p| str_of(p, "type"))
                        == Some("string")
                })
        });
        if !meta_ok {
            props.insert(
                "metadata".into(),
                serde_json::json!({"type": "object", "properties": {
                    "name": {"type": "string"}, "generateName": {"type": "string"}}}),
            );
        }
    }
    out
}

/// Upstream's `SchemaDeclType`: `None` where the schema is not exposed to CEL
/// (no type, or items/values that are not exposed).
pub fn decl_type(s: &Value, is_resource_root: bool, name: &str) -> Option<Arc<DeclType>> {
    decl_type_depth(s, is_resource_root, name, 0)
}

fn decl_type_depth(
    s: &Value,
    is_resource_root: bool,
    name: &str,
    depth: usize,
) -> Option<Arc<DeclType>> {
    // Schemas are user input: bound the recursion.
    if depth > 100 || !s.is_object() {
        return None;
    }
    if bool_of(s, "x-kubernetes-int-or-string") {
        let max = match u64_of(s, "maxLength") {
            Some(m) => m.saturating_mul(4),
            None => MAX_REQUEST_SIZE_BYTES - 2,
        };
        return Some(Arc::new(DeclType::simple(DeclKind::Dyn, 1, max)));
    }
    let rooted;
    let s = if is_resource_root {
        rooted = with_type_and_object_meta(s);
        &rooted
    } else {
        s
    };
    let t = match str_of(s, "type") {
        Some(t) => t,
        // The resource additions make a root an object.
        None if is_resource_root => "object",
        None => return None,
    };
    let decl = match t {
        "array" => {
            let items = s.get("items")?;
            let elem = decl_type_depth(
                items,
                bool_of(items, "x-kubernetes-embedded-resource"),
                &format!("{name}.@idx"),
                depth + 1,
            )?;
            let max = u64_of(s, "maxItems")
                .unwrap_or((MAX_REQUEST_SIZE_BYTES - 2) / (elem.min_serialized_size + 1));
            let list_type = match str_of(s, "x-kubernetes-list-type") {
                Some("set") => ListType::Set,
                Some("map") => {
                    let keys: Vec<String> = s
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .map(|k| escape(k).unwrap_or_else(|| k.to_string()))
                                .collect()
                        })
                        .unwrap_or_default();
                    ListType::Map(keys.into())
                }
                _ => ListType::Atomic,
            };
            DeclType {
                kind: DeclKind::List { elem, list_type },
                max_elements: max,
                min_serialized_size: 2,
            }
        }
        "object" => {
            if let Some(ap) = additional_properties_schema(s) {
                let elem = decl_type_depth(
                    ap,
                    bool_of(ap, "x-kubernetes-embedded-resource"),
                    &format!("{name}.@elem"),
                    depth + 1,
                )?;
                let max = u64_of(s, "maxProperties")
                    .unwrap_or((MAX_REQUEST_SIZE_BYTES - 2) / (elem.min_serialized_size + 6));
                DeclType {
                    kind: DeclKind::Map { elem },
                    max_elements: max,
                    min_serialized_size: 2,
                }
            } else {
                let required: Vec<&str> = s
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut fields = BTreeMap::new();
                let mut min_size = 2u64;
                if let Some(props) = s.get("properties").and_then(Value::as_object) {
                    for (prop_name, prop) in props {
                        let Some(field) = decl_type_depth(
                            prop,
                            bool_of(prop, "x-kubernetes-embedded-resource"),
                            &format!("{name}.{prop_name}"),
                            depth + 1,
                        ) else {
                            continue;
                        };
                        if required.contains(&prop_name.as_str()) && prop.get("default").is_none() {
                            min_size = min_size
                                .saturating_add(prop_name.len() as u64)
                                .saturating_add(field.min_serialized_size)
                                .saturating_add(4);
                        }
                        if let Some(escaped) = escape(prop_name) {
                            fields.insert(escaped, field);
                        }
                    }
                }
                DeclType {
                    kind: DeclKind::Object {
                        name: Arc::from(name),
                        fields,
                    },
                    max_elements: 0,
                    min_serialized_size: min_size,
                }
            }
        }
        "string" => match str_of(s, "format") {
            Some("byte") => DeclType::simple(
                DeclKind::Bytes,
                MIN_STRING_SIZE,
                u64_of(s, "maxLength").unwrap_or(MAX_REQUEST_SIZE_BYTES - 2),
            ),
            Some("duration") => DeclType::simple(
                DeclKind::Duration,
                MIN_DURATION_SIZE_JSON,
                MAX_DURATION_SIZE_JSON,
            ),
            Some("date") => DeclType::simple(DeclKind::Timestamp, JSON_DATE_SIZE, JSON_DATE_SIZE),
            Some("date-time") => DeclType::simple(
                DeclKind::Timestamp,
                MIN_DATETIME_SIZE_JSON,
                MAX_DATETIME_SIZE_JSON,
            ),
            _ => {
                let max = match u64_of(s, "maxLength") {
                    Some(m) => m.saturating_mul(4),
                    None => match s.get("enum").and_then(Value::as_array) {
                        Some(e) if !e.is_empty() => e
                            .iter()
                            .filter_map(Value::as_str)
                            .map(|v| v.len() as u64)
                            .max()
                            .unwrap_or(0),
                        _ => MAX_REQUEST_SIZE_BYTES - 2,
                    },
                };
                DeclType::simple(DeclKind::String, MIN_STRING_SIZE, max)
            }
        },
        "boolean" => DeclType::simple(DeclKind::Bool, MIN_BOOL_SIZE, 0),
        "number" => DeclType::simple(DeclKind::Double, MIN_NUMBER_SIZE, 0),
        "integer" => DeclType::simple(DeclKind::Int, MIN_NUMBER_SIZE, 0),
        _ => return None,
    };
    Some(Arc::new(decl))
}

/// CEL keywords a property name must be escaped from (upstream's
/// `celReservedSymbols`).
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// Whether `name` is a CEL identifier (`IDENT` less the reserved words), as a
/// ValidatingAdmissionPolicy's variable names must be.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic());
    first_ok && chars.all(|c| c == '_' || c.is_ascii_alphanumeric()) && !RESERVED.contains(&name)
}

/// Upstream's `cel.Escape`: the CEL identifier for a property name, or `None`
/// when it cannot be expressed (such properties are not visible to rules).
pub fn escape(ident: &str) -> Option<String> {
    if ident.is_empty() || ident.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&ident) {
        return Some(format!("__{ident}__"));
    }
    let mut out = String::with_capacity(ident.len());
    let mut chars = ident.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// The inverse of [`escape`].
pub fn unescape(escaped: &str) -> String {
    if let Some(inner) = escaped
        .strip_prefix("__")
        .and_then(|s| s.strip_suffix("__"))
        && RESERVED.contains(&inner)
    {
        return inner.to_string();
    }
    let mut out = String::with_capacity(escaped.len());
    let mut rest = escaped;
    'outer: while !rest.is_empty() {
        for (pat, rep) in [
            ("__underscores__", "__"),
            ("__dot__", "."),
            ("__dash__", "-"),
            ("__slash__", "/"),
        ] {
            if let Some(r) = rest.strip_prefix(pat) {
                out.push_str(rep);
                rest = r;
                continue 'outer;
            }
        }
        let mut it = rest.chars();
        if let Some(c) = it.next() {
            out.push(c);
        }
        rest = it.as_str();
    }
    out
}

/// Converts JSON into a CEL value, typed by the declaration where there is one
/// (upstream's `UnstructuredToVal`), structurally otherwise.
pub fn json_to_value(v: &Value, decl: Option<&DeclType>) -> EvalValue {
    json_to_value_depth(v, decl, 0)
}

fn json_to_value_depth(v: &Value, decl: Option<&DeclType>, depth: usize) -> EvalValue {
    // Deeper than any schema this crate builds a declaration for.
    if depth > 512 {
        return EvalValue::Null;
    }
    let Some(decl) = decl else {
        return untyped(v, depth);
    };
    match (&decl.kind, v) {
        (_, Value::Null) => EvalValue::Null,
        (DeclKind::Double, Value::Number(n)) => EvalValue::Double(n.as_f64().unwrap_or(0.0)),
        (DeclKind::Int, Value::Number(n)) => number(n),
        (DeclKind::Timestamp, Value::String(s)) => crate::functions::parse_timestamp(s)
            .or_else(|| parse_date(s))
            .map(EvalValue::Timestamp)
            .unwrap_or_else(|| EvalValue::string(s)),
        (DeclKind::Duration, Value::String(s)) => crate::functions::parse_go_duration(s)
            .map(EvalValue::Duration)
            .unwrap_or_else(|| EvalValue::string(s)),
        (DeclKind::Bytes, Value::String(s)) => match crate::functions::base64_decode(s) {
            Some(b) => EvalValue::Bytes(b.into()),
            None => EvalValue::string(s),
        },
        (DeclKind::List { elem, list_type }, Value::Array(items)) => {
            EvalValue::List(Arc::new(ListValue {
                items: items
                    .iter()
                    .map(|i| json_to_value_depth(i, Some(elem), depth + 1))
                    .collect(),
                list_type: list_type.clone(),
            }))
        }
        (DeclKind::Map { elem }, Value::Object(m)) => EvalValue::Map(Arc::new(MapValue {
            entries: m
                .iter()
                .map(|(k, v)| {
                    (
                        Key::String(Arc::from(k.as_str())),
                        json_to_value_depth(v, Some(elem), depth + 1),
                    )
                })
                .collect(),
            object_type: None,
        })),
        (DeclKind::Object { name, fields }, Value::Object(m)) => {
            let mut entries = BTreeMap::new();
            for (k, v) in m {
                // A null field is an absent field to rules.
                if v.is_null() {
                    continue;
                }
                // Fields the schema does not declare cannot be selected (the
                // checker refuses them) but still count for equality.
                let escaped = escape(k);
                let field = escaped.as_ref().and_then(|e| fields.get(e));
                let key = escaped.unwrap_or_else(|| k.clone());
                entries.insert(
                    Key::String(Arc::from(key.as_str())),
                    json_to_value_depth(v, field.map(|f| &**f), depth + 1),
                );
            }
            EvalValue::Map(Arc::new(MapValue {
                entries,
                object_type: Some(name.clone()),
            }))
        }
        _ => untyped(v, depth),
    }
}

fn number(n: &serde_json::Number) -> EvalValue {
    if let Some(i) = n.as_i64() {
        EvalValue::Int(i)
    } else if let Some(u) = n.as_u64() {
        EvalValue::Uint(u)
    } else {
        let f = n.as_f64().unwrap_or(0.0);
        if f.fract() == 0.0 && f.abs() < 9.2e18 {
            EvalValue::Int(f as i64)
        } else {
            EvalValue::Double(f)
        }
    }
}

fn untyped(v: &Value, depth: usize) -> EvalValue {
    match v {
        Value::Null => EvalValue::Null,
        Value::Bool(b) => EvalValue::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                EvalValue::Int(i)
            } else if let Some(u) = n.as_u64() {
                EvalValue::Uint(u)
            } else {
                EvalValue::Double(n.as_f64().unwrap_or(0.0))
            }
        }
        Value::String(s) => EvalValue::string(s),
        Value::Array(a) => EvalValue::list(
            a.iter()
                .map(|i| json_to_value_depth(i, None, depth + 1))
                .collect(),
        ),
        Value::Object(m) => EvalValue::map(
            m.iter()
                .map(|(k, v)| {
                    (
                        Key::String(Arc::from(k.as_str())),
                        json_to_value_depth(v, None, depth + 1),
                    )
                })
                .collect(),
        ),
    }
}

fn parse_date(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    let d = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    Some(d.and_hms_opt(0, 0, 0)?.and_utc().fixed_offset())
}

/// The schema of the node at `path` below `s` (`properties`, `items`,
/// `additionalProperties`), for `fieldPath` checks.
pub(crate) fn has_properties(s: &Value) -> bool {
    s.get("properties").is_some_and(Value::is_object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_round_trips() {
        for (raw, esc) in [
            ("foo", Some("foo")),
            ("foo-bar", Some("foo__dash__bar")),
            ("a.b/c", Some("a__dot__b__slash__c")),
            ("x__y", Some("x__underscores__y")),
            ("namespace", Some("__namespace__")),
            ("1abc", None),
            ("a b", None),
        ] {
            assert_eq!(escape(raw).as_deref(), esc, "{raw}");
            if let Some(e) = esc {
                assert_eq!(unescape(e), raw);
            }
        }
    }
}
