//! autoscaling/v2beta2 HorizontalPodAutoscaler: removed upstream in 1.26, served by
//! Berth (stored as autoscaling/v2, last in discovery so kubectl prefers v2) so that
//! the seed article's `kubectl explain hpa.spec.behavior --api-version=autoscaling/v2beta2`
//! works.

mod common;

use common::Server;
use serde_json::Value;

const HPA_V2BETA2: &str = r#"{
  "apiVersion": "autoscaling/v2beta2",
  "kind": "HorizontalPodAutoscaler",
  "metadata": {"name": "web"},
  "spec": {
    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
    "minReplicas": 2,
    "maxReplicas": 10,
    "metrics": [
      {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}},
      {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}}
    ],
    "behavior": {
      "scaleDown": {"stabilizationWindowSeconds": 300, "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}]},
      "scaleUp": {"selectPolicy": "Max", "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]}
    }
  }
}"#;

const BASE: &str = "/apis/autoscaling";

fn hpa_path(version: &str, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("{BASE}/{version}/namespaces/default/horizontalpodautoscalers/{n}"),
        None => format!("{BASE}/{version}/namespaces/default/horizontalpodautoscalers"),
    }
}

#[test]
fn explain_behavior_at_v2beta2() {
    let s = Server::start("hpa-explain");
    // The seed article's exact command.
    let out = s.k(&[
        "explain",
        "hpa.spec.behavior",
        "--api-version=autoscaling/v2beta2",
    ]);
    assert!(out.contains("VERSION:    v2beta2"), "{out}");
    assert!(
        out.contains("behavior configures the scaling behavior of the target in both Up and Down"),
        "{out}"
    );
    assert!(out.contains("scaleUp\t<HPAScalingRules>"), "{out}");
    assert!(out.contains("scaleDown\t<HPAScalingRules>"), "{out}");
    // One level down: v2beta2's rules have no `tolerance` (a v2 field since 1.33).
    let out = s.k(&[
        "explain",
        "hpa.spec.behavior.scaleUp",
        "--api-version=autoscaling/v2beta2",
    ]);
    assert!(out.contains("selectPolicy\t<string>"), "{out}");
    assert!(!out.contains("tolerance"), "{out}");
    // v2 is still what a plain explain uses.
    let out = s.k(&["explain", "hpa.spec.behavior"]);
    assert!(out.contains("VERSION:    v2\n"), "{out}");
    let out = s.k(&["explain", "hpa.spec.behavior.scaleUp"]);
    assert!(out.contains("tolerance"), "{out}");
}

#[test]
fn discovery_prefers_v2() {
    let s = Server::start("hpa-discovery");
    let (code, g) = s.request("GET", BASE, "application/json", None);
    assert_eq!(code, 200, "{g}");
    assert_eq!(g["preferredVersion"]["version"], "v2", "{g}");
    let versions: Vec<&str> = g["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["v2", "v1", "v2beta2"]);
    let out = s.k(&["api-versions"]);
    assert!(out.contains("autoscaling/v2beta2\n"), "{out}");
    let (code, list) = s.request("GET", &format!("{BASE}/v2beta2"), "application/json", None);
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["resources"][0]["kind"], "HorizontalPodAutoscaler");
}

#[test]
fn create_as_v2beta2_read_as_every_version() {
    let s = Server::start("hpa-convert");
    let (code, created) = s.request(
        "POST",
        &hpa_path("v2beta2", None),
        "application/json",
        Some(HPA_V2BETA2),
    );
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["apiVersion"], "autoscaling/v2beta2");
    assert_eq!(
        created["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        300
    );

    let (code, v2) = s.request("GET", &hpa_path("v2", Some("web")), "", None);
    assert_eq!(code, 200, "{v2}");
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(v2["spec"]["metrics"].as_array().unwrap().len(), 2);
    assert_eq!(v2["spec"]["behavior"], created["spec"]["behavior"]);

    let (code, v1) = s.request("GET", &hpa_path("v1", Some("web")), "", None);
    assert_eq!(code, 200, "{v1}");
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 70);
    assert_eq!(v1["spec"]["maxReplicas"], 10);

    let (code, beta) = s.request("GET", &hpa_path("v2beta2", Some("web")), "", None);
    assert_eq!(code, 200, "{beta}");
    assert_eq!(beta["apiVersion"], "autoscaling/v2beta2");
    assert_eq!(beta["spec"], created["spec"]);

    let (code, list) = s.request("GET", &hpa_path("v2beta2", None), "", None);
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["kind"], "HorizontalPodAutoscalerList");
    assert_eq!(list["apiVersion"], "autoscaling/v2beta2");
    assert_eq!(list["items"][0]["apiVersion"], "autoscaling/v2beta2");

    // A watch at v2beta2 sends v2beta2 objects.
    let out = s.curl(&[
        "-s",
        &format!(
            "{}{}?watch=true&timeoutSeconds=1",
            s.http,
            hpa_path("v2beta2", None)
        ),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let ev: Value = serde_json::from_str(text.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(ev["type"], "ADDED", "{text}");
    assert_eq!(ev["object"]["apiVersion"], "autoscaling/v2beta2", "{text}");

    // Updates through v2 show in v2beta2.
    let (code, _) = s.request(
        "PATCH",
        &hpa_path("v2", Some("web")),
        "application/merge-patch+json",
        Some(r#"{"spec":{"maxReplicas":12}}"#),
    );
    assert_eq!(code, 200);
    let (_, beta) = s.request("GET", &hpa_path("v2beta2", Some("web")), "", None);
    assert_eq!(beta["spec"]["maxReplicas"], 12);
    // (The v2 update filled in v2's behavior defaults, e.g. `selectPolicy`.)
    for dir in ["scaleUp", "scaleDown"] {
        assert_eq!(
            beta["spec"]["behavior"][dir]["policies"],
            created["spec"]["behavior"][dir]["policies"]
        );
    }
    assert_eq!(
        beta["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        300
    );

    // kubectl: the default (preferred) version and the explicit one.
    let out = s.k(&["get", "hpa"]);
    assert!(out.contains("NAME"), "{out}");
    assert!(out.contains("web"), "{out}");
    assert!(out.contains("Deployment/web"), "{out}");
    let out = s.k(&["get", "hpa.v2beta2.autoscaling", "web"]);
    assert!(out.contains("Deployment/web"), "{out}");
    // kubectl 1.33's short-name expansion (client-go's shortcutExpander) drops the
    // version, so `hpa.v2beta2.autoscaling` is read at the preferred v2; the plural
    // keeps it.
    let out = s.k(&[
        "get",
        "horizontalpodautoscalers.v2beta2.autoscaling",
        "web",
        "-o",
        "json",
    ]);
    let obj: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(obj["apiVersion"], "autoscaling/v2beta2");
    assert_eq!(obj["spec"]["maxReplicas"], 12);
    let out = s.k(&["get", "hpa", "web", "-o", "json"]);
    let obj: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(obj["apiVersion"], "autoscaling/v2");
}

#[test]
fn v2beta2_has_no_tolerance() {
    let s = Server::start("hpa-tolerance");
    let body = HPA_V2BETA2.replace(
        r#""stabilizationWindowSeconds": 300,"#,
        r#""stabilizationWindowSeconds": 300, "tolerance": "0.05","#,
    );
    let (code, status) = s.request(
        "POST",
        &format!("{}?fieldValidation=Strict", hpa_path("v2beta2", None)),
        "application/json",
        Some(&body),
    );
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or_default()
            .contains(r#"unknown field "spec.behavior.scaleDown.tolerance""#),
        "{status}"
    );
    // Stored through v2 with a tolerance: a v2beta2 reader does not see it.
    let v2 = body
        .replace("autoscaling/v2beta2", "autoscaling/v2")
        .replace(r#""name": "web""#, r#""name": "tol""#);
    let (code, created) = s.request("POST", &hpa_path("v2", None), "application/json", Some(&v2));
    assert_eq!(code, 201, "{created}");
    assert!(
        created["spec"]["behavior"]["scaleDown"]["tolerance"].is_string(),
        "{created}"
    );
    let (_, beta) = s.request("GET", &hpa_path("v2beta2", Some("tol")), "", None);
    assert!(
        beta["spec"]["behavior"]["scaleDown"]
            .get("tolerance")
            .is_none(),
        "{beta}"
    );
}
