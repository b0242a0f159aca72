use super::*;
use serde_json::json;

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
}

fn patch_pod(original: Value, patch: Value) -> std::result::Result<Value, StrategicError> {
    let mut doc = pod(original);
    apply(&mut doc, &json!({"spec": patch}), "", "v1", "Pod")?;
    Ok(doc["spec"].clone())
}

/// (name, original pod spec, patch of the spec, expected spec)
#[test]
fn pod_spec_cases() {
    let cases: Vec<(&str, Value, Value, Value)> = vec![
        (
            "scalar replaced",
            json!({"restartPolicy": "Always"}),
            json!({"restartPolicy": "Never"}),
            json!({"restartPolicy": "Never"}),
        ),
        (
            "null deletes",
            json!({"restartPolicy": "Always", "hostname": "h"}),
            json!({"hostname": null}),
            json!({"restartPolicy": "Always"}),
        ),
        (
            "null for an absent field is ignored",
            json!({"hostname": "h"}),
            json!({"subdomain": null}),
            json!({"hostname": "h"}),
        ),
        (
            "containers merge by name",
            json!({"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}),
            json!({"containers": [{"name": "b", "image": "b:2"}]}),
            json!({"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}]}),
        ),
        (
            // Upstream puts patch items before server-only ones whose relative order
            // it cannot tell (kubectl sends $setElementOrder to say it).
            "new container goes first without setElementOrder",
            json!({"containers": [{"name": "a", "image": "a:1"}]}),
            json!({"containers": [{"name": "b", "image": "b:1"}]}),
            json!({"containers": [{"name": "b", "image": "b:1"}, {"name": "a", "image": "a:1"}]}),
        ),
        (
            "new container placed by setElementOrder",
            json!({"containers": [{"name": "a", "image": "a:1"}]}),
            json!({"$setElementOrder/containers": [{"name": "a"}, {"name": "b"}], "containers": [{"name": "b", "image": "b:1"}]}),
            json!({"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}),
        ),
        (
            "container deleted by $patch: delete",
            json!({"containers": [{"name": "a"}, {"name": "b"}]}),
            json!({"containers": [{"name": "a", "$patch": "delete"}]}),
            json!({"containers": [{"name": "b"}]}),
        ),
        (
            "list replaced by $patch: replace item",
            json!({"containers": [{"name": "a"}, {"name": "b"}]}),
            json!({"containers": [{"name": "c"}, {"$patch": "replace"}]}),
            json!({"containers": [{"name": "c"}]}),
        ),
        (
            "env merges by name inside a container",
            json!({"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}]}),
            json!({"containers": [{"name": "a", "env": [{"name": "Y", "value": "3"}, {"name": "Z", "value": "4"}]}]}),
            json!({"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "3"}, {"name": "Z", "value": "4"}]}]}),
        ),
        (
            "env var removed (null value deletes its field)",
            json!({"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}]}]}),
            json!({"containers": [{"name": "a", "env": [{"name": "X", "value": null}]}]}),
            json!({"containers": [{"name": "a", "env": [{"name": "X"}]}]}),
        ),
        (
            "args replace",
            json!({"containers": [{"name": "a", "args": ["1", "2"]}]}),
            json!({"containers": [{"name": "a", "args": ["3"]}]}),
            json!({"containers": [{"name": "a", "args": ["3"]}]}),
        ),
        (
            "command replace",
            json!({"containers": [{"name": "a", "command": ["sh"]}]}),
            json!({"containers": [{"name": "a", "command": ["bash", "-c"]}]}),
            json!({"containers": [{"name": "a", "command": ["bash", "-c"]}]}),
        ),
        (
            "tolerations replace",
            json!({"tolerations": [{"key": "a"}, {"key": "b"}]}),
            json!({"tolerations": [{"key": "c"}]}),
            json!({"tolerations": [{"key": "c"}]}),
        ),
        (
            "ports merge by containerPort",
            json!({"containers": [{"name": "a", "ports": [{"containerPort": 80}, {"containerPort": 443}]}]}),
            json!({"containers": [{"name": "a", "ports": [{"containerPort": 80, "name": "http"}]}]}),
            json!({"containers": [{"name": "a", "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}]}]}),
        ),
        (
            "volumes merge by name",
            json!({"volumes": [{"name": "v", "emptyDir": {}}]}),
            json!({"volumes": [{"name": "w", "emptyDir": {}}]}),
            json!({"volumes": [{"name": "w", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]}),
        ),
        (
            "retainKeys clears other volume sources",
            json!({"volumes": [{"name": "v", "emptyDir": {}}]}),
            json!({"volumes": [{"name": "v", "hostPath": {"path": "/x"}, "$retainKeys": ["hostPath", "name"]}]}),
            json!({"volumes": [{"name": "v", "hostPath": {"path": "/x"}}]}),
        ),
        (
            "nodeSelector merges per key (SMP has no atomic maps)",
            json!({"nodeSelector": {"a": "1"}}),
            json!({"nodeSelector": {"b": "2"}}),
            json!({"nodeSelector": {"a": "1", "b": "2"}}),
        ),
        (
            "map replaced by $patch: replace",
            json!({"nodeSelector": {"a": "1"}}),
            json!({"nodeSelector": {"b": "2", "$patch": "replace"}}),
            json!({"nodeSelector": {"b": "2"}}),
        ),
        (
            "map deleted by $patch: delete",
            json!({"nodeSelector": {"a": "1"}, "hostname": "h"}),
            json!({"nodeSelector": {"$patch": "delete"}}),
            json!({"nodeSelector": {}, "hostname": "h"}),
        ),
        (
            "setElementOrder orders containers",
            json!({"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
            json!({"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}]}),
            json!({"containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}]}),
        ),
        (
            "setElementOrder with changes and server-only items",
            json!({"containers": [{"name": "a", "image": "1"}, {"name": "s"}, {"name": "b", "image": "1"}]}),
            json!({"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                "containers": [{"name": "b", "image": "2"}]}),
            // Upstream's interleave: "s" preceded "b" live, so it goes first.
            json!({"containers": [{"name": "s"}, {"name": "b", "image": "2"}, {"name": "a", "image": "1"}]}),
        ),
        (
            "new list with setElementOrder",
            json!({}),
            json!({"$setElementOrder/containers": [{"name": "a"}], "containers": [{"name": "a", "image": "x"}]}),
            json!({"containers": [{"name": "a", "image": "x"}]}),
        ),
        (
            "directives are not stored in new values",
            json!({}),
            json!({"containers": [{"name": "a", "env": [{"name": "E", "value": null}], "$setElementOrder/env": [{"name": "E"}]}]}),
            json!({"containers": [{"name": "a", "env": [{"name": "E"}]}]}),
        ),
        (
            "type change replaces",
            json!({"containers": [{"name": "a"}]}),
            json!({"containers": "x"}),
            json!({"containers": "x"}),
        ),
        (
            "ephemeral containers (kubectl debug)",
            json!({"containers": [{"name": "a"}]}),
            json!({"ephemeralContainers": [{"name": "debugger-x", "image": "busybox", "stdin": true, "tty": true, "targetContainerName": "a"}]}),
            json!({"containers": [{"name": "a"}], "ephemeralContainers": [{"name": "debugger-x", "image": "busybox", "stdin": true, "tty": true, "targetContainerName": "a"}]}),
        ),
        (
            "imagePullSecrets merge by name",
            json!({"imagePullSecrets": [{"name": "a"}]}),
            json!({"imagePullSecrets": [{"name": "b"}]}),
            json!({"imagePullSecrets": [{"name": "b"}, {"name": "a"}]}),
        ),
        (
            "unknown fields merge as maps",
            json!({"x": {"a": 1}}),
            json!({"x": {"b": 2}}),
            json!({"x": {"a": 1, "b": 2}}),
        ),
    ];
    let n = cases.len();
    for (name, original, patch, want) in cases {
        assert_eq!(patch_pod(original, patch).unwrap(), want, "{name}");
    }
    assert!(n >= 25);
}

fn patch_meta(meta: Value, patch: Value) -> std::result::Result<Value, StrategicError> {
    let mut doc = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta});
    apply(&mut doc, &json!({"metadata": patch}), "", "v1", "ConfigMap")?;
    Ok(doc["metadata"].clone())
}

#[test]
fn primitive_set_lists() {
    let cases = vec![
        (
            "finalizers merge as a set",
            json!({"finalizers": ["a", "b"]}),
            json!({"finalizers": ["b", "c"]}),
            json!({"finalizers": ["a", "b", "c"]}),
        ),
        (
            "deleteFromPrimitiveList",
            json!({"finalizers": ["a", "b", "c"]}),
            json!({"$deleteFromPrimitiveList/finalizers": ["b"]}),
            json!({"finalizers": ["a", "c"]}),
        ),
        (
            "deleteFromPrimitiveList on an absent list",
            json!({"name": "x"}),
            json!({"$deleteFromPrimitiveList/finalizers": ["b"]}),
            json!({"name": "x"}),
        ),
        (
            "setElementOrder on primitives with a deletion (client-side apply)",
            json!({"finalizers": ["a", "b", "c"]}),
            json!({"$setElementOrder/finalizers": ["c", "a"], "$deleteFromPrimitiveList/finalizers": ["b"]}),
            json!({"finalizers": ["c", "a"]}),
        ),
        (
            "labels merge, null deletes a label",
            json!({"labels": {"a": "1", "b": "2"}}),
            json!({"labels": {"a": null, "c": "3"}}),
            json!({"labels": {"b": "2", "c": "3"}}),
        ),
        (
            "ownerReferences merge by uid",
            json!({"ownerReferences": [{"uid": "1", "name": "a"}]}),
            json!({"ownerReferences": [{"uid": "2", "name": "b"}]}),
            json!({"ownerReferences": [{"uid": "2", "name": "b"}, {"uid": "1", "name": "a"}]}),
        ),
    ];
    for (name, meta, patch, want) in cases {
        assert_eq!(patch_meta(meta, patch).unwrap(), want, "{name}");
    }
}

#[test]
fn what_kubectl_sends() {
    // kubectl set image deployment/web nginx=nginx:1.25
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "nginx", "image": "nginx:1.24"}, {"name": "side", "image": "s"}]}}}});
    let p = json!({"spec": {"template": {"spec": {"containers": [{"image": "nginx:1.25", "name": "nginx"}]}}}});
    apply(&mut d, &p, "apps", "v1", "Deployment").unwrap();
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"],
        json!([{"name": "nginx", "image": "nginx:1.25"}, {"name": "side", "image": "s"}])
    );
    // kubectl apply (client-side) after removing an env var and the replicas field.
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web",
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "old"}},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "app", "image": "a", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}}});
    let p = json!({"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "new"}},
        "spec": {"replicas": null, "template": {"spec": {
            "$setElementOrder/containers": [{"name": "app"}],
            "containers": [{"$setElementOrder/env": [{"name": "A"}], "env": [{"$patch": "delete", "name": "B"}], "name": "app"}]}}}});
    apply(&mut d, &p, "apps", "v1", "Deployment").unwrap();
    assert_eq!(
        d["spec"],
        json!({"template": {"spec": {"containers": [{"name": "app", "image": "a", "env": [{"name": "A", "value": "1"}]}]}}})
    );
    assert_eq!(
        d["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
        "new"
    );
    // strategy is retainKeys: switching to Recreate drops rollingUpdate.
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
    let p = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
    apply(&mut d, &p, "apps", "v1", "Deployment").unwrap();
    assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
}

#[test]
fn errors_are_worded_as_upstream() {
    let cases: Vec<(Value, Value, &str, u16)> = vec![
        (
            json!({"containers": [{"name": "a"}]}),
            json!({"containers": [{"image": "x"}]}),
            "map: map[image:x] does not contain declared merge key: name",
            400,
        ),
        (
            json!({"containers": [{"name": "a"}]}),
            json!({"containers": [{"name": "a", "$patch": "bogus"}]}),
            "unknown patch type: bogus in map: map[$patch:bogus name:a]",
            400,
        ),
        (
            json!({"nodeSelector": {"a": "1"}}),
            json!({"nodeSelector": {"$patch": "bogus"}}),
            "unknown patch type: bogus in map: map[$patch:bogus]",
            400,
        ),
        (
            json!({"containers": [{"name": "a"}]}),
            json!({"containers": [{"name": "a", "$patch": "merge"}]}),
            "merging lists cannot yet be specified in the patch",
            500,
        ),
        (
            json!({"volumes": [{"name": "v", "emptyDir": {}}]}),
            json!({"volumes": [{"name": "v", "hostPath": {"path": "/"}, "$retainKeys": ["name"]}]}),
            "patch content doesn't match retainKeys list",
            422,
        ),
        (
            json!({"volumes": [{"name": "v"}]}),
            json!({"volumes": [{"name": "v", "$retainKeys": "name"}]}),
            "invalid patch format of retainKeys",
            400,
        ),
        (
            json!({}),
            json!({"$setElementOrder/": []}),
            "invalid patch format of setElementOrder list",
            400,
        ),
        (
            json!({}),
            json!({"$deleteFromPrimitiveList/": []}),
            "invalid patch format of primitive list",
            400,
        ),
        (
            json!({"containers": [{"name": "a"}, {"name": "b"}]}),
            json!({"$setElementOrder/containers": [{"name": "a"}], "containers": [{"name": "b"}]}),
            "The order in patch list:\n[map[name:b]]\n doesn't match $setElementOrder list:\n[map[name:a]]\n",
            500,
        ),
        (
            json!({"containers": []}),
            json!({"containers": [["x"]]}),
            "lists of lists are not supported",
            422,
        ),
        (
            json!({"containers": [{"name": "a"}]}),
            json!({"containers": ["x"]}),
            "list element types are not identical: [[map[name:a]] [x]]",
            500,
        ),
    ];
    for (original, patch, want, code) in cases {
        let before = pod(original.clone());
        let mut doc = before.clone();
        let e = apply(&mut doc, &json!({"spec": patch}), "", "v1", "Pod").unwrap_err();
        assert_eq!(e.to_string(), want);
        assert_eq!(e.status_code(), code, "{want}");
        assert_eq!(doc, before, "unchanged on error");
    }
    let mut doc = json!({"kind": "Widget"});
    assert_eq!(
        apply(&mut doc, &json!({}), "example.com", "v1", "Widget").unwrap_err(),
        StrategicError::Unsupported
    );
    let mut doc = pod(json!({}));
    assert_eq!(
        apply(&mut doc, &json!([]), "", "v1", "Pod").unwrap_err(),
        StrategicError::BadJsonDoc
    );
}

#[test]
fn go_formatting() {
    assert_eq!(
        go_fmt(&json!({"b": [1, 2.5], "a": null, "c": true})),
        "map[a:<nil> b:[1 2.5] c:true]"
    );
}
