//! Leader election on a coordination.k8s.io/v1 Lease, as upstream's
//! `client-go/tools/leaderelection` with the `leases` resource lock: the
//! scheduler and the controller-manager each hold a Lease in `kube-system`
//! (`kube-scheduler`, `kube-controller-manager`) so that two servers sharing a
//! store run one of each.
//!
//! Timings are upstream's defaults: a Lease is valid for `leaseDurationSeconds`
//! (15 s) after the holder last renewed it as OBSERVED by this process (its own
//! clock, so clock skew between servers does not matter); the holder tries to
//! renew every retry period (2 s) and gives up leadership when it has not
//! renewed for the renew deadline (10 s); contenders retry every retry period.
//!
//! Upstream exits the process when it loses leadership. In one binary that
//! also serves the API, [`run`] instead STOPS the component and contends
//! again: each term runs the component on its own Tokio runtime, shut down on
//! loss, so every task the component spawned (informers, writers) ends with
//! it and nothing of the old term can write after the Lease expired for us.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::Error;

/// Upstream's defaults (component-base LeaderElectionConfiguration).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// Where kube-scheduler and kube-controller-manager keep their Leases.
pub const NAMESPACE: &str = "kube-system";
/// Upstream's JitterFactor for the acquire retry.
const JITTER: f64 = 1.2;

#[derive(Debug, Clone)]
pub struct Config {
    pub namespace: String,
    /// The Lease's name: the component (`kube-scheduler`).
    pub name: String,
    /// `holderIdentity`: `<hostname>_<uuid>` as upstream's components.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Config {
    /// Upstream's defaults for the Lease `name` in `kube-system`.
    pub fn new(name: impl Into<String>, identity: impl Into<String>) -> Self {
        Config {
            namespace: NAMESPACE.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: LEASE_DURATION,
            renew_deadline: RENEW_DEADLINE,
            retry_period: RETRY_PERIOD,
        }
    }
}

/// `<hostname>_<uuid>`, the identity upstream's components use.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// What to do with the Lease as last read.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Write this spec (create or update): we hold, renew or take over the Lease.
    Take(LeaseSpec),
    /// Someone else holds a valid Lease.
    HeldBy(String),
}

/// Upstream's tryAcquireOrRenew on the record `current` (`None`: no Lease yet).
/// `expired`: whether the holder's lease has run out as this process observed
/// it (`observed + leaseDurationSeconds <= now`).
pub fn decide(
    current: Option<&LeaseSpec>,
    expired: bool,
    identity: &str,
    lease_duration: Duration,
    now: Timestamp,
) -> Decision {
    let holder = current
        .and_then(|s| s.holder_identity.as_deref())
        .unwrap_or_default();
    let ours = holder == identity;
    if !holder.is_empty() && !ours && !expired {
        return Decision::HeldBy(holder.to_string());
    }
    let transitions = current.and_then(|s| s.lease_transitions).unwrap_or(0);
    let (acquire_time, lease_transitions) = match current {
        Some(s) if ours => (s.acquire_time.clone(), transitions),
        Some(_) => (Some(MicroTime(now)), transitions + 1),
        None => (Some(MicroTime(now)), 0),
    };
    Decision::Take(LeaseSpec {
        holder_identity: Some(identity.to_string()),
        lease_duration_seconds: Some(lease_duration.as_secs().max(1) as i32),
        acquire_time,
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(lease_transitions),
        ..Default::default()
    })
}

/// One contender for one Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    cfg: Config,
    /// The record last read and when this process first saw it (upstream's
    /// observedRecord/observedTime): expiry is judged on our own clock.
    observed: Option<(LeaseSpec, Instant)>,
}

impl LeaderElector {
    pub fn new(client: kube::Client, cfg: Config) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            observed: None,
        }
    }

    pub fn identity(&self) -> &str {
        &self.cfg.identity
    }

    /// One attempt to acquire or renew; `Ok(true)` when we hold the Lease now.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, Error> {
        let now = Instant::now();
        let existing = self.api.get_opt(&self.cfg.name).await?;
        let spec = existing.as_ref().and_then(|l| l.spec.clone());
        if let Some(spec) = &spec
            && self.observed.as_ref().is_none_or(|(seen, _)| seen != spec)
        {
            self.observed = Some((spec.clone(), now));
        }
        let expired = match &self.observed {
            Some((seen, at)) => {
                let secs = seen.lease_duration_seconds.unwrap_or(0).max(0) as u64;
                *at + Duration::from_secs(secs) <= now
            }
            None => true,
        };
        let decision = decide(
            spec.as_ref(),
            expired,
            &self.cfg.identity,
            self.cfg.lease_duration,
            Timestamp::now(),
        );
        let Decision::Take(next) = decision else {
            return Ok(false);
        };
        let written = match existing {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.cfg.name.clone()),
                        namespace: Some(self.cfg.namespace.clone()),
                        ..Default::default()
                    },
                    spec: Some(next),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            Some(mut lease) => {
                // Replace guarded by resourceVersion: of two contenders, one wins.
                lease.spec = Some(next);
                self.api
                    .replace(&self.cfg.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match written {
            Ok(lease) => {
                if let Some(spec) = lease.spec {
                    self.observed = Some((spec, Instant::now()));
                }
                Ok(true)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Retries every retry period (with upstream's jitter) until we hold the Lease.
    pub async fn acquire(&mut self) {
        let mut logged = false;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    info!(lease = %self.cfg.name, identity = %self.cfg.identity, "successfully acquired lease");
                    return;
                }
                Ok(false) => {
                    if !logged {
                        info!(lease = %self.cfg.name, "attempting to acquire leader lease; held by another");
                        logged = true;
                    }
                }
                Err(e) => {
                    warn!(lease = %self.cfg.name, error = %e, "error retrieving resource lock")
                }
            }
            let jitter = 1.0 + rand::random::<f64>() * (JITTER - 1.0);
            tokio::time::sleep(self.cfg.retry_period.mul_f64(jitter)).await;
        }
    }

    /// Renews every retry period; returns when a renewal has not succeeded
    /// for the renew deadline (leadership lost).
    pub async fn hold(&mut self) {
        let mut last_renew = Instant::now();
        loop {
            tokio::time::sleep(self.cfg.retry_period).await;
            let attempt = tokio::time::timeout(
                self.cfg.renew_deadline.saturating_sub(last_renew.elapsed()),
                self.try_acquire_or_renew(),
            )
            .await;
            match attempt {
                Ok(Ok(true)) => last_renew = Instant::now(),
                Ok(Ok(false)) => {
                    warn!(lease = %self.cfg.name, "lease taken by another holder");
                    return;
                }
                Ok(Err(e)) => warn!(lease = %self.cfg.name, error = %e, "failed to renew lease"),
                Err(_) => {}
            }
            if last_renew.elapsed() >= self.cfg.renew_deadline {
                warn!(lease = %self.cfg.name, "failed to renew lease: timed out waiting for the condition");
                return;
            }
        }
    }

    /// Gives the Lease up (upstream's ReleaseOnCancel): an empty holder with a
    /// 1 s duration, so a contender takes over at once.
    pub async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.cfg.name).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return;
        }
        spec.holder_identity = Some(String::new());
        spec.lease_duration_seconds = Some(1);
        let now = MicroTime(Timestamp::now());
        spec.acquire_time = Some(now.clone());
        spec.renew_time = Some(now);
        if let Err(e) = self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            warn!(lease = %self.cfg.name, error = %e, "releasing lease");
        }
    }
}

/// Runs `component` only while this process holds the Lease, forever: acquire,
/// run a term, and on losing the Lease stop the component (its own runtime is
/// shut down, dropping every task it spawned) and contend again. If the
/// component ends by itself the Lease is released and `run` returns.
pub async fn run<F, Fut>(client: kube::Client, cfg: Config, component: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    run_until(client, cfg, component, std::future::pending()).await
}

/// [`run`] until `stop` completes (the process is shutting down): then the
/// component is stopped and the Lease released (upstream's ReleaseOnCancel),
/// so a restarted server leads again at once instead of after the lease
/// duration.
pub async fn run_until<F, Fut, S>(client: kube::Client, cfg: Config, component: F, stop: S)
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
    S: Future<Output = ()>,
{
    let name = cfg.name.clone();
    let mut elector = LeaderElector::new(client, cfg);
    let mut stop = std::pin::pin!(stop);
    loop {
        tokio::select! {
            _ = elector.acquire() => {}
            _ = &mut stop => return,
        }
        let mut term = match Term::start(&name) {
            Ok(t) => t,
            Err(e) => {
                warn!(lease = %name, error = %e, "cannot start a runtime for the component");
                elector.release().await;
                return;
            }
        };
        info!(lease = %name, identity = %elector.identity(), "became leader; starting");
        let task = term.spawn(component());
        tokio::select! {
            _ = elector.hold() => {
                warn!(lease = %name, "leaderelection lost; stopping the component");
                drop(term);
            }
            _ = task => {
                drop(term);
                elector.release().await;
                return;
            }
            _ = &mut stop => {
                drop(term);
                elector.release().await;
                info!(lease = %name, "released the lease on shutdown");
                return;
            }
        }
    }
}

/// One leadership term's runtime. Dropping it (on loss, or when the process
/// shuts down and drops `run`) stops every task of the term without blocking,
/// which dropping a `Runtime` inside another runtime would do (and panic).
struct Term {
    rt: Option<tokio::runtime::Runtime>,
    /// The component's root task.
    root: Option<tokio::task::AbortHandle>,
}

/// How long a stopping term's component may take to drop its futures.
const TERM_STOP_WAIT: Duration = Duration::from_secs(2);

impl Term {
    fn start(name: &str) -> std::io::Result<Self> {
        term_runtime(name).map(|rt| Term {
            rt: Some(rt),
            root: None,
        })
    }

    fn spawn<F>(&mut self, fut: F) -> tokio::task::JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let task = match &self.rt {
            Some(rt) => rt.spawn(fut),
            None => tokio::spawn(fut),
        };
        self.root = Some(task.abort_handle());
        task
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        let Some(rt) = self.rt.take() else {
            return;
        };
        // The component first: dropping its futures (kube's controllers) aborts
        // the tasks they spawned, and nothing polls those any more. Shutting the
        // runtime down at once instead cancels a reconcile task under a
        // controller that is still being polled, and kube-runtime panics on the
        // cancelled join ("JoinError::Cancelled"). Off this thread: a blocking
        // wait inside the caller's runtime is not allowed.
        let root = self.root.take();
        if let Some(r) = &root {
            r.abort();
        }
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + TERM_STOP_WAIT;
            while root.as_ref().is_some_and(|r| !r.is_finished())
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            rt.shutdown_background();
        });
    }
}

/// A runtime for one leadership term, with as many workers as the machine has cores.
fn term_runtime(name: &str) -> std::io::Result<tokio::runtime::Runtime> {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name(name)
        .enable_all()
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: &str, acquire: Timestamp, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(acquire)),
            renew_time: Some(MicroTime(acquire)),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    /// (case, current record, expired, want: None = held by another, else (acquireTime, leaseTransitions))
    type Case = (
        &'static str,
        Option<LeaseSpec>,
        bool,
        Option<(Timestamp, i32)>,
    );

    #[test]
    fn decisions_follow_upstreams_try_acquire_or_renew() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let d = LEASE_DURATION;
        // (case, current, expired, want: None = held by other, Some((acquire, transitions)))
        let cases: Vec<Case> = vec![
            ("no lease yet", None, true, Some((now, 0))),
            (
                "we hold it: renew keeps acquireTime",
                Some(spec("me", t0, 3)),
                false,
                Some((t0, 3)),
            ),
            (
                "we hold it, even if expired",
                Some(spec("me", t0, 3)),
                true,
                Some((t0, 3)),
            ),
            (
                "another holds a valid lease",
                Some(spec("other", t0, 3)),
                false,
                None,
            ),
            (
                "another's lease expired: take over",
                Some(spec("other", t0, 3)),
                true,
                Some((now, 4)),
            ),
            (
                "released (empty holder)",
                Some(spec("", t0, 4)),
                false,
                Some((now, 5)),
            ),
        ];
        for (case, current, expired, want) in cases {
            let got = decide(current.as_ref(), expired, "me", d, now);
            match (got, want) {
                (Decision::HeldBy(h), None) => assert_eq!(h, "other", "{case}"),
                (Decision::Take(s), Some((acquire, transitions))) => {
                    assert_eq!(s.holder_identity.as_deref(), Some("me"), "{case}");
                    assert_eq!(s.lease_duration_seconds, Some(15), "{case}");
                    assert_eq!(s.acquire_time, Some(MicroTime(acquire)), "{case}");
                    assert_eq!(s.renew_time, Some(MicroTime(now)), "{case}");
                    assert_eq!(s.lease_transitions, Some(transitions), "{case}");
                }
                (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn identity_is_host_and_uuid() {
        let id = default_identity();
        let (host, uuid) = id.rsplit_once('_').unwrap();
        assert!(!host.is_empty());
        assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{id}");
        assert_ne!(default_identity(), id);
    }
}
