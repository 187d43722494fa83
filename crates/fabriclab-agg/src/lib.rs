//! In-network aggregation after PANAMA (Gebara et al., "In-network
//! Aggregation for Shared Machine Learning Clusters", MLSys 2021; seed 001).
//!
//! Pure logic, no I/O and no clock, shared by the simulator's aggregating
//! switches and the software aggregator on real UDP packets ([`udp`], the
//! one module that does I/O):
//!
//! - [`wire`]: the aggregation packet (the paper's figure 4: job id, tree
//!   id, vector id, FIN, ECN bits, `cwnd_cap`), one definition for both.
//! - [`accel`]: the accelerator of a switch (section 5): a ports bitmap per
//!   job and tree, an expected VID per tree, aggregation once every input
//!   port holds the expected VID (or a fraction of the workers, for
//!   PANAMA-0.88/0.94), the missing VID skipped, FIN resetting the state,
//!   ECN bits OR-ed and `cwnd_cap` lowered to the free buffer on the way up.
//! - [`cc`]: a worker's window per tree (section 4.2): result packets are
//!   implicit ACKs, a DCTCP-style alpha from their ECN bits, the window cut
//!   by alpha/2 once per window and never above `cwnd_cap`.
//! - [`values`]: the gradient values of functional simulations.

pub mod accel;
pub mod cc;
pub mod udp;
pub mod values;
pub mod wire;
