//! The SRQ commands (`core/srq.c`; opcodes `include/linux/mlx4/cmd.h`),
//! in_mod the SRQN in every one:
//!
//! - SW2HW_SRQ (0x35): the context from the in mailbox; the SRQ's pages
//!   through the MTT, as a QP's (`Firmware::queue_buf`). The SRQN must lie
//!   inside INIT_HCA's SRQ table, above the reserved SRQ 0 (BAD_INDEX) and
//!   its context's ICM page be mapped (ICM_ERROR, `firmware`); the
//!   context's srqn must be the in_mod's, as a QP's (BAD_PARAM); an SRQ
//!   already in hardware ownership is refused with BAD_RES_STATE, as
//!   SW2HW_CQ of a CQ in hardware ownership is.
//! - HW2SW_SRQ (0x36): opmod 0 writes the context to the out mailbox,
//!   opmod 1 (`mlx4_srq_free`: no mailbox) does not. An SRQ not in
//!   hardware ownership: BAD_RES_STATE; an SRQ a QP still takes its
//!   receives from: RESOURCE_BUSY, as HW2SW_CQ of a CQ a QP completes to
//!   (the strict choice: mainline destroys the QPs first, as ib_core
//!   refuses to destroy an SRQ in use, `core/verbs.c:ib_destroy_srq_user`
//!   `if (atomic_read(&srq->usecnt)) return -EBUSY`).
//! - QUERY_SRQ (0x37): the context to the out mailbox, with the limit
//!   watermark armed now (`mlx4_srq_query` reads `limit_watermark`).
//! - ARM_SRQ (0x40): in_param the limit watermark (`mlx4_ARM_SRQ`), 0
//!   disarms. mlx4_ib refuses a limit of the SRQ's size or more
//!   (`ib/srq.c:mlx4_ib_modify_srq`); the model too (BAD_PARAM).
//!
//! Every refusal is counted (`srq_refused`, 0x6c0) and recorded
//! (`srq_refused`), the firmware's too (a context page not mapped is
//! also an ICM error, `icm_errors`).

use super::{Bad, Layout, Srq, SrqTable, RESERVED_SRQS};
use crate::command::{self, op, read_mailbox, write_mailbox, CmdError, CmdResult, CommandRequest};
use crate::env::Env;
use crate::firmware::Firmware;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::layout::{LOG_MAX_SRQ_SZ, MAX_DESC_SZ_RQ};
use serde_json::json;

/// An SRQ command `r` refused with `res`, by the firmware (an SRQN beyond
/// the table, its context's ICM page not mapped, the HCA not up) or by
/// the table: counted and recorded.
pub(crate) fn count_refused<M, I>(env: &mut Env<M, I>, r: &CommandRequest, res: &CmdResult) {
    let is_srq = matches!(
        r.opcode,
        op::SW2HW_SRQ | op::HW2SW_SRQ | op::QUERY_SRQ | op::ARM_SRQ
    );
    if let (true, Err(e)) = (is_srq, res) {
        env.counters.global.srq.srq_refused += 1;
        env.trace.record("srq_refused", || {
            json!({"opcode": r.opcode, "name": command::name(r.opcode),
                   "srqn": r.in_mod, "status": e.status()})
        });
    }
}

impl SrqTable {
    /// The SRQN in_mod names: above the reserved SRQs and below
    /// INIT_HCA's SRQ count.
    fn srqn(in_mod: u32, fw: &Firmware) -> Result<u32, CmdError> {
        let p = fw.hca().ok_or(CmdError::BadSysState)?;
        let limit = 1u64 << p.srqc.log_num.min(24);
        if in_mod < RESERVED_SRQS || u64::from(in_mod) >= limit {
            return Err(CmdError::BadIndex);
        }
        Ok(in_mod)
    }

    /// Runs SRQ command `r`; `in_use(srqn)`: a QP takes its receives from
    /// the SRQ. A refusal is counted and recorded.
    pub(crate) fn command<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        fw: &Firmware,
        in_use: impl Fn(u32) -> bool,
    ) -> CmdResult {
        let res = match r.opcode {
            op::SW2HW_SRQ => self.sw2hw(env, r, fw),
            op::HW2SW_SRQ => self.hw2sw(env, r, fw, in_use),
            op::QUERY_SRQ => self.query(env, r, fw),
            op::ARM_SRQ => self.arm(env, r, fw),
            _ => Err(CmdError::BadOp),
        };
        count_refused(env, r, &res);
        res
    }

    fn sw2hw<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        let srqn = Self::srqn(r.in_mod, fw)?;
        if self.contains(srqn) {
            return Err(CmdError::BadResState);
        }
        let c = read_mailbox(env, r.in_param, super::SRQ_CTX_SIZE)?;
        let l = Layout::parse(&c, LOG_MAX_SRQ_SZ, MAX_DESC_SZ_RQ).map_err(|b| match b {
            Bad::Size => CmdError::BadSize,
            Bad::Param => CmdError::BadParam,
        })?;
        if l.srqn != srqn {
            return Err(CmdError::BadParam);
        }
        let buf = fw.queue_buf(env, l.mtt, l.log_page_size, l.bytes())?;
        let srq = Srq::new(&l, &c, buf);
        env.trace.record("srq", || {
            json!({"srqn": srqn, "op": "sw2hw", "log_size": srq.log_size,
                   "stride": srq.stride(), "pd": srq.pd, "db": srq.db,
                   "buf": srq.buf.base(), "limit": srq.limit})
        });
        self.insert(srq);
        Ok(None)
    }

    fn hw2sw<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        fw: &Firmware,
        in_use: impl Fn(u32) -> bool,
    ) -> CmdResult {
        let srqn = Self::srqn(r.in_mod, fw)?;
        let Some(srq) = self.get(srqn) else {
            return Err(CmdError::BadResState);
        };
        if in_use(srqn) {
            return Err(CmdError::ResourceBusy);
        }
        match r.op_mod {
            0 => write_mailbox(env, r.out_param, &srq.context())?,
            1 => {}
            _ => return Err(CmdError::BadParam),
        }
        let consumed = srq.consumed;
        self.remove(srqn);
        env.trace.record(
            "srq",
            || json!({"srqn": srqn, "op": "hw2sw", "consumed": consumed}),
        );
        Ok(None)
    }

    fn query<M: GuestMemory, I: Irq>(
        &self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        let srqn = Self::srqn(r.in_mod, fw)?;
        let srq = self.get(srqn).ok_or(CmdError::BadResState)?;
        write_mailbox(env, r.out_param, &srq.context())?;
        Ok(None)
    }

    fn arm<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        let srqn = Self::srqn(r.in_mod, fw)?;
        let srq = self.get_mut(srqn).ok_or(CmdError::BadResState)?;
        if r.in_param >= u64::from(srq.entries()) {
            return Err(CmdError::BadParam);
        }
        srq.limit = r.in_param as u16;
        let limit = srq.limit;
        env.trace
            .record("srq", || json!({"srqn": srqn, "op": "arm", "limit": limit}));
        Ok(None)
    }
}
