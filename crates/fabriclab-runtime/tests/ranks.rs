//! Ranks as threads of one test process, over loopback TCP. Plans are built
//! here by hand (a ring allreduce and a one-step exchange), independently of
//! the Python planners; expectations are sums computed directly.

use fabriclab_runtime::{Communicator, Config, DType, ErrorKind, Fault, Prepared, RtError};
use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::free_port;


fn cfg(rank: u32, n: u32, port: u16) -> Config {
    let mut c = Config::new(rank, n, "127.0.0.1", port, "secret");
    c.checksum = true;
    c.timeout = Duration::from_secs(2);
    c.connect_timeout = Duration::from_secs(10);
    c
}

/// Ring allreduce over `count` elements of `elem` bytes: reduce-scatter then
/// allgather, chunk c = elements [c*count/n, (c+1)*count/n).
fn ring_allreduce(n: usize, count: usize, elem: usize) -> String {
    let chunk = |c: usize| {
        (
            c * count / n * elem,
            ((c + 1) * count / n - c * count / n) * elem,
        )
    };
    let mut ranks: Vec<Vec<String>> = vec![Vec::new(); n];
    let mut last: Vec<Option<usize>> = vec![None; n];
    for round in 0..2 * (n - 1) {
        let mut new_last = last.clone();
        for r in 0..n {
            let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
            let (so, sb) = chunk((r + 2 * n - round) % n);
            let (ro, rb) = chunk((r + 2 * n - round - 1) % n);
            let dep = last[r]
                .map(|d| format!(",\"deps\":[{d}]"))
                .unwrap_or_default();
            let reduce = round < n - 1;
            if sb > 0 {
                ranks[r].push(format!(
                    "{{\"op\":\"send\",\"peer\":{next},\"offset\":{so},\"bytes\":{sb}{dep}}}"
                ));
            }
            if rb > 0 {
                // the receive writes the chunk the next round sends; it waits for this round's send
                let mut deps: Vec<usize> = last[r].into_iter().collect();
                if sb > 0 {
                    deps.push(ranks[r].len() - 1);
                }
                let ds = deps
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(",");
                ranks[r].push(format!("{{\"op\":\"recv\",\"peer\":{prev},\"offset\":{ro},\"bytes\":{rb},\"reduce\":{reduce},\"deps\":[{ds}]}}"));
                new_last[r] = Some(ranks[r].len() - 1);
            }
        }
        last = new_last;
    }
    let body: Vec<String> = ranks.iter().map(|r| format!("[{}]", r.join(","))).collect();
    format!("{{\"version\":1,\"collective\":\"allreduce\",\"nranks\":{n},\"size_bytes\":{},\"ranks\":[{}]}}", count * elem, body.join(","))
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Runs `f(rank, comm)` on `n` threads; returns each rank's result.
fn world<T: Send + 'static>(
    n: u32,
    tune: impl Fn(&mut Config) + Send + Sync + Copy + 'static,
    f: impl Fn(u32, Result<Communicator, RtError>) -> T + Send + Sync + Copy + 'static,
) -> Vec<T> {
    let port = free_port();
    let hs: Vec<_> = (0..n)
        .map(|r| {
            thread::spawn(move || {
                let mut c = cfg(r, n, port);
                tune(&mut c);
                f(r, Communicator::new(c))
            })
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn ring_allreduce_int32_exact_on_2_3_4_ranks() {
    for n in [2u32, 3, 4] {
        for count in [1usize, 7, 1000] {
            let plan = ring_allreduce(n as usize, count, 4);
            let input = |r: u32| -> Vec<i32> {
                (0..count)
                    .map(|i| (i as i32) * 10 + r as i32 * 1_000_003)
                    .collect()
            };
            let expect: Vec<i32> = (0..count)
                .map(|i| {
                    (0..n)
                        .map(|r| input(r)[i])
                        .fold(0i32, |a, b| a.wrapping_add(b))
                })
                .collect();
            let out = world(
                n,
                |_| {},
                move |r, c| {
                    let mut c = c.unwrap();
                    let p = Prepared::new(&ring_allreduce(n as usize, count, 4), r).unwrap();
                    let mut buf = i32_bytes(
                        &(0..count)
                            .map(|i| (i as i32) * 10 + r as i32 * 1_000_003)
                            .collect::<Vec<_>>(),
                    );
                    c.run(&p, &mut buf, DType::I32).unwrap();
                    c.run(&p, &mut buf, DType::I32).unwrap(); // a second op on the same connections
                    buf
                },
            );
            let twice: Vec<i32> = expect.iter().map(|x| x.wrapping_mul(n as i32)).collect();
            for b in out {
                assert_eq!(b, i32_bytes(&twice), "n={n} count={count}");
            }
            assert!(plan.contains("\"reduce\":true"));
        }
    }
}

#[test]
fn float32_with_three_streams_and_telemetry() {
    let n = 3u32;
    let out = world(
        n,
        |c| {
            c.streams = 3;
            c.telemetry = true;
        },
        move |r, c| {
            let mut c = c.unwrap();
            let p = Prepared::new(&ring_allreduce(3, 300, 4), r).unwrap();
            let mut buf = f32_bytes(&vec![0.5 + r as f32; 300]);
            c.run(&p, &mut buf, DType::F32).unwrap();
            (buf, c.take_telemetry())
        },
    );
    for (b, tel) in out {
        assert_eq!(b, f32_bytes(&vec![4.5; 300])); // 0.5 + 1.5 + 2.5
                                                   // 2(n-1) sends and 2(n-1) receives, each stamped in order
        assert_eq!(tel.iter().filter(|t| t.is_send).count(), 4);
        assert_eq!(tel.iter().filter(|t| !t.is_send).count(), 4);
        assert_eq!(tel.iter().map(|t| t.stream).max(), Some(2));
        for t in &tel {
            // a receive's data may arrive before the receive is posted (then it waited 0)
            assert!(
                t.post.mono_ns > 0
                    && t.start.mono_ns <= t.end.mono_ns
                    && t.post.mono_ns <= t.end.mono_ns
            );
            assert_eq!(t.wait_ns, t.start.mono_ns.saturating_sub(t.post.mono_ns));
            if t.is_send {
                assert!(t.post.mono_ns <= t.start.mono_ns);
            }
            assert!(t.end.real_ns > 1_600_000_000_000_000_000);
        }
    }
}

/// A plan's meta.streams spreads its messages over that many of the
/// communicator's connections (k-th message of a pair on stream k mod streams).
#[test]
fn plan_meta_streams_limits_the_connections_used() {
    let with_streams = |k: &str| {
        ring_allreduce(3, 3000, 4).replacen(
            "{\"version\":1,",
            &format!("{{\"version\":1,\"meta\":{{\"streams\":{k}}},"),
            1,
        )
    };
    let out = world(
        3,
        |c| {
            c.streams = 4;
            c.telemetry = true;
        },
        move |r, c| {
            let mut c = c.unwrap();
            let mut seen = Vec::new();
            for k in ["2", "1", "9"] {
                let p = Prepared::new(&with_streams(k), r).unwrap();
                assert_eq!(p.streams, Some(k.parse().unwrap()));
                let mut buf = f32_bytes(&vec![1.0; 3000]);
                c.run(&p, &mut buf, DType::F32).unwrap();
                assert_eq!(buf, f32_bytes(&vec![3.0; 3000]));
                let tel = c.take_telemetry();
                seen.push(
                    tel.iter()
                        .filter(|t| t.is_send)
                        .map(|t| (t.seq, t.stream))
                        .collect::<Vec<_>>(),
                );
            }
            let bad = Prepared::new(&with_streams("0"), r).err().unwrap();
            assert!(
                bad.message
                    .contains("meta.streams must be an integer within 1..64"),
                "{}",
                bad.message
            );
            seen
        },
    );
    for seen in out {
        // A ring over 3 ranks: 4 sends to the next rank, seq 0..3.
        assert!(seen[0].iter().all(|&(k, s)| s == k % 2), "{:?}", seen[0]);
        assert!(seen[1].iter().all(|&(_, s)| s == 0));
        // More than the communicator has: all 4 of its connections.
        assert!(seen[2].iter().all(|&(k, s)| s == k % 4));
    }
}

#[test]
fn wrong_token_is_refused_and_the_job_still_forms() {
    let port = free_port();
    let r0 = thread::spawn(move || Communicator::new(cfg(0, 2, port)).map(|_| ()));
    let mut bad = cfg(1, 2, port);
    bad.token = "guess".into();
    let e = Communicator::new(bad)
        .err()
        .expect("a wrong token must be refused");
    assert_eq!(e.kind, ErrorKind::Refused);
    assert!(e.message.contains("wrong join token"), "{}", e.message);
    Communicator::new(cfg(1, 2, port)).expect("the right token joins");
    r0.join().unwrap().unwrap();
}

fn exchange_plan() -> String {
    // each rank sends its 64 float32 to the other and sums what it receives
    let s = |p| {
        format!("[{{\"op\":\"send\",\"peer\":{p},\"offset\":0,\"bytes\":256}},{{\"op\":\"recv\",\"peer\":{p},\"offset\":0,\"bytes\":256,\"reduce\":true,\"deps\":[0]}}]")
    };
    format!("{{\"version\":1,\"collective\":\"allreduce\",\"nranks\":2,\"size_bytes\":256,\"ranks\":[{},{}]}}", s(1), s(0))
}

fn faulty(fault: Fault) -> Vec<Result<u64, RtError>> {
    let f = move |c: &mut Config| {
        if c.rank == 1 {
            c.fault = Some(fault)
        }
    };
    world(2, f, move |r, c| {
        let mut c = c.unwrap();
        let p = Prepared::new(&exchange_plan(), r).unwrap();
        let mut buf = vec![0u8; 256];
        c.run(&p, &mut buf, DType::F32)
    })
}

#[test]
fn corrupted_chunk_is_detected_naming_peer_and_step() {
    let out = faulty(Fault::Corrupt { peer: 0, seq: 0 });
    let e = out[0].as_ref().unwrap_err();
    assert_eq!((e.kind, e.peer), (ErrorKind::Corrupt, Some(1)));
    assert!(
        e.message.contains("checksum mismatch") && e.message.contains("recv step 1"),
        "{}",
        e.message
    );
    // rank 1 had already received and sent all it had to: its op completed
    assert!(out[1].is_ok());
}

#[test]
fn truncated_chunk_is_detected() {
    let out = faulty(Fault::Truncate { peer: 0, seq: 0 });
    let e = out[0].as_ref().unwrap_err();
    assert_eq!((e.kind, e.peer), (ErrorKind::Corrupt, Some(1)));
    assert!(
        e.message.contains("truncated message: got 128 of 256"),
        "{}",
        e.message
    );
}

#[test]
fn a_dead_rank_is_named_by_every_other_rank() {
    let n = 4u32;
    let t0 = Instant::now();
    // Every rank finishes the first op before rank 2 leaves: otherwise a
    // slow peer can still be reading rank 2's last messages of that op.
    // (Leaked: the rank closure is Copy, and a reference is.)
    let first_done: &'static std::sync::Barrier =
        Box::leak(Box::new(std::sync::Barrier::new(n as usize)));
    let out = world(
        n,
        |_| {},
        move |r, c| {
            let mut c = c.unwrap();
            let p = Prepared::new(&ring_allreduce(4, 4000, 4), r).unwrap();
            let mut buf = vec![0u8; 16000];
            c.run(&p, &mut buf, DType::F32).unwrap();
            first_done.wait();
            if r == 2 {
                return None; // rank 2 leaves before the second op: its connections close
            }
            Some(c.run(&p, &mut buf, DType::F32))
        },
    );
    for (r, o) in out.into_iter().enumerate() {
        if r == 2 {
            continue;
        }
        let e = o.unwrap().unwrap_err();
        assert_eq!(
            (e.kind, e.peer),
            (ErrorKind::PeerFailed, Some(2)),
            "rank {r}: {}",
            e.message
        );
        assert!(
            e.message.contains("rank 2 failed"),
            "rank {r}: {}",
            e.message
        );
    }
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "named at once, not at the timeout"
    );
}

#[test]
fn a_rank_that_does_not_come_is_named_after_late_timeout() {
    // Rank 1 is alive (heartbeats) but does not enter the op for 2 s: the
    // ranks that wait for it give up after late_timeout (0.7 s), before it
    // leaves. In a ring, the ranks downstream wait for ranks that wait in
    // turn; every rank must still name rank 1.
    for n in [3u32, 4] {
        let t0 = Instant::now();
        let out = world(
            n,
            |c| {
                c.timeout = Duration::from_millis(500);
                c.late_timeout = Duration::from_millis(700);
            },
            move |r, c| {
                let mut c = c.unwrap();
                let p = Prepared::new(&ring_allreduce(n as usize, 40, 4), r).unwrap();
                let mut buf = vec![0u8; 160];
                if r == 1 {
                    thread::sleep(Duration::from_millis(2000)); // stalls, connections open
                    return None;
                }
                Some(c.run(&p, &mut buf, DType::F32))
            },
        );
        for r in (0..n as usize).filter(|&r| r != 1) {
            let e = out[r].as_ref().unwrap().as_ref().unwrap_err();
            let all: Vec<String> = out
                .iter()
                .flatten()
                .map(|o| format!("{:?}", o.as_ref().err().map(|e| &e.message)))
                .collect();
            assert_eq!(
                e.peer,
                Some(1),
                "n={n} rank {r}: {}\nall: {all:#?}",
                e.message
            );
        }
        assert!(t0.elapsed() < Duration::from_millis(3500));
        for r in (0..n as usize).filter(|&r| r != 1) {
            let e = out[r].as_ref().unwrap().as_ref().unwrap_err();
            assert!(
                !e.message.contains("closed its connection"),
                "named before rank 1 left: {}",
                e.message
            );
        }
    }
}

#[test]
fn bad_input_names_the_field() {
    let e = Communicator::new(Config::new(3, 2, "127.0.0.1", 1, "t"))
        .err()
        .unwrap();
    assert!(e.message.starts_with("rank:"), "{}", e.message);
    let mut c = Communicator::new(Config::new(0, 1, "127.0.0.1", 0, "t")).unwrap();
    let one =
        "{\"version\":1,\"collective\":\"allreduce\",\"nranks\":1,\"size_bytes\":8,\"ranks\":[[]]}";
    let p = Prepared::new(one, 0).unwrap();
    assert!(c
        .run(&p, &mut [0u8; 4], DType::F32)
        .unwrap_err()
        .message
        .starts_with("buffer:"));
    assert_eq!(c.run(&p, &mut [0u8; 8], DType::F32).unwrap(), 0);
    let bytes_plan = ring_allreduce(2, 3, 1); // chunks of 1 and 2 bytes, run on float32
    let p = Prepared::new(&bytes_plan, 0).unwrap();
    assert!(Prepared::new("{\"version\":2}", 0)
        .err()
        .unwrap()
        .message
        .starts_with("plan"));
    let e = c.run(&p, &mut [0u8; 3], DType::F32).unwrap_err();
    assert!(
        e.message
            .starts_with("plan: nranks is 2 but the world size is 1"),
        "{}",
        e.message
    );
}

#[test]
fn a_plan_cut_inside_elements_is_refused_before_sending() {
    let out = world(
        2,
        |_| {},
        |r, c| {
            let p = Prepared::new(&ring_allreduce(2, 3, 1), r).unwrap();
            c.unwrap().run(&p, &mut [0u8; 3], DType::F32).unwrap_err()
        },
    );
    for e in out {
        assert_eq!(e.kind, ErrorKind::Input);
        assert!(
            e.message.contains("not whole F32 elements"),
            "{}",
            e.message
        );
    }
}

#[test]
fn a_late_but_live_rank_is_waited_for() {
    // rank 2 enters the op 1.2 s after the others, past the 0.3 s timeout:
    // its heartbeats show it is alive, so the others wait and the op succeeds
    let out = world(
        3,
        |c| c.timeout = Duration::from_millis(300),
        |r, c| {
            let mut c = c.unwrap();
            let p = Prepared::new(&ring_allreduce(3, 30, 4), r).unwrap();
            let mut buf = i32_bytes(&[r as i32 + 1; 30]);
            if r == 2 {
                thread::sleep(Duration::from_millis(1200));
            }
            c.run(&p, &mut buf, DType::I32).map(|_| buf)
        },
    );
    for o in out {
        assert_eq!(o.unwrap(), i32_bytes(&[6; 30]));
    }
}

/// Rank 0 sends rank 1 a small message then `big` bytes, as a broadcast.
fn two_message_broadcast(big: usize) -> String {
    let n = 4096 + big;
    let step = |op: &str, p: u32, o: usize, b: usize| {
        format!("{{\"op\":\"{op}\",\"peer\":{p},\"offset\":{o},\"bytes\":{b}}}")
    };
    format!(
        "{{\"version\":1,\"collective\":\"broadcast\",\"root\":0,\"nranks\":2,\"size_bytes\":{n},\"ranks\":[[{},{}],[{},{}]]}}",
        step("send", 1, 0, 4096),
        step("send", 1, 4096, big),
        step("recv", 0, 0, 4096),
        step("recv", 0, 4096, big)
    )
}

#[test]
fn a_rank_that_closes_first_does_not_reset_a_peer_still_reading() {
    // Rank 1 reads nothing for 1.2 s: its reader holds the first message
    // (max_unconsumed_bytes = 1), so most of the 1 MiB second message is
    // still in rank 0's send buffer when rank 0 finishes its op (the kernel
    // took it) and closes. Rank 1's heartbeats keep arriving at rank 0
    // meanwhile; a close that shuts down reading (or leaves bytes unread)
    // answers them with a TCP RST, which throws away what rank 0's kernel
    // had not sent yet: rank 1 then sees "connection reset" mid-message.
    // Rank 0's timeout (its close's linger) is well past rank 1's pause.
    let big = 1 << 20;
    let out = world(
        2,
        |c| {
            if c.rank == 0 {
                c.timeout = Duration::from_secs(5);
            } else {
                c.max_unconsumed_bytes = 1;
            }
        },
        move |r, c| {
            let mut c = c.unwrap();
            let p = Prepared::new(&two_message_broadcast(big), r).unwrap();
            let mut buf: Vec<u8> = if r == 0 {
                (0..4096 + big).map(|i| (i % 251) as u8).collect()
            } else {
                vec![0; 4096 + big]
            };
            if r == 1 {
                thread::sleep(Duration::from_millis(1200));
            }
            c.run(&p, &mut buf, DType::I32).map(|_| buf)
        },
    );
    let sent: Vec<u8> = (0..4096 + big).map(|i| (i % 251) as u8).collect();
    assert!(out[0].is_ok());
    match &out[1] {
        Ok(b) => assert!(b == &sent, "rank 1 received different bytes"),
        Err(e) => panic!("rank 1: {}", e.message),
    }
}
