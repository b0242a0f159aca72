//! CRD rule evaluation (messages, reasons, fieldPath, transition rules, cost
//! budget) and the CRD creation checks.

use berth_api::validation::FieldErrorType;
use berth_cel::{
    Activation, Env, EvalError, EvalValue, compile, to_eval_value, validate, validate_rules,
    validate_with_budget,
};
use serde_json::{Value, json};

fn strings(errs: &[berth_api::validation::FieldError]) -> Vec<String> {
    errs.iter().map(|e| e.to_string()).collect()
}

fn spec_schema(rules: Value) -> Value {
    json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "properties": {
            "replicas": {"type": "integer"},
            "minReplicas": {"type": "integer"},
            "name": {"type": "string", "maxLength": 63},
            "items": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 10}},
        },
        "x-kubernetes-validations": rules,
    }}})
}

#[test]
fn messages_reasons_and_field_paths() {
    let obj = json!({"spec": {"replicas": 1, "minReplicas": 3, "name": "x"}});
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            json!([{"rule": "self.minReplicas <= self.replicas"}]),
            vec![
                r#"spec: Invalid value: "object": failed rule: self.minReplicas <= self.replicas"#,
            ],
        ),
        (
            json!([{"rule": "self.minReplicas <= self.replicas", "message": " replicas too low "}]),
            vec![r#"spec: Invalid value: "object": replicas too low"#],
        ),
        (
            json!([{"rule": "self.minReplicas <= self.replicas",
                    "messageExpression": "'minReplicas ' + string(self.minReplicas) + ' > ' + string(self.replicas)"}]),
            vec![r#"spec: Invalid value: "object": minReplicas 3 > 1"#],
        ),
        (
            // A messageExpression that does not compile falls back to the message.
            json!([{"rule": "false", "message": "fallback", "messageExpression": "self.missing"}]),
            vec![r#"spec: Invalid value: "object": fallback"#],
        ),
        (
            json!([{"rule": "false", "message": "fallback", "messageExpression": "''"}]),
            vec![r#"spec: Invalid value: "object": fallback"#],
        ),
        (
            json!([{"rule": "self.minReplicas <= self.replicas", "reason": "FieldValueForbidden", "message": "no"}]),
            vec!["spec: Forbidden: no"],
        ),
        (
            json!([{"rule": "self.minReplicas <= self.replicas", "reason": "FieldValueRequired", "message": "need"}]),
            vec!["spec: Required value: need"],
        ),
        (
            json!([{"rule": "self.minReplicas <= self.replicas", "reason": "FieldValueDuplicate", "message": "dup"}]),
            vec![r#"spec: Duplicate value: "object""#],
        ),
        (
            json!([{"rule": "self.minReplicas <= self.replicas", "fieldPath": ".minReplicas", "message": "m"}]),
            vec![r#"spec.minReplicas: Invalid value: "object": m"#],
        ),
        (
            json!([{"rule": "self.replicas >= 1"}, {"rule": "self.name.size() > 3", "message": "short"}]),
            vec![r#"spec: Invalid value: "object": short"#],
        ),
        (
            json!([{"rule": "self.replicas / 0 == 1"}]),
            vec![
                r#"spec: Invalid value: "object": division by zero evaluating rule: self.replicas / 0 == 1"#,
            ],
        ),
    ];
    for (rules, want) in cases {
        let errs = validate(&spec_schema(rules.clone()), &obj, None, "");
        let got = strings(&errs);
        assert_eq!(got.len(), want.len(), "{rules}: {got:?}");
        for (g, w) in got.iter().zip(&want) {
            assert!(g.starts_with(w), "{rules}:\n got {g}\nwant {w}");
        }
    }
}

#[test]
fn root_rules_use_the_nil_path() {
    let schema = json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('a')"}]});
    let errs = validate(&schema, &json!({"metadata": {"name": "bad"}}), None, "");
    assert_eq!(
        strings(&errs),
        vec![r#"<nil>: Invalid value: "object": failed rule: self.metadata.name.startsWith('a')"#]
    );
}

#[test]
fn transition_rules() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "immutable": {"type": "string", "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "Value is immutable"}]},
            "grow": {"type": "integer", "x-kubernetes-validations": [
                {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": true, "message": "may only grow"}]},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string"}, "port": {"type": "integer"}},
                    "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}]}},
            "tags": {"type": "array", "items": {"type": "string",
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "tag immutable"}]}},
        }},
    }});
    let old = json!({"spec": {"immutable": "a", "grow": 5, "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}], "tags": ["x"]}});
    // Create: transition rules are skipped; the optionalOldSelf one runs with none.
    let new = json!({"spec": {"immutable": "b", "grow": 1, "ports": [{"name": "http", "port": 81}], "tags": ["y"]}});
    assert!(validate(&schema, &new, None, "").is_empty());
    // Update.
    let errs = validate(&schema, &new, Some(&old), "");
    let mut got = strings(&errs);
    got.sort();
    assert_eq!(
        got,
        vec![
            r#"spec.grow: Invalid value: "integer": may only grow"#,
            r#"spec.immutable: Invalid value: "string": Value is immutable"#,
            r#"spec.ports[0]: Invalid value: "object": port is immutable"#,
        ]
    );
    // A new map-list element has no old value; reordering still correlates by key.
    let new = json!({"spec": {"immutable": "a", "grow": 6, "ports": [{"name": "https", "port": 443}, {"name": "grpc", "port": 1}, {"name": "http", "port": 80}]}});
    assert!(validate(&schema, &new, Some(&old), "").is_empty());
}

#[test]
fn runtime_cost_budget() {
    let schema = json!({"type": "object", "properties": {"items": {
        "type": "array", "items": {"type": "string"},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x.size() >= 0))"}]}}});
    let items: Vec<Value> = (0..2000).map(|i| json!(format!("item-{i}"))).collect();
    let obj = json!({"items": items});
    // One evaluation over 2000x2000 elements exceeds the per-call limit.
    let errs = validate(&schema, &obj, None, "");
    assert_eq!(errs.len(), 1, "{:?}", strings(&errs));
    assert_eq!(
        errs[0].to_string(),
        "items: Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.all(x, self.all(y, x.size() >= 0))"
    );
    // A small budget runs out on cheaper rules.
    let small: Vec<Value> = (0..50).map(|i| json!(format!("item-{i}"))).collect();
    let (errs, left) = validate_with_budget(&schema, &json!({"items": small}), None, "", 100);
    assert!(left < 0);
    assert_eq!(
        strings(&errs),
        vec![
            "items: Invalid value: \"array\": validation failed due to running out of cost budget, no further validation rules will be run"
        ]
    );
    let (errs, left) =
        validate_with_budget(&schema, &json!({"items": ["a", "b"]}), None, "", 1_000);
    assert!(errs.is_empty() && left > 0 && left < 1_000, "{left}");
}

fn crd_errors(schema: Value) -> Vec<String> {
    strings(&validate_rules(&schema, "spec.validation.openAPIV3Schema"))
}

#[test]
fn crd_creation_checks() {
    let errs = crd_errors(json!({"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"a": {"type": "string"}},
        "x-kubernetes-validations": [{"rule": "self.b == 'x'"}]}}}));
    assert_eq!(
        errs,
        vec![concat!(
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: ",
            r#"apiextensions.ValidationRule{Rule:"self.b == 'x'", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: "#,
            "compilation failed: ERROR: <input>:1:5: undefined field 'b'\n | self.b == 'x'\n | ....^"
        )]
    );
    let errs = crd_errors(json!({"type": "object", "x-kubernetes-validations": [
        {"rule": ""},
        {"rule": "self.x", "message": "  "},
        {"rule": "1 + 1"},
        {"rule": "has(self.metadata)", "reason": "Bogus"},
        {"rule": "true", "optionalOldSelf": true},
        {"rule": "true", "messageExpression": "1"},
        {"rule": "true\n&& true"},
    ]}));
    let want = [
        "spec.validation.openAPIV3Schema.x-kubernetes-validations[0].rule: Required value: rule is not specified",
        "spec.validation.openAPIV3Schema.x-kubernetes-validations[1].message: Invalid value: \"  \": message must be non-empty if specified",
        "spec.validation.openAPIV3Schema.x-kubernetes-validations[3].reason: Unsupported value: \"Bogus\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"",
        "spec.validation.openAPIV3Schema.x-kubernetes-validations[6].message: Required value: message must be specified if rule contains line breaks",
    ];
    assert_eq!(errs, want);
    let errs = crd_errors(json!({"type": "object", "x-kubernetes-validations": [
        {"rule": "1 + 1"},
        {"rule": "true", "optionalOldSelf": true},
        {"rule": "true", "messageExpression": "1"},
    ]}));
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(
        errs[0].ends_with("cel expression must evaluate to a bool"),
        "{}",
        errs[0]
    );
    assert!(
        errs.iter().any(|e| e
            .contains("[2].messageExpression: Invalid value: apiextensions.ValidationRule{")
            && e.ends_with("must evaluate to a string")),
        "{errs:#?}"
    );
    assert!(errs.iter().any(|e| e == "spec.validation.openAPIV3Schema.x-kubernetes-validations[1].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"), "{errs:#?}");
    // A bad fieldPath is a schema error: the rules are then not compiled.
    let errs = crd_errors(json!({"type": "object", "x-kubernetes-validations": [
        {"rule": "1 + 1"},
        {"rule": "true", "fieldPath": ".nope"},
    ]}));
    assert_eq!(
        errs,
        vec![
            "spec.validation.openAPIV3Schema.x-kubernetes-validations[1].fieldPath: Invalid value: \".nope\": fieldPath must be a valid path"
        ]
    );
}

#[test]
fn crd_oldself_on_uncorrelatable_lists() {
    let errs = crd_errors(json!({"type": "object", "properties": {"list": {
        "type": "array", "maxItems": 10,
        "items": {"type": "string", "maxLength": 10, "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}}));
    assert_eq!(
        errs,
        vec![
            "spec.validation.openAPIV3Schema.properties[list].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.validation.openAPIV3Schema.properties[list]"
        ]
    );
}

#[test]
fn crd_estimated_cost() {
    // Unbounded nested comprehensions over unbounded strings: refused.
    let unbounded = json!({"type": "object", "properties": {"list": {
        "type": "array", "items": {"type": "string"},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x.startsWith(y)))"}]}}});
    let errs = crd_errors(unbounded);
    assert!(errs.contains(&"spec.validation.openAPIV3Schema.properties[list].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)".to_string()), "{errs:#?}");
    // The same rule with bounds is accepted.
    let bounded = json!({"type": "object", "properties": {"list": {
        "type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 64},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x.startsWith(y)))"}]}}});
    assert_eq!(crd_errors(bounded), Vec::<String>::new());
    // Typical Gateway API / cert-manager rules with bounds are accepted.
    let typical = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "hostnames": {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 253}},
        "rules": {"type": "array", "maxItems": 16, "items": {"type": "object", "properties": {
            "matches": {"type": "array", "maxItems": 64, "items": {"type": "object", "properties": {
                "path": {"type": "object", "properties": {"type": {"type": "string", "enum": ["Exact", "PathPrefix", "RegularExpression"]},
                    "value": {"type": "string", "maxLength": 1024}},
                    "x-kubernetes-validations": [
                        {"rule": "(self.type in ['Exact','PathPrefix']) ? self.value.startsWith('/') : true", "message": "value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']"},
                        {"rule": "(self.type in ['Exact','PathPrefix']) ? !self.value.contains('//') : true", "message": "must not contain '//' when type one of ['Exact', 'PathPrefix']"},
                        {"rule": "(self.type in ['Exact','PathPrefix']) ? self.value.matches(r\"\"\"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$\"\"\") : true", "message": "must only contain valid characters"},
                    ]}}}}}}},
        },
        "x-kubernetes-validations": [{"rule": "self.hostnames.all(h, h.size() > 0)"}]}}});
    assert_eq!(crd_errors(typical), Vec::<String>::new());
}

#[test]
fn programs_for_admission_policies() {
    let env = Env::admission_policy();
    let p = compile(
        "object.spec.replicas <= params.maxReplicas && request.operation == 'CREATE'",
        &env,
    )
    .expect("compiles");
    let mut act = Activation::new();
    act.insert(
        "object",
        to_eval_value(&json!({"spec": {"replicas": 3}}), None, false),
    );
    act.insert(
        "params",
        to_eval_value(&json!({"maxReplicas": 5}), None, false),
    );
    act.insert(
        "request",
        to_eval_value(&json!({"operation": "CREATE"}), None, false),
    );
    assert_eq!(p.eval(&act).ok().and_then(|v| v.as_bool()), Some(true));
    assert!(!p.references("oldObject"));
    let err = compile("foo.bar", &env).expect_err("undeclared");
    assert_eq!(
        err.to_string(),
        "compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo.bar\n | ^"
    );
    let p = compile("object.missing == 1", &env).expect("dyn compiles");
    assert_eq!(
        p.eval(&act).err(),
        Some(EvalError::NoSuchKey("missing".into()))
    );
}

#[test]
fn field_error_kinds() {
    let schema = spec_schema(json!([{"rule": "false", "reason": "FieldValueForbidden"}]));
    let errs = validate(&schema, &json!({"spec": {}}), None, "");
    assert_eq!(errs[0].kind, FieldErrorType::Forbidden);
    assert_eq!(errs[0].detail, "failed rule: false");
}

#[test]
fn eval_values() {
    let env = Env::new().with_dyn("x");
    let p = compile("x.map(i, i * 2)", &env).expect("compiles");
    let mut act = Activation::new();
    act.insert("x", EvalValue::list(vec![1i64.into(), 2i64.into()]));
    let v = p.eval(&act).expect("evaluates");
    assert_eq!(v.to_json(), Some(json!([2, 4])));
}
