//! A plan's step graph and one run through it, driven by hand.

use fabriclab_plan::{Action, Op, PlanGraph, PlanRun, Step};

fn step(op: Op, peer: u32, bytes: u64, reduce: bool, deps: Vec<u32>) -> Step {
    Step {
        op,
        peer,
        offset: 0,
        bytes,
        reduce,
        deps,
        path: None,
    }
}

fn sends_and_reduces(out: &[Action]) -> Vec<Action> {
    out.iter()
        .copied()
        .filter(|a| !matches!(a, Action::Started { .. } | Action::Completed { .. }))
        .collect()
}

#[test]
fn exchange_then_reduce_runs_in_dependency_order() {
    // Two ranks swap halves: each sends, receives with a reduction, then
    // (after the reduction) sends once more, which the other copies in.
    let rank = |peer| {
        vec![
            step(Op::Send, peer, 10, false, vec![]),
            step(Op::Recv, peer, 10, true, vec![]),
            step(Op::Send, peer, 10, false, vec![1]),
            step(Op::Recv, peer, 10, false, vec![1]),
        ]
    };
    let g = PlanGraph::new("t", vec![rank(1), rank(0)]).unwrap();
    let mut out = Vec::new();
    let mut run = PlanRun::start(&g, &mut out);
    // Both first sends start; both receives wait for data.
    assert_eq!(
        sends_and_reduces(&out),
        vec![
            Action::Send { rank: 0, step: 0 },
            Action::Send { rank: 1, step: 0 }
        ]
    );
    out.clear();
    // Rank 0's first message arrives at rank 1: rank 1 reduces it.
    run.delivered(&g, 0, 0, &mut out);
    assert_eq!(
        sends_and_reduces(&out),
        vec![Action::Reduce { rank: 1, step: 1 }]
    );
    out.clear();
    run.reduced(&g, 1, 1, &mut out);
    // The reduction releases rank 1's second send and its last receive.
    assert_eq!(
        sends_and_reduces(&out),
        vec![Action::Send { rank: 1, step: 2 }]
    );
    out.clear();
    run.delivered(&g, 1, 0, &mut out);
    run.reduced(&g, 0, 1, &mut out);
    run.delivered(&g, 0, 2, &mut out); // copied in at rank 1: no reduction
    assert!(!out.contains(&Action::RankDone { rank: 1 })); // its own second send is still in flight
    out.clear();
    run.delivered(&g, 1, 2, &mut out);
    assert_eq!(
        sends_and_reduces(&out),
        vec![Action::RankDone { rank: 0 }, Action::RankDone { rank: 1 }]
    );
}

#[test]
fn a_rank_is_done_once_when_its_last_receive_completes_inside_a_send() {
    // Each rank sends, then receives (in place: after its own send). Rank 1's
    // message arrives first, before rank 0's receive has started; when rank
    // 0's send completes, that receive starts and completes at once: rank 0
    // is done exactly once.
    let rank = |peer| {
        vec![
            step(Op::Send, peer, 10, false, vec![]),
            step(Op::Recv, peer, 10, false, vec![0]),
        ]
    };
    let g = PlanGraph::new("t", vec![rank(1), rank(0)]).unwrap();
    let mut out = Vec::new();
    let mut run = PlanRun::start(&g, &mut out);
    run.delivered(&g, 1, 0, &mut out);
    run.delivered(&g, 0, 0, &mut out);
    let done = |r| {
        out.iter()
            .filter(|a| **a == Action::RankDone { rank: r })
            .count()
    };
    assert_eq!((done(0), done(1)), (1, 1));
}

#[test]
fn unmatched_messages_and_bad_dependencies_are_refused() {
    let e =
        PlanGraph::new("t", vec![vec![step(Op::Send, 1, 5, false, vec![])], vec![]]).unwrap_err();
    assert!(
        e.contains("rank 0 sends 1 messages to rank 1, which receives 0"),
        "{e}"
    );
    let e = PlanGraph::new(
        "t",
        vec![
            vec![step(Op::Send, 1, 5, false, vec![0])],
            vec![step(Op::Recv, 0, 5, false, vec![])],
        ],
    )
    .unwrap_err();
    assert!(e.contains("dependency 0 is not an earlier step"), "{e}");
    let e = PlanGraph::new("t", vec![vec![step(Op::Send, 0, 5, false, vec![])]]).unwrap_err();
    assert!(e.contains("is not another rank"), "{e}");
}
