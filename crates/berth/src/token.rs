//! `berth token create|list|delete`: bootstrap tokens for joining nodes, as
//! `kubeadm token`. A token `<id>.<secret>` is the Secret
//! `kube-system/bootstrap-token-<id>` of type `bootstrap.kubernetes.io/token`;
//! the API server authenticates it as `system:bootstrap:<id>` in
//! `system:bootstrappers` and the extra groups, enough for `berth agent
//! --token` to get its certificates through CertificateSigningRequests.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use berth_authn::bootstrap as bt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};

/// The group kubeadm gives its default tokens, under Berth's name.
pub const DEFAULT_GROUP: &str = "system:bootstrappers:berth:default-node-token";
const DESCRIPTION_KEY: &str = "description";
/// kubeadm's `KnownTokenUsages`.
const USAGES: &[&str] = &["signing", "authentication"];

#[derive(clap::Args, Debug)]
pub struct TokenArgs {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(clap::Subcommand, Debug)]
enum TokenCommand {
    /// Create a bootstrap token and print it (`berth agent --token`).
    Create(CreateArgs),
    /// List the bootstrap tokens.
    List(ClusterArgs),
    /// Delete bootstrap tokens (by token or token id).
    Delete {
        #[arg(required = true)]
        tokens: Vec<String>,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
}

/// How to reach the cluster: the admin kubeconfig.
#[derive(clap::Args, Debug)]
pub struct ClusterArgs {
    /// The admin kubeconfig (default: `<data-dir>/kubeconfig.yaml`, what
    /// `berth server` writes).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The server's data dir, for the default kubeconfig.
    #[arg(
        long,
        short = 'd',
        default_value = "/var/lib/berth",
        env = "BERTH_DATA_DIR"
    )]
    pub data_dir: PathBuf,
}

impl ClusterArgs {
    /// The client configuration of the admin kubeconfig.
    pub async fn config(&self) -> Result<kube::Config> {
        let path = self
            .kubeconfig
            .clone()
            .unwrap_or_else(|| self.data_dir.join("kubeconfig.yaml"));
        let kc = kube::config::Kubeconfig::read_from(&path)
            .with_context(|| format!("reading the admin kubeconfig {}", path.display()))?;
        Ok(
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await?,
        )
    }
}

#[derive(clap::Args, Debug)]
struct CreateArgs {
    /// The token to create (`[a-z0-9]{6}.[a-z0-9]{16}`); a random one by default.
    token: Option<String>,
    /// How long the token is valid; 0 never expires.
    #[arg(long, default_value = "24h", value_parser = berth_controllers::nodelifecycle::parse_duration)]
    ttl: Duration,
    /// A human-friendly description of the token's use.
    #[arg(long)]
    description: Option<String>,
    /// Extra groups the token authenticates with (`system:bootstrappers:…`).
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_GROUP)]
    groups: Vec<String>,
    /// What the token may be used for: signing, authentication.
    #[arg(long, value_delimiter = ',', default_value = "signing,authentication")]
    usages: Vec<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

pub async fn run(args: TokenArgs) -> Result<()> {
    match args.command {
        TokenCommand::Create(c) => create(c).await,
        TokenCommand::List(c) => list(c).await,
        TokenCommand::Delete { tokens, cluster } => delete(tokens, cluster).await,
    }
}

async fn secrets(c: &ClusterArgs) -> Result<Api<Secret>> {
    let config = c.config().await?;
    Ok(Api::namespaced(
        kube::Client::try_from(config)?,
        bt::NAMESPACE,
    ))
}

/// A random token: 6 and 16 characters of `[a-z0-9]`, as kubeadm generates.
pub fn generate() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let pick = |n: usize| -> String {
        (0..n)
            .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
            .collect()
    };
    format!("{}.{}", pick(6), pick(16))
}

/// The group rule upstream's authenticator enforces (`BootstrapGroupPattern`).
fn valid_group(g: &str) -> bool {
    let Some(rest) = g.strip_prefix("system:bootstrappers:") else {
        return false;
    };
    let tail = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=256).contains(&rest.len())
        && rest.bytes().last().is_some_and(tail)
        && rest.bytes().all(|c| tail(c) || c == b':' || c == b'-')
}

/// The token Secret kubeadm's `token create` writes; `expiration` is RFC 3339
/// (none with a zero ttl).
pub fn secret(
    token: &str,
    description: Option<&str>,
    expiration: Option<String>,
    groups: &[String],
    usages: &[String],
) -> Result<Secret> {
    let (id, token_secret) = bt::parse(token).with_context(|| {
        format!("the token {token:?} is not of the form [a-z0-9]{{6}}.[a-z0-9]{{16}}")
    })?;
    for g in groups {
        anyhow::ensure!(
            valid_group(g),
            "--groups: {g:?} must match {}",
            bt::GROUP_PATTERN
        );
    }
    let mut data = BTreeMap::from([
        (bt::TOKEN_ID_KEY.to_string(), id.to_string()),
        (bt::TOKEN_SECRET_KEY.to_string(), token_secret.to_string()),
    ]);
    for u in usages {
        anyhow::ensure!(
            USAGES.contains(&u.as_str()),
            "invalid bootstrap token usage string: {u}, valid usage options: {}",
            USAGES.join(",")
        );
        data.insert(format!("usage-bootstrap-{u}"), "true".into());
    }
    if let Some(d) = description {
        data.insert(DESCRIPTION_KEY.into(), d.into());
    }
    if let Some(e) = expiration {
        data.insert(bt::EXPIRATION_KEY.into(), e);
    }
    if !groups.is_empty() {
        data.insert(bt::EXTRA_GROUPS_KEY.into(), groups.join(","));
    }
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(bt::secret_name(id)),
            namespace: Some(bt::NAMESPACE.into()),
            ..Default::default()
        },
        type_: Some(bt::SECRET_TYPE.into()),
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k, ByteString(v.into_bytes())))
                .collect(),
        ),
        ..Default::default()
    })
}

async fn create(args: CreateArgs) -> Result<()> {
    let token = args.token.clone().unwrap_or_else(generate);
    let expiration = (!args.ttl.is_zero()).then(|| {
        let at = chrono::Utc::now()
            + chrono::Duration::from_std(args.ttl).unwrap_or(chrono::Duration::MAX);
        at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    });
    let s = secret(
        &token,
        args.description.as_deref(),
        expiration,
        &args.groups,
        &args.usages,
    )?;
    let api = secrets(&args.cluster).await?;
    match api.create(&PostParams::default(), &s).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let id = token.split('.').next().unwrap_or_default();
            anyhow::bail!("a token with id {id:?} already exists");
        }
        Err(e) => return Err(e).context("creating the bootstrap token Secret"),
    }
    println!("{token}");
    Ok(())
}

fn get(s: &Secret, key: &str) -> String {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .unwrap_or_default()
}

/// One row of `berth token list` (kubeadm's columns), for a token Secret at `now`.
pub fn row(s: &Secret, now: chrono::DateTime<chrono::Utc>) -> Option<[String; 6]> {
    if s.type_.as_deref() != Some(bt::SECRET_TYPE) {
        return None;
    }
    let (id, token_secret) = (get(s, bt::TOKEN_ID_KEY), get(s, bt::TOKEN_SECRET_KEY));
    let token = format!("{id}.{token_secret}");
    bt::parse(&token)?;
    let expiration = get(s, bt::EXPIRATION_KEY);
    let (ttl, expires) = match chrono::DateTime::parse_from_rfc3339(&expiration) {
        Ok(at) => {
            let left = at.with_timezone(&chrono::Utc) - now;
            let ttl = if left <= chrono::Duration::zero() {
                "<invalid>".to_string()
            } else {
                short_duration(left)
            };
            (ttl, expiration)
        }
        Err(_) => ("<forever>".to_string(), "<never>".to_string()),
    };
    let mut usages: Vec<&str> = USAGES
        .iter()
        .copied()
        .filter(|u| get(s, &format!("usage-bootstrap-{u}")) == "true")
        .collect();
    usages.sort();
    let or_none = |v: String| if v.is_empty() { "<none>".into() } else { v };
    Some([
        token,
        ttl,
        expires,
        or_none(usages.join(",")),
        or_none(get(s, DESCRIPTION_KEY)),
        or_none(get(s, bt::EXTRA_GROUPS_KEY)),
    ])
}

/// apimachinery's `ShortHumanDuration` (kubeadm's TTL column).
fn short_duration(d: chrono::Duration) -> String {
    let s = d.num_seconds();
    match s {
        s if s < 60 * 2 => format!("{s}s"),
        s if s < 3600 * 3 => format!("{}m", s / 60),
        s if s < 3600 * 48 => format!("{}h", s / 3600),
        s if s < 3600 * 24 * 365 * 2 => format!("{}d", s / 86400),
        s => format!("{}y", s / (86400 * 365)),
    }
}

async fn list(c: ClusterArgs) -> Result<()> {
    let api = secrets(&c).await?;
    let lp = ListParams::default().fields(&format!("type={}", bt::SECRET_TYPE));
    let list = api.list(&lp).await.context("listing bootstrap tokens")?;
    let now = chrono::Utc::now();
    let header = [
        "TOKEN",
        "TTL",
        "EXPIRES",
        "USAGES",
        "DESCRIPTION",
        "EXTRA GROUPS",
    ]
    .map(String::from);
    let rows: Vec<[String; 6]> = std::iter::once(header)
        .chain(list.items.iter().filter_map(|s| row(s, now)))
        .collect();
    print!("{}", table(&rows));
    Ok(())
}

/// Columns padded as Go's tabwriter (3 spaces between).
fn table(rows: &[[String; 6]]) -> String {
    let mut widths = [0usize; 6];
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}   ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

async fn delete(tokens: Vec<String>, c: ClusterArgs) -> Result<()> {
    let api = secrets(&c).await?;
    for t in tokens {
        // A whole token or only its id, as kubeadm accepts.
        let id = match bt::parse(&t) {
            Some((id, _)) => id.to_string(),
            None => t.clone(),
        };
        api.delete(&bt::secret_name(&id), &DeleteParams::default())
            .await
            .with_context(|| format!("deleting bootstrap token {id:?}"))?;
        println!("bootstrap token {id:?} deleted");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_are_bootstrap_tokens() {
        for _ in 0..100 {
            let t = generate();
            assert!(bt::parse(&t).is_some(), "{t}");
        }
        assert_ne!(generate(), generate());
    }

    #[test]
    fn secret_as_kubeadm_writes_it() {
        let groups = vec![DEFAULT_GROUP.to_string()];
        let usages = vec!["signing".to_string(), "authentication".to_string()];
        let s = secret(
            "abcdef.0123456789abcdef",
            Some("for n1"),
            Some("2025-06-02T12:00:00Z".into()),
            &groups,
            &usages,
        )
        .unwrap();
        assert_eq!(s.metadata.name.as_deref(), Some("bootstrap-token-abcdef"));
        assert_eq!(s.metadata.namespace.as_deref(), Some("kube-system"));
        assert_eq!(s.type_.as_deref(), Some("bootstrap.kubernetes.io/token"));
        let data: BTreeMap<&str, String> = s
            .data
            .as_ref()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.as_str(), String::from_utf8(v.0.clone()).unwrap()))
            .collect();
        let want: BTreeMap<&str, String> = [
            ("token-id", "abcdef"),
            ("token-secret", "0123456789abcdef"),
            ("usage-bootstrap-signing", "true"),
            ("usage-bootstrap-authentication", "true"),
            ("description", "for n1"),
            ("expiration", "2025-06-02T12:00:00Z"),
            ("auth-extra-groups", DEFAULT_GROUP),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect();
        assert_eq!(data, want);
        // What the API server's authenticator accepts.
        let json = serde_json::to_value(&s).unwrap();
        let user = bt::authenticate(&json, "abcdef", "0123456789abcdef", 0).unwrap();
        assert_eq!(user.name, "system:bootstrap:abcdef");
        assert!(user.groups.contains(&DEFAULT_GROUP.to_string()));
    }

    /// (token, groups, usages, the error's start).
    #[test]
    fn bad_input_is_refused() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let cases = [
            (
                "abcdef",
                s(&[]),
                s(&["authentication"]),
                "the token \"abcdef\" is not",
            ),
            (
                "ABCDEF.0123456789abcdef",
                s(&[]),
                s(&["authentication"]),
                "the token",
            ),
            (
                "abcdef.0123456789abcdef",
                s(&["system:masters"]),
                s(&["authentication"]),
                "--groups: \"system:masters\" must match",
            ),
            (
                "abcdef.0123456789abcdef",
                s(&[]),
                s(&["flying"]),
                "invalid bootstrap token usage string: flying, valid usage options: signing,authentication",
            ),
        ];
        for (token, groups, usages, want) in cases {
            let e = secret(token, None, None, &groups, &usages)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(want), "{token}: {e}");
        }
    }

    #[test]
    fn list_rows_as_kubeadm() {
        let now: chrono::DateTime<chrono::Utc> = "2025-06-01T12:00:00Z".parse().unwrap();
        let groups = vec![DEFAULT_GROUP.to_string()];
        let both = vec!["signing".to_string(), "authentication".to_string()];
        let s = secret(
            "abcdef.0123456789abcdef",
            None,
            Some("2025-06-02T11:00:00Z".into()),
            &groups,
            &both,
        )
        .unwrap();
        assert_eq!(
            row(&s, now).unwrap(),
            [
                "abcdef.0123456789abcdef",
                "23h",
                "2025-06-02T11:00:00Z",
                "authentication,signing",
                "<none>",
                DEFAULT_GROUP
            ]
            .map(String::from)
        );
        let forever = secret("ghijkl.0123456789abcdef", Some("d"), None, &[], &both[1..]).unwrap();
        assert_eq!(
            row(&forever, now).unwrap()[1..5],
            ["<forever>", "<never>", "authentication", "d"].map(String::from)
        );
        let expired = secret(
            "mnopqr.0123456789abcdef",
            None,
            Some("2025-06-01T11:00:00Z".into()),
            &[],
            &both,
        )
        .unwrap();
        assert_eq!(row(&expired, now).unwrap()[1], "<invalid>");
        let mut other = s.clone();
        other.type_ = Some("Opaque".into());
        assert!(row(&other, now).is_none());
        let table = table(&[
            ["TOKEN", "TTL", "A", "B", "C", "D"].map(String::from),
            row(&s, now).unwrap(),
        ]);
        assert!(
            table.starts_with("TOKEN                     TTL   A   "),
            "{table}"
        );
    }
}
