//! ConfigMap, Secret and Namespace validation.

use serde_json::Value;

use super::meta::validate_finalizer_name;
use super::{FieldError, MAX_CONFIG_SIZE, immutable, is_config_map_key, opt_arr, opt_obj};

/// Bytes a base64 string decodes to (the wire form of `[]byte` fields).
fn base64_decoded_len(s: &str) -> usize {
    let trimmed = s.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

fn validate_keys(
    errs: &mut Vec<FieldError>,
    map: Option<&Value>,
    field: &str,
    base64: bool,
) -> usize {
    let mut total = 0;
    if let Some(m) = opt_obj(errs, map, field) {
        for (k, v) in m {
            for msg in is_config_map_key(k) {
                errs.push(FieldError::invalid(
                    format!("{field}[{k}]"),
                    k.as_str(),
                    msg,
                ));
            }
            match v.as_str() {
                Some(s) if base64 => total += base64_decoded_len(s),
                Some(s) => total += s.len(),
                None if v.is_null() => {}
                None => errs.push(FieldError::type_invalid(
                    format!("{field}[{k}]"),
                    v,
                    "string",
                )),
            }
        }
    }
    total
}

/// Once `immutable: true` is stored, the flag and the data are frozen.
fn validate_immutable_update(
    errs: &mut Vec<FieldError>,
    obj: &Value,
    old: &Value,
    fields: &[&str],
) {
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    const MSG: &str = "field is immutable when `immutable` is set";
    if obj.get("immutable").and_then(Value::as_bool) != Some(true) {
        errs.push(FieldError::forbidden("immutable", MSG));
    }
    for f in fields {
        let norm = |v: Option<&Value>| {
            v.filter(|x| !x.is_null())
                .cloned()
                .unwrap_or(Value::Object(Default::default()))
        };
        if norm(obj.get(*f)) != norm(old.get(*f)) {
            errs.push(FieldError::forbidden(*f, MSG));
        }
    }
}

pub(super) fn validate_config_map(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = validate_keys(&mut errs, obj.get("data"), "data", false);
    total += validate_keys(&mut errs, obj.get("binaryData"), "binaryData", true);
    if let (Some(data), Some(bin)) = (
        obj.get("data").and_then(Value::as_object),
        obj.get("binaryData").and_then(Value::as_object),
    ) {
        for k in data.keys().filter(|k| bin.contains_key(*k)) {
            errs.push(FieldError::invalid(
                format!("data[{k}]"),
                k.as_str(),
                "duplicate of key present in binaryData",
            ));
        }
    }
    if total > MAX_CONFIG_SIZE {
        errs.push(FieldError::too_long("", MAX_CONFIG_SIZE));
    }
    if let Some(old) = old {
        validate_immutable_update(&mut errs, obj, old, &["data", "binaryData"]);
    }
    errs
}

pub(super) fn validate_secret(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = validate_keys(&mut errs, obj.get("data"), "data", true);
    // stringData is merged into data on the way in; count it the same way.
    total += validate_keys(&mut errs, obj.get("stringData"), "stringData", false);
    if total > MAX_CONFIG_SIZE {
        errs.push(FieldError::too_long("data", MAX_CONFIG_SIZE));
    }
    let has = |k: &str| {
        obj.get("data").and_then(|d| d.get(k)).is_some()
            || obj.get("stringData").and_then(|d| d.get(k)).is_some()
    };
    let non_empty = |k: &str| {
        let d = obj
            .get("data")
            .and_then(|d| d.get(k))
            .and_then(Value::as_str)
            .unwrap_or("");
        let s = obj
            .get("stringData")
            .and_then(|d| d.get(k))
            .and_then(Value::as_str)
            .unwrap_or("");
        !d.is_empty() || !s.is_empty()
    };
    match obj.get("type").and_then(Value::as_str).unwrap_or("") {
        "kubernetes.io/service-account-token" => {
            let name = super::jv::str_at(
                obj,
                &[
                    "metadata",
                    "annotations",
                    "kubernetes.io/service-account.name",
                ],
            );
            if name.unwrap_or("").is_empty() {
                errs.push(FieldError::required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                ));
            }
        }
        "kubernetes.io/dockercfg" if !has(".dockercfg") => {
            errs.push(FieldError::required("data[.dockercfg]", ""));
        }
        "kubernetes.io/dockerconfigjson" if !has(".dockerconfigjson") => {
            errs.push(FieldError::required("data[.dockerconfigjson]", ""));
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            errs.push(FieldError::required("data[username]", ""));
            errs.push(FieldError::required("data[password]", ""));
        }
        "kubernetes.io/ssh-auth" if !non_empty("ssh-privatekey") => {
            errs.push(FieldError::required("data[ssh-privatekey]", ""));
        }
        "kubernetes.io/tls" => {
            if !has("tls.crt") {
                errs.push(FieldError::required("data[tls.crt]", ""));
            }
            if !has("tls.key") {
                errs.push(FieldError::required("data[tls.key]", ""));
            }
        }
        _ => {}
    }
    if let Some(old) = old {
        immutable(&mut errs, obj.get("type"), old.get("type"), "type");
        validate_immutable_update(&mut errs, obj, old, &["data"]);
    }
    errs
}

pub(super) fn validate_namespace(obj: &Value, _old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = "spec.finalizers";
    for f in opt_arr(
        &mut errs,
        super::jv::get(obj, &["spec", "finalizers"]),
        path,
    ) {
        match f.as_str() {
            Some(name) => errs.extend(validate_finalizer_name(name, path)),
            None => errs.push(FieldError::type_invalid(path, f, "string")),
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msgs(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn config_map_cases() {
        assert!(
            validate_config_map(&json!({"data": {"a.conf": "x", "KEY_1": "y"}}), None).is_empty()
        );
        assert_eq!(
            msgs(validate_config_map(&json!({"data": {"a b": "x"}}), None)),
            vec![
                "data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
            ]
        );
        assert_eq!(
            msgs(validate_config_map(
                &json!({"data": {"k": "x"}, "binaryData": {"k": "eA=="}}),
                None
            )),
            vec!["data[k]: Invalid value: \"k\": duplicate of key present in binaryData"]
        );
        let big = "x".repeat(MAX_CONFIG_SIZE + 1);
        assert_eq!(
            msgs(validate_config_map(&json!({"data": {"k": big}}), None)),
            vec![": Too long: must have at most 1048576 bytes"]
        );
        let old = json!({"immutable": true, "data": {"k": "1"}});
        assert_eq!(
            msgs(validate_config_map(
                &json!({"immutable": true, "data": {"k": "2"}}),
                Some(&old)
            )),
            vec!["data: Forbidden: field is immutable when `immutable` is set"]
        );
        assert!(validate_config_map(&old, Some(&old)).is_empty());
    }

    #[test]
    fn secret_cases() {
        assert!(
            validate_secret(&json!({"type": "Opaque", "data": {"a": "eA=="}}), None).is_empty()
        );
        assert_eq!(
            msgs(validate_secret(
                &json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}}),
                None
            )),
            vec!["data[tls.key]: Required value"]
        );
        assert!(validate_secret(&json!({"type": "kubernetes.io/tls", "stringData": {"tls.crt": "x", "tls.key": "y"}}), None).is_empty());
        assert_eq!(
            msgs(validate_secret(
                &json!({"type": "kubernetes.io/service-account-token"}),
                None
            )),
            vec!["metadata.annotations[kubernetes.io/service-account.name]: Required value"]
        );
        let old = json!({"type": "Opaque"});
        assert_eq!(
            msgs(validate_secret(
                &json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}}),
                Some(&old)
            )),
            vec!["type: Invalid value: \"kubernetes.io/tls\": field is immutable"]
        );
    }

    #[test]
    fn namespace_cases() {
        assert!(
            validate_namespace(&json!({"spec": {"finalizers": ["kubernetes"]}}), None).is_empty()
        );
        assert_eq!(
            msgs(validate_namespace(
                &json!({"spec": {"finalizers": ["custom"]}}),
                None
            )),
            vec![
                "spec.finalizers: Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified"
            ]
        );
        let errs = super::super::validate(
            super::super::tests::rt("", "Namespace"),
            &json!({"metadata": {"name": "my.ns"}}),
            None,
        );
        assert_eq!(
            msgs(errs),
            vec!["metadata.name: Invalid value: \"my.ns\": must not contain dots"]
        );
    }
}
