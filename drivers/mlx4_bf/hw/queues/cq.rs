// SPDX-License-Identifier: GPL-2.0

//! A kernel ping context's completion queue (`mlx4/cq.c`, libmlx4's
//! `cq.c`), and SW2HW_CQ/HW2SW_CQ of the provider's.
//!
//! The kernel owns its contexts' send queues, so it must learn when their
//! slots are free: every WQE it posts asks for a CQE (CQ_UPDATE), and a post
//! that finds its send queue full reaps the context's CQ (so does a
//! reconnect). Reaping reads DMA memory only (the
//! CQE owner bit, `wqe_index`) and writes the consumer index into the CQ's
//! doorbell record, also DMA memory: the hot path never reads MMIO. The CQ is
//! never armed, so it raises no completion events.

use core::mem::{offset_of, size_of};
use kernel::{bitfield, prelude::*};
use zerocopy::{FromZeros, IntoBytes};
use zerocopy_derive::Immutable;

use crate::{
    cqe::{Cqe, CQE_OPCODE_ERROR, CQE_OPCODE_MASK, CQE_OWNER},
    geometry::{CQE_SIZE, CQ_BYTES, CQ_ENTRIES, CQ_LOG_ENTRIES, DB_REC_WORDS, KERNEL_SEND_CQS},
    hw::cmd::be_fields::{mtt_fields, Be16, Be32, Be64},
    hw::cmd::{CmdIf, CmdState, Command, Input, Op, HW2SW_NO_OUTPUT},
    hw::memory::mtt::{Pool, QueueMtt},
    hw::queues::kernel_mem::{QueueDma, QueueMem},
    ring,
};

/// `struct mlx4_cq_context`, the mailbox of SW2HW_CQ.
#[repr(C)]
#[derive(IntoBytes, FromBytes, Immutable)]
struct CqContext {
    flags: Be32,
    reserved1: [u8; 6],
    page_offset: Be16,
    logsize_usrpage: Be32,
    cq_period: Be16,
    cq_max_count: Be16,
    reserved2: [u8; 3],
    comp_eqn: u8,
    log_page_size: u8,
    reserved3: [u8; 2],
    mtt_base_addr_h: u8,
    mtt_base_addr_l: Be32,
    last_notified_index: Be32,
    solicit_producer_index: Be32,
    consumer_index: Be32,
    producer_index: Be32,
    reserved4: [u8; 8],
    db_rec_addr: Be64,
}
const _: () = {
    assert!(size_of::<CqContext>() == 0x40);
    assert!(offset_of!(CqContext, logsize_usrpage) == 0x0c);
    assert!(offset_of!(CqContext, comp_eqn) == 0x17);
    assert!(offset_of!(CqContext, mtt_base_addr_h) == 0x1b);
    assert!(offset_of!(CqContext, db_rec_addr) == 0x38);
};

bitfield! {
    /// `CqContext::flags`.
    struct CqFlags(u32) {
        /// Completions carry a timestamp.
        19:19 timestamp => bool;
    }
}

bitfield! {
    /// `CqContext::logsize_usrpage`.
    struct LogsizeUsrpage(u32) {
        28:24 log_size;
        23:0 usr_page;
    }
}

// The send CQ's CQEs are laid out as the receive CQ's (`cqe::Cqe`,
// `struct mlx4_cqe`), from the start of each CQE_SIZE entry. `poll()` reads
// big-endian words: the owner byte and the syndrome are each the low byte of
// theirs, wqe_index the high half of the syndrome's, my_qpn a whole word.
const _: () = {
    assert!(size_of::<Cqe>() == CQE_SIZE);
    assert!(offset_of!(Cqe, owner_sr_opcode) % 4 == 3 && offset_of!(Cqe, my_qpn) % 4 == 0);
    assert!(offset_of!(Cqe, wqe_index) % 4 == 0 && offset_of!(Cqe, syndrome) % 4 == 3);
    assert!(offset_of!(Cqe, syndrome) / 4 == offset_of!(Cqe, wqe_index) / 4);
};

/// One send completion.
pub(crate) struct Completion {
    pub(crate) qpn: u32,
    /// Index of the completed WQE in send-queue strides (mod 2^16).
    pub(crate) wqe_index: u16,
    /// The syndrome of an error CQE (the QP is then in ERR).
    pub(crate) error: Option<u8>,
}

pub(crate) struct Cq {
    pub(crate) slot: usize,
    pub(crate) cqn: u32,
    /// Consumer index, not wrapped.
    ci: u32,
}

/// Clears CQ slot `slot` and its doorbell record before it goes to the
/// device; `st` (the command lock) proves no CQ in hardware uses it.
pub(crate) fn clear(mem: &QueueMem, slot: usize, st: &CmdState) -> Result {
    let base = slot.checked_mul(CQ_BYTES).ok_or(EINVAL)?;
    if slot >= KERNEL_SEND_CQS || st.live.cq(slot) || base + CQ_BYTES > mem.cqs.size() {
        return Err(EINVAL);
    }
    // SAFETY: The range is inside the pool (checked above) and belongs to no
    // CQ in hardware (its live bit is clear under the command lock), so
    // neither the device nor another context touches it.
    unsafe { core::ptr::write_bytes(mem.cqs.as_mut_ptr().cast::<u8>().add(base), 0, CQ_BYTES) };
    kernel::dma_write!(mem.cq_db, [try: slot * DB_REC_WORDS], 0u32);
    kernel::dma_write!(mem.cq_db, [try: slot * DB_REC_WORDS + 1], 0u32);
    Ok(())
}

/// HW2SW_CQ of the CQ recorded under `slot` (a `Live::cqs` bit), unless it
/// is not in hardware (any more); as `mlx4_cq_free()`, with no context
/// back. An error means the CQ is still the device's.
pub(crate) fn destroy(cmd: &CmdIf, st: &mut CmdState, slot: usize, cqn: u32) -> Result {
    if !st.live.cq(slot) {
        return Ok(());
    }
    // A failure is logged by the command path. The device may still use the
    // slot then, so it stays marked and is never handed out again.
    cmd.exec(st, Command::new(Op::Hw2SwCq, cqn).op_mod(HW2SW_NO_OUTPUT))?;
    st.live.set_cq(slot, false);
    Ok(())
}

/// MODIFY_CQ op_mod 0 (`mlx4_cq_resize()`): the CQ recorded under `slot`
/// moves to a ring of `1 << log_entries` CQEs at MTT byte address
/// `buf_mtt`, in pages of `4 KiB << log_page_size`; the context's other
/// fields are the device's. An error leaves it on its old ring.
pub(crate) fn resize(
    cmd: &CmdIf,
    st: &mut CmdState,
    (slot, cqn): (usize, u32),
    log_entries: u32,
    (buf_mtt, log_page_size): (u64, u8),
) -> Result {
    if !st.live.cq(slot) {
        return Err(EINVAL);
    }
    let mut ctx = CqContext::new_zeroed();
    ctx.logsize_usrpage = LogsizeUsrpage::from_raw(0)
        .try_with_log_size(log_entries)?
        .into_raw()
        .into();
    ctx.log_page_size = log_page_size;
    (ctx.mtt_base_addr_h, ctx.mtt_base_addr_l) = mtt_fields(buf_mtt)?;
    cmd.exec(
        st,
        Command::new(Op::ModifyCq, cqn).input(Input::Mailbox(ctx.as_bytes())),
    )
}

/// Where a CQ lives and what it is attached to.
pub(crate) struct CqParams {
    /// Bit in `Live::cqs` that records it.
    pub(crate) live_bit: usize,
    pub(crate) cqn: u32,
    pub(crate) log_entries: u32,
    /// The UAR it is armed through.
    pub(crate) uar: u32,
    pub(crate) eqn: u32,
    /// MTT byte address of its ring, DMA address of its doorbell record.
    pub(crate) buf_mtt: u64,
    pub(crate) db_rec: u64,
    /// The ring's pages: `4 KiB << log_page_size` each.
    pub(crate) log_page_size: u8,
    /// `IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION`.
    pub(crate) timestamp: bool,
}

/// SW2HW_CQ (op_mod 0: the device sets every CQE's owner bit, as there is
/// no SW_CQ_INIT) with `mlx4_cq_alloc()`'s context; the command lock
/// records it under `p.live_bit`.
pub(crate) fn create(cmd: &CmdIf, st: &mut CmdState, p: &CqParams) -> Result {
    if p.live_bit >= st.live.cqs.len() || st.live.cq(p.live_bit) {
        return Err(EINVAL);
    }
    let mut ctx = CqContext::new_zeroed();
    ctx.flags = CqFlags::from_raw(0)
        .with_timestamp(p.timestamp)
        .into_raw()
        .into();
    ctx.logsize_usrpage = LogsizeUsrpage::from_raw(0)
        .try_with_log_size(p.log_entries)?
        .try_with_usr_page(p.uar)?
        .into_raw()
        .into();
    ctx.comp_eqn = p.eqn as u8;
    ctx.log_page_size = p.log_page_size;
    (ctx.mtt_base_addr_h, ctx.mtt_base_addr_l) = mtt_fields(p.buf_mtt)?;
    ctx.db_rec_addr = p.db_rec.into();
    cmd.exec(
        st,
        Command::new(Op::Sw2HwCq, p.cqn).input(Input::Mailbox(ctx.as_bytes())),
    )?;
    st.live.set_cq(p.live_bit, true);
    Ok(())
}

impl Cq {
    /// SW2HW_CQ of the send CQ `p` (from [`Cq::send_cq_params`]): its slot
    /// (cleared by [`clear`]) is `p.live_bit`.
    pub(crate) fn create(cmd: &CmdIf, st: &mut CmdState, p: &CqParams) -> Result<Cq> {
        if p.live_bit >= KERNEL_SEND_CQS {
            return Err(EINVAL);
        }
        create(cmd, st, p)?;
        Ok(Cq {
            slot: p.live_bit,
            cqn: p.cqn,
            ci: 0,
        })
    }

    /// Where send CQ slot `slot` lives (`QueueMem::cqs`, `cq_db`), as `cqn`,
    /// with completions of UAR `uar` and its events to EQ `eqn`.
    pub(crate) fn send_cq_params(
        (dma, queue_mtt): (&QueueDma, &QueueMtt),
        slot: usize,
        cqn: u32,
        uar: u32,
        eqn: u32,
    ) -> Result<CqParams> {
        Ok(CqParams {
            live_bit: slot,
            cqn,
            log_entries: CQ_LOG_ENTRIES,
            uar,
            eqn,
            buf_mtt: queue_mtt.addr(Pool::SendCqs, slot * CQ_BYTES)?,
            db_rec: dma.cq_db + (slot * DB_REC_WORDS * 4) as u64,
            // One 4 KiB page.
            log_page_size: 0,
            timestamp: false,
        })
    }

    /// Hands every CQE the device has written to `f`, then publishes the
    /// consumer index in the doorbell record. Returns the number reaped.
    pub(crate) fn poll(&mut self, mem: &QueueMem, mut f: impl FnMut(Completion)) -> Result<u32> {
        let base = self.slot * CQ_BYTES;
        let start = self.ci;
        // At most one pass per call, whatever the device wrote.
        for _ in 0..CQ_ENTRIES {
            // The CQE as big-endian words: the owner byte ends the last one.
            let word = (base + (self.ci % CQ_ENTRIES) as usize * CQE_SIZE) / 4;
            let last: u32 =
                kernel::dma_read!(mem.cqs, [try: word + offset_of!(Cqe, owner_sr_opcode) / 4]);
            let op_own = u32::from_be(last) as u8;
            // get_sw_cqe(): software's if the owner bit matches the pass.
            if !ring::sw_owned(op_own & CQE_OWNER != 0, self.ci, CQ_ENTRIES) {
                break;
            }
            // The owner byte before the rest of the CQE.
            crate::sys::barrier::dma_rmb();
            let qpn: u32 = kernel::dma_read!(mem.cqs, [try: word + offset_of!(Cqe, my_qpn) / 4]);
            // wqe_index (be16), then the error CQE's vendor syndrome and
            // syndrome.
            let index: u32 =
                kernel::dma_read!(mem.cqs, [try: word + offset_of!(Cqe, wqe_index) / 4]);
            let index = u32::from_be(index);
            let error = (op_own & CQE_OPCODE_MASK == CQE_OPCODE_ERROR).then_some(index as u8);
            f(Completion {
                qpn: u32::from_be(qpn) & 0xff_ffff,
                wqe_index: (index >> 16) as u16,
                error,
            });
            self.ci = self.ci.wrapping_add(1);
        }
        let n = self.ci.wrapping_sub(start);
        if n != 0 {
            // mlx4_cq_set_ci(): the CQEs are read (all loads above are done
            // before this store on x86 and s390), so the device may reuse them.
            kernel::dma_write!(
                mem.cq_db,
                [try: self.slot * DB_REC_WORDS],
                (self.ci & 0xff_ffff).to_be()
            );
        }
        Ok(n)
    }
}
