//! gRPC probes: `grpc.health.v1.Health/Check` over plaintext HTTP/2 to the
//! pod IP, as upstream's `pkg/probe/grpc`. Only `SERVING` is success. The
//! protobuf messages are tiny and encoded by hand (`HealthCheckRequest {
//! string service = 1; }`, `HealthCheckResponse { ServingStatus status = 1; }`).
//!
//! Upstream dials with `WithBlock`, so an unreachable server is retried until
//! the timeout and reported as `timeout: failed to connect service …`.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use tokio::time::Instant;

use super::tcp::join_host_port;
use super::{Outcome, USER_AGENT};
use crate::backoff::go_duration;

const PATH: &str = "/grpc.health.v1.Health/Check";

/// `HealthCheckRequest` in protobuf wire form.
pub fn encode_request(service: &str) -> Vec<u8> {
    let mut out = Vec::new();
    if !service.is_empty() {
        out.push(0x0a); // field 1, length-delimited
        put_varint(&mut out, service.len() as u64);
        out.extend_from_slice(service.as_bytes());
    }
    out
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

/// The `status` of a `HealthCheckResponse` (0, UNKNOWN, when absent).
pub fn decode_response(b: &[u8]) -> Result<u64, String> {
    let mut pos = 0;
    let mut status = 0;
    let bad = || "grpc: failed to unmarshal the received message".to_string();
    while pos < b.len() {
        let key = get_varint(b, &mut pos).ok_or_else(bad)?;
        match key & 7 {
            0 => {
                let v = get_varint(b, &mut pos).ok_or_else(bad)?;
                if key >> 3 == 1 {
                    status = v;
                }
            }
            1 => pos += 8,
            2 => {
                let len = get_varint(b, &mut pos).ok_or_else(bad)? as usize;
                pos = pos.checked_add(len).ok_or_else(bad)?;
            }
            5 => pos += 4,
            _ => return Err(bad()),
        }
    }
    if pos > b.len() {
        return Err(bad());
    }
    Ok(status)
}

/// `HealthCheckResponse_ServingStatus.String()`.
pub fn serving_status_name(v: u64) -> String {
    match v {
        0 => "UNKNOWN".into(),
        1 => "SERVING".into(),
        2 => "NOT_SERVING".into(),
        3 => "SERVICE_UNKNOWN".into(),
        n => n.to_string(),
    }
}

/// gRPC status code names, as grpc-go prints them.
pub fn code_name(code: u32) -> String {
    const NAMES: [&str; 17] = [
        "OK",
        "Canceled",
        "Unknown",
        "InvalidArgument",
        "DeadlineExceeded",
        "NotFound",
        "AlreadyExists",
        "PermissionDenied",
        "ResourceExhausted",
        "FailedPrecondition",
        "Aborted",
        "OutOfRange",
        "Unimplemented",
        "Internal",
        "Unavailable",
        "DataLoss",
        "Unauthenticated",
    ];
    NAMES
        .get(code as usize)
        .map_or_else(|| format!("Code({code})"), |s| s.to_string())
}

/// `grpc-message` is percent-encoded.
fn decode_grpc_message(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        if b[i] == b'%'
            && let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What the Check RPC answered.
enum RpcAnswer {
    Status(u64),
    /// A non-OK gRPC status: (code, message).
    Error(u32, String),
}

/// Runs a gRPC probe against `host:port`.
pub async fn probe(host: &str, port: u16, service: &str, timeout: Duration) -> (Outcome, String) {
    let addr = join_host_port(host, port);
    let deadline = Instant::now() + timeout;
    let sender = match connect(host, port, deadline).await {
        Some(s) => s,
        None => {
            return (
                Outcome::Failure,
                format!(
                    "timeout: failed to connect service {addr:?} within {}: context deadline exceeded",
                    go_duration(timeout)
                ),
            );
        }
    };
    let rpc_timeout = || {
        (
            Outcome::Failure,
            format!(
                "timeout: health rpc did not complete within {}",
                go_duration(timeout)
            ),
        )
    };
    let answer =
        match tokio::time::timeout_at(deadline, check(sender.0, &addr, service, timeout)).await {
            Err(_) => return rpc_timeout(),
            Ok(a) => a,
        };
    match answer {
        Ok(RpcAnswer::Status(1)) => (Outcome::Success, "service healthy".to_string()),
        Ok(RpcAnswer::Status(s)) => (
            Outcome::Failure,
            format!(
                "service unhealthy (responded with {:?})",
                serving_status_name(s)
            ),
        ),
        Ok(RpcAnswer::Error(12, msg)) => (
            Outcome::Failure,
            format!(
                "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {msg}"
            ),
        ),
        Ok(RpcAnswer::Error(4, _)) => rpc_timeout(),
        Ok(RpcAnswer::Error(code, msg)) => (
            Outcome::Failure,
            format!(
                "error: health rpc probe failed: rpc error: code = {} desc = {msg}",
                code_name(code)
            ),
        ),
        Err(e) => (
            Outcome::Failure,
            format!("error: health rpc probe failed: {e}"),
        ),
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

type Sender = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

async fn try_connect(host: &str, port: u16) -> Option<(Sender, AbortOnDrop)> {
    let tcp = tokio::net::TcpStream::connect((host, port)).await.ok()?;
    let _ = tcp.set_nodelay(true);
    let (sender, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .ok()?;
    let task = AbortOnDrop(tokio::spawn(async move {
        let _ = conn.await;
    }));
    Some((sender, task))
}

/// Dials until an HTTP/2 connection is up or the deadline passes.
async fn connect(host: &str, port: u16, deadline: Instant) -> Option<(Sender, AbortOnDrop)> {
    let mut delay = Duration::from_millis(100);
    loop {
        match tokio::time::timeout_at(deadline, try_connect(host, port)).await {
            Ok(Some(c)) => return Some(c),
            Ok(None) => {}
            Err(_) => return None,
        }
        if Instant::now() + delay >= deadline {
            tokio::time::sleep_until(deadline).await;
            return None;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(1));
    }
}

async fn check(
    mut sender: Sender,
    authority: &str,
    service: &str,
    timeout: Duration,
) -> Result<RpcAnswer, String> {
    let msg = encode_request(service);
    let mut frame = BytesMut::with_capacity(5 + msg.len());
    frame.put_u8(0);
    frame.put_u32(msg.len() as u32);
    frame.put_slice(&msg);
    let uri = format!("http://{authority}{PATH}");
    let req = http::Request::builder()
        .method(http::Method::POST)
        .version(http::Version::HTTP_2)
        .uri(uri)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("user-agent", USER_AGENT)
        .header("grpc-timeout", format!("{}m", timeout.as_millis().max(1)))
        .body(Full::new(frame.freeze()))
        .map_err(|e| e.to_string())?;
    sender.ready().await.map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let http_status = resp.status();
    let header_status = grpc_status(resp.headers());
    if http_status != http::StatusCode::OK && header_status.is_none() {
        let code = match http_status.as_u16() {
            400 => 13,
            401 => 16,
            403 => 7,
            404 => 12,
            429 | 502 | 503 | 504 => 14,
            _ => 2,
        };
        return Ok(RpcAnswer::Error(
            code,
            format!(
                "unexpected HTTP status code received from server: {} ({})",
                http_status.as_u16(),
                http_status.canonical_reason().unwrap_or("")
            ),
        ));
    }
    if let Some((code, msg)) = &header_status {
        // A trailers-only response.
        if *code != 0 {
            return Ok(RpcAnswer::Error(*code, msg.clone()));
        }
    }
    let mut body = resp.into_body();
    let mut data = Vec::new();
    let mut trailer_status = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| e.to_string())?;
        match frame.into_data() {
            Ok(d) => data.extend_from_slice(&d),
            Err(frame) => {
                if let Ok(t) = frame.into_trailers() {
                    trailer_status = grpc_status(&t);
                }
            }
        }
        if data.len() > 64 * 1024 {
            return Err("grpc: received message larger than expected".into());
        }
    }
    match trailer_status.or(header_status) {
        Some((0, _)) => {}
        Some((code, msg)) => return Ok(RpcAnswer::Error(code, msg)),
        None => {
            return Ok(RpcAnswer::Error(
                13,
                "server closed the stream without sending trailers".into(),
            ));
        }
    }
    if data.len() < 5 {
        return Ok(RpcAnswer::Error(13, "grpc: no response message".into()));
    }
    let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
    let msg = data
        .get(5..5 + len)
        .ok_or_else(|| "grpc: truncated response message".to_string())?;
    Ok(RpcAnswer::Status(decode_response(msg)?))
}

fn grpc_status(h: &http::HeaderMap) -> Option<(u32, String)> {
    let code = h.get("grpc-status")?.to_str().ok()?.trim().parse().ok()?;
    let msg = h
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .map(decode_grpc_message)
        .unwrap_or_default();
    Some((code, msg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    use http_body_util::StreamBody;
    use hyper::body::Frame;

    /// A Health server: service "" SERVING, "down" NOT_SERVING, "weird" 7,
    /// "slow" never answers in time, "nosuch" NotFound; `implemented: false`
    /// answers Unimplemented for everything.
    async fn start(implemented: bool) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let Ok((s, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(
                        move |req: http::Request<hyper::body::Incoming>| async move {
                            assert_eq!(req.uri().path(), PATH);
                            assert_eq!(req.headers()["content-type"], "application/grpc");
                            assert_eq!(req.headers()["user-agent"], USER_AGENT);
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            // 5-byte frame header, then tag 0x0a and a one-byte length.
                            let service = if body.len() > 7 {
                                String::from_utf8_lossy(&body[7..]).to_string()
                            } else {
                                String::new()
                            };
                            let mut trailers = http::HeaderMap::new();
                            let mut frames: Vec<Result<Frame<Bytes>, Infallible>> = vec![];
                            let status = match service.as_str() {
                                _ if !implemented => None,
                                "" => Some(1u8),
                                "down" => Some(2),
                                "weird" => Some(7),
                                "slow" => {
                                    tokio::time::sleep(Duration::from_secs(5)).await;
                                    Some(1)
                                }
                                _ => None,
                            };
                            match status {
                                Some(st) => {
                                    frames.push(Ok(Frame::data(Bytes::from(vec![
                                        0, 0, 0, 0, 2, 0x08, st,
                                    ]))));
                                    trailers.insert("grpc-status", "0".parse().unwrap());
                                }
                                None if !implemented => {
                                    trailers.insert("grpc-status", "12".parse().unwrap());
                                    trailers.insert(
                                        "grpc-message",
                                        "unknown service grpc.health.v1.Health".parse().unwrap(),
                                    );
                                }
                                None => {
                                    trailers.insert("grpc-status", "5".parse().unwrap());
                                    trailers.insert(
                                        "grpc-message",
                                        "unknown%20service".parse().unwrap(),
                                    );
                                }
                            }
                            frames.push(Ok(Frame::trailers(trailers)));
                            let resp = http::Response::builder()
                                .header("content-type", "application/grpc")
                                .body(StreamBody::new(futures::stream::iter(frames)))
                                .unwrap();
                            Ok::<_, Infallible>(resp)
                        },
                    );
                    let _ = hyper::server::conn::http2::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                    .await;
                });
            }
        });
        port
    }

    #[tokio::test]
    async fn health_check_answers() {
        let port = start(true).await;
        let t = Duration::from_secs(1);
        let cases = [
            ("", Outcome::Success, "service healthy".to_string()),
            (
                "down",
                Outcome::Failure,
                r#"service unhealthy (responded with "NOT_SERVING")"#.to_string(),
            ),
            (
                "weird",
                Outcome::Failure,
                r#"service unhealthy (responded with "7")"#.to_string(),
            ),
            (
                "nosuch",
                Outcome::Failure,
                "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service"
                    .to_string(),
            ),
            (
                "slow",
                Outcome::Failure,
                "timeout: health rpc did not complete within 1s".to_string(),
            ),
        ];
        for (service, o, msg) in cases {
            assert_eq!(
                probe("127.0.0.1", port, service, t).await,
                (o, msg),
                "{service:?}"
            );
        }
        let port = start(false).await;
        assert_eq!(
            probe("127.0.0.1", port, "", t).await,
            (
                Outcome::Failure,
                "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service grpc.health.v1.Health".to_string()
            )
        );
    }

    #[tokio::test]
    async fn unreachable_server_times_out() {
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let started = std::time::Instant::now();
        let got = probe("127.0.0.1", closed, "", Duration::from_millis(500)).await;
        assert!(started.elapsed() >= Duration::from_millis(450));
        assert_eq!(
            got,
            (
                Outcome::Failure,
                format!(
                    "timeout: failed to connect service \"127.0.0.1:{closed}\" within 500ms: context deadline exceeded"
                )
            )
        );
    }

    #[test]
    fn wire_format() {
        assert_eq!(encode_request(""), Vec::<u8>::new());
        assert_eq!(encode_request("db"), vec![0x0a, 2, b'd', b'b']);
        let long = "s".repeat(200);
        let enc = encode_request(&long);
        assert_eq!(&enc[..3], &[0x0a, 0xc8, 0x01]);
        assert_eq!(decode_response(&[]), Ok(0));
        assert_eq!(decode_response(&[0x08, 0x01]), Ok(1));
        // Unknown fields are skipped.
        assert_eq!(decode_response(&[0x12, 0x01, b'x', 0x08, 0x02]), Ok(2));
        assert!(decode_response(&[0x08]).is_err());
        assert_eq!(decode_grpc_message("a%20b%"), "a b%");
        assert_eq!(code_name(12), "Unimplemented");
        assert_eq!(code_name(99), "Code(99)");
    }
}
