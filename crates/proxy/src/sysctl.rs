//! Kernel settings the proxy needs, behind a trait (the real one writes
//! /proc/sys; tests use a map).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// Reads and writes sysctls by their /proc/sys path (`net/ipv4/ip_forward`).
pub trait Sysctl: Send + Sync {
    fn get(&self, key: &str) -> Option<String>;
    fn set(&self, key: &str, value: &str) -> std::io::Result<()>;
}

/// /proc/sys.
#[derive(Debug, Default)]
pub struct ProcSysctl;

fn path(key: &str) -> PathBuf {
    PathBuf::from("/proc/sys").join(key)
}

impl Sysctl for ProcSysctl {
    fn get(&self, key: &str) -> Option<String> {
        std::fs::read_to_string(path(key))
            .ok()
            .map(|s| s.trim().to_string())
    }

    fn set(&self, key: &str, value: &str) -> std::io::Result<()> {
        std::fs::write(path(key), value)
    }
}

/// In memory: keys that are absent do not exist (a module not loaded).
#[derive(Debug, Default)]
pub struct FakeSysctl(pub Mutex<BTreeMap<String, String>>);

impl Sysctl for FakeSysctl {
    fn get(&self, key: &str) -> Option<String> {
        self.0.lock().ok()?.get(key).cloned()
    }

    fn set(&self, key: &str, value: &str) -> std::io::Result<()> {
        let mut m = self
            .0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        match m.get_mut(key) {
            Some(v) => {
                *v = value.to_string();
                Ok(())
            }
            None => Err(std::io::ErrorKind::NotFound.into()),
        }
    }
}

/// Packets bridged between pods on one bridge go through netfilter, so a reply
/// from a backend on the same bridge is un-DNATed (kube-proxy requires it).
pub const BRIDGE_NF_CALL_IPTABLES: &str = "net/bridge/bridge-nf-call-iptables";
/// DNATed traffic is forwarded.
pub const IP_FORWARD: &str = "net/ipv4/ip_forward";

/// Sets what the proxy needs to 1; returns a warning for each that could not be.
pub fn prepare_node(sysctl: &dyn Sysctl) -> Vec<String> {
    let mut warnings = Vec::new();
    for (key, why) in [
        (
            BRIDGE_NF_CALL_IPTABLES,
            "load br_netfilter: replies between pods on one bridge through a ClusterIP will fail",
        ),
        (IP_FORWARD, "Service traffic to pods will not be forwarded"),
    ] {
        match sysctl.get(key).as_deref() {
            Some("1") => {}
            Some(_) => {
                if let Err(e) = sysctl.set(key, "1") {
                    warnings.push(format!("cannot set {key}=1 ({e}): {why}"));
                }
            }
            None => warnings.push(format!("{key} does not exist: {why}")),
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepare_node_sets_what_exists_and_reports_the_rest() {
        type Values<'a> = &'a [(&'a str, &'a str)];
        // (before, after, warnings)
        let cases: &[(Values, Values, usize)] = &[
            (
                &[(BRIDGE_NF_CALL_IPTABLES, "0"), (IP_FORWARD, "0")],
                &[(BRIDGE_NF_CALL_IPTABLES, "1"), (IP_FORWARD, "1")],
                0,
            ),
            (
                &[(BRIDGE_NF_CALL_IPTABLES, "1"), (IP_FORWARD, "1")],
                &[(BRIDGE_NF_CALL_IPTABLES, "1"), (IP_FORWARD, "1")],
                0,
            ),
            // br_netfilter not loaded.
            (&[(IP_FORWARD, "0")], &[(IP_FORWARD, "1")], 1),
        ];
        for (before, after, warnings) in cases {
            let fake = FakeSysctl(Mutex::new(
                before
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ));
            let w = prepare_node(&fake);
            assert_eq!(w.len(), *warnings, "{before:?}: {w:?}");
            for (k, v) in after.iter() {
                assert_eq!(fake.get(k).as_deref(), Some(*v), "{before:?}");
            }
        }
    }
}
