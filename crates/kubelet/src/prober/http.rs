//! HTTP GET probes, as upstream's `pkg/probe/http`:
//! - URL `scheme://host:port/path` with host defaulting to the pod IP;
//! - headers from the probe, `User-Agent: kube-probe/1.33` and `Accept: */*`
//!   unless given (an empty Accept removes it), `Connection: close`;
//! - HTTPS without certificate verification;
//! - 200–399 is success. Redirects to the same host are followed (at most
//!   10); a redirect to another host is not, and answers success with the
//!   warning `Probe terminated redirects, Response body: …`;
//! - other codes fail with `HTTP probe failed with statuscode: <code>`;
//! - the body is read up to 10 KiB, and the whole exchange must finish
//!   within the timeout.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use k8s_openapi::api::core::v1::HTTPGetAction;
use tokio::io::{AsyncRead, AsyncWrite};

use super::tcp::{dial_error, join_host_port};
use super::{MAX_OUTPUT, Outcome, USER_AGENT};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// Where and how an HTTP probe connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpTarget {
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
    /// Path and query as given (may be empty: the request asks for `/`).
    pub path: String,
    /// Request headers in order (`Host` here overrides the Host header).
    pub headers: Vec<(String, String)>,
}

impl HttpTarget {
    /// The target of an httpGet action with its port already resolved.
    pub fn from_action(a: &HTTPGetAction, pod_ip: &str, port: u16) -> Result<Self, String> {
        let scheme = match a
            .scheme
            .as_deref()
            .unwrap_or("HTTP")
            .to_ascii_lowercase()
            .as_str()
        {
            "http" | "" => Scheme::Http,
            "https" => Scheme::Https,
            other => return Err(format!("unsupported protocol scheme {other:?}")),
        };
        let host = a
            .host
            .as_deref()
            .filter(|h| !h.is_empty())
            .unwrap_or(pod_ip)
            .to_string();
        let mut path = a.path.clone().unwrap_or_default();
        // A fragment never reaches the server.
        if let Some(i) = path.find('#') {
            path.truncate(i);
        }
        if !path.is_empty() && !path.starts_with('/') {
            path.insert(0, '/');
        }
        let headers = a
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect();
        Ok(Self {
            scheme,
            host,
            port,
            path,
            headers,
        })
    }

    /// The URL as Go prints it in errors.
    pub fn url(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme.as_str(),
            join_host_port(&self.host, self.port),
            self.path
        )
    }

    fn request_target(&self) -> &str {
        if self.path.is_empty() {
            "/"
        } else {
            &self.path
        }
    }

    /// The request headers upstream sends (canonical names, defaults added).
    pub fn request_headers(&self) -> Vec<(String, String)> {
        let has = |n: &str| self.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
        let mut out: Vec<(String, String)> = Vec::new();
        let host = self
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("host"))
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| join_host_port(&self.host, self.port));
        out.push(("Host".into(), host));
        for (k, v) in &self.headers {
            if k.eq_ignore_ascii_case("host") {
                continue;
            }
            if k.eq_ignore_ascii_case("accept") && v.is_empty() {
                continue;
            }
            out.push((canonical_header(k), v.clone()));
        }
        if !has("user-agent") {
            out.push(("User-Agent".into(), USER_AGENT.into()));
        }
        if !has("accept") {
            out.push(("Accept".into(), "*/*".into()));
        }
        out.push(("Connection".into(), "close".into()));
        out
    }
}

/// Go's `CanonicalMIMEHeaderKey`: `x-custom-header` → `X-Custom-Header`.
pub fn canonical_header(name: &str) -> String {
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return name.to_string();
    }
    let mut upper = true;
    name.chars()
        .map(|c| {
            let out = if upper {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            };
            upper = c == '-';
            out
        })
        .collect()
}

/// Runs an HTTP probe.
pub async fn probe(target: &HttpTarget, timeout: Duration) -> (Outcome, String) {
    let current = Mutex::new(target.url());
    match tokio::time::timeout(timeout, follow(target, &current)).await {
        Ok(Ok((status, body))) => classify(status, &body),
        Ok(Err((url, e))) => (Outcome::Failure, format!("Get {url:?}: {e}")),
        Err(_) => {
            let url = current.lock().map(|u| u.clone()).unwrap_or_default();
            (
                Outcome::Failure,
                format!(
                    "Get {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                ),
            )
        }
    }
}

fn classify(status: u16, body: &[u8]) -> (Outcome, String) {
    let body = String::from_utf8_lossy(body).into_owned();
    match status {
        200..=299 => (Outcome::Success, body),
        300..=399 => (
            Outcome::Warning,
            format!("Probe terminated redirects, Response body: {body}"),
        ),
        _ => (
            Outcome::Failure,
            format!("HTTP probe failed with statuscode: {status}"),
        ),
    }
}

const MAX_REDIRECTS: usize = 10;

/// Sends the request, following same-host redirects: (status, body) or
/// (url, error).
async fn follow(
    target: &HttpTarget,
    current: &Mutex<String>,
) -> Result<(u16, Vec<u8>), (String, String)> {
    let mut t = target.clone();
    let mut sent = 0;
    loop {
        sent += 1;
        let url = t.url();
        if let Ok(mut c) = current.lock() {
            *c = url.clone();
        }
        let (status, location, body) = exchange(&t).await.map_err(|e| (url.clone(), e))?;
        let redirect = matches!(status, 301 | 302 | 303 | 307 | 308);
        let Some(location) = location.filter(|_| redirect) else {
            return Ok((status, body));
        };
        let next = resolve_location(&t, &location).map_err(|e| (url.clone(), e))?;
        if next.host != target.host {
            // Another host: upstream stops and reports this response.
            return Ok((status, body));
        }
        if sent >= MAX_REDIRECTS {
            return Err((next.url(), "stopped after 10 redirects".to_string()));
        }
        t = next;
    }
}

/// The request a `Location` header points to, relative to `t`.
fn resolve_location(t: &HttpTarget, location: &str) -> Result<HttpTarget, String> {
    let mut next = t.clone();
    let absolute = location.contains("://") || location.starts_with("//");
    if absolute {
        let full = if location.starts_with("//") {
            format!("{}:{location}", t.scheme.as_str())
        } else {
            location.to_string()
        };
        let uri: http::Uri = full
            .parse()
            .map_err(|e| format!("failed to parse Location header {location:?}: {e}"))?;
        next.scheme = match uri.scheme_str() {
            Some("https") => Scheme::Https,
            Some("http") => Scheme::Http,
            other => {
                return Err(format!(
                    "unsupported protocol scheme {:?}",
                    other.unwrap_or("")
                ));
            }
        };
        next.host = uri
            .host()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        next.port = uri.port_u16().unwrap_or(match next.scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        });
        next.path = uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        // A custom Host header only survives relative redirects.
        next.headers
            .retain(|(k, _)| !k.eq_ignore_ascii_case("host"));
    } else if location.starts_with('/') {
        next.path = location.to_string();
    } else {
        let base = t.request_target();
        let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
        next.path = format!("{dir}{location}");
    }
    if let Some(i) = next.path.find('#') {
        next.path.truncate(i);
    }
    Ok(next)
}

/// Aborts the connection task when the exchange ends or is cancelled.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One request on a fresh connection: (status, Location, body up to 10 KiB).
async fn exchange(t: &HttpTarget) -> Result<(u16, Option<String>, Vec<u8>), String> {
    let addr = join_host_port(&t.host, t.port);
    let tcp = tokio::net::TcpStream::connect((t.host.as_str(), t.port))
        .await
        .map_err(|e| dial_error(&addr, &t.host, &e))?;
    match t.scheme {
        Scheme::Http => send(tcp, t).await,
        Scheme::Https => {
            let name = rustls::pki_types::ServerName::try_from(t.host.clone())
                .map_err(|e| format!("tls: invalid server name {:?}: {e}", t.host))?;
            let tls = tokio_rustls::TlsConnector::from(insecure_tls_config()?)
                .connect(name, tcp)
                .await
                .map_err(|e| format!("tls: {e}"))?;
            send(tls, t).await
        }
    }
}

async fn send<S>(io: S, t: &HttpTarget) -> Result<(u16, Option<String>, Vec<u8>), String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .handshake(hyper_util::rt::TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    let _conn = AbortOnDrop(tokio::spawn(async move {
        let _ = conn.await;
    }));
    let mut req = http::Request::builder()
        .method(http::Method::GET)
        .uri(t.request_target());
    for (k, v) in t.request_headers() {
        req = req.header(k, v);
    }
    let req = req
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("invalid request: {e}"))?;
    let resp = sender.send_request(req).await.map_err(|e| {
        if e.is_incomplete_message() || e.is_closed() {
            "EOF".to_string()
        } else {
            e.to_string()
        }
    })?;
    let status = resp.status().as_u16();
    let location = resp
        .headers()
        .get(http::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut body = resp.into_body();
    let mut data = Vec::new();
    while data.len() < MAX_OUTPUT {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(chunk) = frame.into_data() {
                    data.extend_from_slice(&chunk);
                }
            }
            // A body cut short still lets the status decide, as upstream.
            Some(Err(_)) | None => break,
        }
    }
    data.truncate(MAX_OUTPUT);
    Ok((status, location, data))
}

fn insecure_tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(rustls::DEFAULT_VERSIONS)
                .map_err(|e| format!("tls: {e}"))?;
            Ok(Arc::new(
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(berth_runtime::tls::AnyServerCert(
                        provider,
                    )))
                    .with_no_client_auth(),
            ))
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A tiny HTTP/1.1 server: path → (status, extra headers, body). Records
    /// each request's head.
    struct TestServer {
        port: u16,
        requests: Arc<Mutex<Vec<String>>>,
    }

    type Routes = HashMap<&'static str, (u16, Vec<(&'static str, String)>, String)>;

    async fn serve_conn<S: AsyncRead + AsyncWrite + Unpin>(
        mut s: S,
        routes: &Routes,
        log: &Mutex<Vec<String>>,
    ) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let head = String::from_utf8_lossy(&buf).into_owned();
        log.lock().unwrap().push(head.clone());
        let target = head.split_whitespace().nth(1).unwrap_or("/");
        let path = target.split('?').next().unwrap_or("/").to_string();
        if path == "/slow" {
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        let (status, headers, body) =
            routes
                .get(path.as_str())
                .cloned()
                .unwrap_or((404, vec![], "not found".into()));
        let mut resp = format!(
            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (k, v) in headers {
            resp.push_str(&format!("{k}: {v}\r\n"));
        }
        resp.push_str("\r\n");
        resp.push_str(&body);
        let _ = s.write_all(resp.as_bytes()).await;
        let _ = s.shutdown().await;
    }

    async fn start(routes: Routes, tls: Option<tokio_rustls::TlsAcceptor>) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        let routes = Arc::new(routes);
        tokio::spawn(async move {
            loop {
                let Ok((s, _)) = listener.accept().await else {
                    return;
                };
                let routes = routes.clone();
                let log = log.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        Some(acc) => {
                            if let Ok(s) = acc.accept(s).await {
                                serve_conn(s, &routes, &log).await
                            }
                        }
                        None => serve_conn(s, &routes, &log).await,
                    }
                });
            }
        });
        TestServer { port, requests }
    }

    fn target(port: u16, path: &str) -> HttpTarget {
        HttpTarget {
            scheme: Scheme::Http,
            host: "127.0.0.1".into(),
            port,
            path: path.into(),
            headers: vec![],
        }
    }

    fn routes(port_other: u16) -> Routes {
        let mut r: Routes = HashMap::new();
        r.insert("/healthz", (200, vec![], "ok".into()));
        r.insert("/nocontent", (204, vec![], String::new()));
        r.insert("/error", (500, vec![], "boom".into()));
        r.insert("/missing", (404, vec![], "nope".into()));
        r.insert("/notmodified", (304, vec![], String::new()));
        r.insert("/big", (200, vec![], "y".repeat(MAX_OUTPUT * 2)));
        r.insert(
            "/local",
            (302, vec![("Location", "/healthz".into())], "moved".into()),
        );
        r.insert(
            "/relative",
            (301, vec![("Location", "healthz".into())], String::new()),
        );
        r.insert(
            "/to-error",
            (307, vec![("Location", "/error".into())], String::new()),
        );
        r.insert(
            "/loop",
            (302, vec![("Location", "/loop".into())], String::new()),
        );
        r.insert(
            "/elsewhere",
            (
                302,
                vec![("Location", format!("http://localhost:{port_other}/healthz"))],
                "bye".into(),
            ),
        );
        r
    }

    #[tokio::test]
    async fn status_codes_and_redirects() {
        let s = start(routes(1), None).await;
        let p = s.port;
        let t = Duration::from_secs(2);
        let cases: Vec<(&str, Outcome, String)> = vec![
            ("/healthz", Outcome::Success, "ok".into()),
            ("/nocontent", Outcome::Success, String::new()),
            (
                "/error",
                Outcome::Failure,
                "HTTP probe failed with statuscode: 500".into(),
            ),
            (
                "/missing",
                Outcome::Failure,
                "HTTP probe failed with statuscode: 404".into(),
            ),
            (
                "/notmodified",
                Outcome::Warning,
                "Probe terminated redirects, Response body: ".into(),
            ),
            ("/local", Outcome::Success, "ok".into()),
            ("/relative", Outcome::Success, "ok".into()),
            (
                "/to-error",
                Outcome::Failure,
                "HTTP probe failed with statuscode: 500".into(),
            ),
            (
                "/loop",
                Outcome::Failure,
                format!("Get \"http://127.0.0.1:{p}/loop\": stopped after 10 redirects"),
            ),
            (
                "/elsewhere",
                Outcome::Warning,
                "Probe terminated redirects, Response body: bye".into(),
            ),
        ];
        for (path, want_o, want_out) in cases {
            let got = probe(&target(p, path), t).await;
            assert_eq!(got, (want_o, want_out), "{path}");
        }
        let (o, body) = probe(&target(p, "/big"), t).await;
        assert_eq!((o, body.len()), (Outcome::Success, MAX_OUTPUT));
        // The loop made exactly 10 requests.
        let loops = s
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.starts_with("GET /loop "))
            .count();
        assert_eq!(loops, 10);
    }

    #[tokio::test]
    async fn request_headers_as_upstream() {
        let s = start(routes(1), None).await;
        let mut t = target(s.port, "/healthz?x=1");
        t.headers = vec![
            ("x-custom".into(), "v1".into()),
            ("X-Custom".into(), "v2".into()),
        ];
        assert_eq!(probe(&t, Duration::from_secs(2)).await.0, Outcome::Success);
        let head = s.requests.lock().unwrap().last().cloned().unwrap();
        assert!(head.starts_with("GET /healthz?x=1 HTTP/1.1\r\n"), "{head}");
        for line in [
            format!("Host: 127.0.0.1:{}", s.port),
            "User-Agent: kube-probe/1.33".to_string(),
            "Accept: */*".to_string(),
            "X-Custom: v1".to_string(),
            "X-Custom: v2".to_string(),
            "Connection: close".to_string(),
        ] {
            assert!(
                head.contains(&format!("{line}\r\n")),
                "{line} missing in {head}"
            );
        }
        // Overrides: Host, User-Agent; an empty Accept is dropped.
        let mut t = target(s.port, "");
        t.headers = vec![
            ("Host".into(), "example.com".into()),
            ("User-Agent".into(), "mine".into()),
            ("Accept".into(), String::new()),
        ];
        assert_eq!(probe(&t, Duration::from_secs(2)).await.0, Outcome::Failure); // "/" is 404
        let head = s.requests.lock().unwrap().last().cloned().unwrap();
        assert!(head.starts_with("GET / HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("Host: example.com\r\n"), "{head}");
        assert!(head.contains("User-Agent: mine\r\n"), "{head}");
        assert!(!head.contains("kube-probe"), "{head}");
        assert!(!head.contains("Accept:"), "{head}");
    }

    #[tokio::test]
    async fn refused_and_timeout() {
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        assert_eq!(
            probe(&target(closed, "/healthz"), Duration::from_secs(1)).await,
            (
                Outcome::Failure,
                format!(
                    "Get \"http://127.0.0.1:{closed}/healthz\": dial tcp 127.0.0.1:{closed}: connect: connection refused"
                )
            )
        );
        let s = start(routes(1), None).await;
        let started = std::time::Instant::now();
        let got = probe(&target(s.port, "/slow"), Duration::from_millis(300)).await;
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(
            got,
            (
                Outcome::Failure,
                format!(
                    "Get \"http://127.0.0.1:{}/slow\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                    s.port
                )
            )
        );
    }

    #[tokio::test]
    async fn https_without_verification() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        let s = start(
            routes(1),
            Some(tokio_rustls::TlsAcceptor::from(Arc::new(cfg))),
        )
        .await;
        let mut t = target(s.port, "/healthz");
        t.scheme = Scheme::Https;
        assert_eq!(
            probe(&t, Duration::from_secs(2)).await,
            (Outcome::Success, "ok".into())
        );
        // Plain HTTP to the TLS port fails rather than hanging.
        t.scheme = Scheme::Http;
        assert_eq!(probe(&t, Duration::from_secs(2)).await.0, Outcome::Failure);
    }

    #[test]
    fn targets_from_actions() {
        let a: HTTPGetAction = serde_json::from_value(serde_json::json!({
            "path": "healthz#frag", "port": 8080, "scheme": "HTTPS",
            "httpHeaders": [{"name": "x-a", "value": "1"}]
        }))
        .unwrap();
        let t = HttpTarget::from_action(&a, "10.1.0.5", 8080).unwrap();
        assert_eq!(t.url(), "https://10.1.0.5:8080/healthz");
        let a: HTTPGetAction =
            serde_json::from_value(serde_json::json!({"port": 80, "host": "fd00::1"})).unwrap();
        let t = HttpTarget::from_action(&a, "10.1.0.5", 80).unwrap();
        assert_eq!(t.url(), "http://[fd00::1]:80");
        assert_eq!(t.request_target(), "/");
        assert_eq!(canonical_header("x-custom-header"), "X-Custom-Header");
        assert_eq!(canonical_header("user-AGENT"), "User-Agent");
    }
}
