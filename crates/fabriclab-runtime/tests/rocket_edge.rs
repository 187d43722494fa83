//! Packet Rocket on one connection (`conn::Conn`) whose peer is a raw TCP
//! socket played by the test: the peer reads the stamp, echoes delays it
//! chooses, and sees the next message held for the pause the rule gives.

use fabriclab_runtime::clock::realtime_ns;
use fabriclab_runtime::conn::{Body, Conn, Event, Job};
use fabriclab_runtime::pool::Pool;
use fabriclab_runtime::wire::{Header, FLAG_STAMPED, HEADER_BYTES, KIND_DATA, KIND_ECHO};
use fabriclab_runtime::Config;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn data_job(seq: u32) -> Job {
    Job::Send {
        op_id: 0,
        seq,
        step: seq,
        offset: 0,
        body: Body::owned(vec![7u8; 100], 0, Arc::new(Pool::default())),
    }
}

fn read_message(peer: &mut TcpStream) -> Header {
    let mut hb = [0u8; HEADER_BYTES];
    peer.read_exact(&mut hb).unwrap();
    let h = Header::decode(&hb).unwrap();
    let mut body = vec![0u8; h.len_bytes as usize];
    peer.read_exact(&mut body).unwrap();
    h
}

fn echo(peer: &mut TcpStream, stamp: u32, owd_ns: i64) {
    let h = Header::echo(stamp, owd_ns);
    peer.write_all(&h.encode()).unwrap();
}

#[test]
fn an_echo_over_the_threshold_holds_the_next_message_for_the_excess() {
    // T = 5 ms. The peer echoes 100 us (the base), then 100 us + 45 ms for
    // the same message: an excess of 45 ms, a pause of 40 ms from the second
    // echo's arrival. The next message is not written before it ends.
    let mut cfg = Config::new(0, 2, "127.0.0.1", 1, "t");
    cfg.packet_rocket_threshold = Some(Duration::from_millis(5));
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mine, _) = l.accept().unwrap();
    let (tx, rx) = channel();
    let mut conn = Conn::start(1, 0, mine, &cfg, tx).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();

    conn.post(data_job(0)).unwrap();
    let h = read_message(&mut peer);
    assert_eq!((h.kind, h.flags & FLAG_STAMPED), (KIND_DATA, FLAG_STAMPED));
    // the stamp is the sender's CLOCK_REALTIME (low 32 bits), read just now
    let age = (realtime_ns() as u32).wrapping_sub(h.aux);
    assert!(age < 1_000_000_000, "stamp {} is {age} ns old", h.aux);
    echo(&mut peer, h.aux, 100_000);
    // the pause starts when the sender reads the echo: after this instant
    let t_echo = Instant::now();
    echo(&mut peer, h.aux, 45_100_000);
    // wait until the sender's reader took both echoes in, then send
    let t_wait = Instant::now();
    while conn.edge_stats().unwrap().echoes < 2 {
        assert!(t_wait.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_micros(200));
    }
    conn.post(data_job(1)).unwrap();
    let h1 = read_message(&mut peer);
    let waited = t_echo.elapsed();
    assert_eq!(h1.seq, 1);
    assert!(
        waited >= Duration::from_millis(40),
        "the next message came after {waited:?}, within the 40 ms pause"
    );
    let s = conn.edge_stats().unwrap();
    assert_eq!((s.echoes, s.pauses, s.paused_ns), (2, 1, 40_000_000));
    // the writer held the message from its post (after the echoes) until
    // at least the pause's end: some time, and no more than the test waited
    assert!(
        s.held_ns > 0 && s.held_ns <= waited.as_nanos() as u64,
        "held {} ns",
        s.held_ns
    );
    for _ in 0..2 {
        assert!(matches!(
            rx.recv_timeout(Duration::from_secs(5)).unwrap(),
            Event::Sent { .. }
        ));
    }
    drop(peer);
    conn.close();
}

#[test]
fn stamped_data_is_echoed_with_the_receivers_reading() {
    // Our conn as the receiver: the raw peer sends a stamped message stamped
    // 3 ms in the past; the echo carries the stamp and a delay of at least 3 ms.
    let cfg = Config::new(0, 2, "127.0.0.1", 1, "t");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mine, _) = l.accept().unwrap();
    let (tx, rx) = channel();
    let mut conn = Conn::start(1, 0, mine, &cfg, tx).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let stamp = (realtime_ns() - 3_000_000) as u32;
    let h = Header {
        kind: KIND_DATA,
        flags: FLAG_STAMPED,
        op_id: 0,
        seq: 0,
        aux: stamp,
        offset: 0,
        len_bytes: 4,
        payload_crc: 0,
    };
    let mut m = h.encode().to_vec();
    m.extend_from_slice(&[1, 2, 3, 4]);
    let sent = Instant::now();
    peer.write_all(&m).unwrap();
    let e = read_message(&mut peer);
    let bound = sent.elapsed().as_nanos() as i64 + 3_000_000;
    assert_eq!((e.kind, e.aux), (KIND_ECHO, stamp));
    let owd = e.offset as i64;
    assert!(
        owd >= 3_000_000 && owd <= bound + 1_000_000,
        "echoed {owd} ns"
    );
    assert!(matches!(
        rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        Event::Data { .. }
    ));
    drop(peer);
    conn.close();
}
