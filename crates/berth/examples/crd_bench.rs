//! CustomResourceDefinition benchmark: starts a real `berth server` process and
//! drives it with kube-rs over HTTPS (JSON), as api_bench does.
//!
//! (a) Custom object create and update throughput and latency for a CRD whose
//!     schema carries 50 CEL `x-kubernetes-validations` rules (string lengths and
//!     patterns, enums through `in`, cross-field checks, `all`/`exists` over lists
//!     of 10 items, transition rules on `oldSelf`) against the same schema without
//!     rules, in one run and on one server. The goal is CEL costing at most 2× per write.
//! (b) A ~1 MB CRD (a deep, wide structural schema with descriptions, shaped like
//!     the big real-world ones): time from its create request until it is
//!     Established, until `/openapi/v3/apis/<group>/<version>` serves its schema,
//!     and until `kubectl explain <kind>.spec` answers.
//!
//! cargo build --release -p berth --bin berth --example crd_bench
//! target/release/examples/crd_bench
//! (BERTH_BENCH_OBJECTS=N changes the 2,000 objects per kind, BERTH_BENCH_CLIENTS=N
//! the 16 clients; BERTH_KUBECTL names kubectl; server flags may follow `--`.)

mod bench_common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bench_common::{BenchServer, concurrently, cpu_seconds, percentile};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

const GROUP: &str = "bench.berth.dev";

/// One `x-kubernetes-validations` entry.
fn rule(rule: &str, message: &str) -> Value {
    json!({"rule": rule, "message": message})
}

/// The rules on `spec` itself (`self` is the spec): 44 of the 50.
fn spec_rules() -> Vec<Value> {
    [
        // String lengths and shapes.
        ("self.name.size() >= 3", "name must have at least 3 characters"),
        ("self.name.size() <= 63", "name must have at most 63 characters"),
        ("self.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')", "name must be a DNS label"),
        ("self.image.size() > 0", "image must not be empty"),
        ("!self.image.contains(' ')", "image must not contain spaces"),
        ("self.tag.size() <= 128", "tag must have at most 128 characters"),
        ("self.owner.size() > 0", "owner must not be empty"),
        ("self.email.contains('@')", "email must contain @"),
        (
            "self.email.endsWith('.com') || self.email.endsWith('.org') || self.email.endsWith('.io')",
            "email must be in .com, .org or .io",
        ),
        ("self.schedule.matches('^(\\\\S+\\\\s+){4}\\\\S+$')", "schedule must have 5 fields"),
        // Enums.
        ("self.mode in ['Fast', 'Slow', 'Balanced']", "mode must be Fast, Slow or Balanced"),
        ("self.tier in ['free', 'standard', 'premium']", "tier must be free, standard or premium"),
        (
            "self.region in ['us-east-1', 'us-west-2', 'eu-west-1', 'ap-south-1']",
            "unknown region",
        ),
        ("self.storageClass in ['standard', 'ssd', 'premium-rwo']", "unknown storageClass"),
        // Numbers and cross-field checks.
        ("self.replicas >= 0", "replicas must not be negative"),
        ("self.replicas <= 1000", "replicas must be at most 1000"),
        ("self.minReplicas <= self.maxReplicas", "minReplicas must not exceed maxReplicas"),
        (
            "self.replicas >= self.minReplicas && self.replicas <= self.maxReplicas",
            "replicas must lie between minReplicas and maxReplicas",
        ),
        ("self.tier != 'free' || self.maxReplicas <= 3", "the free tier allows 3 replicas"),
        ("self.tag != 'latest' || self.mode == 'Slow'", "latest images only run Slow"),
        ("self.zone.startsWith(self.region)", "zone must be in region"),
        (
            "self.tier == 'premium' || self.storageClass != 'premium-rwo'",
            "premium-rwo storage needs the premium tier",
        ),
        ("!self.paused || self.mode != 'Fast'", "a paused workload cannot be Fast"),
        ("self.priority >= -10 && self.priority <= 10", "priority must be in [-10, 10]"),
        ("self.timeoutSeconds > 0 && self.timeoutSeconds <= 3600", "timeoutSeconds must be in (0, 3600]"),
        ("self.retries <= 10", "at most 10 retries"),
        (
            "self.timeoutSeconds * (self.retries + 1) <= 7200",
            "all tries must fit in two hours",
        ),
        ("has(self.image) && has(self.tag)", "image and tag are required"),
        // Quantities.
        ("isQuantity(self.cpu)", "cpu must be a quantity"),
        (
            "quantity(self.cpu).compareTo(quantity('64')) <= 0",
            "cpu must be at most 64",
        ),
        ("isQuantity(self.memory)", "memory must be a quantity"),
        // Lists of ~10 items.
        ("self.ports.size() >= 1", "at least one port"),
        ("self.ports.all(p, p.port >= 1 && p.port <= 65535)", "ports must be in [1, 65535]"),
        ("self.ports.all(p, p.protocol in ['TCP', 'UDP', 'SCTP'])", "unknown protocol"),
        ("self.ports.all(p, p.name.size() <= 15)", "port names have at most 15 characters"),
        ("self.ports.exists(p, p.protocol == 'TCP')", "at least one TCP port"),
        (
            "self.ports.filter(p, p.protocol == 'UDP').size() <= 4",
            "at most 4 UDP ports",
        ),
        (
            "self.env.all(e, e.name.matches('^[A-Za-z_][A-Za-z0-9_]*$'))",
            "env names must be C identifiers",
        ),
        ("self.env.all(e, e.value.size() <= 256)", "env values have at most 256 characters"),
        ("!self.env.exists(e, e.name == 'PATH')", "PATH cannot be set"),
        // Maps.
        ("'app' in self.labels", "the app label is required"),
        ("self.labels.all(k, k.size() <= 63)", "label keys have at most 63 characters"),
        (
            "self.labels.all(k, self.labels[k].size() <= 63)",
            "label values have at most 63 characters",
        ),
        // Transition rules: no tier downgrade from premium.
        (
            "oldSelf.tier != 'premium' || self.tier == 'premium'",
            "premium cannot be downgraded",
        ),
    ]
    .iter()
    .map(|(r, m)| rule(r, m))
    .collect()
}

/// The structural schema of the benchmark kind; with `rules`, the 50 CEL rules.
fn bench_schema(rules: bool) -> Value {
    let s = |max: u64| json!({"type": "string", "maxLength": max});
    let with = |mut v: Value, r: Vec<Value>| {
        if rules {
            v["x-kubernetes-validations"] = Value::Array(r);
        }
        v
    };
    let port = with(
        json!({"type": "object", "required": ["name", "port", "protocol"], "properties": {
            "name": s(15), "port": {"type": "integer"}, "protocol": s(8),
        }}),
        vec![rule(
            "self.port != 22 || self.protocol == 'TCP'",
            "ssh is TCP",
        )],
    );
    let env = with(
        json!({"type": "object", "required": ["name"], "properties": {
            "name": s(64), "value": s(256),
        }}),
        vec![rule(
            "self.name != self.value",
            "a variable cannot be its own value",
        )],
    );
    let spec = with(
        json!({"type": "object", "properties": {
            "name": with(s(63), vec![rule("self == self.lowerAscii()", "name must be lower case")]),
            "image": s(256), "tag": s(128), "mode": s(16), "tier": s(16),
            "replicas": {"type": "integer"}, "minReplicas": {"type": "integer"},
            "maxReplicas": {"type": "integer"}, "owner": s(64), "email": s(254),
            "region": s(32), "zone": s(32), "storageClass": s(63), "cpu": s(16),
            "memory": s(16), "paused": {"type": "boolean"}, "priority": {"type": "integer"},
            "schedule": s(64), "timeoutSeconds": {"type": "integer"},
            "retries": {"type": "integer"},
            // Transition rules: immutable once set, and never going back.
            "clusterId": with(s(36), vec![rule("self == oldSelf", "clusterId is immutable")]),
            "revision": with(json!({"type": "integer"}),
                vec![rule("self >= oldSelf", "revision cannot go back")]),
            "ports": {"type": "array", "maxItems": 16, "items": port},
            "env": {"type": "array", "maxItems": 16, "items": env},
            "labels": {"type": "object", "maxProperties": 32,
                "additionalProperties": s(63)},
        }}),
        spec_rules(),
    );
    with(
        json!({"type": "object", "properties": {"spec": spec}}),
        vec![rule(
            "self.metadata.name.size() <= 63",
            "names have at most 63 characters",
        )],
    )
}

/// Counts the rules of a schema.
fn count_rules(v: &Value) -> usize {
    match v {
        Value::Object(m) => {
            m.get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
                + m.values().map(count_rules).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_rules).sum(),
        _ => 0,
    }
}

/// Counts the fields (`properties` entries) of a schema.
fn count_fields(v: &Value) -> usize {
    match v {
        Value::Object(m) => {
            m.get("properties")
                .and_then(Value::as_object)
                .map_or(0, |p| p.len())
                + m.values().map(count_fields).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_fields).sum(),
        _ => 0,
    }
}

fn crd(plural: &str, kind: &str, schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema}}],
        },
    })
}

/// The spec of object `i` at `revision`: every rule holds.
fn spec(i: usize, revision: i64) -> Value {
    let ports: Vec<Value> = (0..10)
        .map(|k| {
            json!({"name": format!("p{k}"), "port": 8000 + k,
                "protocol": if k % 3 == 2 { "UDP" } else { "TCP" }})
        })
        .collect();
    let env: Vec<Value> = (0..10)
        .map(|k| json!({"name": format!("VAR_{k}"), "value": format!("value-{k}-{revision}")}))
        .collect();
    json!({
        "name": format!("app-{i}"), "image": "registry.example.com/team/app",
        "tag": format!("v1.{revision}.0"), "mode": "Balanced", "tier": "standard",
        "replicas": 2 + revision % 5, "minReplicas": 1, "maxReplicas": 10,
        "owner": "team-a", "email": "team-a@example.com", "region": "eu-west-1",
        "zone": "eu-west-1b", "storageClass": "ssd", "cpu": "500m", "memory": "512Mi",
        "paused": false, "priority": 0, "schedule": "*/5 * * * *",
        "timeoutSeconds": 300, "retries": 3,
        "clusterId": format!("6f1c2a4e-0000-4000-8000-{i:012}"), "revision": revision,
        "ports": ports, "env": env,
        "labels": {"app": format!("app-{i}"), "team": "a", "env": "bench", "tier": "standard"},
    })
}

fn object(ar: &ApiResource, prefix: &str, i: usize) -> DynamicObject {
    let mut o = DynamicObject::new(&format!("{prefix}-{i}"), ar);
    o.data = json!({"spec": spec(i, 1)});
    o
}

async fn wait_established(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // Polled from before the create request: not found yet is not an error.
        let established = crds
            .get_opt(name)
            .await?
            .and_then(|c| c.status)
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "{name} never Established");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// What one phase (n writes of one kind) measured.
struct Phase {
    rate: f64,
    latencies: Vec<Duration>,
    cpu_ms_per_write: f64,
}

impl Phase {
    fn p(&self, q: f64) -> f64 {
        percentile(&self.latencies, q).as_secs_f64() * 1e3
    }
}

/// Creates objects 0..n (`update` false) or updates them to revision 2, keeping
/// what the server returned for the next phase.
async fn phase(
    api: &Api<DynamicObject>,
    ar: &ApiResource,
    prefix: &'static str,
    objects: &Arc<Vec<Mutex<Option<DynamicObject>>>>,
    clients: usize,
    pid: u32,
    update: bool,
) -> anyhow::Result<Phase> {
    let n = objects.len();
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let cpu = cpu_seconds(pid);
    let started = Instant::now();
    {
        let (api, ar, objects, latencies) =
            (api.clone(), ar.clone(), objects.clone(), latencies.clone());
        concurrently(n, clients, move |i| {
            let (api, ar, objects, latencies) =
                (api.clone(), ar.clone(), objects.clone(), latencies.clone());
            async move {
                let t = Instant::now();
                let out = if update {
                    let mut o = objects[i].lock().unwrap().take().expect("created");
                    // The resourceVersion of the create guards the update, as
                    // custom objects allow no unconditional update.
                    o.data["spec"] = spec(i, 2);
                    api.replace(&format!("{prefix}-{i}"), &PostParams::default(), &o)
                        .await?
                } else {
                    api.create(&PostParams::default(), &object(&ar, prefix, i))
                        .await?
                };
                latencies.lock().unwrap().push(t.elapsed());
                *objects[i].lock().unwrap() = Some(out);
                Ok(())
            }
        })
        .await?;
    }
    let elapsed = started.elapsed();
    let cpu = cpu_seconds(pid) - cpu;
    let mut latencies = std::mem::take(&mut *latencies.lock().unwrap());
    latencies.sort();
    Ok(Phase {
        rate: n as f64 / elapsed.as_secs_f64(),
        latencies,
        cpu_ms_per_write: cpu * 1e3 / n as f64,
    })
}

/// The status code of a failed write (0 when it succeeded).
fn refused(r: Result<DynamicObject, kube::Error>) -> (u16, String) {
    match r {
        Ok(_) => (0, String::new()),
        Err(kube::Error::Api(s)) => (s.code, s.message),
        Err(e) => (1, e.to_string()),
    }
}

/// Checks that the rules run (a broken object and an immutable-field change are
/// refused only by the CEL kind), so the figures measure what they claim.
async fn check_rules_run(
    plain: &Api<DynamicObject>,
    plain_ar: &ApiResource,
    ruled: &Api<DynamicObject>,
    ruled_ar: &ApiResource,
) -> anyhow::Result<()> {
    for (api, ar, want) in [(plain, plain_ar, 0), (ruled, ruled_ar, 422)] {
        let mut o = object(ar, "check-bad", 0);
        o.data["spec"]["ports"][3]["protocol"] = json!("ICMP");
        let (code, msg) = refused(api.create(&PostParams::default(), &o).await);
        anyhow::ensure!(code == want, "bad port: got {code} {msg}, want {want}");
        if want == 422 {
            anyhow::ensure!(msg.contains("unknown protocol"), "{msg}");
        }
        let o = object(ar, "check-immutable", 0);
        let mut o = api.create(&PostParams::default(), &o).await?;
        o.data["spec"]["clusterId"] = json!("changed");
        let (code, msg) = refused(
            api.replace("check-immutable-0", &PostParams::default(), &o)
                .await,
        );
        anyhow::ensure!(
            code == want,
            "clusterId change: got {code} {msg}, want {want}"
        );
        if want == 422 {
            anyhow::ensure!(msg.contains("clusterId is immutable"), "{msg}");
        }
    }
    Ok(())
}

/// A deep, wide schema with descriptions, as generated CRDs (operators'
/// pod templates, cloud resource CRDs) have: `depth` levels of objects, arrays of
/// objects and maps, with every kind of leaf.
fn big_node(path: &str, depth: usize) -> Value {
    let desc = |what: &str| {
        format!(
            "{what} configures how the {path} stanza behaves. When unset the controller \
             picks a default suited to the workload; see the operator documentation for the \
             rules that apply when several stanzas name the same field. More info: \
             https://example.com/docs/reference/{path}"
        )
    };
    let mut props = serde_json::Map::new();
    let leaves = [
        ("name", json!({"type": "string", "maxLength": 253})),
        ("enabled", json!({"type": "boolean"})),
        (
            "count",
            json!({"type": "integer", "format": "int32", "minimum": 0}),
        ),
        (
            "mode",
            json!({"type": "string", "enum": ["Auto", "Manual", "Disabled"]}),
        ),
        (
            "port",
            json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}),
        ),
        (
            "tags",
            json!({"type": "array", "items": {"type": "string"}}),
        ),
        (
            "labels",
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
        ),
        ("ratio", json!({"type": "number"})),
    ];
    for (name, mut leaf) in leaves {
        leaf["description"] = json!(desc(name));
        props.insert(name.into(), leaf);
    }
    if depth > 0 {
        let width = match depth {
            4 | 3 => 3,
            _ => 2,
        };
        for k in 0..width {
            let child_path = format!("{path}.child{k}");
            let child = big_node(&child_path, depth - 1);
            let child = if k == 1 {
                json!({"type": "array", "description": desc("items"), "items": child})
            } else {
                child
            };
            props.insert(format!("child{k}"), child);
        }
    }
    json!({"type": "object", "description": desc("object"), "properties": props})
}

/// The ~1 MB CRD: spec sections of depth-4 subtrees until its JSON reaches `target` bytes.
fn big_crd(target: usize) -> (Value, usize, usize) {
    let mut sections = serde_json::Map::new();
    let mut size = 0;
    let mut k = 0;
    let whole = |sections: &serde_json::Map<String, Value>| {
        let schema = json!({"type": "object", "description": "BigThing is a large generated kind.",
        "properties": {
            "spec": {"type": "object", "description": "The desired state of the BigThing.",
                "properties": sections},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        }});
        crd("bigthings", "BigThing", schema)
    };
    while size < target {
        let section = big_node(&format!("spec.section{k}"), 4);
        size += serde_json::to_vec(&section).map_or(0, |b| b.len());
        sections.insert(format!("section{k}"), section);
        k += 1;
    }
    let c = whole(&sections);
    let size = serde_json::to_vec(&c).map_or(0, |b| b.len());
    (c, size, k)
}

fn kubectl() -> String {
    std::env::var("BERTH_KUBECTL").unwrap_or_else(|_| "kubectl".into())
}

/// Times (b): returns (create request, Established, OpenAPI served, kubectl explain
/// answered, one more kubectl explain), each but the last from the create request.
async fn big_crd_times(
    server: &BenchServer,
    big: Value,
) -> anyhow::Result<(Duration, Duration, Duration, Duration, Duration)> {
    let client = server.client.clone();
    let kubeconfig = server.data_dir().join("kubeconfig.yaml");
    let cache = server.data_dir().join("kube-cache");
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let big: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(big)?;
    // The three watchers run from the moment the create is sent.
    // A watch opened before the create sees the Established status as it is
    // written (polling would be bound by reading a 1 MB object each time).
    let events = crds
        .watch(
            &kube::api::WatchParams::default()
                .fields(&format!("metadata.name=bigthings.{GROUP}"))
                .timeout(120),
            "0",
        )
        .await?;
    let start = Instant::now();
    let established = tokio::spawn(async move {
        use futures::StreamExt;
        let mut events = std::pin::pin!(events);
        while let Some(ev) = events.next().await {
            if let kube::api::WatchEvent::Added(c) | kube::api::WatchEvent::Modified(c) = ev? {
                let established = c
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                if established {
                    return Ok::<_, anyhow::Error>(start.elapsed());
                }
            }
        }
        anyhow::bail!("the watch ended before BigThing was Established")
    });
    let openapi = tokio::spawn({
        let client = client.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let req =
                    http::Request::get(format!("/openapi/v3/apis/{GROUP}/v1")).body(Vec::new())?;
                if let Ok(text) = client.request_text(req).await
                    && text.contains("spec.section0.child0.child0")
                    && text.contains("BigThing is a large generated kind.")
                {
                    return Ok::<_, anyhow::Error>(start.elapsed());
                }
                anyhow::ensure!(Instant::now() < deadline, "OpenAPI never served BigThing");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    });
    let explain = {
        let (kubeconfig, cache) = (kubeconfig.clone(), cache.clone());
        tokio::task::spawn_blocking(move || {
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let out = std::process::Command::new(kubectl())
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .arg("--cache-dir")
                    .arg(&cache)
                    .args(["explain", "bigthing.spec"])
                    .output()?;
                let text = String::from_utf8_lossy(&out.stdout);
                if out.status.success() && text.contains("section0") {
                    return Ok::<_, anyhow::Error>(start.elapsed());
                }
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "kubectl explain never answered: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    crds.create(&PostParams::default(), &big).await?;
    let created = start.elapsed();
    let established = established.await??;
    let openapi = openapi.await??;
    let explain = explain.await??;
    // A warm explain (discovery cached), deep in the tree.
    let t = Instant::now();
    let out = std::process::Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(&cache)
        .args(["explain", "bigthing.spec.section3.child0.child2"])
        .output()?;
    let again = t.elapsed();
    anyhow::ensure!(
        out.status.success()
            && String::from_utf8_lossy(&out.stdout).contains("spec.section3.child0.child2"),
        "deep explain: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((created, established, openapi, explain, again))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let n = env("BERTH_BENCH_OBJECTS", 2000);
    let clients = env("BERTH_BENCH_CLIENTS", 16);
    let server = BenchServer::start(
        "crd-bench",
        &["--disable-scheduler", "--disable-controller-manager"],
    )
    .await?;
    let pid = server.child.id();
    let client = server.client.clone();
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let ruled_schema = bench_schema(true);
    let rules = count_rules(&ruled_schema);
    assert_eq!(rules, 50, "the benchmark is about 50 rules");
    for (plural, kind, schema) in [
        ("plainwidgets", "PlainWidget", bench_schema(false)),
        ("ruledwidgets", "RuledWidget", ruled_schema),
    ] {
        crds.create(
            &PostParams::default(),
            &serde_json::from_value(crd(plural, kind, schema))?,
        )
        .await?;
        wait_established(&client, &format!("{plural}.{GROUP}")).await?;
    }
    let ar = |kind: &str, plural: &str| ApiResource {
        group: GROUP.into(),
        version: "v1".into(),
        api_version: format!("{GROUP}/v1"),
        kind: kind.into(),
        plural: plural.into(),
    };
    let (plain_ar, ruled_ar) = (
        ar("PlainWidget", "plainwidgets"),
        ar("RuledWidget", "ruledwidgets"),
    );
    let plain: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &plain_ar);
    let ruled: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ruled_ar);
    check_rules_run(&plain, &plain_ar, &ruled, &ruled_ar).await?;
    eprintln!("CRDs Established, rules checked; (a) {n} creates and updates of each kind");

    // Warm-up (connections, caches, allocator) on objects outside the measured set.
    for (api, ar) in [(&plain, &plain_ar), (&ruled, &ruled_ar)] {
        let warm = Arc::new((0..200).map(|_| Mutex::new(None)).collect::<Vec<_>>());
        phase(api, ar, "warm", &warm, clients, pid, false).await?;
        phase(api, ar, "warm", &warm, clients, pid, true).await?;
    }

    // Creates plain then ruled, updates ruled then plain: neither kind always
    // runs on the emptier store.
    let plain_objs = Arc::new((0..n).map(|_| Mutex::new(None)).collect::<Vec<_>>());
    let ruled_objs = Arc::new((0..n).map(|_| Mutex::new(None)).collect::<Vec<_>>());
    let pc = phase(&plain, &plain_ar, "obj", &plain_objs, clients, pid, false).await?;
    let rc = phase(&ruled, &ruled_ar, "obj", &ruled_objs, clients, pid, false).await?;
    let ru = phase(&ruled, &ruled_ar, "obj", &ruled_objs, clients, pid, true).await?;
    let pu = phase(&plain, &plain_ar, "obj", &plain_objs, clients, pid, true).await?;
    eprintln!("(a) done; (b) 1 MB CRD");

    let (big, big_size, sections) = big_crd(950_000);
    let fields = count_fields(&big);
    let (created, established, openapi, explain, again) = big_crd_times(&server, big).await?;

    println!(
        "| figure ({n} objects, {clients} clients, JSON over HTTPS) | no rules | {rules} CEL rules | ratio |"
    );
    println!("|---|---|---|---|");
    println!(
        "| creates/s | {:.0} | {:.0} | {:.2}× slower |",
        pc.rate,
        rc.rate,
        pc.rate / rc.rate
    );
    println!(
        "| create latency p50 / p99 | {:.1} / {:.1} ms | {:.1} / {:.1} ms | {:.2}× / {:.2}× |",
        pc.p(0.5),
        pc.p(0.99),
        rc.p(0.5),
        rc.p(0.99),
        rc.p(0.5) / pc.p(0.5),
        rc.p(0.99) / pc.p(0.99)
    );
    println!(
        "| updates/s | {:.0} | {:.0} | {:.2}× slower |",
        pu.rate,
        ru.rate,
        pu.rate / ru.rate
    );
    println!(
        "| update latency p50 / p99 | {:.1} / {:.1} ms | {:.1} / {:.1} ms | {:.2}× / {:.2}× |",
        pu.p(0.5),
        pu.p(0.99),
        ru.p(0.5),
        ru.p(0.99),
        ru.p(0.5) / pu.p(0.5),
        ru.p(0.99) / pu.p(0.99)
    );
    println!(
        "| server CPU per create / update | {:.2} / {:.2} ms | {:.2} / {:.2} ms | {:.2}× / {:.2}× |",
        pc.cpu_ms_per_write,
        pu.cpu_ms_per_write,
        rc.cpu_ms_per_write,
        ru.cpu_ms_per_write,
        rc.cpu_ms_per_write / pc.cpu_ms_per_write,
        ru.cpu_ms_per_write / pu.cpu_ms_per_write
    );
    println!();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "| {:.2} MB CRD ({sections} spec sections, {} fields with descriptions; from the create request) | time |",
        big_size as f64 / 1e6,
        fields
    );
    println!("|---|---|");
    println!("| create request answered | {:.0} ms |", ms(created));
    println!(
        "| Established=True seen (a watch) | {:.0} ms |",
        ms(established)
    );
    println!(
        "| /openapi/v3/apis/{GROUP}/v1 serves the schema (polling every 10 ms) | {:.0} ms |",
        ms(openapi)
    );
    println!(
        "| `kubectl explain bigthing.spec` answers (kubectl in a loop) | {:.0} ms |",
        ms(explain)
    );
    println!(
        "| one more `kubectl explain` (deep field, discovery cached) | {:.0} ms |",
        ms(again)
    );
    drop(server);
    Ok(())
}
