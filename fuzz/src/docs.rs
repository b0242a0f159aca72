//! The fixed documents the patch and apply targets work on: a Pod and a Deployment
//! with the lists whose merge keys matter (containers by name, ports by containerPort,
//! env by name, volumes by name, tolerations replaced, finalizers as a set).

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
