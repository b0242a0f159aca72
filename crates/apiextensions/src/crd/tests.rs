use super::*;
use serde_json::json;

fn base() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"replicas": {"type": "integer", "default": 1}, "color": {"type": "string"}}},
                    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
                }}},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "additionalPrinterColumns": [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}],
                "selectableFields": [{"jsonPath": ".spec.color"}]
            }]
        }
    })
}

fn msgs(errs: Vec<FieldError>) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

fn with(f: impl FnOnce(&mut Value)) -> Vec<String> {
    let mut crd = base();
    f(&mut crd);
    msgs(validate_crd(&crd))
}

#[test]
fn valid_crd() {
    assert_eq!(msgs(validate_crd(&base())), Vec::<String>::new());
}

#[test]
fn crd_table() {
    // Messages from apiextensions-apiserver pkg/apis/apiextensions/validation/validation.go.
    type Mutate = fn(&mut Value);
    let cases: Vec<(&str, Mutate, Vec<&str>)> = vec![
        (
            "name",
            |c| c["metadata"]["name"] = json!("x.example.com"),
            vec![
                r#"metadata.name: Invalid value: "x.example.com": must be spec.names.plural+"."+spec.group"#,
            ],
        ),
        (
            "group dot",
            |c| {
                c["spec"]["group"] = json!("example");
                c["metadata"]["name"] = json!("widgets.example");
            },
            vec![
                r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#,
            ],
        ),
        (
            "scope",
            |c| c["spec"]["scope"] = json!("Global"),
            vec![
                r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#,
            ],
        ),
        (
            "no storage",
            |c| c["spec"]["versions"][0]["storage"] = json!(false),
            vec![
                "spec.versions: Invalid value: ", // value elided below
                "status.storedVersions: Invalid value: []: must have at least one stored version",
            ],
        ),
        (
            "kind lower",
            |c| c["spec"]["names"]["kind"] = json!("widget_x"),
            vec![
                r#"spec.names.kind: Invalid value: "widget_x": may have mixed case, but should otherwise match: "#,
            ],
        ),
        (
            "listKind same",
            |c| c["spec"]["names"]["listKind"] = json!("Widget"),
            vec![
                r#"spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same"#,
            ],
        ),
        (
            "short name",
            |c| c["spec"]["names"]["shortNames"] = json!(["WD"]),
            vec![r#"spec.names.shortNames[0]: Invalid value: "WD": a DNS-1035 label"#],
        ),
        (
            "structural",
            |c| {
                c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] =
                    json!({"properties": {"color": {"type": "string"}}})
            },
            vec![
                "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
            ],
        ),
        (
            "column type",
            |c| c["spec"]["versions"][0]["additionalPrinterColumns"][0]["type"] = json!("float"),
            vec![
                r#"spec.additionalPrinterColumns[0].type: Invalid value: "float": must be one of boolean,date,integer,number,string"#,
            ],
        ),
        (
            "column path",
            |c| {
                c["spec"]["versions"][0]["additionalPrinterColumns"][0]["jsonPath"] =
                    json!("spec.replicas")
            },
            vec![
                r#"spec.additionalPrinterColumns[0].JSONPath: Invalid value: "spec.replicas": must be a simple json path starting with ."#,
            ],
        ),
        (
            "scale path",
            |c| {
                c["spec"]["versions"][0]["subresources"]["scale"]["specReplicasPath"] =
                    json!(".status.replicas")
            },
            vec![
                r#"spec.subresources.scale.specReplicasPath: Invalid value: ".status.replicas": should be a json path under .spec"#,
            ],
        ),
        (
            "selectable",
            |c| {
                c["spec"]["versions"][0]["selectableFields"] =
                    json!([{"jsonPath": ".spec.nope"}, {"jsonPath": ".spec"}])
            },
            vec![
                r#"spec.selectableFields[0].jsonPath: Invalid value: ".spec.nope": is an invalid path: does not refer to a valid field: "nope""#,
                r#"spec.selectableFields[1].jsonPath: Invalid value: ".spec": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."#,
            ],
        ),
        (
            "webhook without config",
            |c| {
                c["spec"]["conversion"] =
                    json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v2"]}})
            },
            vec![
                "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
                r#"spec.conversion.conversionReviewVersions: Invalid value: ["v2"]: must include at least one of v1, v1beta1"#,
            ],
        ),
        (
            "webhook http",
            |c| c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "http://x/convert"}, "conversionReviewVersions": ["v1"]}}),
            vec![
                r#"spec.conversion.webhookClientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme"#,
            ],
        ),
        (
            "none with review versions",
            |c| {
                c["spec"]["conversion"] =
                    json!({"strategy": "None", "webhook": {"conversionReviewVersions": ["v1"]}})
            },
            vec![
                "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
            ],
        ),
        (
            "preserveUnknownFields",
            |c| c["spec"]["preserveUnknownFields"] = json!(true),
            vec![
                "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
            ],
        ),
        (
            "top-level metadata default",
            |c| {
                c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"] =
                    json!({"type": "object", "default": {}})
            },
            vec![
                "spec.validation.openAPIV3Schema.properties[metadata].default: Forbidden: must not be set in top-level metadata",
            ],
        ),
        (
            "uniqueItems",
            |c| {
                c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
                    ["l"] =
                    json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true})
            },
            vec![
                "spec.validation.openAPIV3Schema.properties[spec].properties[l].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            ],
        ),
        (
            "list map keys",
            |c| {
                c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
                    ["l"] = json!({"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object", "properties": {"k": {"type": "string"}}}})
            },
            vec![
                "spec.validation.openAPIV3Schema.properties[spec].properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map",
            ],
        ),
        (
            "protected group",
            |c| {
                c["spec"]["group"] = json!("x.k8s.io");
                c["metadata"]["name"] = json!("widgets.x.k8s.io");
            },
            vec![
                r#"metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111"#,
            ],
        ),
        (
            "schema required",
            |c| {
                c["spec"]["versions"][0]
                    .as_object_mut()
                    .map(|m| m.remove("schema"));
                c["spec"]["versions"][0]
                    .as_object_mut()
                    .map(|m| m.remove("selectableFields"));
            },
            vec!["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"],
        ),
    ];
    for (name, mutate, want) in cases {
        let got = with(mutate);
        assert_eq!(got.len(), want.len(), "{name}: {got:#?}");
        for (g, w) in got.iter().zip(want.iter()) {
            assert!(g.starts_with(w), "{name}: {g} !~ {w}");
        }
    }
    // The storage message itself.
    let got = with(|c| c["spec"]["versions"][0]["storage"] = json!(false));
    assert!(
        got[0].ends_with("must have exactly one version marked as storage version"),
        "{}",
        got[0]
    );
}

#[test]
fn per_version_paths_when_schemas_differ() {
    let got = with(|c| {
        let mut v2 = c["spec"]["versions"][0].clone();
        v2["name"] = json!("v2");
        v2["storage"] = json!(false);
        v2["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["x"] = json!({});
        // Identical selectableFields would move to spec.selectableFields while
        // the differing schemas stay per version, which upstream rejects.
        if let Some(m) = v2.as_object_mut() {
            m.remove("selectableFields");
        }
        if let Some(a) = c["spec"]["versions"].as_array_mut() {
            a.push(v2);
        }
    });
    assert_eq!(
        got,
        vec![
            "spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[x].type: Required value: must not be empty for specified object fields"
        ]
    );
}

#[test]
fn update_rules() {
    let old = {
        let mut c = base();
        c["status"] = json!({"storedVersions": ["v1"], "conditions": [{"type": "Established", "status": "True"}], "acceptedNames": {"plural": "widgets", "kind": "Widget"}});
        c
    };
    let mut new = old.clone();
    new["spec"]["scope"] = json!("Cluster");
    new["spec"]["group"] = json!("other.com");
    new["metadata"]["name"] = json!("widgets.other.com");
    let got = msgs(validate_crd_update(&new, &old));
    assert!(
        got.contains(&r#"spec.scope: Invalid value: "Cluster": field is immutable"#.to_string()),
        "{got:#?}"
    );
    assert!(
        got.contains(&r#"spec.group: Invalid value: "other.com": field is immutable"#.to_string()),
        "{got:#?}"
    );

    // Dropping a stored version from spec.versions.
    let mut old2 = old.clone();
    old2["status"]["storedVersions"] = json!(["v1beta1", "v1"]);
    let got = msgs(validate_crd_update(&old2.clone(), &old2));
    assert_eq!(
        got,
        vec![
            r#"status.storedVersions[0]: Invalid value: "v1beta1": missing from spec.versions; v1beta1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1beta1 and removes v1beta1 from status.storedVersions"#
        ]
    );
}

#[test]
fn no_panic_on_odd_input() {
    for c in [
        json!(null),
        json!({"spec": 1}),
        json!({"spec": {"versions": [1, null, {"schema": 5}]}, "metadata": []}),
    ] {
        let _ = validate_crd(&c);
        let _ = validate_crd_update(&c, &c);
    }
}
