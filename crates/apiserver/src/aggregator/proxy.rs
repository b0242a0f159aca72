//! The aggregator's proxy: a request for a remote APIService's group-version
//! goes, already authenticated and authorized here, to a ready endpoint of the
//! APIService's Service over HTTPS, with the user in upstream's request headers
//! and the front proxy's client certificate; the answer streams back (watches
//! included). An APIService that is not Available answers 503, as upstream's.

use std::sync::Arc;

use berth_api::user::UserInfo;
use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use super::Remote;
use crate::server::{Body, State};
use crate::status::{ApiError, ApiResult};

/// TLS to one remote APIService: its caBundle (or, with
/// `insecureSkipTLSVerify`, any certificate) and the front proxy's identity.
pub(crate) fn tls_config(state: &State, remote: &Remote) -> Result<rustls::ClientConfig, String> {
    let (cert_pem, key_pem) = state
        .proxy_client
        .as_ref()
        .ok_or_else(|| "the front proxy has no client certificate".to_string())?;
    let certs = rustls_pemfile::certs(&mut cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no front proxy client key".to_string())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if remote.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(crate::streaming::AnyServerCert(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        if let Some(ca) = &remote.ca_bundle {
            for c in rustls_pemfile::certs(&mut ca.as_slice()).flatten() {
                let _ = roots.add(c);
            }
        }
        builder.with_root_certificates(roots)
    };
    let mut cfg = builder
        .with_client_auth_cert(certs, key)
        .map_err(|e| e.to_string())?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// Opens an HTTP/1.1 connection to the remote's endpoint.
pub(crate) async fn connect(
    state: &State,
    remote: &Remote,
) -> Result<hyper::client::conn::http1::SendRequest<ReqBody>, String> {
    let addr = crate::endpoints::resolve_service(
        &state.rest.cache,
        &remote.namespace,
        &remote.service,
        remote.port,
    )?;
    let cfg = tls_config(state, remote)?;
    let tcp = tokio::time::timeout(std::time::Duration::from_secs(5), TcpStream::connect(addr))
        .await
        .map_err(|_| format!("dial tcp {addr}: i/o timeout"))?
        .map_err(|e| format!("dial tcp {addr}: {e}"))?;
    let name = ServerName::try_from(format!("{}.{}.svc", remote.service, remote.namespace))
        .map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "aggregated API connection ended");
        }
    });
    Ok(sender)
}

/// A proxied request's body: the client's, or none for the API server's own checks.
pub(crate) type ReqBody = http_body_util::Either<Incoming, Full<Bytes>>;

/// Upstream's `http.Error` answer: plain text.
fn plain(code: StatusCode, msg: &str) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from(format!("{msg}\n")))
            .map_err(|e| match e {})
            .boxed(),
    );
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut().insert(
        HeaderName::from_static("x-content-type-options"),
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// The request headers the aggregated server may see: the client's (less its
/// credentials and any identity headers it tried to pass), then the user.
fn forwarded_headers(req: &Request<Incoming>, user: &UserInfo) -> http::HeaderMap {
    let mut headers = crate::proxy::end_to_end(req.headers());
    headers.remove(header::AUTHORIZATION);
    let drop: Vec<HeaderName> = headers
        .keys()
        .filter(|k| {
            let n = k.as_str();
            n.starts_with("impersonate-") || n.starts_with("x-remote-")
        })
        .cloned()
        .collect();
    for k in drop {
        headers.remove(k);
    }
    if let Ok(v) = HeaderValue::from_str(&user.name) {
        headers.insert(HeaderName::from_static("x-remote-user"), v);
    }
    if !user.uid.is_empty()
        && let Ok(v) = HeaderValue::from_str(&user.uid)
    {
        headers.insert(HeaderName::from_static("x-remote-uid"), v);
    }
    for g in &user.groups {
        if let Ok(v) = HeaderValue::from_str(g) {
            headers.append(HeaderName::from_static("x-remote-group"), v);
        }
    }
    for (k, vals) in &user.extra {
        // Keys are percent-encoded in the header name, as upstream's.
        let key: String =
            percent_encoding::utf8_percent_encode(k, percent_encoding::NON_ALPHANUMERIC)
                .to_string()
                .to_ascii_lowercase();
        let Ok(name) = HeaderName::from_bytes(format!("x-remote-extra-{key}").as_bytes()) else {
            continue;
        };
        for v in vals {
            if let Ok(v) = HeaderValue::from_str(v) {
                headers.append(name.clone(), v);
            }
        }
    }
    headers
}

/// Serves a request for a remote APIService's group-version.
pub async fn serve(
    state: &State,
    req: Request<Incoming>,
    user: &UserInfo,
    remote: &Remote,
) -> ApiResult<Response<Body>> {
    if !remote.available {
        return Ok(plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "service unavailable",
        ));
    }
    let mut sender = match connect(state, remote).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(apiservice = %remote.name, error = %e, "aggregated API unreachable");
            return Ok(plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "service unavailable",
            ));
        }
    };
    let headers = forwarded_headers(&req, user);
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let method = req.method().clone();
    let mut out = Request::builder()
        .method(method)
        .uri(target)
        .body(http_body_util::Either::Left(req.into_body()))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    *out.headers_mut() = headers;
    if let Ok(h) = HeaderValue::from_str(&format!("{}.{}.svc", remote.service, remote.namespace)) {
        out.headers_mut().insert(header::HOST, h);
    }
    let resp = match sender.send_request(out).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(apiservice = %remote.name, error = %e, "aggregated API request failed");
            return Ok(plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "service unavailable",
            ));
        }
    };
    let status = resp.status();
    let headers = crate::proxy::end_to_end(resp.headers());
    let mut r = Response::new(crate::proxy::stream_body(resp.into_body()));
    *r.status_mut() = status;
    *r.headers_mut() = headers;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_is_plain_text_503() {
        let r = plain(StatusCode::SERVICE_UNAVAILABLE, "service unavailable");
        assert_eq!(r.status(), 503);
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
    }
}
