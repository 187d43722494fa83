//! Probes: observers the engine and the backends call as things happen.
//! With no probe attached the only cost is one emptiness check per call site.

use super::record::MsgRecord;

/// What happened to a packet (or a band) at an egress port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortEvent {
    Enqueue,
    Dequeue,
    Drop,
    Mark,
    /// The band was paused by a PFC PAUSE frame (bytes: 0).
    Pause,
    /// The band resumed (bytes: 0).
    Resume,
}

pub trait Probe: Send + Sync {
    fn message_started(&mut self, _now_ps: u64, _msg: u32, _rec: &MsgRecord) {}
    fn message_completed(&mut self, _now_ps: u64, _msg: u32, _rec: &MsgRecord) {}
    fn port_event(
        &mut self,
        _now_ps: u64,
        _port: u32,
        _band: u8,
        _kind: PortEvent,
        _wire_bytes: u32,
    ) {
    }
}
