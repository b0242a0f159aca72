//! The CSR approver (upstream's `csrapproving`, `sarapprove.go`): a kubelet
//! client request (`kubernetes.io/kube-apiserver-client-kubelet`, subject
//! `CN=system:node:<name>, O=system:nodes`, client usages) is approved when its
//! requester may create `certificatesigningrequests/selfnodeclient` (a node
//! renewing its own certificate) or `…/nodeclient` (a bootstrap token), asked
//! with a SubjectAccessReview for the identity the API server recorded in the
//! request. Anything else is left for a person (`kubectl certificate approve`).
//!
//! Berth's one extension, as k3s issues kube-proxy's certificate from its
//! server: a `kubernetes.io/kube-apiserver-client` request from a bootstrap
//! token (`system:bootstrappers`) whose subject is exactly `CN=system:kube-proxy`
//! or `CN=system:berth-ingress` (no other attribute, no SANs, client usages) is
//! approved too, so a joining `berth agent` runs its service proxy and ingress
//! controller under their own users, not the node's. Whoever holds a bootstrap
//! token can get those two identities, so their roles must stay narrow (the
//! ingress controller's reads Secrets: it serves their TLS certificates).

use std::sync::Arc;
use std::time::Duration;

use berth_authz::bootstrap::agent_policy::{BOOTSTRAPPERS_GROUP, INGRESS_USER, KUBE_PROXY_USER};
use futures::StreamExt;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Controller};
use tracing::{debug, info, warn};

use super::{
    API_SERVER_CLIENT_SIGNER, APPROVED, Error, KUBELET_CLIENT_SIGNER, Request, approval, issued,
    usages, validate_api_server_client_usages, validate_kubelet_client,
};

/// The approval condition's reason.
pub const REASON: &str = "AutoApproved";
pub const SELF_NODE_CLIENT_MESSAGE: &str =
    "Auto approving self kubelet client certificate after SubjectAccessReview.";
pub const NODE_CLIENT_MESSAGE: &str =
    "Auto approving kubelet client certificate after SubjectAccessReview.";
pub const NODE_COMPONENT_MESSAGE: &str =
    "Auto approving Berth node component client certificate requested with a bootstrap token.";

/// How soon a recognised request whose reviews said no is asked about again.
const RETRY_UNAUTHORIZED: Duration = Duration::from_secs(60);

/// A request recognised as one a SubjectAccessReview can approve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recognized {
    /// The subresource of `certificatesigningrequests` the requester must be
    /// allowed to `create`.
    pub subresource: &'static str,
    pub message: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Already approved, denied or issued, or not recognised.
    Skip,
    /// Approve after the first of these SubjectAccessReviews allows it.
    Ask(Vec<Recognized>),
    /// Approve now (Berth's node components, see the module docs).
    Approve(&'static str),
}

/// Upstream's `isNodeClientCert`.
fn is_node_client(csr: &CertificateSigningRequest, req: &Request) -> bool {
    csr.spec.signer_name == KUBELET_CLIENT_SIGNER
        && validate_kubelet_client(req, &usages(csr)).is_ok()
}

/// Berth's node components: exactly `CN=<user>`, from a bootstrap token.
fn is_node_component(csr: &CertificateSigningRequest, req: &Request) -> bool {
    let from_bootstrap = csr
        .spec
        .groups
        .as_ref()
        .is_some_and(|g| g.iter().any(|g| g == BOOTSTRAPPERS_GROUP));
    let only_cn = req.subject.len() == 1
        && [KUBE_PROXY_USER, INGRESS_USER].contains(&req.common_name.as_str());
    csr.spec.signer_name == API_SERVER_CLIENT_SIGNER
        && from_bootstrap
        && only_cn
        && !req.has_sans()
        && validate_api_server_client_usages(&usages(csr)).is_ok()
}

/// What to do with `csr` (upstream's `handle` before its reviews).
pub fn decide(csr: &CertificateSigningRequest, req: &Request) -> Decision {
    let (approved, denied) = approval(csr);
    if issued(csr) || approved || denied {
        return Decision::Skip;
    }
    if is_node_component(csr, req) {
        return Decision::Approve(NODE_COMPONENT_MESSAGE);
    }
    let mut ask = Vec::new();
    if is_node_client(csr, req) {
        if csr.spec.username.as_deref() == Some(req.common_name.as_str()) {
            ask.push(Recognized {
                subresource: "selfnodeclient",
                message: SELF_NODE_CLIENT_MESSAGE,
            });
        }
        ask.push(Recognized {
            subresource: "nodeclient",
            message: NODE_CLIENT_MESSAGE,
        });
    }
    if ask.is_empty() {
        Decision::Skip
    } else {
        Decision::Ask(ask)
    }
}

/// The SubjectAccessReview upstream's `authorize` sends: may the requester
/// `create certificatesigningrequests/<subresource>`?
pub fn review(csr: &CertificateSigningRequest, subresource: &str) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: csr.spec.username.clone(),
            uid: csr.spec.uid.clone(),
            groups: csr.spec.groups.clone(),
            extra: csr.spec.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                group: Some("certificates.k8s.io".into()),
                resource: Some("certificatesigningrequests".into()),
                verb: Some("create".into()),
                subresource: Some(subresource.into()),
                version: Some("*".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// `csr` with upstream's approval condition appended.
pub fn approved(csr: &CertificateSigningRequest, message: &str) -> CertificateSigningRequest {
    let mut c = csr.clone();
    c.status
        .get_or_insert_with(CertificateSigningRequestStatus::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(CertificateSigningRequestCondition {
            type_: APPROVED.into(),
            status: "True".into(),
            reason: Some(REASON.into()),
            message: Some(message.into()),
            last_update_time: Some(Time(k8s_openapi::jiff::Timestamp::now())),
            ..Default::default()
        });
    c
}

struct Ctx {
    client: kube::Client,
}

/// Runs the approver until the process ends.
pub async fn run(client: kube::Client) {
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    Controller::new(csrs, berth_runtime::reflect::informer_config())
        .run(reconcile, error_policy, Arc::new(Ctx { client }))
        .for_each(|_| async {})
        .await;
}

fn error_policy(csr: Arc<CertificateSigningRequest>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    warn!(csr = csr.metadata.name.as_deref().unwrap_or(""), error = %err, "approving the CertificateSigningRequest failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

async fn reconcile(csr: Arc<CertificateSigningRequest>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = csr.metadata.name.clone().unwrap_or_default();
    let req = match Request::parse(super::request_pem(&csr)) {
        Ok(r) => r,
        Err(reason) => {
            // The API server validated it; nothing will make it parse later.
            warn!(csr = %name, "{}", Error::Parse { name: name.clone(), reason });
            return Ok(Action::await_change());
        }
    };
    let message = match decide(&csr, &req) {
        Decision::Skip => return Ok(Action::await_change()),
        Decision::Approve(message) => Some(message),
        Decision::Ask(recognized) => {
            let reviews: Api<SubjectAccessReview> = Api::all(ctx.client.clone());
            let mut allowed = None;
            for r in &recognized {
                let answer = reviews
                    .create(&PostParams::default(), &review(&csr, r.subresource))
                    .await?;
                if answer.status.is_some_and(|s| s.allowed) {
                    allowed = Some(r.message);
                    break;
                }
            }
            if allowed.is_none() {
                let tried: Vec<&str> = recognized.iter().map(|r| r.subresource).collect();
                debug!(csr = %name, ?tried, "recognized csr but subject access review was not approved");
                // Upstream retries these with back-off: a binding may come later.
                return Ok(Action::requeue(RETRY_UNAUTHORIZED));
            }
            allowed
        }
    };
    if let Some(message) = message {
        let api: Api<CertificateSigningRequest> = Api::all(ctx.client.clone());
        let body = approved(&csr, message);
        api.replace_subresource("approval", &name, &PostParams::default(), &body)
            .await?;
        info!(csr = %name, user = csr.spec.username.as_deref().unwrap_or(""), "approved");
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{csr, request_pem, with_condition};
    use super::*;

    const CLIENT: &[&str] = &["digital signature", "key encipherment", "client auth"];
    const BOOTSTRAP: &[&str] = &["system:bootstrappers", "system:authenticated"];

    fn decide_for(
        cn: &str,
        orgs: &[&str],
        signer: &str,
        usages: &[&str],
        user: &str,
        groups: &[&str],
    ) -> Decision {
        let pem = request_pem(cn, orgs, &[]);
        let c = csr(&pem, signer, usages, user, groups);
        decide(&c, &Request::parse(pem.as_bytes()).unwrap())
    }

    fn ask(subs: &[&'static str]) -> Decision {
        Decision::Ask(
            subs.iter()
                .map(|s| Recognized {
                    subresource: s,
                    message: if *s == "selfnodeclient" {
                        SELF_NODE_CLIENT_MESSAGE
                    } else {
                        NODE_CLIENT_MESSAGE
                    },
                })
                .collect(),
        )
    }

    #[test]
    fn recognises_kubelet_client_and_berth_component_requests() {
        let node = "system:node:n1";
        let nodes = &["system:nodes"][..];
        let kubelet = KUBELET_CLIENT_SIGNER;
        let client = API_SERVER_CLIENT_SIGNER;
        let cases = [
            (
                "a bootstrap",
                decide_for(
                    node,
                    nodes,
                    kubelet,
                    CLIENT,
                    "system:bootstrap:abcdef",
                    BOOTSTRAP,
                ),
                ask(&["nodeclient"]),
            ),
            (
                "a renewal by the same node",
                decide_for(node, nodes, kubelet, CLIENT, node, &["system:nodes"]),
                ask(&["selfnodeclient", "nodeclient"]),
            ),
            (
                "another signer",
                decide_for(node, nodes, "example.com/x", CLIENT, node, &[]),
                Decision::Skip,
            ),
            (
                "server usages",
                decide_for(node, nodes, kubelet, &["server auth"], node, &[]),
                Decision::Skip,
            ),
            (
                "not a node subject",
                decide_for("jane", &[], kubelet, CLIENT, "jane", &[]),
                Decision::Skip,
            ),
            (
                "kube-proxy from a bootstrap token",
                decide_for(
                    KUBE_PROXY_USER,
                    &[],
                    client,
                    CLIENT,
                    "system:bootstrap:abcdef",
                    BOOTSTRAP,
                ),
                Decision::Approve(NODE_COMPONENT_MESSAGE),
            ),
            (
                "the ingress controller from a bootstrap token",
                decide_for(
                    INGRESS_USER,
                    &[],
                    client,
                    &["client auth"],
                    "system:bootstrap:abcdef",
                    BOOTSTRAP,
                ),
                Decision::Approve(NODE_COMPONENT_MESSAGE),
            ),
            (
                "kube-proxy with a group",
                decide_for(
                    KUBE_PROXY_USER,
                    &["system:masters"],
                    client,
                    CLIENT,
                    "system:bootstrap:abcdef",
                    BOOTSTRAP,
                ),
                Decision::Skip,
            ),
            (
                "another user from a bootstrap token",
                decide_for(
                    "system:admin",
                    &[],
                    client,
                    CLIENT,
                    "system:bootstrap:abcdef",
                    BOOTSTRAP,
                ),
                Decision::Skip,
            ),
            (
                "kube-proxy asked by someone else",
                decide_for(
                    KUBE_PROXY_USER,
                    &[],
                    client,
                    CLIENT,
                    "jane",
                    &["system:authenticated"],
                ),
                Decision::Skip,
            ),
            (
                "kube-proxy for serving",
                decide_for(
                    KUBE_PROXY_USER,
                    &[],
                    client,
                    &["server auth"],
                    "system:bootstrap:abcdef",
                    BOOTSTRAP,
                ),
                Decision::Skip,
            ),
        ];
        for (what, got, want) in cases {
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn decided_or_issued_requests_are_left_alone() {
        let pem = request_pem("system:node:n1", &["system:nodes"], &[]);
        let req = Request::parse(pem.as_bytes()).unwrap();
        let base = csr(
            &pem,
            KUBELET_CLIENT_SIGNER,
            CLIENT,
            "system:bootstrap:a",
            BOOTSTRAP,
        );
        for t in [APPROVED, super::super::DENIED] {
            assert_eq!(
                decide(&with_condition(base.clone(), t), &req),
                Decision::Skip,
                "{t}"
            );
        }
        let mut issued = base.clone();
        issued.status = Some(CertificateSigningRequestStatus {
            certificate: Some(k8s_openapi::ByteString(b"x".to_vec())),
            ..Default::default()
        });
        assert_eq!(decide(&issued, &req), Decision::Skip);
    }

    #[test]
    fn reviews_and_approvals_as_upstream() {
        let pem = request_pem("system:node:n1", &["system:nodes"], &[]);
        let mut c = csr(
            &pem,
            KUBELET_CLIENT_SIGNER,
            CLIENT,
            "system:bootstrap:a",
            BOOTSTRAP,
        );
        c.spec.uid = Some("u1".into());
        let r = review(&c, "nodeclient");
        assert_eq!(r.spec.user.as_deref(), Some("system:bootstrap:a"));
        assert_eq!(r.spec.uid.as_deref(), Some("u1"));
        assert_eq!(r.spec.groups, c.spec.groups);
        let attrs = r.spec.resource_attributes.unwrap();
        assert_eq!(
            (
                attrs.group.as_deref(),
                attrs.resource.as_deref(),
                attrs.verb.as_deref(),
                attrs.subresource.as_deref(),
                attrs.version.as_deref()
            ),
            (
                Some("certificates.k8s.io"),
                Some("certificatesigningrequests"),
                Some("create"),
                Some("nodeclient"),
                Some("*")
            )
        );
        let a = approved(&c, NODE_CLIENT_MESSAGE);
        let cond = &a.status.unwrap().conditions.unwrap()[0];
        assert_eq!(
            (
                cond.type_.as_str(),
                cond.status.as_str(),
                cond.reason.as_deref(),
                cond.message.as_deref()
            ),
            (
                "Approved",
                "True",
                Some("AutoApproved"),
                Some("Auto approving kubelet client certificate after SubjectAccessReview.")
            )
        );
    }
}
