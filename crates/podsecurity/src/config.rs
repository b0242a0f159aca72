//! `PodSecurityConfiguration` (pod-security.admission.config.k8s.io/v1, and
//! the identical v1beta1 and v1alpha1): cluster defaults and exemptions, with
//! upstream's defaulting (privileged:latest) and validation messages.

use serde::Deserialize;
use serde_json::Value;

use crate::api::{FieldError, Level, LevelVersion, Policy, Version, aggregate};

pub const GROUP: &str = "pod-security.admission.config.k8s.io";
pub const KIND: &str = "PodSecurityConfiguration";

/// What [`PodSecurityConfiguration::parse`] refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error(
        "expected {KIND} in {GROUP}/v1, v1beta1 or v1alpha1, got kind {kind:?} apiVersion {api_version:?}"
    )]
    Type { api_version: String, kind: String },
    #[error("decoding {KIND}: {0}")]
    Decode(String),
    #[error("invalid {KIND}: {0}")]
    Invalid(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    defaults: RawDefaults,
    #[serde(default)]
    exemptions: Exemptions,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    #[serde(default)]
    enforce: String,
    #[serde(rename = "enforce-version", default)]
    enforce_version: String,
    #[serde(default)]
    audit: String,
    #[serde(rename = "audit-version", default)]
    audit_version: String,
    #[serde(default)]
    warn: String,
    #[serde(rename = "warn-version", default)]
    warn_version: String,
}

/// Who and what is never evaluated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Exemptions {
    #[serde(default)]
    pub usernames: Vec<String>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub runtime_classes: Vec<String>,
}

/// The plugin's configuration, defaulted and validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSecurityConfiguration {
    /// The policy of namespaces without labels (and under the labels they set).
    pub defaults: Policy,
    pub exemptions: Exemptions,
}

impl PodSecurityConfiguration {
    /// Decodes, defaults and validates one configuration object (already
    /// parsed from YAML or JSON). `None` (a plugin entry without
    /// configuration) gives upstream's defaults.
    pub fn parse(v: Option<&Value>) -> Result<Self, ConfigError> {
        let Some(v) = v else {
            return Ok(Self::default());
        };
        let raw: Raw =
            serde_json::from_value(v.clone()).map_err(|e| ConfigError::Decode(e.to_string()))?;
        let version_ok = raw
            .api_version
            .strip_prefix(GROUP)
            .and_then(|r| r.strip_prefix('/'))
            .is_some_and(|v| matches!(v, "v1" | "v1beta1" | "v1alpha1"));
        if !version_ok || raw.kind != KIND {
            return Err(ConfigError::Type {
                api_version: raw.api_version,
                kind: raw.kind,
            });
        }
        let d = raw.defaults;
        let or = |s: String, default: &str| {
            if s.is_empty() { default.to_string() } else { s }
        };
        let fields = [
            (
                "enforce",
                or(d.enforce, "privileged"),
                "enforce-version",
                or(d.enforce_version, "latest"),
            ),
            (
                "warn",
                or(d.warn, "privileged"),
                "warn-version",
                or(d.warn_version, "latest"),
            ),
            (
                "audit",
                or(d.audit, "privileged"),
                "audit-version",
                or(d.audit_version, "latest"),
            ),
        ];
        let mut errs = Vec::new();
        let mut lvs = Vec::new();
        for (level_field, level, version_field, version) in &fields {
            let l = Level::parse(level).map_err(|e| invalid(level_field, level, e));
            let v = Version::parse(version).map_err(|e| invalid(version_field, version, e));
            match (l, v) {
                (Ok(l), Ok(v)) => lvs.push(LevelVersion::new(l, v)),
                (l, v) => {
                    errs.extend(l.err());
                    errs.extend(v.err());
                }
            }
        }
        validate_names(
            "namespaces",
            &raw.exemptions.namespaces,
            dns_label,
            &mut errs,
        );
        validate_names(
            "runtimeClasses",
            &raw.exemptions.runtime_classes,
            dns_subdomain,
            &mut errs,
        );
        validate_names(
            "usernames",
            &raw.exemptions.usernames,
            |s| {
                if s.is_empty() {
                    Err("username must not be empty".to_string())
                } else {
                    Ok(())
                }
            },
            &mut errs,
        );
        if !errs.is_empty() {
            return Err(ConfigError::Invalid(aggregate(&errs)));
        }
        Ok(PodSecurityConfiguration {
            defaults: Policy {
                enforce: lvs[0],
                warn: lvs[1],
                audit: lvs[2],
            },
            exemptions: raw.exemptions,
        })
    }
}

fn invalid(field: &str, value: &str, detail: &str) -> FieldError {
    FieldError::invalid(format!("defaults.{field}"), value, detail)
}

/// Upstream's exemption list validation: each name valid, none repeated.
fn validate_names(
    list: &str,
    names: &[String],
    valid: impl Fn(&str) -> Result<(), String>,
    errs: &mut Vec<FieldError>,
) {
    let mut seen = std::collections::BTreeSet::new();
    for (i, n) in names.iter().enumerate() {
        let field = format!("exemptions.{list}[{i}]");
        if let Err(why) = valid(n) {
            errs.push(FieldError::invalid(field, n, &why));
        } else if !seen.insert(n.as_str()) {
            errs.push(FieldError::duplicate(field, n));
        }
    }
}

const DNS1123_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// apimachinery's `IsDNS1123Label` messages, joined as upstream joins them.
fn dns_label(s: &str) -> Result<(), String> {
    let mut why = Vec::new();
    if s.len() > 63 {
        why.push("must be no more than 63 characters".to_string());
    }
    if !is_dns_label(s) {
        why.push(DNS1123_LABEL.to_string());
    }
    if why.is_empty() {
        Ok(())
    } else {
        Err(why.join(", "))
    }
}

/// apimachinery's `IsDNS1123Subdomain` messages.
fn dns_subdomain(s: &str) -> Result<(), String> {
    let mut why = Vec::new();
    if s.len() > 253 {
        why.push("must be no more than 253 characters".to_string());
    }
    if s.is_empty() || !s.split('.').all(is_dns_label) {
        why.push(DNS1123_SUBDOMAIN.to_string());
    }
    if why.is_empty() {
        Ok(())
    } else {
        Err(why.join(", "))
    }
}

/// The shape of a DNS label (the length is checked apart, as upstream's).
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn configurations_default_and_validate() {
        let base = |extra: Value| {
            let mut v = json!({"apiVersion": "pod-security.admission.config.k8s.io/v1",
                "kind": "PodSecurityConfiguration"});
            if let (Some(m), Value::Object(e)) = (v.as_object_mut(), extra) {
                m.extend(e);
            }
            v
        };
        let lv = LevelVersion::new;
        // Nothing set: privileged:latest everywhere.
        assert_eq!(
            PodSecurityConfiguration::parse(Some(&base(json!({})))).unwrap(),
            PodSecurityConfiguration::default()
        );
        assert_eq!(
            PodSecurityConfiguration::parse(None).unwrap(),
            PodSecurityConfiguration::default()
        );
        let got = PodSecurityConfiguration::parse(Some(&base(json!({
            "defaults": {"enforce": "baseline", "enforce-version": "v1.30", "warn": "restricted"},
            "exemptions": {"usernames": ["admin"], "namespaces": ["kube-system"], "runtimeClasses": ["kata"]}
        }))))
        .unwrap();
        assert_eq!(
            got.defaults,
            Policy {
                enforce: lv(Level::Baseline, Version::V1(30)),
                audit: LevelVersion::PRIVILEGED,
                warn: lv(Level::Restricted, Version::Latest),
            }
        );
        assert_eq!(got.exemptions.runtime_classes, ["kata"]);
        let cases = [
            (
                json!({"apiVersion": "v1", "kind": "PodSecurityConfiguration"}),
                r#"expected PodSecurityConfiguration in pod-security.admission.config.k8s.io/v1, v1beta1 or v1alpha1, got kind "PodSecurityConfiguration" apiVersion "v1""#,
            ),
            (
                base(json!({"defaults": {"enforce": "strict", "audit-version": "1.2"}})),
                r#"invalid PodSecurityConfiguration: [defaults.enforce: Invalid value: "strict": must be one of privileged, baseline, restricted, defaults.audit-version: Invalid value: "1.2": must be "latest" or "v1.x"]"#,
            ),
            (
                base(json!({"exemptions": {"namespaces": ["Bad_NS"]}})),
                r#"invalid PodSecurityConfiguration: exemptions.namespaces[0]: Invalid value: "Bad_NS": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"#,
            ),
            (
                base(json!({"exemptions": {"usernames": ["a", ""]}})),
                r#"invalid PodSecurityConfiguration: exemptions.usernames[1]: Invalid value: "": username must not be empty"#,
            ),
            (
                base(json!({"exemptions": {"runtimeClasses": ["kata", "kata", "Bad"]}})),
                r#"invalid PodSecurityConfiguration: [exemptions.runtimeClasses[1]: Duplicate value: "kata", exemptions.runtimeClasses[2]: Invalid value: "Bad": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')]"#,
            ),
            (
                base(json!({"exemptions": {"users": ["a"]}})),
                "decoding PodSecurityConfiguration: unknown field `users`, expected one of `usernames`, `namespaces`, `runtimeClasses`",
            ),
        ];
        for (v, want) in cases {
            let err = PodSecurityConfiguration::parse(Some(&v)).unwrap_err();
            assert_eq!(err.to_string(), want, "{v}");
        }
    }
}
