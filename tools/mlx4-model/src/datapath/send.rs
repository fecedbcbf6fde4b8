//! The send path: UAR send doorbell, SQ fetch by DMA (owner-bit parity,
//! DS != 0), WQE execution and its completion (§2.2, §4.4, §5.1). A SEND on
//! an RC or UC QP goes on to `deliver`, on a UD QP to `ud`, on an MLX QP
//! to `mad`; an RDMA write or read to `rdma`, an atomic to `atomic`.

use super::engine::Engine;
use crate::bytes::{be32, hex, put_be16, put_be32};
use crate::cq::{error_cqe, syndrome, CQE_IS_SEND};
use crate::diag::{LastDoorbell, LastWqe, WqeSource, LAST_WQE_BYTES_SIZE};
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::protocol::Code;
use crate::qp::{service, QpState};
use crate::timing::Read;
use crate::wqe::{self, opcode, Ctrl, WqeError};
use serde_json::json;

/// The 64-byte unit a real HCA fetches in.
const FETCH_CHUNK: u64 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Bf,
    Dma,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Source::Bf => "bf",
            Source::Dma => "dma",
        }
    }
}

/// Where a WQE about to run came from, for the diag block's record.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Origin<'a> {
    /// A BlueFlame burst on BF page `page`, half `half`, as written (the
    /// WQE padded to 64 bytes).
    Bf {
        page: u32,
        half: u8,
        burst: &'a [u8],
    },
    /// Fetched from the send queue after a doorbell or fallback on UAR `page`.
    Dma { page: u32 },
}
impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    /// UAR +0x14: `BE32(qpn << 8)`.
    pub(crate) fn send_doorbell(&mut self, page: u32, data: &[u8]) {
        self.env.counters.global.send_doorbells += 1;
        let mut bytes = [0u8; 4];
        let n = data.len().min(4);
        bytes[..n].copy_from_slice(&data[..n]);
        self.diag.last_doorbell = LastDoorbell { page, bytes };
        if data.len() != 4 {
            self.env.protocol_error(
                Code::DoorbellBadSize,
                format!("UAR {page}: {}-byte send doorbell", data.len()),
            );
            return;
        }
        let v = be32(data, 0);
        if v & 0xff != 0 {
            self.env.protocol_error(
                Code::DoorbellBadValue,
                format!("UAR {page}: send doorbell {v:#010x} is not qpn << 8"),
            );
            return;
        }
        let qpn = v >> 8;
        let Some(qp) = self.qps.get(qpn) else {
            self.env.protocol_error(
                Code::DoorbellUnknownQp,
                format!("UAR {page}: send doorbell for qp {qpn:#x}, which does not exist"),
            );
            return;
        };
        let (state, usr_page) = (qp.state, qp.usr_page);
        self.env.counters.qp(qpn).send_doorbells += 1;
        if state.flushes() && usr_page == page {
            // The driver learns of the error from its CQ, after the fact:
            // what it posted meanwhile is flushed, as mlx4 does (in ERR,
            // and in SQE until SQERR2RTS).
            self.flush_sq(qpn);
            return;
        }
        if self.hold_post(qpn, page, "doorbell") {
            return;
        }
        if state != QpState::Rts {
            self.env.protocol_error(
                Code::DoorbellNotRts,
                format!("UAR {page}: send doorbell for qp {qpn:#x} in state {state:?}"),
            );
            return;
        }
        if usr_page != page {
            self.env.protocol_error(
                Code::DoorbellForeignUar,
                format!("send doorbell for qp {qpn:#x} on UAR {page}; its usr_page is {usr_page}"),
            );
            return;
        }
        self.env.post_start_ns = self.env.mmio_start_ns;
        let taken = self.run_sq(qpn, page);
        if !self.settle_announcement(qpn, taken, "doorbell") {
            self.env.protocol_error(
                Code::DoorbellNothingToFetch,
                format!("send doorbell for qp {qpn:#x}: no valid WQE at the consumer index"),
            );
        }
    }

    /// A doorbell or BF fallback announces one WQE; a scan that took `taken`
    /// ran `taken - 1` ahead of their announcements. One that took nothing is
    /// fine if an earlier scan ran its WQE. False: nothing was announced.
    pub(crate) fn settle_announcement(&mut self, qpn: u32, taken: u32, by: &str) -> bool {
        let Some(qp) = self.qps.get_mut(qpn) else {
            return true;
        };
        if taken > 0 {
            qp.sq_ahead += taken - 1;
            return true;
        }
        if qp.sq_ahead == 0 {
            return false;
        }
        qp.sq_ahead -= 1;
        self.env.counters.global.already_executed += 1;
        self.env
            .trace
            .record("already_executed", || json!({"qpn": qpn, "by": by}));
        true
    }

    /// Reads `len` bytes of the SQ from entry `index` + `skip`, wrapping at
    /// the end of the ring (one or two DMA reads). A WQE's first read pays
    /// the round trip; the rest of it (`skip` > 0, the wrapped part) is
    /// pipelined.
    fn sq_read(&mut self, qpn: u32, index: u32, skip: u64, out: &mut [u8]) -> bool {
        let Some(qp) = self.qps.get(qpn) else {
            return false;
        };
        let ring = qp.sq_bytes();
        let start = (qp.sq_entry_off(index) + skip) % ring;
        let first = (out.len() as u64).min(ring - start);
        // Where the bytes are: one span per page piece, the ring's wrap
        // splitting them too.
        let mut spans = qp.buf.spans(qp.sq_off + start, first);
        spans.extend(qp.buf.spans(qp.sq_off, out.len() as u64 - first));
        let mut read = if skip == 0 {
            Read::Fresh
        } else {
            Read::Continued
        };
        let mut at = 0;
        for (addr, len) in spans.into_iter().filter(|&(_, n)| n > 0) {
            let part = &mut out[at..at + len as usize];
            self.env.counters.global.sq_dma_reads += 1;
            if self.env.dma_read(addr, part, "wqe", read).is_err() {
                return false;
            }
            read = Read::Continued;
            at += len as usize;
        }
        true
    }

    /// Fetches and executes WQEs from the consumer index while they are
    /// valid, for a doorbell or fallback on UAR `page`. Returns how many
    /// were taken.
    pub(crate) fn run_sq(&mut self, qpn: u32, page: u32) -> u32 {
        let mut taken = 0;
        // A WQE an earlier scan ran ahead to was this announcement's.
        let ahead = self.qps.get(qpn).map_or(0, |qp| qp.sq_ahead);
        while let Some((idx, mut bytes, c)) = self.next_wqe(qpn, QpState::Rts, taken) {
            let (ring, first) = (
                self.qps.get(qpn).expect("next_wqe found it").sq_bytes(),
                bytes.len(),
            );
            taken += 1;
            // Only the announced WQE is timed from the announcement.
            self.env.post_timed = taken == 1 && ahead == 0;
            if c.wqe_bytes() as u64 > ring {
                self.env.counters.global.wqes_dma += 1;
                self.env.counters.qp(qpn).wqes_dma += 1;
                // Recorded with the bytes fetched: the rest is not in the ring.
                self.record_wqe(qpn, idx, &bytes, Origin::Dma { page });
                self.wqe_ready();
                self.wqe_failed(qpn, idx, &c, WqeError::DsTooLarge { ds: c.ds, ring });
                break;
            }
            if c.wqe_bytes() > first {
                bytes.resize(c.wqe_bytes(), 0);
                if !self.sq_read(qpn, idx, first as u64, &mut bytes[first..]) {
                    break;
                }
            }
            bytes.truncate(c.wqe_bytes());
            self.execute_wqe(qpn, idx, &bytes, Origin::Dma { page });
        }
        self.env.post_timed = true;
        taken
    }

    /// A QP in ERR executes nothing: every valid WQE from the consumer index
    /// completes with WR_FLUSH_ERR (mlx4 flushes; every WQE gets a CQE).
    pub(crate) fn flush_sq(&mut self, qpn: u32) {
        let mut taken = 0;
        let state = self.qps.get(qpn).map_or(QpState::Err, |qp| qp.state);
        if !state.flushes() {
            return;
        }
        while let Some((idx, _, c)) = self.next_wqe(qpn, state, taken) {
            taken += 1;
            self.env.counters.global.flushed += 1;
            self.env
                .trace
                .record("flush", || json!({"qpn": qpn, "index": idx}));
            self.send_error(qpn, idx, &c, syndrome::WR_FLUSH_ERR);
        }
    }

    /// The WQE at the consumer index of QP `qpn` in `state`, if it is valid
    /// (owner parity, DS != 0) and a scan that has `taken` already may take
    /// one more: its index, its first fetched bytes (64, or the ring if
    /// smaller) and its control segment.
    fn next_wqe(&mut self, qpn: u32, state: QpState, taken: u32) -> Option<(u32, Vec<u8>, Ctrl)> {
        let qp = self.qps.get(qpn)?;
        if qp.state != state || taken >= qp.sq_entries() {
            return None;
        }
        // RC is ordered: nothing runs past a WQE waiting for its RNR retry.
        if state == QpState::Rts && self.qps.rnr_pending(qpn) {
            return None;
        }
        let (idx, want_owner) = (qp.sq_ci, qp.owner_for(qp.sq_ci));
        let mut bytes = vec![0u8; FETCH_CHUNK.min(qp.sq_bytes()) as usize];
        if !self.sq_read(qpn, idx, 0, &mut bytes) {
            return None;
        }
        let c = Ctrl::decode(&bytes);
        (c.owner == want_owner && c.ds != 0).then_some((idx, bytes, c))
    }

    /// The diag block's "last executed WQE": the BF burst as written, or
    /// the bytes fetched.
    fn record_wqe(&mut self, qpn: u32, idx: u32, fetched: &[u8], origin: Origin) {
        let (source, page, half, bytes) = match origin {
            Origin::Bf { page, half, burst } => (WqeSource::BlueFlame, page, half, burst),
            Origin::Dma { page } => (WqeSource::Dma, page, 0, fetched),
        };
        self.diag.last_wqe = LastWqe {
            qpn,
            source,
            page,
            half: u32::from(half),
            index: idx,
            bytes: bytes[..bytes.len().min(LAST_WQE_BYTES_SIZE)].to_vec(),
        };
    }

    /// Executes one WQE (`bytes` = DS*16) that starts at SQ index `idx`.
    pub(crate) fn execute_wqe(&mut self, qpn: u32, idx: u32, bytes: &[u8], origin: Origin) {
        let Some(qp) = self.qps.get(qpn) else {
            return;
        };
        let source = match origin {
            Origin::Bf { .. } => Source::Bf,
            Origin::Dma { .. } => Source::Dma,
        };
        let (service, base) = (qp.service, qp.sq_off + qp.sq_entry_off(idx));
        let result = wqe::parse(bytes, service, base);
        let c = Ctrl::decode(bytes);
        self.record_wqe(qpn, idx, bytes, origin);
        match source {
            Source::Bf => {
                self.env.counters.global.wqes_bf += 1;
                self.env.counters.qp(qpn).wqes_bf += 1;
            }
            Source::Dma => {
                self.env.counters.global.wqes_dma += 1;
                self.env.counters.qp(qpn).wqes_dma += 1;
            }
        }
        self.env.trace.record("wqe", || {
            json!({"qpn": qpn, "index": idx, "opcode": c.opcode, "ds": c.ds,
                   "source": source.as_str(), "bytes": hex(bytes),
                   "post_t_ns": self.env.post_start_ns})
        });
        let w = match result {
            Ok(w) => w,
            Err(e) => {
                self.wqe_ready();
                self.wqe_failed(qpn, idx, &c, e);
                return;
            }
        };
        match c.opcode {
            // wqe::parse takes only SEND, SEND_IMM and NOP on MLX.
            opcode::SEND | opcode::SEND_IMM if service == service::MLX => {
                self.mad_send(qpn, idx, &w, bytes);
                return;
            }
            // wqe::parse gives a UD SEND its datagram segment.
            opcode::SEND | opcode::SEND_IMM if service == service::UD => {
                self.ud_send(qpn, idx, &w, bytes);
                return;
            }
            opcode::SEND | opcode::SEND_IMM => {
                self.send_message(qpn, idx, &w, bytes);
                return;
            }
            // wqe::parse takes RDMA writes on RC and UC only.
            opcode::RDMA_WRITE | opcode::RDMA_WRITE_IMM => {
                self.rdma_write(qpn, idx, &w, bytes);
                return;
            }
            // wqe::parse takes RDMA reads on strict RC QPs only.
            opcode::RDMA_READ => {
                self.rdma_read(qpn, idx, &w);
                return;
            }
            // wqe::parse takes atomics on RC QPs only.
            opcode::ATOMIC_CS | opcode::ATOMIC_FA => {
                self.atomic(qpn, idx, &w);
                return;
            }
            _ => {}
        }
        // A NOP is completed (wqe::parse takes no other opcode here).
        self.wqe_ready();
        self.advance(qpn, &c);
        if c.signaled() {
            let cqe = send_cqe(qpn, idx, c.opcode, w.payload);
            self.complete(qpn, cqe, false);
        }
    }

    /// The WQE's message is ready to transmit (or, for one that transmits
    /// nothing, the WQE is in the adapter): its post-to-wire latency is
    /// now - the post's start, counted if the WQE is timed
    /// (`Env::post_timed`). Returns the post's start.
    pub(crate) fn wqe_ready(&mut self) -> u64 {
        let start = self.env.post_start_ns;
        let ns = self.env.clock.now().saturating_sub(start);
        if self.env.post_timed {
            self.env.counters.post_to_wire(ns);
        }
        start
    }

    pub(crate) fn advance(&mut self, qpn: u32, c: &Ctrl) {
        if let Some(qp) = self.qps.get_mut(qpn) {
            let n = (c.wqe_bytes() as u64).div_ceil(qp.sq_stride()) as u32;
            qp.sq_ci = qp.sq_ci.wrapping_add(n);
        }
    }

    /// A WQE the model cannot parse: a protocol error, then the error CQE.
    fn wqe_failed(&mut self, qpn: u32, idx: u32, c: &Ctrl, e: WqeError) {
        self.env
            .protocol_error(e.code(), format!("qp {qpn:#x} WQE {idx}: {e}"));
        self.send_error(qpn, idx, c, syndrome::LOCAL_QP_OP_ERR);
    }

    /// A WQE that completes in error: consumed, QP to ERR (or SQE,
    /// `sq_hold::after_send_error`), an error CQE
    /// (always, signalled or not) with `syndrome`.
    pub(crate) fn send_error(&mut self, qpn: u32, idx: u32, c: &Ctrl, syndrome: u8) {
        self.advance(qpn, c);
        if let Some(qp) = self.qps.get_mut(qpn) {
            let to = super::sq_hold::after_send_error(qp.state, qp.service, syndrome);
            if to == QpState::Sqe && qp.state != QpState::Sqe {
                self.env.counters.global.sq_errors += 1;
            }
            qp.state = to;
        }
        self.complete(qpn, error_cqe(qpn, idx, syndrome, true), true);
    }

    /// A CQE on the QP's send CQ.
    pub(crate) fn complete(&mut self, qpn: u32, cqe: [u8; 32], solicited: bool) {
        if let Some(cqn) = self.qps.get(qpn).map(|qp| qp.cqn_send) {
            self.post_cqe(cqn, qpn, cqe, solicited);
        }
    }
}

/// A send CQE: my_qpn, byte_cnt (payload), wqe_index, IS_SEND | opcode.
pub(crate) fn send_cqe(qpn: u32, idx: u32, op: u8, payload: u64) -> [u8; 32] {
    let mut cqe = [0u8; 32];
    put_be32(&mut cqe, 0x00, qpn & 0xff_ffff);
    put_be32(&mut cqe, 0x14, payload.min(u64::from(u32::MAX)) as u32);
    put_be16(&mut cqe, 0x18, idx as u16);
    cqe[0x1f] = CQE_IS_SEND | (op & 0x1f);
    cqe
}
