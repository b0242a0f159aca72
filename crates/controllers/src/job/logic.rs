//! The pure parts of the Job controller: pod-failure back-off, completed
//! index sets in upstream's interval notation, how many pods should run.

use std::collections::BTreeSet;
use std::time::Duration;

/// Upstream's `DefaultJobPodFailureBackOff` and `MaxJobPodFailureBackOff`.
pub const BACKOFF_BASE: Duration = Duration::from_secs(10);
pub const BACKOFF_MAX: Duration = Duration::from_secs(600);

/// Delay before the next pod after `failures` consecutive failures since the
/// last success: 10 s, 20 s, 40 s … capped at 10 minutes; none without failures.
pub fn failure_backoff(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let shift = (failures - 1).min(16);
    BACKOFF_BASE.saturating_mul(1u32 << shift).min(BACKOFF_MAX)
}

/// Parses `status.completedIndexes` ("1,3-5,7"); bad pieces are skipped.
pub fn parse_indexes(s: &str) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>())
                    && a <= b
                {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(x) = part.parse() {
                    out.insert(x);
                }
            }
        }
    }
    out
}

/// Formats indexes as upstream does: runs of consecutive indexes become
/// `a-b` (two in a row stay as `a,b`).
pub fn format_indexes(set: &BTreeSet<i32>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut iter = set.iter().copied().peekable();
    while let Some(first) = iter.next() {
        let mut last = first;
        while iter.peek() == Some(&(last + 1)) {
            last += 1;
            iter.next();
        }
        match last - first {
            0 => parts.push(first.to_string()),
            1 => {
                parts.push(first.to_string());
                parts.push(last.to_string());
            }
            _ => parts.push(format!("{first}-{last}")),
        }
    }
    parts.join(",")
}

/// Pods that should be active: parallelism, but never more than the
/// completions still missing (upstream's manageJob).
pub fn want_active(parallelism: i32, completions: Option<i32>, succeeded: i32) -> i32 {
    let p = parallelism.max(0);
    match completions {
        Some(c) => (c - succeeded).max(0).min(p),
        // A work queue: once one pod succeeded, no new ones start.
        None if succeeded > 0 => 0,
        None => p,
    }
}

/// The first `n` indexes below `completions` that are neither completed nor
/// being worked on.
pub fn next_indexes(
    completions: i32,
    completed: &BTreeSet<i32>,
    active: &BTreeSet<i32>,
    n: usize,
) -> Vec<i32> {
    (0..completions.max(0))
        .filter(|i| !completed.contains(i) && !active.contains(i))
        .take(n)
        .collect()
}

/// The first `successPolicy` rule the completed indexes satisfy (Indexed
/// Jobs): all of `succeededIndexes`, or `succeededCount` of them (of any
/// index when `succeededIndexes` is unset).
pub fn success_policy_match(
    rules: &[k8s_openapi::api::batch::v1::SuccessPolicyRule],
    completed: &BTreeSet<i32>,
) -> Option<usize> {
    rules.iter().position(|r| {
        let count = r
            .succeeded_count
            .map(|c| usize::try_from(c.max(0)).unwrap_or(0));
        match r.succeeded_indexes.as_deref() {
            Some(idx) => {
                let wanted = parse_indexes(idx);
                let done = wanted.intersection(completed).count();
                match count {
                    Some(c) => done >= c,
                    None => done == wanted.len(),
                }
            }
            None => count.is_some_and(|c| completed.len() >= c),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::SuccessPolicyRule;

    #[test]
    fn success_policy_rules() {
        let rule = |idx: Option<&str>, count: Option<i32>| SuccessPolicyRule {
            succeeded_indexes: idx.map(String::from),
            succeeded_count: count,
        };
        let rules = vec![
            rule(Some("0,2-3"), None),
            rule(Some("4-9"), Some(2)),
            rule(None, Some(5)),
        ];
        let cases: &[(&[i32], Option<usize>)] = &[
            (&[], None),
            (&[0, 2], None),
            (&[0, 2, 3], Some(0)),
            (&[4, 9], Some(1)),
            (&[1, 5], None),
            (&[1, 5, 6, 7, 8], Some(1)),
            (&[1, 10, 11, 12, 13], Some(2)),
        ];
        for (done, want) in cases {
            let set: BTreeSet<i32> = done.iter().copied().collect();
            assert_eq!(success_policy_match(&rules, &set), *want, "{done:?}");
        }
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let cases = [
            (0, 0),
            (1, 10),
            (2, 20),
            (3, 40),
            (6, 320),
            (7, 600),
            (40, 600),
        ];
        for (failures, secs) in cases {
            assert_eq!(
                failure_backoff(failures),
                Duration::from_secs(secs),
                "{failures}"
            );
        }
    }

    #[test]
    fn index_sets_round_trip() {
        let cases: &[(&[i32], &str)] = &[
            (&[], ""),
            (&[0], "0"),
            (&[0, 1], "0,1"),
            (&[0, 1, 2], "0-2"),
            (&[1, 3, 4, 5, 7], "1,3-5,7"),
            (&[0, 2, 3], "0,2,3"),
        ];
        for (idx, text) in cases {
            let set: BTreeSet<i32> = idx.iter().copied().collect();
            assert_eq!(format_indexes(&set), *text);
            assert_eq!(parse_indexes(text), set, "{text}");
        }
        assert_eq!(parse_indexes("1,x,3-2,5"), BTreeSet::from([1, 5]));
    }

    #[test]
    fn active_targets() {
        let cases = [
            (2, Some(3), 0, 2),
            (2, Some(3), 2, 1),
            (2, Some(3), 3, 0),
            (5, Some(3), 0, 3),
            (2, None, 0, 2),
            (2, None, 1, 0),
            (0, Some(3), 0, 0),
        ];
        for (par, comp, succ, want) in cases {
            assert_eq!(want_active(par, comp, succ), want, "{par} {comp:?} {succ}");
        }
    }

    #[test]
    fn indexes_to_start() {
        let done = BTreeSet::from([0, 2]);
        let active = BTreeSet::from([1]);
        assert_eq!(next_indexes(5, &done, &active, 1), vec![3]);
        assert_eq!(next_indexes(5, &done, &active, 5), vec![3, 4]);
        assert_eq!(next_indexes(2, &done, &active, 5), Vec::<i32>::new());
    }
}
