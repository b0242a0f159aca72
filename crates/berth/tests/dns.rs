//! Cluster DNS and NodeLocal DNSCache end to end: a `berth server` serving DNS on
//! loopback ports, pods on simulated nodes (IPs, readiness, EndpointSlices from
//! the controllers), queries over UDP and TCP from a hickory-proto client.
//! Names outside the cluster go to a fake upstream on loopback, never further.

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use common::Server;
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{Name, RData, Record, RecordType};

const APPS: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: busybox:latest
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
---
apiVersion: v1
kind: Service
metadata:
  name: web-headless
spec:
  clusterIP: None
  selector: {app: web}
  ports:
  - name: http
    port: 80
    targetPort: http
---
apiVersion: v1
kind: Service
metadata:
  name: db
spec:
  clusterIP: None
  selector: {app: db}
  ports:
  - name: pg
    port: 5432
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 2
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: db
        image: busybox:latest
---
apiVersion: v1
kind: Service
metadata:
  name: ext
spec:
  type: ExternalName
  externalName: example.test
";

/// A port free on loopback for both UDP and TCP (DNS serves both on one port).
fn free_port() -> u16 {
    loop {
        let udp = UdpSocket::bind("127.0.0.1:0").expect("udp");
        let port = udp.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn question(name: &str, t: RecordType) -> Message {
    let mut m = Message::query();
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), t));
    m
}

fn udp(server: SocketAddr, raw: &[u8]) -> Option<Vec<u8>> {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    sock.send_to(raw, server).unwrap();
    let mut buf = vec![0u8; 65535];
    let (n, _) = sock.recv_from(&mut buf).ok()?;
    Some(buf[..n].to_vec())
}

fn query(server: SocketAddr, name: &str, t: RecordType) -> Message {
    let q = question(name, t);
    let raw = udp(server, &q.to_vec().unwrap()).expect("a UDP answer");
    let m = Message::from_vec(&raw).expect("answer parses");
    assert_eq!(m.metadata.id, q.metadata.id);
    m
}

fn query_tcp(server: SocketAddr, name: &str, t: RecordType) -> Message {
    let q = question(name, t).to_vec().unwrap();
    let mut s = TcpStream::connect(server).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut frame = (q.len() as u16).to_be_bytes().to_vec();
    frame.extend_from_slice(&q);
    s.write_all(&frame).unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    Message::from_vec(&body).unwrap()
}

fn a_records(m: &Message) -> BTreeSet<String> {
    a_of(&m.answers)
}

fn a_of(records: &[Record]) -> BTreeSet<String> {
    records
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.0.to_string()),
            _ => None,
        })
        .collect()
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("timed out waiting for {what}");
}

fn pod_ips(s: &Server, selector: &str) -> BTreeSet<String> {
    s.k(&[
        "get",
        "pods",
        "-l",
        selector,
        "-o",
        "jsonpath={range .items[*]}{.status.podIP}{\"\\n\"}{end}",
    ])
    .lines()
    .filter(|l| !l.is_empty())
    .map(str::to_string)
    .collect()
}

fn metric(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn metrics(s: &Server, addr: SocketAddr) -> String {
    let out = s.curl(&["-s", &format!("http://{addr}/metrics")]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fake upstream resolver on loopback: answers every A question with 192.0.2.1
/// (TEST-NET-1), other types with no records, and counts what it got.
fn fake_upstream() -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = sock.local_addr().unwrap();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = seen.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 4096];
        while let Ok((n, peer)) = sock.recv_from(&mut buf) {
            let Ok(req) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut resp = Message::response(req.metadata.id, req.metadata.op_code);
            resp.metadata.recursion_desired = req.metadata.recursion_desired;
            resp.metadata.recursion_available = true;
            resp.queries = req.queries.clone();
            if let Some(q) = req
                .queries
                .first()
                .filter(|q| q.query_type() == RecordType::A)
            {
                resp.add_answer(Record::from_rdata(
                    q.name().clone(),
                    60,
                    RData::A(A::new(192, 0, 2, 1)),
                ));
            }
            let _ = sock.send_to(&resp.to_vec().unwrap(), peer);
        }
    });
    (addr, seen)
}

#[test]
fn cluster_dns_serves_services_endpoints_pods_and_errors() {
    let (dns_port, metrics_port) = (free_port(), free_port());
    let (upstream, upstream_seen) = fake_upstream();
    let dns: SocketAddr = format!("127.0.0.1:{dns_port}").parse().unwrap();
    let metrics_addr: SocketAddr = format!("127.0.0.1:{metrics_port}").parse().unwrap();
    let s = Server::start_with(
        common::temp_dir("dns"),
        &[
            "--simulate-nodes",
            "2",
            "--cluster-dns-bind",
            &dns.to_string(),
            "--cluster-dns-metrics-bind",
            &metrics_addr.to_string(),
            "--cluster-dns-upstream",
            &upstream.to_string(),
        ],
    );
    s.kubectl_stdin(&["apply", "-f", "-"], Some(APPS));
    wait_for("2 web pods with IPs", Duration::from_secs(60), || {
        pod_ips(&s, "app=web").len() == 2
    });
    wait_for("2 db pods with IPs", Duration::from_secs(60), || {
        pod_ips(&s, "app=db").len() == 2
    });
    let cluster_ip = s.k(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]);

    // The kube-dns Service at --cluster-dns, as k3s's.
    wait_for("the kube-dns Service", Duration::from_secs(20), || {
        s.kubectl(&["get", "svc", "-n", "kube-system", "kube-dns"])
            .status
            .success()
    });
    let kube_dns = s.k(&[
        "get",
        "svc",
        "-n",
        "kube-system",
        "kube-dns",
        "-o",
        "jsonpath={.spec.clusterIP} {.metadata.labels.k8s-app} {.spec.ports[*].name}",
    ]);
    assert_eq!(kube_dns, "10.43.0.10 kube-dns dns dns-tcp metrics");

    // A ClusterIP Service: its ClusterIP, over UDP and TCP.
    let web = "web.default.svc.cluster.local.";
    wait_for("web's A record", Duration::from_secs(20), || {
        a_records(&query(dns, web, RecordType::A)) == BTreeSet::from([cluster_ip.clone()])
    });
    let m = query(dns, web, RecordType::A);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(m.metadata.authoritative);
    assert_eq!(m.answers[0].ttl, 5);
    assert_eq!(
        a_records(&query_tcp(dns, web, RecordType::A)),
        BTreeSet::from([cluster_ip.clone()])
    );

    // Headless: every ready pod's IP; SRV per endpoint with the port name.
    let web_ips = pod_ips(&s, "app=web");
    wait_for("headless A records", Duration::from_secs(20), || {
        a_records(&query(
            dns,
            "web-headless.default.svc.cluster.local.",
            RecordType::A,
        )) == web_ips
    });
    let srv = query(
        dns,
        "_http._tcp.web-headless.default.svc.cluster.local.",
        RecordType::SRV,
    );
    let ports: Vec<u16> = srv
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::SRV(s) => Some(s.port),
            _ => None,
        })
        .collect();
    assert_eq!(ports, vec![8080, 8080], "{srv:?}");
    assert_eq!(a_of(&srv.additionals), web_ips);
    // The ClusterIP Service's SRV: the Service port, targeting the Service name.
    let srv = query(
        dns,
        "_http._tcp.web.default.svc.cluster.local.",
        RecordType::SRV,
    );
    let RData::SRV(rec) = &srv.answers[0].data else {
        panic!("no SRV: {srv:?}")
    };
    assert_eq!((rec.port, rec.target.to_ascii()), (80, web.to_string()));

    // StatefulSet pods: hostname.subdomain records.
    let db0_ip = s.k(&["get", "pod", "db-0", "-o", "jsonpath={.status.podIP}"]);
    wait_for("db-0's record", Duration::from_secs(30), || {
        a_records(&query(
            dns,
            "db-0.db.default.svc.cluster.local.",
            RecordType::A,
        )) == BTreeSet::from([db0_ip.clone()])
    });

    // Pod records.
    let pod_ip = web_ips.iter().next().unwrap().clone();
    let pod_name = format!("{}.default.pod.cluster.local.", pod_ip.replace('.', "-"));
    assert_eq!(
        a_records(&query(dns, &pod_name, RecordType::A)),
        BTreeSet::from([pod_ip.clone()])
    );

    // PTR for the ClusterIP and for a StatefulSet pod.
    let reverse = |ip: &str| {
        let mut parts: Vec<&str> = ip.split('.').collect();
        parts.reverse();
        format!("{}.in-addr.arpa.", parts.join("."))
    };
    let ptr = |m: &Message| match m.answers.first().map(|r| &r.data) {
        Some(RData::PTR(p)) => p.0.to_ascii(),
        other => panic!("no PTR: {other:?}"),
    };
    assert_eq!(
        ptr(&query(dns, &reverse(&cluster_ip), RecordType::PTR)),
        web
    );
    assert_eq!(
        ptr(&query(dns, &reverse(&db0_ip), RecordType::PTR)),
        "db-0.db.default.svc.cluster.local."
    );

    // ExternalName: a CNAME, and the target's addresses from the upstream
    // (stub resolvers do not follow CNAMEs themselves).
    let m = query(dns, "ext.default.svc.cluster.local.", RecordType::A);
    assert!(
        matches!(&m.answers[0].data, RData::CNAME(c) if c.0.to_ascii() == "example.test."),
        "{m:?}"
    );
    assert_eq!(a_records(&m), BTreeSet::from(["192.0.2.1".to_string()]));
    assert_eq!(m.answers[1].name.to_ascii(), "example.test.");

    // Unknown names in the cluster domain: NXDOMAIN with the SOA, TTL 5.
    let m = query(dns, "nothere.default.svc.cluster.local.", RecordType::A);
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert!(m.answers.is_empty());
    let RData::SOA(soa) = &m.authorities[0].data else {
        panic!("no SOA: {m:?}")
    };
    assert_eq!((m.authorities[0].ttl, soa.minimum), (5, 5));
    // A known name without that type: NODATA.
    let m = query(dns, web, RecordType::AAAA);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(m.answers.is_empty() && !m.authorities.is_empty());

    // Other names go to the upstream (a fake one on loopback).
    let m = query(dns, "www.example.test.", RecordType::A);
    assert_eq!(a_records(&m), BTreeSet::from(["192.0.2.1".to_string()]));
    assert_eq!(upstream_seen.load(std::sync::atomic::Ordering::SeqCst), 2);

    // Malformed queries: FORMERR with the query's ID; the server keeps serving.
    let garbage = [
        0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0x3f, b'a',
    ];
    let reply = udp(dns, &garbage).expect("a FORMERR reply");
    let m = Message::from_vec(&reply).unwrap();
    assert_eq!(m.metadata.id, 0x1234);
    assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
    assert!(
        udp(dns, &[1, 2, 3]).is_none(),
        "no reply to a 3-byte datagram"
    );
    assert_eq!(
        a_records(&query(dns, web, RecordType::A)),
        BTreeSet::from([cluster_ip.clone()])
    );

    // Answers follow changes: a deleted Service goes away.
    s.k(&["delete", "svc", "web"]);
    wait_for("web's NXDOMAIN", Duration::from_secs(20), || {
        query(dns, web, RecordType::A).metadata.response_code == ResponseCode::NXDomain
    });

    let text = metrics(&s, metrics_addr);
    assert!(
        metric(&text, "coredns_dns_responses_total{rcode=\"NXDOMAIN\"}") >= 2.0,
        "{text}"
    );
    assert!(
        metric(&text, "coredns_dns_responses_total{rcode=\"FORMERR\"}") >= 1.0,
        "{text}"
    );
    assert!(
        metric(&text, "coredns_dns_requests_total{proto=\"tcp\"") >= 1.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, "coredns_forward_requests_total"),
        2.0,
        "{text}"
    );
    assert!(
        metric(&text, "coredns_dns_request_duration_seconds_count") >= 10.0,
        "{text}"
    );
}

#[test]
fn node_local_cache_hits_expires_denials_and_asks_over_tcp() {
    let (dns_port, dns_metrics, cache_port, cache_metrics) =
        (free_port(), free_port(), free_port(), free_port());
    let dns: SocketAddr = format!("127.0.0.1:{dns_port}").parse().unwrap();
    let cache: SocketAddr = format!("127.0.0.1:{cache_port}").parse().unwrap();
    let dns_metrics: SocketAddr = format!("127.0.0.1:{dns_metrics}").parse().unwrap();
    let cache_metrics: SocketAddr = format!("127.0.0.1:{cache_metrics}").parse().unwrap();
    let (upstream, _) = fake_upstream();
    let s = Server::start_with(
        common::temp_dir("nodelocaldns"),
        &[
            "--cluster-dns-bind",
            &dns.to_string(),
            "--cluster-dns-metrics-bind",
            &dns_metrics.to_string(),
            "--cluster-dns-upstream",
            &upstream.to_string(),
            "--node-local-dns",
            "--node-local-dns-bind",
            &cache.to_string(),
            "--node-local-dns-upstream",
            &dns.to_string(),
            "--node-local-dns-metrics-bind",
            &cache_metrics.to_string(),
        ],
    );
    s.k(&["create", "service", "clusterip", "web", "--tcp=80:8080"]);
    let cluster_ip = s.k(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]);
    let web = "web.default.svc.cluster.local.";
    wait_for(
        "web's A record at the cluster DNS",
        Duration::from_secs(20),
        || a_records(&query(dns, web, RecordType::A)) == BTreeSet::from([cluster_ip.clone()]),
    );
    let tcp_before = metric(
        &metrics(&s, dns_metrics),
        "coredns_dns_requests_total{proto=\"tcp\"",
    );

    // A miss, then a hit: same answer, TTL no higher than the cluster DNS gave.
    let first = query(cache, web, RecordType::A);
    assert_eq!(a_records(&first), BTreeSet::from([cluster_ip.clone()]));
    let second = query(cache, web, RecordType::A);
    assert_eq!(a_records(&second), BTreeSet::from([cluster_ip.clone()]));
    assert!(second.answers[0].ttl <= 5);
    let text = metrics(&s, cache_metrics);
    assert_eq!(
        metric(&text, "coredns_cache_hits_total{type=\"success\"}"),
        1.0,
        "{text}"
    );
    assert_eq!(metric(&text, "coredns_cache_misses_total"), 1.0, "{text}");
    // The miss went to the cluster DNS over TCP, and only the miss.
    assert_eq!(
        metric(&text, "coredns_forward_requests_total{to=\""),
        1.0,
        "{text}"
    );
    assert!(text.contains("proto=\"tcp\""), "{text}");
    let tcp_after = metric(
        &metrics(&s, dns_metrics),
        "coredns_dns_requests_total{proto=\"tcp\"",
    );
    assert_eq!(tcp_after - tcp_before, 1.0);

    // A negative answer is kept 5 s: answered from the cache at once, and a
    // Service created meanwhile is not seen through the cache until then.
    let late = "late.default.svc.cluster.local.";
    let asked = Instant::now();
    assert_eq!(
        query(cache, late, RecordType::A).metadata.response_code,
        ResponseCode::NXDomain
    );
    assert_eq!(
        query(cache, late, RecordType::A).metadata.response_code,
        ResponseCode::NXDomain
    );
    let text = metrics(&s, cache_metrics);
    assert_eq!(
        metric(&text, "coredns_cache_hits_total{type=\"denial\"}"),
        1.0,
        "{text}"
    );
    s.k(&["create", "service", "clusterip", "late", "--tcp=80:8080"]);
    wait_for("late at the cluster DNS", Duration::from_secs(20), || {
        query(dns, late, RecordType::A).metadata.response_code == ResponseCode::NoError
    });
    // (Only checkable while the 5 s last: a slow machine skips this step.)
    if asked.elapsed() < Duration::from_millis(4500) {
        let m = query(cache, late, RecordType::A);
        assert_eq!(
            m.metadata.response_code,
            ResponseCode::NXDomain,
            "still cached"
        );
    }
    std::thread::sleep(
        Duration::from_secs(5).saturating_sub(asked.elapsed()) + Duration::from_millis(300),
    );
    let m = query(cache, late, RecordType::A);
    assert_eq!(
        m.metadata.response_code,
        ResponseCode::NoError,
        "expired after 5 s"
    );
    assert_eq!(a_records(&m).len(), 1);

    // Malformed input to the cache: FORMERR, and it keeps serving.
    let garbage = [0xBE, 0xEF, 0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0x3f];
    let m = Message::from_vec(&udp(cache, &garbage).expect("reply")).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
    assert_eq!(
        a_records(&query_tcp(cache, web, RecordType::A)),
        BTreeSet::from([cluster_ip])
    );
}

/// A server with the real node agent (containerd, CNI), its Node Ready. Names
/// outside the cluster (busybox's nslookup walks the search path down to the
/// bare name) go to a fake upstream on loopback.
fn agent_server(tag: &str, extra: &[&str]) -> Server {
    let (upstream, _) = fake_upstream();
    let upstream = upstream.to_string();
    let mut args = vec!["--cluster-dns-upstream", upstream.as_str()];
    args.extend_from_slice(extra);
    let s = Server::start_with_agent_args(tag, &args);
    s.wait_node_ready(Duration::from_secs(90));
    s
}

/// Runs `script` in a busybox pod to completion; returns whether it succeeded
/// and what it printed.
fn run_pod(s: &Server, name: &str, script: &str) -> (bool, String) {
    let yaml = format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox:latest
    command: [\"sh\", \"-c\", {script:?}]
"
    );
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&yaml));
    let mut phase = String::new();
    wait_for("the pod to finish", Duration::from_secs(90), || {
        phase = s.k(&["get", "pod", name, "-o", "jsonpath={.status.phase}"]);
        phase == "Succeeded" || phase == "Failed"
    });
    let logs = String::from_utf8_lossy(&s.kubectl(&["logs", name]).stdout).into_owned();
    (phase == "Succeeded", logs)
}

/// busybox's nslookup of `names`, retried until each answer names `ip`.
fn lookup_script(names: &[&str], ip: &str, prelude: &str) -> String {
    let checks: Vec<(String, Vec<String>)> = names
        .iter()
        .map(|n| (n.to_string(), vec![ip.to_string()]))
        .collect();
    checks_script(&checks, prelude)
}

/// Runs each `nslookup ARGS` until its output has every token (whole words),
/// retrying the lot for 30 s.
fn checks_script(checks: &[(String, Vec<String>)], prelude: &str) -> String {
    let body: Vec<String> = checks
        .iter()
        .map(|(args, tokens)| {
            let greps: Vec<String> = tokens
                .iter()
                .map(|t| format!("grep -qwF {t} /tmp/out || ok=0;"))
                .collect();
            format!(
                "nslookup {args} > /tmp/out 2>&1; cat /tmp/out; {}",
                greps.join(" ")
            )
        })
        .collect();
    format!(
        "{prelude} for i in $(seq 1 30); do ok=1; {} [ $ok = 1 ] && exit 0; sleep 1; done; exit 1",
        body.join(" ")
    )
}

/// Issue 6's acceptance: from a busybox pod, the Service's full name and its
/// short name (resolv.conf search path) resolve to the ClusterIP, through
/// 10.43.0.10, which the service proxy sends to the cluster DNS; a headless
/// Service resolves to every ready pod's IP and its SRV records carry the port.
#[test]
fn pod_resolves_service_names_through_the_cluster_dns() {
    let s = agent_server("dns-pod", &[]);
    s.k(&["create", "service", "clusterip", "web", "--tcp=80:80"]);
    let ip = s.k(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]);
    let backends = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: db
spec:
  replicas: 2
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: busybox:latest
        command: [sleep, '3600']
        ports:
        - {name: pg, containerPort: 5432}
---
apiVersion: v1
kind: Service
metadata:
  name: db
spec:
  clusterIP: None
  selector: {app: db}
  ports:
  - {name: pg, port: 5432}
";
    s.kubectl_stdin(&["apply", "-f", "-"], Some(backends));
    let mut db_ips = BTreeSet::new();
    wait_for("2 running db pods", Duration::from_secs(90), || {
        let phases = s.k(&[
            "get",
            "pods",
            "-l",
            "app=db",
            "-o",
            "jsonpath={.items[*].status.phase}",
        ]);
        db_ips = pod_ips(&s, "app=db");
        phases == "Running Running" && db_ips.len() == 2
    });
    let db_ips: Vec<String> = db_ips.into_iter().collect();
    let checks = vec![
        (
            "web.default.svc.cluster.local".to_string(),
            vec![ip.clone()],
        ),
        ("web".to_string(), vec![ip.clone()]),
        ("db".to_string(), db_ips.clone()),
        (
            "-type=srv _pg._tcp.db.default.svc.cluster.local".to_string(),
            vec!["5432".to_string()],
        ),
    ];
    let (ok, logs) = run_pod(&s, "lookup", &checks_script(&checks, ""));
    assert!(
        ok,
        "pod lookups did not return web {ip} and db {db_ips:?}:\n{logs}"
    );
}

/// NodeLocal DNSCache on a real node: pods' nameserver is 169.254.20.10 (the
/// `nodelocaldns` dummy interface, or lo), repeated lookups hit the cache, misses go to
/// the cluster DNS over TCP, and the interface goes away with the server.
#[test]
fn pods_use_node_local_dns_cache() {
    let s = agent_server("dns-nodelocal", &["--node-local-dns"]);
    s.k(&["create", "service", "clusterip", "web", "--tcp=80:80"]);
    let ip = s.k(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]);
    let names = [
        "web.default.svc.cluster.local",
        "web.default.svc.cluster.local",
    ];
    let prelude =
        "grep -q 'nameserver 169.254.20.10' /etc/resolv.conf || { cat /etc/resolv.conf; exit 1; };";
    let (ok, logs) = run_pod(&s, "cached", &lookup_script(&names, &ip, prelude));
    assert!(ok, "lookups through the cache failed:\n{logs}");
    let text = String::from_utf8_lossy(&s.curl(&["-s", "http://127.0.0.1:9253/metrics"]).stdout)
        .into_owned();
    assert!(metric(&text, "coredns_cache_hits_total") >= 1.0, "{text}");
    assert!(
        metric(
            &text,
            "coredns_forward_requests_total{to=\"10.43.0.10:53\",proto=\"tcp\"}"
        ) >= 1.0,
        "{text}"
    );
    drop(s);
    // The address (on the nodelocaldns dummy link, or on lo where the kernel has
    // no dummy links) goes with the server.
    let addrs = std::process::Command::new("ip")
        .args(["-o", "addr", "show"])
        .output()
        .expect("ip");
    let addrs = String::from_utf8_lossy(&addrs.stdout);
    assert!(!addrs.contains("169.254.20.10"), "left behind:\n{addrs}");
}
