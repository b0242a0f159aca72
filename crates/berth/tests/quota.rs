//! ResourceQuota and LimitRange end to end, driven by real kubectl with the
//! examples of the upstream docs ("Configure Memory and CPU Quotas for a
//! Namespace", "Resource Quotas" object counts, "Configure Default Memory
//! Requests and Limits for a Namespace", "Configure Minimum and Maximum CPU
//! Constraints for a Namespace"). No node agent: pods are admitted and stay
//! Pending, and quota counts them as upstream counts non-terminal pods.

mod common;

use std::time::Duration;

use common::{Server, stderr, stdout, wait_until};
use serde_json::Value;

fn namespace(s: &Server, ns: &str) {
    s.k(&["create", "namespace", ns]);
    // The ServiceAccount admission plugin wants the default ServiceAccount.
    wait_until(
        Duration::from_secs(30),
        "the default ServiceAccount",
        || {
            s.kubectl(&["get", "serviceaccount", "default", "-n", ns])
                .status
                .success()
        },
    );
}

fn apply(s: &Server, ns: &str, yaml: &str) -> std::process::Output {
    s.kubectl_stdin(&["apply", "-n", ns, "-f", "-"], Some(yaml))
}

fn get_json(s: &Server, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    serde_json::from_str(&s.k(&a)).expect("json")
}

/// Waits until the quota controller has computed the quota's usage.
fn wait_status(s: &Server, ns: &str, name: &str) {
    wait_until(Duration::from_secs(30), "the quota's status", || {
        let q = get_json(s, &["get", "resourcequota", name, "-n", ns]);
        let hard = q["spec"]["hard"].as_object().map(|h| h.len());
        q["status"]["used"].is_object() && q["status"]["hard"].as_object().map(|h| h.len()) == hard
    });
}

fn used(s: &Server, ns: &str, name: &str, resource: &str) -> String {
    let q = get_json(s, &["get", "resourcequota", name, "-n", ns]);
    q["status"]["used"][resource]
        .as_str()
        .unwrap_or("")
        .to_string()
}

const MEM_CPU_QUOTA: &str = "apiVersion: v1
kind: ResourceQuota
metadata:
  name: mem-cpu-demo
spec:
  hard:
    requests.cpu: \"1\"
    requests.memory: 1Gi
    limits.cpu: \"2\"
    limits.memory: 2Gi
";

fn quota_pod(name: &str, req_mem: &str, req_cpu: &str, lim_mem: &str, lim_cpu: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: {name}-ctr
    image: nginx
    resources:
      limits:
        memory: \"{lim_mem}\"
        cpu: \"{lim_cpu}\"
      requests:
        memory: \"{req_mem}\"
        cpu: \"{req_cpu}\"
"
    )
}

/// "Configure Memory and CPU Quotas for a Namespace", then what a deleted
/// pod frees, the constraints message, and concurrent creates at the limit.
#[test]
fn compute_quota_as_documented() {
    let s = Server::start("quota-compute");
    let ns = "quota-mem-cpu-example";
    namespace(&s, ns);
    let out = apply(&s, ns, MEM_CPU_QUOTA);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_status(&s, ns, "mem-cpu-demo");

    let pod = quota_pod("quota-mem-cpu-demo", "600Mi", "400m", "800Mi", "800m");
    let out = apply(&s, ns, &pod);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "pod/quota-mem-cpu-demo created");

    let described = s.k(&["describe", "quota", "mem-cpu-demo", "-n", ns]);
    let lines: Vec<String> = described
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    for want in [
        "Name: mem-cpu-demo",
        "Namespace: quota-mem-cpu-example",
        "Resource Used Hard",
        "limits.cpu 800m 2",
        "limits.memory 800Mi 2Gi",
        "requests.cpu 400m 1",
        "requests.memory 600Mi 1Gi",
    ] {
        assert!(lines.iter().any(|l| l == want), "{want:?} in\n{described}");
    }

    // The second pod would go over requests.memory.
    let pod2 = quota_pod("quota-mem-cpu-demo-2", "700Mi", "400m", "1Gi", "800m");
    let out = apply(&s, ns, &pod2);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (Forbidden): error when creating \"STDIN\": pods \"quota-mem-cpu-demo-2\" is forbidden: exceeded quota: mem-cpu-demo, requested: requests.memory=700Mi, used: requests.memory=600Mi, limited: requests.memory=1Gi"
    );

    // A pod that does not say what the quota counts.
    let bare = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bare\nspec:\n  containers:\n  - name: c\n    image: nginx\n";
    let out = apply(&s, ns, bare);
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (Forbidden): error when creating \"STDIN\": pods \"bare\" is forbidden: failed quota: mem-cpu-demo: must specify limits.cpu for: c; limits.memory for: c; requests.cpu for: c; requests.memory for: c"
    );

    // Deleting the first pod frees its usage; the second then fits.
    s.k(&[
        "delete",
        "pod",
        "quota-mem-cpu-demo",
        "-n",
        ns,
        "--wait=false",
    ]);
    wait_until(Duration::from_secs(30), "usage freed", || {
        used(&s, ns, "mem-cpu-demo", "requests.memory") == "0"
    });
    let out = apply(&s, ns, &pod2);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(used(&s, ns, "mem-cpu-demo", "requests.memory"), "700Mi");

    // Concurrent creates never take more than the quota allows.
    let ns = "pods-race";
    namespace(&s, ns);
    s.k(&["create", "quota", "pods", "--hard=pods=5", "-n", ns]);
    wait_status(&s, ns, "pods");
    let codes: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..12)
            .map(|i| {
                let s = &s;
                scope.spawn(move || {
                    let body = format!(
                        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p{i}"}},"spec":{{"containers":[{{"name":"c","image":"nginx"}}]}}}}"#
                    );
                    s.request(
                        "POST",
                        &format!("/api/v1/namespaces/{ns}/pods"),
                        "application/json",
                        Some(&body),
                    )
                    .0
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(codes.iter().filter(|c| **c == 201).count(), 5, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 403).count(), 7, "{codes:?}");
    assert_eq!(used(&s, ns, "pods", "pods"), "5");
    // The controller agrees after a recount.
    let pods = get_json(&s, &["get", "pods", "-n", ns]);
    assert_eq!(pods["items"].as_array().map(Vec::len), Some(5));
}

/// Object counts: the "Resource Quotas" page's `object-counts` and
/// `count/<resource>.<group>`.
#[test]
fn object_count_quota() {
    let s = Server::start("quota-objects");
    let ns = "myspace";
    namespace(&s, ns);
    let quota = "apiVersion: v1
kind: ResourceQuota
metadata:
  name: object-counts
spec:
  hard:
    configmaps: \"10\"
    persistentvolumeclaims: \"4\"
    pods: \"4\"
    replicationcontrollers: \"20\"
    secrets: \"10\"
    services: \"10\"
    services.loadbalancers: \"2\"
";
    let out = apply(&s, ns, quota);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_status(&s, ns, "object-counts");
    // kube-root-ca.crt is the namespace's one ConfigMap.
    wait_until(
        Duration::from_secs(30),
        "the root CA ConfigMap counted",
        || used(&s, ns, "object-counts", "configmaps") == "1",
    );
    s.k(&[
        "create",
        "secret",
        "generic",
        "one",
        "--from-literal=a=b",
        "-n",
        ns,
    ]);
    let described = s.k(&["describe", "quota", "object-counts", "-n", ns]);
    let lines: Vec<String> = described
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    for want in [
        "Name: object-counts",
        "Namespace: myspace",
        "Resource Used Hard",
        "configmaps 1 10",
        "persistentvolumeclaims 0 4",
        "pods 0 4",
        "replicationcontrollers 0 20",
        "secrets 1 10",
        "services 0 10",
        "services.loadbalancers 0 2",
    ] {
        assert!(lines.iter().any(|l| l == want), "{want:?} in\n{described}");
    }

    s.k(&[
        "create",
        "quota",
        "test",
        "--hard=count/deployments.apps=1,count/secrets=4",
        "-n",
        ns,
    ]);
    wait_status(&s, ns, "test");
    s.k(&["create", "deployment", "nginx", "--image=nginx", "-n", ns]);
    let out = s.kubectl(&["create", "deployment", "nginx2", "--image=nginx", "-n", ns]);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        "error: failed to create deployment: deployments.apps \"nginx2\" is forbidden: exceeded quota: test, requested: count/deployments.apps=1, used: count/deployments.apps=1, limited: count/deployments.apps=1"
    );
    // Deleting the deployment frees the count.
    s.k(&["delete", "deployment", "nginx", "-n", ns]);
    wait_until(Duration::from_secs(30), "the count freed", || {
        used(&s, ns, "test", "count/deployments.apps") == "0"
    });
    s.k(&["create", "deployment", "nginx2", "--image=nginx", "-n", ns]);

    // Bad input: negative values and invalid names are refused; an unknown
    // but well-formed name is accepted and never used.
    let bad = "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: bad\nspec:\n  hard:\n    cpu: \"-1\"\n    widgets: \"1\"\n";
    let out = apply(&s, ns, bad);
    assert!(!out.status.success());
    let err = stderr(&out);
    // kubectl prints one cause a line.
    for want in [
        "The ResourceQuota \"bad\" is invalid: ",
        "* spec.hard[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
        "* spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource type or fully qualified",
        "* spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource for quota",
    ] {
        assert!(err.lines().any(|l| l == want), "{want:?} in {err}");
    }
    let (code, body) = s.request(
        "POST",
        &format!("/api/v1/namespaces/{ns}/resourcequotas"),
        "application/json",
        Some(r#"{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"bad"},"spec":{"hard":{"pods":"-1"}}}"#),
    );
    assert_eq!(code, 422, "{body}");
    s.k(&[
        "create",
        "quota",
        "widgets",
        "--hard=example.com/widgets=5,pods=10",
        "-n",
        ns,
    ]);
    wait_status(&s, ns, "widgets");
    s.k(&["create", "configmap", "c", "--from-literal=a=b", "-n", ns]);
    let q = get_json(&s, &["get", "quota", "widgets", "-n", ns]);
    assert_eq!(q["status"]["hard"]["example.com/widgets"], "5");
    assert!(
        q["status"]["used"].get("example.com/widgets").is_none(),
        "{q}"
    );
}

/// LimitRange defaults ("Configure Default Memory Requests and Limits for a
/// Namespace") and min/max ("Configure Minimum and Maximum CPU Constraints").
#[test]
fn limit_range_defaults_and_constraints() {
    let s = Server::start("quota-limitrange");
    let ns = "default-mem-example";
    namespace(&s, ns);
    let lr = "apiVersion: v1
kind: LimitRange
metadata:
  name: mem-limit-range
spec:
  limits:
  - default:
      memory: 512Mi
    defaultRequest:
      memory: 256Mi
    type: Container
";
    let out = apply(&s, ns, lr);
    assert!(out.status.success(), "{}", stderr(&out));
    let pod = |name: &str, resources: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: {name}-ctr\n    image: nginx\n{resources}"
        )
    };
    let out = apply(&s, ns, &pod("default-mem-demo", ""));
    assert!(out.status.success(), "{}", stderr(&out));
    let p = get_json(&s, &["get", "pod", "default-mem-demo", "-n", ns]);
    assert_eq!(
        p["spec"]["containers"][0]["resources"],
        serde_json::json!({"limits": {"memory": "512Mi"}, "requests": {"memory": "256Mi"}})
    );
    assert_eq!(
        p["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: memory request for container default-mem-demo-ctr; memory limit for container default-mem-demo-ctr"
    );
    // A limit without a request: the request is the limit.
    let out = apply(
        &s,
        ns,
        &pod(
            "default-mem-demo-2",
            "    resources:\n      limits:\n        memory: \"1Gi\"\n",
        ),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let p = get_json(&s, &["get", "pod", "default-mem-demo-2", "-n", ns]);
    assert_eq!(
        p["spec"]["containers"][0]["resources"],
        serde_json::json!({"limits": {"memory": "1Gi"}, "requests": {"memory": "1Gi"}})
    );
    // A request without a limit: the default limit.
    let out = apply(
        &s,
        ns,
        &pod(
            "default-mem-demo-3",
            "    resources:\n      requests:\n        memory: \"128Mi\"\n",
        ),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let p = get_json(&s, &["get", "pod", "default-mem-demo-3", "-n", ns]);
    assert_eq!(
        p["spec"]["containers"][0]["resources"],
        serde_json::json!({"limits": {"memory": "512Mi"}, "requests": {"memory": "128Mi"}})
    );

    let ns = "constraints-cpu-example";
    namespace(&s, ns);
    let lr = "apiVersion: v1
kind: LimitRange
metadata:
  name: cpu-min-max-demo-lr
spec:
  limits:
  - max:
      cpu: \"800m\"
    min:
      cpu: \"200m\"
    type: Container
";
    let out = apply(&s, ns, lr);
    assert!(out.status.success(), "{}", stderr(&out));
    // Defaulting fills default and defaultRequest from max.
    let got = get_json(&s, &["get", "limitrange", "cpu-min-max-demo-lr", "-n", ns]);
    assert_eq!(
        got["spec"]["limits"][0],
        serde_json::json!({"default": {"cpu": "800m"}, "defaultRequest": {"cpu": "800m"},
            "max": {"cpu": "800m"}, "min": {"cpu": "200m"}, "type": "Container"})
    );
    let cpu = |req: &str, lim: &str| {
        format!(
            "    resources:\n      limits:\n        cpu: \"{lim}\"\n      requests:\n        cpu: \"{req}\"\n"
        )
    };
    let out = apply(&s, ns, &pod("constraints-cpu-demo", &cpu("500m", "800m")));
    assert!(out.status.success(), "{}", stderr(&out));
    let out = apply(&s, ns, &pod("constraints-cpu-demo-2", &cpu("500m", "1.5")));
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (Forbidden): error when creating \"STDIN\": pods \"constraints-cpu-demo-2\" is forbidden: maximum cpu usage per Container is 800m, but limit is 1500m"
    );
    let out = apply(&s, ns, &pod("constraints-cpu-demo-3", &cpu("100m", "800m")));
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (Forbidden): error when creating \"STDIN\": pods \"constraints-cpu-demo-3\" is forbidden: minimum cpu usage per Container is 200m, but request is 100m"
    );
    let out = apply(&s, ns, &pod("constraints-cpu-demo-4", ""));
    assert!(out.status.success(), "{}", stderr(&out));
    let p = get_json(&s, &["get", "pod", "constraints-cpu-demo-4", "-n", ns]);
    assert_eq!(
        p["spec"]["containers"][0]["resources"],
        serde_json::json!({"limits": {"cpu": "800m"}, "requests": {"cpu": "800m"}})
    );
    // Both errors at once, bracketed as upstream's aggregate.
    let out = apply(&s, ns, &pod("two", &cpu("100m", "2")));
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (Forbidden): error when creating \"STDIN\": pods \"two\" is forbidden: [minimum cpu usage per Container is 200m, but request is 100m, maximum cpu usage per Container is 800m, but limit is 2]"
    );

    // A LimitRange whose default is above its max is refused.
    let bad = "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: bad\nspec:\n  limits:\n  - type: Container\n    max:\n      cpu: 500m\n    default:\n      cpu: \"1\"\n";
    let out = apply(&s, ns, bad);
    let err = stderr(&out);
    for want in [
        "The LimitRange \"bad\" is invalid: ",
        // defaultRequest defaults to default.
        "* spec.limits[0].defaultRequest[cpu]: Invalid value: \"1\": default request value 1 is greater than max value 500m",
        "* spec.limits[0].default[cpu]: Invalid value: \"500m\": default value 1 is greater than max value 500m",
    ] {
        assert!(err.lines().any(|l| l == want), "{want:?} in {err}");
    }
}
