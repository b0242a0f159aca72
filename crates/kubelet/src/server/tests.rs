use super::*;
use http_body_util::BodyExt;
use serde_json::json;

#[test]
fn endpoints() {
    let cases = [
        ("/healthz", Some(Endpoint::Healthz)),
        (
            "/containerLogs/ns/p/c",
            Some(Endpoint::Logs {
                ns: "ns",
                pod: "p",
                container: "c",
            }),
        ),
        (
            "/exec/ns/p/c",
            Some(Endpoint::Exec {
                attach: false,
                ns: "ns",
                pod: "p",
                container: "c",
            }),
        ),
        (
            "/attach/ns/p/uid-1/c",
            Some(Endpoint::Exec {
                attach: true,
                ns: "ns",
                pod: "p",
                container: "c",
            }),
        ),
        (
            "/portForward/ns/p",
            Some(Endpoint::PortForward { ns: "ns", pod: "p" }),
        ),
        (
            "/portForward/ns/p/uid-1",
            Some(Endpoint::PortForward { ns: "ns", pod: "p" }),
        ),
        ("/stats/summary", Some(Endpoint::StatsSummary)),
        ("/stats/summary/", Some(Endpoint::StatsSummary)),
        ("/metrics/resource", Some(Endpoint::ResourceMetrics)),
        ("/stats", None),
        ("/metrics", None),
        ("/exec/ns/p", None),
        ("/exec/ns/p/u/c/extra", None),
        ("/containerLogs/ns/p", None),
        ("/pods", None),
    ];
    for (path, want) in cases {
        assert_eq!(endpoint(path), want, "{path}");
    }
}

#[test]
fn query_keeps_repeats_in_order() {
    let q = query_pairs(Some(
        "command=sh&command=-c&command=exit+3&stdin=1&tty=true&x=%2F",
    ));
    let cmd: Vec<&str> = q
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(cmd, ["sh", "-c", "exit 3"]);
    assert!(flag(&q, &["stdin"]) && flag(&q, &["tty"]) && !flag(&q, &["stdout"]));
    assert_eq!(first(&q, "x"), Some("/"));
}

fn pod(status: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}], "initContainers": [{"name": "i"}]},
        "status": status,
    }))
    .unwrap()
}

#[test]
fn which_container_a_log_reads() {
    let running = json!({"containerStatuses": [{"name": "c", "ready": true, "restartCount": 1,
        "image": "busybox", "imageID": "", "containerID": "containerd://new",
        "state": {"running": {}},
        "lastState": {"terminated": {"exitCode": 1, "containerID": "containerd://old"}}}]});
    let waiting = |reason: &str| {
        json!({"containerStatuses": [{"name": "c", "ready": false, "restartCount": 0,
            "image": "busybox", "imageID": "", "state": {"waiting": {"reason": reason}}}]})
    };
    let crashloop = json!({"containerStatuses": [{"name": "c", "ready": false, "restartCount": 3,
        "image": "busybox", "imageID": "",
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "containerID": "containerd://dead"}}}]});
    let cases: Vec<(serde_json::Value, &str, bool, Result<&str, &str>)> = vec![
        (running.clone(), "c", false, Ok("containerd://new")),
        (running.clone(), "c", true, Ok("containerd://old")),
        (
            waiting("ContainerCreating"),
            "c",
            false,
            Err(r#"container "c" in pod "p" is waiting to start: ContainerCreating"#),
        ),
        (
            waiting("ImagePullBackOff"),
            "c",
            false,
            Err(
                r#"container "c" in pod "p" is waiting to start: trying and failing to pull image"#,
            ),
        ),
        (
            waiting("ErrImagePull"),
            "c",
            false,
            Err(r#"container "c" in pod "p" is waiting to start: image can't be pulled"#),
        ),
        (
            waiting("ContainerCreating"),
            "c",
            true,
            Err(r#"previous terminated container "c" in pod "p" not found"#),
        ),
        // Between restarts the log is the last run's.
        (crashloop, "c", false, Ok("containerd://dead")),
        (
            running,
            "i",
            false,
            Err(r#"container "i" in pod "p" is not available"#),
        ),
    ];
    for (status, c, previous, want) in cases {
        let got = log_container_id(&pod(status.clone()), c, previous);
        assert_eq!(
            got.as_deref().map_err(String::as_str),
            want,
            "{c} previous={previous} {status}"
        );
    }
}

#[test]
fn pod_containers() {
    let p = pod(json!({}));
    assert!(has_container(&p, "c") && has_container(&p, "i") && !has_container(&p, "x"));
}

#[tokio::test]
async fn serving_needs_a_client_ca() {
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    assert!(matches!(
        KubeletServer::bind(addr, "not a pem", &["localhost".into()]).await,
        Err(ServerError::Tls(_))
    ));
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = params.self_signed(&key).unwrap();
    // The PEM written back from DER is the same certificate.
    let again = pem_from_der(&[ca.der().to_vec()]);
    assert_eq!(again.replace('\n', ""), ca.pem().replace(['\n', '\r'], ""));
    let s = KubeletServer::bind(addr, &again, &["localhost".into(), "127.0.0.1".into()])
        .await
        .unwrap();
    assert_ne!(s.port(), 0);
}

/// Accepts any server certificate (the kubelet's is self-signed).
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], u16, &'a str);

type ClientCert = (
    rustls::pki_types::CertificateDer<'static>,
    rustls::pki_types::PrivateKeyDer<'static>,
);

/// A client certificate for `CN=cn`, signed by `issuer`.
fn client_cert(cn: &str, issuer: &rcgen::Issuer<'_, rcgen::KeyPair>) -> ClientCert {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, issuer).unwrap();
    (
        cert.der().clone(),
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )
}

fn ca(cn: &str) -> (String, rcgen::Issuer<'static, rcgen::KeyPair>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let pem = params.self_signed(&key).unwrap().pem();
    let issuer = rcgen::Issuer::from_ca_cert_pem(&pem, key).unwrap();
    (pem, issuer)
}

/// One HTTP/1.1 request over TLS: (status, body), or why it failed.
async fn request(
    addr: SocketAddr,
    cert: Option<ClientCert>,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, String), String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)));
    let cfg = match cert {
        Some((c, k)) => builder.with_client_auth_cert(vec![c], k).unwrap(),
        None => builder.with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(
            rustls::pki_types::ServerName::IpAddress(addr.ip().into()),
            tcp,
        )
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let mut req = Request::get(path).header(header::HOST, "kubelet");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = sender
        .send_request(req.body(http_body_util::Empty::<Bytes>::new()).unwrap())
        .await
        .map_err(|e| e.to_string())?;
    let code = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok((code, String::from_utf8_lossy(&body.to_bytes()).into_owned()))
}

/// Clients with a certificate from the cluster CA or a reviewed token are
/// served as far as they are authorized; certificates of another CA fail the
/// handshake; the endpoints answer as upstream's kubelet when there is
/// nothing to stream.
#[tokio::test]
async fn serves_authenticated_and_authorized_clients() {
    let (ca_pem, issuer) = ca("cluster-ca");
    let (_, stranger_issuer) = ca("another-ca");
    let server = KubeletServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        &ca_pem,
        &["127.0.0.1".into()],
    )
    .await
    .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", server.port()).parse().unwrap();
    // Nothing listens on port 9: pod lookups fail at once, never leave the host.
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let runtime: Arc<crate::runtime::fake::FakeRuntime> = Arc::default();
    let stats = crate::stats::StatsProvider::new(
        crate::stats::StatsConfig {
            node_name: "127.0.0.1".into(),
            root_dir: std::env::temp_dir(),
            logs_dir: std::env::temp_dir(),
            pods_dir: std::env::temp_dir(),
            memory_capacity: 1 << 30,
        },
        runtime.clone(),
    );
    let deps = Arc::new(Deps {
        client,
        runtime: runtime.clone(),
        stats: Arc::new(stats),
    });
    let reviewer = auth::tests::FakeReviewer::allowing(&[
        ("kube-apiserver-kubelet-client", "get", "proxy"),
        ("kube-apiserver-kubelet-client", "get", "stats"),
        ("kube-apiserver-kubelet-client", "get", "metrics"),
        ("system:serviceaccount:default:checker", "get", "healthz"),
    ])
    .with_token(
        "checker-token",
        auth::TokenOutcome::Authenticated(berth_api::user::UserInfo::new(
            "system:serviceaccount:default:checker",
            &["system:serviceaccounts", "system:authenticated"],
        )),
    );
    let kubelet_auth =
        auth::KubeletAuth::new("127.0.0.1", Arc::new(reviewer), auth::AuthConfig::default());
    tokio::spawn(server.serve_with(deps, Arc::new(kubelet_auth)));
    let apiserver = || Some(client_cert("kube-apiserver-kubelet-client", &issuer));

    assert_eq!(
        request(addr, apiserver(), "/healthz", &[]).await,
        Ok((200, "ok".into()))
    );
    // Without a certificate the handshake succeeds; HTTP refuses.
    assert_eq!(
        request(addr, None, "/healthz", &[]).await,
        Ok((401, "Unauthorized".into()))
    );
    let checker = [("authorization", "Bearer checker-token")];
    assert_eq!(
        request(addr, None, "/healthz", &checker).await,
        Ok((200, "ok".into()))
    );
    assert_eq!(
        request(addr, None, "/pods", &checker).await,
        Ok((
            403,
            "Forbidden (user=system:serviceaccount:default:checker, verb=get, resource=nodes, subresource(s)=[pods proxy])\n".into()
        ))
    );
    assert_eq!(
        request(addr, None, "/healthz", &[("authorization", "Bearer nope")]).await,
        Ok((401, "Unauthorized".into()))
    );
    let stranger = Some(client_cert("intruder", &stranger_issuer));
    assert!(
        request(addr, stranger, "/healthz", &[]).await.is_err(),
        "another CA"
    );

    let upgrade = [("connection", "Upgrade"), ("upgrade", "SPDY/3.1")];
    // (path, headers, status, body)
    let cases: Vec<Case> = vec![
        ("/nope", &[], 404, "404 page not found"),
        (
            "/exec/ns/p/c?command=true",
            &[],
            400,
            "Upgrade request required",
        ),
        (
            "/exec/ns/p/c",
            &upgrade,
            400,
            "you must specify at least one command for the container",
        ),
        (
            "/exec/ns/p/c?command=true",
            &upgrade,
            500,
            "container not found (\"c\")",
        ),
        (
            "/attach/ns/p/c?stdout=1",
            &upgrade,
            500,
            "container not found (\"c\")",
        ),
        (
            "/portForward/ns/p",
            &upgrade,
            404,
            "pod \"p\" does not exist on this node",
        ),
        (
            "/containerLogs/ns/p/c?tailLines=-1",
            &[],
            400,
            "tailLines: Invalid value: must be greater than or equal to 0",
        ),
    ];
    for (path, headers, code, body) in cases {
        assert_eq!(
            request(addr, apiserver(), path, headers).await,
            Ok((code, body.to_string())),
            "{path}"
        );
    }

    // Stats: nodes/stats and nodes/metrics only, never proxy.
    assert_eq!(
        request(addr, None, "/stats/summary", &checker).await,
        Ok((
            403,
            "Forbidden (user=system:serviceaccount:default:checker, verb=get, resource=nodes, subresource(s)=[stats])\n".into()
        ))
    );
    let (code, body) = request(
        addr,
        apiserver(),
        "/stats/summary?only_cpu_and_memory=true",
        &[],
    )
    .await
    .unwrap();
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["node"]["nodeName"], "127.0.0.1");
    assert_eq!(v["pods"], json!([]));
    assert!(v["node"].get("fs").is_none(), "{body}");
    let (code, body) = request(addr, apiserver(), "/metrics/resource", &[])
        .await
        .unwrap();
    assert_eq!(code, 200);
    assert!(body.ends_with("resource_scrape_error 0\n"), "{body}");
}
