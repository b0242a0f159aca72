//! Where NodeLocal DNSCache's address lives: upstream's `nodelocaldns` dummy
//! link holding 169.254.20.10, or, on kernels without dummy links, the loopback
//! interface (local delivery works the same for pods routed to the node). A
//! trait at the kernel boundary, `ip` behind it.

use std::net::IpAddr;
use std::process::Command;

use crate::Error;

/// Where the address was put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// On dummy link `name`, which Berth created.
    Dummy(String),
    /// On `lo` (no dummy link support).
    Loopback,
}

pub trait Links: Send + Sync {
    /// Puts `ip` on dummy link `name` (created, or reused after an unclean stop).
    fn add(&self, name: &str, ip: IpAddr) -> Result<Placed, Error>;
    /// Undoes [`Links::add`] (already gone is fine).
    fn remove(&self, placed: &Placed, ip: IpAddr) -> Result<(), Error>;
}

/// iproute2's `ip`.
pub struct IpCommand;

fn ip(args: &[&str]) -> Result<(), Error> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| Error::Interface(format!("running ip {}: {e}", args.join(" "))))?;
    if out.status.success() {
        return Ok(());
    }
    Err(Error::Interface(format!(
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

fn cidr(addr: IpAddr) -> String {
    format!("{addr}/{}", if addr.is_ipv4() { 32 } else { 128 })
}

impl Links for IpCommand {
    fn add(&self, name: &str, addr: IpAddr) -> Result<Placed, Error> {
        match ip(&["link", "add", name, "type", "dummy"]) {
            Ok(()) => {}
            Err(e) if e.to_string().contains("File exists") => {}
            Err(e) if e.to_string().contains("Unknown device type") => {
                ip(&["addr", "replace", &cidr(addr), "dev", "lo"])?;
                return Ok(Placed::Loopback);
            }
            Err(e) => return Err(e),
        }
        ip(&["addr", "replace", &cidr(addr), "dev", name])?;
        ip(&["link", "set", name, "up"])?;
        Ok(Placed::Dummy(name.to_string()))
    }

    fn remove(&self, placed: &Placed, addr: IpAddr) -> Result<(), Error> {
        let r = match placed {
            Placed::Dummy(name) => ip(&["link", "del", name]),
            Placed::Loopback => ip(&["addr", "del", &cidr(addr), "dev", "lo"]),
        };
        match r {
            Err(e)
                if e.to_string().contains("Cannot find device")
                    || e.to_string().contains("Cannot assign requested address") =>
            {
                Ok(())
            }
            r => r,
        }
    }
}
