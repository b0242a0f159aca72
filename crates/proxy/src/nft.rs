//! The kernel boundary: nftables transactions through the `nft` program
//! ([`Nft`]), or recorded in memory for tests ([`FakeNft`]).

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::Mutex;

use crate::Error;
use crate::ruleset::Table;

/// Runs nft transactions and lists tables.
pub trait NftBackend: Send + Sync {
    /// Applies `script` (nft commands, one a line) as one atomic transaction.
    fn apply(&self, script: &str) -> Result<(), Error>;
    /// `nft -j list table` output, or `None` when the table does not exist.
    fn list_json(&self, table: &Table) -> Result<Option<String>, Error>;
    /// Deletes the table; a missing one is fine.
    fn delete_table(&self, table: &Table) -> Result<(), Error> {
        self.apply(&format!(
            "add table {f} {n}\ndelete table {f} {n}\n",
            f = table.family,
            n = table.name
        ))
    }
}

/// The real backend: `nft -f -`.
#[derive(Debug, Clone)]
pub struct Nft {
    pub program: String,
}

impl Default for Nft {
    fn default() -> Nft {
        Nft {
            program: "nft".into(),
        }
    }
}

impl Nft {
    /// Checks that nft runs and the kernel has nf_tables.
    pub fn probe(&self) -> Result<(), Error> {
        self.apply("add table ip berth-proxy-probe\ndelete table ip berth-proxy-probe\n")
    }
}

/// The first lines of an nft error (a big transaction's errors quote each failed line).
fn short(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let mut lines: Vec<&str> = text.lines().take(6).collect();
    if text.lines().count() > 6 {
        lines.push("…");
    }
    lines.join("\n")
}

impl NftBackend for Nft {
    fn apply(&self, script: &str) -> Result<(), Error> {
        let mut child = Command::new(&self.program)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::Nft(format!("running {}: {e}", self.program)))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(script.as_bytes())
                .map_err(|e| Error::Nft(format!("writing to nft: {e}")))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| Error::Nft(format!("waiting for nft: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(Error::Nft(short(&out.stderr)))
        }
    }

    fn list_json(&self, table: &Table) -> Result<Option<String>, Error> {
        let out = Command::new(&self.program)
            .args(["-j", "list", "table", table.family, &table.name])
            .output()
            .map_err(|e| Error::Nft(format!("running {}: {e}", self.program)))?;
        if out.status.success() {
            return Ok(Some(String::from_utf8_lossy(&out.stdout).into_owned()));
        }
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("No such file or directory") {
            Ok(None)
        } else {
            Err(Error::Nft(short(&out.stderr)))
        }
    }
}

/// Records transactions; `listing` is what `list_json` returns; `fail_next`
/// makes the next `apply` fail (as a rejected transaction would).
#[derive(Debug, Default)]
pub struct FakeNft {
    pub applied: Mutex<Vec<String>>,
    pub listing: Mutex<Option<String>>,
    pub fail_next: Mutex<bool>,
}

impl FakeNft {
    pub fn scripts(&self) -> Vec<String> {
        self.applied.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

impl NftBackend for FakeNft {
    fn apply(&self, script: &str) -> Result<(), Error> {
        if let Ok(mut f) = self.fail_next.lock()
            && std::mem::take(&mut *f)
        {
            return Err(Error::Nft("Error: Could not process rule".into()));
        }
        if let Ok(mut a) = self.applied.lock() {
            a.push(script.to_string());
        }
        Ok(())
    }

    fn list_json(&self, _table: &Table) -> Result<Option<String>, Error> {
        Ok(self.listing.lock().ok().and_then(|l| l.clone()))
    }
}
