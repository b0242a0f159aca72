//! exec, attach and port-forward sessions between the API server and
//! containerd's streaming server.
//!
//! - WebSocket `v5.channel.k8s.io` (kubectl ≥ 1.30): terminated here and relayed
//!   to containerd over SPDY/3.1 (`v4.channel.k8s.io`), whose streams can be
//!   half-closed: v5's close-stdin message becomes a FIN on the stdin stream, so
//!   `echo x | kubectl exec -i … -- cat` ends. (containerd 1.6 speaks WebSocket
//!   only up to v4, which has no way to close stdin alone.)
//! - WebSocket `SPDY/3.1+portforward.k8s.io` (kubectl ≥ 1.31 port-forward): the
//!   SPDY bytes kubectl tunnels in binary messages are relayed unchanged to a
//!   SPDY upgrade of containerd's port-forward URL.
//! - Anything else (SPDY from older kubectl, WebSocket ≤ v4): the upgrade is
//!   passed through to containerd as is.

use std::convert::Infallible;

use bytes::{BufMut, Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::debug;

use super::spdy;

pub type Body = BoxBody<Bytes, Infallible>;

pub const V5_PROTOCOL: &str = "v5.channel.k8s.io";
pub const V4_PROTOCOL: &str = "v4.channel.k8s.io";
pub const PORT_FORWARD_TUNNEL_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
pub const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";
const STREAM_PROTOCOL_VERSION: &str = "x-stream-protocol-version";
const WEBSOCKET_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// v5 channel numbers (remotecommand's constants).
const CH_STDIN: u8 = 0;
const CH_STDOUT: u8 = 1;
const CH_STDERR: u8 = 2;
const CH_ERROR: u8 = 3;
const CH_RESIZE: u8 = 4;
const CH_CLOSE: u8 = 255;

#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("bad streaming URL {0:?}")]
    Url(String),
    #[error("connecting to the container runtime's streaming server: {0}")]
    Io(#[from] std::io::Error),
    #[error("upgrading the connection to the container runtime: {0}")]
    Http(#[from] hyper::Error),
    #[error("building the request: {0}")]
    Request(#[from] http::Error),
}

pub fn text(code: StatusCode, msg: impl Into<String>) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(msg.into())).boxed());
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Which kind of upgrade a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upgrade {
    /// WebSocket with the offered subprotocols, in order.
    WebSocket(Vec<String>),
    Spdy,
    None,
}

pub fn upgrade_kind(headers: &HeaderMap) -> Upgrade {
    let connection_upgrade = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    let upgrade = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !connection_upgrade {
        return Upgrade::None;
    }
    if upgrade.eq_ignore_ascii_case("websocket") {
        let protocols = headers
            .get_all(header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect();
        Upgrade::WebSocket(protocols)
    } else if upgrade.to_ascii_lowercase().starts_with("spdy/") {
        Upgrade::Spdy
    } else {
        Upgrade::None
    }
}

/// `Sec-WebSocket-Accept` for a client's key (RFC 6455 §4.2.2).
pub fn websocket_accept(key: &str) -> String {
    use base64::Engine;
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{}{WEBSOCKET_GUID}", key.trim()).as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// The runtime's answer to an upgrade request.
pub enum Upstream {
    Switched { headers: HeaderMap, io: Upgraded },
    Refused(Response<Body>),
}

/// Sends an upgrade request to the runtime's streaming URL (plain HTTP on loopback).
pub async fn dial_upgrade(
    url: &str,
    method: Method,
    headers: Vec<(HeaderName, HeaderValue)>,
) -> Result<Upstream, StreamError> {
    let uri: http::Uri = url.parse().map_err(|_| StreamError::Url(url.into()))?;
    let authority = uri
        .authority()
        .ok_or_else(|| StreamError::Url(url.into()))?
        .clone();
    let port = authority.port_u16().unwrap_or(80);
    let tcp = tokio::net::TcpStream::connect((authority.host(), port)).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            debug!(error = %e, "runtime streaming connection ended");
        }
    });
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, authority.as_str());
    for (k, v) in headers {
        req = req.header(k, v);
    }
    let mut resp = sender
        .send_request(req.body(Empty::<Bytes>::new())?)
        .await?;
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        let status = resp.status();
        let ct = resp.headers().get(header::CONTENT_TYPE).cloned();
        let body = resp.into_body().collect().await?.to_bytes();
        let mut r = Response::new(Full::new(body).boxed());
        *r.status_mut() = status;
        if let Some(ct) = ct {
            r.headers_mut().insert(header::CONTENT_TYPE, ct);
        }
        return Ok(Upstream::Refused(r));
    }
    let headers = resp.headers().clone();
    let io = hyper::upgrade::on(&mut resp).await?;
    Ok(Upstream::Switched { headers, io })
}

fn switching(headers: &[(HeaderName, String)]) -> Response<Body> {
    let mut r = Response::new(Empty::new().boxed());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    for (k, v) in headers {
        if let Ok(v) = HeaderValue::from_str(v) {
            r.headers_mut().append(k.clone(), v);
        }
    }
    r
}

fn runtime_error(e: StreamError) -> Response<Body> {
    text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}

/// Passes an upgrade through to the runtime unchanged (SPDY, WebSocket ≤ v4).
pub async fn pass_through(mut req: Request<Incoming>, url: &str) -> Response<Body> {
    let client = hyper::upgrade::on(&mut req);
    let forwarded: Vec<(HeaderName, HeaderValue)> = req
        .headers()
        .iter()
        .filter(|(k, _)| {
            let k = k.as_str();
            k == "connection"
                || k == "upgrade"
                || k == STREAM_PROTOCOL_VERSION
                || (k.starts_with("sec-websocket-") && k != "sec-websocket-extensions")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    match dial_upgrade(url, req.method().clone(), forwarded).await {
        Ok(Upstream::Switched { headers, io }) => {
            let mut r = switching(&[]);
            for (k, v) in &headers {
                let name = k.as_str();
                if name == "connection"
                    || name == "upgrade"
                    || name == STREAM_PROTOCOL_VERSION
                    || name.starts_with("sec-websocket-")
                {
                    r.headers_mut().append(k.clone(), v.clone());
                }
            }
            tokio::spawn(async move {
                let Ok(client) = client.await else { return };
                let mut a = TokioIo::new(client);
                let mut b = TokioIo::new(io);
                let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
            });
            r
        }
        Ok(Upstream::Refused(r)) => r,
        Err(e) => runtime_error(e),
    }
}

fn ws_headers(key: &str, protocol: &str) -> Vec<(HeaderName, String)> {
    vec![
        (header::UPGRADE, "websocket".into()),
        (header::CONNECTION, "Upgrade".into()),
        (header::SEC_WEBSOCKET_ACCEPT, websocket_accept(key)),
        (header::SEC_WEBSOCKET_PROTOCOL, protocol.into()),
    ]
}

fn spdy_request(version: &str) -> Vec<(HeaderName, HeaderValue)> {
    vec![
        (header::CONNECTION, HeaderValue::from_static("Upgrade")),
        (header::UPGRADE, HeaderValue::from_static("SPDY/3.1")),
        (
            HeaderName::from_static(STREAM_PROTOCOL_VERSION),
            HeaderValue::from_str(version).unwrap_or(HeaderValue::from_static(V4_PROTOCOL)),
        ),
    ]
}

/// Which streams a remote command session has (as the runtime was asked).
#[derive(Debug, Clone, Copy)]
pub struct Session {
    pub stdin: bool,
    pub tty: bool,
}

/// The SPDY streams of a v4 session: (stream id, streamtype, v5 channel).
/// The error stream comes first, as client-go creates it.
fn session_streams(s: Session) -> Vec<(u32, &'static str, u8)> {
    let mut kinds = vec![("error", CH_ERROR)];
    if s.stdin {
        kinds.push(("stdin", CH_STDIN));
    }
    kinds.push(("stdout", CH_STDOUT));
    if s.tty {
        kinds.push(("resize", CH_RESIZE));
    } else {
        kinds.push(("stderr", CH_STDERR));
    }
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, (k, ch))| (2 * i as u32 + 1, k, ch))
        .collect()
}

/// Accepts WebSocket v5 from the client and runs the session against the
/// runtime over SPDY.
pub async fn serve_v5(mut req: Request<Incoming>, url: &str, session: Session) -> Response<Body> {
    let Some(key) = req
        .headers()
        .get(header::SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
    else {
        return text(StatusCode::BAD_REQUEST, "missing Sec-WebSocket-Key");
    };
    let client = hyper::upgrade::on(&mut req);
    match dial_upgrade(url, Method::POST, spdy_request(V4_PROTOCOL)).await {
        Ok(Upstream::Switched { io, .. }) => {
            tokio::spawn(relay_v5(client, io, session));
            switching(&ws_headers(&key, V5_PROTOCOL))
        }
        Ok(Upstream::Refused(r)) => r,
        Err(e) => runtime_error(e),
    }
}

async fn relay_v5(client: OnUpgrade, backend: Upgraded, session: Session) {
    let Ok(client) = client.await else { return };
    let mut ws = WebSocketStream::from_raw_socket(TokioIo::new(client), Role::Server, None).await;
    let (mut rd, mut wr) = tokio::io::split(TokioIo::new(backend));
    let streams = session_streams(session);
    let id_of = |ch: u8| streams.iter().find(|s| s.2 == ch).map(|s| s.0);
    let mut enc = spdy::Encoder::default();
    for (id, kind, _) in &streams {
        if wr
            .write_all(&enc.syn_stream(*id, &[("streamtype", kind)]))
            .await
            .is_err()
        {
            return;
        }
    }
    // As upstream's server: an empty message on the first output channel
    // tells the client the session is up.
    let _ = ws
        .send(Message::Binary(Bytes::from_static(&[CH_STDOUT])))
        .await;
    let mut dec = spdy::Decoder::default();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        tokio::select! {
            msg = ws.next() => match msg {
                Some(Ok(Message::Binary(b))) if !b.is_empty() => {
                    let frames = client_frames(&b, &id_of);
                    tracing::trace!(channel = b[0], len = b.len(), frames = frames.len(), "client message");
                    for f in frames {
                        if wr.write_all(&f).await.is_err() {
                            return;
                        }
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {
                    let _ = ws.flush().await;
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
            n = rd.read(&mut buf) => {
                let n = match n { Ok(0) | Err(_) => break, Ok(n) => n };
                dec.extend(&buf[..n]);
                loop {
                    let f = dec.next_frame();
                    tracing::trace!(frame = ?f, "runtime frame");
                    match f {
                        Ok(Some(spdy::Frame::Data { stream_id, data, .. })) => {
                            let Some(ch) = streams.iter().find(|s| s.0 == stream_id).map(|s| s.2) else { continue };
                            if data.is_empty() || ch == CH_STDIN || ch == CH_RESIZE {
                                continue;
                            }
                            let mut m = BytesMut::with_capacity(data.len() + 1);
                            m.put_u8(ch);
                            m.put_slice(&data);
                            if ws.send(Message::Binary(m.freeze())).await.is_err() {
                                return;
                            }
                        }
                        Ok(Some(spdy::Frame::Ping { id })) => {
                            if wr.write_all(&spdy::ping(id)).await.is_err() {
                                return;
                            }
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(e) => {
                            debug!(error = %e, "runtime stream");
                            return;
                        }
                    }
                }
            }
        }
    }
    // The runtime ended the session (after writing the status): so do we.
    close_ws(&mut ws).await;
}

async fn close_ws<S>(ws: &mut WebSocketStream<S>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let _ = ws
        .send(Message::Close(Some(CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        })))
        .await;
    let _ = ws.flush().await;
}

/// SPDY frames for one v5 message from the client: stdin data, a resize, or
/// close-stdin (a FIN on the stdin stream).
fn client_frames(msg: &[u8], id_of: &impl Fn(u8) -> Option<u32>) -> Vec<Bytes> {
    let (ch, payload) = (msg[0], &msg[1..]);
    match ch {
        CH_STDIN | CH_RESIZE => {
            let Some(id) = id_of(ch) else {
                return Vec::new();
            };
            payload
                .chunks(spdy::MAX_DATA)
                .map(|c| spdy::data(id, false, c))
                .collect()
        }
        CH_CLOSE if payload.first() == Some(&CH_STDIN) => id_of(CH_STDIN)
            .map(|id| vec![spdy::data(id, true, &[])])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Accepts kubectl's port-forward tunnel (SPDY inside WebSocket) and relays it
/// to a SPDY upgrade of the runtime's port-forward URL.
pub async fn serve_tunnel(mut req: Request<Incoming>, url: &str) -> Response<Body> {
    let Some(key) = req
        .headers()
        .get(header::SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
    else {
        return text(StatusCode::BAD_REQUEST, "missing Sec-WebSocket-Key");
    };
    let client = hyper::upgrade::on(&mut req);
    match dial_upgrade(url, Method::POST, spdy_request(PORT_FORWARD_PROTOCOL)).await {
        Ok(Upstream::Switched { io, .. }) => {
            tokio::spawn(relay_tunnel(client, io));
            switching(&ws_headers(&key, PORT_FORWARD_TUNNEL_PROTOCOL))
        }
        Ok(Upstream::Refused(r)) => r,
        Err(e) => runtime_error(e),
    }
}

async fn relay_tunnel(client: OnUpgrade, backend: Upgraded) {
    let Ok(client) = client.await else { return };
    let mut ws = WebSocketStream::from_raw_socket(TokioIo::new(client), Role::Server, None).await;
    let (mut rd, mut wr) = tokio::io::split(TokioIo::new(backend));
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        tokio::select! {
            msg = ws.next() => match msg {
                Some(Ok(Message::Binary(b))) => {
                    if wr.write_all(&b).await.is_err() {
                        return;
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {
                    let _ = ws.flush().await;
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
            n = rd.read(&mut buf) => {
                let n = match n { Ok(0) | Err(_) => break, Ok(n) => n };
                if ws.send(Message::Binary(Bytes::copy_from_slice(&buf[..n]))).await.is_err() {
                    return;
                }
            }
        }
    }
    close_ws(&mut ws).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_key_rfc6455_example() {
        assert_eq!(
            websocket_accept("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn upgrade_kinds() {
        let h = |pairs: &[(&str, &str)]| {
            let mut m = HeaderMap::new();
            for (k, v) in pairs {
                m.append(
                    HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                );
            }
            upgrade_kind(&m)
        };
        assert_eq!(
            h(&[
                ("connection", "Upgrade"),
                ("upgrade", "websocket"),
                (
                    "sec-websocket-protocol",
                    "v5.channel.k8s.io, v4.channel.k8s.io"
                )
            ]),
            Upgrade::WebSocket(vec![V5_PROTOCOL.into(), V4_PROTOCOL.into()])
        );
        assert_eq!(
            h(&[
                ("connection", "keep-alive, upgrade"),
                ("upgrade", "SPDY/3.1")
            ]),
            Upgrade::Spdy
        );
        assert_eq!(h(&[("upgrade", "websocket")]), Upgrade::None);
        assert_eq!(h(&[]), Upgrade::None);
    }

    #[test]
    fn streams_per_session() {
        let ids = |s| {
            session_streams(s)
                .into_iter()
                .map(|(id, k, ch)| format!("{id}:{k}:{ch}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            ids(Session {
                stdin: false,
                tty: false
            }),
            "1:error:3 3:stdout:1 5:stderr:2"
        );
        assert_eq!(
            ids(Session {
                stdin: true,
                tty: true
            }),
            "1:error:3 3:stdin:0 5:stdout:1 7:resize:4"
        );
    }

    #[test]
    fn client_messages_become_frames() {
        let streams = session_streams(Session {
            stdin: true,
            tty: true,
        });
        let id_of = |ch: u8| streams.iter().find(|s| s.2 == ch).map(|s| s.0);
        let f = client_frames(&[CH_STDIN, b'h', b'i'], &id_of);
        assert_eq!(f, vec![spdy::data(3, false, b"hi")]);
        let f = client_frames(&[CH_RESIZE, b'{', b'}'], &id_of);
        assert_eq!(f, vec![spdy::data(7, false, b"{}")]);
        let f = client_frames(&[CH_CLOSE, CH_STDIN], &id_of);
        assert_eq!(f, vec![spdy::data(3, true, b"")]);
        assert!(client_frames(&[CH_CLOSE, CH_STDOUT], &id_of).is_empty());
        assert!(client_frames(&[9, 1], &id_of).is_empty());
        let no_stdin = session_streams(Session {
            stdin: false,
            tty: false,
        });
        let id_of = |ch: u8| no_stdin.iter().find(|s| s.2 == ch).map(|s| s.0);
        assert!(client_frames(&[CH_STDIN, b'x'], &id_of).is_empty());
    }
}
