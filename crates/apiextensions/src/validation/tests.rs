use super::*;
use serde_json::json;

/// The messages, sorted: upstream's order follows Go map iteration.
fn errs(obj: Value, schema: Value) -> Vec<String> {
    sorted(
        validate_value(&obj, &schema, None)
            .iter()
            .map(ToString::to_string)
            .collect(),
    )
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn want(v: &[&str]) -> Vec<String> {
    sorted(v.iter().map(|s| s.to_string()).collect())
}

fn obj_with(field: Value) -> Value {
    json!({ "type": "object", "properties": { "field": field } })
}

#[test]
fn types_as_upstream() {
    // Cases and messages from apiextensions-apiserver
    // pkg/apiserver/validation/validation_test.go (TestValidateCustomResource).
    let s = obj_with(json!({"type": "object"}));
    let cases: &[(Value, &str)] = &[
        (
            json!("foo"),
            r#"field: Invalid value: "string": field in body must be of type object: "string""#,
        ),
        (
            json!(42),
            r#"field: Invalid value: "integer": field in body must be of type object: "integer""#,
        ),
        (
            json!(true),
            r#"field: Invalid value: "boolean": field in body must be of type object: "boolean""#,
        ),
        (
            json!(1.2),
            r#"field: Invalid value: "number": field in body must be of type object: "number""#,
        ),
        (
            json!([]),
            r#"field: Invalid value: "array": field in body must be of type object: "array""#,
        ),
        (
            Value::Null,
            r#"field: Invalid value: "null": field in body must be of type object: "null""#,
        ),
    ];
    for (v, msg) in cases {
        assert_eq!(errs(json!({ "field": v }), s.clone()), want(&[msg]), "{v}");
    }
    assert!(errs(json!({}), s.clone()).is_empty());
    assert!(errs(json!({"field": {}}), s).is_empty());

    // nullable
    let s = obj_with(json!({"type": "object", "nullable": true}));
    assert!(errs(json!({"field": null}), s).is_empty());

    // integer accepts integral floats; number accepts integers.
    let s = obj_with(json!({"type": "integer"}));
    assert!(errs(json!({"field": 3.0}), s.clone()).is_empty());
    assert_eq!(
        errs(json!({"field": 3.5}), s),
        want(&[
            r#"field: Invalid value: "number": field in body must be of type integer: "number""#
        ])
    );
    let s = obj_with(json!({"type": "number"}));
    assert!(errs(json!({"field": 3}), s).is_empty());

    // The brief's example.
    let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}});
    assert_eq!(
        errs(json!({"spec": {"replicas": "string"}}), s),
        want(&[
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#
        ])
    );
}

#[test]
fn int_or_string_and_any_of() {
    // validation_test.go: "nullable and x-kubernetes-int-or-string".
    let s = obj_with(json!({"x-kubernetes-int-or-string": true, "nullable": true}));
    for ok in [json!(null), json!(42), json!("foo")] {
        assert!(errs(json!({ "field": ok }), s.clone()).is_empty());
    }
    assert_eq!(
        errs(json!({"field": true}), s.clone()),
        want(&[
            r#"field: Invalid value: "boolean": field in body must be of type integer,string: "boolean""#
        ])
    );
    let s = obj_with(json!({"x-kubernetes-int-or-string": true}));
    assert_eq!(
        errs(json!({"field": null}), s),
        want(&[
            r#"field: Invalid value: "null": field in body must be of type integer,string: "null""#
        ])
    );

    // "nullable, x-kubernetes-int-or-string and user-provided anyOf".
    let s = obj_with(json!({
        "nullable": true, "x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "integer"}, {"type": "string"}]
    }));
    for ok in [json!(null), json!(42), json!("foo")] {
        assert!(errs(json!({ "field": ok }), s.clone()).is_empty(), "{ok}");
    }
    for (v, t) in [
        (json!(true), "boolean"),
        (json!(1.2), "number"),
        (json!({}), "object"),
        (json!([]), "array"),
    ] {
        assert_eq!(
            errs(json!({ "field": v }), s.clone()),
            want(&[
                r#"<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)"#,
                &format!(
                    r#"field: Invalid value: "{t}": field in body must be of type integer,string: "{t}""#
                ),
                &format!(
                    r#"field: Invalid value: "{t}": field in body must be of type integer: "{t}""#
                ),
            ]),
            "{v}"
        );
    }

    // "... and user-provided allOf".
    let s = obj_with(json!({
        "nullable": true, "x-kubernetes-int-or-string": true,
        "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}]
    }));
    assert_eq!(
        errs(json!({"field": true}), s),
        want(&[
            r#"<nil>: Invalid value: "": "field" must validate all the schemas (allOf). None validated"#,
            r#"<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)"#,
            r#"field: Invalid value: "boolean": field in body must be of type integer,string: "boolean""#,
            r#"field: Invalid value: "boolean": field in body must be of type integer: "boolean""#,
        ])
    );
}

#[test]
fn one_of_and_not() {
    // kube-openapi schema_messages.go texts.
    let s = obj_with(json!({"oneOf": [{"type": "integer"}, {"minimum": 0}]}));
    assert_eq!(
        errs(json!({"field": 5}), s.clone()),
        want(&[
            r#"<nil>: Invalid value: "": "field" must validate one and only one schema (oneOf). Found 2 valid alternatives"#
        ])
    );
    assert!(errs(json!({"field": -5}), s).is_empty());
    let s = obj_with(json!({"not": {"type": "string"}}));
    assert_eq!(
        errs(json!({"field": "x"}), s.clone()),
        want(&[r#"<nil>: Invalid value: "": "field" must not validate the schema (not)"#])
    );
    assert!(errs(json!({"field": 1}), s).is_empty());
    // With a path prefix (status validation), composite errors sit on it.
    let e: Vec<String> = validate_value(
        &json!({"field": "x"}),
        &obj_with(json!({"not": {"type": "string"}})),
        Some("status"),
    )
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(
        e,
        want(&[r#"status: Invalid value: "": "field" must not validate the schema (not)"#])
    );
}

#[test]
fn required_and_enum() {
    // validation_test.go: "required field" and "enum".
    let s = json!({
        "type": "object", "required": ["field"],
        "properties": {"field": {"type": "object", "required": ["nested"], "properties": {"nested": {}}}}
    });
    assert_eq!(
        errs(json!({"test": "a"}), s.clone()),
        want(&["field: Required value"])
    );
    assert_eq!(
        errs(json!({"field": {}}), s),
        want(&["field.nested: Required value"])
    );

    let s = obj_with(json!({
        "type": "object", "required": ["nestedint", "nestedstring"],
        "properties": {
            "nestedint": {"type": "integer", "enum": [1, 2]},
            "nestedstring": {"type": "string", "enum": ["a", "b"]}
        }
    }));
    assert_eq!(
        errs(json!({"field": {}}), s.clone()),
        want(&[
            "field.nestedint: Required value",
            "field.nestedstring: Required value"
        ])
    );
    assert_eq!(
        errs(
            json!({"field": {"nestedint": "x", "nestedstring": true}}),
            s
        ),
        want(&[
            r#"field.nestedint: Invalid value: "string": field.nestedint in body must be of type integer: "string""#,
            r#"field.nestedint: Unsupported value: "x": supported values: "1", "2""#,
            r#"field.nestedstring: Invalid value: "boolean": field.nestedstring in body must be of type string: "boolean""#,
            r#"field.nestedstring: Unsupported value: true: supported values: "a", "b""#,
        ])
    );
    // The brief's example.
    let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"mode": {"type": "string", "enum": ["a", "b"]}, "name": {"type": "string"}}, "required": ["name"]}}});
    assert_eq!(
        errs(json!({"spec": {"mode": "x"}}), s),
        want(&[
            "spec.name: Required value",
            r#"spec.mode: Unsupported value: "x": supported values: "a", "b""#,
        ])
    );
    // An integral float matches an integer enum value (Go's reflect conversion).
    let s = obj_with(json!({"type": "number", "enum": [1, 2]}));
    assert!(errs(json!({"field": 2.0}), s).is_empty());
}

#[test]
fn limits() {
    // validation_test.go: maxProperties, maxItems, maxLength; kube-openapi errors/schema.go texts.
    let cases: &[(Value, Value, &[&str])] = &[
        (
            json!({"type": "object", "maxProperties": 2}),
            json!({"a": true, "b": true, "c": true}),
            &["field: Too many: 3: must have at most 2 items"],
        ),
        (
            json!({"type": "array", "maxItems": 2}),
            json!(["a", "b", "c"]),
            &["field: Too many: 3: must have at most 2 items"],
        ),
        (
            json!({"type": "string", "maxLength": 2}),
            json!("abc"),
            &["field: Too long: may not be more than 2 bytes"],
        ),
        (
            json!({"type": "string", "minLength": 4}),
            json!("abc"),
            &[r#"field: Invalid value: "abc": field in body should be at least 4 chars long"#],
        ),
        (
            json!({"type": "array", "minItems": 2}),
            json!(["a"]),
            &["field: Invalid value: 1: field in body should have at least 2 items"],
        ),
        (
            json!({"type": "object", "minProperties": 2}),
            json!({"a": 1}),
            &["field: Invalid value: 1: field in body should have at least 2 properties"],
        ),
        (
            json!({"type": "array", "uniqueItems": true}),
            json!([1, 2, 1]),
            &[r#"field: Invalid value: "": field in body shouldn't contain duplicates"#],
        ),
        (
            json!({"type": "string", "pattern": "^a+$"}),
            json!("abc"),
            &[r#"field: Invalid value: "abc": field in body should match '^a+$'"#],
        ),
        (
            json!({"type": "integer", "maximum": 10}),
            json!(15),
            &["field: Invalid value: 15: field in body should be less than or equal to 10"],
        ),
        (
            json!({"type": "integer", "maximum": 10, "exclusiveMaximum": true}),
            json!(10),
            &["field: Invalid value: 10: field in body should be less than 10"],
        ),
        (
            json!({"type": "integer", "minimum": 1}),
            json!(0),
            &["field: Invalid value: 0: field in body should be greater than or equal to 1"],
        ),
        (
            json!({"type": "number", "minimum": 1.5, "exclusiveMinimum": true}),
            json!(1.5),
            &["field: Invalid value: 1.5: field in body should be greater than 1.5"],
        ),
        (
            json!({"type": "integer", "multipleOf": 3}),
            json!(10),
            &["field: Invalid value: 10: field in body should be a multiple of 3"],
        ),
        (
            json!({"type": "number", "multipleOf": 0.5}),
            json!(1.25),
            &["field: Invalid value: 1.25: field in body should be a multiple of 0.5"],
        ),
        // Upstream converts the factor to int64 for an integer value.
        (
            json!({"type": "number", "multipleOf": 0.5}),
            json!(3),
            &["field: Invalid value: 0: factor MultipleOf declared for field must be positive: 0"],
        ),
        (
            json!({"type": "number", "maximum": 1000000}),
            json!(1000000.5),
            &[
                "field: Invalid value: 1000000.5: field in body should be less than or equal to 1e+06",
            ],
        ),
    ];
    for (field, value, msgs) in cases {
        assert_eq!(
            errs(json!({ "field": value }), obj_with(field.clone())),
            want(msgs),
            "{field} {value}"
        );
    }
    // Lengths count runes.
    assert!(
        errs(
            json!({"field": "ää"}),
            obj_with(json!({"type": "string", "maxLength": 2}))
        )
        .is_empty()
    );
    // The brief's example.
    let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer", "maximum": 10}}}}});
    assert_eq!(
        errs(json!({"spec": {"size": 15}}), s),
        want(&[
            "spec.size: Invalid value: 15: spec.size in body should be less than or equal to 10"
        ])
    );
}

#[test]
fn invalid_pattern() {
    // validation_test.go: "invalid regex" (Go's regexp error text).
    assert_eq!(
        errs(
            json!({"field": "foo"}),
            obj_with(json!({"type": "string", "pattern": "+"}))
        ),
        want(&[
            "field: Invalid value: \"foo\": field in body should match '+, but pattern is invalid: error parsing regexp: missing argument to repetition operator: `+`'"
        ])
    );
}

#[test]
fn formats_in_values() {
    let cases: &[(&str, Value, &[&str])] = &[
        (
            "uuid",
            json!("nope"),
            &[r#"field: Invalid value: "nope": field in body must be of type uuid: "nope""#],
        ),
        (
            "date-time",
            json!("yesterday"),
            &[
                r#"field: Invalid value: "yesterday": field in body must be of type date-time: "yesterday""#,
            ],
        ),
        ("ipv4", json!("1.2.3.4"), &[]),
        ("int-or-string", json!("x"), &[]),
        // Unsupported formats are dropped (int32 in 1.33 too).
        ("int32", json!("x"), &[]),
    ];
    for (format, v, msgs) in cases {
        let s = obj_with(json!({"type": "string", "format": format}));
        assert_eq!(errs(json!({ "field": v }), s), want(msgs), "{format}");
    }
    // A string format on a non-string value.
    let s = obj_with(json!({"type": "string", "format": "date"}));
    assert_eq!(
        errs(json!({"field": 5}), s),
        want(&[r#"field: Invalid value: "int64": field in body must be of type date: "int64""#])
    );
}

#[test]
fn additional_properties() {
    let s = obj_with(json!({"type": "object", "additionalProperties": {"type": "string"}}));
    assert_eq!(
        errs(json!({"field": {"a": "x", "b": 1}}), s),
        want(&[
            r#"field.b: Invalid value: "integer": field.b in body must be of type string: "integer""#
        ])
    );
    let s =
        obj_with(json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false}));
    assert_eq!(
        errs(json!({"field": {"a": 1, "b": 1}}), s),
        want(&[r#"field: Invalid value: "b": field.b in body is a forbidden property"#])
    );
    // At the root upstream's name starts with a dot, which the field path drops.
    let s = json!({"type": "object", "additionalProperties": {"type": "string"}});
    assert_eq!(
        errs(json!({"a": 1}), s),
        want(&[r#"a: Invalid value: "integer": .a in body must be of type string: "integer""#])
    );
}

#[test]
fn items() {
    let s = obj_with(json!({"type": "array", "items": {"type": "integer"}}));
    assert_eq!(
        errs(json!({"field": [1, "x"]}), s),
        want(&[
            r#"field[1]: Invalid value: "string": field[1] in body must be of type integer: "string""#
        ])
    );
}

#[test]
fn list_sets_and_maps() {
    // listtype/validation_test.go shapes.
    let s = json!({"type": "object", "properties": {
        "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"], "items": {"type": "object"}},
        "map2": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a", "b"], "items": {"type": "object"}},
        "nested": {"type": "object", "additionalProperties": {"type": "array", "x-kubernetes-list-type": "set"}}
    }});
    let got: Vec<String> = validate_list_sets_and_maps(
        &json!({
            "set": ["a", "b", "a", "a", "b"],
            "map": [{"k": 1}, {"k": 2, "v": 1}, {"k": 1, "v": 2}, {}, {}],
            "map2": [{"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}],
            "nested": {"x": [1, 1]}
        }),
        &s,
        "",
    )
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(
        got,
        vec![
            r#"set[2]: Duplicate value: "a""#,
            r#"set[4]: Duplicate value: "b""#,
            r#"map[2]: Duplicate value: {"k":1}"#,
            "map[4]: Duplicate value: {}",
            r#"map2[1]: Duplicate value: {"a":1,"b":2}"#,
            "nested[x][1]: Duplicate value: 1",
        ]
    );
    let got: Vec<String> = validate_list_sets_and_maps(&json!({"map": [{"k": 1}, "x"]}), &s, "")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        vec![r#"map[1]: Invalid value: "x": must be an object for an array of list-type map"#]
    );
}

#[test]
fn embedded_resources() {
    // objectmeta/validation.go messages.
    let s = json!({"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true
    }}});
    let got = |o: Value| -> Vec<String> {
        validate_embedded_resources(&o, &s, "", false)
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert_eq!(
        sorted(got(json!({"template": {}}))),
        want(&[
            "template.apiVersion: Required value: must not be empty",
            "template.kind: Required value: must not be empty",
        ])
    );
    assert_eq!(
        sorted(got(
            json!({"template": {"apiVersion": 1, "kind": "", "metadata": {"name": "a/b"}}})
        )),
        want(&[
            "template.apiVersion: Invalid value: 1: must be a string",
            r#"template.kind: Invalid value: "": must not be empty"#,
            r#"template.metadata.name: Invalid value: "a/b": may not contain '/'"#,
        ])
    );
    assert_eq!(
        got(json!({"template": {"apiVersion": "a/b/c", "kind": "Foo_Bar"}})),
        vec![
            r#"template.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#.to_string(),
            r#"template.kind: Invalid value: "Foo_Bar": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#.to_string(),
        ]
    );
    assert!(
        got(
            json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "x"}}})
        )
        .is_empty()
    );
    assert_eq!(
        got(json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 5}}})),
        vec![
            r#"template.metadata: Invalid value: {"name":5}: json: cannot unmarshal number into Go struct field ObjectMeta.name of type string"#
        ]
    );
}

#[test]
fn custom_resource_combines_checks() {
    let s = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "count": {"type": "integer", "minimum": 0}
        }}
    }});
    let got: Vec<String> = validate_custom_resource(
        &json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "spec": {"tags": ["a", "a"], "count": -1}}),
        &s,
    )
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(
        got,
        vec![
            "spec.count: Invalid value: -1: spec.count in body should be greater than or equal to 0",
            r#"spec.tags[1]: Duplicate value: "a""#,
        ]
    );
}

#[test]
fn no_panic_on_odd_input() {
    let odd_schemas = [
        json!(null),
        json!(true),
        json!({"type": 5, "properties": [], "items": "x", "required": "x", "enum": "x"}),
        json!({"maximum": "x", "minLength": -1, "maxItems": 1e300, "multipleOf": 0}),
        json!({"anyOf": {}, "allOf": [1, null], "not": []}),
        json!({"type": "integer", "multipleOf": -1e300, "maximum": 1e300, "minimum": -1e300}),
    ];
    let odd_values = [
        json!(null),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(-1e308),
        json!({"a": [1, {"b": null}]}),
        json!("\u{0}\u{ffff}"),
    ];
    for s in &odd_schemas {
        for v in &odd_values {
            let _ = validate_custom_resource(v, s);
            let _ = validate_value(v, s, Some("x"));
        }
    }
    // Deep schema nesting stops at MAX_DEPTH.
    let mut s = json!({"type": "string"});
    for _ in 0..(crate::MAX_DEPTH + 10) {
        s = json!({"allOf": [s]});
    }
    let out = validate_value(&json!(1), &s, None);
    assert!(!out.is_empty());
}
