// SPDX-License-Identifier: GPL-2.0

//! The adapter's event queues (`mlx4/eq.c`): the async EQ takes the async
//! and command events (MAP_EQ) on MSI-X vector 0, each completion EQ the
//! completion events of the armed CQs that name it, on a vector of its own
//! (`Eqs::comp_eqn`); with one vector the async EQ takes them too.
//!
//! The EQ buffer is DMA memory the device writes; an EQE belongs to software
//! when its owner bit equals the parity of the pass (`next_eqe_sw()`). The
//! interrupt handler (`adapter::EqHandler`) consumes what is there with
//! [`Eq::poll`], which counts each EQE and hands it on decoded
//! (`eqe::decode`, as `mlx4_eq_int()` reads it); it re-arms the EQ through
//! its doorbell in UAR page `eqn / 4`, the kernel's (no context gets one,
//! `Firmware::kernel_uars`), and on a completion event of a context's CQ
//! wakes the kernel ping's waiters; the RDMA provider's events go to
//! its dispatcher (`adapter/events.rs`). Each EQ's ring is its slice of
//! `QueueMem::eq`, named by the MTT entries of `Pool::Eq` (`memory/mtt.rs`).

use core::mem::{offset_of, size_of};
use kernel::{
    bitfield,
    io::Io,
    prelude::*,
    sync::atomic::{Atomic, Relaxed, Release},
};
use zerocopy::{FromZeros, IntoBytes};
use zerocopy_derive::Immutable;

use crate::{
    eqe::{self, Eqe, EQE_EVENT, EQE_OWNER, EQE_SUBTYPE, EQE_TYPE},
    geometry::{EQE_SIZE, EQ_ENTRIES, EQ_LOG_ENTRIES, EQ_RING_BYTES, MAX_EQS},
    hw::cmd::be_fields::{mtt_fields, Be16, Be32},
    hw::cmd::be_mmio::BeMmio,
    hw::cmd::{CmdIf, CmdState, Command, Input, Op, HW2SW_NO_OUTPUT},
    hw::queues::kernel_mem::QueueMem,
    ring,
    stats::{EqeKind, QueueStats},
};

/// `struct mlx4_eq_context`, the mailbox of SW2HW_EQ.
#[repr(C)]
#[derive(IntoBytes, FromBytes, Immutable)]
struct EqContext {
    flags: Be32,
    reserved1: [u8; 6],
    page_offset: Be16,
    log_eq_size: u8,
    reserved2: [u8; 4],
    eq_period: u8,
    reserved3: u8,
    eq_max_count: u8,
    reserved4: [u8; 3],
    intr: u8,
    log_page_size: u8,
    reserved5: [u8; 2],
    mtt_base_addr_h: u8,
    mtt_base_addr_l: Be32,
    reserved6: [u8; 8],
    consumer_index: Be32,
    producer_index: Be32,
    reserved7: [u8; 16],
}
const _: () = {
    assert!(size_of::<EqContext>() == 0x40);
    assert!(offset_of!(EqContext, log_eq_size) == 0x0c);
    assert!(offset_of!(EqContext, intr) == 0x17);
    assert!(offset_of!(EqContext, mtt_base_addr_h) == 0x1b);
    assert!(offset_of!(EqContext, consumer_index) == 0x28);
};

bitfield! {
    /// `EqContext::flags`.
    struct EqFlags(u32) {
        /// `MLX4_EQ_STATUS_*`.
        15:12 status;
        /// `MLX4_EQ_STATE_*`.
        11:8 state;
    }
}
/// `MLX4_EQ_STATE_ARMED`.
const EQ_STATE_ARMED: u32 = 9;

/// The owner bit of `struct mlx4_eqe`'s last byte.
const EQE_OWNER_BIT: u8 = 0x80;
/// `MLX4_ASYNC_EVENT_MASK` without the SR-IOV and Ethernet-only events:
/// PATH_MIG, COMM_EST, SQ_DRAINED, CQ_ERROR, WQ_CATAS_ERROR, EEC_CATAS_ERROR,
/// PATH_MIG_FAILED, PORT_CHANGE, CMD, ECC_DETECT, WQ_INVAL_REQ_ERROR,
/// WQ_ACCESS_ERROR, SRQ_CATAS_ERROR, SRQ_QP_LAST_WQE, SRQ_LIMIT.
const ASYNC_EVENT_MASK: u64 = (1 << 0x01)
    | (1 << 0x02)
    | (1 << 0x03)
    | (1 << 0x04)
    | (1 << 0x05)
    | (1 << 0x06)
    | (1 << 0x07)
    | (1 << 0x09)
    | (1 << 0x0a)
    | (1 << 0x0e)
    | (1 << 0x10)
    | (1 << 0x11)
    | (1 << 0x12)
    | (1 << 0x13)
    | (1 << 0x14);

/// The async EQ's index (`MLX4_EQ_ASYNC`): MSI-X vector 0.
pub(crate) const ASYNC: usize = 0;

/// The EQs the driver asks for: the async EQ and a completion EQ per CPU
/// (mlx4_core's `num_online_cpus() + 1` for one port), at most `MAX_EQS`.
pub(crate) fn wanted() -> u32 {
    kernel::cpu::nr_cpu_ids()
        .saturating_add(1)
        .min(MAX_EQS as u32)
}

/// The UAR page of the doorbell of EQ `eqn`: four EQs per page
/// (`mlx4_get_eq_uar()`).
pub(crate) fn doorbell_page(eqn: u32) -> u32 {
    eqn / 4
}

/// Offset in the UAR area of the doorbell of EQ `eqn`.
pub(crate) fn doorbell_offset(eqn: u32) -> usize {
    doorbell_page(eqn) as usize * 4096 + 0x800 + 8 * (eqn % 4) as usize
}

/// The software side of an EQ.
pub(crate) struct Eq {
    pub(crate) eqn: u32,
    /// Which of the driver's EQs: its MSI-X vector, its ring in
    /// `QueueMem::eq`, its bit in `Live::eqs`; [`ASYNC`] takes the events.
    pub(crate) index: usize,
    /// Consumer index, not wrapped; only the interrupt handler advances it.
    ci: Atomic<u32>,
    /// Cleared before HW2SW_EQ: the handler then no longer rings the doorbell.
    pub(crate) live: Atomic<bool>,
}

impl Eq {
    pub(crate) fn new(eqn: u32, index: usize) -> Self {
        Eq {
            eqn,
            index,
            ci: Atomic::new(0),
            live: Atomic::new(false),
        }
    }

    /// SW2HW_EQ with the buffer (zeroed) at MTT byte address `buf_mtt`;
    /// for the async EQ then MAP_EQ of the async events.
    pub(crate) fn create(&self, cmd: &CmdIf, st: &mut CmdState, buf_mtt: u64) -> Result {
        let mut ctx = EqContext::new_zeroed();
        ctx.flags = EqFlags::from_raw(0)
            .with_const_state::<EQ_STATE_ARMED>()
            .into_raw()
            .into();
        ctx.log_eq_size = EQ_LOG_ENTRIES as u8;
        ctx.intr = u8::try_from(self.index)?;
        // 4 KiB pages: log_page_size 0.
        ctx.log_page_size = 0;
        (ctx.mtt_base_addr_h, ctx.mtt_base_addr_l) = mtt_fields(buf_mtt)?;
        cmd.exec(
            st,
            Command::new(Op::Sw2HwEq, self.eqn).input(Input::Mailbox(ctx.as_bytes())),
        )?;
        st.live.set_eq(self.index, true);
        if self.index != ASYNC {
            self.live.store(true, Release);
            return Ok(());
        }
        if let Err(e) = cmd.exec(
            st,
            Command::new(Op::MapEq, self.eqn).input(Input::Imm(ASYNC_EVENT_MASK)),
        ) {
            self.destroy(cmd, st);
            return Err(e);
        }
        self.live.store(true, Release);
        Ok(())
    }

    /// Stops the handler from ringing the doorbell; call, then wait for the
    /// interrupt handler, then [`Eq::destroy`].
    pub(crate) fn quiesce(&self) {
        self.live.store(false, Release);
    }

    /// MAP_EQ (unmap) and HW2SW_EQ; errors are logged by the command path.
    pub(crate) fn destroy(&self, cmd: &CmdIf, st: &mut CmdState) {
        if !st.live.eq(self.index) {
            return;
        }
        self.live.store(false, Release);
        if self.index == ASYNC {
            let _ = cmd.exec(
                st,
                Command::new(Op::MapEq, (1 << 31) | self.eqn).input(Input::Imm(ASYNC_EVENT_MASK)),
            );
        }
        // Failed, the EQ stays the adapter's: it may still write its ring.
        let kept = cmd
            .exec(
                st,
                Command::new(Op::Hw2SwEq, self.eqn).op_mod(HW2SW_NO_OUTPUT),
            )
            .is_err();
        st.live.set_eq(self.index, kept);
    }

    /// `eq_set_ci()` with `req_not`: consumer index and arm.
    pub(crate) fn arm(&self, uar: &kernel::io::Mmio) -> Result {
        let v = (self.ci.load(Relaxed) & 0xff_ffff) | (1 << 31);
        BeMmio::new(uar).try_write32(v, doorbell_offset(self.eqn))
    }

    /// Consumes the EQEs the device has written, counting each and handing
    /// it to `seen` decoded.
    pub(crate) fn poll(
        &self,
        mem: &QueueMem,
        stats: &QueueStats,
        mut seen: impl FnMut(Eqe),
    ) -> Result {
        let mut ci = self.ci.load(Relaxed);
        let ring = self.index * EQ_RING_BYTES;
        // At most one pass per interrupt, whatever the device wrote.
        for _ in 0..EQ_ENTRIES {
            let at = ring + (ci % EQ_ENTRIES) as usize * EQE_SIZE;
            let owner: u8 = kernel::dma_read!(mem.eq, [try: at + EQE_OWNER]);
            if !ring::sw_owned(owner & EQE_OWNER_BIT != 0, ci, EQ_ENTRIES) {
                break;
            }
            // The owner byte before the rest of the EQE.
            crate::sys::barrier::dma_rmb();
            let kind: u8 = kernel::dma_read!(mem.eq, [try: at + EQE_TYPE]);
            stats.eqe(match kind {
                eqe::kind::CMD => EqeKind::Command,
                eqe::kind::COMP => EqeKind::Completion,
                _ => EqeKind::Async,
            });
            // A command's EQE says nothing the polled interface needs.
            if kind != eqe::kind::CMD {
                seen(Self::read(mem, at, kind)?);
            }
            ci = ci.wrapping_add(1);
        }
        self.ci.store(ci, Relaxed);
        Ok(())
    }

    /// The EQE of type `kind` at byte `at` of the ring, decoded.
    fn read(mem: &QueueMem, at: usize, kind: u8) -> Result<Eqe> {
        let subtype: u8 = kernel::dma_read!(mem.eq, [try: at + EQE_SUBTYPE]);
        let mut event = [0u32; 3];
        for (i, word) in event.iter_mut().enumerate() {
            let mut b = [0u8; 4];
            for (j, byte) in b.iter_mut().enumerate() {
                *byte = kernel::dma_read!(mem.eq, [try: at + EQE_EVENT + 4 * i + j]);
            }
            *word = u32::from_be_bytes(b);
        }
        Ok(eqe::decode(kind, subtype, event))
    }
}
