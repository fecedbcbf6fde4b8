//! The receiving side a SEND (RC, UC, UD) and an RDMA_WRITE_IMM share: the
//! RQ doorbell record, the receive WQE at the consumer index with every
//! segment's key checked, the scatter of a message into it from any byte
//! of its list, and the consumed WQE's completion, success or error. A QP
//! on an SRQ takes the WQE at the SRQ's head instead (`srq_recv`).

use super::engine::Engine;
use crate::cq::error_cqe;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::keys::{self, Access, Target};
use crate::protocol::Code;
use crate::qp::QpState;
use crate::rq::{self, RecvSeg, RQ_DB_LEN};
use crate::timing::Read;

/// A receive WQE that may take a message: its scatter list and each
/// segment's checked target.
pub(crate) struct Landing {
    pub segs: Vec<RecvSeg>,
    pub targets: Vec<Target>,
}

/// Why a receive WQE cannot take a message (`Engine::receive_wqe`).
pub(crate) enum Refused {
    /// It could not be read.
    Unreadable,
    /// A segment of its list failed its key check.
    Scatter,
}

impl<M: GuestMemory, I: Irq> Engine<'_, M, I> {
    /// Reads `d`'s RQ doorbell record: the receive WQEs posted and not
    /// consumed, at most the RQ's size (a head further ahead is protocol
    /// error `rq_head_ahead`); None if the record cannot be read (or `d`
    /// is gone).
    pub(crate) fn rq_available(&mut self, d: u32) -> Option<u32> {
        if let Some(srqn) = self.srq_of(d) {
            return self.srq_available(d, srqn);
        }
        let dq = self.qps.get(d)?;
        let (db, entries, ci) = (dq.rq_db, dq.rq_entries(), dq.rq_ci);
        let mut rec = [0u8; RQ_DB_LEN];
        self.env
            .dma_read(db, &mut rec, "db_rec", Read::Cached)
            .ok()?;
        let head = rq::head(&rec);
        let (avail, ahead) = rq::available(head, ci, entries);
        if ahead {
            self.env.protocol_error(
                Code::RqHeadAhead,
                format!(
                    "qp {d:#x}: RQ head {head:#x} is more than {entries} ahead of \
                     the consumer index {:#x}",
                    ci as u16
                ),
            );
        }
        Some(avail)
    }

    /// The receive WQE at `d`'s consumer index (or its SRQ's head), read,
    /// with every segment of its list key-checked with LOCAL_WRITE (`d`'s
    /// rlkey, and its pd or its SRQ's),
    /// whether the message reaches it or not. Err(Unreadable): the WQE
    /// could not be read (`dma_unmapped`); Err(Refused): segments failed
    /// their check, each counted (0x548) and traced. Nothing consumed.
    pub(crate) fn receive_wqe(&mut self, d: u32) -> Result<Landing, Refused> {
        let rlkey = self.qps.get(d).ok_or(Refused::Unreadable)?.rlkey;
        let at = self.recv_wqe_at(d).ok_or(Refused::Unreadable)?;
        let mut rwqe = vec![0u8; at.stride];
        if self
            .env
            .dma_read(at.addr, &mut rwqe, "rwqe", Read::Cached)
            .is_err()
        {
            return Err(Refused::Unreadable);
        }
        if let Some(srqn) = at.srqn {
            self.srq_wqe_read(srqn, &rwqe);
        }
        let (pd, segs) = (at.pd, rq::parse(rwqe.get(at.skip..).unwrap_or_default()));
        let mut targets = Vec::with_capacity(segs.len());
        let mut refused = 0u64;
        for g in &segs {
            let len = u64::from(g.len);
            match keys::check(self.mrs, rlkey, pd, g.lkey, g.addr, len, Access::LocalWrite) {
                Ok(t) => targets.push(t),
                Err(f) => {
                    refused += 1;
                    self.prot_fault(d, "scatter", g.lkey, g.addr, len, f);
                }
            }
        }
        if refused > 0 {
            self.env.counters.global.refused_segments += refused;
            self.env.counters.global.scatter_errors += 1;
            return Err(Refused::Scatter);
        }
        Ok(Landing { segs, targets })
    }

    /// DMA-writes `data` into the scatter list of `l` (`d`'s receive WQE)
    /// from byte `at` of the list on, one write per page piece (`what`:
    /// "payload", counted as received payload, or "grh"). Err: a write
    /// failed (`dma_unmapped`); what came before it landed.
    pub(crate) fn scatter(
        &mut self,
        d: u32,
        l: &Landing,
        at: u64,
        data: &[u8],
        what: &'static str,
    ) -> Result<(), ()> {
        let (mut list_off, mut done) = (0u64, 0usize);
        for (g, &t) in l.segs.iter().zip(&l.targets) {
            let seg_len = u64::from(g.len);
            let skip = at.saturating_sub(list_off).min(seg_len);
            list_off += seg_len;
            let n = ((seg_len - skip) as usize).min(data.len() - done);
            for (addr, k) in keys::translate(self.mrs, t, g.addr + skip, n as u64) {
                if self
                    .env
                    .dma_write(addr, &data[done..done + k], what)
                    .is_err()
                {
                    return Err(());
                }
                if what == "payload" {
                    self.env.counters.global.payload_dma_writes += 1;
                    self.env.counters.global.payload_bytes += k as u64;
                    self.env.counters.qp(d).payload_bytes += k as u64;
                }
                done += k;
            }
        }
        Ok(())
    }

    /// A message landed in `d`'s receive WQE `ci`: consumed, counted, its
    /// receive CQE `cqe` on `cqn`. Returns its one-way latency from the
    /// post's start `start` (counted).
    pub(crate) fn received(
        &mut self,
        d: u32,
        ci: u32,
        cqn: Option<u32>,
        cqe: [u8; 32],
        solicited: bool,
        start: u64,
    ) -> u64 {
        self.consume_recv(d, ci);
        self.env.counters.global.deliveries += 1;
        self.env.counters.qp(d).receives += 1;
        let written = self.post_cqe(cqn.unwrap_or(0), d, cqe, solicited);
        if written.is_some() {
            self.env.counters.global.recv_cqes += 1;
        }
        let one_way = written
            .unwrap_or(self.env.clock.now())
            .saturating_sub(start);
        self.env.counters.one_way(one_way);
        one_way
    }

    /// A receive WQE completed in error: consumed, `d` to ERR, the error
    /// CQE (IS_SEND clear) on its receive CQ.
    pub(crate) fn receive_error(&mut self, d: u32, ci: u32, syn: u8) {
        if self.qps.get(d).is_none() {
            return;
        }
        self.consume_recv(d, ci);
        let Some(dq) = self.qps.get_mut(d) else {
            return;
        };
        dq.state = QpState::Err;
        let cqn = dq.cqn_recv.unwrap_or(0);
        if self
            .post_cqe(cqn, d, error_cqe(d, ci, syn, false), true)
            .is_some()
        {
            self.env.counters.global.recv_cqes += 1;
        }
    }
}
