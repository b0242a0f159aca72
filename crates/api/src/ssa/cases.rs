//! Table-driven server-side apply cases: sequences of applies (optionally forced) and
//! updates by several managers on a Deployment, with the object and ownership upstream
//! documents (the Server-Side Apply reference: conflicts, co-ownership, removal of
//! fields an applier stops declaring, merge strategies per `x-kubernetes-list-type` /
//! `x-kubernetes-map-type`), modelled on structured-merge-diff's `merge` tests.

use super::*;
use serde_json::json;

#[derive(Clone, Copy)]
enum Op {
    Apply,
    Force,
    /// A non-apply write: the previous object with this JSON merge patch.
    Update,
}

enum Want {
    /// The object's `metadata` (less name) and `spec` after the last step.
    Object(Value),
    /// The last step fails with this 409 message.
    Conflict(&'static str),
}

struct Case {
    name: &'static str,
    steps: Vec<(&'static str, Op, Value)>,
    want: Want,
    /// (manager, path: `/`-separated FieldsV1 elements, `f:` implied, owned?)
    owns: Vec<(&'static str, &'static str, bool)>,
}

const TIMES: [&str; 6] = [
    "2024-01-01T00:00:00Z",
    "2024-01-01T00:01:00Z",
    "2024-01-01T00:02:00Z",
    "2024-01-01T00:03:00Z",
    "2024-01-01T00:04:00Z",
    "2024-01-01T00:05:00Z",
];

fn body(v: &Value) -> Value {
    let mut out = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}});
    if let Some(m) = v.as_object() {
        for (k, val) in m {
            if k == "metadata" {
                if let Some(mm) = val.as_object() {
                    for (mk, mv) in mm {
                        out["metadata"][mk] = mv.clone();
                    }
                }
            } else {
                out[k] = val.clone();
            }
        }
    }
    out
}

fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.shift_remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

fn view(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Value::Object(m) = &mut v {
        m.shift_remove("apiVersion");
        m.shift_remove("kind");
        if let Some(Value::Object(meta)) = m.get_mut("metadata") {
            for k in ["name", "namespace", "managedFields"] {
                meta.shift_remove(k);
            }
            if meta.is_empty() {
                m.shift_remove("metadata");
            }
        }
    }
    v
}

fn owns(obj: &Value, manager: &str, path: &str) -> bool {
    let Some(entry) = obj["metadata"]["managedFields"]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["manager"] == manager))
    else {
        return false;
    };
    let set = FieldSet::from_fields_v1(&entry["fieldsV1"]).expect("fieldsV1");
    let pes: Vec<PathElement> = path
        .split('/')
        .map(|p| {
            if p.contains(':') {
                PathElement::decode(p).expect("path element")
            } else {
                PathElement::Field(p.to_string())
            }
        })
        .collect();
    set.has(&pes)
}

fn run(case: Case) {
    let mut live: Option<Value> = None;
    let n = case.steps.len();
    for (i, (manager, op, v)) in case.steps.into_iter().enumerate() {
        let req = Request {
            manager,
            api_version: "apps/v1",
            now: TIMES[i % TIMES.len()],
            subresource: None,
            ignored: &[],
        };
        let result = match op {
            Op::Apply | Op::Force => apply(live.as_ref(), &body(&v), &req, matches!(op, Op::Force)),
            Op::Update => {
                let mut new = live.clone().unwrap_or_else(|| body(&json!({})));
                merge_patch(&mut new, &v);
                update_managed_fields(live.as_ref(), &mut new, &req).map(|()| new)
            }
        };
        match (&case.want, i + 1 == n, result) {
            (Want::Conflict(msg), true, Err(SsaError::Conflicts(c))) => {
                assert_eq!(c.to_string(), *msg, "{}", case.name);
            }
            (Want::Conflict(_), true, other) => {
                panic!("{}: expected a conflict, got {other:?}", case.name)
            }
            (_, _, Ok(obj)) => live = Some(obj),
            (_, _, Err(e)) => panic!("{}: step {i} failed: {e}", case.name),
        }
    }
    let live = live.expect("an object");
    if let Want::Object(want) = &case.want {
        assert_eq!(&view(&live), want, "{}", case.name);
    }
    for (manager, path, want) in case.owns {
        assert_eq!(
            owns(&live, manager, path),
            want,
            "{}: {manager} owns {path}",
            case.name
        );
    }
}

fn spec(v: Value) -> Value {
    json!({"spec": v})
}

fn pod(v: Value) -> Value {
    json!({"spec": {"template": {"spec": v}}})
}

fn containers(v: Value) -> Value {
    pod(json!({"containers": v}))
}

#[test]
fn scalars_and_structs() {
    use Op::*;
    let cases = vec![
        Case {
            name: "apply creates the object and owns every declared leaf",
            steps: vec![(
                "alice",
                Apply,
                spec(json!({"replicas": 2, "paused": false})),
            )],
            want: Want::Object(spec(json!({"replicas": 2, "paused": false}))),
            owns: vec![
                ("alice", "spec/replicas", true),
                ("alice", "spec/paused", true),
            ],
        },
        Case {
            name: "an applier changes its own field without conflict",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2}))),
                ("alice", Apply, spec(json!({"replicas": 4}))),
            ],
            want: Want::Object(spec(json!({"replicas": 4}))),
            owns: vec![("alice", "spec/replicas", true)],
        },
        Case {
            name: "another applier's different value conflicts",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2}))),
                ("bob", Apply, spec(json!({"replicas": 3}))),
            ],
            want: Want::Conflict(
                r#"Apply failed with 1 conflict: conflict with "alice": .spec.replicas"#,
            ),
            owns: vec![],
        },
        Case {
            name: "force takes the field from the other applier",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2, "paused": true}))),
                ("bob", Force, spec(json!({"replicas": 3}))),
            ],
            want: Want::Object(spec(json!({"replicas": 3, "paused": true}))),
            owns: vec![
                ("bob", "spec/replicas", true),
                ("alice", "spec/replicas", false),
                ("alice", "spec/paused", true),
            ],
        },
        Case {
            name: "force without a conflict is a plain apply",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2}))),
                ("bob", Force, spec(json!({"paused": true}))),
            ],
            want: Want::Object(spec(json!({"replicas": 2, "paused": true}))),
            owns: vec![
                ("alice", "spec/replicas", true),
                ("bob", "spec/paused", true),
            ],
        },
        Case {
            name: "force takes a co-owned field from every owner",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2}))),
                ("bob", Apply, spec(json!({"replicas": 2}))),
                ("carol", Force, spec(json!({"replicas": 5}))),
            ],
            want: Want::Object(spec(json!({"replicas": 5}))),
            owns: vec![
                ("carol", "spec/replicas", true),
                ("alice", "spec/replicas", false),
                ("bob", "spec/replicas", false),
            ],
        },
        Case {
            name: "the same value is co-owned",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2}))),
                ("bob", Apply, spec(json!({"replicas": 2}))),
            ],
            want: Want::Object(spec(json!({"replicas": 2}))),
            owns: vec![
                ("alice", "spec/replicas", true),
                ("bob", "spec/replicas", true),
            ],
        },
        Case {
            name: "a co-owned field stays when one owner stops declaring it",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2, "paused": true}))),
                ("bob", Apply, spec(json!({"replicas": 2}))),
                ("alice", Apply, spec(json!({"paused": true}))),
            ],
            want: Want::Object(spec(json!({"replicas": 2, "paused": true}))),
            owns: vec![
                ("alice", "spec/replicas", false),
                ("bob", "spec/replicas", true),
            ],
        },
        Case {
            name: "a co-owned field goes when both owners stop declaring it",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2, "paused": true}))),
                (
                    "bob",
                    Apply,
                    spec(json!({"replicas": 2, "minReadySeconds": 1})),
                ),
                ("alice", Apply, spec(json!({"paused": true}))),
                ("bob", Apply, spec(json!({"minReadySeconds": 1}))),
            ],
            want: Want::Object(spec(json!({"paused": true, "minReadySeconds": 1}))),
            owns: vec![],
        },
        Case {
            name: "a co-owned field can then be changed by its remaining owner",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2, "paused": true}))),
                ("bob", Apply, spec(json!({"replicas": 2}))),
                ("alice", Apply, spec(json!({"paused": true}))),
                ("bob", Apply, spec(json!({"replicas": 7}))),
            ],
            want: Want::Object(spec(json!({"replicas": 7, "paused": true}))),
            owns: vec![("bob", "spec/replicas", true)],
        },
        Case {
            name: "changing a co-owned field conflicts",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2}))),
                ("bob", Apply, spec(json!({"replicas": 2}))),
                ("alice", Apply, spec(json!({"replicas": 3}))),
            ],
            want: Want::Conflict(
                r#"Apply failed with 1 conflict: conflict with "bob": .spec.replicas"#,
            ),
            owns: vec![],
        },
        Case {
            name: "nested struct fields merge per field (strategy.rollingUpdate)",
            steps: vec![
                (
                    "alice",
                    Apply,
                    spec(json!({"strategy": {"rollingUpdate": {"maxSurge": 1}}})),
                ),
                (
                    "bob",
                    Apply,
                    spec(json!({"strategy": {"rollingUpdate": {"maxUnavailable": 0}}})),
                ),
            ],
            want: Want::Object(spec(
                json!({"strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}),
            )),
            owns: vec![
                ("alice", "spec/strategy/rollingUpdate/maxSurge", true),
                ("bob", "spec/strategy/rollingUpdate/maxUnavailable", true),
                ("bob", "spec/strategy/rollingUpdate/maxSurge", false),
            ],
        },
        Case {
            name: "a nested leaf conflicts with its path",
            steps: vec![
                (
                    "alice",
                    Apply,
                    spec(json!({"strategy": {"rollingUpdate": {"maxSurge": 1}}})),
                ),
                (
                    "bob",
                    Apply,
                    spec(json!({"strategy": {"rollingUpdate": {"maxSurge": "50%"}}})),
                ),
            ],
            want: Want::Conflict(
                r#"Apply failed with 1 conflict: conflict with "alice": .spec.strategy.rollingUpdate.maxSurge"#,
            ),
            owns: vec![],
        },
        Case {
            name: "a struct only the applier declared goes whole",
            steps: vec![
                (
                    "alice",
                    Apply,
                    spec(json!({"replicas": 1, "strategy": {"type": "Recreate"}})),
                ),
                ("alice", Apply, spec(json!({"replicas": 1}))),
            ],
            want: Want::Object(spec(json!({"replicas": 1}))),
            owns: vec![("alice", "spec/strategy", false)],
        },
        Case {
            name: "a struct keeps the fields another applier declared",
            steps: vec![
                (
                    "alice",
                    Apply,
                    spec(json!({"strategy": {"type": "RollingUpdate"}})),
                ),
                (
                    "bob",
                    Apply,
                    spec(json!({"strategy": {"rollingUpdate": {"maxSurge": 2}}})),
                ),
                ("alice", Apply, spec(json!({}))),
            ],
            want: Want::Object(spec(
                json!({"strategy": {"rollingUpdate": {"maxSurge": 2}}}),
            )),
            owns: vec![("alice", "spec/strategy/type", false)],
        },
        Case {
            name: "re-applying the same configuration changes nothing",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2, "paused": true}))),
                ("alice", Apply, spec(json!({"replicas": 2, "paused": true}))),
            ],
            want: Want::Object(spec(json!({"replicas": 2, "paused": true}))),
            owns: vec![("alice", "spec/paused", true)],
        },
        Case {
            name: "an empty configuration removes everything the applier alone owned",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2, "paused": true}))),
                ("bob", Apply, spec(json!({"minReadySeconds": 3}))),
                ("alice", Apply, json!({})),
            ],
            want: Want::Object(spec(json!({"minReadySeconds": 3}))),
            owns: vec![
                ("alice", "spec/replicas", false),
                ("bob", "spec/minReadySeconds", true),
            ],
        },
        Case {
            name: "two fields of one manager in one conflict",
            steps: vec![
                (
                    "alice",
                    Apply,
                    spec(json!({"replicas": 2, "minReadySeconds": 1})),
                ),
                (
                    "bob",
                    Apply,
                    spec(json!({"replicas": 3, "minReadySeconds": 2})),
                ),
            ],
            want: Want::Conflict(
                "Apply failed with 2 conflicts: conflicts with \"alice\":\n- .spec.minReadySeconds\n- .spec.replicas",
            ),
            owns: vec![],
        },
    ];
    let n = cases.len();
    for c in cases {
        run(c);
    }
    assert_eq!(n, 18);
}

#[test]
fn updates_and_appliers() {
    use Op::*;
    let cases = vec![
        Case {
            name: "an update never conflicts and takes the field",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2}))),
                ("kubectl-edit", Update, spec(json!({"replicas": 4}))),
            ],
            want: Want::Object(spec(json!({"replicas": 4}))),
            owns: vec![
                ("kubectl-edit", "spec/replicas", true),
                ("alice", "spec/replicas", false),
            ],
        },
        Case {
            name: "re-applying after an update changed the field conflicts with the updater",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2}))),
                ("kubectl-edit", Update, spec(json!({"replicas": 4}))),
                ("alice", Apply, spec(json!({"replicas": 2}))),
            ],
            want: Want::Conflict(
                r#"Apply failed with 1 conflict: conflict with "kubectl-edit" using apps/v1: .spec.replicas"#,
            ),
            owns: vec![],
        },
        Case {
            name: "an applier may force back a field an update took",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2}))),
                ("kubectl-edit", Update, spec(json!({"replicas": 4}))),
                ("alice", Force, spec(json!({"replicas": 2}))),
            ],
            want: Want::Object(spec(json!({"replicas": 2}))),
            owns: vec![
                ("alice", "spec/replicas", true),
                ("kubectl-edit", "spec/replicas", false),
            ],
        },
        Case {
            name: "applying the value an update set is co-ownership",
            steps: vec![
                ("kubectl-create", Update, spec(json!({"replicas": 1}))),
                ("alice", Apply, spec(json!({"replicas": 1}))),
            ],
            want: Want::Object(spec(json!({"replicas": 1}))),
            owns: vec![
                ("alice", "spec/replicas", true),
                ("kubectl-create", "spec/replicas", true),
            ],
        },
        Case {
            name: "a field an update took survives the applier dropping it",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2, "paused": true}))),
                ("kubectl-edit", Update, spec(json!({"paused": false}))),
                ("alice", Apply, spec(json!({"replicas": 2}))),
            ],
            want: Want::Object(spec(json!({"replicas": 2, "paused": false}))),
            owns: vec![("kubectl-edit", "spec/paused", true)],
        },
        Case {
            name: "a field an update added stays when an applier drops its own",
            steps: vec![
                ("alice", Apply, json!({"metadata": {"labels": {"a": "1"}}})),
                (
                    "kubectl-label",
                    Update,
                    json!({"metadata": {"labels": {"b": "2"}}}),
                ),
                ("alice", Apply, json!({"metadata": {"labels": {}}})),
            ],
            want: Want::Object(json!({"metadata": {"labels": {"b": "2"}}})),
            owns: vec![("kubectl-label", "metadata/labels/b", true)],
        },
        Case {
            name: "two updaters: the last writer owns the field",
            steps: vec![
                ("m1", Update, spec(json!({"replicas": 1}))),
                ("m2", Update, spec(json!({"replicas": 2}))),
            ],
            want: Want::Object(spec(json!({"replicas": 2}))),
            owns: vec![
                ("m2", "spec/replicas", true),
                ("m1", "spec/replicas", false),
            ],
        },
        Case {
            name: "an update removing a field drops it from its applier",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2, "paused": true}))),
                ("kubectl-patch", Update, spec(json!({"paused": null}))),
            ],
            want: Want::Object(spec(json!({"replicas": 2}))),
            owns: vec![
                ("alice", "spec/paused", false),
                ("alice", "spec/replicas", true),
            ],
        },
        Case {
            name: "an applier re-adds a field an update removed without conflict",
            steps: vec![
                ("alice", Apply, spec(json!({"replicas": 2, "paused": true}))),
                ("kubectl-patch", Update, spec(json!({"paused": null}))),
                ("alice", Apply, spec(json!({"replicas": 2, "paused": true}))),
            ],
            want: Want::Object(spec(json!({"replicas": 2, "paused": true}))),
            owns: vec![("alice", "spec/paused", true)],
        },
        Case {
            name: "conflicts with an updater and an applier sort by manager",
            steps: vec![
                ("bob", Apply, spec(json!({"replicas": 2}))),
                ("kubectl-edit", Update, spec(json!({"paused": true}))),
                (
                    "alice",
                    Apply,
                    spec(json!({"replicas": 3, "paused": false})),
                ),
            ],
            want: Want::Conflict(
                "Apply failed with 2 conflicts: conflicts with \"bob\":\n- .spec.replicas\nconflicts with \"kubectl-edit\" using apps/v1:\n- .spec.paused",
            ),
            owns: vec![],
        },
    ];
    for c in cases {
        run(c);
    }
}

#[test]
fn maps() {
    use Op::*;
    let labels = |v: Value| json!({"metadata": {"labels": v}});
    let cases = vec![
        Case {
            name: "granular map: appliers own their own keys",
            steps: vec![
                ("alice", Apply, labels(json!({"a": "1"}))),
                ("bob", Apply, labels(json!({"b": "2"}))),
            ],
            want: Want::Object(labels(json!({"a": "1", "b": "2"}))),
            owns: vec![
                ("alice", "metadata/labels/a", true),
                ("bob", "metadata/labels/b", true),
                ("bob", "metadata/labels/a", false),
            ],
        },
        Case {
            name: "granular map: a different value for a key conflicts",
            steps: vec![
                ("alice", Apply, labels(json!({"a": "1"}))),
                ("bob", Apply, labels(json!({"a": "2"}))),
            ],
            want: Want::Conflict(
                r#"Apply failed with 1 conflict: conflict with "alice": .metadata.labels.a"#,
            ),
            owns: vec![],
        },
        Case {
            name: "granular map: a dropped key goes, others' keys stay",
            steps: vec![
                ("alice", Apply, labels(json!({"a": "1", "c": "3"}))),
                ("bob", Apply, labels(json!({"b": "2"}))),
                ("alice", Apply, labels(json!({"a": "1"}))),
            ],
            want: Want::Object(labels(json!({"a": "1", "b": "2"}))),
            owns: vec![],
        },
        Case {
            name: "granular map: forcing a key moves only that key",
            steps: vec![
                (
                    "alice",
                    Apply,
                    json!({"metadata": {"annotations": {"x": "1", "y": "1"}}}),
                ),
                (
                    "bob",
                    Force,
                    json!({"metadata": {"annotations": {"x": "2"}}}),
                ),
            ],
            want: Want::Object(json!({"metadata": {"annotations": {"x": "2", "y": "1"}}})),
            owns: vec![
                ("bob", "metadata/annotations/x", true),
                ("alice", "metadata/annotations/y", true),
                ("alice", "metadata/annotations/x", false),
            ],
        },
        Case {
            name: "granular map: dropping the whole map keeps others' keys",
            steps: vec![
                ("alice", Apply, labels(json!({"a": "1"}))),
                ("bob", Apply, labels(json!({"b": "2"}))),
                ("alice", Apply, spec(json!({"replicas": 1}))),
            ],
            want: Want::Object(
                json!({"metadata": {"labels": {"b": "2"}}, "spec": {"replicas": 1}}),
            ),
            owns: vec![],
        },
        Case {
            name: "atomic map (nodeSelector): the same map is co-owned",
            steps: vec![
                (
                    "alice",
                    Apply,
                    pod(json!({"nodeSelector": {"disk": "ssd"}})),
                ),
                ("bob", Apply, pod(json!({"nodeSelector": {"disk": "ssd"}}))),
            ],
            want: Want::Object(pod(json!({"nodeSelector": {"disk": "ssd"}}))),
            owns: vec![
                ("alice", "spec/template/spec/nodeSelector", true),
                ("bob", "spec/template/spec/nodeSelector", true),
            ],
        },
        Case {
            name: "atomic map: its owner replaces it whole",
            steps: vec![
                (
                    "alice",
                    Apply,
                    pod(json!({"nodeSelector": {"disk": "ssd", "zone": "a"}})),
                ),
                ("alice", Apply, pod(json!({"nodeSelector": {"zone": "b"}}))),
            ],
            want: Want::Object(pod(json!({"nodeSelector": {"zone": "b"}}))),
            owns: vec![],
        },
        Case {
            name: "atomic struct (LabelSelector): another value conflicts whole",
            steps: vec![
                (
                    "alice",
                    Apply,
                    spec(json!({"selector": {"matchLabels": {"app": "a"}}})),
                ),
                (
                    "bob",
                    Apply,
                    spec(json!({"selector": {"matchLabels": {"tier": "b"}}})),
                ),
            ],
            want: Want::Conflict(
                r#"Apply failed with 1 conflict: conflict with "alice": .spec.selector"#,
            ),
            owns: vec![],
        },
        Case {
            name: "atomic struct: forced, replaced whole, not merged",
            steps: vec![
                (
                    "alice",
                    Apply,
                    spec(json!({"selector": {"matchLabels": {"app": "a"}}})),
                ),
                (
                    "bob",
                    Force,
                    spec(json!({"selector": {"matchLabels": {"tier": "b"}}})),
                ),
            ],
            want: Want::Object(spec(json!({"selector": {"matchLabels": {"tier": "b"}}}))),
            owns: vec![
                ("bob", "spec/selector", true),
                ("alice", "spec/selector", false),
            ],
        },
        Case {
            name: "granular map of quantities (resources.limits) merges per key",
            steps: vec![
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "a", "resources": {"limits": {"cpu": "1"}}}])),
                ),
                (
                    "bob",
                    Apply,
                    containers(json!([{"name": "a", "resources": {"limits": {"memory": "1Gi"}}}])),
                ),
            ],
            want: Want::Object(containers(
                json!([{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]),
            )),
            owns: vec![
                (
                    "alice",
                    "spec/template/spec/containers/k:{\"name\":\"a\"}/resources/limits/cpu",
                    true,
                ),
                (
                    "bob",
                    "spec/template/spec/containers/k:{\"name\":\"a\"}/resources/limits/memory",
                    true,
                ),
            ],
        },
    ];
    for c in cases {
        run(c);
    }
}

#[test]
fn lists() {
    use Op::*;
    let fin = |v: Value| json!({"metadata": {"finalizers": v}});
    let cases = vec![
        Case {
            name: "set: the same items are co-owned",
            steps: vec![
                ("alice", Apply, fin(json!(["a", "b"]))),
                ("bob", Apply, fin(json!(["b"]))),
            ],
            want: Want::Object(fin(json!(["a", "b"]))),
            owns: vec![
                ("alice", "metadata/finalizers/v:\"b\"", true),
                ("bob", "metadata/finalizers/v:\"b\"", true),
                ("bob", "metadata/finalizers/v:\"a\"", false),
            ],
        },
        Case {
            name: "set: an item only the applier declared goes",
            steps: vec![
                ("alice", Apply, fin(json!(["a", "b"]))),
                ("alice", Apply, fin(json!(["b"]))),
            ],
            want: Want::Object(fin(json!(["b"]))),
            owns: vec![],
        },
        Case {
            name: "set: adding items never conflicts",
            steps: vec![
                ("alice", Apply, fin(json!(["a"]))),
                ("bob", Apply, fin(json!(["z"]))),
                ("carol", Apply, fin(json!(["m"]))),
            ],
            want: Want::Object(fin(json!(["a", "z", "m"]))),
            owns: vec![("carol", "metadata/finalizers/v:\"m\"", true)],
        },
        Case {
            name: "set: the whole list goes with its only applier",
            steps: vec![
                (
                    "alice",
                    Apply,
                    json!({"metadata": {"finalizers": ["a"], "labels": {"l": "1"}}}),
                ),
                ("alice", Apply, json!({"metadata": {"labels": {"l": "1"}}})),
            ],
            want: Want::Object(json!({"metadata": {"labels": {"l": "1"}}})),
            owns: vec![],
        },
        Case {
            name: "map list: appliers add their own items",
            steps: vec![
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "a", "image": "a:1"}])),
                ),
                (
                    "bob",
                    Apply,
                    containers(json!([{"name": "b", "image": "b:1"}])),
                ),
            ],
            want: Want::Object(containers(
                json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]),
            )),
            owns: vec![
                (
                    "alice",
                    "spec/template/spec/containers/k:{\"name\":\"a\"}/image",
                    true,
                ),
                (
                    "bob",
                    "spec/template/spec/containers/k:{\"name\":\"b\"}/image",
                    true,
                ),
                (
                    "bob",
                    "spec/template/spec/containers/k:{\"name\":\"a\"}",
                    false,
                ),
            ],
        },
        Case {
            name: "map list: an item field conflicts with its keyed path",
            steps: vec![
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "a", "image": "a:1"}])),
                ),
                (
                    "bob",
                    Apply,
                    containers(json!([{"name": "a", "image": "a:2"}])),
                ),
            ],
            want: Want::Conflict(
                r#"Apply failed with 1 conflict: conflict with "alice": .spec.template.spec.containers[name="a"].image"#,
            ),
            owns: vec![],
        },
        Case {
            name: "map list: force moves only the item's field",
            steps: vec![
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "a", "image": "a:1", "workingDir": "/w"}])),
                ),
                (
                    "bob",
                    Force,
                    containers(json!([{"name": "a", "image": "a:2"}])),
                ),
            ],
            want: Want::Object(containers(
                json!([{"name": "a", "image": "a:2", "workingDir": "/w"}]),
            )),
            owns: vec![
                (
                    "bob",
                    "spec/template/spec/containers/k:{\"name\":\"a\"}/image",
                    true,
                ),
                (
                    "alice",
                    "spec/template/spec/containers/k:{\"name\":\"a\"}/image",
                    false,
                ),
                (
                    "alice",
                    "spec/template/spec/containers/k:{\"name\":\"a\"}/workingDir",
                    true,
                ),
                (
                    "alice",
                    "spec/template/spec/containers/k:{\"name\":\"a\"}",
                    true,
                ),
                (
                    "bob",
                    "spec/template/spec/containers/k:{\"name\":\"a\"}",
                    true,
                ),
            ],
        },
        Case {
            name: "map list: a co-owned item keeps the other applier's fields",
            steps: vec![
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "a", "image": "a:1"}])),
                ),
                (
                    "bob",
                    Apply,
                    containers(json!([{"name": "a", "env": [{"name": "E", "value": "1"}]}])),
                ),
                ("alice", Apply, containers(json!([]))),
            ],
            want: Want::Object(containers(
                json!([{"name": "a", "env": [{"name": "E", "value": "1"}]}]),
            )),
            owns: vec![(
                "alice",
                "spec/template/spec/containers/k:{\"name\":\"a\"}",
                false,
            )],
        },
        Case {
            name: "map list: nested env merges by name",
            steps: vec![
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "a", "env": [{"name": "X", "value": "1"}]}])),
                ),
                (
                    "bob",
                    Apply,
                    containers(json!([{"name": "a", "env": [{"name": "Y", "value": "2"}]}])),
                ),
            ],
            want: Want::Object(containers(
                json!([{"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}]),
            )),
            owns: vec![(
                "bob",
                "spec/template/spec/containers/k:{\"name\":\"a\"}/env/k:{\"name\":\"Y\"}/value",
                true,
            )],
        },
        Case {
            name: "map list: a dropped env var goes",
            steps: vec![
                (
                    "alice",
                    Apply,
                    containers(
                        json!([{"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}]),
                    ),
                ),
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "a", "env": [{"name": "X", "value": "1"}]}])),
                ),
            ],
            want: Want::Object(containers(
                json!([{"name": "a", "env": [{"name": "X", "value": "1"}]}]),
            )),
            owns: vec![],
        },
        Case {
            name: "map list with two keys: ports differing in protocol are two items",
            steps: vec![
                (
                    "alice",
                    Apply,
                    containers(
                        json!([{"name": "a", "ports": [{"containerPort": 53, "protocol": "TCP"}]}]),
                    ),
                ),
                (
                    "bob",
                    Apply,
                    containers(
                        json!([{"name": "a", "ports": [{"containerPort": 53, "protocol": "UDP"}]}]),
                    ),
                ),
            ],
            want: Want::Object(containers(json!([{"name": "a", "ports": [
                {"containerPort": 53, "protocol": "TCP"}, {"containerPort": 53, "protocol": "UDP"}]}]))),
            owns: vec![(
                "bob",
                "spec/template/spec/containers/k:{\"name\":\"a\"}/ports/k:{\"containerPort\":53,\"protocol\":\"UDP\"}",
                true,
            )],
        },
        Case {
            name: "map list with two keys: the defaulted protocol names the same item",
            steps: vec![
                (
                    "alice",
                    Apply,
                    containers(
                        json!([{"name": "a", "ports": [{"containerPort": 80, "name": "http"}]}]),
                    ),
                ),
                (
                    "bob",
                    Apply,
                    containers(
                        json!([{"name": "a", "ports": [{"containerPort": 80, "protocol": "TCP", "name": "web"}]}]),
                    ),
                ),
            ],
            want: Want::Conflict(
                r#"Apply failed with 1 conflict: conflict with "alice": .spec.template.spec.containers[name="a"].ports[containerPort=80,protocol="TCP"].name"#,
            ),
            owns: vec![],
        },
        Case {
            name: "map list: volumes by name, each applier its own",
            steps: vec![
                (
                    "alice",
                    Apply,
                    pod(json!({"volumes": [{"name": "v", "emptyDir": {}}]})),
                ),
                (
                    "bob",
                    Apply,
                    pod(json!({"volumes": [{"name": "w", "emptyDir": {}}]})),
                ),
                ("alice", Apply, pod(json!({}))),
            ],
            want: Want::Object(pod(json!({"volumes": [{"name": "w", "emptyDir": {}}]}))),
            owns: vec![],
        },
        Case {
            name: "map list: shared items follow the applier's order",
            steps: vec![
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}])),
                ),
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "c"}, {"name": "b"}, {"name": "a"}])),
                ),
            ],
            want: Want::Object(containers(
                json!([{"name": "c"}, {"name": "b"}, {"name": "a"}]),
            )),
            owns: vec![],
        },
        Case {
            name: "atomic list (args): the same value is co-owned",
            steps: vec![
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "a", "args": ["1", "2"]}])),
                ),
                (
                    "bob",
                    Apply,
                    containers(json!([{"name": "a", "args": ["1", "2"]}])),
                ),
            ],
            want: Want::Object(containers(json!([{"name": "a", "args": ["1", "2"]}]))),
            owns: vec![
                (
                    "alice",
                    "spec/template/spec/containers/k:{\"name\":\"a\"}/args",
                    true,
                ),
                (
                    "bob",
                    "spec/template/spec/containers/k:{\"name\":\"a\"}/args",
                    true,
                ),
            ],
        },
        Case {
            name: "atomic list: its owner replaces it whole",
            steps: vec![
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "a", "args": ["1", "2"]}])),
                ),
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "a", "args": ["3"]}])),
                ),
            ],
            want: Want::Object(containers(json!([{"name": "a", "args": ["3"]}]))),
            owns: vec![],
        },
        Case {
            name: "atomic list: forced, replaced whole",
            steps: vec![
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "a", "command": ["sh", "-c"]}])),
                ),
                (
                    "bob",
                    Force,
                    containers(json!([{"name": "a", "command": ["bash"]}])),
                ),
            ],
            want: Want::Object(containers(json!([{"name": "a", "command": ["bash"]}]))),
            owns: vec![
                (
                    "bob",
                    "spec/template/spec/containers/k:{\"name\":\"a\"}/command",
                    true,
                ),
                (
                    "alice",
                    "spec/template/spec/containers/k:{\"name\":\"a\"}/command",
                    false,
                ),
            ],
        },
        Case {
            name: "atomic list of objects (tolerations) conflicts whole",
            steps: vec![
                (
                    "alice",
                    Apply,
                    pod(json!({"tolerations": [{"key": "a", "operator": "Exists"}]})),
                ),
                (
                    "bob",
                    Apply,
                    pod(
                        json!({"tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}),
                    ),
                ),
            ],
            want: Want::Conflict(
                r#"Apply failed with 1 conflict: conflict with "alice": .spec.template.spec.tolerations"#,
            ),
            owns: vec![],
        },
        Case {
            name: "atomic list: dropped by its only owner",
            steps: vec![
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "a", "args": ["1"], "image": "x"}])),
                ),
                (
                    "alice",
                    Apply,
                    containers(json!([{"name": "a", "image": "x"}])),
                ),
            ],
            want: Want::Object(containers(json!([{"name": "a", "image": "x"}]))),
            owns: vec![],
        },
    ];
    for c in cases {
        run(c);
    }
}

#[test]
fn container_images_at_scale() {
    // A 50-container Deployment: each re-apply changing one image owns that image only
    // once, conflicts with nobody, and leaves the other 49 alone.
    let cs = |bump: Option<usize>| {
        Value::Array(
            (0..50)
                .map(|i| {
                    let tag = if bump == Some(i) { 2 } else { 1 };
                    json!({"name": format!("c{i}"), "image": format!("img{i}:{tag}")})
                })
                .collect(),
        )
    };
    let first = apply(
        None,
        &body(&containers(cs(None))),
        &Request {
            manager: "alice",
            api_version: "apps/v1",
            now: TIMES[0],
            subresource: None,
            ignored: &[],
        },
        false,
    )
    .expect("create");
    let req = Request {
        manager: "alice",
        api_version: "apps/v1",
        now: TIMES[1],
        subresource: None,
        ignored: &[],
    };
    let out = apply(Some(&first), &body(&containers(cs(Some(17)))), &req, false).expect("apply");
    assert_eq!(view(&out), containers(cs(Some(17))));
}
