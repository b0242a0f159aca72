//! The JWT payloads upstream signs, as wire types. Field order is alphabetical
//! because go-jose merges claims through a Go map, whose JSON encoding sorts
//! keys; Berth's tokens then decode to the same text as kube-apiserver's.

use serde::{Deserialize, Deserializer, Serialize};

/// Issuer of Secret-based (legacy) tokens, upstream's `LegacyIssuer`.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";

/// A bound (TokenRequest) token's payload.
#[derive(Serialize)]
pub(crate) struct BoundPayload<'a> {
    // `jwt.Audience` is `omitempty`: a token without audiences has no `aud`.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub aud: &'a [String],
    pub exp: i64,
    pub iat: i64,
    pub iss: &'a str,
    pub jti: String,
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: Private,
    pub nbf: i64,
    pub sub: String,
}

/// A legacy (Secret-based) token's payload: no audience, no expiry.
#[derive(Serialize)]
pub(crate) struct LegacyPayload<'a> {
    pub iss: &'a str,
    #[serde(rename = "kubernetes.io/serviceaccount/namespace")]
    pub namespace: &'a str,
    #[serde(rename = "kubernetes.io/serviceaccount/secret.name")]
    pub secret_name: &'a str,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.name")]
    pub sa_name: &'a str,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.uid")]
    pub sa_uid: &'a str,
    pub sub: String,
}

/// The `kubernetes.io` private claim of bound tokens.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Private {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Ref>,
    // Not `omitempty` upstream in effect: Go never omits a struct value.
    #[serde(default)]
    pub serviceaccount: Ref,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "numeric_date"
    )]
    pub warnafter: Option<i64>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct Ref {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// Every claim either kind of token may carry, as read back after the
/// signature checked out. Missing claims read as empty, as Go's zero values.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Received {
    // No `iss`: it was read from these same bytes before the signature check.
    #[serde(default)]
    pub sub: String,
    #[serde(default, deserialize_with = "audience")]
    pub aud: Vec<String>,
    #[serde(default, deserialize_with = "numeric_date")]
    pub exp: Option<i64>,
    #[serde(default, deserialize_with = "numeric_date")]
    pub nbf: Option<i64>,
    #[serde(default, deserialize_with = "numeric_date")]
    pub iat: Option<i64>,
    #[serde(default)]
    pub jti: Option<String>,
    #[serde(rename = "kubernetes.io", default)]
    pub kubernetes: Option<Private>,
    #[serde(rename = "kubernetes.io/serviceaccount/namespace", default)]
    pub legacy_namespace: Option<String>,
    #[serde(rename = "kubernetes.io/serviceaccount/secret.name", default)]
    pub legacy_secret_name: Option<String>,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.name", default)]
    pub legacy_sa_name: Option<String>,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.uid", default)]
    pub legacy_sa_uid: Option<String>,
}

/// Only `iss`, read before the signature is checked to pick (or decline) the
/// token, as upstream's `hasCorrectIssuer` does. Never trusted beyond that.
#[derive(Deserialize)]
pub(crate) struct IssuerOnly {
    #[serde(default)]
    pub iss: String,
}

/// RFC 7519 NumericDate: seconds, possibly fractional; go-jose truncates.
fn numeric_date<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    // `as` saturates on out-of-range floats, which only makes a silly date
    // sillier: it still compares correctly against the leeway.
    Ok(Option::<f64>::deserialize(d)?.map(|f| f as i64))
}

/// `aud` is a single string or an array of strings (RFC 7519 4.1.3).
fn audience<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Aud {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<Aud>::deserialize(d)? {
        None => Vec::new(),
        Some(Aud::One(s)) => vec![s],
        Some(Aud::Many(v)) => v,
    })
}
