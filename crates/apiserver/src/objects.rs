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

/// The strings of a JSON array (non-strings skipped); empty when absent.
pub fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
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

/// Serialises an object for storage, leaving out `resourceVersion` (without
/// copying the object: writes are the API server's hottest path).
pub fn encode(obj: &Value) -> ApiResult<Bytes> {
    serde_json::to_vec(&WithoutResourceVersion(obj))
        .map(Bytes::from)
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// Serialises like the object, less `metadata.resourceVersion`.
struct WithoutResourceVersion<'a>(&'a Value);

impl serde::Serialize for WithoutResourceVersion<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Some(top) = self.0.as_object() else {
            return self.0.serialize(s);
        };
        let mut map = s.serialize_map(Some(top.len()))?;
        for (k, v) in top {
            match v {
                Value::Object(meta) if k == "metadata" => {
                    map.serialize_entry(k, &MetaWithout(meta))?;
                }
                _ => map.serialize_entry(k, v)?,
            }
        }
        map.end()
    }
}

struct MetaWithout<'a>(&'a Map<String, Value>);

impl serde::Serialize for MetaWithout<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let fields = self.0.iter().filter(|(k, _)| *k != "resourceVersion");
        let mut map = s.serialize_map(None)?;
        for (k, v) in fields {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// What selectors can look at, decoded from stored bytes without building the
/// whole object: `metadata.name`, `metadata.namespace`, `metadata.labels`,
/// every scalar at the top level or one object down (`spec.nodeName`,
/// `status.phase`, `involvedObject.kind`, `type`), and `status.podIPs`. Field
/// and label selectors read nothing else (see `berth_api::selector::field_value`);
/// a watch filters each event with it instead of decoding the object.
pub fn selectable(bytes: &[u8]) -> Option<Value> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = Project::Top.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(v)
}

/// Where [`selectable`]'s projection is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Project {
    /// The object itself.
    Top,
    /// A top-level field's value; `metadata` and `status` keep one list or map whole.
    Field { metadata: bool, status: bool },
    /// One level further: scalars only.
    Leaf,
}

impl<'de> serde::de::DeserializeSeed<'de> for Project {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Project {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        // No selector reads into a list (the kept ones are decoded whole).
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Value::Null)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let v = match self {
                Project::Top => map.next_value_seed(Project::Field {
                    metadata: key == "metadata",
                    status: key == "status",
                })?,
                Project::Field { metadata, status } => {
                    if (metadata && key == "labels") || (status && key == "podIPs") {
                        map.next_value::<Value>()?
                    } else {
                        map.next_value_seed(Project::Leaf)?
                    }
                }
                Project::Leaf => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    continue;
                }
            };
            out.insert(key, v);
        }
        if self == Project::Leaf {
            return Ok(Value::Null);
        }
        Ok(Value::Object(out))
    }
}

/// Reads a stored object, setting `resourceVersion` from the key's mod revision.
pub fn decode(kv: &KeyValue) -> ApiResult<Value> {
    decode_at(&kv.value, kv.mod_revision)
}

pub fn decode_at(bytes: &[u8], revision: i64) -> ApiResult<Value> {
    // A value encryption at rest could not decrypt: this object fails, not its list's others.
    if let Some(reason) = crate::encryption::unreadable(bytes) {
        return Err(ApiError::internal(reason));
    }
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
    fn selectors_see_the_same_fields_in_the_projection() {
        use berth_api::selector::field_value;
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web", "tier": "x"},
                "annotations": {"a": "b"}, "managedFields": [{"manager": "m"}], "resourceVersion": "3"},
            "spec": {"nodeName": "n1", "restartPolicy": "Always", "schedulerName": "s",
                "serviceAccountName": "sa", "hostNetwork": true,
                "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                "podIPs": [{"ip": "10.0.0.2"}], "nominatedNodeName": "n2",
                "conditions": [{"type": "Ready"}], "succeeded": 3, "replicas": 2}});
        let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u",
                "apiVersion": "v1", "resourceVersion": "7", "fieldPath": "spec.containers{c}"},
            "reason": "Started", "reportingComponent": "kubelet", "source": {"component": "kubelet", "host": "h"},
            "type": "Normal", "reportingController": "k",
            "regarding": {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u", "apiVersion": "v1",
                "resourceVersion": "7", "fieldPath": "spec.containers{c}"}});
        let misc = json!({"metadata": {"name": "m", "namespace": "ns"}, "type": "Opaque",
            "spec": {"unschedulable": true, "clusterIP": "10.43.0.9", "type": "NodePort", "signerName": "x"},
            "status": {"phase": "Active", "replicas": 4, "succeeded": 1}});
        // Every field upstream lets a selector name for these kinds.
        let cases: &[(&Value, (&str, &str))] = &[
            (&pod, ("Pod", "")),
            (&event, ("Event", "")),
            (&event, ("Event", "events.k8s.io")),
            (&misc, ("Node", "")),
            (&misc, ("Namespace", "")),
            (&misc, ("Secret", "")),
            (&misc, ("ReplicationController", "")),
            (&misc, ("Service", "")),
            (&misc, ("Job", "batch")),
            (&misc, ("CertificateSigningRequest", "certificates.k8s.io")),
            (&misc, ("ConfigMap", "")),
        ];
        for (obj, kind) in cases {
            let fields = berth_api::selector::selectable_fields(*kind);
            let bytes = encode(obj).unwrap();
            let projected = selectable(&bytes).unwrap();
            assert_eq!(labels(&projected), labels(obj));
            for f in fields {
                let want = field_value(*kind, obj, f);
                if *f != "status.podIPs" {
                    assert!(
                        want.as_deref().is_some_and(|v| !v.is_empty()),
                        "{f} has a value"
                    );
                }
                assert_eq!(field_value(*kind, &projected, f), want, "{kind:?} {f}");
            }
        }
        // What no selector reads is left out.
        let projected = selectable(&encode(&pod).unwrap()).unwrap();
        assert!(
            projected["spec"]
                .get("containers")
                .is_some_and(Value::is_null)
        );
        assert!(
            projected["metadata"]
                .get("managedFields")
                .is_some_and(Value::is_null)
        );
        assert!(
            projected["metadata"]
                .get("annotations")
                .is_some_and(Value::is_null)
        );
        assert!(selectable(b"{not json").is_none());
    }

    #[test]
    fn encoding_leaves_out_only_the_resource_version() {
        let obj = json!({"kind": "A", "metadata": {"name": "x", "resourceVersion": "5", "labels": {"resourceVersion": "1"}}, "spec": {"resourceVersion": 2}});
        let back: Value = serde_json::from_slice(&encode(&obj).unwrap()).unwrap();
        assert_eq!(
            back,
            json!({"kind": "A", "metadata": {"name": "x", "labels": {"resourceVersion": "1"}}, "spec": {"resourceVersion": 2}})
        );
        assert_eq!(&encode(&json!([1])).unwrap()[..], b"[1]");
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
