//! `berth etcd-snapshot save|ls|delete|restore`: snapshots of a server's etcd
//! (`berth server --datastore-endpoint`), named and laid out as k3s's
//! `etcd-snapshot` (`<name>-<node>-<unix time>` in `<data-dir>/db/snapshots`).
//! The logic is `berth_store::snapshot`; the embedded SQLite store has
//! `berth store backup|restore` instead.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct EtcdSnapshotArgs {
    #[command(subcommand)]
    pub command: EtcdSnapshotCommand,
}

/// Where snapshots live: `--etcd-snapshot-dir`, else `<data-dir>/db/snapshots`.
#[derive(clap::Args, Debug)]
pub struct SnapshotDir {
    /// The server's data dir (the snapshot dir's default parent).
    #[arg(long, default_value = "/var/lib/berth")]
    data_dir: PathBuf,
    /// The snapshot dir (default: <data-dir>/db/snapshots).
    #[arg(long)]
    etcd_snapshot_dir: Option<PathBuf>,
}

impl SnapshotDir {
    fn path(&self) -> PathBuf {
        self.etcd_snapshot_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("db").join("snapshots"))
    }
}

#[derive(clap::Subcommand, Debug)]
pub enum EtcdSnapshotCommand {
    /// Stream a snapshot of the etcd behind a server to
    /// <etcd-snapshot-dir>/<name>-<node>-<unix time>, checking etcd's checksum.
    Save {
        #[command(flatten)]
        dir: SnapshotDir,
        /// The etcd endpoints the server uses (comma-separated), as its --datastore-endpoint.
        #[arg(long, value_delimiter = ',', required = true)]
        datastore_endpoint: Vec<String>,
        /// The snapshot's base name.
        #[arg(long, default_value = "etcd-snapshot")]
        name: String,
        /// The node named in the file name (default: this host's name).
        #[arg(long)]
        node_name: Option<String>,
    },
    /// List the snapshots in the snapshot dir (name, location, size, created).
    #[command(alias = "list")]
    Ls {
        #[command(flatten)]
        dir: SnapshotDir,
    },
    /// Delete snapshots by name from the snapshot dir.
    #[command(alias = "rm")]
    Delete {
        #[command(flatten)]
        dir: SnapshotDir,
        /// Snapshot names, as `ls` prints them.
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Restore a snapshot into a fresh etcd data dir (with etcdutl, or etcdctl for
    /// etcd 3.4), for an etcd started there and a server on that etcd.
    Restore {
        /// The snapshot file.
        #[arg(long)]
        etcd_snapshot: PathBuf,
        /// The etcd data dir to create (etcd's --data-dir, not Berth's).
        #[arg(long)]
        data_dir: PathBuf,
        /// Move a non-empty data dir aside (to <data-dir>-old-<unix time>) and restore.
        #[arg(long)]
        force: bool,
        /// The restored member's name (etcd's --name; etcd's default `default`).
        #[arg(long, default_value = "")]
        name: String,
        /// The restored cluster (etcd's --initial-cluster), e.g. NAME=http://127.0.0.1:2380.
        #[arg(long, default_value = "")]
        initial_cluster: String,
        /// etcd's --initial-cluster-token for the restored cluster.
        #[arg(long, default_value = "")]
        initial_cluster_token: String,
        /// The restored member's peer URLs (etcd's --initial-advertise-peer-urls).
        #[arg(long, default_value = "")]
        initial_advertise_peer_urls: String,
    },
}

pub async fn run(args: EtcdSnapshotArgs) -> Result<()> {
    use berth_store::snapshot;
    match args.command {
        EtcdSnapshotCommand::Save {
            dir,
            datastore_endpoint,
            name,
            node_name,
        } => {
            let node = node_name.unwrap_or_else(berth_kubelet::agent::machine::hostname);
            let file = snapshot::file_name(&name, &node, SystemTime::now())?;
            let saved = snapshot::save(&datastore_endpoint, &dir.path().join(file)).await?;
            let revision = saved
                .revision
                .map(|r| format!(" at revision {r}"))
                .unwrap_or_default();
            println!(
                "Saved snapshot {}{revision}: {} bytes",
                saved.path.display(),
                saved.bytes
            );
        }
        EtcdSnapshotCommand::Ls { dir } => {
            print!("{}", table(&snapshot::list(&dir.path())?));
        }
        EtcdSnapshotCommand::Delete { dir, names } => {
            let dir = dir.path();
            for name in names {
                let path = snapshot::delete(&dir, &name)?;
                println!("Removed snapshot {}", path.display());
            }
        }
        EtcdSnapshotCommand::Restore {
            etcd_snapshot,
            data_dir,
            force,
            name,
            initial_cluster,
            initial_cluster_token,
            initial_advertise_peer_urls,
        } => {
            let opts = snapshot::RestoreOptions {
                name,
                initial_cluster,
                initial_cluster_token,
                initial_advertise_peer_urls,
                force,
            };
            let r = snapshot::restore(&etcd_snapshot, &data_dir, &opts)?;
            if let Some(old) = &r.moved_aside {
                println!("Moved the old data dir aside to {}", old.display());
            }
            println!(
                "Restored {} ({} bytes) into {} with {}; start etcd --data-dir {} and berth server --datastore-endpoint on it",
                etcd_snapshot.display(),
                r.bytes,
                data_dir.display(),
                r.tool,
                data_dir.display()
            );
        }
    }
    Ok(())
}

/// k3s's `etcd-snapshot ls` columns: Name, Location (a file:// URL), Size, Created.
fn table(entries: &[berth_store::snapshot::Entry]) -> String {
    let rows: Vec<[String; 4]> = entries
        .iter()
        .map(|e| {
            let created: chrono::DateTime<chrono::Utc> = e.created.into();
            [
                e.name.clone(),
                location(&e.path),
                e.bytes.to_string(),
                created.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            ]
        })
        .collect();
    let header = ["Name", "Location", "Size", "Created"].map(String::from);
    let mut widths = [0usize; 4];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join(" ").trim_end());
        out.push('\n');
    }
    out
}

fn location(path: &Path) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    format!("file://{}", abs.display())
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_store::snapshot::Entry;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn ls_prints_k3s_columns() {
        let entries = [
            Entry {
                name: "etcd-snapshot-n1-1764000000".into(),
                path: "/d/etcd-snapshot-n1-1764000000".into(),
                bytes: 20512,
                created: UNIX_EPOCH + Duration::from_secs(1_764_000_000),
            },
            Entry {
                name: "x".into(),
                path: "/d/x".into(),
                bytes: 7,
                created: UNIX_EPOCH + Duration::from_secs(1_764_000_060),
            },
        ];
        let want = "\
Name                        Location                              Size  Created
etcd-snapshot-n1-1764000000 file:///d/etcd-snapshot-n1-1764000000 20512 2025-11-24T16:00:00Z
x                           file:///d/x                           7     2025-11-24T16:01:00Z
";
        assert_eq!(table(&entries), want);
        assert_eq!(table(&[]), "Name Location Size Created\n");
    }
}
