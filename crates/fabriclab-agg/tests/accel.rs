//! The accelerator and the window, against hand-worked cases.

use fabriclab_agg::accel::{Accelerator, NoValues, TreeConfig, Verdict};
use fabriclab_agg::cc::TreeWindow;
use fabriclab_agg::wire::{Header, ECN_ECT0};

fn up(job: u16, tree: u8, vid: u32, count: u16) -> Header {
    Header {
        job,
        tree,
        vid,
        count,
        workers: 1,
        ecn: ECN_ECT0,
        cwnd_cap: u16::MAX,
        ..Default::default()
    }
}

fn tree(children: &[(u32, u16)], parent: Option<u32>, f: f64) -> TreeConfig {
    TreeConfig {
        job: 1,
        tree: 0,
        children: children.to_vec(),
        parent,
        sync_fraction: f,
    }
}

/// Two-level tree: two leaf switches of two workers each, one root; sums
/// checked against the same additions done by hand in the same order.
#[test]
fn two_levels_sum_in_port_order_and_return_to_every_worker() {
    let mut leaf0: Accelerator<Vec<f32>> = Accelerator::new(1 << 20);
    let mut leaf1: Accelerator<Vec<f32>> = Accelerator::new(1 << 20);
    let mut root: Accelerator<Vec<f32>> = Accelerator::new(1 << 20);
    // Leaves: ports 0 and 1 to workers, port 9 up. Root: ports 0 and 1 to the leaves.
    leaf0
        .configure(tree(&[(0, 1), (1, 1)], Some(9), 1.0))
        .unwrap();
    leaf1
        .configure(tree(&[(0, 1), (1, 1)], Some(9), 1.0))
        .unwrap();
    root.configure(tree(&[(0, 2), (1, 2)], None, 1.0)).unwrap();
    let w = [
        vec![0.1f32, 1e8],
        vec![0.2, 1.0],
        vec![0.3, -1e8],
        vec![0.4, 1.0],
    ];
    let mut out = Vec::new();
    assert_eq!(
        leaf0.on_packet(0, up(1, 0, 0, 2), w[0].clone(), &mut out),
        Verdict::Taken
    );
    assert!(out.is_empty(), "one of two ports has the VID: wait");
    leaf0.on_packet(1, up(1, 0, 0, 2), w[1].clone(), &mut out);
    leaf1.on_packet(1, up(1, 0, 0, 2), w[3].clone(), &mut out);
    leaf1.on_packet(0, up(1, 0, 0, 2), w[2].clone(), &mut out);
    assert_eq!(out.len(), 2);
    let (p0, h0, v0) = out.remove(0);
    let (p1, h1, v1) = out.remove(0);
    assert_eq!((p0, p1, h0.workers, h1.workers), (9, 9, 2, 2));
    // leaf1 sums port 0 (worker 2) then port 1 (worker 3), whatever the arrival order.
    assert_eq!(v1, vec![0.3f32 + 0.4, -1e8f32 + 1.0]);
    root.on_packet(0, h0, v0, &mut out);
    root.on_packet(1, h1, v1, &mut out);
    let expect = vec![
        (0.1f32 + 0.2) + (0.3f32 + 0.4),
        (1e8f32 + 1.0) + (-1e8f32 + 1.0),
    ];
    assert_eq!(out.len(), 2);
    for (i, (port, h, v)) in out.drain(..).enumerate() {
        assert_eq!((port, h.result, h.workers, h.vid), (i as u32, true, 4, 0));
        assert_eq!(v, expect);
        // Down through the leaf: a copy to each of its workers.
        let mut down = Vec::new();
        let leaf = if i == 0 { &mut leaf0 } else { &mut leaf1 };
        leaf.on_packet(9, h, v, &mut down);
        assert_eq!(down.iter().map(|d| d.0).collect::<Vec<_>>(), vec![0, 1]);
        assert!(down.iter().all(|d| d.2 == expect));
    }
    // One packet per VID per tree edge each way: leaves got 2 up + 1 down, sent 1 up + 2 down.
    assert_eq!(
        (
            leaf0.counters.received,
            leaf0.counters.results_sent,
            leaf0.counters.aggregated
        ),
        (3, 3, 1)
    );
    assert_eq!(root.expected_vid(1, 0), Some(1));
    assert_eq!(leaf0.used_bytes() + root.used_bytes(), 0);
}

#[test]
fn a_lost_contribution_skips_its_vid_and_fin_resets() {
    let mut a: Accelerator<NoValues> = Accelerator::new(1 << 20);
    a.configure(tree(&[(0, 1), (1, 1), (2, 1)], Some(7), 1.0))
        .unwrap();
    let mut out = Vec::new();
    // VID 0 from ports 0 and 1; port 2's VID 0 is lost and its VID 1 arrives.
    a.on_packet(0, up(1, 0, 0, 8), NoValues, &mut out);
    a.on_packet(1, up(1, 0, 0, 8), NoValues, &mut out);
    a.on_packet(2, up(1, 0, 1, 8), NoValues, &mut out);
    assert!(out.is_empty());
    assert_eq!((a.counters.skipped, a.expected_vid(1, 0)), (1, Some(1)));
    // VID 1 from the others completes it; port 2's VID 0 arriving late is stale.
    a.on_packet(0, up(1, 0, 1, 8), NoValues, &mut out);
    let fin = Header {
        fin: true,
        ..up(1, 0, 1, 8)
    };
    a.on_packet(1, fin, NoValues, &mut out);
    assert_eq!(out.len(), 1);
    assert!(out[0].1.fin && out[0].1.vid == 1);
    assert_eq!(a.expected_vid(1, 0), Some(0), "FIN resets the expected VID");
    a.on_packet(2, up(1, 0, 0, 8), NoValues, &mut out);
    assert_eq!(
        a.counters.stale, 0,
        "after the reset VID 0 is the next round's"
    );
    assert_eq!(a.used_bytes(), up(1, 0, 0, 8).payload_bytes() as u64);
}

#[test]
fn partial_sync_aggregates_at_the_fraction_and_drops_stragglers() {
    // 25 workers behind 25 ports, PANAMA-0.88: ceil(0.88 x 25) = 22 contributions.
    let mut a: Accelerator<Vec<f32>> = Accelerator::new(1 << 20);
    let ports: Vec<(u32, u16)> = (0..25).map(|p| (p, 1)).collect();
    a.configure(tree(&ports, None, 0.88)).unwrap();
    let mut out = Vec::new();
    for p in 0..21 {
        a.on_packet(p, up(1, 0, 0, 1), vec![1.0], &mut out);
    }
    assert!(out.is_empty());
    a.on_packet(21, up(1, 0, 0, 1), vec![1.0], &mut out);
    assert_eq!(out.len(), 25);
    assert!(out.iter().all(|o| o.2 == vec![22.0] && o.1.workers == 22));
    for p in 22..25 {
        a.on_packet(p, up(1, 0, 0, 1), vec![1.0], &mut out);
    }
    assert_eq!((a.counters.stale, out.len()), (3, 25));
}

#[test]
fn buffer_share_bounds_the_queue_and_caps_the_window() {
    // Each packet: 16 + 4 x 100 = 416 bytes. Two jobs share 4160 bytes: 2080 each = 5 packets.
    let mut a: Accelerator<NoValues> = Accelerator::new(4160);
    a.configure(tree(&[(0, 1), (1, 1)], Some(5), 1.0)).unwrap();
    a.configure(TreeConfig {
        job: 2,
        ..tree(&[(2, 1), (3, 1)], Some(5), 1.0)
    })
    .unwrap();
    assert_eq!(a.share_bytes(), 2080);
    let mut out = Vec::new();
    for vid in 0..4 {
        a.on_packet(0, up(1, 0, vid, 100), NoValues, &mut out);
    }
    assert_eq!(a.job_used_bytes(1), 4 * 416);
    // Port 1's VID 0 (the share's 5th packet) completes VID 0. cwnd_cap: the share's
    // 5 packets over 2 input ports and 1 tree = 2 (whole packets).
    a.on_packet(1, up(1, 0, 0, 100), NoValues, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1.cwnd_cap, 2);
    // Two more fit; the third would exceed the share and is dropped.
    for vid in 4..7 {
        a.on_packet(0, up(1, 0, vid, 100), NoValues, &mut out);
    }
    assert_eq!((a.counters.overflow, a.job_used_bytes(1)), (1, 5 * 416));
    assert_eq!(a.job_used_bytes(2), 0);
}

#[test]
fn bad_configurations_are_refused() {
    let mut a: Accelerator<NoValues> = Accelerator::new(1000);
    assert!(a
        .configure(tree(&[], None, 1.0))
        .unwrap_err()
        .contains("no input ports"));
    assert!(a
        .configure(tree(&[(0, 1)], None, 0.0))
        .unwrap_err()
        .contains("sync_fraction must be within (0, 1]"));
    assert!(a
        .configure(tree(&[(0, 1)], None, 1.5))
        .unwrap_err()
        .contains("(0, 1]"));
    assert!(a
        .configure(tree(&[(0, 1), (0, 1)], None, 1.0))
        .unwrap_err()
        .contains("listed twice"));
    assert!(a
        .configure(tree(&[(0, 1)], Some(0), 1.0))
        .unwrap_err()
        .contains("both an input"));
    let mut out = Vec::new();
    assert_eq!(
        a.on_packet(0, up(3, 0, 0, 1), NoValues, &mut out),
        Verdict::NotMine
    );
}

/// DCTCP's window on results, played by hand (g = 1/2, alpha from 1, initial window 2).
#[test]
fn window_grows_and_cuts_by_half_alpha_once_per_window() {
    let mut w = TreeWindow::new(2.0, 0.5, 1.0);
    assert_eq!((w.on_send(), w.on_send()), (0, 1));
    assert!(!w.can_send());
    // Result 0, unmarked: end of the first observation window (una 1 > window_end 0):
    // alpha = 0.5 x 1 + 0.5 x 0/1 = 0.5; slow start: cwnd 3.
    assert!(w.on_result(0, false, 100));
    assert_eq!((w.alpha, w.cwnd), (0.5, 3.0));
    w.on_send();
    w.on_send();
    // Result 1, unmarked: una 2 <= window_end 2, no alpha update; cwnd 4.
    assert!(w.on_result(1, false, 100));
    assert_eq!((w.alpha, w.cwnd), (0.5, 4.0));
    w.on_send();
    w.on_send();
    // Result 2 marked: window 3 ends (una 3 > 2): alpha = 0.25 + 0.5 x 1/2 = 0.5; cut: 4 x (1 - 0.25) = 3.
    assert!(w.on_result(2, true, 100));
    assert_eq!((w.alpha, w.cwnd, w.ssthresh), (0.5, 3.0, 3.0));
    // Result 3 marked, within the same window of data (una 4 <= cwr_end 6): no second cut.
    assert!(w.on_result(3, true, 100));
    assert_eq!(w.cwnd, 3.0);
    // Result 4 unmarked: congestion avoidance, cwnd 3 + 1/3; the cap of 2 then bounds it.
    assert!(w.on_result(4, false, 2));
    assert_eq!((w.cwnd, w.window()), (2.0, 2));
    assert!(!w.on_result(4, false, 2), "a duplicate changes nothing");
    // VID 5 (sent with 4) never gets its result: given up, not sent again.
    assert_eq!(w.on_timeout(), 1);
    assert_eq!((w.cwnd, w.una, w.next_vid, w.ssthresh), (1.0, 6, 6, 2.0));
    assert!(
        !w.on_result(5, false, 2),
        "a late result of a given-up VID changes nothing"
    );
    assert_eq!((w.on_send(), w.on_send()), (6, 7));
    assert_eq!(w.on_timeout(), 2);
    assert_eq!((w.una, w.next_vid, w.in_flight()), (8, 8, 0));
}

/// Partial sync over rounds: the FIN VID aggregates without the stragglers,
/// whose late packets of the old round must not join the next round.
#[test]
fn stragglers_of_a_finished_round_are_dropped_not_carried_over() {
    let mut a: Accelerator<Vec<f32>> = Accelerator::new(1 << 20);
    // 4 workers, 0.75: 3 contributions aggregate.
    a.configure(tree(&[(0, 1), (1, 1), (2, 1), (3, 1)], None, 0.75))
        .unwrap();
    let mut out = Vec::new();
    let fin = |vid| Header {
        fin: true,
        ..up(1, 0, vid, 1)
    };
    // Round 1 is VIDs 0 and 1 (FIN). Port 3 lags: nothing from it yet.
    for p in 0..3 {
        a.on_packet(p, up(1, 0, 0, 1), vec![1.0], &mut out);
    }
    for p in 0..3 {
        a.on_packet(p, fin(1), vec![10.0], &mut out);
    }
    // Both VIDs of round 1 went down to the 4 ports; the tree is back at VID 0.
    assert_eq!(out.len(), 8);
    assert!(out[4..].iter().all(|o| o.1.fin && o.2 == vec![30.0]));
    assert_eq!(a.expected_vid(1, 0), Some(0));
    out.clear();
    // Round 2 starts on ports 0-2 (VID 0 = 100 each); port 3's old VIDs 0 and 1 (FIN) arrive late.
    for p in 0..3 {
        a.on_packet(p, up(1, 0, 0, 1), vec![100.0], &mut out);
    }
    assert_eq!(out.len(), 4);
    assert!(
        out.iter().all(|o| o.2 == vec![300.0]),
        "round 2's VID 0 sums round 2 only"
    );
    out.clear();
    a.on_packet(3, up(1, 0, 0, 1), vec![1.0], &mut out);
    a.on_packet(3, fin(1), vec![10.0], &mut out);
    assert!(out.is_empty());
    assert_eq!(a.counters.stale, 2);
    // Port 3 is back in step: its round-2 VID 1 counts.
    for p in [3, 0, 1] {
        a.on_packet(p, up(1, 0, 1, 1), vec![1000.0], &mut out);
    }
    assert_eq!(out.len(), 4);
    assert!(out.iter().all(|o| o.2 == vec![3000.0] && o.1.vid == 1));
}

#[test]
fn a_vid_beyond_the_horizon_is_refused_and_lengths_must_agree() {
    let mut a: Accelerator<Vec<f32>> = Accelerator::new(1 << 20);
    a.configure(tree(&[(0, 1), (1, 1)], None, 1.0)).unwrap();
    let mut out = Vec::new();
    // A garbage VID neither stalls nor skips the tree.
    a.on_packet(0, up(1, 0, 0x7FFF_FFFF, 1), vec![1.0], &mut out);
    assert_eq!(
        (a.counters.unknown, a.counters.skipped, a.expected_vid(1, 0)),
        (1, 0, Some(0))
    );
    // VID 0 with 2 floats from port 0 and 1 float from port 1: not summed, skipped.
    a.on_packet(0, up(1, 0, 0, 2), vec![1.0, 2.0], &mut out);
    a.on_packet(1, up(1, 0, 0, 1), vec![1.0], &mut out);
    assert!(out.is_empty());
    assert_eq!(
        (
            a.counters.mismatched,
            a.counters.skipped,
            a.expected_vid(1, 0)
        ),
        (1, 1, Some(1))
    );
    assert_eq!(a.used_bytes(), 0);
}

#[test]
fn reconfiguring_a_tree_frees_what_it_held() {
    let mut a: Accelerator<NoValues> = Accelerator::new(1 << 20);
    a.configure(tree(&[(0, 1), (1, 1)], None, 1.0)).unwrap();
    let mut out = Vec::new();
    a.on_packet(0, up(1, 0, 0, 10), NoValues, &mut out);
    assert_eq!(a.job_used_bytes(1), 56);
    a.configure(tree(&[(0, 1), (1, 1)], None, 1.0)).unwrap();
    assert_eq!(a.job_used_bytes(1), 0);
}

/// A result acknowledging several VIDs at once counts each of them (RFC 8257 counts bytes).
#[test]
fn a_cumulative_result_counts_every_vid_it_acknowledges() {
    let mut w = TreeWindow::new(4.0, 0.5, 0.0);
    for _ in 0..4 {
        w.on_send();
    }
    // Result 0 unmarked closes the first observation window: alpha = 0.
    assert!(w.on_result(0, false, 100));
    assert_eq!(w.alpha, 0.0);
    // Results 1 and 2 were lost; result 3 (marked) acknowledges VIDs 1, 2, 3: window ends
    // (una 4 > window_end 4? no: window_end = next_vid = 4 after result 0, una 4 is not > 4).
    assert!(w.on_result(3, true, 100));
    assert_eq!(w.alpha, 0.0);
    for _ in 0..2 {
        w.on_send();
    }
    // Result 4 unmarked: una 5 > 4 ends the window holding 4 acknowledged VIDs, 3 marked:
    // alpha = 0.5 x 0 + 0.5 x 3/4 = 0.375.
    assert!(w.on_result(4, false, 100));
    assert_eq!(w.alpha, 0.375);
}
