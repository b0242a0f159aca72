//! Table tests: an input object and the object upstream would store.

use super::*;
use serde_json::json;

/// The registry entry of a built-in kind (its first served version).
fn rt(group: &str, kind: &str) -> &'static crate::registry::ResourceType {
    crate::registry::RESOURCES
        .iter()
        .find(|r| r.group == group && r.kind == kind)
        .unwrap_or_else(|| panic!("{group}/{kind} is not served"))
}

fn defaulted(group: &str, version: &str, kind: &str, mut obj: Value) -> Value {
    apply_defaults(group, version, kind, &mut obj);
    obj
}

/// The defaults every container gets, merged over `c`.
fn ctr(c: Value) -> Value {
    let mut base = json!({
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File"
    });
    if let (Some(b), Value::Object(c)) = (base.as_object_mut(), c) {
        for (k, v) in c {
            b.insert(k, v);
        }
    }
    base
}

/// The defaults every pod spec gets, merged over `s`.
fn pod_spec(s: Value) -> Value {
    let mut base = json!({
        "dnsPolicy": "ClusterFirst",
        "restartPolicy": "Always",
        "securityContext": {},
        "terminationGracePeriodSeconds": 30,
        "schedulerName": "default-scheduler"
    });
    if let (Some(b), Value::Object(s)) = (base.as_object_mut(), s) {
        for (k, v) in s {
            b.insert(k, v);
        }
    }
    base
}

#[test]
fn pod_table() {
    let cases: Vec<(&str, Value, Value)> = vec![
        (
            "minimal pod",
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
            json!({"metadata": {"name": "p"}, "spec": pod_spec(json!({
                "containers": [ctr(json!({"name": "c", "image": "nginx", "imagePullPolicy": "Always"}))],
                "enableServiceLinks": true
            }))}),
        ),
        (
            "tagged image, ports, env, probes, lifecycle",
            json!({"spec": {"containers": [{
                "name": "c", "image": "nginx:1.27",
                "ports": [{"containerPort": 80}],
                "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                "livenessProbe": {"httpGet": {"port": 80}},
                "readinessProbe": {"grpc": {"port": 9000}, "periodSeconds": 5},
                "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop"}}}
            }]}}),
            json!({"spec": pod_spec(json!({
                "containers": [ctr(json!({
                    "name": "c", "image": "nginx:1.27",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName", "apiVersion": "v1"}}}],
                    "livenessProbe": {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
                        "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                    "readinessProbe": {"grpc": {"port": 9000, "service": ""}, "periodSeconds": 5,
                        "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                    "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop", "scheme": "HTTP"}}}
                }))],
                "enableServiceLinks": true
            }))}),
        ),
        (
            "limits only: requests copied, quantities canonical and rounded to milli",
            json!({"spec": {"containers": [{"name": "c", "image": "busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "resources": {"limits": {"cpu": "0.5", "memory": "1024Mi", "ephemeral-storage": "100n"}}}]}}),
            json!({"spec": pod_spec(json!({
                "containers": [ctr(json!({"name": "c", "image": "busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                    "resources": {
                        "limits": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1m"},
                        "requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1m"}
                    }}))],
                "enableServiceLinks": true
            }))}),
        ),
        (
            "explicit requests kept",
            json!({"spec": {"containers": [{"name": "c", "image": "x:1", "resources": {"limits": {"cpu": 1}, "requests": {"cpu": "100m"}}}]}}),
            json!({"spec": pod_spec(json!({
                "containers": [ctr(json!({"name": "c", "image": "x:1", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "100m"}}}))],
                "enableServiceLinks": true
            }))}),
        ),
        (
            "volumes",
            json!({"spec": {"containers": [{"name": "c", "image": "x:1"}], "volumes": [
                {"name": "a"},
                {"name": "b", "configMap": {"name": "cm"}},
                {"name": "c", "secret": {"secretName": "s", "defaultMode": 256}},
                {"name": "d", "hostPath": {"path": "/data"}},
                {"name": "e", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                {"name": "f", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}, {"configMap": {"name": "x"}}]}},
                {"name": "g", "emptyDir": {"sizeLimit": "1000Mi"}},
                {"name": "h", "ephemeral": {"volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "1Gi"}}}}}}
            ]}}),
            json!({"spec": pod_spec(json!({
                "containers": [ctr(json!({"name": "c", "image": "x:1"}))],
                "enableServiceLinks": true,
                "volumes": [
                    {"name": "a", "emptyDir": {}},
                    {"name": "b", "configMap": {"name": "cm", "defaultMode": 420}},
                    {"name": "c", "secret": {"secretName": "s", "defaultMode": 256}},
                    {"name": "d", "hostPath": {"path": "/data", "type": ""}},
                    {"name": "e", "downwardAPI": {"defaultMode": 420, "items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels", "apiVersion": "v1"}}]}},
                    {"name": "f", "projected": {"defaultMode": 420, "sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}, {"configMap": {"name": "x"}}]}},
                    {"name": "g", "emptyDir": {"sizeLimit": "1000Mi"}},
                    {"name": "h", "ephemeral": {"volumeClaimTemplate": {"spec": {"volumeMode": "Filesystem", "resources": {"requests": {"storage": "1Gi"}}}}}}
                ]
            }))}),
        ),
        (
            "host network copies container ports to host ports",
            json!({"spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "x:1", "ports": [{"containerPort": 53, "protocol": "UDP"}]}]}}),
            json!({"spec": pod_spec(json!({
                "hostNetwork": true,
                "containers": [ctr(json!({"name": "c", "image": "x:1", "ports": [{"containerPort": 53, "protocol": "UDP", "hostPort": 53}]}))],
                "enableServiceLinks": true
            }))}),
        ),
        (
            "set values are kept",
            json!({"spec": {"restartPolicy": "Never", "dnsPolicy": "Default", "terminationGracePeriodSeconds": 0,
                "enableServiceLinks": false, "schedulerName": "mine", "securityContext": {"runAsUser": 1000},
                "tolerations": [{"key": "k", "operator": "Exists"}],
                "initContainers": [{"name": "i", "image": "x", "imagePullPolicy": "Never"}],
                "containers": [{"name": "c", "image": "x:latest", "terminationMessagePolicy": "FallbackToLogsOnError"}]}}),
            json!({"spec": {"restartPolicy": "Never", "dnsPolicy": "Default", "terminationGracePeriodSeconds": 0,
                "enableServiceLinks": false, "schedulerName": "mine", "securityContext": {"runAsUser": 1000},
                "tolerations": [{"key": "k", "operator": "Exists"}],
                "initContainers": [ctr(json!({"name": "i", "image": "x", "imagePullPolicy": "Never"}))],
                "containers": [ctr(json!({"name": "c", "image": "x:latest", "imagePullPolicy": "Always", "terminationMessagePolicy": "FallbackToLogsOnError"}))]}}),
        ),
        (
            "ephemeral containers are defaulted too",
            json!({"spec": {"containers": [{"name": "c", "image": "x:1"}], "ephemeralContainers": [{"name": "d", "image": "busybox"}]}}),
            json!({"spec": pod_spec(json!({
                "containers": [ctr(json!({"name": "c", "image": "x:1"}))],
                "ephemeralContainers": [ctr(json!({"name": "d", "image": "busybox", "imagePullPolicy": "Always"}))],
                "enableServiceLinks": true
            }))}),
        ),
    ];
    for (name, input, want) in cases {
        assert_eq!(defaulted("", "v1", "Pod", input), want, "{name}");
    }
}

fn template(spec: Value) -> Value {
    json!({"metadata": {"labels": {"app": "web"}}, "spec": spec})
}

#[test]
fn workload_table() {
    let raw_pod = json!({"containers": [{"name": "c", "image": "nginx:1.27", "resources": {"limits": {"cpu": "1"}}}]});
    // Templates get PodSpec defaults but not the Pod-only ones.
    let tmpl_pod = pod_spec(
        json!({"containers": [ctr(json!({"name": "c", "image": "nginx:1.27", "resources": {"limits": {"cpu": "1"}}}))]}),
    );
    let cases: Vec<(&str, &str, Value, Value)> = vec![
        (
            "apps",
            "Deployment",
            json!({"spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template(raw_pod.clone())}}),
            json!({"spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": template(tmpl_pod.clone()),
                "replicas": 1,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600
            }}),
        ),
        (
            "apps",
            "Deployment",
            json!({"spec": {"replicas": 0, "strategy": {"type": "Recreate"}, "revisionHistoryLimit": 2}}),
            json!({"spec": {"replicas": 0, "strategy": {"type": "Recreate"}, "revisionHistoryLimit": 2, "progressDeadlineSeconds": 600}}),
        ),
        (
            "apps",
            "ReplicaSet",
            json!({"spec": {"template": template(raw_pod.clone())}}),
            json!({"spec": {"template": template(tmpl_pod.clone()), "replicas": 1}}),
        ),
        (
            "apps",
            "StatefulSet",
            json!({"spec": {"serviceName": "db", "template": template(raw_pod.clone()),
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}),
            json!({"spec": {
                "serviceName": "db",
                "template": template(tmpl_pod.clone()),
                "podManagementPolicy": "OrderedReady",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                "replicas": 1,
                "revisionHistoryLimit": 10,
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"},
                    "status": {"phase": "Pending"}}]
            }}),
        ),
        (
            "apps",
            "StatefulSet",
            json!({"spec": {"updateStrategy": {"type": "OnDelete"}}}),
            json!({"spec": {
                "updateStrategy": {"type": "OnDelete"},
                "podManagementPolicy": "OrderedReady",
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                "replicas": 1,
                "revisionHistoryLimit": 10
            }}),
        ),
        (
            "apps",
            "DaemonSet",
            json!({"spec": {"template": template(raw_pod.clone())}}),
            json!({"spec": {
                "template": template(tmpl_pod.clone()),
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                "revisionHistoryLimit": 10
            }}),
        ),
        (
            "batch",
            "Job",
            json!({"spec": {"template": template(raw_pod.clone())}}),
            json!({"metadata": {"labels": {"app": "web"}}, "spec": {
                "template": template(tmpl_pod.clone()),
                "completions": 1, "parallelism": 1, "backoffLimit": 6,
                "completionMode": "NonIndexed", "suspend": false,
                "podReplacementPolicy": "TerminatingOrFailed", "manualSelector": false
            }}),
        ),
        (
            "batch",
            "Job",
            json!({"metadata": {"labels": {"own": "x"}}, "spec": {"completions": 5, "backoffLimitPerIndex": 1, "completionMode": "Indexed",
                "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}}),
            json!({"metadata": {"labels": {"own": "x"}}, "spec": {
                "completions": 5, "parallelism": 1, "backoffLimit": 2147483647, "backoffLimitPerIndex": 1,
                "completionMode": "Indexed", "suspend": false,
                "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
                "podReplacementPolicy": "Failed", "manualSelector": false
            }}),
        ),
        (
            "batch",
            "CronJob",
            json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template(raw_pod.clone())}}}}),
            json!({"spec": {
                "schedule": "* * * * *",
                "jobTemplate": {"spec": {"template": template(tmpl_pod.clone())}},
                "concurrencyPolicy": "Allow", "suspend": false,
                "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1
            }}),
        ),
        (
            "",
            "ReplicationController",
            json!({"spec": {"template": template(raw_pod.clone())}}),
            json!({"metadata": {"labels": {"app": "web"}}, "spec": {
                "template": template(tmpl_pod.clone()),
                "selector": {"app": "web"},
                "replicas": 1
            }}),
        ),
        (
            "",
            "PodTemplate",
            json!({"template": template(raw_pod.clone())}),
            json!({"template": template(tmpl_pod.clone())}),
        ),
    ];
    for (group, kind, input, want) in cases {
        assert_eq!(
            defaulted(group, "v1", kind, input.clone()),
            want,
            "{group}/{kind}: {input}"
        );
    }
}

#[test]
fn service_table() {
    let cases: Vec<(&str, Value, Value)> = vec![
        (
            "cluster ip",
            json!({"spec": {"selector": {"app": "web"}, "ports": [{"port": 80}, {"port": 443, "targetPort": "https"}]}}),
            json!({"spec": {
                "selector": {"app": "web"},
                "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}, {"port": 443, "targetPort": "https", "protocol": "TCP"}],
                "sessionAffinity": "None",
                "type": "ClusterIP",
                "internalTrafficPolicy": "Cluster"
            }}),
        ),
        (
            "node port",
            json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "targetPort": 0}]}}),
            json!({"spec": {
                "type": "NodePort",
                "ports": [{"port": 80, "targetPort": 80, "protocol": "TCP"}],
                "sessionAffinity": "None",
                "externalTrafficPolicy": "Cluster",
                "internalTrafficPolicy": "Cluster"
            }}),
        ),
        (
            "load balancer",
            json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "UDP"}]},
                "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "lb.example.com"}]}}}),
            json!({"spec": {
                "type": "LoadBalancer",
                "ports": [{"port": 80, "protocol": "UDP", "targetPort": 80}],
                "sessionAffinity": "None",
                "externalTrafficPolicy": "Cluster",
                "internalTrafficPolicy": "Cluster",
                "allocateLoadBalancerNodePorts": true
            }, "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4", "ipMode": "VIP"}, {"hostname": "lb.example.com"}]}}}),
        ),
        (
            "client ip affinity",
            json!({"spec": {"sessionAffinity": "ClientIP", "ports": [{"port": 80}]}}),
            json!({"spec": {
                "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
                "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
                "type": "ClusterIP",
                "internalTrafficPolicy": "Cluster"
            }}),
        ),
        (
            "external name",
            json!({"spec": {"type": "ExternalName", "externalName": "example.com", "sessionAffinityConfig": {"clientIP": {}}}}),
            json!({"spec": {"type": "ExternalName", "externalName": "example.com", "sessionAffinity": "None"}}),
        ),
        (
            "cluster ip with external ips",
            json!({"spec": {"externalIPs": ["1.2.3.4"], "ports": [{"port": 80}]}}),
            json!({"spec": {
                "externalIPs": ["1.2.3.4"],
                "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
                "sessionAffinity": "None",
                "type": "ClusterIP",
                "externalTrafficPolicy": "Cluster",
                "internalTrafficPolicy": "Cluster"
            }}),
        ),
    ];
    for (name, input, want) in cases {
        assert_eq!(defaulted("", "v1", "Service", input), want, "{name}");
    }
}

#[test]
fn other_kinds_table() {
    let cases: Vec<(&str, &str, &str, Value, Value)> = vec![
        (
            "",
            "v1",
            "Namespace",
            json!({"metadata": {"name": "team-a"}}),
            json!({"metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}}, "status": {"phase": "Active"}}),
        ),
        (
            "",
            "v1",
            "Namespace",
            json!({"metadata": {"generateName": "t-", "labels": {"x": "y"}}, "status": {"phase": "Terminating"}}),
            json!({"metadata": {"generateName": "t-", "labels": {"x": "y"}}, "status": {"phase": "Terminating"}}),
        ),
        (
            "",
            "v1",
            "Secret",
            json!({"data": {"a": "eA=="}, "stringData": {"b": "hello", "a": "hi"}}),
            json!({"type": "Opaque", "data": {"a": "aGk=", "b": "aGVsbG8="}}),
        ),
        (
            "",
            "v1",
            "Secret",
            json!({"type": "kubernetes.io/tls"}),
            json!({"type": "kubernetes.io/tls"}),
        ),
        (
            "",
            "v1",
            "PersistentVolumeClaim",
            json!({"spec": {"resources": {"requests": {"storage": "1.5Gi"}}}}),
            json!({"spec": {"resources": {"requests": {"storage": "1536Mi"}}, "volumeMode": "Filesystem"}, "status": {"phase": "Pending"}}),
        ),
        (
            "",
            "v1",
            "PersistentVolume",
            json!({"spec": {"capacity": {"storage": "10Gi"}, "hostPath": {"path": "/mnt"}}}),
            json!({"spec": {"capacity": {"storage": "10Gi"}, "hostPath": {"path": "/mnt", "type": ""},
                "persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem"}, "status": {"phase": "Pending"}}),
        ),
        (
            "",
            "v1",
            "Node",
            json!({"status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}),
            json!({"status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}, "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}),
        ),
        (
            "",
            "v1",
            "Endpoints",
            json!({"subsets": [{"ports": [{"port": 80}]}]}),
            json!({"subsets": [{"ports": [{"port": 80, "protocol": "TCP"}]}]}),
        ),
        (
            "",
            "v1",
            "LimitRange",
            json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}}]}}),
            json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"},
                "default": {"cpu": "2"}, "defaultRequest": {"cpu": "2", "memory": "64Mi"}}]}}),
        ),
        (
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
            json!({"spec": {"maxReplicas": 5}}),
            json!({"spec": {"maxReplicas": 5, "minReplicas": 1, "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}]}}),
        ),
        (
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
            json!({"spec": {"minReplicas": 2, "maxReplicas": 5, "metrics": [{"type": "Pods"}],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}),
            json!({"spec": {"minReplicas": 2, "maxReplicas": 5, "metrics": [{"type": "Pods"}], "behavior": {
                "scaleDown": {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}], "stabilizationWindowSeconds": 60},
                "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
                    {"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]}
            }}}),
        ),
        (
            "autoscaling",
            "v1",
            "HorizontalPodAutoscaler",
            json!({"spec": {"maxReplicas": 3}}),
            json!({"spec": {"maxReplicas": 3, "minReplicas": 1}}),
        ),
        (
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
            json!({"spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}}),
            json!({"spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53, "protocol": "TCP"}]}], "policyTypes": ["Ingress", "Egress"]}}),
        ),
        (
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
            json!({"spec": {"podSelector": {}}}),
            json!({"spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}),
        ),
        (
            "networking.k8s.io",
            "v1",
            "Ingress",
            json!({"spec": {"rules": [{"http": {"paths": [{"path": "/", "backend": {}}]}}]}}),
            json!({"spec": {"rules": [{"http": {"paths": [{"path": "/", "backend": {}}]}}]}}),
        ),
        (
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            json!({"value": 1000}),
            json!({"value": 1000, "preemptionPolicy": "PreemptLowerPriority"}),
        ),
        (
            "storage.k8s.io",
            "v1",
            "StorageClass",
            json!({"provisioner": "x"}),
            json!({"provisioner": "x", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}),
        ),
        (
            "storage.k8s.io",
            "v1",
            "CSIDriver",
            json!({"spec": {}}),
            json!({"spec": {"attachRequired": true, "podInfoOnMount": false, "storageCapacity": false,
                "fsGroupPolicy": "ReadWriteOnceWithFSType", "requiresRepublish": false, "seLinuxMount": false,
                "volumeLifecycleModes": ["Persistent"]}}),
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s"}]}),
            json!({"roleRef": {"kind": "Role", "name": "r", "apiGroup": "rbac.authorization.k8s.io"},
                "subjects": [{"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}, {"kind": "ServiceAccount", "name": "s", "apiGroup": ""}]}),
        ),
        (
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
            json!({"webhooks": [{"name": "w.example.com", "rules": [{"operations": ["CREATE"]}], "clientConfig": {"service": {"name": "s", "namespace": "n"}}}]}),
            json!({"webhooks": [{"name": "w.example.com", "rules": [{"operations": ["CREATE"], "scope": "*"}],
                "clientConfig": {"service": {"name": "s", "namespace": "n", "port": 443}},
                "failurePolicy": "Fail", "matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
                "timeoutSeconds": 10, "reinvocationPolicy": "Never"}]}),
        ),
        (
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            json!({"spec": {"names": {"kind": "Widget", "plural": "widgets"}}}),
            json!({"spec": {"names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"}, "conversion": {"strategy": "None"}}}),
        ),
        (
            "",
            "v1",
            "ConfigMap",
            json!({"data": {"a": "b"}}),
            json!({"data": {"a": "b"}}),
        ),
        (
            "",
            "v1",
            "Event",
            json!({"reason": "x"}),
            json!({"reason": "x"}),
        ),
    ];
    for (group, version, kind, input, want) in cases {
        assert_eq!(
            defaulted(group, version, kind, input.clone()),
            want,
            "{group}/{version}/{kind}: {input}"
        );
    }
}

#[test]
fn malformed_objects_never_panic() {
    let junk = [
        json!(null),
        json!(3),
        json!([]),
        json!({"spec": 1}),
        json!({"spec": {"containers": 1, "volumes": [1, null, {"projected": 2}], "initContainers": [{"resources": {"limits": 3}}]}}),
        json!({"spec": {"containers": [{"ports": [1, {"containerPort": "x"}], "livenessProbe": 2, "env": [{"valueFrom": 1}]}]}}),
        json!({"spec": {"template": 1, "strategy": "x", "updateStrategy": {"type": 1}, "selector": 2}}),
        json!({"spec": {"ports": [1, {"port": "x", "targetPort": []}], "type": 3}, "status": {"loadBalancer": 1}}),
        json!({"metadata": 1, "stringData": {"a": 1}, "data": 2}),
        json!({"spec": {"behavior": {"scaleUp": 1}, "metrics": 1, "jobTemplate": {"spec": 5}}}),
        json!({"webhooks": [1, {"rules": 2, "clientConfig": 3}], "subjects": 1, "roleRef": 2}),
    ];
    let kinds = [
        ("", "v1", "Pod"),
        ("", "v1", "PodTemplate"),
        ("", "v1", "ReplicationController"),
        ("", "v1", "Service"),
        ("", "v1", "Namespace"),
        ("", "v1", "Secret"),
        ("", "v1", "PersistentVolume"),
        ("", "v1", "PersistentVolumeClaim"),
        ("", "v1", "Endpoints"),
        ("", "v1", "Node"),
        ("", "v1", "LimitRange"),
        ("", "v1", "ResourceQuota"),
        ("apps", "v1", "Deployment"),
        ("apps", "v1", "ReplicaSet"),
        ("apps", "v1", "StatefulSet"),
        ("apps", "v1", "DaemonSet"),
        ("batch", "v1", "Job"),
        ("batch", "v1", "CronJob"),
        ("autoscaling", "v2", "HorizontalPodAutoscaler"),
        ("networking.k8s.io", "v1", "NetworkPolicy"),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
        ),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
    ];
    for (g, v, k) in kinds {
        for j in &junk {
            let mut o = j.clone();
            apply_defaults(g, v, k, &mut o);
            let rt = crate::registry::lookup_kind(g, v, k).expect(k);
            prepare_for_create(rt, &mut o);
            prepare_for_update(rt, &mut o, j);
        }
    }
    for j in &junk {
        let mut o = j.clone();
        let _ = admit_pod_priority(&mut o, &[]);
        default_service_account_name(&mut o);
        default_toleration_seconds(&mut o);
    }
}

#[test]
fn prepare_for_create_cases() {
    let mut ns = json!({"metadata": {"name": "a"}, "spec": {"finalizers": ["example.com/x"]}, "status": {"phase": "Terminating"}});
    prepare_for_create(rt("", "Namespace"), &mut ns);
    assert_eq!(
        ns["spec"]["finalizers"],
        json!(["example.com/x", "kubernetes"])
    );
    assert_eq!(ns["status"], json!({"phase": "Active"}));

    let mut pod = json!({"spec": {"schedulingGates": [{"name": "g"}], "containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]},
        "status": {"phase": "Running"}});
    prepare_for_create(rt("", "Pod"), &mut pod);
    assert_eq!(pod["status"]["phase"], "Pending");
    assert_eq!(pod["status"]["qosClass"], "Guaranteed");
    assert_eq!(pod["status"]["conditions"][0]["reason"], "SchedulingGated");

    let mut job =
        json!({"metadata": {"name": "pi", "uid": "u-1"}, "spec": {"template": {"metadata": {}}}});
    prepare_for_create(rt("batch", "Job"), &mut job);
    assert_eq!(
        job["spec"]["selector"],
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
    );
    assert_eq!(
        job["spec"]["template"]["metadata"]["labels"],
        json!({"job-name": "pi", "batch.kubernetes.io/job-name": "pi", "controller-uid": "u-1", "batch.kubernetes.io/controller-uid": "u-1"})
    );
    assert_eq!(job["metadata"]["generation"], 1);
    assert_eq!(job["status"], json!({}));

    let mut manual = json!({"metadata": {"uid": "u"}, "spec": {"manualSelector": true, "selector": {"matchLabels": {"a": "b"}}}});
    prepare_for_create(rt("batch", "Job"), &mut manual);
    assert_eq!(
        manual["spec"]["selector"],
        json!({"matchLabels": {"a": "b"}})
    );

    let mut deploy = json!({"metadata": {"name": "d"}, "spec": {}, "status": {"replicas": 3}});
    prepare_for_create(rt("apps", "Deployment"), &mut deploy);
    assert_eq!(
        deploy,
        json!({"metadata": {"name": "d", "generation": 1}, "spec": {}, "status": {}})
    );

    // A claim or volume written with a status starts Pending whatever it says.
    for kind in ["PersistentVolumeClaim", "PersistentVolume"] {
        let mut o =
            json!({"spec": {}, "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}});
        prepare_for_create(rt("", kind), &mut o);
        assert_eq!(o["status"], json!({"phase": "Pending"}), "{kind}");
    }
    let mut va =
        json!({"spec": {}, "status": {"attached": true, "attachmentMetadata": {"a": "b"}}});
    prepare_for_create(rt("storage.k8s.io", "VolumeAttachment"), &mut va);
    assert_eq!(va["status"], json!({"attached": false}));
    let mut same = json!({"spec": {"nodeName": "n"}, "status": {"attached": false}});
    prepare_for_update(
        rt("storage.k8s.io", "VolumeAttachment"),
        &mut same,
        &json!({"spec": {}, "status": {"attached": true}}),
    );
    assert_eq!(
        same["status"],
        json!({"attached": true}),
        "main update keeps the attacher's status"
    );

    let mut cm = json!({"data": {}});
    prepare_for_create(rt("", "ConfigMap"), &mut cm);
    assert_eq!(cm, json!({"data": {}}));
}

#[test]
fn prepare_for_update_cases() {
    let old =
        json!({"metadata": {"generation": 4}, "spec": {"replicas": 1}, "status": {"replicas": 1}});
    let mut same = json!({"metadata": {}, "spec": {"replicas": 1}, "status": {"replicas": 9}});
    prepare_for_update(rt("apps", "Deployment"), &mut same, &old);
    assert_eq!(
        same,
        json!({"metadata": {"generation": 4}, "spec": {"replicas": 1}, "status": {"replicas": 1}})
    );
    let mut scaled = json!({"metadata": {}, "spec": {"replicas": 3}});
    prepare_for_update(rt("apps", "Deployment"), &mut scaled, &old);
    assert_eq!(scaled["metadata"]["generation"], 5);
    assert_eq!(scaled["status"], json!({"replicas": 1}));

    let old_ns = json!({"spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
    let mut ns = json!({"spec": {"finalizers": []}, "status": {"phase": "Terminating"}});
    prepare_for_update(rt("", "Namespace"), &mut ns, &old_ns);
    assert_eq!(ns, old_ns);
}

#[test]
fn admit_pod_adds_admission_defaults() {
    let mut pod = json!({"spec": {"containers": [{"name": "c"}]}});
    admit_pod_priority(&mut pod, &[]).unwrap();
    default_service_account_name(&mut pod);
    default_toleration_seconds(&mut pod);
    assert_eq!(
        pod,
        json!({"spec": {
            "containers": [{"name": "c"}],
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "priority": 0,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ]
        }})
    );
    let mut tolerant = json!({"spec": {"serviceAccountName": "builder", "priorityClassName": "high",
        "tolerations": [{"operator": "Exists"}]}});
    let high = json!({"metadata": {"name": "high"}, "value": 1000});
    admit_pod_priority(&mut tolerant, &[high]).unwrap();
    assert_eq!(default_service_account_name(&mut tolerant), "builder");
    default_toleration_seconds(&mut tolerant);
    assert_eq!(
        tolerant,
        json!({"spec": {"serviceAccountName": "builder", "serviceAccount": "builder", "priorityClassName": "high",
            "priority": 1000, "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [{"operator": "Exists"}]}})
    );
}

/// (priorityClassName, priority, preemptionPolicy) after admission, or the error.
type Outcome = Result<(Option<&'static str>, i64, &'static str), &'static str>;

#[test]
fn priority_admission() {
    let classes = [
        json!({"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"}),
        json!({"metadata": {"name": "low-default"}, "value": 10, "globalDefault": true}),
        json!({"metadata": {"name": "mid-default"}, "value": 50, "globalDefault": true}),
    ];
    let spec = |extra: Value| {
        let mut p = json!({"spec": {"containers": [{"name": "c"}]}});
        if let (Some(s), Some(e)) = (p["spec"].as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        p
    };
    let cases: Vec<(&str, Value, &[Value], Outcome)> = vec![
        (
            "no classes",
            spec(json!({})),
            &[],
            Ok((None, 0, "PreemptLowerPriority")),
        ),
        (
            "named",
            spec(json!({"priorityClassName": "high"})),
            &classes,
            Ok((Some("high"), 1000, "Never")),
        ),
        (
            "global default, lowest wins",
            spec(json!({})),
            &classes,
            Ok((Some("low-default"), 10, "PreemptLowerPriority")),
        ),
        (
            "missing class",
            spec(json!({"priorityClassName": "nope"})),
            &classes,
            Err("no PriorityClass with name nope was found"),
        ),
        (
            "priority given",
            spec(json!({"priorityClassName": "high", "priority": 5})),
            &classes,
            Err(
                "the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name",
            ),
        ),
        (
            "same priority given",
            spec(json!({"priorityClassName": "high", "priority": 1000})),
            &classes,
            Ok((Some("high"), 1000, "Never")),
        ),
        (
            "policy given",
            spec(json!({"priorityClassName": "high", "preemptionPolicy": "PreemptLowerPriority"})),
            &classes,
            Err(
                "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name",
            ),
        ),
    ];
    for (what, mut pod, classes, want) in cases {
        let got = admit_pod_priority(&mut pod, classes).map(|()| {
            (
                pod["spec"]["priorityClassName"].as_str().map(String::from),
                pod["spec"]["priority"].as_i64().unwrap_or(-1),
                pod["spec"]["preemptionPolicy"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        });
        let want = want
            .map(|(n, p, pol)| (n.map(String::from), p, pol.to_string()))
            .map_err(String::from);
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn base64_and_quantity_helpers() {
    assert_eq!(base64_encode(b""), "");
    assert_eq!(base64_encode(b"f"), "Zg==");
    assert_eq!(base64_encode(b"fo"), "Zm8=");
    assert_eq!(base64_encode(b"foo"), "Zm9v");
    assert_eq!(base64_encode(b"hello"), "aGVsbG8=");
    let mut q = json!(0.25);
    canonicalize_quantity(&mut q);
    assert_eq!(q, json!("250m"));
    let mut bad = json!("lots");
    canonicalize_quantity(&mut bad);
    assert_eq!(bad, json!("lots"));
}

#[test]
fn admission_policies_get_upstreams_defaults() {
    let mut p = json!({"spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["apps"]}]},
                                "validations": [{"expression": "true"}]}});
    apply_defaults(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        &mut p,
    );
    assert_eq!(p["spec"]["failurePolicy"], "Fail");
    let m = &p["spec"]["matchConstraints"];
    assert_eq!(m["matchPolicy"], "Equivalent");
    assert_eq!(m["namespaceSelector"], json!({}));
    assert_eq!(m["objectSelector"], json!({}));
    assert_eq!(m["resourceRules"][0]["scope"], "*");
    let mut b = json!({"spec": {"policyName": "p", "matchResources": {}}});
    apply_defaults(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        &mut b,
    );
    assert_eq!(b["spec"]["matchResources"]["matchPolicy"], "Equivalent");
    // A binding without matchResources gets none (upstream matches the policy's).
    let mut bare = json!({"spec": {"policyName": "p"}});
    apply_defaults(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        &mut bare,
    );
    assert!(bare["spec"].get("matchResources").is_none());
}
