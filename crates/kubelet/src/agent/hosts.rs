//! The pod's `/etc/hosts`, managed by the node agent as upstream's kubelet
//! does: written once per pod into `<pod dir>/etc-hosts` when the sandbox has
//! its IPs, and bind-mounted into every container that does not mount
//! `/etc/hosts` itself. `spec.hostAliases` are appended to it.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, HostAlias, Pod};

pub const CONTAINER_PATH: &str = "/etc/hosts";

/// Where the pod's hosts file lives on the node.
pub fn path(pod_dir: &Path) -> PathBuf {
    pod_dir.join("etc-hosts")
}

/// Whether `c` gets the managed file: not when it mounts something at
/// `/etc/hosts` itself, and not before the pod has IPs (upstream's
/// shouldMountHostsFile).
pub fn should_mount(c: &Container, pod_ips: &[String]) -> bool {
    !pod_ips.is_empty()
        && !c
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.mount_path == CONTAINER_PATH)
}

/// The file's text. Host-network pods get the node's own hosts file under a
/// header; the others a fixed preamble and one line per pod IP naming the pod
/// (`<ip>\t<hostname>.<domain>\t<hostname>` when it has a subdomain).
pub fn content(pod: &Pod, pod_ips: &[String], cluster_domain: &str, node_hosts: &str) -> String {
    let spec = pod.spec.clone().unwrap_or_default();
    let aliases = spec.host_aliases.as_deref().unwrap_or_default();
    let mut out = String::new();
    if spec.host_network.unwrap_or(false) {
        out.push_str("# Kubernetes-managed hosts file (host network).\n");
        out.push_str(node_hosts);
    } else {
        out.push_str(concat!(
            "# Kubernetes-managed hosts file.\n",
            "127.0.0.1\tlocalhost\n",
            "::1\tlocalhost ip6-localhost ip6-loopback\n",
            "fe00::0\tip6-localnet\n",
            "fe00::0\tip6-mcastprefix\n",
            "fe00::1\tip6-allnodes\n",
            "fe00::2\tip6-allrouters\n",
        ));
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let hostname = super::podspec::pod_hostname(pod);
        let domain = spec
            .subdomain
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(|sub| format!("{sub}.{ns}.svc.{cluster_domain}"));
        for ip in pod_ips {
            match &domain {
                Some(d) => out.push_str(&format!("{ip}\t{hostname}.{d}\t{hostname}\n")),
                None => out.push_str(&format!("{ip}\t{hostname}\n")),
            }
        }
    }
    out.push_str(&alias_entries(aliases));
    out
}

fn alias_entries(aliases: &[HostAlias]) -> String {
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Entries added by HostAliases.\n");
    for a in aliases {
        let names = a.hostnames.as_deref().unwrap_or_default().join("\t");
        out.push_str(&format!("{}\t{names}\n", a.ip));
    }
    out
}

/// Writes the file unless it exists (upstream never rewrites it: a container
/// may have edited it, and the pod's IPs do not change).
pub fn ensure(file: &Path, text: &str) -> std::io::Result<()> {
    if file.exists() {
        return Ok(());
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(file, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "c", "image": "busybox"}]);
        serde_json::from_value(json!({
            "metadata": {"name": "web-0", "namespace": "shop"},
            "spec": spec,
        }))
        .unwrap()
    }

    const PREAMBLE: &str = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n";

    #[test]
    fn hosts_files_as_upstream_writes_them() {
        let ips = vec!["10.42.0.7".to_string()];
        let cases = [
            (json!({}), format!("{PREAMBLE}10.42.0.7\tweb-0\n")),
            (
                json!({"hostname": "db", "subdomain": "nodes"}),
                format!("{PREAMBLE}10.42.0.7\tdb.nodes.shop.svc.cluster.local\tdb\n"),
            ),
            (
                json!({"hostAliases": [
                    {"ip": "127.0.0.1", "hostnames": ["foo.local", "bar.local"]},
                    {"ip": "10.1.2.3", "hostnames": ["foo.remote"]}
                ]}),
                format!(
                    "{PREAMBLE}10.42.0.7\tweb-0\n\n# Entries added by HostAliases.\n127.0.0.1\tfoo.local\tbar.local\n10.1.2.3\tfoo.remote\n"
                ),
            ),
            (
                json!({"hostNetwork": true, "hostAliases": [{"ip": "1.2.3.4", "hostnames": ["x"]}]}),
                "# Kubernetes-managed hosts file (host network).\n127.0.0.1 node\n\n# Entries added by HostAliases.\n1.2.3.4\tx\n".to_string(),
            ),
        ];
        for (spec, want) in cases {
            let p = pod(spec.clone());
            assert_eq!(
                content(&p, &ips, "cluster.local", "127.0.0.1 node\n"),
                want,
                "{spec}"
            );
        }
    }

    #[test]
    fn containers_mounting_their_own_hosts_file_keep_it() {
        let plain: Container = serde_json::from_value(json!({"name": "c"})).unwrap();
        let own: Container = serde_json::from_value(json!({
            "name": "c", "volumeMounts": [{"name": "h", "mountPath": "/etc/hosts"}]
        }))
        .unwrap();
        let ips = vec!["10.42.0.7".to_string()];
        assert!(should_mount(&plain, &ips));
        assert!(!should_mount(&own, &ips));
        assert!(!should_mount(&plain, &[]), "no IPs yet");
    }

    #[test]
    fn the_file_is_written_once() {
        let dir = crate::testutil::TempDir::new("etc-hosts");
        let f = path(&dir.path().join("pod"));
        ensure(&f, "first\n").unwrap();
        ensure(&f, "second\n").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "first\n");
    }
}
