//! CMP_SWAP (0x11, MLX4_OPCODE_ATOMIC_CS) and FETCH_ADD (0x12,
//! MLX4_OPCODE_ATOMIC_FA) of QP `s`, by the contract's rules, in order:
//!
//! a. the responder `d` is reached as for an RDMA write or read
//!    (`reachable_peer`); else TRANSPORT_RETRY_EXC_ERR;
//! b. RC only: on another service type the WQE does not parse
//!    (`wqe::parse`: protocol error `wqe_bad_opcode`, LOCAL_QP_OP_ERR), as
//!    an RDMA read on UC;
//! c. after the raddr and atomic segments comes exactly one data segment,
//!    of 8 bytes (libmlx4 `mlx4_post_send`): the original value lands
//!    there; else LOCAL_LENGTH_ERR. Its lkey passes its check with
//!    LOCAL_WRITE in `s`'s PD; else LOCAL_PROT_ERR. Nothing executed;
//! d. raddr is 8-byte aligned; else `d` NAKs Invalid Request (as rxe does,
//!    RESPST_ERR_MISALIGNED_ATOMIC): REMOTE_INVAL_REQ_ERR;
//! e. `d`'s context enables remote atomics (RAE, params2 bit 13); else
//!    REMOTE_ACCESS_ERR, whatever the rkey;
//! f. the rkey names a region of `d`'s PD with ATOMIC (MLX4_PERM_ATOMIC)
//!    that holds `[raddr, raddr + 8)`; else REMOTE_ACCESS_ERR;
//! g. the 8 bytes at raddr are read as a big-endian integer (mlx4 computes
//!    atomics big-endian; rdma-core's `tests/utils.py:validate_atomic`
//!    reads both sides so). CMP_SWAP: if it equals compare, swap_add is
//!    stored, big-endian; else nothing is written. FETCH_ADD: the sum with
//!    swap_add, modulo 2^64, is stored big-endian. The original 8 bytes,
//!    as they were in memory, are DMA-written into the requester's data
//!    segment; then the send CQE if signalled (opcode 0x11 / 0x12,
//!    byte_cnt 8, which libmlx4 reports as byte_len 8 anyway).
//!
//! A refusal by c–f touches neither side's memory, completes the WQE with
//! its syndrome (`s` to ERR, `d` unaffected) and is counted
//! (`atomics_refused`, diag 0x680) and recorded (`deliver_error`), and
//! where its kind is: c's key in `refused_segments` and the local
//! protection faults, e's and f's in the remote access faults
//! (`prot_fault`), as a read's. An executed atomic is counted by kind
//! (0x670, 0x678) and recorded (`atomic`). The read-modify-write is atomic
//! with respect to the adapter's own accesses (IB_ATOMIC_HCA): it runs
//! whole within the MMIO write that executes it. Data faults
//! (`DATA_FAULT`) are not applied to atomics.

use super::deliver::SenderSyndrome;
use super::engine::Engine;
use super::send::send_cqe;
use crate::cq::syndrome;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::keys::{self, Access, Chunk};
use crate::port_counters::Message;
use crate::timing::Read;
use crate::wqe::{opcode, Segment, Wqe};
use serde_json::json;

/// Every atomic's operand and result: 8 bytes.
pub const OPERAND: u64 = 8;

/// What atomic `op` does to the 8 bytes `old` (the operand as it is in
/// memory, big-endian): the 8 bytes to store, or None (a CMP_SWAP that did
/// not match).
pub fn apply(op: u8, old: [u8; 8], swap_add: u64, compare: u64) -> Option<[u8; 8]> {
    let v = u64::from_be_bytes(old);
    if op == opcode::ATOMIC_CS {
        (v == compare).then_some(swap_add.to_be_bytes())
    } else {
        Some(v.wrapping_add(swap_add).to_be_bytes())
    }
}

/// The outcome of rules d–g on the responder: the original bytes and what
/// was stored, if anything.
type Executed = ([u8; 8], Option<[u8; 8]>);

impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    /// Executes a parsed atomic of QP `s` (RC) at SQ index `idx`.
    pub(crate) fn atomic(&mut self, s: u32, idx: u32, w: &Wqe) {
        let c = w.ctrl;
        let Some(d) = self.reachable_peer(s, idx, &c) else {
            return;
        };
        let Some(landing) = self.atomic_landing(s, d, idx, w) else {
            return;
        };
        self.on_wire(s, Message::AtomicRequest, true);
        let (raddr, rkey) = w.raddr().unwrap_or((0, 0));
        let (swap_add, compare) = w.atomic().unwrap_or((0, 0));
        let (old, stored) =
            match self.atomic_remote(s, d, c.opcode, (raddr, rkey), (swap_add, compare)) {
                Ok(r) => r,
                Err(syn) => {
                    self.send_error(s, idx, &c, syn);
                    return;
                }
            };
        self.count_on_wire(s, Message::AtomicResponse, true);
        let mut off = 0usize;
        for (addr, k) in landing {
            if self
                .env
                .dma_write(addr, &old[off..off + k], "atomic")
                .is_err()
            {
                self.env.counters.global.scatter_errors += 1;
                self.send_error(s, idx, &c, syndrome::LOCAL_PROT_ERR);
                return;
            }
            off += k;
        }
        let g = &mut self.env.counters.global;
        if c.opcode == opcode::ATOMIC_CS {
            g.atomics_cmp_swap += 1;
        } else {
            g.atomics_fetch_add += 1;
        }
        self.env.trace.record("atomic", || {
            json!({"from": s, "to": d, "opcode": c.opcode, "raddr": raddr, "rkey": rkey,
                   "swap_add": swap_add, "compare": compare,
                   "original": u64::from_be_bytes(old),
                   "stored": stored.map(u64::from_be_bytes)})
        });
        self.advance(s, &c);
        if c.signaled() {
            self.complete(s, send_cqe(s, idx, c.opcode, OPERAND), false);
        }
    }

    /// Rule c for WQE `idx` of `s` (to `d`): the DMA accesses of its one
    /// 8-byte data segment; or None after completing the WQE in error.
    fn atomic_landing(&mut self, s: u32, d: u32, idx: u32, w: &Wqe) -> Option<Vec<Chunk>> {
        let mut data = w
            .segments
            .iter()
            .filter(|g| !matches!(g, Segment::Raddr { .. } | Segment::Atomic { .. }));
        let one = match (data.next(), data.next()) {
            (Some(Segment::Data { len, .. }), None) => u64::from(*len) == OPERAND,
            _ => false,
        };
        if !one {
            self.wqe_ready();
            self.atomic_refused(
                s,
                d,
                "not one 8-byte data segment",
                syndrome::LOCAL_LENGTH_ERR,
            );
            self.send_error(s, idx, &w.ctrl, syndrome::LOCAL_LENGTH_ERR);
            return None;
        }
        let (mut segments, refused) = self.resolve_segments(s, w, Access::LocalWrite, "scatter");
        self.wqe_ready();
        if refused > 0 {
            self.env.counters.global.refused_segments += refused;
            self.env.counters.global.scatter_errors += 1;
            self.atomic_refused(s, d, "lkey", syndrome::LOCAL_PROT_ERR);
            self.send_error(s, idx, &w.ctrl, syndrome::LOCAL_PROT_ERR);
            return None;
        }
        segments.pop()
    }

    /// Rules d–g on the responder `d`, for atomic `op` of `s` at `(raddr,
    /// rkey)` with operands `(swap_add, compare)`. Err: the requester's
    /// syndrome, nothing written.
    fn atomic_remote(
        &mut self,
        s: u32,
        d: u32,
        op: u8,
        (raddr, rkey): (u64, u32),
        (swap_add, compare): (u64, u64),
    ) -> Result<Executed, SenderSyndrome> {
        if !raddr.is_multiple_of(OPERAND) {
            let syn = syndrome::REMOTE_INVAL_REQ_ERR;
            return Err(self.atomic_refused(s, d, "misaligned atomic", syn));
        }
        let (pd, rae) = self.qps.get(d).map_or((0, true), |q| (q.pd, q.rae));
        if !rae {
            self.prot_fault(d, "rkey", rkey, raddr, OPERAND, keys::Fault::QpAccess);
            let syn = syndrome::REMOTE_ACCESS_ERR;
            return Err(self.atomic_refused(s, d, "remote atomic not enabled", syn));
        }
        let access = Access::RemoteAtomic;
        let target = match keys::check(self.mrs, false, pd, rkey, raddr, OPERAND, access) {
            Ok(t) => t,
            Err(f) => {
                self.prot_fault(d, "rkey", rkey, raddr, OPERAND, f);
                return Err(self.atomic_refused(s, d, "rkey", syndrome::REMOTE_ACCESS_ERR));
            }
        };
        let chunks = keys::translate(self.mrs, target, raddr, OPERAND);
        let mut old = [0u8; 8];
        let (mut off, mut read) = (0usize, Read::Fresh);
        for &(addr, k) in &chunks {
            if self
                .env
                .dma_read(addr, &mut old[off..off + k], "atomic", read)
                .is_err()
            {
                return Err(self.atomic_dma_failed(s, d));
            }
            read = Read::Continued;
            off += k;
        }
        let stored = apply(op, old, swap_add, compare);
        if let Some(new) = stored {
            let mut off = 0usize;
            for &(addr, k) in &chunks {
                if self
                    .env
                    .dma_write(addr, &new[off..off + k], "atomic")
                    .is_err()
                {
                    return Err(self.atomic_dma_failed(s, d));
                }
                off += k;
            }
        }
        Ok((old, stored))
    }

    /// An atomic refused by rule c–f: counted and recorded; the syndrome.
    fn atomic_refused(&mut self, s: u32, d: u32, why: &str, syn: u8) -> SenderSyndrome {
        self.env.counters.global.atomics_refused += 1;
        self.delivery_failed(s, d, why, syn);
        syn
    }

    /// The responder's page the rkey check passed cannot be read or
    /// written (`dma_unmapped`), as for an RDMA read.
    fn atomic_dma_failed(&mut self, s: u32, d: u32) -> SenderSyndrome {
        self.env.counters.global.rdma_dma_errors += 1;
        self.delivery_failed(s, d, "atomic DMA", syndrome::REMOTE_ACCESS_ERR);
        syndrome::REMOTE_ACCESS_ERR
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_are_big_endian() {
        let cs = opcode::ATOMIC_CS;
        let fa = opcode::ATOMIC_FA;
        let m = 0x0102_0304_0506_0708u64.to_be_bytes();
        assert_eq!(
            apply(cs, m, 9, 0x0102_0304_0506_0708),
            Some(9u64.to_be_bytes())
        );
        assert_eq!(apply(cs, m, 9, 0x0807_0605_0403_0201), None);
        // A carry from the last byte in memory into the one before it.
        let m = 0xffu64.to_be_bytes();
        assert_eq!(apply(fa, m, 1, 0), Some([0, 0, 0, 0, 0, 0, 1, 0]));
        assert_eq!(apply(fa, [0xff; 8], 2, 0), Some(1u64.to_be_bytes()));
    }
}
