//! Leader election: two `berth server`s sharing one etcd run one scheduler and
//! one controller-manager between them; when the leader dies the other takes
//! the Leases over and schedules.

mod common;

use std::time::{Duration, Instant};

use common::{Server, temp_dir};
use serde_json::Value;

fn lease(s: &Server, name: &str) -> Value {
    let (code, l) = s.request(
        "GET",
        &format!("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}"),
        "",
        None,
    );
    if code == 200 { l } else { Value::Null }
}

fn holder(s: &Server, name: &str) -> String {
    lease(s, name)["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Pod bindings this server's API server has answered: the scheduler of a
/// server talks only to its own API server, so this counts its scheduler's work.
fn bindings(s: &Server) -> u64 {
    let out = s.curl(&["-s", &format!("{}/metrics", s.http)]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total")
                && l.contains("resource=\"pods\"")
                && l.contains("subresource=\"binding\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn pod(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}"}},
            "spec":{{"containers":[{{"name":"c","image":"nginx"}}]}}}}"#
    )
}

fn node_of(s: &Server, name: &str) -> Option<String> {
    let (_, p) = s.request(
        "GET",
        &format!("/api/v1/namespaces/default/pods/{name}"),
        "",
        None,
    );
    p["spec"]["nodeName"].as_str().map(String::from)
}

#[test]
fn one_leader_schedules_and_the_other_takes_over() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let etcd = rt
        .block_on(berth_store::etcd_process::EtcdProcess::start())
        .expect("start a real etcd (Debian's etcd-server)");
    let mut s1 = Server::start_with(
        temp_dir("leader1"),
        &["--datastore-endpoint", etcd.endpoint()],
    );
    let h1 = wait_until("s1 to lead", Duration::from_secs(30), || {
        let sched = holder(&s1, "kube-scheduler");
        let cm = holder(&s1, "kube-controller-manager");
        (!sched.is_empty() && !cm.is_empty()).then_some((sched, cm))
    });
    // `<hostname>_<uuid>`, one identity per component.
    let (host, uuid) = h1.0.rsplit_once('_').expect("hostname_uuid");
    assert!(!host.is_empty() && uuid.len() == 36, "{h1:?}");
    let l = lease(&s1, "kube-scheduler");
    assert_eq!(l["spec"]["leaseDurationSeconds"], 15, "{l}");
    assert!(
        l["spec"]["acquireTime"]
            .as_str()
            .is_some_and(|t| t.contains('.')),
        "MicroTime: {l}"
    );

    // The second server (with the only node) contends but does not lead.
    let s2 = Server::start_with(
        temp_dir("leader2"),
        &[
            "--datastore-endpoint",
            etcd.endpoint(),
            "--simulate-nodes",
            "1",
        ],
    );
    wait_until("the simulated node", Duration::from_secs(30), || {
        let (_, n) = s2.request("GET", "/api/v1/nodes/sim-node-0", "", None);
        n["status"]["conditions"].as_array().map(|_| ())
    });
    let (code, _) = s2.request(
        "POST",
        "/api/v1/namespaces/default/pods",
        "application/json",
        Some(&pod("first")),
    );
    assert_eq!(code, 201);
    wait_until("first pod bound", Duration::from_secs(30), || {
        node_of(&s2, "first")
    });
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(holder(&s2, "kube-scheduler"), h1.0);
    assert_eq!(holder(&s2, "kube-controller-manager"), h1.1);
    assert!(bindings(&s1) >= 1, "the leader's scheduler bound the pod");
    assert_eq!(bindings(&s2), 0, "the follower's scheduler must not run");
    let renewed = lease(&s2, "kube-scheduler");
    assert_ne!(
        renewed["spec"]["renewTime"], l["spec"]["renewTime"],
        "the leader renews"
    );
    assert_eq!(renewed["spec"]["acquireTime"], l["spec"]["acquireTime"]);

    // The leader dies: the follower takes both Leases within the lease duration
    // (15 s, counted from its last sight of a renewal) plus a retry or two.
    s1.kill9();
    let killed = Instant::now();
    let h2 = wait_until("s2 to take over", Duration::from_secs(30), || {
        let h = holder(&s2, "kube-scheduler");
        (!h.is_empty() && h != h1.0).then_some(h)
    });
    let took = killed.elapsed();
    assert!(took <= Duration::from_secs(25), "take-over took {took:?}");
    assert!(
        took >= Duration::from_secs(10),
        "took over a live-looking lease after {took:?}"
    );
    let l2 = lease(&s2, "kube-scheduler");
    assert_eq!(l2["spec"]["leaseTransitions"], 1, "{l2}");
    assert_ne!(l2["spec"]["acquireTime"], l["spec"]["acquireTime"]);
    println!("take-over after {took:?} by {h2}");

    let (code, _) = s2.request(
        "POST",
        "/api/v1/namespaces/default/pods",
        "application/json",
        Some(&pod("second")),
    );
    assert_eq!(code, 201);
    let node = wait_until(
        "second pod bound by the new leader",
        Duration::from_secs(30),
        || node_of(&s2, "second"),
    );
    assert_eq!(node, "sim-node-0");
    assert!(bindings(&s2) >= 1, "the new leader's scheduler bound it");
    wait_until(
        "controller-manager lease taken over",
        Duration::from_secs(15),
        || {
            let h = holder(&s2, "kube-controller-manager");
            (!h.is_empty() && h != h1.1).then_some(())
        },
    );

    // A graceful stop (SIGTERM) releases the Leases: a third server leads at
    // once instead of after the lease duration.
    let s3 = Server::start_with(
        temp_dir("leader3"),
        &["--datastore-endpoint", etcd.endpoint()],
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        holder(&s3, "kube-scheduler"),
        h2,
        "s3 must not lead while s2 does"
    );
    let term = std::process::Command::new("kill")
        .args(["-TERM", &s2.child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(term.success());
    let stopped = Instant::now();
    wait_until(
        "s3 to lead after s2's graceful stop",
        Duration::from_secs(12),
        || {
            let h = holder(&s3, "kube-scheduler");
            (!h.is_empty() && h != h2).then_some(())
        },
    );
    assert!(
        stopped.elapsed() < Duration::from_secs(8),
        "took {:?}: the lease was not released",
        stopped.elapsed()
    );
    drop(s2);
    drop(s3);
    drop(etcd);
}
