//! The rendezvous while strangers hold connections to MASTER_PORT open:
//! some send nothing, some send bytes that are no hello (random ones, or a
//! frame length followed by less than it promised). Nobody without the join
//! token may hold the job back, so the ranks, threads of this process over
//! loopback, must form the job at once and the strangers must be dropped.

use fabriclab_runtime::{Communicator, Config};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::free_port;

const RANKS: u32 = 4;
const SILENT: usize = 20;
const GARBAGE: usize = 20;
/// How long the ranks may take to form the job. When rank 0 read hellos one
/// at a time, waiting the job's `timeout` (2 s here) for each, the silent
/// strangers alone held it back 40 s.
const BOUND: Duration = Duration::from_secs(5);


fn cfg(rank: u32, port: u16) -> Config {
    let mut c = Config::new(rank, RANKS, "127.0.0.1", port, "secret");
    c.timeout = Duration::from_secs(2);
    c.connect_timeout = Duration::from_secs(20);
    c
}

/// Connects to rank 0's rendezvous, retrying until it listens.
fn connect(master: SocketAddr) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect(master) {
            Ok(s) => return s,
            Err(e) if Instant::now() >= deadline => panic!("rank 0 never listened: {e}"),
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Stranger `i`'s bytes: 64 pseudo-random ones; for odd `i` they start with
/// a frame length of 1000 bytes that never all come.
fn garbage(i: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ i as u64;
    let mut b: Vec<u8> = (0..64)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    if i % 2 == 1 {
        b[..4].copy_from_slice(&1000u32.to_le_bytes());
    }
    b
}

/// Whether rank 0 has closed stranger `s` (end of stream or reset) within `wait`.
fn dropped(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 256];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue, // a refusal, then the close
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn strangers_at_the_master_port_do_not_hold_the_job_back() {
    let port = free_port();
    let rank0 = thread::spawn(move || Communicator::new(cfg(0, port)));
    let master = SocketAddr::from(([127, 0, 0, 1], port));
    let mut strangers: Vec<TcpStream> = (0..SILENT + GARBAGE)
        .map(|i| {
            let mut s = connect(master);
            if i >= SILENT {
                s.write_all(&garbage(i)).unwrap();
            }
            s
        })
        .collect();

    let t0 = Instant::now();
    let ranks: Vec<_> = (1..RANKS)
        .map(|r| thread::spawn(move || Communicator::new(cfg(r, port))))
        .collect();
    let mut comms = vec![rank0.join().unwrap()];
    comms.extend(ranks.into_iter().map(|h| h.join().unwrap()));
    let took = t0.elapsed();
    eprintln!(
        "{RANKS} ranks formed the job in {:.3} s with {SILENT} silent and {GARBAGE} garbage connections held open",
        took.as_secs_f64()
    );
    for (r, c) in comms.iter().enumerate() {
        assert!(c.is_ok(), "rank {r}: {:?}", c.as_ref().err());
    }
    assert!(
        took < BOUND,
        "the job took {took:?} to form, more than {BOUND:?}"
    );

    // Every stranger is dropped, the silent ones at their handshake deadline.
    for (i, s) in strangers.iter_mut().enumerate() {
        assert!(
            dropped(s, Duration::from_secs(5)),
            "stranger {i} is still open"
        );
    }
}
