//! The software aggregator on real UDP packets (PANAMA section 6's
//! functional check), and a load generator of workers to measure it. The
//! only module of this crate that does I/O; the logic is [`crate::accel`]
//! and the format [`crate::wire`], the same the simulator uses.
//!
//! The aggregator is one switch at the root of every tree of its jobs: a
//! job lists its workers' UDP addresses, and worker i is input port i.
//! Each packet from a worker joins its tree's queue for that port; every
//! aggregated VID goes back to every worker of the job.

use crate::accel::{Accelerator, Counters, TreeConfig};
use crate::wire::{decode_packet, encode_packet, Header, ECN_ECT0};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Socket buffers asked for (the kernel's default of about 200 KB holds a
/// few hundred packets: too few for many workers' windows in flight).
pub const SOCKET_BUFFER_BYTES: i32 = 16 << 20;

/// Enlarges a socket's receive and send buffers: beyond the sysctl maximum
/// when privileged (SO_RCVBUFFORCE), else up to it. Best effort.
pub fn grow_buffers(sock: &UdpSocket) {
    use std::os::fd::AsRawFd;
    let fd = sock.as_raw_fd();
    let v = SOCKET_BUFFER_BYTES;
    let len = std::mem::size_of::<i32>() as libc::socklen_t;
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        // SAFETY: setsockopt on a live descriptor with a pointer to an i32 of the stated length.
        unsafe {
            if libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                force,
                &v as *const i32 as *const libc::c_void,
                len,
            ) != 0
            {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    plain,
                    &v as *const i32 as *const libc::c_void,
                    len,
                );
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct AggJob {
    pub job: u16,
    pub trees: u8,
    pub workers: Vec<SocketAddr>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct AggStats {
    pub packets_in: u64,
    pub packets_out: u64,
    /// Gradient bytes received (4 per float).
    pub gradient_bytes_in: u64,
    pub malformed: u64,
    /// From the first packet received to the last one sent.
    pub busy: Duration,
    pub counters: Counters,
}

/// Serves until `stop` is set, or `idle` passes without a packet (from the start, too).
pub fn serve(
    sock: &UdpSocket,
    jobs: &[AggJob],
    memory_bytes: u64,
    idle: Duration,
    stop: &AtomicBool,
) -> std::io::Result<AggStats> {
    let invalid = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, m);
    for (i, j) in jobs.iter().enumerate() {
        if jobs[..i].iter().any(|k| k.job == j.job) {
            return Err(invalid(format!("jobs[{i}]: job {} is listed twice", j.job)));
        }
        if let Some(w) = j
            .workers
            .iter()
            .enumerate()
            .find(|(k, w)| j.workers[..*k].contains(w))
        {
            return Err(invalid(format!(
                "jobs[{i}].workers[{}]: {} is listed twice",
                w.0, w.1
            )));
        }
    }
    let mut acc: Accelerator<Vec<f32>> = Accelerator::new(memory_bytes);
    let mut port_of: HashMap<(u16, SocketAddr), u32> = HashMap::new();
    let mut workers_of: HashMap<u16, Vec<SocketAddr>> = HashMap::new();
    for j in jobs {
        for (i, w) in j.workers.iter().enumerate() {
            port_of.insert((j.job, *w), i as u32);
        }
        for t in 0..j.trees {
            let children = (0..j.workers.len() as u32).map(|p| (p, 1)).collect();
            acc.configure(TreeConfig {
                job: j.job,
                tree: t,
                children,
                parent: None,
                sync_fraction: 1.0,
            })
            .map_err(invalid)?;
        }
        workers_of.insert(j.job, j.workers.clone());
    }
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    grow_buffers(sock);
    let mut st = AggStats::default();
    let mut buf = vec![0u8; 65536];
    let mut enc = Vec::with_capacity(65536);
    let mut out = Vec::new();
    let (mut first, mut last_in, mut last_out) = (None::<Instant>, Instant::now(), Instant::now());
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if last_in.elapsed() >= idle {
                    break;
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        last_in = Instant::now();
        first.get_or_insert(last_in);
        let Ok((h, v)) = decode_packet(&buf[..n]) else {
            st.malformed += 1;
            continue;
        };
        let Some(&port) = port_of.get(&(h.job, from)) else {
            st.malformed += 1;
            continue;
        };
        st.packets_in += 1;
        st.gradient_bytes_in += 4 * v.len() as u64;
        acc.on_packet(port, h, v, &mut out);
        // A result goes to every worker with one header and vector: encode it once.
        for i in 0..out.len() {
            let (p, h, v) = &out[i];
            if i == 0 || out[i - 1].1 != *h || out[i - 1].2 != *v {
                encode_packet(h, v, &mut enc);
            }
            sock.send_to(&enc, workers_of[&h.job][*p as usize])?;
            st.packets_out += 1;
            last_out = Instant::now();
        }
        out.clear();
    }
    st.busy = first.map_or(Duration::ZERO, |f| last_out.saturating_duration_since(f));
    st.counters = acc.counters;
    Ok(st)
}

/// The value of element `i` of worker `rank`'s vector for `vid` in the load
/// generator: small integers, so every sum is exact in float32 whatever the order.
pub fn load_value(rank: usize, tree: u8, vid: u32, i: usize) -> f32 {
    ((rank * 31 + tree as usize * 5 + vid as usize * 7 + i) % 17) as f32
}

#[derive(Debug, Clone, Copy, Default)]
pub struct WorkerStats {
    pub packets: u64,
    pub results: u64,
    pub wrong: u64,
    pub timeouts: u64,
    pub elapsed: Duration,
}

/// One worker of the load generator: `packets` packets of `count` floats,
/// sprayed round-robin over `trees` trees (packet k to tree k mod trees),
/// at most `window` outstanding per tree, each result checked against the
/// exact sum over `n` workers. Gives up after `timeout` without a result.
#[allow(clippy::too_many_arguments)]
pub fn load_worker(
    sock: &UdpSocket,
    agg: SocketAddr,
    job: u16,
    rank: usize,
    n: usize,
    trees: u8,
    packets: u64,
    count: u16,
    window: u32,
    timeout: Duration,
) -> std::io::Result<WorkerStats> {
    let t_n = trees.max(1) as u64;
    let per_tree: Vec<u64> = (0..t_n)
        .map(|t| packets / t_n + (t < packets % t_n) as u64)
        .collect();
    let mut next = vec![0u32; t_n as usize];
    let mut una = vec![0u32; t_n as usize];
    let mut st = WorkerStats::default();
    let (mut buf, mut enc) = (vec![0u8; 65536], Vec::with_capacity(65536));
    let mut v = vec![0f32; count as usize];
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    grow_buffers(sock);
    let start = Instant::now();
    let mut last = Instant::now();
    let mut k = 0u64;
    while st.results < packets {
        // Send round-robin while some tree has room (tree of packet k is k mod trees).
        while k < packets {
            let t = (k % t_n) as usize;
            if next[t] - una[t] >= window {
                break;
            }
            let vid = next[t];
            for (i, x) in v.iter_mut().enumerate() {
                *x = load_value(rank, t as u8, vid, i);
            }
            let fin = vid as u64 + 1 == per_tree[t];
            let h = Header {
                job,
                tree: t as u8,
                vid,
                fin,
                count,
                workers: 1,
                ecn: ECN_ECT0,
                cwnd_cap: u16::MAX,
                ..Default::default()
            };
            encode_packet(&h, &v, &mut enc);
            sock.send_to(&enc, agg)?;
            next[t] += 1;
            st.packets += 1;
            k += 1;
        }
        match sock.recv_from(&mut buf) {
            Ok((len, _)) => {
                let (h, r) = decode_packet(&buf[..len]).map_err(|e| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
                })?;
                let t = h.tree as usize;
                if t >= una.len() || h.vid < una[t] || !h.result {
                    continue;
                }
                una[t] = h.vid + 1;
                st.results += 1;
                last = Instant::now();
                let bad = r.iter().enumerate().any(|(i, &x)| {
                    x != (0..n).map(|w| load_value(w, h.tree, h.vid, i)).sum::<f32>()
                });
                st.wrong += bad as u64;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if last.elapsed() >= timeout {
                    st.timeouts += 1;
                    break;
                }
            }
            Err(e) => return Err(e),
        }
    }
    st.elapsed = start.elapsed();
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Three workers on loopback, two trees: every result is the exact sum.
    #[test]
    fn loopback_aggregation_is_exact() {
        let agg = UdpSocket::bind("127.0.0.1:0").unwrap();
        let socks: Vec<UdpSocket> = (0..3)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let job = AggJob {
            job: 7,
            trees: 2,
            workers: socks.iter().map(|s| s.local_addr().unwrap()).collect(),
        };
        let addr = agg.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let server = std::thread::spawn(move || {
            serve(&agg, &[job], 1 << 20, Duration::from_secs(5), &s2).unwrap()
        });
        let workers: Vec<_> = socks
            .into_iter()
            .enumerate()
            .map(|(r, s)| {
                std::thread::spawn(move || {
                    load_worker(&s, addr, 7, r, 3, 2, 101, 64, 4, Duration::from_secs(5)).unwrap()
                })
            })
            .collect();
        for w in workers {
            let st = w.join().unwrap();
            assert_eq!(
                (st.packets, st.results, st.wrong, st.timeouts),
                (101, 101, 0, 0)
            );
        }
        stop.store(true, Ordering::Relaxed);
        let st = server.join().unwrap();
        // 101 packets from each of 3 workers in; one result per VID to each worker out.
        assert_eq!(
            (st.packets_in, st.packets_out, st.counters.aggregated),
            (303, 303, 101)
        );
        assert_eq!(st.gradient_bytes_in, 303 * 64 * 4);
    }
}
