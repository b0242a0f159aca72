//! The cluster's PKI: a CA, the API server's serving certificate, an admin client
//! certificate, an admin bearer token and the admin kubeconfig — generated on first
//! start under `<data-dir>/tls`, reused afterwards (k3s-style).

use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// What the server needs to serve TLS and authenticate clients.
pub struct Pki {
    pub ca_pem: String,
    pub serving_cert_pem: String,
    pub serving_key_pem: String,
    pub admin_token: String,
    pub dir: PathBuf,
    /// The API server's client certificate for kubelets (exec, logs, port-forward).
    pub kubelet_client_cert_pem: String,
    pub kubelet_client_key_pem: String,
    /// The front proxy's CA (kube-apiserver's `--requestheader-client-ca-file`) and
    /// the client certificate it signs, which aggregated API servers trust to
    /// carry the user in `X-Remote-User` / `X-Remote-Group` (k3s's names).
    pub request_header_ca_pem: String,
    pub proxy_client_cert_pem: String,
    pub proxy_client_key_pem: String,
}

/// The front proxy's client certificate CN (`--requestheader-allowed-names`).
pub const PROXY_CLIENT_NAME: &str = "system:auth-proxy";

/// The metrics server's scraper user (`client-metrics-server.crt`).
pub const METRICS_SERVER_NAME: &str = "system:metrics-server";

/// A self-signed CA at `cert`/`key`, generated once.
fn ensure_ca(cert: &Path, key_path: &Path, cn: &str) -> Result<()> {
    if cert.exists() && key_path.exists() {
        return Ok(());
    }
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = dn(&format!("{cn}@{}", chrono::Utc::now().timestamp()), &[]);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let c = params.self_signed(&key)?;
    write_private(key_path, &key.serialize_pem())?;
    fs::write(cert, c.pem())?;
    Ok(())
}

/// A client certificate for `cn` signed by `issuer`, generated once.
fn ensure_client_cert(
    cert: &Path,
    key_path: &Path,
    cn: &str,
    orgs: &[&str],
    issuer: &Issuer<'_, KeyPair>,
) -> Result<()> {
    if cert.exists() && key_path.exists() {
        return Ok(());
    }
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = dn(cn, orgs);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let c = params.signed_by(&key, issuer)?;
    write_private(key_path, &key.serialize_pem())?;
    fs::write(cert, c.pem())?;
    Ok(())
}

fn write_private(path: &Path, contents: &str) -> Result<()> {
    fs::write(path, contents).with_context(|| format!("writing {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))
            .with_context(|| format!("chmod {}", path.display()))?;
    }
    Ok(())
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn dn(cn: &str, orgs: &[&str]) -> DistinguishedName {
    let mut d = DistinguishedName::new();
    for o in orgs {
        d.push(DnType::OrganizationName, *o);
    }
    d.push(DnType::CommonName, cn);
    d
}

/// Loads the PKI from `<data_dir>/tls`, generating what is missing. The serving
/// certificate is re-issued when `sans` changed, so a new `--bind-address` or
/// `--tls-san` takes effect.
pub fn load_or_create(data_dir: &Path, sans: &[String]) -> Result<Pki> {
    let dir = data_dir.join("tls");
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let ca_cert_path = dir.join("server-ca.crt");
    let ca_key_path = dir.join("server-ca.key");
    if !ca_cert_path.exists() || !ca_key_path.exists() {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = dn(
            &format!("berth-server-ca@{}", chrono::Utc::now().timestamp()),
            &[],
        );
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key)?;
        write_private(&ca_key_path, &key.serialize_pem())?;
        fs::write(&ca_cert_path, cert.pem())?;
    }
    let ca_pem = read(&ca_cert_path)?;
    let ca_key = KeyPair::from_pem(&read(&ca_key_path)?)?;
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key)?;

    let serving_cert_path = dir.join("serving-kube-apiserver.crt");
    let serving_key_path = dir.join("serving-kube-apiserver.key");
    let sans_path = dir.join("serving-sans");
    let mut all_sans: Vec<String> = vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
        "kubernetes".into(),
        "kubernetes.default".into(),
        "kubernetes.default.svc".into(),
        "kubernetes.default.svc.cluster.local".into(),
    ];
    for s in sans {
        if !all_sans.contains(s) {
            all_sans.push(s.clone());
        }
    }
    let sans_line = all_sans.join(",");
    let stale = fs::read_to_string(&sans_path)
        .map(|s| s != sans_line)
        .unwrap_or(true);
    if stale || !serving_cert_path.exists() || !serving_key_path.exists() {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = dn("kube-apiserver", &[]);
        params.subject_alt_names = all_sans
            .iter()
            .map(|s| match s.parse::<IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => Ok(SanType::DnsName(s.as_str().try_into()?)),
            })
            .collect::<Result<Vec<_>, rcgen::Error>>()?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let cert = params.signed_by(&key, &issuer)?;
        write_private(&serving_key_path, &key.serialize_pem())?;
        fs::write(&serving_cert_path, cert.pem())?;
        fs::write(&sans_path, &sans_line)?;
    }

    let admin_cert_path = dir.join("client-admin.crt");
    let admin_key_path = dir.join("client-admin.key");
    if !admin_cert_path.exists() || !admin_key_path.exists() {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = dn("system:admin", &["system:masters"]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let cert = params.signed_by(&key, &issuer)?;
        write_private(&admin_key_path, &key.serialize_pem())?;
        fs::write(&admin_cert_path, cert.pem())?;
    }

    // As kubeadm's apiserver-kubelet-client: the API server's identity towards kubelets.
    let kubelet_cert_path = dir.join("client-kube-apiserver-kubelet.crt");
    let kubelet_key_path = dir.join("client-kube-apiserver-kubelet.key");
    if !kubelet_cert_path.exists() || !kubelet_key_path.exists() {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = dn("kube-apiserver-kubelet-client", &["system:masters"]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let cert = params.signed_by(&key, &issuer)?;
        write_private(&kubelet_key_path, &key.serialize_pem())?;
        fs::write(&kubelet_cert_path, cert.pem())?;
    }

    // The metrics server's identity towards kubelets (metrics-server's own
    // ServiceAccount upstream), authorized on nodes/metrics by RBAC.
    ensure_client_cert(
        &dir.join("client-metrics-server.crt"),
        &dir.join("client-metrics-server.key"),
        METRICS_SERVER_NAME,
        &[],
        &issuer,
    )?;

    let rh_ca_path = dir.join("request-header-ca.crt");
    let rh_ca_key_path = dir.join("request-header-ca.key");
    ensure_ca(&rh_ca_path, &rh_ca_key_path, "berth-request-header-ca")?;
    let rh_ca_pem = read(&rh_ca_path)?;
    let rh_issuer =
        Issuer::from_ca_cert_pem(&rh_ca_pem, KeyPair::from_pem(&read(&rh_ca_key_path)?)?)?;
    let proxy_cert_path = dir.join("client-auth-proxy.crt");
    let proxy_key_path = dir.join("client-auth-proxy.key");
    ensure_client_cert(
        &proxy_cert_path,
        &proxy_key_path,
        PROXY_CLIENT_NAME,
        &[],
        &rh_issuer,
    )?;

    let token_path = data_dir.join("token");
    if !token_path.exists() {
        let bytes: [u8; 24] = rand::random();
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        write_private(&token_path, &token)?;
    }
    let admin_token = read(&token_path)?.trim().to_string();

    Ok(Pki {
        ca_pem,
        serving_cert_pem: read(&serving_cert_path)?,
        serving_key_pem: read(&serving_key_path)?,
        admin_token,
        kubelet_client_cert_pem: read(&kubelet_cert_path)?,
        kubelet_client_key_pem: read(&kubelet_key_path)?,
        request_header_ca_pem: rh_ca_pem,
        proxy_client_cert_pem: read(&proxy_cert_path)?,
        proxy_client_key_pem: read(&proxy_key_path)?,
        dir,
    })
}

impl Pki {
    /// Writes the admin kubeconfig (client certificate) and returns its path.
    pub fn write_kubeconfig(&self, path: &Path, server_url: &str) -> Result<()> {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
        let cert = read(&self.dir.join("client-admin.crt"))?;
        let key = read(&self.dir.join("client-admin.key"))?;
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {server_url}\n  name: default\ncontexts:\n- context:\n    cluster: default\n    user: default\n  name: default\ncurrent-context: default\npreferences: {{}}\nusers:\n- name: default\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n",
            ca = b64(&self.ca_pem),
            cert = b64(&cert),
            key = b64(&key),
        );
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        write_private(path, &yaml)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_once_and_reuses() {
        let dir = std::env::temp_dir().join(format!("berth-pki-{}", uuid::Uuid::new_v4()));
        let a = load_or_create(&dir, &[]).unwrap();
        let b = load_or_create(&dir, &[]).unwrap();
        assert_eq!(a.ca_pem, b.ca_pem);
        assert_eq!(a.serving_cert_pem, b.serving_cert_pem);
        assert_eq!(a.admin_token, b.admin_token);
        let c = load_or_create(&dir, &["10.0.0.1".into()]).unwrap();
        assert_eq!(a.ca_pem, c.ca_pem);
        assert_ne!(
            a.serving_cert_pem, c.serving_cert_pem,
            "new SAN must re-issue the serving cert"
        );
        let kc = dir.join("kubeconfig.yaml");
        a.write_kubeconfig(&kc, "https://127.0.0.1:6443").unwrap();
        let text = fs::read_to_string(&kc).unwrap();
        assert!(text.contains("client-certificate-data"));
        let _ = fs::remove_dir_all(&dir);
    }
}
