//! Keeps the kernel's table equal to the desired [`Ruleset`]: the first sync
//! (and any after a failure or a failed check) replaces the whole table; the
//! others apply only the difference from what was last applied.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::Error;
use crate::nft::NftBackend;
use crate::ruleset::{self, Ruleset, Table};

/// What a sync did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncKind {
    Full,
    Incremental,
    Unchanged,
}

pub struct Syncer {
    backend: Arc<dyn NftBackend>,
    table: Table,
    /// What the kernel holds (as far as we know); `None`: unknown, next sync is full.
    applied: Option<Ruleset>,
    /// Chains flushed by the last transaction, deleted by the next.
    pending: BTreeSet<String>,
}

impl Syncer {
    pub fn new(backend: Arc<dyn NftBackend>, table: Table) -> Syncer {
        Syncer {
            backend,
            table,
            applied: None,
            pending: BTreeSet::new(),
        }
    }

    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Chains waiting to be deleted (a follow-up sync deletes them).
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Forgets what was applied: the next sync rewrites the table.
    pub fn invalidate(&mut self) {
        self.applied = None;
    }

    pub fn sync(&mut self, desired: &Ruleset) -> Result<SyncKind, Error> {
        let Some(old) = &self.applied else {
            let script = ruleset::full(&self.table, desired);
            self.backend.apply(&script)?;
            self.applied = Some(desired.clone());
            self.pending.clear();
            return Ok(SyncKind::Full);
        };
        let inc = ruleset::incremental(&self.table, old, desired, &self.pending);
        if inc.script.is_empty() {
            return Ok(SyncKind::Unchanged);
        }
        match self.backend.apply(&inc.script) {
            Ok(()) => {
                self.applied = Some(desired.clone());
                self.pending = inc.flushed;
                Ok(SyncKind::Incremental)
            }
            Err(e) => {
                // The kernel rejected the whole transaction; its state is
                // whatever it was, maybe not what we think: start over.
                self.applied = None;
                Err(e)
            }
        }
    }

    /// Compares the kernel's table with what was applied; on any difference
    /// (or a missing table) the next sync rewrites it. Returns the differences.
    pub fn check(&mut self) -> Result<Vec<String>, Error> {
        let Some(applied) = &self.applied else {
            return Ok(Vec::new());
        };
        let expected = applied.fingerprint(&self.pending);
        let diffs = match self.backend.list_json(&self.table)? {
            None => vec![format!("table {} missing", self.table.name)],
            Some(json) => {
                let actual = ruleset::parse_listing(&json)
                    .map_err(|e| Error::Nft(format!("reading nft's listing: {e}")))?;
                expected.differences(&actual)
            }
        };
        if !diffs.is_empty() {
            self.applied = None;
        }
        Ok(diffs)
    }

    /// Removes the table (clean shutdown).
    pub fn cleanup(&mut self) -> Result<(), Error> {
        self.applied = None;
        self.pending.clear();
        self.backend.delete_table(&self.table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{self, Endpoint, NodeConfig, Protocol, ServicePort};
    use crate::nft::FakeNft;

    fn port(eps: &[&str]) -> (ServicePort, Vec<Endpoint>) {
        (
            ServicePort {
                namespace: "ns".into(),
                name: "web".into(),
                port_name: String::new(),
                protocol: Protocol::Tcp,
                cluster_ip: "10.43.0.5".parse().expect("ip"),
                port: 80,
                node_port: None,
                external_ips: vec![],
                affinity_timeout: None,
                internal_local: false,
                external_local: false,
            },
            eps.iter()
                .map(|ip| Endpoint {
                    ip: ip.parse().expect("ip"),
                    port: 8080,
                    ready: true,
                    serving: true,
                    terminating: false,
                    node_name: None,
                })
                .collect(),
        )
    }

    #[test]
    fn full_then_incremental_then_full_after_a_failure_or_a_failed_check() {
        let fake = Arc::new(FakeNft::default());
        let mut s = Syncer::new(fake.clone(), Table::ip("t"));
        let cfg = NodeConfig::new("n1");
        let one = model::build(&cfg, &[port(&["10.42.0.5"])]);
        let two = model::build(&cfg, &[port(&["10.42.0.5", "10.42.0.6"])]);
        assert_eq!(s.sync(&one).expect("sync"), SyncKind::Full);
        assert_eq!(s.sync(&one).expect("sync"), SyncKind::Unchanged);
        assert_eq!(s.sync(&two).expect("sync"), SyncKind::Incremental);
        let scripts = fake.scripts();
        assert_eq!(scripts.len(), 2);
        assert!(scripts[0].starts_with("add table ip t\ndelete table ip t\n"));
        assert!(!scripts[1].contains("table"), "{}", scripts[1]);
        assert!(scripts[1].contains("dnat to 10.42.0.6:8080"));
        // Back to one endpoint: the 10.42.0.6 chain is flushed, then deleted by the
        // next sync even though nothing else changed.
        assert_eq!(s.sync(&one).expect("sync"), SyncKind::Incremental);
        assert!(s.has_pending());
        assert_eq!(s.sync(&one).expect("sync"), SyncKind::Incremental);
        assert!(fake.scripts()[3].starts_with("delete chain ip t endpoint-"));
        assert!(!s.has_pending());

        // A rejected transaction: the next sync is full.
        *fake.fail_next.lock().expect("lock") = true;
        assert!(s.sync(&two).is_err());
        assert_eq!(s.sync(&two).expect("sync"), SyncKind::Full);

        // The check: a missing table means a full sync next.
        *fake.listing.lock().expect("lock") = None;
        assert_eq!(
            s.check().expect("check"),
            vec!["table t missing".to_string()]
        );
        assert_eq!(s.sync(&two).expect("sync"), SyncKind::Full);
        // A listing with a chain gone is a difference too.
        *fake.listing.lock().expect("lock") = Some(r#"{"nftables": []}"#.into());
        let diffs = s.check().expect("check");
        assert!(
            diffs.iter().any(|d| d == "chain services missing"),
            "{diffs:?}"
        );
        assert_eq!(s.sync(&two).expect("sync"), SyncKind::Full);
    }

    #[test]
    fn cleanup_deletes_the_table() {
        let fake = Arc::new(FakeNft::default());
        let mut s = Syncer::new(fake.clone(), Table::ip("t"));
        s.cleanup().expect("cleanup");
        assert_eq!(
            fake.scripts(),
            vec!["add table ip t\ndelete table ip t\n".to_string()]
        );
    }
}
