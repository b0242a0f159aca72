//! Bootstrap tokens (`<id>.<secret>`), as upstream's bootstrap token
//! authenticator checks them against `kube-system/bootstrap-token-<id>`
//! Secrets. The caller fetches the Secret; this decides.

use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use berth_api::user::UserInfo;
use serde_json::Value;

pub use crate::BootstrapError;

/// Namespace of bootstrap token Secrets.
pub const NAMESPACE: &str = "kube-system";
/// Bootstrap token Secrets are named `bootstrap-token-<id>`.
pub const SECRET_PREFIX: &str = "bootstrap-token-";
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
pub const TOKEN_ID_KEY: &str = "token-id";
pub const TOKEN_SECRET_KEY: &str = "token-secret";
pub const EXPIRATION_KEY: &str = "expiration";
pub const USAGE_AUTHENTICATION_KEY: &str = "usage-bootstrap-authentication";
pub const EXTRA_GROUPS_KEY: &str = "auth-extra-groups";
/// The user of a token is `system:bootstrap:<id>`.
pub const USER_PREFIX: &str = "system:bootstrap:";
/// Every bootstrap token's user is in this group.
pub const DEFAULT_GROUP: &str = "system:bootstrappers";
/// What every extra group must match (upstream's `BootstrapGroupPattern`).
pub const GROUP_PATTERN: &str = r"\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\z";

const ID_LEN: usize = 6;
const SECRET_LEN: usize = 16;

/// Splits `abcdef.0123456789abcdef` (`[a-z0-9]{6}\.[a-z0-9]{16}`) into
/// `(id, secret)`; `None` for anything else, which is then not a bootstrap
/// token at all.
pub fn parse(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (ok(id, ID_LEN) && ok(secret, SECRET_LEN)).then_some((id, secret))
}

/// The name of the Secret that holds token `id`.
pub fn secret_name(id: &str) -> String {
    format!("{SECRET_PREFIX}{id}")
}

/// Checks the bootstrap token Secret `secret` (the stored object as JSON,
/// `data` base64) for token `id`.`token_secret` at `now_unix`, in upstream's
/// order: deletion, type, secret (constant time), id, expiry, usage, groups.
/// The user is `system:bootstrap:<id>` in `system:bootstrappers`, the extra
/// groups (sorted, deduplicated, as upstream) and `system:authenticated`.
pub fn authenticate(
    secret: &Value,
    id: &str,
    token_secret: &str,
    now_unix: i64,
) -> Result<UserInfo, BootstrapError> {
    let meta = &secret["metadata"];
    let str_at = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let (namespace, name) = (str_at(&meta["namespace"]), str_at(&meta["name"]));
    let shown = format!("{namespace}/{name}");
    let expected = secret_name(id);
    // Upstream looks the Secret up by this very name, so any other Secret
    // handed in here is a caller's mistake that must not authenticate.
    if namespace != NAMESPACE || name != expected {
        return Err(BootstrapError::NotBootstrapSecret {
            secret: shown,
            expected: format!("{NAMESPACE}/{expected}"),
        });
    }
    if !meta["deletionTimestamp"].is_null() {
        return Err(BootstrapError::Deleted { secret: shown });
    }
    let data = match (&secret["type"], secret["data"].as_object()) {
        (Value::String(t), Some(data)) if t == SECRET_TYPE => data,
        _ => return Err(BootstrapError::InvalidType { secret: shown }),
    };
    // Upstream's `GetData`: a missing key reads as "".
    let get = |key: &str| -> Result<String, BootstrapError> {
        let invalid = || BootstrapError::InvalidData {
            secret: shown.clone(),
            key: key.to_string(),
        };
        match data.get(key) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(b64)) => STANDARD
                .decode(b64)
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .ok_or_else(invalid),
            Some(_) => Err(invalid()),
        }
    };

    if !constant_time_eq(get(TOKEN_SECRET_KEY)?.as_bytes(), token_secret.as_bytes()) {
        return Err(BootstrapError::WrongTokenSecret { secret: shown });
    }
    if get(TOKEN_ID_KEY)? != id {
        return Err(BootstrapError::WrongTokenId {
            secret: shown,
            expected: id.to_string(),
        });
    }
    let expiration = get(EXPIRATION_KEY)?;
    if !expiration.is_empty() {
        match chrono::DateTime::parse_from_rfc3339(&expiration) {
            // Upstream: expired once no time remains (`remaining <= 0`).
            Ok(at) if at.timestamp_millis() <= now_unix.saturating_mul(1000) => {
                return Err(BootstrapError::Expired {
                    secret: shown,
                    expiration,
                });
            }
            Ok(_) => {}
            Err(_) => {
                return Err(BootstrapError::UnparseableExpiration {
                    secret: shown,
                    expiration,
                });
            }
        }
    }
    if get(USAGE_AUTHENTICATION_KEY)? != "true" {
        return Err(BootstrapError::NotForAuthentication { secret: shown });
    }
    let mut groups = BTreeSet::from([DEFAULT_GROUP.to_string()]);
    let extra = get(EXTRA_GROUPS_KEY)?;
    if !extra.is_empty() {
        for group in extra.split(',') {
            if !is_bootstrap_group(group) {
                return Err(BootstrapError::InvalidGroup {
                    secret: shown,
                    group: group.to_string(),
                });
            }
            groups.insert(group.to_string());
        }
    }
    Ok(UserInfo {
        name: format!("{USER_PREFIX}{id}"),
        groups: groups.into_iter().collect(),
        ..Default::default()
    }
    .with_authenticated_group())
}

/// [`GROUP_PATTERN`] without a regex engine.
fn is_bootstrap_group(group: &str) -> bool {
    let Some(rest) = group.strip_prefix("system:bootstrappers:") else {
        return false;
    };
    let b = rest.as_bytes();
    let tail_ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=256).contains(&b.len())
        && b.last().is_some_and(tail_ok)
        && b.iter().all(|c| tail_ok(c) || matches!(c, b':' | b'-'))
}

/// Equality whose time depends only on the lengths, like Go's
/// `subtle.ConstantTimeCompare`, so response timing does not reveal how much
/// of a guessed token secret was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests;
