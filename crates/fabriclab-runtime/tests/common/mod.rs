//! What the runtime's integration tests share.

use std::net::TcpListener;

/// A loopback port free at the time of the call (the OS picks it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
