//! Validation of a plugin's `Register` call, with upstream's errors
//! (`pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go`).

use super::pb::RegisterRequest;

/// The device plugin API versions the node agent speaks.
pub const SUPPORTED_VERSIONS: &[&str] = &["v1beta1"];

/// Why a registration is refused; the text is upstream's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    #[error("requested API version {0:?} is not supported by kubelet. Supported versions are {versions}", versions = supported_list())]
    UnsupportedVersion(String),
    #[error("the ResourceName {0:?} is invalid")]
    InvalidResourceName(String),
    /// The endpoint must name a socket inside the device-plugins directory.
    #[error("invalid endpoint {0:?}: must be a socket name in the device plugin directory")]
    InvalidEndpoint(String),
}

/// Go's `%q` of a string slice: `["v1beta1"]`.
fn supported_list() -> String {
    let quoted: Vec<String> = SUPPORTED_VERSIONS
        .iter()
        .map(|v| format!("{v:?}"))
        .collect();
    format!("[{}]", quoted.join(" "))
}

/// Checks a Register request as upstream's server does: the version first, then
/// the resource name (an extended resource: `domain/name`, not in
/// `kubernetes.io`), then (Berth's addition) an endpoint that stays inside the
/// directory, so a plugin cannot make the agent dial an arbitrary path.
pub fn validate(req: &RegisterRequest) -> Result<(), RegisterError> {
    if !SUPPORTED_VERSIONS.contains(&req.version.as_str()) {
        return Err(RegisterError::UnsupportedVersion(req.version.clone()));
    }
    if !berth_api::quota::is_extended_resource(&req.resource_name) {
        return Err(RegisterError::InvalidResourceName(
            req.resource_name.clone(),
        ));
    }
    let e = &req.endpoint;
    if e.is_empty() || e.contains('/') || e == "." || e == ".." {
        return Err(RegisterError::InvalidEndpoint(e.clone()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_validation_table() {
        // (version, resource name, endpoint, expected error text or None)
        let cases: &[(&str, &str, &str, Option<&str>)] = &[
            ("v1beta1", "example.com/sample", "sample.sock", None),
            ("v1beta1", "nvidia.com/gpu", "nvidia.sock", None),
            (
                "v1alpha",
                "example.com/sample",
                "s.sock",
                Some(
                    r#"requested API version "v1alpha" is not supported by kubelet. Supported versions are ["v1beta1"]"#,
                ),
            ),
            (
                "",
                "example.com/sample",
                "s.sock",
                Some(
                    r#"requested API version "" is not supported by kubelet. Supported versions are ["v1beta1"]"#,
                ),
            ),
            // No domain: a native resource name.
            (
                "v1beta1",
                "sample",
                "s.sock",
                Some(r#"the ResourceName "sample" is invalid"#),
            ),
            // The kubernetes.io domain is reserved for native resources.
            (
                "v1beta1",
                "kubernetes.io/sample",
                "s.sock",
                Some(r#"the ResourceName "kubernetes.io/sample" is invalid"#),
            ),
            (
                "v1beta1",
                "foo.kubernetes.io/gpu",
                "s.sock",
                Some(r#"the ResourceName "foo.kubernetes.io/gpu" is invalid"#),
            ),
            // requests. prefix and invalid qualified names.
            (
                "v1beta1",
                "requests.example.com/x",
                "s.sock",
                Some(r#"the ResourceName "requests.example.com/x" is invalid"#),
            ),
            (
                "v1beta1",
                "example.com/Bad_Name!",
                "s.sock",
                Some(r#"the ResourceName "example.com/Bad_Name!" is invalid"#),
            ),
            (
                "v1beta1",
                "example.com/sample",
                "../kubelet.sock",
                Some(
                    r#"invalid endpoint "../kubelet.sock": must be a socket name in the device plugin directory"#,
                ),
            ),
            (
                "v1beta1",
                "example.com/sample",
                "",
                Some(
                    r#"invalid endpoint "": must be a socket name in the device plugin directory"#,
                ),
            ),
        ];
        for (version, name, endpoint, want) in cases {
            let req = RegisterRequest {
                version: version.to_string(),
                endpoint: endpoint.to_string(),
                resource_name: name.to_string(),
                options: None,
            };
            let got = validate(&req).err().map(|e| e.to_string());
            assert_eq!(got.as_deref(), *want, "{version} {name} {endpoint}");
        }
    }
}
