//! `/stats/summary` and `/metrics/resource` on the kubelet server, as
//! upstream's stats handler and resource metrics endpoint answer them.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};

use super::Deps;
use super::streams::{Body, text};
use crate::stats::{SummaryOptions, prometheus, summary};

/// Upstream's flag test: exactly one `only_cpu_and_memory`, and it is `true`.
pub fn only_cpu_and_memory(q: &[(String, String)]) -> bool {
    let mut values = q.iter().filter(|(k, _)| k == "only_cpu_and_memory");
    matches!((values.next(), values.next()), (Some((_, v)), None) if v == "true")
}

fn body(content_type: &'static str, bytes: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(bytes)).boxed());
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// `GET|POST /stats/summary[?only_cpu_and_memory=true]`.
pub async fn summary(deps: &Deps, q: &[(String, String)]) -> Response<Body> {
    let opts = SummaryOptions {
        only_cpu_and_memory: only_cpu_and_memory(q),
        // Berth has no eviction manager refreshing the rates: each summary
        // request is the next window (see `stats::cpu`).
        update_cpu: true,
    };
    let result = deps.stats.summary(opts).await;
    match result.map(|s| summary::to_json(&s)) {
        Ok(Ok(json)) => body("application/json", json),
        Ok(Err(e)) => internal_error(&e.to_string()),
        Err(e) => internal_error(&e.to_string()),
    }
}

fn internal_error(e: &str) -> Response<Body> {
    tracing::warn!(error = %e, "serving /stats/summary");
    text(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("Internal Error: {e}"),
    )
}

/// `GET /metrics/resource`: a failed summary is `resource_scrape_error 1`,
/// still with status 200, as upstream's collector reports it.
pub async fn resource_metrics(deps: &Deps) -> Response<Body> {
    let opts = SummaryOptions {
        only_cpu_and_memory: true,
        update_cpu: false,
    };
    let summary = match deps.stats.summary(opts).await {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "Error getting summary for resourceMetric prometheus endpoint");
            None
        }
    };
    body(
        prometheus::CONTENT_TYPE,
        prometheus::render(summary.as_ref()).into_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_and_memory_flag() {
        let q = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let cases = [
            (q(&[("only_cpu_and_memory", "true")]), true),
            (q(&[("only_cpu_and_memory", "1")]), false),
            (q(&[("only_cpu_and_memory", "True")]), false),
            (
                q(&[
                    ("only_cpu_and_memory", "true"),
                    ("only_cpu_and_memory", "true"),
                ]),
                false,
            ),
            (q(&[("x", "true")]), false),
            (q(&[]), false),
        ];
        for (query, want) in cases {
            assert_eq!(only_cpu_and_memory(&query), want, "{query:?}");
        }
    }
}
