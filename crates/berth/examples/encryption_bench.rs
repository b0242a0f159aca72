//! Encryption at rest benchmark: Secret create/get throughput through a real
//! `berth server` with `--encryption-provider-config` naming Secrets under
//! identity, aescbc, aesgcm and secretbox, one server after the other in one
//! run, and each provider's raw seal/open rate of the same stored Secret.
//!
//! 16 kube-rs clients over HTTPS create BERTH_ENC_BENCH_SECRETS (default 2000)
//! Secrets of 1 KiB data, then GET each of them twice (a GET reads the store,
//! so every one is decrypted; lists are served from the watch cache).
//!
//! cargo build --release -p berth --bin berth --example encryption_bench && ./target/release/examples/encryption_bench
//! (extra arguments go to every `berth server`.)

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};

mod bench_common;

use bench_common::{BenchServer, concurrently, cpu_seconds};

const CLIENTS: usize = 16;
/// 32 bytes, base64: an AES-256 and a secretbox key.
const KEY: &str = "YmVuY2htYXJrIGtleSBvZiB0aGlydHktdHdvIGJ5dGU=";

fn config(provider: &str) -> String {
    let p = match provider {
        "identity" => "  - identity: {}\n".to_string(),
        p => format!("  - {p}:\n      keys:\n      - name: bench\n        secret: {KEY}\n"),
    };
    format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n\
         - resources: [secrets]\n  providers:\n{p}"
    )
}

fn secret(name: &str) -> Secret {
    let mut data = BTreeMap::new();
    data.insert("tls.key".to_string(), ByteString(vec![b'k'; 1024]));
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    }
}

struct Figures {
    creates: f64,
    gets: f64,
    cpu_per_1k: f64,
}

async fn measure(provider: &str, n: usize) -> anyhow::Result<Figures> {
    let cfg = std::env::temp_dir().join(format!(
        "berth-encryption-bench-{provider}-{}.yaml",
        std::process::id()
    ));
    std::fs::write(&cfg, config(provider))?;
    let cfg_arg = cfg.to_string_lossy().into_owned();
    let server = BenchServer::start(
        &format!("encryption-bench-{provider}"),
        &[
            "--disable-scheduler",
            "--disable-controller-manager",
            "--encryption-provider-config",
            &cfg_arg,
        ],
    )
    .await;
    let _ = std::fs::remove_file(&cfg);
    let server = server?;
    let pid = server.child.id();
    let secrets: Api<Secret> = Api::namespaced(server.client.clone(), "default");
    let cpu0 = cpu_seconds(pid);
    let started = Instant::now();
    let api = secrets.clone();
    concurrently(n, CLIENTS, move |i| {
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &secret(&format!("s-{i}")))
                .await?;
            Ok(())
        }
    })
    .await?;
    let creates = n as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    let api = secrets.clone();
    concurrently(2 * n, CLIENTS, move |i| {
        let api = api.clone();
        async move {
            let s = api.get(&format!("s-{}", i % n)).await?;
            anyhow::ensure!(
                s.data
                    .is_some_and(|d| d.get("tls.key").is_some_and(|v| v.0.len() == 1024))
            );
            Ok(())
        }
    })
    .await?;
    let gets = 2.0 * n as f64 / started.elapsed().as_secs_f64();
    let cpu_per_1k = (cpu_seconds(pid) - cpu0) / (3 * n) as f64 * 1000.0;
    Ok(Figures {
        creates,
        gets,
        cpu_per_1k,
    })
}

/// Seals and opens of one stored Secret per second, on this thread.
fn raw_rate(provider: &str) -> anyhow::Result<(f64, f64, usize)> {
    let t = berth_apiserver::encryption::config::parse(&config(provider))
        .map_err(anyhow::Error::msg)?;
    let key = "/registry/secrets/default/s-0";
    let r = t
        .for_key(key)
        .ok_or_else(|| anyhow::anyhow!("secrets not configured"))?;
    let plain = Bytes::from(serde_json::to_vec(&secret("s-0"))?);
    let rounds = 20_000;
    let started = Instant::now();
    let mut sealed = Bytes::new();
    for _ in 0..rounds {
        sealed = r.to_storage(&plain, key)?;
    }
    let seal = rounds as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    for _ in 0..rounds {
        anyhow::ensure!(r.from_storage(&sealed, key)? == plain);
    }
    let open = rounds as f64 / started.elapsed().as_secs_f64();
    Ok((seal, open, sealed.len() - plain.len()))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::var("BERTH_ENC_BENCH_SECRETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    println!("{n} Secrets of 1 KiB, {CLIENTS} clients over HTTPS; each provider its own server");
    println!(
        "{:<10} {:>12} {:>12} {:>20} {:>14} {:>14} {:>9}",
        "provider", "creates/s", "gets/s", "server CPU s/1k req", "seals/s", "opens/s", "+bytes"
    );
    let mut base = None;
    for provider in ["identity", "aescbc", "aesgcm", "secretbox"] {
        let f = measure(provider, n).await?;
        let (seal, open, overhead) = raw_rate(provider)?;
        let (c0, g0) = *base.get_or_insert((f.creates, f.gets));
        println!(
            "{provider:<10} {:>12.0} {:>12.0} {:>20.3} {:>14.0} {:>14.0} {:>9}   (creates {:+.1}%, gets {:+.1}% vs identity)",
            f.creates,
            f.gets,
            f.cpu_per_1k,
            seal,
            open,
            overhead,
            (f.creates / c0 - 1.0) * 100.0,
            (f.gets / g0 - 1.0) * 100.0,
        );
    }
    Ok(())
}
