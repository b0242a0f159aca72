use super::*;

fn config(kind: &str, hook: Value) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "config"},
        "webhooks": [hook],
    })
}

fn valid_hook() -> Value {
    json!({
        "name": "hook.example.com",
        "clientConfig": {"service": {"namespace": "ns", "name": "svc", "path": "/mutate", "port": 443}},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "scope": "*"}],
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": 10,
        "admissionReviewVersions": ["v1"],
        "namespaceSelector": {},
        "objectSelector": {},
        "reinvocationPolicy": "Never",
    })
}

fn with(patch: Value) -> Value {
    let mut h = valid_hook();
    if let (Some(h), Some(p)) = (h.as_object_mut(), patch.as_object()) {
        for (k, v) in p {
            if v.is_null() {
                h.remove(k);
            } else {
                h.insert(k.clone(), v.clone());
            }
        }
    }
    h
}

fn messages(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

#[test]
fn webhook_fields() {
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (valid_hook(), vec![]),
        (
            with(json!({"name": ""})),
            vec!["webhooks[0].name: Required value"],
        ),
        (
            with(json!({"name": "hook"})),
            vec![
                "webhooks[0].name: Invalid value: \"hook\": should be a domain with at least three segments separated by dots",
            ],
        ),
        (
            with(json!({"name": "Hook.example.com"})),
            vec![
                "webhooks[0].name: Invalid value: \"Hook.example.com\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ],
        ),
        (
            with(json!({"sideEffects": null})),
            vec!["webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"],
        ),
        (
            with(json!({"sideEffects": "Some"})),
            vec![
                "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
            ],
        ),
        (
            with(json!({"failurePolicy": "Sometimes"})),
            vec![
                "webhooks[0].failurePolicy: Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\"",
            ],
        ),
        (
            with(json!({"matchPolicy": "Loose"})),
            vec![
                "webhooks[0].matchPolicy: Unsupported value: \"Loose\": supported values: \"Equivalent\", \"Exact\"",
            ],
        ),
        (
            with(json!({"reinvocationPolicy": "Always"})),
            vec![
                "webhooks[0].reinvocationPolicy: Unsupported value: \"Always\": supported values: \"IfNeeded\", \"Never\"",
            ],
        ),
        (
            with(json!({"timeoutSeconds": 31})),
            vec![
                "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
            ],
        ),
        (
            with(json!({"timeoutSeconds": 0})),
            vec![
                "webhooks[0].timeoutSeconds: Invalid value: 0: the timeout value must be between 1 and 30 seconds",
            ],
        ),
        (
            with(json!({"timeoutSeconds": "10"})),
            vec!["webhooks[0].timeoutSeconds: Invalid value: \"10\": must be of type integer"],
        ),
        (
            with(json!({"admissionReviewVersions": null})),
            vec![
                "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
            ],
        ),
        (
            with(json!({"admissionReviewVersions": ["v2"]})),
            vec![
                "webhooks[0].admissionReviewVersions: Invalid value: [\"v2\"]: must include at least one of v1, v1beta1",
            ],
        ),
        (
            with(json!({"admissionReviewVersions": ["v1", "v1"]})),
            vec![
                "webhooks[0].admissionReviewVersions[1]: Invalid value: \"v1\": duplicate version",
            ],
        ),
        (
            with(json!({"admissionReviewVersions": ["v1", "V_2"]})),
            vec![
                "webhooks[0].admissionReviewVersions[1]: Invalid value: \"V_2\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            ],
        ),
        (
            with(json!({"clientConfig": {}})),
            vec![
                "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
            ],
        ),
        (
            with(
                json!({"clientConfig": {"url": "https://a.b", "service": {"namespace": "n", "name": "s"}}}),
            ),
            vec![
                "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
            ],
        ),
        (
            with(json!({"clientConfig": {"url": "https://hook.example.com:8443/path"}})),
            vec![],
        ),
        (
            with(json!({"clientConfig": {"url": "http://hook.example.com/"}})),
            vec![
                "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
            ],
        ),
        (
            with(json!({"clientConfig": {"url": "https:///path"}})),
            vec![
                "webhooks[0].clientConfig.url: Invalid value: \"\": host must be specified; desired format: https://host[/path]",
            ],
        ),
        (
            with(json!({"clientConfig": {"url": "https://u:p@h.example.com/?a=b#f"}})),
            vec![
                "webhooks[0].clientConfig.url: Invalid value: \"u:p\": user information is not permitted in the URL",
                "webhooks[0].clientConfig.url: Invalid value: \"f\": fragments are not permitted in the URL",
                "webhooks[0].clientConfig.url: Invalid value: \"a=b\": query parameters are not permitted in the URL",
            ],
        ),
        (
            with(json!({"clientConfig": {"url": "https://h:x/"}})),
            vec![
                "webhooks[0].clientConfig.url: Required value: url must be a valid URL: parse \"https://h:x/\": invalid port \":x\" after host; desired format: https://host[/path]",
            ],
        ),
        (
            with(json!({"clientConfig": {"service": {"port": 0, "path": "foo/"}}})),
            vec![
                "webhooks[0].clientConfig.service.name: Required value",
                "webhooks[0].clientConfig.service.namespace: Required value",
                "webhooks[0].clientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
                // Upstream drops the first byte before checking segments: "oo" passes.
                "webhooks[0].clientConfig.service.path: Invalid value: \"foo/\": must start with a '/'",
            ],
        ),
        (
            with(
                json!({"clientConfig": {"service": {"namespace": "n", "name": "s", "path": "/a//b"}}}),
            ),
            vec![
                "webhooks[0].clientConfig.service.path: Invalid value: \"/a//b\": segment[1] may not be empty",
            ],
        ),
        (
            with(
                json!({"clientConfig": {"service": {"namespace": "n", "name": "s", "path": "//"}}}),
            ),
            vec![
                "webhooks[0].clientConfig.service.path: Invalid value: \"//\": segment[0] may not be empty",
            ],
        ),
        (
            with(
                json!({"clientConfig": {"service": {"namespace": "n", "name": "s", "path": "/ok/path/"}}}),
            ),
            vec![],
        ),
        (
            with(
                json!({"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}),
            ),
            vec![
                "webhooks[0].namespaceSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
            ],
        ),
        (
            with(
                json!({"matchConditions": [{"name": "a", "expression": "true"}, {"name": "a", "expression": " "}, {"name": "bad name!", "expression": "x"}, {}]}),
            ),
            vec![
                "webhooks[0].matchConditions[1].expression: Required value",
                "webhooks[0].matchConditions[1].name: Duplicate value: \"a\"",
                "webhooks[0].matchConditions[2].name: Invalid value: \"bad name!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "webhooks[0].matchConditions[3].expression: Required value",
                "webhooks[0].matchConditions[3].name: Required value",
            ],
        ),
        (
            with(
                json!({"matchConditions": (0..65).map(|i| json!({"name": format!("c{i}"), "expression": "true"})).collect::<Vec<_>>()}),
            ),
            vec!["webhooks[0].matchConditions: Too many: 65: must have at most 64 items"],
        ),
    ];
    for (hook, want) in cases {
        let got = messages(&validate_configuration(&config(
            "MutatingWebhookConfiguration",
            hook.clone(),
        )));
        assert_eq!(got, want, "{hook}");
    }
}

#[test]
fn rules() {
    let r = |rule: Value| with(json!({"rules": [rule]}));
    let base = json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"]});
    let res = |resources: Value| {
        let mut b = base.clone();
        b["resources"] = resources;
        r(b)
    };
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            r(json!({})),
            vec![
                "webhooks[0].rules[0].operations: Required value",
                "webhooks[0].rules[0].apiGroups: Required value",
                "webhooks[0].rules[0].apiVersions: Required value",
                "webhooks[0].rules[0].resources: Required value",
            ],
        ),
        (
            r(
                json!({"operations": ["*", "CREATE", "PATCH"], "apiGroups": ["*", "apps"], "apiVersions": ["*", "v1", ""], "resources": ["pods"], "scope": "Everywhere"}),
            ),
            vec![
                "webhooks[0].rules[0].operations: Invalid value: [\"*\",\"CREATE\",\"PATCH\"]: if '*' is present, must not specify other operations",
                "webhooks[0].rules[0].operations[2]: Unsupported value: \"PATCH\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
                "webhooks[0].rules[0].apiGroups: Invalid value: [\"*\",\"apps\"]: if '*' is present, must not specify other API groups",
                "webhooks[0].rules[0].apiVersions: Invalid value: [\"*\",\"v1\",\"\"]: if '*' is present, must not specify other API versions",
                "webhooks[0].rules[0].apiVersions[2]: Required value",
                "webhooks[0].rules[0].scope: Unsupported value: \"Everywhere\": supported values: \"*\", \"Cluster\", \"Namespaced\"",
            ],
        ),
        (res(json!(["pods", "pods/status", "*/scale"])), vec![]),
        (
            res(json!(["*/*", "pods"])),
            vec![
                "webhooks[0].rules[0].resources: Invalid value: [\"*/*\",\"pods\"]: if '*/*' is present, must not specify other resources",
            ],
        ),
        (
            res(json!(["*", "pods"])),
            vec![
                "webhooks[0].rules[0].resources: Invalid value: [\"*\",\"pods\"]: if '*' is present, must not specify other resources without subresources",
            ],
        ),
        // Upstream only looks at the last resource without a subresource.
        (res(json!(["pods", "*"])), vec![]),
        (
            res(json!(["pods/*", "pods/status"])),
            vec![
                "webhooks[0].rules[0].resources[1]: Invalid value: \"pods/status\": if 'pods/*' is present, must not specify pods/status",
            ],
        ),
        (
            res(json!(["*/status", "pods/status"])),
            vec![
                "webhooks[0].rules[0].resources[1]: Invalid value: \"pods/status\": if '*/status' is present, must not specify pods/status",
            ],
        ),
        (
            res(json!(["", 3])),
            vec![
                "webhooks[0].rules[0].resources[1]: Invalid value: 3: must be of type string",
                "webhooks[0].rules[0].resources[0]: Required value",
            ],
        ),
    ];
    for (hook, want) in cases {
        let got = messages(&validate_configuration(&config(
            "ValidatingWebhookConfiguration",
            hook.clone(),
        )));
        assert_eq!(got, want, "{hook}");
    }
}

#[test]
fn configuration_level() {
    let mut c = config("ValidatingWebhookConfiguration", valid_hook());
    c["webhooks"] = json!([valid_hook(), valid_hook()]);
    c["metadata"] = json!({"name": "Bad_Name"});
    let got = messages(&validate_configuration(&c));
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].starts_with("metadata.name: Invalid value: \"Bad_Name\""),
        "{got:?}"
    );
    assert_eq!(
        got[1],
        "webhooks[1].name: Duplicate value: \"hook.example.com\""
    );

    // reinvocationPolicy is not a field of validating webhooks.
    let v = config(
        "ValidatingWebhookConfiguration",
        with(json!({"reinvocationPolicy": "Bogus"})),
    );
    assert!(validate_configuration(&v).is_empty());

    assert_eq!(
        messages(&validate_configuration(&json!({"kind": "Pod"}))),
        [
            "kind: Unsupported value: \"Pod\": supported values: \"MutatingWebhookConfiguration\", \"ValidatingWebhookConfiguration\""
        ]
    );
    let mut wrong = config("MutatingWebhookConfiguration", json!("x"));
    assert_eq!(
        messages(&validate_configuration(&wrong)),
        ["webhooks[0]: Invalid value: \"x\": must be of type object"]
    );
    wrong["webhooks"] = json!({});
    assert_eq!(
        messages(&validate_configuration(&wrong)),
        ["webhooks: Invalid value: {}: must be of type array"]
    );
    // No webhooks at all is valid.
    wrong["webhooks"] = json!(null);
    assert!(validate_configuration(&wrong).is_empty());
}

#[test]
fn updates_keep_what_the_stored_object_already_had() {
    let old_hook = with(
        json!({"sideEffects": "Some", "admissionReviewVersions": ["v2"],
        "matchConditions": [{"name": "a", "expression": " "}]}),
    );
    let old = config("MutatingWebhookConfiguration", old_hook.clone());
    // Unchanged: none of the rules the stored object breaks are enforced.
    assert!(validate_configuration_update(&old, &old).is_empty());
    // Match conditions that change are validated again.
    let mut changed = old_hook.clone();
    changed["matchConditions"] = json!([{"name": "b", "expression": ""}]);
    assert_eq!(
        messages(&validate_configuration_update(
            &config("MutatingWebhookConfiguration", changed),
            &old
        )),
        ["webhooks[0].matchConditions[0].expression: Required value"]
    );
    // A valid stored object holds the update to the strict rules.
    let strict_old = config("MutatingWebhookConfiguration", valid_hook());
    assert_eq!(
        messages(&validate_configuration_update(&old, &strict_old)),
        [
            "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
            "webhooks[0].matchConditions[0].expression: Required value",
            "webhooks[0].admissionReviewVersions: Invalid value: [\"v2\"]: must include at least one of v1, v1beta1",
        ]
    );
}
