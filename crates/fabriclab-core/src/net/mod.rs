//! Network backends behind the engine's [`Backend`](crate::engine::Backend)
//! interface: a message enters with its route and leaves as a completion.

pub mod agg_workers;
pub mod flow;
pub mod packet;
