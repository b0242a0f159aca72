use super::*;
use serde_json::json;

fn msgs(schema: Value) -> Vec<String> {
    validate_structural(&schema, "spec.validation.openAPIV3Schema")
        .iter()
        .map(ToString::to_string)
        .collect()
}

const P: &str = "spec.validation.openAPIV3Schema";

#[test]
fn structural_table() {
    // Messages from apiextensions-apiserver pkg/apiserver/schema/validation.go,
    // complete.go and convert.go.
    let cases: Vec<(&str, Value, Vec<String>)> = vec![
        (
            "ok",
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}),
            vec![],
        ),
        (
            "root type",
            json!({"type": "string"}),
            vec![format!(
                "{P}.type: Invalid value: \"string\": must be object at the root"
            )],
        ),
        (
            "root type missing",
            json!({"properties": {"a": {"type": "string"}}}),
            vec![format!(
                "{P}.type: Required value: must not be empty at the root"
            )],
        ),
        (
            "field type missing",
            json!({"type": "object", "properties": {"spec": {}}}),
            vec![format!(
                "{P}.properties[spec].type: Required value: must not be empty for specified object fields"
            )],
        ),
        (
            "items",
            json!({"type": "object", "properties": {"a": {"type": "array"}, "b": {"type": "array", "items": {}}}}),
            vec![
                format!("{P}.properties[a].items: Required value: must be specified"),
                format!(
                    "{P}.properties[b].items.type: Required value: must not be empty for specified array items"
                ),
            ],
        ),
        (
            "additionalProperties at root",
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            vec![format!(
                "{P}.additionalProperties: Forbidden: must not be used at the root"
            )],
        ),
        (
            "value validation forbidden fields",
            json!({"type": "object", "properties": {"a": {"type": "string", "anyOf": [{"type": "string", "description": "x", "nullable": true, "default": "d", "additionalProperties": true, "x-kubernetes-preserve-unknown-fields": true}], "allOf": [{"title": "t", "x-kubernetes-list-type": "set"}], "not": {"properties": {"metadata": {}}}}}}),
            vec![
                format!(
                    "{P}.properties[a].allOf[0].title: Forbidden: must be empty to be structural"
                ),
                format!(
                    "{P}.properties[a].allOf[0].x-kubernetes-list-type: Forbidden: must be undefined to be structural"
                ),
                format!(
                    "{P}.properties[a].anyOf[0].additionalProperties: Forbidden: must be undefined to be structural"
                ),
                format!(
                    "{P}.properties[a].anyOf[0].default: Forbidden: must be undefined to be structural"
                ),
                format!(
                    "{P}.properties[a].anyOf[0].description: Forbidden: must be empty to be structural"
                ),
                format!(
                    "{P}.properties[a].anyOf[0].nullable: Forbidden: must be false to be structural"
                ),
                format!(
                    "{P}.properties[a].anyOf[0].type: Forbidden: must be empty to be structural"
                ),
                format!(
                    "{P}.properties[a].anyOf[0].x-kubernetes-preserve-unknown-fields: Forbidden: must be false to be structural"
                ),
                format!(
                    "{P}.properties[a].not.properties[metadata]: Forbidden: must not be specified in a nested context"
                ),
            ],
        ),
        (
            "int-or-string anyOf pattern allowed",
            json!({"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}, "b": {"x-kubernetes-int-or-string": true, "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}]}}}),
            vec![],
        ),
        (
            // Upstream checks completeness of the root's value validations only.
            "completeness",
            json!({"type": "object", "properties": {"x": {"type": "string"}, "a": {"type": "object", "not": {"properties": {"z": {}}}}}, "anyOf": [{"required": ["x"]}, {"properties": {"y": {"minLength": 1}, "x": {"properties": {"q": {}}}}}]}),
            vec![
                format!(
                    "{P}.properties[x].properties[q]: Required value: because it is defined in {P}.anyOf[1].properties[x].properties[q]"
                ),
                format!(
                    "{P}.properties[y]: Required value: because it is defined in {P}.anyOf[1].properties[y]"
                ),
            ],
        ),
        (
            "embedded resource",
            json!({"type": "object", "properties": {"e": {"x-kubernetes-embedded-resource": true}, "f": {"type": "string", "x-kubernetes-embedded-resource": true}, "g": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true, "additionalProperties": {"type": "string"}, "properties": {"kind": {"type": "integer"}}}}}),
            vec![
                format!(
                    "{P}.properties[e].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"
                ),
                format!(
                    "{P}.properties[e].type: Required value: must be object if x-kubernetes-embedded-resource is true"
                ),
                format!(
                    "{P}.properties[f].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"
                ),
                format!(
                    "{P}.properties[f].type: Invalid value: \"string\": must be object if x-kubernetes-embedded-resource is true"
                ),
                format!(
                    "{P}.properties[g].additionalProperties: Forbidden: must not be used if x-kubernetes-embedded-resource is set"
                ),
                format!(
                    "{P}.properties[g].properties[kind].type: Invalid value: \"integer\": must be string"
                ),
            ],
        ),
        (
            "int-or-string with preserve",
            json!({"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true}}}),
            vec![format!(
                "{P}.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true"
            )],
        ),
        (
            "root metadata",
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}}}}),
            vec![],
        ),
        (
            "root metadata restricts more",
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}),
            vec![format!(
                "{P}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
            )],
        ),
        (
            "root metadata type",
            json!({"type": "object", "properties": {"metadata": {"type": "string"}}}),
            vec![format!(
                "{P}.properties[metadata].type: Invalid value: \"string\": must be object"
            )],
        ),
        (
            "invalid pattern",
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}),
            vec![format!(
                "{P}.properties[a].pattern: Invalid value: \"(\": must be a valid regular expression, but isn't: error parsing regexp: missing closing ): `(`"
            )],
        ),
        (
            "unsupported fields",
            json!({"type": "object", "properties": {"a": {"type": "object", "patternProperties": {"x": {}}}}}),
            vec![format!(
                "{P}: Invalid value: \"\": OpenAPIV3Schema 'patternProperties' is not supported"
            )],
        ),
        (
            "items array",
            json!({"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}}),
            vec![format!(
                "{P}: Invalid value: \"\": OpenAPIV3Schema 'items' must be a schema, but is an array"
            )],
        ),
    ];
    for (name, schema, want) in cases {
        assert_eq!(msgs(schema), want, "{name}");
    }
}

#[test]
fn no_panic_on_odd_input() {
    for s in [
        json!(null),
        json!(1),
        json!({"properties": [], "items": 1, "anyOf": {}, "type": 3}),
    ] {
        let _ = validate_structural(&s, "x");
    }
    let mut s = json!({"type": "string"});
    for _ in 0..(crate::MAX_DEPTH * 2) {
        s = json!({"type": "object", "properties": {"a": s}, "anyOf": [{"not": {}}]});
    }
    let _ = validate_structural(&s, "x");
}
