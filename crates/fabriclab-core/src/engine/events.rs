//! The events of a simulation as the queue holds them: a backend's own
//! ([`NetEv`], opaque to the engine), an application's timer (its app and
//! token kept in [`AppTimers`]), the queue sampler, timed link events and
//! routing convergence; each packed in one u64 ([`PackedEv`]).

/// A backend's own event, opaque to the engine: the backend chooses `kind`
/// and `id` (e.g. "port 12 finished serializing") and decodes them itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetEv {
    pub kind: u8,
    pub id: u32,
}

/// Every event of a simulation: a backend's own, an application's timer, or
/// the engine's queue sampler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev {
    Net(NetEv),
    /// An application's timer: its app and token are in slot `i` of
    /// [`AppTimers`] (kept apart so that every event packs into a u64).
    App(u32),
    Sample,
    /// Timed link event `i` of the scenario happens.
    Link(u32),
    /// Routing converges on the link state after event `i`.
    Converge(u32),
}

/// An [`Ev`] packed in one u64, as the event queue holds it (issue 13,
/// fourth pass: 24-byte queue entries, built in registers): the variant in
/// bits 0-7, a backend event's kind in bits 8-15, the index in bits 32-63.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PackedEv(u64);

const EV_NET: u64 = 0;
const EV_APP: u64 = 1;
const EV_SAMPLE: u64 = 2;
const EV_LINK: u64 = 3;
const EV_CONVERGE: u64 = 4;

impl Ev {
    #[inline(always)]
    pub(crate) fn pack(self) -> PackedEv {
        PackedEv(match self {
            Ev::Net(n) => EV_NET | (n.kind as u64) << 8 | (n.id as u64) << 32,
            Ev::App(i) => EV_APP | (i as u64) << 32,
            Ev::Sample => EV_SAMPLE,
            Ev::Link(i) => EV_LINK | (i as u64) << 32,
            Ev::Converge(i) => EV_CONVERGE | (i as u64) << 32,
        })
    }
}

impl PackedEv {
    /// The backend's event, if it is one.
    #[inline(always)]
    pub(crate) fn net(self) -> Option<NetEv> {
        (self.0 & 0xff == EV_NET).then_some(NetEv {
            kind: (self.0 >> 8) as u8,
            id: (self.0 >> 32) as u32,
        })
    }

    #[inline(always)]
    pub(crate) fn unpack(self) -> Ev {
        let id = (self.0 >> 32) as u32;
        match self.0 & 0xff {
            EV_NET => Ev::Net(NetEv {
                kind: (self.0 >> 8) as u8,
                id,
            }),
            EV_APP => Ev::App(id),
            EV_SAMPLE => Ev::Sample,
            EV_LINK => Ev::Link(id),
            _ => Ev::Converge(id),
        }
    }
}

/// Pending application timers (app, token), by slot; a slot is free again
/// once its event fires (app timers are never cancelled).
#[derive(Debug, Default)]
pub(crate) struct AppTimers {
    slots: Vec<(u16, u64)>,
    free: Vec<u32>,
}

impl AppTimers {
    pub(crate) fn add(&mut self, app: u16, token: u64) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = (app, token);
                i
            }
            None => {
                self.slots.push((app, token));
                (self.slots.len() - 1) as u32
            }
        }
    }
    pub(crate) fn take(&mut self, i: u32) -> (u16, u64) {
        self.free.push(i);
        self.slots[i as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant survives packing, at the edges of its fields.
    #[test]
    fn events_pack_and_unpack() {
        let evs = [
            Ev::Net(NetEv { kind: 0, id: 0 }),
            Ev::Net(NetEv {
                kind: 255,
                id: u32::MAX,
            }),
            Ev::Net(NetEv {
                kind: 6,
                id: 1 << 31,
            }),
            Ev::App(0),
            Ev::App(u32::MAX),
            Ev::Sample,
            Ev::Link(7),
            Ev::Link(u32::MAX),
            Ev::Converge(0),
            Ev::Converge(u32::MAX),
        ];
        for ev in evs {
            assert_eq!(ev.pack().unpack(), ev);
        }
    }

    /// A fired timer's slot is reused; pending ones keep their app and token.
    #[test]
    fn app_timer_slots() {
        let mut t = AppTimers::default();
        let a = t.add(1, 10);
        let b = t.add(2, u64::MAX);
        assert_ne!(a, b);
        assert_eq!(t.take(a), (1, 10));
        let c = t.add(3, 30);
        assert_eq!(c, a);
        assert_eq!(t.take(b), (2, u64::MAX));
        assert_eq!(t.take(c), (3, 30));
    }
}
