//! `berth images`: local images without a registry.

use std::path::PathBuf;

use anyhow::{Context, Result};

#[derive(clap::Args, Debug)]
pub struct ImagesArgs {
    #[command(subcommand)]
    pub command: ImagesCommand,
    /// containerd socket to import into (default: Berth's, under the data dir).
    #[arg(long, global = true)]
    pub address: Option<PathBuf>,
    /// Berth's data dir (its containerd socket is <data-dir>/agent/containerd/containerd.sock).
    #[arg(
        long,
        short = 'd',
        global = true,
        default_value = "/var/lib/berth",
        env = "BERTH_DATA_DIR"
    )]
    pub data_dir: PathBuf,
}

#[derive(clap::Subcommand, Debug)]
pub enum ImagesCommand {
    /// Build busybox:latest (from Debian's busybox-static) and the pause image, and import them.
    BuildLocal {
        /// Only write the archives into this folder; do not import.
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// Import an OCI or docker archive (`docker save`, `skopeo copy … docker-archive:`).
    Import { file: PathBuf },
}

pub async fn run(args: ImagesArgs) -> Result<()> {
    let socket = args.address.clone().unwrap_or_else(|| {
        args.data_dir
            .join("agent")
            .join("containerd")
            .join("containerd.sock")
    });
    match args.command {
        ImagesCommand::BuildLocal { output } => {
            let dir = output
                .clone()
                .unwrap_or_else(|| args.data_dir.join("agent").join("images"));
            let archives = berth_kubelet::images::build_local(&dir).await?;
            for a in &archives {
                println!("Built {}", a.display());
                if output.is_none() {
                    let out = berth_kubelet::images::import(&socket, a)
                        .await
                        .with_context(|| format!("importing into {}", socket.display()))?;
                    if !out.is_empty() {
                        println!("{out}");
                    }
                }
            }
        }
        ImagesCommand::Import { file } => {
            let out = berth_kubelet::images::import(&socket, &file)
                .await
                .with_context(|| format!("importing into {}", socket.display()))?;
            println!("{out}");
        }
    }
    Ok(())
}
