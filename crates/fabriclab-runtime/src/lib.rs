//! fabriclab-runtime: one rank of a collective, run for real. Each rank
//! executes its part of a plan-format-v1 document (read by the shared
//! `fabriclab-plan` crate and walked with its `PlanRun`) on a local byte
//! buffer, over persistent TCP connections to every other rank.
//!
//! - [`bootstrap`]: rendezvous at the master address, one connection (or
//!   `streams`) per rank pair, join token checked in every handshake.
//! - [`conn`]: a reader and a writer thread per connection (`conn/read.rs`,
//!   `conn/write.rs`); sends lent from the buffer (`conn/body.rs`), plain
//!   receives read into it (`conn/land.rs`).
//! - [`exec`]: the executor that follows the plan's actions.
//! - [`wire`]: the message header. [`dtype`]: the reductions.
//!
//! See docs/runtime.md.

pub mod bootstrap;
pub mod clock;
pub mod conn;
pub mod dtype;
pub mod edge;
pub mod exec;
mod failure;
pub mod pool;
pub mod prepared;
pub mod wire;

pub use clock::Stamp;
pub use dtype::DType;
pub use edge::EdgeStats;
pub use exec::{Communicator, Prepared};

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

/// Test-only fault injection on the sending side: the `seq`-th message of
/// an op to `peer` (the first time it is sent) is corrupted after its
/// checksum was computed, or cut in half and the connection closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Corrupt { peer: u32, seq: u32 },
    Truncate { peer: u32, seq: u32 },
}

/// Everything a rank needs to join a job.
#[derive(Debug, Clone)]
pub struct Config {
    pub rank: u32,
    pub world_size: u32,
    pub master_addr: String,
    pub master_port: u16,
    /// The join token every connection's handshake must carry.
    pub token: String,
    /// Address to bind the data listener to; default in [`bootstrap`].
    pub bind_addr: Option<IpAddr>,
    /// TCP connections per rank pair (messages go round-robin by sequence).
    pub streams: u32,
    /// A peer from which nothing at all (not even a heartbeat; peers send one
    /// every timeout/4 when idle) arrived for this long while this rank waits
    /// for it is named as failed: its process died, froze or lost the network.
    pub timeout: Duration,
    /// How long to wait for a live peer (heartbeats arriving) that has not
    /// sent what this rank waits for, e.g. a rank still computing before it
    /// enters the collective.
    pub late_timeout: Duration,
    /// How long the rendezvous and the pairwise connections may take.
    pub connect_timeout: Duration,
    /// CRC32 of every payload (headers are always checksummed).
    pub checksum: bool,
    /// Keep a telemetry record per message (drained by `take_telemetry`).
    pub telemetry: bool,
    /// Unconsumed received bytes per connection before its reader pauses.
    pub max_unconsumed_bytes: u64,
    /// Packet Rocket (crate::edge): hold a connection's next message while
    /// the echoed one-way delay exceeds the path's base by more than this.
    /// None (the default): off, and the send path stamps nothing.
    pub packet_rocket_threshold: Option<Duration>,
    /// The clock Packet Rocket stamps and reads OWDs on (crate::clock::
    /// RocketClock): emulated error and correction. Default: CLOCK_REALTIME.
    pub rocket_clock: crate::clock::RocketClock,
    pub fault: Option<Fault>,
}

impl Config {
    pub fn new(
        rank: u32,
        world_size: u32,
        master_addr: &str,
        master_port: u16,
        token: &str,
    ) -> Config {
        Config {
            rank,
            world_size,
            master_addr: master_addr.into(),
            master_port,
            token: token.into(),
            bind_addr: None,
            streams: 1,
            timeout: Duration::from_secs(5),
            late_timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(60),
            checksum: false,
            telemetry: false,
            max_unconsumed_bytes: 256 << 20,
            packet_rocket_threshold: None,
            rocket_clock: crate::clock::RocketClock::realtime(rank),
            fault: None,
        }
    }

    pub fn check(&self) -> Result<(), RtError> {
        if self.world_size < 1 {
            return Err(RtError::input("world_size: must be at least 1".into()));
        }
        if self.rank >= self.world_size {
            return Err(RtError::input(format!(
                "rank: {} is not within 0..{}",
                self.rank, self.world_size
            )));
        }
        if self.streams < 1 || self.streams > 64 {
            return Err(RtError::input(format!(
                "streams: {} is not within 1..=64",
                self.streams
            )));
        }
        if self.token.is_empty() {
            return Err(RtError::input(
                "token: the join token must not be empty".into(),
            ));
        }
        if self.timeout < Duration::from_millis(20) {
            return Err(RtError::input("timeout_s: must be at least 0.02 s".into()));
        }
        if self.late_timeout < self.timeout {
            return Err(RtError::input(
                "late_timeout: must be at least timeout".into(),
            ));
        }
        if self.master_port == 0 && self.world_size > 1 {
            return Err(RtError::input(
                "master_port: must be a port number (1..65535)".into(),
            ));
        }
        Ok(())
    }
}

/// What went wrong, and whom to blame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad arguments or a plan this rank cannot run; names the field.
    Input,
    /// The rendezvous or the pairwise connections failed.
    Bootstrap,
    /// A handshake was refused (wrong token, duplicate rank, ...).
    Refused,
    /// A peer died, closed its connection, stalled past the timeout or was
    /// reported failed by another rank: `peer` is the rank blamed.
    PeerFailed,
    /// A message failed its checksum, was truncated or did not match the plan.
    Corrupt,
}

#[derive(Debug, Clone)]
pub struct RtError {
    pub kind: ErrorKind,
    pub peer: Option<u32>,
    pub message: String,
}

impl RtError {
    pub fn input(m: String) -> RtError {
        RtError {
            kind: ErrorKind::Input,
            peer: None,
            message: m,
        }
    }
    pub fn bootstrap(m: String) -> RtError {
        RtError {
            kind: ErrorKind::Bootstrap,
            peer: None,
            message: m,
        }
    }
    pub fn refused(m: String) -> RtError {
        RtError {
            kind: ErrorKind::Refused,
            peer: None,
            message: m,
        }
    }
    pub fn peer(kind: ErrorKind, peer: u32, m: String) -> RtError {
        RtError {
            kind,
            peer: Some(peer),
            message: m,
        }
    }
    pub fn io(what: &'static str) -> impl Fn(std::io::Error) -> RtError {
        move |e| RtError::bootstrap(format!("{what}: {e}"))
    }
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            ErrorKind::Input => "input",
            ErrorKind::Bootstrap => "bootstrap",
            ErrorKind::Refused => "refused",
            ErrorKind::PeerFailed => "peer_failed",
            ErrorKind::Corrupt => "corrupt",
        }
    }
}

impl fmt::Display for RtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RtError {}
