use super::*;
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
