//! Who is asking, and may they: authentication (client certificates,
//! ServiceAccount tokens, anonymous), impersonation, RBAC with upstream's
//! bootstrap policy, the review APIs and TokenRequest, driven by real kubectl
//! over HTTPS and curl. Tokens are also signed and verified by an independent
//! JWT library (Python's PyJWT, installed by `scripts/install-deps`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{Server, stderr, stdout, wait_until};
use serde_json::{Value, json};

const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Upstream's body for every refused credential.
fn unauthorized() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
}

/// JWT and certificate chores done by PyJWT and `cryptography`, so that what
/// the server signs and accepts is checked by code that is not its own.
const PY_HELPER: &str = r#"
import base64, datetime, json, sys, jwt
from cryptography.hazmat.primitives.asymmetric import ec

def b64(d):
    return base64.urlsafe_b64encode(d).rstrip(b"=").decode()

def unb64(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "sign":  # KEY_PEM_FILE KID CLAIMS_JSON
    key = open(args[0], "rb").read()
    print(jwt.encode(json.loads(args[2]), key, algorithm="ES256", headers={"kid": args[1]}))
elif cmd == "sign-other-key":  # KID CLAIMS_JSON
    key = ec.generate_private_key(ec.SECP256R1())
    print(jwt.encode(json.loads(args[1]), key, algorithm="ES256", headers={"kid": args[0]}))
elif cmd == "unsigned":  # KID CLAIMS_JSON: alg none, no signature
    header = json.dumps({"alg": "none", "kid": args[0]}).encode()
    print(b64(header) + "." + b64(args[1].encode()) + ".")
elif cmd == "tamper":  # TOKEN: another subject, the original signature
    h, p, s = args[0].split(".")
    claims = json.loads(unb64(p))
    claims["sub"] = "system:serviceaccount:kube-system:default"
    claims["kubernetes.io"]["namespace"] = "kube-system"
    claims["kubernetes.io"]["serviceaccount"]["name"] = "default"
    print(h + "." + b64(json.dumps(claims).encode()) + "." + s)
elif cmd == "verify":  # JWKS_JSON TOKEN ISSUER AUDIENCE: the claims, checked
    jwks, token = json.loads(args[0]), args[1]
    kid = jwt.get_unverified_header(token)["kid"]
    [key] = [k for k in jwks["keys"] if k["kid"] == kid]
    claims = jwt.decode(token, jwt.PyJWK(key).key, algorithms=["ES256"],
                        issuer=args[2], audience=args[3],
                        options={"require": ["exp", "iat", "nbf", "iss", "aud", "sub"]})
    print(json.dumps(claims))
elif cmd == "client-cert":  # CA_CRT CA_KEY CN ORG OUT_PREFIX
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    from cryptography.hazmat.primitives import hashes, serialization
    ca = x509.load_pem_x509_certificate(open(args[0], "rb").read())
    ca_key = serialization.load_pem_private_key(open(args[1], "rb").read(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = [x509.NameAttribute(NameOID.COMMON_NAME, args[2])]
    if args[3]:
        subject.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, args[3]))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name(subject)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    open(args[4] + ".crt", "wb").write(cert.public_bytes(serialization.Encoding.PEM))
    open(args[4] + ".key", "wb").write(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
else:
    sys.exit("unknown command " + cmd)
"#;

/// Runs the helper; it must succeed. Returns its stdout, trimmed.
fn py(args: &[&str]) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(PY_HELPER)
        .args(args)
        .output()
        .expect("run python3 (scripts/install-deps installs it with PyJWT)");
    assert!(
        out.status.success(),
        "python3 helper {args:?} failed (PyJWT and cryptography come from scripts/install-deps): {}",
        stderr(&out)
    );
    stdout(&out).trim().to_string()
}

fn ca(s: &Server) -> PathBuf {
    s.data_dir.join("tls/server-ca.crt")
}

fn admin_token(s: &Server) -> String {
    std::fs::read_to_string(s.data_dir.join("token"))
        .expect("admin token")
        .trim()
        .to_string()
}

/// How a client proves who it is.
#[derive(Clone, Copy)]
enum Cred<'a> {
    /// Nothing at all: `system:anonymous`.
    Anonymous,
    Token(&'a str),
    /// A client certificate: `<prefix>.crt` and `<prefix>.key`.
    Cert(&'a Path),
}

/// A kubeconfig holding only the server, its CA and `cred`.
fn kubeconfig(s: &Server, name: &str, cred: Cred) -> PathBuf {
    let user = match cred {
        Cred::Anonymous => "{}".to_string(),
        Cred::Token(t) => format!("{{token: {t}}}"),
        Cred::Cert(p) => format!(
            "{{client-certificate: {}.crt, client-key: {}.key}}",
            p.display(),
            p.display()
        ),
    };
    let path = s.data_dir.join(format!("kubeconfig-{name}.yaml"));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: berth\n  cluster: {{server: \"{}\", certificate-authority: {}}}\nusers:\n- name: {name}\n  user: {user}\ncontexts:\n- name: {name}\n  context: {{cluster: berth, user: {name}}}\ncurrent-context: {name}\n",
        s.https,
        ca(s).display()
    );
    std::fs::write(&path, text).expect("write kubeconfig");
    path
}

/// kubectl with another kubeconfig than the admin's.
fn kubectl_with(s: &Server, kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(common::kubectl_path())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(s.data_dir.join("kube-cache-others"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run kubectl")
}

/// A request on the HTTPS port as `cred`; returns (HTTP code, body).
fn api(s: &Server, cred: Cred, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let ca = ca(s);
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-X", method, "-w", "\n%{http_code}", "--cacert"])
        .arg(&ca)
        .args(["-H", "Accept: application/json"]);
    match cred {
        Cred::Anonymous => {}
        Cred::Token(t) => {
            cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
        }
        Cred::Cert(p) => {
            cmd.arg("--cert")
                .arg(p.with_extension("crt"))
                .arg("--key")
                .arg(p.with_extension("key"));
        }
    }
    if let Some(b) = body {
        // HTTP/1.1: a server that answers (401) before the body has arrived ends
        // the HTTP/2 stream with RST_STREAM(NO_ERROR) after the response, as
        // RFC 9113 8.1 says (and Go's server does); curl 7.88 reports that as
        // "(92) Stream error in the HTTP/2 framing layer" instead of the 401.
        cmd.args([
            "--http1.1",
            "-H",
            "Content-Type: application/json",
            "--data-binary",
        ])
        .arg(b.to_string());
    }
    let out = cmd
        .arg(format!("{}{path}", s.https))
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "curl {method} {path}: {}",
        stderr(&out)
    );
    let text = stdout(&out);
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    let v = serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_string()));
    (code.trim().parse().unwrap_or(0), v)
}

/// POSTs a review object as the admin (`kubectl create --raw`, which skips the
/// client-side schema check) and returns the answer.
fn review(s: &Server, path: &str, body: Value) -> Value {
    let out = s.kubectl_stdin(
        &["create", "--raw", path, "-f", "-"],
        Some(&body.to_string()),
    );
    assert!(out.status.success(), "POST {path}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("review JSON")
}

fn token_review(s: &Server, token: &str, audiences: &[&str]) -> Value {
    let mut spec = json!({"token": token});
    if !audiences.is_empty() {
        spec["audiences"] = json!(audiences);
    }
    review(
        s,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}),
    )["status"]
        .clone()
}

fn create_token(s: &Server, args: &[&str]) -> String {
    let mut all = vec!["create", "token"];
    all.extend_from_slice(args);
    s.k(&all).trim().to_string()
}

fn uid(s: &Server, args: &[&str]) -> String {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend(["-o", "jsonpath={.metadata.uid}"]);
    s.k(&all)
}

/// The kid the server publishes (its only key).
fn jwks(s: &Server) -> Value {
    serde_json::from_str(&s.k(&["get", "--raw", "/openid/v1/jwks"])).expect("JWKS JSON")
}

fn kid(s: &Server) -> String {
    let keys = jwks(s);
    keys["keys"][0]["kid"].as_str().expect("a kid").to_string()
}

/// Upstream's ServiceAccount token claims (what `kubectl create token` gets).
fn sa_claims(ns: &str, sa: &str, sa_uid: &str, iat: i64, nbf: i64, exp: i64) -> Value {
    json!({
        "iss": ISSUER,
        "sub": format!("system:serviceaccount:{ns}:{sa}"),
        "aud": [ISSUER],
        "exp": exp, "iat": iat, "nbf": nbf,
        "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": sa, "uid": sa_uid}},
    })
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
}

/// Waits for the aggregation controller to have filled view, edit and admin
/// (admin holds view's rules through edit), as a fresh upstream cluster's
/// controller-manager does shortly after start.
fn wait_for_aggregated_roles(s: &Server) {
    wait_until(
        Duration::from_secs(30),
        "view, edit and admin aggregated",
        || {
            ["view", "edit", "admin"].iter().all(|role| {
                let out = s.kubectl(&["get", "clusterrole", role, "-o", "jsonpath={.rules}"]);
                stdout(&out).contains("\"pods/log\"")
            })
        },
    );
}

/// `kubectl auth whoami -o json`'s userInfo.
fn whoami(out: &Output) -> Value {
    assert!(out.status.success(), "whoami: {}", stderr(out));
    let v: Value = serde_json::from_str(&stdout(out)).expect("whoami JSON");
    assert_eq!(v["kind"], "SelfSubjectReview", "{v}");
    v["status"]["userInfo"].clone()
}

#[test]
fn can_i_follows_upstreams_bootstrap_policy() {
    let s = Server::start("identity-can-i");
    s.k(&["create", "namespace", "team"]);
    s.k(&["create", "namespace", "elsewhere"]);
    s.k(&["create", "serviceaccount", "bare", "-n", "team"]);
    for (binding, role, user) in [
        ("viewer", "view", "viewer"),
        ("editor", "edit", "editor"),
        ("admin", "admin", "adminuser"),
    ] {
        s.k(&[
            "create",
            "rolebinding",
            binding,
            &format!("--clusterrole={role}"),
            &format!("--user={user}"),
            "-n",
            "team",
        ]);
    }

    wait_for_aggregated_roles(&s);

    // (acting as, verb, resource or URL, namespace, allowed) from upstream's
    // bootstrap ClusterRoles (view/edit/admin aggregate their
    // system:aggregate-to-* parts) and bindings (system:discovery,
    // system:public-info-viewer, system:service-account-issuer-discovery).
    let bare = "system:serviceaccount:team:bare";
    let cases: &[(&str, &str, &str, &str, bool)] = &[
        ("viewer", "get", "pods", "team", true),
        ("viewer", "list", "deployments.apps", "team", true),
        ("viewer", "watch", "configmaps", "team", true),
        ("viewer", "get", "pods/log", "team", true),
        ("viewer", "get", "secrets", "team", false),
        ("viewer", "create", "pods", "team", false),
        ("viewer", "create", "pods/exec", "team", false),
        ("viewer", "get", "pods", "elsewhere", false),
        ("viewer", "list", "nodes", "", false),
        ("editor", "create", "deployments.apps", "team", true),
        ("editor", "get", "secrets", "team", true),
        ("editor", "create", "pods/exec", "team", true),
        ("editor", "delete", "pods", "team", true),
        (
            "editor",
            "create",
            "rolebindings.rbac.authorization.k8s.io",
            "team",
            false,
        ),
        (
            "editor",
            "create",
            "roles.rbac.authorization.k8s.io",
            "team",
            false,
        ),
        (
            "adminuser",
            "create",
            "rolebindings.rbac.authorization.k8s.io",
            "team",
            true,
        ),
        (
            "adminuser",
            "create",
            "roles.rbac.authorization.k8s.io",
            "team",
            true,
        ),
        (
            "adminuser",
            "create",
            "localsubjectaccessreviews.authorization.k8s.io",
            "team",
            true,
        ),
        ("adminuser", "delete", "resourcequotas", "team", false),
        ("adminuser", "delete", "namespaces", "", false),
        (bare, "list", "pods", "team", false),
        (bare, "get", "/openid/v1/jwks", "", true),
        ("viewer", "get", "/openid/v1/jwks", "", false),
        ("viewer", "get", "/healthz", "", true),
        ("viewer", "get", "/api", "", true),
        ("viewer", "get", "/metrics", "", false),
        (
            "viewer",
            "create",
            "selfsubjectaccessreviews.authorization.k8s.io",
            "",
            true,
        ),
    ];
    for &(who, verb, what, ns, allowed) in cases {
        let as_user = format!("--as={who}");
        let mut args = vec!["auth", "can-i", verb, what, as_user.as_str()];
        if !ns.is_empty() {
            args.extend(["-n", ns]);
        }
        let out = s.kubectl(&args);
        let (want_text, want_code) = if allowed { ("yes", 0) } else { ("no", 1) };
        assert_eq!(
            (stdout(&out).trim(), out.status.code()),
            (want_text, Some(want_code)),
            "can-i {verb} {what} -n {ns:?} as {who}: {}",
            stderr(&out)
        );
    }

    // The reason names the binding that allowed it (upstream's describer).
    let local = review(
        &s,
        "/apis/authorization.k8s.io/v1/namespaces/team/localsubjectaccessreviews",
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
               "metadata": {"namespace": "team"},
               "spec": {"user": "viewer", "resourceAttributes": {"namespace": "team", "verb": "get", "resource": "pods"}}}),
    );
    assert_eq!(
        local["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"viewer/team\" of ClusterRole \"view\" to User \"viewer\""})
    );

    // Anonymous may not even ask (system:basic-user is bound to
    // system:authenticated only), so can-i fails as upstream's does...
    let out = s.kubectl(&[
        "auth",
        "can-i",
        "get",
        "/healthz",
        "--as=system:anonymous",
        "--as-group=system:unauthenticated",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (Forbidden): selfsubjectaccessreviews.authorization.k8s.io is forbidden: User \"system:anonymous\" cannot create resource \"selfsubjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"
    );
    // ...and the admin asks for it with a SubjectAccessReview.
    for (path, allowed) in [
        ("/healthz", true),
        ("/version", true),
        ("/readyz", true),
        ("/api", false),
        ("/openid/v1/jwks", false),
    ] {
        let r = review(
            &s,
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                   "spec": {"user": "system:anonymous", "groups": ["system:unauthenticated"],
                            "nonResourceAttributes": {"verb": "get", "path": path}}}),
        );
        assert_eq!(r["status"]["allowed"], allowed, "anonymous get {path}: {r}");
        if path == "/healthz" {
            assert_eq!(
                r["status"]["reason"],
                "RBAC: allowed by ClusterRoleBinding \"system:public-info-viewer\" of ClusterRole \"system:public-info-viewer\" to Group \"system:unauthenticated\""
            );
        }
    }
    // What the review said is what an anonymous request gets.
    let (code, body) = api(&s, Cred::Anonymous, "GET", "/healthz", None);
    assert_eq!((code, body), (200, json!("ok")));
    let (code, body) = api(&s, Cred::Anonymous, "GET", "/api", None);
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/api\""
    );
    let (code, body) = api(
        &s,
        Cred::Anonymous,
        "GET",
        "/api/v1/namespaces/team/pods",
        None,
    );
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["message"],
        "pods is forbidden: User \"system:anonymous\" cannot list resource \"pods\" in API group \"\" in the namespace \"team\""
    );

    // can-i --list: the view rules (Resources, Non-Resource URLs, Resource
    // Names, Verbs), pods readable, secrets absent.
    let list = s.k(&["auth", "can-i", "--list", "-n", "team", "--as=viewer"]);
    let header: Vec<&str> = list.lines().next().unwrap_or("").split("  ").collect();
    assert_eq!(
        header
            .iter()
            .map(|h| h.trim())
            .filter(|h| !h.is_empty())
            .collect::<Vec<_>>(),
        ["Resources", "Non-Resource URLs", "Resource Names", "Verbs"],
        "{list}"
    );
    let row = |resource: &str| -> Option<Vec<String>> {
        list.lines()
            .map(|l| {
                l.split_whitespace()
                    .map(String::from)
                    .collect::<Vec<String>>()
            })
            .find(|cols| cols.first().map(String::as_str) == Some(resource))
    };
    for resource in ["pods", "deployments.apps", "configmaps", "pods/log"] {
        assert_eq!(
            row(resource),
            Some(
                [resource, "[]", "[]", "[get", "list", "watch]"]
                    .map(String::from)
                    .to_vec()
            ),
            "{resource} in\n{list}"
        );
    }
    assert_eq!(
        row("selfsubjectaccessreviews.authorization.k8s.io"),
        Some(
            [
                "selfsubjectaccessreviews.authorization.k8s.io",
                "[]",
                "[]",
                "[create]"
            ]
            .map(String::from)
            .to_vec()
        ),
        "{list}"
    );
    assert_eq!(row("secrets"), None, "{list}");
    assert_eq!(row("pods/exec"), None, "{list}");
}

#[test]
fn service_account_token_is_held_to_its_role() {
    let s = Server::start("identity-sa");
    s.k(&["create", "namespace", "ns"]);
    s.k(&["create", "namespace", "other"]);
    s.k(&["create", "serviceaccount", "sa", "-n", "ns"]);
    s.k(&[
        "create",
        "role",
        "pod-reader",
        "--verb=get,list",
        "--resource=pods",
        "-n",
        "ns",
    ]);
    s.k(&[
        "create",
        "rolebinding",
        "pod-reader",
        "--role=pod-reader",
        "--serviceaccount=ns:sa",
        "-n",
        "ns",
    ]);
    s.k(&["run", "p", "--image=busybox", "--restart=Never", "-n", "ns"]);
    let token = create_token(&s, &["sa", "-n", "ns"]);
    let kc = kubeconfig(&s, "sa", Cred::Token(&token));

    let out = kubectl_with(&s, &kc, &["get", "pods", "-n", "ns", "-o", "name"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "pod/p");
    let out = kubectl_with(&s, &kc, &["get", "pod", "p", "-n", "ns", "-o", "name"]);
    assert_eq!(stdout(&out).trim(), "pod/p", "{}", stderr(&out));

    // (kubectl args, the exact error), all upstream's texts.
    let who = "User \"system:serviceaccount:ns:sa\"";
    let cases: &[(&[&str], String)] = &[
        (
            &["get", "secrets", "-n", "ns"],
            format!(
                "Error from server (Forbidden): secrets is forbidden: {who} cannot list resource \"secrets\" in API group \"\" in the namespace \"ns\""
            ),
        ),
        (
            &["get", "pods", "-n", "other"],
            format!(
                "Error from server (Forbidden): pods is forbidden: {who} cannot list resource \"pods\" in API group \"\" in the namespace \"other\""
            ),
        ),
        (
            &["get", "pods", "-A"],
            format!(
                "Error from server (Forbidden): pods is forbidden: {who} cannot list resource \"pods\" in API group \"\" at the cluster scope"
            ),
        ),
        (
            &["delete", "pod", "p", "-n", "ns"],
            format!(
                "Error from server (Forbidden): pods \"p\" is forbidden: {who} cannot delete resource \"pods\" in API group \"\" in the namespace \"ns\""
            ),
        ),
        (
            &["get", "deployments.apps", "-n", "ns"],
            format!(
                "Error from server (Forbidden): deployments.apps is forbidden: {who} cannot list resource \"deployments\" in API group \"apps\" in the namespace \"ns\""
            ),
        ),
    ];
    for (args, want) in cases {
        let out = kubectl_with(&s, &kc, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stdout(&out));
        assert_eq!(stderr(&out).trim(), want, "{args:?}");
    }
    // The refused delete wrote nothing.
    assert_eq!(
        s.k(&["get", "pod", "p", "-n", "ns", "-o", "name"]).trim(),
        "pod/p"
    );

    // The same over plain HTTPS: upstream's Status, with details.kind (and
    // group and name when the request had them).
    let cases: &[(&str, &str, u16, Value)] = &[
        (
            "GET",
            "/api/v1/namespaces/ns/secrets",
            403,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "secrets is forbidden: User \"system:serviceaccount:ns:sa\" cannot list resource \"secrets\" in API group \"\" in the namespace \"ns\"",
                   "reason": "Forbidden", "details": {"kind": "secrets"}, "code": 403}),
        ),
        (
            "GET",
            "/api/v1/namespaces/other/pods",
            403,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "pods is forbidden: User \"system:serviceaccount:ns:sa\" cannot list resource \"pods\" in API group \"\" in the namespace \"other\"",
                   "reason": "Forbidden", "details": {"kind": "pods"}, "code": 403}),
        ),
        (
            "GET",
            "/apis/apps/v1/namespaces/ns/deployments/web",
            403,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot get resource \"deployments\" in API group \"apps\" in the namespace \"ns\"",
                   "reason": "Forbidden", "details": {"name": "web", "group": "apps", "kind": "deployments"}, "code": 403}),
        ),
    ];
    for (method, path, code, want) in cases {
        let (got_code, body) = api(&s, Cred::Token(&token), method, path, None);
        assert_eq!((got_code, &body), (*code, want), "{method} {path}");
    }
    let (code, body) = api(
        &s,
        Cred::Token(&token),
        "GET",
        "/api/v1/namespaces/ns/pods",
        None,
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["items"][0]["metadata"]["name"], "p", "{body}");
}

#[test]
fn token_validity_follows_bound_objects_audience_and_expiry() {
    let s = Server::start("identity-tokens");
    s.k(&["create", "namespace", "ns"]);
    s.k(&["create", "serviceaccount", "sa", "-n", "ns"]);
    let sa_uid = uid(&s, &["serviceaccount", "sa", "-n", "ns"]);
    let whoami_code = |token: &str| {
        api(
            &s,
            Cred::Token(token),
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            Some(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
        )
    };

    // A token bound to a pod lives as long as the pod (which stays Pending:
    // no node runs here).
    s.k(&["run", "p", "--image=busybox", "--restart=Never", "-n", "ns"]);
    let pod_uid = uid(&s, &["pod", "p", "-n", "ns"]);
    let bound = create_token(
        &s,
        &[
            "sa",
            "-n",
            "ns",
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            "p",
        ],
    );
    let kc = kubeconfig(&s, "bound", Cred::Token(&bound));
    let me = whoami(&kubectl_with(&s, &kc, &["auth", "whoami", "-o", "json"]));
    assert_eq!(me["username"], "system:serviceaccount:ns:sa", "{me}");
    assert_eq!(
        me["extra"]["authentication.kubernetes.io/pod-name"],
        json!(["p"]),
        "{me}"
    );
    assert_eq!(
        me["extra"]["authentication.kubernetes.io/pod-uid"],
        json!([pod_uid]),
        "{me}"
    );
    s.k(&[
        "delete",
        "pod",
        "p",
        "-n",
        "ns",
        "--grace-period=0",
        "--force",
    ]);
    wait_until(Duration::from_secs(10), "pod p gone", || {
        stderr(&s.kubectl(&["get", "pod", "p", "-n", "ns"])).contains("NotFound")
    });
    wait_until(
        Duration::from_secs(5),
        "the pod-bound token refused",
        || whoami_code(&bound).0 == 401,
    );
    assert_eq!(whoami_code(&bound), (401, unauthorized()));
    let out = kubectl_with(&s, &kc, &["auth", "whoami"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        "error: You must be logged in to the server (Unauthorized)"
    );
    let st = token_review(&s, &bound, &[]);
    assert_eq!(st["authenticated"], Value::Null, "{st}");
    assert!(
        st["error"]
            .as_str()
            .unwrap_or("")
            .contains("pods \"p\" not found"),
        "{st}"
    );

    // Another audience: not for this API server, yet a TokenReview asking for
    // that audience authenticates it.
    let other = create_token(&s, &["sa", "-n", "ns", "--audience", "other"]);
    assert_eq!(whoami_code(&other), (401, unauthorized()));
    let st = token_review(&s, &other, &["other"]);
    assert_eq!(st["authenticated"], true, "{st}");
    assert_eq!(st["audiences"], json!(["other"]), "{st}");
    assert_eq!(
        st["user"]["username"], "system:serviceaccount:ns:sa",
        "{st}"
    );
    assert_eq!(st["user"]["uid"], sa_uid.as_str(), "{st}");
    assert_eq!(token_review(&s, &other, &[])["authenticated"], Value::Null);

    // Tokens signed here with the server's own key by PyJWT: only the times
    // differ, so each refusal is about time (go-jose's 60 s leeway applies).
    let key = s.data_dir.join("tls/service-account.key");
    let key = key.to_str().expect("utf-8 path");
    let kid = kid(&s);
    let t = now();
    let cases: &[(&str, i64, i64, i64, Option<&str>)] = &[
        // (what, iat, nbf, exp relative to now, TokenReview's complaint or accepted)
        ("valid", -600, -600, 600, None),
        ("expired within the leeway", -600, -600, -30, None),
        (
            "expired",
            -3600,
            -3600,
            -120,
            Some("service account token has expired"),
        ),
        ("not valid yet", -600, 600, 3600, Some("not valid yet")),
    ];
    for &(what, iat, nbf, exp, refused) in cases {
        let claims = sa_claims("ns", "sa", &sa_uid, t + iat, t + nbf, t + exp);
        let token = py(&["sign", key, &kid, &claims.to_string()]);
        let (code, body) = whoami_code(&token);
        let st = token_review(&s, &token, &[]);
        match refused {
            None => {
                assert_eq!(code, 201, "{what}: {body}");
                assert_eq!(
                    body["status"]["userInfo"]["username"], "system:serviceaccount:ns:sa",
                    "{what}"
                );
                assert_eq!(st["authenticated"], true, "{what}: {st}");
            }
            Some(why) => {
                assert_eq!((code, body), (401, unauthorized()), "{what}");
                assert_eq!(st["authenticated"], Value::Null, "{what}: {st}");
                assert!(
                    st["error"].as_str().unwrap_or("").contains(why),
                    "{what}: {st}"
                );
            }
        }
    }

    // A ServiceAccount's tokens die with it, and do not come back with a new
    // ServiceAccount of the same name (another uid).
    s.k(&["create", "serviceaccount", "gone", "-n", "ns"]);
    let gone = create_token(&s, &["gone", "-n", "ns"]);
    assert_eq!(whoami_code(&gone).0, 201);
    s.k(&["delete", "serviceaccount", "gone", "-n", "ns"]);
    wait_until(
        Duration::from_secs(5),
        "the deleted ServiceAccount's token refused",
        || whoami_code(&gone).0 == 401,
    );
    assert_eq!(whoami_code(&gone), (401, unauthorized()));
    s.k(&["create", "serviceaccount", "gone", "-n", "ns"]);
    assert_eq!(whoami_code(&gone), (401, unauthorized()));
    let st = token_review(&s, &gone, &[]);
    assert!(
        st["error"]
            .as_str()
            .unwrap_or("")
            .contains("service account UID"),
        "{st}"
    );

    // The issuer's discovery documents: for ServiceAccounts
    // (system:service-account-issuer-discovery) and the admin, not anonymous.
    let token = create_token(&s, &["sa", "-n", "ns"]);
    let (code, config) = api(
        &s,
        Cred::Token(&token),
        "GET",
        "/.well-known/openid-configuration",
        None,
    );
    assert_eq!(code, 200, "{config}");
    assert_eq!(config["issuer"], ISSUER);
    assert_eq!(
        config["jwks_uri"],
        format!("{}/openid/v1/jwks", s.https).as_str(),
        "{config}"
    );
    assert_eq!(
        config["id_token_signing_alg_values_supported"],
        json!(["ES256"])
    );
    assert_eq!(config["response_types_supported"], json!(["id_token"]));
    assert_eq!(config["subject_types_supported"], json!(["public"]));
    let (code, keys) = api(&s, Cred::Token(&token), "GET", "/openid/v1/jwks", None);
    assert_eq!(code, 200, "{keys}");
    assert_eq!(
        keys,
        jwks(&s),
        "the admin and the ServiceAccount see one JWKS"
    );
    let key0 = &keys["keys"][0];
    assert_eq!(
        (&key0["kty"], &key0["crv"], &key0["alg"], &key0["use"]),
        (
            &json!("EC"),
            &json!("P-256"),
            &json!("ES256"),
            &json!("sig")
        ),
        "{keys}"
    );
    for path in ["/.well-known/openid-configuration", "/openid/v1/jwks"] {
        let (code, body) = api(&s, Cred::Anonymous, "GET", path, None);
        assert_eq!(code, 403, "{path}: {body}");
        assert_eq!(
            body["message"],
            format!("forbidden: User \"system:anonymous\" cannot get path \"{path}\"").as_str()
        );
    }
    // PyJWT verifies a token with nothing but the published key.
    let claims: Value =
        serde_json::from_str(&py(&["verify", &keys.to_string(), &token, ISSUER, ISSUER]))
            .expect("claims JSON");
    assert_eq!(claims["sub"], "system:serviceaccount:ns:sa", "{claims}");
    assert_eq!(claims["aud"], json!([ISSUER]), "{claims}");
    assert_eq!(
        claims["kubernetes.io"]["serviceaccount"],
        json!({"name": "sa", "uid": sa_uid}),
        "{claims}"
    );
    assert_eq!(claims["kubernetes.io"]["namespace"], "ns", "{claims}");
    let lifetime = claims["exp"].as_i64().unwrap_or(0) - claims["iat"].as_i64().unwrap_or(0);
    assert_eq!(
        lifetime, 3600,
        "upstream's default expirationSeconds: {claims}"
    );
}

#[test]
fn whoami_names_certificates_tokens_and_impersonated_users() {
    let s = Server::start("identity-whoami");
    s.k(&["create", "namespace", "ns"]);
    s.k(&["create", "serviceaccount", "sa", "-n", "ns"]);
    let sa_uid = uid(&s, &["serviceaccount", "sa", "-n", "ns"]);
    let token = create_token(&s, &["sa", "-n", "ns"]);
    let tls = s.data_dir.join("tls");
    let dev = s.data_dir.join("dev");
    py(&[
        "client-cert",
        tls.join("server-ca.crt").to_str().expect("path"),
        tls.join("server-ca.key").to_str().expect("path"),
        "dev",
        "devs",
        dev.to_str().expect("path"),
    ]);
    let admin_token = admin_token(&s);
    let sa_groups = json!([
        "system:serviceaccounts",
        "system:serviceaccounts:ns",
        "system:authenticated"
    ]);

    // (who, kubeconfig, extra kubectl args, username, groups)
    let cases: Vec<(&str, PathBuf, Vec<&str>, &str, Value)> = vec![
        (
            "admin client certificate",
            s.kubeconfig.clone(),
            vec![],
            "system:admin",
            json!(["system:masters", "system:authenticated"]),
        ),
        (
            "admin token",
            kubeconfig(&s, "admin-token", Cred::Token(&admin_token)),
            vec![],
            "system:admin",
            json!(["system:masters", "system:authenticated"]),
        ),
        (
            "client certificate of the cluster CA (CN, O)",
            kubeconfig(&s, "dev", Cred::Cert(&dev)),
            vec![],
            "dev",
            json!(["devs", "system:authenticated"]),
        ),
        (
            "ServiceAccount token",
            kubeconfig(&s, "sa", Cred::Token(&token)),
            vec![],
            "system:serviceaccount:ns:sa",
            sa_groups.clone(),
        ),
        (
            "impersonated user and group",
            s.kubeconfig.clone(),
            vec!["--as=jane", "--as-group=devs"],
            "jane",
            json!(["devs", "system:authenticated"]),
        ),
        (
            "impersonated ServiceAccount (its groups implied)",
            s.kubeconfig.clone(),
            vec!["--as=system:serviceaccount:ns:sa"],
            "system:serviceaccount:ns:sa",
            sa_groups.clone(),
        ),
    ];
    for (who, kc, extra, username, groups) in cases {
        let mut args = vec!["auth", "whoami", "-o", "json"];
        args.extend(extra);
        let me = whoami(&kubectl_with(&s, &kc, &args));
        assert_eq!(
            (&me["username"], &me["groups"]),
            (&json!(username), &groups),
            "{who}: {me}"
        );
    }

    // A token's user also carries the ServiceAccount's uid and the token's id.
    let kc = kubeconfig(&s, "sa", Cred::Token(&token));
    let me = whoami(&kubectl_with(&s, &kc, &["auth", "whoami", "-o", "json"]));
    assert_eq!(me["uid"], sa_uid.as_str(), "{me}");
    let jwks = jwks(&s);
    let claims: Value =
        serde_json::from_str(&py(&["verify", &jwks.to_string(), &token, ISSUER, ISSUER]))
            .expect("claims JSON");
    let jti = claims["jti"].as_str().expect("a jti claim");
    assert_eq!(
        me["extra"],
        json!({"authentication.kubernetes.io/credential-id": [format!("JTI={jti}")]}),
        "{me}"
    );
    // The table form names the same user.
    let out = kubectl_with(&s, &kc, &["auth", "whoami"]);
    let text = stdout(&out);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.first(), Some(&vec!["ATTRIBUTE", "VALUE"]), "{text}");
    assert!(
        rows.contains(&vec!["Username", "system:serviceaccount:ns:sa"]),
        "{text}"
    );
}

#[test]
fn bad_credentials_and_requests_get_upstreams_errors() {
    let s = Server::start("identity-bad");
    s.k(&["create", "namespace", "ns"]);
    s.k(&["create", "serviceaccount", "sa", "-n", "ns"]);
    let sa_uid = uid(&s, &["serviceaccount", "sa", "-n", "ns"]);
    let good = create_token(&s, &["sa", "-n", "ns"]);
    let kid = kid(&s);
    let t = now();
    let claims = sa_claims("ns", "sa", &sa_uid, t - 60, t - 60, t + 3600).to_string();
    let configmap = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}});
    let no_configmap = |name: &str| {
        let out = s.kubectl(&["get", "configmap", name, "-n", "ns"]);
        assert_eq!(
            stderr(&out).trim(),
            format!("Error from server (NotFound): configmaps \"{name}\" not found"),
            "nothing was written"
        );
    };

    // Credentials that are presented but not valid: 401 whatever the request,
    // and nothing written.
    let bad_tokens: Vec<(&str, String)> = vec![
        ("malformed", "not-a-jwt".to_string()),
        ("three dots of nothing", "a.b.c".to_string()),
        ("tampered payload", py(&["tamper", &good])),
        (
            "signed by another key",
            py(&["sign-other-key", &kid, &claims]),
        ),
        ("unsigned (alg none)", py(&["unsigned", &kid, &claims])),
    ];
    for (i, (what, token)) in bad_tokens.iter().enumerate() {
        let name = format!("probe-{i}");
        let (code, body) = api(
            &s,
            Cred::Token(token),
            "POST",
            "/api/v1/namespaces/ns/configmaps",
            Some(&configmap(&name)),
        );
        assert_eq!((code, body), (401, unauthorized()), "{what}");
        let kc = kubeconfig(&s, &name, Cred::Token(token));
        let out = kubectl_with(
            &s,
            &kc,
            &[
                "create",
                "configmap",
                &name,
                "--from-literal=k=v",
                "-n",
                "ns",
            ],
        );
        assert_eq!(out.status.code(), Some(1), "{what}");
        assert_eq!(
            stderr(&out).trim(),
            "error: failed to create configmap: Unauthorized",
            "{what}"
        );
        let out = kubectl_with(&s, &kc, &["auth", "whoami"]);
        assert_eq!(
            stderr(&out).trim(),
            "error: You must be logged in to the server (Unauthorized)",
            "{what}"
        );
        assert_eq!(
            token_review(&s, token, &[])["authenticated"],
            Value::Null,
            "{what}"
        );
        no_configmap(&name);
    }
    // The untampered token of the same ServiceAccount is fine (it may
    // not write configmaps, though: 403, not 401).
    let (code, body) = api(
        &s,
        Cred::Token(&good),
        "POST",
        "/api/v1/namespaces/ns/configmaps",
        Some(&configmap("probe-good")),
    );
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["message"],
        "configmaps is forbidden: User \"system:serviceaccount:ns:sa\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"ns\""
    );
    no_configmap("probe-good");

    // Impersonation needs the impersonate verb: bob may only view.
    let tls = s.data_dir.join("tls");
    let bob = s.data_dir.join("bob");
    py(&[
        "client-cert",
        tls.join("server-ca.crt").to_str().expect("path"),
        tls.join("server-ca.key").to_str().expect("path"),
        "bob",
        "",
        bob.to_str().expect("path"),
    ]);
    s.k(&[
        "create",
        "rolebinding",
        "bob-view",
        "--clusterrole=view",
        "--user=bob",
        "-n",
        "ns",
    ]);
    wait_for_aggregated_roles(&s);
    let kc = kubeconfig(&s, "bob", Cred::Cert(&bob));
    let out = kubectl_with(
        &s,
        &kc,
        &["get", "serviceaccounts", "-n", "ns", "-o", "name"],
    );
    assert!(out.status.success(), "bob may view: {}", stderr(&out));
    let users_alice = "users \"alice\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope";
    let cases: &[(&[&str], String)] = &[
        (
            &["get", "pods", "-n", "ns", "--as=alice"],
            format!("Error from server (Forbidden): {users_alice}"),
        ),
        (
            &[
                "create",
                "configmap",
                "by-alice",
                "--from-literal=k=v",
                "-n",
                "ns",
                "--as=alice",
            ],
            format!("error: failed to create configmap: {users_alice}"),
        ),
        (
            &["get", "pods", "-n", "ns", "--as=system:serviceaccount:ns:sa"],
            "Error from server (Forbidden): serviceaccounts \"sa\" is forbidden: User \"bob\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"ns\"".to_string(),
        ),
        (
            &["get", "pods", "-n", "ns", "--as=bob", "--as-group=system:masters"],
            "Error from server (Forbidden): users \"bob\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope".to_string(),
        ),
        (
            &[
                "create",
                "configmap",
                "by-bob",
                "--from-literal=k=v",
                "-n",
                "ns",
            ],
            "error: failed to create configmap: configmaps is forbidden: User \"bob\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"ns\"".to_string(),
        ),
    ];
    for (args, want) in cases {
        let out = kubectl_with(&s, &kc, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(stderr(&out).trim(), want, "{args:?}");
    }
    no_configmap("by-alice");
    no_configmap("by-bob");
    let (code, body) = api(
        &s,
        Cred::Cert(&bob),
        "GET",
        "/api/v1/namespaces/ns/pods",
        None,
    );
    assert_eq!(code, 200, "bob's own request: {body}");
    let mut impersonating = Command::new("curl");
    let out = impersonating
        .args(["-s", "-w", "\n%{http_code}", "--cacert"])
        .arg(tls.join("server-ca.crt"))
        .arg("--cert")
        .arg(bob.with_extension("crt"))
        .arg("--key")
        .arg(bob.with_extension("key"))
        .args(["-H", "Impersonate-User: alice"])
        .arg(format!("{}/api/v1/namespaces/ns/pods", s.https))
        .output()
        .expect("run curl");
    let text = stdout(&out);
    let (body, code) = text.rsplit_once('\n').expect("body and code");
    assert_eq!(code, "403");
    assert_eq!(
        serde_json::from_str::<Value>(body).expect("Status JSON"),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": users_alice, "reason": "Forbidden",
               "details": {"name": "alice", "kind": "users"}, "code": 403})
    );

    // An access review about nothing: 422 as upstream's validation.
    let admin = admin_token(&s);
    let (code, body) = api(
        &s,
        Cred::Token(&admin),
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        Some(
            &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}}),
        ),
    );
    let why = "exactly one of nonResourceAttributes or resourceAttributes must be specified";
    assert_eq!(
        (code, body),
        (
            422,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": format!("SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": {why}"),
                   "reason": "Invalid", "code": 422,
                   "details": {"name": "", "group": "authorization.k8s.io", "kind": "SelfSubjectAccessReview",
                               "causes": [{"reason": "FieldValueInvalid", "message": format!("Invalid value: \"null\": {why}"),
                                           "field": "spec.resourceAttributes"}]}})
        )
    );

    // TokenRequest refusals, and nothing created by them.
    let cases: &[(&[&str], &str)] = &[
        (
            &["create", "token", "nope", "-n", "ns"],
            "error: failed to create token: serviceaccounts \"nope\" not found",
        ),
        (
            &["create", "token", "sa", "-n", "ns", "--duration", "1s"],
            "error: failed to create token: TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 1: may not specify a duration less than 10 minutes",
        ),
        (
            &[
                "create",
                "token",
                "sa",
                "-n",
                "ns",
                "--bound-object-kind",
                "Pod",
                "--bound-object-name",
                "absent",
            ],
            "error: failed to create token: pods \"absent\" not found",
        ),
    ];
    for (args, want) in cases {
        let out = s.kubectl(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stdout(&out));
        assert_eq!(stderr(&out).trim(), *want, "{args:?}");
        assert_eq!(stdout(&out), "", "{args:?}: no token printed");
    }
    let out = s.kubectl(&["get", "serviceaccount", "nope", "-n", "ns"]);
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (NotFound): serviceaccounts \"nope\" not found"
    );
    let (code, body) = api(
        &s,
        Cred::Token(&admin),
        "POST",
        "/api/v1/namespaces/ns/serviceaccounts/nope/token",
        Some(
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
        ),
    );
    assert_eq!(
        (code, body),
        (
            404,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "serviceaccounts \"nope\" not found", "reason": "NotFound",
                   "details": {"name": "nope", "kind": "serviceaccounts"}, "code": 404})
        )
    );

    // A RoleBinding to a Role that does not exist is accepted (upstream
    // checks no references) and grants nothing; RBAC says why.
    s.k(&[
        "create",
        "rolebinding",
        "ghost",
        "--role=missing",
        "--user=ghost",
        "-n",
        "ns",
    ]);
    let out = s.kubectl(&["auth", "can-i", "get", "pods", "-n", "ns", "--as=ghost"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out).trim(),
        "no - RBAC: role.rbac.authorization.k8s.io \"missing\" not found"
    );
    let out = s.kubectl(&["get", "pods", "-n", "ns", "--as=ghost"]);
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (Forbidden): pods is forbidden: User \"ghost\" cannot list resource \"pods\" in API group \"\" in the namespace \"ns\": RBAC: role.rbac.authorization.k8s.io \"missing\" not found"
    );
    // Once the Role exists the same binding grants it.
    s.k(&[
        "create",
        "role",
        "missing",
        "--verb=get",
        "--resource=pods",
        "-n",
        "ns",
    ]);
    let out = s.kubectl(&["auth", "can-i", "get", "pods", "-n", "ns", "--as=ghost"]);
    assert_eq!(
        (stdout(&out).trim(), out.status.code()),
        ("yes", Some(0)),
        "{}",
        stderr(&out)
    );
}

/// `--anonymous-auth=false` (kube-apiserver's flag): a request without
/// credentials is 401 with upstream's Status, even for what RBAC gives
/// `system:unauthenticated` (/version, /readyz); credentials still work.
#[test]
fn anonymous_requests_are_refused_when_turned_off() {
    let s = Server::start_with(common::temp_dir("no-anon"), &["--anonymous-auth=false"]);
    let token = admin_token(&s);
    for path in ["/version", "/readyz", "/api/v1/namespaces/default/pods"] {
        let (code, body) = api(&s, Cred::Anonymous, "GET", path, None);
        assert_eq!(
            (code, &body),
            (401, &unauthorized()),
            "anonymous GET {path}"
        );
        let (code, _) = api(&s, Cred::Token(&token), "GET", path, None);
        assert_eq!(code, 200, "GET {path} with the admin token");
    }
    // The default lets anonymous requests in, as system:anonymous.
    let on = Server::start("anon");
    let (code, body) = api(&on, Cred::Anonymous, "GET", "/version", None);
    assert_eq!(code, 200, "{body}");
}
