//! CustomResourceDefinition validation, as upstream's
//! `pkg/apis/apiextensions/validation` (`ValidateCustomResourceDefinition`,
//! `ValidateCustomResourceDefinitionUpdate`) run on a v1 CRD after upstream's
//! v1 defaulting, conversion to the internal version (per-version schemas,
//! subresources, columns and selectable fields that are identical in every
//! version move to `spec.validation`, `spec.subresources`, … and errors are
//! reported there) and the strategy's `PrepareForCreate`/`PrepareForUpdate`
//! (status.storedVersions gains the storage version). CEL rules
//! (`x-kubernetes-validations`) are checked for shape only, not compiled.

use berth_api::validation::{
    FieldError, FieldErrorType, NameRule, go_quote, is_dns1035_label, is_dns1123_subdomain,
    is_valid_port_num, validate_object_meta, validate_object_meta_update,
};
use serde_json::{Map, Value, json};

use crate::defaulting::validate_defaults;
use crate::schema as sch;
use crate::structural::{new_structural_error, validate_structural};
use crate::validation::go_value;

const PRINTER_COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
const COLUMN_FORMATS: &[&str] = &[
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];
const OPENAPI_TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];
const MAX_SELECTABLE_FIELDS: usize = 8;
const VALIDATION_REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];
const KUBE_API_APPROVED: &str = "api-approved.kubernetes.io";

fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| cur.get(k))
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get(v, path).and_then(Value::as_str).unwrap_or("")
}

fn arr_at<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn bool_at(v: &Value, path: &[&str]) -> bool {
    get(v, path).and_then(Value::as_bool).unwrap_or(false)
}

/// The internal form of a v1 CRD's spec, as upstream validates it.
struct Spec<'a> {
    crd: &'a Value,
    versions: &'a [Value],
    /// Schema, subresources, columns and selectable fields hoisted to the
    /// top level because every version has the same.
    top_schema: Option<&'a Value>,
    top_subresources: Option<&'a Value>,
    top_columns: Option<&'a [Value]>,
    top_selectable: Option<&'a [Value]>,
}

fn identical<'a>(versions: &'a [Value], key: &str) -> Option<Option<&'a Value>> {
    let first = versions.first()?.get(key).filter(|v| !v.is_null());
    versions
        .iter()
        .all(|v| v.get(key).filter(|x| !x.is_null()) == first)
        .then_some(first)
}

impl<'a> Spec<'a> {
    fn new(crd: &'a Value) -> Self {
        let versions = arr_at(crd, &["spec", "versions"]);
        let top_schema = identical(versions, "schema").flatten();
        let top_subresources = identical(versions, "subresources").flatten();
        let top_columns = identical(versions, "additionalPrinterColumns")
            .flatten()
            .and_then(Value::as_array)
            .map(Vec::as_slice);
        let top_selectable = identical(versions, "selectableFields")
            .flatten()
            .and_then(Value::as_array)
            .map(Vec::as_slice);
        Spec {
            crd,
            versions,
            top_schema,
            top_subresources,
            top_columns,
            top_selectable,
        }
    }

    fn hoisted(&self, key: &str) -> bool {
        identical(self.versions, key).is_some()
    }

    fn version_subresources(&self, v: &'a Value) -> Option<&'a Value> {
        if self.hoisted("subresources") {
            self.top_subresources
        } else {
            v.get("subresources").filter(|x| !x.is_null())
        }
    }
}

/// Validates a new `apiextensions.k8s.io/v1` CustomResourceDefinition as
/// upstream does on create.
pub fn validate_crd(crd: &Value) -> Vec<FieldError> {
    let crd = with_v1_defaults(crd);
    let mut errs = Vec::new();
    let name = str_at(&crd, &["metadata", "name"]);
    let meta = crd.get("metadata").cloned().unwrap_or(json!({}));
    errs.extend(validate_object_meta(
        &meta,
        false,
        NameRule::Subdomain,
        "metadata",
    ));
    let required = format!(
        "{}.{}",
        str_at(&crd, &["spec", "names", "plural"]),
        str_at(&crd, &["spec", "group"])
    );
    if !name.is_empty() && name != required {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            r#"must be spec.names.plural+"."+spec.group"#,
        ));
    }
    let spec = Spec::new(&crd);
    errs.extend(validate_spec(&spec, true));
    // PrepareForCreate: the status starts empty but for the storage version.
    let stored: Vec<Value> = spec
        .versions
        .iter()
        .filter(|v| bool_at(v, &["storage"]))
        .filter_map(|v| v.get("name").cloned())
        .take(1)
        .collect();
    errs.extend(validate_stored_versions(&stored, spec.versions));
    errs.extend(validate_api_approval(&crd, None));
    errs.extend(validate_preserve_unknown_fields(&crd, None));
    errs
}

/// Validates an update of a CustomResourceDefinition as upstream does:
/// everything [`validate_crd`] checks, plus immutable group and plural, and
/// scope and kind once the old CRD is Established; status.storedVersions
/// comes from the old object (with the new storage version added).
pub fn validate_crd_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let new = with_v1_defaults(new);
    let old = with_v1_defaults(old);
    let mut errs = Vec::new();
    let empty = json!({});
    errs.extend(validate_object_meta_update(
        new.get("metadata").unwrap_or(&empty),
        old.get("metadata").unwrap_or(&empty),
        "metadata",
    ));
    let spec = Spec::new(&new);
    let old_conversion_ok = {
        let v = arr_at(
            &old,
            &["spec", "conversion", "webhook", "conversionReviewVersions"],
        );
        v.is_empty()
            || v.iter()
                .any(|x| matches!(x.as_str(), Some("v1" | "v1beta1")))
    };
    errs.extend(validate_spec(&spec, old_conversion_ok));
    let established = arr_at(&old, &["status", "conditions"])
        .iter()
        .any(|c| str_at(c, &["type"]) == "Established" && str_at(c, &["status"]) == "True");
    let immutable = |errs: &mut Vec<FieldError>, path: &[&str], field: &str| {
        let n = get(&new, path).cloned().unwrap_or(json!(""));
        let o = get(&old, path).cloned().unwrap_or(json!(""));
        if n != o {
            errs.push(FieldError::invalid(
                field,
                go_value(&n),
                "field is immutable",
            ));
        }
    };
    if established {
        immutable(&mut errs, &["spec", "scope"], "spec.scope");
        immutable(&mut errs, &["spec", "names", "kind"], "spec.names.kind");
    }
    immutable(&mut errs, &["spec", "group"], "spec.group");
    immutable(&mut errs, &["spec", "names", "plural"], "spec.names.plural");
    errs.extend(validate_names(
        get(&old, &["status", "acceptedNames"]).unwrap_or(&empty),
        "status.acceptedNames",
    ));
    // PrepareForUpdate: status is the old one; the storage version is added.
    let mut stored: Vec<Value> = arr_at(&old, &["status", "storedVersions"]).to_vec();
    for v in spec.versions {
        if bool_at(v, &["storage"])
            && let Some(n) = v.get("name")
            && !stored.contains(n)
        {
            stored.push(n.clone());
        }
    }
    errs.extend(validate_stored_versions(&stored, spec.versions));
    errs.extend(validate_api_approval(&new, Some(&old)));
    errs.extend(validate_preserve_unknown_fields(&new, Some(&old)));
    errs
}

/// Upstream's v1 defaults (`SetDefaults_CustomResourceDefinitionSpec`,
/// conversion strategy None, service port 443).
fn with_v1_defaults(crd: &Value) -> Value {
    let mut crd = crd.clone();
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return crd;
    };
    let kind = spec
        .get("names")
        .and_then(|n| n.get("kind"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        if names
            .get("singular")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            names.insert("singular".into(), json!(kind.to_lowercase()));
        }
        if names
            .get("listKind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
            && !kind.is_empty()
        {
            names.insert("listKind".into(), json!(format!("{kind}List")));
        }
    }
    let conversion = spec
        .entry("conversion")
        .or_insert_with(|| json!({"strategy": "None"}));
    if let Some(c) = conversion.as_object_mut() {
        c.entry("strategy").or_insert(json!("None"));
        if let Some(svc) = c
            .get_mut("webhook")
            .and_then(|w| w.get_mut("clientConfig"))
            .and_then(|cc| cc.get_mut("service"))
            .and_then(Value::as_object_mut)
        {
            svc.entry("port").or_insert(json!(443));
        }
    }
    crd
}

fn validate_spec(spec: &Spec, require_recognized_review_version: bool) -> Vec<FieldError> {
    let crd = spec.crd;
    let mut errs = Vec::new();
    let group = str_at(crd, &["spec", "group"]);
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else {
        let msgs = is_dns1123_subdomain(group);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid("spec.group", group, msgs.join(",")));
        } else if group.split('.').count() < 2 {
            errs.push(FieldError::invalid(
                "spec.group",
                group,
                "should be a domain with at least one dot",
            ));
        }
    }
    validate_enum(
        &mut errs,
        "spec.scope",
        str_at(crd, &["spec", "scope"]),
        &["Cluster", "Namespaced"],
    );

    if spec
        .top_schema
        .and_then(|s| s.get("openAPIV3Schema"))
        .is_none()
    {
        for (i, v) in spec.versions.iter().enumerate() {
            if get(v, &["schema", "openAPIV3Schema"]).is_none() {
                errs.push(FieldError::required(
                    format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    "schemas are required",
                ));
            }
        }
    }

    let mut storage = 0;
    let mut names: Vec<&str> = Vec::new();
    let mut unique = true;
    for (i, v) in spec.versions.iter().enumerate() {
        let vp = format!("spec.versions[{i}]");
        if bool_at(v, &["storage"]) {
            storage += 1;
        }
        let name = str_at(v, &["name"]);
        if names.contains(&name) {
            unique = false;
        } else {
            names.push(name);
        }
        let msgs = is_dns1035_label(name);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                format!("{vp}.name"),
                name,
                msgs.join(","),
            ));
        }
        let status_enabled = spec
            .version_subresources(v)
            .is_some_and(|s| s.get("status").is_some_and(|x| !x.is_null()));
        errs.extend(validate_version(spec, v, &vp, status_enabled));
    }
    let versions_value = go_value(&Value::Array(spec.versions.to_vec()));
    if !unique {
        errs.push(FieldError::invalid(
            "spec.versions",
            versions_value.clone(),
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            versions_value,
            "must have exactly one version marked as storage version",
        ));
    }

    let n = get(crd, &["spec", "names"]).cloned().unwrap_or(json!({}));
    for (k, p) in [
        ("plural", "spec.names.plural"),
        ("singular", "spec.names.singular"),
        ("kind", "spec.names.kind"),
        ("listKind", "spec.names.listKind"),
    ] {
        if str_at(&n, &[k]).is_empty() {
            errs.push(FieldError::required(p, ""));
        }
    }
    errs.extend(validate_names(&n, "spec.names"));

    if let Some(schema) = spec.top_schema {
        let any_status = spec
            .top_subresources
            .is_some_and(|s| s.get("status").is_some_and(|x| !x.is_null()))
            || (!spec.hoisted("subresources")
                && spec
                    .versions
                    .iter()
                    .any(|v| get(v, &["subresources", "status"]).is_some()));
        errs.extend(validate_validation(schema, any_status, "spec.validation"));
    }
    if let Some(sr) = spec.top_subresources {
        errs.extend(validate_subresources(sr, "spec.subresources"));
    }
    if let Some(cols) = spec.top_columns {
        for (i, c) in cols.iter().enumerate() {
            errs.extend(validate_column(
                c,
                &format!("spec.additionalPrinterColumns[{i}]"),
            ));
        }
    }
    if let Some(fields) = spec.top_selectable
        && !fields.is_empty()
    {
        match spec.top_schema.and_then(|s| s.get("openAPIV3Schema")) {
            None => errs.push(FieldError::invalid(
                "spec.selectableFields",
                "",
                "selectableFields may only be set when validations.schema is included",
            )),
            Some(s) => errs.extend(validate_selectable_fields(
                fields,
                s,
                "spec.selectableFields",
            )),
        }
    }
    errs.extend(validate_conversion(
        get(crd, &["spec", "conversion"]),
        require_recognized_review_version,
    ));
    errs
}

fn validate_enum(errs: &mut Vec<FieldError>, path: &str, value: &str, accepted: &[&str]) {
    if value.is_empty() {
        errs.push(FieldError::required(path, ""));
    } else if !accepted.contains(&value) {
        errs.push(FieldError::not_supported(path, value, accepted));
    }
}

fn validate_version(spec: &Spec, v: &Value, vp: &str, status_enabled: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let deprecated = bool_at(v, &["deprecated"]);
    if let Some(w) = v.get("deprecationWarning").and_then(Value::as_str) {
        let path = format!("{vp}.deprecationWarning");
        if !deprecated {
            errs.push(FieldError::invalid(
                &path,
                w,
                "can only be set for deprecated versions",
            ));
        } else {
            if w.len() > 256 {
                errs.push(FieldError::invalid(
                    &path,
                    w,
                    "must be <= 256 characters long",
                ));
            }
            if w.is_empty() {
                errs.push(FieldError::invalid(&path, w, "must not be an empty string"));
            }
            for (i, c) in w.char_indices() {
                if c.is_control() {
                    errs.push(FieldError::invalid(
                        &path,
                        w,
                        format!("must only contain printable UTF-8 characters; non-printable character found at index {i}"),
                    ));
                    break;
                }
            }
        }
    }
    if !spec.hoisted("schema")
        && let Some(schema) = v.get("schema").filter(|x| !x.is_null())
    {
        errs.extend(validate_validation(
            schema,
            status_enabled,
            &format!("{vp}.schema"),
        ));
    }
    if !spec.hoisted("subresources")
        && let Some(sr) = v.get("subresources").filter(|x| !x.is_null())
    {
        errs.extend(validate_subresources(sr, &format!("{vp}.subresources")));
    }
    if !spec.hoisted("additionalPrinterColumns") {
        for (i, c) in arr_at(v, &["additionalPrinterColumns"]).iter().enumerate() {
            errs.extend(validate_column(
                c,
                &format!("{vp}.additionalPrinterColumns[{i}]"),
            ));
        }
    }
    if !spec.hoisted("selectableFields") {
        let fields = arr_at(v, &["selectableFields"]);
        if !fields.is_empty() {
            let path = format!("{vp}.selectableFields");
            let schema = if spec.hoisted("schema") {
                spec.top_schema
            } else {
                v.get("schema")
            }
            .and_then(|s| s.get("openAPIV3Schema"));
            match schema {
                None => errs.push(FieldError::invalid(
                    path,
                    "",
                    "selectableFields may only be set when version.schema.openAPIV3Schema is not included",
                )),
                Some(s) => errs.extend(validate_selectable_fields(fields, s, &path)),
            }
        }
    }
    errs
}

/// `ValidateCustomResourceDefinitionNames`.
fn validate_names(names: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for k in ["plural", "singular"] {
        let v = str_at(names, &[k]);
        let msgs = is_dns1035_label(v);
        if !v.is_empty() && !msgs.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.{k}"),
                v,
                msgs.join(","),
            ));
        }
    }
    for k in ["kind", "listKind"] {
        let v = str_at(names, &[k]);
        let msgs = is_dns1035_label(&v.to_lowercase());
        if !v.is_empty() && !msgs.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.{k}"),
                v,
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    msgs.join(",")
                ),
            ));
        }
    }
    for (i, s) in arr_at(names, &["shortNames"]).iter().enumerate() {
        let s = s.as_str().unwrap_or("");
        let msgs = is_dns1035_label(s);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.shortNames[{i}]"),
                s,
                msgs.join(","),
            ));
        }
    }
    let kind = str_at(names, &["kind"]);
    if !kind.is_empty() && kind == str_at(names, &["listKind"]) {
        errs.push(FieldError::invalid(
            format!("{path}.listKind"),
            kind,
            "kind and listKind may not be the same",
        ));
    }
    for (i, s) in arr_at(names, &["categories"]).iter().enumerate() {
        let s = s.as_str().unwrap_or("");
        let msgs = is_dns1035_label(s);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.categories[{i}]"),
                s,
                msgs.join(","),
            ));
        }
    }
    errs
}

/// `ValidateCustomResourceColumnDefinition`.
fn validate_column(c: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if str_at(c, &["name"]).is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    let ty = str_at(c, &["type"]);
    let types = format!("must be one of {}", PRINTER_COLUMN_TYPES.join(","));
    if ty.is_empty() {
        errs.push(FieldError::required(format!("{path}.type"), types));
    } else if !PRINTER_COLUMN_TYPES.contains(&ty) {
        errs.push(FieldError::invalid(format!("{path}.type"), ty, types));
    }
    let format = str_at(c, &["format"]);
    if !format.is_empty() && !COLUMN_FORMATS.contains(&format) {
        errs.push(FieldError::invalid(
            format!("{path}.format"),
            format,
            format!("must be one of {}", COLUMN_FORMATS.join(",")),
        ));
    }
    let jp = str_at(c, &["jsonPath"]);
    if jp.is_empty() {
        errs.push(FieldError::required(format!("{path}.JSONPath"), ""));
    } else {
        errs.extend(validate_simple_json_path(jp, &format!("{path}.JSONPath")));
    }
    errs
}

fn validate_simple_json_path(s: &str, path: &str) -> Vec<FieldError> {
    if s.is_empty() {
        vec![FieldError::invalid(path, s, "must not be empty")]
    } else if !s.starts_with('.') {
        vec![FieldError::invalid(
            path,
            s,
            "must be a simple json path starting with .",
        )]
    } else {
        Vec::new()
    }
}

/// `ValidateCustomResourceDefinitionSubresources`.
fn validate_subresources(sr: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(scale) = sr.get("scale").filter(|x| !x.is_null()) else {
        return errs;
    };
    for (key, prefix, msg) in [
        (
            "specReplicasPath",
            ".spec.",
            "should be a json path under .spec",
        ),
        (
            "statusReplicasPath",
            ".status.",
            "should be a json path under .status",
        ),
    ] {
        let p = format!("{path}.scale.{key}");
        let v = str_at(scale, &[key]);
        if v.is_empty() {
            errs.push(FieldError::required(p, ""));
        } else {
            let e = validate_simple_json_path(v, &p);
            if !e.is_empty() {
                errs.extend(e);
            } else if !v.starts_with(prefix) {
                errs.push(FieldError::invalid(p, v, msg));
            }
        }
    }
    let ls = str_at(scale, &["labelSelectorPath"]);
    if !ls.is_empty() {
        let p = format!("{path}.scale.labelSelectorPath");
        let e = validate_simple_json_path(ls, &p);
        if !e.is_empty() {
            errs.extend(e);
        } else if !ls.starts_with(".spec.") && !ls.starts_with(".status.") {
            errs.push(FieldError::invalid(
                p,
                ls,
                "should be a json path under either .spec or .status",
            ));
        }
    }
    errs
}

/// `ValidateCustomResourceSelectableFields` (paths resolved through the
/// structural schema as `cel.ValidFieldPath` does, without array notation).
fn validate_selectable_fields(fields: &[Value], schema: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let p = format!("{path}[{i}].jsonPath");
        let jp = str_at(f, &["jsonPath"]);
        if jp.is_empty() {
            errs.push(FieldError::required(p, ""));
            continue;
        }
        let (segments, found) = match resolve_field_path(jp, schema) {
            Ok(x) => x,
            Err(e) => {
                errs.push(FieldError::invalid(
                    p,
                    jp,
                    format!("is an invalid path: {e}"),
                ));
                continue;
            }
        };
        if segments.first().is_some_and(|s| s == "metadata") {
            errs.push(FieldError::invalid(
                &p,
                jp,
                "must not point to fields in metadata",
            ));
        }
        if !matches!(
            sch::str_field(found, "type"),
            "string" | "boolean" | "integer"
        ) {
            errs.push(FieldError::invalid(
                &p,
                jp,
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        let key = segments.join(".");
        if seen.contains(&key) {
            errs.push(FieldError::duplicate(p, jp));
        } else {
            seen.push(key);
        }
    }
    if seen.len() > MAX_SELECTABLE_FIELDS {
        errs.push(FieldError {
            kind: FieldErrorType::TooMany,
            field: path.to_string(),
            value: Some(json!(seen.len())),
            detail: format!("must have at most {MAX_SELECTABLE_FIELDS} items"),
        });
    }
    errs
}

/// A `.a.b['c']` field path resolved through the schema's properties and
/// additionalProperties; the segments and the schema found.
fn resolve_field_path<'a>(jp: &str, schema: &'a Value) -> Result<(Vec<String>, &'a Value), String> {
    let mut rest = jp;
    let mut cur = schema;
    let mut segments = Vec::new();
    if rest.is_empty() {
        return Err("expected [ or . but got end of input".into());
    }
    while !rest.is_empty() {
        let (name, next) = if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            (r[..end].to_string(), &r[end..])
        } else if let Some(r) = rest.strip_prefix("['") {
            let Some(end) = r.find("']") else {
                return Err("unexpected end of JSON path".into());
            };
            (r[..end].to_string(), &r[end + 2..])
        } else {
            return Err(format!("expected [ or . but got: {rest}"));
        };
        if name.is_empty() {
            return Err("unexpected end of JSON path".into());
        }
        let next_schema = match sch::property(cur, &name) {
            Some(p) => p,
            None => match sch::additional_structural(cur) {
                Some(Some(a)) => a,
                _ => {
                    return Err(format!(
                        "does not refer to a valid field: {}",
                        go_quote(&name)
                    ));
                }
            },
        };
        segments.push(name);
        cur = next_schema;
        rest = next;
    }
    Ok((segments, cur))
}

/// `validateCustomResourceDefinitionValidation` for one `schema`
/// (`CustomResourceValidation`) at `path` (`spec.validation` or
/// `spec.versions[i].schema`).
fn validate_validation(v: &Value, status_enabled: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(schema) = v.get("openAPIV3Schema").filter(|x| !x.is_null()) else {
        return errs;
    };
    let sp = format!("{path}.openAPIV3Schema");
    if status_enabled && let Some(m) = schema.as_object() {
        const ALLOWED: &[&str] = &[
            "description",
            "type",
            "format",
            "title",
            "maximum",
            "exclusiveMaximum",
            "minimum",
            "exclusiveMinimum",
            "maxLength",
            "minLength",
            "pattern",
            "maxItems",
            "minItems",
            "uniqueItems",
            "multipleOf",
            "required",
            "items",
            "properties",
            "externalDocs",
            "example",
            "x-kubernetes-preserve-unknown-fields",
            "x-kubernetes-validations",
        ];
        let ty = sch::str_field(schema, "type");
        if !ty.is_empty() && ty != "object" {
            errs.push(FieldError::invalid(
                format!("{sp}.type"),
                ty,
                r#"only "object" is allowed as the type at the root of the schema if the status subresource is enabled"#,
            ));
        } else if m
            .iter()
            .any(|(k, x)| !ALLOWED.contains(&k.as_str()) && !is_go_zero(x))
        {
            errs.push(FieldError::invalid(
                &sp,
                go_value(schema),
                "only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled",
            ));
        }
    }
    if sch::nullable(schema) {
        errs.push(FieldError::forbidden(
            format!("{sp}.nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let mut init_errs = Vec::new();
    if let Some(e) = new_structural_error(schema, 0) {
        init_errs.push(FieldError::invalid(&sp, "", e));
    } else {
        let structural = validate_structural(schema, &sp);
        if !structural.is_empty() {
            errs.extend(structural);
        } else {
            errs.extend(validate_defaults(schema, &sp));
        }
    }
    let mut w = OpenApiWalk { errs: Vec::new() };
    w.walk(schema, &sp, Ssv::default(), true, 0);
    errs.extend(w.errs);
    if errs.is_empty() {
        errs.extend(init_errs);
    }
    errs
}

fn is_go_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Number(_) => false,
    }
}

/// upstream's `specStandardValidatorV3` state.
#[derive(Clone, Default)]
struct Ssv {
    forbid_defaults: Option<String>,
    inside_resource_meta: bool,
}

struct OpenApiWalk {
    errs: Vec<FieldError>,
}

impl OpenApiWalk {
    /// `ValidateCustomResourceDefinitionOpenAPISchema` without CEL compilation.
    fn walk(&mut self, s: &Value, path: &str, ssv: Ssv, is_root: bool, depth: usize) {
        if depth > crate::MAX_DEPTH {
            return;
        }
        let Some(m) = s.as_object() else { return };
        self.standard(s, m, path, &ssv);
        if sch::bool_field(s, "uniqueItems") {
            self.errs.push(FieldError::forbidden(
                format!("{path}.uniqueItems"),
                "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            ));
        }
        let props = sch::properties(s);
        match sch::additional(s) {
            sch::Additional::None => {}
            additional => {
                let has_props = props.is_some_and(|p| !p.is_empty());
                if has_props && !matches!(additional, sch::Additional::Bool(true)) {
                    self.errs.push(FieldError::forbidden(
                        format!("{path}.additionalProperties"),
                        "additionalProperties and properties are mutual exclusive",
                    ));
                }
                if let sch::Additional::Schema(sub) = additional {
                    let mut sub_ssv = ssv.clone();
                    if ssv.inside_resource_meta {
                        sub_ssv.forbid_defaults =
                            Some("inside additionalProperties applying to object metadata".into());
                    }
                    self.walk(
                        sub,
                        &format!("{path}.additionalProperties"),
                        sub_ssv,
                        false,
                        depth + 1,
                    );
                }
            }
        }
        if let Some(props) = props {
            for (k, sub) in props {
                let mut sub_ssv = ssv.clone();
                if (is_root || sch::embedded_resource(s))
                    && matches!(k.as_str(), "metadata" | "kind" | "apiVersion")
                {
                    sub_ssv.inside_resource_meta = true;
                    if is_root {
                        sub_ssv.forbid_defaults = Some(format!("in top-level {k}"));
                    }
                }
                self.walk(
                    sub,
                    &format!("{path}.properties[{k}]"),
                    sub_ssv,
                    false,
                    depth + 1,
                );
            }
        }
        if let Some(not) = m.get("not").filter(|x| x.is_object()) {
            self.walk(not, &format!("{path}.not"), ssv.clone(), false, depth + 1);
        }
        for key in ["allOf", "oneOf", "anyOf"] {
            for (i, sub) in sch::schema_list(s, key).iter().enumerate() {
                self.walk(
                    sub,
                    &format!("{path}.{key}[{i}]"),
                    ssv.clone(),
                    false,
                    depth + 1,
                );
            }
        }
        match m.get("items") {
            Some(items @ Value::Object(_)) => {
                self.walk(
                    items,
                    &format!("{path}.items"),
                    ssv.clone(),
                    false,
                    depth + 1,
                );
            }
            Some(Value::Array(a)) => {
                for (i, sub) in a.iter().enumerate() {
                    self.walk(
                        sub,
                        &format!("{path}.items[{i}]"),
                        ssv.clone(),
                        false,
                        depth + 1,
                    );
                }
            }
            _ => {}
        }
        self.extensions(s, m, path);
    }

    /// `specStandardValidatorV3.validate`.
    fn standard(&mut self, s: &Value, m: &Map<String, Value>, path: &str, ssv: &Ssv) {
        let ty = sch::str_field(s, "type");
        if !ty.is_empty() && !OPENAPI_TYPES.contains(&ty) {
            self.errs.push(FieldError::not_supported(
                format!("{path}.type"),
                ty,
                OPENAPI_TYPES,
            ));
        }
        if m.contains_key("default")
            && let Some(reason) = &ssv.forbid_defaults
        {
            self.errs.push(FieldError::forbidden(
                format!("{path}.default"),
                format!("must not be set {reason}"),
            ));
        }
        let forbid = |errs: &mut Vec<FieldError>, key: &str, detail: &str| {
            errs.push(FieldError::forbidden(format!("{path}.{key}"), detail));
        };
        if !sch::str_field(s, "id").is_empty() {
            forbid(&mut self.errs, "id", "id is not supported");
        }
        if m.get("additionalItems").is_some_and(|x| !x.is_null()) {
            forbid(
                &mut self.errs,
                "additionalItems",
                "additionalItems is not supported",
            );
        }
        if m.get("patternProperties")
            .and_then(Value::as_object)
            .is_some_and(|x| !x.is_empty())
        {
            forbid(
                &mut self.errs,
                "patternProperties",
                "patternProperties is not supported",
            );
        }
        if m.get("definitions")
            .and_then(Value::as_object)
            .is_some_and(|x| !x.is_empty())
        {
            forbid(
                &mut self.errs,
                "definitions",
                "definitions is not supported",
            );
        }
        if m.get("dependencies").is_some_and(|x| !x.is_null()) {
            forbid(
                &mut self.errs,
                "dependencies",
                "dependencies is not supported",
            );
        }
        if m.get("$ref").is_some_and(|x| !x.is_null()) {
            forbid(&mut self.errs, "$ref", "$ref is not supported");
        }
        if ty == "null" {
            forbid(
                &mut self.errs,
                "type",
                "type cannot be set to null, use nullable as an alternative",
            );
        }
        if m.get("items")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
        {
            forbid(
                &mut self.errs,
                "items",
                "items must be a schema object and not an array",
            );
        }
        if ssv.inside_resource_meta && sch::embedded_resource(s) {
            forbid(
                &mut self.errs,
                "x-kubernetes-embedded-resource",
                "must not be used inside of resource meta",
            );
        }
    }

    /// The x-kubernetes-* extension rules of
    /// `ValidateCustomResourceDefinitionOpenAPISchema`.
    fn extensions(&mut self, s: &Value, m: &Map<String, Value>, path: &str) {
        let errs = &mut self.errs;
        let ty = sch::str_field(s, "type");
        if m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
            errs.push(FieldError::invalid(
                format!("{path}.x-kubernetes-preserve-unknown-fields"),
                false,
                "must be true or undefined",
            ));
        }
        if let Some(map_type) = m.get("x-kubernetes-map-type").and_then(Value::as_str) {
            if ty != "object" {
                let msg = "must be object if x-kubernetes-map-type is specified";
                if ty.is_empty() {
                    errs.push(FieldError::required(format!("{path}.type"), msg));
                } else {
                    errs.push(FieldError::invalid(format!("{path}.type"), ty, msg));
                }
            }
            if map_type != "atomic" && map_type != "granular" {
                errs.push(FieldError::not_supported(
                    format!("{path}.x-kubernetes-map-type"),
                    map_type,
                    &["atomic", "granular"],
                ));
            }
        }
        let list_type = sch::list_type(s);
        let items = sch::items(s);
        if let Some(lt) = list_type {
            if ty != "array" {
                let msg = "must be array if x-kubernetes-list-type is specified";
                if ty.is_empty() {
                    errs.push(FieldError::required(format!("{path}.type"), msg));
                } else {
                    errs.push(FieldError::invalid(format!("{path}.type"), ty, msg));
                }
            } else if lt == "set"
                && let Some(is) = items
            {
                match sch::str_field(is, "type") {
                    "array" => {
                        if let Some(ilt) = sch::list_type(is)
                            && ilt != "atomic"
                        {
                            errs.push(FieldError::invalid(
                                format!("{path}.items.x-kubernetes-list-type"),
                                ilt,
                                "must be atomic as item of a list with x-kubernetes-list-type=set",
                            ));
                        }
                    }
                    "object" => {
                        let mt = is.get("x-kubernetes-map-type").and_then(Value::as_str);
                        if mt != Some("atomic") {
                            errs.push(FieldError::invalid(
                                format!("{path}.items.x-kubernetes-map-type"),
                                go_value(is.get("x-kubernetes-list-type").unwrap_or(&Value::Null)),
                                "must be atomic as item of a list with x-kubernetes-list-type=set",
                            ));
                        }
                    }
                    _ => {}
                }
            }
            if !matches!(lt, "atomic" | "set" | "map") {
                errs.push(FieldError::not_supported(
                    format!("{path}.x-kubernetes-list-type"),
                    lt,
                    &["atomic", "set", "map"],
                ));
            }
        }
        let keys = sch::list_map_keys(s);
        if !keys.is_empty() {
            match list_type {
                None => errs.push(FieldError::required(
                    format!("{path}.x-kubernetes-list-type"),
                    "must be map if x-kubernetes-list-map-keys is non-empty",
                )),
                Some(lt) if lt != "map" => errs.push(FieldError::invalid(
                    format!("{path}.x-kubernetes-list-type"),
                    lt,
                    "must be map if x-kubernetes-list-map-keys is non-empty",
                )),
                _ => {}
            }
        }
        let keys_value = go_value(m.get("x-kubernetes-list-map-keys").unwrap_or(&Value::Null));
        if list_type == Some("map") {
            if keys.is_empty() {
                errs.push(FieldError::required(
                    format!("{path}.x-kubernetes-list-map-keys"),
                    "must not be empty if x-kubernetes-list-type is map",
                ));
            }
            match m.get("items") {
                None | Some(Value::Null) => errs.push(FieldError::required(
                    format!("{path}.items"),
                    "must have a schema if x-kubernetes-list-type is map",
                )),
                Some(Value::Array(a)) => errs.push(FieldError::invalid(
                    format!("{path}.items"),
                    Value::Array(a.clone()),
                    "must only have a single schema if x-kubernetes-list-type is map",
                )),
                _ => {}
            }
            if let Some(is) = items {
                let ity = sch::str_field(is, "type");
                if ity != "object" {
                    errs.push(FieldError::invalid(
                        format!("{path}.items.type"),
                        ity,
                        "must be object if parent array's x-kubernetes-list-type is map",
                    ));
                } else {
                    let mut seen: Vec<&str> = Vec::new();
                    for k in &keys {
                        match sch::property(is, k) {
                            Some(p) => {
                                if matches!(sch::str_field(p, "type"), "array" | "object") {
                                    errs.push(FieldError::invalid(
                                        format!("{path}.items.properties[{k}].type"),
                                        ity,
                                        "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                    ));
                                }
                            }
                            None => errs.push(FieldError::invalid(
                                format!("{path}.x-kubernetes-list-map-keys"),
                                keys_value.clone(),
                                "entries must all be names of item properties",
                            )),
                        }
                        if seen.contains(k) {
                            errs.push(FieldError::invalid(
                                format!("{path}.x-kubernetes-list-map-keys"),
                                keys_value.clone(),
                                "must not contain duplicate entries",
                            ));
                        }
                        seen.push(k);
                    }
                }
            }
        }
        // validateMapListKeysMapSet
        if let (Some(is), Some(lt @ ("set" | "map"))) = (items, list_type) {
            if sch::nullable(is) {
                errs.push(FieldError::forbidden(
                    format!("{path}.items.nullable"),
                    format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
                ));
            }
            if lt == "map" {
                let required = sch::string_list(is, "required");
                for k in &keys {
                    let Some(p) = sch::property(is, k) else {
                        continue;
                    };
                    if !required.contains(k) && p.get("default").is_none_or(Value::is_null) {
                        errs.push(FieldError::required(
                            format!("{path}.items.properties[{k}].default"),
                            "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                        ));
                    }
                    if sch::nullable(p) {
                        errs.push(FieldError::forbidden(
                            format!("{path}.items.properties[{k}].nullable"),
                            "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                        ));
                    }
                }
            }
        }
        // x-kubernetes-validations shape (rules are not compiled).
        for (i, rule) in sch::schema_list(s, "x-kubernetes-validations")
            .iter()
            .enumerate()
        {
            let rp = format!("{path}.x-kubernetes-validations[{i}]");
            let r = str_at(rule, &["rule"]);
            let msg = str_at(rule, &["message"]);
            let newline = |x: &str| x.contains('\n') || x.contains('\r');
            if r.trim().is_empty() {
                errs.push(FieldError::required(
                    format!("{rp}.rule"),
                    "rule is not specified",
                ));
            } else if !msg.is_empty() && msg.trim().is_empty() {
                errs.push(FieldError::invalid(
                    format!("{rp}.message"),
                    msg,
                    "message must be non-empty if specified",
                ));
            } else if newline(msg.trim()) {
                errs.push(FieldError::invalid(
                    format!("{rp}.message"),
                    msg,
                    "message must not contain line breaks",
                ));
            } else if newline(r.trim()) && msg.trim().is_empty() {
                errs.push(FieldError::required(
                    format!("{rp}.message"),
                    "message must be specified if rule contains line breaks",
                ));
            }
            let me = str_at(rule, &["messageExpression"]);
            if !me.is_empty() && me.trim().is_empty() {
                errs.push(FieldError::required(
                    format!("{rp}.messageExpression"),
                    "messageExpression must be non-empty if specified",
                ));
            }
            if let Some(reason) = rule.get("reason").and_then(Value::as_str)
                && !VALIDATION_REASONS.contains(&reason)
            {
                errs.push(FieldError::not_supported(
                    format!("{rp}.reason"),
                    reason,
                    VALIDATION_REASONS,
                ));
            }
            let fp = str_at(rule, &["fieldPath"]);
            if !fp.is_empty() && fp.trim().is_empty() {
                errs.push(FieldError::invalid(
                    format!("{rp}.fieldPath"),
                    fp,
                    "fieldPath must be non-empty if specified",
                ));
            }
            if newline(fp) {
                errs.push(FieldError::invalid(
                    format!("{rp}.fieldPath"),
                    fp,
                    "fieldPath must not contain line breaks",
                ));
            }
        }
    }
}

/// `ValidateCustomResourceDefinitionStoredVersions`.
fn validate_stored_versions(stored: &[Value], versions: &[Value]) -> Vec<FieldError> {
    let path = "status.storedVersions";
    if stored.is_empty() {
        return vec![FieldError::invalid(
            path,
            json!([]),
            "must have at least one stored version",
        )];
    }
    let mut errs = Vec::new();
    let mut remaining: Vec<(usize, &str)> = stored
        .iter()
        .enumerate()
        .map(|(i, v)| (i, v.as_str().unwrap_or("")))
        .collect();
    for v in versions {
        let name = str_at(v, &["name"]);
        let found = remaining.iter().position(|(_, s)| *s == name);
        if bool_at(v, &["storage"]) && found.is_none() {
            errs.push(FieldError::invalid(
                path,
                Value::Array(stored.to_vec()),
                format!("must have the storage version {name}"),
            ));
        }
        if let Some(i) = found {
            remaining.retain(|(_, s)| *s != name);
            let _ = i;
        }
    }
    for (i, v) in remaining {
        errs.push(FieldError::invalid(
            format!("{path}[{i}]"),
            v,
            format!("missing from spec.versions; {v} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {v} and removes {v} from status.storedVersions"),
        ));
    }
    errs
}

/// `validateAPIApproval` for the protected `*.k8s.io` and `*.kubernetes.io` groups.
fn validate_api_approval(new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let group = str_at(new, &["spec", "group"]);
    let protected = group == "k8s.io"
        || group.ends_with(".k8s.io")
        || group == "kubernetes.io"
        || group.ends_with(".kubernetes.io");
    if !protected {
        return Vec::new();
    }
    #[derive(PartialEq)]
    enum State {
        Missing,
        Bypassed,
        Approved,
        Invalid,
    }
    let state = |crd: &Value| -> (State, String) {
        let a = str_at(crd, &["metadata", "annotations", KUBE_API_APPROVED]);
        if a.is_empty() {
            (
                State::Missing,
                format!(
                    "protected groups must have approval annotation {}, see https://github.com/kubernetes/enhancements/pull/1111",
                    go_quote(KUBE_API_APPROVED)
                ),
            )
        } else if a.starts_with("unapproved") {
            (State::Bypassed, String::new())
        } else if a.split_once("://").is_some_and(|(scheme, rest)| {
            !scheme.is_empty() && !rest.is_empty() && !rest.starts_with('/')
        }) {
            (State::Approved, String::new())
        } else {
            (
                State::Invalid,
                format!(
                    "protected groups must have approval annotation {} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111",
                    go_quote(KUBE_API_APPROVED)
                ),
            )
        }
    };
    let (new_state, reason) = state(new);
    if let Some(old) = old
        && state(old).0 == new_state
    {
        return Vec::new();
    }
    let field = format!("metadata.annotations[{KUBE_API_APPROVED}]");
    match new_state {
        State::Missing => vec![FieldError::required(field, reason)],
        State::Invalid => vec![FieldError::invalid(
            field,
            str_at(new, &["metadata", "annotations", KUBE_API_APPROVED]),
            reason,
        )],
        _ => Vec::new(),
    }
}

fn validate_preserve_unknown_fields(new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    if old.is_some_and(|o| bool_at(o, &["spec", "preserveUnknownFields"])) {
        return Vec::new();
    }
    if bool_at(new, &["spec", "preserveUnknownFields"]) {
        return vec![FieldError::invalid(
            "spec.preserveUnknownFields",
            true,
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        )];
    }
    Vec::new()
}

/// `validateCustomResourceConversion` over the v1 `spec.conversion`
/// (reported with the internal field names, `webhookClientConfig` and
/// `conversionReviewVersions`, as upstream).
fn validate_conversion(conversion: Option<&Value>, require_recognized: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(c) = conversion.filter(|x| !x.is_null()) else {
        return errs;
    };
    let strategy = str_at(c, &["strategy"]);
    validate_enum(
        &mut errs,
        "spec.conversion.strategy",
        strategy,
        &["None", "Webhook"],
    );
    let cc = get(c, &["webhook", "clientConfig"]).filter(|x| !x.is_null());
    let versions = arr_at(c, &["webhook", "conversionReviewVersions"]);
    if strategy == "Webhook" {
        let cp = "spec.conversion.webhookClientConfig";
        match cc {
            None => errs.push(FieldError::required(
                cp,
                "required when strategy is set to Webhook",
            )),
            Some(cc) => {
                let url = cc.get("url").and_then(Value::as_str);
                let svc = cc.get("service").filter(|x| !x.is_null());
                match (url, svc) {
                    (Some(u), None) => errs.extend(validate_webhook_url(u, &format!("{cp}.url"))),
                    (None, Some(s)) => {
                        errs.extend(validate_webhook_service(s, &format!("{cp}.service")))
                    }
                    _ => errs.push(FieldError::required(
                        cp,
                        "exactly one of url or service is required",
                    )),
                }
            }
        }
        let vp = "spec.conversion.conversionReviewVersions";
        if versions.is_empty() {
            errs.push(FieldError::required(vp, ""));
        } else {
            let mut seen: Vec<&str> = Vec::new();
            let mut accepted = false;
            for (i, v) in versions.iter().enumerate() {
                let v = v.as_str().unwrap_or("");
                if seen.contains(&v) {
                    errs.push(FieldError::invalid(
                        format!("{vp}[{i}]"),
                        v,
                        "duplicate version",
                    ));
                    continue;
                }
                seen.push(v);
                for m in is_dns1035_label(v) {
                    errs.push(FieldError::invalid(format!("{vp}[{i}]"), v, m));
                }
                if v == "v1" || v == "v1beta1" {
                    accepted = true;
                }
            }
            if require_recognized && !accepted {
                errs.push(FieldError::invalid(
                    vp,
                    Value::Array(versions.to_vec()),
                    "must include at least one of v1, v1beta1",
                ));
            }
        }
    } else {
        if cc.is_some() {
            errs.push(FieldError::forbidden(
                "spec.conversion.webhookClientConfig",
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !versions.is_empty() {
            errs.push(FieldError::forbidden(
                "spec.conversion.conversionReviewVersions",
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
    errs
}

/// k8s.io/apiserver `webhook.ValidateWebhookURL` with https forced.
fn validate_webhook_url(u: &str, path: &str) -> Vec<FieldError> {
    let Some((scheme, rest)) = u.split_once("://") else {
        return vec![FieldError::invalid(path, "", "host must be specified")];
    };
    let mut errs = Vec::new();
    if scheme != "https" {
        errs.push(FieldError::invalid(
            path,
            scheme,
            "'https' is the only allowed URL scheme",
        ));
    }
    let (before_frag, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (before_query, query) = before_frag.split_once('?').unwrap_or((before_frag, ""));
    let authority = before_query.split('/').next().unwrap_or("");
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if host.is_empty() {
        errs.push(FieldError::invalid(path, host, "host must be specified"));
    }
    if let Some(user) = user {
        errs.push(FieldError::invalid(
            path,
            user,
            "user information is not permitted in the URL",
        ));
    }
    if !fragment.is_empty() {
        errs.push(FieldError::invalid(
            path,
            fragment,
            "fragments are not permitted in the URL",
        ));
    }
    if !query.is_empty() {
        errs.push(FieldError::invalid(
            path,
            query,
            "query parameters are not permitted in the URL",
        ));
    }
    errs
}

/// k8s.io/apiserver `webhook.ValidateWebhookService`.
fn validate_webhook_service(s: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if str_at(s, &["name"]).is_empty() {
        errs.push(FieldError::required(
            format!("{path}.name"),
            "service name is required",
        ));
    }
    if str_at(s, &["namespace"]).is_empty() {
        errs.push(FieldError::required(
            format!("{path}.namespace"),
            "service namespace is required",
        ));
    }
    let port = s.get("port").and_then(Value::as_i64).unwrap_or(443);
    let msgs = is_valid_port_num(port);
    if !msgs.is_empty() {
        errs.push(FieldError::invalid(
            format!("{path}.port"),
            port,
            format!("port is not valid: {}", msgs.join(", ")),
        ));
    }
    if let Some(p) = s.get("path").and_then(Value::as_str)
        && p != "/"
        && !p.starts_with('/')
    {
        errs.push(FieldError::invalid(
            format!("{path}.path"),
            p,
            "must start with a '/'",
        ));
    }
    errs
}

#[cfg(test)]
mod tests;
