//! Sending queries on to other servers: the node's resolvers (cluster DNS, for
//! names outside the cluster) and the cluster DNS (NodeLocal DNSCache, over TCP
//! on reused connections, like CoreDNS's forward plugin with force_tcp).

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::net::{TcpStream, UdpSocket};

use crate::Error;
use crate::serve::{read_frame, write_frame};

/// How long one upstream gets to answer (CoreDNS's forward plugin: 2 s read).
pub const TIMEOUT: Duration = Duration::from_secs(2);
/// Idle connections kept per upstream.
const POOL: usize = 16;

pub struct Forwarder {
    upstreams: Vec<SocketAddr>,
    timeout: Duration,
    idle: Mutex<HashMap<SocketAddr, Vec<TcpStream>>>,
}

impl Forwarder {
    pub fn new(upstreams: Vec<SocketAddr>, timeout: Duration) -> Forwarder {
        Forwarder {
            upstreams,
            timeout,
            idle: Mutex::new(HashMap::new()),
        }
    }

    pub fn upstreams(&self) -> &[SocketAddr] {
        &self.upstreams
    }

    /// Asks each upstream in turn over UDP until one answers; returns its reply
    /// and address.
    pub async fn udp(&self, raw: &[u8]) -> Result<(Vec<u8>, SocketAddr), Error> {
        let mut last = Error::NoUpstream;
        for &up in &self.upstreams {
            match tokio::time::timeout(self.timeout, udp_once(up, raw)).await {
                Ok(Ok(reply)) => return Ok((reply, up)),
                Ok(Err(e)) => last = e.into(),
                Err(_) => last = Error::Timeout(up),
            }
        }
        Err(last)
    }

    /// Asks each upstream in turn over TCP, reusing idle connections.
    pub async fn tcp(&self, raw: &[u8]) -> Result<(Vec<u8>, SocketAddr), Error> {
        let mut last = Error::NoUpstream;
        for &up in &self.upstreams {
            match tokio::time::timeout(self.timeout, self.tcp_once(up, raw)).await {
                Ok(Ok(reply)) => return Ok((reply, up)),
                Ok(Err(e)) => last = e.into(),
                Err(_) => last = Error::Timeout(up),
            }
        }
        Err(last)
    }

    async fn tcp_once(&self, up: SocketAddr, raw: &[u8]) -> io::Result<Vec<u8>> {
        let pooled = self.take(up);
        let reused = pooled.is_some();
        let mut conn = match pooled {
            Some(c) => c,
            None => connect(up).await?,
        };
        match exchange(&mut conn, raw, self.timeout).await {
            Ok(reply) => {
                self.put(up, conn);
                Ok(reply)
            }
            // The server may have closed an idle connection: once more, fresh.
            Err(_) if reused => {
                let mut conn = connect(up).await?;
                let reply = exchange(&mut conn, raw, self.timeout).await?;
                self.put(up, conn);
                Ok(reply)
            }
            Err(e) => Err(e),
        }
    }

    fn take(&self, up: SocketAddr) -> Option<TcpStream> {
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&up)?
            .pop()
    }

    fn put(&self, up: SocketAddr, conn: TcpStream) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let v = idle.entry(up).or_default();
        if v.len() < POOL {
            v.push(conn);
        }
    }
}

async fn connect(up: SocketAddr) -> io::Result<TcpStream> {
    let c = TcpStream::connect(up).await?;
    let _ = c.set_nodelay(true);
    Ok(c)
}

async fn exchange(conn: &mut TcpStream, raw: &[u8], timeout: Duration) -> io::Result<Vec<u8>> {
    write_frame(conn, raw).await?;
    match read_frame(conn, timeout).await? {
        Some(reply) if reply.get(..2) == raw.get(..2) => Ok(reply),
        Some(_) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "reply ID differs",
        )),
        None => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed")),
    }
}

async fn udp_once(up: SocketAddr, raw: &[u8]) -> io::Result<Vec<u8>> {
    let local: SocketAddr = if up.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(local).await?;
    sock.connect(up).await?;
    sock.send(raw).await?;
    let mut buf = vec![0u8; 65535];
    loop {
        let n = sock.recv(&mut buf).await?;
        // Only the reply to this query (same ID) counts.
        if n >= 12 && buf[..2] == raw[..2] {
            return Ok(buf[..n].to_vec());
        }
    }
}

/// The nameservers of a resolv.conf, on port 53.
pub fn nameservers(resolv_conf: &str) -> Vec<SocketAddr> {
    resolv_conf
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            (words.next()? == "nameserver").then_some(())?;
            let ip: std::net::IpAddr = words.next()?.split('%').next()?.parse().ok()?;
            Some(SocketAddr::new(ip, 53))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_nameservers() {
        let text = "# generated\nsearch example.com\nnameserver 10.0.0.2\nnameserver  fe80::1%eth0\nnameserver bogus\noptions ndots:5\n";
        assert_eq!(
            nameservers(text),
            vec![
                "10.0.0.2:53".parse::<SocketAddr>().unwrap(),
                "[fe80::1]:53".parse().unwrap()
            ]
        );
    }
}
