use super::*;

/// The example policy of upstream's "Auditing" documentation page.
const DOCS_POLICY: &str = r#"
apiVersion: audit.k8s.io/v1 # This is required.
kind: Policy
# Don't generate audit events for all requests in RequestReceived stage.
omitStages:
  - "RequestReceived"
rules:
  # Log pod changes at RequestResponse level
  - level: RequestResponse
    resources:
    - group: ""
      # Resource "pods" doesn't match requests to any subresource of pods,
      # which is consistent with the RBAC policy.
      resources: ["pods"]
  # Log "pods/log", "pods/status" at Metadata level
  - level: Metadata
    resources:
    - group: ""
      resources: ["pods/log", "pods/status"]

  # Don't log requests to a configmap called "controller-leader"
  - level: None
    resources:
    - group: ""
      resources: ["configmaps"]
      resourceNames: ["controller-leader"]

  # Don't log watch requests by the "system:kube-proxy" on endpoints or services
  - level: None
    users: ["system:kube-proxy"]
    verbs: ["watch"]
    resources:
    - group: "" # core API group
      resources: ["endpoints", "services"]

  # Don't log authenticated requests to certain non-resource URL paths.
  - level: None
    userGroups: ["system:authenticated"]
    nonResourceURLs:
    - "/api*" # Wildcard matching.
    - "/version"

  # Log the request body of configmap changes in kube-system.
  - level: Request
    resources:
    - group: "" # core API group
      resources: ["configmaps"]
    # This rule only applies to resources in the "kube-system" namespace.
    # The empty string "" can be used to select non-namespaced resources.
    namespaces: ["kube-system"]

  # Log configmap and secret changes in all other namespaces at the Metadata level.
  - level: Metadata
    resources:
    - group: "" # core API group
      resources: ["secrets", "configmaps"]

  # Log all other resources in core and extensions at the Request level.
  - level: Request
    resources:
    - group: "" # core API group
    - group: "extensions" # Version of group should NOT be included.

  # A catch-all rule to log all other requests at the Metadata level.
  - level: Metadata
    # Long-running requests like watches that fall under this rule will not
    # generate an audit event in RequestReceived.
    omitStages:
      - "RequestReceived"
"#;

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo::new(name, groups)
}

/// A resource request: `verb group/resource[/subresource] namespace name`.
fn res(verb: &str, group: &str, resource: &str, ns: &str, name: &str) -> Attributes {
    let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
    Attributes {
        verb: verb.into(),
        api_group: group.into(),
        api_version: "v1".into(),
        resource: resource.into(),
        subresource: subresource.into(),
        namespace: ns.into(),
        name: name.into(),
        resource_request: true,
        ..Default::default()
    }
}

fn path(verb: &str, p: &str) -> Attributes {
    Attributes {
        verb: verb.into(),
        path: p.into(),
        ..Default::default()
    }
}

#[test]
fn docs_policy_levels() {
    let policy = Policy::parse(DOCS_POLICY).expect("the docs' policy loads");
    let alice = user("alice", &["system:authenticated"]);
    let proxy = user("system:kube-proxy", &["system:authenticated"]);
    use Level::*;
    let cases: [(&str, &UserInfo, Attributes, Level); 17] = [
        (
            "pod create",
            &alice,
            res("create", "", "pods", "default", ""),
            RequestResponse,
        ),
        (
            "pod list",
            &alice,
            res("list", "", "pods", "", ""),
            RequestResponse,
        ),
        (
            "pods/log is not pods",
            &alice,
            res("get", "", "pods/log", "default", "p"),
            Metadata,
        ),
        (
            "pods/status",
            &alice,
            res("patch", "", "pods/status", "default", "p"),
            Metadata,
        ),
        (
            "pods/exec falls to core Request",
            &alice,
            res("create", "", "pods/exec", "default", "p"),
            Request,
        ),
        (
            "the leader configmap",
            &alice,
            res(
                "update",
                "",
                "configmaps",
                "kube-system",
                "controller-leader",
            ),
            None,
        ),
        (
            "another kube-system configmap",
            &alice,
            res("update", "", "configmaps", "kube-system", "x"),
            Request,
        ),
        (
            "configmap elsewhere",
            &alice,
            res("update", "", "configmaps", "default", "x"),
            Metadata,
        ),
        (
            "secret",
            &alice,
            res("get", "", "secrets", "default", "s"),
            Metadata,
        ),
        (
            "kube-proxy watching services",
            &proxy,
            res("watch", "", "services", "", ""),
            None,
        ),
        (
            "kube-proxy listing services",
            &proxy,
            res("list", "", "services", "", ""),
            Request,
        ),
        (
            "someone else watching endpoints",
            &alice,
            res("watch", "", "endpoints", "", ""),
            Request,
        ),
        ("/api wildcard", &alice, path("get", "/apis/apps/v1"), None),
        ("/version exact", &alice, path("get", "/version"), None),
        (
            "/healthz falls to the catch-all",
            &alice,
            path("get", "/healthz"),
            Metadata,
        ),
        (
            "extensions group",
            &alice,
            res("get", "extensions", "ingresses", "default", "i"),
            Request,
        ),
        (
            "apps group falls to the catch-all",
            &alice,
            res("create", "apps", "deployments", "default", ""),
            Metadata,
        ),
    ];
    for (what, u, a, want) in cases {
        assert_eq!(policy.evaluate(Some(u), &a).level, want, "{what}");
    }
    // Unauthenticated requests are not in system:authenticated: /version is logged.
    assert_eq!(
        policy
            .evaluate(Option::None, &path("get", "/version"))
            .level,
        Metadata
    );
    // The policy's omitStages reach every rule and the default.
    let c = policy.evaluate(Some(&alice), &res("get", "", "secrets", "default", "s"));
    assert!(c.omit_stages.contains(Stage::RequestReceived));
    assert!(!c.omit_stages.contains(Stage::ResponseComplete));
}

/// One rule against one request: (rule YAML, request, matches?).
#[test]
fn rule_matching() {
    let alice = user("alice", &["devs", "system:authenticated"]);
    let cases: Vec<(&str, &str, Attributes, bool)> = vec![
        (
            "no constraints",
            "{}",
            res("get", "", "pods", "default", "p"),
            true,
        ),
        (
            "no constraints, non-resource",
            "{}",
            path("get", "/healthz"),
            true,
        ),
        (
            "user",
            "{users: [alice]}",
            res("get", "", "pods", "", ""),
            true,
        ),
        (
            "other user",
            "{users: [bob]}",
            res("get", "", "pods", "", ""),
            false,
        ),
        (
            "group",
            "{userGroups: [devs]}",
            res("get", "", "pods", "", ""),
            true,
        ),
        (
            "other group",
            "{userGroups: [ops]}",
            res("get", "", "pods", "", ""),
            false,
        ),
        (
            "verb",
            "{verbs: [get, list]}",
            res("list", "", "pods", "", ""),
            true,
        ),
        (
            "other verb",
            "{verbs: [get]}",
            res("delete", "", "pods", "", "p"),
            false,
        ),
        (
            "namespace",
            "{namespaces: [default]}",
            res("get", "", "pods", "default", "p"),
            true,
        ),
        (
            "other namespace",
            "{namespaces: [default]}",
            res("get", "", "pods", "kube-system", "p"),
            false,
        ),
        (
            "cluster-scoped is \"\"",
            "{namespaces: [\"\"]}",
            res("get", "", "nodes", "", "n"),
            true,
        ),
        (
            "namespaces never match non-resource",
            "{namespaces: [\"\"]}",
            path("get", "/healthz"),
            false,
        ),
        (
            "resource",
            "{resources: [{group: \"\", resources: [pods]}]}",
            res("get", "", "pods", "d", "p"),
            true,
        ),
        (
            "resource not subresource",
            "{resources: [{resources: [pods]}]}",
            res("get", "", "pods/log", "d", "p"),
            false,
        ),
        (
            "resource/subresource",
            "{resources: [{resources: [pods/log]}]}",
            res("get", "", "pods/log", "d", "p"),
            true,
        ),
        (
            "resource/*",
            "{resources: [{resources: [\"pods/*\"]}]}",
            res("get", "", "pods/exec", "d", "p"),
            true,
        ),
        (
            "resource/* and the resource",
            "{resources: [{resources: [\"pods/*\"]}]}",
            res("get", "", "pods", "d", "p"),
            true,
        ),
        (
            "*/subresource",
            "{resources: [{resources: [\"*/status\"]}]}",
            res("update", "apps", "deployments/status", "d", "x"),
            false,
        ),
        (
            "*/subresource in its group",
            "{resources: [{group: apps, resources: [\"*/status\"]}]}",
            res("update", "apps", "deployments/status", "d", "x"),
            true,
        ),
        (
            "*/subresource not the resource",
            "{resources: [{group: apps, resources: [\"*/status\"]}]}",
            res("update", "apps", "deployments", "d", "x"),
            false,
        ),
        (
            "* in the group",
            "{resources: [{group: apps, resources: [\"*\"]}]}",
            res("get", "apps", "deployments/scale", "d", "x"),
            true,
        ),
        (
            "group only",
            "{resources: [{group: apps}]}",
            res("get", "apps", "deployments", "d", "x"),
            true,
        ),
        (
            "other group",
            "{resources: [{group: apps}]}",
            res("get", "batch", "jobs", "d", "x"),
            false,
        ),
        (
            "any group",
            "{resources: [{group: \"*\", resources: [secrets]}]}",
            res("get", "", "secrets", "d", "x"),
            true,
        ),
        (
            "resourceNames",
            "{resources: [{resources: [configmaps], resourceNames: [a]}]}",
            res("get", "", "configmaps", "d", "a"),
            true,
        ),
        (
            "other resourceName",
            "{resources: [{resources: [configmaps], resourceNames: [a]}]}",
            res("get", "", "configmaps", "d", "b"),
            false,
        ),
        (
            "resources never match non-resource",
            "{resources: [{resources: [\"*\"]}]}",
            path("get", "/api"),
            false,
        ),
        (
            "url exact",
            "{nonResourceURLs: [/healthz]}",
            path("get", "/healthz"),
            true,
        ),
        (
            "url exact, other",
            "{nonResourceURLs: [/healthz]}",
            path("get", "/healthz/etcd"),
            false,
        ),
        (
            "url prefix",
            "{nonResourceURLs: [\"/healthz*\"]}",
            path("get", "/healthz/etcd"),
            true,
        ),
        (
            "url *",
            "{nonResourceURLs: [\"*\"]}",
            path("post", "/anything"),
            true,
        ),
        (
            "urls never match resources",
            "{nonResourceURLs: [\"*\"]}",
            res("get", "", "pods", "", ""),
            false,
        ),
        (
            "all must hold",
            "{users: [alice], verbs: [get], resources: [{resources: [pods]}], namespaces: [default]}",
            res("get", "", "pods", "default", "p"),
            true,
        ),
        (
            "all must hold, verb fails",
            "{users: [alice], verbs: [get], resources: [{resources: [pods]}]}",
            res("list", "", "pods", "default", ""),
            false,
        ),
    ];
    for (what, rule, attrs, want) in cases {
        let inner = rule.trim_start_matches('{').trim_end_matches('}').trim();
        let rule = if inner.is_empty() {
            "{level: Metadata}".to_string()
        } else {
            format!("{{level: Metadata, {inner}}}")
        };
        let text = format!("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- {rule}\n");
        let p = Policy::parse(&text).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
        let got = p.evaluate(Some(&alice), &attrs).level == Level::Metadata;
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn first_match_wins_and_none_is_the_default() {
    let p = Policy::parse(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n\
         - level: None\n  users: [system:admin]\n\
         - level: RequestResponse\n  resources: [{resources: [pods]}]\n\
         - level: Metadata\n  resources: [{resources: [pods, secrets]}]\n",
    )
    .expect("policy");
    let admin = UserInfo::admin();
    let alice = user("alice", &[]);
    let pods = res("get", "", "pods", "d", "p");
    assert_eq!(p.evaluate(Some(&admin), &pods).level, Level::None);
    assert_eq!(
        p.evaluate(Some(&alice), &pods).level,
        Level::RequestResponse
    );
    assert_eq!(
        p.evaluate(Some(&alice), &res("get", "", "secrets", "d", "s"))
            .level,
        Level::Metadata
    );
    assert_eq!(
        p.evaluate(Some(&alice), &res("get", "", "configmaps", "d", "c"))
            .level,
        Level::None
    );
}

#[test]
fn stages_and_managed_fields_per_rule() {
    let p = Policy::parse(
        r#"{"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
            "omitStages": ["RequestReceived"], "omitManagedFields": true,
            "rules": [
              {"level": "Request", "verbs": ["create"], "omitStages": ["ResponseStarted"],
               "omitManagedFields": false},
              {"level": "Metadata"}]}"#,
    )
    .expect("JSON policy");
    let alice = user("alice", &[]);
    let c = p.evaluate(Some(&alice), &res("create", "", "pods", "d", ""));
    assert_eq!(c.level, Level::Request);
    assert!(
        c.omit_stages.contains(Stage::RequestReceived)
            && c.omit_stages.contains(Stage::ResponseStarted)
    );
    assert!(
        !c.omit_managed_fields,
        "the rule's false overrides the policy's true"
    );
    let c = p.evaluate(Some(&alice), &res("get", "", "pods", "d", "p"));
    assert!(
        c.omit_stages.contains(Stage::RequestReceived)
            && !c.omit_stages.contains(Stage::ResponseStarted)
    );
    assert!(c.omit_managed_fields, "no rule value: the policy's");
}

/// Bad policies and upstream's messages.
#[test]
fn invalid_policies() {
    let head = "apiVersion: audit.k8s.io/v1\nkind: Policy\n";
    let cases: [(&str, String); 10] = [
        ("no rules", format!("{head}rules: []\n")),
        ("no level", format!("{head}rules:\n- verbs: [get]\n")),
        ("bad level", format!("{head}rules:\n- level: Everything\n")),
        (
            "bad stage",
            format!("{head}omitStages: [Done]\nrules:\n- level: Metadata\n"),
        ),
        (
            "bad rule stage",
            format!("{head}rules:\n- level: Metadata\n  omitStages: [Started]\n"),
        ),
        (
            "url without /",
            format!("{head}rules:\n- level: Metadata\n  nonResourceURLs: [healthz]\n"),
        ),
        (
            "inner *",
            format!("{head}rules:\n- level: Metadata\n  nonResourceURLs: [\"/a*/b\"]\n"),
        ),
        (
            "urls and resources",
            format!(
                "{head}rules:\n- level: Metadata\n  nonResourceURLs: [/healthz]\n  namespaces: [default]\n"
            ),
        ),
        (
            "names without resources",
            format!(
                "{head}rules:\n- level: Metadata\n  resources: [{{group: apps, resourceNames: [x]}}]\n"
            ),
        ),
        (
            "bad group",
            format!("{head}rules:\n- level: Metadata\n  resources: [{{group: Apps_1}}]\n"),
        ),
    ];
    let want = [
        "loaded illegal policy with 0 rules",
        "rules[0].level: Required value",
        "rules[0].level: Unsupported value: \"Everything\": supported values: \"None\", \"Metadata\", \"Request\", \"RequestResponse\"",
        "omitStages[0]: Invalid value: \"Done\": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic",
        "rules[0].omitStages[0]: Invalid value: \"Started\": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic",
        "rules[0].nonResourceURLs[0]: Invalid value: \"healthz\": non-resource URL rules must begin with a '/' character",
        "rules[0].nonResourceURLs[0]: Invalid value: \"/a*/b\": non-resource URL wildcards '*' must be the final character of the rule",
        "rules[0].nonResourceURLs: Invalid value: [\"/healthz\"]: rules cannot apply to both regular resources and non-resource URLs",
        "rules[0].resources.resourceNames: Invalid value: [\"x\"]: using resourceNames requires at least one resource",
        "rules[0].resources.group: Invalid value: \"Apps_1\": a lowercase RFC 1123 subdomain",
    ];
    for ((what, text), want) in cases.iter().zip(want) {
        let err = Policy::parse(text).expect_err(what);
        assert!(err.starts_with(want), "{what}: {err}");
    }
    // Several errors are aggregated as upstream's ToAggregate.
    let err = Policy::parse(&format!(
        "{head}rules:\n- level: Everything\n- level: Metadata\n  nonResourceURLs: [x]\n"
    ))
    .expect_err("two errors");
    assert!(
        err.starts_with("[rules[0].level: Unsupported value")
            && err.contains(", rules[1].nonResourceURLs[0]"),
        "{err}"
    );
}

#[test]
fn documents_that_are_not_policies() {
    let cases = [
        (
            "kind: Policy\nrules: [{level: Metadata}]\n",
            "failed decoding: Object 'apiVersion' is missing",
        ),
        (
            "apiVersion: audit.k8s.io/v1\nrules: [{level: Metadata}]\n",
            "failed decoding: Object 'Kind' is missing",
        ),
        (
            "apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: Metadata}]\n",
            "failed decoding: no kind \"Policy\" is registered for version \"audit.k8s.io/v1beta1\"",
        ),
        (
            "apiVersion: [\n",
            "failed decoding: error converting YAML to JSON",
        ),
        (
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: {level: Metadata}\n",
            "failed decoding:",
        ),
    ];
    for (text, want) in cases {
        let err = Policy::parse(text).expect_err(text);
        assert!(err.starts_with(want), "{text:?}: {err}");
    }
    // Unknown fields are warned about and ignored, as upstream's lenient fallback.
    let p = Policy::parse(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  verb: [get]\n",
    )
    .expect("lenient");
    assert!(p.rules[0].verbs.is_empty());
    assert_eq!(
        unknown_fields(&serde_json::json!({"rules": [{"level": "None", "verb": []}], "x": 1})),
        ["unknown field \"x\"", "unknown field \"rules[0].verb\""]
    );
}

#[test]
fn load_names_the_file() {
    let missing = Path::new("/nonexistent/berth-audit-policy.yaml");
    let err = Policy::load(missing).expect_err("missing").to_string();
    assert!(
        err.starts_with("loading audit policy file: failed to read file path \"/nonexistent/berth-audit-policy.yaml\""),
        "{err}"
    );
    let path = std::env::temp_dir().join(format!("berth-audit-policy-{}.yaml", std::process::id()));
    std::fs::write(
        &path,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n",
    )
    .expect("write");
    let err = Policy::load(&path).expect_err("empty").to_string();
    assert_eq!(
        err,
        format!(
            "loading audit policy file: loaded illegal policy with 0 rules: from file {}",
            path.display()
        )
    );
    std::fs::remove_file(&path).ok();
}
