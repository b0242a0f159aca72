//! HTTPS servers the suites stand up themselves (admission webhooks, aggregated
//! API servers): a throwaway CA, a serving certificate, and a JSON answering loop.

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// A new CA (its PEM) and a server config with a certificate for `sans` signed by
/// it; with `client_ca` (PEM), clients must present a certificate it signed.
pub fn server(sans: &[&str], client_ca: Option<&str>) -> (String, Arc<rustls::ServerConfig>) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "berth e2e CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert =
        rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(rustls::DEFAULT_VERSIONS)
        .unwrap();
    let builder = match client_ca {
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in rustls_pemfile::certs(&mut pem.as_bytes()) {
                roots.add(c.unwrap()).unwrap();
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let server = builder
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (ca.pem(), Arc::new(server))
}

/// Serves HTTPS on `listener` until the task running it is aborted: every
/// request is answered with `answer(path, headers, body as JSON)` as JSON. A
/// client the TLS config refuses gets no answer.
pub async fn serve_json<F, Fut>(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    answer: F,
) where
    F: Fn(String, hyper::HeaderMap, Value) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Value> + Send + 'static,
{
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    while let Ok((tcp, _)) = listener.accept().await {
        let (acceptor, answer) = (acceptor.clone(), answer.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let answer = answer.clone();
                async move {
                    let path = req.uri().path().to_string();
                    let headers = req.headers().clone();
                    let body = req
                        .into_body()
                        .collect()
                        .await
                        .map(|c| c.to_bytes())
                        .unwrap_or_default();
                    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let out = answer(path, headers, json).await;
                    Ok::<_, std::convert::Infallible>(
                        hyper::Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from(out.to_string())))
                            .unwrap(),
                    )
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), svc)
                .await;
        });
    }
}
