//! Transport: a reliable window-based sender/receiver pair with pluggable
//! congestion control.

pub mod cc;
pub mod tcp;

pub use cc::{CongestionControl, Dctcp, NewReno};
pub use tcp::{Segment, SenderConfig, TcpReceiver, TcpSender, WindowState};
