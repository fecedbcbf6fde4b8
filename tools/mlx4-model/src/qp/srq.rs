//! A QP's shared receive queue: a QP whose context has srqn bit 24 set
//! (ctx 0xac, `ib/qp.c:__mlx4_ib_modify_qp`: `context->srqn =
//! cpu_to_be32(1 << 24 | srqn)`) has no RQ of its own and takes its
//! receives from that SRQ (`datapath::srq_recv`). The QP table holds the
//! SRQ table: the SRQs go with the QPs at CLOSE_HCA and device reset.

use super::{Qp, QpTable};
use crate::bytes::be32;
use crate::command::{CmdError, CmdResult, CommandRequest};
use crate::env::Env;
use crate::firmware::Firmware;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use serde_json::json;

/// ctx 0xac: bit 24 "uses an SRQ", bits 23..0 its SRQN.
const SRQN: usize = 0xac;
const USES_SRQ: u32 = 1 << 24;

impl Qp {
    /// The SRQ the QP takes its receives from, if it uses one.
    pub fn srqn(&self) -> Option<u32> {
        let w = be32(&self.ctx, SRQN);
        (w & USES_SRQ != 0).then_some(w & 0xff_ffff)
    }

    /// The QP has a receive queue, its own or an SRQ.
    pub fn receives(&self) -> bool {
        self.rq.is_some() || self.srqn().is_some()
    }
}

impl QpTable {
    /// RST2INIT of `qp`: the SRQ it names must be in hardware ownership;
    /// else BAD_RESOURCE, as for a CQ that is not (`qp_from_mailbox`),
    /// counted (`srq_refused`) and recorded.
    pub(crate) fn check_srq<M, I>(&self, env: &mut Env<M, I>, qp: &Qp) -> Result<(), CmdError> {
        let Some(srqn) = qp.srqn() else {
            return Ok(());
        };
        if self.srqs.contains(srqn) {
            return Ok(());
        }
        env.counters.global.srq.srq_refused += 1;
        env.trace.record(
            "srq_refused",
            || json!({"name": "RST2INIT_QP", "qpn": qp.qpn, "srqn": srqn}),
        );
        Err(CmdError::BadResource)
    }

    /// SW2HW_SRQ, HW2SW_SRQ, QUERY_SRQ, ARM_SRQ (`srq::commands`): an SRQ a
    /// QP takes its receives from stays in hardware ownership.
    pub(crate) fn srq_command<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        let qps = &self.qps;
        let in_use = |srqn| qps.values().any(|qp| qp.srqn() == Some(srqn));
        self.srqs.command(env, r, fw, in_use)
    }

    /// The index of the receive WQE QP `d` takes next: its RQ's consumer
    /// index, or its SRQ's head (what the receive CQE's wqe_index names:
    /// libmlx4 `cq.c` frees that SRQ WQE by it).
    pub fn recv_index(&self, d: u32) -> u32 {
        let Some(qp) = self.qps.get(&d) else {
            return 0;
        };
        match qp.srqn() {
            Some(n) => self.srqs.get(n).map_or(0, |s| u32::from(s.head)),
            None => qp.rq_ci,
        }
    }
}
