//! MODIFY_CQ (0x2c), in_mod the CQN, the in mailbox a CQ context of which
//! each op_modifier reads its own fields (`core/cq.c:mlx4_MODIFY_CQ`):
//!
//! - opmod 0, resize (`core/cq.c:mlx4_cq_resize` from
//!   `ib/cq.c:mlx4_ib_resize_cq`; libmlx4 `mlx4_resize_cq`): 0x0c the new
//!   `log2(nent) << 24` (the UAR bits 0, ignored), 0x18 log_page_size,
//!   0x1b/0x1c the new buffer's MTT. The firmware ends the old buffer with
//!   a RESIZE CQE (opcode 0x16, `MLX4_CQE_OPCODE_RESIZE`) at the producer
//!   index, owner bit as for any CQE there, and goes on in the new buffer
//!   from the next index: both drivers copy the CQEs from their consumer
//!   index up to the RESIZE CQE into the new buffer themselves, each one
//!   index later (`ib/cq.c:mlx4_ib_cq_resize_copy_cqes`, libmlx4
//!   `mlx4_cq_resize_copy_cqes`, which searches for it without looking at
//!   the owner bit), and step their consumer index over it. Neither
//!   initialises the new buffer (libmlx4 zeroes it, the kernel's is a fresh
//!   allocation), so the firmware sets every owner bit there to
//!   "hardware's" for the index it will write to that slot next, as
//!   SW2HW_CQ does for a new CQ. The RESIZE CQE is written last: a resize
//!   that fails leaves the old buffer as it was. It completes nothing: no
//!   completion event, not counted as a CQE (trace `cq_resize`).
//! - opmod 1, moderation (`core/cq.c:mlx4_cq_modify`, from
//!   `ib/cq.c:mlx4_ib_modify_cq` and mlx4_en): 0x10 cq_period, 0x12
//!   cq_max_count, kept in the context (HW2SW_CQ returns them) and
//!   recorded (`cq_moderation`). Not applied: every completion event goes
//!   out as if both were 0, as the model's CQs always do.
//!
//! Strict (what real firmware does here is unknown; refused, counted in
//! `fw_unmodelled` and recorded as `fw_refused` with a `reason`): another
//! opmod (BAD_PARAM); a resize of a CQ in the error state (BAD_RES_STATE),
//! of one whose old buffer has no room for the RESIZE CQE (`producer -
//! set_ci >= nent`: RESOURCE_BUSY), or to fewer entries than it has CQEs
//! outstanding (BAD_SIZE; both drivers refuse that first).

use super::{CqTable, CQ_CTX_SIZE};
use crate::bytes::{addr40, be16, be32, put_be16};
use crate::command::{read_mailbox, CmdError, CmdResult, CommandRequest};
use crate::env::Env;
use crate::firmware::Firmware;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::layout::{CQE_SIZE, LOG_MAX_CQ_SZ};
use crate::qbuf::QueueBuf;
use crate::timing::Read;
use serde_json::json;

/// CQE byte 0x1f of the CQE that ends the old buffer.
pub const CQE_OPCODE_RESIZE: u8 = 0x16;

/// A refusal where real firmware's behaviour is unknown.
fn refused<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    cqn: u32,
    reason: &'static str,
    e: CmdError,
) -> CmdError {
    env.counters.global.fw_unmodelled += 1;
    env.trace.record(
        "fw_refused",
        || json!({"cqn": cqn, "reason": reason, "status": e.status()}),
    );
    e
}

/// Every CQE of a new buffer of `nent` zero but its owner bit, which says
/// "hardware's" for the first index from `next` on that lands in its slot:
/// set where that index's pass bit (`index & nent`) is clear. One write
/// per page.
fn owner_init_from<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    buf: &QueueBuf,
    nent: u32,
    next: u32,
) -> Result<(), CmdError> {
    let mut slot = 0u32;
    for (addr, len) in buf.runs(u64::from(nent) * CQE_SIZE) {
        let mut b = vec![0u8; len as usize];
        for e in b.chunks_exact_mut(CQE_SIZE as usize) {
            let index = next + (slot.wrapping_sub(next) & (nent - 1));
            e[CQE_SIZE as usize - 1] = if index & nent == 0 { 0x80 } else { 0 };
            slot += 1;
        }
        env.dma_write(addr, &b, "owner_init")?;
    }
    Ok(())
}

impl CqTable {
    /// MODIFY_CQ of the CQ in_mod names, in hardware ownership.
    pub(crate) fn modify<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        let cqn = Self::cqn(r.in_mod, fw)?;
        if !self.cqs.contains_key(&cqn) {
            return Err(CmdError::BadResState);
        }
        match r.op_mod {
            0 => self.resize(env, cqn, r, fw),
            1 => self.moderate(env, cqn, r),
            _ => Err(refused(env, cqn, "modify_cq_opmod", CmdError::BadParam)),
        }
    }

    /// opmod 1: cq_period and cq_max_count into the context.
    fn moderate<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        cqn: u32,
        r: &CommandRequest,
    ) -> CmdResult {
        let mb = read_mailbox(env, r.in_param, CQ_CTX_SIZE)?;
        let (period, count) = (be16(&mb, 0x10), be16(&mb, 0x12));
        let cq = self.cqs.get_mut(&cqn).ok_or(CmdError::BadResState)?;
        put_be16(&mut cq.ctx, 0x10, period);
        put_be16(&mut cq.ctx, 0x12, count);
        env.trace.record(
            "cq_moderation",
            || json!({"cqn": cqn, "count": count, "period": period}),
        );
        Ok(None)
    }

    /// opmod 0: the new buffer, its ownership, the RESIZE CQE, the switch.
    fn resize<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        cqn: u32,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        let mb = read_mailbox(env, r.in_param, CQ_CTX_SIZE)?;
        let log_size = mb[0x0c];
        if log_size > LOG_MAX_CQ_SZ {
            return Err(CmdError::BadSize);
        }
        if be16(&mb, 0x0a) != 0 || mb[0x18] > 19 {
            return Err(CmdError::BadParam);
        }
        let nent = 1u32 << log_size;
        let buf = fw.queue_buf(
            env,
            addr40(&mb, 0x1b, 0x1c),
            mb[0x18],
            u64::from(nent) * CQE_SIZE,
        )?;
        let cq = self.cqs.get(&cqn).ok_or(CmdError::BadResState)?;
        if cq.error {
            return Err(refused(env, cqn, "resize_cq_error", CmdError::BadResState));
        }
        let (pi, old, db_rec) = (cq.pi, cq.nent(), cq.db_rec);
        let resize_at = cq.buf.addr(u64::from(pi & (old - 1)) * CQE_SIZE);
        let mut rec = [0u8; 8];
        env.dma_read(db_rec, &mut rec, "db_rec", Read::Fresh)?;
        let set_ci = be32(&rec, 0) & 0xff_ffff;
        let outstanding = pi.wrapping_sub(set_ci) & 0xff_ffff;
        if outstanding >= old {
            return Err(refused(env, cqn, "resize_full", CmdError::ResourceBusy));
        }
        if outstanding >= nent {
            return Err(refused(env, cqn, "resize_too_small", CmdError::BadSize));
        }
        let next = (pi + 1) & 0xff_ffff;
        owner_init_from(env, &buf, nent, next)?;
        let mut cqe = [0u8; CQE_SIZE as usize];
        cqe[0x1f] = CQE_OPCODE_RESIZE | if pi & old != 0 { 0x80 } else { 0 };
        env.dma_write(resize_at, &cqe, "cqe")?;
        let cq = self.cqs.get_mut(&cqn).ok_or(CmdError::BadResState)?;
        let old_log = cq.log_size;
        cq.log_size = log_size;
        cq.buf = buf;
        cq.pi = next;
        cq.ctx[0x0c] = log_size;
        cq.ctx[0x18] = mb[0x18];
        cq.ctx[0x1b..0x20].copy_from_slice(&mb[0x1b..0x20]);
        env.trace.record("cq_resize", || {
            json!({"cqn": cqn, "old_log_size": old_log, "log_size": log_size,
                   "resize_cqe": pi, "set_ci": set_ci, "base": cq.buf.base()})
        });
        Ok(None)
    }
}
