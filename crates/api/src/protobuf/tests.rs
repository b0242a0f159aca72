use serde_json::{Value, json};

use super::schema::{self, Card, Ty};
use super::table::{KINDS, MESSAGES};
use super::wire::{put_key, put_len, put_varint};
use super::*;

/// Fixtures are written in the JSON Go would produce for them (non-pointer
/// structs present, omitempty zeros absent), so a round trip is the identity.
fn roundtrip(obj: Value) {
    let bytes = encode(&obj).unwrap_or_else(|e| panic!("encode: {e}"));
    assert_eq!(&bytes[..4], MAGIC);
    let back = decode(&bytes).unwrap_or_else(|e| panic!("decode: {e}"));
    assert_eq!(
        back,
        obj,
        "\n got: {}\nwant: {}",
        serde_json::to_string_pretty(&back).unwrap_or_default(),
        serde_json::to_string_pretty(&obj).unwrap_or_default()
    );
    // Every prefix and every single-byte corruption is an error or a value, never a panic.
    for n in 0..bytes.len() {
        let _ = decode(&bytes[..n]);
    }
    for i in 4..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0xff;
        let _ = decode(&b);
    }
}

#[test]
fn deployment_roundtrips() {
    roundtrip(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team", "labels": {"app": "web"}, "generation": 3,
            "creationTimestamp": "2024-05-01T10:00:00Z", "uid": "8c6f7a2e"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27", "resources": {}}]}
            },
            "strategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600
        },
        "status": {"observedGeneration": 3, "replicas": 2, "readyReplicas": 2,
            "conditions": [{"type": "Available", "status": "True",
                "lastUpdateTime": "2024-05-01T10:00:05Z", "lastTransitionTime": "2024-05-01T10:00:05Z",
                "reason": "MinimumReplicasAvailable", "message": "ok"}]}
    }));
}

#[test]
fn pod_with_resources_probes_env_volumes_roundtrips() {
    roundtrip(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "p", "namespace": "default", "labels": {"a": "b"}, "annotations": {"x": "y"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                "uid": "u1", "controller": true, "blockOwnerDeletion": true}],
            "finalizers": ["f/one"],
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                "time": "2024-05-01T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}}}}]
        },
        "spec": {
            "volumes": [
                {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "cfg", "configMap": {"name": "c", "defaultMode": 420,
                    "items": [{"key": "k", "path": "p"}]}},
                {"name": "sec", "secret": {"secretName": "s", "optional": false}}
            ],
            "containers": [{
                "name": "app", "image": "busybox", "command": ["sh", "-c", "sleep 1"],
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [
                    {"name": "A", "value": "1"},
                    {"name": "B", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                    {"name": "C", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}}
                ],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": true}],
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP",
                        "httpHeaders": [{"name": "X", "value": "y"}]},
                    "initialDelaySeconds": 3, "timeoutSeconds": 1, "periodSeconds": 10,
                    "successThreshold": 1, "failureThreshold": 3},
                "readinessProbe": {"tcpSocket": {"port": "http"}},
                "startupProbe": {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 5},
                "terminationMessagePath": "/dev/termination-log",
                "imagePullPolicy": "IfNotPresent",
                // Pointers keep their zero values.
                "securityContext": {"runAsUser": 0, "runAsNonRoot": false,
                    "capabilities": {"drop": ["ALL"]}}
            }],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "securityContext": {"supplementalGroups": [1000, 2000], "fsGroup": 2000},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
            "schedulerName": "default-scheduler",
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0,
            "enableServiceLinks": true
        },
        "status": {
            "phase": "Running", "podIP": "10.42.0.5", "podIPs": [{"ip": "10.42.0.5"}],
            "startTime": "2024-05-01T10:00:01Z", "qosClass": "Burstable",
            "conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "2024-05-01T10:00:02Z"}],
            "containerStatuses": [{"name": "app", "state": {"running": {"startedAt": "2024-05-01T10:00:02Z"}},
                "lastState": {}, "ready": true, "restartCount": 0, "image": "busybox",
                "imageID": "", "started": true}]
        }
    }));
}

#[test]
fn secret_configmap_namespace_roundtrip() {
    roundtrip(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "namespace": "default"},
        "data": {"password": "aHVudGVyMg==", "empty": "", "bin": "AP8Q"},
        "type": "Opaque",
        "immutable": false
    }));
    roundtrip(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default"},
        "data": {"a": "b", "multi": "line1\nline2\n"},
        "binaryData": {"blob": "3q2+7w=="}
    }));
    roundtrip(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "team", "labels": {"kubernetes.io/metadata.name": "team"}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"}
    }));
}

#[test]
fn service_with_int_or_string_target_ports_roundtrips() {
    roundtrip(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                {"name": "named", "protocol": "TCP", "port": 81, "targetPort": "http", "nodePort": 30001}
            ],
            "selector": {"app": "web"},
            "clusterIP": "10.43.0.10", "clusterIPs": ["10.43.0.10"],
            "type": "NodePort", "sessionAffinity": "None",
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster"
        },
        "status": {"loadBalancer": {}}
    }));
}

#[test]
fn job_and_list_and_meta_kinds_roundtrip() {
    roundtrip(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "pi", "namespace": "default"},
        "spec": {
            "parallelism": 1, "completions": 3, "backoffLimit": 6, "activeDeadlineSeconds": 100,
            "completionMode": "NonIndexed", "suspend": false,
            "podFailurePolicy": {"rules": [{"action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
            "template": {"metadata": {}, "spec": {"containers": [{"name": "pi", "image": "perl",
                "command": ["perl", "-e", "print 1"], "resources": {}}], "restartPolicy": "Never"}}
        },
        "status": {"active": 1, "startTime": "2024-05-01T10:00:00Z",
            "uncountedTerminatedPods": {"succeeded": ["u1"]}}
    }));
    roundtrip(json!({
        "apiVersion": "v1", "kind": "ConfigMapList",
        "metadata": {"resourceVersion": "42", "continue": "abc", "remainingItemCount": 0},
        "items": [{"metadata": {"name": "a"}, "data": {"k": "v"}}, {"metadata": {"name": "b"}}]
    }));
    // meta/v1 kinds travel under any group-version.
    roundtrip(json!({
        "apiVersion": "apps/v1", "kind": "DeleteOptions",
        "gracePeriodSeconds": 0, "propagationPolicy": "Background",
        "preconditions": {"uid": "u"}, "dryRun": ["All"]
    }));
    roundtrip(json!({
        "apiVersion": "v1", "kind": "Status", "metadata": {},
        "status": "Failure", "message": "not found", "reason": "NotFound",
        "details": {"name": "x", "kind": "pods", "causes": [{"reason": "r", "message": "m", "field": "f"}]},
        "code": 404
    }));
    // MicroTime keeps microseconds; RawExtension carries JSON.
    roundtrip(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "l", "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40,
            "renewTime": "2024-05-01T10:00:00.123456Z"}
    }));
    // Go []string types (ExtraValue) are arrays.
    roundtrip(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "metadata": {},
        "spec": {"resourceAttributes": {"namespace": "ns", "verb": "get", "resource": "pods"},
            "user": "u", "groups": ["g"], "extra": {"scopes": ["a", "b"], "none": []}},
        "status": {"allowed": false}
    }));
    roundtrip(json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "metadata": {"name": "sa1", "namespace": "default"},
        "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600},
        "status": {"token": "", "expirationTimestamp": "2024-05-01T11:00:00Z"}
    }));
    roundtrip(json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "r", "namespace": "default"},
        "data": {"spec": {"template": {"x": [1, 2.5, "s", null, true]}}},
        "revision": 2
    }));
}

/// A body built by hand from `generated.proto` field numbers.
#[test]
fn decodes_hand_built_bytes() {
    // Secret: metadata = 1 (ObjectMeta: name = 1, namespace = 3), data = 2
    // (map<string, bytes>), type = 3, stringData = 4.
    let mut meta = Vec::new();
    put_len(&mut meta, 1, b"s");
    put_len(&mut meta, 3, b"default");
    let mut entry = Vec::new();
    put_len(&mut entry, 1, b"password");
    put_len(&mut entry, 2, b"hunter2");
    let mut secret = Vec::new();
    put_len(&mut secret, 1, &meta);
    put_len(&mut secret, 2, &entry);
    put_len(&mut secret, 3, b"Opaque");
    // An unknown field (a newer client's) is skipped.
    put_key(&mut secret, 99, 0);
    put_varint(&mut secret, 7);
    let body = envelope("v1", "Secret", &secret);
    assert_eq!(
        decode(&body).unwrap(),
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "default"},
            "data": {"password": "aHVudGVyMg=="}, "type": "Opaque"})
    );

    // Service port: targetPort = 4 (IntOrString: type = 1, intVal = 2, strVal = 3);
    // a negative int32 is a 10-byte varint.
    let mut target = Vec::new();
    put_key(&mut target, 1, 0);
    put_varint(&mut target, 0);
    put_key(&mut target, 2, 0);
    put_varint(&mut target, -5i64 as u64);
    let mut port = Vec::new();
    put_key(&mut port, 3, 0);
    put_varint(&mut port, 80);
    put_len(&mut port, 4, &target);
    let mut spec = Vec::new();
    put_len(&mut spec, 1, &port);
    let mut svc = Vec::new();
    put_len(&mut svc, 2, &spec);
    let v = decode(&envelope("v1", "Service", &svc)).unwrap();
    assert_eq!(v["spec"]["ports"], json!([{"port": 80, "targetPort": -5}]));
    assert_eq!(v["metadata"], json!({}));
    assert_eq!(v["status"], json!({"loadBalancer": {}}));

    // Packed repeated int64 (supplementalGroups = PodSecurityContext 4) decodes too.
    let mut packed = Vec::new();
    put_varint(&mut packed, 1);
    put_varint(&mut packed, 300);
    let mut psc = Vec::new();
    put_len(&mut psc, 4, &packed);
    let mut pod_spec = Vec::new();
    put_len(&mut pod_spec, 14, &psc);
    let mut pod = Vec::new();
    put_len(&mut pod, 2, &pod_spec);
    let v = decode(&envelope("v1", "Pod", &pod)).unwrap();
    assert_eq!(
        v["spec"]["securityContext"]["supplementalGroups"],
        json!([1, 300])
    );
}

#[test]
fn encodes_the_bytes_go_writes() {
    // kubectl create namespace team: Namespace{metadata{name}, spec{}, status{}}, as Go
    // writes it (empty non-pointer messages included).
    let v = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"},
        "spec": {}, "status": {}});
    let got = encode(&v).unwrap();
    let mut want = b"k8s\0".to_vec();
    want.extend_from_slice(&[0x0a, 0x0f, 0x0a, 0x02, b'v', b'1', 0x12, 0x09]);
    want.extend_from_slice(b"Namespace");
    want.extend_from_slice(&[0x12, 0x0c, 0x0a, 0x06, 0x0a, 0x04]);
    want.extend_from_slice(b"team");
    want.extend_from_slice(&[0x12, 0x00, 0x1a, 0x00, 0x1a, 0x00, 0x22, 0x00]);
    assert_eq!(got, want);
}

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut tm = Vec::new();
    put_len(&mut tm, 1, api_version.as_bytes());
    put_len(&mut tm, 2, kind.as_bytes());
    let mut out = MAGIC.to_vec();
    put_len(&mut out, 1, &tm);
    put_len(&mut out, 2, raw);
    out
}

#[test]
fn malformed_bodies_are_errors() {
    assert_eq!(decode(b"{\"kind\":1}"), Err(ProtobufError::BadMagic));
    assert_eq!(decode(b"k8s"), Err(ProtobufError::BadMagic));
    assert_eq!(decode(b"k8s\0"), Err(ProtobufError::Empty));
    // A varint whose continuation bit runs off the end.
    assert_eq!(decode(b"k8s\0\x0a\x80"), Err(ProtobufError::Truncated));
    // A length longer than the body.
    assert_eq!(decode(b"k8s\0\x12\x05ab"), Err(ProtobufError::Truncated));
    assert_eq!(
        decode(b"k8s\0\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f"),
        Err(ProtobufError::VarintOverflow)
    );
    // typeMeta as a varint.
    assert!(matches!(
        decode(b"k8s\0\x08\x01"),
        Err(ProtobufError::WrongWireType { .. })
    ));
    // Groups (wire types 3/4) are not used by Kubernetes.
    assert_eq!(
        decode(b"k8s\0\x0b"),
        Err(ProtobufError::UnsupportedWireType(3))
    );
    // ObjectMeta.name (a string) sent as a varint.
    let mut meta = Vec::new();
    put_key(&mut meta, 1, 0);
    put_varint(&mut meta, 1);
    let mut ns = Vec::new();
    put_len(&mut ns, 1, &meta);
    assert_eq!(
        decode(&envelope("v1", "Namespace", &ns)),
        Err(ProtobufError::WrongWireType {
            field: "ObjectMeta.name".into(),
            got: 0
        })
    );
    // Invalid UTF-8 in a string.
    let mut meta = Vec::new();
    put_len(&mut meta, 1, &[0xff, 0xfe]);
    let mut ns = Vec::new();
    put_len(&mut ns, 1, &meta);
    assert!(matches!(
        decode(&envelope("v1", "Namespace", &ns)),
        Err(ProtobufError::Invalid { .. })
    ));
    assert_eq!(
        decode(&envelope("example.com/v1", "Widget", &[])),
        Err(ProtobufError::UnknownKind {
            api_version: "example.com/v1".into(),
            kind: "Widget".into()
        })
    );
    // The message says what went wrong.
    let msg = decode(b"{}")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(msg.contains("expected prefix"), "{msg}");
}

#[test]
fn encode_rejects_wrong_json_types() {
    assert!(matches!(
        encode(&json!({"apiVersion": "v1", "kind": "Nope"})),
        Err(ProtobufError::UnknownKind { .. })
    ));
    let err = encode(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "spec": {"replicas": "three"}}));
    assert_eq!(
        err,
        Err(ProtobufError::Invalid {
            field: "DeploymentSpec.replicas".into(),
            reason: "expected an int32, got \"three\"".into()
        })
    );
    assert!(encode(&json!({"apiVersion": "v1", "kind": "Secret", "data": {"a": "!!"}})).is_err());
    assert!(
        encode(&json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"creationTimestamp": "yesterday"}}))
        .is_err()
    );
}

#[test]
fn deep_nesting_is_bounded() {
    // RawExtensions holding envelopes holding RawExtensions …
    let mut body = envelope("v1", "ConfigMap", &[]);
    for _ in 0..200 {
        let mut raw = Vec::new();
        put_len(&mut raw, 1, &body);
        let mut cr = Vec::new();
        put_len(&mut cr, 2, &raw);
        body = envelope("apps/v1", "ControllerRevision", &cr);
    }
    assert_eq!(decode(&body), Err(ProtobufError::TooDeep(MAX_DEPTH)));
}

#[test]
fn every_message_index_resolves_and_fields_are_sorted() {
    for m in MESSAGES {
        assert!(
            m.fields.windows(2).all(|w| w[0].number < w[1].number),
            "{}",
            m.name
        );
        for f in m.fields {
            for ty in [
                Some(f.ty),
                if let Card::Map(k) = f.card {
                    Some(k)
                } else {
                    None
                },
            ]
            .into_iter()
            .flatten()
            {
                if let Ty::Msg(i) = ty {
                    assert!(usize::from(i) < MESSAGES.len(), "{}.{}", m.name, f.json);
                }
            }
        }
    }
    for (_, _, kind, i) in KINDS {
        assert_eq!(schema::message(*i).short_name(), *kind);
    }
}

#[test]
fn every_served_kind_and_its_list_has_a_message() {
    // The table is generated from k8s.io/api and apimachinery (v0.33) without
    // admissionregistration; apiextensions.k8s.io and apiregistration.k8s.io live
    // in k8s.io/apiextensions-apiserver and k8s.io/kube-aggregator. All are JSON only.
    let json_only = |r: &crate::registry::ResourceType| {
        matches!(
            r.group,
            "apiextensions.k8s.io" | "admissionregistration.k8s.io" | "apiregistration.k8s.io"
        )
    };
    for r in crate::registry::RESOURCES.iter().filter(|r| !json_only(r)) {
        for kind in [r.kind, r.list_kind].into_iter().filter(|k| !k.is_empty()) {
            let m = schema::message_for_kind(&r.api_version(), kind)
                .unwrap_or_else(|| panic!("{} {kind}", r.api_version()));
            assert!(m.top_level, "{}", m.name);
            // An empty object of every kind round-trips.
            roundtrip_kind(&r.api_version(), kind);
        }
    }
    for kind in [
        "DeleteOptions",
        "Status",
        "CreateOptions",
        "PatchOptions",
        "ListOptions",
    ] {
        assert!(schema::message_for_kind("v1", kind).is_some(), "{kind}");
    }
    for (av, kind) in [
        ("autoscaling/v1", "Scale"),
        ("policy/v1", "Eviction"),
        ("v1", "Binding"),
    ] {
        assert!(schema::message_for_kind(av, kind).is_some(), "{kind}");
    }
}

fn roundtrip_kind(api_version: &str, kind: &str) {
    let obj = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
    let once = decode(&encode(&obj).unwrap_or_else(|e| panic!("{kind}: {e}")))
        .unwrap_or_else(|e| panic!("{kind}: {e}"));
    // The decoded form (with Go's defaults filled in) is a fixed point.
    let twice = decode(&encode(&once).unwrap_or_else(|e| panic!("{kind}: {e}")))
        .unwrap_or_else(|e| panic!("{kind}: {e}"));
    assert_eq!(once, twice, "{kind}");
    if !kind.ends_with("List") {
        assert_eq!(once["metadata"]["name"], "x", "{kind}");
    }
    assert_eq!(once["kind"], kind);
}

#[test]
fn minimal_bodies_get_go_defaults() {
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let got = decode(&encode(&d).unwrap()).unwrap();
    assert_eq!(
        got,
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {}}]}}, "strategy": {}},
            "status": {}})
    );
}

#[test]
fn base64_matches_go() {
    for (raw, text) in [
        (&b""[..], ""),
        (b"f", "Zg=="),
        (b"fo", "Zm8="),
        (b"foo", "Zm9v"),
        (b"hunter2", "aHVudGVyMg=="),
    ] {
        assert_eq!(base64::encode(raw), text);
        assert_eq!(base64::decode(text).as_deref(), Some(raw));
    }
    assert_eq!(base64::decode("Zm8").as_deref(), Some(&b"fo"[..]));
    assert_eq!(base64::decode("Zm=8"), None);
    assert_eq!(base64::decode("Z"), None);
    assert_eq!(base64::decode("Z!=="), None);
}
