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
        /// Build one image named --tag instead: busybox plus the host file SRC at DEST
        /// (repeatable; each must be statically linked), e.g.
        /// `--add-binary /usr/bin/kubectl:/usr/local/bin/kubectl --tag berth.local/kubectl:latest`.
        #[arg(long = "add-binary", value_name = "SRC:DEST", requires = "tag")]
        add_binary: Vec<berth_kubelet::images::AddedBinary>,
        /// The name of the image --add-binary builds.
        #[arg(long, value_name = "NAME", requires = "add_binary")]
        tag: Option<String>,
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
        ImagesCommand::BuildLocal {
            output,
            add_binary,
            tag,
        } => {
            if output.is_none() {
                require_containerd(&socket)?;
            }
            let dir = output
                .clone()
                .unwrap_or_else(|| args.data_dir.join("agent").join("images"));
            let archives = match tag {
                Some(name) => vec![
                    berth_kubelet::images::build_with_binaries(&dir, &name, &add_binary).await?,
                ],
                None => berth_kubelet::images::build_local(&dir).await?,
            };
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
            require_containerd(&socket)?;
            let out = berth_kubelet::images::import(&socket, &file)
                .await
                .with_context(|| format!("importing into {}", socket.display()))?;
            println!("{out}");
        }
    }
    Ok(())
}

/// Fails at once with what to do when nothing listens on `socket`, instead of a
/// dial timeout after the images are built: Berth's containerd runs only while
/// `berth server` (or `berth agent`) does.
fn require_containerd(socket: &std::path::Path) -> Result<()> {
    match std::os::unix::net::UnixStream::connect(socket) {
        Ok(_) => Ok(()),
        Err(e) => anyhow::bail!(
            "no containerd listening on {} ({e}): start `berth server` or `berth agent` first \
             (they run Berth's containerd), or pass --address SOCKET, or --output DIR to only \
             write the archives",
            socket.display()
        ),
    }
}
