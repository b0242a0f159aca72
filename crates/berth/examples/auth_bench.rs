//! Authentication and authorization benchmark: what RBAC costs a request, and
//! how fast ServiceAccount tokens are verified.
//!
//! 1. Two `berth server`s, started one after the other with the same flags but
//!    `--authorization-mode RBAC` and `--authorization-mode AlwaysAllow`, each
//!    holding 1,000 RoleBindings (100 namespaces × 10, to ClusterRole `edit` for
//!    distinct users). 16 clients authenticated as ServiceAccount `bench/bench`
//!    (a TokenRequest token; a RoleBinding to `edit`) GET one pod, then create
//!    pods. The servers are measured in alternating rounds (RBAC, AlwaysAllow,
//!    AlwaysAllow, RBAC, ...), only one under load at a time, so that whatever
//!    else the machine runs weighs on both alike.
//! 2. ServiceAccount JWT verifications/s: `Issuer::verify` in a loop on one
//!    thread, and TokenReviews/s end to end from 16 admin clients, of one token
//!    (which the server's 10 s cache of verified signatures answers) and of
//!    distinct TokenRequest tokens, one per review (every one verified).
//!
//! cargo build --release -p berth --bin berth --example auth_bench && ./target/release/examples/auth_bench
//! (BERTH_AUTH_BENCH_SECONDS, default 10: the measured time of each request kind
//! per server; BERTH_AUTH_BENCH_TOKENS, default 40000: distinct tokens reviewed;
//! extra arguments go to both `berth server`s.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use berth_authn::serviceaccount::Issuer;
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::{Api, PostParams};

mod bench_common;

use bench_common::{BenchServer, cpu_seconds, percentile};

const CLIENTS: usize = 16;
const NAMESPACES: usize = 100;
const BINDINGS_PER_NAMESPACE: usize = 10;
/// The issue's goal: RBAC costs at most this much throughput.
const GOAL_LOSS_PERCENT: f64 = 10.0;
/// Where the measured clients live, and who they are.
const NS: &str = "bench";
const SA: &str = "bench";
/// The pod every GET reads.
const TARGET_POD: &str = "target";
const WARMUP: Duration = Duration::from_secs(1);
const VERIFY_FOR: Duration = Duration::from_secs(3);
/// Rounds per request kind and server.
const ROUNDS: u32 = 5;

/// What one request kind did during one phase.
struct Phase {
    /// Latencies of the successful requests, sorted.
    lat: Vec<Duration>,
    wall: Duration,
    /// The server's CPU seconds during the phase.
    server_cpu: f64,
    errors: usize,
    first_error: Option<String>,
}

impl Phase {
    fn empty() -> Phase {
        Phase {
            lat: Vec::new(),
            wall: Duration::ZERO,
            server_cpu: 0.0,
            errors: 0,
            first_error: None,
        }
    }

    /// Adds another round of the same requests.
    fn absorb(&mut self, other: Phase) {
        self.lat.extend(other.lat);
        self.lat.sort();
        self.wall += other.wall;
        self.server_cpu += other.server_cpu;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    fn rate(&self) -> f64 {
        self.lat.len() as f64 / self.wall.as_secs_f64()
    }

    fn ms(&self, p: f64) -> f64 {
        percentile(&self.lat, p).as_secs_f64() * 1e3
    }

    /// Server CPU per successful request, in µs.
    fn cpu_us(&self) -> f64 {
        if self.lat.is_empty() {
            return 0.0;
        }
        self.server_cpu * 1e6 / self.lat.len() as f64
    }
}

/// One request as the error line shows it: method, path, and what came back.
fn describe(method: &str, path: &str, e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{method} {path} -> {} {}: {}", s.code, s.reason, s.message),
        other => format!("{method} {path} -> {other}"),
    }
}

async fn send(
    client: &kube::Client,
    method: &'static str,
    path: &str,
    body: Vec<u8>,
) -> Result<String, String> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(body)
        .map_err(|e| format!("{method} {path}: {e}"))?;
    client
        .request_text(req)
        .await
        .map_err(|e| describe(method, path, &e))
}

fn pod_body(name: &str) -> Vec<u8> {
    // Minimal; no nodes and no scheduler, so it stays Pending.
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"serviceAccountName": SA, "containers": [{"name": "c", "image": "busybox:1.36"}]}
    }))
    .unwrap_or_default()
}

/// When a phase ends.
#[derive(Clone, Copy)]
enum Until {
    /// Requests start until this much time has passed.
    Elapsed(Duration),
    /// Requests 0..n, each once.
    Count(usize),
}

/// Runs `f(client, i)` on every client in a loop (i counts requests across
/// all of them) until `until`.
async fn run<F, Fut>(pid: u32, clients: &[kube::Client], until: Until, f: F) -> Phase
where
    F: Fn(kube::Client, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
{
    let f = Arc::new(f);
    let next = Arc::new(AtomicUsize::new(0));
    let cpu_before = cpu_seconds(pid);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in clients {
        let (client, f, next) = (client.clone(), f.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let (mut errors, mut first_error) = (0, None);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let more = match until {
                    Until::Elapsed(d) => started.elapsed() < d,
                    Until::Count(n) => i < n,
                };
                if !more {
                    break;
                }
                let t = Instant::now();
                match f(client.clone(), i).await {
                    Ok(()) => lat.push(t.elapsed()),
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert(e);
                    }
                }
            }
            (lat, errors, first_error)
        }));
    }
    let mut phase = Phase::empty();
    for t in tasks {
        match t.await {
            Ok((lat, errors, first)) => {
                phase.lat.extend(lat);
                phase.errors += errors;
                if phase.first_error.is_none() {
                    phase.first_error = first;
                }
            }
            Err(e) => {
                phase.errors += 1;
                phase.first_error.get_or_insert(format!("client task: {e}"));
            }
        }
    }
    phase.wall = started.elapsed();
    phase.server_cpu = cpu_seconds(pid) - cpu_before;
    phase.lat.sort();
    phase
}

/// `n` clients of the server with `auth` as their credentials, each with its
/// own connection, and no retries (a 429 or 503 must show as an error).
fn clients(
    server: &BenchServer,
    n: usize,
    auth: Option<kube::config::AuthInfo>,
) -> anyhow::Result<Vec<kube::Client>> {
    let mut config = server.config.clone();
    config.default_retry = false;
    if let Some(auth) = auth {
        config.auth_info = auth;
    }
    (0..n)
        .map(|_| Ok(kube::Client::try_from(config.clone())?))
        .collect()
}

/// Polls `f` every 50 ms until it succeeds or `limit` passes; returns the
/// first failure it saw, if any, so that a slow start is reported.
async fn until_ok<F, Fut>(limit: Duration, f: F) -> anyhow::Result<Option<(String, Duration)>>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let started = Instant::now();
    let mut first: Option<String> = None;
    loop {
        match f().await {
            Ok(()) => return Ok(first.map(|e| (e, started.elapsed()))),
            Err(e) if started.elapsed() < limit => {
                first.get_or_insert(e);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => anyhow::bail!("still failing after {limit:?}: {e}"),
        }
    }
}

/// The cluster every measurement runs in: 1,000 RoleBindings, the ServiceAccount
/// `bench/bench` bound to `edit`, and the pod its clients GET. Returns a token
/// of that ServiceAccount.
async fn prepare(server: &BenchServer) -> anyhow::Result<String> {
    let admin = server.client.clone();
    let pp = PostParams::default();
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    namespaces
        .create(
            &pp,
            &serde_json::from_value(serde_json::json!({"metadata": {"name": NS}}))?,
        )
        .await?;
    {
        let namespaces = namespaces.clone();
        bench_common::concurrently(NAMESPACES, CLIENTS, move |i| {
            let namespaces = namespaces.clone();
            async move {
                let n: Namespace = serde_json::from_value(
                    serde_json::json!({"metadata": {"name": format!("rb-{i}")}}),
                )?;
                namespaces.create(&PostParams::default(), &n).await?;
                Ok(())
            }
        })
        .await?;
    }
    {
        let admin = admin.clone();
        bench_common::concurrently(NAMESPACES * BINDINGS_PER_NAMESPACE, CLIENTS, move |i| {
            let (n, j) = (i / BINDINGS_PER_NAMESPACE, i % BINDINGS_PER_NAMESPACE);
            let rbs: Api<RoleBinding> = Api::namespaced(admin.clone(), &format!("rb-{n}"));
            async move {
                let rb: RoleBinding = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": format!("edit-{j}")},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": format!("user-{n}-{j}")}]
                }))?;
                rbs.create(&PostParams::default(), &rb).await?;
                Ok(())
            }
        })
        .await?;
    }
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    sas.create(
        &pp,
        &serde_json::from_value(serde_json::json!({"metadata": {"name": SA}}))?,
    )
    .await?;
    let rbs: Api<RoleBinding> = Api::namespaced(admin.clone(), NS);
    rbs.create(
        &pp,
        &serde_json::from_value(serde_json::json!({
            "metadata": {"name": "bench-edit"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NS}]
        }))?,
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    pods.create(&pp, &serde_json::from_slice(&pod_body(TARGET_POD))?)
        .await?;

    // `edit` is an aggregated ClusterRole: its rules are written by the
    // clusterrole-aggregation controller, after the server has started.
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    until_ok(Duration::from_secs(60), || async {
        let edit = roles.get("edit").await.map_err(|e| e.to_string())?;
        let creates_pods = edit.rules.unwrap_or_default().iter().any(|r| {
            r.resources
                .as_ref()
                .is_some_and(|rs| rs.iter().any(|x| x == "pods"))
                && r.verbs.iter().any(|v| v == "create")
        });
        if creates_pods {
            Ok(())
        } else {
            Err("ClusterRole edit does not yet allow creating pods".into())
        }
    })
    .await?;

    token_request(&admin).await.map_err(anyhow::Error::msg)
}

/// A token of ServiceAccount `bench/bench`, valid for an hour, from the
/// TokenRequest API.
async fn token_request(client: &kube::Client) -> Result<String, String> {
    let path = format!("/api/v1/namespaces/{NS}/serviceaccounts/{SA}/token");
    let body = br#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":3600}}"#;
    let answer = send(client, "POST", &path, body.to_vec()).await?;
    serde_json::from_str::<serde_json::Value>(&answer)
        .ok()
        .and_then(|a| a.pointer("/status/token")?.as_str().map(String::from))
        .ok_or_else(|| format!("POST {path} -> no status.token in {answer}"))
}

/// One server under test and its ServiceAccount clients.
struct Target {
    server: BenchServer,
    clients: Vec<kube::Client>,
}

// `NS` and `TARGET_POD`.
const GET_PATH: &str = "/api/v1/namespaces/bench/pods/target";
const CREATE_PATH: &str = "/api/v1/namespaces/bench/pods";

impl Target {
    /// Starts and prepares a server with `--authorization-mode mode`, and
    /// checks that its ServiceAccount clients may GET and create pods.
    async fn start(mode: &'static str) -> anyhow::Result<Target> {
        // The API server and the controller manager (its clusterrole-aggregation
        // controller fills ClusterRole `edit`); no scheduler: pods stay Pending.
        let server = BenchServer::start(
            &format!("auth-bench-{}", mode.to_lowercase()),
            &["--disable-scheduler", "--authorization-mode", mode],
        )
        .await?;
        let token = prepare(&server).await?;
        let auth = kube::config::AuthInfo {
            token: Some(token.into()),
            ..Default::default()
        };
        let clients = clients(&server, CLIENTS, Some(auth))?;
        // The authorizer sees new RoleBindings through the watch cache: say so
        // if the first requests were refused.
        for (method, path, body) in [
            ("GET", GET_PATH, Vec::new()),
            ("POST", CREATE_PATH, pod_body("probe")),
        ] {
            let c = clients[0].clone();
            if let Some((e, after)) = until_ok(Duration::from_secs(30), || {
                let (c, b) = (c.clone(), body.clone());
                async move { send(&c, method, path, b).await.map(drop) }
            })
            .await?
            {
                eprintln!(
                    "{mode}: first {method} {path} as the ServiceAccount failed, succeeded after {after:?}: {e}"
                );
            }
        }
        // And that the mode is the one asked for: `edit` in `bench` is no
        // grant in another namespace.
        let elsewhere = "/api/v1/namespaces/rb-0/pods";
        let answer = send(&clients[0], "GET", elsewhere, Vec::new()).await;
        match (mode, &answer) {
            ("RBAC", Err(e)) if e.contains("-> 403 Forbidden") => {}
            ("AlwaysAllow", Ok(_)) => {}
            _ => anyhow::bail!(
                "{mode}: GET {elsewhere} as the ServiceAccount answered {answer:?}, \
                 which is not what that mode allows"
            ),
        }
        Ok(Target { server, clients })
    }

    /// Round `round` of `kind` (pods it creates are named `r<round>-<i>`).
    async fn phase(&self, kind: Kind, round: u32, until: Until) -> Phase {
        match kind {
            Kind::Get => self.gets(until).await,
            Kind::Create => self.creates(until, format!("r{round}")).await,
        }
    }

    async fn gets(&self, until: Until) -> Phase {
        run(
            self.server.child.id(),
            &self.clients,
            until,
            |c, _| async move { send(&c, "GET", GET_PATH, Vec::new()).await.map(drop) },
        )
        .await
    }

    /// Creates pods `<prefix>-<i>`.
    async fn creates(&self, until: Until, prefix: String) -> Phase {
        run(self.server.child.id(), &self.clients, until, move |c, i| {
            let name = format!("{prefix}-{i}");
            async move {
                send(&c, "POST", CREATE_PATH, pod_body(&name))
                    .await
                    .map(drop)
            }
        })
        .await
    }
}

/// Which request a round sends.
#[derive(Clone, Copy)]
enum Kind {
    Get,
    Create,
}

/// `ROUNDS` rounds of `kind` on each target, alternating which goes first
/// (A B, B A, A B, ...): the merged phases, and each round's throughput loss
/// of `targets[0]` against `targets[1]` in %.
async fn rounds(targets: &[Target; 2], kind: Kind, for_: Duration) -> ([Phase; 2], Vec<f64>) {
    for t in targets {
        t.phase(kind, 0, Until::Elapsed(WARMUP)).await;
    }
    let mut merged = [Phase::empty(), Phase::empty()];
    let mut losses = Vec::new();
    let slice = Until::Elapsed(for_ / ROUNDS);
    for round in 1..=ROUNDS {
        let order = if round % 2 == 1 { [0, 1] } else { [1, 0] };
        let mut rates = [0.0; 2];
        for i in order {
            let p = targets[i].phase(kind, round, slice).await;
            rates[i] = p.rate();
            merged[i].absorb(p);
        }
        losses.push(loss(rates[0], rates[1]));
    }
    (merged, losses)
}

fn loss(rate: f64, baseline: f64) -> f64 {
    (1.0 - rate / baseline) * 100.0
}

fn review_body(token: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token}
    }))
    .unwrap_or_default()
}

/// TokenReviews from 16 admin clients: of `tokens[i % len]` for request i.
async fn token_reviews(
    server: &BenchServer,
    tokens: Arc<Vec<String>>,
    until: Until,
) -> anyhow::Result<Phase> {
    let clients = clients(server, CLIENTS, None)?;
    const PATH: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
    let first = send(&clients[0], "POST", PATH, review_body(&tokens[0]))
        .await
        .map_err(anyhow::Error::msg)?;
    let first: serde_json::Value = serde_json::from_str(&first)?;
    let user = first
        .pointer("/status/user/username")
        .and_then(|u| u.as_str());
    if first.pointer("/status/authenticated") != Some(&serde_json::json!(true))
        || user != Some(format!("system:serviceaccount:{NS}:{SA}").as_str())
    {
        anyhow::bail!("TokenReview did not authenticate the ServiceAccount's token: {first}");
    }
    // Distinct tokens start at 1: the first was just reviewed (and cached).
    let offset = usize::from(tokens.len() > 1);
    let review = move |c: kube::Client, i: usize| {
        let body = review_body(&tokens[(i + offset) % tokens.len()]);
        async move {
            let answer = send(&c, "POST", PATH, body).await?;
            if answer.contains("\"authenticated\":true") {
                Ok(())
            } else {
                Err(format!("POST {PATH} -> not authenticated: {answer}"))
            }
        }
    };
    if let Until::Elapsed(_) = until {
        run(
            server.child.id(),
            &clients,
            Until::Elapsed(WARMUP),
            review.clone(),
        )
        .await;
    }
    Ok(run(server.child.id(), &clients, until, review).await)
}

/// `n` distinct tokens of the ServiceAccount from the TokenRequest API (16
/// admin clients): the tokens and the phase that issued them.
async fn many_tokens(server: &BenchServer, n: usize) -> anyhow::Result<(Vec<String>, Phase)> {
    let clients = clients(server, CLIENTS, None)?;
    let out = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let sink = out.clone();
    let phase = run(server.child.id(), &clients, Until::Count(n), move |c, _| {
        let sink = sink.clone();
        async move {
            let t = token_request(&c).await?;
            sink.lock().map_err(|e| e.to_string())?.push(t);
            Ok(())
        }
    })
    .await;
    let tokens = std::mem::take(&mut *out.lock().map_err(|e| anyhow::anyhow!("{e}"))?);
    anyhow::ensure!(
        tokens.len() == n,
        "{} of {n} TokenRequests failed; first: {:?}",
        n - tokens.len(),
        phase.first_error
    );
    Ok((tokens, phase))
}

/// `Issuer::verify` of `token` on this thread for `for_`, with the server's
/// own signing key: verifications per second.
fn verify_loop(server: &BenchServer, token: &str, for_: Duration) -> anyhow::Result<f64> {
    let issuer = Issuer::load_or_create(
        &server.data_dir().join("tls"),
        berth_apiserver::SERVICE_ACCOUNT_ISSUER,
        vec![berth_apiserver::SERVICE_ACCOUNT_ISSUER.to_string()],
    )?;
    let now = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    };
    let v = issuer
        .verify(token, now(), &[])
        .map_err(|e| anyhow::anyhow!("the server's token does not verify in-process: {e}"))?;
    anyhow::ensure!(
        v.namespace == NS && v.sa_name == SA,
        "verified token is {}/{}",
        v.namespace,
        v.sa_name
    );
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < for_ {
        // Check the clock as rarely as the verify loop allows: every 64.
        let t = now();
        for _ in 0..64 {
            let ok = issuer.verify(std::hint::black_box(token), t, &[]).is_ok();
            std::hint::black_box(ok);
        }
        n += 64;
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn row(what: &str, mode: &str, p: &Phase) {
    println!(
        "| {what} | {mode} | {:.2} ms | {:.2} ms | {:.0} | {:.0} µs | {} |",
        p.ms(0.5),
        p.ms(0.99),
        p.rate(),
        p.cpu_us(),
        p.errors
    );
}

fn loss_row(what: &str, rbac: &Phase, allow: &Phase, per_round: &[f64]) {
    let loss = loss(rbac.rate(), allow.rate());
    let verdict = if loss <= GOAL_LOSS_PERCENT {
        "met"
    } else {
        "NOT met"
    };
    let rounds: Vec<String> = per_round.iter().map(|l| format!("{l:.1}")).collect();
    let cpu = (rbac.cpu_us() / allow.cpu_us() - 1.0) * 100.0;
    println!(
        "| {what} | {:.0} → {:.0} req/s | {loss:.1} % | ≤ {GOAL_LOSS_PERCENT:.0} % ({verdict}) | {} % | {cpu:+.1} % |",
        allow.rate(),
        rbac.rate(),
        rounds.join(", ")
    );
}

fn review_row(what: &str, p: &Phase) {
    println!(
        "| {what} | {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, server CPU {:.0} µs each ({:.0}/s per core), {} errors |",
        p.rate(),
        p.ms(0.5),
        p.ms(0.99),
        p.cpu_us(),
        1e6 / p.cpu_us(),
        p.errors
    );
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let secs = env("BERTH_AUTH_BENCH_SECONDS", 10);
    let n_tokens = env("BERTH_AUTH_BENCH_TOKENS", 40_000) as usize;
    let for_ = Duration::from_secs(secs);
    let load_before = load_average();

    let targets = [
        Target::start("RBAC").await?,
        Target::start("AlwaysAllow").await?,
    ];
    let ([rbac_get, allow_get], get_losses) = rounds(&targets, Kind::Get, for_).await;
    let ([rbac_create, allow_create], create_losses) = rounds(&targets, Kind::Create, for_).await;
    let [rbac, allow] = targets;
    drop(allow);

    let server = &rbac.server;
    let token = token_request(&server.client)
        .await
        .map_err(anyhow::Error::msg)?;
    let cached = token_reviews(server, Arc::new(vec![token.clone()]), Until::Elapsed(for_)).await?;
    let (tokens, issued) = many_tokens(server, n_tokens + 1).await?;
    let distinct = token_reviews(server, Arc::new(tokens), Until::Count(n_tokens)).await?;
    let verify_rate = verify_loop(server, &token, VERIFY_FOR)?;
    drop(rbac);
    let load_after = load_average();

    println!(
        "Authorization: {CLIENTS} clients as system:serviceaccount:{NS}:{SA} (TokenRequest token, \
         RoleBinding to ClusterRole edit) beside {} RoleBindings in {NAMESPACES} namespaces; \
         {ROUNDS} alternating rounds per server, {secs} s per request kind and server.",
        NAMESPACES * BINDINGS_PER_NAMESPACE
    );
    println!(
        "With AlwaysAllow the ServiceAccount token is still authenticated (its signature, which the \
         server caches 10 s, and the ServiceAccount lookup): the difference is authorization only."
    );
    println!();
    println!("| request | --authorization-mode | p50 | p99 | req/s | server CPU/req | errors |");
    println!("|---|---|---|---|---|---|---|");
    row("GET pod", "RBAC", &rbac_get);
    row("GET pod", "AlwaysAllow", &allow_get);
    row("create pod", "RBAC", &rbac_create);
    row("create pod", "AlwaysAllow", &allow_create);
    println!();
    println!(
        "| request | AlwaysAllow → RBAC | throughput loss | goal | loss per round | server CPU/req |"
    );
    println!("|---|---|---|---|---|---|");
    loss_row("GET pod", &rbac_get, &allow_get, &get_losses);
    loss_row("create pod", &rbac_create, &allow_create, &create_losses);
    println!();
    println!("| token verification | value |");
    println!("|---|---|");
    println!(
        "| Issuer::verify, in-process, one thread ({} s) | {verify_rate:.0}/s ({:.1} µs each) |",
        VERIFY_FOR.as_secs(),
        1e6 / verify_rate
    );
    review_row(
        &format!(
            "TokenReview, {n_tokens} distinct tokens (each verified), {CLIENTS} admin clients"
        ),
        &distinct,
    );
    review_row(
        &format!("TokenReview, one token (signature cached), {CLIENTS} admin clients, {secs} s"),
        &cached,
    );
    review_row(
        &format!("TokenRequest (issuing those tokens), {CLIENTS} admin clients"),
        &issued,
    );
    println!();
    println!(
        "load average before {load_before}, after {load_after} ({} CPUs; the benchmark's clients share them)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for (what, p) in [
        ("GET pod, RBAC", &rbac_get),
        ("GET pod, AlwaysAllow", &allow_get),
        ("create pod, RBAC", &rbac_create),
        ("create pod, AlwaysAllow", &allow_create),
        ("TokenReview, distinct tokens", &distinct),
        ("TokenReview, one token", &cached),
        ("TokenRequest", &issued),
    ] {
        if let Some(e) = &p.first_error {
            println!("first error, {what} ({} in all): {e}", p.errors);
        }
    }
    Ok(())
}
