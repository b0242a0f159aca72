//! CertificateSigningRequest controllers (upstream's
//! `pkg/controller/certificates`): the approver ([`approver`], csrapproving)
//! auto-approves kubelet client certificates after a SubjectAccessReview, and
//! the signer ([`signer`], csrsigning) issues approved requests of the
//! kube-apiserver client signers with the cluster CA.
//!
//! The decisions are pure functions over the request and its parsed PKCS#10
//! ([`Request`]); the loops only read, ask and write through the API.

pub mod approver;
pub mod signer;

use std::net::IpAddr;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;

/// Client certificates kubelets use (auto-approved for nodes).
pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// Client certificates for any user of the API server (never auto-approved
/// upstream; see [`approver`] for Berth's one exception).
pub const API_SERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";

pub const APPROVED: &str = "Approved";
pub const DENIED: &str = "Denied";
pub const FAILED: &str = "Failed";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API request failed: {0}")]
    Kube(#[from] kube::Error),
    #[error("unable to parse csr {name:?}: {reason}")]
    Parse { name: String, reason: String },
    #[error("error auto signing csr: {0}")]
    Sign(String),
    #[error("reading the signing CA: {0}")]
    Ca(String),
}

/// What the controllers look at in a PKCS#10 request (upstream's
/// `x509.CertificateRequest` fields).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    /// Subject attributes in order: (OID arcs, value).
    pub subject: Vec<(Vec<u64>, String)>,
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub emails: Vec<String>,
    pub ips: Vec<IpAddr>,
    pub uris: Vec<String>,
    /// The DER SubjectPublicKeyInfo, copied into the certificate.
    pub public_key_der: Vec<u8>,
}

const CN_OID: &[u64] = &[2, 5, 4, 3];
const O_OID: &[u64] = &[2, 5, 4, 10];

impl Request {
    /// Upstream's `ParseCSR`: the first PEM block must be a CERTIFICATE
    /// REQUEST. The signature was checked by the API server on create.
    pub fn parse(pem: &[u8]) -> Result<Request, String> {
        let block = match x509_parser::pem::Pem::iter_from_buffer(pem).next() {
            Some(Ok(b)) if b.label == "CERTIFICATE REQUEST" => b,
            _ => return Err("PEM block type must be CERTIFICATE REQUEST".into()),
        };
        let (_, csr) =
            x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents)
                .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
        let info = &csr.certification_request_info;
        let mut req = Request {
            public_key_der: info.subject_pki.raw.to_vec(),
            ..Default::default()
        };
        for rdn in info.subject.iter() {
            for attr in rdn.iter() {
                let oid: Vec<u64> = attr
                    .attr_type()
                    .iter()
                    .ok_or("x509: subject attribute with an oversized OID")?
                    .collect();
                let value = attr
                    .as_str()
                    .map_err(|e| format!("x509: subject attribute is not a string: {e}"))?
                    .to_string();
                if oid == CN_OID {
                    req.common_name = value.clone();
                } else if oid == O_OID {
                    req.organizations.push(value.clone());
                }
                req.subject.push((oid, value));
            }
        }
        for ext in csr.requested_extensions().into_iter().flatten() {
            if let ParsedExtension::SubjectAlternativeName(san) = ext {
                for name in &san.general_names {
                    match name {
                        GeneralName::DNSName(d) => req.dns_names.push(d.to_string()),
                        GeneralName::RFC822Name(e) => req.emails.push(e.to_string()),
                        GeneralName::URI(u) => req.uris.push(u.to_string()),
                        GeneralName::IPAddress(b) => {
                            let ip = match b.len() {
                                4 => <[u8; 4]>::try_from(*b).map(IpAddr::from).ok(),
                                16 => <[u8; 16]>::try_from(*b).map(IpAddr::from).ok(),
                                _ => None,
                            };
                            req.ips.extend(ip);
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(req)
    }

    pub fn has_sans(&self) -> bool {
        !(self.dns_names.is_empty()
            && self.emails.is_empty()
            && self.ips.is_empty()
            && self.uris.is_empty())
    }
}

/// The request's PEM (`spec.request`).
pub fn request_pem(csr: &CertificateSigningRequest) -> &[u8] {
    &csr.spec.request.0
}

/// Whether the request has a condition of type `t` (upstream counts any
/// status; Approved/Denied/Failed may only be "True").
pub fn has_condition(csr: &CertificateSigningRequest, t: &str) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == t))
}

/// Upstream's `GetCertApprovalCondition`: (approved, denied).
pub fn approval(csr: &CertificateSigningRequest) -> (bool, bool) {
    (has_condition(csr, APPROVED), has_condition(csr, DENIED))
}

/// Whether a certificate has been issued.
pub fn issued(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty())
}

/// Upstream's `ValidateKubeletClientCSR`: subject `O=system:nodes`,
/// `CN=system:node:<name>`, no SANs, usages exactly client auth and digital
/// signature (with or without key encipherment).
pub fn validate_kubelet_client(req: &Request, usages: &[String]) -> Result<(), String> {
    if req.organizations != ["system:nodes"] {
        return Err("subject organization is not system:nodes".into());
    }
    if !req.dns_names.is_empty() {
        return Err("DNS subjectAltNames are not allowed".into());
    }
    if !req.emails.is_empty() {
        return Err("Email subjectAltNames are not allowed".into());
    }
    if !req.ips.is_empty() {
        return Err("IP subjectAltNames are not allowed".into());
    }
    if !req.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".into());
    }
    if !req.common_name.starts_with("system:node:") {
        return Err("subject common name does not begin with system:node:".into());
    }
    let set: std::collections::BTreeSet<&str> = usages.iter().map(String::as_str).collect();
    let with_rsa = ["client auth", "digital signature", "key encipherment"];
    let without_rsa = ["client auth", "digital signature"];
    if set != with_rsa.into_iter().collect() && set != without_rsa.into_iter().collect() {
        return Err(format!("usages did not match [{}]", with_rsa.join(" ")));
    }
    Ok(())
}

/// Upstream's `validAPIServerClientUsages`: client auth, optionally digital
/// signature and key encipherment, nothing else.
pub fn validate_api_server_client_usages(usages: &[String]) -> Result<(), String> {
    let mut client_auth = false;
    for u in usages {
        match u.as_str() {
            "digital signature" | "key encipherment" => {}
            "client auth" => client_auth = true,
            other => return Err(format!("invalid usage for client certificate: {other}")),
        }
    }
    if !client_auth {
        return Err("missing required usage for client certificate: client auth".into());
    }
    Ok(())
}

/// The request's usages.
pub fn usages(csr: &CertificateSigningRequest) -> Vec<String> {
    csr.spec.usages.clone().unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod testutil {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequest, CertificateSigningRequestCondition,
        CertificateSigningRequestSpec, CertificateSigningRequestStatus,
    };

    /// A PEM request for `cn` in `orgs`, with `dns` SANs.
    pub fn request_pem(cn: &str, orgs: &[&str], dns: &[&str]) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(dns.iter().map(|d| d.to_string()).collect::<Vec<_>>())
                .unwrap();
        let mut dn = rcgen::DistinguishedName::new();
        // rcgen keeps one value per attribute type: a second O goes in under
        // the same OID as a "custom" type.
        for (i, o) in orgs.iter().enumerate() {
            let t = match i {
                0 => rcgen::DnType::OrganizationName,
                _ => rcgen::DnType::CustomDnType(vec![2, 5, 4, 10]),
            };
            dn.push(t, *o);
        }
        dn.push(rcgen::DnType::CommonName, cn);
        params.distinguished_name = dn;
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    pub fn csr(
        pem: &str,
        signer: &str,
        usages: &[&str],
        user: &str,
        groups: &[&str],
    ) -> CertificateSigningRequest {
        CertificateSigningRequest {
            metadata: kube::api::ObjectMeta {
                name: Some("csr-1".into()),
                ..Default::default()
            },
            spec: CertificateSigningRequestSpec {
                request: ByteString(pem.as_bytes().to_vec()),
                signer_name: signer.into(),
                usages: Some(usages.iter().map(|u| u.to_string()).collect()),
                username: Some(user.into()),
                groups: Some(groups.iter().map(|g| g.to_string()).collect()),
                ..Default::default()
            },
            status: None,
        }
    }

    pub fn with_condition(mut c: CertificateSigningRequest, t: &str) -> CertificateSigningRequest {
        let status = c
            .status
            .get_or_insert_with(CertificateSigningRequestStatus::default);
        status
            .conditions
            .get_or_insert_with(Vec::new)
            .push(CertificateSigningRequestCondition {
                type_: t.into(),
                status: "True".into(),
                ..Default::default()
            });
        c
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::request_pem;
    use super::*;

    #[test]
    fn parses_subject_and_sans() {
        let pem = request_pem("system:node:n1", &["system:nodes"], &["n1.example.com"]);
        let r = Request::parse(pem.as_bytes()).unwrap();
        assert_eq!(r.common_name, "system:node:n1");
        assert_eq!(r.organizations, ["system:nodes"]);
        assert_eq!(r.dns_names, ["n1.example.com"]);
        assert!(r.has_sans());
        assert_eq!(r.subject.len(), 2);
        assert!(!r.public_key_der.is_empty());
        assert_eq!(
            Request::parse(b"junk").unwrap_err(),
            "PEM block type must be CERTIFICATE REQUEST"
        );
    }

    /// (subject CN, O, SANs, usages, the error).
    type KubeletCase = (
        &'static str,
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
        Option<&'static str>,
    );

    #[test]
    fn kubelet_client_requests_as_upstream() {
        const OK: &[&str] = &["digital signature", "key encipherment", "client auth"];
        let cases: &[KubeletCase] = &[
            ("system:node:n1", &["system:nodes"], &[], OK, None),
            (
                "system:node:n1",
                &["system:nodes"],
                &[],
                &["client auth", "digital signature"],
                None,
            ),
            (
                "system:node:n1",
                &[],
                &[],
                OK,
                Some("subject organization is not system:nodes"),
            ),
            (
                "system:node:n1",
                &["system:nodes", "system:masters"],
                &[],
                OK,
                Some("subject organization is not system:nodes"),
            ),
            (
                "system:node:n1",
                &["system:nodes"],
                &["n1"],
                OK,
                Some("DNS subjectAltNames are not allowed"),
            ),
            (
                "n1",
                &["system:nodes"],
                &[],
                OK,
                Some("subject common name does not begin with system:node:"),
            ),
            (
                "system:node:n1",
                &["system:nodes"],
                &[],
                &["client auth"],
                Some("usages did not match [client auth digital signature key encipherment]"),
            ),
            (
                "system:node:n1",
                &["system:nodes"],
                &[],
                &[
                    "digital signature",
                    "key encipherment",
                    "client auth",
                    "server auth",
                ],
                Some("usages did not match [client auth digital signature key encipherment]"),
            ),
        ];
        for (cn, orgs, dns, usages, want) in cases {
            let r = Request::parse(request_pem(cn, orgs, dns).as_bytes()).unwrap();
            let usages: Vec<String> = usages.iter().map(|u| u.to_string()).collect();
            assert_eq!(
                validate_kubelet_client(&r, &usages).err().as_deref(),
                *want,
                "{cn} {orgs:?} {dns:?} {usages:?}"
            );
        }
    }

    #[test]
    fn api_server_client_usages_as_upstream() {
        let cases: &[(&[&str], Option<&str>)] = &[
            (&["client auth"], None),
            (
                &["digital signature", "key encipherment", "client auth"],
                None,
            ),
            (
                &["digital signature"],
                Some("missing required usage for client certificate: client auth"),
            ),
            (
                &["client auth", "server auth"],
                Some("invalid usage for client certificate: server auth"),
            ),
        ];
        for (usages, want) in cases {
            let u: Vec<String> = usages.iter().map(|u| u.to_string()).collect();
            assert_eq!(
                validate_api_server_client_usages(&u).err().as_deref(),
                *want,
                "{usages:?}"
            );
        }
    }
}
