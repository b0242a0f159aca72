//! The dummy interface NodeLocal DNSCache listens on (upstream's `nodelocaldns`
//! link holding 169.254.20.10): a trait at the kernel boundary, `ip` behind it.

use std::net::IpAddr;
use std::process::Command;

use crate::Error;

pub trait Links: Send + Sync {
    /// Creates (or reuses) dummy link `name` holding `ip`, up.
    fn add_dummy(&self, name: &str, ip: IpAddr) -> Result<(), Error>;
    /// Removes link `name` (already gone is fine).
    fn delete(&self, name: &str) -> Result<(), Error>;
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

impl Links for IpCommand {
    fn add_dummy(&self, name: &str, addr: IpAddr) -> Result<(), Error> {
        if let Err(e) = ip(&["link", "add", name, "type", "dummy"]) {
            // Left over from an unclean stop: reuse it.
            if !e.to_string().contains("File exists") {
                return Err(e);
            }
        }
        let prefix = if addr.is_ipv4() { 32 } else { 128 };
        ip(&["addr", "replace", &format!("{addr}/{prefix}"), "dev", name])?;
        ip(&["link", "set", name, "up"])
    }

    fn delete(&self, name: &str) -> Result<(), Error> {
        match ip(&["link", "del", name]) {
            Err(e) if e.to_string().contains("Cannot find device") => Ok(()),
            r => r,
        }
    }
}
