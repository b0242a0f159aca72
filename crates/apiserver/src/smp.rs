//! A first strategic merge patch: lists of objects merge by their merge key,
//! everything else merges as JSON merge patch. The full algorithm, driven by
//! the per-field schema table, belongs to the patch/apply work (issue 3); the
//! merge keys here are upstream's for the fields kubectl patches most.

use serde_json::{Map, Value};

/// Merge key of a list field by its name (upstream's `patchMergeKey`).
fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    let key = match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "readinessGates" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "hostAliases" => "ip",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "topologySpreadConstraints" => "topologyKey",
        // Container ports merge on containerPort; Service ports on port.
        "ports" => {
            if items.iter().any(|i| i.get("containerPort").is_some()) {
                "containerPort"
            } else {
                "port"
            }
        }
        _ => return None,
    };
    Some(key)
}

/// Primitive lists upstream merges as sets rather than replaces.
fn is_set_of_primitives(field: &str) -> bool {
    matches!(field, "finalizers")
}

pub fn apply(doc: &mut Value, patch: &Value) {
    match (doc, patch) {
        (Value::Object(d), Value::Object(p)) => merge_map(d, p),
        (doc, patch) => *doc = strip_directives(patch.clone()),
    }
}

fn merge_map(doc: &mut Map<String, Value>, patch: &Map<String, Value>) {
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut p = patch.clone();
        p.remove("$patch");
        *doc = match strip_directives(Value::Object(p)) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        return;
    }
    for (k, pv) in patch {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(del)) = (doc.get_mut(field), pv) {
                list.retain(|v| !del.contains(v));
            }
            continue;
        }
        if pv.is_null() {
            doc.remove(k);
            continue;
        }
        match (doc.get_mut(k), pv) {
            (Some(Value::Object(dm)), Value::Object(pm)) => merge_map(dm, pm),
            (Some(Value::Array(dl)), Value::Array(pl)) => merge_list(k, dl, pl),
            (_, pv) => {
                let mut v = strip_directives(pv.clone());
                if let Value::Array(items) = &mut v {
                    items.retain(|i| i.get("$patch").and_then(Value::as_str) != Some("delete"));
                }
                doc.insert(k.clone(), v);
            }
        }
    }
}

fn merge_list(field: &str, doc: &mut Vec<Value>, patch: &[Value]) {
    if is_set_of_primitives(field) {
        for p in patch {
            if !doc.contains(p) {
                doc.push(p.clone());
            }
        }
        return;
    }
    let Some(key) = merge_key(field, patch) else {
        *doc = patch.iter().cloned().map(strip_directives).collect();
        return;
    };
    if patch
        .iter()
        .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *doc = patch
            .iter()
            .filter(|p| p.get("$patch").is_none())
            .cloned()
            .map(strip_directives)
            .collect();
        return;
    }
    for p in patch {
        let Some(kv) = p.get(key) else {
            doc.push(strip_directives(p.clone()));
            continue;
        };
        let pos = doc.iter().position(|d| d.get(key) == Some(kv));
        let delete = p.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                doc.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => apply(&mut doc[i], p),
            (None, false) => doc.push(strip_directives(p.clone())),
        }
    }
}

fn strip_directives(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k, strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(strip_directives).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cases() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "image": "x:1", "ports": [{"containerPort": 80}]},
            {"name": "b", "image": "y:1"}]},
            "metadata": {"labels": {"k": "v", "drop": "me"}, "finalizers": ["f1"]}});
        let table = [
            // kubectl set image: one container changes, the other stays, ports are kept.
            (
                json!({"spec": {"$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [{"name": "a", "image": "x:2"}]}}),
                json!({"spec": {"containers": [
                {"name": "a", "image": "x:2", "ports": [{"containerPort": 80}]},
                {"name": "b", "image": "y:1"}]},
                "metadata": {"labels": {"k": "v", "drop": "me"}, "finalizers": ["f1"]}}),
            ),
            // null deletes a key; $patch: delete removes a list element; finalizers merge as a set.
            (
                json!({"metadata": {"labels": {"drop": null}, "finalizers": ["f2"]},
                "spec": {"containers": [{"name": "b", "$patch": "delete"}]}}),
                json!({"spec": {"containers": [
                {"name": "a", "image": "x:1", "ports": [{"containerPort": 80}]}]},
                "metadata": {"labels": {"k": "v"}, "finalizers": ["f1", "f2"]}}),
            ),
            // $deleteFromPrimitiveList removes values.
            (
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"]}}),
                json!({"spec": {"containers": [
                {"name": "a", "image": "x:1", "ports": [{"containerPort": 80}]},
                {"name": "b", "image": "y:1"}]},
                "metadata": {"labels": {"k": "v", "drop": "me"}, "finalizers": []}}),
            ),
        ];
        for (i, (patch, want)) in table.into_iter().enumerate() {
            let mut doc = pod.clone();
            apply(&mut doc, &patch);
            assert_eq!(doc, want, "case {i}");
        }
    }
}
