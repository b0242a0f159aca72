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
    // (The deployment controller also writes, as kube-controller-manager.)
    let op = s.k(&["get", "deploy", "ssa", "-o", r#"jsonpath={.metadata.managedFields[?(@.manager=="kubectl-client-side-apply")].operation}"#]);
    assert_eq!(op, "Update");
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

/// The seed's story: alice and an autoscaler both apply `.spec.replicas`.
#[test]
fn seed_story_alice_and_the_autoscaler() {
    let s = Server::start("seed-ssa");
    let alice = |replicas: u32, extra: &[&str]| {
        let mut args = vec!["apply", "--server-side", "--field-manager=alice"];
        args.extend_from_slice(extra);
        args.extend(["-f", "-"]);
        s.kubectl_stdin(
            &args,
            Some(&DEPLOY.replace("replicas: 2", &format!("replicas: {replicas}"))),
        )
    };
    assert!(alice(2, &[]).status.success());
    let scaler =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ssa\nspec:\n  replicas: 5\n";
    let out = s.kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager=autoscaler",
            "--force-conflicts",
            "-f",
            "-",
        ],
        Some(scaler),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // alice asks for 3: a conflict with the autoscaler's apply; kubectl exits 1.
    let out = alice(3, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(
            r#"error: Apply failed with 1 conflict: conflict with "autoscaler": .spec.replicas"#
        ),
        "{err}"
    );
    assert!(
        err.contains("--force-conflicts"),
        "kubectl's help text: {err}"
    );
    assert_eq!(
        s.k(&["get", "deploy", "ssa", "-o", "jsonpath={.spec.replicas}"]),
        "5"
    );
    // With --force-conflicts alice wins and owns replicas again.
    assert!(alice(3, &["--force-conflicts"]).status.success());
    assert_eq!(
        s.k(&["get", "deploy", "ssa", "-o", "jsonpath={.spec.replicas}"]),
        "3"
    );
    let owners = s.k(&["get", "deploy", "ssa", "-o", r#"jsonpath={range .metadata.managedFields[*]}{.manager}={.fieldsV1.f:spec.f:replicas}{";"}{end}"#]);
    assert!(owners.contains("alice={}"), "{owners}");
    assert!(!owners.contains("autoscaler={}"), "{owners}");
}

#[test]
fn edit_create_and_env_removal() {
    let s = Server::start("edit");
    let with_env = DEPLOY.replace("        ports:\n", "        env:\n        - name: A\n          value: a\n        - name: B\n          value: b\n        ports:\n");
    assert!(
        s.kubectl_stdin(&["apply", "-f", "-"], Some(&with_env))
            .status
            .success()
    );
    // Removing an env var from the file removes it live.
    let without_b = with_env.replace("        - name: B\n          value: b\n", "");
    assert!(
        s.kubectl_stdin(&["apply", "-f", "-"], Some(&without_b))
            .status
            .success()
    );
    assert_eq!(
        s.k(&[
            "get",
            "deploy",
            "ssa",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].env[*].name}"
        ]),
        "A"
    );
    // kubectl edit with a scripted editor.
    let out = std::process::Command::new(common::kubectl_path())
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .args(["edit", "deploy", "ssa"])
        .env("EDITOR", "sed -i s/nginx:1.27/nginx:1.29/")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("deployment.apps/ssa edited"),
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
        "nginx:1.29"
    );
    // kubectl create deployment sends protobuf.
    let out = s.k(&["create", "deployment", "web", "--image=busybox"]);
    assert!(out.contains("deployment.apps/web created"), "{out}");
}

#[test]
fn patch_and_apply_bad_input_leaves_the_object_unchanged() {
    let s = Server::start("patch-bad");
    assert!(
        s.kubectl_stdin(&["apply", "--server-side", "-f", "-"], Some(DEPLOY))
            .status
            .success()
    );
    let path = "/apis/apps/v1/namespaces/default/deployments/ssa";
    let (_, before) = s.request("GET", path, "", None);
    let cases: &[(&str, &str, u16, &str)] = &[
        (
            "application/apply-patch+yaml",
            "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"ssa\"}}",
            422,
            "fieldManager: Required value",
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"replace","path":"/metadata/managedFields","value":[{"manager":"x","operation":"Update","apiVersion":"apps/v1","fieldsType":"FieldsV1","fieldsV1":{"q:nonsense":{}}}]}]"#,
            400,
            "",
        ),
        (
            "application/strategic-merge-patch+json",
            r#"{"spec":{"template":{"spec":{"containers":[{"$patch":"frobnicate","name":"c"}]}}}}"#,
            400,
            "frobnicate",
        ),
        (
            "application/strategic-merge-patch+json",
            r#"{"spec":{"template":{"spec":{"containers":[{"image":"x"}]}}}}"#,
            400,
            "does not contain declared merge key: name",
        ),
    ];
    for (ct, body, code, msg) in cases {
        let (got, v) = s.request("PATCH", path, ct, Some(body));
        assert_eq!(got, *code, "{ct} {body}: {v}");
        assert!(
            v["message"].as_str().unwrap_or("").contains(msg),
            "{ct}: {v}"
        );
    }
    // The deployment controller keeps writing status; what the patches aimed at must not change.
    let (_, after) = s.request("GET", path, "", None);
    assert_eq!(
        before["spec"], after["spec"],
        "a refused patch must not change the object"
    );
    let applied = |o: &serde_json::Value| {
        o["metadata"]["managedFields"]
            .as_array()
            .and_then(|a| a.iter().find(|e| e["manager"] == "kubectl").cloned())
    };
    assert!(applied(&before).is_some());
    assert_eq!(applied(&before), applied(&after));
}

#[test]
fn helm_install_upgrade_rollback_uninstall() {
    let s = Server::start("helm");
    let chart = s.data_dir.join("chart");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: demo\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(chart.join("values.yaml"), "image: nginx:1.27\n").unwrap();
    std::fs::write(
        chart.join("templates/all.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cfg\ndata:\n  image: {{ .Values.image | quote }}\n---\n\
apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}-svc\nspec:\n  selector: {app: demo}\n  ports:\n  - port: 80\n---\n\
apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: demo}\n  template:\n    metadata:\n      labels: {app: demo}\n    spec:\n      containers:\n      - name: web\n        image: {{ .Values.image }}\n",
    )
    .unwrap();
    let helm = std::env::var("BERTH_HELM").unwrap_or_else(|_| "helm".into());
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&helm)
            .arg("--kubeconfig")
            .arg(&s.kubeconfig)
            .args(args)
            .env("HELM_CACHE_HOME", s.data_dir.join("helm-cache"))
            .env("HELM_CONFIG_HOME", s.data_dir.join("helm-config"))
            .env("HELM_DATA_HOME", s.data_dir.join("helm-data"))
            .output()
            .unwrap_or_else(|e| panic!("run {helm} (scripts/install-deps installs it): {e}"));
        assert!(out.status.success(), "helm {args:?}: {}", stderr(&out));
        stdout(&out)
    };
    let image = || {
        s.k(&[
            "get",
            "deploy",
            "demo-web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ])
    };
    assert!(run(&["install", "demo", chart.to_str().unwrap()]).contains("STATUS: deployed"));
    assert_eq!(image(), "nginx:1.27");
    run(&[
        "upgrade",
        "demo",
        chart.to_str().unwrap(),
        "--set",
        "image=nginx:1.28",
    ]);
    assert_eq!(image(), "nginx:1.28");
    assert_eq!(
        s.k(&["get", "cm", "demo-cfg", "-o", "jsonpath={.data.image}"]),
        "nginx:1.28"
    );
    run(&["rollback", "demo", "1"]);
    assert_eq!(image(), "nginx:1.27");
    let history = run(&["history", "demo"]);
    assert!(history.contains("Rollback to 1"), "{history}");
    run(&["uninstall", "demo"]);
    // What the cluster itself keeps in every namespace is all that is left: the
    // API server's `kubernetes` Service and the published `kube-root-ca.crt`.
    let left = s.kubectl(&["get", "deploy,svc,cm,secret", "-o", "name"]);
    assert_eq!(
        stdout(&left).trim(),
        "service/kubernetes\nconfigmap/kube-root-ca.crt",
        "uninstall left objects behind"
    );
}
