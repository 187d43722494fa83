//! Sends lend the buffer's range instead of copying it (`conn::Body`): a
//! send must still carry the bytes its range held when it started, when
//! the executor writes into that range before the send is done.

use fabriclab_runtime::{Communicator, Config, DType, Prepared};
use std::thread;
use std::time::Duration;

mod common;
use common::free_port;

const S: usize = 16 << 20;

/// Rank 0 sends a 4-byte message, then its range [0, S), and receives rank
/// 1's [0, S) into the same range with no dependency on its own send. Rank
/// 1's reader may hold one unconsumed message only, and rank 1 consumes the
/// 4-byte one only after its own send of [0, S) is done: so rank 0's send
/// is still in flight (its socket full, rank 1 not reading) when rank 0
/// writes rank 1's bytes into the range it lent.
fn plan() -> String {
    let r0 = format!(
        "[{{\"op\":\"send\",\"peer\":1,\"offset\":{S},\"bytes\":4}},\
         {{\"op\":\"send\",\"peer\":1,\"offset\":0,\"bytes\":{S}}},\
         {{\"op\":\"recv\",\"peer\":1,\"offset\":0,\"bytes\":{S},\"reduce\":false}}]"
    );
    let r1 = format!(
        "[{{\"op\":\"send\",\"peer\":0,\"offset\":0,\"bytes\":{S}}},\
         {{\"op\":\"recv\",\"peer\":0,\"offset\":{S},\"bytes\":4,\"reduce\":false,\"deps\":[0]}},\
         {{\"op\":\"recv\",\"peer\":0,\"offset\":0,\"bytes\":{S},\"reduce\":false,\"deps\":[0]}}]"
    );
    format!(
        "{{\"version\":1,\"collective\":\"alltoall\",\"nranks\":2,\"size_bytes\":{},\"ranks\":[{r0},{r1}]}}",
        S + 4
    )
}

/// Rank r's input: byte i is (i * 7 + r * 101) mod 251.
fn input(r: usize) -> Vec<u8> {
    (0..S + 4)
        .map(|i| ((i * 7 + r * 101) % 251) as u8)
        .collect()
}

#[test]
fn a_range_written_while_its_send_is_in_flight_is_sent_as_it_was() {
    for checksum in [false, true] {
        let port = free_port();
        let hs: Vec<_> = (0..2u32)
            .map(|r| {
                thread::spawn(move || {
                    let mut c = Config::new(r, 2, "127.0.0.1", port, "secret");
                    c.checksum = checksum;
                    c.timeout = Duration::from_secs(5);
                    c.connect_timeout = Duration::from_secs(10);
                    if r == 1 {
                        c.max_unconsumed_bytes = 1;
                    }
                    let mut comm = Communicator::new(c).unwrap();
                    let p = Prepared::new(&plan(), r).unwrap();
                    let mut buf = input(r as usize);
                    comm.run(&p, &mut buf, DType::I32).unwrap();
                    buf
                })
            })
            .collect();
        let out: Vec<Vec<u8>> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        let (a, b) = (input(0), input(1));
        // an exchange of [0, S); the 4 bytes after it went from rank 0 to 1
        assert!(
            out[0][..S] == b[..S],
            "rank 0 got rank 1's range (checksum {checksum})"
        );
        assert!(
            out[1][..S] == a[..S],
            "rank 1 got rank 0's range as it was before rank 0 overwrote it (checksum {checksum})"
        );
        assert_eq!(&out[0][S..], &a[S..]);
        assert_eq!(&out[1][S..], &a[S..]);
    }
}
