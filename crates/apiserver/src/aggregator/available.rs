//! Upstream's APIService availability controller: local APIServices are always
//! Available; a remote one is Available when its Service exists, has a ready
//! endpoint for the port, and answers its group-version's discovery document
//! (which discovery then merges). Checked every 10 s, and as soon as an
//! APIService, Service or EndpointSlice changes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use super::{Remote, available_condition, remote_of};
use crate::objects;
use crate::request::{Query, ResourcePath};
use crate::server::State;

const INTERVAL: Duration = Duration::from_secs(10);
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5);

/// The Available condition a check arrived at.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Verdict {
    available: bool,
    reason: String,
    message: String,
}

fn verdict(available: bool, reason: &str, message: String) -> Verdict {
    Verdict {
        available,
        reason: reason.to_string(),
        message,
    }
}

/// Runs for the life of the server.
pub async fn run(state: Arc<State>) {
    let watched = [
        "apiservices.apiregistration.k8s.io",
        "services",
        "endpointslices.discovery.k8s.io",
    ];
    loop {
        let seen: Vec<i64> = watched
            .iter()
            .map(|r| state.rest.cache.resource_revision(r))
            .collect();
        check_all(&state).await;
        let started = tokio::time::Instant::now();
        while started.elapsed() < INTERVAL {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now: Vec<i64> = watched
                .iter()
                .map(|r| state.rest.cache.resource_revision(r))
                .collect();
            if now != seen {
                break;
            }
        }
    }
}

async fn check_all(state: &State) {
    for obj in super::all(&state.rest) {
        let v = match remote_of(&obj) {
            None => verdict(
                true,
                "Local",
                "Local APIServices are always available".into(),
            ),
            Some(r) => {
                let (v, doc) = check(state, &r).await;
                let openapi = match &doc {
                    Some(_) => openapi_entry(state, &r).await,
                    None => None,
                };
                super::set_discovery(&r.group, &r.version, doc);
                super::set_openapi(&r.group, &r.version, openapi);
                v
            }
        };
        let unchanged = available_condition(&obj).is_some_and(|c| {
            c.get("status").and_then(Value::as_str)
                == Some(if v.available { "True" } else { "False" })
                && c.get("reason").and_then(Value::as_str) == Some(v.reason.as_str())
                && c.get("message").and_then(Value::as_str) == Some(v.message.as_str())
        });
        if !unchanged {
            write(state, obj, &v).await;
        }
    }
}

async fn write(state: &State, mut obj: Value, v: &Verdict) {
    let status_str = if v.available { "True" } else { "False" };
    let moved = available_condition(&obj)
        .is_none_or(|c| c.get("status").and_then(Value::as_str) != Some(status_str));
    let at = match available_condition(&obj)
        .and_then(|c| c.get("lastTransitionTime"))
        .cloned()
    {
        Some(t) if !moved => t,
        _ => json!(objects::now_rfc3339()),
    };
    let cond = json!({"type": "Available", "status": status_str, "lastTransitionTime": at,
                      "reason": v.reason, "message": v.message});
    let mut conditions: Vec<Value> = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some("Available"));
    conditions.insert(0, cond);
    obj["status"] = json!({"conditions": conditions});
    let Some(rt) = berth_api::registry::lookup("apiregistration.k8s.io", "v1", "apiservices")
    else {
        return;
    };
    let rp = ResourcePath {
        rt,
        namespace: None,
        name: objects::name(&obj).map(String::from),
        subresource: Some("status".into()),
        legacy_watch: false,
    };
    if let Err(e) = state.rest.update(&rp, obj, &Query::default()).await {
        tracing::debug!(error = %e.message, "APIService status");
    }
}

/// Upstream's checks and their reasons, in order.
async fn check(state: &State, r: &Remote) -> (Verdict, Option<Value>) {
    let cache = &state.rest.cache;
    let Some(svc) = cache
        .get(&format!("/registry/services/{}/{}", r.namespace, r.service))
        .and_then(|s| objects::decode_at(&s.bytes, s.mod_revision).ok())
    else {
        return (
            verdict(
                false,
                "ServiceNotFound",
                format!(
                    "service/{} in \"{}\" is not present",
                    r.service, r.namespace
                ),
            ),
            None,
        );
    };
    let port_name = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .and_then(|ps| {
            ps.iter()
                .find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(r.port)))
        })
        .map(|p| {
            p.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        });
    let Some(port_name) = port_name else {
        return (
            verdict(
                false,
                "ServicePortError",
                format!(
                    "service/{} in \"{}\" is not listening on port {}",
                    r.service, r.namespace, r.port
                ),
            ),
            None,
        );
    };
    let addr = match crate::endpoints::resolve_service(cache, &r.namespace, &r.service, r.port) {
        Ok(a) => a,
        Err(_) => {
            return (
                verdict(
                    false,
                    "MissingEndpoints",
                    format!(
                        "endpoints for service/{} in \"{}\" have no addresses with port name \"{port_name}\"",
                        r.service, r.namespace
                    ),
                ),
                None,
            );
        }
    };
    let url = format!("https://{addr}/apis/{}/{}", r.group, r.version);
    match tokio::time::timeout(DISCOVERY_TIMEOUT, discover(state, r)).await {
        Ok(Ok(doc)) => (
            verdict(true, "Passed", "all checks passed".into()),
            Some(doc),
        ),
        Ok(Err(e)) => (
            verdict(
                false,
                "FailedDiscoveryCheck",
                format!("failing or missing response from {url}: {e}"),
            ),
            None,
        ),
        Err(_) => (
            verdict(
                false,
                "FailedDiscoveryCheck",
                format!(
                    "failing or missing response from {url}: Get \"{url}\": context deadline exceeded"
                ),
            ),
            None,
        ),
    }
}

/// The remote's `/openapi/v3` index entry for its group-version, if it
/// publishes one (servers without OpenAPI are still available).
async fn openapi_entry(state: &State, r: &Remote) -> Option<Value> {
    let index = tokio::time::timeout(DISCOVERY_TIMEOUT, get_json(state, r, "/openapi/v3"))
        .await
        .ok()?
        .ok()?;
    index
        .pointer(&format!("/paths/apis~1{}~1{}", r.group, r.version))
        .cloned()
}

/// GET `/apis/<group>/<version>` as the aggregator (system:kube-aggregator).
async fn discover(state: &State, r: &Remote) -> Result<Value, String> {
    get_json(state, r, &format!("/apis/{}/{}", r.group, r.version)).await
}

/// A GET of `path` on the remote as the aggregator, answered with JSON.
async fn get_json(state: &State, r: &Remote, path: &str) -> Result<Value, String> {
    let mut sender = super::proxy::connect(state, r).await?;
    let req = hyper::Request::builder()
        .method("GET")
        .uri(path)
        .header("host", format!("{}.{}.svc", r.service, r.namespace))
        .header("accept", "application/json")
        .header("x-remote-user", "system:kube-aggregator")
        .header("x-remote-group", "system:masters")
        .body(http_body_util::Either::Right(Full::new(Bytes::new())))
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    if !status.is_success() {
        return Err(format!(
            "bad status from https://{}.{}.svc: {}",
            r.service,
            r.namespace,
            status.as_u16()
        ));
    }
    serde_json::from_slice(&body).map_err(|e| format!("invalid discovery document: {e}"))
}
