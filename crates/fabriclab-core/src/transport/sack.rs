//! Selective acknowledgments: the receiver's SACK blocks (RFC 2018) and the
//! sender's scoreboard with RFC 6675's `IsLost`, `SetPipe` and `NextSeg`
//! (the sender's use of them is in [`super::tcp`]).
//!
//! Sequence numbers are byte offsets into one message, as in
//! [`super::tcp`]; every range here is half-open, `[start, end)`. RFC
//! 6675's HighRxt ("the highest sequence number which has been
//! retransmitted during the current loss recovery phase") is kept as the
//! end of that segment, so "S2 > HighRxt" reads `s >= high_rxt_end`.

/// At most this many SACK blocks per ACK: RFC 2018 §3 allows 3 beside the
/// timestamp option, which Linux sends by default; 4 fit without it.
pub const MAX_SACK_BLOCKS: usize = 3;

/// Bytes of TCP options an ACK carrying `n` SACK blocks adds: the option
/// itself is 2 + 8 n bytes (RFC 2018 §3: kind, length, 8 per block), and
/// Linux puts two NOPs before it (`TCPOLEN_SACK_BASE_ALIGNED`), so 4 + 8 n.
/// No other option is modelled (no timestamps), so n = 0 adds nothing.
pub const fn sack_option_bytes(n: usize) -> u32 {
    if n == 0 {
        0
    } else {
        4 + 8 * n as u32
    }
}

/// The sender's record of SACKed ranges above the cumulative ACK: sorted by
/// start, disjoint, never touching (adjacent ranges are merged).
#[derive(Debug, Clone, Default)]
pub struct Scoreboard {
    ranges: Vec<(u64, u64)>,
}

impl Scoreboard {
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
    /// RFC 6675's Update (): records `blocks` above `snd_una` (parts at or
    /// below it are already cumulatively acknowledged) and drops what
    /// `snd_una` now covers. Returns the bytes newly SACKed.
    pub fn update(&mut self, snd_una: u64, blocks: &[(u64, u64)]) -> u64 {
        let before = self.sacked_bytes_above(snd_una);
        self.trim(snd_una);
        for &(s, e) in blocks {
            let s = s.max(snd_una);
            if e > s {
                self.insert(s, e);
            }
        }
        self.sacked_bytes_above(snd_una).saturating_sub(before)
    }

    /// Drops every range (or part) below `snd_una`.
    pub fn trim(&mut self, snd_una: u64) {
        self.ranges.retain(|&(_, e)| e > snd_una);
        if let Some(first) = self.ranges.first_mut() {
            first.0 = first.0.max(snd_una);
        }
    }

    fn insert(&mut self, s: u64, e: u64) {
        let i = self.ranges.partition_point(|&(_, re)| re < s);
        let mut j = i;
        let (mut ns, mut ne) = (s, e);
        while j < self.ranges.len() && self.ranges[j].0 <= e {
            ns = ns.min(self.ranges[j].0);
            ne = ne.max(self.ranges[j].1);
            j += 1;
        }
        self.ranges.splice(i..j, [(ns, ne)]);
    }

    fn sacked_bytes_above(&self, seq: u64) -> u64 {
        self.ranges
            .iter()
            .map(|&(s, e)| e.saturating_sub(s.max(seq)))
            .sum()
    }

    /// Whether byte `seq` is SACKed.
    pub fn is_sacked(&self, seq: u64) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e <= seq);
        self.ranges.get(i).is_some_and(|&(s, _)| s <= seq)
    }

    /// The end of the highest SACKed range (RFC 6675's "highest octet
    /// covered by any received SACK", plus one), if any.
    pub fn high_sacked(&self) -> Option<u64> {
        self.ranges.last().map(|&(_, e)| e)
    }

    /// RFC 6675 §4's IsLost (SeqNum) for an unSACKed `seq`: "true when either
    /// DupThresh discontiguous SACKed sequences have arrived above 'SeqNum'
    /// or more than (DupThresh - 1) * SMSS bytes with sequence numbers
    /// greater than 'SeqNum' have been SACKed". A "sequence" is read as a
    /// segment: every segment starts at a multiple of `mss` (the last may
    /// be shorter), so a range of `b` bytes holds ceil(b / mss) of them.
    pub fn is_lost(&self, seq: u64, dup_thresh: u32, mss: u64) -> bool {
        self.lost_below(dup_thresh, mss).is_some_and(|l| seq < l)
    }

    /// IsLost is monotone (fewer bytes lie above a higher sequence number):
    /// every unSACKed byte below the returned point is lost, none at or
    /// above it. It is the start of the highest range whose addition,
    /// counting down from the top, meets either threshold.
    pub fn lost_below(&self, dup_thresh: u32, mss: u64) -> Option<u64> {
        let (mut segs, mut bytes) = (0u64, 0u64);
        for &(s, e) in self.ranges.iter().rev() {
            segs += (e - s).div_ceil(mss);
            bytes += e - s;
            if segs >= dup_thresh as u64 || bytes > (dup_thresh as u64 - 1) * mss {
                return Some(s);
            }
        }
        None
    }

    /// UnSACKed bytes in `[from, to)`.
    pub fn unsacked_in(&self, from: u64, to: u64) -> u64 {
        if to <= from {
            return 0;
        }
        let sacked: u64 = self
            .ranges
            .iter()
            .map(|&(s, e)| e.min(to).saturating_sub(s.max(from)))
            .sum();
        to - from - sacked
    }

    /// RFC 6675 §4's SetPipe (): over the unSACKed bytes of `[snd_una,
    /// high_data)`, each counts once if not IsLost and once more if at or
    /// below HighRxt (`high_rxt_end`: the end of the last retransmitted
    /// segment).
    pub fn pipe(
        &self,
        snd_una: u64,
        high_data: u64,
        high_rxt_end: u64,
        dup_thresh: u32,
        mss: u64,
    ) -> u64 {
        let lost_end = self
            .lost_below(dup_thresh, mss)
            .unwrap_or(snd_una)
            .clamp(snd_una, high_data);
        self.unsacked_in(lost_end, high_data)
            + self.unsacked_in(snd_una, high_rxt_end.min(high_data))
    }

    /// The first unSACKed byte at or above `seq`.
    pub fn next_unsacked(&self, seq: u64) -> u64 {
        let i = self.ranges.partition_point(|&(_, e)| e <= seq);
        match self.ranges.get(i) {
            Some(&(s, e)) if s <= seq => e,
            _ => seq,
        }
    }
}

/// The receiver's side: which SACK blocks its next ACK reports (RFC 2018
/// §4). Each out-of-order block remembers when a segment last landed in
/// it; blocks are reported most recent first, so the block holding the
/// segment that triggered the ACK leads ("the first SACK block ... MUST
/// specify the contiguous block of data containing the segment which
/// triggered this ACK, unless that segment advanced the Acknowledgment
/// Number"), followed by "the most recently reported SACK blocks". A block
/// a later arrival merged into another is reported as the merged block, as
/// Linux reports it.
pub fn blocks_by_recency(
    ooo: &[(u64, u64, u64)],
    out: &mut [(u64, u64); MAX_SACK_BLOCKS],
) -> usize {
    let mut top = [(0u64, 0u64, 0u64); MAX_SACK_BLOCKS];
    let mut n = 0;
    for &b in ooo {
        let at = top[..n].iter().position(|o| o.2 < b.2).unwrap_or(n);
        if at < MAX_SACK_BLOCKS {
            let last = n.min(MAX_SACK_BLOCKS - 1);
            top.copy_within(at..last, at + 1);
            top[at] = b;
            n = (n + 1).min(MAX_SACK_BLOCKS);
        }
    }
    for (o, &(s, e, _)) in out.iter_mut().zip(&top[..n]) {
        *o = (s, e);
    }
    n
}
