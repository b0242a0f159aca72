//! Table-driven strategic merge patch cases on real types, each modelled on a case of
//! upstream's `apimachinery/pkg/util/strategicpatch` suite (the patch as the server
//! receives it applied to the live object, and upstream's result), translated to
//! built-in fields with the same patch strategy: `mergingList` → `containers` (merge key
//! `name`; `value` → `image`, `other` → `workingDir`), a nested merging list →
//! `volumeMounts` (merge key `mountPath`), `nonMergingList` → `args`, `mergingIntList`
//! → `metadata.finalizers`, `retainKeysMap` → `spec.strategy`, and
//! `retainKeysMergingList` → `volumes`.

use super::*;
use serde_json::json;

fn run(kind: (&str, &str, &str), original: Value, patch: Value) -> Value {
    let (g, v, k) = kind;
    let api_version = if g.is_empty() {
        v.to_string()
    } else {
        format!("{g}/{v}")
    };
    let mut doc = json!({"apiVersion": api_version, "kind": k, "metadata": {"name": "x"}});
    if let (Value::Object(d), Value::Object(o)) = (&mut doc, original) {
        for (key, val) in o {
            if key == "metadata" {
                if let (Some(Value::Object(m)), Value::Object(om)) = (d.get_mut("metadata"), val) {
                    m.extend(om);
                }
            } else {
                d.insert(key, val);
            }
        }
    }
    apply(&mut doc, &patch, g, v, k).unwrap_or_else(|e| panic!("patch failed: {e}"));
    let Value::Object(mut m) = doc else {
        panic!("not an object")
    };
    m.shift_remove("apiVersion");
    m.shift_remove("kind");
    if let Some(Value::Object(meta)) = m.get_mut("metadata") {
        meta.shift_remove("name");
        if meta.is_empty() {
            m.shift_remove("metadata");
        }
    }
    Value::Object(m)
}

const POD: (&str, &str, &str) = ("", "v1", "Pod");
const DEPLOY: (&str, &str, &str) = ("apps", "v1", "Deployment");

/// (upstream case it follows, original pod spec, patch of the spec, expected spec)
#[test]
fn merging_list_cases() {
    let cases: Vec<(&str, Value, Value, Value)> = vec![
        (
            "add field to map in merging list",
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "2", "image": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}], "containers": [{"name": "1", "image": "1"}]}),
            json!({"containers": [{"name": "1", "workingDir": "a", "image": "1"}, {"name": "2", "image": "2", "workingDir": "b"}]}),
        ),
        (
            "add field to map in merging list with conflict",
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "3", "image": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}],
                "containers": [{"name": "1", "image": "1"}, {"name": "2", "image": "2"}]}),
            json!({"containers": [{"name": "1", "workingDir": "a", "image": "1"}, {"name": "2", "image": "2"},
                {"name": "3", "image": "2", "workingDir": "b"}]}),
        ),
        (
            "add duplicate field to map in merging list (empty patch)",
            json!({"containers": [{"name": "1", "image": "1", "workingDir": "a"}, {"name": "2", "image": "2"}]}),
            json!({}),
            json!({"containers": [{"name": "1", "image": "1", "workingDir": "a"}, {"name": "2", "image": "2"}]}),
        ),
        (
            "add duplicate field to map in merging list with conflict",
            json!({"containers": [{"name": "1", "image": "1", "workingDir": "a"}, {"name": "2", "image": "3", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}], "containers": [{"name": "2", "image": "2"}]}),
            json!({"containers": [{"name": "1", "image": "1", "workingDir": "a"}, {"name": "2", "image": "2", "workingDir": "b"}]}),
        ),
        (
            "replace map field value in merging list",
            json!({"containers": [{"name": "1", "image": "1", "workingDir": "a"}, {"name": "2", "image": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}], "containers": [{"name": "1", "image": "a"}]}),
            json!({"containers": [{"name": "1", "image": "a", "workingDir": "a"}, {"name": "2", "image": "2", "workingDir": "b"}]}),
        ),
        (
            "delete map from merging list",
            json!({"containers": [{"name": "1"}, {"name": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "2"}], "containers": [{"name": "1", "$patch": "delete"}]}),
            json!({"containers": [{"name": "2", "workingDir": "b"}]}),
        ),
        (
            "delete missing map from merging list",
            json!({"containers": [{"name": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "2"}], "containers": [{"name": "1", "$patch": "delete"}]}),
            json!({"containers": [{"name": "2", "workingDir": "b"}]}),
        ),
        (
            "delete missing map from merging list with conflict",
            json!({"containers": [{"name": "3", "workingDir": "a"}]}),
            json!({"$setElementOrder/containers": [{"name": "2"}],
                "containers": [{"name": "2"}, {"name": "1", "$patch": "delete"}]}),
            json!({"containers": [{"name": "2"}, {"name": "3", "workingDir": "a"}]}),
        ),
        (
            "add map and delete map from merging list",
            json!({"containers": [{"name": "1"}, {"name": "2", "workingDir": "b"}, {"name": "4", "workingDir": "c"}]}),
            json!({"$setElementOrder/containers": [{"name": "2"}, {"name": "3"}],
                "containers": [{"name": "3"}, {"name": "1", "$patch": "delete"}]}),
            json!({"containers": [{"name": "2", "workingDir": "b"}, {"name": "4", "workingDir": "c"}, {"name": "3"}]}),
        ),
        (
            "add map and delete map from merging list with conflict",
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "4", "workingDir": "c"}]}),
            json!({"$setElementOrder/containers": [{"name": "2"}, {"name": "3"}],
                "containers": [{"name": "2"}, {"name": "3"}, {"name": "1", "$patch": "delete"}]}),
            json!({"containers": [{"name": "4", "workingDir": "c"}, {"name": "2"}, {"name": "3"}]}),
        ),
        (
            "delete field from map in merging list",
            json!({"containers": [{"name": "1", "image": "1", "workingDir": "a"}, {"name": "2", "image": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}], "containers": [{"name": "1", "image": null}]}),
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "2", "image": "2", "workingDir": "b"}]}),
        ),
        (
            "delete missing field from map in merging list",
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "2", "image": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}], "containers": [{"name": "1", "image": null}]}),
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "2", "image": "2", "workingDir": "b"}]}),
        ),
        (
            "delete missing field from map in merging list with conflict",
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}],
                "containers": [{"name": "1", "image": null}, {"name": "2", "image": "2"}]}),
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "2", "workingDir": "b", "image": "2"}]}),
        ),
        (
            "replace non merging list nested in merging list",
            json!({"containers": [{"name": "1", "workingDir": "a", "args": ["1", "2"]}, {"name": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}], "containers": [{"name": "1", "args": ["1b"]}]}),
            json!({"containers": [{"name": "1", "workingDir": "a", "args": ["1b"]}, {"name": "2", "workingDir": "b"}]}),
        ),
        (
            "replace non merging list nested in merging list with deletion conflict",
            json!({"containers": [{"name": "1", "workingDir": "a", "args": ["2"]}, {"name": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}], "containers": [{"name": "1", "args": ["1"]}]}),
            json!({"containers": [{"name": "1", "workingDir": "a", "args": ["1"]}, {"name": "2", "workingDir": "b"}]}),
        ),
        (
            "add field to map in merging list nested in merging list",
            json!({"containers": [{"name": "1", "workingDir": "a", "volumeMounts": [{"mountPath": "/1"}, {"mountPath": "/2", "name": "2"}]},
                {"name": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}],
                "containers": [{"name": "1", "$setElementOrder/volumeMounts": [{"mountPath": "/1"}, {"mountPath": "/2"}],
                    "volumeMounts": [{"mountPath": "/1", "name": "1"}]}]}),
            json!({"containers": [{"name": "1", "workingDir": "a", "volumeMounts": [{"mountPath": "/1", "name": "1"}, {"mountPath": "/2", "name": "2"}]},
                {"name": "2", "workingDir": "b"}]}),
        ),
        (
            "add field to map in merging list nested in merging list with value conflict",
            json!({"containers": [{"name": "1", "workingDir": "a", "volumeMounts": [
                    {"mountPath": "/1", "name": "a", "subPath": "c"}, {"mountPath": "/2", "name": "b", "subPath": "d"}]},
                {"name": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}],
                "containers": [{"name": "1", "$setElementOrder/volumeMounts": [{"mountPath": "/1"}, {"mountPath": "/2"}],
                    "volumeMounts": [{"mountPath": "/1", "name": "1"}, {"mountPath": "/2", "name": "2"}]}]}),
            json!({"containers": [{"name": "1", "workingDir": "a", "volumeMounts": [
                    {"mountPath": "/1", "name": "1", "subPath": "c"}, {"mountPath": "/2", "name": "2", "subPath": "d"}]},
                {"name": "2", "workingDir": "b"}]}),
        ),
        (
            "add field to map in merging list nested in merging list with deletion conflict",
            json!({"containers": [{"name": "1", "workingDir": "a", "volumeMounts": [{"mountPath": "/2", "name": "2", "subPath": "d"}]},
                {"name": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}],
                "containers": [{"name": "1", "$setElementOrder/volumeMounts": [{"mountPath": "/1"}, {"mountPath": "/2"}],
                    "volumeMounts": [{"mountPath": "/1", "name": "1"}]}]}),
            json!({"containers": [{"name": "1", "workingDir": "a", "volumeMounts": [
                    {"mountPath": "/1", "name": "1"}, {"mountPath": "/2", "name": "2", "subPath": "d"}]},
                {"name": "2", "workingDir": "b"}]}),
        ),
        (
            "nested merging list with deletion conflict and reversed order",
            json!({"containers": [{"name": "1", "workingDir": "a", "volumeMounts": [{"mountPath": "/2", "name": "2", "subPath": "d"}]},
                {"name": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}],
                "containers": [{"name": "1", "$setElementOrder/volumeMounts": [{"mountPath": "/2"}, {"mountPath": "/1"}],
                    "volumeMounts": [{"mountPath": "/1", "name": "1"}]}]}),
            json!({"containers": [{"name": "1", "workingDir": "a", "volumeMounts": [
                    {"mountPath": "/2", "name": "2", "subPath": "d"}, {"mountPath": "/1", "name": "1"}]},
                {"name": "2", "workingDir": "b"}]}),
        ),
        (
            "add an item in a list and preserve order",
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "2", "image": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "3"}, {"name": "1"}, {"name": "2"}],
                "containers": [{"name": "3", "image": "3"}]}),
            json!({"containers": [{"name": "3", "image": "3"}, {"name": "1", "workingDir": "a"}, {"name": "2", "image": "2", "workingDir": "b"}]}),
        ),
        (
            "add multiple items in a list and preserve order",
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "2", "image": "2", "workingDir": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "4"}, {"name": "2"}, {"name": "3"}],
                "containers": [{"name": "4", "image": "4"}, {"name": "3", "image": "3"}]}),
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "4", "image": "4"},
                {"name": "2", "image": "2", "workingDir": "b"}, {"name": "3", "image": "3"}]}),
        ),
        (
            "delete an item in a list and preserve order",
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "2", "image": "2", "workingDir": "b"}, {"name": "3", "image": "3"}]}),
            json!({"$setElementOrder/containers": [{"name": "2"}, {"name": "1"}],
                "containers": [{"name": "3", "$patch": "delete"}]}),
            json!({"containers": [{"name": "2", "image": "2", "workingDir": "b"}, {"name": "1", "workingDir": "a"}]}),
        ),
        (
            "change an item in a list and preserve order",
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "2", "image": "2", "workingDir": "b"}, {"name": "3", "image": "3"}]}),
            json!({"$setElementOrder/containers": [{"name": "2"}, {"name": "3"}, {"name": "1"}],
                "containers": [{"name": "3", "image": "x"}]}),
            json!({"containers": [{"name": "2", "image": "2", "workingDir": "b"}, {"name": "3", "image": "x"}, {"name": "1", "workingDir": "a"}]}),
        ),
        (
            "add and delete an item in a list and preserve order",
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "2", "image": "2", "workingDir": "b"}, {"name": "3", "image": "3"}]}),
            json!({"$setElementOrder/containers": [{"name": "4"}, {"name": "2"}, {"name": "1"}],
                "containers": [{"name": "4", "image": "4"}, {"name": "3", "$patch": "delete"}]}),
            json!({"containers": [{"name": "4", "image": "4"}, {"name": "2", "image": "2", "workingDir": "b"}, {"name": "1", "workingDir": "a"}]}),
        ),
        (
            "set elements order in a list",
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "3", "image": "3"}, {"name": "4", "image": "4"}, {"name": "2", "image": "2"}]}),
            json!({"$setElementOrder/containers": [{"name": "4"}, {"name": "2"}, {"name": "3"}, {"name": "1"}]}),
            json!({"containers": [{"name": "4", "image": "4"}, {"name": "2", "image": "2"}, {"name": "3", "image": "3"}, {"name": "1", "workingDir": "a"}]}),
        ),
        (
            "set elements order in a list with server-only items",
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "3", "image": "3"}, {"name": "4", "image": "4"}, {"name": "2", "image": "2"}, {"name": "9"}]}),
            json!({"$setElementOrder/containers": [{"name": "4"}, {"name": "2"}, {"name": "3"}, {"name": "1"}]}),
            json!({"containers": [{"name": "4", "image": "4"}, {"name": "2", "image": "2"}, {"name": "3", "image": "3"}, {"name": "1", "workingDir": "a"}, {"name": "9"}]}),
        ),
        (
            "set elements order in a list with server-only items 2",
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "2", "image": "2"}, {"name": "9"}, {"name": "3", "image": "3"}, {"name": "4", "image": "4"}]}),
            json!({"$setElementOrder/containers": [{"name": "2"}, {"name": "1"}, {"name": "4"}, {"name": "3"}]}),
            json!({"containers": [{"name": "2", "image": "2"}, {"name": "1", "workingDir": "a"}, {"name": "9"}, {"name": "4", "image": "4"}, {"name": "3", "image": "3"}]}),
        ),
        (
            "set elements order in a list with server-only items 3",
            json!({"containers": [{"name": "1", "workingDir": "a"}, {"name": "2", "image": "2"}, {"name": "7"}, {"name": "9"}, {"name": "8"},
                {"name": "3", "image": "3"}, {"name": "4", "image": "4"}]}),
            json!({"$setElementOrder/containers": [{"name": "2"}, {"name": "1"}, {"name": "4"}, {"name": "3"}]}),
            json!({"containers": [{"name": "2", "image": "2"}, {"name": "1", "workingDir": "a"}, {"name": "7"}, {"name": "9"}, {"name": "8"},
                {"name": "4", "image": "4"}, {"name": "3", "image": "3"}]}),
        ),
        (
            "nested patch merge with empty list",
            json!({"containers": [{"name": "hello2"}]}),
            json!({"$setElementOrder/containers": [{"name": "hello"}, {"name": "doesntexist"}],
                "containers": [{"name": "hello"}]}),
            json!({"containers": [{"name": "hello"}, {"name": "hello2"}]}),
        ),
        (
            "an empty patch list merges nothing into a merging list",
            json!({"containers": [{"name": "1", "volumeMounts": [{"mountPath": "/a"}]}]}),
            json!({"containers": [{"name": "1", "volumeMounts": []}]}),
            json!({"containers": [{"name": "1", "volumeMounts": [{"mountPath": "/a"}]}]}),
        ),
        (
            "hostAliases merge by ip",
            json!({"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}]}),
            json!({"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["b"]}, {"ip": "10.0.0.2", "hostnames": ["c"]}]}),
            json!({"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["b"]}, {"ip": "10.0.0.2", "hostnames": ["c"]}]}),
        ),
        (
            "env item switches from value to valueFrom",
            json!({"containers": [{"name": "a", "env": [{"name": "E", "value": "1"}]}]}),
            json!({"containers": [{"name": "a", "env": [{"name": "E", "value": null,
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]}),
            json!({"containers": [{"name": "a", "env": [{"name": "E", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]}),
        ),
        (
            "null removes a whole merging list",
            json!({"containers": [{"name": "a"}], "initContainers": [{"name": "i"}]}),
            json!({"initContainers": null}),
            json!({"containers": [{"name": "a"}]}),
        ),
        (
            "$patch: replace with no items empties a merging list",
            json!({"initContainers": [{"name": "i"}, {"name": "j"}]}),
            json!({"initContainers": [{"$patch": "replace"}]}),
            json!({"initContainers": []}),
        ),
        (
            "nested struct merges per field (securityContext)",
            json!({"securityContext": {"runAsUser": 1, "runAsGroup": 2}}),
            json!({"securityContext": {"runAsUser": 3, "fsGroup": 4}}),
            json!({"securityContext": {"runAsUser": 3, "runAsGroup": 2, "fsGroup": 4}}),
        ),
    ];
    for (name, original, patch, want) in cases {
        let got = run(POD, json!({"spec": original}), json!({"spec": patch}));
        assert_eq!(got, json!({"spec": want}), "{name}");
    }
}

/// (upstream case it follows, original finalizers, patch of the metadata, expected
/// finalizers)
#[test]
fn primitive_list_cases() {
    let cases: Vec<(&str, Value, Value, Value)> = vec![
        (
            "delete items in lists of scalars",
            json!(["1", "2", "3", "4"]),
            json!({"$setElementOrder/finalizers": ["1", "2"], "$deleteFromPrimitiveList/finalizers": ["3"]}),
            json!(["1", "2", "4"]),
        ),
        (
            "delete all duplicate items in lists of scalars",
            json!(["1", "2", "3", "3", "4"]),
            json!({"$setElementOrder/finalizers": ["1", "2"], "$deleteFromPrimitiveList/finalizers": ["3"]}),
            json!(["1", "2", "4"]),
        ),
        (
            "add and delete items in lists of scalars",
            json!(["1", "2", "3", "4"]),
            json!({"$setElementOrder/finalizers": ["1", "2", "4"], "$deleteFromPrimitiveList/finalizers": ["3"]}),
            json!(["1", "2", "4"]),
        ),
        (
            "merge lists of scalars",
            json!(["1", "2", "4"]),
            json!({"$setElementOrder/finalizers": ["1", "2", "3"], "finalizers": ["3"]}),
            json!(["1", "2", "3", "4"]),
        ),
        (
            "add an item in a list of primitives and preserve order",
            json!(["1", "4", "2"]),
            json!({"$setElementOrder/finalizers": ["3", "1", "2"], "finalizers": ["3"]}),
            json!(["3", "1", "4", "2"]),
        ),
        (
            "delete an item in a list of primitives and preserve order",
            json!(["1", "2", "3"]),
            json!({"$setElementOrder/finalizers": ["2", "1"], "$deleteFromPrimitiveList/finalizers": ["3"]}),
            json!(["2", "1"]),
        ),
        (
            "add an item in a int list and preserve order",
            json!(["1", "2"]),
            json!({"$setElementOrder/finalizers": ["3", "1", "2"], "finalizers": ["3"]}),
            json!(["3", "1", "2"]),
        ),
        (
            "add multiple items in a int list and preserve order",
            json!(["1", "2"]),
            json!({"$setElementOrder/finalizers": ["1", "4", "2", "3"], "finalizers": ["4", "3"]}),
            json!(["1", "4", "2", "3"]),
        ),
        (
            "add and delete an item in a int list and preserve order",
            json!(["1", "2", "3"]),
            json!({"$setElementOrder/finalizers": ["4", "2", "1"], "finalizers": ["4"],
                "$deleteFromPrimitiveList/finalizers": ["3"]}),
            json!(["4", "2", "1"]),
        ),
        (
            "set elements order in a int list",
            json!(["1", "3", "4", "2"]),
            json!({"$setElementOrder/finalizers": ["4", "2", "3", "1"]}),
            json!(["4", "2", "3", "1"]),
        ),
        (
            "set elements order in a int list with server-only items",
            json!(["1", "3", "4", "2", "9"]),
            json!({"$setElementOrder/finalizers": ["4", "2", "3", "1"]}),
            json!(["4", "2", "3", "1", "9"]),
        ),
        (
            "set elements order in a int list with server-only items 2",
            json!(["1", "2", "9", "3", "4"]),
            json!({"$setElementOrder/finalizers": ["2", "1", "4", "3"]}),
            json!(["2", "1", "9", "4", "3"]),
        ),
        (
            "set elements order in a int list with server-only items 3",
            json!(["1", "2", "7", "9", "8", "3", "4"]),
            json!({"$setElementOrder/finalizers": ["2", "1", "4", "3"]}),
            json!(["2", "1", "7", "9", "8", "4", "3"]),
        ),
        (
            "$deleteFromPrimitiveList of nonexistent item",
            json!(["a", "b"]),
            json!({"$deleteFromPrimitiveList/finalizers": ["c"]}),
            json!(["a", "b"]),
        ),
        (
            "$deleteFromPrimitiveList on empty primitive list",
            json!([]),
            json!({"$deleteFromPrimitiveList/finalizers": ["c"]}),
            json!([]),
        ),
    ];
    for (name, original, patch, want) in cases {
        let got = run(
            POD,
            json!({"metadata": {"finalizers": original}}),
            json!({"metadata": patch}),
        );
        assert_eq!(got, json!({"metadata": {"finalizers": want}}), "{name}");
    }
}

/// `$retainKeys` on a struct (`Deployment.spec.strategy`, `patchStrategy: retainKeys`)
/// and on the items of a merging list (`volumes`, `patchStrategy: merge,retainKeys`).
#[test]
fn retain_keys_cases() {
    let strategy: Vec<(&str, Value, Value, Value)> = vec![
        (
            "retainKeys map should clear defaulted field",
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}),
            json!({"$retainKeys": ["type"], "type": "Recreate"}),
            json!({"type": "Recreate"}),
        ),
        (
            "retainKeys map adds a field",
            json!({"type": "RollingUpdate"}),
            json!({"$retainKeys": ["rollingUpdate", "type"], "rollingUpdate": {"maxSurge": 2}}),
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}),
        ),
        (
            "retainKeys map deletes a field",
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}),
            json!({"$retainKeys": ["type"], "rollingUpdate": null}),
            json!({"type": "RollingUpdate"}),
        ),
        (
            "retainKeys map clears a field",
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}),
            json!({"$retainKeys": ["type"]}),
            json!({"type": "RollingUpdate"}),
        ),
        (
            "retainKeys map changes a field in a nested map",
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": 1}}),
            json!({"$retainKeys": ["rollingUpdate", "type"], "rollingUpdate": {"maxSurge": 3}}),
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 1}}),
        ),
        (
            "retainKeys map deletes a field in a nested map",
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": 1}}),
            json!({"$retainKeys": ["rollingUpdate", "type"], "rollingUpdate": {"maxSurge": null}}),
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}),
        ),
    ];
    for (name, original, patch, want) in strategy {
        let got = run(
            DEPLOY,
            json!({"spec": {"strategy": original}}),
            json!({"spec": {"strategy": patch}}),
        );
        assert_eq!(got, json!({"spec": {"strategy": want}}), "{name}");
    }
    let volumes: Vec<(&str, Value, Value, Value)> = vec![
        (
            "retainKeys list of maps clears a field",
            json!([{"name": "bar"}, {"name": "foo", "emptyDir": {}, "hostPath": {"path": "/x"}}]),
            json!({"$setElementOrder/volumes": [{"name": "bar"}, {"name": "foo"}],
                "volumes": [{"$retainKeys": ["emptyDir", "name"], "name": "foo"}]}),
            json!([{"name": "bar"}, {"name": "foo", "emptyDir": {}}]),
        ),
        (
            "retainKeys list of maps changes a field and clears a field",
            json!([{"name": "bar"}, {"name": "foo", "emptyDir": {"medium": "Memory"}, "hostPath": {"path": "/x"}}]),
            json!({"$setElementOrder/volumes": [{"name": "bar"}, {"name": "foo"}],
                "volumes": [{"$retainKeys": ["emptyDir", "name"], "name": "foo", "emptyDir": {"medium": ""}}]}),
            json!([{"name": "bar"}, {"name": "foo", "emptyDir": {"medium": ""}}]),
        ),
        (
            "retainKeys list of maps adds a field",
            json!([{"name": "bar"}, {"name": "foo"}]),
            json!({"$setElementOrder/volumes": [{"name": "bar"}, {"name": "foo"}],
                "volumes": [{"$retainKeys": ["emptyDir", "name"], "name": "foo", "emptyDir": {}}]}),
            json!([{"name": "bar"}, {"name": "foo", "emptyDir": {}}]),
        ),
        (
            "retainKeys list of maps deletes a field",
            json!([{"name": "bar"}, {"name": "foo", "emptyDir": {}}]),
            json!({"$setElementOrder/volumes": [{"name": "bar"}, {"name": "foo"}],
                "volumes": [{"$retainKeys": ["name"], "name": "foo", "emptyDir": null}]}),
            json!([{"name": "bar"}, {"name": "foo"}]),
        ),
        (
            "retainKeys list of maps deletes a field and clears a field",
            json!([{"name": "bar"}, {"name": "foo", "emptyDir": {}, "hostPath": {"path": "/x"}}]),
            json!({"$setElementOrder/volumes": [{"name": "bar"}, {"name": "foo"}],
                "volumes": [{"$retainKeys": ["name"], "name": "foo", "emptyDir": null}]}),
            json!([{"name": "bar"}, {"name": "foo"}]),
        ),
        (
            "retainKeys list of maps: nested struct merges (configMap)",
            json!([{"name": "foo", "configMap": {"name": "cm", "defaultMode": 420}, "emptyDir": {}}]),
            json!({"volumes": [{"$retainKeys": ["configMap", "name"], "name": "foo", "configMap": {"optional": true}}]}),
            json!([{"name": "foo", "configMap": {"name": "cm", "defaultMode": 420, "optional": true}}]),
        ),
    ];
    for (name, original, patch, want) in volumes {
        let got = run(
            POD,
            json!({"spec": {"volumes": original}}),
            json!({"spec": patch}),
        );
        assert_eq!(got, json!({"spec": {"volumes": want}}), "{name}");
    }
}

/// Maps, `$patch` on maps and nested structs of a Deployment, and its metadata.
#[test]
fn map_and_struct_cases() {
    let cases: Vec<(&str, Value, Value, Value)> = vec![
        (
            "empty patch changes nothing",
            json!({"spec": {"replicas": 2}}),
            json!({}),
            json!({"spec": {"replicas": 2}}),
        ),
        (
            "new key in a granular map",
            json!({"metadata": {"labels": {"a": "1"}}}),
            json!({"metadata": {"labels": {"b": "2"}}}),
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
        ),
        (
            "absent map created from the patch",
            json!({"spec": {"replicas": 1}}),
            json!({"metadata": {"annotations": {"a": "1"}}}),
            json!({"metadata": {"annotations": {"a": "1"}}, "spec": {"replicas": 1}}),
        ),
        (
            "null deletes a whole map",
            json!({"metadata": {"labels": {"a": "1"}, "annotations": {"b": "2"}}}),
            json!({"metadata": {"labels": null}}),
            json!({"metadata": {"annotations": {"b": "2"}}}),
        ),
        (
            "nested struct fields merge (template labels)",
            json!({"spec": {"template": {"metadata": {"labels": {"app": "a"}}, "spec": {"hostname": "h"}}}}),
            json!({"spec": {"template": {"metadata": {"labels": {"tier": "b"}}}}}),
            json!({"spec": {"template": {"metadata": {"labels": {"app": "a", "tier": "b"}}, "spec": {"hostname": "h"}}}}),
        ),
        (
            "$patch: replace on a nested struct drops unspecified fields",
            json!({"spec": {"selector": {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "k", "operator": "Exists"}]}}}),
            json!({"spec": {"selector": {"$patch": "replace", "matchLabels": {"b": "2"}}}}),
            json!({"spec": {"selector": {"matchLabels": {"b": "2"}}}}),
        ),
        (
            "$patch: delete on a nested struct empties it",
            json!({"spec": {"replicas": 1, "template": {"spec": {"securityContext": {"runAsUser": 1}}}}}),
            json!({"spec": {"template": {"spec": {"securityContext": {"$patch": "delete"}}}}}),
            json!({"spec": {"replicas": 1, "template": {"spec": {"securityContext": {}}}}}),
        ),
        (
            "resources limits merge per resource name",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}]}}}}),
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "resources": {"limits": {"memory": "1Gi"}}}]}}}}),
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}}),
        ),
        (
            "scalar replaced by a map when types differ",
            json!({"spec": {"replicas": 1}}),
            json!({"spec": {"replicas": {"x": 1}}}),
            json!({"spec": {"replicas": {"x": 1}}}),
        ),
        (
            "kubectl scale: replicas replaced, rest kept",
            json!({"spec": {"replicas": 1, "paused": true}}),
            json!({"spec": {"replicas": 5}}),
            json!({"spec": {"replicas": 5, "paused": true}}),
        ),
        (
            "kubectl rollout restart: template annotation added",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}}),
            json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2024-01-01T00:00:00Z"}}}}}),
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}]},
                "metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2024-01-01T00:00:00Z"}}}}}),
        ),
    ];
    for (name, original, patch, want) in cases {
        assert_eq!(run(DEPLOY, original, patch), want, "{name}");
    }
}
