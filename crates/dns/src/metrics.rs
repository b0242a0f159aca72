//! Prometheus counters with CoreDNS's metric names (so dashboards built for
//! CoreDNS and node-local-dns read them), served over HTTP at `/metrics`.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tracing::debug;

pub type Labels = Vec<(&'static str, String)>;

/// What both servers count.
pub struct Metrics {
    pub registry: Registry,
    /// coredns_dns_requests_total{proto,type}
    pub requests: Family<Labels, Counter>,
    /// coredns_dns_responses_total{rcode}
    pub responses: Family<Labels, Counter>,
    /// coredns_dns_request_duration_seconds (CoreDNS's buckets: 0.25 ms doubling)
    pub duration: Histogram,
    /// coredns_forward_requests_total{to,proto}
    pub forwards: Family<Labels, Counter>,
    /// coredns_cache_hits_total{type}
    pub cache_hits: Family<Labels, Counter>,
    /// coredns_cache_misses_total
    pub cache_misses: Counter,
    /// coredns_cache_entries
    pub cache_entries: Gauge,
}

impl Metrics {
    /// `cache`: register the cache's metrics too (NodeLocal DNSCache).
    pub fn new(cache: bool) -> Metrics {
        let mut registry = Registry::default();
        let m = Metrics {
            requests: Family::default(),
            responses: Family::default(),
            duration: Histogram::new(exponential_buckets(0.00025, 2.0, 16)),
            forwards: Family::default(),
            cache_hits: Family::default(),
            cache_misses: Counter::default(),
            cache_entries: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register(
            "coredns_dns_requests",
            "Counter of DNS requests made per protocol and type.",
            m.requests.clone(),
        );
        registry.register(
            "coredns_dns_responses",
            "Counter of response status codes.",
            m.responses.clone(),
        );
        registry.register(
            "coredns_dns_request_duration_seconds",
            "Histogram of the time (in seconds) each request took.",
            m.duration.clone(),
        );
        registry.register(
            "coredns_forward_requests",
            "Counter of requests made per upstream (and transport).",
            m.forwards.clone(),
        );
        if cache {
            registry.register(
                "coredns_cache_hits",
                "The count of cache hits (type success or denial).",
                m.cache_hits.clone(),
            );
            registry.register(
                "coredns_cache_misses",
                "The count of cache misses.",
                m.cache_misses.clone(),
            );
            registry.register(
                "coredns_cache_entries",
                "The number of elements in the cache.",
                m.cache_entries.clone(),
            );
        }
        Metrics { registry, ..m }
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Serves `/metrics` (and `/health`) on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let metrics = metrics.clone();
                async move { Ok::<_, Infallible>(respond(req.uri().path(), &metrics)) }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await
            {
                debug!(error = %e, "metrics connection");
            }
        });
    }
}

fn respond(path: &str, metrics: &Metrics) -> Response<Full<Bytes>> {
    let (status, ctype, body) = match path {
        "/metrics" => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.text(),
        ),
        "/health" => (StatusCode::OK, "text/plain", "OK".to_string()),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "404 page not found\n".to_string(),
        ),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    if let Ok(v) = http::HeaderValue::from_str(ctype) {
        resp.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    resp
}

pub fn labels(pairs: &[(&'static str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
}
