//! Services end to end with real kubectl on simulated nodes: cluster IP and
//! node port allocation (upstream's errors, release, state across restarts),
//! the `kubernetes` Service, and Endpoints/EndpointSlices following pods.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{Server, stderr};

const APP: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports:
        - name: http
          containerPort: 8080
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - name: http
    port: 80
    targetPort: http
";

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("timed out waiting for {what}");
}

fn ready_pod_ips(s: &Server) -> BTreeSet<String> {
    let (code, list) = s.request(
        "GET",
        "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb",
        "",
        None,
    );
    assert_eq!(code, 200, "{list}");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| {
            p["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .filter_map(|p| p["status"]["podIP"].as_str().map(String::from))
        .collect()
}

/// The ENDPOINTS column of `kubectl get endpoints web` as a set.
fn endpoints_column(s: &Server) -> BTreeSet<String> {
    let out = s.k(&["get", "endpoints", "web", "--no-headers"]);
    out.split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split(',')
        .filter(|e| !e.is_empty() && *e != "<none>")
        .map(String::from)
        .collect()
}

/// Every endpoint address of the Service's slices with its `ready` condition.
fn slice_endpoints(s: &Server) -> Vec<(String, bool, u64)> {
    let (code, list) = s.request(
        "GET",
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dweb",
        "",
        None,
    );
    assert_eq!(code, 200, "{list}");
    let mut out = Vec::new();
    for sl in list["items"].as_array().into_iter().flatten() {
        assert_eq!(
            sl["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
            "endpointslice-controller.k8s.io"
        );
        assert_eq!(sl["metadata"]["ownerReferences"][0]["kind"], "Service");
        let port = sl["ports"][0]["port"].as_u64().unwrap_or(0);
        for ep in sl["endpoints"].as_array().into_iter().flatten() {
            out.push((
                ep["addresses"][0].as_str().unwrap_or_default().to_string(),
                ep["conditions"]["ready"].as_bool().unwrap_or(false),
                port,
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn endpoints_follow_pods_and_readiness() {
    let s = Server::start_with(common::temp_dir("svc-ep"), &["--simulate-nodes", "3"]);

    // The kubernetes Service: first IP of the range, 443 → the secure port.
    let k = s.k(&["get", "svc", "kubernetes", "--no-headers"]);
    let cols: Vec<&str> = k.split_whitespace().collect();
    assert_eq!(
        &cols[..5],
        ["kubernetes", "ClusterIP", "10.43.0.1", "<none>", "443/TCP"]
    );
    let port = s.https.rsplit(':').next().unwrap().to_string();
    let ep = s.k(&[
        "get",
        "endpoints",
        "kubernetes",
        "-o",
        "jsonpath={.subsets[0].ports[0].port}",
    ]);
    assert_eq!(ep, port);
    let slice = s.k(&[
        "get",
        "endpointslices",
        "kubernetes",
        "-o",
        "jsonpath={.endpoints[0].addresses[0]} {.ports[0].name}",
    ]);
    assert_eq!(slice, "127.0.0.1 https");

    s.kubectl_stdin(&["apply", "-f", "-"], Some(APP));
    let svc = s.k(&["get", "svc", "web"]);
    let mut lines = svc.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        (row[0], row[1], row[3], row[4]),
        ("web", "ClusterIP", "<none>", "80/TCP")
    );
    let ip: std::net::Ipv4Addr = row[2].parse().unwrap();
    assert_eq!(&ip.octets()[..2], &[10, 43], "{ip} not in 10.43.0.0/16");

    // Three ready pods → three addresses on the resolved named port 8080.
    wait_for("3 ready pods", Duration::from_secs(30), || {
        ready_pod_ips(&s).len() == 3
    });
    let want: BTreeSet<String> = ready_pod_ips(&s)
        .iter()
        .map(|ip| format!("{ip}:8080"))
        .collect();
    wait_for("3 endpoints", Duration::from_secs(20), || {
        endpoints_column(&s) == want
    });
    wait_for("3 slice endpoints", Duration::from_secs(20), || {
        slice_endpoints(&s).len() == 3
    });
    let slices = s.k(&[
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=web",
    ]);
    let row: Vec<&str> = slices.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!((row[1], row[2]), ("IPv4", "8080"));
    let shown: BTreeSet<String> = row[3].split(',').map(|ip| format!("{ip}:8080")).collect();
    assert_eq!(shown, want);

    // A pod that stops being ready moves to notReadyAddresses / ready=false.
    let pod = s.k(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    let pod_ip = s.k(&["get", "pod", &pod, "-o", "jsonpath={.status.podIP}"]);
    s.k(&["annotate", "pod", &pod, "sim.berth.dev/ready=false"]);
    wait_for(
        "the pod in notReadyAddresses",
        Duration::from_secs(20),
        || {
            s.k(&[
                "get",
                "endpoints",
                "web",
                "-o",
                "jsonpath={.subsets[*].notReadyAddresses[*].ip}",
            ]) == pod_ip
        },
    );
    assert_eq!(endpoints_column(&s).len(), 2);
    wait_for(
        "the slice endpoint not ready",
        Duration::from_secs(20),
        || {
            slice_endpoints(&s)
                .iter()
                .any(|(ip, ready, _)| ip == &pod_ip && !ready)
        },
    );
    let annotations = s.k(&[
        "get",
        "endpoints",
        "web",
        "-o",
        "jsonpath={.metadata.annotations}",
    ]);
    assert!(
        annotations.contains("endpoints.kubernetes.io/last-change-trigger-time"),
        "{annotations}"
    );
    // Ready again → back in addresses.
    s.k(&["annotate", "pod", &pod, "sim.berth.dev/ready-"]);
    wait_for("the pod ready again", Duration::from_secs(20), || {
        endpoints_column(&s).contains(&format!("{pod_ip}:8080"))
    });

    // Scaling to 1 leaves one address.
    s.k(&["scale", "deployment", "web", "--replicas=1"]);
    wait_for("1 endpoint", Duration::from_secs(30), || {
        endpoints_column(&s).len() == 1 && slice_endpoints(&s).len() == 1
    });
    let left = ready_pod_ips(&s);
    assert_eq!(
        endpoints_column(&s),
        left.iter().map(|ip| format!("{ip}:8080")).collect()
    );

    // A Service without a selector is left alone: its hand-made Endpoints stay.
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(
            // Endpoints first: written before their Service, they must survive.
            "apiVersion: v1
kind: Endpoints
metadata: {name: manual}
subsets:
- addresses: [{ip: 192.168.7.7}]
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: manual}
spec:
  ports: [{port: 80}]
",
        ),
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        s.k(&[
            "get",
            "endpoints",
            "manual",
            "-o",
            "jsonpath={.subsets[0].addresses[0].ip}"
        ]),
        "192.168.7.7"
    );
    // … and are mirrored into an EndpointSlice; the API server's are not.
    wait_for("the mirrored slice", Duration::from_secs(20), || {
        s.k(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=manual,endpointslice.kubernetes.io/managed-by=endpointslicemirroring-controller.k8s.io",
            "-o",
            "jsonpath={.items[*].endpoints[*].addresses[0]}",
        ]) == "192.168.7.7"
    });
    assert_eq!(
        s.k(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=kubernetes",
            "-o",
            "name"
        ])
        .trim(),
        "endpointslice.discovery.k8s.io/kubernetes"
    );
    // Deleting the Service removes its Endpoints.
    s.k(&["delete", "svc", "web"]);
    wait_for("Endpoints gone", Duration::from_secs(20), || {
        !s.kubectl(&["get", "endpoints", "web"]).status.success()
    });
}

#[test]
fn cluster_ips_and_node_ports() {
    // A /28: 14 usable addresses, the first is the kubernetes Service's.
    let s = Server::start_with(
        common::temp_dir("svc-alloc"),
        &[
            "--service-cidr",
            "10.43.0.0/28",
            "--disable-controller-manager",
        ],
    );
    assert_eq!(
        s.k(&[
            "get",
            "svc",
            "kubernetes",
            "-o",
            "jsonpath={.spec.clusterIP}"
        ]),
        "10.43.0.1"
    );
    let create = |name: &str, extra: &[&str]| {
        let mut args = vec!["create", "service", "clusterip", name, "--tcp=80:80"];
        args.extend_from_slice(extra);
        s.kubectl(&args)
    };
    assert!(create("fixed", &["--clusterip=10.43.0.5"]).status.success());
    let dup = create("dup", &["--clusterip=10.43.0.5"]);
    assert!(!dup.status.success());
    assert_eq!(
        stderr(&dup).trim(),
        r#"error: failed to create ClusterIP service: Service "dup" is invalid: spec.clusterIPs: Invalid value: []string{"10.43.0.5"}: failed to allocate IP 10.43.0.5: provided IP is already allocated"#
    );
    let outside = create("outside", &["--clusterip=10.99.0.5"]);
    assert!(
        stderr(&outside).contains(
            r#"spec.clusterIPs: Invalid value: []string{"10.99.0.5"}: failed to allocate IP 10.99.0.5: the provided network does not match the current range"#
        ),
        "{}",
        stderr(&outside)
    );
    let broadcast = create("broadcast", &["--clusterip=10.43.0.15"]);
    assert!(
        stderr(&broadcast).contains(
            "failed to allocate IP 10.43.0.15: the provided IP (10.43.0.15) is not in the valid range. The range of valid IPs is 10.43.0.0/28"
        ),
        "{}",
        stderr(&broadcast)
    );
    // Headless: no IP taken.
    assert!(create("headless", &["--clusterip=None"]).status.success());
    assert_eq!(
        s.k(&["get", "svc", "headless", "--no-headers"])
            .split_whitespace()
            .nth(2),
        Some("None")
    );

    // Immutable once set.
    let changed = s.kubectl(&[
        "patch",
        "svc",
        "fixed",
        "-p",
        r#"{"spec":{"clusterIP":"10.43.0.6","clusterIPs":["10.43.0.6"]}}"#,
    ]);
    assert!(
        stderr(&changed).contains(
            r#"spec.clusterIPs[0]: Invalid value: []string{"10.43.0.6"}: may not change once set"#
        ),
        "{}",
        stderr(&changed)
    );

    // Node ports: a requested one is honoured once; out of range is refused.
    let np = |name: &str, port: Option<&str>| {
        let mut args = vec!["create", "service", "nodeport", name, "--tcp=80:80"];
        let flag;
        if let Some(p) = port {
            flag = format!("--node-port={p}");
            args.push(&flag);
        }
        s.kubectl(&args)
    };
    assert!(np("np1", Some("30080")).status.success());
    let dup = np("np2", Some("30080"));
    assert!(
        stderr(&dup).contains(
            r#"Service "np2" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"#
        ),
        "{}",
        stderr(&dup)
    );
    let far = np("np3", Some("40000"));
    assert!(
        stderr(&far).contains(
            "spec.ports[0].nodePort: Invalid value: 40000: provided port is not in the valid range. The range of valid ports is 30000-32767"
        ),
        "{}",
        stderr(&far)
    );
    assert!(np("np4", None).status.success());
    let auto: u16 = s
        .k(&[
            "get",
            "svc",
            "np4",
            "-o",
            "jsonpath={.spec.ports[0].nodePort}",
        ])
        .parse()
        .unwrap();
    assert!((30000..=32767).contains(&auto) && auto != 30080);
    // Changing the type to ClusterIP releases the node port; another Service gets it.
    s.k(&[
        "patch",
        "svc",
        "np1",
        "-p",
        r#"{"spec":{"type":"ClusterIP"}}"#,
    ]);
    assert_eq!(
        s.k(&[
            "get",
            "svc",
            "np1",
            "-o",
            "jsonpath={.spec.ports[0].nodePort}"
        ]),
        ""
    );
    assert!(np("np2", Some("30080")).status.success());
    // Deleting releases the cluster IP.
    s.k(&["delete", "svc", "fixed"]);
    assert!(create("again", &["--clusterip=10.43.0.5"]).status.success());

    // Every namespace's: the metrics server's Service holds an address too.
    let ips = |s: &Server| -> BTreeSet<String> {
        s.k(&[
            "get",
            "svc",
            "-A",
            "-o",
            "jsonpath={.items[*].spec.clusterIP}",
        ])
        .split_whitespace()
        .filter(|ip| *ip != "None")
        .map(String::from)
        .collect()
    };
    let before = ips(&s);
    let mut s = s.restart();
    // Restarted: the allocations are the store's, so new Services fill only
    // free addresses until the range is full.
    assert_eq!(ips(&s), before);
    let free = 14 - before.len();
    let mut made = BTreeSet::new();
    for i in 0..free {
        let name = format!("after-{i}");
        let out = s.kubectl(&["create", "service", "clusterip", &name, "--tcp=80:80"]);
        assert!(out.status.success(), "{}", stderr(&out));
        made.insert(s.k(&["get", "svc", &name, "-o", "jsonpath={.spec.clusterIP}"]));
    }
    assert_eq!(made.len(), free);
    assert!(made.is_disjoint(&before), "{made:?} vs {before:?}");
    let full = s.kubectl(&[
        "create",
        "service",
        "clusterip",
        "one-too-many",
        "--tcp=80:80",
    ]);
    assert!(
        stderr(&full).contains("failed to allocate a serviceIP: range is full"),
        "{}",
        stderr(&full)
    );
    s.kill9();
}

/// Measurement, not run by default: `cargo test -p berth --test services --
/// --ignored --nocapture endpoints_for_250_pods`. Prints how long Endpoints
/// and EndpointSlices take to list 250 pods once they are ready.
#[test]
#[ignore]
fn endpoints_for_250_pods() {
    let s = Server::start_with(common::temp_dir("svc-bench"), &["--simulate-nodes", "3"]);
    let app = APP.replace("replicas: 3", "replicas: 250");
    let start = Instant::now();
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&app));
    wait_for("250 ready pods", Duration::from_secs(180), || {
        ready_pod_ips(&s).len() == 250
    });
    let ready = start.elapsed();
    wait_for("250 endpoints", Duration::from_secs(120), || {
        endpoints_column_count(&s) == 250 && slice_endpoints(&s).len() == 250
    });
    let converged = start.elapsed() - ready;
    let (code, list) = s.request(
        "GET",
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dweb",
        "",
        None,
    );
    assert_eq!(code, 200);
    let mut sizes: Vec<usize> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|sl| sl["endpoints"].as_array().map_or(0, Vec::len))
        .collect();
    sizes.sort();
    assert_eq!(sizes, vec![50, 100, 100]);
    println!(
        "250 pods ready after {:.2} s; Endpoints and EndpointSlices complete {:.2} s later",
        ready.as_secs_f64(),
        converged.as_secs_f64()
    );
}

fn endpoints_column_count(s: &Server) -> usize {
    let (code, ep) = s.request("GET", "/api/v1/namespaces/default/endpoints/web", "", None);
    if code != 200 {
        return 0;
    }
    ep["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|ss| ss["addresses"].as_array().map_or(0, Vec::len))
        .sum()
}
