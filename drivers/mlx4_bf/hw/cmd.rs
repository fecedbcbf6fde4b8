// SPDX-License-Identifier: GPL-2.0

//! The adapter's command interface: the HCR in BAR0, posted in
//! polling mode as mlx4's `mlx4_cmd_post()` / `mlx4_cmd_poll()` do, and the
//! two 4 KiB DMA mailboxes.
//!
//! One command at a time, under [`CmdIf::lock`]. The lock also guards the
//! record of what exists in the device (EQ, CQs, QPs), so that unbind can
//! reset whatever contexts still own and mark the interface dead; every later
//! command fails with `-ENODEV`.
//!
//! The HCR is seven big-endian dwords (`regs.rs`), written through the
//! big-endian view of BAR0 (`be_io.rs`).

use kernel::{
    device,
    devres::Devres,
    dma::Coherent,
    io::{poll::read_poll_timeout, Io},
    new_mutex, pci,
    prelude::*,
    sync::{aref::ARef, Mutex, MutexGuard},
    time::Delta,
};

use crate::hw::{
    be_io::BeMmio,
    geometry::{MAX_MPTS, MAX_QPS},
    regs::{
        HCR_CTRL, HCR_IN_MODIFIER, HCR_IN_PARAM_HI, HCR_IN_PARAM_LO, HCR_OUT_PARAM_HI,
        HCR_OUT_PARAM_LO, HCR_TOKEN, OWNER, RESET, RESET_VALUE,
    },
};

/// BAR0 is 1 MiB; every offset used here is a constant inside it.
pub(crate) const BAR0_SIZE: usize = 0x10_0000;
pub(crate) type Bar0 = pci::Bar<'static, BAR0_SIZE>;

/// `CMD_POLL_TOKEN`.
const POLL_TOKEN: u32 = 0xffff;
/// How long a command may keep GO set. mlx4 gives every command a minute
/// (`MLX4_CMD_TIME_CLASS_A`..`C`); the firmware's own life cycle (MAP_FA,
/// RUN_FW, INIT_HCA, CLOSE_HCA, UNMAP_FA ...) gets that here too, the
/// commands on contexts 10 s, so that a teardown stuck on one does not
/// hold unbind for minutes.
const TIMEOUT_MS: i64 = 10_000;
const FIRMWARE_TIMEOUT_MS: i64 = 60_000;

/// `MLX4_MAILBOX_SIZE`, the one the MAP_* page lists are cut to as well.
pub(crate) const MAILBOX_SIZE: usize = crate::icm::map_cmd::MAILBOX_SIZE;

/// The op_mod of HW2SW_EQ, HW2SW_CQ and HW2SW_MPT that asks for no context
/// back (mainline's `mlx4_HW2SW_*()`): nothing needs it.
pub(crate) const HW2SW_NO_OUTPUT: u32 = 1;

/// The commands this driver issues (`include/linux/mlx4/cmd.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    QueryDevCap = 0x03,
    QueryFw = 0x04,
    InitHca = 0x07,
    CloseHca = 0x08,
    InitPort = 0x09,
    ClosePort = 0x0a,
    Sw2HwMpt = 0x0d,
    Hw2SwMpt = 0x0f,
    MapEq = 0x12,
    Sw2HwEq = 0x13,
    Hw2SwEq = 0x14,
    Sw2HwCq = 0x16,
    Hw2SwCq = 0x17,
    Rst2InitQp = 0x19,
    Init2RtrQp = 0x1a,
    Rtr2RtsQp = 0x1b,
    ToRstQp = 0x21,
    MadIfc = 0x24,
    Nop = 0x31,
    UnmapIcm = 0xff9,
    MapIcm = 0xffa,
    UnmapIcmAux = 0xffb,
    MapIcmAux = 0xffc,
    SetIcmSize = 0xffd,
    UnmapFa = 0xffe,
    MapFa = 0xfff,
    RunFw = 0xff6,
}

impl Op {
    fn timeout_ms(self) -> i64 {
        match self {
            Op::InitHca
            | Op::CloseHca
            | Op::MapFa
            | Op::UnmapFa
            | Op::RunFw
            | Op::SetIcmSize
            | Op::MapIcmAux
            | Op::UnmapIcmAux
            | Op::MapIcm
            | Op::UnmapIcm => FIRMWARE_TIMEOUT_MS,
            _ => TIMEOUT_MS,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::QueryDevCap => "QUERY_DEV_CAP",
            Op::QueryFw => "QUERY_FW",
            Op::InitHca => "INIT_HCA",
            Op::CloseHca => "CLOSE_HCA",
            Op::InitPort => "INIT_PORT",
            Op::ClosePort => "CLOSE_PORT",
            Op::Sw2HwMpt => "SW2HW_MPT",
            Op::Hw2SwMpt => "HW2SW_MPT",
            Op::MapEq => "MAP_EQ",
            Op::Sw2HwEq => "SW2HW_EQ",
            Op::Hw2SwEq => "HW2SW_EQ",
            Op::Sw2HwCq => "SW2HW_CQ",
            Op::Hw2SwCq => "HW2SW_CQ",
            Op::Rst2InitQp => "RST2INIT_QP",
            Op::Init2RtrQp => "INIT2RTR_QP",
            Op::Rtr2RtsQp => "RTR2RTS_QP",
            Op::ToRstQp => "2RST_QP",
            Op::MadIfc => "MAD_IFC",
            Op::Nop => "NOP",
            Op::UnmapIcm => "UNMAP_ICM",
            Op::MapIcm => "MAP_ICM",
            Op::UnmapIcmAux => "UNMAP_ICM_AUX",
            Op::MapIcmAux => "MAP_ICM_AUX",
            Op::SetIcmSize => "SET_ICM_SIZE",
            Op::UnmapFa => "UNMAP_FA",
            Op::MapFa => "MAP_FA",
            Op::RunFw => "RUN_FW",
        }
    }
}

/// The errno of a `CMD_STAT_*` status (`mlx4_status_to_errno()`).
fn status_to_errno(status: u32) -> Error {
    match status {
        0x01 => EIO,    // INTERNAL_ERR
        0x02 => EPERM,  // BAD_OP
        0x03 => EINVAL, // BAD_PARAM
        0x04 => ENXIO,  // BAD_SYS_STATE
        0x05 => EBADF,  // BAD_RESOURCE
        0x06 => EBUSY,  // RESOURCE_BUSY
        0x08 => ENOMEM, // EXCEED_LIM
        0x09 => EBADF,  // BAD_RES_STATE
        0x0a => EBADF,  // BAD_INDEX
        0x0b => EFAULT, // BAD_NVMEM
        0x0c => ENFILE, // ICM_ERROR
        0x10 => EINVAL, // BAD_QP_STATE
        0x20 => EFAULT, // BAD_SEG_PARAM
        0x21 => EBUSY,  // REG_BOUND
        0x22 => EAGAIN, // LAM_NOT_PRE
        0x30 => EINVAL, // BAD_PKT
        0x40 => ENOMEM, // BAD_SIZE
        0x50 => EACCES, // MULTI_FUNC_REQ
        _ => EIO,
    }
}

/// What goes into `in_param`.
pub(crate) enum Input<'a> {
    None,
    /// An immediate value (e.g. MAP_EQ's event mask).
    Imm(u64),
    /// Bytes copied to the start of the in mailbox, whose address is passed.
    Mailbox(&'a [u8]),
}

/// One command.
pub(crate) struct Command<'a> {
    pub(crate) op: Op,
    pub(crate) in_mod: u32,
    pub(crate) op_mod: u32,
    pub(crate) input: Input<'a>,
    /// Filled from the start of the out mailbox, whose address is passed.
    pub(crate) output: Option<&'a mut [u8]>,
    /// Filled from the HCR's out_param after completion (`mlx4_cmd_imm()`:
    /// SET_ICM_SIZE's auxiliary pages).
    pub(crate) output_imm: Option<&'a mut u64>,
    /// Also report the completion as a CMD EQE (E bit).
    pub(crate) event: bool,
}

impl<'a> Command<'a> {
    pub(crate) fn new(op: Op, in_mod: u32) -> Self {
        Command {
            op,
            in_mod,
            op_mod: 0,
            input: Input::None,
            output: None,
            output_imm: None,
            event: false,
        }
    }

    pub(crate) fn op_mod(mut self, op_mod: u32) -> Self {
        self.op_mod = op_mod;
        self
    }

    pub(crate) fn input(mut self, input: Input<'a>) -> Self {
        self.input = input;
        self
    }

    pub(crate) fn output(mut self, out: &'a mut [u8]) -> Self {
        self.output = Some(out);
        self
    }

    pub(crate) fn output_imm(mut self, out: &'a mut u64) -> Self {
        self.output_imm = Some(out);
        self
    }

    pub(crate) fn event(mut self) -> Self {
        self.event = true;
        self
    }
}

/// The two mailboxes; DMA memory goes away at unbind with the rest.
pub(crate) struct Mailboxes {
    inbox: Coherent<[u8]>,
    outbox: Coherent<[u8]>,
}

/// What exists in the device, so that unbind can take it down.
#[derive(Default)]
pub(crate) struct Live {
    pub(crate) eq: bool,
    /// Port 1 is up (INIT_PORT); not a context, so not in [`Live::any`].
    pub(crate) port: bool,
    /// CQ slots with a CQ in hardware (bit = slot).
    pub(crate) cqs: u64,
    /// QPN of the QP in hardware per send-queue slot (0: none).
    pub(crate) qps: [u32; MAX_QPS],
    /// MPTs in hardware ownership (bit = MPT index).
    pub(crate) mpts: [u64; MAX_MPTS / 64],
}

impl Live {
    /// Whether anything is (still) in the adapter.
    pub(crate) fn any(&self) -> bool {
        self.eq
            || self.cqs != 0
            || self.qps.iter().any(|&q| q != 0)
            || self.mpts.iter().any(|&m| m != 0)
    }
}

pub(crate) struct CmdState {
    /// `cmd->toggle`: from the HCR at probe (1 after a reset), flips with
    /// every post.
    toggle: bool,
    /// Set at unbind: the device is reset and no command may be posted.
    pub(crate) dead: bool,
    /// The ownership word read 0: ours to give back.
    owned: bool,
    pub(crate) live: Live,
}

#[pin_data(PinnedDrop)]
pub(crate) struct CmdIf {
    bar0: Devres<Bar0>,
    mbox: Devres<Mailboxes>,
    #[pin]
    state: Mutex<CmdState>,
    dev: ARef<device::Device>,
}

impl CmdIf {
    /// `bar0` must already be owned (see `hca::take_ownership`).
    pub(crate) fn new(
        pdev: &pci::Device<device::Bound>,
        bar0: Devres<Bar0>,
    ) -> Result<Pin<KBox<Self>>> {
        let dev = pdev.as_ref();
        let mbox = Mailboxes {
            inbox: Coherent::zeroed_slice(dev, MAILBOX_SIZE, GFP_KERNEL)?,
            outbox: Coherent::zeroed_slice(dev, MAILBOX_SIZE, GFP_KERNEL)?,
        };
        KBox::pin_init(
            try_pin_init!(CmdIf {
                bar0,
                mbox: Devres::new(dev, mbox)?,
                state <- new_mutex!(CmdState {
                    toggle: true,
                    dead: false,
                    owned: false,
                    live: Live {
                        eq: false,
                        port: false,
                        cqs: 0,
                        qps: [0; MAX_QPS],
                        mpts: [0; MAX_MPTS / 64],
                    },
                }),
                dev: dev.into(),
            }),
            GFP_KERNEL,
        )
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, CmdState> {
        self.state.lock()
    }

    pub(crate) fn dev(&self) -> &device::Device {
        &self.dev
    }

    /// `mlx4_get_ownership()`: reads the ownership word, which takes the
    /// device if it reads 0.
    pub(crate) fn read_owner(&self) -> Result<u32> {
        let v = {
            // An RCU read-side section: no mutex while it is held.
            let bar0 = self.bar0.try_access().ok_or(ENODEV)?;
            BeMmio::new(&bar0).read(OWNER).into_raw()
        };
        self.state.lock().owned = v == 0;
        Ok(v)
    }

    /// `mlx4_free_ownership()`: writes 0, the device is free for the next
    /// driver. Only if it is ours, once.
    pub(crate) fn free_ownership(&self) {
        let mut st = self.state.lock();
        if !core::mem::replace(&mut st.owned, false) {
            return;
        }
        if let Some(bar0) = self.bar0.try_access() {
            BeMmio::new(&bar0).write_reg(OWNER::zeroed());
        }
    }

    /// `mlx4_reset()`'s write: `MLX4_RESET_VALUE` to the reset register.
    /// The device drops every queue, context and command in flight.
    pub(crate) fn write_reset(&self) {
        if let Some(bar0) = self.bar0.try_access() {
            BeMmio::new(&bar0).write_reg(RESET::from(RESET_VALUE));
        }
    }

    /// Takes the toggle from the HCR. mlx4 resets the device first, which
    /// leaves T = 0 for its initial toggle of 1; this driver does not reset,
    /// and a previous driver may have left T = 1, so the HCR is idle when
    /// the toggle differs from T. A set GO bit is a command still running.
    pub(crate) fn sync_toggle(&self) -> Result {
        let ctrl = self.read_ctrl()?;
        if ctrl.go() {
            dev_err!(self.dev, "HCR busy at probe ({:#010x})\n", ctrl.into_raw());
            return Err(EBUSY);
        }
        self.state.lock().toggle = !ctrl.toggle();
        Ok(())
    }

    fn read_ctrl(&self) -> Result<HCR_CTRL> {
        let bar0 = self.bar0.try_access().ok_or(ENODEV)?;
        Ok(BeMmio::new(&bar0).read(HCR_CTRL))
    }

    /// `cmd_pending()`: GO set, or T still equal to the driver's toggle.
    fn pending(ctrl: HCR_CTRL, toggle: bool) -> bool {
        ctrl.go() || ctrl.toggle() == toggle
    }

    /// Posts `cmd` and polls for its completion. The caller holds the lock
    /// (`st`).
    pub(crate) fn exec(&self, st: &mut CmdState, mut cmd: Command<'_>) -> Result {
        if st.dead {
            return Err(ENODEV);
        }
        let op = cmd.op;
        // mlx4_cmd_post(): in polling mode a busy HCR is an error, not a wait.
        // Checked before the mailboxes are touched: a command that timed out
        // may still be running and using them.
        let ctrl = self.read_ctrl()?;
        if Self::pending(ctrl, st.toggle) {
            dev_err!(
                self.dev,
                "{}: HCR busy ({:#010x})\n",
                op.name(),
                ctrl.into_raw()
            );
            return Err(EIO);
        }
        // Stage the in mailbox and name both mailboxes (nothing is in
        // flight: the lock is held and the HCR is idle).
        let (in_param, out_param) = {
            let mbox = self.mbox.try_access().ok_or(ENODEV)?;
            let in_param = match cmd.input {
                Input::None => 0,
                Input::Imm(v) => v,
                Input::Mailbox(bytes) => {
                    if bytes.len() > MAILBOX_SIZE {
                        return Err(EINVAL);
                    }
                    // SAFETY: `bytes` fits the mailbox (checked above); the
                    // device reads the mailbox only during a command, and
                    // none is in flight: the lock is held and the HCR idle.
                    unsafe {
                        core::ptr::copy_nonoverlapping(
                            bytes.as_ptr(),
                            mbox.inbox.as_mut_ptr().cast::<u8>(),
                            bytes.len(),
                        )
                    };
                    mbox.inbox.dma_handle()
                }
            };
            let out_param = match cmd.output.as_deref() {
                Some(out) => {
                    // What the device leaves unwritten reads as 0, not as
                    // the previous command's output.
                    // SAFETY: The length fits the mailbox; the device writes
                    // it only during a command, as above.
                    unsafe {
                        core::ptr::write_bytes(
                            mbox.outbox.as_mut_ptr().cast::<u8>(),
                            0,
                            out.len().min(MAILBOX_SIZE),
                        )
                    };
                    mbox.outbox.dma_handle()
                }
                None => 0,
            };
            (in_param, out_param)
        };

        let go = HCR_CTRL::zeroed()
            .with_go(true)
            .with_event(cmd.event)
            .with_toggle(st.toggle)
            .try_with_opmod(cmd.op_mod)?
            .try_with_opcode(op as u32)?;
        {
            let bar0 = self.bar0.try_access().ok_or(ENODEV)?;
            let hcr = BeMmio::new(&bar0);
            hcr.write_reg(HCR_IN_PARAM_HI::from((in_param >> 32) as u32));
            hcr.write_reg(HCR_IN_PARAM_LO::from(in_param as u32));
            hcr.write_reg(HCR_IN_MODIFIER::from(cmd.in_mod));
            hcr.write_reg(HCR_OUT_PARAM_HI::from((out_param >> 32) as u32));
            hcr.write_reg(HCR_OUT_PARAM_LO::from(out_param as u32));
            hcr.write_reg(HCR_TOKEN::zeroed().with_const_token::<POLL_TOKEN>());
            // Dwords 0-5 before GO (mlx4's wmb() between them).
            crate::hw::writer::wmb();
            hcr.write_reg(go);
        }
        st.toggle = !st.toggle;

        let toggle = st.toggle;
        let done = read_poll_timeout(
            || self.read_ctrl(),
            |c| !Self::pending(*c, toggle),
            Delta::from_micros(10),
            Delta::from_millis(op.timeout_ms()),
        )
        .map_err(|e| {
            if e == ETIMEDOUT {
                dev_err!(self.dev, "{}: timed out (GO bit not cleared)\n", op.name());
                EIO
            } else {
                e
            }
        })?;
        let status = done.status().get();
        if status != 0 {
            let err = status_to_errno(status);
            dev_err!(
                self.dev,
                "{} (in_mod {:#x}, op_mod {}) failed: status {:#04x} ({:?})\n",
                op.name(),
                cmd.in_mod,
                cmd.op_mod,
                status,
                err
            );
            return Err(err);
        }

        if let Some(out) = cmd.output_imm {
            let bar0 = self.bar0.try_access().ok_or(ENODEV)?;
            let hcr = BeMmio::new(&bar0);
            let hi = hcr.read(HCR_OUT_PARAM_HI).into_raw();
            let lo = hcr.read(HCR_OUT_PARAM_LO).into_raw();
            *out = (u64::from(hi) << 32) | u64::from(lo);
        }
        if let Some(out) = cmd.output.as_deref_mut() {
            let mbox = self.mbox.try_access().ok_or(ENODEV)?;
            let len = out.len().min(MAILBOX_SIZE);
            // SAFETY: `len` fits the mailbox; the command is complete, so the
            // device no longer writes it, and the lock is held.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    mbox.outbox.as_ptr().cast::<u8>(),
                    out.as_mut_ptr(),
                    len,
                )
            };
        }
        Ok(())
    }
}

/// A probe that fails after taking the device gives it back here; after a
/// normal unbind it is already free.
#[pinned_drop]
impl PinnedDrop for CmdIf {
    fn drop(self: Pin<&mut Self>) {
        self.free_ownership();
    }
}
