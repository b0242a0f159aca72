//! A table's content as plain data, and the nft transactions that create it
//! (whole table) or move the kernel from one [`Ruleset`] to the next
//! (incremental: only changed chains are rewritten, map and set elements are
//! added and deleted one by one). Also the [`Fingerprint`] the repair check
//! compares with what `nft -j list table` shows.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// A base chain's hook (`type filter hook output priority -110`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hook {
    pub kind: &'static str,
    pub hook: &'static str,
    pub priority: &'static str,
}

impl Hook {
    pub fn new(kind: &'static str, hook: &'static str, priority: &'static str) -> Hook {
        Hook {
            kind,
            hook,
            priority,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chain {
    pub hook: Option<Hook>,
    /// Rules in order, in nft syntax (what follows `add rule <family> <table> <chain>`).
    pub rules: Vec<String>,
}

/// A verdict map: `key : verdict` elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Map {
    pub ty: &'static str,
    pub elements: BTreeMap<String, String>,
}

impl Map {
    pub fn new(ty: &'static str) -> Map {
        Map {
            ty,
            elements: BTreeMap::new(),
        }
    }
}

/// A named set. Dynamic sets (ClientIP affinity) are filled by the packet path,
/// so their elements are neither written nor checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set {
    pub ty: &'static str,
    pub dynamic: bool,
    pub elements: BTreeSet<String>,
}

impl Set {
    pub fn plain(ty: &'static str) -> Set {
        Set {
            ty,
            dynamic: false,
            elements: BTreeSet::new(),
        }
    }

    /// A ClientIP affinity set: source addresses, each with its own timeout.
    pub fn affinity() -> Set {
        Set {
            ty: "ipv4_addr",
            dynamic: true,
            elements: BTreeSet::new(),
        }
    }

    fn declaration(&self) -> String {
        if self.dynamic {
            format!("{{ type {} ; flags dynamic,timeout ; }}", self.ty)
        } else {
            format!("{{ type {} ; }}", self.ty)
        }
    }
}

/// Everything in the table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ruleset {
    pub chains: BTreeMap<String, Chain>,
    pub maps: BTreeMap<String, Map>,
    pub sets: BTreeMap<String, Set>,
}

impl Ruleset {
    pub fn add_chain(&mut self, name: &str, hook: Option<Hook>, rules: Vec<String>) {
        let c = self.chain_mut(name);
        c.hook = hook;
        c.rules.extend(rules);
    }

    /// The chain `name`, created empty (a regular chain) if missing.
    pub fn chain_mut(&mut self, name: &str) -> &mut Chain {
        self.chains.entry(name.to_string()).or_default()
    }

    pub fn map_element(&mut self, map: &str, key: String, verdict: String) {
        if let Some(m) = self.maps.get_mut(map) {
            m.elements.insert(key, verdict);
        }
    }

    pub fn set_element(&mut self, set: &str, element: String) {
        if let Some(s) = self.sets.get_mut(set) {
            s.elements.insert(element);
        }
    }

    /// Chain, map and set elements counts, as the kernel should show them.
    pub fn fingerprint(&self, flushed: &BTreeSet<String>) -> Fingerprint {
        let mut chains: BTreeMap<String, usize> = self
            .chains
            .iter()
            .map(|(n, c)| (n.clone(), c.rules.len()))
            .collect();
        for n in flushed {
            chains.entry(n.clone()).or_insert(0);
        }
        let mut sets: BTreeMap<String, Option<usize>> = self
            .maps
            .iter()
            .map(|(n, m)| (n.clone(), Some(m.elements.len())))
            .collect();
        for (n, s) in &self.sets {
            sets.insert(n.clone(), (!s.dynamic).then_some(s.elements.len()));
        }
        Fingerprint { chains, sets }
    }
}

/// The family and name of Berth's table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub family: &'static str,
    pub name: String,
}

impl Table {
    pub fn ip(name: impl Into<String>) -> Table {
        Table {
            family: "ip",
            name: name.into(),
        }
    }

    fn prefix(&self) -> String {
        format!("{} {}", self.family, self.name)
    }
}

fn add_chain_line(out: &mut String, t: &str, name: &str, c: &Chain) {
    match &c.hook {
        Some(h) => {
            let _ = writeln!(
                out,
                "add chain {t} {name} {{ type {} hook {} priority {} ; }}",
                h.kind, h.hook, h.priority
            );
        }
        None => {
            let _ = writeln!(out, "add chain {t} {name}");
        }
    }
}

fn rules(out: &mut String, t: &str, name: &str, c: &Chain) {
    for r in &c.rules {
        let _ = writeln!(out, "add rule {t} {name} {r}");
    }
}

/// Elements in batches: one `add element` line per element would make big
/// transactions slow to parse.
fn map_elements<'a>(
    out: &mut String,
    verb: &str,
    t: &str,
    map: &str,
    items: impl Iterator<Item = (&'a String, Option<&'a String>)>,
) {
    let mut batch: Vec<String> = Vec::new();
    let flush = |out: &mut String, batch: &mut Vec<String>| {
        if !batch.is_empty() {
            let _ = writeln!(out, "{verb} element {t} {map} {{ {} }}", batch.join(", "));
            batch.clear();
        }
    };
    for (k, v) in items {
        batch.push(match v {
            Some(v) => format!("{k} : {v}"),
            None => k.clone(),
        });
        if batch.len() == 500 {
            flush(out, &mut batch);
        }
    }
    flush(out, &mut batch);
}

/// The transaction that replaces the table with `rs` whatever it holds now
/// (or creates it): `add` + `delete` so the delete never fails, then all.
pub fn full(table: &Table, rs: &Ruleset) -> String {
    let t = table.prefix();
    let mut out = format!("add table {t}\ndelete table {t}\nadd table {t}\n");
    // Chains first: map elements and rules jump to them.
    for (name, c) in &rs.chains {
        add_chain_line(&mut out, &t, name, c);
    }
    for (name, m) in &rs.maps {
        let _ = writeln!(out, "add map {t} {name} {{ type {} ; }}", m.ty);
    }
    for (name, s) in &rs.sets {
        let _ = writeln!(out, "add set {t} {name} {}", s.declaration());
    }
    for (name, m) in &rs.maps {
        map_elements(
            &mut out,
            "add",
            &t,
            name,
            m.elements.iter().map(|(k, v)| (k, Some(v))),
        );
    }
    for (name, s) in rs.sets.iter().filter(|(_, s)| !s.dynamic) {
        map_elements(
            &mut out,
            "add",
            &t,
            name,
            s.elements.iter().map(|k| (k, None)),
        );
    }
    for (name, c) in &rs.chains {
        rules(&mut out, &t, name, c);
    }
    out
}

/// What an incremental transaction did besides reaching `new`: chains it
/// flushed that are gone from `new`; they are deleted by a later transaction
/// (a chain still referenced by a map element deleted in the same transaction
/// cannot be deleted on kernels before 6.2, as upstream notes).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Incremental {
    pub script: String,
    pub flushed: BTreeSet<String>,
}

/// The transaction from `old` (what the kernel holds, with `pending` chains
/// flushed earlier and now deleted) to `new`.
pub fn incremental(
    table: &Table,
    old: &Ruleset,
    new: &Ruleset,
    pending: &BTreeSet<String>,
) -> Incremental {
    let t = table.prefix();
    let mut out = String::new();
    // Chains flushed by the previous transaction are unreferenced now.
    for name in pending.iter().filter(|n| !new.chains.contains_key(*n)) {
        let _ = writeln!(out, "delete chain {t} {name}");
    }
    // New chains and sets before anything refers to them.
    for (name, c) in &new.chains {
        if !old.chains.contains_key(name) && !pending.contains(name) {
            add_chain_line(&mut out, &t, name, c);
        }
    }
    for (name, m) in &new.maps {
        if !old.maps.contains_key(name) {
            let _ = writeln!(out, "add map {t} {name} {{ type {} ; }}", m.ty);
        }
    }
    for (name, s) in &new.sets {
        if !old.sets.contains_key(name) {
            let _ = writeln!(out, "add set {t} {name} {}", s.declaration());
        }
    }
    // Map elements: deletions (and changed verdicts) first.
    let empty_map = BTreeMap::new();
    for (name, m) in &new.maps {
        let before = old.maps.get(name).map_or(&empty_map, |m| &m.elements);
        map_elements(
            &mut out,
            "delete",
            &t,
            name,
            before
                .iter()
                .filter(|(k, v)| m.elements.get(*k) != Some(*v))
                .map(|(k, _)| (k, None)),
        );
    }
    let empty_set = BTreeSet::new();
    for (name, s) in new.sets.iter().filter(|(_, s)| !s.dynamic) {
        let before = old.sets.get(name).map_or(&empty_set, |s| &s.elements);
        map_elements(
            &mut out,
            "delete",
            &t,
            name,
            before.difference(&s.elements).map(|k| (k, None)),
        );
    }
    // Changed chains are rewritten; chains that are gone are flushed now and
    // deleted next time.
    let mut flushed = BTreeSet::new();
    for (name, c) in &old.chains {
        match new.chains.get(name) {
            Some(n) if n == c => {}
            Some(_) => {
                let _ = writeln!(out, "flush chain {t} {name}");
            }
            None => {
                let _ = writeln!(out, "flush chain {t} {name}");
                flushed.insert(name.clone());
            }
        }
    }
    for (name, c) in &new.chains {
        // (A chain flushed last time and wanted again is empty: refilled here.)
        if old.chains.get(name) != Some(c) {
            rules(&mut out, &t, name, c);
        }
    }
    for (name, m) in &new.maps {
        let before = old.maps.get(name).map_or(&empty_map, |m| &m.elements);
        map_elements(
            &mut out,
            "add",
            &t,
            name,
            m.elements
                .iter()
                .filter(|(k, v)| before.get(*k) != Some(*v))
                .map(|(k, v)| (k, Some(v))),
        );
    }
    for (name, s) in new.sets.iter().filter(|(_, s)| !s.dynamic) {
        let before = old.sets.get(name).map_or(&empty_set, |s| &s.elements);
        map_elements(
            &mut out,
            "add",
            &t,
            name,
            s.elements.difference(before).map(|k| (k, None)),
        );
    }
    // Sets no rule refers to any more (their rules were flushed above).
    for name in old.sets.keys().filter(|n| !new.sets.contains_key(*n)) {
        let _ = writeln!(out, "delete set {t} {name}");
    }
    Incremental {
        script: out,
        flushed,
    }
}

/// What the repair check compares: each chain's rule count, each map's and
/// plain set's element count (`None` for dynamic sets: any count). Catches a
/// deleted table, chain, rule, map, set or element; an edited rule that keeps
/// the count is not seen (the next change to its Service rewrites it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fingerprint {
    pub chains: BTreeMap<String, usize>,
    pub sets: BTreeMap<String, Option<usize>>,
}

impl Fingerprint {
    /// The differences from `actual`, for the log (empty: they match).
    pub fn differences(&self, actual: &Fingerprint) -> Vec<String> {
        let mut out = Vec::new();
        for (name, n) in &self.chains {
            match actual.chains.get(name) {
                None => out.push(format!("chain {name} missing")),
                Some(m) if m != n => out.push(format!("chain {name} has {m} rules, not {n}")),
                _ => {}
            }
        }
        for name in actual.chains.keys() {
            if !self.chains.contains_key(name) {
                out.push(format!("unexpected chain {name}"));
            }
        }
        for (name, n) in &self.sets {
            match (actual.sets.get(name), n) {
                (None, _) => out.push(format!("set/map {name} missing")),
                (Some(Some(m)), Some(n)) if m != n => {
                    out.push(format!("set/map {name} has {m} elements, not {n}"))
                }
                _ => {}
            }
        }
        for name in actual.sets.keys() {
            if !self.sets.contains_key(name) {
                out.push(format!("unexpected set/map {name}"));
            }
        }
        out
    }
}

/// Reads `nft -j list table` output.
pub fn parse_listing(json: &str) -> Result<Fingerprint, serde_json::Error> {
    let v: serde_json::Value = serde_json::from_str(json)?;
    let mut fp = Fingerprint::default();
    let items = v
        .get("nftables")
        .and_then(|a| a.as_array())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let name = |o: &serde_json::Value, k: &str| {
        o.get(k)
            .and_then(|n| n.as_str())
            .unwrap_or_default()
            .to_string()
    };
    for item in items {
        if let Some(c) = item.get("chain") {
            fp.chains.entry(name(c, "name")).or_insert(0);
        } else if let Some(r) = item.get("rule") {
            *fp.chains.entry(name(r, "chain")).or_insert(0) += 1;
        } else if let Some(s) = item.get("set").or_else(|| item.get("map")) {
            let count = s.get("elem").and_then(|e| e.as_array()).map_or(0, Vec::len);
            fp.sets.insert(name(s, "name"), Some(count));
        }
    }
    Ok(fp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Ruleset {
        let mut rs = Ruleset::default();
        rs.add_chain(
            "nat-output",
            Some(Hook::new("nat", "output", "-100")),
            vec!["jump services".into()],
        );
        rs.add_chain(
            "services",
            None,
            vec!["ip daddr . meta l4proto . th dport vmap @service-ips".into()],
        );
        rs.add_chain(
            "service-A-ns/a/tcp/",
            None,
            vec!["numgen random mod 1 vmap { 0 : goto endpoint-B-ns/a/tcp/__10.42.0.5/80 }".into()],
        );
        rs.add_chain(
            "endpoint-B-ns/a/tcp/__10.42.0.5/80",
            None,
            vec!["meta l4proto tcp dnat to 10.42.0.5:80".into()],
        );
        rs.maps.insert(
            "service-ips".into(),
            Map::new("ipv4_addr . inet_proto . inet_service : verdict"),
        );
        rs.map_element(
            "service-ips",
            "10.43.0.5 . tcp . 80".into(),
            "goto service-A-ns/a/tcp/".into(),
        );
        rs.sets
            .insert("cluster-ips".into(), Set::plain("ipv4_addr"));
        rs.set_element("cluster-ips", "10.43.0.5".into());
        rs
    }

    #[test]
    fn full_replaces_the_table_chains_before_elements_before_rules() {
        let s = full(&Table::ip("t"), &sample());
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(
            &lines[..3],
            ["add table ip t", "delete table ip t", "add table ip t"]
        );
        let pos = |needle: &str| {
            lines
                .iter()
                .position(|l| l.starts_with(needle))
                .unwrap_or_else(|| panic!("{needle} missing in\n{s}"))
        };
        assert!(pos("add chain ip t service-A") < pos("add element ip t service-ips"));
        assert!(pos("add element ip t service-ips") < pos("add rule"));
        assert!(s.contains("add chain ip t nat-output { type nat hook output priority -100 ; }\n"));
        assert!(s.contains(
            "add element ip t service-ips { 10.43.0.5 . tcp . 80 : goto service-A-ns/a/tcp/ }\n"
        ));
        assert!(s.contains("add element ip t cluster-ips { 10.43.0.5 }\n"));
        assert_eq!(s.matches("add rule").count(), 4);
    }

    #[test]
    fn incremental_touches_only_what_changed() {
        let old = sample();
        let mut new = sample();
        // The endpoint moves: new endpoint chain, the service chain rewritten,
        // the old endpoint chain flushed (deleted next time).
        let svc = new.chains.get_mut("service-A-ns/a/tcp/").expect("chain");
        svc.rules =
            vec!["numgen random mod 1 vmap { 0 : goto endpoint-C-ns/a/tcp/__10.42.0.6/80 }".into()];
        new.chains.remove("endpoint-B-ns/a/tcp/__10.42.0.5/80");
        new.add_chain(
            "endpoint-C-ns/a/tcp/__10.42.0.6/80",
            None,
            vec!["meta l4proto tcp dnat to 10.42.0.6:80".into()],
        );
        let inc = incremental(&Table::ip("t"), &old, &new, &BTreeSet::new());
        let expected = "add chain ip t endpoint-C-ns/a/tcp/__10.42.0.6/80
flush chain ip t endpoint-B-ns/a/tcp/__10.42.0.5/80
flush chain ip t service-A-ns/a/tcp/
add rule ip t endpoint-C-ns/a/tcp/__10.42.0.6/80 meta l4proto tcp dnat to 10.42.0.6:80
add rule ip t service-A-ns/a/tcp/ numgen random mod 1 vmap { 0 : goto endpoint-C-ns/a/tcp/__10.42.0.6/80 }
";
        assert_eq!(inc.script, expected);
        assert_eq!(
            inc.flushed,
            BTreeSet::from(["endpoint-B-ns/a/tcp/__10.42.0.5/80".to_string()])
        );
        // Next time the flushed chain is deleted, and nothing else happens.
        let next = incremental(&Table::ip("t"), &new, &new, &inc.flushed);
        assert_eq!(
            next.script,
            "delete chain ip t endpoint-B-ns/a/tcp/__10.42.0.5/80\n"
        );
        assert!(next.flushed.is_empty());
        assert_eq!(
            incremental(&Table::ip("t"), &new, &new, &BTreeSet::new()).script,
            ""
        );
    }

    #[test]
    fn incremental_map_and_set_elements() {
        let old = sample();
        let mut new = sample();
        new.map_element(
            "service-ips",
            "10.43.0.5 . tcp . 80".into(),
            "goto other".into(),
        );
        new.map_element(
            "service-ips",
            "10.43.0.6 . udp . 53".into(),
            "goto x".into(),
        );
        new.sets.get_mut("cluster-ips").expect("set").elements =
            BTreeSet::from(["10.43.0.6".to_string()]);
        new.sets.insert("affinity-X".into(), Set::affinity());
        let s = incremental(&Table::ip("t"), &old, &new, &BTreeSet::new()).script;
        let expected = "add set ip t affinity-X { type ipv4_addr ; flags dynamic,timeout ; }
delete element ip t service-ips { 10.43.0.5 . tcp . 80 }
delete element ip t cluster-ips { 10.43.0.5 }
add element ip t service-ips { 10.43.0.5 . tcp . 80 : goto other, 10.43.0.6 . udp . 53 : goto x }
add element ip t cluster-ips { 10.43.0.6 }
";
        assert_eq!(s, expected);
        // Removing the set deletes it after the chains that used it are flushed.
        let back = incremental(&Table::ip("t"), &new, &old, &BTreeSet::new()).script;
        assert!(back.ends_with("delete set ip t affinity-X\n"), "{back}");
    }

    #[test]
    fn elements_are_batched() {
        let mut rs = sample();
        for i in 0..1200u32 {
            rs.set_element("cluster-ips", format!("10.44.{}.{}", i / 256, i % 256));
        }
        let s = full(&Table::ip("t"), &rs);
        assert_eq!(s.matches("add element ip t cluster-ips").count(), 3);
    }

    #[test]
    fn fingerprint_matches_the_listing_of_the_same_table() {
        let rs = sample();
        let listing = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}},
          {"table": {"family": "ip", "name": "t"}},
          {"set": {"name": "cluster-ips", "type": "ipv4_addr", "elem": ["10.43.0.5"]}},
          {"map": {"name": "service-ips", "map": "verdict", "elem": [[{"concat": ["10.43.0.5", "tcp", 80]}, {"goto": {"target": "service-A-ns/a/tcp/"}}]]}},
          {"chain": {"name": "nat-output", "hook": "output"}},
          {"chain": {"name": "services"}},
          {"chain": {"name": "service-A-ns/a/tcp/"}},
          {"chain": {"name": "endpoint-B-ns/a/tcp/__10.42.0.5/80"}},
          {"chain": {"name": "stale"}},
          {"rule": {"chain": "nat-output"}},
          {"rule": {"chain": "services"}},
          {"rule": {"chain": "service-A-ns/a/tcp/"}},
          {"rule": {"chain": "endpoint-B-ns/a/tcp/__10.42.0.5/80"}}]}"#;
        let actual = parse_listing(listing).expect("parses");
        let flushed = BTreeSet::from(["stale".to_string()]);
        assert_eq!(
            rs.fingerprint(&flushed).differences(&actual),
            Vec::<String>::new()
        );
        // Without the flushed chain in mind, it is unexpected.
        assert_eq!(
            rs.fingerprint(&BTreeSet::new()).differences(&actual),
            vec!["unexpected chain stale".to_string()]
        );
    }

    #[test]
    fn fingerprint_differences() {
        let rs = sample();
        let expected = rs.fingerprint(&BTreeSet::new());
        type Edit = Box<dyn Fn(&mut Fingerprint)>;
        let cases: Vec<(&str, Edit, &str)> = vec![
            (
                "chain deleted",
                Box::new(|f| {
                    f.chains.remove("services");
                }),
                "chain services missing",
            ),
            (
                "rule deleted",
                Box::new(|f| {
                    f.chains.insert("services".into(), 0);
                }),
                "chain services has 0 rules, not 1",
            ),
            (
                "element deleted",
                Box::new(|f| {
                    f.sets.insert("service-ips".into(), Some(0));
                }),
                "set/map service-ips has 0 elements, not 1",
            ),
            (
                "map deleted",
                Box::new(|f| {
                    f.sets.remove("service-ips");
                }),
                "set/map service-ips missing",
            ),
            (
                "chain added",
                Box::new(|f| {
                    f.chains.insert("x".into(), 1);
                }),
                "unexpected chain x",
            ),
        ];
        for (what, edit, want) in cases {
            let mut actual = expected.clone();
            edit(&mut actual);
            assert_eq!(
                expected.differences(&actual),
                vec![want.to_string()],
                "{what}"
            );
        }
        // Dynamic sets: any element count.
        let mut rs = sample();
        rs.sets.insert("affinity-X".into(), Set::affinity());
        let mut actual = rs.fingerprint(&BTreeSet::new());
        actual.sets.insert("affinity-X".into(), Some(7));
        assert!(
            rs.fingerprint(&BTreeSet::new())
                .differences(&actual)
                .is_empty()
        );
        // A missing table lists nothing.
        assert_eq!(
            parse_listing(r#"{"nftables": []}"#).expect("parses"),
            Fingerprint::default()
        );
    }
}
