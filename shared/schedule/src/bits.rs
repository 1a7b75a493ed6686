//! A fixed 256-bit set: every cron field (years stored as `year - 1970`)
//! fits, and "next value at or after x" is a few word operations, which is
//! what lets the evaluator skip by field instead of scanning minutes.

/// Set of small integers `0..256`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub(crate) struct BitSet([u64; 4]);

impl BitSet {
    /// Adds `v`; values of 256 or more are ignored (callers validate first).
    pub(crate) fn insert(&mut self, v: u32) {
        if v < 256 {
            self.0[(v / 64) as usize] |= 1u64 << (v % 64);
        }
    }

    /// Whether `v` is in the set.
    pub(crate) fn contains(&self, v: u32) -> bool {
        v < 256 && self.0[(v / 64) as usize] & (1u64 << (v % 64)) != 0
    }

    /// Smallest element `>= from`.
    pub(crate) fn next_from(&self, from: u32) -> Option<u32> {
        if from >= 256 {
            return None;
        }
        let mut word = (from / 64) as usize;
        let mut bits = self.0[word] & (u64::MAX << (from % 64));
        loop {
            if bits != 0 {
                return Some(word as u32 * 64 + bits.trailing_zeros());
            }
            word += 1;
            if word == 4 {
                return None;
            }
            bits = self.0[word];
        }
    }

    /// The set of all values in `lo..=hi` (clamped to 255).
    pub(crate) fn range(lo: u32, hi: u32) -> BitSet {
        let mut s = BitSet::default();
        let mut v = lo;
        while v <= hi && v < 256 {
            s.insert(v);
            v += 1;
        }
        s
    }

    /// Union.
    pub(crate) fn union(self, other: BitSet) -> BitSet {
        let mut out = self;
        for (a, b) in out.0.iter_mut().zip(other.0) {
            *a |= b;
        }
        out
    }

    /// Intersection.
    pub(crate) fn intersect(self, other: BitSet) -> BitSet {
        let mut out = self;
        for (a, b) in out.0.iter_mut().zip(other.0) {
            *a &= b;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_from_crosses_words() {
        let mut s = BitSet::default();
        s.insert(3);
        s.insert(70);
        s.insert(255);
        assert_eq!(s.next_from(0), Some(3));
        assert_eq!(s.next_from(3), Some(3));
        assert_eq!(s.next_from(4), Some(70));
        assert_eq!(s.next_from(71), Some(255));
        assert_eq!(s.next_from(256), None);
        assert!(s.contains(70) && !s.contains(71));
        assert_eq!(BitSet::default().next_from(0), None);
    }

    #[test]
    fn range_union_intersect() {
        let a = BitSet::range(1, 5);
        let b = BitSet::range(4, 9);
        assert_eq!(a.intersect(b), BitSet::range(4, 5));
        assert_eq!(a.union(b), BitSet::range(1, 9));
    }
}
