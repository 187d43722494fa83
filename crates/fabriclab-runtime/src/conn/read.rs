//! A connection's reader: reads whole messages, checks them and hands them
//! to the executor's event channel, within the connection's credit.

use super::land::{read_into, Landed, Posts};
use super::{poll_interval, polled, Credit, Event, Liveness, Payload, Poster};
use crate::clock::{RocketClock, Stamp};
use crate::edge::{self, Edge};
use crate::pool::Pool;
use crate::wire::{
    Header, FLAG_CHECKSUM, FLAG_PROVISIONAL, FLAG_STAMPED, HEADER_BYTES, KIND_ABORT, KIND_DATA,
    KIND_ECHO, KIND_HEARTBEAT,
};
use std::io::{ErrorKind, Read};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Instant;

/// Reads until `buf` is full; Ok(n < len) only when EOF came after n
/// bytes. The poll interval passing is an error only once closing.
fn read_full(s: &mut TcpStream, buf: &mut [u8], live: &Liveness) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => return Ok(got),
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if polled(&e) && !live.closing() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reads and discards until the peer's FIN, an error or the end of a
/// close's linger, so that the socket closes with nothing unread.
fn drain(s: &mut TcpStream, live: &Liveness) {
    let mut sink = vec![0u8; 64 << 10];
    while !live.linger_over() {
        match s.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => live.hear(),
            Err(e) if e.kind() == ErrorKind::Interrupted || polled(&e) => {}
            Err(_) => return,
        }
    }
}

/// How the reader stopped delivering messages.
enum End {
    /// The peer sent FIN at a message boundary: it closed.
    Fin,
    /// The connection failed (e.g. reset); nothing more can be read.
    Failed,
    /// Closing, or the peer sent something broken: discard the rest.
    Discard,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn read_loop(
    peer: u32,
    stream: u32,
    mut s: TcpStream,
    (credit, pool, posts): (Arc<Credit>, Arc<Pool>, Arc<Posts>),
    ev: Sender<Event>,
    live: Liveness,
    echo: Poster,
    (edge, clock): (Option<Arc<Edge>>, RocketClock),
) {
    let r = read_messages(
        peer,
        stream,
        &mut s,
        (&credit, &pool, &posts),
        &ev,
        &live,
        &echo,
        (edge.as_deref(), &clock),
    );
    drop(echo);
    match r {
        // the peer has closed: it reads nothing more, so close our side
        // too (its close waits for our FIN), unless our close already does
        End::Fin if !live.closing() => {
            let _ = s.shutdown(Shutdown::Write);
        }
        End::Fin | End::Failed => {}
        End::Discard => drain(&mut s, &live),
    }
}

/// Reads whole messages and passes them on until the connection ends.
#[allow(clippy::too_many_arguments)]
fn read_messages(
    peer: u32,
    stream: u32,
    s: &mut TcpStream,
    (credit, pool, posts): (&Arc<Credit>, &Arc<Pool>, &Posts),
    ev: &Sender<Event>,
    live: &Liveness,
    echo: &Poster,
    (edge, clock): (Option<&Edge>, &RocketClock),
) -> End {
    let broken = |what, error| Event::Broken {
        peer,
        stream,
        what,
        error,
    };
    let mut scratch = Vec::new();
    loop {
        if !credit.wait_below_limit() || live.closing() {
            return End::Discard;
        }
        let mut hb = [0u8; HEADER_BYTES];
        match read_full(s, &mut hb, live) {
            _ if live.closing() => return End::Discard,
            Ok(0) => {
                let _ = ev.send(Event::Closed {
                    peer,
                    stream,
                    error: None,
                });
                return End::Fin;
            }
            Ok(n) if n < HEADER_BYTES => {
                let _ = ev.send(broken(None, format!("truncated header: got {n} of {HEADER_BYTES} bytes before the connection closed")));
                return End::Discard;
            }
            Ok(_) => {}
            Err(e) => {
                let _ = ev.send(Event::Closed {
                    peer,
                    stream,
                    error: Some(e.to_string()),
                });
                return End::Failed;
            }
        }
        live.hear();
        let h = match Header::decode(&hb) {
            Ok(h) => h,
            Err(e) => {
                let _ = ev.send(broken(None, e));
                return End::Discard;
            }
        };
        if h.kind == KIND_HEARTBEAT {
            continue;
        }
        if h.kind == KIND_ECHO {
            if let Some(e) = edge {
                e.on_echo(e.now_ns(), Instant::now(), h.aux, h.offset as i64);
            }
            continue;
        }
        if h.kind == KIND_DATA && h.flags & FLAG_STAMPED != 0 {
            echo.echo(h.aux, edge::owd_ns(clock.now_ns(), h.aux));
        }
        let what = Some((h.op_id, h.seq));
        if h.len_bytes > (1 << 40) || (h.kind == KIND_ABORT && h.len_bytes > 1 << 16) {
            let _ = ev.send(broken(
                what,
                format!("message length {} is implausible", h.len_bytes),
            ));
            return End::Discard;
        }
        if let Some(slot) = (h.kind == KIND_DATA)
            .then(|| posts.take(h.op_id, h.seq, h.len_bytes))
            .flatten()
        {
            let wait_ms = poll_interval(live.timeout).as_millis() as i32;
            let crc = (h.flags & FLAG_CHECKSUM != 0).then_some(h.payload_crc);
            let error = match read_into(s, &slot, live, wait_ms, crc, &mut scratch) {
                Landed::Whole { crc_ok: true } => {
                    let payload = Payload {
                        data: Vec::new(),
                        landed: true,
                        credit: credit.clone(),
                        pool: pool.clone(),
                    };
                    let e = Event::Data {
                        peer,
                        stream,
                        hdr: h,
                        payload,
                        arrived: Stamp::now(),
                    };
                    if ev.send(e).is_err() {
                        return End::Discard;
                    }
                    continue;
                }
                // the op it belonged to has ended: nothing waits for it
                Landed::Revoked => continue,
                Landed::Closing => return End::Discard,
                Landed::Whole { crc_ok: false } => {
                    "payload checksum mismatch (corrupted data)".to_string()
                }
                Landed::Short(n) => format!(
                    "truncated message: got {n} of {} payload bytes before the connection closed",
                    h.len_bytes
                ),
                Landed::Failed(e) => {
                    let _ = ev.send(broken(
                        what,
                        format!("connection failed inside a message: {e}"),
                    ));
                    return End::Failed;
                }
            };
            let _ = ev.send(broken(what, error));
            return End::Discard;
        }
        credit.take(h.len_bytes);
        let payload = Payload {
            data: Vec::new(),
            landed: false,
            credit: credit.clone(),
            pool: pool.clone(),
        };
        // read_to_end into reserved capacity (no zeroing pass over the
        // payload), in pieces of at most 1 MiB so that a long message on a
        // slow link keeps the peer "heard from"; a read that times out keeps
        // what it read (read_to_end's contract) and goes on unless closing
        let mut data = pool.take(h.len_bytes as usize);
        let mut r = Ok(0);
        while (data.len() as u64) < h.len_bytes {
            let (had, piece) = (data.len(), (h.len_bytes - data.len() as u64).min(1 << 20));
            r = (&mut *s).take(piece).read_to_end(&mut data);
            if data.len() > had {
                live.hear();
            }
            match &r {
                Ok(n) if *n > 0 => {}
                Err(e) if polled(e) && !live.closing() => {}
                _ => break,
            }
        }
        if live.closing() {
            return End::Discard;
        }
        match r.map(|_| data.len()) {
            Ok(n) if n < h.len_bytes as usize => {
                let _ = ev.send(broken(what, format!("truncated message: got {n} of {} payload bytes before the connection closed", h.len_bytes)));
                return End::Discard;
            }
            Ok(_) => {}
            Err(e) => {
                let _ = ev.send(broken(
                    what,
                    format!("connection failed inside a message: {e}"),
                ));
                return End::Failed;
            }
        }
        let arrived = Stamp::now();
        if h.flags & FLAG_CHECKSUM != 0 && crc32fast::hash(&data) != h.payload_crc {
            let _ = ev.send(broken(
                what,
                "payload checksum mismatch (corrupted data)".into(),
            ));
            return End::Discard;
        }
        let mut payload = payload;
        payload.data = data; // the Payload now owns the bytes counted by `take`
        let e = if h.kind == KIND_DATA {
            Event::Data {
                peer,
                stream,
                hdr: h,
                payload,
                arrived,
            }
        } else {
            Event::Abort {
                peer,
                culprit: h.aux,
                reason: String::from_utf8_lossy(&payload.data).into_owned(),
                provisional: h.flags & FLAG_PROVISIONAL != 0,
            }
        };
        if ev.send(e).is_err() {
            return End::Discard;
        }
    }
}
