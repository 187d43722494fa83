//! Functional aggregation: the float32 vectors aggregation packets carry
//! when the scenario asks for values, not only sizes. Vectors live in a
//! slab owned by the backend; a packet (copyable, fixed size) carries its
//! slot in the fields aggregation packets do not use otherwise (`hop`:
//! low 16 bits, `route`: high 16 bits). A packet's vector is taken out of
//! the slab by whoever consumes the packet (an accelerator, a worker) and
//! freed wherever the packet is lost.

use super::header::{Packet, PROTO_AGG};
use super::PacketNet;

#[derive(Default)]
pub struct VectorSlab {
    slots: Vec<Vec<f32>>,
    free: Vec<u32>,
}

impl VectorSlab {
    /// Stores `v`; returns its slot.
    pub fn put(&mut self, v: Vec<f32>) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = v;
                i
            }
            None => {
                self.slots.push(v);
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// Takes the vector out of `slot` (which becomes free).
    pub fn take(&mut self, slot: u32) -> Vec<f32> {
        self.free.push(slot);
        std::mem::take(&mut self.slots[slot as usize])
    }

    /// Vectors stored and not yet taken.
    pub fn live(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

impl Packet {
    /// The slab slot of an aggregation packet's vector (functional runs).
    pub fn vector_slot(&self) -> u32 {
        self.at
    }
    pub fn set_vector_slot(&mut self, slot: u32) {
        self.at = slot;
    }
}

impl PacketNet {
    /// A packet left the network without being consumed: free its vector.
    pub(super) fn free_vector(&mut self, pkt: &Packet) {
        if pkt.proto == PROTO_AGG {
            if let Some(slab) = self.vectors.as_mut() {
                slab.take(pkt.vector_slot());
            }
        }
    }
}
