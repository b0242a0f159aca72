//! CustomResourceDefinitions as the ecosystem uses them, with real helm and kubectl:
//! a chart shipping its CRD in `crds/` and custom objects in `templates/`; a large
//! operator-style CRD and its objects through server-side apply (conflicts, force,
//! list-map ownership); a multi-version CRD with `conversion: None` and a deprecated
//! version; `selectableFields` in field selectors.
//!
//! helm and kubectl are required (scripts/install-deps installs them): a missing
//! tool fails these tests rather than skipping them.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::{Server, stderr, stdout, wait_until};
use serde_json::{Value, json};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/crd")
        .join(name)
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn wait_established(s: &Server, crd: &str) {
    s.k(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=30s",
        &format!("crd/{crd}"),
    ]);
}

/// Runs helm against `s` with its cache, config and data under the server's data
/// dir (removed with the server), so nothing outside the test is read or left.
fn helm(s: &Server, args: &[&str]) -> Output {
    let home = s.data_dir.join("helm");
    Command::new("helm")
        .args(args)
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env_remove("KUBECONFIG")
        .output()
        .expect("helm is required (scripts/install-deps installs it)")
}

fn helm_ok(s: &Server, args: &[&str]) -> String {
    let out = helm(s, args);
    assert!(
        out.status.success(),
        "helm {args:?} failed: {}\n{}",
        stderr(&out),
        stdout(&out)
    );
    stdout(&out)
}

/// `helm list -o json` as (name, status, revision) triples.
fn releases(s: &Server) -> Vec<(String, String, String)> {
    let list = json_of(&helm_ok(
        s,
        &["list", "--namespace", "default", "-o", "json"],
    ));
    list.as_array()
        .expect("helm list array")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or("").to_string(),
                r["status"].as_str().unwrap_or("").to_string(),
                r["revision"].to_string().trim_matches('"').to_string(),
            )
        })
        .collect()
}

/// The Gizmos in `default` as "name size color" lines, sorted.
fn gizmos(s: &Server) -> Vec<String> {
    let out = s.k(&[
        "get",
        "gizmos",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.size} {.spec.color}{\"\\n\"}{end}",
    ]);
    let mut v: Vec<String> = out.lines().map(String::from).collect();
    v.sort();
    v
}

#[test]
fn helm_chart_with_crds_and_custom_objects() {
    let s = Server::start("crd-helm");
    let chart = fixture("chart");
    let chart = chart.to_str().unwrap();

    // Install: helm creates the CRD from crds/, waits for it, then the templates' Gizmos.
    helm_ok(
        &s,
        &[
            "install",
            "gz",
            chart,
            "--namespace",
            "default",
            "--wait",
            "--timeout",
            "60s",
        ],
    );
    assert_eq!(
        releases(&s),
        [("gz".to_string(), "deployed".to_string(), "1".to_string())]
    );
    wait_established(&s, "gizmos.charts.example.com");
    assert_eq!(gizmos(&s), ["gz-alpha 3 blue", "gz-beta 5 red"]);
    // helm marks what it owns; `helm uninstall` and upgrades go by these.
    let meta = s.k(&[
        "get",
        "gizmo",
        "gz-alpha",
        "-o",
        "jsonpath={.metadata.labels.app\\.kubernetes\\.io/managed-by} {.metadata.annotations.meta\\.helm\\.sh/release-name}",
    ]);
    assert_eq!(meta, "Helm gz");
    // Printer columns of the chart's CRD.
    let table = s.k(&["get", "gz"]);
    assert_eq!(
        table
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["NAME", "SIZE", "COLOR"],
        "{table}"
    );

    // Upgrade: one Gizmo changes, the other leaves the release and is deleted.
    helm_ok(
        &s,
        &[
            "upgrade",
            "gz",
            chart,
            "--namespace",
            "default",
            "--set-json",
            r#"gizmos=[{"name":"alpha","size":4,"color":"green"}]"#,
        ],
    );
    assert_eq!(
        releases(&s),
        [("gz".to_string(), "deployed".to_string(), "2".to_string())]
    );
    wait_until(Duration::from_secs(20), "gz-beta deleted", || {
        gizmos(&s) == ["gz-alpha 4 green"]
    });

    // A value the CRD's schema refuses fails the upgrade with the server's message.
    let out = helm(
        &s,
        &[
            "upgrade",
            "gz",
            chart,
            "--namespace",
            "default",
            "--set-json",
            r#"gizmos=[{"name":"alpha","size":4,"color":"purple"}]"#,
        ],
    );
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(
            r#"spec.color: Unsupported value: "purple": supported values: "blue", "red", "green""#
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(gizmos(&s), ["gz-alpha 4 green"]);

    // Uninstall removes the custom objects and the release; the CRD stays, as
    // helm never deletes what crds/ installed.
    helm_ok(&s, &["uninstall", "gz", "--namespace", "default", "--wait"]);
    assert_eq!(releases(&s), []);
    wait_until(Duration::from_secs(20), "Gizmos deleted", || {
        gizmos(&s).is_empty()
    });
    assert_eq!(
        s.k(&[
            "get",
            "crd",
            "gizmos.charts.example.com",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Established\")].status}",
        ]),
        "True"
    );
    // The release's history Secrets are gone too.
    let secrets = s.k(&["get", "secrets", "-l", "owner=helm", "-o", "name"]);
    assert_eq!(secrets.trim(), "", "{secrets}");
}

const DB_CLUSTER: &str = r#"apiVersion: db.example.com/v1
kind: DatabaseCluster
metadata:
  name: main
spec:
  replicas: 3
  version: "16"
  maxUnavailable: 1
  config:
    shared_buffers: 128MB
    logging: {level: info, destinations: [stderr, {syslog: {facility: local0}}]}
  components:
    primary:
      spec:
        containers:
        - name: postgres
          image: postgres:16
          ports:
          - {name: pg, containerPort: 5432}
          resources:
            limits: {cpu: 2, memory: 4Gi}
          livenessProbe:
            tcpSocket: {port: pg}
            periodSeconds: 10
          readinessProbe:
            httpGet: {port: 8008, path: /readiness}
"#;

#[test]
fn large_crd_with_server_side_apply() {
    let s = Server::start("crd-ssa");
    let crd = fixture("large-crd.yaml");
    let size = std::fs::metadata(&crd).expect("fixture").len();
    assert!(size > 300_000, "the fixture is meant to be large: {size}");
    // Client-side apply cannot take it: its last-applied annotation would exceed
    // the 256 KiB annotation limit, which is why such CRDs are applied server-side.
    let out = s.kubectl(&["apply", "-f", crd.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(
            r#"The CustomResourceDefinition "databaseclusters.db.example.com" is invalid: metadata.annotations: Too long: must have at most 262144 bytes"#
        ),
        "{}",
        stderr(&out)
    );
    let out = s.k(&["apply", "--server-side", "-f", crd.to_str().unwrap()]);
    assert_eq!(
        out.trim(),
        "customresourcedefinition.apiextensions.k8s.io/databaseclusters.db.example.com serverside-applied"
    );
    wait_established(&s, "databaseclusters.db.example.com");
    assert_eq!(
        s.k(&[
            "get",
            "crd",
            "databaseclusters.db.example.com",
            "-o",
            "jsonpath={.metadata.managedFields[0].manager} {.metadata.managedFields[0].operation}",
        ]),
        "kubectl Apply"
    );
    // Its schema is published, deep fields included. (The plural, not the short
    // name: kubectl's discovery cache predates the CRD, and it refreshes the cache
    // on a resource it does not know but expands short names from the stale one.)
    let explain = s.k(&[
        "explain",
        "databaseclusters.spec.components.primary.spec.containers.ports",
    ]);
    assert!(explain.contains("containerPort"), "{explain}");
    assert!(explain.contains("Protocol for port."), "{explain}");

    // A custom object of it, applied server-side.
    let out = s.kubectl_stdin(&["apply", "--server-side", "-f", "-"], Some(DB_CLUSTER));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        "databasecluster.db.example.com/main serverside-applied"
    );
    let obj = json_of(&s.k(&["get", "dbc", "main", "-o", "json"]));
    let c = &obj["spec"]["components"]["primary"]["spec"]["containers"][0];
    // int-or-string keeps each value's type; quantities too.
    assert_eq!(obj["spec"]["maxUnavailable"], json!(1));
    assert_eq!(c["livenessProbe"]["tcpSocket"]["port"], json!("pg"));
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], json!(8008));
    assert_eq!(c["resources"]["limits"], json!({"cpu": 2, "memory": "4Gi"}));
    // The schema's default fills the list-map key `protocol`.
    assert_eq!(c["ports"][0]["protocol"], json!("TCP"));
    // preserve-unknown-fields keeps what the schema does not describe.
    assert_eq!(
        obj["spec"]["config"]["logging"],
        json!({"level": "info", "destinations": ["stderr", {"syslog": {"facility": "local0"}}]})
    );

    // The CRD's CEL rules hold for server-side apply, transition rules included.
    let even = DB_CLUSTER
        .replace("name: main", "name: even")
        .replace("replicas: 3", "replicas: 4");
    let out = s.kubectl_stdin(&["apply", "--server-side", "-f", "-"], Some(&even));
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(
            r#"The DatabaseCluster "even" is invalid: spec: Invalid value: "object": replicas must be odd"#
        ),
        "{}",
        stderr(&out)
    );
    let downgrade = DB_CLUSTER.replace("version: \"16\"", "version: \"15\"");
    let out = s.kubectl_stdin(&["apply", "--server-side", "-f", "-"], Some(&downgrade));
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("version cannot be downgraded"),
        "{}",
        stderr(&out)
    );

    // Another manager setting an owned field to another value conflicts (409,
    // upstream's text and cause), and nothing changes.
    let scaler = "apiVersion: db.example.com/v1
kind: DatabaseCluster
metadata:
  name: main
spec:
  replicas: 5
  components:
    primary:
      spec:
        containers:
        - name: exporter
          image: exporter:1.0
";
    let (code, status) = s.request(
        "PATCH",
        "/apis/db.example.com/v1/namespaces/default/databaseclusters/main?fieldManager=scaler",
        "application/apply-patch+yaml",
        Some(scaler),
    );
    assert_eq!(code, 409, "{status}");
    assert_eq!(status["reason"], "Conflict", "{status}");
    assert_eq!(
        status["message"],
        r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#
    );
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"kubectl\"", "field": ".spec.replicas"}])
    );
    let out = s.kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager=scaler",
            "-f",
            "-",
        ],
        Some(scaler),
    );
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(
            r#"error: Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        s.k(&["get", "dbc", "main", "-o", "jsonpath={.spec.replicas}"]),
        "3"
    );

    // --force-conflicts takes the field; the containers list is a map keyed by
    // name, so the scaler's container joins kubectl's instead of replacing it.
    let out = s.kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager=scaler",
            "--force-conflicts",
            "-f",
            "-",
        ],
        Some(scaler),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let obj = json_of(&s.k(&["get", "dbc", "main", "-o", "json"]));
    assert_eq!(obj["spec"]["replicas"], 5);
    let names: Vec<&str> = obj["spec"]["components"]["primary"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["postgres", "exporter"]);
    let obj = json_of(&s.k(&["get", "dbc", "main", "-o", "json", "--show-managed-fields"]));
    let managers: Vec<(String, String)> = obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["manager"].as_str().unwrap().to_string(),
                m["fieldsV1"].to_string(),
            )
        })
        .collect();
    let fields = |who: &str| {
        managers
            .iter()
            .find(|(m, _)| m == who)
            .map(|(_, f)| f.clone())
            .unwrap_or_else(|| panic!("no {who} entry: {managers:?}"))
    };
    assert!(fields("scaler").contains(r#""f:replicas":{}"#));
    assert!(!fields("kubectl").contains(r#""f:replicas""#));
    assert!(fields("kubectl").contains(r#""k:{\"name\":\"postgres\"}""#));
    assert!(fields("scaler").contains(r#""k:{\"name\":\"exporter\"}""#));
}

const GADGET_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.multi.example.com
spec:
  group: multi.example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  conversion:
    strategy: None
  versions:
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    deprecationWarning: "multi.example.com/v1beta1 Gadget is deprecated; use multi.example.com/v1"
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
"#;

const DEPRECATION: &str =
    "Warning: multi.example.com/v1beta1 Gadget is deprecated; use multi.example.com/v1";

#[test]
fn multi_version_crd_without_conversion() {
    let s = Server::start("crd-versions");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(GADGET_CRD));
    assert!(out.status.success(), "{}", stderr(&out));
    wait_established(&s, "gadgets.multi.example.com");

    // Created as the deprecated v1beta1: kubectl prints the CRD's warning.
    let old = "apiVersion: multi.example.com/v1beta1\nkind: Gadget\nmetadata:\n  name: g1\nspec:\n  size: 2\n  color: blue\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(old));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains(DEPRECATION), "{}", stderr(&out));

    // It reads back as v1 (the preferred and storage version): only apiVersion changes.
    let out = s.kubectl(&["get", "gadgets", "g1", "-o", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("deprecated"), "{}", stderr(&out));
    let v1 = json_of(&stdout(&out));
    assert_eq!(v1["apiVersion"], "multi.example.com/v1");
    assert_eq!(v1["spec"], json!({"size": 2, "color": "blue"}));
    let out = s.kubectl(&[
        "get",
        "gadgets.v1beta1.multi.example.com",
        "g1",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains(DEPRECATION), "{}", stderr(&out));
    let beta = json_of(&stdout(&out));
    assert_eq!(beta["apiVersion"], "multi.example.com/v1beta1");
    assert_eq!(beta["spec"], v1["spec"]);
    assert_eq!(beta["metadata"]["uid"], v1["metadata"]["uid"]);
    assert_eq!(
        beta["metadata"]["resourceVersion"],
        v1["metadata"]["resourceVersion"]
    );

    // Listed under both versions, each item in the version asked for.
    for version in ["v1beta1", "v1"] {
        let (code, list) = s.request(
            "GET",
            &format!("/apis/multi.example.com/{version}/namespaces/default/gadgets"),
            "",
            None,
        );
        assert_eq!(code, 200, "{list}");
        assert_eq!(list["apiVersion"], format!("multi.example.com/{version}"));
        assert_eq!(list["kind"], "GadgetList");
        let items = list["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{list}");
        assert_eq!(
            items[0]["apiVersion"],
            format!("multi.example.com/{version}")
        );
    }
    let table = s.kubectl(&["get", "gadgets.v1beta1.multi.example.com"]);
    assert!(table.status.success(), "{}", stderr(&table));
    assert!(
        stdout(&table)
            .lines()
            .nth(1)
            .unwrap_or("")
            .starts_with("g1 "),
        "{}",
        stdout(&table)
    );
    assert!(stderr(&table).contains(DEPRECATION), "{}", stderr(&table));
    // The storage version is what storedVersions records.
    assert_eq!(
        s.k(&[
            "get",
            "crd",
            "gadgets.multi.example.com",
            "-o",
            "jsonpath={.status.storedVersions}"
        ]),
        r#"["v1"]"#
    );

    // Field ownership across versions. Upstream's conflict text names an Apply
    // manager alone, and an Update manager with the version it wrote.
    let apply = |manager: &str, version: &str, spec: &str| {
        s.kubectl_stdin(
            &[
                "apply",
                "--server-side",
                &format!("--field-manager={manager}"),
                "-f",
                "-",
            ],
            Some(&format!(
                "apiVersion: multi.example.com/{version}\nkind: Gadget\nmetadata:\n  name: g2\nspec:\n{spec}\n"
            )),
        )
    };
    let out = apply("old-client", "v1beta1", "  size: 1");
    assert!(out.status.success(), "{}", stderr(&out));
    let out = apply("new-client", "v1", "  size: 7");
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(
            r#"error: Apply failed with 1 conflict: conflict with "old-client": .spec.size"#
        ),
        "{}",
        stderr(&out)
    );
    s.k(&[
        "patch",
        "gadgets.v1beta1.multi.example.com",
        "g2",
        "--type=merge",
        "-p",
        r#"{"spec":{"color":"red"}}"#,
    ]);
    let out = apply("new-client", "v1", "  size: 1\n  color: blue");
    assert!(!out.status.success(), "{}", stdout(&out));
    // The manager's key leaves the time out (upstream's BuildManagerIdentifier), so
    // the text names the version only.
    assert!(
        stderr(&out).contains(
            r#"error: Apply failed with 1 conflict: conflict with "kubectl-patch" using multi.example.com/v1beta1: .spec.color"#
        ),
        "{}",
        stderr(&out)
    );
}

const SHIRT_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: shirts.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: shirts, singular: shirt, kind: Shirt}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
              size: {type: string}
    selectableFields:
    - jsonPath: .spec.color
    - jsonPath: .spec.size
    additionalPrinterColumns:
    - {jsonPath: .spec.color, name: Color, type: string}
    - {jsonPath: .spec.size, name: Size, type: string}
"#;

#[test]
fn selectable_fields_filter_lists_and_watches() {
    let s = Server::start("crd-fields");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(SHIRT_CRD));
    assert!(out.status.success(), "{}", stderr(&out));
    wait_established(&s, "shirts.stable.example.com");
    let shirts: String = [("example1", "blue", "S"), ("example2", "blue", "M"), ("example3", "green", "M")]
        .iter()
        .map(|(n, c, z)| {
            format!("---\napiVersion: stable.example.com/v1\nkind: Shirt\nmetadata:\n  name: {n}\nspec:\n  color: {c}\n  size: {z}\n")
        })
        .collect();
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&shirts));
    assert!(out.status.success(), "{}", stderr(&out));

    let names = |selector: &str| {
        s.k(&["get", "shirts", "--field-selector", selector, "-o", "name"])
            .lines()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names("spec.color=blue"),
        [
            "shirt.stable.example.com/example1",
            "shirt.stable.example.com/example2"
        ]
    );
    assert_eq!(
        names("spec.color=blue,spec.size=M"),
        ["shirt.stable.example.com/example2"]
    );
    assert_eq!(
        names("spec.color!=blue"),
        ["shirt.stable.example.com/example3"]
    );
    assert_eq!(
        names("metadata.name=example1"),
        ["shirt.stable.example.com/example1"]
    );
    // An update moves an object in or out of a selection.
    s.k(&[
        "patch",
        "shirt",
        "example1",
        "--type=merge",
        "-p",
        r#"{"spec":{"color":"green"}}"#,
    ]);
    assert_eq!(
        names("spec.color=green"),
        [
            "shirt.stable.example.com/example1",
            "shirt.stable.example.com/example3"
        ]
    );

    // A field the CRD does not name: upstream's 400, and kubectl's wording around it.
    let (code, status) = s.request(
        "GET",
        "/apis/stable.example.com/v1/namespaces/default/shirts?fieldSelector=spec.material%3Dcotton",
        "",
        None,
    );
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["reason"], "BadRequest", "{status}");
    assert_eq!(
        status["message"], "field label not supported: spec.material",
        "{status}"
    );
    let out = s.kubectl(&["get", "shirts", "--field-selector", "spec.material=cotton"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(
            r#"Error from server (BadRequest): Unable to find "stable.example.com/v1, Resource=shirts" that match label selector "", field selector "spec.material=cotton": field label not supported: spec.material"#
        ),
        "{}",
        stderr(&out)
    );

    // A watch with a selectable field sends only the matching objects.
    let out = s.curl(&[
        "-s",
        "-m",
        "10",
        &format!(
            "{}/apis/stable.example.com/v1/namespaces/default/shirts?watch=1&timeoutSeconds=2&fieldSelector=spec.size%3DS",
            s.http
        ),
    ]);
    let events: Vec<Value> = stdout(&out).lines().map(json_of).collect();
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or(""),
                e["object"]["metadata"]["name"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(seen, [("ADDED", "example1")], "{}", stdout(&out));
}
