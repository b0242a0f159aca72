//! TLS: certificates from `kubernetes.io/tls` Secrets chosen by SNI, and a
//! self-signed fallback for names no Ingress covers (as ingress-nginx's "fake
//! certificate").

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::Shared;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("the Secret has no {0}")]
    Missing(&'static str),
    #[error("tls.crt holds no PEM certificate")]
    NoCertificate,
    #[error("tls.crt is not valid PEM: {0}")]
    BadCertificate(String),
    #[error("tls.key holds no PEM private key")]
    NoKey,
    #[error("tls.key is not a usable private key: {0}")]
    BadKey(String),
    #[error("tls.key does not match the certificate: {0}")]
    Mismatch(String),
    #[error("generating the default certificate: {0}")]
    Generate(String),
}

/// A certificate chain and key from a Secret's `tls.crt` and `tls.key` (PEM).
pub fn certified_key(crt: Option<&[u8]>, key: Option<&[u8]>) -> Result<CertifiedKey, TlsError> {
    let crt = crt.ok_or(TlsError::Missing("tls.crt"))?;
    let key = key.ok_or(TlsError::Missing("tls.key"))?;
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &*crt)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::BadCertificate(e.to_string()))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut &*key)
        .map_err(|e| TlsError::BadKey(e.to_string()))?
        .ok_or(TlsError::NoKey)?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| TlsError::BadKey(e.to_string()))?;
    let ck = CertifiedKey::new(certs, signing);
    // Also refuses a certificate that does not parse.
    ck.keys_match()
        .map_err(|e| TlsError::Mismatch(e.to_string()))?;
    Ok(ck)
}

/// A self-signed certificate for requests no Ingress's TLS section covers.
pub fn default_certificate() -> Result<CertifiedKey, TlsError> {
    let generated = rcgen::generate_simple_self_signed(vec!["ingress.local".to_string()])
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    let key = PrivateKeyDer::Pkcs8(generated.signing_key.serialize_der().into());
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    Ok(CertifiedKey::new(
        vec![generated.cert.der().clone()],
        signing,
    ))
}

/// Picks the certificate by SNI from the current snapshot.
#[derive(Debug)]
pub struct SniResolver {
    pub(crate) shared: Arc<Shared>,
    pub(crate) fallback: Arc<CertifiedKey>,
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let found = hello
            .server_name()
            .and_then(|name| self.shared.snapshot().cert_for(name));
        Some(found.unwrap_or_else(|| self.fallback.clone()))
    }
}

/// The rustls server configuration of the HTTPS port.
pub fn server_config(resolver: SniResolver) -> Result<rustls::ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Generate(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pem_pair(name: &str) -> (String, String) {
        let g = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        (g.cert.pem(), g.signing_key.serialize_pem())
    }

    #[test]
    fn secrets_to_keys() {
        let (crt, key) = pem_pair("a.example.com");
        let (other_crt, _) = pem_pair("b.example.com");
        assert!(certified_key(Some(crt.as_bytes()), Some(key.as_bytes())).is_ok());
        type Case<'a> = (Option<&'a [u8]>, Option<&'a [u8]>, &'a str);
        let cases: Vec<Case> = vec![
            (None, Some(key.as_bytes()), "the Secret has no tls.crt"),
            (Some(crt.as_bytes()), None, "the Secret has no tls.key"),
            (
                Some(b"garbage"),
                Some(key.as_bytes()),
                "tls.crt holds no PEM certificate",
            ),
            (
                Some(crt.as_bytes()),
                Some(b"garbage"),
                "tls.key holds no PEM private key",
            ),
            (
                Some(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
                Some(key.as_bytes()),
                "tls.key does not match the certificate",
            ),
            (
                Some(other_crt.as_bytes()),
                Some(key.as_bytes()),
                "tls.key does not match the certificate",
            ),
        ];
        for (c, k, want) in cases {
            let err = certified_key(c, k)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.starts_with(want), "{want}: got {err:?}");
        }
    }

    #[test]
    fn default_certificate_is_usable() {
        let ck = default_certificate().unwrap();
        assert_eq!(ck.cert.len(), 1);
    }
}
