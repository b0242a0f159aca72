//! UDP and TCP listeners on one address: every datagram and every TCP frame
//! (two-byte length prefix, several per connection) goes to a [`Handler`].

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tracing::debug;

/// A TCP client idle this long is disconnected (CoreDNS's read timeout is 10 s too).
const TCP_IDLE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Proto {
    Udp,
    Tcp,
}

impl Proto {
    pub fn label(self) -> &'static str {
        match self {
            Proto::Udp => "udp",
            Proto::Tcp => "tcp",
        }
    }
}

pub trait Handler: Send + Sync + 'static {
    /// The reply to `raw`, or None to send nothing.
    fn handle(&self, raw: &[u8], proto: Proto) -> impl Future<Output = Option<Vec<u8>>> + Send;
}

/// What both servers do with a datagram: malformed input is answered (or
/// dropped) by [`crate::wire::parse`], a query by `answer`; every reply's time
/// and rcode are counted.
pub async fn respond<F, Fut>(
    metrics: &crate::metrics::Metrics,
    raw: &[u8],
    answer: F,
) -> Option<Vec<u8>>
where
    F: FnOnce(Box<hickory_proto::op::Message>) -> Fut,
    Fut: Future<Output = Vec<u8>>,
{
    use crate::wire::{self, Parsed};
    let started = std::time::Instant::now();
    let reply = match wire::parse(raw) {
        Parsed::Drop => return None,
        Parsed::Reply(r) => r,
        Parsed::Query(req) => answer(req).await,
    };
    metrics.duration.observe(started.elapsed().as_secs_f64());
    if let Some(rcode) = wire::rcode_of(&reply) {
        metrics
            .responses
            .get_or_create(&crate::metrics::labels(&[(
                "rcode",
                wire::rcode_label(rcode),
            )]))
            .inc();
    }
    Some(reply)
}

pub struct Listeners {
    udp: Arc<UdpSocket>,
    tcp: TcpListener,
}

impl Listeners {
    /// Binds UDP and TCP on `addr` (port 0: one free port for both).
    pub async fn bind(addr: SocketAddr) -> io::Result<Listeners> {
        let udp = UdpSocket::bind(addr).await?;
        let port = udp.local_addr()?.port();
        let tcp = TcpListener::bind(SocketAddr::new(addr.ip(), port)).await?;
        Ok(Listeners {
            udp: Arc::new(udp),
            tcp,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.tcp
            .local_addr()
            .or_else(|_| self.udp.local_addr())
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// Serves until the task is dropped.
    pub async fn serve<H: Handler>(self, handler: Arc<H>) {
        tokio::join!(
            serve_udp(self.udp, handler.clone()),
            serve_tcp(self.tcp, handler)
        );
    }
}

async fn serve_udp<H: Handler>(socket: Arc<UdpSocket>, handler: Arc<H>) {
    let mut buf = vec![0u8; 65535];
    loop {
        let (n, peer) = match socket.recv_from(&mut buf).await {
            Ok(x) => x,
            Err(e) => {
                // ICMP errors from earlier replies surface here; keep serving.
                debug!(error = %e, "udp receive");
                continue;
            }
        };
        let raw = buf[..n].to_vec();
        let (socket, handler) = (socket.clone(), handler.clone());
        tokio::spawn(async move {
            if let Some(reply) = handler.handle(&raw, Proto::Udp).await
                && let Err(e) = socket.send_to(&reply, peer).await
            {
                debug!(%peer, error = %e, "udp send");
            }
        });
    }
}

async fn serve_tcp<H: Handler>(listener: TcpListener, handler: Arc<H>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let handler = handler.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve_conn(stream, handler).await {
                        debug!(%peer, error = %e, "tcp connection");
                    }
                });
            }
            Err(e) => {
                debug!(error = %e, "tcp accept");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn serve_conn<H: Handler>(mut stream: TcpStream, handler: Arc<H>) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    loop {
        let Some(raw) = read_frame(&mut stream, TCP_IDLE).await? else {
            return Ok(());
        };
        match handler.handle(&raw, Proto::Tcp).await {
            Some(reply) => write_frame(&mut stream, &reply).await?,
            // Nothing to say (e.g. not even a header): close, as a server must not
            // leave the client waiting.
            None => return Ok(()),
        }
    }
}

/// One length-prefixed message; None at a clean end of stream or idle timeout.
pub async fn read_frame(stream: &mut TcpStream, idle: Duration) -> io::Result<Option<Vec<u8>>> {
    let len = match tokio::time::timeout(idle, stream.read_u16()).await {
        Err(_) => return Ok(None),
        Ok(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Ok(r) => r?,
    };
    let mut raw = vec![0u8; usize::from(len)];
    tokio::time::timeout(idle, stream.read_exact(&mut raw))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "tcp frame"))??;
    Ok(Some(raw))
}

pub async fn write_frame(stream: &mut TcpStream, msg: &[u8]) -> io::Result<()> {
    let len = u16::try_from(msg.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "message over 65535 bytes"))?;
    let mut out = Vec::with_capacity(msg.len() + 2);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(msg);
    stream.write_all(&out).await
}
