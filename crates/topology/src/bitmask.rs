//! NUMA affinity bitmasks (upstream's `topologymanager/bitmask`).
//!
//! Upstream's mask is one `uint64`, one reason its Topology Manager stops at
//! 64 (and by default 8) NUMA nodes. Berth's is a fixed array of words: still
//! `Copy` and allocation-free, so the merging loops stay cheap, and wide enough
//! for [`MAX_BITS`] nodes; a node id beyond that is a clear error.

use std::cmp::Ordering;
use std::fmt;

const WORDS: usize = 4;

/// The most NUMA nodes a mask can name (ids `0..MAX_BITS`).
pub const MAX_BITS: usize = WORDS * 64;

/// A NUMA node id that does not fit in a mask.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("NUMA node {0} is out of range: Berth supports NUMA node ids 0 to {max}", max = MAX_BITS - 1)]
pub struct BitMaskError(pub usize);

/// A set of NUMA node ids.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct BitMask([u64; WORDS]);

impl BitMask {
    /// The empty mask.
    pub const fn empty() -> Self {
        BitMask([0; WORDS])
    }

    /// A mask with `bits` set (upstream's `NewBitMask`).
    pub fn new(bits: &[usize]) -> Result<Self, BitMaskError> {
        let mut m = Self::empty();
        for &b in bits {
            m.add(b)?;
        }
        Ok(m)
    }

    /// Sets bit `b`.
    pub fn add(&mut self, b: usize) -> Result<(), BitMaskError> {
        if b >= MAX_BITS {
            return Err(BitMaskError(b));
        }
        self.0[b / 64] |= 1 << (b % 64);
        Ok(())
    }

    /// Clears bit `b` (out of range bits are never set).
    pub fn remove(&mut self, b: usize) {
        if b < MAX_BITS {
            self.0[b / 64] &= !(1 << (b % 64));
        }
    }

    pub fn is_set(&self, b: usize) -> bool {
        b < MAX_BITS && self.0[b / 64] & (1 << (b % 64)) != 0
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    /// Number of bits set.
    pub fn count(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Bitwise and.
    pub fn and(&self, other: &BitMask) -> BitMask {
        let mut out = *self;
        for (o, w) in out.0.iter_mut().zip(other.0) {
            *o &= w;
        }
        out
    }

    /// Bitwise or.
    pub fn or(&self, other: &BitMask) -> BitMask {
        let mut out = *self;
        for (o, w) in out.0.iter_mut().zip(other.0) {
            *o |= w;
        }
        out
    }

    /// Whether the two masks share a bit (upstream's `AnyCommon`).
    pub fn any_common(&self, other: &BitMask) -> bool {
        !self.and(other).is_empty()
    }

    /// Whether every bit of `self` is set in `other`.
    pub fn is_subset_of(&self, other: &BitMask) -> bool {
        self.and(other) == *self
    }

    /// The set bits, lowest first (upstream's `GetBits`).
    pub fn bits(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(i * 64 + b)
            })
        })
    }

    /// Compares the masks as numbers (upstream's `IsLessThan`: the mask with
    /// more lower-numbered bits set sorts first among equally wide masks).
    pub fn cmp_value(&self, other: &BitMask) -> Ordering {
        for i in (0..WORDS).rev() {
            match self.0[i].cmp(&other.0[i]) {
                Ordering::Equal => continue,
                o => return o,
            }
        }
        Ordering::Equal
    }

    pub fn is_less_than(&self, other: &BitMask) -> bool {
        self.cmp_value(other) == Ordering::Less
    }

    pub fn is_greater_than(&self, other: &BitMask) -> bool {
        self.cmp_value(other) == Ordering::Greater
    }

    /// Fewer bits set, or as many and [`is_less_than`](Self::is_less_than)
    /// (upstream's `IsNarrowerThan`).
    pub fn is_narrower_than(&self, other: &BitMask) -> bool {
        match self.count().cmp(&other.count()) {
            Ordering::Equal => self.is_less_than(other),
            o => o == Ordering::Less,
        }
    }
}

/// Calls `f` with every non-empty combination of `bits`: all single bits, then
/// all pairs, and so on, each size in lexicographic order (upstream's
/// `IterateBitMasks`). There are `2^n - 1` of them: callers bound `n`.
pub fn iterate_bit_masks(bits: &[usize], mut f: impl FnMut(BitMask)) -> Result<(), BitMaskError> {
    if let Some(&b) = bits.iter().find(|&&b| b >= MAX_BITS) {
        return Err(BitMaskError(b));
    }
    for size in 1..=bits.len() {
        iterate_combinations(bits, size, &mut |m| f(m));
    }
    Ok(())
}

/// Calls `f` with every combination of exactly `size` of `bits`, in
/// lexicographic order of positions. `bits` must be in range.
pub(crate) fn iterate_combinations(bits: &[usize], size: usize, f: &mut dyn FnMut(BitMask)) {
    fn rec(bits: &[usize], start: usize, left: usize, acc: BitMask, f: &mut dyn FnMut(BitMask)) {
        if left == 0 {
            f(acc);
            return;
        }
        for i in start..=bits.len() - left {
            let mut m = acc;
            // In range: checked by the callers.
            m.0[bits[i] / 64] |= 1 << (bits[i] % 64);
            rec(bits, i + 1, left - 1, m, f);
        }
    }
    if size == 0 || size > bits.len() {
        return;
    }
    rec(bits, 0, size, BitMask::empty(), f);
}

impl fmt::Display for BitMask {
    /// The set bits in Linux list form (`0-1,3`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits: Vec<usize> = self.bits().collect();
        f.write_str(&crate::cpuset::format_list(&bits))
    }
}

impl fmt::Debug for BitMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BitMask({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(bits: &[usize]) -> BitMask {
        BitMask::new(bits).unwrap()
    }

    #[test]
    fn set_operations() {
        let a = m(&[0, 1, 70]);
        let b = m(&[1, 70, 200]);
        assert_eq!(a.and(&b), m(&[1, 70]));
        assert_eq!(a.or(&b), m(&[0, 1, 70, 200]));
        assert_eq!(a.count(), 3);
        assert!(a.is_set(70) && !a.is_set(2));
        assert!(a.any_common(&b) && !m(&[0]).any_common(&m(&[1])));
        assert_eq!(a.or(&b).bits().collect::<Vec<_>>(), vec![0, 1, 70, 200]);
        assert!(m(&[1]).is_subset_of(&a) && !b.is_subset_of(&a));
        assert!(BitMask::empty().is_empty() && !a.is_empty());
        let mut c = a;
        c.remove(70);
        assert_eq!(c, m(&[0, 1]));
    }

    #[test]
    fn out_of_range_is_an_error() {
        assert_eq!(BitMask::new(&[MAX_BITS]), Err(BitMaskError(MAX_BITS)));
        assert_eq!(
            BitMaskError(300).to_string(),
            "NUMA node 300 is out of range: Berth supports NUMA node ids 0 to 255"
        );
        assert!(BitMask::new(&[MAX_BITS - 1]).is_ok());
    }

    #[test]
    fn ordering_as_upstream() {
        // (a, b, a narrower than b)
        let cases: &[(&[usize], &[usize], bool)] = &[
            (&[0], &[1], true),
            (&[1], &[0], false),
            (&[0, 1], &[2], false),
            (&[0, 1], &[0, 2], true),
            (&[0, 2], &[1, 2], true),
            (&[100], &[3], false),
            (&[3], &[0, 100], true),
        ];
        for (a, b, narrower) in cases {
            assert_eq!(m(a).is_narrower_than(&m(b)), *narrower, "{a:?} vs {b:?}");
        }
        assert!(m(&[64]).is_greater_than(&m(&[63])));
        assert!(m(&[1, 2]).is_less_than(&m(&[0, 3])));
    }

    #[test]
    fn iterate_in_upstream_order() {
        let mut seen = Vec::new();
        iterate_bit_masks(&[0, 1, 2], |mask| seen.push(mask.to_string())).unwrap();
        assert_eq!(seen, ["0", "1", "2", "0-1", "0,2", "1-2", "0-2"]);
        let mut n = 0;
        iterate_bit_masks(&(0..10).collect::<Vec<_>>(), |_| n += 1).unwrap();
        assert_eq!(n, 1023);
        assert!(iterate_bit_masks(&[MAX_BITS], |_| {}).is_err());
    }
}
