// SPDX-License-Identifier: GPL-2.0

//! The RDMA provider's shared receive queues in the adapter (`mlx4/srq.c`):
//! SW2HW_SRQ with `mlx4_srq_alloc()`'s context, HW2SW_SRQ without a context
//! back (`mlx4_srq_free()`), ARM_SRQ with the limit (`mlx4_srq_arm()`) and
//! QUERY_SRQ's limit (`mlx4_srq_query()`). The command lock records each SRQ
//! by its number from SW2HW to HW2SW, so that unbind takes down whatever
//! the provider left.

use core::mem::{offset_of, size_of};
use kernel::{bitfield, prelude::*};
use zerocopy::{FromBytes, FromZeros, IntoBytes};
use zerocopy_derive::Immutable;

use crate::hw::cmd::{
    be_fields::{mtt_fields, Be16, Be32, Be64},
    CmdIf, CmdState, Command, Input, Op, HW2SW_NO_OUTPUT,
};

/// `struct mlx4_srq_context` (`mlx4/mlx4.h`), SW2HW_SRQ's mailbox and
/// QUERY_SRQ's answer.
#[repr(C)]
#[derive(IntoBytes, FromBytes, Immutable)]
struct SrqContext {
    state_logsize_srqn: Be32,
    logstride: u8,
    reserved1: u8,
    xrcd: Be16,
    pg_offset_cqn: Be32,
    reserved2: u32,
    log_page_size: u8,
    reserved3: [u8; 2],
    mtt_base_addr_h: u8,
    mtt_base_addr_l: Be32,
    pd: Be32,
    limit_watermark: Be16,
    wqe_cnt: Be16,
    reserved4: u16,
    wqe_counter: Be16,
    reserved5: u32,
    db_rec_addr: Be64,
}
const _: () = {
    assert!(size_of::<SrqContext>() == 0x30);
    assert!(offset_of!(SrqContext, log_page_size) == 0x10);
    assert!(offset_of!(SrqContext, mtt_base_addr_h) == 0x13);
    assert!(offset_of!(SrqContext, pd) == 0x18);
    assert!(offset_of!(SrqContext, limit_watermark) == 0x1c);
    assert!(offset_of!(SrqContext, db_rec_addr) == 0x28);
};

bitfield! {
    /// `SrqContext::state_logsize_srqn`.
    struct LogsizeSrqn(u32) {
        27:24 log_size;
        23:0 srqn;
    }
}

/// An SRQ as `mlx4_srq_alloc()` describes it.
pub(crate) struct SrqParams {
    pub(crate) srqn: u32,
    /// log2 of its WQEs, and of their stride less 4.
    pub(crate) log_size: u8,
    pub(crate) logstride: u8,
    pub(crate) pd: u32,
    /// The XRC domain of a basic SRQ: the device's reserved one
    /// (`caps.reserved_xrcds`, 0 on an adapter without XRC).
    pub(crate) xrcd: u16,
    /// MTT byte address of its buffer, `4 KiB << log_page_size` pages.
    pub(crate) mtt_addr: u64,
    pub(crate) log_page_size: u8,
    /// DMA address of its doorbell record (the posted WQEs' counter).
    pub(crate) db_rec: u64,
}

/// Whether `srqn` may be recorded (below the profile's SRQs).
fn in_table(st: &CmdState, srqn: u32) -> Result<usize> {
    let n = srqn as usize;
    if n >= st.live.srqs.len() {
        return Err(EINVAL);
    }
    Ok(n)
}

/// SW2HW_SRQ of `p`; the command lock records it.
pub(crate) fn create(cmd: &CmdIf, st: &mut CmdState, p: &SrqParams) -> Result {
    let n = in_table(st, p.srqn)?;
    if st.live.srqs.contains(n) {
        return Err(EINVAL);
    }
    let mut ctx = SrqContext::new_zeroed();
    ctx.state_logsize_srqn = LogsizeSrqn::from_raw(0)
        .try_with_log_size(p.log_size)?
        .try_with_srqn(p.srqn)?
        .into_raw()
        .into();
    ctx.logstride = p.logstride;
    ctx.xrcd = p.xrcd.into();
    ctx.log_page_size = p.log_page_size;
    (ctx.mtt_base_addr_h, ctx.mtt_base_addr_l) = mtt_fields(p.mtt_addr)?;
    ctx.pd = p.pd.into();
    ctx.db_rec_addr = p.db_rec.into();
    cmd.exec(
        st,
        Command::new(Op::Sw2HwSrq, p.srqn).input(Input::Mailbox(ctx.as_bytes())),
    )?;
    st.live.srqs.set(n, true);
    Ok(())
}

/// HW2SW_SRQ of `srqn` unless it is not in hardware (any more). An error
/// means the SRQ is still the device's: it stays recorded.
pub(crate) fn destroy(cmd: &CmdIf, st: &mut CmdState, srqn: u32) -> Result {
    let n = in_table(st, srqn)?;
    if !st.live.srqs.contains(n) {
        return Ok(());
    }
    cmd.exec(st, Command::new(Op::Hw2SwSrq, srqn).op_mod(HW2SW_NO_OUTPUT))?;
    st.live.srqs.set(n, false);
    Ok(())
}

/// The adapter's SRQ `srqn`, or `-EINVAL`.
fn live(st: &CmdState, srqn: u32) -> Result {
    if !st.live.srqs.contains(in_table(st, srqn)?) {
        return Err(EINVAL);
    }
    Ok(())
}

/// ARM_SRQ: the limit event fires once fewer than `limit` WQEs are posted.
pub(crate) fn arm(cmd: &CmdIf, st: &mut CmdState, srqn: u32, limit: u16) -> Result {
    live(st, srqn)?;
    cmd.exec(
        st,
        Command::new(Op::ArmSrq, srqn).input(Input::Imm(limit.into())),
    )
}

/// QUERY_SRQ's limit watermark (0 once the event fired).
pub(crate) fn query_limit(cmd: &CmdIf, st: &mut CmdState, srqn: u32) -> Result<u16> {
    live(st, srqn)?;
    let mut out = [0u8; size_of::<SrqContext>()];
    cmd.exec(st, Command::new(Op::QuerySrq, srqn).output(&mut out))?;
    let ctx = SrqContext::read_from_bytes(&out).map_err(|_| EINVAL)?;
    Ok(ctx.limit_watermark.get())
}

/// At unbind: HW2SW_SRQ of every SRQ still in the device (after its QPs).
/// One that fails stays recorded (the adapter is then reset).
pub(crate) fn destroy_all(cmd: &CmdIf, st: &mut CmdState) {
    let mut next = 0;
    while let Some(n) = st.live.srqs.next(next) {
        // A failure is logged by the command path.
        let _ = destroy(cmd, st, n as u32);
        next = n + 1;
    }
}
