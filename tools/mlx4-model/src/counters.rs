//! The analyzer's counters: global, per QP, per UAR, per protocol-error code
//! and per fallback reason, and the protection faults and lifetime counters, which a
//! counter reset keeps. The diagnostic block reads them; the summary dumps
//! them.

use crate::protocol::{Code, FallbackReason};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct Global {
    pub protocol_errors: u64,
    pub unexpected_protocol_errors: u64,
    pub wqes_bf: u64,
    pub wqes_dma: u64,
    pub bf_fallbacks: u64,
    pub send_doorbells: u64,
    pub cqes: u64,
    pub eqes: u64,
    pub msix_irqs: u64,
    pub commands: u64,
    pub sq_dma_reads: u64,
    /// MMIO writes to BAR2, whatever they hit.
    pub bar2_writes: u64,
    /// Doorbells and BF bursts whose WQE a send-queue scan had already run
    /// (see `Qp::sq_ahead`): neither an error nor a second execution.
    pub already_executed: u64,
    /// WQEs posted to a QP in ERR, completed with WR_FLUSH_ERR.
    pub flushed: u64,
    /// Receive WQEs consumed by a delivered SEND (0x500).
    pub deliveries: u64,
    /// Receive CQEs written, receive error CQEs included (0x508).
    pub recv_cqes: u64,
    /// SENDs and RDMA_WRITE_IMMs that found the receiver's RQ empty (0x510):
    /// on RC each an RNR NAK, retried or not (`datapath::rnr`).
    pub rnr_errors: u64,
    /// SENDs whose destination QP could not take them (0x518).
    pub peer_errors: u64,
    /// SENDs longer than the receive WQE's buffers (0x520).
    pub recv_length_errors: u64,
    /// DMA writes of received payload (0x528) and their bytes (0x530).
    pub payload_dma_writes: u64,
    pub payload_bytes: u64,
    /// DMA writes of every kind (0x538).
    pub dma_writes: u64,
    /// Bytes of all MMIO writes to BAR2 (0x540).
    pub bar2_bytes: u64,
    /// Data segments refused by a key check, gather or scatter (0x548;
    /// each is also a local protection fault, `Faults`).
    pub refused_segments: u64,
    /// CQs that overran and went to the error state (0x550).
    pub cq_overruns: u64,
    /// Modelled post-to-wire latency: last WQE (0x558), sum (0x560), ns,
    /// of the timed WQEs (0x660; not those a doorbell's scan ran ahead to,
    /// `Env::post_timed`).
    pub last_post_to_wire_ns: u64,
    pub sum_post_to_wire_ns: u64,
    pub post_to_wire_samples: u64,
    /// Modelled one-way latency of delivered SENDs: last (0x568), sum
    /// (0x570), ns.
    pub last_one_way_ns: u64,
    pub sum_one_way_ns: u64,
    /// Modelled one-way latency of RDMA writes whose data landed (their
    /// post's first MMIO write to the last byte written, or to the
    /// responder's CQE of an _IMM): sum (0x658), ns, of the timed ones
    /// (0x668).
    pub sum_rdma_write_one_way_ns: u64,
    pub rdma_write_one_way_samples: u64,
    /// RDMA writes whose data landed, zero-length ones and _IMM included
    /// (0x5b0), and the bytes they wrote (0x5b8).
    pub rdma_writes: u64,
    pub rdma_bytes: u64,
    /// RDMA reads whose data landed in the requester's memory (0x618), and
    /// the bytes they read (0x620).
    pub rdma_reads: u64,
    pub rdma_read_bytes: u64,
    /// Atomics executed (their original value landed in the requester's
    /// data segment): CMP_SWAP, matched or not (0x670), and FETCH_ADD
    /// (0x678).
    pub atomics_cmp_swap: u64,
    pub atomics_fetch_add: u64,
    /// Atomics refused by the requester's data segment, the alignment, the
    /// responder's RAE or the rkey (`datapath::atomic` rules c–f; 0x680),
    /// each also counted where its kind is (a local or remote protection
    /// fault, ...).
    pub atomics_refused: u64,
    /// UD SENDs transmitted: past the sender's rules, completed in success
    /// whatever became of the datagram (`datapath::ud`; 0x688). Each one
    /// is delivered (0x690), dropped (0x698) or refused by the receive
    /// WQE it reached (0x6a8).
    pub ud_sends: u64,
    pub ud_delivered: u64,
    pub ud_dropped: u64,
    /// UD SENDs the sender refused: the address vector's PD or port, the
    /// length, a gather (error CQE; 0x6a0).
    pub ud_refused: u64,
    pub ud_recv_errors: u64,
    /// MTT entries written by WRITE_MTT (0x5c0).
    pub mtt_entries_written: u64,
    /// CQEs not written because their CQ is in the error state (the one
    /// that overran it included). Summary only, as are the rest.
    pub cqes_dropped: u64,
    /// SENDs refused on the sender for a gather it may not read (lkey or
    /// DMA): error CQE LOCAL_PROT_ERR.
    pub gather_errors: u64,
    /// SENDs refused on the receiver for a scatter it may not write (lkey
    /// or DMA): error CQEs LOCAL_PROT_ERR / REMOTE_OP_ERR.
    pub scatter_errors: u64,
    /// SENDs the receiver could not take because its doorbell record or
    /// receive WQE could not be read: REMOTE_OP_ERR.
    pub receive_failures: u64,
    /// SENDs and RDMA writes longer than the model's largest message:
    /// LOCAL_LENGTH_ERR.
    pub messages_too_long: u64,
    /// RDMA writes that passed the rkey check but whose destination page
    /// the model could not write (`dma_unmapped`): REMOTE_ACCESS_ERR.
    pub rdma_dma_errors: u64,
    /// Commands refused with BAD_SYS_STATE, the firmware
    /// not running or the HCA not initialised for them (`firmware`; 0x5e8).
    pub fw_refused: u64,
    /// Commands failed with ICM_ERROR (a context's ICM
    /// page not mapped, firmware area or auxiliary ICM short, ICM mapped
    /// twice; 0x5f0).
    pub icm_errors: u64,
    /// Sends on the special QPs (MLX) completed; their
    /// packets go nowhere (`datapath::mad`; 0x5f8).
    pub mad_sends: u64,
    /// What the model refuses where a real ConnectX-3's
    /// behaviour is unknown to it (a fast-register MPT, an entry SYNC_TPT
    /// cannot decode, a MODIFY_CQ it does not take, ...), each also
    /// recorded (`fw_refused` with a `reason`). Summary only.
    pub fw_unmodelled: u64,
    /// Shared receive queues (0x6b0..0x6c7, `srq::SrqCounters`).
    #[serde(flatten)]
    pub srq: crate::srq::SrqCounters,
    /// RNR NAKs retried (`datapath::rnr`): each a new delivery attempt of
    /// the WQE an RNR NAK left waiting (its NAK counted in `rnr_errors`).
    pub rnr_retries: u64,
    /// WQEs completed with RNR_RETRY_EXC_ERR: their rnr_retry spent.
    pub rnr_retry_exceeded: u64,
    /// Send doorbells and BlueFlame bursts held: the QP in SQD or its SQ
    /// behind an RNR retry. Each is settled when the SQ runs again.
    pub sq_held: u64,
    /// SQ_DRAINED events RTS2SQD asked for.
    pub sq_drained_events: u64,
    /// QP transitions refused for an optpar bit IB does not allow there
    /// (`qp::transition`): BAD_PARAM.
    pub qp_optpar_refused: u64,
    /// Send WQEs of UD, UC and MLX QPs that completed in error and took
    /// the QP to SQE.
    pub sq_errors: u64,
}

/// Protection faults: kept across a counter reset (diag +0x18), so that a
/// test can assert at its very end that nothing in the whole run made the
/// model attempt an access outside a registered region.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct Faults {
    /// Data segments refused by a key check, gather or scatter (0x5a0).
    pub local_prot_faults: u64,
    /// RDMA writes refused by the rkey check (0x5a8).
    pub remote_access_faults: u64,
}

/// Counted since the model started, kept across a counter reset and a
/// device reset: a test compares them before and after a driver's teardown.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct Lifetime {
    /// Device resets, reset register or the client's DEVICE_RESET (0x5d0).
    pub device_resets: u64,
    /// Injected command faults that fired (CMD_FAULT, 0x5cc).
    pub command_faults: u64,
    /// Injected data faults that fired (DATA_FAULT, 0x62c).
    pub data_faults: u64,
    /// DMA accesses and MSI-X messages refused because Bus Master Enable
    /// was clear (0x5e0).
    pub no_master_dma: u64,
}

#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct PerQp {
    pub wqes_bf: u64,
    pub wqes_dma: u64,
    pub fallback_foreign_page: u64,
    pub fallback_counter_owner: u64,
    pub fallback_order: u64,
    pub fallback_forced: u64,
    pub send_doorbells: u64,
    /// CQEs for this QP, send and receive.
    pub cqes: u64,
    /// SENDs delivered to this QP (0x580) and their payload bytes (0x588).
    pub receives: u64,
    pub payload_bytes: u64,
    /// The UAR its context named (`usr_page`) when it last left RESET
    /// (0x650), kept after the QP is gone: which pages its posts belong to.
    pub uar: Option<u32>,
}

/// MMIO writes by UAR index (UAR_SELECT): to its UAR page (BAR2 page `u`:
/// doorbells) and to its BlueFlame page (page `num_uars + u`), whatever
/// they carried, so that a test can tell whose pages a run wrote.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct PerUar {
    /// Writes to the UAR page (0x638).
    pub uar_writes: u64,
    /// Writes to the BlueFlame page (0x640) and their bytes (0x648).
    pub bf_writes: u64,
    pub bf_bytes: u64,
}

#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub global: Global,
    pub faults: Faults,
    pub lifetime: Lifetime,
    pub qps: BTreeMap<u32, PerQp>,
    pub uars: BTreeMap<u32, PerUar>,
    pub by_code: BTreeMap<Code, u64>,
    pub by_reason: BTreeMap<FallbackReason, u64>,
    /// Dropped UD datagrams by reason (`datapath::ud::Drop`).
    pub ud_drops: BTreeMap<&'static str, u64>,
}

impl Counters {
    /// The counter reset (diag +0x18): everything but the faults and the
    /// lifetime counters.
    pub fn reset(&mut self) {
        *self = Counters {
            faults: self.faults.clone(),
            lifetime: self.lifetime.clone(),
            ..Counters::default()
        };
    }

    pub fn qp(&mut self, qpn: u32) -> &mut PerQp {
        self.qps.entry(qpn).or_default()
    }

    pub fn uar(&mut self, index: u32) -> &mut PerUar {
        self.uars.entry(index).or_default()
    }

    pub fn protocol_error(&mut self, code: Code, expected: bool) {
        self.global.protocol_errors += 1;
        if !expected {
            self.global.unexpected_protocol_errors += 1;
        }
        *self.by_code.entry(code).or_default() += 1;
    }

    pub fn fallback(&mut self, qpn: u32, reason: FallbackReason) {
        self.global.bf_fallbacks += 1;
        *self.by_reason.entry(reason).or_default() += 1;
        let q = self.qp(qpn);
        match reason {
            FallbackReason::ForeignPage => q.fallback_foreign_page += 1,
            FallbackReason::Counter | FallbackReason::Owner => q.fallback_counter_owner += 1,
            FallbackReason::OutOfOrder | FallbackReason::Incomplete | FallbackReason::Malformed => {
                q.fallback_order += 1
            }
            FallbackReason::Forced => q.fallback_forced += 1,
        }
    }

    /// A UD datagram dropped for `reason`.
    pub fn ud_drop(&mut self, reason: &'static str) {
        self.global.ud_dropped += 1;
        *self.ud_drops.entry(reason).or_default() += 1;
    }

    /// The post-to-wire latency of one executed WQE.
    pub fn post_to_wire(&mut self, ns: u64) {
        self.global.last_post_to_wire_ns = ns;
        self.global.sum_post_to_wire_ns = self.global.sum_post_to_wire_ns.saturating_add(ns);
        self.global.post_to_wire_samples += 1;
    }

    /// The one-way latency of one delivered SEND.
    pub fn one_way(&mut self, ns: u64) {
        self.global.last_one_way_ns = ns;
        self.global.sum_one_way_ns = self.global.sum_one_way_ns.saturating_add(ns);
    }

    /// The one-way latency of one RDMA write whose data landed.
    pub fn rdma_write_one_way(&mut self, ns: u64) {
        self.global.sum_rdma_write_one_way_ns =
            self.global.sum_rdma_write_one_way_ns.saturating_add(ns);
        self.global.rdma_write_one_way_samples += 1;
    }

    /// Diagnostic block counter at `off` (0x20..0xbf, 0x500..0x58f but the
    /// clock, 0x5a0..0x5c7, 0x5d0, 0x5e0..0x5ff, 0x618..0x627,
    /// 0x638..0x6c7), `qp_select` and `uar_select` for the per-QP and
    /// per-UAR ones.
    /// None for offsets that hold no counter.
    pub fn diag_value(&self, off: u64, qp_select: u32, uar_select: u32) -> Option<u64> {
        let g = &self.global;
        let zero = PerQp::default();
        let q = self.qps.get(&qp_select).unwrap_or(&zero);
        let zero_uar = PerUar::default();
        let u = self.uars.get(&uar_select).unwrap_or(&zero_uar);
        Some(match off {
            0x20 => g.protocol_errors,
            0x28 => g.unexpected_protocol_errors,
            0x30 => g.wqes_bf,
            0x38 => g.wqes_dma,
            0x40 => g.bf_fallbacks,
            0x48 => g.send_doorbells,
            0x50 => g.cqes,
            0x58 => g.eqes,
            0x60 => g.msix_irqs,
            0x68 => g.commands,
            0x70 => g.sq_dma_reads,
            0x78 => g.bar2_writes,
            0x80 => q.wqes_bf,
            0x88 => q.wqes_dma,
            0x90 => q.fallback_foreign_page,
            0x98 => q.fallback_counter_owner,
            0xa0 => q.fallback_order,
            0xa8 => q.fallback_forced,
            0xb0 => q.send_doorbells,
            0xb8 => q.cqes,
            0x500 => g.deliveries,
            0x508 => g.recv_cqes,
            0x510 => g.rnr_errors,
            0x518 => g.peer_errors,
            0x520 => g.recv_length_errors,
            0x528 => g.payload_dma_writes,
            0x530 => g.payload_bytes,
            0x538 => g.dma_writes,
            0x540 => g.bar2_bytes,
            0x548 => g.refused_segments,
            0x550 => g.cq_overruns,
            0x558 => g.last_post_to_wire_ns,
            0x560 => g.sum_post_to_wire_ns,
            0x568 => g.last_one_way_ns,
            0x570 => g.sum_one_way_ns,
            0x580 => q.receives,
            0x588 => q.payload_bytes,
            0x5a0 => self.faults.local_prot_faults,
            0x5a8 => self.faults.remote_access_faults,
            0x5b0 => g.rdma_writes,
            0x5b8 => g.rdma_bytes,
            0x5c0 => g.mtt_entries_written,
            0x5d0 => self.lifetime.device_resets,
            0x5e0 => self.lifetime.no_master_dma,
            0x5e8 => g.fw_refused,
            0x5f0 => g.icm_errors,
            0x5f8 => g.mad_sends,
            0x618 => g.rdma_reads,
            0x620 => g.rdma_read_bytes,
            0x638 => u.uar_writes,
            0x640 => u.bf_writes,
            0x648 => u.bf_bytes,
            // The UAR in the low half, 1 in the high half once it is known.
            0x650 => q.uar.map_or(0, |uar| u64::from(uar) | (1 << 32)),
            0x658 => g.sum_rdma_write_one_way_ns,
            0x660 => g.post_to_wire_samples,
            0x668 => g.rdma_write_one_way_samples,
            0x670 => g.atomics_cmp_swap,
            0x678 => g.atomics_fetch_add,
            0x680 => g.atomics_refused,
            0x688 => g.ud_sends,
            0x690 => g.ud_delivered,
            0x698 => g.ud_dropped,
            0x6a0 => g.ud_refused,
            0x6a8 => g.ud_recv_errors,
            o @ 0x6b0..0x6c8 => return g.srq.diag_value(o),
            _ => return None,
        })
    }

    /// Invariants between the counters (checked by the fuzz test).
    pub fn check_consistency(&self) -> Result<(), String> {
        let g = &self.global;
        let sum = |f: fn(&PerQp) -> u64| self.qps.values().map(f).sum::<u64>();
        let checks = [
            (
                "unexpected <= all",
                g.unexpected_protocol_errors <= g.protocol_errors,
            ),
            ("wqes_bf", sum(|q| q.wqes_bf) == g.wqes_bf),
            ("wqes_dma", sum(|q| q.wqes_dma) == g.wqes_dma),
            ("cqes", sum(|q| q.cqes) == g.cqes),
            (
                "fallbacks",
                sum(|q| {
                    q.fallback_foreign_page
                        + q.fallback_counter_owner
                        + q.fallback_order
                        + q.fallback_forced
                }) == g.bf_fallbacks,
            ),
            (
                "reasons",
                self.by_reason.values().sum::<u64>() == g.bf_fallbacks,
            ),
            (
                "codes",
                self.by_code.values().sum::<u64>() == g.protocol_errors,
            ),
            ("doorbells", sum(|q| q.send_doorbells) <= g.send_doorbells),
            ("dma reads", g.wqes_dma <= g.sq_dma_reads),
            ("receives", sum(|q| q.receives) == g.deliveries),
            ("payload bytes", sum(|q| q.payload_bytes) == g.payload_bytes),
            ("payload writes", g.payload_dma_writes <= g.dma_writes),
            ("receive cqes", g.recv_cqes <= g.cqes),
            ("overruns", g.cq_overruns <= g.cqes_dropped),
            (
                "refused segments are local faults",
                g.refused_segments <= self.faults.local_prot_faults,
            ),
            ("rdma writes", g.rdma_writes <= g.wqes_bf + g.wqes_dma),
            ("rdma reads", g.rdma_reads <= g.wqes_bf + g.wqes_dma),
            (
                "atomics",
                g.atomics_cmp_swap + g.atomics_fetch_add + g.atomics_refused
                    <= g.wqes_bf + g.wqes_dma,
            ),
            (
                "ud sends end once",
                g.ud_delivered + g.ud_dropped + g.ud_recv_errors == g.ud_sends,
            ),
            (
                "ud drop reasons",
                self.ud_drops.values().sum::<u64>() == g.ud_dropped,
            ),
            ("ud delivered", g.ud_delivered <= g.deliveries),
            (
                "ud sends",
                g.ud_sends + g.ud_refused <= g.wqes_bf + g.wqes_dma,
            ),
            (
                "uar pages",
                self.uars
                    .values()
                    .map(|u| u.uar_writes + u.bf_writes)
                    .sum::<u64>()
                    <= g.bar2_writes,
            ),
        ];
        match checks.iter().find(|(_, ok)| !ok) {
            Some((name, _)) => Err(format!("counter invariant broken: {name}: {self:?}")),
            None => Ok(()),
        }
    }

    pub fn summary(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.global).unwrap_or_default();
        if let serde_json::Value::Object(m) = &mut v {
            if let Ok(serde_json::Value::Object(f)) = serde_json::to_value(&self.faults) {
                m.extend(f);
            }
            if let Ok(serde_json::Value::Object(l)) = serde_json::to_value(&self.lifetime) {
                m.extend(l);
            }
            let qps: serde_json::Map<_, _> = self
                .qps
                .iter()
                .map(|(qpn, c)| (qpn.to_string(), serde_json::to_value(c).unwrap_or_default()))
                .collect();
            m.insert("qps".into(), qps.into());
            let uars: serde_json::Map<_, _> = self
                .uars
                .iter()
                .map(|(u, c)| (u.to_string(), serde_json::to_value(c).unwrap_or_default()))
                .collect();
            m.insert("uars".into(), uars.into());
            let codes: serde_json::Map<_, _> = self
                .by_code
                .iter()
                .map(|(c, n)| (c.as_str().to_string(), (*n).into()))
                .collect();
            m.insert("protocol_error_codes".into(), codes.into());
            let reasons: serde_json::Map<_, _> = self
                .by_reason
                .iter()
                .map(|(r, n)| (r.as_str().to_string(), (*n).into()))
                .collect();
            m.insert("fallback_reasons".into(), reasons.into());
            let drops: serde_json::Map<_, _> = self
                .ud_drops
                .iter()
                .map(|(r, n)| (r.to_string(), (*n).into()))
                .collect();
            m.insert("ud_drop_reasons".into(), drops.into());
        }
        v
    }
}
