//! Pod networking through CNI: Berth writes one network config (bridge +
//! host-local IPAM on the node's podCIDR, portmap for hostPorts) into the conf
//! dir containerd's CRI plugin reads; containerd runs the plugins (and adds
//! loopback itself) for every sandbox.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde_json::json;

/// The bridge every pod on this node attaches to.
pub const BRIDGE: &str = "berth0";
/// The network's name (host-local keeps its allocations under it).
pub const NETWORK: &str = "berth";
/// The config file Berth writes.
pub const CONF_FILE: &str = "10-berth.conflist";

#[derive(Debug, thiserror::Error)]
pub enum CniError {
    #[error("invalid pod CIDR {0:?} (want an IPv4 a.b.c.d/n)")]
    BadCidr(String),
    #[error("no free /24 left in {0}")]
    Exhausted(String),
    #[error("writing {0}: {1}")]
    Io(String, std::io::Error),
}

/// An IPv4 network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: Ipv4Addr,
    pub prefix: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Result<Cidr, CniError> {
        let bad = || CniError::BadCidr(s.to_string());
        let (a, p) = s.split_once('/').ok_or_else(bad)?;
        let addr: Ipv4Addr = a.parse().map_err(|_| bad())?;
        let prefix: u8 = p.parse().map_err(|_| bad())?;
        if prefix > 32 {
            return Err(bad());
        }
        let mask = if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - prefix)
        };
        Ok(Cidr {
            addr: Ipv4Addr::from(u32::from(addr) & mask),
            prefix,
        })
    }

    /// The first usable address (the bridge's gateway).
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) + 1)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// The lowest /24 of `cluster` that no node uses yet (the node IPAM controller's
/// range allocator, done at registration).
pub fn pick_pod_cidr<'a>(
    cluster: &str,
    used: impl IntoIterator<Item = &'a str>,
) -> Result<String, CniError> {
    let c = Cidr::parse(cluster)?;
    if c.prefix > 24 {
        return Err(CniError::BadCidr(cluster.to_string()));
    }
    let used: Vec<Cidr> = used
        .into_iter()
        .filter_map(|u| Cidr::parse(u).ok())
        .collect();
    let base = u32::from(c.addr);
    let count = 1u32 << (24 - c.prefix);
    for i in 0..count {
        let candidate = Cidr {
            addr: Ipv4Addr::from(base + (i << 8)),
            prefix: 24,
        };
        let overlaps = used.iter().any(|u| {
            let p = u.prefix.min(24);
            let mask = if p == 0 { 0 } else { u32::MAX << (32 - p) };
            u32::from(u.addr) & mask == u32::from(candidate.addr) & mask
        });
        if !overlaps {
            return Ok(candidate.to_string());
        }
    }
    Err(CniError::Exhausted(cluster.to_string()))
}

/// The network config list for `pod_cidr`; IPAM state lives in `ipam_dir`.
pub fn conflist(pod_cidr: &Cidr, ipam_dir: &Path) -> serde_json::Value {
    json!({
        "cniVersion": "1.0.0",
        "name": NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                // Pods reach only this node and each other: no masquerading out.
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": pod_cidr.to_string(), "gateway": pod_cidr.gateway().to_string()}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": ipam_dir.display().to_string(),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    })
}

/// Writes the config into `conf_dir` (atomically: containerd watches the dir).
pub fn write_config(conf_dir: &Path, ipam_dir: &Path, pod_cidr: &str) -> Result<PathBuf, CniError> {
    let cidr = Cidr::parse(pod_cidr)?;
    let io = |p: &Path, e| CniError::Io(p.display().to_string(), e);
    std::fs::create_dir_all(conf_dir).map_err(|e| io(conf_dir, e))?;
    std::fs::create_dir_all(ipam_dir).map_err(|e| io(ipam_dir, e))?;
    let path = conf_dir.join(CONF_FILE);
    let tmp = conf_dir.join(format!(".{CONF_FILE}.tmp"));
    let text = serde_json::to_string_pretty(&conflist(&cidr, ipam_dir)).unwrap_or_default();
    std::fs::write(&tmp, text).map_err(|e| io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| io(&path, e))?;
    Ok(path)
}

/// IPs host-local still holds in `ipam_dir` (one file per IP): what a leak check
/// counts.
pub fn allocated_ips(ipam_dir: &Path) -> Vec<String> {
    let dir = ipam_dir.join(NETWORK);
    let mut ips: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.parse::<Ipv4Addr>().is_ok())
        .collect();
    ips.sort();
    ips
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_lowest_free_24() {
        let cases: &[(&[&str], &str)] = &[
            (&[], "10.42.0.0/24"),
            (&["10.42.0.0/24"], "10.42.1.0/24"),
            (&["10.42.0.0/24", "10.42.2.0/24"], "10.42.1.0/24"),
            (&["10.42.0.0/23"], "10.42.2.0/24"),
            (&["garbage", "10.42.0.0/24"], "10.42.1.0/24"),
        ];
        for (used, want) in cases {
            assert_eq!(
                pick_pod_cidr("10.42.0.0/16", used.iter().copied()).unwrap(),
                *want,
                "{used:?}"
            );
        }
        let all: Vec<String> = (0..4).map(|i| format!("10.42.{i}.0/24")).collect();
        assert!(matches!(
            pick_pod_cidr("10.42.0.0/22", all.iter().map(String::as_str)),
            Err(CniError::Exhausted(_))
        ));
        assert!(pick_pod_cidr("10.42.0.0/25", []).is_err());
    }

    #[test]
    fn cidr_parsing_masks_host_bits_and_rejects_garbage() {
        assert_eq!(
            Cidr::parse("10.42.3.7/24").unwrap().to_string(),
            "10.42.3.0/24"
        );
        assert_eq!(
            Cidr::parse("10.42.3.0/24").unwrap().gateway().to_string(),
            "10.42.3.1"
        );
        for bad in ["10.42.0.0", "10.42.0.0/33", "x/24", "10.42.0.0/-1"] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn conflist_is_bridge_with_host_local_then_portmap() {
        let c = conflist(&Cidr::parse("10.42.5.0/24").unwrap(), Path::new("/d/ipam"));
        assert_eq!(c["plugins"][0]["type"], "bridge");
        assert_eq!(c["plugins"][0]["bridge"], BRIDGE);
        assert_eq!(c["plugins"][0]["ipMasq"], false);
        let ipam = &c["plugins"][0]["ipam"];
        assert_eq!(ipam["type"], "host-local");
        assert_eq!(ipam["ranges"][0][0]["subnet"], "10.42.5.0/24");
        assert_eq!(ipam["ranges"][0][0]["gateway"], "10.42.5.1");
        assert_eq!(ipam["dataDir"], "/d/ipam");
        assert_eq!(c["plugins"][1]["type"], "portmap");
        assert_eq!(c["plugins"][1]["capabilities"]["portMappings"], true);
    }

    #[test]
    fn write_config_and_count_allocations() {
        let dir = std::env::temp_dir().join(format!("berth-cni-test-{}", std::process::id()));
        let conf = write_config(&dir.join("net.d"), &dir.join("ipam"), "10.42.9.0/24").unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&conf).unwrap()).unwrap();
        assert_eq!(v["name"], NETWORK);
        std::fs::create_dir_all(dir.join("ipam").join(NETWORK)).unwrap();
        for f in ["10.42.9.3", "10.42.9.2", "last_reserved_ip.0", "lock"] {
            std::fs::write(dir.join("ipam").join(NETWORK).join(f), "x").unwrap();
        }
        assert_eq!(
            allocated_ips(&dir.join("ipam")),
            vec!["10.42.9.2", "10.42.9.3"]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
