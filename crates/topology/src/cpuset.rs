//! Linux cpulists (`0-3,8,10-11`), as `cpuset.cpus` and sysfs write them, and
//! the CPU set type the CPU Manager works in (upstream's `k8s.io/utils/cpuset`).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// Formats sorted ids as a Linux list: runs of consecutive ids become ranges.
pub fn format_list(ids: &[usize]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < ids.len() {
        let start = ids[i];
        let mut end = start;
        while i + 1 < ids.len() && ids[i + 1] == end + 1 {
            i += 1;
            end = ids[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

/// A cpulist that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cpuset {input:?}: {why}")]
pub struct CpuSetError {
    pub input: String,
    pub why: String,
}

/// A set of CPU ids.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet(BTreeSet<usize>);

impl CpuSet {
    pub fn new() -> Self {
        CpuSet::default()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, cpu: usize) -> bool {
        self.0.contains(&cpu)
    }

    pub fn insert(&mut self, cpu: usize) {
        self.0.insert(cpu);
    }

    /// Ids in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().copied()
    }

    pub fn union(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.union(&other.0).copied().collect())
    }

    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&other.0).copied().collect())
    }

    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.difference(&other.0).copied().collect())
    }

    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }
}

impl FromIterator<usize> for CpuSet {
    fn from_iter<T: IntoIterator<Item = usize>>(iter: T) -> Self {
        CpuSet(iter.into_iter().collect())
    }
}

impl FromStr for CpuSet {
    type Err = CpuSetError;

    /// Parses a Linux list; the empty string (and a lone newline, as sysfs
    /// writes an empty list) is the empty set.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |why: String| CpuSetError {
            input: s.to_string(),
            why,
        };
        let num = |t: &str| {
            t.trim()
                .parse::<usize>()
                .map_err(|_| err(format!("{t:?} is not a CPU id")))
        };
        let mut out = BTreeSet::new();
        for part in s.trim().split(',').filter(|p| !p.trim().is_empty()) {
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(err(format!("range {part:?} ends before it starts")));
                    }
                    out.extend(a..=b);
                }
                None => {
                    out.insert(num(part)?);
                }
            }
        }
        Ok(CpuSet(out))
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<usize> = self.iter().collect();
        f.write_str(&format_list(&ids))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_format_round_trip() {
        let cases = [
            ("", ""),
            ("\n", ""),
            ("0", "0"),
            ("0-3", "0-3"),
            ("0-3,8,10-11\n", "0-3,8,10-11"),
            ("3,1,2,0", "0-3"),
            ("0,2,4", "0,2,4"),
            ("5-5", "5"),
        ];
        for (input, want) in cases {
            let set: CpuSet = input.parse().unwrap();
            assert_eq!(set.to_string(), want, "{input:?}");
        }
    }

    #[test]
    fn bad_lists_are_errors() {
        for (input, why) in [
            ("a", "\"a\" is not a CPU id"),
            ("3-1", "range \"3-1\" ends before it starts"),
            ("1-", "\"\" is not a CPU id"),
            ("-1", "\"\" is not a CPU id"),
        ] {
            let e = input.parse::<CpuSet>().unwrap_err();
            assert_eq!(e.why, why, "{input:?}");
        }
    }

    #[test]
    fn set_operations() {
        let a: CpuSet = "0-3".parse().unwrap();
        let b: CpuSet = "2-5".parse().unwrap();
        assert_eq!(a.union(&b).to_string(), "0-5");
        assert_eq!(a.intersection(&b).to_string(), "2-3");
        assert_eq!(a.difference(&b).to_string(), "0-1");
        assert!(a.intersection(&b).is_subset(&a) && !b.is_subset(&a));
        assert_eq!(a.len(), 4);
    }
}
