//! Receives posted before their message arrives are read (plain) or summed
//! piece by piece (reducing) straight into the buffer (`conn::land`); the
//! checks of the pooled path hold there too: the checksum, a message cut
//! short, and the bytes themselves.

use fabriclab_runtime::{Communicator, Config, DType, ErrorKind, Fault, Prepared, RtError};
use std::thread;
use std::time::Duration;

mod common;
use common::free_port;

const N: usize = 3 << 20;

/// Rank 1 sends [0, N) to rank 0, which receives it (plainly, or summing
/// it into its own); rank 0's receive has no dependency, so it is posted
/// when the op starts, and rank 1 starts 200 ms later: the message finds
/// its slot.
fn plan(reduce: bool) -> String {
    let coll = if reduce { "allreduce" } else { "alltoall" };
    format!(
        "{{\"version\":1,\"collective\":\"{coll}\",\"nranks\":2,\"size_bytes\":{N},\"ranks\":[\
         [{{\"op\":\"recv\",\"peer\":1,\"offset\":0,\"bytes\":{N},\"reduce\":{reduce}}}],\
         [{{\"op\":\"send\",\"peer\":0,\"offset\":0,\"bytes\":{N}}}]]}}"
    )
}

fn input(r: usize) -> Vec<u8> {
    (0..N).map(|i| ((i * 13 + r * 7) % 253) as u8).collect()
}

fn run(fault: Option<Fault>, reduce: bool) -> Vec<(Vec<u8>, Result<u64, RtError>)> {
    let port = free_port();
    let hs: Vec<_> = (0..2u32)
        .map(|r| {
            thread::spawn(move || {
                let mut c = Config::new(r, 2, "127.0.0.1", port, "secret");
                c.checksum = true;
                c.timeout = Duration::from_secs(2);
                c.connect_timeout = Duration::from_secs(10);
                if r == 1 {
                    c.fault = fault;
                }
                let mut comm = Communicator::new(c).unwrap();
                let p = Prepared::new(&plan(reduce), r).unwrap();
                let mut buf = input(r as usize);
                if r == 1 {
                    thread::sleep(Duration::from_millis(200));
                }
                let res = comm.run(&p, &mut buf, DType::I32);
                (buf, res)
            })
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn a_landed_receive_holds_the_senders_bytes() {
    let out = run(None, false);
    assert!(out[0].1.is_ok() && out[1].1.is_ok());
    assert!(out[0].0 == input(1), "rank 0 holds rank 1's bytes");
    assert!(out[1].0 == input(1), "the sender's buffer is unchanged");
}

#[test]
fn a_landed_reducing_receive_holds_the_sum() {
    // int32 little endian, summed with wraparound, element by element
    let i32s = |b: &[u8]| -> Vec<i32> {
        b.chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let expect: Vec<i32> = i32s(&input(0))
        .iter()
        .zip(i32s(&input(1)))
        .map(|(a, b)| a.wrapping_add(b))
        .collect();
    let out = run(None, true);
    assert!(out[0].1.is_ok() && out[1].1.is_ok());
    assert!(i32s(&out[0].0) == expect, "rank 0 holds the sum");
    assert!(out[1].0 == input(1));
}

#[test]
fn a_landed_receive_still_checks_the_checksum_and_the_length() {
    for reduce in [false, true] {
        checks_fail(reduce);
    }
}

fn checks_fail(reduce: bool) {
    let out = run(Some(Fault::Corrupt { peer: 0, seq: 0 }), reduce);
    let e = out[0].1.as_ref().unwrap_err();
    assert_eq!((e.kind, e.peer), (ErrorKind::Corrupt, Some(1)));
    assert!(
        e.message.contains("checksum mismatch") && e.message.contains("recv step 0"),
        "{}",
        e.message
    );
    let out = run(Some(Fault::Truncate { peer: 0, seq: 0 }), reduce);
    let e = out[0].1.as_ref().unwrap_err();
    assert_eq!((e.kind, e.peer), (ErrorKind::Corrupt, Some(1)));
    let half = N / 2;
    assert!(
        e.message
            .contains(&format!("truncated message: got {half} of {N}")),
        "{}",
        e.message
    );
}
