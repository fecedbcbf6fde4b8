//! The analyzer's counters: global, per QP, per protocol-error code and per
//! fallback reason. The diagnostic block reads them; the summary dumps them.

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
    pub cqes: u64,
}

#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub global: Global,
    pub qps: BTreeMap<u32, PerQp>,
    pub by_code: BTreeMap<Code, u64>,
    pub by_reason: BTreeMap<FallbackReason, u64>,
}

impl Counters {
    pub fn qp(&mut self, qpn: u32) -> &mut PerQp {
        self.qps.entry(qpn).or_default()
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

    /// Diagnostic block counter at `off` (0x20..0xbf), `qp_select` for the
    /// per-QP ones. None for offsets that hold no counter.
    pub fn diag_value(&self, off: u64, qp_select: u32) -> Option<u64> {
        let g = &self.global;
        let zero = PerQp::default();
        let q = self.qps.get(&qp_select).unwrap_or(&zero);
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
        ];
        match checks.iter().find(|(_, ok)| !ok) {
            Some((name, _)) => Err(format!("counter invariant broken: {name}: {self:?}")),
            None => Ok(()),
        }
    }

    pub fn summary(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.global).unwrap_or_default();
        if let serde_json::Value::Object(m) = &mut v {
            let qps: serde_json::Map<_, _> = self
                .qps
                .iter()
                .map(|(qpn, c)| (qpn.to_string(), serde_json::to_value(c).unwrap_or_default()))
                .collect();
            m.insert("qps".into(), qps.into());
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
        }
        v
    }
}
