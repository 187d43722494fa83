//! What the engine remembers of every message: the record the engine keeps,
//! the probes are shown and the results' message table is written from.

/// What the engine remembers of every message.
#[derive(Debug, Clone)]
pub struct MsgRecord {
    pub src: u32,
    pub dst: u32,
    pub size_bytes: u64,
    pub class: u8,
    pub tag: u64,
    pub start_ps: u64,
    /// When its first bytes reached the destination.
    pub first_byte_ps: Option<u64>,
    pub end_ps: Option<u64>,
    pub ideal_fct_ps: u64,
    pub retransmits: u64,
    /// CNPs its receiver sent (DCQCN, packet backend).
    pub cnps: u64,
    pub app: u16,
    /// Egress ports of its forward route (the latest, after reroutes).
    pub route: Box<[u32]>,
    /// Sent on an explicit path (routing never moves it).
    pub pinned: bool,
    /// Times routing moved it after a link changed.
    pub reroutes: u32,
    /// Its pinned path crossed a link that went down.
    pub route_lost: bool,
    /// The source port of its 5-tuple: the one its app named, or one derived
    /// from its id.
    pub src_port: u16,
}
