//! `berth store backup|restore`: online backups of the embedded SQLite store
//! (`<data-dir>/db/state.db`) and their restore into a fresh data dir; the
//! logic is `berth_store::backup`. (Servers on etcd back up with etcd's own
//! snapshots.)

use std::path::{Path, PathBuf};

use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    #[command(subcommand)]
    pub command: StoreCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum StoreCommand {
    /// Copy the store of a running or stopped server to FILE (a consistent
    /// snapshot; the server keeps serving).
    Backup {
        /// The server's data dir.
        #[arg(long, default_value = "/var/lib/berth")]
        data_dir: PathBuf,
        /// Where the backup goes (must not exist).
        file: PathBuf,
    },
    /// Put the backup FILE in place as the store of a data dir, for a server
    /// started on it afterwards.
    Restore {
        /// The data dir to restore into (normally a fresh one).
        #[arg(long, default_value = "/var/lib/berth")]
        data_dir: PathBuf,
        /// Replace the store already in the data dir.
        #[arg(long)]
        force: bool,
        /// The backup to restore.
        file: PathBuf,
    },
}

/// Where `berth server` keeps the embedded store.
pub fn db_path(data_dir: &Path) -> PathBuf {
    data_dir.join("db").join("state.db")
}

pub fn run(args: StoreArgs) -> Result<()> {
    match args.command {
        StoreCommand::Backup { data_dir, file } => {
            let info = berth_store::backup::backup(&db_path(&data_dir), &file)?;
            println!(
                "Backed up the store of {} to {}: revision {}, {} keys, {} bytes",
                data_dir.display(),
                file.display(),
                info.revision,
                info.keys,
                info.bytes
            );
        }
        StoreCommand::Restore {
            data_dir,
            force,
            file,
        } => {
            let info = berth_store::backup::restore(&file, &db_path(&data_dir), force)?;
            println!(
                "Restored {} into {}: revision {}, {} keys; start berth server --data-dir {} to serve it",
                file.display(),
                data_dir.display(),
                info.revision,
                info.keys,
                data_dir.display()
            );
        }
    }
    Ok(())
}
