//! `--max-requests-inflight` and `--max-mutating-requests-inflight`: upstream's
//! legacy in-flight limit (`WithMaxInFlightLimit`), which bounds the requests
//! being served at once, read-only and mutating apart, so a flood of clients
//! gets a quick 429 instead of every request slowing to a crawl.
//!
//! As upstream: long-running requests (watches, proxy, exec, attach, port
//! forwarding, logs) are not counted; `get`/`list` share the read-only pool and
//! every other verb the mutating one; 0 means no limit; a member of
//! `system:masters` is served even when the pool is full (it still takes a slot
//! when one is free); the refusal is a plain-text 429 with `Retry-After: 1`.

use std::sync::Arc;

use berth_authz::Attributes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// kube-apiserver's defaults.
pub const DEFAULT_MAX_REQUESTS_INFLIGHT: usize = 400;
pub const DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT: usize = 200;

/// Upstream's `retryAfter`: the seconds a refused client is asked to wait.
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// Upstream's body of the refusal (`http.Error` adds the newline).
pub const TOO_MANY_REQUESTS: &str = "Too many requests, please try again later.\n";

const SYSTEM_MASTERS: &str = "system:masters";

/// Verbs of the read-only pool (upstream's `nonMutatingRequestVerbs`; `watch`
/// is long-running and never reaches the pools).
const NON_MUTATING_VERBS: &[&str] = &["get", "list", "watch"];

/// kube-apiserver's `BasicLongRunningRequestCheck`.
const LONG_RUNNING_VERBS: &[&str] = &["watch", "proxy"];
const LONG_RUNNING_SUBRESOURCES: &[&str] = &["attach", "exec", "proxy", "log", "portforward"];

/// Whether a request is long-running (not counted, no request timeout).
pub fn is_long_running(attrs: &Attributes) -> bool {
    LONG_RUNNING_VERBS.contains(&attrs.verb.as_str())
        || (attrs.resource_request
            && LONG_RUNNING_SUBRESOURCES.contains(&attrs.subresource.as_str()))
}

/// The two pools.
pub struct Limiter {
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
    max: (usize, usize),
}

/// A request's place: served (holding a slot while the permit lives, or
/// uncounted), or refused.
#[derive(Debug)]
pub enum Admit {
    Serve(Option<OwnedSemaphorePermit>),
    /// Refused; the pool's `request_kind` (`readOnly` or `mutating`).
    Busy(&'static str),
}

impl Limiter {
    /// `max_read_only` and `max_mutating`; 0 is no limit.
    pub fn new(max_read_only: usize, max_mutating: usize) -> Self {
        let pool = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        Limiter {
            read_only: pool(max_read_only),
            mutating: pool(max_mutating),
            max: (max_read_only, max_mutating),
        }
    }

    pub fn admit(&self, attrs: &Attributes) -> Admit {
        if is_long_running(attrs) {
            return Admit::Serve(None);
        }
        let (pool, kind) = if NON_MUTATING_VERBS.contains(&attrs.verb.as_str()) {
            (&self.read_only, "readOnly")
        } else {
            (&self.mutating, "mutating")
        };
        let Some(pool) = pool else {
            return Admit::Serve(None);
        };
        match pool.clone().try_acquire_owned() {
            Ok(permit) => Admit::Serve(Some(permit)),
            Err(_) if attrs.user.groups.iter().any(|g| g == SYSTEM_MASTERS) => Admit::Serve(None),
            Err(_) => Admit::Busy(kind),
        }
    }

    /// Requests being served now, (read-only, mutating), for the
    /// `apiserver_current_inflight_requests` gauge.
    pub fn in_flight(&self) -> (usize, usize) {
        let used = |p: &Option<Arc<Semaphore>>, max: usize| {
            p.as_ref().map_or(0, |s| max - s.available_permits())
        };
        (
            used(&self.read_only, self.max.0),
            used(&self.mutating, self.max.1),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_api::user::UserInfo;

    fn attrs(verb: &str, subresource: &str, groups: &[&str]) -> Attributes {
        Attributes {
            user: UserInfo::new("u", groups),
            verb: verb.into(),
            resource: "pods".into(),
            subresource: subresource.into(),
            resource_request: true,
            ..Default::default()
        }
    }

    #[test]
    fn long_running_requests_are_not_counted() {
        let l = Limiter::new(1, 1);
        for (verb, sub) in [
            ("watch", ""),
            ("get", "log"),
            ("create", "exec"),
            ("get", "attach"),
            ("create", "portforward"),
            ("get", "proxy"),
            ("proxy", ""),
        ] {
            assert!(is_long_running(&attrs(verb, sub, &[])), "{verb} {sub}");
            assert!(matches!(
                l.admit(&attrs(verb, sub, &[])),
                Admit::Serve(None)
            ));
        }
        assert!(!is_long_running(&attrs("get", "status", &[])));
    }

    #[test]
    fn each_pool_refuses_when_full_and_frees_its_slot() {
        let l = Limiter::new(1, 2);
        let r = l.admit(&attrs("list", "", &[]));
        assert!(matches!(r, Admit::Serve(Some(_))));
        assert!(matches!(
            l.admit(&attrs("get", "", &[])),
            Admit::Busy("readOnly")
        ));
        // The mutating pool is apart: two writes fit, the third is refused.
        let w1 = l.admit(&attrs("create", "", &[]));
        let w2 = l.admit(&attrs("patch", "", &[]));
        assert!(matches!(w1, Admit::Serve(Some(_))) && matches!(w2, Admit::Serve(Some(_))));
        assert!(matches!(
            l.admit(&attrs("delete", "", &[])),
            Admit::Busy("mutating")
        ));
        assert_eq!(l.in_flight(), (1, 2));
        drop(r);
        assert!(matches!(
            l.admit(&attrs("get", "", &[])),
            Admit::Serve(Some(_))
        ));
        assert_eq!(l.in_flight(), (0, 2));
    }

    #[test]
    fn system_masters_are_served_when_full_and_zero_is_unlimited() {
        let l = Limiter::new(1, 1);
        let _held = l.admit(&attrs("get", "", &[]));
        assert!(matches!(
            l.admit(&attrs("get", "", &["system:masters"])),
            Admit::Serve(None)
        ));
        let open = Limiter::new(0, 0);
        for _ in 0..1000 {
            assert!(matches!(
                open.admit(&attrs("create", "", &[])),
                Admit::Serve(None)
            ));
        }
    }
}
