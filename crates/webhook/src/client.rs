//! Calling a webhook: upstream's `util/webhook` client. One POST of JSON over
//! HTTPS and HTTP/1.1 (upstream pins http/1.1 so that concurrent requests
//! spread over a Service's backends), verified against the `caBundle` (or the
//! caller's default roots), with the TLS server name `<svc>.<ns>.svc` for
//! service references. Errors read as Go's `Post "<url>": …`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::RootCertStore;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::url::Url;

/// The largest response body read from a webhook.
pub const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Turns a webhook's `clientConfig.service` into an address to dial, and the
/// host of a `clientConfig.url` too (upstream's `ServiceResolver` and its
/// dialer). The API server resolves Services from its own state (the
/// ClusterIP, or a ready endpoint as `--enable-aggregator-routing`).
#[async_trait]
pub trait ServiceResolver: Send + Sync {
    /// The address of port `port` of Service `namespace/name`.
    async fn resolve_service(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
    ) -> Result<SocketAddr, String>;

    /// The address of a URL's host; by default an IP literal as it is and a
    /// name through the system resolver.
    async fn resolve_host(&self, host: &str, port: u16) -> Result<SocketAddr, String> {
        if let Ok(ip) = host.parse::<std::net::IpAddr>() {
            return Ok(SocketAddr::new(ip, port));
        }
        let mut addrs = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("dial tcp: lookup {host}: {}", io_text(&e)))?;
        addrs
            .next()
            .ok_or_else(|| format!("dial tcp: lookup {host}: no such host"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Service {
        namespace: String,
        name: String,
        port: u16,
    },
    Url {
        host: String,
        port: u16,
    },
}

/// Where one webhook lives and how its certificate is verified.
pub struct Endpoint {
    target: Target,
    /// `scheme://host[:port]` as upstream's REST client prints it.
    base: String,
    path: String,
    /// What the `Host` header says.
    authority: String,
    server_name: ServerName<'static>,
    tls: TlsConnector,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("target", &self.target)
            .field("base", &self.base)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    pub(crate) fn service(
        namespace: &str,
        name: &str,
        port: u16,
        path: &str,
        tls: Arc<rustls::ClientConfig>,
    ) -> Endpoint {
        let host = format!("{name}.{namespace}.svc");
        let authority = format!("{host}:{port}");
        let server_name = ServerName::try_from(host).unwrap_or(localhost());
        Endpoint {
            target: Target::Service {
                namespace: namespace.to_string(),
                name: name.to_string(),
                port,
            },
            base: format!("https://{authority}"),
            path: path.to_string(),
            authority,
            server_name,
            tls: TlsConnector::from(tls),
        }
    }

    pub(crate) fn url(u: &Url, tls: Arc<rustls::ClientConfig>) -> Endpoint {
        let server_name = ServerName::try_from(u.host.clone()).unwrap_or(localhost());
        Endpoint {
            target: Target::Url {
                host: u.host.clone(),
                port: u.port.unwrap_or(443),
            },
            base: format!("{}://{}", u.scheme, u.host_port),
            path: u.path.clone(),
            authority: u.host_port.clone(),
            server_name,
            tls: TlsConnector::from(tls),
        }
    }

    /// The URL upstream's client posts to, with its `timeout` parameter.
    pub(crate) fn request_url(&self, timeout: Duration) -> String {
        format!(
            "{}{}?timeout={}s",
            self.base,
            self.path,
            timeout.as_secs().max(1)
        )
    }

    fn request_target(&self, timeout: Duration) -> String {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        format!("{path}?timeout={}s", timeout.as_secs().max(1))
    }
}

/// A name rustls always accepts, for targets whose host is not a valid
/// server name: verification then fails, as it should.
fn localhost() -> ServerName<'static> {
    ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into())
}

/// The rustls client configuration for one `caBundle`: its certificates, or
/// `default_roots` when it is empty.
pub(crate) fn tls_config(
    ca_bundle: &[u8],
    default_roots: &Arc<RootCertStore>,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let roots = if ca_bundle.is_empty() {
        default_roots.clone()
    } else {
        let mut roots = RootCertStore::empty();
        let mut reader = ca_bundle;
        for cert in rustls_pemfile::certs(&mut reader) {
            let cert = cert.map_err(|e| format!("unable to load root certificates: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("unable to load root certificates: {e}"))?;
        }
        if roots.is_empty() {
            return Err(
                "unable to load root certificates: unable to parse bytes as PEM block".to_string(),
            );
        }
        Arc::new(roots)
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::DEFAULT_VERSIONS)
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Why a POST failed, already in upstream's words.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PostError(pub String);

/// POSTs `body` and returns the response body of a 2xx answer. Everything
/// (resolution, dial, handshake, request, body) runs within `timeout`.
pub(crate) async fn post(
    endpoint: &Endpoint,
    resolver: &dyn ServiceResolver,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Bytes, PostError> {
    let url = endpoint.request_url(timeout);
    match tokio::time::timeout(timeout, exchange(endpoint, resolver, body, timeout)).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(Failure::Transport(e))) => Err(PostError(format!("Post \"{url}\": {e}"))),
        Ok(Err(Failure::Status(e))) => Err(PostError(e)),
        Err(_) => Err(PostError(format!(
            "Post \"{url}\": context deadline exceeded"
        ))),
    }
}

enum Failure {
    /// The request never got an answer (Go's `*url.Error`).
    Transport(String),
    /// A non-2xx answer: the Status it carried, or Go's generic text.
    Status(String),
}

async fn exchange(
    endpoint: &Endpoint,
    resolver: &dyn ServiceResolver,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Bytes, Failure> {
    let addr = match &endpoint.target {
        Target::Service {
            namespace,
            name,
            port,
        } => resolver.resolve_service(namespace, name, *port).await,
        Target::Url { host, port } => resolver.resolve_host(host, *port).await,
    }
    .map_err(Failure::Transport)?;
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| Failure::Transport(format!("dial tcp {addr}: connect: {}", io_text(&e))))?;
    let _ = tcp.set_nodelay(true);
    let tls = endpoint
        .tls
        .connect(endpoint.server_name.clone(), tcp)
        .await
        .map_err(|e| Failure::Transport(tls_text(&e)))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| Failure::Transport(e.to_string()))?;
    let req = http::Request::post(endpoint.request_target(timeout))
        .header(http::header::HOST, &endpoint.authority)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .header(http::header::USER_AGENT, "berth-apiserver-admission")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| Failure::Transport(e.to_string()))?;
    let response = async {
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| Failure::Transport(e.to_string()))?;
        let status = resp.status().as_u16();
        let bytes = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| Failure::Transport(format!("reading the response: {e}")))?
            .to_bytes();
        if (200..300).contains(&status) {
            Ok(bytes)
        } else {
            Err(Failure::Status(status_error_text(status, &bytes)))
        }
    };
    // The connection is driven here rather than on a spawned task, so that a
    // timeout drops the socket with everything else.
    tokio::pin!(response);
    tokio::pin!(conn);
    let mut conn_done = false;
    loop {
        tokio::select! {
            biased;
            r = &mut response => return r,
            c = &mut conn, if !conn_done => {
                conn_done = true;
                if let Err(e) = c {
                    tracing::debug!(error = %e, "webhook connection ended");
                }
            }
        }
    }
}

/// The text of the error upstream's REST client makes of a non-2xx answer:
/// the message of the `Status` it carried, or `NewGenericServerResponse`'s.
fn status_error_text(code: u16, body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body)
        && v.get("kind").and_then(|k| k.as_str()) == Some("Status")
        && let Some(m) = v.get("message").and_then(|m| m.as_str())
        && !m.is_empty()
    {
        return m.to_string();
    }
    match code {
        409 => "the server reported a conflict".into(),
        404 => "the server could not find the requested resource".into(),
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "the server has asked for the client to provide credentials".into(),
        403 => "the server does not allow access to the requested resource".into(),
        405 => "the server does not allow this method on the requested resource".into(),
        406 => "the server was unable to respond with a content type that the client supports"
            .into(),
        415 => "the server was unable to respond with a content type that the client supports"
            .into(),
        422 => "the server rejected our request due to an error in our request".into(),
        429 => "the server has received too many requests and has asked us to try again later"
            .into(),
        503 => "the server is currently unable to handle the request".into(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".into(),
        c if c >= 500 => {
            let text = String::from_utf8_lossy(&body[..body.len().min(1024)]);
            format!(
                "an error on the server ({}) has prevented the request from succeeding",
                berth_api::validation::go_quote(text.trim())
            )
        }
        c => format!(
            "the server responded with the status code {c} but did not return more information"
        ),
    }
}

/// An I/O error as Go words it (`connection refused`, not `Connection
/// refused (os error 111)`).
fn io_text(e: &std::io::Error) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => "connection refused".into(),
        ConnectionReset => "connection reset by peer".into(),
        TimedOut => "i/o timeout".into(),
        _ => {
            let s = e.to_string();
            let s = match s.find(" (os error") {
                Some(i) => s[..i].to_string(),
                None => s,
            };
            let mut c = s.chars();
            match c.next() {
                Some(f) => f.to_lowercase().chain(c).collect(),
                None => s,
            }
        }
    }
}

/// A failed handshake, in Go's `crypto/tls` and `x509` words where they
/// have one.
fn tls_text(e: &std::io::Error) -> String {
    use rustls::CertificateError as C;
    let Some(err) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
        return io_text(e);
    };
    let x509 = match err {
        // A bad signature means a CA of the same name but another key: to
        // Go, an unknown authority too.
        rustls::Error::InvalidCertificate(C::UnknownIssuer | C::BadSignature) => {
            "x509: certificate signed by unknown authority".to_string()
        }
        rustls::Error::InvalidCertificate(C::NotValidForName)
        | rustls::Error::InvalidCertificate(C::NotValidForNameContext { .. }) => {
            "x509: certificate is not valid for the requested name".to_string()
        }
        rustls::Error::InvalidCertificate(
            C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. },
        ) => "x509: certificate has expired or is not yet valid".to_string(),
        rustls::Error::InvalidCertificate(_) => format!("x509: {err}"),
        other => return format!("remote error: tls: {other}"),
    };
    format!("tls: failed to verify certificate: {x509}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_2xx_answers_read_as_the_rest_client() {
        assert_eq!(
            status_error_text(404, b"404 page not found"),
            "the server could not find the requested resource"
        );
        assert_eq!(
            status_error_text(500, b"boom\n"),
            "an error on the server (\"boom\") has prevented the request from succeeding"
        );
        assert_eq!(
            status_error_text(
                403,
                br#"{"kind":"Status","status":"Failure","message":"go away"}"#
            ),
            "go away"
        );
        assert_eq!(
            status_error_text(302, b""),
            "the server responded with the status code 302 but did not return more information"
        );
    }

    #[test]
    fn urls_as_upstream_prints_them() {
        let tls = tls_config(&[], &Arc::new(RootCertStore::empty())).unwrap();
        let e = Endpoint::service("ns", "svc", 443, "/mutate", tls.clone());
        assert_eq!(
            e.request_url(Duration::from_secs(10)),
            "https://svc.ns.svc:443/mutate?timeout=10s"
        );
        assert_eq!(
            e.request_target(Duration::from_secs(5)),
            "/mutate?timeout=5s"
        );
        let u = crate::url::parse("https://10.1.2.3/v").unwrap();
        let e = Endpoint::url(&u, tls);
        assert_eq!(
            e.request_url(Duration::from_secs(30)),
            "https://10.1.2.3/v?timeout=30s"
        );
        assert_eq!(
            e.target,
            Target::Url {
                host: "10.1.2.3".into(),
                port: 443
            }
        );
    }

    #[test]
    fn bad_ca_bundles_are_errors() {
        let roots = Arc::new(RootCertStore::empty());
        assert_eq!(
            tls_config(b"not a pem", &roots).err().as_deref(),
            Some("unable to load root certificates: unable to parse bytes as PEM block")
        );
        assert!(
            tls_config(
                b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                &roots
            )
            .is_err()
        );
    }
}
