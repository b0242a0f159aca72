//! The service proxy on a real node: `berth server` with its agent programs
//! Services into nftables (table `ip berth-proxy`), and busybox pods and the
//! node itself reach ClusterIPs and NodePorts. Needs root, nft and
//! `scripts/install-deps`. (busybox's `wget -T` crashes in Debian's
//! busybox-static 1.35: `timeout` bounds it instead.) One test (one agent server) to keep the machine-wide
//! agent lock short. Traffic is sent to a Service only once the table shows
//! its rules, so nothing leaves the machine.

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Server, wait_until};

const TABLE: &str = "berth-proxy";

fn get(s: &Server, what: &[&str], path: &str) -> String {
    let jp = format!("jsonpath={path}");
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", &jp]);
    String::from_utf8_lossy(&s.kubectl(&args).stdout).into_owned()
}

fn apply(s: &Server, yaml: &str) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(yaml));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The proxy's table as `nft list table` prints it ("" when it does not exist).
fn table() -> String {
    let out = Command::new("nft")
        .args(["list", "table", "ip", TABLE])
        .output()
        .expect("nft");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn nft(script: &str) {
    let out = Command::new("sh")
        .args(["-c", &format!("nft {script}")])
        .output()
        .expect("nft");
    assert!(
        out.status.success(),
        "nft {script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The name of the chain in the table that starts with `prefix` and ends with `suffix`.
fn chain_named(prefix: &str, suffix: &str) -> String {
    table()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("chain "))
        .map(|l| l.trim_end_matches(" {").to_string())
        .find(|n| n.starts_with(prefix) && n.ends_with(suffix))
        .unwrap_or_else(|| panic!("no chain {prefix}…{suffix} in\n{}", table()))
}

/// A backend: busybox httpd serving its hostname, Ready while /www/ready
/// exists; /cgi-bin/unready and /cgi-bin/ready flip that.
fn backend(name: &str, app: &str) -> String {
    let script = "mkdir -p /www/cgi-bin; hostname > /www/index.html; touch /www/ready; \
        for f in ready unready; do \
          if [ $f = ready ]; then op='touch'; else op='rm -f'; fi; \
          printf '#!/bin/sh\\n%s /www/ready\\necho Content-Type: text/plain\\necho\\necho %s\\n' \"$op\" $f > /www/cgi-bin/$f; \
          chmod +x /www/cgi-bin/$f; \
        done; \
        exec httpd -f -p 80 -h /www";
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: {app}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: busybox
    command: [\"sh\", \"-c\", {script:?}]
    ports: [{{containerPort: 80}}]
    readinessProbe:
      exec: {{command: [\"test\", \"-f\", \"/www/ready\"]}}
      periodSeconds: 1
    volumeMounts: [{{name: www, mountPath: /www}}]
  volumes: [{{name: www, emptyDir: {{}}}}]
"
    )
}

fn service(name: &str, app: &str, ty: &str) -> String {
    format!(
        "apiVersion: v1
kind: Service
metadata:
  name: {name}
spec:
  type: {ty}
  selector: {{app: {app}}}
  ports: [{{port: 80, targetPort: 80}}]
"
    )
}

/// A one-shot busybox pod writing into the host folder `out` (as /out).
fn client(name: &str, out: &std::path::Path, script: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: [\"sh\", \"-c\", {script:?}]
    volumeMounts: [{{name: out, mountPath: /out}}]
  volumes: [{{name: out, hostPath: {{path: {out:?}, type: Directory}}}}]
",
        out = out.display().to_string()
    )
}

fn pod_ip(s: &Server, pod: &str) -> String {
    get(s, &["pod", pod], "{.status.podIP}")
}

/// `curl` from the node; `(exit code, stdout, seconds)`.
fn node_curl(url: &str) -> (i32, String, f64) {
    let start = Instant::now();
    let out = Command::new("curl")
        .args(["-s", "--max-time", "5", url])
        .output()
        .expect("curl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        start.elapsed().as_secs_f64(),
    )
}

fn tally(lines: impl Iterator<Item = String>) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for l in lines {
        *m.entry(l).or_insert(0) += 1;
    }
    m
}

/// `n` requests from the node to `url`, tallied by answer.
fn node_requests(url: &str, n: usize) -> BTreeMap<String, usize> {
    tally((0..n).map(|_| {
        let (code, body, _) = node_curl(url);
        if code == 0 {
            body
        } else {
            format!("curl exit {code}")
        }
    }))
}

/// Waits until the `web` Service's random choice (its `numgen … vmap`) is among
/// exactly `ips` (port 80) of `all`.
fn wait_for_endpoints(ips: &[&str], all: &[&str]) {
    wait_until(
        Duration::from_secs(20),
        &format!("rules for {ips:?}"),
        || {
            let t = table();
            let Some(vmap) = t
                .lines()
                .find(|l| l.contains("numgen random") && l.contains("-default/web/tcp/__"))
            else {
                return false;
            };
            all.iter().all(|ip| {
                let target = format!("-default/web/tcp/__{ip}/80");
                let listed =
                    vmap.contains(&format!("{target},")) || vmap.contains(&format!("{target} }}"));
                listed == ips.contains(ip)
            })
        },
    );
}

#[test]
fn service_proxy_on_a_real_node() {
    let s = Server::start_with_agent_args("proxy", &["--proxy-sync-period", "2s"]);
    wait_until(Duration::from_secs(60), "node Ready", || {
        get(
            &s,
            &["nodes"],
            "{.items[0].status.conditions[?(@.type==\"Ready\")].status}",
        ) == "True"
    });
    let node_ip = get(
        &s,
        &["nodes"],
        "{.items[0].status.addresses[?(@.type==\"InternalIP\")].address}",
    );
    assert!(node_ip.parse::<std::net::Ipv4Addr>().is_ok(), "{node_ip:?}");

    // Backends, a Service over them (also as a NodePort), one selecting
    // nothing, and one for the hairpin pod.
    let mut yaml = String::new();
    for i in 0..3 {
        yaml.push_str(&backend(&format!("web-{i}"), "web"));
        yaml.push_str("---\n");
    }
    for (name, app, ty) in [
        ("web", "web", "ClusterIP"),
        ("web-np", "web", "NodePort"),
        ("nothing", "nothing", "ClusterIP"),
        ("hairpin", "hairpin", "ClusterIP"),
    ] {
        yaml.push_str(&service(name, app, ty));
        yaml.push_str("---\n");
    }
    // ClientIP affinity: each client sticks to one backend.
    yaml.push_str(&service("sticky", "web", "ClusterIP").replace(
        "spec:\n",
        "spec:\n  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}\n",
    ));
    apply(&s, &yaml);
    let ip_of = |svc: &str| get(&s, &["service", svc], "{.spec.clusterIP}");
    let (web, nothing, hairpin) = (ip_of("web"), ip_of("nothing"), ip_of("hairpin"));
    let node_port = get(&s, &["service", "web-np"], "{.spec.ports[0].nodePort}");
    let out = common::temp_dir("proxy-out");
    // The hairpin pod reaches itself through its own Service (masqueraded, so
    // the reply comes back through the node).
    let mut hp = backend("hairpin-0", "hairpin");
    hp = hp.replace(
        "exec httpd -f -p 80 -h /www",
        &format!(
            "httpd -p 80 -h /www; i=0; while [ $i -lt 60 ]; do \
               if timeout 3 wget -qO- http://{hairpin}/ > /out/hairpin.txt; then break; fi; \
               i=$((i+1)); sleep 0.5; done; sleep 3600"
        ),
    );
    hp = hp.replace(
        "  volumes: [{name: www, emptyDir: {}}]",
        &format!(
            "  volumes: [{{name: www, emptyDir: {{}}}}, {{name: out, hostPath: {{path: {:?}, type: Directory}}}}]",
            out.display().to_string()
        ),
    );
    hp = hp.replace(
        "volumeMounts: [{name: www, mountPath: /www}]",
        "volumeMounts: [{name: www, mountPath: /www}, {name: out, mountPath: /out}]",
    );
    apply(&s, &hp);

    wait_until(Duration::from_secs(60), "backends Ready", || {
        (0..3).all(|i| {
            get(
                &s,
                &["pod", &format!("web-{i}")],
                "{.status.conditions[?(@.type==\"Ready\")].status}",
            ) == "True"
        })
    });
    let ips: Vec<String> = (0..3).map(|i| pod_ip(&s, &format!("web-{i}"))).collect();
    let ips: Vec<&str> = ips.iter().map(String::as_str).collect();
    wait_for_endpoints(&ips, &ips);
    wait_until(
        Duration::from_secs(20),
        "the reject rule for nothing",
        || table().contains(&format!("{nothing} . tcp . 80 : goto reject-chain")),
    );

    // 300 requests from a pod to `http://web` (the name through the cluster DNS,
    // the ClusterIP through the proxy): every backend gets at least 20 %; the
    // Service with no endpoints is refused at once.
    apply(
        &s,
        &client(
            "client",
            &out,
            &format!(
                "for i in $(seq 300); do wget -qO- http://web/ >> /out/web.txt || echo FAIL >> /out/web.txt; done; \
                 start=$(date +%s); timeout 10 wget -qO- http://{nothing}/ 2> /out/nothing.err; \
                 echo $? $(( $(date +%s) - start )) > /out/nothing.txt; \
                 for i in $(seq 20); do wget -qO- http://{node_ip}:{node_port}/ >> /out/np.txt || echo FAIL >> /out/np.txt; done"
            ),
        ),
    );
    wait_until(Duration::from_secs(120), "client done", || {
        get(&s, &["pod", "client"], "{.status.phase}") == "Succeeded"
    });
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
    let counts = tally(read("web.txt").lines().map(String::from));
    assert_eq!(counts.values().sum::<usize>(), 300, "{counts:?}");
    for i in 0..3 {
        let n = counts.get(&format!("web-{i}")).copied().unwrap_or(0);
        assert!(n >= 60, "web-{i} got {n} of 300: {counts:?}");
    }
    let refused = read("nothing.txt");
    let mut parts = refused.split_whitespace();
    let (code, secs) = (
        parts.next(),
        parts.next().and_then(|s| s.parse::<u64>().ok()),
    );
    assert_ne!(code, Some("0"), "{refused}");
    assert!(secs.is_some_and(|s| s <= 2), "not refused fast: {refused}");
    assert!(
        read("nothing.err").contains("refused"),
        "{}",
        read("nothing.err")
    );

    // A pod reaches the NodePort on the node's address too.
    let np = tally(read("np.txt").lines().map(String::from));
    assert!(
        np.keys().all(|k| k.starts_with("web-")) && np.values().sum::<usize>() == 20,
        "{np:?}"
    );

    // Hairpin.
    wait_until(Duration::from_secs(40), "hairpin answer", || {
        read("hairpin.txt").trim() == "hairpin-0"
    });

    // From the node: ClusterIP (output hook), NodePort, no endpoints refused.
    let (code, body, _) = node_curl(&format!("http://{web}/"));
    assert_eq!(code, 0);
    assert!(body.starts_with("web-"), "{body}");
    let by_np = node_requests(&format!("http://{node_ip}:{node_port}/"), 30);
    assert!(
        by_np.keys().all(|k| k.starts_with("web-")) && by_np.len() >= 2,
        "{by_np:?}"
    );
    let (code, _, secs) = node_curl(&format!("http://{nothing}/"));
    assert_eq!(code, 7, "connection refused");
    assert!(secs < 2.0, "{secs}s");

    // ClientIP affinity: the node is one client, so one backend answers.
    let sticky = ip_of("sticky");
    wait_until(
        Duration::from_secs(20),
        "the sticky Service's rules",
        || table().contains(&format!("{sticky} . tcp . 80 : goto service-")),
    );
    let counts = node_requests(&format!("http://{sticky}/"), 20);
    assert_eq!(counts.len(), 1, "{counts:?}");
    assert!(counts.keys().all(|k| k.starts_with("web-")), "{counts:?}");

    // A backend whose readiness fails leaves the rules and gets no requests;
    // it comes back when ready.
    let (code, body, _) = node_curl(&format!("http://{}/cgi-bin/unready", ips[2]));
    assert_eq!((code, body.as_str()), (0, "unready"));
    wait_for_endpoints(&ips[..2], &ips);
    let counts = node_requests(&format!("http://{web}/"), 60);
    assert!(!counts.contains_key("web-2"), "{counts:?}");
    assert_eq!(counts.values().sum::<usize>(), 60);
    assert!(
        counts.contains_key("web-0") && counts.contains_key("web-1"),
        "{counts:?}"
    );
    node_curl(&format!("http://{}/cgi-bin/ready", ips[2]));
    wait_for_endpoints(&ips, &ips);
    let counts = node_requests(&format!("http://{web}/"), 60);
    assert!(counts.contains_key("web-2"), "{counts:?}");

    // A chain deleted by hand (after the rule jumping to it) is repaired by
    // the periodic check (2 s here); so is a deleted table.
    let endpoint = chain_named("endpoint-", &format!("-default/web/tcp/__{}/80", ips[0]));
    let svc_chain = chain_named("service-", "-default/web/tcp/");
    nft(&format!(
        "'flush chain ip {TABLE} {svc_chain}; delete chain ip {TABLE} {endpoint}'"
    ));
    assert!(!table().contains(&endpoint));
    wait_until(Duration::from_secs(10), "the chain repaired", || {
        table().contains(&endpoint)
    });
    nft(&format!("delete table ip {TABLE}"));
    wait_until(Duration::from_secs(10), "the table repaired", || {
        table().contains(&format!("dnat to {}:80", ips[0]))
    });
    let (code, body, _) = node_curl(&format!("http://{web}/"));
    assert_eq!(code, 0);
    assert!(body.starts_with("web-"), "{body}");

    // A clean stop removes the table (pods first, as the harness does).
    s.k(&[
        "delete",
        "pods",
        "--all",
        "--grace-period=1",
        "--wait=true",
        "--timeout=60s",
    ]);
    let mut s = s;
    let _ = Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && matches!(s.child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(matches!(s.child.try_wait(), Ok(Some(_))), "server stopped");
    assert_eq!(table(), "", "table removed on a clean stop");
    drop(s);
    let _ = std::fs::remove_dir_all(&out);
}
