//! Request bodies: JSON or YAML in, checked against the kind's schema by decoding
//! through its typed struct (unknown fields are dropped, or rejected with
//! `fieldValidation=Strict`, as upstream's decoder does).

use berth_api::registry::{self, ResourceType};
use serde_json::Value;

use crate::status::{ApiError, ApiResult};

/// Upstream's request body limit.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// Parses a body by its content type (JSON or YAML).
pub fn parse(content_type: &str, body: &[u8]) -> ApiResult<Value> {
    let ct = content_type.split(';').next().unwrap_or("").trim();
    match ct {
        "application/yaml" | "application/apply-patch+yaml" => {
            let text = std::str::from_utf8(body)
                .map_err(|_| ApiError::bad_request("the body is not valid UTF-8"))?;
            // JSON is YAML, but parse it as JSON first for exact numbers and errors.
            if let Ok(v) = serde_json::from_str::<Value>(text) {
                return Ok(v);
            }
            serde_saphyr::from_str::<Value>(text)
                .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))
        }
        ""
        | "application/json"
        | "application/json-patch+json"
        | "application/merge-patch+json"
        | "application/strategic-merge-patch+json"
        | "*/*" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        }),
        "application/vnd.kubernetes.protobuf" => berth_api::protobuf::decode(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding protobuf body: {e}"))),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// Fields a JSON body names twice in one object (`spec.replicas`), which a plain
/// parse silently resolves to the last value. YAML and protobuf bodies give none here.
pub fn duplicate_fields(content_type: &str, body: &[u8]) -> Vec<String> {
    let ct = content_type.split(';').next().unwrap_or("").trim();
    if ct == "application/vnd.kubernetes.protobuf" || ct == "application/yaml" {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    // A body that is not JSON fails later with a clear parse error.
    let _ = serde::de::DeserializeSeed::deserialize(
        Dups {
            path: String::new(),
            out: &mut out,
        },
        &mut de,
    );
    out
}

struct Dups<'a> {
    path: String,
    out: &'a mut Vec<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Dups<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Dups<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Dups {
                path: format!("{}[{i}]", self.path),
                out: &mut *self.out,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.out.push(path.clone());
            }
            map.next_value_seed(Dups {
                path,
                out: &mut *self.out,
            })?;
        }
        Ok(())
    }
}

/// Applies `fieldValidation` to duplicate fields: an error (Strict) or warnings (Warn).
pub fn check_duplicates(
    rt: &ResourceType,
    dups: &[String],
    validation: FieldValidation,
) -> ApiResult<Vec<String>> {
    let list: Vec<String> = dups
        .iter()
        .map(|f| format!("duplicate field \"{f}\""))
        .collect();
    match validation {
        _ if list.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
            rt.kind,
            rt.version,
            rt.kind,
            list.join(", ")
        ))),
        FieldValidation::Warn => Ok(list),
        FieldValidation::Ignore => Ok(Vec::new()),
    }
}

/// `fieldValidation`: what to do with unknown or duplicate fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    pub fn parse(v: Option<&str>) -> ApiResult<Self> {
        match v {
            None | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other}; valid values are Ignore, Warn, Strict"
            ))),
        }
    }
}

/// A decoded object and the warnings decoding produced.
pub struct Decoded {
    pub obj: Value,
    pub warnings: Vec<String>,
}

/// Checks `apiVersion`/`kind` against the endpoint and decodes through the kind's type.
pub fn decode_object(
    rt: &ResourceType,
    body: Value,
    validation: FieldValidation,
) -> ApiResult<Decoded> {
    if !body.is_object() {
        return Err(ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: the body must be a JSON object",
            rt.kind, rt.version, rt.kind
        )));
    }
    let api_version = body
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = body
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut body = body;
    if !api_version.is_empty() || !kind.is_empty() {
        let (g, v) = registry::split_api_version(&api_version);
        if kind != rt.kind || g != rt.group {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                rt.api_version()
            )));
        }
        if v != rt.version {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                rt.api_version()
            )));
        }
    }
    body["apiVersion"] = Value::String(rt.api_version());
    body["kind"] = Value::String(rt.kind.to_string());
    let pruned = match rt.custom {
        Some(cr) => crate::apiextensions::customresource::prune(rt, cr, body.clone())?,
        None => (rt.roundtrip)(body.clone()).map_err(|e| {
            ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: {e}",
                rt.kind, rt.version, rt.kind
            ))
        })?,
    };
    let mut unknown = Vec::new();
    unknown_fields(&body, &pruned, "", &mut unknown);
    let mut pruned = pruned;
    berth_api::protobuf::omit_empty(&mut pruned);
    let mut warnings = Vec::new();
    match validation {
        FieldValidation::Strict if !unknown.is_empty() => {
            let list: Vec<String> = unknown
                .iter()
                .map(|f| format!("unknown field \"{f}\""))
                .collect();
            return Err(ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
                rt.kind,
                rt.version,
                rt.kind,
                list.join(", ")
            )));
        }
        FieldValidation::Warn => {
            warnings.extend(unknown.iter().map(|f| format!("unknown field \"{f}\"")))
        }
        _ => {}
    }
    Ok(Decoded {
        obj: pruned,
        warnings,
    })
}

/// Fields present in `orig` that decoding dropped, as upstream prints them
/// (`spec.template.spec.containers[0].foo`).
fn unknown_fields(orig: &Value, pruned: &Value, path: &str, out: &mut Vec<String>) {
    match (orig, pruned) {
        (Value::Object(o), Value::Object(p)) => {
            for (k, v) in o {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match p.get(k) {
                    Some(pv) => unknown_fields(v, pv, &child, out),
                    // A null for a known optional field decodes to nothing.
                    None if v.is_null() => {}
                    None => out.push(child),
                }
            }
        }
        (Value::Array(o), Value::Array(p)) => {
            for (i, (ov, pv)) in o.iter().zip(p.iter()).enumerate() {
                unknown_fields(ov, pv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy() -> &'static ResourceType {
        registry::lookup("apps", "v1", "deployments").unwrap()
    }

    #[test]
    fn strict_rejects_unknown_fields_with_their_path() {
        let body = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "c", "imagee": "x"}]}}, "foo": 1}});
        let err = decode_object(deploy(), body.clone(), FieldValidation::Strict)
            .err()
            .unwrap();
        assert_eq!(err.code, 400);
        assert!(
            err.message.contains("unknown field \"spec.foo\""),
            "{}",
            err.message
        );
        assert!(
            err.message
                .contains("unknown field \"spec.template.spec.containers[0].imagee\""),
            "{}",
            err.message
        );
        let ok = decode_object(deploy(), body.clone(), FieldValidation::Warn).unwrap();
        assert_eq!(ok.warnings.len(), 2);
        assert!(ok.obj["spec"].get("foo").is_none());
        let ok = decode_object(deploy(), body, FieldValidation::Ignore).unwrap();
        assert!(ok.warnings.is_empty());
    }

    #[test]
    fn wrong_kind_or_version_is_rejected() {
        for (av, kind) in [
            ("v1", "Deployment"),
            ("apps/v1beta1", "Deployment"),
            ("apps/v1", "Pod"),
        ] {
            let err = decode_object(
                deploy(),
                json!({"apiVersion": av, "kind": kind}),
                FieldValidation::Strict,
            )
            .err()
            .unwrap();
            assert_eq!(err.code, 400, "{av} {kind}");
            assert!(
                err.message
                    .contains("does not match the expected API version (apps/v1)")
            );
        }
    }

    #[test]
    fn wrong_types_are_bad_requests() {
        let err = decode_object(
            deploy(),
            json!({"spec": {"replicas": "three"}}),
            FieldValidation::Strict,
        )
        .err()
        .unwrap();
        assert_eq!(err.code, 400);
        assert!(
            err.message
                .starts_with("Deployment in version \"v1\" cannot be handled as a Deployment")
        );
    }

    #[test]
    fn duplicate_fields_with_their_paths() {
        let body = br#"{"metadata":{"name":"a","name":"b"},"spec":{"containers":[{"name":"c","image":"x","image":"y"}]}}"#;
        assert_eq!(
            duplicate_fields("application/json", body),
            ["metadata.name", "spec.containers[0].image"]
        );
        assert!(duplicate_fields("application/json", br#"{"a":{"b":1},"c":{"b":2}}"#).is_empty());
        assert!(duplicate_fields("application/json", b"{nope").is_empty());
        let err = check_duplicates(deploy(), &["spec.replicas".into()], FieldValidation::Strict)
            .err()
            .unwrap();
        assert!(
            err.message
                .ends_with(r#"strict decoding error: duplicate field "spec.replicas""#),
            "{}",
            err.message
        );
        assert_eq!(
            check_duplicates(deploy(), &["x".into()], FieldValidation::Warn).unwrap(),
            [r#"duplicate field "x""#]
        );
    }

    #[test]
    fn yaml_and_json_bodies() {
        assert_eq!(
            parse("application/yaml", b"a: 1\nb: [x]\n").unwrap(),
            json!({"a": 1, "b": ["x"]})
        );
        assert_eq!(
            parse("application/json", br#"{"a":1}"#).unwrap(),
            json!({"a": 1})
        );
        assert_eq!(parse("application/json", b"{nope").err().unwrap().code, 400);
        assert_eq!(parse("application/yaml", b"a: [").err().unwrap().code, 400);
        assert_eq!(parse("text/plain", b"x").err().unwrap().code, 415);
    }
}
