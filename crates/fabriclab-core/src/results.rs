//! Column-oriented results of a simulation, ready to become Arrow tables:
//! the engine's flows, messages and links, queue samples, and every app's
//! own tables ([`crate::engine::Simulation::app_tables`]). Nothing here
//! names an app type.

use crate::engine::{Column, Simulation, Table};

#[derive(Debug, Default, Clone)]
pub struct FlowColumns {
    pub flow_id: Vec<u32>,
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
    pub size_bytes: Vec<u64>,
    pub class: Vec<u8>,
    pub start_ps: Vec<u64>,
    /// `None` for messages unfinished when the run stopped.
    pub end_ps: Vec<Option<u64>>,
    pub ideal_fct_ps: Vec<u64>,
    pub retransmits: Vec<u64>,
    pub tag: Vec<String>,
}

#[derive(Debug, Default, Clone)]
pub struct LinkColumns {
    pub link_id: Vec<u32>,
    pub from: Vec<String>,
    pub to: Vec<String>,
    pub rate_bps: Vec<u64>,
    pub bytes: Vec<u64>,
    pub packets: Vec<u64>,
    pub drops: Vec<u64>,
    pub ecn_marks: Vec<u64>,
    pub max_queue_bytes: Vec<u64>,
    pub mean_queue_bytes: Vec<f64>,
    pub pause_frames_sent: Vec<u64>,
    pub paused_ps: Vec<u64>,
}

pub fn flow_columns(sim: &Simulation) -> FlowColumns {
    let mut c = FlowColumns::default();
    for (i, m) in sim.messages().iter().enumerate() {
        c.flow_id.push(i as u32);
        c.src.push(m.src);
        c.dst.push(m.dst);
        c.size_bytes.push(m.size_bytes);
        c.class.push(m.class);
        c.start_ps.push(m.start_ps);
        c.end_ps.push(m.end_ps);
        c.ideal_fct_ps.push(m.ideal_fct_ps);
        c.retransmits.push(m.retransmits);
        c.tag.push(sim.app_tag(m.app).to_string());
    }
    c
}

/// Every message: the app's label and tag, end hosts (index and node name),
/// size, class, start, first byte and last byte delivered, retransmissions,
/// and its forward path as node names joined by " > ".
pub fn message_table(sim: &Simulation) -> Table {
    let topo = sim.topology();
    let msgs = sim.messages();
    let n = msgs.len();
    let (mut app, mut tag, mut src_node, mut dst_node, mut path) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for m in msgs {
        app.push(sim.app_tag(m.app).to_string());
        tag.push(m.tag);
        src_node.push(topo.names[topo.hosts[m.src as usize] as usize].clone());
        dst_node.push(topo.names[topo.hosts[m.dst as usize] as usize].clone());
        let mut p = src_node.last().cloned().unwrap_or_default();
        for &port in m.route.iter() {
            p.push_str(" > ");
            p.push_str(&topo.names[topo.ports[port as usize].to as usize]);
        }
        path.push(p);
    }
    Table::new("messages")
        .col("msg_id", Column::U32((0..n as u32).collect()))
        .col("app", Column::Str(app))
        .col("tag", Column::U64(tag))
        .col("src", Column::U32(msgs.iter().map(|m| m.src).collect()))
        .col("dst", Column::U32(msgs.iter().map(|m| m.dst).collect()))
        .col("src_node", Column::Str(src_node))
        .col("dst_node", Column::Str(dst_node))
        .col(
            "size_bytes",
            Column::U64(msgs.iter().map(|m| m.size_bytes).collect()),
        )
        .col(
            "class",
            Column::U32(msgs.iter().map(|m| m.class as u32).collect()),
        )
        .col(
            "start_ps",
            Column::U64(msgs.iter().map(|m| m.start_ps).collect()),
        )
        .col(
            "first_byte_ps",
            Column::OptU64(msgs.iter().map(|m| m.first_byte_ps).collect()),
        )
        .col(
            "end_ps",
            Column::OptU64(msgs.iter().map(|m| m.end_ps).collect()),
        )
        .col(
            "retransmits",
            Column::U64(msgs.iter().map(|m| m.retransmits).collect()),
        )
        .col("cnps", Column::U64(msgs.iter().map(|m| m.cnps).collect()))
        .col("path", Column::Str(path))
        .col(
            "reroutes",
            Column::U32(msgs.iter().map(|m| m.reroutes).collect()),
        )
        .col(
            "route_lost",
            Column::U32(msgs.iter().map(|m| m.route_lost as u32).collect()),
        )
}

/// The queue sampler's rows: per sample and band, the queue and the
/// band's cumulative transmitted bytes, drops and marks, and whether paused.
pub fn queue_table(sim: &Simulation) -> Table {
    let topo = sim.topology();
    let s = sim.samples();
    let name = |port: u32, to: bool| {
        let p = &topo.ports[port as usize];
        topo.names[if to { p.to } else { p.from } as usize].clone()
    };
    Table::new("queues")
        .col("time_ps", Column::U64(s.time_ps.clone()))
        .col(
            "link_id",
            Column::U32(s.rows.iter().map(|r| r.port).collect()),
        )
        .col(
            "src_node",
            Column::Str(s.rows.iter().map(|r| name(r.port, false)).collect()),
        )
        .col(
            "dst_node",
            Column::Str(s.rows.iter().map(|r| name(r.port, true)).collect()),
        )
        .col(
            "band",
            Column::U32(s.rows.iter().map(|r| r.band as u32).collect()),
        )
        .col(
            "queue_bytes",
            Column::U64(s.rows.iter().map(|r| r.queue_bytes).collect()),
        )
        .col(
            "tx_bytes",
            Column::U64(s.rows.iter().map(|r| r.tx_bytes).collect()),
        )
        .col(
            "drops",
            Column::U64(s.rows.iter().map(|r| r.drops).collect()),
        )
        .col(
            "ecn_marks",
            Column::U64(s.rows.iter().map(|r| r.ecn_marks).collect()),
        )
        .col(
            "paused",
            Column::U32(s.rows.iter().map(|r| r.paused as u32).collect()),
        )
}

/// Every port's transmitted bytes per class where they changed between
/// samples (cumulative wire bytes).
pub fn class_table(sim: &Simulation) -> Table {
    let topo = sim.topology();
    let s = sim.samples();
    let name = |port: u32, to: bool| {
        let p = &topo.ports[port as usize];
        topo.names[if to { p.to } else { p.from } as usize].clone()
    };
    Table::new("classes")
        .col("time_ps", Column::U64(s.class_time_ps.clone()))
        .col(
            "link_id",
            Column::U32(s.class_rows.iter().map(|r| r.port).collect()),
        )
        .col(
            "src_node",
            Column::Str(s.class_rows.iter().map(|r| name(r.port, false)).collect()),
        )
        .col(
            "dst_node",
            Column::Str(s.class_rows.iter().map(|r| name(r.port, true)).collect()),
        )
        .col(
            "class",
            Column::U32(s.class_rows.iter().map(|r| r.class as u32).collect()),
        )
        .col(
            "tx_bytes",
            Column::U64(s.class_rows.iter().map(|r| r.tx_bytes).collect()),
        )
}

pub fn link_columns(sim: &Simulation) -> LinkColumns {
    let mut c = LinkColumns::default();
    let now = sim.last_active_ps();
    let names = &sim.topology().names;
    for (i, s) in sim.link_stats().into_iter().enumerate() {
        c.link_id.push(i as u32);
        c.from.push(names[s.from as usize].clone());
        c.to.push(names[s.to as usize].clone());
        c.rate_bps.push(s.rate_bps);
        c.bytes.push(s.bytes);
        c.packets.push(s.packets);
        c.drops.push(s.drops);
        c.ecn_marks.push(s.ecn_marks);
        c.max_queue_bytes.push(s.max_queue_bytes);
        c.mean_queue_bytes.push(if now > 0 {
            s.queue_area as f64 / now as f64
        } else {
            0.0
        });
        c.pause_frames_sent.push(s.pause_frames_sent);
        c.paused_ps.push(s.paused_ps);
    }
    c
}
