//! The fixed documents the patch and apply targets work on: a Pod and a Deployment
//! with the lists whose merge keys matter (containers by name, ports by containerPort,
//! env by name, volumes by name, tolerations replaced, finalizers as a set).
#![allow(dead_code)] // each target uses part of it

use serde_json::{Value, json};

pub fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web", "tier": "frontend"},
            "annotations": {"note": "seed"},
            "finalizers": ["example.com/keep"]
        },
        "spec": {
            "containers": [
                {
                    "name": "nginx",
                    "image": "nginx:1.27",
                    "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}],
                    "env": [{"name": "MODE", "value": "prod"}, {"name": "LEVEL", "value": "info"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]
                },
                {"name": "sidecar", "image": "busybox", "command": ["sleep", "3600"]}
            ],
            "initContainers": [{"name": "init", "image": "busybox", "args": ["true"]}],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "nodeSelector": {"disk": "ssd"}
        },
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    })
}

pub fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "name": "nginx",
                        "image": "nginx:1.27",
                        "ports": [{"containerPort": 80}],
                        "env": [{"name": "MODE", "value": "prod"}]
                    }],
                    "volumes": [{"name": "cfg", "configMap": {"name": "web-config"}}]
                }
            }
        }
    })
}

/// Value equality, except that two floats within a few ulps count as equal. The
/// workspace's serde_json is built without `float_roundtrip`, so its float parser may
/// round a long decimal one ulp off from the correctly rounded value; printing that and
/// parsing it again can land one ulp away. (Found by json_body: `{"a": 5555…5}` with 34
/// digits.) Everything else must survive the round trip exactly.

pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => {
                    x == y || ((x - y).abs() <= 4.0 * f64::EPSILON * x.abs().max(y.abs()))
                }
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kx, vx), (ky, vy))| kx == ky && same(vx, vy))
        }
        _ => a == b,
    }
}
