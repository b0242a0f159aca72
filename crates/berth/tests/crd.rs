//! CustomResourceDefinitions end to end with real kubectl: establishing, dynamic
//! discovery, printer columns, schema defaulting, pruning and validation, the
//! status and scale subresources, explain, restart, and deletion of a CRD with
//! its objects.

mod common;

use std::time::Duration;

use common::{Server, stderr, stdout, wait_until};

const CRONTAB_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.labelSelector
    additionalPrinterColumns:
    - name: Spec
      type: string
      description: The cron spec defining the interval a CronJob is run
      jsonPath: .spec.cronSpec
    - name: Replicas
      type: integer
      description: The number of jobs launched by the CronJob
      jsonPath: .spec.replicas
    - name: Image
      type: string
      priority: 1
      jsonPath: .spec.image
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        description: CronTab runs an image on a schedule.
        properties:
          spec:
            type: object
            description: What the CronTab runs and when.
            properties:
              cronSpec:
                type: string
                description: The schedule, in cron format.
                pattern: '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'
              image:
                type: string
                description: The container image to run.
              replicas:
                type: integer
                minimum: 1
                maximum: 10
                default: 1
              mode:
                type: string
                enum: [Fast, Slow]
          status:
            type: object
            properties:
              replicas:
                type: integer
              labelSelector:
                type: string
"#;

fn crontab(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: {name}\nspec:\n{spec}\n"
    )
}

#[test]
fn crd_lifecycle_with_kubectl() {
    let s = Server::start("crd");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(CRONTAB_CRD));
    assert!(out.status.success(), "{}", stderr(&out));
    s.k(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=20s",
        "crd/crontabs.stable.example.com",
    ]);
    let crd = s.k(&["get", "crd", "crontabs.stable.example.com", "-o", "json"]);
    let crd: serde_json::Value = serde_json::from_str(&crd).unwrap();
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "CronTab");
    assert_eq!(crd["status"]["acceptedNames"]["listKind"], "CronTabList");
    assert_eq!(crd["status"]["storedVersions"], serde_json::json!(["v1"]));
    let reasons: Vec<&str> = crd["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["NoConflicts", "InitialNamesAccepted"]);

    // Discovery: kubectl api-resources lists it with its short name.
    let res = s.k(&["api-resources", "--api-group=stable.example.com"]);
    assert!(
        res.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
            == ["crontabs", "ct", "stable.example.com/v1", "true", "CronTab"]),
        "{res}"
    );

    // Create: the schema's default fills replicas.
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&crontab(
            "my-new-cron-object",
            "  cronSpec: \"* * * * */5\"\n  image: my-awesome-cron-image",
        )),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        s.k(&[
            "get",
            "ct",
            "my-new-cron-object",
            "-o",
            "jsonpath={.spec.replicas} {.metadata.generation}"
        ]),
        "1 1"
    );
    // Printer columns, wide ones only with -o wide, and `all` includes the category.
    let table = s.k(&["get", "crontabs"]);
    let mut lines = table.lines();
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        ["NAME", "SPEC", "REPLICAS", "AGE"]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..7],
        ["my-new-cron-object", "*", "*", "*", "*", "*/5", "1"],
        "{table}"
    );
    let wide = s.k(&["get", "crontabs", "-o", "wide"]);
    assert!(wide.lines().next().unwrap().contains("IMAGE"), "{wide}");
    assert!(wide.contains("my-awesome-cron-image"), "{wide}");
    let all = s.k(&["get", "all"]);
    assert!(
        all.contains("crontab.stable.example.com/my-new-cron-object"),
        "{all}"
    );

    // Unknown fields: refused under kubectl's default strict validation, pruned otherwise.
    let bad = crontab("pruned", "  cronSpec: \"* * * * *\"\n  color: blue");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&bad));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unknown field \"spec.color\""),
        "{}",
        stderr(&out)
    );
    let out = s.kubectl_stdin(&["apply", "--validate=false", "-f", "-"], Some(&bad));
    assert!(out.status.success(), "{}", stderr(&out));
    let spec = s.k(&["get", "ct", "pruned", "-o", "jsonpath={.spec}"]);
    assert!(!spec.contains("color"), "{spec}");

    // Schema validation with upstream's messages.
    let cases = [
        (
            "  cronSpec: \"* * * * *\"\n  replicas: many",
            "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
        ),
        (
            "  cronSpec: \"* * * * *\"\n  replicas: 15",
            "spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10",
        ),
        (
            "  cronSpec: \"* * * * *\"\n  mode: Medium",
            "spec.mode: Unsupported value: \"Medium\": supported values: \"Fast\", \"Slow\"",
        ),
    ];
    for (spec, want) in cases {
        let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&crontab("bad", spec)));
        assert!(!out.status.success(), "{spec} was accepted");
        let err = stderr(&out);
        // kubectl words it from the Status details, as with upstream.
        assert!(err.contains("The CronTab \"bad\" is invalid"), "{err}");
        assert!(err.contains(want), "{spec}: {err}");
    }

    // Scale subresource.
    s.k(&["scale", "crontab/my-new-cron-object", "--replicas=3"]);
    assert_eq!(
        s.k(&[
            "get",
            "ct",
            "my-new-cron-object",
            "-o",
            "jsonpath={.spec.replicas} {.metadata.generation}"
        ]),
        "3 2"
    );
    let scale = s.k(&[
        "get",
        "--raw",
        "/apis/stable.example.com/v1/namespaces/default/crontabs/my-new-cron-object/scale",
    ]);
    let scale: serde_json::Value = serde_json::from_str(&scale).unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 3);

    // Status subresource: only /status changes status; it does not move generation.
    s.k(&[
        "patch",
        "ct",
        "my-new-cron-object",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":2,"labelSelector":"app=cron"}}"#,
    ]);
    s.k(&[
        "patch",
        "ct",
        "my-new-cron-object",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":9}}"#,
    ]);
    assert_eq!(
        s.k(&[
            "get",
            "ct",
            "my-new-cron-object",
            "-o",
            "jsonpath={.status.replicas} {.metadata.generation}"
        ]),
        "2 2"
    );
    let scale = s.k(&[
        "get",
        "--raw",
        "/apis/stable.example.com/v1/namespaces/default/crontabs/my-new-cron-object/scale",
    ]);
    assert!(scale.contains("\"selector\":\"app=cron\""), "{scale}");
    // Strategic merge patch does not apply to custom objects (415, as upstream).
    let out = s.kubectl(&[
        "patch",
        "ct",
        "my-new-cron-object",
        "--type=strategic",
        "-p",
        r#"{"spec":{"replicas":4}}"#,
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "application/strategic-merge-patch+json is not supported by stable.example.com/v1, Kind=CronTab"
        ),
        "{}",
        stderr(&out)
    );

    // kubectl explain reads the published schema.
    let explain = s.k(&["explain", "crontab.spec"]);
    assert!(
        explain.contains("What the CronTab runs and when."),
        "{explain}"
    );
    assert!(explain.contains("cronSpec"), "{explain}");
    assert!(
        explain.contains("The schedule, in cron format."),
        "{explain}"
    );

    // The CRD survives a restart and is served from the first request.
    let s = s.restart();
    assert_eq!(
        s.k(&[
            "get",
            "ct",
            "my-new-cron-object",
            "-o",
            "jsonpath={.spec.replicas}"
        ]),
        "3"
    );

    // Deleting the CRD deletes its objects, then the CRD; the resource is gone.
    let out = s.kubectl(&[
        "delete",
        "crd",
        "crontabs.stable.example.com",
        "--timeout=30s",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until(Duration::from_secs(20), "CRD gone", || {
        !s.kubectl(&["get", "crd", "crontabs.stable.example.com"])
            .status
            .success()
    });
    let out = s.kubectl(&["get", "crontabs"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    let (code, _) = s.request(
        "GET",
        "/apis/stable.example.com/v1/namespaces/default/crontabs",
        "",
        None,
    );
    assert_eq!(code, 404);
}

#[test]
fn bad_crds_get_upstream_errors() {
    let s = Server::start("crd-bad");
    let bad_name = CRONTAB_CRD.replace(
        "name: crontabs.stable.example.com",
        "name: crontab.stable.example.com",
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&bad_name));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("metadata.name: Invalid value: \"crontab.stable.example.com\": must be spec.names.plural+\".\"+spec.group"),
        "{}",
        stderr(&out)
    );
    let no_storage = CRONTAB_CRD.replace("storage: true", "storage: false");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&no_storage));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("must have exactly one version marked as storage version"),
        "{}",
        stderr(&out)
    );
    // Conversion webhooks are refused, not accepted and ignored.
    let webhook = CRONTAB_CRD.replace(
        "  scope: Namespaced\n",
        "  scope: Namespaced\n  conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: [v1]\n      clientConfig:\n        url: https://127.0.0.1:1/convert\n",
    );
    assert_ne!(webhook, CRONTAB_CRD);
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&webhook));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "spec.conversion.strategy: Unsupported value: \"Webhook\": supported values: \"None\""
        ),
        "{}",
        stderr(&out)
    );
    // CEL: a rule that does not compile is refused at CRD creation; a CRD's
    // rules then judge its objects with their messages.
    let ruled = CRONTAB_CRD
        .replace("crontabs.stable.example.com", "limits.stable.example.com")
        .replace("plural: crontabs", "plural: limits")
        .replace("singular: crontab", "singular: limit")
        .replace("kind: CronTab", "kind: Limit")
        .replace("shortNames: [ct]", "shortNames: [lim]")
        .replace(
            "            description: What the CronTab runs and when.\n",
            "            description: What the CronTab runs and when.\n            x-kubernetes-validations:\n            - rule: \"!has(self.image) || self.image.startsWith('registry.example/')\"\n              message: images come from registry.example\n            - rule: \"self.replicas >= oldSelf.replicas\"\n              message: replicas may only grow\n",
        );
    assert!(ruled.contains("x-kubernetes-validations"));
    let broken = ruled.replace("self.replicas >= oldSelf.replicas", "self.replicas >=");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&broken));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule: Invalid value: ")
            && stderr(&out).contains("compilation failed: ERROR: <input>:1:"),
        "{}",
        stderr(&out)
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&ruled));
    assert!(out.status.success(), "{}", stderr(&out));
    s.k(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=20s",
        "crd/limits.stable.example.com",
    ]);
    let limit = |spec: &str| {
        format!(
            "apiVersion: stable.example.com/v1\nkind: Limit\nmetadata:\n  name: l1\nspec:\n{spec}\n"
        )
    };
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&limit("  image: docker.io/x\n  replicas: 2")),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("The Limit \"l1\" is invalid: spec: Invalid value: \"object\": images come from registry.example"),
        "{}",
        stderr(&out)
    );
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&limit("  image: registry.example/x\n  replicas: 3")),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // A transition rule compares with the stored object.
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&limit("  image: registry.example/x\n  replicas: 2")),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("spec: Invalid value: \"object\": replicas may only grow"),
        "{}",
        stderr(&out)
    );
    // A conflicting kind in the same group is not accepted, and never served.
    s.kubectl_stdin(&["apply", "-f", "-"], Some(CRONTAB_CRD));
    let twin = CRONTAB_CRD
        .replace(
            "crontabs.stable.example.com",
            "crontabs2.stable.example.com",
        )
        .replace("plural: crontabs", "plural: crontabs2")
        .replace("singular: crontab", "singular: crontab2")
        .replace("shortNames: [ct]", "shortNames: [ct2]");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&twin));
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until(Duration::from_secs(10), "conflict reported", || {
        s.k(&[
            "get",
            "crd",
            "crontabs2.stable.example.com",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"NamesAccepted\")].reason}",
        ]) == "KindConflict"
    });
    let msg = s.k(&[
        "get",
        "crd",
        "crontabs2.stable.example.com",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"NamesAccepted\")].message}",
    ]);
    assert_eq!(msg, "\"CronTab\" is already in use");
    let (code, _) = s.request("GET", "/apis/stable.example.com/v1/crontabs2", "", None);
    assert_eq!(code, 404);
}
