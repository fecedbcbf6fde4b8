// SPDX-License-Identifier: GPL-2.0

//! QPs in the adapter: the send queue's initial ownership, the QP context
//! and the RST -> INIT -> RTR -> RTS transitions (`mlx4/qp.c`,
//! `mlx4_ib/qp.c`), and the reset that destroys a QP.

use kernel::prelude::*;
use zerocopy::{FromZeros, IntoBytes};

use super::qp_mailbox::{QpFlags, QpModify};
use crate::{
    geometry::{RQ_ENTRIES, RQ_OFFSET, RQ_STRIDE, SQ_ENTRIES, SQ_STRIDE},
    hw::cmd::be_fields::mtt_fields,
    hw::cmd::{CmdIf, CmdState, Command, Input, Op},
};

// enum mlx4_qp_state and the service type of the flags word.
const STATE_INIT: u32 = 1;
const STATE_RTR: u32 = 2;
const STATE_RTS: u32 = 3;
const ST_RC: u32 = 0;
/// `MLX4_QP_PM_MIGRATED`: no alternate path.
const PM_MIGRATED: u32 = 3;
/// IB MTU 4096, messages up to 2^31 bytes (`mlx4_ib`'s RC setting).
const MTU_MSGMAX: u8 = (5 << 5) | 31;
/// Port 1 (`0x83 | (port - 1) << 6`).
const SCHED_QUEUE_PORT1: u8 = 0x83;
/// `MLX4_QP_BIT_RWE` and `MLX4_QP_BIT_RRE` of `params2`: remote writes and
/// reads at this QP's responder are allowed (the MPT an rkey names must
/// allow them too). `rra_max` and `sra_max` stay 0: one RDMA read in
/// flight each way (one RDMARC entry per QP, `firmware/icm.rs`).
const PARAMS2_RWE: u32 = 1 << 14;
const PARAMS2_RRE: u32 = 1 << 15;
/// `2RST_QP` takes op_mod 2 and no mailbox.
pub(super) const TO_RST_OP_MOD: u32 = 2;

/// `sq_size_stride`: `log2(SQ_ENTRIES) << 3 | (log2(SQ_STRIDE) - 4)`.
const SQ_SIZE_STRIDE: u8 = ((SQ_ENTRIES.ilog2() << 3) | (SQ_STRIDE.ilog2() - 4)) as u8;
/// `rq_size_stride`, the same for the RQ (after the SQ: its stride is smaller).
const RQ_SIZE_STRIDE: u8 = ((RQ_ENTRIES.ilog2() << 3) | (RQ_STRIDE.ilog2() - 4)) as u8;
/// `rlkey`: the reserved lkey makes a data segment's address a DMA address
/// (`mlx4_ib` sets it for kernel QPs). The receive WQEs need it; user space
/// may not use that lkey (the kernel refuses such gather segments).
const RLKEY: u8 = 1 << 4;
const _: () = assert!(RQ_STRIDE < SQ_STRIDE && RQ_OFFSET == SQ_ENTRIES as usize * SQ_STRIDE);

/// `srcrb_flags` (ctrl + 8): `MLX4_WQE_CTRL_CQ_UPDATE`, a CQE for this WQE.
const CTRL_SRCRB_FLAGS: usize = 8;
pub(crate) const CTRL_CQ_UPDATE: u32 = 3 << 2;
/// Owner bit of `owner_opcode`.
pub(crate) const CTRL_OWNER: u32 = 1 << 31;

/// Asks for a completion of this WQE. The kernel owns the send queue and
/// needs the CQE to know when the slot is free again, so every WQE posted to
/// the adapter carries it, whatever user space set.
#[inline]
pub(crate) fn stamp_cq_update(wqe: &mut [u8]) -> Result {
    let at = CTRL_SRCRB_FLAGS;
    let b = wqe.get_mut(at..at + 4).ok_or(EINVAL)?;
    let v = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) | CTRL_CQ_UPDATE;
    b.copy_from_slice(&v.to_be_bytes());
    Ok(())
}

/// `mlx4_qp_init_sq_ownership()`: every WQE of a new send queue starts with
/// the owner bit set, so the device sees none of them as valid in the first
/// pass (`owner == !!(index & SQ_ENTRIES)`); the rest is cleared.
pub(crate) fn init_sq_ownership(sq: &mut [u8]) {
    sq.fill(0);
    for wqe in sq.chunks_exact_mut(SQ_STRIDE) {
        wqe[..4].copy_from_slice(&CTRL_OWNER.to_be_bytes());
    }
}

/// What the QP context says about one QP.
pub(crate) struct QpParams {
    pub(crate) qpn: u32,
    /// The QP it is connected to (itself until connected to another).
    pub(crate) remote_qpn: u32,
    pub(crate) uar: u32,
    /// Protection domain: the context's UAR index (`mr.rs`).
    pub(crate) pd: u32,
    /// The context's send CQ, and the QP's own receive CQ.
    pub(crate) cqn_send: u32,
    pub(crate) cqn_recv: u32,
    /// The MTT byte address of its buffer (`memory/mtt.rs`): SQ at offset 0, RQ
    /// at `RQ_OFFSET`.
    pub(crate) buf_mtt: u64,
    /// DMA address of its RQ doorbell record.
    pub(crate) rq_db_dma: u64,
    /// The reserved lkey names DMA addresses: only for QPs whose WQEs the
    /// kernel writes, never for one user space posts to.
    pub(crate) rlkey: bool,
    /// The port's LID: the peer is a QP on the same port.
    pub(crate) rlid: u16,
}

fn context(p: &QpParams, state: u32) -> Result<QpModify> {
    // No optional parameters: every transition gives the whole context.
    let mut mbox = QpModify::new_zeroed();
    let ctx = &mut mbox.context;
    ctx.flags = QpFlags::from_raw(0)
        .try_with_state(state)?
        .try_with_service_type(ST_RC)?
        .try_with_pm_state(PM_MIGRATED)?
        .into_raw()
        .into();
    ctx.pd = (p.pd & 0xff_ffff).into();
    ctx.mtu_msgmax = MTU_MSGMAX;
    ctx.rq_size_stride = RQ_SIZE_STRIDE;
    ctx.sq_size_stride = SQ_SIZE_STRIDE;
    ctx.rlkey_roce_mode = if p.rlkey { RLKEY } else { 0 };
    ctx.usr_page = p.uar.into();
    ctx.local_qpn = p.qpn.into();
    ctx.remote_qpn = p.remote_qpn.into();
    ctx.pri_path.sched_queue = SCHED_QUEUE_PORT1;
    ctx.pri_path.rlid = p.rlid.into();
    ctx.params2 = (PARAMS2_RWE | PARAMS2_RRE).into();
    ctx.cqn_send = p.cqn_send.into();
    ctx.cqn_recv = p.cqn_recv.into();
    ctx.db_rec_addr = p.rq_db_dma.into();
    // 4 KiB pages: log_page_size 0.
    ctx.log_page_size = 0;
    (ctx.mtt_base_addr_h, ctx.mtt_base_addr_l) = mtt_fields(p.buf_mtt)?;
    Ok(mbox)
}

/// RST2INIT, INIT2RTR (with the remote QPN), RTR2RTS; on failure the QP
/// is reset again. `slot` is
/// the QP's send-queue slot, under which the command lock records it.
pub(crate) fn create(cmd: &CmdIf, st: &mut CmdState, p: &QpParams, slot: usize) -> Result {
    if st.live.qps.get(slot).is_none_or(|&q| q != 0) {
        return Err(EINVAL);
    }
    let init = context(p, STATE_INIT)?;
    cmd.exec(
        st,
        Command::new(Op::Rst2InitQp, p.qpn).input(Input::Mailbox(init.as_bytes())),
    )?;
    st.live.qps[slot] = p.qpn;
    let rest = context(p, STATE_RTR).and_then(|rtr| {
        cmd.exec(
            st,
            Command::new(Op::Init2RtrQp, p.qpn).input(Input::Mailbox(rtr.as_bytes())),
        )
    });
    let rest = rest.and_then(|()| {
        let rts = context(p, STATE_RTS)?;
        cmd.exec(
            st,
            Command::new(Op::Rtr2RtsQp, p.qpn).input(Input::Mailbox(rts.as_bytes())),
        )
    });
    if let Err(e) = rest {
        destroy(cmd, st, slot);
        return Err(e);
    }
    Ok(())
}

/// 2RST_QP of the QP recorded under `slot`, unless unbind already did it.
pub(crate) fn destroy(cmd: &CmdIf, st: &mut CmdState, slot: usize) {
    let Some(&qpn) = st.live.qps.get(slot) else {
        return;
    };
    if qpn == 0 {
        return;
    }
    // A failure is logged by the command path. The device may then still
    // read the send queue, so the QP stays recorded and its slot is never
    // reused (as a CQ whose HW2SW_CQ failed).
    if cmd
        .exec(st, Command::new(Op::ToRstQp, qpn).op_mod(TO_RST_OP_MOD))
        .is_ok()
    {
        st.live.qps[slot] = 0;
    }
}
