//! API validation as upstream's `ValidateObjectMeta`, `ValidatePod`, … with
//! upstream's field paths, error types and messages.
//!
//! `validate` runs after defaulting, on the wire-form object. Values of the
//! wrong JSON type are reported as `FieldValueTypeInvalid`, never a panic.

use serde_json::{Map, Value, json};

use crate::registry::ResourceType;

mod apps;
mod autoscaling;
mod core;
mod meta;
mod networking;
pub(crate) mod pod;
mod quota;
mod security;
mod service;
mod storage;
mod volume;

pub use meta::{
    validate_annotations, validate_finalizer_name, validate_label_selector, validate_labels,
    validate_object_meta, validate_object_meta_update,
};
pub use pod::{
    validate_ephemeral_containers_update, validate_pod_spec, validate_pod_template_spec,
};
pub use security::{SYSCTL_MAX_LENGTH, SYSCTL_NAME_REGEX, is_valid_sysctl_name};

/// Upstream's `field.ErrorType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldErrorType {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    Internal,
    TypeInvalid,
}

impl FieldErrorType {
    /// The `reason` of a StatusCause (`FieldValueInvalid`, …).
    pub fn reason(self) -> &'static str {
        match self {
            Self::NotFound => "FieldValueNotFound",
            Self::Required => "FieldValueRequired",
            Self::Duplicate => "FieldValueDuplicate",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Internal => "InternalError",
            Self::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The human phrase that starts a message (`Invalid value`, …).
    pub fn phrase(self) -> &'static str {
        match self {
            Self::NotFound => "Not found",
            Self::Required => "Required value",
            Self::Duplicate => "Duplicate value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Internal => "Internal error",
        }
    }
}

/// One field-level validation error (upstream's `field.Error`).
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    pub kind: FieldErrorType,
    /// The field path, e.g. `spec.containers[0].name`.
    pub field: String,
    /// The offending value; `None` leaves it out of the message.
    pub value: Option<Value>,
    pub detail: String,
}

impl FieldError {
    fn new(
        kind: FieldErrorType,
        field: impl Into<String>,
        value: Option<Value>,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            kind,
            field: field.into(),
            value,
            detail: detail.into(),
        }
    }

    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Required, field, None, detail)
    }

    pub fn invalid(
        field: impl Into<String>,
        value: impl Into<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(FieldErrorType::Invalid, field, Some(value.into()), detail)
    }

    pub fn duplicate(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::new(FieldErrorType::Duplicate, field, Some(value.into()), "")
    }

    pub fn not_found(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::new(FieldErrorType::NotFound, field, Some(value.into()), "")
    }

    /// `Unsupported value: "x": supported values: "a", "b"`.
    pub fn not_supported(
        field: impl Into<String>,
        value: impl Into<Value>,
        valid: &[&str],
    ) -> Self {
        let detail = if valid.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = valid.iter().map(|v| go_quote(v)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(
            FieldErrorType::NotSupported,
            field,
            Some(value.into()),
            detail,
        )
    }

    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Forbidden, field, None, detail)
    }

    /// `Too long: must have at most N bytes`.
    pub fn too_long(field: impl Into<String>, max_bytes: usize) -> Self {
        Self::new(
            FieldErrorType::TooLong,
            field,
            None,
            format!("must have at most {max_bytes} bytes"),
        )
    }

    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        Self::new(
            FieldErrorType::TooMany,
            field,
            Some(json!(actual)),
            format!("must have at most {max} items"),
        )
    }

    pub fn internal(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Internal, field, None, detail)
    }

    /// A value of the wrong JSON type (what upstream's decoder would refuse).
    pub fn type_invalid(field: impl Into<String>, value: &Value, expected: &str) -> Self {
        Self::new(
            FieldErrorType::TypeInvalid,
            field,
            Some(value.clone()),
            format!("must be of type {expected}"),
        )
    }

    /// The message without the field (upstream's `ErrorBody`).
    pub fn error_body(&self) -> String {
        let mut s = match (&self.kind, &self.value) {
            (
                FieldErrorType::Required
                | FieldErrorType::Forbidden
                | FieldErrorType::TooLong
                | FieldErrorType::Internal,
                _,
            )
            | (_, None) => self.kind.phrase().to_string(),
            (_, Some(v)) => format!("{}: {}", self.kind.phrase(), render_value(v)),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// The `StatusCause` JSON for this error.
    pub fn to_cause(&self) -> Value {
        json!({
            "reason": self.kind.reason(),
            "message": self.error_body(),
            "field": self.field,
        })
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.error_body())
    }
}

impl std::error::Error for FieldError {}

/// Renders a bad value as upstream does: strings Go-quoted, numbers and
/// booleans bare, composite values as compact JSON.
fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Null => go_quote("null"),
        Value::Bool(_) | Value::Number(_) => v.to_string(),
        _ => v.to_string(),
    }
}

/// Go's `strconv.Quote`.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => {
                if (c as u32) <= 0xffff {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Upstream's aggregate error text: one message alone, several in brackets,
/// duplicates dropped.
pub fn aggregate_message(errs: &[FieldError]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        let m = e.to_string();
        if !seen.contains(&m) {
            seen.push(m);
        }
    }
    match seen.len() {
        0 => String::new(),
        1 => seen.remove(0),
        _ => format!("[{}]", seen.join(", ")),
    }
}

/// `Kind.group`, or `Kind` for the core group (upstream's `GroupKind.String`).
pub fn qualified_kind(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

/// The 422 message: `Deployment.apps "x" is invalid: spec.replicas: …`.
/// `group_kind` is the qualified kind (see [`qualified_kind`]).
pub fn invalid_message(group_kind: &str, name: &str, errs: &[FieldError]) -> String {
    if errs.is_empty() {
        format!("{group_kind} {} is invalid", go_quote(name))
    } else {
        format!(
            "{group_kind} {} is invalid: {}",
            go_quote(name),
            aggregate_message(errs)
        )
    }
}

/// The whole `Status` object upstream returns for an invalid object (422).
pub fn invalid_status(group: &str, kind: &str, name: &str, errs: &[FieldError]) -> Value {
    let causes: Vec<Value> = errs.iter().map(FieldError::to_cause).collect();
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": invalid_message(&qualified_kind(group, kind), name, errs),
        "reason": "Invalid",
        "details": {
            "name": name,
            "group": group,
            "kind": kind,
            "causes": causes,
        },
        "code": 422,
    })
}

// ---------------------------------------------------------------------------
// String format validators (upstream's k8s.io/apimachinery/pkg/util/validation).

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_MAP_KEY_MSG: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";

pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;
/// Total size of all annotations on one object.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
/// Total size of a ConfigMap's or Secret's data.
pub const MAX_CONFIG_SIZE: usize = 1024 * 1024;

/// Upstream's `RegexError` (including its `',  or '` spacing).
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

pub fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

fn is_alnum_lower(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_alnum_lower(b[0])
        && is_alnum_lower(b[b.len() - 1])
        && b.iter().all(|&c| is_alnum_lower(c) || c == b'-')
}

fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns1123_label)
}

fn matches_qualified_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `IsDNS1123Label`.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `IsDNS1035Label`.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    let b = value.as_bytes();
    let ok = !b.is_empty() && b[0].is_ascii_lowercase() && matches_dns1123_label(value);
    if !ok {
        errs.push(regex_error(
            DNS1035_LABEL_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `IsQualifiedName`: a label key, annotation key or finalizer.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                for m in is_dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {m}"));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !matches_qualified_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !value.is_empty() && !matches_qualified_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `IsConfigMapKey`: keys of ConfigMap and Secret data.
pub fn is_config_map_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
    if !ok {
        errs.push(regex_error(
            CONFIG_MAP_KEY_MSG,
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    if value == "." {
        errs.push("must not be '.'".to_string());
    } else if value == ".." {
        errs.push("must not be '..'".to_string());
    } else if value.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

/// `IsValidPortNum`: 1..=65535.
pub fn is_valid_port_num(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec![inclusive_range_error(1, 65535)]
    }
}

/// `IsValidPortName` (IANA service names).
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    let charset_ok = !port.is_empty() && port.bytes().all(|c| is_alnum_lower(c) || c == b'-');
    if !charset_ok {
        errs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string(),
        );
    }
    if !port.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

/// `IsValidPercent`: `[0-9]+%`.
pub fn is_valid_percent(s: &str) -> Vec<String> {
    let ok = s
        .strip_suffix('%')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()));
    if ok {
        Vec::new()
    } else {
        vec![regex_error(
            "a valid percent string must be a numeric string followed by an ending '%'",
            "[0-9]+%",
            &["1%", "93%"],
        )]
    }
}

/// `IsRelaxedEnvVarName` (the default since RelaxedEnvironmentVariableValidation).
pub fn is_relaxed_env_var_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.is_empty() {
        errs.push("environment variable name must be non-empty".to_string());
    }
    if value.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        errs.push(
            "a valid environment variable name must consist only of printable ASCII characters other than '='"
                .to_string(),
        );
    }
    errs
}

// ---------------------------------------------------------------------------
// Object names.

/// Which rule an object's `metadata.name` follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain, ≤ 253 (most kinds).
    Subdomain,
    /// DNS-1123 label, ≤ 63 (namespaces).
    Label,
    /// DNS-1035 label, ≤ 63, starting with a letter (services).
    Dns1035Label,
    /// Any path segment: not `.`/`..`, no `/` or `%` (RBAC kinds).
    PathSegment,
}

/// Validates a name (or, with `prefix`, a generateName) under `rule`,
/// returning upstream's messages.
pub fn validate_name(rule: NameRule, name: &str, prefix: bool) -> Vec<String> {
    // A generateName may end in '-': a random suffix follows. Upstream masks
    // it by replacing the last two bytes with 'a' (sic), so "x.-" passes.
    let masked;
    let name = if prefix
        && rule != NameRule::PathSegment
        && name.len() > 1
        && name.ends_with('-')
        && name.is_char_boundary(name.len() - 2)
    {
        masked = format!("{}a", &name[..name.len() - 2]);
        masked.as_str()
    } else {
        name
    };
    match rule {
        NameRule::Subdomain => is_dns1123_subdomain(name),
        NameRule::Label => is_dns1123_label(name),
        NameRule::Dns1035Label => is_dns1035_label(name),
        NameRule::PathSegment => {
            let mut errs = Vec::new();
            if name == "." || name == ".." {
                errs.push(format!("may not be '{name}'"));
            }
            for bad in ["/", "%"] {
                if name.contains(bad) {
                    errs.push(format!("may not contain '{bad}'"));
                }
            }
            errs
        }
    }
}

/// The characters upstream draws random name suffixes from (no vowels, no
/// confusable characters).
pub const GENERATE_NAME_ALPHABET: &str = "bcdfghjklmnpqrstvwxz2456789";
const GENERATE_NAME_RANDOM_LENGTH: usize = 5;
const GENERATE_NAME_MAX_BASE: usize = 63 - GENERATE_NAME_RANDOM_LENGTH;

/// `metadata.generateName` → a name: the base (cut to 58 bytes) plus five
/// random characters. `rand` is the random source (any `u64`s).
pub fn generate_name(base: &str, mut rand: impl FnMut() -> u64) -> String {
    let mut cut = base.len().min(GENERATE_NAME_MAX_BASE);
    while !base.is_char_boundary(cut) {
        cut -= 1;
    }
    let alphabet = GENERATE_NAME_ALPHABET.as_bytes();
    let mut name = base[..cut].to_string();
    for _ in 0..GENERATE_NAME_RANDOM_LENGTH {
        let i = (rand() % alphabet.len() as u64) as usize;
        name.push(alphabet[i] as char);
    }
    name
}

/// Upstream's message for a changed immutable field.
pub const FIELD_IMMUTABLE: &str = "field is immutable";
/// Upstream's message for a negative count.
pub const IS_NEGATIVE: &str = "must be greater than or equal to 0";

// ---------------------------------------------------------------------------
// Entry point.

/// Validates an object of the served resource `rt` (after defaulting); `old`
/// is the stored object on update. Returns every error found. The registry
/// entry says how: scope, name rule, finalizer rule, the kind's own hook.
pub fn validate(rt: &ResourceType, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(map) = obj.as_object() else {
        errs.push(FieldError::type_invalid("", obj, "object"));
        return errs;
    };
    let meta_path = "metadata";
    let empty = Value::Object(Map::new());
    let meta = match map.get("metadata") {
        None | Some(Value::Null) => &empty,
        Some(m) => m,
    };
    errs.extend(if rt.kube_finalizers {
        validate_object_meta(meta, rt.namespaced, rt.name_rule, meta_path)
    } else {
        meta::validate_object_meta_generic(meta, rt.namespaced, rt.name_rule, meta_path)
    });
    if meta.is_object()
        && let Some(old_meta) = old.and_then(|o| o.get("metadata"))
    {
        errs.extend(validate_object_meta_update(meta, old_meta, meta_path));
    }
    if let Some(validate_kind) = rt.validate {
        errs.extend(validate_kind(obj, old));
    }
    errs
}

/// Each kind's own validation, named by its registry entry
/// ([`ResourceType::validate`]); the rules live in the area files.
pub(crate) mod by_kind {
    use super::{FieldError, Value};
    use super::{apps, autoscaling, core, networking, pod, quota, service, storage, volume};

    type Errs = Vec<FieldError>;

    pub(crate) fn pod(obj: &Value, old: Option<&Value>) -> Errs {
        pod::validate_pod(obj, old)
    }
    pub(crate) fn pod_template(obj: &Value, _old: Option<&Value>) -> Errs {
        pod::validate_pod_template(obj)
    }
    pub(crate) fn service(obj: &Value, old: Option<&Value>) -> Errs {
        service::validate_service(obj, old)
    }
    pub(crate) fn config_map(obj: &Value, old: Option<&Value>) -> Errs {
        core::validate_config_map(obj, old)
    }
    pub(crate) fn secret(obj: &Value, old: Option<&Value>) -> Errs {
        core::validate_secret(obj, old)
    }
    pub(crate) fn namespace(obj: &Value, old: Option<&Value>) -> Errs {
        core::validate_namespace(obj, old)
    }
    pub(crate) fn resource_quota(obj: &Value, _old: Option<&Value>) -> Errs {
        quota::validate_resource_quota(obj)
    }
    pub(crate) fn limit_range(obj: &Value, _old: Option<&Value>) -> Errs {
        quota::validate_limit_range(obj)
    }
    pub(crate) fn persistent_volume(obj: &Value, old: Option<&Value>) -> Errs {
        volume::validate_persistent_volume(obj, old)
    }
    pub(crate) fn persistent_volume_claim(obj: &Value, old: Option<&Value>) -> Errs {
        volume::validate_persistent_volume_claim(obj, old)
    }
    pub(crate) fn replication_controller(obj: &Value, _old: Option<&Value>) -> Errs {
        apps::validate_replication_controller(obj)
    }
    pub(crate) fn deployment(obj: &Value, old: Option<&Value>) -> Errs {
        apps::validate_deployment(obj, old)
    }
    pub(crate) fn replica_set(obj: &Value, old: Option<&Value>) -> Errs {
        apps::validate_replica_set(obj, old)
    }
    pub(crate) fn stateful_set(obj: &Value, old: Option<&Value>) -> Errs {
        apps::validate_stateful_set(obj, old)
    }
    pub(crate) fn daemon_set(obj: &Value, old: Option<&Value>) -> Errs {
        apps::validate_daemon_set(obj, old)
    }
    pub(crate) fn job(obj: &Value, old: Option<&Value>) -> Errs {
        apps::validate_job(obj, old)
    }
    pub(crate) fn cron_job(obj: &Value, _old: Option<&Value>) -> Errs {
        apps::validate_cron_job(obj)
    }
    pub(crate) fn storage_class(obj: &Value, old: Option<&Value>) -> Errs {
        storage::validate_storage_class(obj, old)
    }
    pub(crate) fn csi_driver(obj: &Value, old: Option<&Value>) -> Errs {
        storage::validate_csi_driver(obj, old)
    }
    pub(crate) fn csi_node(obj: &Value, old: Option<&Value>) -> Errs {
        storage::validate_csi_node(obj, old)
    }
    pub(crate) fn volume_attachment(obj: &Value, old: Option<&Value>) -> Errs {
        storage::validate_volume_attachment(obj, old)
    }
    pub(crate) fn ingress(obj: &Value, old: Option<&Value>) -> Errs {
        networking::validate_ingress(obj, old)
    }
    pub(crate) fn ingress_class(obj: &Value, old: Option<&Value>) -> Errs {
        networking::validate_ingress_class(obj, old)
    }
    /// Every served version, checked in v2 terms.
    pub(crate) fn horizontal_pod_autoscaler(obj: &Value, old: Option<&Value>) -> Errs {
        let mut e = autoscaling::validate_hpa(obj, old);
        e.extend(autoscaling::validate_hpa_status(obj));
        e
    }
}

// ---------------------------------------------------------------------------
// Helpers shared by the validators.

/// Reads JSON values by key without ever panicking.
pub(crate) mod jv {
    use serde_json::{Map, Value};

    pub fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
        path.iter().try_fold(v, |cur, key| cur.get(key))
    }

    pub fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
        get(v, path).and_then(Value::as_str)
    }

    pub fn obj_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Map<String, Value>> {
        get(v, path).and_then(Value::as_object)
    }

    pub fn arr_at<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
        get(v, path)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}

/// Checks that `v` (if present and not null) has the expected JSON type,
/// pushing a type error otherwise; returns the value when it fits.
fn typed<'a>(
    errs: &mut Vec<FieldError>,
    v: Option<&'a Value>,
    path: &str,
    expected: &str,
    fits: fn(&Value) -> bool,
) -> Option<&'a Value> {
    match v {
        None | Some(Value::Null) => None,
        Some(x) if fits(x) => Some(x),
        Some(x) => {
            errs.push(FieldError::type_invalid(path, x, expected));
            None
        }
    }
}

fn opt_str<'a>(errs: &mut Vec<FieldError>, v: Option<&'a Value>, path: &str) -> Option<&'a str> {
    typed(errs, v, path, "string", Value::is_string).and_then(Value::as_str)
}

fn opt_int(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str) -> Option<i64> {
    typed(errs, v, path, "integer", |x| x.as_i64().is_some()).and_then(Value::as_i64)
}

fn opt_obj<'a>(
    errs: &mut Vec<FieldError>,
    v: Option<&'a Value>,
    path: &str,
) -> Option<&'a Map<String, Value>> {
    typed(errs, v, path, "object", Value::is_object).and_then(Value::as_object)
}

fn opt_arr<'a>(errs: &mut Vec<FieldError>, v: Option<&'a Value>, path: &str) -> &'a [Value] {
    typed(errs, v, path, "array", Value::is_array)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// `ValidateNonnegativeField`.
fn non_negative(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str) {
    if let Some(n) = opt_int(errs, v, path)
        && n < 0
    {
        errs.push(FieldError::invalid(path, n, IS_NEGATIVE));
    }
}

/// `ValidateImmutableField` on JSON values (absent and null are equal).
fn immutable(errs: &mut Vec<FieldError>, new: Option<&Value>, old: Option<&Value>, path: &str) {
    let n = new.cloned().unwrap_or(Value::Null);
    let o = old.cloned().unwrap_or(Value::Null);
    if !semantic_eq(&n, &o) {
        errs.push(FieldError::invalid(path, n, FIELD_IMMUTABLE));
    }
}

/// Upstream's semantic equality, approximated on JSON: an absent field
/// equals its zero value (null, "", false, 0, [] or {}), as in Go structs.
pub(crate) fn semantic_eq(a: &Value, b: &Value) -> bool {
    normalize(a) == normalize(b)
}

fn normalize(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), normalize(v)))
                .filter(|(_, v)| !is_zero(v))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalize).collect()),
        _ => v.clone(),
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registry entry of a built-in kind (its first served version).
    pub(super) fn rt(group: &str, kind: &str) -> &'static ResourceType {
        crate::registry::RESOURCES
            .iter()
            .find(|r| r.group == group && r.kind == kind)
            .unwrap_or_else(|| panic!("{group}/{kind} is not served"))
    }

    /// A custom kind's entry as `crd.rs` builds one (no hook, generic finalizers).
    fn widget_rt(namespaced: bool) -> ResourceType {
        ResourceType {
            group: "example.com",
            kind: "Widget",
            namespaced,
            kube_finalizers: false,
            validate: None,
            ..*rt("", "ConfigMap")
        }
    }

    #[test]
    fn error_bodies_match_upstream() {
        let cases: Vec<(FieldError, &str)> = vec![
            (
                FieldError::required("metadata.name", ""),
                "metadata.name: Required value",
            ),
            (
                FieldError::required("metadata.name", "name or generateName is required"),
                "metadata.name: Required value: name or generateName is required",
            ),
            (
                FieldError::invalid("spec.replicas", -1, IS_NEGATIVE),
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                FieldError::invalid("metadata.name", "Foo", "bad"),
                "metadata.name: Invalid value: \"Foo\": bad",
            ),
            (
                FieldError::invalid("spec.hostNetwork", true, "bad"),
                "spec.hostNetwork: Invalid value: true: bad",
            ),
            (
                FieldError::invalid("x", Value::Null, "bad"),
                "x: Invalid value: \"null\": bad",
            ),
            (
                FieldError::invalid("x", json!({"app": "y"}), "bad"),
                "x: Invalid value: {\"app\":\"y\"}: bad",
            ),
            (
                FieldError::not_supported(
                    "spec.restartPolicy",
                    "Sometimes",
                    &["Always", "OnFailure", "Never"],
                ),
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ),
            (
                FieldError::duplicate("spec.containers[1].name", "a"),
                "spec.containers[1].name: Duplicate value: \"a\"",
            ),
            (
                FieldError::not_found("spec.containers[0].volumeMounts[0].name", "v"),
                "spec.containers[0].volumeMounts[0].name: Not found: \"v\"",
            ),
            (
                FieldError::forbidden("metadata.namespace", "not allowed on this type"),
                "metadata.namespace: Forbidden: not allowed on this type",
            ),
            (
                FieldError::too_long("metadata.annotations", TOTAL_ANNOTATION_SIZE_LIMIT),
                "metadata.annotations: Too long: must have at most 262144 bytes",
            ),
            (
                FieldError::invalid("x", "a\"b\n\u{1}é", "q"),
                "x: Invalid value: \"a\\\"b\\n\\x01é\": q",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
    }

    #[test]
    fn causes_and_invalid_messages() {
        let e = FieldError::invalid("metadata.name", "Foo", "bad name");
        assert_eq!(
            e.to_cause(),
            json!({"reason": "FieldValueInvalid", "message": "Invalid value: \"Foo\": bad name", "field": "metadata.name"})
        );
        assert_eq!(
            FieldError::required("spec.containers", "").to_cause(),
            json!({"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers"})
        );
        let one = vec![FieldError::invalid("spec.replicas", -1, IS_NEGATIVE)];
        assert_eq!(
            invalid_message(&qualified_kind("apps", "Deployment"), "x", &one),
            "Deployment.apps \"x\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
        let two = vec![
            FieldError::invalid("spec.replicas", -1, IS_NEGATIVE),
            FieldError::required("spec.selector", ""),
            FieldError::required("spec.selector", ""),
        ];
        assert_eq!(
            invalid_message(&qualified_kind("apps", "Deployment"), "x", &two),
            "Deployment.apps \"x\" is invalid: [spec.replicas: Invalid value: -1: must be greater than or equal to 0, spec.selector: Required value]"
        );
        assert_eq!(invalid_message("Pod", "p", &[]), "Pod \"p\" is invalid");
        let status = invalid_status("", "Pod", "p", &one);
        assert_eq!(status["code"], 422);
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(status["details"]["kind"], "Pod");
        assert_eq!(status["details"]["causes"][0]["field"], "spec.replicas");
    }

    #[test]
    fn dns_names() {
        let sub = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        let label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
        let dns1035 = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
        let long_label = "a".repeat(64);
        let long_sub = format!("{}.b", "a".repeat(252));
        let cases: Vec<(NameRule, &str, bool, Vec<String>)> = vec![
            (NameRule::Subdomain, "example.com", false, vec![]),
            (NameRule::Subdomain, "Foo", false, vec![sub.into()]),
            (NameRule::Subdomain, "a..b", false, vec![sub.into()]),
            (NameRule::Subdomain, "", false, vec![sub.into()]),
            (
                NameRule::Subdomain,
                &long_sub,
                false,
                vec![max_len_error(253)],
            ),
            (NameRule::Subdomain, "web-", true, vec![]),
            (NameRule::Subdomain, "x.-", true, vec![]),
            (NameRule::Label, "é-", true, vec![label.into()]),
            (NameRule::Subdomain, "web-", false, vec![sub.into()]),
            (NameRule::Label, "my-ns", false, vec![]),
            (
                NameRule::Label,
                "my.ns",
                false,
                vec!["must not contain dots".into()],
            ),
            (NameRule::Label, "-x", false, vec![label.into()]),
            (NameRule::Label, &long_label, false, vec![max_len_error(63)]),
            (NameRule::Dns1035Label, "svc-1", false, vec![]),
            (NameRule::Dns1035Label, "1svc", false, vec![dns1035.into()]),
            (NameRule::PathSegment, "system:admin", false, vec![]),
            (
                NameRule::PathSegment,
                "..",
                false,
                vec!["may not be '..'".into()],
            ),
            (
                NameRule::PathSegment,
                "a/b%",
                false,
                vec!["may not contain '/'".into(), "may not contain '%'".into()],
            ),
        ];
        for (rule, name, prefix, want) in cases {
            assert_eq!(validate_name(rule, name, prefix), want, "{rule:?} {name}");
        }
        assert_eq!(rt("", "Service").name_rule, NameRule::Dns1035Label);
        assert_eq!(rt("", "Namespace").name_rule, NameRule::Label);
        assert_eq!(rt("apps", "Deployment").name_rule, NameRule::Subdomain);
        assert_eq!(
            rt("rbac.authorization.k8s.io", "ClusterRole").name_rule,
            NameRule::PathSegment
        );
    }

    #[test]
    fn qualified_names_and_label_values() {
        assert!(is_qualified_name("app").is_empty());
        assert!(is_qualified_name("example.com/My_Name-1.x").is_empty());
        assert_eq!(
            is_qualified_name("/a"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(is_qualified_name("a/"), vec![
            "name part must be non-empty".to_string(),
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string(),
        ]);
        assert_eq!(
            is_qualified_name("a/b/c"),
            vec![
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ]
        );
        assert_eq!(
            is_qualified_name("Bad_/x")[0]
                .split(' ')
                .take(3)
                .collect::<Vec<_>>(),
            ["prefix", "part", "a"]
        );
        assert_eq!(
            is_qualified_name(&"a".repeat(64)),
            vec![format!("name part {}", max_len_error(63))]
        );
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("v1.2_x").is_empty());
        assert_eq!(is_valid_label_value("-x").len(), 1);
        assert_eq!(
            is_valid_label_value(&"a".repeat(64)),
            vec![max_len_error(63)]
        );
    }

    #[test]
    fn other_formats() {
        assert!(is_config_map_key("key.name").is_empty());
        assert_eq!(is_config_map_key("a b").len(), 1);
        assert_eq!(is_config_map_key(".."), vec!["must not be '..'"]);
        assert_eq!(is_config_map_key("..x"), vec!["must not start with '..'"]);
        assert!(is_valid_port_num(80).is_empty());
        assert_eq!(
            is_valid_port_num(0),
            vec!["must be between 1 and 65535, inclusive"]
        );
        assert!(is_valid_port_name("http").is_empty());
        assert_eq!(
            is_valid_port_name("80"),
            vec!["must contain at least one letter (a-z)"]
        );
        assert_eq!(
            is_valid_port_name("-a--b-"),
            vec![
                "must not contain consecutive hyphens",
                "must not begin or end with a hyphen"
            ]
        );
        assert!(is_valid_percent("25%").is_empty());
        assert_eq!(is_valid_percent("x%").len(), 1);
        assert!(is_relaxed_env_var_name("MY_VAR.1").is_empty());
        assert_eq!(is_relaxed_env_var_name("A=B").len(), 1);
    }

    #[test]
    fn generate_name_uses_upstream_alphabet_and_length() {
        let mut n = 0u64;
        let name = generate_name("web-", || {
            n += 1;
            n
        });
        assert_eq!(name, "web-cdfgh");
        let long = generate_name(&"x".repeat(80), || 0);
        assert_eq!(long.len(), 63);
        assert!(long.ends_with("bbbbb"));
        let name = generate_name("p-", || u64::MAX);
        assert!(
            name[2..]
                .chars()
                .all(|c| GENERATE_NAME_ALPHABET.contains(c))
        );
    }

    #[test]
    fn defaulted_objects_validate_clean() {
        let pod_spec = json!({"containers": [{"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
            "readinessProbe": {"httpGet": {"port": 80}}, "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}}}]});
        let tmpl = json!({"metadata": {"labels": {"app": "web"}}, "spec": pod_spec});
        let meta = json!({"name": "web", "namespace": "default", "uid": "6f1c"});
        let mut job_tmpl = tmpl.clone();
        job_tmpl["spec"]["restartPolicy"] = json!("Never");
        let cases = vec![
            ("", "Pod", json!({"metadata": meta, "spec": pod_spec})),
            (
                "",
                "PodTemplate",
                json!({"metadata": meta, "template": tmpl}),
            ),
            (
                "",
                "ReplicationController",
                json!({"metadata": meta, "spec": {"template": tmpl}}),
            ),
            (
                "",
                "Service",
                json!({"metadata": meta, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}),
            ),
            (
                "",
                "Service",
                json!({"metadata": meta, "spec": {"type": "NodePort", "ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}}),
            ),
            (
                "",
                "Service",
                json!({"metadata": meta, "spec": {"type": "ExternalName", "externalName": "example.com."}}),
            ),
            (
                "",
                "ConfigMap",
                json!({"metadata": meta, "data": {"a.conf": "x"}}),
            ),
            (
                "",
                "Secret",
                json!({"metadata": meta, "stringData": {"password": "x"}}),
            ),
            ("", "Namespace", json!({"metadata": {"name": "team-a"}})),
            (
                "apps",
                "Deployment",
                json!({"metadata": meta, "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": tmpl}}),
            ),
            (
                "apps",
                "ReplicaSet",
                json!({"metadata": meta, "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": tmpl}}),
            ),
            (
                "apps",
                "StatefulSet",
                json!({"metadata": meta, "spec": {"serviceName": "web", "selector": {"matchLabels": {"app": "web"}}, "template": tmpl}}),
            ),
            (
                "apps",
                "DaemonSet",
                json!({"metadata": meta, "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": tmpl}}),
            ),
            (
                "batch",
                "Job",
                json!({"metadata": meta, "spec": {"template": job_tmpl}}),
            ),
            (
                "batch",
                "CronJob",
                json!({"metadata": meta, "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": job_tmpl}}}}),
            ),
        ];
        for (group, kind, obj) in cases {
            let mut o = obj.clone();
            crate::defaults::apply_defaults(group, "v1", kind, &mut o);
            crate::defaults::prepare_for_create(rt(group, kind), &mut o);
            let errs = validate(rt(group, kind), &o, None);
            assert!(
                errs.is_empty(),
                "{group}/{kind}: {}",
                aggregate_message(&errs)
            );
            // An unchanged update is valid too.
            let errs = validate(rt(group, kind), &o, Some(&o));
            assert!(
                errs.is_empty(),
                "{group}/{kind} update: {}",
                aggregate_message(&errs)
            );
        }
    }

    #[test]
    fn whole_object_messages() {
        let svc = json!({"metadata": {"name": "1web", "namespace": "default"}, "spec": {"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}], "sessionAffinity": "None", "internalTrafficPolicy": "Cluster"}});
        let errs = validate(rt("", "Service"), &svc, None);
        assert_eq!(
            invalid_message("Service", "1web", &errs),
            "Service \"1web\" is invalid: metadata.name: Invalid value: \"1web\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
        );
        let pod = json!({"metadata": {"name": "p"}, "spec": {}});
        let msgs: Vec<String> = validate(rt("", "Pod"), &pod, None)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "metadata.namespace: Required value",
                "spec.containers: Required value",
                "spec.restartPolicy: Required value",
                "spec.dnsPolicy: Required value",
            ]
        );
        let node = json!({"metadata": {"name": "n1", "namespace": "x"}});
        let msgs: Vec<String> = validate(rt("", "Node"), &node, None)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            msgs,
            vec!["metadata.namespace: Forbidden: not allowed on this type"]
        );
        let widget = json!({"metadata": {"name": "w"}});
        assert!(validate(&widget_rt(false), &widget, None).is_empty());
        assert_eq!(validate(&widget_rt(true), &widget, None).len(), 1);
    }

    #[test]
    fn validate_never_panics_on_malformed_input() {
        let junk = [
            json!(null),
            json!(1),
            json!("x"),
            json!([]),
            json!({"metadata": 1}),
            json!({"metadata": {"name": 5, "labels": [1], "annotations": "x"}, "spec": 7}),
            json!({"metadata": {"name": "a"}, "spec": {"containers": {"a": 1}, "volumes": 3}}),
            json!({"metadata": {"name": "a"}, "spec": {"containers": [1, null, {"name": 1, "ports": 2}]}}),
            json!({"metadata": {"name": "a"}, "spec": {"selector": 1, "template": 2, "replicas": "x"}}),
            json!({"metadata": {"name": "a"}, "spec": {"ports": [{"port": "x"}, 5]}, "data": 1}),
        ];
        let kinds = [
            ("", "Pod"),
            ("", "Service"),
            ("", "ConfigMap"),
            ("", "Secret"),
            ("", "Namespace"),
            ("", "ReplicationController"),
            ("", "PodTemplate"),
            ("apps", "Deployment"),
            ("apps", "ReplicaSet"),
            ("apps", "StatefulSet"),
            ("apps", "DaemonSet"),
            ("batch", "Job"),
            ("batch", "CronJob"),
        ];
        let widget = widget_rt(true);
        for r in kinds.into_iter().map(|(g, k)| rt(g, k)).chain([&widget]) {
            for j in &junk {
                let _ = validate(r, j, Some(j));
                let _ = validate(r, j, None);
            }
        }
    }
}
