//! RDMA_WRITE and RDMA_WRITE_IMM of QP `s` (RC or UC), by the contract's
//! rules, in order:
//!
//! a. the responder `d` is chosen as a SEND's destination is (`peer`); else
//!    TRANSPORT_RETRY_EXC_ERR;
//! b. the payload is gathered as a SEND's is (inline bytes, data segments
//!    after their key checks); else LOCAL_PROT_ERR or LOCAL_LENGTH_ERR;
//! c. `d`'s context enables remote writes (RWE), and
//!    the rkey names a region of `d`'s protection domain with REMOTE_WRITE
//!    that holds `[raddr, raddr + length)` (not checked for length 0, as
//!    IB says); else REMOTE_ACCESS_ERR on the requester, `d` unaffected;
//! d. RDMA_WRITE_IMM only: `d`'s RQ holds a receive WQE; else
//!    RNR_RETRY_EXC_ERR, nothing written;
//! e. the payload is DMA-written into the region's pages (with the byte an
//!    armed data fault names inverted, `data_fault`); RDMA_WRITE_IMM
//!    consumes the receive WQE (without reading it: its buffers are not
//!    touched) and writes a receive CQE (opcode RDMA_WRITE_IMM, the
//!    immediate, byte_cnt = length); then the requester's send CQE if
//!    signalled.

use super::deliver::{recv_cqe, SenderSyndrome};
use super::engine::Engine;
use super::send::send_cqe;
use crate::cq::syndrome;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::keys::{self, Access};
use crate::layout::MAX_MESSAGE;
use crate::port_counters::Message;
use crate::timing::Read;
use crate::wqe::Segment;
use crate::wqe::{opcode, Wqe};
use serde_json::json;

impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    /// Executes a parsed RDMA write of QP `s` at SQ index `idx` (`bytes` =
    /// the WQE): its data lands in the responder's region, or the WQE
    /// completes in error.
    pub(crate) fn rdma_write(&mut self, s: u32, idx: u32, w: &Wqe, bytes: &[u8]) {
        self.transmit(s, idx, w, bytes, |me, d, payload, start| {
            me.land(s, d, w, bytes, payload, start)
        });
    }

    /// Rules c–e on the responder `d`. Err: the requester's syndrome.
    fn land(
        &mut self,
        s: u32,
        d: u32,
        w: &Wqe,
        wqe_bytes: &[u8],
        payload: &[u8],
        start: u64,
    ) -> Result<(), SenderSyndrome> {
        let c = w.ctrl;
        let (raddr, rkey) = w.raddr().unwrap_or((0, 0));
        let len = payload.len() as u64;
        let (pd, rwe) = self.qps.get(d).map_or((0, true), |qp| (qp.pd, qp.rwe));
        if !rwe {
            // The responder QP does not allow remote
            // writes (no IB_ACCESS_REMOTE_WRITE at modify): a remote
            // access NAK, whatever the rkey.
            self.prot_fault(d, "rkey", rkey, raddr, len, keys::Fault::QpAccess);
            self.delivery_failed(
                s,
                d,
                "remote write not enabled",
                syndrome::REMOTE_ACCESS_ERR,
            );
            return Err(syndrome::REMOTE_ACCESS_ERR);
        }
        let target = match keys::check(self.mrs, false, pd, rkey, raddr, len, Access::RemoteWrite) {
            Ok(t) => t,
            Err(f) => {
                self.prot_fault(d, "rkey", rkey, raddr, len, f);
                self.delivery_failed(s, d, "rkey", syndrome::REMOTE_ACCESS_ERR);
                return Err(syndrome::REMOTE_ACCESS_ERR);
            }
        };
        let imm = c.opcode == opcode::RDMA_WRITE_IMM;
        if imm {
            self.rq_posted(s, d)?;
        }
        let fault = self.diag.data_fault.offset_in(payload.len());
        let corrupted;
        let payload = match fault {
            Some(at) => {
                corrupted = inverted(payload, at);
                &corrupted[..]
            }
            None => payload,
        };
        let mut off = 0usize;
        for (addr, k) in keys::translate(self.mrs, target, raddr, len) {
            if self
                .env
                .dma_write(addr, &payload[off..off + k], "rdma")
                .is_err()
            {
                self.env.counters.global.rdma_dma_errors += 1;
                self.delivery_failed(s, d, "RDMA write DMA", syndrome::REMOTE_ACCESS_ERR);
                return Err(syndrome::REMOTE_ACCESS_ERR);
            }
            off += k;
        }
        if let Some(at) = fault {
            self.data_fault_fired(s, d, c.opcode, at, len);
        }
        self.env.counters.global.rdma_writes += 1;
        self.env.counters.global.rdma_bytes += len;
        let mut done = self.env.clock.now();
        let mut rq_index = None;
        if imm {
            let Some(cqn) = self.qps.get(d).map(|dq| dq.cqn_recv.unwrap_or(0)) else {
                return Err(syndrome::REMOTE_OP_ERR);
            };
            let ci = self.qps.recv_index(d);
            self.consume_recv(d, ci);
            let cqe = recv_cqe(s, d, ci, &c, wqe_bytes, len);
            if let Some(t) = self.post_cqe(cqn, d, cqe, c.solicited()) {
                self.env.counters.global.recv_cqes += 1;
                done = t;
            }
            rq_index = Some(ci);
        }
        let one_way = done.saturating_sub(start);
        if self.env.post_timed {
            self.env.counters.rdma_write_one_way(one_way);
        }
        self.env.trace.record("rdma_write", || {
            json!({"from": s, "to": d, "len": len, "raddr": raddr, "rkey": rkey,
                   "rq_index": rq_index, "post_t_ns": start, "one_way_ns": one_way})
        });
        Ok(())
    }
}

/// RDMA_READ of QP `s` (RC), by the same rules in the
/// other direction:
///
/// a. the responder `d` as for a write (`peer`); else
///    TRANSPORT_RETRY_EXC_ERR;
/// b. the requester's data segments are the scatter list: each passes its
///    key check with LOCAL_WRITE (`s`'s PD), the total is at most
///    MAX_MESSAGE; else LOCAL_PROT_ERR / LOCAL_LENGTH_ERR, nothing read;
/// c. `d` enables remote reads (RRE) and the rkey names a region of `d`'s
///    PD with REMOTE_READ holding `[raddr, raddr + length)` (length 0: no
///    check); else REMOTE_ACCESS_ERR;
/// d. the bytes are read from `d`'s region and written into the scatter
///    list (with the byte an armed data fault names inverted,
///    `data_fault`); then the send CQE (opcode RDMA_READ, byte_cnt =
///    length).
impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    pub(crate) fn rdma_read(&mut self, s: u32, idx: u32, w: &Wqe) {
        let c = w.ctrl;
        let Some(d) = self.reachable_peer(s, idx, &c) else {
            return;
        };
        let len: u64 = w
            .segments
            .iter()
            .map(|g| match *g {
                Segment::Data { len, .. } => u64::from(len),
                _ => 0,
            })
            .sum();
        if len > MAX_MESSAGE {
            self.wqe_ready();
            self.env.counters.global.messages_too_long += 1;
            self.send_error(s, idx, &c, syndrome::LOCAL_LENGTH_ERR);
            return;
        }
        let (segments, refused) = self.resolve_segments(s, w, Access::LocalWrite, "scatter");
        let scatter = segments.into_iter().flatten();
        self.wqe_ready();
        if refused > 0 {
            self.env.counters.global.refused_segments += refused;
            self.env.counters.global.scatter_errors += 1;
            self.send_error(s, idx, &c, syndrome::LOCAL_PROT_ERR);
            return;
        }
        self.on_wire(s, Message::ReadRequest, true);
        let (raddr, rkey) = w.raddr().unwrap_or((0, 0));
        let mut data = match self.read_remote(s, d, raddr, rkey, len) {
            Ok(b) => b,
            Err(syn) => {
                self.send_error(s, idx, &c, syn);
                return;
            }
        };
        self.count_on_wire(s, Message::ReadResponse { payload: len }, true);
        let fault = self.diag.data_fault.offset_in(data.len());
        if let Some(at) = fault {
            data[at] ^= 0xff;
        }
        let mut off = 0usize;
        for (addr, k) in scatter {
            let k = k.min(data.len() - off);
            if k == 0 {
                break;
            }
            if self
                .env
                .dma_write(addr, &data[off..off + k], "rdma_read")
                .is_err()
            {
                self.env.counters.global.scatter_errors += 1;
                self.send_error(s, idx, &c, syndrome::LOCAL_PROT_ERR);
                return;
            }
            off += k;
        }
        if let Some(at) = fault {
            self.data_fault_fired(s, d, c.opcode, at, len);
        }
        self.env.counters.global.rdma_reads += 1;
        self.env.counters.global.rdma_read_bytes += len;
        self.env.trace.record(
            "rdma_read",
            || json!({"from": s, "to": d, "len": len, "raddr": raddr, "rkey": rkey}),
        );
        self.advance(s, &c);
        if c.signaled() {
            self.complete(s, send_cqe(s, idx, opcode::RDMA_READ, len), false);
        }
    }

    /// Rule c and the read of `len` bytes at `raddr` of responder `d`.
    fn read_remote(
        &mut self,
        s: u32,
        d: u32,
        raddr: u64,
        rkey: u32,
        len: u64,
    ) -> Result<Vec<u8>, SenderSyndrome> {
        let (pd, rre) = self.qps.get(d).map_or((0, true), |q| (q.pd, q.rre));
        if !rre {
            self.prot_fault(d, "rkey", rkey, raddr, len, keys::Fault::QpAccess);
            self.delivery_failed(s, d, "remote read not enabled", syndrome::REMOTE_ACCESS_ERR);
            return Err(syndrome::REMOTE_ACCESS_ERR);
        }
        let target = match keys::check(self.mrs, false, pd, rkey, raddr, len, Access::RemoteRead) {
            Ok(t) => t,
            Err(f) => {
                self.prot_fault(d, "rkey", rkey, raddr, len, f);
                self.delivery_failed(s, d, "rkey", syndrome::REMOTE_ACCESS_ERR);
                return Err(syndrome::REMOTE_ACCESS_ERR);
            }
        };
        let mut data = Vec::with_capacity(len as usize);
        let mut read = Read::Fresh;
        for (addr, k) in keys::translate(self.mrs, target, raddr, len) {
            let mut b = vec![0u8; k];
            if self.env.dma_read(addr, &mut b, "rdma_read", read).is_err() {
                self.env.counters.global.rdma_dma_errors += 1;
                self.delivery_failed(s, d, "RDMA read DMA", syndrome::REMOTE_ACCESS_ERR);
                return Err(syndrome::REMOTE_ACCESS_ERR);
            }
            read = Read::Continued;
            data.extend_from_slice(&b);
        }
        Ok(data)
    }
}

/// Data fault injection (diag DATA_FAULT, `fault::DataFault`): the armed
/// byte of an RDMA payload lands inverted (XOR 0xff), in the requester's
/// memory for a READ, the responder's for a WRITE. It fires only with a
/// payload that landed whole (counted in diag 0x618 or 0x5b0): one refused
/// or whose DMA failed leaves it armed. No SEND carries one: the fault is
/// for the RDMA a test's own validation reads back.
impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    /// The fault at byte `at` of QP `s`'s `len`-byte payload to or from `d`
    /// has landed: disarmed, counted, recorded.
    fn data_fault_fired(&mut self, s: u32, d: u32, op: u8, at: usize, len: u64) {
        self.diag.data_fault.fired();
        self.env.counters.lifetime.data_faults += 1;
        self.env.trace.record(
            "data_fault",
            || json!({"qpn": s, "peer": d, "opcode": op, "offset": at, "len": len}),
        );
    }
}

/// `payload` with byte `at` inverted.
fn inverted(payload: &[u8], at: usize) -> Vec<u8> {
    let mut v = payload.to_vec();
    v[at] ^= 0xff;
    v
}
