//! Kubelet TLS bootstrapping (upstream's `pkg/kubelet/certificate/bootstrap`,
//! `--bootstrap-kubeconfig`): a `berth agent` given a bootstrap token creates a
//! key, asks for a client certificate with a CertificateSigningRequest, waits
//! for the controller-manager to approve and issue it, and writes
//! `<data-dir>/<component>.kubeconfig` with the certificate, key and cluster CA.
//! The next start reuses that kubeconfig while its certificate is valid, so
//! the token is only needed to join.
//!
//! Each node component gets its own identity: the node agent
//! `system:node:<name>` in `system:nodes` (the Node authorizer's), the service
//! proxy `system:kube-proxy` and the ingress controller `system:berth-ingress`
//! (signer `kubernetes.io/kube-apiserver-client`, approved for bootstrap tokens
//! by Berth's approver; see `berth_controllers::certificates::approver`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use berth_authz::bootstrap::agent_policy::{DNS_USER, INGRESS_USER, KUBE_PROXY_USER, NODES_GROUP};
use berth_controllers::certificates::{API_SERVER_CLIENT_SIGNER, KUBELET_CLIENT_SIGNER};
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use kube::api::{Api, ObjectMeta, PostParams};

/// How long a join waits for its certificates (upstream's kubelet waits up to
/// an hour; a person may have to run `kubectl certificate approve`).
const WAIT: Duration = Duration::from_secs(15 * 60);
/// A certificate this close to its end is not reused: a new one is asked for.
const RENEW_BEFORE: i64 = 10 * 60;
/// The usages every client certificate asks for.
const CLIENT_USAGES: &[&str] = &["digital signature", "key encipherment", "client auth"];

/// One node component's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Its kubeconfig is `<data-dir>/<file>.kubeconfig`.
    pub file: &'static str,
    pub common_name: String,
    pub organizations: Vec<&'static str>,
    pub signer: &'static str,
    /// The CSR's generateName.
    pub csr_prefix: &'static str,
}

impl Identity {
    pub fn kubelet(node: &str) -> Identity {
        Identity {
            file: "kubelet",
            common_name: format!("system:node:{node}"),
            organizations: vec![NODES_GROUP],
            signer: KUBELET_CLIENT_SIGNER,
            csr_prefix: "node-csr-",
        }
    }

    pub fn kube_proxy() -> Identity {
        Identity {
            file: "kube-proxy",
            common_name: KUBE_PROXY_USER.into(),
            organizations: vec![],
            signer: API_SERVER_CLIENT_SIGNER,
            csr_prefix: "kube-proxy-csr-",
        }
    }

    pub fn ingress() -> Identity {
        Identity {
            file: "berth-ingress",
            common_name: INGRESS_USER.into(),
            organizations: vec![],
            signer: API_SERVER_CLIENT_SIGNER,
            csr_prefix: "berth-ingress-csr-",
        }
    }

    /// The scheduler inside `berth server` (kubeadm's `scheduler.conf`).
    pub fn scheduler() -> Identity {
        Identity {
            file: "kube-scheduler",
            common_name: "system:kube-scheduler".into(),
            organizations: vec![],
            signer: API_SERVER_CLIENT_SIGNER,
            csr_prefix: "kube-scheduler-csr-",
        }
    }

    /// The controller-manager inside `berth server` (kubeadm's
    /// `controller-manager.conf`); its controllers run as their
    /// ServiceAccounts (`berth_controllers::clientbuilder`).
    pub fn controller_manager() -> Identity {
        Identity {
            file: "kube-controller-manager",
            common_name: "system:kube-controller-manager".into(),
            organizations: vec![],
            signer: API_SERVER_CLIENT_SIGNER,
            csr_prefix: "kube-controller-manager-csr-",
        }
    }

    /// The cluster DNS inside `berth server`.
    pub fn dns() -> Identity {
        Identity {
            file: "berth-dns",
            common_name: DNS_USER.into(),
            organizations: vec![],
            signer: API_SERVER_CLIENT_SIGNER,
            csr_prefix: "berth-dns-csr-",
        }
    }

    pub fn kubeconfig(&self, data_dir: &Path) -> PathBuf {
        data_dir.join(format!("{}.kubeconfig", self.file))
    }
}

/// Where the cluster is: the server URL and its CA (PEM; `None` when the
/// server's certificate is not verified).
#[derive(Debug, Clone)]
pub struct Cluster {
    pub server: String,
    pub ca_pem: Option<String>,
}

/// A kubeconfig with embedded credentials, as kubeadm writes `kubelet.conf`.
pub fn kubeconfig_yaml(cluster: &Cluster, cert_pem: &str, key_pem: &str) -> String {
    let b64 = |s: &str| STANDARD.encode(s.as_bytes());
    let trust = match &cluster.ca_pem {
        Some(ca) => format!("certificate-authority-data: {}", b64(ca)),
        None => "insecure-skip-tls-verify: true".to_string(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    {trust}\n    server: {server}\n  name: default\ncontexts:\n- context:\n    cluster: default\n    user: default\n  name: default\ncurrent-context: default\npreferences: {{}}\nusers:\n- name: default\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n",
        server = cluster.server,
        cert = b64(cert_pem),
        key = b64(key_pem),
    )
}

/// Whether the kubeconfig written earlier still serves `id` on `cluster` at
/// `now` (Unix seconds): same server and CA, a certificate for the same
/// subject that is valid for more than [`RENEW_BEFORE`].
pub fn reusable(yaml: &str, cluster: &Cluster, id: &Identity, now: i64) -> bool {
    let Ok(kc) = parse_kubeconfig(yaml) else {
        return false;
    };
    let (server, ca, cert) = kc;
    if server != cluster.server || ca != cluster.ca_pem {
        return false;
    }
    let Ok((_, pem)) = x509_parser::pem::parse_x509_pem(cert.as_bytes()) else {
        return false;
    };
    let Ok(cert) = pem.parse_x509() else {
        return false;
    };
    let subject = cert.subject();
    let cn: Vec<&str> = subject
        .iter_common_name()
        .filter_map(|a| a.as_str().ok())
        .collect();
    let orgs: Vec<&str> = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok())
        .collect();
    let validity = cert.validity();
    cn == [id.common_name.as_str()]
        && orgs == id.organizations
        && validity.not_before.timestamp() <= now
        && validity.not_after.timestamp() > now + RENEW_BEFORE
}

/// (server, CA PEM, client certificate PEM) of a kubeconfig Berth wrote.
fn parse_kubeconfig(yaml: &str) -> Result<(String, Option<String>, String)> {
    let kc = kube::config::Kubeconfig::from_yaml(yaml)?;
    let cluster = kc
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .context("no cluster")?;
    let user = kc
        .auth_infos
        .first()
        .and_then(|u| u.auth_info.as_ref())
        .context("no user")?;
    let decode =
        |b64: &str| -> Result<String> { Ok(String::from_utf8(STANDARD.decode(b64.trim())?)?) };
    let ca = cluster
        .certificate_authority_data
        .as_deref()
        .map(decode)
        .transpose()?;
    let cert = decode(
        user.client_certificate_data
            .as_deref()
            .context("no client certificate")?,
    )?;
    Ok((cluster.server.clone().unwrap_or_default(), ca, cert))
}

/// The CSR for `id` with a new key: (the object, the key's PEM).
pub fn request(id: &Identity) -> Result<(CertificateSigningRequest, String)> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::default();
    let mut dn = rcgen::DistinguishedName::new();
    for o in &id.organizations {
        dn.push(rcgen::DnType::OrganizationName, *o);
    }
    dn.push(rcgen::DnType::CommonName, id.common_name.as_str());
    params.distinguished_name = dn;
    let pem = params.serialize_request(&key)?.pem()?;
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some(id.csr_prefix.into()),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(pem.into_bytes()),
            signer_name: id.signer.into(),
            usages: Some(CLIENT_USAGES.iter().map(|u| u.to_string()).collect()),
            ..Default::default()
        },
        status: None,
    };
    Ok((csr, key.serialize_pem()))
}

/// What a CSR's status says for a waiting requester (upstream's
/// `WaitForCertificate`): the certificate, a refusal, or keep waiting.
pub fn outcome(csr: &CertificateSigningRequest) -> Result<Option<String>> {
    let Some(status) = &csr.status else {
        return Ok(None);
    };
    for c in status.conditions.iter().flatten() {
        let why = format!(
            "reason: {}, message: {}",
            c.reason.as_deref().unwrap_or(""),
            c.message.as_deref().unwrap_or("")
        );
        match c.type_.as_str() {
            "Denied" => anyhow::bail!("certificate signing request is denied, {why}"),
            "Failed" => anyhow::bail!("certificate signing request failed, {why}"),
            _ => {}
        }
    }
    match &status.certificate {
        Some(c) if !c.0.is_empty() => Ok(Some(String::from_utf8(c.0.clone())?)),
        _ => Ok(None),
    }
}

/// The kubeconfig of `id`: reused when still good, else obtained with the
/// bootstrap `client` and written under `data_dir`.
pub async fn ensure(
    bootstrap: &kube::Client,
    cluster: &Cluster,
    data_dir: &Path,
    id: &Identity,
) -> Result<PathBuf> {
    let path = id.kubeconfig(data_dir);
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    if let Ok(yaml) = std::fs::read_to_string(&path)
        && reusable(&yaml, cluster, id, now)
    {
        return Ok(path);
    }
    let (csr, key_pem) = request(id)?;
    let api: Api<CertificateSigningRequest> = Api::all(bootstrap.clone());
    let created = api
        .create(&PostParams::default(), &csr)
        .await
        .map_err(|e| refused(e, id))?;
    let name = created.metadata.name.unwrap_or_default();
    tracing::info!(csr = %name, user = %id.common_name, "requested a client certificate");
    let started = std::time::Instant::now();
    let mut told = false;
    let cert = loop {
        let current = api
            .get(&name)
            .await
            .with_context(|| format!("reading CertificateSigningRequest {name}"))?;
        if let Some(cert) =
            outcome(&current).with_context(|| format!("{name} for {}", id.common_name))?
        {
            break cert;
        }
        let waited = started.elapsed();
        anyhow::ensure!(
            waited < WAIT,
            "CertificateSigningRequest {name} for {} was not issued within {}s",
            id.common_name,
            WAIT.as_secs()
        );
        if !told && waited > Duration::from_secs(10) {
            told = true;
            eprintln!(
                "Waiting for CertificateSigningRequest {name} ({}) to be approved and issued (kubectl certificate approve {name})",
                id.common_name
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    write_private(&path, &kubeconfig_yaml(cluster, &cert, &key_pem))?;
    Ok(path)
}

/// Where the admin kubeconfig `yaml` (written by the API server) says the
/// cluster is.
pub fn cluster_of(yaml: &str) -> Result<Cluster> {
    let (server, ca_pem, _) = parse_kubeconfig(yaml)?;
    Ok(Cluster { server, ca_pem })
}

/// The kubeconfig of `id` for a component inside `berth server`, under
/// `dir`: reused when still good, else issued at once with the cluster CA
/// (`ca_cert`, `ca_key`; as kubeadm writes `scheduler.conf`), through the
/// same signer a CSR would go through, so no CSR is left behind.
pub fn ensure_signed(
    ca_cert: &Path,
    ca_key: &Path,
    cluster: &Cluster,
    dir: &Path,
    id: &Identity,
) -> Result<PathBuf> {
    use berth_controllers::certificates::{Request, signer};
    let path = id.kubeconfig(dir);
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    if let Ok(yaml) = std::fs::read_to_string(&path)
        && reusable(&yaml, cluster, id, now)
    {
        return Ok(path);
    }
    let read =
        |p: &Path| std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()));
    let ca = signer::Ca::from_pem(&read(ca_cert)?, &read(ca_key)?)
        .with_context(|| format!("loading the cluster CA {}", ca_cert.display()))?;
    let (csr, key_pem) = request(id)?;
    let req = Request::parse(&csr.spec.request.0).map_err(anyhow::Error::msg)?;
    let usages: Vec<String> = CLIENT_USAGES.iter().map(|u| u.to_string()).collect();
    let cert = signer::sign(&ca, &req, &usages, signer::DEFAULT_DURATION, now)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("issuing the client certificate of {}", id.common_name))?;
    write_private(&path, &kubeconfig_yaml(cluster, &cert, &key_pem))?;
    Ok(path)
}

/// A refused request, told in the words a joining operator needs.
fn refused(e: kube::Error, id: &Identity) -> anyhow::Error {
    match &e {
        kube::Error::Api(s) if s.code == 401 => anyhow::anyhow!(
            "the API server refused the bootstrap token (401 Unauthorized): it is mistyped, expired or deleted (berth token list on the server)"
        ),
        kube::Error::Api(s) if s.code == 403 => anyhow::anyhow!(
            "the bootstrap token may not create CertificateSigningRequests (403 Forbidden: {}): is it in system:bootstrappers?",
            s.message
        ),
        _ => anyhow::Error::new(e).context(format!(
            "requesting a client certificate for {}",
            id.common_name
        )),
    }
}

fn write_private(path: &Path, contents: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // Written aside and renamed, so a crash never leaves half a kubeconfig.
    let tmp = path.with_extension("kubeconfig.tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(contents.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(ca: &str) -> Cluster {
        Cluster {
            server: "https://10.0.0.1:6443".into(),
            ca_pem: Some(ca.into()),
        }
    }

    /// A certificate for `cn`/`orgs` valid over [from, to] (Unix seconds).
    fn cert(cn: &str, orgs: &[&str], from: i64, to: i64) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::default();
        let mut dn = rcgen::DistinguishedName::new();
        for o in orgs {
            dn.push(rcgen::DnType::OrganizationName, *o);
        }
        dn.push(rcgen::DnType::CommonName, cn);
        p.distinguished_name = dn;
        p.not_before = x509_parser::time::ASN1Time::from_timestamp(from)
            .unwrap()
            .to_datetime();
        p.not_after = x509_parser::time::ASN1Time::from_timestamp(to)
            .unwrap()
            .to_datetime();
        (p.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    /// A server component's kubeconfig is issued by the cluster CA for its
    /// user, written privately, and reused on the next start.
    #[test]
    fn server_components_get_their_own_certificate_once() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("berth-signed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::default();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_pem = p.self_signed(&key).unwrap().pem();
        let (ca_cert, ca_key) = (dir.join("ca.crt"), dir.join("ca.key"));
        std::fs::write(&ca_cert, &ca_pem).unwrap();
        std::fs::write(&ca_key, key.serialize_pem()).unwrap();
        let c = cluster(&ca_pem);
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        for id in [
            Identity::scheduler(),
            Identity::controller_manager(),
            Identity::dns(),
            Identity::kubelet("n1"),
        ] {
            let cred = dir.join("cred");
            let path = ensure_signed(&ca_cert, &ca_key, &c, &cred, &id).unwrap();
            let first = std::fs::read_to_string(&path).unwrap();
            assert!(reusable(&first, &c, &id, now), "{}", id.common_name);
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", id.common_name);
            // Signed by the cluster CA: the issuer is the CA's subject.
            let (_, cert_pem) = parse_kubeconfig(&first).map(|(_, _, c)| ((), c)).unwrap();
            let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).unwrap();
            let cert = pem.parse_x509().unwrap();
            let (_, ca) = x509_parser::pem::parse_x509_pem(ca_pem.as_bytes()).unwrap();
            assert_eq!(cert.issuer(), ca.parse_x509().unwrap().subject());
            let again = ensure_signed(&ca_cert, &ca_key, &c, &cred, &id).unwrap();
            assert_eq!(std::fs::read_to_string(again).unwrap(), first);
            // Another cluster (a new CA) gets a new certificate.
            let other = Cluster {
                server: "https://10.0.0.2:6443".into(),
                ..c.clone()
            };
            ensure_signed(&ca_cert, &ca_key, &other, &cred, &id).unwrap();
            assert_ne!(std::fs::read_to_string(&path).unwrap(), first);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_written_kubeconfig_is_reused_only_while_it_fits() {
        let now = 1_750_000_000;
        let id = Identity::kubelet("n1");
        let c = cluster("CA");
        let (good, key) = cert("system:node:n1", &["system:nodes"], now - 60, now + 86400);
        let yaml = kubeconfig_yaml(&c, &good, &key);
        let cases = [
            ("fresh", yaml.clone(), c.clone(), id.clone(), true),
            (
                "another server",
                yaml.clone(),
                Cluster {
                    server: "https://10.0.0.2:6443".into(),
                    ..c.clone()
                },
                id.clone(),
                false,
            ),
            (
                "another CA",
                yaml.clone(),
                cluster("CA2"),
                id.clone(),
                false,
            ),
            (
                "another node",
                yaml.clone(),
                c.clone(),
                Identity::kubelet("n2"),
                false,
            ),
            (
                "another component",
                yaml.clone(),
                c.clone(),
                Identity::kube_proxy(),
                false,
            ),
            (
                "about to expire",
                {
                    let (crt, k) = cert("system:node:n1", &["system:nodes"], now - 60, now + 300);
                    kubeconfig_yaml(&c, &crt, &k)
                },
                c.clone(),
                id.clone(),
                false,
            ),
            (
                "not yet valid",
                {
                    let (crt, k) = cert("system:node:n1", &["system:nodes"], now + 60, now + 86400);
                    kubeconfig_yaml(&c, &crt, &k)
                },
                c.clone(),
                id.clone(),
                false,
            ),
            (
                "garbage",
                "not yaml: [".to_string(),
                c.clone(),
                id.clone(),
                false,
            ),
        ];
        for (what, yaml, cluster, id, want) in cases {
            assert_eq!(reusable(&yaml, &cluster, &id, now), want, "{what}");
        }
        // Without a CA the kubeconfig skips verification, and is reused only so.
        let insecure = Cluster {
            server: c.server.clone(),
            ca_pem: None,
        };
        let y = kubeconfig_yaml(&insecure, &good, &key);
        assert!(y.contains("insecure-skip-tls-verify: true"));
        assert!(reusable(&y, &insecure, &id, now));
        assert!(!reusable(&y, &c, &id, now));
    }

    #[test]
    fn requests_name_the_component() {
        let cases = [
            (
                Identity::kubelet("n1"),
                "system:node:n1",
                vec!["system:nodes"],
                KUBELET_CLIENT_SIGNER,
            ),
            (
                Identity::kube_proxy(),
                "system:kube-proxy",
                vec![],
                API_SERVER_CLIENT_SIGNER,
            ),
            (
                Identity::ingress(),
                "system:berth-ingress",
                vec![],
                API_SERVER_CLIENT_SIGNER,
            ),
        ];
        for (id, cn, orgs, signer) in cases {
            let (csr, key) = request(&id).unwrap();
            assert!(key.contains("PRIVATE KEY"));
            assert_eq!(csr.spec.signer_name, signer);
            assert_eq!(
                csr.spec.usages.as_deref(),
                Some(
                    &[
                        "digital signature".to_string(),
                        "key encipherment".into(),
                        "client auth".into()
                    ][..]
                )
            );
            let req = berth_controllers::certificates::Request::parse(&csr.spec.request.0).unwrap();
            assert_eq!(
                (
                    req.common_name.as_str(),
                    req.organizations
                        .iter()
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                ),
                (cn, orgs)
            );
            assert!(!req.has_sans());
        }
    }

    #[test]
    fn waiting_ends_with_the_certificate_or_the_refusal() {
        use k8s_openapi::api::certificates::v1::{
            CertificateSigningRequestCondition, CertificateSigningRequestStatus,
        };
        let with = |conds: &[(&str, &str)], cert: Option<&str>| CertificateSigningRequest {
            status: Some(CertificateSigningRequestStatus {
                conditions: Some(
                    conds
                        .iter()
                        .map(|(t, r)| CertificateSigningRequestCondition {
                            type_: t.to_string(),
                            status: "True".into(),
                            reason: Some(r.to_string()),
                            message: Some("m".into()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                certificate: cert.map(|c| ByteString(c.as_bytes().to_vec())),
            }),
            ..Default::default()
        };
        assert_eq!(
            outcome(&CertificateSigningRequest::default()).unwrap(),
            None
        );
        assert_eq!(
            outcome(&with(&[("Approved", "AutoApproved")], None)).unwrap(),
            None
        );
        assert_eq!(
            outcome(&with(&[("Approved", "AutoApproved")], Some("PEM"))).unwrap(),
            Some("PEM".into())
        );
        assert_eq!(
            outcome(&with(&[("Denied", "KubectlDeny")], None))
                .unwrap_err()
                .to_string(),
            "certificate signing request is denied, reason: KubectlDeny, message: m"
        );
        assert_eq!(
            outcome(&with(
                &[("Approved", "A"), ("Failed", "SignerValidationFailure")],
                None
            ))
            .unwrap_err()
            .to_string(),
            "certificate signing request failed, reason: SignerValidationFailure, message: m"
        );
    }
}
