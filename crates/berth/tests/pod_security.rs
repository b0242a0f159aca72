//! Pod Security Admission end to end with real kubectl against `berth server`
//! (no node: admission is all this needs): a restricted namespace refuses a
//! `kubectl run`-style pod with upstream's message and takes a hardened one;
//! `warn` prints kubectl's `Warning:` lines; labelling a namespace
//! `enforce=restricted` warns about the pods already there; a Deployment whose
//! template violates the enforce level is created, with a warning; bad labels
//! are refused; `audit` puts upstream's annotations on the request's audit
//! event; and `--admission-control-config-file` sets cluster defaults and
//! exemptions, a bad one stopping the server at start.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Server, stderr, temp_dir, wait_until};

const BAD_POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: bad}
spec:
  containers:
  - {name: c, image: busybox}
";

const GOOD_POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: good}
spec:
  securityContext:
    runAsNonRoot: true
    runAsUser: 1000
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: c
    image: busybox
    securityContext:
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL]}
";

const HOST_POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: host}
spec:
  hostNetwork: true
  containers:
  - {name: c, image: busybox}
";

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: c, image: busybox}
";

/// What restricted:latest says about [`BAD_POD`] (and any pod as bare).
const BARE_RESTRICTED: &str = r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#;

fn apply(s: &Server, ns: &str, yaml: &str) -> std::process::Output {
    s.kubectl_stdin(&["apply", "-n", ns, "-f", "-"], Some(yaml))
}

#[test]
fn restricted_namespaces_enforce_warn_and_report_existing_pods() {
    let s = Server::start("podsecurity");

    // enforce: the bare pod is refused with upstream's message, the hardened one taken.
    s.k(&["create", "namespace", "secure"]);
    let out = s.kubectl(&[
        "label",
        "ns",
        "secure",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = apply(&s, "secure", BAD_POD);
    assert!(!out.status.success(), "the bad pod was created");
    assert!(
        stderr(&out).contains(&format!(
            "pods \"bad\" is forbidden: violates PodSecurity \"restricted:latest\": {BARE_RESTRICTED}"
        )),
        "{}",
        stderr(&out)
    );
    let out = apply(&s, "secure", GOOD_POD);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("Warning"), "{}", stderr(&out));

    // A Deployment whose template violates the enforce level is created, with
    // a warning (its pods are what enforce refuses).
    let out = apply(&s, "secure", DEPLOYMENT);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "Warning: would violate PodSecurity \"restricted:latest\": {BARE_RESTRICTED}"
        )),
        "{}",
        stderr(&out)
    );
    s.k(&["get", "deployment", "web", "-n", "secure"]);

    // warn: the pod is created and kubectl prints the warning.
    s.k(&["create", "namespace", "loose"]);
    s.k(&[
        "label",
        "ns",
        "loose",
        "pod-security.kubernetes.io/warn=baseline",
    ]);
    let out = apply(&s, "loose", HOST_POD);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            r#"Warning: would violate PodSecurity "baseline:latest": host namespaces (hostNetwork=true)"#
        ),
        "{}",
        stderr(&out)
    );
    let out = apply(&s, "loose", BAD_POD);
    assert!(out.status.success(), "{}", stderr(&out));

    // Tightening enforce warns about the pods already there, grouped by reasons.
    let out = s.kubectl(&[
        "label",
        "ns",
        "loose",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    for want in [
        r#"Warning: existing pods in namespace "loose" violate the new PodSecurity enforce level "restricted:latest""#,
        "Warning: bad: allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile",
        "Warning: host: host namespaces, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile",
    ] {
        assert!(err.contains(want), "missing {want:?} in\n{err}");
    }
    // The pods stay; enforce applies to what comes next.
    s.k(&["get", "pod", "bad", "host", "-n", "loose"]);

    // A bad label value is refused with upstream's field error.
    let out = s.kubectl(&[
        "label",
        "ns",
        "loose",
        "pod-security.kubernetes.io/audit=loud",
    ]);
    assert!(!out.status.success(), "the bad label was set");
    assert!(
        stderr(&out).contains(
            r#"Namespace "loose" is invalid: metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: "loud": must be one of privileged, baseline, restricted"#
        ),
        "{}",
        stderr(&out)
    );
}

const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
  resources: [{group: \"\", resources: [pods]}]
- level: None
";

#[test]
fn audit_mode_annotates_the_audit_event() {
    let dir = temp_dir("podsecurity-audit");
    std::fs::write(dir.join("policy.yaml"), AUDIT_POLICY).unwrap();
    let log = dir.join("audit.log");
    let s = Server::start_with(
        dir.join("data"),
        &[
            "--audit-policy-file",
            dir.join("policy.yaml").to_str().unwrap(),
            "--audit-log-path",
            log.to_str().unwrap(),
        ],
    );
    s.k(&["create", "namespace", "audited"]);
    s.k(&[
        "label",
        "ns",
        "audited",
        "pod-security.kubernetes.io/audit=restricted",
    ]);
    // Audit alone neither refuses nor warns.
    let out = apply(&s, "audited", BAD_POD);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("Warning"), "{}", stderr(&out));
    let mut event = serde_json::Value::Null;
    wait_until(Duration::from_secs(10), "the pod's audit event", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        match text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| {
                e["verb"] == "create"
                    && e["stage"] == "ResponseComplete"
                    && e["objectRef"]["resource"] == "pods"
                    && e["objectRef"]["name"] == "bad"
            }) {
            Some(e) => {
                event = e;
                true
            }
            None => false,
        }
    });
    let annotations = &event["annotations"];
    assert_eq!(
        annotations["pod-security.kubernetes.io/audit-violations"],
        format!("would violate PodSecurity \"restricted:latest\": {BARE_RESTRICTED}"),
        "{event}"
    );
    assert_eq!(
        annotations["pod-security.kubernetes.io/enforce-policy"], "privileged:latest",
        "{event}"
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

const CONFIG: &str = "apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  path: podsecurity.yaml
";

const POD_SECURITY_CONFIG: &str = "apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
defaults:
  enforce: baseline
exemptions:
  namespaces: [trusted]
";

#[test]
fn admission_configuration_sets_defaults_and_exemptions() {
    let dir = temp_dir("podsecurity-config");
    std::fs::write(dir.join("admission.yaml"), CONFIG).unwrap();
    std::fs::write(dir.join("podsecurity.yaml"), POD_SECURITY_CONFIG).unwrap();
    let config = dir.join("admission.yaml");
    let s = Server::start_with(
        dir.join("data"),
        &["--admission-control-config-file", config.to_str().unwrap()],
    );
    // Unlabelled namespaces get the cluster default, baseline.
    s.k(&["create", "namespace", "plain"]);
    let out = apply(&s, "plain", HOST_POD);
    assert!(!out.status.success(), "the host pod was created");
    assert!(
        stderr(&out).contains(
            r#"pods "host" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)"#
        ),
        "{}",
        stderr(&out)
    );
    let out = apply(&s, "plain", BAD_POD);
    assert!(out.status.success(), "{}", stderr(&out));
    // The exempt namespace takes anything.
    s.k(&["create", "namespace", "trusted"]);
    let out = apply(&s, "trusted", HOST_POD);
    assert!(out.status.success(), "{}", stderr(&out));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_admission_configuration_stops_the_server() {
    let dir = temp_dir("podsecurity-badconfig");
    let config = dir.join("admission.yaml");
    std::fs::write(
        &config,
        "apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults: {enforce: strict}
",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_berth"))
        .args([
            "server",
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            "0",
        ])
        .args(["--disable-agent", "--disable-ingress", "--disable-dns"])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--admission-control-config-file")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start berth server");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = child.wait_with_output().expect("output");
    let _ = std::fs::remove_dir_all(&dir);
    let status = status.expect("berth server kept running with a bad admission configuration");
    assert!(!status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            r#"admission configuration {}: plugin "PodSecurity": invalid PodSecurityConfiguration: defaults.enforce: Invalid value: "strict": must be one of privileged, baseline, restricted"#,
            config.display()
        )),
        "{err}"
    );
}
