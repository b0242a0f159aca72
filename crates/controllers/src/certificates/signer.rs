//! The CSR signer (upstream's `csrsigning` for the
//! `kubernetes.io/kube-apiserver-client-kubelet` and
//! `kubernetes.io/kube-apiserver-client` signers): an approved request that is
//! neither denied nor failed is issued with the cluster CA, the client
//! certificates the API server's client-certificate authenticator trusts.
//! A request the signer will not issue gets a `Failed` condition
//! (`SignerValidationFailure`), as upstream.
//!
//! The certificate keeps the request's subject, SANs and public key; its usages
//! are `spec.usages` (never the request's extensions); it is valid from 5
//! minutes ago for `spec.expirationSeconds` (at least 10 minutes) or the
//! signing duration, whichever is shorter, and never past the CA.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Controller};
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use tracing::{info, warn};
use x509_parser::time::ASN1Time;

use super::{
    API_SERVER_CLIENT_SIGNER, Error, FAILED, KUBELET_CLIENT_SIGNER, Request, approval,
    has_condition, issued, usages, validate_api_server_client_usages, validate_kubelet_client,
};

/// Upstream's `--cluster-signing-duration` default (8760h).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);
/// The shortest certificate issued, whatever `spec.expirationSeconds` asks.
const MIN_DURATION: Duration = Duration::from_secs(600);
/// Certificates start this much in the past (clock skew between machines).
const BACKDATE: Duration = Duration::from_secs(300);
/// Shorter-lived certificates do not backdate their end as well.
const SHORT: Duration = Duration::from_secs(8 * 3600);
/// The signers this controller issues for.
pub const SIGNERS: &[&str] = &[KUBELET_CLIENT_SIGNER, API_SERVER_CLIENT_SIGNER];
/// The reason of the Failed condition of a request the signer refuses.
pub const FAILURE_REASON: &str = "SignerValidationFailure";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not approved, denied, failed, issued, or another signer's.
    Skip,
    /// Refused: a Failed condition with this message.
    Fail(String),
    Sign,
}

/// Upstream's `handle` up to signing.
pub fn decide(csr: &CertificateSigningRequest, req: &Request) -> Decision {
    let (approved, denied) = approval(csr);
    if !approved || denied || has_condition(csr, FAILED) || issued(csr) {
        return Decision::Skip;
    }
    let checked = match csr.spec.signer_name.as_str() {
        KUBELET_CLIENT_SIGNER => validate_kubelet_client(req, &usages(csr)),
        API_SERVER_CLIENT_SIGNER => validate_api_server_client_usages(&usages(csr)),
        _ => return Decision::Skip,
    };
    if let Err(e) = checked.and_then(|()| one_value_per_attribute(req)) {
        return Decision::Fail(e);
    }
    Decision::Sign
}

/// rcgen keeps one value per subject attribute type, so a subject with two
/// `O`s (two groups) cannot be issued as asked: refuse rather than drop one.
fn one_value_per_attribute(req: &Request) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for (oid, _) in &req.subject {
        if !seen.insert(oid) {
            let arcs: Vec<String> = oid.iter().map(u64::to_string).collect();
            return Err(format!(
                "Berth's signer issues one value per subject attribute; the subject repeats {}",
                arcs.join(".")
            ));
        }
    }
    Ok(())
}

/// Upstream's `duration`: the request's `expirationSeconds` within
/// [10 minutes, `ttl`].
pub fn duration(expiration_seconds: Option<i32>, ttl: Duration) -> Duration {
    match expiration_seconds {
        None => ttl,
        Some(s) => Duration::from_secs(u64::try_from(s).unwrap_or(0))
            .clamp(MIN_DURATION, ttl.max(MIN_DURATION)),
    }
}

/// (notBefore, notAfter) in Unix seconds, as upstream's
/// `PermissiveSigningPolicy`: backdated 5 minutes; the end backdated too unless
/// the certificate is short-lived; never after the CA's own end.
pub fn validity(now: i64, ttl: Duration, ca_not_after: i64) -> (i64, i64) {
    let secs = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    let not_before = now - secs(BACKDATE);
    let not_after = if ttl < SHORT {
        now.saturating_add(secs(ttl))
    } else {
        now.saturating_add(secs(ttl) - secs(BACKDATE))
    };
    (not_before, not_after.min(ca_not_after))
}

/// The CA that signs: `<data-dir>/tls/server-ca.crt` and `.key`.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    not_after: i64,
}

impl Ca {
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Ca, Error> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| Error::Ca(e.to_string()))?;
        let issuer =
            Issuer::from_ca_cert_pem(cert_pem, key).map_err(|e| Error::Ca(e.to_string()))?;
        let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes())
            .map_err(|e| Error::Ca(e.to_string()))?;
        let cert = pem.parse_x509().map_err(|e| Error::Ca(e.to_string()))?;
        Ok(Ca {
            issuer,
            not_after: cert.validity().not_after.timestamp(),
        })
    }
}

fn key_usages(
    usages: &[String],
) -> Result<(Vec<KeyUsagePurpose>, Vec<ExtendedKeyUsagePurpose>), String> {
    let (mut ku, mut eku) = (Vec::new(), Vec::new());
    let mut unknown = Vec::new();
    for u in usages {
        match u.as_str() {
            "signing" | "digital signature" => ku.push(KeyUsagePurpose::DigitalSignature),
            "content commitment" => ku.push(KeyUsagePurpose::ContentCommitment),
            "key encipherment" => ku.push(KeyUsagePurpose::KeyEncipherment),
            "key agreement" => ku.push(KeyUsagePurpose::KeyAgreement),
            "data encipherment" => ku.push(KeyUsagePurpose::DataEncipherment),
            "cert sign" => ku.push(KeyUsagePurpose::KeyCertSign),
            "crl sign" => ku.push(KeyUsagePurpose::CrlSign),
            "encipher only" => ku.push(KeyUsagePurpose::EncipherOnly),
            "decipher only" => ku.push(KeyUsagePurpose::DecipherOnly),
            "any" => eku.push(ExtendedKeyUsagePurpose::Any),
            "server auth" => eku.push(ExtendedKeyUsagePurpose::ServerAuth),
            "client auth" => eku.push(ExtendedKeyUsagePurpose::ClientAuth),
            "code signing" => eku.push(ExtendedKeyUsagePurpose::CodeSigning),
            "email protection" | "s/mime" => eku.push(ExtendedKeyUsagePurpose::EmailProtection),
            "ipsec end system" => eku.push(ExtendedKeyUsagePurpose::Other(vec![
                1, 3, 6, 1, 5, 5, 7, 3, 5,
            ])),
            "ipsec tunnel" => eku.push(ExtendedKeyUsagePurpose::Other(vec![
                1, 3, 6, 1, 5, 5, 7, 3, 6,
            ])),
            "ipsec user" => eku.push(ExtendedKeyUsagePurpose::Other(vec![
                1, 3, 6, 1, 5, 5, 7, 3, 7,
            ])),
            "timestamping" => eku.push(ExtendedKeyUsagePurpose::TimeStamping),
            "ocsp signing" => eku.push(ExtendedKeyUsagePurpose::OcspSigning),
            "microsoft sgc" => eku.push(ExtendedKeyUsagePurpose::Other(vec![
                1, 3, 6, 1, 4, 1, 311, 10, 3, 3,
            ])),
            "netscape sgc" => eku.push(ExtendedKeyUsagePurpose::Other(vec![
                2, 16, 840, 1, 113730, 4, 1,
            ])),
            other => unknown.push(format!("{other:?}")),
        }
    }
    if !unknown.is_empty() {
        return Err(format!(
            "unrecognized usage values: [{}]",
            unknown.join(" ")
        ));
    }
    ku.dedup();
    eku.dedup();
    Ok((ku, eku))
}

/// Issues `req` with `ca` for `ttl` from `now` (Unix seconds): PEM.
pub fn sign(
    ca: &Ca,
    req: &Request,
    usages: &[String],
    ttl: Duration,
    now: i64,
) -> Result<String, String> {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    for (oid, value) in &req.subject {
        dn.push(DnType::from_oid(oid), value.as_str());
    }
    params.distinguished_name = dn;
    let mut sans = Vec::new();
    for d in req.dns_names.iter().chain(&req.emails).chain(&req.uris) {
        let ia5 = d
            .as_str()
            .try_into()
            .map_err(|e: rcgen::Error| e.to_string())?;
        sans.push(if req.emails.contains(d) {
            SanType::Rfc822Name(ia5)
        } else if req.uris.contains(d) {
            SanType::URI(ia5)
        } else {
            SanType::DnsName(ia5)
        });
    }
    sans.extend(req.ips.iter().copied().map(SanType::IpAddress));
    params.subject_alt_names = sans;
    (params.key_usages, params.extended_key_usages) = key_usages(usages)?;
    params.is_ca = IsCa::ExplicitNoCa;
    params.use_authority_key_identifier_extension = true;
    let serial: [u8; 16] = rand_serial();
    params.serial_number = Some(serial.to_vec().into());
    let (not_before, not_after) = validity(now, ttl, ca.not_after);
    // x509-parser's time type is rcgen's (`time::OffsetDateTime`).
    let time = |unix: i64| ASN1Time::from_timestamp(unix).map_err(|e| e.to_string());
    params.not_before = time(not_before)?.to_datetime();
    params.not_after = time(not_after)?.to_datetime();
    let public_key =
        rcgen::SubjectPublicKeyInfo::from_der(&req.public_key_der).map_err(|e| e.to_string())?;
    let cert = params
        .signed_by(&public_key, &ca.issuer)
        .map_err(|e| e.to_string())?;
    Ok(cert.pem())
}

/// A positive 128-bit serial (upstream draws it the same way).
fn rand_serial() -> [u8; 16] {
    let mut s: [u8; 16] = rand::random();
    s[0] &= 0x7f;
    s
}

struct Ctx {
    client: kube::Client,
    ca: Ca,
    ttl: Duration,
}

/// Runs the signer with `ca` until the process ends; certificates live at
/// most `ttl` (upstream's `--cluster-signing-duration`).
pub async fn run(client: kube::Client, ca: Ca, ttl: Duration) {
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    Controller::new(csrs, berth_runtime::reflect::informer_config())
        .run(reconcile, error_policy, Arc::new(Ctx { client, ca, ttl }))
        .for_each(|_| async {})
        .await;
}

fn error_policy(csr: Arc<CertificateSigningRequest>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    warn!(csr = csr.metadata.name.as_deref().unwrap_or(""), error = %err, "signing the CertificateSigningRequest failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

fn failed(csr: &CertificateSigningRequest, message: String) -> CertificateSigningRequest {
    let mut c = csr.clone();
    c.status
        .get_or_insert_with(CertificateSigningRequestStatus::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(CertificateSigningRequestCondition {
            type_: FAILED.into(),
            status: "True".into(),
            reason: Some(FAILURE_REASON.into()),
            message: Some(message),
            last_update_time: Some(Time(k8s_openapi::jiff::Timestamp::now())),
            ..Default::default()
        });
    c
}

async fn reconcile(csr: Arc<CertificateSigningRequest>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = csr.metadata.name.clone().unwrap_or_default();
    // Cheap checks before parsing: most requests seen are done or not ours.
    let (approved, denied) = approval(&csr);
    if !approved || denied || issued(&csr) || !SIGNERS.contains(&csr.spec.signer_name.as_str()) {
        return Ok(Action::await_change());
    }
    let req = Request::parse(super::request_pem(&csr)).map_err(|reason| Error::Parse {
        name: name.clone(),
        reason,
    })?;
    let api: Api<CertificateSigningRequest> = Api::all(ctx.client.clone());
    let updated = match decide(&csr, &req) {
        Decision::Skip => return Ok(Action::await_change()),
        Decision::Fail(message) => {
            warn!(csr = %name, "{message}");
            failed(&csr, message)
        }
        Decision::Sign => {
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            let ttl = duration(csr.spec.expiration_seconds, ctx.ttl);
            let pem = sign(&ctx.ca, &req, &usages(&csr), ttl, now).map_err(Error::Sign)?;
            let mut c = (*csr).clone();
            c.status
                .get_or_insert_with(CertificateSigningRequestStatus::default)
                .certificate = Some(ByteString(pem.into_bytes()));
            info!(csr = %name, subject = %req.common_name, "issued");
            c
        }
    };
    api.replace_subresource("status", &name, &PostParams::default(), &updated)
        .await?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{csr, request_pem, with_condition};
    use super::super::{APPROVED, DENIED};
    use super::*;
    use x509_parser::prelude::FromDer;

    const CLIENT: &[&str] = &["digital signature", "key encipherment", "client auth"];

    fn test_ca() -> (Ca, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "test-ca");
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        (
            Ca::from_pem(&cert.pem(), &key.serialize_pem()).unwrap(),
            cert.pem(),
        )
    }

    /// (what, request PEM, signer, usages, conditions, decision).
    type SignCase<'a> = (
        &'a str,
        &'a str,
        &'a str,
        &'a [&'a str],
        &'a [&'a str],
        Decision,
    );

    #[test]
    fn signs_only_approved_requests_of_its_signers() {
        let node = request_pem("system:node:n1", &["system:nodes"], &[]);
        let user = request_pem("jane", &["dev"], &[]);
        let two_groups = request_pem("jane", &["dev", "ops"], &[]);
        let kubelet = KUBELET_CLIENT_SIGNER;
        let client = API_SERVER_CLIENT_SIGNER;
        let cases: &[SignCase] = &[
            ("pending", &node, kubelet, CLIENT, &[], Decision::Skip),
            ("approved", &node, kubelet, CLIENT, &[APPROVED], Decision::Sign),
            ("denied", &node, kubelet, CLIENT, &[DENIED], Decision::Skip),
            ("approved then denied", &node, kubelet, CLIENT, &[APPROVED, DENIED], Decision::Skip),
            ("failed", &node, kubelet, CLIENT, &[APPROVED, FAILED], Decision::Skip),
            ("another signer", &node, "example.com/x", CLIENT, &[APPROVED], Decision::Skip),
            (
                "a kubelet signer for a user",
                &user,
                kubelet,
                CLIENT,
                &[APPROVED],
                Decision::Fail("subject organization is not system:nodes".into()),
            ),
            ("a user's client certificate", &user, client, CLIENT, &[APPROVED], Decision::Sign),
            (
                "a client certificate for serving",
                &user,
                client,
                &["server auth"],
                &[APPROVED],
                Decision::Fail("invalid usage for client certificate: server auth".into()),
            ),
            (
                "two groups",
                &two_groups,
                client,
                CLIENT,
                &[APPROVED],
                Decision::Fail(
                    "Berth's signer issues one value per subject attribute; the subject repeats 2.5.4.10"
                        .into(),
                ),
            ),
        ];
        for (what, pem, signer, usages, conditions, want) in cases {
            let mut c = csr(pem, signer, usages, "u", &[]);
            for t in *conditions {
                c = with_condition(c, t);
            }
            let req = Request::parse(pem.as_bytes()).unwrap();
            assert_eq!(&decide(&c, &req), want, "{what}");
        }
    }

    #[test]
    fn durations_as_upstream() {
        let year = DEFAULT_DURATION;
        let cases = [
            (None, year),
            (Some(3600), Duration::from_secs(3600)),
            (Some(60), MIN_DURATION),
            (Some(-5), MIN_DURATION),
            (Some(i32::MAX), year),
        ];
        for (asked, want) in cases {
            assert_eq!(duration(asked, year), want, "{asked:?}");
        }
        // Long-lived: both ends backdated; short-lived: only the start; the CA caps it.
        assert_eq!(
            validity(1_000_000, year, i64::MAX),
            (999_700, 1_000_000 + 31_536_000 - 300)
        );
        assert_eq!(
            validity(1_000_000, Duration::from_secs(3600), i64::MAX),
            (999_700, 1_003_600)
        );
        assert_eq!(validity(1_000_000, year, 1_500_000), (999_700, 1_500_000));
    }

    #[test]
    fn issued_certificate_carries_the_subject_usages_and_key() {
        let (ca, ca_pem) = test_ca();
        let pem = request_pem("system:node:n1", &["system:nodes"], &[]);
        let req = Request::parse(pem.as_bytes()).unwrap();
        let usages: Vec<String> = CLIENT.iter().map(|u| u.to_string()).collect();
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let out = sign(&ca, &req, &usages, Duration::from_secs(3600), now).unwrap();
        let (_, block) = x509_parser::pem::parse_x509_pem(out.as_bytes()).unwrap();
        let cert = block.parse_x509().unwrap();
        let cn: Vec<&str> = cert
            .subject()
            .iter_common_name()
            .filter_map(|a| a.as_str().ok())
            .collect();
        let o: Vec<&str> = cert
            .subject()
            .iter_organization()
            .filter_map(|a| a.as_str().ok())
            .collect();
        assert_eq!((cn, o), (vec!["system:node:n1"], vec!["system:nodes"]));
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
        let ku = cert.key_usage().unwrap().unwrap().value;
        assert!(ku.digital_signature() && ku.key_encipherment() && !ku.key_cert_sign());
        assert!(!cert.is_ca());
        assert_eq!(cert.public_key().raw, req.public_key_der.as_slice());
        assert_eq!(cert.validity().not_before.timestamp(), now - 300);
        assert_eq!(cert.validity().not_after.timestamp(), now + 3600);
        // Signed by the CA.
        let (_, ca_block) = x509_parser::pem::parse_x509_pem(ca_pem.as_bytes()).unwrap();
        let ca_cert = ca_block.parse_x509().unwrap();
        assert_eq!(cert.issuer(), ca_cert.subject());
        cert.verify_signature(Some(ca_cert.public_key())).unwrap();
        let _ = x509_parser::certificate::X509Certificate::from_der(&block.contents).unwrap();
    }
}
