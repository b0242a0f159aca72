//! OpenAPI v3 value validation of custom resources, as upstream's
//! `pkg/apiserver/validation` (`ValidateCustomResource` and its mapping of
//! kube-openapi results to field errors) over kube-openapi's
//! `pkg/validation/validate` (1.33), plus the checks the custom resource
//! strategy adds: embedded resources (`pkg/apiserver/schema/objectmeta`) and
//! list sets and maps (`pkg/apiserver/schema/listtype`).
//!
//! Messages are upstream's: kube-openapi writes `<name> in body …`, and
//! apiextensions maps each kube-openapi error code to a field error type
//! (required → `Required value`, enum → `Unsupported value`, maxLength →
//! `Too long`, maxItems/maxProperties → `Too many`, type and format →
//! `Invalid value` of type `FieldValueTypeInvalid`, anything else →
//! `Invalid value`). Composite errors (anyOf, oneOf, allOf, not) are not
//! attached to a field in upstream: they render as `<nil>: Invalid value: ""`.

use std::collections::HashMap;

use berth_api::validation::{
    FieldError, FieldErrorType, NameRule, go_quote, is_dns1035_label, validate_object_meta,
};
use regex::Regex;
use serde_json::{Map, Value, json};

use crate::formats;
use crate::gofmt::{go_float_v, go_json};
use crate::schema::{self as sch, Additional};

/// kube-openapi's error codes (`errors/schema.go`), where the mapping to
/// field errors depends on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Code {
    InvalidType,
    Required,
    TooLong,
    TooShort,
    Pattern,
    Enum,
    MultipleOf,
    Max,
    Min,
    Unique,
    MaxItems,
    MinItems,
    TooFewProperties,
    TooManyProperties,
    UnallowedProperty,
    MultipleOfMustBePositive,
    /// A plain error (composite messages), not an `*errors.Validation`.
    Plain,
}

#[derive(Clone, Debug)]
struct VErr {
    code: Code,
    name: String,
    value: Option<Value>,
    valid: i64,
    values: Vec<Value>,
    message: String,
}

impl VErr {
    fn new(code: Code, name: &str, value: Option<Value>, message: String) -> Self {
        VErr {
            code,
            name: name.to_string(),
            value,
            valid: -1,
            values: Vec::new(),
            message,
        }
    }

    fn plain(message: String) -> Self {
        VErr::new(Code::Plain, "", None, message)
    }

    fn invalid_type(name: &str, type_name: &str, value: &str) -> Self {
        VErr::new(
            Code::InvalidType,
            name,
            Some(Value::String(value.to_string())),
            format!(
                "{name} in body must be of type {type_name}: {}",
                go_quote(value)
            ),
        )
    }
}

/// kube-openapi's `validate.Result`: errors (deduplicated by message) and the
/// number of checks that passed, which picks the reported branch of anyOf
/// and oneOf.
#[derive(Default, Debug)]
struct Res {
    errors: Vec<VErr>,
    matches: usize,
}

impl Res {
    fn err(e: VErr) -> Self {
        Res {
            errors: vec![e],
            matches: 0,
        }
    }

    fn add(&mut self, e: VErr) {
        if !self.errors.iter().any(|x| x.message == e.message) {
            self.errors.push(e);
        }
    }

    fn merge(&mut self, other: Res) {
        for e in other.errors {
            self.add(e);
        }
        self.matches += other.matches;
    }

    fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// The JSON type of a decoded value as Go's unstructured decoding types it:
/// integers that fit `int64` are `int64`, every other number `float64`.
#[derive(Clone, Copy, Debug)]
enum Num {
    Int(i64),
    Float(f64),
}

fn num(v: &Value) -> Option<Num> {
    let n = v.as_number()?;
    match n.as_i64() {
        Some(i) => Some(Num::Int(i)),
        None => n.as_f64().map(Num::Float),
    }
}

/// swag's `IsFloat64AJSONInteger`.
fn is_json_integer(f: f64) -> bool {
    const MAX: f64 = 9_007_199_254_740_991.0;
    if !f.is_finite() || !(-MAX..=MAX).contains(&f) {
        return false;
    }
    let r = f.round();
    if f == r {
        return true;
    }
    if r == 0.0 {
        return false;
    }
    (f - r).abs() < 1e-9 * r.abs()
}

/// A value as Go's field error would print it: integral floats print as
/// integers (Go's `%v`/JSON), object keys sorted (Go's `json.Marshal`).
pub(crate) fn go_value(v: &Value) -> Value {
    go_value_depth(v, 0)
}

fn go_value_depth(v: &Value, depth: usize) -> Value {
    if depth > crate::MAX_DEPTH {
        return Value::Null;
    }
    match v {
        Value::Number(n) if n.as_i64().is_none() => {
            let f = n.as_f64().unwrap_or(0.0);
            let limit = if depth == 0 { 1e6 } else { 1e21 };
            if f.fract() == 0.0 && f.abs() < limit {
                json!(f as i64)
            } else {
                v.clone()
            }
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| go_value_depth(x, depth + 1)).collect()),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                if let Some(x) = m.get(k) {
                    out.insert(k.clone(), go_value_depth(x, depth + 1));
                }
            }
            Value::Object(out)
        }
        _ => v.clone(),
    }
}

/// How the schema is read before validating.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Options {
    /// Drop formats upstream does not support in CRDs (what the CR handler's
    /// validator does; default validation validates with them).
    pub strip_unsupported_formats: bool,
}

struct Validator {
    opts: Options,
    regexes: HashMap<String, Result<Regex, String>>,
}

fn schema_types(s: &Value) -> Vec<&str> {
    if sch::int_or_string(s) {
        return vec!["integer", "string"];
    }
    match sch::str_field(s, "type") {
        "" => Vec::new(),
        t => vec![t],
    }
}

/// Go's `reflect.Value.Convert` then `DeepEqual`, as the enum check uses it.
fn enum_matches(data: &Value, ev: &Value) -> bool {
    if data == ev {
        return true;
    }
    match (data, ev) {
        (Value::Number(_), Value::Number(_)) => match (num(data), num(ev)) {
            (Some(Num::Int(d)), Some(Num::Float(e))) => d as f64 == e,
            (Some(Num::Float(d)), Some(Num::Int(e))) => d as i64 == e,
            _ => false,
        },
        // An int64 converts to the string of its code point.
        (Value::Number(_), Value::String(e)) => match num(data) {
            Some(Num::Int(d)) => {
                let c = u32::try_from(d)
                    .ok()
                    .and_then(char::from_u32)
                    .unwrap_or('\u{fffd}');
                e.chars().count() == 1 && e.starts_with(c)
            }
            _ => false,
        },
        _ => false,
    }
}

impl Validator {
    fn new(opts: Options) -> Self {
        Validator {
            opts,
            regexes: HashMap::new(),
        }
    }

    fn format<'a>(&self, s: &'a Value) -> &'a str {
        let f = sch::str_field(s, "format");
        if self.opts.strip_unsupported_formats && !formats::is_supported(f) {
            ""
        } else {
            f
        }
    }

    /// kube-openapi's `SchemaValidator.Validate`.
    fn validate(&mut self, s: &Value, data: &Value, path: &str, depth: usize) -> Res {
        let mut result = Res::default();
        if depth > crate::MAX_DEPTH {
            result.add(VErr::plain(format!(
                "{} exceeds the maximum nesting depth of {}",
                go_quote(path),
                crate::MAX_DEPTH
            )));
            return result;
        }
        if !s.is_object() {
            return result;
        }
        let types = schema_types(s);
        let format = self.format(s);
        if data.is_null() {
            if let Some(e) = self.type_check(s, &types, format, data, path) {
                result.add(e);
            }
            result.merge(self.enum_check(s, data, path));
            return result;
        }
        // 1. type
        if !types.is_empty() || !format.is_empty() {
            let mut r = Res::default();
            match self.type_check(s, &types, format, data, path) {
                Some(e) => r.add(e),
                None => r.matches += 1,
            }
            result.merge(r);
            result.matches += 1;
        }
        // 2. allOf, anyOf, oneOf, not
        let r = self.schema_props(s, data, path, depth);
        result.merge(r);
        result.matches += 1;
        // 3. string, 4. format
        if let Value::String(st) = data {
            result.merge(self.string_check(s, st, path));
            result.matches += 1;
            if formats::is_known(format) {
                if !formats::validates(format, st) {
                    result.add(VErr::new(
                        Code::InvalidType,
                        path,
                        Some(Value::String(st.clone())),
                        format!("{path} in body must be of type {format}: {}", go_quote(st)),
                    ));
                }
                result.matches += 1;
            }
        }
        // 5. number
        if let Some(n) = num(data) {
            result.merge(self.number_check(s, n, data, path));
            result.matches += 1;
        }
        // 6. slice
        if let Value::Array(a) = data {
            result.merge(self.slice_check(s, a, path, depth));
            result.matches += 1;
        }
        // 7. enum
        result.merge(self.enum_check(s, data, path));
        result.matches += 1;
        // 8. object
        if let Value::Object(m) = data {
            result.merge(self.object_check(s, m, path, depth));
            result.matches += 1;
        }
        result.matches += 1;
        result
    }

    /// kube-openapi's `typeValidator` (its conditions kept in upstream's shape).
    #[allow(clippy::nonminimal_bool)]
    fn type_check(
        &self,
        s: &Value,
        types: &[&str],
        format: &str,
        data: &Value,
        path: &str,
    ) -> Option<VErr> {
        let contains = |t: &str| types.contains(&t);
        if data.is_null() {
            if !types.is_empty() && !contains("null") && !sch::nullable(s) {
                return Some(VErr::invalid_type(path, &types.join(","), "null"));
            }
            return None;
        }
        let (sch_type, data_format) = match data {
            Value::Bool(_) => ("boolean", ""),
            Value::String(_) => ("string", ""),
            Value::Number(_) => match num(data) {
                Some(Num::Int(_)) => ("integer", "int64"),
                _ => ("number", "float64"),
            },
            Value::Array(_) => ("array", ""),
            _ => ("object", ""),
        };
        let is_float_int = match num(data) {
            Some(Num::Float(f)) => is_json_integer(f) && contains("integer"),
            _ => false,
        };
        let is_int_float = sch_type == "integer" && contains("number");
        let string_or_slice = matches!(data, Value::String(_) | Value::Array(_));
        if !string_or_slice
            && !format.is_empty()
            && !(contains(sch_type) || data_format == format || is_float_int || is_int_float)
        {
            return Some(VErr::invalid_type(path, format, data_format));
        }
        if !(contains("number") || contains("integer")) && !format.is_empty() && string_or_slice {
            return None;
        }
        if !(contains(sch_type) || is_float_int || is_int_float) {
            return Some(VErr::invalid_type(path, &types.join(","), sch_type));
        }
        None
    }

    /// kube-openapi's `schemaPropsValidator`.
    fn schema_props(&mut self, s: &Value, data: &Value, path: &str, depth: usize) -> Res {
        let mut main = Res::default();
        let any_of = sch::schema_list(s, "anyOf");
        if !any_of.is_empty() {
            let mut best: Option<Res> = None;
            let mut first_success: Option<Res> = None;
            let mut succeeded = false;
            for sub in any_of {
                let r = self.validate(sub, data, path, depth + 1);
                if r.is_valid() {
                    best = None;
                    succeeded = true;
                    if first_success.is_none() {
                        first_success = Some(r);
                    }
                    break;
                }
                if best.as_ref().is_none_or(|b| r.matches > b.matches) {
                    best = Some(r);
                }
            }
            if !succeeded {
                main.add(VErr::plain(format!(
                    "{} must validate at least one schema (anyOf)",
                    go_quote(path)
                )));
            }
            if let Some(b) = best {
                main.merge(b);
            } else if let Some(f) = first_success {
                main.merge(f);
            }
        }
        let one_of = sch::schema_list(s, "oneOf");
        if !one_of.is_empty() {
            let mut best: Option<Res> = None;
            let mut first_success: Option<Res> = None;
            let mut validated = 0usize;
            for sub in one_of {
                let r = self.validate(sub, data, path, depth + 1);
                if r.is_valid() {
                    validated += 1;
                    best = None;
                    if first_success.is_none() {
                        first_success = Some(r);
                    }
                    continue;
                }
                if validated == 0 && best.as_ref().is_none_or(|b| r.matches > b.matches) {
                    best = Some(r);
                }
            }
            if validated != 1 {
                let additional = if validated == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {validated} valid alternatives")
                };
                main.add(VErr::plain(format!(
                    "{} must validate one and only one schema (oneOf). {additional}",
                    go_quote(path)
                )));
                if let Some(b) = best {
                    main.merge(b);
                }
            } else if let Some(f) = first_success {
                main.merge(f);
            }
        }
        let all_of = sch::schema_list(s, "allOf");
        if !all_of.is_empty() {
            let mut validated = 0usize;
            for sub in all_of {
                let r = self.validate(sub, data, path, depth + 1);
                if r.is_valid() {
                    validated += 1;
                }
                main.merge(r);
            }
            if validated != all_of.len() {
                let additional = if validated == 0 {
                    ". None validated"
                } else {
                    ""
                };
                main.add(VErr::plain(format!(
                    "{} must validate all the schemas (allOf){additional}",
                    go_quote(path)
                )));
            }
        }
        if let Some(not) = s.get("not").filter(|v| v.is_object()) {
            let r = self.validate(not, data, path, depth + 1);
            if r.is_valid() {
                main.add(VErr::plain(format!(
                    "{} must not validate the schema (not)",
                    go_quote(path)
                )));
            }
        }
        main.matches += 1;
        main
    }

    /// kube-openapi's `stringValidator`: the first failing check only.
    fn string_check(&mut self, s: &Value, data: &str, path: &str) -> Res {
        let len = data.chars().count() as i64;
        if let Some(max) = sch::int_field(s, "maxLength")
            && len > max
        {
            let mut e = VErr::new(
                Code::TooLong,
                path,
                Some(Value::String(data.to_string())),
                format!("{path} in body should be at most {max} chars long"),
            );
            e.valid = max;
            return Res::err(e);
        }
        if let Some(min) = sch::int_field(s, "minLength")
            && len < min
        {
            let mut e = VErr::new(
                Code::TooShort,
                path,
                Some(Value::String(data.to_string())),
                format!("{path} in body should be at least {min} chars long"),
            );
            e.valid = min;
            return Res::err(e);
        }
        let pattern = sch::str_field(s, "pattern");
        if !pattern.is_empty() {
            let compiled = self
                .regexes
                .entry(pattern.to_string())
                .or_insert_with(|| Regex::new(pattern).map_err(|e| go_regexp_error(pattern, &e)));
            let failed = match compiled {
                Ok(re) => (!re.is_match(data)).then(|| pattern.to_string()),
                Err(err) => Some(format!("{pattern}, but pattern is invalid: {err}")),
            };
            if let Some(p) = failed {
                return Res::err(VErr::new(
                    Code::Pattern,
                    path,
                    Some(Value::String(data.to_string())),
                    format!("{path} in body should match '{p}'"),
                ));
            }
        }
        Res::default()
    }

    /// kube-openapi's `numberValidator` (1.33: no format range checks).
    fn number_check(&self, s: &Value, n: Num, data: &Value, path: &str) -> Res {
        let mut res = Res::default();
        let value = Some(go_value(data));
        if let Some(factor) = sch::float_field(s, "multipleOf") {
            match n {
                Num::Int(d) => {
                    let f = factor as i64;
                    if f <= 0 {
                        res.add(VErr::new(
                            Code::MultipleOfMustBePositive,
                            path,
                            Some(json!(f)),
                            format!("factor MultipleOf declared for {path} must be positive: {f}"),
                        ));
                    } else if d.wrapping_div(f).wrapping_mul(f) != d {
                        res.add(VErr::new(
                            Code::MultipleOf,
                            path,
                            value.clone(),
                            format!("{path} in body should be a multiple of {f}"),
                        ));
                    }
                }
                Num::Float(d) => {
                    if factor <= 0.0 {
                        res.add(VErr::new(
                            Code::MultipleOfMustBePositive,
                            path,
                            Some(go_value(&json!(factor))),
                            format!(
                                "factor MultipleOf declared for {path} must be positive: {}",
                                go_float_v(factor)
                            ),
                        ));
                    } else {
                        let mult = if factor < 1.0 {
                            1.0 / factor * d
                        } else {
                            d / factor
                        };
                        if !is_json_integer(mult) {
                            res.add(VErr::new(
                                Code::MultipleOf,
                                path,
                                value.clone(),
                                format!(
                                    "{path} in body should be a multiple of {}",
                                    go_float_v(factor)
                                ),
                            ));
                        }
                    }
                }
            }
        }
        if let Some(min) = sch::float_field(s, "minimum") {
            let exclusive = sch::bool_field(s, "exclusiveMinimum");
            let (fails, bound) = match n {
                Num::Int(d) => {
                    let m = min as i64;
                    (
                        (!exclusive && d < m) || (exclusive && d <= m),
                        m.to_string(),
                    )
                }
                Num::Float(d) => (
                    (!exclusive && d < min) || (exclusive && d <= min),
                    go_float_v(min),
                ),
            };
            if fails {
                let cmp = if exclusive {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                res.add(VErr::new(
                    Code::Min,
                    path,
                    value.clone(),
                    format!("{path} in body should be {cmp} {bound}"),
                ));
            }
        }
        if let Some(max) = sch::float_field(s, "maximum") {
            let exclusive = sch::bool_field(s, "exclusiveMaximum");
            let (fails, bound) = match n {
                Num::Int(d) => {
                    let m = max as i64;
                    (
                        (!exclusive && d > m) || (exclusive && d >= m),
                        m.to_string(),
                    )
                }
                Num::Float(d) => (
                    (!exclusive && d > max) || (exclusive && d >= max),
                    go_float_v(max),
                ),
            };
            if fails {
                let cmp = if exclusive {
                    "less than"
                } else {
                    "less than or equal to"
                };
                res.add(VErr::new(
                    Code::Max,
                    path,
                    value,
                    format!("{path} in body should be {cmp} {bound}"),
                ));
            }
        }
        res.matches += 1;
        res
    }

    /// kube-openapi's `schemaSliceValidator`.
    fn slice_check(&mut self, s: &Value, a: &[Value], path: &str, depth: usize) -> Res {
        let mut result = Res::default();
        match s.get("items") {
            Some(items @ Value::Object(_)) => {
                for (i, x) in a.iter().enumerate() {
                    let r = self.validate(items, x, &sch::index(path, i), depth + 1);
                    result.merge(r);
                }
            }
            Some(Value::Array(schemas)) => {
                for (i, (sub, x)) in schemas.iter().zip(a.iter()).enumerate() {
                    let r = self.validate(sub, x, &sch::index(path, i), depth + 1);
                    result.merge(r);
                }
            }
            _ => {}
        }
        let size = a.len() as i64;
        if let Some(min) = sch::int_field(s, "minItems")
            && size < min
        {
            let mut e = VErr::new(
                Code::MinItems,
                path,
                Some(json!(size)),
                format!("{path} in body should have at least {min} items"),
            );
            e.valid = min;
            result.add(e);
        }
        if let Some(max) = sch::int_field(s, "maxItems")
            && size > max
        {
            let mut e = VErr::new(
                Code::MaxItems,
                path,
                Some(json!(size)),
                format!("{path} in body should have at most {max} items"),
            );
            e.valid = max;
            result.add(e);
        }
        if sch::bool_field(s, "uniqueItems") {
            let dup = a
                .iter()
                .enumerate()
                .any(|(i, x)| a[..i].iter().any(|y| y == x));
            if dup {
                result.add(VErr::new(
                    Code::Unique,
                    path,
                    None,
                    format!("{path} in body shouldn't contain duplicates"),
                ));
            }
        }
        result.matches += 1;
        result
    }

    /// kube-openapi's `basicCommonValidator` (enum).
    fn enum_check(&self, s: &Value, data: &Value, path: &str) -> Res {
        let values = sch::schema_list(s, "enum");
        if values.is_empty() {
            return Res::default();
        }
        if !data.is_null()
            && values
                .iter()
                .any(|ev| !ev.is_null() && enum_matches(data, ev))
        {
            return Res::default();
        }
        let mut e = VErr::new(
            Code::Enum,
            path,
            Some(data.clone()),
            format!("{path} in body should be one of {}", go_slice_v(values)),
        );
        e.values = values.to_vec();
        Res::err(e)
    }

    /// kube-openapi's `objectValidator` (without patternProperties, which
    /// CRD schemas forbid).
    fn object_check(&mut self, s: &Value, m: &Map<String, Value>, path: &str, depth: usize) -> Res {
        let mut res = Res::default();
        let n = m.len() as i64;
        if let Some(min) = sch::int_field(s, "minProperties")
            && n < min
        {
            let mut e = VErr::new(
                Code::TooFewProperties,
                path,
                Some(json!(n)),
                format!("{path} in body should have at least {min} properties"),
            );
            e.valid = min;
            res.add(e);
        }
        if let Some(max) = sch::int_field(s, "maxProperties")
            && n > max
        {
            let mut e = VErr::new(
                Code::TooManyProperties,
                path,
                Some(json!(n)),
                format!("{path} in body should have at most {max} properties"),
            );
            e.valid = max;
            res.add(e);
        }
        let props = sch::properties(s);
        let is_prop = |k: &str| props.is_some_and(|p| p.contains_key(k));
        match sch::additional(s) {
            Additional::Bool(false) => {
                for k in m.keys() {
                    if !is_prop(k) {
                        res.add(VErr::new(
                            Code::UnallowedProperty,
                            path,
                            Some(Value::String(k.clone())),
                            format!("{path}.{k} in body is a forbidden property"),
                        ));
                    }
                }
            }
            Additional::Schema(sub) => {
                for (k, v) in m {
                    if !is_prop(k) {
                        let r = self.validate(sub, v, &format!("{path}.{k}"), depth + 1);
                        res.merge(r);
                    }
                }
            }
            _ => {}
        }
        if let Some(props) = props {
            for (name, sub) in props {
                if let Some(v) = m.get(name) {
                    let r = self.validate(sub, v, &sch::child(path, name), depth + 1);
                    res.merge(r);
                }
            }
        }
        for k in sch::string_list(s, "required") {
            if !m.contains_key(k) {
                let name = format!("{path}.{k}");
                res.add(VErr::new(
                    Code::Required,
                    &name,
                    None,
                    format!("{name} in body is required"),
                ));
            }
        }
        res
    }
}

/// Go's `regexp.Compile` error text (`error parsing regexp: <code>: `<expr>``)
/// for a pattern Rust's regex crate refuses.
pub(crate) fn go_regexp_error(pattern: &str, err: &regex::Error) -> String {
    let text = err.to_string();
    let lines: Vec<&str> = text.lines().collect();
    let message = lines
        .iter()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or(text.as_str());
    // The caret line under the pattern marks the offending span.
    let span = lines
        .iter()
        .find(|l| l.trim_start().starts_with('^'))
        .map(|l| {
            let start = l.find('^').unwrap_or(4).saturating_sub(4);
            let len = l.trim().len();
            let chars: Vec<char> = pattern.chars().collect();
            let end = (start + len).min(chars.len());
            let start = start.min(end);
            (
                chars[start..end].iter().collect::<String>(),
                chars[start..].iter().collect::<String>(),
            )
        });
    let (span_text, from_span) = span.unwrap_or_default();
    let (code, expr) = match message {
        "repetition operator missing expression" => {
            ("missing argument to repetition operator", span_text)
        }
        "unclosed group" => ("missing closing )", pattern.to_string()),
        "unopened group" => ("unexpected )", pattern.to_string()),
        "unclosed character class" => ("missing closing ]", from_span),
        "unrecognized escape sequence" => ("invalid escape sequence", span_text),
        "invalid character class range, the start must be <= the end" => {
            ("invalid character class range", span_text)
        }
        "empty character class" => ("missing closing ]", from_span),
        other => return format!("error parsing regexp: {other}"),
    };
    format!("error parsing regexp: {code}: `{expr}`")
}

/// Go's `%v` of a `[]interface{}` (the enum message, which upstream drops).
fn go_slice_v(values: &[Value]) -> String {
    let parts: Vec<String> = values
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            Value::Null => "<nil>".to_string(),
            Value::Number(n) => crate::gofmt::go_number_v(n),
            other => go_json(other),
        })
        .collect();
    format!("[{}]", parts.join(" "))
}

/// Upstream's `kubeOpenAPIResultToFieldErrors`.
fn to_field_errors(prefix: Option<&str>, res: Res) -> Vec<FieldError> {
    let root = prefix.unwrap_or("<nil>").to_string();
    let mut out = Vec::new();
    for e in res.errors {
        if e.code == Code::Plain {
            out.push(FieldError::invalid(root.clone(), "", e.message));
            continue;
        }
        let field = if e.name.is_empty() || e.name == "." {
            root.clone()
        } else {
            let name = e.name.strip_prefix('.').unwrap_or(&e.name);
            match prefix {
                Some(p) if !p.is_empty() => format!("{p}.{name}"),
                _ => name.to_string(),
            }
        };
        let value = e.value.map(|v| go_value(&v)).unwrap_or(json!(""));
        let fe = match e.code {
            Code::Required => FieldError::required(field, ""),
            Code::Enum => {
                let values: Vec<String> = e
                    .values
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        other => go_json(other),
                    })
                    .collect();
                let refs: Vec<&str> = values.iter().map(String::as_str).collect();
                FieldError::not_supported(field, value, &refs)
            }
            Code::TooLong => FieldError {
                kind: FieldErrorType::TooLong,
                field,
                value: None,
                detail: format!("may not be more than {} bytes", e.valid),
            },
            Code::MaxItems | Code::TooManyProperties => FieldError {
                kind: FieldErrorType::TooMany,
                field,
                value: Some(value),
                detail: format!("must have at most {} items", e.valid),
            },
            Code::InvalidType => FieldError {
                kind: FieldErrorType::TypeInvalid,
                field,
                value: Some(value),
                detail: e.message,
            },
            _ => FieldError::invalid(field, value, e.message),
        };
        out.push(fe);
    }
    out
}

/// Validates `value` against the schema as upstream's `ValidateCustomResource`
/// does with the field path `prefix` (`None` is upstream's nil path: errors
/// of the whole value render as `<nil>`). Formats CRDs do not support are
/// ignored, as in the CR handler.
pub fn validate_value(value: &Value, schema: &Value, prefix: Option<&str>) -> Vec<FieldError> {
    validate_value_with(
        value,
        schema,
        prefix,
        Options {
            strip_unsupported_formats: true,
        },
    )
}

pub(crate) fn validate_value_with(
    value: &Value,
    schema: &Value,
    prefix: Option<&str>,
    opts: Options,
) -> Vec<FieldError> {
    let mut v = Validator::new(opts);
    let res = v.validate(schema, value, "", 0);
    to_field_errors(prefix, res)
}

/// What the custom resource strategy validates against the schema on create:
/// OpenAPI value validation (`ValidateCustomResource`), embedded resources
/// (`objectmeta.Validate`, not the root) and list sets and maps
/// (`listtype.ValidateListSetsAndMaps`). TypeMeta and the root ObjectMeta are
/// the caller's (the API server's generic object checks).
pub fn validate_custom_resource(obj: &Value, schema: &Value) -> Vec<FieldError> {
    let mut errs = validate_value(obj, schema, None);
    errs.extend(validate_embedded_resources(obj, schema, "", false));
    errs.extend(validate_list_sets_and_maps(obj, schema, ""));
    errs
}

/// Upstream's `objectmeta.Validate`: apiVersion, kind and metadata of every
/// `x-kubernetes-embedded-resource` object (and of the root when
/// `is_resource_root`).
pub fn validate_embedded_resources(
    obj: &Value,
    schema: &Value,
    path: &str,
    is_resource_root: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    embedded_walk(obj, Some(schema), path, is_resource_root, &mut errs, 0);
    errs
}

fn embedded_walk(
    x: &Value,
    s: Option<&Value>,
    path: &str,
    force_embedded: bool,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    let Some(s) = s else { return };
    if depth > crate::MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => {
            if force_embedded || sch::embedded_resource(s) {
                validate_embedded_resource(m, path, errs);
            }
            for (k, v) in m {
                if let Some(prop) = sch::property(s, k) {
                    embedded_walk(v, Some(prop), &sch::child(path, k), false, errs, depth + 1);
                } else if let Some(sub) = sch::additional_structural(s) {
                    embedded_walk(v, sub, &sch::key(path, k), false, errs, depth + 1);
                }
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                embedded_walk(
                    v,
                    sch::items(s),
                    &sch::index(path, i),
                    false,
                    errs,
                    depth + 1,
                );
            }
        }
        _ => {}
    }
}

/// apimachinery's `schema.ParseGroupVersion` error, if any.
pub(crate) fn parse_group_version_error(gv: &str) -> Option<String> {
    if gv.is_empty() || gv == "/" {
        return None;
    }
    match gv.matches('/').count() {
        0 | 1 => None,
        _ => Some(format!("unexpected GroupVersion string: {gv}")),
    }
}

/// Go's `encoding/json` type error for a metadata field of the wrong JSON
/// type, as decoding into `metav1.ObjectMeta` reports it.
pub(crate) fn object_meta_decode_error(meta: &Value) -> Option<String> {
    fn json_kind(v: &Value) -> String {
        match v {
            Value::String(_) => "string".into(),
            Value::Number(n) => format!("number {}", crate::gofmt::go_number_v(n)),
            Value::Bool(_) => "bool".into(),
            Value::Array(_) => "array".into(),
            Value::Object(_) => "object".into(),
            Value::Null => "null".into(),
        }
    }
    let m = match meta {
        Value::Object(m) => m,
        Value::Null => return None,
        other => {
            let k = json_kind(other);
            let k = k.split(' ').next().unwrap_or("");
            return Some(format!(
                "json: cannot unmarshal {k} into Go value of type v1.ObjectMeta"
            ));
        }
    };
    for (k, v) in m {
        if v.is_null() {
            continue;
        }
        let (ok, go_type) = match k.as_str() {
            "name" | "generateName" | "namespace" | "selfLink" | "uid" | "resourceVersion" => {
                (v.is_string(), "string")
            }
            "generation" | "deletionGracePeriodSeconds" => (v.is_i64(), "int64"),
            "labels" | "annotations" => {
                if let Value::Object(mm) = v {
                    if let Some((lk, lv)) = mm.iter().find(|(_, x)| !(x.is_string() || x.is_null()))
                    {
                        let kind = json_kind(lv);
                        let kind = if lv.is_number() {
                            "number"
                        } else {
                            kind.as_str()
                        };
                        return Some(format!(
                            "json: cannot unmarshal {kind} into Go struct field ObjectMeta.{k}.{lk} of type string"
                        ));
                    }
                    (true, "")
                } else {
                    (false, "map[string]string")
                }
            }
            "finalizers" => {
                if let Value::Array(a) = v {
                    if let Some(x) = a.iter().find(|x| !(x.is_string() || x.is_null())) {
                        let kind = json_kind(x);
                        let kind = if x.is_number() {
                            "number"
                        } else {
                            kind.as_str()
                        };
                        return Some(format!(
                            "json: cannot unmarshal {kind} into Go struct field ObjectMeta.finalizers of type string"
                        ));
                    }
                    (true, "")
                } else {
                    (false, "[]string")
                }
            }
            "ownerReferences" => (v.is_array(), "[]v1.OwnerReference"),
            "managedFields" => (v.is_array(), "[]v1.ManagedFieldsEntry"),
            "creationTimestamp" | "deletionTimestamp" => (v.is_string(), "v1.Time"),
            _ => (true, ""),
        };
        if !ok {
            let kind = json_kind(v);
            let kind = if v.is_number() && go_type != "int64" {
                "number".to_string()
            } else {
                kind
            };
            return Some(format!(
                "json: cannot unmarshal {kind} into Go struct field ObjectMeta.{k} of type {go_type}"
            ));
        }
    }
    None
}

/// Upstream's `validateEmbeddedResource`.
fn validate_embedded_resource(x: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    let api_path = sch::child(path, "apiVersion");
    let kind_path = sch::child(path, "kind");
    if !x.contains_key("apiVersion") {
        errs.push(FieldError::required(&api_path, "must not be empty"));
    }
    if !x.contains_key("kind") {
        errs.push(FieldError::required(&kind_path, "must not be empty"));
    }
    for (k, v) in x {
        match k.as_str() {
            "apiVersion" => match v.as_str() {
                None => errs.push(FieldError::invalid(
                    &api_path,
                    go_value(v),
                    "must be a string",
                )),
                Some("") => errs.push(FieldError::invalid(&api_path, "", "must not be empty")),
                Some(gv) => {
                    if let Some(e) = parse_group_version_error(gv) {
                        errs.push(FieldError::invalid(&api_path, gv, e));
                    }
                }
            },
            "kind" => match v.as_str() {
                None => errs.push(FieldError::invalid(
                    &kind_path,
                    go_value(v),
                    "must be a string",
                )),
                Some("") => errs.push(FieldError::invalid(&kind_path, "", "must not be empty")),
                Some(kind) => {
                    let msgs = is_dns1035_label(&kind.to_lowercase());
                    if !msgs.is_empty() {
                        errs.push(FieldError::invalid(
                            &kind_path,
                            kind,
                            format!(
                                "may have mixed case, but should otherwise match: {}",
                                msgs.join(",")
                            ),
                        ));
                    }
                }
            },
            "metadata" => {
                let meta_path = sch::child(path, "metadata");
                if let Some(e) = object_meta_decode_error(v) {
                    errs.push(FieldError::invalid(meta_path, go_value(v), e));
                    continue;
                }
                let mut meta = match v {
                    Value::Object(m) => m.clone(),
                    _ => Map::new(),
                };
                if meta
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
                {
                    meta.insert("name".into(), json!("fakename"));
                }
                let namespaced = meta
                    .get("namespace")
                    .and_then(Value::as_str)
                    .is_some_and(|n| !n.is_empty());
                errs.extend(validate_object_meta(
                    &Value::Object(meta),
                    namespaced,
                    NameRule::PathSegment,
                    &meta_path,
                ));
            }
            _ => {}
        }
    }
}

/// Upstream's `listtype.ValidateListSetsAndMaps`: `x-kubernetes-list-type:
/// set` items and `map` keys must be unique.
pub fn validate_list_sets_and_maps(obj: &Value, schema: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Value::Object(m) = obj {
        list_object(m, schema, path, &mut errs, 0);
    }
    errs
}

fn list_object(
    m: &Map<String, Value>,
    s: &Value,
    path: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    if let Some(Some(sub)) = sch::additional_structural(s) {
        for (k, v) in m {
            list_value(v, sub, &sch::key(path, k), errs, depth + 1);
        }
    }
    if let Some(props) = sch::properties(s) {
        for (k, v) in m {
            if let Some(sub) = props.get(k) {
                list_value(v, sub, &sch::child(path, k), errs, depth + 1);
            }
        }
    }
}

fn list_value(x: &Value, s: &Value, path: &str, errs: &mut Vec<FieldError>, depth: usize) {
    match x {
        Value::Array(a) => list_array(a, s, path, errs, depth),
        Value::Object(m) => list_object(m, s, path, errs, depth),
        _ => {}
    }
}

fn list_array(a: &[Value], s: &Value, path: &str, errs: &mut Vec<FieldError>, depth: usize) {
    match sch::list_type(s) {
        Some("set") => {
            for i in non_unique(a.iter().map(SetKey::of)) {
                errs.push(FieldError::duplicate(sch::index(path, i), go_value(&a[i])));
            }
        }
        Some("map") => list_map(a, s, path, errs),
        _ => {}
    }
    if let Some(items) = sch::items(s) {
        for (i, x) in a.iter().enumerate() {
            list_value(x, items, &sch::index(path, i), errs, depth + 1);
        }
    }
}

/// An element as the set check compares it: scalars by Go equality,
/// compounds by their JSON.
#[derive(PartialEq)]
enum SetKey<'a> {
    Unspecified,
    Scalar(&'a Value),
    Compound(String),
}

impl<'a> SetKey<'a> {
    fn of(v: &'a Value) -> Self {
        match v {
            Value::Object(_) | Value::Array(_) => SetKey::Compound(go_json(v)),
            _ => SetKey::Scalar(v),
        }
    }
}

/// Indices of the second appearance of each repeated element.
fn non_unique<'a>(keys: impl Iterator<Item = SetKey<'a>>) -> Vec<usize> {
    let keys: Vec<SetKey<'a>> = keys.collect();
    let mut out = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let before = keys[..i].iter().filter(|x| *x == k).count();
        if before == 1 {
            out.push(i);
        }
    }
    out
}

fn list_map(a: &[Value], s: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for (i, x) in a.iter().enumerate() {
        if !(x.is_null() || x.is_object()) {
            errs.push(FieldError::invalid(
                sch::index(path, i),
                go_value(x),
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    if a.len() <= 1 {
        return;
    }
    let keys = sch::list_map_keys(s);
    if keys.len() == 1 {
        let key = keys[0];
        let ks: Vec<Option<&Value>> = a.iter().map(|x| x.get(key)).collect();
        let set = ks.iter().map(|k| match k {
            None => SetKey::Unspecified,
            Some(v) => SetKey::of(v),
        });
        for i in non_unique(set) {
            let v = match ks[i] {
                None => json!({}),
                Some(k) => json!({ key: go_value(k) }),
            };
            errs.push(FieldError::duplicate(sch::index(path, i), v));
        }
        return;
    }
    let composite: Vec<Value> = a
        .iter()
        .map(|x| {
            let mut m = Map::new();
            for k in &keys {
                if let Some(v) = x.get(*k) {
                    m.insert((*k).to_string(), v.clone());
                }
            }
            Value::Object(m)
        })
        .collect();
    for i in non_unique(composite.iter().map(SetKey::of)) {
        errs.push(FieldError::duplicate(
            sch::index(path, i),
            go_value(&composite[i]),
        ));
    }
}

#[cfg(test)]
mod tests;
