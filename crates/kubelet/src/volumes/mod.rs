//! Volume contents as upstream's kubelet volume plugins produce them.
//!
//! `configMap`, `secret`, `downwardAPI` and `projected` volumes are a
//! *payload*: relative path → bytes and mode, built here from the objects the
//! agent fetched ([`config_map_payload`], [`secret_payload`],
//! [`downward_api_payload`], [`projected_payload`]) and written to the volume
//! directory by [`writer::write`] with upstream's atomic `..data` layout.
//! A projected `serviceAccountToken` source takes the token the agent's token
//! manager (`crate::token`) holds for its [`TokenSource`].
//! `emptyDir` and `hostPath` are directories with rules ([`empty_dir`],
//! [`host_path`]). Errors carry upstream's wording; the agent reports them as
//! `FailedMount` events (`MountVolume.SetUp failed for volume "x" : <error>`).

pub mod claims;
pub mod host;
pub mod ownership;
pub mod writer;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{
    ConfigMap, DownwardAPIVolumeFile, KeyToPath, Pod, Secret, ServiceAccountTokenProjection, Volume,
};

use crate::envvars::{self, EnvSources};

pub use host::{empty_dir, host_path};

/// Upstream's default file mode of projected volumes (0644).
pub const DEFAULT_MODE: i32 = 0o644;

/// One file of a payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProjection {
    pub data: Vec<u8>,
    /// Permission bits.
    pub mode: u32,
}

/// Relative path → file.
pub type Payload = BTreeMap<String, FileProjection>;

/// A volume that could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeError {
    #[error("configmap {0:?} not found")]
    ConfigMapNotFound(String),
    #[error("secret {0:?} not found")]
    SecretNotFound(String),
    #[error("configmap references non-existent config key: {0}")]
    ConfigMapKey(String),
    #[error("secret references non-existent secret key: {0}")]
    SecretKey(String),
    /// A field or resource the downward API cannot give.
    #[error("{0}")]
    Field(String),
    /// Several sources of a projected volume failed (`[a, b]`).
    #[error("[{}]", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "))]
    Aggregate(Vec<VolumeError>),
    #[error("invalid path: {0}")]
    Path(String),
    #[error("{0}")]
    HostPath(String),
    #[error("{context}: {message}")]
    Io { context: String, message: String },
    /// A serviceAccountToken source without a token (the token manager's
    /// message, e.g. `failed to fetch token: <server error>`).
    #[error("{0}")]
    Token(String),
    /// A claim-backed volume whose claim or PV cannot be used (`claims`).
    #[error("{0}")]
    Claim(String),
    /// A volume source the agent has no plugin for.
    #[error("volume source {0:?} is not supported by Berth's node agent")]
    Unsupported(&'static str),
}

fn mode_of(item: Option<i32>, default: i32) -> u32 {
    (item.unwrap_or(default) as u32) & 0o7777
}

/// The payload of a ConfigMap (`configmap.MakePayload`). `cm` is None when
/// the ConfigMap does not exist: an error unless `optional` (then empty).
pub fn config_map_payload(
    name: &str,
    items: Option<&[KeyToPath]>,
    cm: Option<&ConfigMap>,
    default_mode: Option<i32>,
    optional: bool,
) -> Result<Payload, VolumeError> {
    let default = default_mode.unwrap_or(DEFAULT_MODE);
    let Some(cm) = cm else {
        if optional {
            return Ok(Payload::new());
        }
        return Err(VolumeError::ConfigMapNotFound(name.to_string()));
    };
    let mut data: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (k, v) in cm.data.iter().flatten() {
        data.insert(k.clone(), v.as_bytes().to_vec());
    }
    for (k, v) in cm.binary_data.iter().flatten() {
        data.entry(k.clone()).or_insert_with(|| v.0.clone());
    }
    key_payload(data, items, default, optional, VolumeError::ConfigMapKey)
}

/// The payload of a Secret (`secret.MakePayload`).
pub fn secret_payload(
    name: &str,
    items: Option<&[KeyToPath]>,
    secret: Option<&Secret>,
    default_mode: Option<i32>,
    optional: bool,
) -> Result<Payload, VolumeError> {
    let default = default_mode.unwrap_or(DEFAULT_MODE);
    let Some(secret) = secret else {
        if optional {
            return Ok(Payload::new());
        }
        return Err(VolumeError::SecretNotFound(name.to_string()));
    };
    let mut data: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (k, v) in secret.data.iter().flatten() {
        data.insert(k.clone(), v.0.clone());
    }
    for (k, v) in secret.string_data.iter().flatten() {
        data.insert(k.clone(), v.as_bytes().to_vec());
    }
    key_payload(data, items, default, optional, VolumeError::SecretKey)
}

fn key_payload(
    data: BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    default: i32,
    optional: bool,
    missing: fn(String) -> VolumeError,
) -> Result<Payload, VolumeError> {
    let mut payload = Payload::new();
    match items.filter(|i| !i.is_empty()) {
        None => {
            for (k, v) in data {
                payload.insert(
                    k,
                    FileProjection {
                        data: v,
                        mode: mode_of(None, default),
                    },
                );
            }
        }
        Some(items) => {
            for item in items {
                let Some(v) = data.get(&item.key) else {
                    if optional {
                        continue;
                    }
                    return Err(missing(item.key.clone()));
                };
                payload.insert(
                    item.path.clone(),
                    FileProjection {
                        data: v.clone(),
                        mode: mode_of(item.mode, default),
                    },
                );
            }
        }
    }
    Ok(payload)
}

/// The payload of downward API items (`downwardapi.CollectData`): fieldRef
/// reads pod metadata (name, namespace, uid, labels, annotations),
/// resourceFieldRef the named container's resources.
pub fn downward_api_payload(
    items: &[DownwardAPIVolumeFile],
    pod: &Pod,
    default_mode: Option<i32>,
    src: &EnvSources<'_>,
) -> Result<Payload, VolumeError> {
    let default = default_mode.unwrap_or(DEFAULT_MODE);
    let mut errors = Vec::new();
    let mut payload = Payload::new();
    for item in items {
        let path = clean_path(&item.path);
        let mode = mode_of(item.mode, default);
        let mut data = Vec::new();
        if let Some(f) = &item.field_ref {
            match downward_field(pod, &f.field_path) {
                Ok(v) => data = v.into_bytes(),
                Err(e) => errors.push(e),
            }
        } else if let Some(r) = &item.resource_field_ref {
            let container = r.container_name.as_deref().unwrap_or("");
            let found = pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.iter().find(|c| c.name == container));
            match found {
                None => errors.push(VolumeError::Field(format!(
                    "container {container} not found"
                ))),
                Some(c) => match envvars::container_resource_value(
                    &r.resource,
                    r.divisor.as_ref().map(|d| d.0.as_str()),
                    c,
                    src.node_allocatable,
                ) {
                    Ok(v) => data = v.into_bytes(),
                    Err(e) => errors.push(VolumeError::Field(e.to_string())),
                },
            }
        }
        payload.insert(path, FileProjection { data, mode });
    }
    aggregate(errors).map(|()| payload)
}

/// `fieldpath.ExtractFieldPathAsString` (metadata only, as upstream's volume).
fn downward_field(pod: &Pod, path: &str) -> Result<String, VolumeError> {
    let meta = &pod.metadata;
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    if let Some((head, key)) = envvars::split_subscripted_path(path) {
        return match head {
            "metadata.annotations" => Ok(annotations.get(key).cloned().unwrap_or_default()),
            "metadata.labels" => Ok(labels.get(key).cloned().unwrap_or_default()),
            _ => Err(VolumeError::Field(format!(
                "fieldPath {path:?} does not support subscript"
            ))),
        };
    }
    match path {
        "metadata.annotations" => Ok(envvars::format_map(annotations)),
        "metadata.labels" => Ok(envvars::format_map(labels)),
        "metadata.name" => Ok(meta.name.clone().unwrap_or_default()),
        "metadata.namespace" => Ok(meta.namespace.clone().unwrap_or_default()),
        "metadata.uid" => Ok(meta.uid.clone().unwrap_or_default()),
        _ => Err(VolumeError::Field(format!("unsupported fieldPath: {path}"))),
    }
}

fn aggregate(mut errors: Vec<VolumeError>) -> Result<(), VolumeError> {
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(VolumeError::Aggregate(errors)),
    }
}

/// `filepath.Clean` for relative payload paths.
fn clean_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." if parts.last().is_some_and(|l| *l != "..") => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// Upstream's default `expirationSeconds` of a serviceAccountToken projection
/// (`SetDefaults_ServiceAccountTokenProjection`: one hour).
pub const DEFAULT_TOKEN_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest token lifetime upstream accepts (validation: "may not specify
/// a duration less than 10 minutes").
pub const MIN_TOKEN_EXPIRATION_SECONDS: i64 = 600;

/// One serviceAccountToken source as the agent requests it: the audience
/// (None: the API server's own) and the lifetime. Two sources that agree on
/// both share one token, as upstream's token manager keys its cache.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenSource {
    pub audience: Option<String>,
    pub expiration_seconds: i64,
}

impl TokenSource {
    /// The request a projection makes: upstream sends `audiences: [audience]`
    /// only when one is set, and the defaulted `expirationSeconds`. A
    /// lifetime under the minimum (a pod no upstream server would have
    /// admitted) is raised to it rather than sent to be refused.
    pub fn of(p: &ServiceAccountTokenProjection) -> Self {
        TokenSource {
            audience: p.audience.clone().filter(|a| !a.is_empty()),
            expiration_seconds: p
                .expiration_seconds
                .unwrap_or(DEFAULT_TOKEN_EXPIRATION_SECONDS)
                .max(MIN_TOKEN_EXPIRATION_SECONDS),
        }
    }
}

/// The pod's tokens by source: the token, or the token manager's error
/// (`failed to fetch token: <server error>`).
pub type ServiceAccountTokens = BTreeMap<TokenSource, Result<String, String>>;

/// What a projected volume reads besides the pod.
#[derive(Debug, Clone, Copy)]
pub struct ProjectedSources<'a> {
    pub config_maps: &'a BTreeMap<String, ConfigMap>,
    pub secrets: &'a BTreeMap<String, Secret>,
    pub env: &'a EnvSources<'a>,
    /// The tokens the agent requested (TokenRequest) for the pod's
    /// serviceAccountToken sources ([`token_sources`]).
    pub service_account_tokens: &'a ServiceAccountTokens,
}

/// The payload of any volume that has one (configMap, secret, downwardAPI,
/// projected); None for other kinds.
pub fn volume_payload(
    volume: &Volume,
    pod: &Pod,
    src: &ProjectedSources<'_>,
) -> Option<Result<Payload, VolumeError>> {
    if let Some(c) = &volume.config_map {
        return Some(config_map_payload(
            &c.name,
            c.items.as_deref(),
            src.config_maps.get(&c.name),
            c.default_mode,
            c.optional.unwrap_or(false),
        ));
    }
    if let Some(s) = &volume.secret {
        let name = s.secret_name.clone().unwrap_or_default();
        return Some(secret_payload(
            &name,
            s.items.as_deref(),
            src.secrets.get(&name),
            s.default_mode,
            s.optional.unwrap_or(false),
        ));
    }
    if let Some(d) = &volume.downward_api {
        return Some(downward_api_payload(
            d.items.as_deref().unwrap_or_default(),
            pod,
            d.default_mode,
            src.env,
        ));
    }
    if let Some(p) = &volume.projected {
        return Some(projected_payload(p, pod, src));
    }
    None
}

/// The payload of a projected volume: its sources merged in order, every
/// source's error collected (upstream's `collectData`).
pub fn projected_payload(
    p: &k8s_openapi::api::core::v1::ProjectedVolumeSource,
    pod: &Pod,
    src: &ProjectedSources<'_>,
) -> Result<Payload, VolumeError> {
    let default_mode = p.default_mode.unwrap_or(DEFAULT_MODE);
    let default = Some(default_mode);
    let mut payload = Payload::new();
    let mut errors = Vec::new();
    for s in p.sources.iter().flatten() {
        let part = if let Some(sec) = &s.secret {
            secret_payload(
                &sec.name,
                sec.items.as_deref(),
                src.secrets.get(&sec.name),
                default,
                sec.optional.unwrap_or(false),
            )
        } else if let Some(cm) = &s.config_map {
            config_map_payload(
                &cm.name,
                cm.items.as_deref(),
                src.config_maps.get(&cm.name),
                default,
                cm.optional.unwrap_or(false),
            )
        } else if let Some(d) = &s.downward_api {
            downward_api_payload(
                d.items.as_deref().unwrap_or_default(),
                pod,
                default,
                src.env,
            )
        } else if let Some(t) = &s.service_account_token {
            match src.service_account_tokens.get(&TokenSource::of(t)) {
                Some(Ok(token)) => Ok(Payload::from([(
                    t.path.clone(),
                    FileProjection {
                        data: token.as_bytes().to_vec(),
                        mode: mode_of(None, default_mode),
                    },
                )])),
                Some(Err(e)) => Err(VolumeError::Token(e.clone())),
                // The agent requests every source `token_sources` lists.
                None => Err(VolumeError::Token(
                    "failed to fetch token: no token was requested for this source".into(),
                )),
            }
        } else {
            continue;
        };
        match part {
            Ok(files) => payload.extend(files),
            Err(e) => errors.push(e),
        }
    }
    aggregate(errors).map(|()| payload)
}

/// Every distinct serviceAccountToken source of the pod's projected volumes
/// (what the agent requests tokens for), sorted.
pub fn token_sources(pod: &Pod) -> Vec<TokenSource> {
    let mut out: Vec<TokenSource> = pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .flat_map(|v| v.projected.iter().flat_map(|p| p.sources.iter().flatten()))
        .filter_map(|s| s.service_account_token.as_ref().map(TokenSource::of))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The ConfigMaps and Secrets a pod's volumes read (what the agent fetches).
pub fn referenced_objects(pod: &Pod) -> (Vec<String>, Vec<String>) {
    let mut cms = Vec::new();
    let mut secrets = Vec::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        if let Some(c) = &v.config_map {
            cms.push(c.name.clone());
        }
        if let Some(s) = &v.secret {
            secrets.extend(s.secret_name.clone());
        }
        for s in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(c) = &s.config_map {
                cms.push(c.name.clone());
            }
            if let Some(x) = &s.secret {
                secrets.push(x.name.clone());
            }
        }
    }
    cms.sort();
    cms.dedup();
    secrets.sort();
    secrets.dedup();
    (cms, secrets)
}

/// The plugin directory name of a volume kind (`kubernetes.io~configmap`).
pub fn plugin_dir(volume: &Volume) -> Option<&'static str> {
    Some(if volume.empty_dir.is_some() {
        "kubernetes.io~empty-dir"
    } else if volume.config_map.is_some() {
        "kubernetes.io~configmap"
    } else if volume.secret.is_some() {
        "kubernetes.io~secret"
    } else if volume.downward_api.is_some() {
        "kubernetes.io~downward-api"
    } else if volume.projected.is_some() {
        "kubernetes.io~projected"
    } else {
        return None;
    })
}

/// `<pod dir>/volumes/<plugin>/<volume>`, where upstream keeps a pod's volume.
pub fn volume_dir(pod_dir: &Path, volume: &Volume) -> Option<PathBuf> {
    Some(
        pod_dir
            .join("volumes")
            .join(plugin_dir(volume)?)
            .join(&volume.name),
    )
}

#[cfg(test)]
mod tests;
