//! ValidatingAdmissionPolicy end to end with real kubectl: the "Validating
//! Admission Policy" docs' examples (a replica limit, then the same limit as a
//! ConfigMap param), a messageExpression, `validationActions: [Warn]` that lets
//! the write through, a binding scoped by namespaceSelector, an invalid
//! expression refused at create, and the printers.

mod common;

use std::time::Duration;

use common::{Server, stderr, stdout, wait_until};

const DEMO_POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: demo-policy.example.com
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups:   ["apps"]
      apiVersions: ["v1"]
      operations:  ["CREATE", "UPDATE"]
      resources:   ["deployments"]
  validations:
    - expression: "object.spec.replicas <= 5"
"#;

const DEMO_BINDING: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: demo-binding-test.example.com
spec:
  policyName: demo-policy.example.com
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        environment: test
"#;

const PARAM_POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replicalimit-policy.example.com
spec:
  failurePolicy: Fail
  paramKind:
    apiVersion: v1
    kind: ConfigMap
  matchConstraints:
    resourceRules:
    - apiGroups:   ["apps"]
      apiVersions: ["v1"]
      operations:  ["CREATE", "UPDATE"]
      resources:   ["deployments"]
  validations:
    - expression: "object.spec.replicas <= int(params.data.maxReplicas)"
      messageExpression: "'object.spec.replicas must be no greater than ' + string(params.data.maxReplicas)"
      reason: Invalid
"#;

const PARAM_BINDING: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: replicalimit-binding-test.example.com
spec:
  policyName: replicalimit-policy.example.com
  validationActions: [Deny]
  paramRef:
    name: replica-limit-test.example.com
    namespace: default
    parameterNotFoundAction: Deny
  matchResources:
    namespaceSelector:
      matchLabels:
        environment: test
"#;

const WARN_POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: labels-policy.example.com
spec:
  matchConstraints:
    resourceRules:
    - apiGroups:   ["apps"]
      apiVersions: ["v1"]
      operations:  ["CREATE"]
      resources:   ["deployments"]
  validations:
    - expression: "has(object.metadata.labels) && has(object.metadata.labels.team)"
      message: "every deployment needs a team label"
"#;

const WARN_BINDING: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: labels-binding.example.com
spec:
  policyName: labels-policy.example.com
  validationActions: [Warn]
"#;

const BAD_POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: bad-policy.example.com
spec:
  matchConstraints:
    resourceRules:
    - apiGroups:   ["apps"]
      apiVersions: ["v1"]
      operations:  ["CREATE"]
      resources:   ["deployments"]
  validations:
    - expression: "object.spec.replicas <= "
"#;

fn create(s: &Server, yaml: &str) -> std::process::Output {
    s.kubectl_stdin(&["create", "-f", "-"], Some(yaml))
}

fn must_create(s: &Server, yaml: &str) {
    let out = create(s, yaml);
    assert!(out.status.success(), "create failed: {}", stderr(&out));
}

/// `kubectl create deployment` in `ns` with `replicas` (server-side dry run
/// when `dry`, so probes leave nothing behind).
fn deploy(s: &Server, ns: &str, name: &str, replicas: u32, dry: bool) -> std::process::Output {
    let replicas = format!("--replicas={replicas}");
    let mut args = vec![
        "create",
        "deployment",
        name,
        "--image=nginx",
        &replicas,
        "-n",
        ns,
    ];
    if dry {
        args.push("--dry-run=server");
    }
    s.kubectl(&args)
}

/// The docs' deployment (created from a file, so that kubectl prints the
/// Invalid status as the docs show it).
fn deployment_yaml(name: &str, replicas: u32) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: default
  labels:
    app: nginx
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: nginx:1.14.2
"#
    )
}

/// Waits until a dry-run create of `replicas` is refused in `ns` (the
/// plugin reads policies from the watch cache, a moment behind the write).
fn wait_denied(s: &Server, ns: &str, replicas: u32, needle: &str) {
    wait_until(Duration::from_secs(20), needle, || {
        let out = deploy(s, ns, "probe", replicas, true);
        !out.status.success() && stderr(&out).contains(needle)
    });
}

#[test]
fn validating_admission_policies_end_to_end() {
    let s = Server::start("vap");
    s.k(&["label", "namespace", "default", "environment=test"]);
    s.k(&["create", "namespace", "prod"]);
    s.k(&["label", "namespace", "prod", "environment=production"]);

    // An expression that does not compile is refused with upstream's message.
    let out = create(&s, BAD_POLICY);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(
            "The ValidatingAdmissionPolicy \"bad-policy.example.com\" is invalid: spec.validations[0].expression: Invalid value: \"object.spec.replicas <= \": compilation failed: ERROR: <input>:1:"
        ),
        "{err}"
    );

    // The docs' example: more than 5 replicas denied in `environment: test`
    // namespaces, with upstream's exact text.
    must_create(&s, DEMO_POLICY);
    must_create(&s, DEMO_BINDING);
    let denial = "ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5";
    wait_denied(&s, "default", 6, denial);
    let out = create(&s, &deployment_yaml("nginx", 6));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!("The deployments \"nginx\" is invalid: : {denial}")),
        "{}",
        stderr(&out)
    );
    let out = deploy(&s, "default", "small", 5, false);
    assert!(out.status.success(), "{}", stderr(&out));
    // The binding's namespaceSelector leaves other namespaces alone.
    let out = deploy(&s, "prod", "big", 9, false);
    assert!(out.status.success(), "{}", stderr(&out));
    // Updates are checked too.
    let out = s.kubectl(&[
        "scale",
        "deployment",
        "small",
        "--replicas=7",
        "-n",
        "default",
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains(denial), "{}", stderr(&out));

    // The printers.
    let table = s.k(&["get", "validatingadmissionpolicies"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"]);
    let row: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(row[..3], ["demo-policy.example.com", "1", "<unset>"]);

    // The limit as a ConfigMap param, with a messageExpression.
    s.k(&[
        "delete",
        "validatingadmissionpolicybinding",
        "demo-binding-test.example.com",
    ]);
    s.k(&[
        "create",
        "configmap",
        "replica-limit-test.example.com",
        "-n",
        "default",
        "--from-literal=maxReplicas=3",
    ]);
    must_create(&s, PARAM_POLICY);
    must_create(&s, PARAM_BINDING);
    let limited = "ValidatingAdmissionPolicy 'replicalimit-policy.example.com' with binding 'replicalimit-binding-test.example.com' denied request: object.spec.replicas must be no greater than 3";
    wait_denied(&s, "default", 4, limited);
    let out = deploy(&s, "default", "three", 3, false);
    assert!(out.status.success(), "{}", stderr(&out));
    let bindings = s.k(&["get", "validatingadmissionpolicybindings"]);
    let mut lines = bindings.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "POLICYNAME", "PARAMREF", "AGE"]);
    let row: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(
        row[..3],
        [
            "replicalimit-binding-test.example.com",
            "replicalimit-policy.example.com",
            "default/replica-limit-test.example.com"
        ]
    );
    // Without its param, `parameterNotFoundAction: Deny` refuses.
    s.k(&[
        "delete",
        "configmap",
        "replica-limit-test.example.com",
        "-n",
        "default",
    ]);
    wait_denied(
        &s,
        "default",
        1,
        "ValidatingAdmissionPolicy 'replicalimit-policy.example.com' with binding 'replicalimit-binding-test.example.com' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction",
    );
    s.k(&[
        "delete",
        "validatingadmissionpolicybinding",
        "replicalimit-binding-test.example.com",
    ]);

    // `Warn` never refuses: the denial comes back as a Warning header.
    must_create(&s, WARN_POLICY);
    must_create(&s, WARN_BINDING);
    std::thread::sleep(Duration::from_secs(1));
    let out = deploy(&s, "prod", "unlabelled", 1, false);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("deployment.apps/unlabelled created"));
    assert!(
        stderr(&out).contains("Warning: Validation failed for ValidatingAdmissionPolicy 'labels-policy.example.com' with binding 'labels-binding.example.com': every deployment needs a team label"),
        "{}",
        stderr(&out)
    );

    // Policies are never applied to admission configuration itself.
    let out = s.kubectl(&["delete", "validatingadmissionpolicy", "--all"]);
    assert!(out.status.success(), "{}", stderr(&out));
}
