//! Rolling update arithmetic (upstream `rolling.go` and the fencepost helpers in
//! `util/deployment_util.go`), kept pure so it is tested with tables.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::Error;

/// Resolves an int-or-percent against `total`; percentages round up or down.
pub fn scaled_value(v: Option<&IntOrString>, total: i32, round_up: bool) -> Result<i32, Error> {
    match v {
        None => Ok(0),
        Some(IntOrString::Int(i)) => Ok(*i),
        Some(IntOrString::String(s)) => {
            let pct: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| Error::IntOrPercent(s.clone()))?;
            let num = pct * i64::from(total);
            let v = if round_up {
                (num + 99).div_euclid(100)
            } else {
                num.div_euclid(100)
            };
            i32::try_from(v).map_err(|_| Error::IntOrPercent(s.clone()))
        }
    }
}

/// Upstream's `ResolveFenceposts`: (maxSurge rounded up, maxUnavailable rounded
/// down); both zero would deadlock the rollout, so maxUnavailable becomes 1.
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> Result<(i32, i32), Error> {
    let surge = scaled_value(max_surge, desired, true)?;
    let unavailable = scaled_value(max_unavailable, desired, false)?;
    Ok(if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    })
}

/// Upstream's `NewRSNewReplicas` for RollingUpdate: how big the new ReplicaSet
/// may grow given `current_total` pods across all ReplicaSets.
pub fn new_rs_new_replicas(desired: i32, max_surge: i32, current_total: i32, new_rs: i32) -> i32 {
    let max_total = desired + max_surge;
    if current_total >= max_total {
        return new_rs;
    }
    let scale_up = max_total - current_total;
    new_rs + scale_up.min(desired - new_rs).max(0)
}

/// Upstream's `maxScaledDown` in `reconcileOldReplicaSets`: how many old pods
/// may go without dropping below `desired - max_unavailable` available ones.
pub fn max_scaled_down(
    all_pods: i32,
    desired: i32,
    max_unavailable: i32,
    new_rs_replicas: i32,
    new_rs_available: i32,
) -> i32 {
    let min_available = desired - max_unavailable;
    let new_unavailable = new_rs_replicas - new_rs_available;
    all_pods - min_available - new_unavailable
}

/// Upstream's `scaleDownOldReplicaSetsForRollingUpdate` budget: old pods that
/// may be removed given the pods available now.
pub fn scale_down_budget(available: i32, desired: i32, max_unavailable: i32) -> i32 {
    (available - (desired - max_unavailable)).max(0)
}

/// Upstream's `getReplicaSetFraction`: the share of a scaling event that goes
/// to a ReplicaSet of `rs_replicas` when the deployment was last sized
/// `annotated` (max-replicas annotation) and is now `desired + max_surge`.
pub fn replica_set_fraction(rs_replicas: i32, desired: i32, max_surge: i32, annotated: i32) -> i32 {
    if desired == 0 {
        return -rs_replicas;
    }
    if annotated <= 0 {
        return 0;
    }
    let size = f64::from(rs_replicas) * f64::from(desired + max_surge) / f64::from(annotated);
    // Go's math.Round: half away from zero, as f64::round.
    #[allow(clippy::cast_possible_truncation)]
    let size = size.round() as i32;
    size - rs_replicas
}

/// Upstream's `GetProportion`: the fraction bounded by what is left to add.
pub fn proportion(rs_replicas: i32, fraction: i32, to_add: i32, added: i32) -> i32 {
    if rs_replicas == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.into())
    }

    #[test]
    fn fenceposts() {
        let i = IntOrString::Int;
        // (surge, unavailable, desired) -> (surge, unavailable)
        let cases = [
            (s("25%"), s("25%"), 10, (3, 2)),
            (s("25%"), s("25%"), 4, (1, 1)),
            (s("25%"), s("25%"), 3, (1, 0)),
            (s("25%"), s("25%"), 1, (1, 0)),
            (s("0%"), s("0%"), 10, (0, 1)),
            (i(0), i(0), 5, (0, 1)),
            (i(2), i(1), 5, (2, 1)),
            (s("50%"), s("33%"), 10, (5, 3)),
            (s("1%"), s("99%"), 10, (1, 9)),
            (s("100%"), s("100%"), 7, (7, 7)),
            (i(0), s("10%"), 5, (0, 1)),
        ];
        for (surge, unav, desired, want) in cases {
            assert_eq!(
                resolve_fenceposts(Some(&surge), Some(&unav), desired).ok(),
                Some(want),
                "{surge:?} {unav:?} {desired}"
            );
        }
        assert!(resolve_fenceposts(Some(&s("abc")), None, 3).is_err());
        assert!(resolve_fenceposts(Some(&s("5")), None, 3).is_err());
    }

    #[test]
    fn new_replicas() {
        // (desired, surge, current total, new rs) -> new rs size
        let cases = [
            (10, 3, 10, 0, 3),
            (10, 3, 13, 3, 3),
            (10, 3, 11, 3, 5),
            (10, 3, 8, 8, 10),
            (3, 1, 3, 0, 1),
            (3, 0, 2, 1, 2),
            (3, 0, 3, 1, 1),
            (4, 1, 20, 0, 0),
        ];
        for (d, surge, cur, new_rs, want) in cases {
            assert_eq!(
                new_rs_new_replicas(d, surge, cur, new_rs),
                want,
                "{d} {surge} {cur} {new_rs}"
            );
        }
    }

    #[test]
    fn scale_down() {
        // (all, desired, maxUnavailable, new replicas, new available) -> max scaled down
        let cases = [
            (13, 10, 2, 3, 0, 2),
            (13, 10, 2, 3, 3, 5),
            (10, 10, 0, 1, 0, -1),
            (11, 10, 0, 1, 1, 1),
            (4, 3, 1, 1, 0, 1),
        ];
        for (all, d, mu, nr, na, want) in cases {
            assert_eq!(max_scaled_down(all, d, mu, nr, na), want);
        }
        assert_eq!(scale_down_budget(10, 10, 2), 2);
        assert_eq!(scale_down_budget(7, 10, 2), 0);
        assert_eq!(scale_down_budget(12, 10, 0), 2);
    }

    #[test]
    fn proportional() {
        // 10 -> 15 replicas (surge 3 → 4): RS of 6 and 4 annotated max 13.
        assert_eq!(replica_set_fraction(6, 15, 4, 13), 3); // 6*19/13 = 8.77 → 9
        assert_eq!(replica_set_fraction(4, 15, 4, 13), 2); // 4*19/13 = 5.85 → 6
        assert_eq!(replica_set_fraction(4, 0, 0, 13), -4);
        assert_eq!(proportion(6, 3, 5, 0), 3);
        assert_eq!(proportion(4, 2, 5, 3), 2);
        assert_eq!(proportion(4, 2, 5, 4), 1);
        assert_eq!(proportion(4, -3, -2, 0), -2);
        assert_eq!(proportion(0, 3, 5, 0), 0);
    }
}
