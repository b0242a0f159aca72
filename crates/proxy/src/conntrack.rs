//! Stale UDP conntrack entries, as upstream's conntrack cleanup: UDP has no
//! connection end, so an entry made before a Service had endpoints (the packet
//! went nowhere useful) or pointing at an endpoint that is gone keeps catching
//! the client's packets until it expires. TCP needs none of this.
//!
//! [`stale`] decides (pure); a [`Conntrack`] deletes (the `conntrack` program,
//! or a fake).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::Mutex;

use crate::Error;
use crate::model::{Endpoint, Protocol, ServicePort, categorize};

/// Entries to delete (UDP only).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flush {
    /// To a Service IP and port (the Service just got endpoints).
    ServiceIp { ip: Ipv4Addr, port: u16 },
    /// To a node port on any local address.
    NodePort { port: u16 },
    /// To a Service IP and port, answered by an endpoint that is gone.
    ServiceIpEndpoint {
        ip: Ipv4Addr,
        port: u16,
        endpoint: Ipv4Addr,
    },
    /// To a node port, answered by an endpoint that is gone.
    NodePortEndpoint { port: u16, endpoint: Ipv4Addr },
}

/// The UDP Service ports of `ports` with the endpoint IPs traffic may go to.
fn udp_usable<'a>(
    node: &str,
    ports: &'a [(ServicePort, Vec<Endpoint>)],
) -> BTreeMap<String, (&'a ServicePort, BTreeSet<Ipv4Addr>)> {
    ports
        .iter()
        .filter(|(sp, _)| sp.protocol == Protocol::Udp)
        .map(|(sp, eps)| {
            let c = categorize(node, eps);
            let ips = c.cluster.iter().chain(&c.local).map(|e| e.ip).collect();
            (sp.key(), (sp, ips))
        })
        .collect()
}

fn service_ips(sp: &ServicePort) -> impl Iterator<Item = Ipv4Addr> + '_ {
    std::iter::once(sp.cluster_ip).chain(sp.external_ips.iter().copied())
}

/// What to delete after moving from `old` (`None`: the first sync, when
/// entries made before the proxy ran are as stale) to `new`.
pub fn stale(
    node: &str,
    old: Option<&[(ServicePort, Vec<Endpoint>)]>,
    new: &[(ServicePort, Vec<Endpoint>)],
) -> Vec<Flush> {
    let before = udp_usable(node, old.unwrap_or_default());
    let after = udp_usable(node, new);
    let mut out = BTreeSet::new();
    for (key, (sp, ips)) in &after {
        let had = before.get(key).is_some_and(|(_, b)| !b.is_empty());
        if !ips.is_empty() && !had {
            for ip in service_ips(sp) {
                out.insert(Flush::ServiceIp { ip, port: sp.port });
            }
            if let Some(port) = sp.node_port {
                out.insert(Flush::NodePort { port });
            }
        }
    }
    for (key, (sp, ips)) in &before {
        let now = after.get(key).map(|(_, a)| a);
        for endpoint in ips.iter().filter(|ip| now.is_none_or(|a| !a.contains(ip))) {
            for ip in service_ips(sp) {
                out.insert(Flush::ServiceIpEndpoint {
                    ip,
                    port: sp.port,
                    endpoint: *endpoint,
                });
            }
            if let Some(port) = sp.node_port {
                out.insert(Flush::NodePortEndpoint {
                    port,
                    endpoint: *endpoint,
                });
            }
        }
    }
    out.into_iter().collect()
}

/// Deletes conntrack entries.
pub trait Conntrack: Send + Sync {
    fn delete(&self, flush: &Flush) -> Result<(), Error>;
}

/// The `conntrack` program (conntrack-tools).
#[derive(Debug, Default)]
pub struct ConntrackCli;

/// The `conntrack -D` arguments for `f`.
pub fn args(f: &Flush) -> Vec<String> {
    let mut a: Vec<String> = ["-D", "-p", "udp"].map(String::from).to_vec();
    let mut push = |k: &str, v: String| {
        a.push(k.to_string());
        a.push(v);
    };
    match f {
        Flush::ServiceIp { ip, port } => {
            push("--orig-dst", ip.to_string());
            push("--dport", port.to_string());
        }
        Flush::NodePort { port } => push("--dport", port.to_string()),
        Flush::ServiceIpEndpoint { ip, port, endpoint } => {
            push("--orig-dst", ip.to_string());
            push("--dport", port.to_string());
            push("--reply-src", endpoint.to_string());
        }
        Flush::NodePortEndpoint { port, endpoint } => {
            push("--dport", port.to_string());
            push("--reply-src", endpoint.to_string());
        }
    }
    a
}

impl Conntrack for ConntrackCli {
    fn delete(&self, flush: &Flush) -> Result<(), Error> {
        let out = Command::new("conntrack")
            .args(args(flush))
            .output()
            .map_err(|e| Error::Conntrack(format!("running conntrack: {e}")))?;
        let err = String::from_utf8_lossy(&out.stderr);
        // Exit 1 with "0 flow entries" is nothing to delete.
        if out.status.success() || err.contains("0 flow entries") {
            Ok(())
        } else {
            Err(Error::Conntrack(err.trim().to_string()))
        }
    }
}

/// Records what it was asked to delete.
#[derive(Debug, Default)]
pub struct FakeConntrack(pub Mutex<Vec<Flush>>);

impl Conntrack for FakeConntrack {
    fn delete(&self, flush: &Flush) -> Result<(), Error> {
        if let Ok(mut v) = self.0.lock() {
            v.push(flush.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().expect("ip")
    }

    fn port(protocol: Protocol, node_port: Option<u16>) -> ServicePort {
        ServicePort {
            namespace: "kube-system".into(),
            name: "kube-dns".into(),
            port_name: "dns".into(),
            protocol,
            cluster_ip: ip("10.43.0.10"),
            port: 53,
            node_port,
            external_ips: vec![],
            affinity_timeout: None,
            internal_local: false,
            external_local: false,
        }
    }

    fn eps(ips: &[&str]) -> Vec<Endpoint> {
        ips.iter()
            .map(|i| Endpoint {
                ip: ip(i),
                port: 53,
                ready: true,
                serving: true,
                terminating: false,
                node_name: None,
            })
            .collect()
    }

    #[test]
    fn stale_udp_entries() {
        let udp = |e: &[&str]| vec![(port(Protocol::Udp, None), eps(e))];
        let np = |e: &[&str]| vec![(port(Protocol::Udp, Some(30053)), eps(e))];
        let tcp = |e: &[&str]| vec![(port(Protocol::Tcp, None), eps(e))];
        let vip = ip("10.43.0.10");
        type Ports = Vec<(ServicePort, Vec<Endpoint>)>;
        let cases: Vec<(&str, Option<Ports>, Ports, Vec<Flush>)> = vec![
            (
                "first sync with endpoints",
                None,
                udp(&["10.42.0.5"]),
                vec![Flush::ServiceIp { ip: vip, port: 53 }],
            ),
            ("first sync without endpoints", None, udp(&[]), vec![]),
            (
                "endpoints appear",
                Some(udp(&[])),
                udp(&["10.42.0.5"]),
                vec![Flush::ServiceIp { ip: vip, port: 53 }],
            ),
            (
                "one more endpoint",
                Some(udp(&["10.42.0.5"])),
                udp(&["10.42.0.5", "10.42.0.6"]),
                vec![],
            ),
            (
                "an endpoint goes",
                Some(udp(&["10.42.0.5", "10.42.0.6"])),
                udp(&["10.42.0.6"]),
                vec![Flush::ServiceIpEndpoint {
                    ip: vip,
                    port: 53,
                    endpoint: ip("10.42.0.5"),
                }],
            ),
            (
                "the Service goes",
                Some(udp(&["10.42.0.5"])),
                vec![],
                vec![Flush::ServiceIpEndpoint {
                    ip: vip,
                    port: 53,
                    endpoint: ip("10.42.0.5"),
                }],
            ),
            (
                "node port",
                Some(np(&["10.42.0.5"])),
                np(&["10.42.0.6"]),
                vec![
                    Flush::ServiceIpEndpoint {
                        ip: vip,
                        port: 53,
                        endpoint: ip("10.42.0.5"),
                    },
                    Flush::NodePortEndpoint {
                        port: 30053,
                        endpoint: ip("10.42.0.5"),
                    },
                ],
            ),
            (
                "node port gets endpoints",
                Some(np(&[])),
                np(&["10.42.0.6"]),
                vec![
                    Flush::ServiceIp { ip: vip, port: 53 },
                    Flush::NodePort { port: 30053 },
                ],
            ),
            ("TCP never", Some(tcp(&["10.42.0.5"])), tcp(&[]), vec![]),
        ];
        for (what, old, new, want) in cases {
            let mut got = stale("n1", old.as_deref(), &new);
            got.sort();
            let mut want = want;
            want.sort();
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn conntrack_arguments() {
        let f = Flush::ServiceIpEndpoint {
            ip: ip("10.43.0.10"),
            port: 53,
            endpoint: ip("10.42.0.5"),
        };
        assert_eq!(
            args(&f).join(" "),
            "-D -p udp --orig-dst 10.43.0.10 --dport 53 --reply-src 10.42.0.5"
        );
        assert_eq!(
            args(&Flush::NodePort { port: 30053 }).join(" "),
            "-D -p udp --dport 30053"
        );
    }
}
