//! Server-side apply, client-side apply and strategic merge with real kubectl.

mod common;

use common::{Server, stderr, stdout};

const DEPLOY: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: ssa
spec:
  replicas: 2
  selector:
    matchLabels: {app: ssa}
  template:
    metadata:
      labels: {app: ssa}
    spec:
      containers:
      - name: c
        image: nginx:1.27
        ports:
        - containerPort: 80
";

#[test]
fn server_side_apply_ownership_conflicts_and_force() {
    let s = Server::start("ssa");
    let out = s.kubectl_stdin(&["apply", "--server-side", "-f", "-"], Some(DEPLOY));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("deployment.apps/ssa serverside-applied"),
        "{}",
        stdout(&out)
    );
    let mf = s.k(&[
        "get",
        "deploy",
        "ssa",
        "-o",
        "jsonpath={.metadata.managedFields[0].manager} {.metadata.managedFields[0].operation}",
    ]);
    assert_eq!(mf, "kubectl Apply");
    let fields = s.k(&[
        "get",
        "deploy",
        "ssa",
        "-o",
        "jsonpath={.metadata.managedFields[0].fieldsV1}",
    ]);
    assert!(
        fields.contains(r#""f:replicas":{}"#) && fields.contains(r#""k:{\"name\":\"c\"}""#),
        "{fields}"
    );

    // Another manager setting a different value conflicts, with upstream's message.
    let other =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ssa\nspec:\n  replicas: 5\n";
    let out = s.kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager=autoscaler",
            "-f",
            "-",
        ],
        Some(other),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out)
            .contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        s.k(&["get", "deploy", "ssa", "-o", "jsonpath={.spec.replicas}"]),
        "2"
    );

    // --force-conflicts takes ownership.
    let out = s.kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager=autoscaler",
            "--force-conflicts",
            "-f",
            "-",
        ],
        Some(other),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        s.k(&["get", "deploy", "ssa", "-o", "jsonpath={.spec.replicas}"]),
        "5"
    );

    // The same value from a second manager is co-owned, not a conflict.
    let out = s.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=third", "-f", "-"],
        Some(other),
    );
    assert!(out.status.success(), "{}", stderr(&out));

    // A field the first applier stops declaring goes away when nobody else owns it.
    let without_ports = DEPLOY
        .replace("        ports:\n        - containerPort: 80\n", "")
        .replace("  replicas: 2\n", "");
    let out = s.kubectl_stdin(&["apply", "--server-side", "-f", "-"], Some(&without_ports));
    assert!(out.status.success(), "{}", stderr(&out));
    let ports = s.k(&[
        "get",
        "deploy",
        "ssa",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].ports}",
    ]);
    assert_eq!(ports, "", "ports should be removed");
    assert_eq!(
        s.k(&["get", "deploy", "ssa", "-o", "jsonpath={.spec.replicas}"]),
        "5",
        "replicas is still owned by others"
    );

    // kubectl diff (dry-run apply) shows the change without making it.
    let changed = without_ports.replace("nginx:1.27", "nginx:1.28");
    let out = s.kubectl_stdin(&["diff", "--server-side", "-f", "-"], Some(&changed));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("+      - image: nginx:1.28"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        s.k(&[
            "get",
            "deploy",
            "ssa",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}"
        ]),
        "nginx:1.27"
    );
}

#[test]
fn client_side_apply_then_server_side_migrates_ownership() {
    let s = Server::start("csa");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(DEPLOY));
    assert!(out.status.success(), "{}", stderr(&out));
    let mgr = s.k(&[
        "get",
        "deploy",
        "ssa",
        "-o",
        "jsonpath={.metadata.managedFields[*].manager}",
    ]);
    assert_eq!(mgr, "kubectl-client-side-apply");
    // Removing a field from the file removes it from the object (last-applied annotation).
    let without_ports = DEPLOY.replace("        ports:\n        - containerPort: 80\n", "");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&without_ports));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        s.k(&[
            "get",
            "deploy",
            "ssa",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].ports}"
        ]),
        ""
    );
    // Server-side apply after client-side apply takes over the fields without conflicts.
    let out = s.kubectl_stdin(
        &["apply", "--server-side", "-f", "-"],
        Some(&without_ports.replace("replicas: 2", "replicas: 3")),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        s.k(&["get", "deploy", "ssa", "-o", "jsonpath={.spec.replicas}"]),
        "3"
    );
    let mgr = s.k(&[
        "get",
        "deploy",
        "ssa",
        "-o",
        "jsonpath={.metadata.managedFields[*].manager}",
    ]);
    assert!(mgr.split(' ').any(|m| m == "kubectl"), "{mgr}");
}
