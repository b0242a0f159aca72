//! Audit logging as kube-apiserver's (audit.k8s.io/v1): `--audit-policy-file`
//! says which requests are recorded and at what level (`policy`), each
//! request's stages become events (`event`), and the log backend writes them as
//! JSON lines to `--audit-log-path` with lumberjack's rotation (`log`).
//!
//! The request path calls in at upstream's filter positions (server.rs): after
//! authentication the policy is evaluated on the authenticated user and
//! RequestReceived is recorded; impersonation and the authorization decision
//! are noted; the handler runs inside a task-local scope where admission
//! plugins may [`add_annotation`] and the request body is noted
//! ([`request_body`]); the response completes the event (ResponseComplete, or
//! ResponseStarted and, when the body ends, ResponseComplete for long-running
//! requests; Panic if the handler panics). Every response carries its
//! `Audit-ID`, audited or not, as upstream's.
//!
//! With no policy, or a policy whose level for a request is None, a request
//! costs one id and one header: nothing else is built.

pub mod event;
pub mod log;
pub mod policy;

use std::cell::RefCell;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use berth_api::user::UserInfo;
use berth_authz::{Attributes, Decision};
use bytes::Bytes;
use futures::FutureExt;
use http::{HeaderMap, HeaderValue, Response, header};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::{Frame, SizeHint};

use crate::authorization::{self, Authorizer};
use crate::request::Query;
use crate::rest::Rest;
use crate::server::Body;
use crate::status::ApiError;
use event::{Event, ObjectReference, Pending, ResponseStatus};
use policy::{Level, Policy, RequestAuditConfig, Stage};

/// The header carrying a request's audit ID (upstream's `Audit-ID`).
pub const HEADER_AUDIT_ID: &str = "audit-id";

/// Upstream's cap on the recorded User-Agent.
const MAX_USER_AGENT: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("loading audit policy file: {0}")]
    Policy(String),
    #[error("ensureLogFile: {path}: {source}")]
    LogFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// `--audit-*` options (upstream's `AuditOptions` for the log backend).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `--audit-policy-file`.
    pub policy_file: Option<PathBuf>,
    /// `--audit-log-path`; `-` is standard output.
    pub log_path: Option<PathBuf>,
    /// `--audit-log-maxage`: days a rotated file is kept (0: no limit).
    pub log_max_age_days: u32,
    /// `--audit-log-maxbackup`: rotated files kept (0: no limit).
    pub log_max_backups: u32,
    /// `--audit-log-maxsize`: megabytes before the file is rotated (0: never).
    pub log_max_size_mb: u32,
}

/// Upstream's defaults since 1.36: rotation at 100 MB, 100 backups, 366 days.
pub const DEFAULT_LOG_MAX_AGE_DAYS: u32 = 366;
pub const DEFAULT_LOG_MAX_BACKUPS: u32 = 100;
pub const DEFAULT_LOG_MAX_SIZE_MB: u32 = 100;

impl Default for Options {
    fn default() -> Self {
        Options {
            policy_file: None,
            log_path: None,
            log_max_age_days: DEFAULT_LOG_MAX_AGE_DAYS,
            log_max_backups: DEFAULT_LOG_MAX_BACKUPS,
            log_max_size_mb: DEFAULT_LOG_MAX_SIZE_MB,
        }
    }
}

/// The policy and the backend: present when both a policy and a log path are set.
pub struct Auditor {
    policy: Policy,
    sink: log::Sink,
}

impl Auditor {
    /// Loads the policy and opens the log (a bad policy or an unwritable log is
    /// an error). As upstream, either without the other records nothing.
    pub fn start(opts: &Options) -> Result<Option<Arc<Auditor>>, AuditError> {
        let policy = opts.policy_file.as_deref().map(Policy::load).transpose()?;
        let output = match &opts.log_path {
            Some(p) if p.as_os_str() == "-" => Some(log::Output::stdout()),
            Some(p) => Some(log::Output::File(
                log::LogFile::open(
                    p,
                    log::Rotation {
                        max_size_bytes: u64::from(opts.log_max_size_mb) * 1024 * 1024,
                        max_age_days: opts.log_max_age_days,
                        max_backups: opts.log_max_backups,
                    },
                )
                .map_err(|source| AuditError::LogFile {
                    path: p.clone(),
                    source,
                })?,
            )),
            None => None,
        };
        Ok(match (policy, output) {
            (Some(policy), Some(output)) => Some(Arc::new(Auditor {
                policy,
                sink: log::spawn(output, log::BUFFER_EVENTS),
            })),
            (None, Some(_)) => {
                tracing::warn!(
                    "No audit policy file provided, no events will be recorded for log backend"
                );
                None
            }
            (Some(_), None) => {
                tracing::warn!("no --audit-log-path given: audit events are not recorded");
                None
            }
            (None, None) => None,
        })
    }

    /// A sink-backed auditor for tests and benchmarks of this module.
    pub fn with_sink(policy: Policy, sink: log::Sink) -> Auditor {
        Auditor { policy, sink }
    }
}

// What the handler's task gathers for its event: admission annotations and the
// request body.
#[derive(Default)]
struct Captured {
    level: Option<Level>,
    annotations: Vec<(String, String)>,
    request_body: Option<Bytes>,
}

tokio::task_local! {
    static CAPTURE: RefCell<Captured>;
}

/// Adds an annotation to the current request's audit event (nothing when the
/// request is not audited), as upstream's `audit.AddAuditAnnotation`: the
/// first value of a key stays.
pub fn add_annotation(key: impl Into<String>, value: impl Into<String>) {
    let _ = CAPTURE.try_with(|c| c.borrow_mut().annotations.push((key.into(), value.into())));
}

/// The current request's audit level (None outside an audited request): what
/// an annotation that belongs to a level checks first, as upstream's mutating
/// webhook adds `patch.webhook.admission.k8s.io/…` only from level Request on.
pub fn level() -> Option<Level> {
    CAPTURE.try_with(|c| c.borrow().level).ok().flatten()
}

/// Notes the request body for the event (objectRef, requestObject).
pub fn request_body(body: &Bytes) {
    let _ = CAPTURE.try_with(|c| c.borrow_mut().request_body = Some(body.clone()));
}

/// The request's audit ID: the client's `Audit-ID`, else a new UUID.
fn audit_id(headers: &HeaderMap) -> HeaderValue {
    if let Some(v) = headers.get(HEADER_AUDIT_ID)
        && !v.is_empty()
        && v.to_str().is_ok()
    {
        return v.clone();
    }
    let id = uuid::Builder::from_random_bytes(rand::random()).into_uuid();
    let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let text = id.hyphenated().encode_lower(&mut buf);
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static("unknown"))
}

/// Upstream's `utilnet.SourceIPs`: X-Forwarded-For, X-Real-Ip, then the peer.
pub fn source_ips(headers: &HeaderMap, peer: IpAddr) -> Vec<String> {
    let mut ips: Vec<IpAddr> = Vec::new();
    if let Some(v) = headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        ips.extend(v.split(',').filter_map(|p| p.trim().parse::<IpAddr>().ok()));
    }
    if let Some(ip) = headers
        .get("x-real-ip")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<IpAddr>().ok())
        && !ips.contains(&ip)
    {
        ips.push(ip);
    }
    if ips.last() != Some(&peer) {
        ips.push(peer);
    }
    ips.iter().map(IpAddr::to_string).collect()
}

fn header_string(headers: &HeaderMap, name: header::HeaderName) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// One audited request: everything its events share.
struct Context {
    config: RequestAuditConfig,
    event: Event,
    /// The authenticated user (impersonation is noted when the request acts as another).
    authenticated: UserInfo,
    request_content_type: String,
    request_body: Option<Bytes>,
    long_running: bool,
    /// A request whose authentication failed: one ResponseStarted event, as upstream.
    failed_authentication: bool,
    sink: log::Sink,
}

impl Context {
    fn pending(&self, stage: Stage, response_body: Option<(Bytes, String)>) -> Option<Pending> {
        if self.config.omit_stages.contains(stage) {
            return None;
        }
        let mut event = self.event.clone();
        event.stage = stage;
        event.stage_timestamp = if stage == Stage::RequestReceived {
            event.request_received_timestamp
        } else {
            chrono::Utc::now()
        };
        Some(Pending {
            event,
            request_body: self
                .request_body
                .clone()
                .map(|b| (b, self.request_content_type.clone())),
            response_body,
            omit_managed_fields: self.config.omit_managed_fields,
        })
    }

    async fn emit(&self, stage: Stage, response_body: Option<(Bytes, String)>) {
        if let Some(p) = self.pending(stage, response_body) {
            self.sink.send(p).await;
        }
    }
}

/// The audit side of one request, made when it arrives. Without an auditor
/// (or at level None) it only carries the audit ID for the response header.
pub struct Request<'a> {
    auditor: Option<&'a Auditor>,
    id: HeaderValue,
    peer: IpAddr,
    received: chrono::DateTime<chrono::Utc>,
    ctx: Option<Box<Context>>,
}

impl<'a> Request<'a> {
    pub fn new<B>(auditor: Option<&'a Auditor>, req: &http::Request<B>, peer: SocketAddr) -> Self {
        Request {
            auditor,
            id: audit_id(req.headers()),
            peer: peer.ip(),
            received: if auditor.is_some() {
                chrono::Utc::now()
            } else {
                chrono::DateTime::<chrono::Utc>::MIN_UTC
            },
            ctx: None,
        }
    }

    /// The audit ID (also the response's `Audit-ID`).
    pub fn id(&self) -> &str {
        self.id.to_str().unwrap_or("")
    }

    fn begin<B>(
        &mut self,
        auditor: &Auditor,
        user: Option<&UserInfo>,
        req: &http::Request<B>,
    ) -> bool {
        let watch = Query::parse(req.uri().query()).flag("watch");
        let nobody = UserInfo::default();
        let attrs = authorization::attributes(
            user.unwrap_or(&nobody),
            req.method(),
            req.uri().path(),
            watch,
        );
        let config = auditor.policy.evaluate(user, &attrs);
        if config.level == Level::None {
            return false;
        }
        let headers = req.headers();
        let mut user_agent = header_string(headers, header::USER_AGENT);
        if user_agent.len() > MAX_USER_AGENT {
            let mut cut = MAX_USER_AGENT;
            while !user_agent.is_char_boundary(cut) {
                cut -= 1;
            }
            user_agent.truncate(cut);
            user_agent.push_str("...TRUNCATED");
        }
        let object_ref = attrs.resource_request.then(|| ObjectReference {
            resource: attrs.resource.clone(),
            namespace: attrs.namespace.clone(),
            name: attrs.name.clone(),
            api_group: attrs.api_group.clone(),
            api_version: attrs.api_version.clone(),
            subresource: attrs.subresource.clone(),
            ..Default::default()
        });
        let event = Event {
            kind: event::KIND,
            api_version: event::API_VERSION,
            level: config.level,
            audit_id: self.id().to_string(),
            stage: Stage::RequestReceived,
            request_uri: req
                .uri()
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| req.uri().path().to_string()),
            verb: attrs.verb.clone(),
            user: user.map(Into::into).unwrap_or_default(),
            impersonated_user: None,
            source_ips: source_ips(headers, self.peer),
            user_agent,
            object_ref,
            response_status: None,
            request_object: None,
            response_object: None,
            request_received_timestamp: self.received,
            stage_timestamp: self.received,
            annotations: Default::default(),
        };
        self.ctx = Some(Box::new(Context {
            config,
            event,
            authenticated: user.cloned().unwrap_or_default(),
            request_content_type: header_string(headers, header::CONTENT_TYPE),
            request_body: None,
            long_running: crate::inflight::is_long_running(&attrs),
            failed_authentication: user.is_none(),
            sink: auditor.sink.clone(),
        }));
        true
    }

    /// After authentication: evaluates the policy and records RequestReceived.
    pub async fn authenticated<B>(&mut self, user: &UserInfo, req: &http::Request<B>) {
        let Some(auditor) = self.auditor else { return };
        if self.begin(auditor, Some(user), req)
            && let Some(ctx) = &self.ctx
        {
            ctx.emit(Stage::RequestReceived, None).await;
        }
    }

    /// A request whose credentials were refused (upstream's
    /// `WithFailedAuthenticationAudit`: the policy sees no user).
    pub fn failed_authentication<B>(&mut self, req: &http::Request<B>) {
        if let Some(auditor) = self.auditor {
            self.begin(auditor, None, req);
        }
    }

    /// After impersonation: the user the request acts as, when another.
    pub fn impersonated(&mut self, user: &UserInfo) {
        if let Some(ctx) = self.ctx.as_deref_mut()
            && *user != ctx.authenticated
        {
            ctx.event.impersonated_user = Some(user.into());
        }
    }

    /// Authorization as upstream's filter: the decision and reason become the
    /// `authorization.k8s.io/decision` and `/reason` annotations; a refusal is
    /// upstream's 403.
    pub fn authorize(
        &mut self,
        authorizer: &Authorizer,
        rest: &Rest,
        attrs: &Attributes,
    ) -> Result<(), ApiError> {
        let (decision, reason) = authorizer.authorize(rest, attrs);
        let allowed = decision == Decision::Allow;
        if let Some(ctx) = self.ctx.as_deref_mut() {
            let a = &mut ctx.event.annotations;
            a.insert(
                "authorization.k8s.io/decision".into(),
                if allowed { "allow" } else { "forbid" }.into(),
            );
            a.insert("authorization.k8s.io/reason".into(), reason.clone());
        }
        if allowed {
            Ok(())
        } else {
            Err(Authorizer::forbidden(attrs, &reason))
        }
    }

    /// Runs the handler where [`add_annotation`] and [`request_body`] reach
    /// this request's event; a panic is recorded (stage Panic) and goes on.
    pub async fn serve<F: Future>(&mut self, handler: F) -> F::Output {
        let Some(ctx) = self.ctx.as_deref_mut() else {
            return handler.await;
        };
        let (out, captured) = CAPTURE
            .scope(
                RefCell::new(Captured {
                    level: Some(ctx.config.level),
                    ..Default::default()
                }),
                async {
                    let out = AssertUnwindSafe(handler).catch_unwind().await;
                    (out, CAPTURE.with(|c| c.take()))
                },
            )
            .await;
        ctx.request_body = captured.request_body;
        for (k, v) in captured.annotations {
            match ctx.event.annotations.get(&k) {
                Some(old) if *old != v => tracing::warn!(
                    audit_id = %ctx.event.audit_id,
                    "Failed to set annotations[{k:?}] to {v:?} for audit, it has already been set to {old:?}"
                ),
                _ => {
                    ctx.event.annotations.insert(k, v);
                }
            }
        }
        match out {
            Ok(v) => v,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                ctx.event.response_status = Some(ResponseStatus {
                    status: "Failure".into(),
                    message: format!("APIServer panic'd: {what}"),
                    reason: "InternalError".into(),
                    code: 500,
                    ..Default::default()
                });
                ctx.emit(Stage::Panic, None).await;
                // Upstream records no ResponseComplete after a panic.
                self.ctx = None;
                std::panic::resume_unwind(panic)
            }
        }
    }

    /// The response: its `Audit-ID` header, and the request's last events.
    pub async fn finish(mut self, mut resp: Response<Body>) -> Response<Body> {
        if !resp.headers().contains_key(HEADER_AUDIT_ID) {
            resp.headers_mut().insert(HEADER_AUDIT_ID, self.id.clone());
        }
        let Some(mut ctx) = self.ctx.take() else {
            return resp;
        };
        let code = resp.status().as_u16();
        ctx.event.response_status = Some(ResponseStatus::code(code));
        let streaming = ctx.long_running && code < 300 && !ctx.failed_authentication;
        if streaming {
            // Headers are out; the event completes when the body ends.
            ctx.emit(Stage::ResponseStarted, None).await;
            return resp.map(|body| {
                BoxBody::new(AuditedBody {
                    inner: body,
                    ctx: Some(ctx),
                })
            });
        }
        // The body is whole here: the Status of a failure (or a delete's), and
        // the object itself at RequestResponse, are read from it off the request path.
        let wanted = ctx.config.level >= Level::RequestResponse
            || code >= 300
            || matches!(ctx.event.verb.as_str(), "delete" | "deletecollection");
        let (resp, body) = if wanted {
            let content_type = resp
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let (parts, body) = resp.into_parts();
            let bytes = match body.collect().await {
                Ok(c) => c.to_bytes(),
                Err(never) => match never {},
            };
            (
                Response::from_parts(parts, http_body_util::Full::new(bytes.clone()).boxed()),
                Some((bytes, content_type)),
            )
        } else {
            (resp, None)
        };
        if ctx.failed_authentication || ctx.long_running {
            ctx.emit(Stage::ResponseStarted, body.clone()).await;
        }
        if !ctx.failed_authentication {
            ctx.emit(Stage::ResponseComplete, body).await;
        }
        resp
    }
}

/// A request dropped before its response (the client went away mid-handler):
/// upstream's handler returns and its deferred ResponseComplete fakes a
/// success, "Connection closed early".
impl Drop for Request<'_> {
    fn drop(&mut self) {
        let Some(mut ctx) = self.ctx.take() else {
            return;
        };
        if ctx.failed_authentication {
            return;
        }
        if ctx.event.response_status.is_none() {
            ctx.event.response_status = Some(ResponseStatus {
                status: "Success".into(),
                message: "Connection closed early".into(),
                code: 200,
                ..Default::default()
            });
            if ctx.long_running
                && let Some(p) = ctx.pending(Stage::ResponseStarted, None)
            {
                ctx.sink.send_now(p);
            }
        }
        if let Some(p) = ctx.pending(Stage::ResponseComplete, None) {
            ctx.sink.send_now(p);
        }
    }
}

/// A long-running response's body: ResponseComplete is recorded when it ends
/// or is dropped (the client went away).
struct AuditedBody {
    inner: Body,
    ctx: Option<Box<Context>>,
}

impl AuditedBody {
    fn complete(&mut self) {
        if let Some(ctx) = self.ctx.take()
            && let Some(p) = ctx.pending(Stage::ResponseComplete, None)
        {
            ctx.sink.send_now(p);
        }
    }
}

impl hyper::body::Body for AuditedBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(None) = r {
            this.complete();
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for AuditedBody {
    fn drop(&mut self) {
        self.complete();
    }
}

#[cfg(test)]
mod tests;
