//! How objects sit in the store: one key per object, JSON bytes without
//! `resourceVersion` (the store's mod revision is the resourceVersion).

use berth_api::registry::ResourceType;
use berth_store::KeyValue;
use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::status::{ApiError, ApiResult};

/// `/registry/<group-resource>/` — every object of a resource, all namespaces
/// (the storage resource: versions of one resource share it).
pub fn prefix(rt: &ResourceType) -> String {
    format!("/registry/{}/", rt.storage_group_resource())
}

/// `/registry/<group-resource>/<ns>/` for namespaced lists.
pub fn list_prefix(rt: &ResourceType, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) if rt.namespaced => format!("{}{}/", prefix(rt), ns),
        _ => prefix(rt),
    }
}

pub fn key(rt: &ResourceType, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if rt.namespaced => format!("{}{}/{}", prefix(rt), ns, name),
        _ => format!("{}{}", prefix(rt), name),
    }
}

/// Serialises an object for storage, leaving out `resourceVersion`.
pub fn encode(obj: &Value) -> ApiResult<Bytes> {
    let mut obj = obj.clone();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    serde_json::to_vec(&obj)
        .map(Bytes::from)
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// Reads a stored object, setting `resourceVersion` from the key's mod revision.
pub fn decode(kv: &KeyValue) -> ApiResult<Value> {
    decode_at(&kv.value, kv.mod_revision)
}

pub fn decode_at(bytes: &[u8], revision: i64) -> ApiResult<Value> {
    let mut obj: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::internal(format!("stored object is not valid JSON: {e}")))?;
    set_resource_version(&mut obj, revision);
    Ok(obj)
}

/// The stored bytes with `"resourceVersion"` inserted first in the top-level
/// `metadata`, without decoding the object. `None` if the bytes are not an
/// object with a `metadata` object (the caller then decodes).
pub fn with_resource_version(bytes: &[u8], revision: i64) -> Option<Vec<u8>> {
    let open = top_level_metadata_open(bytes)?;
    let rv = format!("\"resourceVersion\":\"{revision}\"");
    let empty = bytes[open + 1..].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'}');
    let mut out = Vec::with_capacity(bytes.len() + rv.len() + 1);
    out.extend_from_slice(&bytes[..=open]);
    out.extend_from_slice(rv.as_bytes());
    if !empty {
        out.push(b',');
    }
    out.extend_from_slice(&bytes[open + 1..]);
    Some(out)
}

/// Index of the `{` that opens the value of the top-level `"metadata"` key.
fn top_level_metadata_open(bytes: &[u8]) -> Option<usize> {
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    let mut key_start = None;
    let mut last_key: Option<(usize, usize)> = None;
    for (i, &b) in bytes.iter().enumerate() {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => {
                    in_str = false;
                    if depth == 1 {
                        last_key = key_start.map(|s| (s, i));
                    }
                }
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => {
                in_str = true;
                key_start = Some(i + 1);
            }
            b'{' | b'[' => {
                if depth == 1
                    && b == b'{'
                    && let Some((s, e)) = last_key
                    && &bytes[s..e] == b"metadata"
                {
                    return Some(i);
                }
                depth += 1;
            }
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b',' if depth == 1 => last_key = None,
            _ => {}
        }
    }
    None
}

pub fn set_resource_version(obj: &mut Value, revision: i64) {
    if let Some(meta) = meta_mut(obj) {
        meta.insert("resourceVersion".into(), json!(revision.to_string()));
    }
}

/// `metadata` as a map, created if missing or not an object.
pub fn meta_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let o = obj.as_object_mut()?;
    let m = o.entry("metadata").or_insert_with(|| json!({}));
    if !m.is_object() {
        *m = json!({});
    }
    m.as_object_mut()
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

pub fn name(obj: &Value) -> Option<&str> {
    meta_str(obj, "name")
}

pub fn namespace(obj: &Value) -> Option<&str> {
    meta_str(obj, "namespace")
}

pub fn resource_version(obj: &Value) -> Option<&str> {
    meta_str(obj, "resourceVersion")
}

pub fn labels(obj: &Value) -> Map<String, Value> {
    obj.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub fn is_deleting(obj: &Value) -> bool {
    obj.get("metadata")
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|v| !v.is_null())
}

/// RFC 3339 with seconds, as metav1.Time serialises.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The object's content outside metadata and status: a change here bumps generation.
pub fn spec_part(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        for k in ["metadata", "status", "apiVersion", "kind"] {
            m.remove(k);
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_api::registry::lookup;

    #[test]
    fn keys() {
        let pods = lookup("", "v1", "pods").unwrap();
        let nodes = lookup("", "v1", "nodes").unwrap();
        let deploy = lookup("apps", "v1", "deployments").unwrap();
        assert_eq!(key(pods, Some("default"), "x"), "/registry/pods/default/x");
        assert_eq!(key(nodes, None, "n"), "/registry/nodes/n");
        assert_eq!(
            key(deploy, Some("a"), "d"),
            "/registry/deployments.apps/a/d"
        );
        assert_eq!(list_prefix(pods, Some("a")), "/registry/pods/a/");
        assert_eq!(list_prefix(pods, None), "/registry/pods/");
    }

    #[test]
    fn resource_version_spliced_into_bytes() {
        let cases = [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"metadata": "{"}}),
            json!({"data": {"metadata": {"trap": 1}}, "metadata": {}}),
            json!({"kind": "A\"metadata\":{", "metadata": {"labels": {"a": "b"}}}),
        ];
        for obj in cases {
            let bytes = encode(&obj).unwrap();
            let spliced = with_resource_version(&bytes, 42).unwrap();
            let back: Value = serde_json::from_slice(&spliced).unwrap();
            let mut want = obj.clone();
            set_resource_version(&mut want, 42);
            assert_eq!(back, want);
        }
        assert!(with_resource_version(b"[1,2]", 1).is_none());
        assert!(with_resource_version(br#"{"metadata": 5}"#, 1).is_none());
    }

    #[test]
    fn resource_version_is_not_stored() {
        let obj = json!({"metadata": {"name": "x", "resourceVersion": "5"}});
        let bytes = encode(&obj).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("resourceVersion"));
        let back = decode_at(&bytes, 9).unwrap();
        assert_eq!(resource_version(&back), Some("9"));
    }
}
