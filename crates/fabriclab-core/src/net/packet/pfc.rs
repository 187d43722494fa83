//! Priority-based flow control (IEEE 802.1Qbb) at switches.
//!
//! A switch counts, per ingress port and lossless priority, the bytes of
//! packets that arrived over that port and still wait in its egress queues.
//! Above `xoff_bytes` it sends a PAUSE frame for that priority back over the
//! ingress link, which stops the upstream egress port's band for
//! `pause_quanta` x 512 bit times (802.3 Annex 31B quanta) or until a
//! PAUSE with zero quanta (XON) arrives; below `xon_bytes` it sends that
//! XON. While paused it refreshes the PAUSE every half pause time. Packets
//! that keep arriving after XOFF (the link's round trip) land in the
//! `headroom_bytes` above `xoff_bytes`; a lossless packet that would exceed
//! `xoff_bytes + headroom_bytes` is dropped (headroom too small). Lossless
//! classes are not dropped by the egress queue's own limit.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PfcSpec {
    /// Lossless traffic classes (0..7); the others stay lossy.
    pub classes: Vec<u8>,
    pub xoff_bytes: u64,
    pub xon_bytes: u64,
    pub headroom_bytes: u64,
    /// Pause time carried by an XOFF frame, in quanta of 512 bit times.
    pub pause_quanta: u16,
    /// Dynamic XOFF: the threshold is the smaller of `xoff_bytes` and this
    /// fraction of the switch's free shared buffer (needs `switch_buffer`).
    #[serde(default)]
    pub xoff_fraction: Option<f64>,
}

/// Bit times in one pause quantum (IEEE 802.3 Annex 31B).
pub const QUANTUM_BITS: u64 = 512;

/// What the switch must do after a counter changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    None,
    /// Send XOFF (pause) upstream over the ingress port's reverse direction.
    Xoff,
    /// Send XON (resume).
    Xon,
}

/// Per ingress port and class: bytes held, whether XOFF is in force, and
/// when its refresh is due.
pub struct PfcState {
    pub spec: PfcSpec,
    lossless: u8,
    held: Vec<[u64; 8]>,
    xoff: Vec<u8>,
    refresh_at: Vec<[u64; 8]>,
}

impl PfcState {
    pub fn new(spec: PfcSpec, ports: usize) -> PfcState {
        let lossless = spec.classes.iter().fold(0u8, |m, &c| m | 1 << (c & 7));
        PfcState {
            spec,
            lossless,
            held: vec![[0; 8]; ports],
            xoff: vec![0; ports],
            refresh_at: vec![[0; 8]; ports],
        }
    }

    #[inline]
    pub fn is_lossless(&self, class: u8) -> bool {
        self.lossless & (1 << (class & 7)) != 0
    }

    /// Whether a packet of `wire` bytes from `ingress` fits in xoff + headroom.
    pub fn admits(&self, ingress: u32, class: u8, wire: u32) -> bool {
        self.held[ingress as usize][class as usize & 7] + wire as u64
            <= self.spec.xoff_bytes + self.spec.headroom_bytes
    }

    /// A lossless packet from `ingress` was queued; `free` is the switch's
    /// free shared buffer after it, when the switch has one.
    pub fn arrived(&mut self, ingress: u32, class: u8, wire: u32, free: Option<u64>) -> Signal {
        let (i, c) = (ingress as usize, class as usize & 7);
        self.held[i][c] += wire as u64;
        let xoff = match (self.spec.xoff_fraction, free) {
            (Some(f), Some(free)) => self.spec.xoff_bytes.min((f * free as f64) as u64),
            _ => self.spec.xoff_bytes,
        };
        if self.held[i][c] > xoff && self.xoff[i] & (1 << c) == 0 {
            self.xoff[i] |= 1 << c;
            return Signal::Xoff;
        }
        Signal::None
    }

    /// A lossless packet from `ingress` left its egress queue.
    pub fn departed(&mut self, ingress: u32, class: u8, wire: u32) -> Signal {
        let (i, c) = (ingress as usize, class as usize & 7);
        self.held[i][c] -= wire as u64;
        if self.held[i][c] <= self.spec.xon_bytes && self.xoff[i] & (1 << c) != 0 {
            self.xoff[i] &= !(1 << c);
            return Signal::Xon;
        }
        Signal::None
    }

    /// Remembers when the refresh of an XOFF is due.
    pub fn arm_refresh(&mut self, ingress: u32, class: u8, at_ps: u64) {
        self.refresh_at[ingress as usize][class as usize & 7] = at_ps;
    }

    /// Whether the refresh event at `now` is the armed one and XOFF still holds.
    pub fn refresh_due(&self, ingress: u32, class: u8, now: u64) -> bool {
        let (i, c) = (ingress as usize, class as usize & 7);
        self.xoff[i] & (1 << c) != 0 && self.refresh_at[i][c] == now
    }

    /// Bytes counted for `ingress` and `class` (for tests and invariants).
    pub fn held(&self, ingress: u32, class: u8) -> u64 {
        self.held[ingress as usize][class as usize & 7]
    }
}
