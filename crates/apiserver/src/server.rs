//! Listeners (HTTPS with client certificates; optional loopback plain HTTP),
//! authentication, and routing of every request.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

use crate::authentication::{Authenticator, ConnAuth, user_from_cert};
use crate::authorization::{self, Authorizer};
use crate::decode;
use crate::discovery;
use crate::inflight::Admit;
use crate::metrics::{Metrics, RequestLabels};
use crate::negotiate::{self, Format, Include, Output, Shape};
use crate::request::{self, Query, ResourcePath, Target};
use crate::rest::{Reply, Rest};
use crate::status::{ApiError, ApiResult};
use crate::watch;
use berth_api::user::UserInfo;

pub type Body = BoxBody<Bytes, Infallible>;

pub struct State {
    pub rest: Rest,
    pub metrics: Metrics,
    pub authenticator: Authenticator,
    pub authorizer: Arc<Authorizer>,
    pub inflight: crate::inflight::Limiter,
    /// `--audit-policy-file` with `--audit-log-path`: None records nothing.
    pub audit: Option<Arc<crate::audit::Auditor>>,
    pub server_address: String,
    /// TLS to kubelets for pods' log, exec, attach and portforward.
    pub kubelet: Option<crate::streaming::KubeletClient>,
    /// The front proxy's client certificate and key (PEM), for aggregated APIs.
    pub proxy_client: Option<(String, String)>,
}

fn full(code: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, content_type)
        .header("Cache-Control", "no-cache, private")
        .body(Full::new(body.into()).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

fn json_response(code: u16, content_type: &str, v: &Value, warnings: &[String]) -> Response<Body> {
    let body = serde_json::to_vec(v).unwrap_or_default();
    let mut resp = full(
        StatusCode::from_u16(code).unwrap_or(StatusCode::OK),
        content_type,
        body,
    );
    add_warnings(&mut resp, warnings);
    resp
}

/// A body in the negotiated encoding: protobuf (`k8s\0` + `runtime.Unknown`) or JSON.
/// An object the protobuf table cannot write (none of the served kinds) falls back
/// to JSON, which a client that also accepts JSON decodes by Content-Type.
fn body_response(code: u16, out: Output, v: &Value, warnings: &[String]) -> Response<Body> {
    if out.format == Format::Protobuf {
        match berth_api::protobuf::encode(v) {
            Ok(bytes) => {
                let mut resp = full(
                    StatusCode::from_u16(code).unwrap_or(StatusCode::OK),
                    &negotiate::output_content_type(out),
                    bytes,
                );
                add_warnings(&mut resp, warnings);
                return resp;
            }
            Err(e) => warn!(error = %e, "protobuf encoding failed; answering JSON"),
        }
    }
    let json = Output {
        format: Format::Json,
        ..out
    };
    json_response(code, &negotiate::output_content_type(json), v, warnings)
}

fn add_warnings(resp: &mut Response<Body>, warnings: &[String]) {
    for w in warnings {
        let text = format!("299 - \"{}\"", w.replace('"', "\\\""));
        if let Ok(h) = header::HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, h);
        }
    }
}

/// An error as a meta/v1 Status, in protobuf when the client's Accept (without
/// conversions, as upstream's ErrorNegotiated) picks protobuf.
fn error_response(e: &ApiError, accept: &str) -> Response<Body> {
    let out = Output {
        format: negotiate::error_format(accept),
        shape: Shape::Object,
    };
    let mut resp = body_response(e.code, out, &e.to_status(), &[]);
    // As upstream's ErrorNegotiated: a suggested delay is also a header.
    if let Some(secs) = e
        .details
        .as_ref()
        .and_then(|d| d.get("retryAfterSeconds"))
        .and_then(Value::as_i64)
        .filter(|s| *s > 0)
        && let Ok(h) = header::HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, h);
    }
    resp
}

fn is_public(path: &str) -> bool {
    ["/version", "/healthz", "/livez", "/readyz"]
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")))
}

/// Authentication, impersonation, the in-flight limit and authorization of
/// one request (upstream's filter order): the user it acts as and its place in
/// the in-flight pools, or the 401/403 to send.
async fn admit_request(
    state: &State,
    auth: &ConnAuth,
    req: &Request<Incoming>,
    audit: &mut crate::audit::Request<'_>,
) -> ApiResult<(UserInfo, Admit)> {
    let Ok(user) = state
        .authenticator
        .authenticate(&state.rest, auth, req.headers())
        .await
    else {
        audit.failed_authentication(req);
        return Err(ApiError::unauthorized());
    };
    audit.authenticated(&user, req).await;
    let user = authorization::impersonate(&state.authorizer, &state.rest, user, req.headers())?;
    audit.impersonated(&user);
    let watch = Query::parse(req.uri().query()).flag("watch");
    let attrs = authorization::attributes(&user, req.method(), req.uri().path(), watch);
    let admit = state.inflight.admit(&attrs);
    if let Admit::Busy(kind) = admit {
        state.metrics.dropped(kind);
        return Ok((user, admit));
    }
    audit.authorize(&state.authorizer, &state.rest, &attrs)?;
    Ok((user, admit))
}

/// Upstream's refusal of a request over the in-flight limit.
fn too_many_requests() -> Response<Body> {
    let mut resp = full(
        StatusCode::TOO_MANY_REQUESTS,
        "text/plain; charset=utf-8",
        crate::inflight::TOO_MANY_REQUESTS,
    );
    resp.headers_mut().insert(
        header::RETRY_AFTER,
        header::HeaderValue::from(crate::inflight::RETRY_AFTER_SECONDS),
    );
    resp
}

/// The web dashboard's static assets (`crates/dashboard`): public like
/// `/version`, since the page holds no data of its own; every API call it
/// makes carries the user's bearer token.
fn dashboard_response(req: &Request<Incoming>) -> Option<Response<Body>> {
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        return None;
    }
    let a = berth_dashboard::serve(req.uri().path())?;
    let mut b = Response::builder()
        .status(a.status)
        .header(header::CONTENT_TYPE, a.content_type)
        .header(header::CACHE_CONTROL, a.cache_control)
        .header("X-Content-Type-Options", "nosniff");
    if a.status == 301 {
        b = b.header(header::LOCATION, "/dashboard/");
    }
    let body = if *req.method() == Method::HEAD {
        Bytes::new()
    } else {
        Bytes::from_static(a.body)
    };
    Some(
        b.body(Full::new(body).boxed())
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed())),
    )
}

/// Serves one request.
pub async fn handle(
    state: Arc<State>,
    auth: ConnAuth,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    if let Some(resp) = dashboard_response(&req) {
        return Ok(resp);
    }
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let mut labels = RequestLabels {
        verb: method.as_str().to_string(),
        group: String::new(),
        version: String::new(),
        resource: String::new(),
        subresource: String::new(),
        code: String::new(),
    };
    let accept = header_str(&req, header::ACCEPT);
    let mut audit = crate::audit::Request::new(state.audit.as_deref(), &req, peer);
    let resp = match admit_request(&state, &auth, &req, &mut audit).await {
        Err(e) => {
            drain_sent_body(req).await;
            error_response(&e, &accept)
        }
        Ok((_, Admit::Busy(_))) => {
            drain_sent_body(req).await;
            too_many_requests()
        }
        Ok((user, Admit::Serve(_slot))) => {
            let (result, warnings) =
                crate::warnings::collect(audit.serve(route(&state, req, user, &mut labels))).await;
            let mut resp = match result {
                Ok(r) => r,
                Err(e) => error_response(&e, &accept),
            };
            add_warnings(&mut resp, &warnings);
            if let Some(w) =
                berth_api::registry::lookup(&labels.group, &labels.version, &labels.resource)
                    .and_then(berth_api::registry::deprecation_warning)
            {
                add_warnings(&mut resp, &[w]);
            }
            resp
        }
    };
    let resp = audit.finish(resp).await;
    labels.code = resp.status().as_u16().to_string();
    debug!(method = %method, path = %path, code = %labels.code, ms = started.elapsed().as_millis() as u64, "request");
    state
        .metrics
        .observe(labels, started.elapsed().as_secs_f64());
    Ok(resp)
}

/// Reads (and drops) what a refused request's client has already sent, up to
/// a small size and for a moment only. Answering while the body is still
/// unread makes the server reset the HTTP/2 stream, and curl then drops the
/// 401/403/429 it was sent; a stalled or huge body is not waited for.
async fn drain_sent_body(req: Request<Incoming>) {
    const SMALL: usize = 64 * 1024;
    let limited = Limited::new(req.into_body(), SMALL);
    let _ = tokio::time::timeout(Duration::from_millis(100), limited.collect()).await;
}

/// kube-apiserver's `--request-timeout` default: a body that has not arrived
/// by then (a slow or stalled client) ends the request with upstream's 504.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

async fn read_body(req: Request<Incoming>) -> ApiResult<Bytes> {
    read_body_within(req.into_body(), REQUEST_TIMEOUT).await
}

async fn read_body_within<B>(body: B, limit: Duration) -> ApiResult<Bytes>
where
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limited = Limited::new(body, decode::MAX_BODY);
    let Ok(collected) = tokio::time::timeout(limit, limited.collect()).await else {
        return Err(ApiError::request_timeout());
    };
    match collected {
        Ok(c) => {
            let body = c.to_bytes();
            crate::audit::request_body(&body);
            Ok(body)
        }
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(ApiError::too_large())
        }
        Err(e) => Err(ApiError::bad_request(format!(
            "reading the request body: {e}"
        ))),
    }
}

fn header_str(req: &Request<Incoming>, name: header::HeaderName) -> String {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

async fn route(
    state: &State,
    req: Request<Incoming>,
    user: UserInfo,
    labels: &mut RequestLabels,
) -> ApiResult<Response<Body>> {
    let path = req.uri().path().to_string();
    let accept = header_str(&req, header::ACCEPT);
    match path.as_str() {
        "/version" | "/version/" => {
            return Ok(json_response(
                200,
                "application/json",
                &discovery::version(),
                &[],
            ));
        }
        "/.well-known/openid-configuration" => {
            return Ok(json_response(
                200,
                "application/json",
                &crate::tokens::openid_configuration(state),
                &[],
            ));
        }
        "/openid/v1/jwks" => {
            return Ok(json_response(
                200,
                "application/jwk-set+json",
                &crate::tokens::jwks(state),
                &[],
            ));
        }
        "/metrics" => {
            state.metrics.set_inflight(state.inflight.in_flight());
            return Ok(full(
                StatusCode::OK,
                "text/plain; version=0.0.4",
                state.metrics.render(),
            ));
        }
        "/openapi/v3" | "/openapi/v3/" => {
            let index = crate::apiextensions::openapi::current().index.clone();
            return Ok(full(
                StatusCode::OK,
                "application/json",
                crate::aggregator::openapi_index(index),
            ));
        }
        // kubectl ≤ 1.28 reads the whole API's Swagger 2.0 in gnostic's protobuf.
        "/openapi/v2" | "/openapi/v2/" => {
            use berth_api::openapi::v2;
            return Ok(if v2::wants_protobuf(&accept) {
                full(
                    StatusCode::OK,
                    v2::PROTOBUF_MEDIA_TYPE,
                    Bytes::from_static(&v2::cached().protobuf),
                )
            } else {
                full(
                    StatusCode::OK,
                    "application/json",
                    Bytes::from_static(&v2::cached().json),
                )
            });
        }
        _ => {}
    }
    if is_public(&path) {
        return Ok(full(StatusCode::OK, "text/plain; charset=utf-8", "ok"));
    }
    if let Some(gv) = path.strip_prefix("/openapi/v3/") {
        // An aggregated group-version's document is its server's.
        if let Some(remote) = crate::aggregator::route(&state.rest, &format!("/{gv}")) {
            return crate::aggregator::proxy::serve(state, req, &user, &remote).await;
        }
        return match crate::apiextensions::openapi::current().get(gv) {
            Some(doc) => Ok(full(StatusCode::OK, "application/json", doc)),
            None => Err(ApiError::path_not_found()),
        };
    }
    if let Some(remote) = crate::aggregator::route(&state.rest, &path) {
        return crate::aggregator::proxy::serve(state, req, &user, &remote).await;
    }
    if !(path == "/api"
        || path.starts_with("/api/")
        || path == "/apis"
        || path.starts_with("/apis/"))
    {
        return Err(ApiError::path_not_found());
    }
    let target = request::parse_path(&path)?;
    let rp = match target {
        Target::Root { legacy } => {
            labels.verb = "get".into();
            if let Some(ct) = discovery::wants_aggregated(&accept) {
                let v = if ct.contains("v2beta1") {
                    "apidiscovery.k8s.io/v2beta1"
                } else {
                    "apidiscovery.k8s.io/v2"
                };
                return Ok(json_response(
                    200,
                    ct,
                    &discovery::aggregated(
                        legacy,
                        v,
                        &crate::aggregator::discovery_groups(&state.rest),
                    ),
                    &[],
                ));
            }
            let doc = if legacy {
                discovery::api_versions(&state.server_address)
            } else {
                discovery::api_group_list(&crate::aggregator::discovery_groups(&state.rest))
            };
            return Ok(json_response(200, "application/json", &doc, &[]));
        }
        Target::Group(g) => {
            return discovery::api_group_doc(&g, &crate::aggregator::discovery_groups(&state.rest))
                .map(|d| json_response(200, "application/json", &d, &[]))
                .ok_or_else(ApiError::path_not_found);
        }
        Target::GroupVersion { group, version } => {
            return discovery::api_resource_list(&group, &version)
                .map(|d| json_response(200, "application/json", &d, &[]))
                .ok_or_else(ApiError::path_not_found);
        }
        Target::Resource(rp) => rp,
    };
    labels.group = rp.rt.group.to_string();
    labels.version = rp.rt.version.to_string();
    labels.resource = rp.rt.plural.to_string();
    labels.subresource = rp.subresource.clone().unwrap_or_default();
    let mut q = Query::parse(req.uri().query());
    q.user_agent = header_str(&req, header::USER_AGENT);
    q.user = Some(user.clone());
    if crate::streaming::is_streaming(&rp) {
        // Upstream counts log reads as GET and the upgrades as CONNECT.
        labels.verb = if rp.subresource.as_deref() == Some("log") {
            "GET"
        } else {
            "CONNECT"
        }
        .into();
        return crate::streaming::serve(state, req, &rp, &q).await;
    }
    if crate::proxy::is_proxy(&rp) {
        labels.verb = "CONNECT".into();
        return crate::proxy::serve(state, req, &rp).await;
    }
    let method = req.method().clone();
    if rp.rt.is_review() && method != Method::POST {
        return Err(ApiError::method_not_allowed());
    }
    let content_type = header_str(&req, header::CONTENT_TYPE);
    let is_watch = rp.legacy_watch || q.flag("watch");
    labels.verb = verb_name(&method, &rp, is_watch).to_string();
    let out = negotiate::negotiate(&accept, negotiate::protobuf_ok(rp.rt))?;
    let shape = out.shape;
    // Replies to writes are the object itself, in the negotiated encoding.
    let reply_out = Output {
        format: out.format,
        shape: Shape::Object,
    };
    let include = Include::parse(q.get("includeObject"))?;
    match method {
        Method::GET if is_watch => {
            let params = watch::WatchParams {
                shape,
                include,
                format: out.format,
            };
            let rx = watch::start(&state.rest, &rp, &q, params).await?;
            let stream = tokio_stream::wrappers::ReceiverStream::new(rx)
                .map(|b| Ok::<_, Infallible>(Frame::data(b)));
            let ct = match (out.format, shape) {
                (Format::Protobuf, _) => berth_api::protobuf::WATCH_CONTENT_TYPE.to_string(),
                (Format::Json, Shape::Object) => "application/json".to_string(),
                (Format::Json, other) => negotiate::content_type(other),
            };
            Ok(Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, ct)
                .header(header::TRANSFER_ENCODING, "chunked")
                .body(BoxBody::new(StreamBody::new(stream)))
                .map_err(|e| ApiError::internal(e.to_string()))?)
        }
        Method::GET if rp.name.is_some() => {
            let obj = state.rest.get(&rp).await?;
            let body = if rp.subresource.as_deref() == Some("scale") {
                obj
            } else {
                negotiate::shape_object(rp.rt, obj, shape, include, true)
            };
            Ok(body_response(200, out, &body, &[]))
        }
        Method::GET => {
            if out == Output::JSON
                && let Some(bytes) = state.rest.list_bytes(&rp, &q).await?
            {
                return Ok(full(StatusCode::OK, "application/json", bytes));
            }
            let list = state.rest.list(&rp, &q).await?;
            let body = negotiate::shape_list(rp.rt, list, shape, include);
            if out.format == Format::Protobuf {
                return Ok(body_response(200, out, &body, &[]));
            }
            let ct = match shape {
                Shape::Metadata { version } => format!(
                    "application/json;as=PartialObjectMetadataList;v={version};g=meta.k8s.io"
                ),
                other => negotiate::content_type(other),
            };
            Ok(json_response(200, &ct, &body, &[]))
        }
        Method::POST => {
            let body = read_body(req).await?;
            let duplicates = duplicates(&rp, &content_type, &body, &q)?;
            let value = decode::parse(&content_type, &body)?;
            let mut reply = match rp.subresource.as_deref() {
                None if rp.rt.is_review() => {
                    crate::reviews::serve(state, &user, &rp, value).await?
                }
                Some("token") if rp.rt.plural == "serviceaccounts" && rp.rt.group.is_empty() => {
                    crate::tokens::request(state, &user, &rp, value).await?
                }
                Some("binding") => state.rest.bind(&rp, value).await?,
                Some("eviction") if rp.rt.strategy == berth_api::registry::Strategy::Pod => {
                    state.rest.evict(&rp, value, &q).await?
                }
                Some(_) => return Err(ApiError::method_not_allowed()),
                None => state.rest.create(&rp, value, &q).await?,
            };
            reply.warnings.extend(duplicates);
            Ok(reply_response(reply, reply_out))
        }
        Method::PUT => {
            let body = read_body(req).await?;
            let duplicates = duplicates(&rp, &content_type, &body, &q)?;
            let value = decode::parse(&content_type, &body)?;
            let mut reply = state.rest.update(&rp, value, &q).await?;
            reply.warnings.extend(duplicates);
            Ok(reply_response(reply, reply_out))
        }
        Method::PATCH => {
            let body = read_body(req).await?;
            // Only an applied configuration is an object whose fields can repeat.
            let duplicates = if content_type.starts_with("application/apply-patch+yaml") {
                duplicates(&rp, &content_type, &body, &q)?
            } else {
                Vec::new()
            };
            let mut reply = state.rest.patch(&rp, &content_type, &body, &q).await?;
            reply.warnings.extend(duplicates);
            Ok(reply_response(reply, reply_out))
        }
        Method::DELETE => {
            let body = read_body(req).await?;
            let value = if body.iter().all(u8::is_ascii_whitespace) {
                None
            } else {
                Some(decode::parse(&content_type, &body)?)
            };
            let reply = if rp.name.is_some() {
                state.rest.delete(&rp, value, &q).await?
            } else {
                state.rest.delete_collection(&rp, value, &q).await?
            };
            Ok(reply_response(reply, reply_out))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn reply_response(r: Reply, out: Output) -> Response<Body> {
    body_response(r.code, out, &r.body, &r.warnings)
}

/// Duplicate fields in a write's body, per `fieldValidation`: 400 or warnings.
fn duplicates(
    rp: &ResourcePath,
    content_type: &str,
    body: &[u8],
    q: &Query,
) -> ApiResult<Vec<String>> {
    let validation = decode::FieldValidation::parse(q.get("fieldValidation"))?;
    decode::check_duplicates(
        rp.rt,
        &decode::duplicate_fields(content_type, body),
        validation,
    )
}

fn verb_name(method: &Method, rp: &ResourcePath, watch: bool) -> &'static str {
    match *method {
        Method::GET if watch => "WATCH",
        Method::GET if rp.name.is_some() => "GET",
        Method::GET => "LIST",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE if rp.name.is_some() => "DELETE",
        Method::DELETE => "DELETECOLLECTION",
        _ => "OTHER",
    }
}

/// An accept error (typically EMFILE: out of file descriptors) repeats at once
/// if retried at once; a short pause lets connections close instead of spinning.
async fn accept_failed(e: std::io::Error) {
    warn!(error = %e, "accept failed");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
}

/// Accepts TLS connections until `shutdown` resolves.
pub async fn serve_tls(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    state: Arc<State>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => { accept_failed(e).await; continue; }
            },
            _ = shutdown.changed() => break,
        };
        let acceptor = acceptor.clone();
        let state = state.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
            {
                Ok(Ok(t)) => t,
                Ok(Err(e)) => {
                    debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let user = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(|c| user_from_cert(c.as_ref()));
            let auth = ConnAuth::Tls(user);
            let svc = hyper::service::service_fn(move |req| {
                handle(state.clone(), auth.clone(), peer, req)
            });
            let builder = conn_builder();
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), svc);
            if let Err(e) = watcher.watch(conn.into_owned()).await {
                debug!(%peer, error = %e, "connection ended");
            }
        });
    }
    drop(listener);
    // Long watches would hold shutdown forever: give connections a moment, then go.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), graceful.shutdown()).await;
}

/// A client that opens a connection and sends nothing holds no task for long:
/// Go's default TLS handshake timeout, and kube-apiserver's `ReadHeaderTimeout`.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const READ_HEADER_TIMEOUT: Duration = Duration::from_secs(32);

/// HTTP/1.1 and HTTP/2 on one connection, with the header read timeout.
fn conn_builder() -> hyper_util::server::conn::auto::Builder<TokioExecutor> {
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(READ_HEADER_TIMEOUT);
    builder
}

/// Accepts plain-HTTP connections (loopback only) until `shutdown` resolves.
pub async fn serve_plain(
    listener: TcpListener,
    state: Arc<State>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (tcp, peer): (_, SocketAddr) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => { accept_failed(e).await; continue; }
            },
            _ = shutdown.changed() => break,
        };
        let state = state.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                handle(state.clone(), ConnAuth::Trusted, peer, req)
            });
            let builder = conn_builder();
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tcp), svc);
            if let Err(e) = watcher.watch(conn.into_owned()).await {
                debug!(%peer, error = %e, "connection ended");
            }
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), graceful.shutdown()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_that_stops_arriving_ends_in_upstreams_timeout() {
        // One chunk, then nothing: a client that stalls mid-body.
        let chunks =
            futures::stream::iter([Ok::<_, Infallible>(Frame::data(Bytes::from("{\"a\"")))])
                .chain(futures::stream::pending());
        let e = read_body_within(StreamBody::new(chunks), Duration::from_millis(50))
            .await
            .unwrap_err();
        assert_eq!((e.code, e.reason), (504, "Timeout"));
        assert_eq!(
            e.message,
            "Timeout: request did not complete within requested timeout - context deadline exceeded"
        );
    }

    #[tokio::test]
    async fn a_whole_body_is_read_and_an_oversized_one_refused() {
        let body = Full::new(Bytes::from_static(b"{}"));
        let got = read_body_within(body, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(&got[..], b"{}");
        let big = Full::new(Bytes::from(vec![b' '; decode::MAX_BODY + 1]));
        let e = read_body_within(big, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(e.code, 413);
    }

    #[test]
    fn too_many_requests_is_upstreams_plain_text_with_retry_after() {
        let r = too_many_requests();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
    }
}
