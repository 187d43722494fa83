//! Closing one connection (`conn::Conn`) whose peer is a raw TCP socket
//! played by the test: the peer can leave bytes unread on our side, read
//! nothing, or freeze.

use fabriclab_runtime::conn::{poll_interval, Body, Conn, Event, Job};
use fabriclab_runtime::pool::Pool;
use fabriclab_runtime::wire::{Header, HEADER_BYTES, KIND_DATA, KIND_HEARTBEAT};
use fabriclab_runtime::Config;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// A started connection to peer 1 and the raw socket of its other end.
fn pair(tune: impl Fn(&mut Config)) -> (Conn, TcpStream, Receiver<Event>, Config) {
    let mut cfg = Config::new(0, 2, "127.0.0.1", 1, "t");
    tune(&mut cfg);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mine, _) = l.accept().unwrap();
    let (tx, rx) = channel();
    let c = Conn::start(1, 0, mine, &cfg, tx).unwrap();
    (c, peer, rx, cfg)
}

fn frame(kind: u8, seq: u32, payload: &[u8]) -> Vec<u8> {
    let h = Header {
        kind,
        flags: 0,
        op_id: 0,
        seq,
        aux: 0,
        offset: 0,
        len_bytes: payload.len() as u64,
        payload_crc: 0,
    };
    let mut m = h.encode().to_vec();
    m.extend_from_slice(payload);
    m
}

/// A data job of `n` owned payload bytes.
fn data_job(n: usize) -> Job {
    Job::Send {
        op_id: 0,
        seq: 0,
        step: 0,
        offset: 0,
        body: Body::owned(vec![7u8; n], 0, Arc::new(Pool::default())),
    }
}

/// Runs `conn.close()` on a thread; how long it took, or None after `limit`.
fn timed_close(mut conn: Conn, limit: Duration) -> Option<Duration> {
    let (done, took) = channel();
    thread::spawn(move || {
        let t0 = Instant::now();
        conn.close();
        let _ = done.send(t0.elapsed());
    });
    took.recv_timeout(limit).ok()
}

/// The close returns within its linger bound (the timeout and one poll), plus 0.5 s of scheduling slack.
fn assert_closes_within_linger(conn: Conn, timeout: Duration) {
    let took = timed_close(conn, Duration::from_secs(30)).expect("close hung");
    let bound = timeout + poll_interval(timeout);
    assert!(
        took <= bound + Duration::from_millis(500),
        "close took {took:?}, linger bound {bound:?}"
    );
}

#[test]
fn close_with_unread_bytes_delivers_everything_then_fin() {
    // Our reader holds the peer's first frame unconsumed (limit 1 byte), so
    // its second frame stays unread in our socket; 4 MiB to the peer is
    // queued while the peer does not read. Closing a socket with unread
    // bytes sends an RST, which would throw away what the kernel has not
    // sent yet: the peer must instead read all 4 MiB, then EOF.
    let n = 4 << 20;
    let (conn, mut peer, rx, _) = pair(|c| c.max_unconsumed_bytes = 1);
    peer.write_all(&frame(KIND_DATA, 0, &[1; 100])).unwrap();
    peer.write_all(&frame(KIND_DATA, 1, &[2; 100])).unwrap();
    let held = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(matches!(held, Event::Data { .. }));
    conn.post(data_job(n)).unwrap();
    let (done, closed) = channel();
    let closer = thread::spawn(move || {
        let mut conn = conn;
        conn.close();
        let _ = done.send(());
    });
    thread::sleep(Duration::from_millis(300)); // the close has begun
    peer.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    let r = peer.read_to_end(&mut got);
    assert!(
        r.is_ok(),
        "the peer's read failed after {} bytes: {r:?}",
        got.len()
    );
    assert_eq!(got.len(), HEADER_BYTES + n, "the peer got EOF early");
    assert!(got[HEADER_BYTES..].iter().all(|&b| b == 7));
    drop(peer); // our FIN: the close's drain ends
    closed.recv_timeout(Duration::from_secs(10)).unwrap();
    closer.join().unwrap();
    drop(held);
}

#[test]
fn close_returns_within_the_linger_when_the_peer_is_frozen() {
    // The peer neither reads nor sends (a SIGSTOPped process looks the same
    // from here) and a 16 MiB write to it is stuck: the close gives up once
    // the peer has been silent for the timeout.
    let (conn, peer, _rx, cfg) = pair(|c| c.timeout = Duration::from_millis(600));
    conn.post(data_job(16 << 20)).unwrap();
    thread::sleep(Duration::from_millis(100));
    assert_closes_within_linger(conn, cfg.timeout);
    drop(peer);
}

#[test]
fn close_returns_within_the_linger_when_a_live_peer_does_not_read() {
    // The peer sends heartbeats (alive) but reads nothing and never closes:
    // the close gives up at the linger deadline, `timeout` after it began.
    let (conn, mut peer, _rx, cfg) = pair(|c| c.timeout = Duration::from_millis(600));
    conn.post(data_job(16 << 20)).unwrap();
    let stop = Instant::now() + Duration::from_secs(5);
    let beats = thread::spawn(move || {
        while Instant::now() < stop {
            match peer.write_all(&frame(KIND_HEARTBEAT, 0, &[])) {
                Err(e) if e.kind() != ErrorKind::Interrupted => return,
                _ => thread::sleep(Duration::from_millis(50)),
            }
        }
    });
    thread::sleep(Duration::from_millis(100));
    assert_closes_within_linger(conn, cfg.timeout);
    beats.join().unwrap();
}
