//! The proxy's loop against a canned API (a kube client over an in-memory
//! service) and the fake nft and conntrack: it waits for both lists, writes the
//! whole table once, clears stale UDP entries, and deletes the table on stop.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_proxy::conntrack::{FakeConntrack, Flush};
use berth_proxy::model::NodeConfig;
use berth_proxy::nft::FakeNft;
use bytes::Bytes;
use http_body_util::Full;

const SERVICES: &str = r#"{"apiVersion": "v1", "kind": "ServiceList", "metadata": {"resourceVersion": "5"},
  "items": [{"metadata": {"namespace": "default", "name": "web", "resourceVersion": "3"},
    "spec": {"clusterIP": "10.43.0.5", "ports": [
      {"name": "http", "port": 80, "protocol": "TCP"},
      {"name": "dns", "port": 53, "protocol": "UDP"}]}}]}"#;

const SLICES: &str = r#"{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSliceList", "metadata": {"resourceVersion": "5"},
  "items": [{"metadata": {"namespace": "default", "name": "web-abc", "resourceVersion": "4",
      "labels": {"kubernetes.io/service-name": "web"}},
    "addressType": "IPv4",
    "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "dns", "port": 5353, "protocol": "UDP"}],
    "endpoints": [{"addresses": ["10.42.0.5"], "conditions": {"ready": true}, "nodeName": "n1"}]}]}"#;

/// Lists answer with the canned objects; watches stay open with no events.
fn client() -> kube::Client {
    let svc = tower::service_fn(|req: http::Request<kube::client::Body>| async move {
        let query = req.uri().query().unwrap_or_default().to_string();
        if query.contains("watch=true") {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        let body = if req.uri().path().contains("endpointslices") {
            SLICES
        } else {
            SERVICES
        };
        let resp = http::Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .expect("response");
        Ok::<_, Infallible>(resp)
    });
    kube::Client::new(svc, "default")
}

#[tokio::test]
async fn syncs_once_clears_udp_entries_and_cleans_up() {
    let nft = Arc::new(FakeNft::default());
    let ct = Arc::new(FakeConntrack::default());
    let mut cfg = berth_proxy::Config::new(NodeConfig::new("n1"));
    cfg.min_sync_period = Duration::from_millis(50);
    let proxy = berth_proxy::proxier::start_with(client(), cfg, nft.clone(), ct.clone());
    let deadline = Instant::now() + Duration::from_secs(10);
    while nft.scripts().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let scripts = nft.scripts();
    assert_eq!(scripts.len(), 1, "one whole-table sync: {scripts:?}");
    assert!(scripts[0].starts_with("add table ip berth-proxy\ndelete table ip berth-proxy\n"));
    assert!(scripts[0].contains("meta l4proto tcp dnat to 10.42.0.5:8080"));
    assert!(scripts[0].contains("meta l4proto udp dnat to 10.42.0.5:5353"));
    // Nothing changes: no more transactions.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(nft.scripts().len(), 1);
    // The UDP port got endpoints (first sync): entries to it are cleared.
    let flushed = ct.0.lock().expect("lock").clone();
    assert_eq!(
        flushed,
        vec![Flush::ServiceIp {
            ip: "10.43.0.5".parse().expect("ip"),
            port: 53
        }]
    );
    proxy.shutdown().await;
    let scripts = nft.scripts();
    assert_eq!(
        scripts.last().map(String::as_str),
        Some("add table ip berth-proxy\ndelete table ip berth-proxy\n")
    );
}

#[tokio::test]
async fn a_missing_table_is_rewritten_by_the_periodic_check() {
    // The fake lists no table: every check finds it missing.
    let nft = Arc::new(FakeNft::default());
    let mut cfg = berth_proxy::Config::new(NodeConfig::new("n1"));
    cfg.min_sync_period = Duration::from_millis(50);
    cfg.sync_period = Duration::from_millis(200);
    let proxy = berth_proxy::proxier::start_with(
        client(),
        cfg,
        nft.clone(),
        Arc::new(FakeConntrack::default()),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while nft.scripts().len() < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let scripts = nft.scripts();
    assert!(scripts.len() >= 3, "{} transactions", scripts.len());
    assert!(
        scripts
            .iter()
            .all(|s| s
                .starts_with("add table ip berth-proxy\ndelete table ip berth-proxy\nadd table")),
        "each repair rewrites the whole table"
    );
    proxy.shutdown().await;
}
