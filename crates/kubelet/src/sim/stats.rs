//! Synthetic usage for simulated nodes, so the metrics pipeline and the HPA can
//! run at scale without containers: each running container of a simulated pod
//! uses what its pod's annotations say, and the simulator serves every node's
//! `/metrics/resource` and `/stats/summary` (the real node agent's renderers)
//! on one HTTPS listener on loopback, at `/nodes/<node>/…`. Each node names
//! its base URL in the [`STATS_ENDPOINT_ANNOTATION`]; the metrics server
//! scrapes that instead of the node's (absent) kubelet port.
//!
//! | annotation (on the pod) | effect |
//! | --- | --- |
//! | `sim.berth.dev/cpu: "250m"` | each container uses 250 millicores (default 0) |
//! | `sim.berth.dev/memory: "64Mi"` | each container's working set (default 1 MiB) |
//!
//! CPU counters are cumulative and continuous: a changed annotation changes the
//! rate from the moment the simulator sees it. The listener is loopback-only
//! and does not authenticate (the figures are synthetic).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_api::quantity::Quantity;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::debug;

use crate::stats::prometheus;
use crate::stats::summary::{
    ContainerStats, CpuStats, MemoryStats, NodeStats, PodReference, PodStats, Summary,
};

pub const CPU_ANNOTATION: &str = "sim.berth.dev/cpu";
pub const MEMORY_ANNOTATION: &str = "sim.berth.dev/memory";
/// On simulated Nodes: the base URL of their stats (`https://127.0.0.1:P/nodes/<name>`).
pub const STATS_ENDPOINT_ANNOTATION: &str = "sim.berth.dev/stats-endpoint";

const DEFAULT_MEMORY: u64 = 1 << 20;
/// What a simulated node itself uses besides its pods.
const NODE_BASE_MEMORY: u64 = 128 << 20;
/// How long a node → pods index is reused across the scrapes of one round.
const INDEX_TTL: Duration = Duration::from_secs(1);

/// A container's cumulative CPU: `total` core-nanoseconds at `since`, growing at `rate`.
#[derive(Debug, Clone, Copy)]
struct Counter {
    rate: u64,
    total: f64,
    since: DateTime<Utc>,
}

impl Counter {
    fn at(&self, now: DateTime<Utc>) -> u64 {
        let secs = (now - self.since).num_nanoseconds().unwrap_or(0).max(0) as f64 / 1e9;
        (self.total + self.rate as f64 * secs) as u64
    }
}

fn quantity(pod: &Pod, key: &str) -> Option<Quantity> {
    let v = pod.metadata.annotations.as_ref()?.get(key)?;
    Quantity::parse(v).ok().filter(|q| q.sign() >= 0)
}

/// The synthetic usage of every simulated container.
#[derive(Default)]
pub struct Usage {
    counters: Mutex<HashMap<(String, String), Counter>>,
}

impl Usage {
    /// The cumulative CPU of container `c` of `pod` at `now`, folding in a
    /// changed rate. Starts at 1 ns: the metrics pipeline drops zero counters.
    fn cpu(&self, pod: &Pod, c: &str, started: DateTime<Utc>, now: DateTime<Utc>) -> u64 {
        let rate = quantity(pod, CPU_ANNOTATION)
            .map(|q| u64::try_from(q.scaled_value(-9)).unwrap_or(0))
            .unwrap_or(0);
        let key = (pod.metadata.uid.clone().unwrap_or_default(), c.to_string());
        let Ok(mut counters) = self.counters.lock() else {
            return 1;
        };
        let counter = counters.entry(key).or_insert_with(|| {
            // First seen: as if it had used this rate since it started.
            let secs = (now - started).num_nanoseconds().unwrap_or(0).max(0) as f64 / 1e9;
            Counter {
                rate,
                total: 1.0 + rate as f64 * secs,
                since: now,
            }
        });
        if counter.rate != rate {
            *counter = Counter {
                rate,
                total: counter.at(now) as f64,
                since: now,
            };
        }
        counter.at(now)
    }

    /// Forgets containers of pods not in `live` (uids).
    fn retain(&self, live: &HashSet<String>) {
        if let Ok(mut c) = self.counters.lock() {
            c.retain(|(uid, _), _| live.contains(uid));
        }
    }

    /// `node`'s summary at `now` from its running `pods`.
    pub fn summary(
        &self,
        node: &str,
        node_start: DateTime<Utc>,
        pods: &[Arc<Pod>],
        now: DateTime<Utc>,
    ) -> Summary {
        let mut node_cpu: u64 = 1;
        let mut node_memory = NODE_BASE_MEMORY;
        let mut out = Vec::new();
        for pod in pods {
            let status = pod.status.as_ref();
            let started = status
                .and_then(|s| s.start_time.as_ref())
                .map(|t| DateTime::<Utc>::from_timestamp_nanos(t.0.as_nanosecond() as i64))
                .unwrap_or(now);
            let memory = quantity(pod, MEMORY_ANNOTATION)
                .map(|q| u64::try_from(q.value()).unwrap_or(0))
                .unwrap_or(DEFAULT_MEMORY);
            let mut containers = Vec::new();
            let (mut pod_cpu, mut pod_memory) = (0u64, 0u64);
            for cs in status
                .and_then(|s| s.container_statuses.as_ref())
                .into_iter()
                .flatten()
            {
                let Some(running) = cs.state.as_ref().and_then(|s| s.running.as_ref()) else {
                    continue;
                };
                let c_started = running
                    .started_at
                    .as_ref()
                    .map(|t| DateTime::<Utc>::from_timestamp_nanos(t.0.as_nanosecond() as i64))
                    .unwrap_or(started);
                let cpu = self.cpu(pod, &cs.name, c_started, now);
                pod_cpu = pod_cpu.saturating_add(cpu);
                pod_memory = pod_memory.saturating_add(memory);
                containers.push(ContainerStats {
                    name: cs.name.clone(),
                    start_time: Some(c_started),
                    cpu: Some(CpuStats {
                        time: Some(now),
                        usage_nano_cores: None,
                        usage_core_nano_seconds: Some(cpu),
                    }),
                    memory: Some(MemoryStats {
                        time: Some(now),
                        working_set_bytes: Some(memory),
                        usage_bytes: Some(memory),
                        rss_bytes: Some(memory),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }
            if containers.is_empty() {
                continue;
            }
            node_cpu = node_cpu.saturating_add(pod_cpu);
            node_memory = node_memory.saturating_add(pod_memory);
            out.push(PodStats {
                pod_ref: PodReference {
                    name: pod.metadata.name.clone().unwrap_or_default(),
                    namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                    uid: pod.metadata.uid.clone().unwrap_or_default(),
                },
                start_time: Some(started),
                containers,
                cpu: Some(CpuStats {
                    time: Some(now),
                    usage_nano_cores: None,
                    usage_core_nano_seconds: Some(pod_cpu),
                }),
                memory: Some(MemoryStats {
                    time: Some(now),
                    working_set_bytes: Some(pod_memory),
                    usage_bytes: Some(pod_memory),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        Summary {
            node: NodeStats {
                node_name: node.to_string(),
                start_time: Some(node_start),
                cpu: Some(CpuStats {
                    time: Some(now),
                    usage_nano_cores: None,
                    usage_core_nano_seconds: Some(node_cpu),
                }),
                memory: Some(MemoryStats {
                    time: Some(now),
                    working_set_bytes: Some(node_memory),
                    usage_bytes: Some(node_memory),
                    ..Default::default()
                }),
                ..Default::default()
            },
            pods: out,
        }
    }
}

/// Running simulated pods by node, rebuilt at most once per [`INDEX_TTL`].
struct Index {
    built: Option<Instant>,
    by_node: HashMap<String, Vec<Arc<Pod>>>,
}

/// What the stats listener serves from.
pub struct StatsServer {
    pub usage: Usage,
    pods: Store<Pod>,
    nodes: HashSet<String>,
    started: DateTime<Utc>,
    index: Mutex<Index>,
}

fn running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && p.metadata.deletion_timestamp.is_none()
}

impl StatsServer {
    pub fn new(pods: Store<Pod>, nodes: HashSet<String>) -> Self {
        StatsServer {
            usage: Usage::default(),
            pods,
            nodes,
            started: Utc::now(),
            index: Mutex::new(Index {
                built: None,
                by_node: HashMap::new(),
            }),
        }
    }

    fn pods_of(&self, node: &str) -> Vec<Arc<Pod>> {
        let Ok(mut idx) = self.index.lock() else {
            return Vec::new();
        };
        if idx.built.is_none_or(|b| b.elapsed() >= INDEX_TTL) {
            let mut by_node: HashMap<String, Vec<Arc<Pod>>> = HashMap::new();
            let mut live = HashSet::new();
            for p in self.pods.state() {
                let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                    continue;
                };
                if self.nodes.contains(&n) && running(&p) {
                    live.insert(p.metadata.uid.clone().unwrap_or_default());
                    by_node.entry(n).or_default().push(p);
                }
            }
            self.usage.retain(&live);
            idx.by_node = by_node;
            idx.built = Some(Instant::now());
        }
        idx.by_node.get(node).cloned().unwrap_or_default()
    }

    fn respond(&self, path: &str) -> Response<Full<Bytes>> {
        let reply = |code: StatusCode, ty: &str, body: Vec<u8>| {
            Response::builder()
                .status(code)
                .header(header::CONTENT_TYPE, ty)
                .body(Full::new(Bytes::from(body)))
                .unwrap_or_default()
        };
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (node, what) = match segs.as_slice() {
            ["nodes", n, "metrics", "resource"] => (*n, "metrics"),
            ["nodes", n, "stats", "summary"] => (*n, "summary"),
            _ => {
                return reply(
                    StatusCode::NOT_FOUND,
                    "text/plain",
                    b"404 page not found".to_vec(),
                );
            }
        };
        if !self.nodes.contains(node) {
            return reply(
                StatusCode::NOT_FOUND,
                "text/plain",
                b"404 page not found".to_vec(),
            );
        }
        let summary = self
            .usage
            .summary(node, self.started, &self.pods_of(node), Utc::now());
        match what {
            "metrics" => reply(
                StatusCode::OK,
                prometheus::CONTENT_TYPE,
                prometheus::render(Some(&summary)).into_bytes(),
            ),
            _ => match crate::stats::summary::to_json(&summary) {
                Ok(b) => reply(StatusCode::OK, "application/json", b),
                Err(e) => reply(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    e.to_string().into_bytes(),
                ),
            },
        }
    }
}

/// A self-signed loopback TLS acceptor.
pub fn acceptor() -> Result<TlsAcceptor, String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let (cert, key_der) = berth_runtime::tls::self_signed(&["127.0.0.1".to_string()], "berth-sim")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|x| e(&x))?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key_der)
        .map_err(|x| e(&x))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(cfg)))
}

/// Serves until the process ends.
pub async fn serve(listener: TcpListener, acceptor: TlsAcceptor, server: Arc<StatsServer>) {
    loop {
        let Ok((tcp, peer)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let (acceptor, server) = (acceptor.clone(), server.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let server = server.clone();
                async move { Ok::<_, std::convert::Infallible>(server.respond(req.uri().path())) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            if let Err(e) = builder.serve_connection(TokioIo::new(tls), svc).await {
                debug!(%peer, error = %e, "simulated stats connection ended");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStatus, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap()
    }

    fn pod(cpu: Option<&str>, memory: Option<&str>) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.name = Some("web".into());
        p.metadata.namespace = Some("default".into());
        p.metadata.uid = Some("u1".into());
        let mut ann = std::collections::BTreeMap::new();
        if let Some(c) = cpu {
            ann.insert(CPU_ANNOTATION.to_string(), c.to_string());
        }
        if let Some(m) = memory {
            ann.insert(MEMORY_ANNOTATION.to_string(), m.to_string());
        }
        p.metadata.annotations = Some(ann);
        let started = Time(k8s_openapi::jiff::Timestamp::from_second(t(0).timestamp()).unwrap());
        p.status = Some(PodStatus {
            phase: Some("Running".into()),
            start_time: Some(started.clone()),
            container_statuses: Some(vec![ContainerStatus {
                name: "c".into(),
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(started),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        Arc::new(p)
    }

    fn cpu_of(s: &Summary) -> u64 {
        s.pods[0].containers[0]
            .cpu
            .as_ref()
            .unwrap()
            .usage_core_nano_seconds
            .unwrap()
    }

    #[test]
    fn counters_follow_the_annotation_continuously() {
        let u = Usage::default();
        let s = u.summary("n", t(0), &[pod(Some("500m"), Some("64Mi"))], t(10));
        // As if 500m since the start 10 s ago (plus the 1 ns floor).
        assert_eq!(cpu_of(&s), 5_000_000_001);
        assert_eq!(
            s.pods[0].memory.as_ref().unwrap().working_set_bytes,
            Some(64 << 20)
        );
        assert_eq!(
            s.node.memory.as_ref().unwrap().working_set_bytes,
            Some((64 << 20) + NODE_BASE_MEMORY)
        );
        // The load doubles, seen at t=20: the old rate counts until then, the
        // new one after (the counter bends, never jumps).
        let s = u.summary("n", t(0), &[pod(Some("1"), None)], t(20));
        assert_eq!(cpu_of(&s), 10_000_000_001);
        let s = u.summary("n", t(0), &[pod(Some("1"), None)], t(30));
        assert_eq!(cpu_of(&s), 20_000_000_001);
        assert_eq!(
            s.pods[0].memory.as_ref().unwrap().working_set_bytes,
            Some(DEFAULT_MEMORY)
        );
        // No annotation: idle, but never a zero counter.
        let u = Usage::default();
        let s = u.summary("n", t(0), &[pod(None, None)], t(30));
        assert_eq!(cpu_of(&s), 1);
        assert_eq!(
            s.node.cpu.as_ref().unwrap().usage_core_nano_seconds,
            Some(2)
        );
    }

    #[test]
    fn rendered_as_the_node_agent_renders() {
        let u = Usage::default();
        let text = prometheus::render(Some(&u.summary(
            "n",
            t(0),
            &[pod(Some("250m"), None)],
            t(4),
        )));
        assert!(text.contains("container_cpu_usage_seconds_total{container=\"c\",namespace=\"default\",pod=\"web\"} 1.000000001 "), "{text}");
        assert!(text.contains("container_memory_working_set_bytes{container=\"c\",namespace=\"default\",pod=\"web\"} 1.048576e+06 "), "{text}");
    }
}
