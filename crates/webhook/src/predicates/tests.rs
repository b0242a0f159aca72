use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use berth_api::user::UserInfo;
use rustls::RootCertStore;
use serde_json::{Value, json};

use super::*;
use crate::attributes::{GroupVersionKind, Operation};
use crate::config::Registry;

#[derive(Default)]
struct FakeHooks {
    namespaces: HashMap<String, BTreeMap<String, String>>,
    equivalents: Vec<(GroupVersionResource, GroupVersionKind)>,
    conditions: HashMap<String, Result<bool, String>>,
}

#[async_trait]
impl Hooks for FakeHooks {
    async fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, String> {
        if name == "broken" {
            return Err("cache unavailable".into());
        }
        Ok(self.namespaces.get(name).cloned())
    }

    fn equivalent_resources(
        &self,
        _resource: &GroupVersionResource,
        _subresource: &str,
    ) -> Vec<(GroupVersionResource, GroupVersionKind)> {
        self.equivalents.clone()
    }

    fn evaluate_match_condition(&self, input: &MatchConditionInput<'_>) -> Result<bool, String> {
        self.conditions
            .get(input.expression)
            .cloned()
            .unwrap_or(Err(format!("no such expression {}", input.expression)))
    }
}

fn hook(extra: Value) -> Webhook {
    let mut h = json!({
        "name": "w.example.com",
        "clientConfig": {"url": "https://127.0.0.1/"},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}],
    });
    if let (Some(h), Some(e)) = (h.as_object_mut(), extra.as_object()) {
        h.extend(e.clone());
    }
    let r = Registry::new(
        &[json!({"metadata": {"name": "c"}, "webhooks": [h]})],
        &[],
        &Arc::new(RootCertStore::empty()),
    );
    r.mutating().next().cloned().expect("one webhook")
}

struct Req {
    op: Operation,
    kind: GroupVersionKind,
    resource: GroupVersionResource,
    sub: &'static str,
    ns: &'static str,
    name: &'static str,
    user: UserInfo,
}

impl Req {
    fn new(
        op: Operation,
        gvr: (&str, &str, &str),
        kind: &str,
        sub: &'static str,
        ns: &'static str,
    ) -> Req {
        Req {
            op,
            kind: GroupVersionKind::new(gvr.0, gvr.1, kind),
            resource: GroupVersionResource::new(gvr.0, gvr.1, gvr.2),
            sub,
            ns,
            name: "obj",
            user: UserInfo::default(),
        }
    }

    fn pod(op: Operation) -> Req {
        Req::new(op, ("", "v1", "pods"), "Pod", "", "default")
    }

    fn attrs<'a>(&'a self, object: Option<&'a Value>, old: Option<&'a Value>) -> Attributes<'a> {
        Attributes {
            operation: self.op,
            kind: &self.kind,
            resource: &self.resource,
            subresource: self.sub,
            namespace: self.ns,
            name: self.name,
            user: &self.user,
            object,
            old_object: old,
            dry_run: false,
            options: None,
        }
    }
}

fn rule(v: Value) -> crate::config::Rule {
    hook(json!({"rules": [v]})).rules.remove(0)
}

#[test]
fn rules() {
    use Operation::*;
    let pods = json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]});
    let cases: Vec<(Value, Req, bool)> = vec![
        (pods.clone(), Req::pod(Create), true),
        (pods.clone(), Req::pod(Update), false),
        // A main-resource rule does not match a subresource.
        (
            pods.clone(),
            Req::new(Create, ("", "v1", "pods"), "Pod", "status", "default"),
            false,
        ),
        (
            pods.clone(),
            Req::new(
                Create,
                ("apps", "v1", "deployments"),
                "Deployment",
                "",
                "default",
            ),
            false,
        ),
        (
            pods.clone(),
            Req::new(Create, ("", "v2", "pods"), "Pod", "", "default"),
            false,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}),
            Req::new(Connect, ("", "v1", "pods"), "Pod", "", "default"),
            true,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}),
            Req::new(Create, ("", "v1", "pods"), "Pod", "exec", "default"),
            false,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}),
            Req::new(Create, ("", "v1", "pods"), "Pod", "exec", "default"),
            true,
        ),
        (
            json!({"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/status"]}),
            Req::new(Update, ("", "v1", "pods"), "Pod", "status", "default"),
            true,
        ),
        (
            json!({"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["*/status"]}),
            Req::new(
                Update,
                ("apps", "v1", "deployments"),
                "Deployment",
                "status",
                "default",
            ),
            false,
        ),
        (
            json!({"operations": ["UPDATE"], "apiGroups": ["*"], "apiVersions": ["v1"], "resources": ["*/status"]}),
            Req::new(
                Update,
                ("apps", "v1", "deployments"),
                "Deployment",
                "status",
                "default",
            ),
            true,
        ),
        (
            json!({"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/*"]}),
            Req::new(Update, ("", "v1", "pods"), "Pod", "status", "default"),
            true,
        ),
        // `pods/*` covers the main resource too (a `*` subresource matches "").
        (
            json!({"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/*"]}),
            Req::pod(Update),
            true,
        ),
        // Scopes: a namespace is cluster-scoped though its requests carry a namespace.
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Namespaced"}),
            Req::pod(Create),
            true,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Cluster"}),
            Req::pod(Create),
            false,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Cluster"}),
            Req::new(Create, ("", "v1", "nodes"), "Node", "", ""),
            true,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Namespaced"}),
            Req::new(Create, ("", "v1", "nodes"), "Node", "", ""),
            false,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Cluster"}),
            Req::new(Create, ("", "v1", "namespaces"), "Namespace", "", "obj"),
            true,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Namespaced"}),
            Req::new(Create, ("", "v1", "namespaces"), "Namespace", "", ""),
            false,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Bogus"}),
            Req::pod(Create),
            false,
        ),
        (
            json!({"operations": ["DELETE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "*"}),
            Req::pod(Delete),
            true,
        ),
        // An empty rule matches nothing.
        (json!({}), Req::pod(Create), false),
    ];
    for (i, (r, req, want)) in cases.into_iter().enumerate() {
        let attrs = req.attrs(None, None);
        assert_eq!(
            rule_matches(&rule(r.clone()), &attrs, attrs.resource),
            want,
            "case {i}: {r}"
        );
    }
}

#[test]
fn exemptions() {
    for (group, kind, exempt) in [
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration",
            true,
        ),
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
            true,
        ),
        (
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicyBinding",
            true,
        ),
        (
            "admissionregistration.k8s.io",
            "MutatingAdmissionPolicy",
            true,
        ),
        ("admissionregistration.k8s.io", "SomethingElse", false),
        ("", "Pod", false),
    ] {
        let req = Req::new(Operation::Create, (group, "v1", "x"), kind, "", "");
        assert_eq!(is_exempt(&req.attrs(None, None)), exempt, "{kind}");
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
}

#[test]
fn namespace_selectors() {
    use Operation::*;
    let mut hooks = FakeHooks::default();
    hooks.namespaces.insert(
        "prod".into(),
        BTreeMap::from([("env".into(), "prod".into())]),
    );
    hooks
        .namespaces
        .insert("dev".into(), BTreeMap::from([("env".into(), "dev".into())]));
    let sel = json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}});
    let ns_obj = |env: &str| json!({"metadata": {"name": "obj", "labels": {"env": env}}});
    let prod_ns = ns_obj("prod");
    let dev_ns = ns_obj("dev");
    // (selector, request, object, want: Ok(bool) or Err(code))
    type Case<'a> = (Value, Req, Option<&'a Value>, Result<bool, u16>);
    let cases: Vec<Case> = vec![
        (
            sel.clone(),
            Req::new(Create, ("", "v1", "pods"), "Pod", "", "prod"),
            None,
            Ok(true),
        ),
        (
            sel.clone(),
            Req::new(Create, ("", "v1", "pods"), "Pod", "", "dev"),
            None,
            Ok(false),
        ),
        (
            sel.clone(),
            Req::new(Create, ("", "v1", "pods"), "Pod", "", "missing"),
            None,
            Err(404),
        ),
        (
            sel.clone(),
            Req::new(Create, ("", "v1", "pods"), "Pod", "", "broken"),
            None,
            Err(500),
        ),
        // Cluster-scoped objects other than namespaces are never exempted.
        (
            sel.clone(),
            Req::new(Create, ("", "v1", "nodes"), "Node", "", ""),
            None,
            Ok(true),
        ),
        // A namespace being created or updated is matched by its new labels…
        (
            sel.clone(),
            Req::new(Create, ("", "v1", "namespaces"), "Namespace", "", ""),
            Some(&prod_ns),
            Ok(true),
        ),
        (
            sel.clone(),
            Req::new(Update, ("", "v1", "namespaces"), "Namespace", "", ""),
            Some(&dev_ns),
            Ok(false),
        ),
        // …and deleted by the stored one (here "obj" does not exist).
        (
            sel.clone(),
            Req::new(Delete, ("", "v1", "namespaces"), "Namespace", "", ""),
            None,
            Err(404),
        ),
        (
            json!({"namespaceSelector": {}}),
            Req::new(Create, ("", "v1", "pods"), "Pod", "", "missing"),
            None,
            Ok(true),
        ),
        (
            json!({"namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}}),
            Req::new(Create, ("", "v1", "pods"), "Pod", "", "dev"),
            None,
            Ok(true),
        ),
        (
            json!({"namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "Bad"}]}}),
            Req::new(Create, ("", "v1", "pods"), "Pod", "", "dev"),
            None,
            Err(500),
        ),
    ];
    for (i, (extra, req, obj, want)) in cases.into_iter().enumerate() {
        let h = hook(extra);
        let attrs = req.attrs(obj, None);
        let got = block_on(match_namespace_selector(&h, &attrs, obj, &hooks)).map_err(|e| e.code);
        assert_eq!(got, want, "case {i}");
    }
}

#[test]
fn object_selectors() {
    let h = hook(json!({"objectSelector": {"matchLabels": {"app": "web"}}}));
    let web = json!({"metadata": {"labels": {"app": "web"}}});
    let db = json!({"metadata": {"labels": {"app": "db"}}});
    let bare = json!({"metadata": {}});
    let not_object = json!("not an object");
    let bad_meta = json!({"metadata": 7});
    let cases: Vec<(Option<&Value>, Option<&Value>, bool)> = vec![
        (Some(&web), None, true),
        (Some(&db), None, false),
        (None, Some(&web), true),
        (Some(&db), Some(&web), true),
        (Some(&bare), None, false),
        (None, None, false),
        (Some(&not_object), None, false),
        (Some(&bad_meta), None, false),
    ];
    for (i, (new, old, want)) in cases.into_iter().enumerate() {
        assert_eq!(match_object_selector(&h, new, old), Ok(want), "case {i}");
    }
    let absent = hook(
        json!({"objectSelector": {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}}),
    );
    assert_eq!(match_object_selector(&absent, Some(&bare), None), Ok(true));
    let everything = hook(json!({}));
    assert_eq!(match_object_selector(&everything, None, None), Ok(true));
}

#[test]
fn should_call_reports_selector_errors_only_for_matching_rules() {
    let hooks = FakeHooks::default();
    let bad = json!({"matchExpressions": [{"key": "a", "operator": "Nope"}]});
    let req = Req::pod(Operation::Create);
    let attrs = req.attrs(None, None);
    let matching = hook(json!({"objectSelector": bad}));
    let err = block_on(should_call_hook(&matching, &attrs, None, &hooks)).unwrap_err();
    assert_eq!(err.code, 500);
    let other = hook(
        json!({"objectSelector": bad, "rules": [{"operations": ["DELETE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]}),
    );
    assert_eq!(
        block_on(should_call_hook(&other, &attrs, None, &hooks)),
        Ok(None)
    );
}

#[test]
fn equivalent_resources() {
    let mut hooks = FakeHooks {
        equivalents: vec![
            (
                GroupVersionResource::new("apps", "v1", "deployments"),
                GroupVersionKind::new("apps", "v1", "Deployment"),
            ),
            (
                GroupVersionResource::new("apps", "v1beta1", "deployments"),
                GroupVersionKind::new("apps", "v1beta1", "Deployment"),
            ),
            (
                GroupVersionResource::new("extensions", "v1beta1", "deployments"),
                GroupVersionKind::new("extensions", "v1beta1", "Deployment"),
            ),
        ],
        ..Default::default()
    };
    let req = Req::new(
        Operation::Create,
        ("apps", "v1", "deployments"),
        "Deployment",
        "",
        "default",
    );
    let attrs = req.attrs(None, None);
    let beta = json!({"rules": [{"operations": ["CREATE"], "apiGroups": ["apps", "extensions"], "apiVersions": ["v1beta1"], "resources": ["deployments"]}]});
    let inv = block_on(should_call_hook(&hook(beta.clone()), &attrs, None, &hooks))
        .unwrap()
        .unwrap();
    assert_eq!(
        inv.resource,
        GroupVersionResource::new("apps", "v1beta1", "deployments")
    );
    assert_eq!(
        inv.kind,
        GroupVersionKind::new("apps", "v1beta1", "Deployment")
    );
    let mut exact = beta.clone();
    exact["matchPolicy"] = json!("Exact");
    assert_eq!(
        block_on(should_call_hook(&hook(exact), &attrs, None, &hooks)),
        Ok(None)
    );
    // The request's own resource wins over equivalents.
    let both = json!({"rules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["*"], "resources": ["deployments"]}]});
    let inv = block_on(should_call_hook(&hook(both), &attrs, None, &hooks))
        .unwrap()
        .unwrap();
    assert_eq!(inv.kind, GroupVersionKind::new("apps", "v1", "Deployment"));
    // An equivalent without a kind is an internal error.
    hooks.equivalents[1].1 = GroupVersionKind::default();
    assert_eq!(
        block_on(should_call_hook(&hook(beta), &attrs, None, &hooks)).map_err(|e| e.code),
        Err(500)
    );
}

#[test]
fn match_condition_outcomes() {
    let mut hooks = FakeHooks::default();
    hooks.conditions.insert("yes".into(), Ok(true));
    hooks.conditions.insert("no".into(), Ok(false));
    hooks
        .conditions
        .insert("err".into(), Err("no such key: x".into()));
    let req = Req::pod(Operation::Create);
    let attrs = req.attrs(None, None);
    let request = json!({});
    let h = |exprs: &[&str], policy: &str| {
        hook(
            json!({"failurePolicy": policy, "matchConditions": exprs.iter().enumerate()
            .map(|(i, e)| json!({"name": format!("c{i}"), "expression": e})).collect::<Vec<_>>()}),
        )
    };
    let cases: Vec<(&[&str], &str, Result<bool, &str>)> = vec![
        (&["yes", "yes"], "Fail", Ok(true)),
        (&["yes", "no"], "Fail", Ok(false)),
        // A false condition wins over errors.
        (&["err", "no"], "Fail", Ok(false)),
        (
            &["err", "yes"],
            "Fail",
            Err("pods \"obj\" is forbidden: no such key: x"),
        ),
        (
            &["err", "err"],
            "Fail",
            Err("pods \"obj\" is forbidden: [no such key: x, no such key: x]"),
        ),
        (&["err", "yes"], "Ignore", Ok(false)),
    ];
    for (exprs, policy, want) in cases {
        let got = match_conditions(&h(exprs, policy), &attrs, &request, &hooks);
        match want {
            Ok(b) => assert_eq!(got, Ok(b), "{exprs:?} {policy}"),
            Err(m) => {
                let e = got.unwrap_err();
                assert_eq!((e.code, e.message.as_str()), (403, m));
            }
        }
    }
}

#[test]
fn labels_helper() {
    let l = labels(&json!({"metadata": {"labels": {"a": "1", "b": 2}}}));
    assert_eq!(l, BTreeMap::from([("a".to_string(), "1".to_string())]));
    assert!(labels(&json!(null)).is_empty());
}
