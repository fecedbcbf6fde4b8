// SPDX-License-Identifier: GPL-2.0

//! QPs in the adapter: the send queue's initial ownership, the QP context
//! and the RST -> INIT -> RTR -> RTS transitions (`mlx4/qp.c`,
//! `mlx4_ib/qp.c`), and the reset that destroys a QP.

use kernel::prelude::*;

use crate::{
    hw::be::{put32, put64, put8, put_mtt_addr},
    hw::cmd::{CmdIf, CmdState, Command, Input, Op},
    hw::geometry::{RQ_ENTRIES, RQ_OFFSET, RQ_STRIDE, SQ_ENTRIES, SQ_STRIDE},
};

// struct mlx4_qp_context (0xf8 bytes); the mailbox holds optpar first.
const QPC_FLAGS: usize = 0x00;
/// `pd`: bits 23..0.
const QPC_PD: usize = 0x04;
const QPC_MTU_MSGMAX: usize = 0x08;
const QPC_RQ_SIZE_STRIDE: usize = 0x09;
const QPC_SQ_SIZE_STRIDE: usize = 0x0a;
const QPC_RLKEY: usize = 0x0b;
const QPC_USR_PAGE: usize = 0x0c;
const QPC_LOCAL_QPN: usize = 0x10;
const QPC_REMOTE_QPN: usize = 0x14;
const QPC_PRI_PATH_SCHED_QUEUE: usize = 0x18 + 0x20;
const QPC_CQN_SEND: usize = 0x7c;
const QPC_CQN_RECV: usize = 0x9c;
const QPC_DB_REC_ADDR: usize = 0xa0;
const QPC_LOG_PAGE_SIZE: usize = 0xc8;
const QPC_MTT_BASE: usize = 0xcb;
const QPC_SIZE: usize = 0xf8;
const MBOX_OPTPAR: usize = 0x00;
const MBOX_QPC: usize = 0x08;

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
/// `2RST_QP` takes op_mod 2 and no mailbox.
const TO_RST_OP_MOD: u32 = 2;

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
    /// DMA address of its buffer: SQ at offset 0, RQ at `RQ_OFFSET`.
    pub(crate) buf_dma: u64,
    /// DMA address of its RQ doorbell record.
    pub(crate) rq_db_dma: u64,
    /// The reserved lkey names DMA addresses: only for QPs whose WQEs the
    /// kernel writes, never for one user space posts to.
    pub(crate) rlkey: bool,
}

fn context(p: &QpParams, state: u32) -> Result<[u8; MBOX_QPC + QPC_SIZE]> {
    let mut mbox = [0u8; MBOX_QPC + QPC_SIZE];
    put32(&mut mbox, MBOX_OPTPAR, 0)?;
    let ctx = &mut mbox[MBOX_QPC..];
    put32(
        ctx,
        QPC_FLAGS,
        (state << 28) | (ST_RC << 16) | (PM_MIGRATED << 11),
    )?;
    put32(ctx, QPC_PD, p.pd)?;
    put8(ctx, QPC_MTU_MSGMAX, MTU_MSGMAX)?;
    put8(ctx, QPC_RQ_SIZE_STRIDE, RQ_SIZE_STRIDE)?;
    put8(ctx, QPC_SQ_SIZE_STRIDE, SQ_SIZE_STRIDE)?;
    put8(ctx, QPC_RLKEY, if p.rlkey { RLKEY } else { 0 })?;
    put32(ctx, QPC_USR_PAGE, p.uar)?;
    put32(ctx, QPC_LOCAL_QPN, p.qpn)?;
    put32(ctx, QPC_REMOTE_QPN, p.remote_qpn)?;
    put8(ctx, QPC_PRI_PATH_SCHED_QUEUE, SCHED_QUEUE_PORT1)?;
    put32(ctx, QPC_CQN_SEND, p.cqn_send)?;
    put32(ctx, QPC_CQN_RECV, p.cqn_recv)?;
    put64(ctx, QPC_DB_REC_ADDR, p.rq_db_dma)?;
    put8(ctx, QPC_LOG_PAGE_SIZE, 0)?;
    put_mtt_addr(ctx, QPC_MTT_BASE, p.buf_dma)?;
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
        Command::new(Op::Rst2InitQp, p.qpn).input(Input::Mailbox(&init)),
    )?;
    st.live.qps[slot] = p.qpn;
    let rest = context(p, STATE_RTR).and_then(|rtr| {
        cmd.exec(
            st,
            Command::new(Op::Init2RtrQp, p.qpn).input(Input::Mailbox(&rtr)),
        )
    });
    let rest = rest.and_then(|()| {
        let rts = context(p, STATE_RTS)?;
        cmd.exec(
            st,
            Command::new(Op::Rtr2RtsQp, p.qpn).input(Input::Mailbox(&rts)),
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
