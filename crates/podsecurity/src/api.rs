//! Levels, versions and the namespace labels that choose them, as upstream's
//! `pod-security-admission/api` package.

use std::collections::BTreeMap;
use std::fmt;

/// The label prefix, also the prefix of the audit annotations' keys.
pub const LABEL_PREFIX: &str = "pod-security.kubernetes.io/";
pub const ENFORCE_LEVEL_LABEL: &str = "pod-security.kubernetes.io/enforce";
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
pub const AUDIT_LEVEL_LABEL: &str = "pod-security.kubernetes.io/audit";
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
pub const WARN_LEVEL_LABEL: &str = "pod-security.kubernetes.io/warn";
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// A Pod Security Standard level, ordered from the most permissive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    /// Upstream's `ParseLevel`, with its error text.
    pub fn parse(s: &str) -> Result<Level, &'static str> {
        match s {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err("must be one of privileged, baseline, restricted"),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy version: `latest` or `v1.<minor>` (upstream only has major 1).
/// Ordered as upstream's `Older`: `latest` is newer than every `v1.N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    V1(u32),
    Latest,
}

impl Version {
    /// Upstream's `ParseVersion`: `latest` or `v1.N` (no leading zeros).
    pub fn parse(s: &str) -> Result<Version, &'static str> {
        const ERR: &str = r#"must be "latest" or "v1.x""#;
        if s == "latest" {
            return Ok(Version::Latest);
        }
        let minor = s.strip_prefix("v1.").ok_or(ERR)?;
        let digits = !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit());
        if !digits || (minor.len() > 1 && minor.starts_with('0')) {
            return Err(ERR);
        }
        minor.parse().map(Version::V1).map_err(|_| ERR)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Latest => f.write_str("latest"),
            Version::V1(minor) => write!(f, "v1.{minor}"),
        }
    }
}

/// A level at a version, written `restricted:latest` in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    pub level: Level,
    pub version: Version,
}

impl LevelVersion {
    pub const PRIVILEGED: LevelVersion = LevelVersion {
        level: Level::Privileged,
        version: Version::Latest,
    };

    pub fn new(level: Level, version: Version) -> Self {
        LevelVersion { level, version }
    }

    /// Upstream's `Equivalent`: privileged at any version is the same policy.
    pub fn equivalent(&self, other: &LevelVersion) -> bool {
        (self.level == Level::Privileged && other.level == Level::Privileged) || self == other
    }
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level, self.version)
    }
}

/// The three modes of a namespace's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Default for Policy {
    /// Upstream's default configuration: privileged:latest everywhere.
    fn default() -> Self {
        Policy {
            enforce: LevelVersion::PRIVILEGED,
            audit: LevelVersion::PRIVILEGED,
            warn: LevelVersion::PRIVILEGED,
        }
    }
}

impl Policy {
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|lv| lv.level == Level::Privileged)
    }

    pub fn equivalent(&self, other: &Policy) -> bool {
        self.enforce.equivalent(&other.enforce)
            && self.audit.equivalent(&other.audit)
            && self.warn.equivalent(&other.warn)
    }
}

/// A field error as apimachinery's `field.Error` renders it:
/// `metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "x": must be ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub kind: FieldErrorType,
    pub field: String,
    pub value: String,
    /// Empty for duplicates.
    pub detail: String,
}

/// The `field.ErrorType`s these configurations produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorType {
    Invalid,
    Duplicate,
}

impl FieldError {
    pub fn invalid(field: impl Into<String>, value: &str, detail: &str) -> Self {
        FieldError {
            kind: FieldErrorType::Invalid,
            field: field.into(),
            value: value.to_string(),
            detail: detail.to_string(),
        }
    }

    pub fn duplicate(field: impl Into<String>, value: &str) -> Self {
        FieldError {
            kind: FieldErrorType::Duplicate,
            field: field.into(),
            value: value.to_string(),
            detail: String::new(),
        }
    }

    /// The Status cause's `reason` (upstream's `CauseType`).
    pub fn cause_type(&self) -> &'static str {
        match self.kind {
            FieldErrorType::Invalid => "FieldValueInvalid",
            FieldErrorType::Duplicate => "FieldValueDuplicate",
        }
    }

    /// The part after the field (a Status cause's `message`).
    pub fn body(&self) -> String {
        match self.kind {
            FieldErrorType::Invalid => {
                format!("Invalid value: {}: {}", quote(&self.value), self.detail)
            }
            FieldErrorType::Duplicate => format!("Duplicate value: {}", quote(&self.value)),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// apimachinery's `ErrorList.ToAggregate().Error()`: one message alone, several
/// in brackets.
pub fn aggregate(errs: &[FieldError]) -> String {
    match errs {
        [one] => one.to_string(),
        _ => format!(
            "[{}]",
            errs.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Go's `%q` for the strings these messages quote (JSON's escaping is the same
/// for everything a label or annotation value can hold).
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// Upstream's `PolicyToEvaluate`: the namespace's labels over the configured
/// defaults. A bad level fails closed for enforce (restricted) and open for
/// audit and warn (privileged); a bad version reads as `latest`. A warn level
/// that is not set follows an explicitly set, stricter enforce level.
pub fn policy_to_evaluate(
    labels: &BTreeMap<String, String>,
    defaults: &Policy,
) -> (Policy, Vec<FieldError>) {
    let mut p = *defaults;
    let mut errs = Vec::new();
    if labels.is_empty() {
        return (p, errs);
    }
    // Upstream's order of the labels (and of the errors).
    let modes: [(&str, &str, &mut LevelVersion, Level); 3] = [
        (
            ENFORCE_LEVEL_LABEL,
            ENFORCE_VERSION_LABEL,
            &mut p.enforce,
            Level::Restricted,
        ),
        (
            AUDIT_LEVEL_LABEL,
            AUDIT_VERSION_LABEL,
            &mut p.audit,
            Level::Privileged,
        ),
        (
            WARN_LEVEL_LABEL,
            WARN_VERSION_LABEL,
            &mut p.warn,
            Level::Privileged,
        ),
    ];
    let mut has_enforce_level = false;
    for (level_label, version_label, lv, fallback) in modes {
        if let Some(v) = labels.get(level_label) {
            match Level::parse(v) {
                Ok(l) => {
                    lv.level = l;
                    has_enforce_level |= level_label == ENFORCE_LEVEL_LABEL;
                }
                Err(e) => {
                    lv.level = fallback;
                    errs.push(invalid(level_label, v, e));
                }
            }
        }
        if let Some(v) = labels.get(version_label) {
            match Version::parse(v) {
                Ok(ver) => lv.version = ver,
                Err(e) => {
                    lv.version = Version::Latest;
                    errs.push(invalid(version_label, v, e));
                }
            }
        }
    }
    if !labels.contains_key(WARN_LEVEL_LABEL) && has_enforce_level && p.enforce.level > p.warn.level
    {
        p.warn.level = p.enforce.level;
        if !labels.contains_key(WARN_VERSION_LABEL) {
            p.warn.version = p.enforce.version;
        }
    }
    (p, errs)
}

fn invalid(label: &str, value: &str, detail: &str) -> FieldError {
    FieldError::invalid(format!("metadata.labels[{label}]"), value, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (format!("{LABEL_PREFIX}{k}"), v.to_string()))
            .collect()
    }

    #[test]
    fn versions_parse_as_upstream() {
        let cases = [
            ("latest", Ok(Version::Latest)),
            ("v1.0", Ok(Version::V1(0))),
            ("v1.25", Ok(Version::V1(25))),
            ("v1.05", Err(())),
            ("v2.1", Err(())),
            ("1.25", Err(())),
            ("v1.", Err(())),
            ("v1.x", Err(())),
            ("", Err(())),
        ];
        for (s, want) in cases {
            assert_eq!(Version::parse(s).map_err(|_| ()), want, "{s}");
        }
        assert!(Version::V1(99) < Version::Latest);
        assert!(Version::V1(9) < Version::V1(10));
        assert_eq!(
            LevelVersion::new(Level::Restricted, Version::V1(24)).to_string(),
            "restricted:v1.24"
        );
    }

    #[test]
    fn labels_choose_the_policy() {
        let r = Level::Restricted;
        let b = Level::Baseline;
        let p = Level::Privileged;
        let lv = LevelVersion::new;
        let latest = Version::Latest;
        let cases: Vec<(BTreeMap<String, String>, Policy, Vec<&str>)> = vec![
            (labels(&[]), Policy::default(), vec![]),
            // warn follows a stricter enforce level, and its version.
            (
                labels(&[("enforce", "baseline"), ("enforce-version", "v1.22")]),
                Policy {
                    enforce: lv(b, Version::V1(22)),
                    audit: lv(p, latest),
                    warn: lv(b, Version::V1(22)),
                },
                vec![],
            ),
            // An explicit warn level is kept.
            (
                labels(&[("enforce", "restricted"), ("warn", "baseline")]),
                Policy {
                    enforce: lv(r, latest),
                    audit: lv(p, latest),
                    warn: lv(b, latest),
                },
                vec![],
            ),
            // Bad values: enforce fails closed, audit and warn open.
            (
                labels(&[
                    ("enforce", "strict"),
                    ("audit", "loud"),
                    ("warn-version", "v2"),
                ]),
                Policy {
                    enforce: lv(r, latest),
                    audit: lv(p, latest),
                    warn: lv(p, latest),
                },
                vec![
                    r#"metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted"#,
                    r#"metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: "loud": must be one of privileged, baseline, restricted"#,
                    r#"metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: "v2": must be "latest" or "v1.x""#,
                ],
            ),
        ];
        for (l, want, want_errs) in cases {
            let (got, errs) = policy_to_evaluate(&l, &Policy::default());
            assert_eq!(got, want, "{l:?}");
            let errs: Vec<String> = errs.iter().map(ToString::to_string).collect();
            assert_eq!(errs, want_errs, "{l:?}");
        }
    }

    #[test]
    fn errors_aggregate_as_apimachinery() {
        let e = |v: &str| FieldError::invalid("f", v, "bad");
        assert_eq!(aggregate(&[e("a")]), r#"f: Invalid value: "a": bad"#);
        assert_eq!(
            aggregate(&[e("a"), FieldError::duplicate("g", "b")]),
            r#"[f: Invalid value: "a": bad, g: Duplicate value: "b"]"#
        );
    }
}
