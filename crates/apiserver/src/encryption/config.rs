//! `--encryption-provider-config`: apiserver.config.k8s.io/v1
//! EncryptionConfiguration (YAML or JSON), validated as upstream's
//! `apis/config/validation` and resolved per group-resource as upstream's
//! `encryptionconfig.LoadEncryptionConfig`: entries in order, providers in
//! order (the first writes), `*.group` and `*.*` rules masking later ones.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use serde::Deserialize;

use super::{
    AesCbc, AesGcm, GroupResource, Provider, ResourceTransformer, Secretbox, Transformers,
};

pub const API_VERSION: &str = "apiserver.config.k8s.io/v1";
pub const KIND: &str = "EncryptionConfiguration";

const AES_KEY_SIZES: &[usize] = &[16, 24, 32];
const SECRETBOX_KEY_SIZES: &[usize] = &[32];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("error opening encryption provider configuration file {path:?}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("encryption provider configuration file {0:?} is empty")]
    Empty(String),
    /// Not an EncryptionConfiguration, or validation failed (upstream's aggregate).
    #[error("error while parsing file: {0}")]
    Parse(String),
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EncryptionConfiguration {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    resources: Vec<ResourceConfiguration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceConfiguration {
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    providers: Vec<ProviderConfiguration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderConfiguration {
    aesgcm: Option<KeysConfiguration>,
    aescbc: Option<KeysConfiguration>,
    secretbox: Option<KeysConfiguration>,
    identity: Option<serde_json::Value>,
    /// Parsed so that it is refused with a clear message rather than as an unknown field.
    kms: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysConfiguration {
    #[serde(default)]
    keys: Vec<Key>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Key {
    #[serde(default)]
    name: String,
    #[serde(default)]
    secret: String,
}

/// Reads, validates and resolves the file.
pub fn load(path: &Path) -> Result<Transformers, ConfigError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Open {
        path: shown.clone(),
        source,
    })?;
    if text.trim().is_empty() {
        return Err(ConfigError::Empty(shown));
    }
    parse(&text).map_err(ConfigError::Parse)
}

/// Parses, validates and resolves a configuration's text (YAML or JSON).
pub fn parse(text: &str) -> Result<Transformers, String> {
    let config: EncryptionConfiguration =
        serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    if config.kind.is_empty() {
        return Err("Object 'Kind' is missing".into());
    }
    if config.api_version != API_VERSION || config.kind != KIND {
        return Err(format!(
            "no kind {:?} is registered for version {:?}",
            config.kind, config.api_version
        ));
    }
    let errs = validate(&config);
    if !errs.is_empty() {
        return Err(aggregate(&errs));
    }
    resolve(&config)
}

/// Upstream's `utilerrors.NewAggregate(...).Error()`: one error as itself, more in brackets.
fn aggregate(errs: &[String]) -> String {
    match errs {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

fn required(path: &str, detail: &str) -> String {
    format!("{path}: Required value: {detail}")
}

fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value}: {detail}")
}

/// Go's `%#v` of a `[]string`, as field.Invalid prints it.
fn go_strings(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", items.join(", "))
}

/// `schema.ParseGroupResource`: `resource.group`, split at the first dot.
pub fn parse_group_resource(s: &str) -> GroupResource {
    match s.split_once('.') {
        Some((resource, group)) => GroupResource::new(group, resource),
        None => GroupResource::new("", s),
    }
}

fn validate(c: &EncryptionConfiguration) -> Vec<String> {
    let mut errs = Vec::new();
    if c.resources.is_empty() {
        errs.push(required("resources", "at least one resources is required"));
        return errs;
    }
    for (i, conf) in c.resources.iter().enumerate() {
        let r = format!("resources[{i}].resources");
        let p = format!("resources[{i}].providers");
        if conf.resources.is_empty() {
            errs.push(required(&r, &format!("at least one {r} is required")));
        }
        errs.extend(validate_overlap(&conf.resources, &r));
        errs.extend(validate_resource_names(&conf.resources, &r));
        if conf.providers.is_empty() {
            errs.push(required(&p, &format!("at least one {p} is required")));
        }
        for (j, provider) in conf.providers.iter().enumerate() {
            let path = format!("{p}[{j}]");
            let found = [
                provider.kms.is_some(),
                provider.aesgcm.is_some(),
                provider.aescbc.is_some(),
                provider.secretbox.is_some(),
                provider.identity.is_some(),
            ]
            .iter()
            .filter(|b| **b)
            .count();
            if found == 0 {
                errs.push(invalid(&path, "{}", "provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity"));
                continue;
            }
            if found > 1 {
                errs.push(invalid(&path, "{...}", "more than one provider specified in a single element, should split into different list elements"));
                continue;
            }
            if provider.kms.is_some() {
                errs.push(format!(
                    "{path}.kms: Forbidden: KMS providers (v1 and v2) are not supported by Berth; use aescbc, aesgcm or secretbox"
                ));
            } else if let Some(k) = &provider.aesgcm {
                errs.extend(validate_keys(
                    &k.keys,
                    &format!("{path}.aesgcm.keys"),
                    AES_KEY_SIZES,
                ));
            } else if let Some(k) = &provider.aescbc {
                errs.extend(validate_keys(
                    &k.keys,
                    &format!("{path}.aescbc.keys"),
                    AES_KEY_SIZES,
                ));
            } else if let Some(k) = &provider.secretbox {
                errs.extend(validate_keys(
                    &k.keys,
                    &format!("{path}.secretbox.keys"),
                    SECRETBOX_KEY_SIZES,
                ));
            }
        }
    }
    errs
}

fn validate_overlap(resources: &[String], path: &str) -> Vec<String> {
    if resources.len() < 2 {
        return vec![];
    }
    let grs: Vec<GroupResource> = resources.iter().map(|r| parse_group_resource(r)).collect();
    let any = GroupResource::new("*", "*");
    let (mut duplicate, mut overlap) = (false, false);
    for (i, a) in grs.iter().enumerate() {
        for (j, b) in grs.iter().enumerate() {
            if i == j {
                continue;
            }
            if a == b {
                duplicate = true;
                continue;
            }
            if *a == any || (a.group == b.group && (a.resource == "*" || b.resource == "*")) {
                overlap = true;
            }
        }
    }
    let mut errs = Vec::new();
    if duplicate {
        errs.push(invalid(
            path,
            &go_strings(resources),
            "the same resource cannot be specified multiple times",
        ));
    }
    if overlap {
        errs.push(invalid(path, &go_strings(resources), "using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked"));
    }
    errs
}

fn validate_resource_names(resources: &[String], path: &str) -> Vec<String> {
    let mut errs = Vec::new();
    for (j, res) in resources.iter().enumerate() {
        let at = format!("{path}[{j}]");
        let gr = parse_group_resource(res);
        let detail = if res.to_lowercase() != *res {
            "resource name should not contain capital letters"
        } else if res == "*" {
            "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources"
        } else if matches!(
            res.as_str(),
            "apiserveripinfo" | "serviceipallocations" | "servicenodeportallocations"
        ) {
            "resources which do not have REST API/s cannot be encrypted"
        } else if gr.group == "events.k8s.io" {
            "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file"
        } else if gr.group == "extensions" {
            "'extensions' group has been removed and cannot be used for encryption"
        } else if gr.group == "*" && gr.resource != "*" {
            "encrypting the same resource across groups is not supported"
        } else {
            continue;
        };
        errs.push(invalid(&at, &format!("{res:?}"), detail));
    }
    errs
}

fn validate_keys(keys: &[Key], path: &str, sizes: &[usize]) -> Vec<String> {
    if keys.is_empty() {
        return vec![required(path, "at least one keys is required")];
    }
    let mut errs = Vec::new();
    for (k, key) in keys.iter().enumerate() {
        let at = format!("{path}[{k}]");
        if key.name.is_empty() {
            errs.push(required(
                &format!("{at}.name"),
                "name is a mandatory field for a key",
            ));
        }
        if key.secret.is_empty() {
            errs.push(required(
                &format!("{at}.secret"),
                "secret is a mandatory field for a key",
            ));
            continue;
        }
        match base64::engine::general_purpose::STANDARD.decode(&key.secret) {
            Err(_) => errs.push(invalid(
                &format!("{at}.secret"),
                "\"REDACTED\"",
                "secrets must be base64 encoded",
            )),
            Ok(secret) if !sizes.contains(&secret.len()) => {
                let want: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
                errs.push(invalid(
                    &format!("{at}.secret"),
                    "\"REDACTED\"",
                    &format!(
                        "secret is not of the expected length, got {}, expected one of [{}]",
                        secret.len(),
                        want.join(" ")
                    ),
                ));
            }
            Ok(_) => {}
        }
    }
    errs
}

/// One entry's providers, in order (validated: every key decodes to a valid length).
fn providers(conf: &ResourceConfiguration) -> Result<Vec<Provider>, String> {
    fn keys<T>(
        keys: &[Key],
        make: impl Fn(&[u8]) -> Option<T>,
    ) -> Result<Vec<(String, T)>, String> {
        keys.iter()
            .map(|k| {
                let secret = base64::engine::general_purpose::STANDARD
                    .decode(&k.secret)
                    .map_err(|e| {
                        format!("could not obtain secret for named key {}: {e}", k.name)
                    })?;
                let t = make(&secret).ok_or_else(|| {
                    format!("error while creating cipher for named key {}", k.name)
                })?;
                Ok((k.name.clone(), t))
            })
            .collect()
    }
    conf.providers
        .iter()
        .map(|p| {
            Ok(if let Some(k) = &p.aesgcm {
                Provider::AesGcm(keys(&k.keys, AesGcm::new)?)
            } else if let Some(k) = &p.aescbc {
                Provider::AesCbc(keys(&k.keys, AesCbc::new)?)
            } else if let Some(k) = &p.secretbox {
                Provider::Secretbox(keys(&k.keys, Secretbox::new)?)
            } else {
                Provider::Identity
            })
        })
        .collect()
}

fn resolve(c: &EncryptionConfiguration) -> Result<Transformers, String> {
    let mut by_resource: HashMap<GroupResource, Vec<Provider>> = HashMap::new();
    let mut order: Vec<GroupResource> = Vec::new();
    for conf in &c.resources {
        let list = providers(conf)?;
        for res in &conf.resources {
            let gr = parse_group_resource(res);
            for mask in [
                GroupResource::new(&gr.group, "*"),
                GroupResource::new("*", "*"),
            ] {
                if by_resource.contains_key(&mask) {
                    return Err(format!(
                        "resource {:?} is masked by earlier rule {:?}",
                        gr.yaml(),
                        mask.yaml()
                    ));
                }
            }
            if !by_resource.contains_key(&gr) {
                order.push(gr.clone());
            }
            by_resource
                .entry(gr)
                .or_default()
                .extend(list.iter().cloned());
        }
    }
    let by_resource = by_resource
        .into_iter()
        .map(|(gr, providers)| (gr, Arc::new(ResourceTransformer { providers })))
        .collect();
    Ok(Transformers { by_resource, order })
}

/// The configuration with `name`/`secret` (a new key) put first in the keys of
/// every entry's writing provider (aescbc, aesgcm or secretbox), the old keys
/// kept after it to read what they wrote: the first step of a rotation
/// (`berth secrets-encrypt rotate-keys`). Written back as YAML; comments are lost.
pub fn rotate(text: &str, name: &str, secret: &[u8]) -> Result<String, String> {
    parse(text)?;
    let mut doc: serde_json::Value = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    let encoded = base64::engine::general_purpose::STANDARD.encode(secret);
    let mut rotated = 0;
    let entries = doc
        .get_mut("resources")
        .and_then(serde_json::Value::as_array_mut)
        .ok_or("no resources")?;
    for entry in entries {
        let Some(first) = entry
            .get_mut("providers")
            .and_then(serde_json::Value::as_array_mut)
            .and_then(|p| p.first_mut())
        else {
            continue;
        };
        for provider in ["aescbc", "aesgcm", "secretbox"] {
            let Some(keys) = first
                .get_mut(provider)
                .and_then(|p| p.get_mut("keys"))
                .and_then(serde_json::Value::as_array_mut)
            else {
                continue;
            };
            if keys
                .iter()
                .any(|k| k.get("name").and_then(|n| n.as_str()) == Some(name))
            {
                return Err(format!("a key named {name:?} is already configured"));
            }
            keys.insert(0, serde_json::json!({"name": name, "secret": encoded}));
            rotated += 1;
        }
    }
    if rotated == 0 {
        return Err(
            "no resource entry writes with aescbc, aesgcm or secretbox: nothing to rotate".into(),
        );
    }
    let out = serde_saphyr::to_string(&doc).map_err(|e| e.to_string())?;
    parse(&out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const K16: &str = "MDEyMzQ1Njc4OWFiY2RlZg=="; // 16 bytes
    const K32: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="; // 32 bytes
    const K8: &str = "MDEyMzQ1Njc="; // 8 bytes

    fn doc(body: &str) -> String {
        format!("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n{body}")
    }

    #[test]
    fn invalid_files_fail_with_upstream_messages() {
        let cases: Vec<(&str, String, &str)> = vec![
            (
                "wrong kind",
                "apiVersion: apiserver.config.k8s.io/v1\nkind: Foo\nresources: []\n".into(),
                "no kind \"Foo\" is registered for version \"apiserver.config.k8s.io/v1\"",
            ),
            (
                "no kind",
                "resources: []\n".into(),
                "Object 'Kind' is missing",
            ),
            (
                "no resources",
                doc("resources: []\n"),
                "resources: Required value: at least one resources is required",
            ),
            (
                "no providers",
                doc("resources:\n- resources: [secrets]\n  providers: []\n"),
                "resources[0].providers: Required value: at least one resources[0].providers is required",
            ),
            (
                "short aescbc key",
                doc(&format!(
                    "resources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n      - name: k\n        secret: {K8}\n"
                )),
                "resources[0].providers[0].aescbc.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 8, expected one of [16 24 32]",
            ),
            (
                "16-byte secretbox key",
                doc(&format!(
                    "resources:\n- resources: [secrets]\n  providers:\n  - secretbox:\n      keys:\n      - name: k\n        secret: {K16}\n"
                )),
                "resources[0].providers[0].secretbox.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 16, expected one of [32]",
            ),
            (
                "not base64",
                doc(
                    "resources:\n- resources: [secrets]\n  providers:\n  - aesgcm:\n      keys:\n      - name: k\n        secret: '!!!'\n",
                ),
                "resources[0].providers[0].aesgcm.keys[0].secret: Invalid value: \"REDACTED\": secrets must be base64 encoded",
            ),
            (
                "no key name",
                doc(&format!(
                    "resources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n      - secret: {K32}\n"
                )),
                "resources[0].providers[0].aescbc.keys[0].name: Required value: name is a mandatory field for a key",
            ),
            (
                "no keys",
                doc(
                    "resources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys: []\n",
                ),
                "resources[0].providers[0].aescbc.keys: Required value: at least one keys is required",
            ),
            (
                "two providers in one element",
                doc(&format!(
                    "resources:\n- resources: [secrets]\n  providers:\n  - identity: {{}}\n    aescbc:\n      keys:\n      - name: k\n        secret: {K32}\n"
                )),
                "more than one provider specified in a single element, should split into different list elements",
            ),
            (
                "kms",
                doc(
                    "resources:\n- resources: [secrets]\n  providers:\n  - kms:\n      apiVersion: v2\n      name: plugin\n      endpoint: unix:///tmp/kms.sock\n",
                ),
                "resources[0].providers[0].kms: Forbidden: KMS providers (v1 and v2) are not supported by Berth",
            ),
            (
                "capital letters",
                doc("resources:\n- resources: [Secrets]\n  providers:\n  - identity: {}\n"),
                "resources[0].resources[0]: Invalid value: \"Secrets\": resource name should not contain capital letters",
            ),
            (
                "bare star",
                doc("resources:\n- resources: ['*']\n  providers:\n  - identity: {}\n"),
                "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources",
            ),
            (
                "events.k8s.io",
                doc(
                    "resources:\n- resources: [events.events.k8s.io]\n  providers:\n  - identity: {}\n",
                ),
                "Use 'events' instead in the config file",
            ),
            (
                "across groups",
                doc("resources:\n- resources: [secrets.*]\n  providers:\n  - identity: {}\n"),
                "encrypting the same resource across groups is not supported",
            ),
            (
                "overlap",
                doc("resources:\n- resources: [secrets, '*.']\n  providers:\n  - identity: {}\n"),
                "resources[0].resources: Invalid value: []string{\"secrets\", \"*.\"}: using overlapping resources",
            ),
            (
                "duplicate",
                doc(
                    "resources:\n- resources: [secrets, secrets]\n  providers:\n  - identity: {}\n",
                ),
                "the same resource cannot be specified multiple times",
            ),
            (
                "masked by an earlier rule",
                doc(
                    "resources:\n- resources: ['*.apps']\n  providers:\n  - identity: {}\n- resources: [deployments.apps]\n  providers:\n  - identity: {}\n",
                ),
                "resource \"deployments.apps\" is masked by earlier rule \"*.apps\"",
            ),
            (
                "unknown provider field",
                doc("resources:\n- resources: [secrets]\n  providers:\n  - aescbd: {}\n"),
                "aescbd",
            ),
        ];
        for (name, text, want) in cases {
            let err = parse(&text)
                .err()
                .unwrap_or_else(|| panic!("{name}: accepted"));
            assert!(err.contains(want), "{name}: {err}");
        }
    }

    #[test]
    fn several_errors_are_aggregated_in_brackets() {
        let text = doc(&format!(
            "resources:\n- resources: [Secrets]\n  providers:\n  - aescbc:\n      keys:\n      - name: k\n        secret: {K8}\n"
        ));
        let err = parse(&text).unwrap_err();
        assert!(
            err.starts_with('[') && err.ends_with(']') && err.contains(", "),
            "{err}"
        );
    }

    #[test]
    fn rotation_puts_a_new_key_first_in_every_writing_provider() {
        let text = doc(&format!(
            "resources:\n\
             - resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n      - name: old\n        secret: {K32}\n  - identity: {{}}\n\
             - resources: [configmaps]\n  providers:\n  - identity: {{}}\n\
             - resources: ['*.apps']\n  providers:\n  - secretbox:\n      keys:\n      - name: sb\n        secret: {K32}\n"
        ));
        let new_key = [7u8; 32];
        let out = rotate(&text, "new", &new_key).unwrap();
        let t = parse(&out).unwrap();
        assert_eq!(
            t.describe(),
            vec![
                ("secrets".to_string(), "aescbc:new".to_string()),
                ("configmaps".to_string(), "identity".to_string()),
                ("*.apps".to_string(), "secretbox:new".to_string()),
            ]
        );
        // The old key still reads what it wrote.
        let before = parse(&text).unwrap();
        let key = "/registry/secrets/default/s";
        let plain = bytes::Bytes::from_static(b"{}");
        let sealed = before
            .for_key(key)
            .unwrap()
            .to_storage(&plain, key)
            .unwrap();
        let after = t.for_key(key).unwrap();
        assert_eq!(after.from_storage(&sealed, key).unwrap(), plain);
        assert!(after.is_stale(&sealed));
        // Refusals: a name in use, nothing that encrypts.
        assert!(
            rotate(&out, "new", &new_key)
                .unwrap_err()
                .contains("already configured")
        );
        let plain_only =
            doc("resources:\n- resources: [secrets]\n  providers:\n  - identity: {}\n");
        assert!(
            rotate(&plain_only, "k", &new_key)
                .unwrap_err()
                .contains("nothing to rotate")
        );
    }

    #[test]
    fn json_files_parse_too() {
        let text = format!(
            r#"{{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration",
            "resources":[{{"resources":["secrets"],"providers":[{{"secretbox":{{"keys":[{{"name":"k","secret":"{K32}"}}]}}}},{{"identity":{{}}}}]}}]}}"#
        );
        let t = parse(&text).unwrap();
        assert_eq!(
            t.describe(),
            vec![("secrets".to_string(), "secretbox:k".to_string())]
        );
    }

    #[test]
    fn resources_resolve_exact_then_group_then_any() {
        let text = doc(&format!(
            "resources:\n\
             - resources: [secrets, configmaps]\n  providers:\n  - aescbc:\n      keys:\n      - name: a\n        secret: {K32}\n\
             - resources: ['*.apps']\n  providers:\n  - aesgcm:\n      keys:\n      - name: g\n        secret: {K16}\n\
             - resources: ['*.*']\n  providers:\n  - secretbox:\n      keys:\n      - name: s\n        secret: {K32}\n"
        ));
        let t = parse(&text).unwrap();
        let cases = [
            ("/registry/secrets/default/x", Some("aescbc:a")),
            ("/registry/configmaps/default/x", Some("aescbc:a")),
            ("/registry/deployments.apps/default/d", Some("aesgcm:g")),
            ("/registry/pods/default/p", Some("secretbox:s")),
            (
                "/registry/leases.coordination.k8s.io/ns/l",
                Some("secretbox:s"),
            ),
            ("/not-registry/x", None),
        ];
        for (key, want) in cases {
            assert_eq!(t.for_key(key).map(|r| r.writer()).as_deref(), want, "{key}");
        }
    }
}
