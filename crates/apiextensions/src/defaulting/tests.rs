use super::*;
use serde_json::json;

#[test]
fn default_table() {
    // Cases after upstream's defaulting/algorithm_test.go (TestDefault).
    let cases: Vec<(&str, Value, Value, Value)> = vec![
        ("empty", json!({}), json!({}), json!({})),
        (
            "scalar untouched",
            json!("foo"),
            json!({"default": "bar"}),
            json!("foo"),
        ),
        (
            "properties",
            json!({"a": "A", "c": null, "d": null, "e": {}}),
            json!({"properties": {
                "a": {"default": "x"},
                "b": {"default": "B"},
                "c": {"default": "C"},
                "d": {"default": "D", "nullable": true},
                "e": {"properties": {"f": {"default": 1}}},
                "g": {"properties": {"h": {"default": 2}}}
            }}),
            json!({"a": "A", "c": "C", "d": null, "e": {"f": 1}, "b": "B"}),
        ),
        (
            "into defaulted values",
            json!({}),
            json!({"properties": {"a": {"default": {}, "properties": {"b": {"default": "B"}}}}}),
            json!({"a": {"b": "B"}}),
        ),
        (
            "items",
            json!([{}, null, {"a": "x"}]),
            json!({"items": {"default": {"a": "dflt"}, "properties": {"a": {"default": "A"}}}}),
            json!([{"a": "A"}, {"a": "dflt"}, {"a": "x"}]),
        ),
        (
            "nullable items stay null",
            json!([null]),
            json!({"items": {"default": 1, "nullable": true}}),
            json!([null]),
        ),
        (
            "additionalProperties",
            json!({"x": null, "y": {}}),
            json!({"additionalProperties": {"default": {"z": 1}, "properties": {"w": {"default": 2}}}}),
            json!({"x": {"z": 1, "w": 2}, "y": {"w": 2}}),
        ),
        (
            "default null is no default",
            json!({}),
            json!({"properties": {"a": {"default": null}}}),
            json!({}),
        ),
    ];
    for (name, mut obj, schema, expected) in cases {
        apply_defaults(&mut obj, &schema);
        assert_eq!(obj, expected, "{name}");
    }
}

#[test]
fn prune_nulls_table() {
    // Cases after upstream's defaulting/prunenulls_test.go.
    let mut obj =
        json!({"a": null, "b": null, "c": null, "d": {"e": null}, "f": [{"g": null}], "u": null});
    let schema = json!({"properties": {
        "a": {},
        "b": {"nullable": true},
        "c": {"default": 1},
        "d": {"additionalProperties": {}},
        "f": {"items": {"properties": {"g": {}}}}
    }});
    prune_non_nullable_nulls_without_defaults(&mut obj, &schema);
    assert_eq!(
        obj,
        json!({"b": null, "c": null, "d": {}, "f": [{}], "u": null})
    );
}

fn msgs(errs: Vec<FieldError>) -> Vec<String> {
    let mut v: Vec<String> = errs.iter().map(ToString::to_string).collect();
    v.sort();
    v
}

#[test]
fn validate_defaults_as_upstream() {
    // apis/apiextensions/validation/validation_test.go: "invalid defaults with
    // enabled feature gate, structural schema".
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"foo": {"type": "string"}}, "default": {"foo": "abc", "bar": 42}},
            "b": {"type": "object", "properties": {"foo": {"type": "string"}}, "default": {"foo": "abc"}},
            "c": {"type": "object", "properties": {"foo": {"type": "string"}}, "default": {"foo": 42}},
            "d": {"type": "object", "properties": {
                "good": {"type": "string", "pattern": "a"},
                "bad": {"type": "string", "pattern": "b"}
            }, "default": {"good": "a", "bad": "a"}},
            "e": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
                "preserveUnknownFields": {"type": "object", "default": {"foo": "abc", "bar": 42}},
                "nestedProperties": {"type": "object", "properties": {"foo": {"type": "string"}}, "default": {"foo": "abc", "bar": 42}}
            }},
            "embedded-fine": {"type": "object", "x-kubernetes-embedded-resource": true,
                "properties": {"foo": {"type": "string"}},
                "default": {"foo": "abc", "apiVersion": "foo/v1", "kind": "v1", "metadata": {"name": "foo"}}},
            "embedded-preserve": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"foo": {"type": "string"}},
                "default": {"foo": "abc", "apiVersion": "foo/v1", "kind": "v1", "metadata": {"name": "foo"}, "bar": 42}},
            "embedded-preserve-unpruned-objectmeta": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"foo": {"type": "string"}},
                "default": {"foo": "abc", "apiVersion": "foo/v1", "kind": "v1", "metadata": {"name": "foo", "unspecified": "bar"}, "bar": 42}}
        }
    });
    let p = "spec.validation.openAPIV3Schema";
    assert_eq!(
        msgs(validate_defaults(&schema, p)),
        vec![
            format!(
                r#"{p}.properties[a].default: Invalid value: {{"bar":42,"foo":"abc"}}: must not have unknown fields"#
            ),
            format!(
                r#"{p}.properties[c].default.foo: Invalid value: "integer": foo in body must be of type string: "integer""#
            ),
            format!(
                r#"{p}.properties[d].default.bad: Invalid value: "a": bad in body should match 'b'"#
            ),
            format!(
                r#"{p}.properties[e].properties[nestedProperties].default: Invalid value: {{"bar":42,"foo":"abc"}}: must not have unknown fields"#
            ),
            format!(
                r#"{p}.properties[e].properties[preserveUnknownFields].default: Invalid value: {{"bar":42,"foo":"abc"}}: must not have unknown fields"#
            ),
        ]
    );
}

#[test]
fn validate_defaults_in_embedded_metadata() {
    // validation_test.go: defaults inside embedded metadata are checked in
    // the surrounding object.
    let schema = json!({
        "type": "object",
        "properties": {
            "embedded": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string", "default": "%"},
                "metadata": {"type": "object", "properties": {
                    "name": {"type": "string", "default": "a/b"},
                    "labels": {"type": "object", "properties": {"bar": {"type": "string", "default": "x y"}}}
                }}
            }}
        }
    });
    let p = "spec.versions[0].schema.openAPIV3Schema";
    let got = msgs(validate_defaults(&schema, p));
    assert_eq!(got.len(), 3, "{got:#?}");
    assert!(got[0].starts_with(&format!(
        r#"{p}.properties[embedded].properties[kind].default: Invalid value: "%": must result in valid metadata: kind: Invalid value: "%": may have mixed case"#
    )), "{}", got[0]);
    assert!(got[1].starts_with(&format!(
        r#"{p}.properties[embedded].properties[metadata].properties[labels].properties[bar].default: Invalid value: "x y": must result in valid metadata: metadata.labels: Invalid value: "x y": "#
    )), "{}", got[1]);
    assert!(got[2].starts_with(&format!(
        r#"{p}.properties[embedded].properties[metadata].properties[name].default: Invalid value: "a/b": must result in valid metadata: metadata.name: Invalid value: "a/b": may not contain '/'"#
    )), "{}", got[2]);
}

#[test]
fn no_panic_on_odd_input() {
    for s in [
        json!(null),
        json!({"properties": 1, "items": [], "additionalProperties": "x"}),
        json!({"default": {"a": 1}}),
    ] {
        for mut v in [json!(null), json!([null, 1]), json!({"a": null})] {
            apply_defaults(&mut v, &s);
            prune_non_nullable_nulls_without_defaults(&mut v, &s);
        }
        let _ = validate_defaults(&s, "x");
    }
}
