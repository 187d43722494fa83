//! RoCE queue pairs (QPs) under DCQCN: the messages an application sends
//! on one QP share its reaction point and its receiver's notification
//! point, and go one after the other.
//!
//! A QP is named by (source host, destination host, source port, class):
//! the HPCC repository's `RdmaHw` finds a sender's QP by (destination,
//! UDP source port, priority group) on the sending NIC, and C4P's `qps`
//! groups name their QPs by source port. Only a message whose application
//! named its source port (`Message::src_port`) joins a QP; any other is a
//! QP of its own, as before.
//!
//! - **Rate** (Zhu et al., SIGCOMM'15, section 3; the HPCC repository's
//!   `RdmaQueuePair`): one DCQCN reaction point per QP, so a message starts
//!   at the rate the previous one left, with its alpha and timers.
//! - **CNPs** (section 3.2: at most one CNP per N = 50 us per flow): one
//!   notification point per QP at the receiver, across its messages.
//! - **Order**: a NIC serves a QP's work requests in order (the
//!   InfiniBand Architecture Specification, vol. 1: a send queue executes
//!   its work requests in the order they were posted). A message starts sending when the one
//!   before it has sent its last byte, from where that one's pacing left
//!   off; it does not wait for the acknowledgments. A message that had to
//!   go back after a timeout resends at the shared rate alongside its
//!   successor (under PFC nothing is lost and this does not arise).

use super::PacketNet;
use crate::engine::Ctx;
use crate::transport::dcqcn::{CnpPacer, DcqcnParams, DcqcnRp, SharedRp};
use crate::transport::{Dcqcn, SenderConfig, TcpReceiver, TcpSender};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// (source node, destination node, source port, class).
pub(super) type QpKey = (u32, u32, u16, u8);

struct Qp {
    rp: SharedRp,
    /// The receiver's notification point for this QP.
    np: CnpPacer,
    /// Where the pacing of the QP's last sending message left off.
    next_send_ps: u64,
    /// The message sending new data, if any.
    sending: Option<u32>,
    /// Messages posted behind it, in order.
    waiting: VecDeque<u32>,
    /// A message has started (a handshake, if any, opened the QP).
    opened: bool,
}

pub(super) struct Qps {
    params: DcqcnParams,
    index: HashMap<QpKey, u32>,
    qps: Vec<Qp>,
}

/// What a message posted on a QP does.
pub(super) struct Posted {
    pub qp: u32,
    pub rp: SharedRp,
    /// Start now, pacing from this time; None: wait for the messages before it.
    pub start_from_ps: Option<u64>,
    /// The QP is already open: no handshake.
    pub opened: bool,
}

impl Qps {
    pub fn new(params: DcqcnParams) -> Qps {
        Qps {
            params,
            index: HashMap::new(),
            qps: Vec::new(),
        }
    }

    /// DCQCN's parameters (the scenario's, or the defaults).
    pub fn params(&self) -> DcqcnParams {
        self.params
    }

    /// Posts message `msg` on QP `key` (opened at `line_bps` if new).
    pub fn post(&mut self, key: QpKey, msg: u32, line_bps: f64) -> Posted {
        let (qps, p) = (&mut self.qps, self.params);
        let q = *self.index.entry(key).or_insert_with(|| {
            qps.push(Qp {
                rp: Arc::new(Mutex::new(DcqcnRp::new(line_bps, p))),
                np: CnpPacer::default(),
                next_send_ps: 0,
                sending: None,
                waiting: VecDeque::new(),
                opened: false,
            });
            qps.len() as u32 - 1
        });
        let qp = &mut self.qps[q as usize];
        let opened = qp.opened;
        let start_from_ps = if qp.sending.is_none() {
            qp.sending = Some(msg);
            qp.opened = true;
            Some(qp.next_send_ps)
        } else {
            qp.waiting.push_back(msg);
            None
        };
        Posted {
            qp: q,
            rp: qp.rp.clone(),
            start_from_ps,
            opened,
        }
    }

    /// Message `msg` of QP `q` has sent all its bytes, its pacing next
    /// allowing a send at `next_send_ps`: the message to start next, if
    /// `msg` was the one sending and another waits.
    pub fn sent_all(&mut self, q: u32, msg: u32, next_send_ps: u64) -> Option<u32> {
        let qp = &mut self.qps[q as usize];
        if qp.sending != Some(msg) {
            return None;
        }
        qp.next_send_ps = next_send_ps;
        qp.sending = qp.waiting.pop_front();
        qp.sending
    }

    /// Whether a packet of QP `q` arriving at `now`, marked or not,
    /// triggers a CNP from its receiver.
    pub fn cnp(&mut self, q: u32, now: u64, marked: bool) -> bool {
        let interval = self.params.cnp_interval_ps;
        self.qps[q as usize].np.on_packet(now, marked, interval)
    }
}

/// The sender and receiver of a message posted on a QP: the sender holds
/// the QP's reaction point and, when it starts at once, continues the QP's
/// pacing; only the QP's first message opens it with a handshake (if the
/// transport has one). The receiver echoes marks unpaced: the QP's
/// notification point ([`Qps::cnp`]) paces its CNPs.
pub(super) fn message_ends(
    p: &Posted,
    size_bytes: u64,
    cfg: &SenderConfig,
) -> (TcpSender, TcpReceiver) {
    let cfg = SenderConfig {
        handshake: cfg.handshake && !p.opened,
        ..cfg.clone()
    };
    let mut sender = TcpSender::new(size_bytes, &cfg, Box::new(Dcqcn::on_qp(p.rp.clone())));
    if let Some(t) = p.start_from_ps {
        sender.pace_from(t);
    }
    (sender, TcpReceiver::new(size_bytes))
}

impl PacketNet {
    /// Message `msg` of QP `q` has sent its last byte: the next message
    /// posted on the QP starts, pacing from where `msg` left off.
    pub(super) fn qp_sent_all(&mut self, ctx: &mut Ctx, q: u32, msg: u32, next_send_ps: u64) {
        let Some(next) = self.qps.sent_all(q, msg, next_send_ps) else {
            return;
        };
        let conn = self.conns[next as usize]
            .as_deref_mut()
            .expect("a waiting message is live");
        conn.sender.pace_from(next_send_ps);
        self.poll_conn(ctx, next);
    }
}
