//! Berth's token authentication, as kube-apiserver has it: ServiceAccount JWTs
//! (`pkg/serviceaccount`: signing, verification, OIDC discovery, JWKS) and
//! bootstrap tokens (`plugin/pkg/auth/authenticator/token/bootstrap`).
//!
//! Pure logic over plain data, plus reading or creating one key file. Whatever
//! needs the API (does the ServiceAccount, the bound Pod, the bootstrap Secret
//! still exist?) is left to the caller, which gets what to check back.

#![forbid(unsafe_code)]

pub mod bootstrap;
pub mod serviceaccount;

use std::path::PathBuf;

/// Failures of the issuer itself: its key file, or signing a token.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("service account key {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("service account key {}: {reason}", path.display())]
    Pem { path: PathBuf, reason: String },
    #[error("service account key {}: not an ECDSA P-256 PKCS#8 private key: {reason}", path.display())]
    Key { path: PathBuf, reason: String },
    #[error("generating the service account key failed")]
    Generate,
    #[error("signing the service account token failed")]
    Sign,
    #[error("service account token claims: {0}")]
    Claims(String),
    #[error("encoding service account token: {0}")]
    Json(#[from] serde_json::Error),
}

/// Why a presented token was not accepted. Messages follow kube-apiserver's
/// (they end up in its log; the client only sees 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a compact JWS with a JSON payload: some other kind of token.
    #[error("token is not a JWT")]
    NotJwt,
    /// A JWT whose `iss` is neither this issuer nor the legacy one.
    #[error("token issuer {0:?} is invalid")]
    UnknownIssuer(String),
    /// Claims our issuer but its JOSE header cannot be read.
    #[error("malformed token: {0}")]
    Malformed(String),
    #[error("go-jose/go-jose: unexpected signature algorithm {0:?}; expected [\"ES256\"]")]
    UnsupportedAlgorithm(String),
    /// The header names a `kid` that is not this issuer's key.
    #[error("invalid signature, no keys found")]
    NoKeyFound,
    #[error("go-jose/go-jose: error in cryptographic primitive")]
    BadSignature,
    /// Signed by us but its claims are unusable (missing, mistyped, inconsistent).
    #[error("{0}")]
    InvalidClaims(String),
    #[error("service account token has expired")]
    Expired,
    #[error("service account token is not valid yet")]
    NotValidYet,
    #[error("service account token is issued in the future")]
    IssuedInTheFuture,
    #[error(
        "token audiences {} is invalid for the target audiences {}",
        go_quote_list(token),
        go_quote_list(target)
    )]
    WrongAudience {
        token: Vec<String>,
        target: Vec<String>,
    },
}

impl TokenError {
    /// The token is not a JWT from this issuer at all, so the caller should try
    /// its other authenticators; upstream's JWT authenticator answers "not
    /// mine" (no error) for exactly these. Everything else is a token we
    /// issued, or one that claims to be, and fails authentication outright.
    pub fn is_not_ours(&self) -> bool {
        matches!(
            self,
            TokenError::NotJwt | TokenError::UnknownIssuer(_) | TokenError::Malformed(_)
        )
    }
}

/// Formats a string list as Go's `%q` does for a `[]string`, which is how
/// upstream's audience error prints both lists: `["a" "b"]`.
fn go_quote_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// Why a bootstrap token Secret did not authenticate the presented token. The
/// text follows upstream's log lines ("Bootstrap secret ns/name matching
/// bearer token ..."); `secret` is `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootstrapError {
    #[error("secret {secret} is not the bootstrap token secret {expected}")]
    NotBootstrapSecret { secret: String, expected: String },
    #[error("Bootstrap secret {secret} matching bearer token is deleted and awaiting removal")]
    Deleted { secret: String },
    #[error(
        "Bootstrap secret {secret} matching bearer token has invalid type, expected {}.",
        bootstrap::SECRET_TYPE
    )]
    InvalidType { secret: String },
    #[error(
        "Bootstrap secret {secret} matching bearer token has an undecodable value for key {key}"
    )]
    InvalidData { secret: String, key: String },
    // Upstream's log line also prints the presented secret; this one does not,
    // so the error can be logged or returned without leaking a credential.
    #[error(
        "Bootstrap secret {secret} matching bearer token has invalid value for key {}.",
        bootstrap::TOKEN_SECRET_KEY
    )]
    WrongTokenSecret { secret: String },
    #[error(
        "Bootstrap secret {secret} matching bearer token has invalid value for key {}, expected {expected}.",
        bootstrap::TOKEN_ID_KEY
    )]
    WrongTokenId { secret: String, expected: String },
    #[error("Expired bootstrap token in {secret} Secret: {expiration}")]
    Expired { secret: String, expiration: String },
    #[error("Unparseable expiration time ({expiration}) in {secret} Secret. Treating as expired.")]
    UnparseableExpiration { secret: String, expiration: String },
    #[error(
        "Bootstrap secret {secret} matching bearer token not marked {}=true.",
        bootstrap::USAGE_AUTHENTICATION_KEY
    )]
    NotForAuthentication { secret: String },
    #[error(
        "Bootstrap secret {secret} matching bearer token has invalid value for key {}: bootstrap group {group:?} is invalid (must match {}).",
        bootstrap::EXTRA_GROUPS_KEY,
        bootstrap::GROUP_PATTERN
    )]
    InvalidGroup { secret: String, group: String },
}
