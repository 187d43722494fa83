//! Reading plan documents: the docs/plans.md example and what the format forbids.

use fabriclab_plan::{Collective, Hop, Op, Plan, PlanGraph};

const EXAMPLE: &str = r#"{
  "version": 1, "collective": "allreduce", "nranks": 2, "size_bytes": 10, "root": null,
  "algorithm": "hand-made", "meta": {},
  "ranks": [
    [ {"op": "send", "peer": 1, "offset": 0, "bytes": 10, "path": ["gpu0", 4, "gpu1"]},
      {"op": "recv", "peer": 1, "offset": 0, "bytes": 10, "reduce": true, "deps": [0]} ],
    [ {"op": "send", "peer": 0, "offset": 0, "bytes": 10},
      {"op": "recv", "peer": 0, "offset": 0, "bytes": 10, "reduce": true, "deps": [0]} ]
  ]
}"#;

#[test]
fn reads_the_documented_example() {
    let p = Plan::from_json(EXAMPLE).unwrap();
    assert_eq!(p.collective, Collective::Allreduce);
    assert_eq!((p.nranks, p.size_bytes, p.root), (2, 10, None));
    assert_eq!(p.ranks[0][1].op, Op::Recv);
    assert!(p.ranks[0][1].reduce && p.ranks[0][1].deps == vec![0]);
    let path = p.ranks[0][0].path.as_ref().unwrap();
    assert_eq!(
        path,
        &vec![
            Hop::Name("gpu0".into()),
            Hop::Node(4),
            Hop::Name("gpu1".into())
        ]
    );
    assert_eq!(path[1].node(), Some(4));
    assert_eq!(path[0].node(), None);
    let g = PlanGraph::new("example", p.ranks).unwrap();
    assert_eq!(g.num_ranks(), 2);
}

/// A 2-rank alltoall: each rank sends its block 1-r and receives the
/// other's block r into it, at another offset than the send read.
const ALLTOALL: &str = r#"{
  "version": 1, "collective": "alltoall", "nranks": 2, "size_bytes": 8, "root": null,
  "algorithm": "direct", "meta": {},
  "ranks": [
    [ {"op": "send", "peer": 1, "offset": 4, "bytes": 4},
      {"op": "recv", "peer": 1, "offset": 4, "bytes": 4, "reduce": false, "deps": [0]} ],
    [ {"op": "send", "peer": 0, "offset": 0, "bytes": 4},
      {"op": "recv", "peer": 0, "offset": 0, "bytes": 4, "reduce": false, "deps": [0]} ]
  ]
}"#;

#[test]
fn reads_an_alltoall() {
    let p = Plan::read_checked(ALLTOALL).unwrap();
    assert_eq!(p.collective, Collective::Alltoall);
    assert_eq!(p.collective.name(), "alltoall");
    assert!(!p.collective.rooted());
}

fn err(text: &str) -> String {
    Plan::from_json(text).unwrap_err()
}

#[test]
fn refuses_what_the_format_forbids() {
    assert!(err(&EXAMPLE.replace("\"version\": 1", "\"version\": 2")).contains("expected 1, got 2"));
    assert!(err(&EXAMPLE.replace("\"nranks\": 2", "\"nranks\": 3"))
        .contains("nranks is 3 but ranks lists 2"));
    assert!(
        err(&EXAMPLE.replace("\"size_bytes\": 10", "\"size_bytes\": 8"))
            .contains("outside the buffer of 8 bytes")
    );
    assert!(
        err(&EXAMPLE.replace("\"allreduce\"", "\"broadcast\"")).contains("broadcast needs a root")
    );
    let rooted = EXAMPLE
        .replace("\"allreduce\"", "\"reduce\"")
        .replace("\"root\": null", "\"root\": 2");
    assert!(err(&rooted).contains("root 2 is not a rank"));
    assert!(err(&EXAMPLE.replace("\"algorithm\"", "\"algo\"")).contains("unknown field `algo`"));
    assert!(err(&EXAMPLE.replace("\"allreduce\"", "\"alltoallv\""))
        .contains("unknown variant `alltoallv`"));
    // An alltoall's buffer is nranks equal blocks, moved without reduction.
    let a2a = EXAMPLE.replace("\"allreduce\"", "\"alltoall\"");
    assert!(err(&a2a).contains("rank 0 step 1: an alltoall does not reduce"));
    let odd = a2a
        .replace("\"reduce\": true", "\"reduce\": false")
        .replace("\"size_bytes\": 10", "\"size_bytes\": 11");
    assert!(err(&odd).contains("size_bytes 11 does not split into nranks (2) equal blocks"));
    // An offset near u64::MAX must not wrap around the range check.
    let wrap = EXAMPLE.replacen(
        "\"offset\": 0, \"bytes\": 10, \"path\"",
        "\"offset\": 18446744073709551615, \"bytes\": 10, \"path\"",
        1,
    );
    assert!(err(&wrap).contains("outside the buffer"));
}
