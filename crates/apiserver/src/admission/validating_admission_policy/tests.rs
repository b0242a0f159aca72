use std::collections::HashMap;

use berth_api::selector::LabelSelector;
use serde_json::{Value, json};

use super::matching::{self, Namespaces};
use super::*;

fn rt(group: &str, version: &str, plural: &str) -> &'static ResourceType {
    registry::lookup(group, version, plural).expect("served resource")
}

/// Namespaces and params held in memory.
#[derive(Default)]
struct FakeServer {
    namespaces: HashMap<String, Value>,
    /// (namespace or "", name) → object.
    params: Vec<(String, Value)>,
}

impl Namespaces for FakeServer {
    fn labels(&self, name: &str) -> Option<Map<String, Value>> {
        self.namespace(name).map(|n| objects::labels(&n))
    }
}

impl Server for FakeServer {
    fn namespace(&self, name: &str) -> Option<Value> {
        self.namespaces.get(name).cloned()
    }
    fn params(
        &self,
        _rt: &ResourceType,
        namespace: Option<&str>,
        name: Option<&str>,
        selector: Option<&LabelSelector>,
    ) -> Vec<Value> {
        self.params
            .iter()
            .filter(|(ns, o)| {
                namespace.unwrap_or("") == ns
                    && name.is_none_or(|n| objects::name(o) == Some(n))
                    && selector.is_none_or(|s| s.matches_object(o))
            })
            .map(|(_, o)| o.clone())
            .collect()
    }
}

fn server() -> FakeServer {
    let mut s = FakeServer::default();
    for (name, env) in [("default", "test"), ("prod", "production")] {
        s.namespaces.insert(
            name.into(),
            json!({"metadata": {"name": name, "labels": {"environment": env},
                   "managedFields": [{"manager": "x"}]}, "spec": {"finalizers": ["kubernetes"]}}),
        );
    }
    s.params.push((
        "default".into(),
        json!({"metadata": {"name": "limits", "labels": {"tier": "gold"}}, "data": {"maxReplicas": "3"}}),
    ));
    s
}

fn deployment(replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
           "spec": {"replicas": replicas}})
}

fn attrs<'a>(
    rt: &'a ResourceType,
    op: Operation,
    ns: Option<&'a str>,
    name: &'a str,
    old: Option<&'a Value>,
) -> Attributes<'a> {
    Attributes {
        operation: op,
        rt,
        subresource: None,
        namespace: ns,
        name,
        user: None,
        old,
        dry_run: false,
    }
}

fn policy(spec: Value) -> Arc<CompiledPolicy> {
    Arc::new(CompiledPolicy::compile(&json!({
        "metadata": {"name": "demo-policy.example.com", "resourceVersion": "1"},
        "spec": spec,
    })))
}

fn binding(name: &str, spec: Value) -> Binding {
    Binding::from_object(&json!({"metadata": {"name": name}, "spec": spec}))
}

fn deployments_rule() -> Value {
    json!({"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                              "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]})
}

/// Runs the dispatcher for a deployment create in `default`.
fn run_create(hooks: Vec<Hook>, obj: &Value, s: &FakeServer) -> Option<Denial> {
    let rt = rt("apps", "v1", "deployments");
    let a = attrs(rt, Operation::Create, Some("default"), "nginx", None);
    let req = RequestContext::new(&a, Some(obj));
    dispatch(&hooks, &req, s)
}

fn hook(p: Arc<CompiledPolicy>, bindings: Vec<Binding>) -> Vec<Hook> {
    vec![Hook {
        policy: p,
        bindings,
    }]
}

#[test]
fn rules_select_operation_group_version_resource_scope_and_names() {
    let base = matching::Request {
        operation: "CREATE",
        group: "apps",
        version: "v1",
        resource: "deployments",
        subresource: "",
        namespace: "default",
        name: "nginx",
        object: None,
        old_object: None,
    };
    let rule = |r: Value| matching::rule_matches(&r, &base);
    let full = |extra: Value| {
        let mut r = json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["deployments"]});
        if let (Some(r), Some(e)) = (r.as_object_mut(), extra.as_object()) {
            r.extend(e.clone());
        }
        r
    };
    let cases: &[(Value, bool)] = &[
        (full(json!({})), true),
        (full(json!({"operations": ["*"]})), true),
        (full(json!({"operations": ["UPDATE"]})), false),
        (full(json!({"apiGroups": [""]})), false),
        (
            full(json!({"apiGroups": ["*"], "apiVersions": ["*"]})),
            true,
        ),
        (full(json!({"resources": ["*"]})), true),
        (full(json!({"resources": ["deployments/status"]})), false),
        (full(json!({"resources": ["*/*"]})), true),
        (full(json!({"scope": "Namespaced"})), true),
        (full(json!({"scope": "Cluster"})), false),
        (full(json!({"scope": "*"})), true),
    ];
    for (r, want) in cases {
        assert_eq!(rule(r.clone()), *want, "{r}");
    }
    // Subresources only match rules that name them.
    let status = matching::Request {
        subresource: "status",
        ..base
    };
    assert!(!matching::rule_matches(&full(json!({})), &status));
    assert!(matching::rule_matches(
        &full(json!({"resources": ["deployments/*"]})),
        &status
    ));
    // A Namespace is cluster-scoped although its requests carry its name.
    let ns = matching::Request {
        group: "",
        resource: "namespaces",
        namespace: "prod",
        name: "prod",
        ..base
    };
    let ns_rule = json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"],
                         "resources": ["namespaces"], "scope": "Cluster"});
    assert!(matching::rule_matches(&ns_rule, &ns));

    let s = server();
    let names = json!({"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["*"],
                       "resources": ["deployments"], "resourceNames": ["other"]}]});
    assert_eq!(matching::matches(&names, &base, &s), Ok(false));
    let mut excluded = deployments_rule();
    excluded["excludeResourceRules"] = json!([{"apiGroups": ["*"], "apiVersions": ["*"],
        "operations": ["*"], "resources": ["deployments"], "resourceNames": ["nginx"]}]);
    assert_eq!(matching::matches(&excluded, &base, &s), Ok(false));
    assert_eq!(matching::matches(&deployments_rule(), &base, &s), Ok(true));
    // No rules (a binding's matchResources may have none): everything.
    assert_eq!(matching::matches(&json!({}), &base, &s), Ok(true));
}

#[test]
fn selectors_match_namespace_and_object_labels() {
    let s = server();
    let obj = deployment(1);
    let req = |ns: &'static str| matching::Request {
        operation: "CREATE",
        group: "apps",
        version: "v1",
        resource: "deployments",
        subresource: "",
        namespace: ns,
        name: "nginx",
        object: Some(&obj),
        old_object: None,
    };
    let with = |sel: Value| {
        let mut mr = deployments_rule();
        if let (Some(m), Some(e)) = (mr.as_object_mut(), sel.as_object()) {
            m.extend(e.clone());
        }
        mr
    };
    let test_ns = with(json!({"namespaceSelector": {"matchLabels": {"environment": "test"}}}));
    assert_eq!(matching::matches(&test_ns, &req("default"), &s), Ok(true));
    assert_eq!(matching::matches(&test_ns, &req("prod"), &s), Ok(false));
    // An unknown namespace is an error, but only for requests the rules select.
    assert_eq!(
        matching::matches(&test_ns, &req("ghost"), &s),
        Err("namespaces \"ghost\" not found".into())
    );
    let mut other_rules = test_ns.clone();
    other_rules["resourceRules"][0]["resources"] = json!(["pods"]);
    assert_eq!(
        matching::matches(&other_rules, &req("ghost"), &s),
        Ok(false)
    );

    let by_label = |op: &str| {
        with(
            json!({"objectSelector": {"matchExpressions": [{"key": "app", "operator": op, "values": ["nginx"]}]}}),
        )
    };
    assert_eq!(
        matching::matches(&by_label("In"), &req("default"), &s),
        Ok(true)
    );
    assert_eq!(
        matching::matches(&by_label("NotIn"), &req("default"), &s),
        Ok(false)
    );
}

#[test]
fn denies_with_upstreams_message_and_reason() {
    let s = server();
    let p = policy(
        json!({"failurePolicy": "Fail", "matchConstraints": deployments_rule(),
        "validations": [{"expression": "object.spec.replicas <= 5"}]}),
    );
    let b = binding(
        "demo-binding-test.example.com",
        json!({"policyName": "demo-policy.example.com", "validationActions": ["Deny"]}),
    );
    assert_eq!(
        run_create(hook(p.clone(), vec![b.clone()]), &deployment(3), &s),
        None
    );
    let d = run_create(hook(p, vec![b]), &deployment(6), &s).expect("denied");
    assert_eq!(
        d.text(),
        "ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5"
    );
    let rt = rt("apps", "v1", "deployments");
    let a = attrs(rt, Operation::Create, Some("default"), "nginx", None);
    let e = d.to_error(&a);
    assert_eq!((e.code, e.reason), (422, "Invalid"));
    assert_eq!(
        e.message,
        format!("deployments.apps \"nginx\" is forbidden: {}", d.text())
    );
    assert_eq!(
        e.details,
        Some(
            json!({"name": "nginx", "group": "apps", "kind": "deployments",
                    "causes": [{"message": d.text()}]})
        )
    );
    let forbidden = Denial {
        reason: Some("Forbidden".into()),
        ..d
    };
    assert_eq!(forbidden.to_error(&a).code, 403);
}

#[test]
fn message_falls_back_from_expression_to_message_to_the_expression() {
    let cases: &[(Option<&str>, &str, &str)] = &[
        (Some("  too many: 6  "), "static", "too many: 6"),
        (Some("   "), "static", "static"),
        (Some("two\nlines"), "", "failed expression: x"),
        (None, "  static  ", "static"),
        (None, "", "failed expression: x"),
    ];
    for (evaluated, message, want) in cases {
        assert_eq!(failure_message(*evaluated, message, " x "), *want);
    }
    let long = "m".repeat(MAX_MESSAGE_BYTES + 1);
    assert_eq!(
        failure_message(Some(&long), "", "x"),
        "failed expression: x"
    );
}

#[test]
fn message_expression_variables_and_params() {
    let mut s = server();
    let p = policy(json!({
        "matchConstraints": deployments_rule(),
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "variables": [
            {"name": "max", "expression": "int(params.data.maxReplicas)"},
            {"name": "broken", "expression": "object.spec.nope"},
        ],
        "validations": [{
            "expression": "object.spec.replicas <= variables.max",
            "messageExpression": "'replicas must be no greater than ' + string(variables.max)",
            "reason": "Forbidden",
        }],
    }));
    let by_name = binding(
        "b",
        json!({"policyName": p.name, "validationActions": ["Deny"],
        "paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}),
    );
    let d = run_create(hook(p.clone(), vec![by_name.clone()]), &deployment(4), &s).expect("denied");
    assert_eq!(d.message, "replicas must be no greater than 3");
    assert_eq!(d.reason.as_deref(), Some("Forbidden"));
    assert_eq!(
        run_create(hook(p.clone(), vec![by_name.clone()]), &deployment(3), &s),
        None
    );

    // Every selected param is evaluated; none selected is refused.
    let by_selector = binding(
        "b",
        json!({"policyName": p.name, "validationActions": ["Deny"],
        "paramRef": {"selector": {"matchLabels": {"tier": "gold"}}, "parameterNotFoundAction": "Deny"}}),
    );
    assert!(run_create(hook(p.clone(), vec![by_selector]), &deployment(4), &s).is_some());
    s.params.clear();
    let d = run_create(hook(p.clone(), vec![by_name]), &deployment(1), &s).expect("denied");
    assert_eq!(
        d.text(),
        "ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'b' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );
    let allow = binding(
        "b",
        json!({"policyName": p.name, "validationActions": ["Deny"],
        "paramRef": {"name": "limits", "parameterNotFoundAction": "Allow"}}),
    );
    assert_eq!(
        run_create(hook(p.clone(), vec![allow]), &deployment(9), &s),
        None
    );

    // A failed variable fails only the expressions that read it.
    let p = policy(json!({
        "matchConstraints": deployments_rule(),
        "variables": [{"name": "broken", "expression": "object.spec.nope"}],
        "validations": [{"expression": "variables.broken == 1"}],
    }));
    let b = binding(
        "b",
        json!({"policyName": p.name, "validationActions": ["Deny"]}),
    );
    let d = run_create(hook(p, vec![b]), &deployment(1), &s).expect("denied");
    assert_eq!(
        d.message,
        "expression 'variables.broken == 1' resulted in error: composited variable \"broken\" fails to evaluate: no such key: nope"
    );
}

#[test]
fn match_conditions_failure_policy_and_actions() {
    let s = server();
    let spec = |extra: Value| {
        let mut spec = json!({"matchConstraints": deployments_rule(),
            "validations": [{"expression": "object.spec.replicas <= 5", "message": "at most 5"}]});
        if let (Some(m), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        spec
    };
    let deny = |p: &Arc<CompiledPolicy>, actions: Value| {
        binding(
            "b",
            json!({"policyName": p.name, "validationActions": actions}),
        )
    };
    // A false match condition skips the policy.
    let p = policy(spec(json!({"matchConditions": [
        {"name": "not-nginx", "expression": "object.metadata.name != 'nginx'"}]})));
    assert_eq!(
        run_create(
            hook(p.clone(), vec![deny(&p, json!(["Deny"]))]),
            &deployment(9),
            &s
        ),
        None
    );
    // Warn and Audit never refuse.
    let p = policy(spec(json!({})));
    assert_eq!(
        run_create(
            hook(p.clone(), vec![deny(&p, json!(["Warn", "Audit"]))]),
            &deployment(9),
            &s
        ),
        None
    );
    // Errors fail closed by default, open with Ignore.
    let erring = json!({"validations": [{"expression": "object.spec.missing > 1"}]});
    let p = policy(spec(erring.clone()));
    let d = run_create(
        hook(p.clone(), vec![deny(&p, json!(["Deny"]))]),
        &deployment(1),
        &s,
    )
    .expect("denied");
    assert_eq!(
        d.message,
        "expression 'object.spec.missing > 1' resulted in error: no such key: missing"
    );
    let mut ignoring = erring;
    ignoring["failurePolicy"] = json!("Ignore");
    let p = policy(spec(ignoring));
    assert_eq!(
        run_create(
            hook(p.clone(), vec![deny(&p, json!(["Deny"]))]),
            &deployment(1),
            &s
        ),
        None
    );
    // A binding scoped to test namespaces leaves prod alone.
    let p = policy(spec(json!({})));
    let scoped = binding(
        "b",
        json!({"policyName": p.name, "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchLabels": {"environment": "prod-only"}}}}),
    );
    assert_eq!(run_create(hook(p, vec![scoped]), &deployment(9), &s), None);
}

#[test]
fn request_and_namespace_object_are_upstreams_shapes() {
    let s = server();
    let p = policy(
        json!({"matchConstraints": deployments_rule(), "validations": [
            {"expression": "request.operation == 'CREATE' && request.namespace == 'default' && request.name == 'nginx'"},
            {"expression": "request.kind.kind == 'Deployment' && request.resource.resource == 'deployments' && request.resource.group == 'apps'"},
            {"expression": "namespaceObject.metadata.labels.environment == 'test' && !has(namespaceObject.metadata.managedFields)"},
            {"expression": "oldObject == null && request.dryRun == false"},
        ]}),
    );
    let b = binding(
        "b",
        json!({"policyName": p.name, "validationActions": ["Deny"]}),
    );
    assert_eq!(run_create(hook(p, vec![b]), &deployment(1), &s), None);
}

#[test]
fn policy_validation_messages() {
    let pol = |spec: Value| json!({"metadata": {"name": "p.example.com"}, "spec": spec});
    let render = |errs: Vec<berth_api::validation::FieldError>| -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.error_body()))
            .collect()
    };
    let ok = pol(json!({"matchConstraints": deployments_rule(),
        "validations": [{"expression": "object.spec.replicas <= 5"}]}));
    assert_eq!(render(validate_policy(&ok)), Vec::<String>::new());

    let bad = pol(json!({"failurePolicy": "Sometimes",
        "validations": [{"expression": "object.spec.replicas <= ", "reason": "Teapot"},
                        {"expression": "'x'"}]}));
    let got = render(validate_policy(&bad));
    assert_eq!(
        got[0],
        "spec.failurePolicy: Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\""
    );
    assert_eq!(got[1], "spec.matchConstraints: Required value");
    assert!(
        got[2].starts_with("spec.validations[0].expression: Invalid value: \"object.spec.replicas <= \": compilation failed: ERROR: <input>:1:"),
        "{got:?}"
    );
    assert_eq!(
        got[3],
        "spec.validations[0].reason: Unsupported value: \"Teapot\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\", \"Unauthorized\""
    );
    assert_eq!(
        got[4],
        "spec.validations[1].expression: Invalid value: \"'x'\": must evaluate to bool"
    );
    // params are only declared with a paramKind.
    let no_params = pol(json!({"matchConstraints": deployments_rule(),
        "validations": [{"expression": "params.x == 1"}]}));
    let got = render(validate_policy(&no_params));
    assert!(
        got[0].contains("undeclared reference to 'params'"),
        "{got:?}"
    );

    let empty = pol(json!({"matchConstraints": {"resourceRules": []}}));
    assert_eq!(
        render(validate_policy(&empty)),
        [
            "spec.matchConstraints.resourceRules: Required value",
            "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
            "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
        ]
    );
    // An update keeps expressions stored before a rule existed.
    let stored = pol(json!({"matchConstraints": deployments_rule(),
        "validations": [{"expression": "'legacy'"}]}));
    assert_eq!(
        render(validate_policy_update(&stored, &stored)),
        Vec::<String>::new()
    );
}

#[test]
fn binding_validation_messages() {
    let b = |spec: Value| json!({"metadata": {"name": "b"}, "spec": spec});
    let render = |errs: Vec<berth_api::validation::FieldError>| -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.error_body()))
            .collect()
    };
    assert_eq!(
        render(validate_binding(&b(
            json!({"policyName": "p", "validationActions": ["Deny"]})
        ))),
        Vec::<String>::new()
    );
    assert_eq!(
        render(validate_binding(&b(
            json!({"validationActions": ["Deny", "Warn", "Deny", "Log"]})
        ))),
        [
            "spec.policyName: Required value",
            "spec.validationActions[2]: Duplicate value: \"Deny\"",
            "spec.validationActions[3]: Unsupported value: \"Log\": supported values: \"Audit\", \"Deny\", \"Warn\"",
            "spec.validationActions: Invalid value: [\"Deny\",\"Warn\",\"Deny\",\"Log\"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ]
    );
    assert_eq!(
        render(validate_binding(&b(
            json!({"policyName": "p", "paramRef": {"name": "a/b", "selector": {}}})
        ))),
        [
            "spec.paramRef.name: Invalid value: \"a/b\": may not contain '/'",
            "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
            "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
            "spec.paramRef.parameterNotFoundAction: Required value",
            "spec.validationActions: Required value: at least one validation action is required",
        ]
    );
    assert_eq!(
        render(validate_binding(&b(
            json!({"policyName": "p", "validationActions": ["Audit"],
            "paramRef": {"parameterNotFoundAction": "Maybe"},
            "matchResources": {"matchPolicy": "Fuzzy"}})
        ))),
        [
            "spec.paramRef: Required value: one of name or selector must be specified",
            "spec.paramRef.parameterNotFoundAction: Unsupported value: \"Maybe\": supported values: \"Deny\", \"Allow\"",
            "spec.matchResouces.matchPolicy: Unsupported value: \"Fuzzy\": supported values: \"Equivalent\", \"Exact\"",
        ]
    );
}

#[test]
fn hostile_policies_never_panic() {
    let s = server();
    let weird = [
        json!(null),
        json!({"spec": 5}),
        json!({"spec": {"matchConstraints": {"resourceRules": "x"}, "validations": [{"expression": ""}]}}),
        json!({"spec": {"matchConstraints": {"resourceRules": [{"operations": [1]}],
               "namespaceSelector": {"matchExpressions": [{"key": "", "operator": "Bogus"}]}},
               "validations": [{"expression": "[1,2,3].all(x, x > 0) && ".repeat(200) + "true"}]}}),
    ];
    for w in &weird {
        let _ = validate_policy(w);
        let _ = validate_policy_update(w, w);
        let _ = validate_binding(w);
        let p = Arc::new(CompiledPolicy::compile(w));
        let b = binding(
            "b",
            json!({"policyName": "", "validationActions": ["Deny", "Warn"]}),
        );
        let _ = run_create(hook(p, vec![b]), &deployment(1), &s);
    }
}
