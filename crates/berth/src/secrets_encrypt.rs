//! `berth secrets-encrypt status|rotate-keys|reencrypt`: encryption at rest of Secrets, in
//! the spirit of k3s's `secrets-encrypt`, scoped to what Berth does.
//!
//! - `status` reads the configuration (`--encryption-provider-config`, the
//!   file given to `berth server`) and the store itself (the embedded SQLite
//!   file, read-only beside the running server, or etcd) and counts stored
//!   Secrets per envelope prefix (`k8s:enc:aescbc:v1:key1:`) or plain.
//! - `rotate-keys` puts a new random key first in the configuration file (the
//!   server reads it at start, so it takes effect on restart).
//! - `reencrypt` rewrites every Secret through the API (GET then PUT of each,
//!   as `kubectl get secrets -A -o json | kubectl replace -f -`): the server
//!   writes a Secret stored under an older key even though it is unchanged, so
//!   each ends up under the current first key.
//!
//! Rotation: `rotate-keys` (or put a new key first by hand), restart `berth
//! server`, run `reencrypt`, check `status`, then drop the old key and restart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams};

/// Where the API server keeps Secrets.
const SECRETS_PREFIX: &str = "/registry/secrets/";

#[derive(clap::Args, Debug)]
pub struct SecretsEncryptArgs {
    #[command(subcommand)]
    command: SecretsEncryptCommand,
}

#[derive(clap::Subcommand, Debug)]
enum SecretsEncryptCommand {
    /// Whether Secrets are encrypted, with which provider and key, and how many
    /// stored Secrets use each prefix.
    Status(StatusArgs),
    /// Put a new random 32-byte key first in the configuration file (the old
    /// keys stay, to read what they wrote); then restart `berth server` and run
    /// `reencrypt`.
    RotateKeys(RotateArgs),
    /// Rewrite every Secret so it is stored under the current first key.
    Reencrypt(ReencryptArgs),
}

#[derive(clap::Args, Debug)]
struct RotateArgs {
    /// The EncryptionConfiguration `berth server` runs with (rewritten in place).
    #[arg(long)]
    encryption_provider_config: PathBuf,
    /// The new key's name (default `key-<unix seconds>`).
    #[arg(long)]
    key_name: Option<String>,
}

#[derive(clap::Args, Debug)]
struct StatusArgs {
    /// The EncryptionConfiguration `berth server` runs with.
    #[arg(long)]
    encryption_provider_config: Option<PathBuf>,
    /// The server's data dir (its embedded store is `<data-dir>/db/state.db`).
    #[arg(
        long,
        short = 'd',
        default_value = "/var/lib/berth",
        env = "BERTH_DATA_DIR"
    )]
    data_dir: PathBuf,
    /// The etcd endpoints the server stores in, instead of the embedded store.
    #[arg(long, value_delimiter = ',')]
    datastore_endpoint: Vec<String>,
}

#[derive(clap::Args, Debug)]
struct ReencryptArgs {
    /// The admin kubeconfig (default: `<data-dir>/kubeconfig.yaml`).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    #[arg(
        long,
        short = 'd',
        default_value = "/var/lib/berth",
        env = "BERTH_DATA_DIR"
    )]
    data_dir: PathBuf,
}

pub async fn run(args: SecretsEncryptArgs) -> Result<()> {
    match args.command {
        SecretsEncryptCommand::Status(a) => status(a).await,
        SecretsEncryptCommand::RotateKeys(a) => rotate_keys(a),
        SecretsEncryptCommand::Reencrypt(a) => reencrypt(a).await,
    }
}

/// The envelope prefix of a stored value (`k8s:enc:<provider>:v1:<key>:`), or
/// `None` for a plain one.
pub fn envelope_prefix(value: &[u8]) -> Option<String> {
    if !value.starts_with(b"k8s:enc:") {
        return None;
    }
    // k8s, enc, provider, v1, key name: five fields, each closed by ':'.
    let mut end = 0;
    for _ in 0..5 {
        end += value[end..].iter().position(|&b| b == b':')? + 1;
    }
    Some(String::from_utf8_lossy(&value[..end]).into_owned())
}

/// Stored Secrets by envelope prefix ("" for plain).
fn count_prefixes<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for v in values {
        *counts
            .entry(envelope_prefix(v).unwrap_or_default())
            .or_default() += 1;
    }
    counts
}

/// Every stored Secret's value, read from the store without the API server.
async fn stored_secrets(args: &StatusArgs) -> Result<Vec<Vec<u8>>> {
    if args.datastore_endpoint.is_empty() {
        return sqlite_values(&args.data_dir.join("db").join("state.db"), SECRETS_PREFIX);
    }
    use berth_store::Store;
    let store =
        berth_store::etcd::EtcdStore::connect_with(&args.datastore_endpoint, Default::default())
            .await
            .context("connecting to etcd")?;
    let mut out = Vec::new();
    let mut req = berth_store::RangeRequest {
        prefix: SECRETS_PREFIX.into(),
        limit: 500,
        ..Default::default()
    };
    loop {
        let resp = store.range(req.clone()).await?;
        req.revision = resp.revision;
        req.start_after = resp.kvs.last().map(|kv| kv.key.clone());
        out.extend(resp.kvs.into_iter().map(|kv| kv.value.to_vec()));
        if !resp.more {
            return Ok(out);
        }
    }
}

/// The live values under `prefix` in the embedded store's file, opened
/// read-only (the running server holds the store's lock; SQLite's WAL lets a
/// reader in beside it). Tables as `berth_store::sqlite` lays them out: `kv`
/// maps each live key to the `history` row of its value.
fn sqlite_values(path: &Path, prefix: &str) -> Result<Vec<Vec<u8>>> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("opening the embedded store {}", path.display()))?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.execute_batch("PRAGMA query_only=ON;")?;
    let mut end = prefix.as_bytes().to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    let mut stmt = conn.prepare(
        "SELECT h.value FROM kv JOIN history h ON h.rev = kv.rev WHERE kv.key >= ?1 AND kv.key < ?2",
    )?;
    let rows = stmt.query_map(rusqlite::params![prefix.as_bytes(), end], |r| {
        r.get::<_, Option<Vec<u8>>>(0)
    })?;
    let mut out = Vec::new();
    for r in rows {
        out.extend(r?);
    }
    Ok(out)
}

async fn status(args: StatusArgs) -> Result<()> {
    let writer = match &args.encryption_provider_config {
        Some(path) => {
            let t = berth_apiserver::encryption::config::load(path)
                .with_context(|| format!("--encryption-provider-config {}", path.display()))?;
            t.for_key("/registry/secrets/").map(|r| r.writer())
        }
        None => None,
    };
    let values = stored_secrets(&args).await?;
    let counts = count_prefixes(values.iter().map(Vec::as_slice));
    print!(
        "{}",
        render_status(
            args.encryption_provider_config.as_deref(),
            writer.as_deref(),
            &counts
        )
    );
    Ok(())
}

/// `writer`: what Secrets are written with (`aescbc:key1`, `identity`), `None`
/// when the configuration does not name them.
fn render_status(
    config: Option<&Path>,
    writer: Option<&str>,
    counts: &BTreeMap<String, usize>,
) -> String {
    let mut out = String::new();
    let enabled = writer.is_some_and(|w| w != "identity");
    out += &format!(
        "Encryption Status: {}\n",
        if enabled { "Enabled" } else { "Disabled" }
    );
    match config {
        Some(p) => out += &format!("Encryption Configuration: {}\n", p.display()),
        None => out += "Encryption Configuration: none given (--encryption-provider-config)\n",
    }
    let active = writer.map(|w| match w.split_once(':') {
        Some((provider, key)) => (
            provider.to_string(),
            format!("k8s:enc:{provider}:v1:{key}:"),
        ),
        None => (w.to_string(), String::new()),
    });
    if let Some((provider, prefix)) = &active {
        let key = writer
            .and_then(|w| w.split_once(':'))
            .map(|(_, k)| k)
            .unwrap_or("-");
        out += &format!("Active Provider: {provider}\nActive Key: {key}\n");
        let total: usize = counts.values().sum();
        let current = counts.get(prefix).copied().unwrap_or(0);
        out += &format!(
            "Secrets Under The Active Key: {current} of {total}{}\n",
            if current < total {
                " (run `berth secrets-encrypt reencrypt`)"
            } else {
                ""
            }
        );
    }
    out += "\nStored Secrets By Prefix\n------------------------\n";
    if counts.is_empty() {
        out += "(none)\n";
    }
    for (prefix, n) in counts {
        let shown = if prefix.is_empty() {
            "(plain, not encrypted)"
        } else {
            prefix
        };
        out += &format!("{shown:<40} {n}\n");
    }
    out
}

fn rotate_keys(args: RotateArgs) -> Result<()> {
    let path = &args.encryption_provider_config;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let name = args.key_name.unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        format!("key-{secs}")
    });
    // 32 bytes: valid for aescbc, aesgcm and secretbox alike.
    let secret: [u8; 32] = rand::random();
    let out = berth_apiserver::encryption::config::rotate(&text, &name, &secret)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    // Written beside it then renamed over it, owner-only: it holds keys.
    let tmp = path.with_extension("rotate.tmp");
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("writing {}", tmp.display()))?;
        f.write_all(out.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))?;
    println!(
        "Added key {name} first in {}; restart berth server, then run `berth secrets-encrypt reencrypt`",
        path.display()
    );
    Ok(())
}

async fn reencrypt(args: ReencryptArgs) -> Result<()> {
    let path = args
        .kubeconfig
        .clone()
        .unwrap_or_else(|| args.data_dir.join("kubeconfig.yaml"));
    let kc = kube::config::Kubeconfig::read_from(&path)
        .with_context(|| format!("reading the admin kubeconfig {}", path.display()))?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    let client = kube::Client::try_from(config)?;
    let all: Api<Secret> = Api::all(client.clone());
    let mut params = ListParams::default().limit(500);
    let (mut rewritten, mut gone) = (0usize, 0usize);
    loop {
        let page = all.list(&params).await.context("listing Secrets")?;
        for s in page.items {
            let ns = s.metadata.namespace.clone().unwrap_or_default();
            let name = s.metadata.name.clone().unwrap_or_default();
            let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
            match replace_one(&api, &name, s).await? {
                true => rewritten += 1,
                false => gone += 1,
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => params = params.continue_token(&c),
            None => break,
        }
    }
    println!("Reencrypted {rewritten} secrets ({gone} deleted meanwhile)");
    Ok(())
}

/// PUTs `s` back unchanged; on a conflict (it changed meanwhile) GETs it again
/// and retries. `false` when it was deleted meanwhile.
async fn replace_one(api: &Api<Secret>, name: &str, mut s: Secret) -> Result<bool> {
    for _ in 0..5 {
        match api.replace(name, &PostParams::default(), &s).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(false),
            Err(kube::Error::Api(e)) if e.code == 409 => match api.get_opt(name).await? {
                Some(fresh) => s = fresh,
                None => return Ok(false),
            },
            Err(e) => return Err(e).with_context(|| format!("replacing Secret {name}")),
        }
    }
    anyhow::bail!("Secret {name} kept changing; run reencrypt again")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_prefixes() {
        let cases: &[(&[u8], Option<&str>)] = &[
            (
                b"k8s:enc:aescbc:v1:key1:\x01\x02:x",
                Some("k8s:enc:aescbc:v1:key1:"),
            ),
            (b"k8s:enc:secretbox:v1:k:", Some("k8s:enc:secretbox:v1:k:")),
            (b"{\"kind\":\"Secret\"}", None),
            // Truncated envelope: no key name field closed.
            (b"k8s:enc:aescbc:v1:key1", None),
        ];
        for (v, want) in cases {
            assert_eq!(envelope_prefix(v).as_deref(), *want);
        }
    }

    #[test]
    fn status_counts_and_flags_secrets_not_under_the_active_key() {
        let values: Vec<&[u8]> = vec![
            b"k8s:enc:aescbc:v1:key2:aa",
            b"k8s:enc:aescbc:v1:key1:bb",
            b"{}",
        ];
        let counts = count_prefixes(values);
        let out = render_status(
            Some(Path::new("/etc/enc.yaml")),
            Some("aescbc:key2"),
            &counts,
        );
        for want in [
            "Encryption Status: Enabled",
            "Active Provider: aescbc",
            "Active Key: key2",
            "Secrets Under The Active Key: 1 of 3 (run `berth secrets-encrypt reencrypt`)",
            "k8s:enc:aescbc:v1:key1:                  1",
            "(plain, not encrypted)                   1",
        ] {
            assert!(out.contains(want), "{want:?} in\n{out}");
        }
        let off = render_status(None, None, &BTreeMap::new());
        assert!(off.starts_with("Encryption Status: Disabled\n"), "{off}");
    }
}
