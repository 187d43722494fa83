//! RoCE queue pairs (QPs) under DCQCN: the messages an application sends
//! on one QP share its reaction point and its receiver's notification
//! point, and go one after the other.
//!
//! A QP is named by (source host, destination host, the application's QP
//! identity, class): an app that opens QPs names each one
//! (`Message::qp`, unique within the app; the engine adds the app). The
//! source port is not part of the name: two QPs may share a UDP source
//! port (and so a path), and a QP whose source port changes (a repath)
//! stays the same QP, with its rate, its CNP pacing and its order; only
//! its later messages' path changes, as a NIC that moves a QP to another
//! UDP source port keeps the QP. Only a message whose app named its QP
//! joins one; any other is a QP of its own, as before.
//!
//! - **Rate** (Zhu et al., SIGCOMM'15, section 3: one reaction point and
//!   one notification point per flow, and a RoCE flow is a QP; NVIDIA's
//!   DCQCN description: the CNP names the QP whose packet was marked and
//!   the sender throttles that QP's rate): one reaction point per QP, so a
//!   message starts at the rate the previous one left, with its alpha and
//!   timers. The HPCC repository's simulator (`RdmaHw::AddQueuePair`,
//!   `QpComplete`) instead opens an `RdmaQueuePair` per flow at line rate
//!   and deletes it when the flow completes: its DCQCN state restarts per
//!   message, which is what a message without a QP gets here.
//! - **CNPs** (section 3.2: at most one CNP per N = 50 us per flow): one
//!   notification point per QP at the receiver, across its messages.
//! - **Order**: a NIC serves a QP's work requests in order (the
//!   InfiniBand Architecture Specification, vol. 1: a send queue executes
//!   its work requests in the order they were posted). A message starts
//!   sending when the one before it has sent its last byte, from where
//!   that one's pacing left off; it does not wait for the acknowledgments.
//! - **Losses**: PFC does not make the fabric lossless here: a link going
//!   down loses the frames on it and in its queues, and a lossy link
//!   (`LinkChange::Loss`) loses frames, whatever PFC says. A message that
//!   times out goes back and resends at the QP's rate R while its
//!   successor, already started, keeps sending at R too: for that while
//!   the QP sends at up to about 2R (a NIC's go-back-N would resend the
//!   successor's packets too, at R in all). Not modelled further.
//! - **Class**: a QP's class is fixed when it opens; a message moved to
//!   another class (`set_class`) stays on the QP it was posted on, its
//!   later packets carrying the new class.

use super::PacketNet;
use crate::engine::Ctx;
use crate::transport::dcqcn::{DcqcnParams, DcqcnRp, SharedNp, SharedRp};
use crate::transport::{Dcqcn, SenderConfig, TcpReceiver, TcpSender};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// (source node, destination node, (app, the app's QP identity), class).
pub(super) type QpKey = (u32, u32, (u16, u64), u8);

struct Qp {
    rp: SharedRp,
    /// The receiver's notification point for this QP.
    np: SharedNp,
    /// Where the pacing of the QP's last sending message left off.
    next_send_ps: u64,
    /// The message sending new data, if any.
    sending: Option<u32>,
    /// Messages posted behind it, in order.
    waiting: VecDeque<u32>,
    /// A message has started (a handshake, if any, opened the QP).
    opened: bool,
}

#[derive(Default)]
pub(super) struct Qps {
    index: HashMap<QpKey, u32>,
    qps: Vec<Qp>,
}

/// What a message posted on a QP does.
pub(super) struct Posted {
    pub qp: u32,
    pub rp: SharedRp,
    pub np: SharedNp,
    /// Start now, pacing from this time; None: wait for the messages before it.
    pub start_from_ps: Option<u64>,
    /// The QP is already open: no handshake.
    pub opened: bool,
}

impl Qps {
    /// Posts message `msg` on QP `key` (opened at `line_bps` with DCQCN
    /// parameters `p` if new).
    pub fn post(&mut self, key: QpKey, msg: u32, line_bps: f64, p: DcqcnParams) -> Posted {
        let qps = &mut self.qps;
        let q = *self.index.entry(key).or_insert_with(|| {
            qps.push(Qp {
                rp: Arc::new(Mutex::new(DcqcnRp::new(line_bps, p))),
                np: SharedNp::default(),
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
            np: qp.np.clone(),
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
}

/// The sender and receiver of a message posted on a QP: the sender holds
/// the QP's reaction point and, when it starts at once, continues the QP's
/// pacing; only the QP's first message opens it with a handshake (if the
/// transport has one). The receiver paces its CNPs with the QP's
/// notification point, every `cnp_interval_ps` at most across the QP.
pub(super) fn message_ends(
    p: &Posted,
    size_bytes: u64,
    cfg: &SenderConfig,
    cnp_interval_ps: u64,
) -> (TcpSender, TcpReceiver) {
    let cfg = SenderConfig {
        handshake: cfg.handshake && !p.opened,
        ..cfg.clone()
    };
    let mut sender = TcpSender::new(size_bytes, &cfg, Box::new(Dcqcn::on_qp(p.rp.clone())));
    if let Some(t) = p.start_from_ps {
        sender.pace_from(t);
    }
    let receiver =
        TcpReceiver::new(size_bytes).with_notification_point(p.np.clone(), cnp_interval_ps);
    (sender, receiver)
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
