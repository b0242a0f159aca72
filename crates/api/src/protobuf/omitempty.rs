//! Go's `encoding/json` drops a field tagged `omitempty` when it holds its zero
//! value ("", 0, false, an empty list or map, a nil pointer). Upstream decodes
//! every request into Go structs, so what it stores and returns never carries
//! those; a client that sends `annotations: {}` or `stdin: false` reads them
//! back without. The field table knows each field's tags, so the same rule
//! applies here to objects decoded through k8s-openapi (which keeps them).

use serde_json::{Map, Value};

use super::schema::{Card, Message, OMITEMPTY, POINTER, Special, Ty, message, message_for_kind};

/// Removes the fields Go would omit, throughout a top-level object.
pub fn omit_empty(obj: &mut Value) {
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let (Some(msg), Some(map)) = (message_for_kind(&api_version, &kind), obj.as_object_mut()) {
        walk(map, msg, 0);
    }
}

/// Deep enough for any real object; guards against hostile nesting.
const MAX_DEPTH: usize = 64;

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

fn walk(map: &mut Map<String, Value>, msg: &Message, depth: usize) {
    if depth > MAX_DEPTH || msg.special != Special::None {
        return;
    }
    for field in msg.fields {
        if field.json.is_empty() {
            // `json:",inline"`: the embedded message's fields sit in this object.
            if let Ty::Msg(i) = field.ty {
                walk(map, message(i), depth + 1);
            }
            continue;
        }
        let Some(value) = map.get_mut(field.json) else {
            continue;
        };
        let omit = field.has(OMITEMPTY)
            && match (field.card, field.ty) {
                // A non-pointer struct is never "empty" to Go.
                (Card::One, Ty::Msg(_)) => value.is_null() && field.has(POINTER),
                (Card::One, _) if field.has(POINTER) => value.is_null(),
                _ => is_zero(value),
            };
        if omit {
            map.remove(field.json);
            continue;
        }
        let Ty::Msg(i) = field.ty else { continue };
        let child = message(i);
        match (field.card, value) {
            (Card::One, Value::Object(m)) => walk(m, child, depth + 1),
            (Card::Rep, Value::Array(items)) => {
                for item in items {
                    if let Value::Object(m) = item {
                        walk(m, child, depth + 1);
                    }
                }
            }
            (Card::Map(_), Value::Object(entries)) => {
                for v in entries.values_mut() {
                    if let Value::Object(m) = v {
                        walk(m, child, depth + 1);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn drops_what_go_omits_and_keeps_the_rest() {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "annotations": {}, "labels": {"a": "b"}, "finalizers": []},
            "spec": {
                "hostNetwork": false,
                "enableServiceLinks": false,
                "nodeName": "",
                "containers": [{"name": "c", "image": "x", "stdin": false, "env": [], "resources": {},
                    "securityContext": {"runAsUser": 0, "privileged": false}}],
                "volumes": [{"name": "v", "emptyDir": {}}],
            },
            "status": {},
        });
        omit_empty(&mut pod);
        assert_eq!(
            pod,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "labels": {"a": "b"}},
                "spec": {
                    // *bool and *int64 keep their zero values; plain bools and strings don't.
                    "enableServiceLinks": false,
                    "containers": [{"name": "c", "image": "x", "resources": {},
                        "securityContext": {"runAsUser": 0, "privileged": false}}],
                    "volumes": [{"name": "v", "emptyDir": {}}],
                },
                "status": {},
            })
        );
    }

    #[test]
    fn unknown_kinds_are_left_alone() {
        let mut v = json!({"apiVersion": "example.com/v1", "kind": "Thing", "spec": {"a": ""}});
        let before = v.clone();
        omit_empty(&mut v);
        assert_eq!(v, before);
    }
}
