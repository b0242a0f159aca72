use chrono::{TimeZone, Utc};
use serde_json::{Value, json};

use super::*;

fn list(pairs: &[(&str, &str)]) -> ResourceList {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity::parse(v).unwrap()))
        .collect()
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 2, 6, 0, 0).unwrap()
}

fn pod(containers: Value) -> Value {
    json!({"metadata": {"name": "p"}, "spec": {"containers": containers}})
}

fn container(name: &str, requests: Value, limits: Value) -> Value {
    json!({"name": name, "image": "busybox", "resources": {"requests": requests, "limits": limits}})
}

#[test]
fn arithmetic() {
    let a = list(&[("cpu", "100m"), ("memory", "1Gi")]);
    let b = list(&[("cpu", "250m"), ("pods", "1")]);
    assert_eq!(pretty_print(&add(&a, &b)), "cpu=350m,memory=1Gi,pods=1");
    assert_eq!(
        pretty_print(&subtract_non_negative(&a, &b)),
        "cpu=0,memory=1Gi,pods=0"
    );
    assert_eq!(pretty_print(&mask(&a, ["cpu", "x"])), "cpu=100m");
    let (ok, exceeded) = less_than_or_equal(&add(&a, &b), &list(&[("cpu", "300m"), ("pods", "2")]));
    assert!(!ok);
    assert_eq!(exceeded, vec!["cpu"]);
    assert!(less_than_or_equal(&a, &list(&[("cpu", "100m")])).0);
    assert_eq!(
        pretty_print(&remove_zeros(&list(&[("cpu", "0"), ("pods", "1")]))),
        "pods=1"
    );
    assert_eq!(
        negative(&list(&[("cpu", "-1"), ("pods", "1")])),
        vec!["cpu"]
    );
    assert!(equals(&list(&[("cpu", "1")]), &list(&[("cpu", "1000m")])));
    assert_eq!(pretty_print_names(&["pods", "cpu"]), "cpu,pods");
    assert_eq!(
        list_to_json(&list(&[("memory", "512Mi")])),
        json!({"memory": "512Mi"})
    );
}

#[test]
fn pod_resources_table() {
    let sidecar = |r: &str| {
        json!({"name": "side", "restartPolicy": "Always",
               "resources": {"requests": {"cpu": r}}})
    };
    let init = |r: &str| json!({"name": "init", "resources": {"requests": {"cpu": r}}});
    // (pod, requests.cpu)
    let cases = [
        // The containers' sum.
        (
            pod(json!([
                container("a", json!({"cpu": "100m"}), json!({})),
                container("b", json!({"cpu": "200m"}), json!({}))
            ])),
            "300m",
        ),
        // A larger init container wins.
        (
            {
                let mut p = pod(json!([container("a", json!({"cpu": "100m"}), json!({}))]));
                p["spec"]["initContainers"] = json!([init("1")]);
                p
            },
            "1",
        ),
        // A sidecar adds to the containers and to later init containers.
        (
            {
                let mut p = pod(json!([container("a", json!({"cpu": "100m"}), json!({}))]));
                p["spec"]["initContainers"] = json!([sidecar("200m"), init("250m")]);
                p
            },
            "450m",
        ),
        // Overhead is added.
        (
            {
                let mut p = pod(json!([container("a", json!({"cpu": "100m"}), json!({}))]));
                p["spec"]["overhead"] = json!({"cpu": "50m"});
                p
            },
            "150m",
        ),
        // Pod-level resources replace the containers' cpu.
        (
            {
                let mut p = pod(json!([container("a", json!({"cpu": "100m"}), json!({}))]));
                p["spec"]["resources"] = json!({"requests": {"cpu": "2"}});
                p
            },
            "2",
        ),
    ];
    for (p, want) in cases {
        let got = pod_resources(&p, "requests", true);
        assert_eq!(got["cpu"].to_string(), want, "{p}");
    }
}

#[test]
fn pod_usage() {
    let p = pod(json!([
        container(
            "a",
            json!({"cpu": "100m", "memory": "128Mi", "example.com/gpu": "1"}),
            json!({"cpu": "200m", "memory": "256Mi"})
        ),
        container(
            "b",
            json!({"cpu": "150m", "memory": "128Mi"}),
            json!({"cpu": "300m", "memory": "256Mi"})
        )
    ]));
    let u = Evaluator::Pod.usage(&p, now());
    assert_eq!(
        pretty_print(&u),
        "count/pods=1,cpu=250m,limits.cpu=500m,limits.memory=512Mi,memory=256Mi,pods=1,requests.cpu=250m,requests.example.com/gpu=1,requests.memory=256Mi"
    );
    // Finished pods count only as stored objects.
    let mut done = p.clone();
    done["status"] = json!({"phase": "Succeeded"});
    assert_eq!(
        pretty_print(&Evaluator::Pod.usage(&done, now())),
        "count/pods=1"
    );
    // So does a pod stuck terminating past its grace period, not one within it.
    let mut stuck = p.clone();
    stuck["metadata"]["deletionTimestamp"] = json!("2026-12-02T05:00:00Z");
    stuck["metadata"]["deletionGracePeriodSeconds"] = json!(30);
    assert!(!counts_pod(&stuck, now()));
    stuck["metadata"]["deletionTimestamp"] = json!("2026-12-02T05:59:50Z");
    assert!(counts_pod(&stuck, now()));
}

#[test]
fn service_and_claim_usage() {
    let svc = |t: &str| json!({"spec": {"type": t, "ports": [{"port": 80}, {"port": 443}]}});
    let cases = [
        (svc("ClusterIP"), "count/services=1,services=1"),
        (
            svc("NodePort"),
            "count/services=1,services=1,services.nodeports=2",
        ),
        (
            svc("LoadBalancer"),
            "count/services=1,services=1,services.loadbalancers=1,services.nodeports=2",
        ),
        (
            {
                let mut s = svc("LoadBalancer");
                s["spec"]["allocateLoadBalancerNodePorts"] = json!(false);
                s
            },
            "count/services=1,services=1,services.loadbalancers=1",
        ),
    ];
    for (s, want) in cases {
        assert_eq!(pretty_print(&Evaluator::Service.usage(&s, now())), want);
    }
    let pvc = json!({"spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "1500m"}}}});
    assert_eq!(
        pretty_print(&Evaluator::PersistentVolumeClaim.usage(&pvc, now())),
        "count/persistentvolumeclaims=1,gold.storageclass.storage.k8s.io/persistentvolumeclaims=1,gold.storageclass.storage.k8s.io/requests.storage=2,persistentvolumeclaims=1,requests.storage=2"
    );
    let cm = Evaluator::for_resource("", "configmaps");
    assert_eq!(
        pretty_print(&cm.usage(&json!({}), now())),
        "configmaps=1,count/configmaps=1"
    );
    let deploy = Evaluator::for_resource("apps", "deployments");
    assert_eq!(
        pretty_print(&deploy.usage(&json!({}), now())),
        "count/deployments.apps=1"
    );
}

#[test]
fn matching_resources_and_counted() {
    let hard = [
        "requests.cpu",
        "limits.memory",
        "pods",
        "count/pods",
        "requests.nvidia.com/gpu",
        "hugepages-2Mi",
        "services",
        "services.nodeports",
        "requests.storage",
        "gold.storageclass.storage.k8s.io/requests.storage",
        "count/deployments.apps",
        "configmaps",
        "example.com/widgets",
    ];
    assert_eq!(
        Evaluator::Pod.matching_resources(hard),
        vec![
            "requests.cpu",
            "limits.memory",
            "pods",
            "count/pods",
            "requests.nvidia.com/gpu",
            "hugepages-2Mi"
        ]
    );
    assert_eq!(
        Evaluator::Service.matching_resources(hard),
        vec!["services", "services.nodeports"]
    );
    assert_eq!(
        Evaluator::PersistentVolumeClaim.matching_resources(hard),
        vec![
            "requests.storage",
            "gold.storageclass.storage.k8s.io/requests.storage"
        ]
    );
    assert_eq!(
        Evaluator::counted_resource("count/deployments.apps"),
        Some(("apps".into(), "deployments".into()))
    );
    assert_eq!(
        Evaluator::counted_resource("secrets"),
        Some(("".into(), "secrets".into()))
    );
    assert_eq!(Evaluator::counted_resource("count/pods"), None);
    assert_eq!(Evaluator::counted_resource("example.com/widgets"), None);
    let hard_list: ResourceList = hard
        .iter()
        .map(|h| (h.to_string(), Quantity::zero()))
        .collect();
    assert_eq!(
        evaluators_for(&hard_list),
        vec![
            Evaluator::Pod,
            Evaluator::Service,
            Evaluator::PersistentVolumeClaim,
            Evaluator::for_resource("", "configmaps"),
            Evaluator::for_resource("apps", "deployments"),
        ]
    );
}

#[test]
fn handles() {
    use Operation::*;
    let cases = [
        (Evaluator::Pod, Create, None, true),
        (Evaluator::Pod, Update, None, false),
        (Evaluator::Pod, Update, Some("resize"), true),
        (Evaluator::Pod, Update, Some("status"), false),
        (Evaluator::Service, Update, None, true),
        (Evaluator::Service, Update, Some("status"), false),
        (Evaluator::PersistentVolumeClaim, Update, None, true),
        (Evaluator::for_resource("", "secrets"), Create, None, true),
        (Evaluator::for_resource("", "secrets"), Update, None, false),
    ];
    for (e, op, sub, want) in cases {
        assert_eq!(e.handles(op, sub), want, "{e:?} {op:?} {sub:?}");
    }
}

#[test]
fn scopes_table() {
    let best_effort = pod(json!([{"name": "a", "image": "x"}]));
    let burstable = pod(json!([container("a", json!({"cpu": "1"}), json!({}))]));
    let mut terminating = burstable.clone();
    terminating["spec"]["activeDeadlineSeconds"] = json!(30);
    let mut high = burstable.clone();
    high["spec"]["priorityClassName"] = json!("high");
    let mut cross = burstable.clone();
    cross["spec"]["affinity"] = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "k", "namespaces": ["other"]}]}});
    let req = |scope: &str, op: &str, values: &[&str]| ScopeRequirement {
        scope_name: scope.into(),
        operator: op.into(),
        values: values.iter().map(|v| v.to_string()).collect(),
    };
    let exists = |scope: &str| req(scope, "Exists", &[]);
    // (requirement, pod, matches)
    let cases = [
        (exists("BestEffort"), &best_effort, true),
        (exists("BestEffort"), &burstable, false),
        (exists("NotBestEffort"), &burstable, true),
        (exists("NotBestEffort"), &best_effort, false),
        (exists("Terminating"), &terminating, true),
        (exists("Terminating"), &burstable, false),
        (exists("NotTerminating"), &burstable, true),
        (exists("NotTerminating"), &terminating, false),
        (exists("PriorityClass"), &high, true),
        (exists("PriorityClass"), &burstable, false),
        (req("PriorityClass", "In", &["high", "medium"]), &high, true),
        (req("PriorityClass", "In", &["low"]), &high, false),
        (req("PriorityClass", "NotIn", &["low"]), &high, true),
        (req("PriorityClass", "NotIn", &["high"]), &high, false),
        (req("PriorityClass", "NotIn", &["high"]), &burstable, true),
        (req("PriorityClass", "DoesNotExist", &[]), &burstable, true),
        (exists("CrossNamespacePodAffinity"), &cross, true),
        (exists("CrossNamespacePodAffinity"), &burstable, false),
    ];
    for (r, p, want) in cases {
        assert_eq!(Evaluator::Pod.matches_scope(&r, p), want, "{r:?}");
    }
    // Only pods have scopes.
    assert!(!Evaluator::Service.matches_scope(&exists("BestEffort"), &json!({})));

    let quota = json!({"spec": {"hard": {"pods": "2"}, "scopes": ["BestEffort"],
        "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}]}}});
    assert_eq!(quota_scopes(&quota).len(), 2);
    let hard = list(&[("pods", "2")]);
    assert!(Evaluator::Pod.matches(&quota, &hard, &best_effort));
    assert!(!Evaluator::Pod.matches(&quota, &hard, &burstable));
    // A quota on resources the evaluator does not measure never matches.
    assert!(!Evaluator::Pod.matches(&json!({}), &list(&[("services", "1")]), &best_effort));
}

#[test]
fn constraints_name_missing_containers() {
    let p = pod(json!([
        container("a", json!({"cpu": "100m"}), json!({"cpu": "1"})),
        container("b", json!({}), json!({})),
        container("c", json!({"memory": "1Gi"}), json!({}))
    ]));
    let required: Vec<String> = ["limits.cpu", "requests.memory", "pods"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        Evaluator::Pod.constraints(&required, &p),
        Err("must specify limits.cpu for: b,c; requests.memory for: a,b".into())
    );
    assert_eq!(Evaluator::Pod.constraints(&["pods".into()], &p), Ok(()));
    assert_eq!(Evaluator::Service.constraints(&required, &p), Ok(()));
}

#[test]
fn calculate_usage_sums_matching_objects() {
    let quota = json!({"spec": {"hard": {"pods": "10", "requests.cpu": "4", "example.com/widgets": "3", "count/deployments.apps": "2"},
        "scopes": ["NotBestEffort"]}});
    let hard = parse_list(quota.pointer("/spec/hard"));
    let pods = vec![
        pod(json!([container("a", json!({"cpu": "500m"}), json!({}))])),
        pod(json!([container("a", json!({"cpu": "1"}), json!({}))])),
        // BestEffort: out of scope.
        pod(json!([{"name": "a", "image": "x"}])),
        {
            let mut p = pod(json!([container("a", json!({"cpu": "2"}), json!({}))]));
            p["status"] = json!({"phase": "Failed"});
            p
        },
    ];
    let evaluators = evaluators_for(&hard);
    let used = calculate_usage(
        &quota,
        &hard,
        &evaluators,
        |e| match e {
            Evaluator::Pod => pods.clone(),
            _ => vec![json!({}), json!({})],
        },
        now(),
    );
    // The deployment count is scoped away (scopes select pods only); the
    // unknown resource gets no entry.
    assert_eq!(
        pretty_print(&used),
        "count/deployments.apps=0,pods=2,requests.cpu=1500m"
    );
}

#[test]
fn check_request_table() {
    let quota = |name: &str, hard: Value, used: Option<Value>| {
        let mut q = json!({"metadata": {"name": name}, "spec": {"hard": hard.clone()}, "status": {"hard": hard}});
        match used {
            Some(u) => q["status"]["used"] = u,
            None => q["status"]
                .as_object_mut()
                .unwrap()
                .remove("used")
                .map(|_| ())
                .unwrap_or(()),
        }
        q
    };
    let mem_cpu = quota(
        "mem-cpu-demo",
        json!({"requests.cpu": "1", "requests.memory": "1Gi", "limits.cpu": "2", "limits.memory": "2Gi"}),
        Some(
            json!({"requests.cpu": "800m", "requests.memory": "600Mi", "limits.cpu": "800m", "limits.memory": "800Mi"}),
        ),
    );
    let small = pod(json!([container(
        "c",
        json!({"cpu": "100m", "memory": "100Mi"}),
        json!({"cpu": "200m", "memory": "200Mi"})
    )]));
    let big = pod(json!([container(
        "c",
        json!({"cpu": "100m", "memory": "700Mi"}),
        json!({"cpu": "200m", "memory": "1Gi"})
    )]));
    let no_limits = pod(json!([container(
        "c",
        json!({"cpu": "100m", "memory": "100Mi"}),
        json!({})
    )]));
    let pods_quota = quota("pods", json!({"pods": "2"}), Some(json!({"pods": "2"})));
    let unknown = quota("fresh", json!({"pods": "2"}), None);
    let unrelated = quota(
        "svc",
        json!({"services": "1"}),
        Some(json!({"services": "0"})),
    );

    // Charged.
    let charges = check_request(
        std::slice::from_ref(&mem_cpu),
        &Evaluator::Pod,
        &small,
        None,
        now(),
    )
    .unwrap();
    assert_eq!(charges.len(), 1);
    assert_eq!(
        pretty_print(&charges[0].1),
        "limits.cpu=1,limits.memory=1000Mi,requests.cpu=900m,requests.memory=700Mi"
    );
    // Exceeded: only the exceeded resources are printed.
    assert_eq!(
        check_request(std::slice::from_ref(&mem_cpu), &Evaluator::Pod, &big, None, now()),
        Err("exceeded quota: mem-cpu-demo, requested: requests.memory=700Mi, used: requests.memory=600Mi, limited: requests.memory=1Gi".into())
    );
    assert_eq!(
        check_request(
            std::slice::from_ref(&mem_cpu),
            &Evaluator::Pod,
            &no_limits,
            None,
            now()
        ),
        Err(
            "failed quota: mem-cpu-demo: must specify limits.cpu for: c; limits.memory for: c"
                .into()
        )
    );
    assert_eq!(
        check_request(
            &[unrelated.clone(), pods_quota],
            &Evaluator::Pod,
            &small,
            None,
            now()
        ),
        Err("exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2".into())
    );
    assert_eq!(
        check_request(&[unknown], &Evaluator::Pod, &small, None, now()),
        Err("status unknown for quota: fresh, resources: pods".into())
    );
    // No matching quota: nothing to charge.
    assert_eq!(
        check_request(&[unrelated], &Evaluator::Pod, &small, None, now()),
        Ok(vec![])
    );
    // A quota without status.hard yet constrains nothing (upstream).
    let uncomputed = json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "0"}}});
    assert_eq!(
        check_request(&[uncomputed], &Evaluator::Pod, &small, None, now()),
        Ok(vec![])
    );
    // Object counts.
    let counts = quota(
        "object-counts",
        json!({"count/deployments.apps": "1", "configmaps": "2"}),
        Some(json!({"count/deployments.apps": "1", "configmaps": "1"})),
    );
    assert_eq!(
        check_request(std::slice::from_ref(&counts), &Evaluator::for_resource("apps", "deployments"), &json!({}), None, now()),
        Err("exceeded quota: object-counts, requested: count/deployments.apps=1, used: count/deployments.apps=1, limited: count/deployments.apps=1".into())
    );
    let charges = check_request(
        std::slice::from_ref(&counts),
        &Evaluator::for_resource("", "configmaps"),
        &json!({}),
        None,
        now(),
    )
    .unwrap();
    assert_eq!(
        pretty_print(&charges[0].1),
        "configmaps=2,count/deployments.apps=1"
    );
    // Updates pay the difference only: a service turning NodePort.
    let svc_quota = quota(
        "svc",
        json!({"services": "5", "services.nodeports": "1"}),
        Some(json!({"services": "1", "services.nodeports": "0"})),
    );
    let old = json!({"spec": {"type": "ClusterIP", "ports": [{"port": 80}]}});
    let new = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}});
    let charges = check_request(
        std::slice::from_ref(&svc_quota),
        &Evaluator::Service,
        &new,
        Some(&old),
        now(),
    )
    .unwrap();
    assert_eq!(
        pretty_print(&charges[0].1),
        "services=1,services.nodeports=1"
    );
    assert_eq!(
        check_request(
            std::slice::from_ref(&svc_quota),
            &Evaluator::Service,
            &old,
            Some(&old),
            now()
        ),
        Ok(vec![])
    );
}
