//! Where each controller's client comes from (upstream's
//! `k8s.io/controller-manager/pkg/clientbuilder`). With
//! `--use-service-account-credentials` (on in `berth server`, as kubeadm and
//! k3s run kube-controller-manager) every controller runs as its own
//! ServiceAccount `kube-system/<controller>`, bound by the bootstrap policy to
//! `system:controller:<controller>`, so each holds only its own rights; the
//! controller-manager's own user only creates those ServiceAccounts and their
//! tokens. Without it, every controller shares one client.
//!
//! As upstream, where the controllers' shared informers list and watch with
//! the controller-manager's own credentials (`system:kube-controller-manager`
//! may list and watch everything) and only the controllers' own requests
//! carry their ServiceAccount's, a controller's lists and watches go out as
//! the controller-manager and every other request (reads of one object,
//! writes) as the controller: the `system:controller:*` roles, which hold
//! few `list`/`watch` rights, are upstream's unchanged.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ObjectMeta, PostParams};
use tracing::{info, warn};

/// The namespace of the controllers' ServiceAccounts.
pub const NAMESPACE: &str = "kube-system";
/// How long a controller's token is asked for (upstream's default 1 h).
const TOKEN_SECONDS: i64 = 3600;
/// Retry pause while the API refuses (it may still be starting).
const RETRY: Duration = Duration::from_secs(1);

/// Hands out one client per controller.
#[derive(Clone)]
pub enum ClientBuilder {
    /// Every controller uses this client (the controller-manager's own user).
    Shared(kube::Client),
    /// Each controller runs as its ServiceAccount.
    ServiceAccounts(Arc<ServiceAccountBuilder>),
}

/// What a per-controller client is made of.
pub struct ServiceAccountBuilder {
    /// The controller-manager's own client: creates the ServiceAccounts and
    /// requests their tokens.
    root: kube::Client,
    /// The cluster (URL, CA, headers) every controller's client reaches; its
    /// credentials are replaced by the controller's token.
    base: kube::Config,
    /// Where the tokens are kept (0700; a token file each, which kube's
    /// client re-reads as it changes).
    token_dir: PathBuf,
    /// One client per controller, however many of its loops ask (the CSR
    /// approver and signer are both `certificate-controller`), so one task
    /// keeps each token fresh.
    clients: Mutex<HashMap<&'static str, Arc<tokio::sync::OnceCell<kube::Client>>>>,
}

impl ClientBuilder {
    /// The controller-manager's own client (leader election, the legacy
    /// token controller, which upstream runs with the root client too).
    pub fn root(&self) -> kube::Client {
        match self {
            ClientBuilder::Shared(c) => c.clone(),
            ClientBuilder::ServiceAccounts(b) => b.root.clone(),
        }
    }

    /// Each controller as its ServiceAccount: `root` creates the accounts
    /// and their tokens, kept under `token_dir`; `base` says how to reach
    /// the API server.
    pub fn service_accounts(root: kube::Client, base: kube::Config, token_dir: PathBuf) -> Self {
        ClientBuilder::ServiceAccounts(Arc::new(ServiceAccountBuilder {
            root,
            base,
            token_dir,
            clients: Mutex::default(),
        }))
    }

    /// The client of `controller` (an upstream controller name such as
    /// `replicaset-controller`). Waits until its ServiceAccount and first
    /// token exist; a task keeps the token fresh afterwards.
    pub async fn client(&self, controller: &'static str) -> kube::Client {
        let b = match self {
            ClientBuilder::Shared(c) => return c.clone(),
            ClientBuilder::ServiceAccounts(b) => b.clone(),
        };
        let cell = {
            let mut clients = b.clients.lock().unwrap_or_else(|e| e.into_inner());
            clients.entry(controller).or_default().clone()
        };
        cell.get_or_init(|| first_client(b.clone(), controller))
            .await
            .clone()
    }
}

/// Creates `controller`'s ServiceAccount and first token, and the task that
/// renews it.
async fn first_client(b: Arc<ServiceAccountBuilder>, controller: &'static str) -> kube::Client {
    let file = b.token_dir.join(format!("{controller}.token"));
    let expires = loop {
        match b.refresh(controller, &file).await {
            Ok(e) => break e,
            Err(e) => {
                warn!(controller, error = %e, "getting the controller's ServiceAccount token");
                tokio::time::sleep(RETRY).await;
            }
        }
    };
    let client = match b.client_for(&file) {
        Ok(c) => c,
        Err(e) => {
            // The base configuration made the root client already, so this
            // cannot fail in practice; running with the root client keeps
            // the controller working rather than stopping it.
            warn!(controller, error = %e, "building the controller's client: using the controller-manager's");
            return b.root.clone();
        }
    };
    tokio::spawn(keep_fresh(b, controller, file, expires));
    client
}

impl ServiceAccountBuilder {
    fn client_for(&self, token_file: &std::path::Path) -> Result<kube::Client, kube::Error> {
        let mut config = self.base.clone();
        config.auth_info = kube::config::AuthInfo {
            token_file: Some(token_file.display().to_string()),
            ..Default::default()
        };
        let own = kube::Client::try_from(config)?;
        Ok(routed(self.root.clone(), own))
    }

    /// Makes sure the ServiceAccount exists, asks for a token and writes it
    /// to `file`; returns how long the token lives.
    async fn refresh(&self, controller: &str, file: &std::path::Path) -> Result<Duration, String> {
        let api: Api<ServiceAccount> = Api::namespaced(self.root.clone(), NAMESPACE);
        match api.get_opt(controller).await.map_err(|e| e.to_string())? {
            Some(_) => {}
            None => {
                let sa = ServiceAccount {
                    metadata: ObjectMeta {
                        name: Some(controller.into()),
                        namespace: Some(NAMESPACE.into()),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                match api.create(&PostParams::default(), &sa).await {
                    Ok(_) => info!(controller, "created the controller's ServiceAccount"),
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
        }
        let request = TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(TOKEN_SECONDS),
                ..Default::default()
            },
            ..Default::default()
        };
        let issued: TokenRequest = api
            .create_subresource("token", controller, &PostParams::default(), &request)
            .await
            .map_err(|e| e.to_string())?;
        let status = issued.status.ok_or("the token request has no status")?;
        write_token(file, &status.token)?;
        let now = k8s_openapi::jiff::Timestamp::now();
        let left = status.expiration_timestamp.0.duration_since(now);
        Ok(Duration::from_secs(
            u64::try_from(left.as_secs()).unwrap_or(0),
        ))
    }
}

/// A client whose lists and watches go out as `root` and everything else as
/// `own` (see the module's comment).
fn routed(root: kube::Client, own: kube::Client) -> kube::Client {
    let namespace = own.default_namespace().to_string();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let client = if lists_or_watches(req.method(), req.uri()) {
            root.clone()
        } else {
            own.clone()
        };
        async move { client.send(req).await }
    });
    kube::Client::new(service, namespace)
}

/// Whether a request is what an informer sends: a list or watch of a
/// collection, or discovery.
fn lists_or_watches(method: &http::Method, uri: &http::Uri) -> bool {
    if method != http::Method::GET {
        return false;
    }
    let watch = uri
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    if watch {
        return true;
    }
    let segments: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        // /api, /apis, /apis/<group>, /version.
        _ => return true,
    };
    matches!(rest, [] | [_] | ["namespaces", _, _])
}

/// Renews the token after 80 % of its life (as the node agent's token
/// manager), retrying every second while the API refuses.
async fn keep_fresh(
    b: Arc<ServiceAccountBuilder>,
    controller: &'static str,
    file: PathBuf,
    mut lifetime: Duration,
) {
    loop {
        tokio::time::sleep(renew_after(lifetime)).await;
        lifetime = loop {
            match b.refresh(controller, &file).await {
                Ok(l) => break l,
                Err(e) => {
                    warn!(controller, error = %e, "renewing the controller's ServiceAccount token");
                    tokio::time::sleep(RETRY).await;
                }
            }
        };
    }
}

/// When a token of `lifetime` is renewed: at 80 %, at least a second on.
fn renew_after(lifetime: Duration) -> Duration {
    (lifetime * 4 / 5).max(RETRY)
}

/// Writes the token aside and renames it into place, so the client never
/// reads half a token; only the owner may read it.
fn write_token(file: &std::path::Path, token: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let err = |e: std::io::Error| format!("{}: {e}", file.display());
    if let Some(dir) = file.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(err)?;
    }
    let tmp = file.with_extension("token.tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(err)?;
    f.write_all(token.as_bytes()).map_err(err)?;
    f.sync_all().map_err(err)?;
    std::fs::rename(&tmp, file).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_watches_go_as_the_controller_manager() {
        let cases = [
            ("GET", "/api/v1/pods", true),
            ("GET", "/api/v1/namespaces", true),
            ("GET", "/api/v1/namespaces/kube-system", false),
            ("GET", "/api/v1/namespaces/kube-system/configmaps", true),
            (
                "GET",
                "/api/v1/namespaces/a/configmaps?labelSelector=x%3Dy",
                true,
            ),
            (
                "GET",
                "/api/v1/namespaces/a/configmaps/kube-root-ca.crt",
                false,
            ),
            (
                "GET",
                "/api/v1/namespaces/a/configmaps?fieldSelector=metadata.name%3Dc&watch=true",
                true,
            ),
            (
                "GET",
                "/apis/apps/v1/replicasets?watch=1&resourceVersion=5",
                true,
            ),
            ("GET", "/apis/apps/v1/namespaces/a/replicasets/r", false),
            (
                "GET",
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
                false,
            ),
            ("GET", "/apis/apps/v1", true),
            ("GET", "/apis", true),
            ("GET", "/api", true),
            ("POST", "/api/v1/namespaces/a/pods", false),
            ("PUT", "/api/v1/namespaces/a/pods/p/status", false),
            ("PATCH", "/apis/apps/v1/namespaces/a/replicasets/r", false),
            ("DELETE", "/api/v1/namespaces/a/pods", false),
        ];
        for (method, uri, want) in cases {
            let m: http::Method = method.parse().unwrap();
            let u: http::Uri = uri.parse().unwrap();
            assert_eq!(lists_or_watches(&m, &u), want, "{method} {uri}");
        }
    }

    #[test]
    fn tokens_are_renewed_at_four_fifths_of_their_life() {
        for (lifetime, want) in [
            (3600, 2880),
            (600, 480),
            (1, 1), // never a busy loop
            (0, 1),
        ] {
            assert_eq!(
                renew_after(Duration::from_secs(lifetime)),
                Duration::from_secs(want),
                "{lifetime}"
            );
        }
    }

    #[test]
    fn a_token_file_is_private_and_replaced_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("berth-cb-{}", std::process::id()));
        let file = dir.join("tokens").join("x.token");
        write_token(&file, "one").unwrap();
        write_token(&file, "two").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "two");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(file.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dir_mode, 0o700);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
