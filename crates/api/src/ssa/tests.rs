use super::*;
use serde_json::json;

const T0: &str = "2024-01-01T00:00:00Z";
const T1: &str = "2024-01-01T00:01:00Z";
const T2: &str = "2024-01-01T00:02:00Z";

fn req<'a>(manager: &'a str, now: &'a str) -> Request<'a> {
    Request {
        manager,
        api_version: "apps/v1",
        now,
        subresource: None,
        ignored: &[],
    }
}

fn deploy(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
}

fn containers(list: Value) -> Value {
    deploy(json!({"template": {"spec": {"containers": list}}}))
}

fn apply_ok(live: Option<&Value>, applied: &Value, manager: &str, now: &str) -> Value {
    apply(live, applied, &req(manager, now), false).unwrap()
}

fn conflict(live: &Value, applied: &Value, manager: &str) -> Conflicts {
    match apply(Some(live), applied, &req(manager, T2), false) {
        Err(SsaError::Conflicts(c)) => c,
        other => panic!("expected conflicts, got {other:?}"),
    }
}

fn entries(obj: &Value) -> Vec<(String, String, Value)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or_default().to_string(),
                e["operation"].as_str().unwrap_or_default().to_string(),
                e["fieldsV1"].clone(),
            )
        })
        .collect()
}

fn managers(obj: &Value) -> Vec<String> {
    entries(obj)
        .into_iter()
        .map(|(m, o, _)| format!("{m}/{o}"))
        .collect()
}

fn owns(obj: &Value, manager: &str, path: &[&str]) -> bool {
    let Some((_, _, f)) = entries(obj).into_iter().find(|(m, _, _)| m == manager) else {
        return false;
    };
    let set = FieldSet::from_fields_v1(&f).unwrap();
    let pes: Vec<PathElement> = path
        .iter()
        .map(|p| PathElement::decode(p).unwrap())
        .collect();
    set.has(&pes)
}

#[test]
fn apply_creates_ownership_with_upstream_entry() {
    let applied = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80}]}]}}}});
    let out = apply_ok(None, &applied, "alice", T0);
    assert_eq!(out["spec"]["replicas"], 2);
    let mf = &out["metadata"]["managedFields"];
    assert_eq!(mf.as_array().unwrap().len(), 1);
    let e = &mf[0];
    assert_eq!(
        e.as_object().unwrap().keys().collect::<Vec<_>>(),
        [
            "manager",
            "operation",
            "apiVersion",
            "time",
            "fieldsType",
            "fieldsV1"
        ]
    );
    assert_eq!(e["manager"], "alice");
    assert_eq!(e["operation"], "Apply");
    assert_eq!(e["apiVersion"], "apps/v1");
    assert_eq!(e["time"], T0);
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(
        serde_json::to_string(&e["fieldsV1"]).unwrap(),
        concat!(
            r#"{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"#,
            r#""k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{"#,
            r#""k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}}}}}}"#
        )
    );
}

#[test]
fn equal_values_are_co_owned() {
    let a = apply_ok(None, &deploy(json!({"replicas": 2})), "alice", T0);
    let b = apply_ok(Some(&a), &deploy(json!({"replicas": 2})), "bob", T1);
    assert!(owns(&b, "alice", &["f:spec", "f:replicas"]));
    assert!(owns(&b, "bob", &["f:spec", "f:replicas"]));
    assert_eq!(managers(&b), ["alice/Apply", "bob/Apply"]);
}

#[test]
fn conflict_messages_are_upstreams() {
    let a = apply_ok(None, &deploy(json!({"replicas": 2})), "alice", T0);
    let c = conflict(&a, &deploy(json!({"replicas": 5})), "autoscaler");
    assert_eq!(
        c.to_string(),
        r#"Apply failed with 1 conflict: conflict with "alice": .spec.replicas"#
    );
    // An Update manager is named with its apiVersion.
    let mut scaled = a.clone();
    scaled["spec"]["replicas"] = json!(5);
    update_managed_fields(Some(&a), &mut scaled, &req("B", T1)).unwrap();
    let c = conflict(&scaled, &deploy(json!({"replicas": 3})), "alice");
    assert_eq!(
        c.to_string(),
        r#"Apply failed with 1 conflict: conflict with "B" using apps/v1: .spec.replicas"#
    );
    assert_eq!(
        c.causes(),
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"B\" using apps/v1",
            "field": ".spec.replicas"}])
    );
    let e = apply(
        Some(&scaled),
        &deploy(json!({"replicas": 3})),
        &req("alice", T2),
        false,
    )
    .unwrap_err();
    assert_eq!(e.status_code(), 409);
}

#[test]
fn plural_conflicts_group_by_manager() {
    let spec = json!({"replicas": 2, "paused": false});
    let a = apply_ok(None, &deploy(spec), "B", T0);
    let c = conflict(&a, &deploy(json!({"replicas": 3, "paused": true})), "alice");
    assert_eq!(
        c.to_string(),
        "Apply failed with 2 conflicts: conflicts with \"B\":\n- .spec.paused\n- .spec.replicas"
    );
    // Two managers, sorted by identifier; Update managers carry their apiVersion.
    let mut upd = a.clone();
    upd["spec"]["minReadySeconds"] = json!(5);
    update_managed_fields(Some(&a), &mut upd, &req("A", T1)).unwrap();
    let c = conflict(
        &upd,
        &deploy(json!({"replicas": 3, "minReadySeconds": 6})),
        "alice",
    );
    assert_eq!(
        c.to_string(),
        "Apply failed with 2 conflicts: conflicts with \"A\" using apps/v1:\n- .spec.minReadySeconds\nconflicts with \"B\":\n- .spec.replicas"
    );
}

#[test]
fn force_takes_ownership() {
    let a = apply_ok(
        None,
        &deploy(json!({"replicas": 2, "paused": false})),
        "B",
        T0,
    );
    let out = apply(
        Some(&a),
        &deploy(json!({"replicas": 3})),
        &req("alice", T1),
        true,
    )
    .unwrap();
    assert_eq!(out["spec"]["replicas"], 3);
    assert!(owns(&out, "alice", &["f:spec", "f:replicas"]));
    assert!(!owns(&out, "B", &["f:spec", "f:replicas"]));
    assert!(owns(&out, "B", &["f:spec", "f:paused"]));
    // B keeps nothing else: its entry goes once empty.
    let out2 = apply(
        Some(&out),
        &deploy(json!({"replicas": 3, "paused": true})),
        &req("alice", T2),
        true,
    )
    .unwrap();
    assert_eq!(managers(&out2), ["alice/Apply"]);
}

#[test]
fn dropped_fields_are_removed_unless_owned_by_others() {
    let cases = [
        // (first apply by alice, bob's apply (None: no bob), alice's second apply, expected spec)
        (
            json!({"replicas": 2, "paused": true}),
            None,
            json!({"replicas": 2}),
            json!({"replicas": 2}),
        ),
        (
            json!({"replicas": 2, "paused": true}),
            Some(json!({"paused": true})),
            json!({"replicas": 2}),
            json!({"replicas": 2, "paused": true}),
        ),
        (
            json!({"replicas": 2, "template": {"metadata": {"labels": {"a": "1", "b": "2"}}}}),
            None,
            json!({"replicas": 2, "template": {"metadata": {"labels": {"a": "1"}}}}),
            json!({"replicas": 2, "template": {"metadata": {"labels": {"a": "1"}}}}),
        ),
        (
            json!({"replicas": 2, "template": {"metadata": {"labels": {"a": "1"}}}}),
            None,
            json!({"replicas": 2}),
            json!({"replicas": 2}),
        ),
        (
            json!({"template": {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}}),
            Some(json!({"template": {"spec": {"containers": [{"name": "b", "image": "y"}]}}})),
            json!({"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}),
            json!({"template": {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}}),
        ),
        (
            json!({"template": {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}}),
            None,
            json!({"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}),
            json!({"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}),
        ),
        (
            json!({"template": {"spec": {"containers": [{"name": "a", "image": "x", "args": ["1"]}]}}}),
            None,
            json!({"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}),
            json!({"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}),
        ),
    ];
    for (i, (first, bob, second, want)) in cases.into_iter().enumerate() {
        let mut live = apply_ok(None, &deploy(first), "alice", T0);
        if let Some(b) = bob {
            live = apply_ok(Some(&live), &deploy(b), "bob", T1);
        }
        let out = apply_ok(Some(&live), &deploy(second), "alice", T2);
        assert_eq!(out["spec"], want, "case {i}");
    }
}

#[test]
fn fields_set_by_updates_survive_an_appliers_drop() {
    let a = apply_ok(
        None,
        &deploy(json!({"replicas": 2, "paused": true})),
        "alice",
        T0,
    );
    let mut b = a.clone();
    b["spec"]["paused"] = json!(false);
    update_managed_fields(Some(&a), &mut b, &req("kubectl-edit", T1)).unwrap();
    assert!(!owns(&b, "alice", &["f:spec", "f:paused"]));
    let out = apply_ok(Some(&b), &deploy(json!({"replicas": 2})), "alice", T2);
    assert_eq!(out["spec"]["paused"], false);
}

#[test]
fn list_map_merge_of_containers_by_name() {
    let live = apply_ok(
        None,
        &containers(json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}])),
        "x",
        T0,
    );
    let out = apply_ok(
        Some(&live),
        &containers(
            json!([{"name": "c", "image": "c:1"}, {"name": "b", "image": "b:1", "env": [{"name": "E", "value": "1"}]}]),
        ),
        "y",
        T1,
    );
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "a", "image": "a:1"}, {"name": "c", "image": "c:1"},
            {"name": "b", "image": "b:1", "env": [{"name": "E", "value": "1"}]}])
    );
    assert!(owns(
        &out,
        "y",
        &[
            "f:spec",
            "f:template",
            "f:spec",
            "f:containers",
            r#"k:{"name":"b"}"#,
            "f:image"
        ]
    ));
    assert!(owns(
        &out,
        "x",
        &[
            "f:spec",
            "f:template",
            "f:spec",
            "f:containers",
            r#"k:{"name":"b"}"#,
            "f:image"
        ]
    ));
    // Reordering shared items follows the applied order.
    let out = apply_ok(
        Some(&live),
        &containers(json!([{"name": "b", "image": "b:1"}, {"name": "a", "image": "a:1"}])),
        "x",
        T1,
    );
    let names: Vec<&str> = out["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["b", "a"]);
}

#[test]
fn merge_orders_like_upstream() {
    let s = Schemas::for_group_version("apps", "v1").unwrap();
    let ty = s.root("apps", "v1", "Deployment");
    let c = |names: &[&str]| {
        containers(Value::Array(
            names.iter().map(|n| json!({"name": n})).collect(),
        ))
    };
    let names = |v: &Value| -> Vec<String> {
        v["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    let cases: [(&[&str], &[&str], &[&str]); 5] = [
        (&["a", "b", "c"], &["b"], &["a", "b", "c"]),
        (&["a", "b"], &["c"], &["a", "b", "c"]),
        (&["a", "b", "c"], &["c", "a"], &["b", "c", "a"]),
        (&["a", "x", "b"], &["b", "a"], &["x", "b", "a"]),
        (&[], &["a", "b"], &["a", "b"]),
    ];
    for (live, applied, want) in cases {
        let out = typed::merge(Some(&c(live)), &c(applied), &ty).unwrap();
        assert_eq!(names(&out), want, "{live:?} + {applied:?}");
    }
}

#[test]
fn set_lists_merge_and_own_by_value() {
    let obj = |f: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "finalizers": f}});
    let r = |m: &'static str| Request {
        manager: m,
        api_version: "v1",
        now: T0,
        subresource: None,
        ignored: &[],
    };
    let a = apply(None, &obj(json!(["a", "b"])), &r("x"), false).unwrap();
    let b = apply(Some(&a), &obj(json!(["c", "b"])), &r("y"), false).unwrap();
    assert_eq!(b["metadata"]["finalizers"], json!(["a", "c", "b"]));
    assert!(owns(&b, "y", &["f:metadata", "f:finalizers", r#"v:"c""#]));
    assert!(owns(&b, "x", &["f:metadata", "f:finalizers", r#"v:"b""#]));
    // x drops "a" (only its own) and "b" (co-owned by y: stays).
    let c = apply(Some(&b), &obj(json!([])), &r("x"), false).unwrap();
    assert_eq!(c["metadata"]["finalizers"], json!(["c", "b"]));
}

#[test]
fn atomic_values_conflict_as_a_whole() {
    let sel = |m: Value| deploy(json!({"template": {"spec": {"nodeSelector": m}}}));
    let a = apply_ok(None, &sel(json!({"disk": "ssd"})), "alice", T0);
    assert!(owns(
        &a,
        "alice",
        &["f:spec", "f:template", "f:spec", "f:nodeSelector"]
    ));
    assert!(!owns(
        &a,
        "alice",
        &["f:spec", "f:template", "f:spec", "f:nodeSelector", "f:disk"]
    ));
    let c = conflict(&a, &sel(json!({"zone": "a"})), "bob");
    assert_eq!(
        c.to_string(),
        r#"Apply failed with 1 conflict: conflict with "alice": .spec.template.spec.nodeSelector"#
    );
    // Forced: replaced whole, not merged.
    let out = apply(Some(&a), &sel(json!({"zone": "a"})), &req("bob", T1), true).unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["nodeSelector"],
        json!({"zone": "a"})
    );
    // Atomic lists (args) likewise, and a granular map (labels) merges per key.
    let args = |a: Value| containers(json!([{"name": "c", "args": a}]));
    let x = apply_ok(None, &args(json!(["1", "2"])), "alice", T0);
    let c = conflict(&x, &args(json!(["3"])), "bob");
    assert_eq!(
        c.to_string(),
        r#"Apply failed with 1 conflict: conflict with "alice": .spec.template.spec.containers[name="c"].args"#
    );
    let labels = |l: Value| json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": l}});
    let x = apply_ok(None, &labels(json!({"a": "1"})), "alice", T0);
    let y = apply_ok(Some(&x), &labels(json!({"b": "2"})), "bob", T1);
    assert_eq!(y["metadata"]["labels"], json!({"a": "1", "b": "2"}));
}

#[test]
fn reapplying_unchanged_keeps_time_and_object() {
    let a = apply_ok(None, &deploy(json!({"replicas": 2})), "alice", T0);
    let b = apply_ok(Some(&a), &deploy(json!({"replicas": 2})), "alice", T1);
    assert_eq!(a, b);
}

#[test]
fn update_entries_after_a_merge_patch() {
    let created = {
        let mut o = deploy(json!({"replicas": 1}));
        update_managed_fields(None, &mut o, &req("kubectl-create", T0)).unwrap();
        o
    };
    assert_eq!(managers(&created), ["kubectl-create/Update"]);
    assert!(owns(&created, "kubectl-create", &["f:spec", "f:replicas"]));
    // A merge patch changing replicas and adding a label.
    let mut patched = created.clone();
    patched["spec"]["replicas"] = json!(3);
    patched["metadata"]["labels"] = json!({"tier": "web"});
    update_managed_fields(Some(&created), &mut patched, &req("kubectl-patch", T1)).unwrap();
    assert_eq!(managers(&patched), ["kubectl-patch/Update"]);
    assert_eq!(
        entries(&patched)[0].2,
        json!({"f:metadata": {"f:labels": {".": {}, "f:tier": {}}}, "f:spec": {"f:replicas": {}}})
    );
    let e = &patched["metadata"]["managedFields"][0];
    assert_eq!(e["time"], T1);
    // A no-op write records nothing new.
    let mut same = patched.clone();
    update_managed_fields(Some(&patched), &mut same, &req("other", T2)).unwrap();
    assert_eq!(same, patched);
    // The same manager's second write extends its entry and bumps its time.
    let mut again = patched.clone();
    again["spec"]["paused"] = json!(true);
    update_managed_fields(Some(&patched), &mut again, &req("kubectl-patch", T2)).unwrap();
    assert!(owns(&again, "kubectl-patch", &["f:spec", "f:replicas"]));
    assert!(owns(&again, "kubectl-patch", &["f:spec", "f:paused"]));
    assert_eq!(again["metadata"]["managedFields"][0]["time"], T2);
    // Removing a field drops it from its owner.
    let mut removed = again.clone();
    removed["spec"].as_object_mut().unwrap().remove("paused");
    update_managed_fields(Some(&again), &mut removed, &req("x", T2)).unwrap();
    assert!(!owns(&removed, "kubectl-patch", &["f:spec", "f:paused"]));
    assert_eq!(managers(&removed), ["kubectl-patch/Update"]);
}

#[test]
fn entries_order_apply_first_then_time() {
    let a = apply_ok(None, &deploy(json!({"replicas": 2})), "zed", T2);
    let mut b = a.clone();
    b["spec"]["paused"] = json!(true);
    update_managed_fields(Some(&a), &mut b, &req("m2", T0)).unwrap();
    let mut c = b.clone();
    c["spec"]["minReadySeconds"] = json!(1);
    update_managed_fields(Some(&b), &mut c, &req("m1", T1)).unwrap();
    let mut d = c.clone();
    d["spec"]["revisionHistoryLimit"] = json!(1);
    update_managed_fields(Some(&c), &mut d, &req("m0", T1)).unwrap();
    assert_eq!(
        managers(&d),
        ["zed/Apply", "m2/Update", "m0/Update", "m1/Update"]
    );
}

#[test]
fn client_rewritten_managed_fields() {
    let a = apply_ok(None, &deploy(json!({"replicas": 2})), "alice", T0);
    // Empty list: kept from the stored object.
    let mut b = a.clone();
    b["metadata"]["managedFields"] = json!([]);
    update_managed_fields(Some(&a), &mut b, &req("x", T1)).unwrap();
    assert_eq!(managers(&b), ["alice/Apply"]);
    // [{}]: cleared.
    let mut c = a.clone();
    c["metadata"]["managedFields"] = json!([{}]);
    update_managed_fields(Some(&a), &mut c, &req("x", T1)).unwrap();
    assert!(c["metadata"].get("managedFields").is_none());
    // [{}] with a change: the writer alone owns what it changed.
    let mut c2 = a.clone();
    c2["metadata"]["managedFields"] = json!([{}]);
    c2["spec"]["replicas"] = json!(4);
    update_managed_fields(Some(&a), &mut c2, &req("x", T1)).unwrap();
    assert_eq!(managers(&c2), ["x/Update"]);
    // Replaced (kubectl's client-side → server-side apply migration).
    let mut d = a.clone();
    d["metadata"]["managedFields"] = json!([{"manager": "kubectl", "operation": "Apply",
        "apiVersion": "apps/v1", "time": T0, "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:replicas": {}}}}]);
    update_managed_fields(Some(&a), &mut d, &req("kubectl-client-side-apply", T1)).unwrap();
    assert_eq!(managers(&d), ["kubectl/Apply"]);
    // Undecodable: the stored ones stay.
    let mut e = a.clone();
    e["metadata"]["managedFields"] = json!([{"manager": "m", "operation": "Bogus"}]);
    update_managed_fields(Some(&a), &mut e, &req("x", T1)).unwrap();
    assert_eq!(managers(&e), ["alice/Apply"]);
    let mut e2 = e.clone();
    e2["metadata"]["managedFields"] = json!([{"manager": "m", "operation": "Bogus"}]);
    assert!(validate_managed_fields(&e2).is_err());
    assert!(validate_managed_fields(&a).is_ok());
    let mut bad = a.clone();
    bad["metadata"]["managedFields"][0]["fieldsV1"] = json!({"q:x": {}});
    assert!(validate_managed_fields(&bad).is_err());
    // Stored ones undecodable: apply fails with 500.
    let err = apply(
        Some(&bad),
        &deploy(json!({"replicas": 2})),
        &req("alice", T1),
        false,
    )
    .unwrap_err();
    assert_eq!(err.status_code(), 500);
}

#[test]
fn status_subresource_writes() {
    let a = apply_ok(None, &deploy(json!({"replicas": 2})), "alice", T0);
    let mut s = a.clone();
    s["status"] = json!({"replicas": 2, "readyReplicas": 1});
    s["spec"]["replicas"] = json!(9); // reset by the status strategy, ignored here
    s["metadata"]["managedFields"] = json!([{}]); // ignored on a subresource
    let ignored = reset_fields(true, Some("status"));
    let r = Request {
        subresource: Some("status"),
        ignored: &ignored,
        ..req("kube-controller-manager", T1)
    };
    update_managed_fields(Some(&a), &mut s, &r).unwrap();
    let mf = s["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf.len(), 2);
    assert_eq!(mf[1]["subresource"], "status");
    assert!(owns(
        &s,
        "kube-controller-manager",
        &["f:status", "f:readyReplicas"]
    ));
    assert!(!owns(
        &s,
        "kube-controller-manager",
        &["f:spec", "f:replicas"]
    ));
    assert!(owns(&s, "alice", &["f:spec", "f:replicas"]));
    // On the main endpoint status is ignored: applying it owns nothing there.
    let main = reset_fields(true, None);
    let r = Request {
        ignored: &main,
        ..req("alice", T2)
    };
    let out = apply(
        Some(&s),
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 2}, "status": {"replicas": 7}}),
        &r,
        false,
    )
    .unwrap();
    assert!(!owns(&out, "alice", &["f:status", "f:replicas"]));
    assert!(owns(
        &out,
        "kube-controller-manager",
        &["f:status", "f:replicas"]
    ));
    // Apply to the status subresource is its own entry.
    let st = reset_fields(true, Some("status"));
    let r = Request {
        subresource: Some("status"),
        ignored: &st,
        ..req("ctrl", T2)
    };
    let out = apply(
        Some(&a),
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "status": {"observedGeneration": 1}}),
        &r,
        false,
    )
    .unwrap();
    let e = &out["metadata"]["managedFields"].as_array().unwrap()[1];
    assert_eq!(e["manager"], "ctrl");
    assert_eq!(e["subresource"], "status");
}

#[test]
fn subresource_conflict_names_it() {
    let id = ManagerId::new("m", "Update", "apps/v1", "status");
    assert_eq!(
        id.describe(),
        r#""m" with subresource "status" using apps/v1"#
    );
    assert_eq!(
        id.identifier(),
        r#"{"manager":"m","operation":"Update","apiVersion":"apps/v1","subresource":"status"}"#
    );
    assert_eq!(
        ManagerId::new("m", "Apply", "apps/v1", "").identifier(),
        r#"{"manager":"m","operation":"Apply"}"#
    );
}

#[test]
fn user_agent_managers() {
    for (ua, want) in [
        ("kubectl/v1.33.9 (linux/amd64) kubernetes/abc", "kubectl"),
        ("python-requests/2.31", "python-requests"),
        ("OpenAPI-Generator/37.0.2/python", "OpenAPI-Generator"),
        ("Helm/3.15.0", "Helm"),
        ("curl", "curl"),
        ("", ""),
        ("a\u{7}b/1", "ab"),
    ] {
        assert_eq!(manager_from_user_agent(ua), want, "{ua}");
    }
    assert_eq!(manager_from_user_agent(&"x".repeat(300)).len(), 128);
}

#[test]
fn update_managers_are_capped() {
    let mut obj = deploy(json!({}));
    for i in 0..12 {
        let old = obj.clone();
        obj["metadata"]["annotations"] = json!({ format!("k{i}"): "v" });
        if let Some(a) = old
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
        {
            for (k, v) in a {
                obj["metadata"]["annotations"][k] = v.clone();
            }
        }
        let now = format!("2024-01-01T00:00:{i:02}Z");
        update_managed_fields(Some(&old), &mut obj, &req(&format!("m{i:02}"), &now)).unwrap();
    }
    let names = managers(&obj);
    assert_eq!(names.len(), 10);
    assert_eq!(names[0], "ancient-changes/Update");
    assert!(owns(
        &obj,
        "ancient-changes",
        &["f:metadata", "f:annotations", "f:k0"]
    ));
    assert!(owns(
        &obj,
        "ancient-changes",
        &["f:metadata", "f:annotations", "f:k2"]
    ));
    assert_eq!(
        obj["metadata"]["managedFields"][0]["time"],
        "2024-01-01T00:00:02Z"
    );
}

#[test]
fn bad_apply_input() {
    let mut with_mf = deploy(json!({}));
    with_mf["metadata"]["managedFields"] = json!([]);
    let cases = [
        (with_mf, "metadata.managedFields must be nil"),
        (
            json!({"apiVersion": "apps/v1beta1", "kind": "Deployment", "metadata": {"name": "x"}}),
            "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, expected: apps/v1",
        ),
        (
            containers(json!([{"image": "x"}])),
            "failed to create typed patch object (apps/v1, Kind=Deployment): .spec.template.spec.containers: associative list with keys has an element that omits key field \"name\" (and doesn't have default value)",
        ),
        (
            containers(json!([{"name": "a"}, {"name": "a"}])),
            "failed to create typed patch object (apps/v1, Kind=Deployment): .spec.template.spec.containers[name=\"a\"]: duplicate entries for key",
        ),
        (json!([1]), "apply patch must be an object"),
    ];
    for (body, want) in cases {
        let e = apply(None, &body, &req("m", T0), false).unwrap_err();
        assert_eq!(e.to_string(), want);
        assert_eq!(e.status_code(), 400);
    }
}

#[test]
fn kubectl_server_side_apply_after_client_side_apply() {
    // Created by client-side apply: an Update entry and the annotation.
    let config = deploy(json!({"replicas": 2}));
    let mut live = config.clone();
    live["metadata"]["annotations"] = json!({LAST_APPLIED: go_json(&config) + "\n"});
    update_managed_fields(None, &mut live, &req("kubectl-client-side-apply", T0)).unwrap();
    // kubectl --server-side with a new value: allowed, the annotation follows.
    let out = apply_ok(Some(&live), &deploy(json!({"replicas": 3})), "kubectl", T1);
    assert_eq!(out["spec"]["replicas"], 3);
    assert!(owns(&out, "kubectl", &["f:spec", "f:replicas"]));
    let ann = out["metadata"]["annotations"][LAST_APPLIED]
        .as_str()
        .unwrap();
    assert_eq!(
        ann,
        "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\",\"namespace\":\"default\"},\"spec\":{\"replicas\":3}}\n"
    );
    // Another manager gets the conflict.
    let c = conflict(&live, &deploy(json!({"replicas": 3})), "other");
    assert_eq!(
        c.to_string(),
        r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas"#
    );
}

#[test]
fn fields_of_applied_config() {
    let s = Schemas::for_group_version("", "v1").unwrap();
    let ty = s.root("", "v1", "Pod");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {}},
        "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "protocol": "UDP"}],
            "resources": {}}], "tolerations": [{"key": "k"}], "securityContext": null}});
    let set = fields_of(&pod, &ty).unwrap();
    let paths: Vec<String> = set.paths().iter().map(ToString::to_string).collect();
    assert_eq!(
        paths,
        [
            ".metadata.labels",
            ".spec.securityContext",
            ".spec.tolerations",
            ".spec.containers[name=\"c\"]",
            ".spec.containers[name=\"c\"].name",
            ".spec.containers[name=\"c\"].resources",
            ".spec.containers[name=\"c\"].ports[containerPort=80,protocol=\"UDP\"]",
            ".spec.containers[name=\"c\"].ports[containerPort=80,protocol=\"UDP\"].containerPort",
            ".spec.containers[name=\"c\"].ports[containerPort=80,protocol=\"UDP\"].protocol",
        ]
    );
}
