//! TCP socket probes: success when a connection opens within the timeout;
//! the failure output is the dial error as Go words it
//! (`dial tcp 10.1.0.5:8080: connect: connection refused`).

use std::time::Duration;

use super::Outcome;

/// `host:port` as Go's `net.JoinHostPort` writes it (IPv6 in brackets).
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Go's wording of a failed dial.
pub(crate) fn dial_error(addr: &str, host: &str, e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::ConnectionRefused => format!("dial tcp {addr}: connect: connection refused"),
        ErrorKind::TimedOut => format!("dial tcp {addr}: i/o timeout"),
        ErrorKind::HostUnreachable => format!("dial tcp {addr}: connect: no route to host"),
        ErrorKind::NetworkUnreachable => {
            format!("dial tcp {addr}: connect: network is unreachable")
        }
        // Resolution failures come back as "other" errors from getaddrinfo.
        _ if host.parse::<std::net::IpAddr>().is_err() => {
            format!("dial tcp: lookup {host}: no such host")
        }
        _ => format!("dial tcp {addr}: {e}"),
    }
}

/// Opens a TCP connection to `host:port` within `timeout`, then closes it.
pub(crate) async fn dial(
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<tokio::net::TcpStream, String> {
    let addr = join_host_port(host, port);
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((host, port))).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(dial_error(&addr, host, &e)),
        Err(_) => Err(format!("dial tcp {addr}: i/o timeout")),
    }
}

/// Runs a TCP probe.
pub async fn probe(host: &str, port: u16, timeout: Duration) -> (Outcome, String) {
    match dial(host, port, timeout).await {
        Ok(stream) => {
            drop(stream);
            (Outcome::Success, String::new())
        }
        Err(e) => (Outcome::Failure, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn open_and_closed_ports() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = listener.local_addr().unwrap().port();
        // A port that was free a moment ago: bind and drop it.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let t = Duration::from_secs(1);
        assert_eq!(
            probe("127.0.0.1", open, t).await,
            (Outcome::Success, String::new())
        );
        assert_eq!(
            probe("127.0.0.1", closed, t).await,
            (
                Outcome::Failure,
                format!("dial tcp 127.0.0.1:{closed}: connect: connection refused")
            )
        );
        drop(listener);
    }

    #[tokio::test]
    async fn unresolvable_host_and_join() {
        let (o, msg) = probe("no-such-host.invalid", 80, Duration::from_secs(2)).await;
        assert_eq!(o, Outcome::Failure);
        assert!(msg.starts_with("dial tcp"), "{msg}");
        assert_eq!(join_host_port("fd00::1", 80), "[fd00::1]:80");
        assert_eq!(join_host_port("10.0.0.1", 80), "10.0.0.1:80");
    }
}
