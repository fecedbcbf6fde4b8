//! Delivery of a SEND / SEND_IMM on an RC or UC QP to the receive queue of
//! the QP it names (§6), by the contract's rules, in order:
//!
//! a. the destination `d = s.remote_qpn` exists, receives (RTR, RTS, SQD,
//!    SQE), has an
//!    RQ, has the same service type and names `s` back, and `s`'s
//!    primary path leads to the port's own LID; else the
//!    sender's error CQE TRANSPORT_RETRY_EXC_ERR;
//! b. the payload: inline bytes, and data segments read by DMA after every
//!    one passed its key check (`keys`: the reserved lkey on an rlkey QP,
//!    or a registered region); else LOCAL_PROT_ERR, nothing read;
//! c. `d`'s RQ holds a receive WQE; else an RNR NAK, `d` untouched: RC
//!    retries it (`rnr`), else (or retries spent) RNR_RETRY_EXC_ERR;
//! d. its scatter list accepts the payload (every segment's key check with
//!    LOCAL_WRITE, then the length); else error CQEs on both sides;
//! e. scatter, consume the receive WQE, the receive CQE, then the sender's
//!    send CQE if signalled.

use super::engine::Engine;
use super::recv::Refused;
use super::send::send_cqe;
use crate::bytes::put_be32;
use crate::cq::syndrome;
use crate::firmware::mad::LID;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::keys::{self, Access, Chunk, Fault};
use crate::layout::MAX_MESSAGE;
use crate::port_counters::Message;
use crate::qp::QpState;
use crate::rq;
use crate::timing::Read;
use crate::wqe::{self, opcode, Ctrl, Segment, Wqe};
use serde_json::json;

/// Receive CQE opcodes (IS_SEND clear).
pub mod recv_opcode {
    pub const RDMA_WRITE_IMM: u8 = 0x00;
    pub const SEND: u8 = 0x01;
    pub const SEND_IMM: u8 = 0x02;
}

/// Why a delivery failed, for the sender's error CQE.
pub(crate) type SenderSyndrome = u8;

impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    /// Executes a parsed SEND of QP `s` at SQ index `idx` (`bytes` = the
    /// WQE): delivers it or completes it in error.
    pub(crate) fn send_message(&mut self, s: u32, idx: u32, w: &Wqe, bytes: &[u8]) {
        let c = w.ctrl;
        self.transmit(s, idx, w, bytes, |me, d, payload, start| {
            me.receive(s, d, &c, bytes, payload, start)
        });
    }

    /// What SENDs and RDMA writes share: the peer (rule a), the gathered
    /// payload, the wire; `deliver` does the responder's part (to peer `d`,
    /// the payload, the post's start), and its error is the requester's
    /// syndrome. Then the requester's completion.
    pub(crate) fn transmit(
        &mut self,
        s: u32,
        idx: u32,
        w: &Wqe,
        bytes: &[u8],
        deliver: impl FnOnce(&mut Self, u32, &[u8], u64) -> Result<(), SenderSyndrome>,
    ) {
        let c = w.ctrl;
        let Some(d) = self.reachable_peer(s, idx, &c) else {
            return;
        };
        let Some(payload) = self.gather(s, idx, w, bytes) else {
            return;
        };
        let start = self.wqe_ready();
        let payload_len = payload.len() as u64;
        let imm = matches!(c.opcode, opcode::SEND_IMM | opcode::RDMA_WRITE_IMM);
        let m = match c.opcode {
            opcode::RDMA_WRITE | opcode::RDMA_WRITE_IMM => Message::Write {
                payload: payload_len,
                imm,
            },
            _ => Message::Send {
                payload: payload_len,
                imm,
            },
        };
        // reachable_peer: the path leads to the port's own LID.
        self.on_wire(s, m, true);
        if let Err(syn) = deliver(self, d, &payload, start) {
            // An RNR NAK an RC requester retries (`rnr`): no completion yet.
            if syn == syndrome::RNR_RETRY_EXC_ERR && self.rnr_nak(s, idx, bytes, d) {
                return;
            }
            self.send_error(s, idx, &c, syn);
            return;
        }
        self.advance(s, &c);
        if c.signaled() {
            let cqe = send_cqe(s, idx, c.opcode, payload.len() as u64);
            self.complete(s, cqe, false);
        }
    }

    /// Rule a for WQE `idx` of QP `s` with control segment `c`: the
    /// destination QP; or, when there is none to reach, the failure counted
    /// and recorded, the WQE completed with TRANSPORT_RETRY_EXC_ERR, None.
    pub(crate) fn reachable_peer(&mut self, s: u32, idx: u32, c: &Ctrl) -> Option<u32> {
        match self.peer(s) {
            Ok(d) => Some(d),
            Err((d, why)) => {
                self.wqe_ready();
                self.env.counters.global.peer_errors += 1;
                self.delivery_failed(s, d, why, syndrome::TRANSPORT_RETRY_EXC_ERR);
                self.send_error(s, idx, c, syndrome::TRANSPORT_RETRY_EXC_ERR);
                None
            }
        }
    }

    /// Rule a: the destination QP, or (its number, why not).
    pub(crate) fn peer(&self, s: u32) -> Result<u32, (u32, &'static str)> {
        let Some(sq) = self.qps.get(s) else {
            return Err((0, "the sender is gone"));
        };
        let d = sq.remote_qpn;
        let Some(dq) = self.qps.get(d) else {
            return Err((d, "no such QP"));
        };
        if !dq.state.accepts_incoming() {
            Err((d, "not in RTR, RTS, SQD or SQE"))
        } else if !dq.receives() {
            Err((d, "no receive queue"))
        } else if dq.service != sq.service {
            Err((d, "another service type"))
        } else if dq.remote_qpn != s {
            Err((d, "its remote_qpn names another QP"))
        } else if sq.rlid != LID {
            // A path to another LID leaves the port, and
            // no one answers there (the model has no fabric).
            Err((d, "the path's DLID is not the port's LID"))
        } else {
            Ok(d)
        }
    }

    /// Rule b: the message's bytes, or None after completing the WQE in
    /// error (too long, a key check failed, a gather the model cannot read).
    pub(crate) fn gather(&mut self, s: u32, idx: u32, w: &Wqe, bytes: &[u8]) -> Option<Vec<u8>> {
        if w.payload > MAX_MESSAGE {
            self.wqe_ready();
            self.env.counters.global.messages_too_long += 1;
            self.send_error(s, idx, &w.ctrl, syndrome::LOCAL_LENGTH_ERR);
            return None;
        }
        let mut data = self.checked_gather(s, idx, w)?.into_iter();
        let mut out = Vec::with_capacity(w.payload as usize);
        let mut read = Read::Fresh;
        for seg in &w.segments {
            match *seg {
                Segment::Inline { len, off } => {
                    out.extend_from_slice(&bytes[off..off + len as usize]);
                }
                Segment::Data { .. } => {
                    for (addr, n) in data.next().unwrap_or_default() {
                        let mut b = vec![0u8; n];
                        if self.env.dma_read(addr, &mut b, "gather", read).is_err() {
                            self.wqe_ready();
                            self.env.counters.global.gather_errors += 1;
                            self.send_error(s, idx, &w.ctrl, syndrome::LOCAL_PROT_ERR);
                            return None;
                        }
                        read = Read::Continued;
                        out.extend_from_slice(&b);
                    }
                }
                _ => {}
            }
        }
        Some(out)
    }

    /// The key check of every data segment of `w` (a gather of QP `s`):
    /// the DMA accesses of each, in WQE order. If any fails, nothing is
    /// read: every refused segment is counted (0x548, 0x5a0) and traced,
    /// and the WQE completes with LOCAL_PROT_ERR (None).
    pub(crate) fn checked_gather(&mut self, s: u32, idx: u32, w: &Wqe) -> Option<Vec<Vec<Chunk>>> {
        let (out, refused) = self.resolve_segments(s, w, Access::LocalRead, "gather");
        if refused == 0 {
            return Some(out);
        }
        self.env.counters.global.refused_segments += refused;
        self.wqe_ready();
        self.env.counters.global.gather_errors += 1;
        self.send_error(s, idx, &w.ctrl, syndrome::LOCAL_PROT_ERR);
        None
    }

    /// The lkey check of every data segment of `w` on QP `s` for `access`
    /// (`side`: "gather" or "scatter", for the fault's record): the DMA
    /// accesses of each segment that passed, and how many were refused
    /// (each one counted and traced).
    pub(crate) fn resolve_segments(
        &mut self,
        s: u32,
        w: &Wqe,
        access: Access,
        side: &'static str,
    ) -> (Vec<Vec<Chunk>>, u64) {
        let (rlkey, pd) = self.qps.get(s).map_or((false, 0), |qp| (qp.rlkey, qp.pd));
        let mut out = Vec::new();
        let mut refused = 0u64;
        for seg in &w.segments {
            let Segment::Data { len, lkey, addr } = *seg else {
                continue;
            };
            let len = u64::from(len);
            match keys::resolve(self.mrs, rlkey, pd, lkey, addr, len, access) {
                Ok(c) => out.push(c),
                Err(f) => {
                    refused += 1;
                    self.prot_fault(s, side, lkey, addr, len, f);
                }
            }
        }
        (out, refused)
    }

    /// A key check failed on QP `qpn`: a local protection fault (gather,
    /// scatter) or a remote access fault (rkey), counted and traced.
    pub(crate) fn prot_fault(
        &mut self,
        qpn: u32,
        side: &'static str,
        key: u32,
        addr: u64,
        len: u64,
        f: Fault,
    ) {
        if side == "rkey" {
            self.env.counters.faults.remote_access_faults += 1;
        } else {
            self.env.counters.faults.local_prot_faults += 1;
        }
        self.env.trace.record("prot_fault", || {
            json!({"qpn": qpn, "side": side, "key": key, "addr": addr, "len": len,
                   "reason": f.as_str()})
        });
    }

    /// Rule c on `d`: reads its RQ doorbell record. Ok: a receive WQE is
    /// posted at its consumer index. Err: the sender's syndrome (RNR; or
    /// REMOTE_OP_ERR, `d` to ERR, if the record cannot be read).
    pub(crate) fn rq_posted(&mut self, s: u32, d: u32) -> Result<(), SenderSyndrome> {
        if self.qps.get(d).is_none() {
            return Err(syndrome::REMOTE_OP_ERR);
        }
        let Some(avail) = self.rq_available(d) else {
            return Err(self.receive_failed(s, d, "its RQ doorbell record cannot be read"));
        };
        if avail == 0 {
            self.env.counters.global.rnr_errors += 1;
            self.delivery_failed(s, d, "RQ empty", syndrome::RNR_RETRY_EXC_ERR);
            return Err(syndrome::RNR_RETRY_EXC_ERR);
        }
        Ok(())
    }

    /// Rules c–e on the receiver `d`. Err: the sender's syndrome.
    fn receive(
        &mut self,
        s: u32,
        d: u32,
        c: &Ctrl,
        wqe_bytes: &[u8],
        payload: &[u8],
        start: u64,
    ) -> Result<(), SenderSyndrome> {
        self.rq_posted(s, d)?;
        let Some(dq) = self.qps.get(d) else {
            return Err(syndrome::REMOTE_OP_ERR);
        };
        let (ci, cqn) = (self.qps.recv_index(d), dq.cqn_recv);
        let l = match self.receive_wqe(d) {
            Ok(l) => l,
            Err(Refused::Unreadable) => {
                return Err(self.receive_failed(s, d, "its receive WQE cannot be read"));
            }
            // The receive WQE's own key is the responder's local error:
            // the requester's NAK is Remote Operational Error, not an
            // rkey's Remote Access Error (rdma-core's test_mr_rereg_pd
            // and _addr expect it of every provider).
            Err(Refused::Scatter) => {
                self.receive_error(d, ci, syndrome::LOCAL_PROT_ERR);
                self.delivery_failed(s, d, "scatter key", syndrome::REMOTE_OP_ERR);
                return Err(syndrome::REMOTE_OP_ERR);
            }
        };
        if payload.len() as u64 > rq::capacity(&l.segs) {
            self.env.counters.global.recv_length_errors += 1;
            self.receive_error(d, ci, syndrome::LOCAL_LENGTH_ERR);
            self.delivery_failed(s, d, "too long", syndrome::REMOTE_INVAL_REQ_ERR);
            return Err(syndrome::REMOTE_INVAL_REQ_ERR);
        }
        if self.scatter(d, &l, 0, payload, "payload").is_err() {
            self.env.counters.global.scatter_errors += 1;
            self.receive_error(d, ci, syndrome::LOCAL_PROT_ERR);
            self.delivery_failed(s, d, "scatter DMA", syndrome::REMOTE_OP_ERR);
            return Err(syndrome::REMOTE_OP_ERR);
        }
        let cqe = recv_cqe(s, d, ci, c, wqe_bytes, payload.len() as u64);
        let one_way = self.received(d, ci, cqn, cqe, c.solicited(), start);
        self.env.trace.record("deliver", || {
            json!({"from": s, "to": d, "len": payload.len(), "rq_index": ci,
                   "post_t_ns": start, "one_way_ns": one_way})
        });
        Ok(())
    }

    /// The receiver could not read its own queue: it goes to ERR; the
    /// sender gets REMOTE_OP_ERR.
    pub(crate) fn receive_failed(&mut self, s: u32, d: u32, why: &'static str) -> SenderSyndrome {
        if let Some(dq) = self.qps.get_mut(d) {
            dq.state = QpState::Err;
        }
        self.env.counters.global.receive_failures += 1;
        self.delivery_failed(s, d, why, syndrome::REMOTE_OP_ERR);
        syndrome::REMOTE_OP_ERR
    }

    pub(crate) fn delivery_failed(&mut self, s: u32, d: u32, why: &str, sender_syndrome: u8) {
        self.env.trace.record(
            "deliver_error",
            || json!({"from": s, "to": d, "error": why, "syndrome": sender_syndrome}),
        );
    }
}

/// A receive CQE: my_qpn d, immediate, rqpn s, byte_cnt, wqe_index (the
/// RQ index), opcode SEND, SEND_IMM or RDMA_WRITE_IMM (by the WQE's
/// opcode) with IS_SEND clear.
pub(crate) fn recv_cqe(
    s: u32,
    d: u32,
    rq_index: u32,
    c: &Ctrl,
    wqe_bytes: &[u8],
    len: u64,
) -> [u8; 32] {
    let mut cqe = [0u8; 32];
    put_be32(&mut cqe, 0x00, d & 0xff_ffff);
    let op = match c.opcode {
        opcode::SEND_IMM => recv_opcode::SEND_IMM,
        opcode::RDMA_WRITE_IMM => recv_opcode::RDMA_WRITE_IMM,
        _ => recv_opcode::SEND,
    };
    if op != recv_opcode::SEND {
        cqe[0x04..0x08].copy_from_slice(&wqe::imm(wqe_bytes));
    }
    put_be32(&mut cqe, 0x08, s & 0xff_ffff);
    put_be32(&mut cqe, 0x14, len.min(u64::from(u32::MAX)) as u32);
    cqe[0x18..0x1a].copy_from_slice(&(rq_index as u16).to_be_bytes());
    cqe[0x1f] = op;
    cqe
}
