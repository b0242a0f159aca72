//! Every policy over the same hint tables (upstream's `policy_test.go` cases
//! as the reference), on 2, 4 and 16 NUMA nodes.

use std::collections::BTreeMap;

use super::*;
use crate::bitmask::BitMask;

fn m(bits: &[usize]) -> BitMask {
    BitMask::new(bits).unwrap()
}

fn h(bits: &[usize], preferred: bool) -> TopologyHint {
    TopologyHint::new(m(bits), preferred)
}

fn provider(resource: &str, hints: Option<Vec<TopologyHint>>) -> HintMap {
    BTreeMap::from([(resource.to_string(), hints)])
}

struct Case {
    name: &'static str,
    nodes: usize,
    providers: Vec<HintMap>,
    /// (expected hint, admit) for best-effort, restricted, single-numa-node.
    best_effort: (TopologyHint, bool),
    restricted: (TopologyHint, bool),
    single: (TopologyHint, bool),
}

fn any(preferred: bool) -> TopologyHint {
    TopologyHint {
        affinity: None,
        preferred,
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "no providers",
            nodes: 2,
            providers: vec![],
            best_effort: (h(&[0, 1], true), true),
            restricted: (h(&[0, 1], true), true),
            single: (any(true), true),
        },
        Case {
            name: "providers without a preference",
            nodes: 2,
            providers: vec![HintMap::new(), provider("gpu", None)],
            best_effort: (h(&[0, 1], true), true),
            restricted: (h(&[0, 1], true), true),
            single: (any(true), true),
        },
        Case {
            name: "both prefer node 0",
            nodes: 2,
            providers: vec![
                provider("cpu", Some(vec![h(&[0], true), h(&[0, 1], false)])),
                provider("gpu", Some(vec![h(&[0], true), h(&[0, 1], false)])),
            ],
            best_effort: (h(&[0], true), true),
            restricted: (h(&[0], true), true),
            single: (h(&[0], true), true),
        },
        Case {
            name: "both fit either node: the lower one",
            nodes: 2,
            providers: vec![
                provider(
                    "cpu",
                    Some(vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)]),
                ),
                provider(
                    "gpu",
                    Some(vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)]),
                ),
            ],
            best_effort: (h(&[0], true), true),
            restricted: (h(&[0], true), true),
            single: (h(&[0], true), true),
        },
        Case {
            name: "CPUs on node 0, the device on node 1",
            nodes: 2,
            providers: vec![
                provider("cpu", Some(vec![h(&[0], true)])),
                provider("gpu", Some(vec![h(&[1], true)])),
            ],
            best_effort: (h(&[0, 1], false), true),
            restricted: (h(&[0, 1], false), false),
            single: (any(false), false),
        },
        Case {
            name: "CPUs fit one node, the device needs both",
            nodes: 2,
            providers: vec![
                provider(
                    "cpu",
                    Some(vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)]),
                ),
                provider("gpu", Some(vec![h(&[0, 1], true)])),
            ],
            best_effort: (h(&[0, 1], false), true),
            restricted: (h(&[0, 1], false), false),
            single: (any(false), false),
        },
        Case {
            name: "both need both nodes",
            nodes: 2,
            providers: vec![
                provider("cpu", Some(vec![h(&[0, 1], true)])),
                provider("gpu", Some(vec![h(&[0, 1], true)])),
            ],
            best_effort: (h(&[0, 1], true), true),
            restricted: (h(&[0, 1], true), true),
            single: (any(false), false),
        },
        Case {
            name: "a resource no placement satisfies",
            nodes: 2,
            providers: vec![
                provider("cpu", Some(vec![h(&[0], true)])),
                provider("gpu", Some(vec![])),
            ],
            best_effort: (h(&[0], false), true),
            restricted: (h(&[0], false), false),
            single: (any(false), false),
        },
        Case {
            name: "non-preferred: the width of the widest narrowest hint",
            nodes: 4,
            providers: vec![
                provider(
                    "cpu",
                    Some(vec![
                        h(&[0], false),
                        h(&[0, 1], false),
                        h(&[0, 1, 2, 3], false),
                    ]),
                ),
                provider(
                    "gpu",
                    Some(vec![
                        h(&[0, 1], false),
                        h(&[2, 3], false),
                        h(&[0, 1, 2, 3], false),
                    ]),
                ),
            ],
            best_effort: (h(&[0, 1], false), true),
            restricted: (h(&[0, 1], false), false),
            single: (any(false), false),
        },
        Case {
            name: "16 nodes: the one node both prefer",
            nodes: 16,
            providers: vec![
                provider(
                    "cpu",
                    Some(vec![h(&[5], true), h(&[9], true), h(&[5, 9], false)]),
                ),
                provider("gpu", Some(vec![h(&[9], true), h(&[12], true)])),
                provider("memory", Some(vec![h(&[9], true), h(&[15], true)])),
            ],
            best_effort: (h(&[9], true), true),
            restricted: (h(&[9], true), true),
            single: (h(&[9], true), true),
        },
        Case {
            name: "16 nodes: two nodes both prefer",
            nodes: 16,
            providers: vec![
                provider("cpu", Some(vec![h(&[4, 5], true), h(&[10, 14], true)])),
                provider("gpu", Some(vec![h(&[10, 14], true), h(&[4, 5, 6], false)])),
            ],
            best_effort: (h(&[10, 14], true), true),
            restricted: (h(&[10, 14], true), true),
            single: (any(false), false),
        },
        Case {
            name: "8 nodes: nothing in common, best-effort narrows what it can",
            nodes: 8,
            providers: vec![
                provider("cpu", Some(vec![h(&[3], true), h(&[3, 4], false)])),
                provider("gpu", Some(vec![h(&[4], true), h(&[3, 4], false)])),
            ],
            best_effort: (h(&[3], false), true),
            restricted: (h(&[3], false), false),
            single: (any(false), false),
        },
    ]
}

#[test]
fn every_policy_on_every_case() {
    for c in cases() {
        let numa = NumaInfo::uniform(c.nodes);
        let run = |name: &str| {
            new_policy(name, numa.clone(), PolicyOptions::default())
                .unwrap()
                .merge(&c.providers)
        };
        assert_eq!(
            run(POLICY_NONE),
            (TopologyHint::default(), true),
            "{}: none",
            c.name
        );
        assert_eq!(
            run(POLICY_BEST_EFFORT),
            c.best_effort,
            "{}: best-effort",
            c.name
        );
        assert_eq!(
            run(POLICY_RESTRICTED),
            c.restricted,
            "{}: restricted",
            c.name
        );
        assert_eq!(
            run(POLICY_SINGLE_NUMA_NODE),
            c.single,
            "{}: single-numa-node",
            c.name
        );
    }
}

#[test]
fn prefer_closest_numa_nodes() {
    // Four nodes where 0 is closer to 2 than to 1.
    let d = |row: [u64; 4]| row.to_vec();
    let numa = NumaInfo {
        nodes: vec![0, 1, 2, 3],
        distances: BTreeMap::from([
            (0, d([10, 30, 12, 30])),
            (1, d([30, 10, 30, 12])),
            (2, d([12, 30, 10, 30])),
            (3, d([30, 12, 30, 10])),
        ]),
    };
    let hints = vec![
        provider("cpu", Some(vec![h(&[0, 1], true), h(&[0, 2], true)])),
        provider("gpu", Some(vec![h(&[0, 1], true), h(&[0, 2], true)])),
    ];
    let closest = PolicyOptions::parse("prefer-closest-numa-nodes=true").unwrap();
    for (policy, opts, want) in [
        (
            POLICY_BEST_EFFORT,
            PolicyOptions::default(),
            h(&[0, 1], true),
        ),
        (POLICY_BEST_EFFORT, closest.clone(), h(&[0, 2], true)),
        (POLICY_RESTRICTED, closest.clone(), h(&[0, 2], true)),
    ] {
        let (hint, admit) = new_policy(policy, numa.clone(), opts.clone())
            .unwrap()
            .merge(&hints);
        assert_eq!((hint, admit), (want, true), "{policy} {opts:?}");
    }
}

#[test]
fn options_and_names() {
    assert_eq!(PolicyOptions::parse("").unwrap(), PolicyOptions::default());
    let o =
        PolicyOptions::parse("max-allowable-numa-nodes=16,prefer-closest-numa-nodes=t").unwrap();
    assert_eq!(o.max_allowable_numa_nodes, Some(16));
    assert!(o.prefer_closest_numa);
    let errs = [
        ("foo=1", "unknown Topology Manager Policy option: \"foo\""),
        (
            "prefer-closest-numa-nodes=yes",
            "bad value for option \"prefer-closest-numa-nodes\": strconv.ParseBool: parsing \"yes\": invalid syntax",
        ),
        (
            "max-allowable-numa-nodes=4",
            "bad value for option \"max-allowable-numa-nodes\": the minimum value of \"max-allowable-numa-nodes\" should not be less than 8",
        ),
    ];
    for (s, want) in errs {
        assert_eq!(
            PolicyOptions::parse(s).unwrap_err().to_string(),
            want,
            "{s}"
        );
    }
    // No limit unless asked for: 64 nodes are fine by default.
    assert!(
        new_policy(
            POLICY_RESTRICTED,
            NumaInfo::uniform(64),
            PolicyOptions::default()
        )
        .is_ok()
    );
    let limited = PolicyOptions::parse("max-allowable-numa-nodes=8").unwrap();
    assert_eq!(
        new_policy(POLICY_RESTRICTED, NumaInfo::uniform(16), limited)
            .err()
            .unwrap()
            .to_string(),
        "unsupported on machines with more than 8 NUMA Nodes"
    );
    assert_eq!(
        new_policy("strict", NumaInfo::uniform(2), PolicyOptions::default())
            .err()
            .unwrap()
            .to_string(),
        "unknown policy: \"strict\""
    );
}
