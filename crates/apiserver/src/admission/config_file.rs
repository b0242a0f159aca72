//! `--admission-control-config-file`: upstream's AdmissionConfiguration
//! (apiserver.config.k8s.io/v1, v1alpha1, and apiserver.k8s.io/v1alpha1),
//! a list of per-plugin configurations, each inline (`configuration`) or in a
//! file (`path`, relative to the AdmissionConfiguration's directory).
//!
//! Berth configures only PodSecurity this way; an entry for any other plugin
//! is refused rather than silently ignored.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// The plugin configurations the chain is built with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdmissionConfiguration {
    pub pod_security: berth_podsecurity::PodSecurityConfiguration,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    plugins: Vec<RawPlugin>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlugin {
    name: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    configuration: Option<Value>,
}

const API_VERSIONS: &[&str] = &[
    "apiserver.config.k8s.io/v1",
    "apiserver.config.k8s.io/v1alpha1",
    "apiserver.k8s.io/v1alpha1",
];

impl AdmissionConfiguration {
    /// Reads and validates the file; every error names the file.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading admission configuration {}: {e}", path.display()))?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::parse(&text, &dir)
            .map_err(|e| format!("admission configuration {}: {e}", path.display()))
    }

    /// Parses an AdmissionConfiguration whose relative `path`s are under `dir`.
    pub fn parse(text: &str, dir: &Path) -> Result<Self, String> {
        let raw: Raw = parse_yaml(text)?;
        if !API_VERSIONS.contains(&raw.api_version.as_str()) || raw.kind != "AdmissionConfiguration"
        {
            return Err(format!(
                "expected kind AdmissionConfiguration in {}, got kind {:?} apiVersion {:?}",
                API_VERSIONS.join(", "),
                raw.kind,
                raw.api_version
            ));
        }
        let mut out = AdmissionConfiguration::default();
        let mut seen = Vec::new();
        for p in raw.plugins {
            if seen.contains(&p.name) {
                return Err(format!("plugin {:?} is configured more than once", p.name));
            }
            seen.push(p.name.clone());
            if p.name != "PodSecurity" {
                return Err(format!(
                    "plugin {:?}: Berth reads only PodSecurity's configuration from this file",
                    p.name
                ));
            }
            let config = match (p.configuration, p.path) {
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "plugin {:?}: set either configuration or path, not both",
                        p.name
                    ));
                }
                (Some(c), None) => Some(c),
                (None, Some(file)) => {
                    let file = resolve(dir, &file);
                    let text = std::fs::read_to_string(&file).map_err(|e| {
                        format!("plugin {:?}: reading {}: {e}", p.name, file.display())
                    })?;
                    Some(
                        parse_yaml::<Value>(&text)
                            .map_err(|e| format!("plugin {:?}: {}: {e}", p.name, file.display()))?,
                    )
                }
                (None, None) => None,
            };
            out.pod_security = berth_podsecurity::PodSecurityConfiguration::parse(config.as_ref())
                .map_err(|e| format!("plugin \"PodSecurity\": {e}"))?;
        }
        Ok(out)
    }
}

fn resolve(dir: &Path, file: &str) -> PathBuf {
    let p = Path::new(file);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

/// JSON or YAML, as upstream's decoder takes either.
fn parse_yaml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    match serde_json::from_str(text) {
        Ok(v) => Ok(v),
        Err(_) => serde_saphyr::from_str(text).map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use berth_podsecurity::{Level, LevelVersion, Version};

    use super::*;

    const HEAD: &str = "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\n";

    #[test]
    fn inline_and_path_configurations() {
        let dir =
            std::env::temp_dir().join(format!("berth-admission-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("psa.yaml"),
            "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults:\n  enforce: baseline\nexemptions:\n  namespaces: [kube-system]\n",
        )
        .unwrap();
        let by_path = AdmissionConfiguration::parse(
            &format!("{HEAD}plugins:\n- name: PodSecurity\n  path: psa.yaml\n"),
            &dir,
        )
        .unwrap();
        let inline = AdmissionConfiguration::parse(
            &format!(
                "{HEAD}plugins:\n- name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n    kind: PodSecurityConfiguration\n    defaults: {{enforce: baseline}}\n    exemptions: {{namespaces: [kube-system]}}\n"
            ),
            &dir,
        )
        .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(by_path, inline);
        assert_eq!(
            inline.pod_security.defaults.enforce,
            LevelVersion::new(Level::Baseline, Version::Latest)
        );
        assert_eq!(inline.pod_security.exemptions.namespaces, ["kube-system"]);
        // No entry, or an entry without configuration: upstream's defaults.
        for text in [
            HEAD.to_string(),
            format!("{HEAD}plugins:\n- name: PodSecurity\n"),
        ] {
            assert_eq!(
                AdmissionConfiguration::parse(&text, &dir).unwrap(),
                AdmissionConfiguration::default()
            );
        }
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let dir = Path::new("/nonexistent");
        let cases = [
            (
                "apiVersion: v1\nkind: Config\n".to_string(),
                r#"expected kind AdmissionConfiguration in apiserver.config.k8s.io/v1, apiserver.config.k8s.io/v1alpha1, apiserver.k8s.io/v1alpha1, got kind "Config" apiVersion "v1""#,
            ),
            (
                format!("{HEAD}plugins:\n- name: EventRateLimit\n  path: erl.yaml\n"),
                r#"plugin "EventRateLimit": Berth reads only PodSecurity's configuration from this file"#,
            ),
            (
                format!("{HEAD}plugins:\n- name: PodSecurity\n  path: missing.yaml\n"),
                r#"plugin "PodSecurity": reading /nonexistent/missing.yaml: No such file or directory (os error 2)"#,
            ),
            (
                format!(
                    "{HEAD}plugins:\n- name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n    kind: PodSecurityConfiguration\n    defaults: {{enforce: strict}}\n"
                ),
                r#"plugin "PodSecurity": invalid PodSecurityConfiguration: defaults.enforce: Invalid value: "strict": must be one of privileged, baseline, restricted"#,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(
                AdmissionConfiguration::parse(&text, dir).unwrap_err(),
                want,
                "{text}"
            );
        }
    }
}
