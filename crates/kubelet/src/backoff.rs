//! Restart and image-pull back-off, as upstream's kubelet keeps them
//! (`k8s.io/client-go/util/flowcontrol.Backoff` without jitter).
//!
//! Each key (a container of a pod, or an image of a pod) has a current delay
//! that starts at 10 s and doubles up to 300 s. An entry whose last update is
//! more than the reset threshold (10 minutes) older than the new event starts
//! over: a container that ran for 10 minutes before crashing is restarted
//! after 10 s again.
//!
//! Time is passed in, so every rule is tested without sleeping.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// Upstream's kubelet defaults (`backOffPeriod`, `MaxContainerBackOff`, the
/// 600 s reset threshold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffConfig {
    pub initial: Duration,
    pub max: Duration,
    /// An event this long after the entry's last update resets it.
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(300),
            reset_after: Duration::from_secs(600),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    backoff: Duration,
    last_update: DateTime<Utc>,
}

/// Per-key exponential back-off (flowcontrol.Backoff).
#[derive(Debug, Clone, Default)]
pub struct Backoff {
    config: BackoffConfig,
    entries: HashMap<String, Entry>,
}

fn elapsed(from: DateTime<Utc>, to: DateTime<Utc>) -> Duration {
    (to - from).to_std().unwrap_or(Duration::ZERO)
}

impl Backoff {
    pub fn new(config: BackoffConfig) -> Self {
        Self {
            config,
            entries: HashMap::new(),
        }
    }

    pub fn config(&self) -> BackoffConfig {
        self.config
    }

    fn expired(&self, event_time: DateTime<Utc>, last_update: DateTime<Utc>) -> bool {
        elapsed(last_update, event_time) > self.config.reset_after
    }

    /// The current delay of `key` (zero when it has none).
    pub fn get(&self, key: &str) -> Duration {
        self.entries.get(key).map_or(Duration::ZERO, |e| e.backoff)
    }

    /// Records one more failure of `key` at `event_time` (`Next`): the first
    /// (or the first after a reset) gets the initial delay, later ones double
    /// it up to the cap. `now` becomes the entry's last update.
    pub fn next(&mut self, key: &str, event_time: DateTime<Utc>, now: DateTime<Utc>) {
        let fresh = match self.entries.get(key) {
            None => true,
            Some(e) => self.expired(event_time, e.last_update),
        };
        let backoff = if fresh {
            self.config.initial
        } else {
            let current = self.get(key);
            current.saturating_mul(2).min(self.config.max)
        };
        self.entries.insert(
            key.to_string(),
            Entry {
                backoff,
                last_update: now,
            },
        );
    }

    /// Whether `key` is still backing off from an event at `event_time`
    /// (`IsInBackOffSince`: used with the last exit's finish time).
    pub fn is_in_backoff_since(
        &self,
        key: &str,
        event_time: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> bool {
        let Some(e) = self.entries.get(key) else {
            return false;
        };
        if self.expired(event_time, e.last_update) {
            return false;
        }
        elapsed(event_time, now) < e.backoff
    }

    /// Whether `key` is still backing off from its last update
    /// (`IsInBackOffSinceUpdate`: used for image pulls).
    pub fn is_in_backoff_since_update(&self, key: &str, now: DateTime<Utc>) -> bool {
        let Some(e) = self.entries.get(key) else {
            return false;
        };
        if self.expired(now, e.last_update) {
            return false;
        }
        elapsed(e.last_update, now) < e.backoff
    }

    /// Forgets `key` (a successful pull resets its image back-off).
    pub fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Drops entries not updated for twice the cap (upstream's `GC`).
    pub fn gc(&mut self, now: DateTime<Utc>) {
        let keep = self.config.max.saturating_mul(2);
        self.entries
            .retain(|_, e| elapsed(e.last_update, now) <= keep);
    }
}

/// `format.Pod`: `name_namespace(uid)`.
pub fn format_pod(name: &str, namespace: &str, uid: &str) -> String {
    format!("{name}_{namespace}({uid})")
}

/// The restart back-off key of a container (upstream's `GetStableKey`): a
/// changed container spec (another hash) starts with a fresh back-off.
pub fn container_key(
    name: &str,
    namespace: &str,
    uid: &str,
    container: &str,
    hash: &str,
) -> String {
    format!("{name}_{namespace}_{uid}_{container}_{hash}")
}

/// The image pull back-off key (`<pod uid>_<image>`).
pub fn image_key(pod_uid: &str, image: &str) -> String {
    format!("{pod_uid}_{image}")
}

/// Waiting reason of a container in restart back-off.
pub const CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";
/// Waiting reason of a container whose image is in pull back-off.
pub const IMAGE_PULL_BACK_OFF: &str = "ImagePullBackOff";
/// Waiting reason right after a failed pull.
pub const ERR_IMAGE_PULL: &str = "ErrImagePull";
/// Event reason of both back-offs' events.
pub const EVENT_BACK_OFF: &str = "BackOff";

/// The waiting message of a container in CrashLoopBackOff:
/// `back-off 10s restarting failed container=app pod=web_default(uid)`.
pub fn crash_loop_message(delay: Duration, container: &str, pod: &str) -> String {
    format!(
        "back-off {} restarting failed container={container} pod={pod}",
        go_duration(delay)
    )
}

/// The Warning `BackOff` event of a container in CrashLoopBackOff.
pub fn crash_loop_event(container: &str, pod: &str) -> String {
    format!("Back-off restarting failed container {container} in pod {pod}")
}

/// The Normal `BackOff` event (and, with the previous pull error appended
/// after `": "`, the waiting message) of an image in pull back-off.
pub fn image_backoff_message(image: &str, previous_error: Option<&str>) -> String {
    match previous_error {
        Some(err) if !err.is_empty() => format!("Back-off pulling image {image:?}: {err}"),
        _ => format!("Back-off pulling image {image:?}"),
    }
}

/// Decides whether a container that exited at `finished_at` may be restarted
/// now (upstream's `doBackOff`): `Err(message)` while backing off, with the
/// CrashLoopBackOff waiting message; otherwise the restart is recorded.
pub fn restart_allowed(
    backoff: &mut Backoff,
    key: &str,
    finished_at: DateTime<Utc>,
    now: DateTime<Utc>,
    container: &str,
    pod: &str,
) -> Result<(), String> {
    if backoff.is_in_backoff_since(key, finished_at, now) {
        return Err(crash_loop_message(backoff.get(key), container, pod));
    }
    backoff.next(key, finished_at, now);
    Ok(())
}

/// Go's `time.Duration.String` (shared with the other components).
pub use berth_api::duration::go_duration;

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
    }

    #[test]
    fn delays_double_to_the_cap() {
        let mut b = Backoff::default();
        let mut delays = vec![];
        for i in 0..8 {
            b.next("k", t(i * 10), t(i * 10));
            delays.push(b.get("k").as_secs());
        }
        assert_eq!(delays, [10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn crash_loop_sequence_as_kubelet_sees_it() {
        // Each row: (container finished at, sync at, allowed?, delay shown).
        let mut b = Backoff::default();
        let pod = format_pod("web", "default", "u1");
        let rows: [(i64, i64, bool, &str); 7] = [
            (0, 1, true, ""), // first crash: restart at once
            (
                2,
                3,
                false,
                "back-off 10s restarting failed container=app pod=web_default(u1)",
            ), // 1 s after the 2nd exit
            (2, 12, true, ""), // 10 s passed
            (
                13,
                20,
                false,
                "back-off 20s restarting failed container=app pod=web_default(u1)",
            ),
            (13, 33, true, ""),
            (
                34,
                60,
                false,
                "back-off 40s restarting failed container=app pod=web_default(u1)",
            ),
            (34, 74, true, ""),
        ];
        for (finished, now, allowed, msg) in rows {
            let got = restart_allowed(&mut b, "k", t(finished), t(now), "app", &pod);
            match got {
                Ok(()) => assert!(allowed, "at {now}: restarted but should back off"),
                Err(m) => {
                    assert!(!allowed, "at {now}: backed off: {m}");
                    assert_eq!(m, msg);
                }
            }
        }
    }

    #[test]
    fn reset_after_running_ten_minutes() {
        let mut b = Backoff::default();
        for i in 0..5 {
            b.next("k", t(i), t(i));
        }
        assert_eq!(b.get("k"), Duration::from_secs(160));
        // The container was started at t(4) and ran 10 min + 1 s.
        assert!(!b.is_in_backoff_since("k", t(605), t(606)));
        b.next("k", t(605), t(606));
        assert_eq!(b.get("k"), Duration::from_secs(10));
        // Exactly 600 s is not "more than" the threshold: no reset.
        let mut b = Backoff::default();
        b.next("k", t(0), t(0));
        b.next("k", t(600), t(600));
        assert_eq!(b.get("k"), Duration::from_secs(20));
    }

    #[test]
    fn configurable_timings() {
        let mut b = Backoff::new(BackoffConfig {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(4),
            reset_after: Duration::from_secs(30),
        });
        let mut delays = vec![];
        for i in 0..4 {
            b.next("k", t(i), t(i));
            delays.push(b.get("k").as_secs());
        }
        assert_eq!(delays, [1, 2, 4, 4]);
        b.next("k", t(40), t(40));
        assert_eq!(b.get("k").as_secs(), 1);
    }

    #[test]
    fn keys_are_independent() {
        let mut b = Backoff::default();
        let a = container_key("web", "default", "u1", "app", "1a2b");
        let c = container_key("web", "default", "u1", "sidecar", "1a2b");
        b.next(&a, t(0), t(0));
        b.next(&a, t(1), t(1));
        assert_eq!(b.get(&a).as_secs(), 20);
        assert_eq!(b.get(&c), Duration::ZERO);
        assert!(!b.is_in_backoff_since(&c, t(1), t(2)));
    }

    #[test]
    fn image_pull_backoff() {
        let mut b = Backoff::default();
        let k = image_key("u1", "nosuch:latest");
        assert!(!b.is_in_backoff_since_update(&k, t(0)));
        b.next(&k, t(0), t(0));
        assert!(b.is_in_backoff_since_update(&k, t(9)));
        assert!(!b.is_in_backoff_since_update(&k, t(10)));
        b.next(&k, t(10), t(10));
        assert!(b.is_in_backoff_since_update(&k, t(29)));
        assert!(!b.is_in_backoff_since_update(&k, t(30)));
        assert_eq!(
            image_backoff_message("nosuch:latest", None),
            r#"Back-off pulling image "nosuch:latest""#
        );
        assert_eq!(
            image_backoff_message("nosuch:latest", Some("not found")),
            r#"Back-off pulling image "nosuch:latest": not found"#
        );
        b.reset(&k);
        assert!(!b.is_in_backoff_since_update(&k, t(31)));
    }

    #[test]
    fn gc_drops_stale_entries() {
        let mut b = Backoff::default();
        b.next("old", t(0), t(0));
        b.next("new", t(500), t(500));
        b.gc(t(601));
        assert_eq!(b.get("old"), Duration::ZERO);
        assert_eq!(b.get("new").as_secs(), 10);
    }

    #[test]
    fn event_texts() {
        let pod = format_pod("myapp-1", "default", "abc");
        assert_eq!(pod, "myapp-1_default(abc)");
        assert_eq!(
            crash_loop_event("busybox", &pod),
            "Back-off restarting failed container busybox in pod myapp-1_default(abc)"
        );
        assert_eq!(
            crash_loop_message(Duration::from_secs(300), "busybox", &pod),
            "back-off 5m0s restarting failed container=busybox pod=myapp-1_default(abc)"
        );
    }
}
