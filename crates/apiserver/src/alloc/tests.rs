//! The allocator against a real (SQLite) store: no value is handed out
//! twice under concurrency, claims are undone, releases touch only the
//! Service's own records, and repair cleans up after a crash.

use std::sync::Arc;
use std::time::Duration;

use berth_store::Store;
use serde_json::{Value, json};

use super::*;

struct TempStore {
    store: Arc<dyn Store>,
    dir: std::path::PathBuf,
}

impl Drop for TempStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn temp_store(tag: &str) -> TempStore {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let dir =
        std::env::temp_dir().join(format!("berth-alloc-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = berth_store::sqlite::SqliteStore::open(&dir.join("state.db")).unwrap();
    TempStore {
        store: Arc::new(store),
        dir,
    }
}

fn ranges(cidr: &str) -> ServiceRanges {
    ServiceRanges {
        cidr: cidr.parse().unwrap(),
        node_ports: "30000-30009".parse().unwrap(),
    }
}

fn svc(name: &str, spec: Value) -> Value {
    json!({"metadata": {"namespace": "default", "name": name}, "spec": spec})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_dynamic_claims_never_share_an_ip() {
    let t = temp_store("concurrent");
    let alloc = Arc::new(Allocator::new(t.store.clone(), ranges("10.9.0.0/28")));
    let mut tasks = Vec::new();
    for i in 0..30 {
        let alloc = alloc.clone();
        tasks.push(tokio::spawn(async move {
            let mut s = svc(&format!("s{i}"), json!({"type": "ClusterIP"}));
            alloc.prepare_create(&mut s).unwrap();
            match alloc.claim(&mut s, None, false).await {
                Ok(_claims) => Ok(s["spec"]["clusterIP"].as_str().unwrap().to_string()),
                Err(e) => Err(e.message),
            }
        }));
    }
    let mut got = Vec::new();
    let mut full = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(ip) => got.push(ip),
            Err(m) => {
                assert!(m.contains("range is full"), "{m}");
                full += 1;
            }
        }
    }
    // A /28 has 14 usable addresses: each handed out once, the rest refused.
    let unique: std::collections::BTreeSet<_> = got.iter().collect();
    assert_eq!((got.len(), unique.len(), full), (14, 14, 16));
    assert!(!got.contains(&"10.9.0.0".to_string()) && !got.contains(&"10.9.0.15".to_string()));
}

#[tokio::test]
async fn specific_values_undo_and_release() {
    let t = temp_store("specific");
    let alloc = Allocator::new(t.store.clone(), ranges("10.9.0.0/24"));
    let mut a = svc(
        "a",
        json!({"type": "NodePort", "clusterIP": "10.9.0.5", "ports": [{"port": 80, "nodePort": 30001}]}),
    );
    alloc.prepare_create(&mut a).unwrap();
    let claims = alloc.claim(&mut a, None, false).await.unwrap();
    assert_eq!(claims.keys.len(), 2);

    // The same IP for another Service: upstream's message, nothing left claimed.
    let mut b = svc(
        "b",
        json!({"type": "NodePort", "clusterIP": "10.9.0.5", "ports": [{"port": 80}]}),
    );
    alloc.prepare_create(&mut b).unwrap();
    let e = alloc.claim(&mut b, None, false).await.unwrap_err();
    assert!(e.message.ends_with("spec.clusterIPs: Invalid value: []string{\"10.9.0.5\"}: failed to allocate IP 10.9.0.5: provided IP is already allocated"), "{}", e.message);
    // The IP is claimed first, so b holds no node port either.
    assert_eq!(alloc.existing(NODE_PORT_PREFIX).await.unwrap().len(), 1);

    // A dry run claims nothing.
    let mut c = svc("c", json!({"type": "NodePort", "ports": [{"port": 80}]}));
    alloc.prepare_create(&mut c).unwrap();
    let dry = alloc.claim(&mut c, None, true).await.unwrap();
    assert!(dry.keys.is_empty());
    assert!(c["spec"]["clusterIP"].is_string());
    assert_eq!(alloc.existing(IP_PREFIX).await.unwrap().len(), 1);

    // Undo gives back what a failed write claimed.
    let mut d = svc("d", json!({"type": "NodePort", "ports": [{"port": 80}]}));
    alloc.prepare_create(&mut d).unwrap();
    let claims = alloc.claim(&mut d, None, false).await.unwrap();
    alloc.undo(claims).await;
    assert_eq!(alloc.existing(IP_PREFIX).await.unwrap().len(), 1);
    assert_eq!(alloc.existing(NODE_PORT_PREFIX).await.unwrap().len(), 1);

    // Releasing in another Service's name touches nothing; a's own release frees both.
    let imposter = svc("z", a["spec"].clone());
    alloc.release_unused(&imposter, None).await;
    assert_eq!(alloc.existing(IP_PREFIX).await.unwrap().len(), 1);
    alloc.release_unused(&a, None).await;
    assert!(alloc.existing(IP_PREFIX).await.unwrap().is_empty());
    assert!(alloc.existing(NODE_PORT_PREFIX).await.unwrap().is_empty());
}

#[tokio::test]
async fn repair_after_a_crash() {
    let t = temp_store("repair");
    let r = ranges("10.9.0.0/24");
    let alloc = Allocator::new(t.store.clone(), r);
    // A claim whose Service write never happened (the process died between).
    let mut ghost = svc(
        "ghost",
        json!({"type": "ClusterIP", "clusterIP": "10.9.0.7"}),
    );
    alloc.prepare_create(&mut ghost).unwrap();
    let _ = alloc.claim(&mut ghost, None, false).await.unwrap();
    // A stored Service whose record went missing.
    let real = svc(
        "real",
        json!({"type": "ClusterIP", "clusterIP": "10.9.0.8", "clusterIPs": ["10.9.0.8"]}),
    );
    t.store
        .create(
            "/registry/services/default/real",
            serde_json::to_vec(&real).unwrap().into(),
        )
        .await
        .unwrap();
    // Too young to be an orphan: kept.
    let plan = repair::repair_once(t.store.as_ref(), r, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(plan.delete.is_empty());
    assert_eq!(plan.create.len(), 1);
    let plan = repair::repair_once(t.store.as_ref(), r, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(plan.delete.len(), 1);
    let held = alloc.existing(IP_PREFIX).await.unwrap();
    assert_eq!(
        held.into_iter().collect::<Vec<_>>(),
        vec!["10.9.0.8".to_string()]
    );
    // And now 10.9.0.8 is taken for everyone else.
    let mut other = svc(
        "other",
        json!({"type": "ClusterIP", "clusterIP": "10.9.0.8"}),
    );
    alloc.prepare_create(&mut other).unwrap();
    assert!(alloc.claim(&mut other, None, false).await.is_err());
}

#[tokio::test]
async fn node_ports_shared_by_port_number_and_kept_for_load_balancers() {
    let t = temp_store("ports");
    let alloc = Allocator::new(t.store.clone(), ranges("10.9.0.0/24"));
    // 53/TCP and 53/UDP get one node port on create, as upstream.
    let mut dns = svc(
        "dns",
        json!({"type": "NodePort", "ports": [
            {"name": "tcp", "port": 53, "protocol": "TCP"},
            {"name": "udp", "port": 53, "protocol": "UDP"},
            {"name": "metrics", "port": 9153, "protocol": "TCP"}]}),
    );
    alloc.prepare_create(&mut dns).unwrap();
    let _ = alloc.claim(&mut dns, None, false).await.unwrap();
    let np = |s: &Value, i: usize| s["spec"]["ports"][i]["nodePort"].as_i64().unwrap();
    assert_eq!(np(&dns, 0), np(&dns, 1));
    assert_ne!(np(&dns, 0), np(&dns, 2));
    assert_eq!(alloc.existing(NODE_PORT_PREFIX).await.unwrap().len(), 2);

    // allocateLoadBalancerNodePorts: false allocates nothing but honours a request.
    let taken = alloc.existing(NODE_PORT_PREFIX).await.unwrap();
    let free = (30000..=30009)
        .find(|p: &i64| !taken.contains(&p.to_string()))
        .unwrap();
    let mut lb = svc(
        "lb",
        json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false, "ports": [
            {"name": "a", "port": 80, "nodePort": free}, {"name": "b", "port": 81}]}),
    );
    alloc.prepare_create(&mut lb).unwrap();
    let _ = alloc.claim(&mut lb, None, false).await.unwrap();
    assert_eq!(np(&lb, 0), free);
    assert!(lb["spec"]["ports"][1].get("nodePort").is_none());
    assert!(
        alloc
            .existing(NODE_PORT_PREFIX)
            .await
            .unwrap()
            .contains(&free.to_string())
    );
    // And releases it on delete.
    alloc.release_unused(&lb, None).await;
    assert!(
        !alloc
            .existing(NODE_PORT_PREFIX)
            .await
            .unwrap()
            .contains(&free.to_string())
    );
}
