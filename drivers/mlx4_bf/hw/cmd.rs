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
//! The HCR is seven big-endian dwords (`cmd/regs.rs`), written through the
//! big-endian view of BAR0 (`cmd/be_mmio.rs`).

pub(crate) mod be_fields;
pub(crate) mod be_mmio;
mod command;
mod live;
pub(crate) mod regs;

pub(crate) use command::{Command, Input, Op, HW2SW_NO_OUTPUT};
pub(crate) use live::Live;

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

use be_mmio::BeMmio;
use regs::{
    HCR_CTRL, HCR_IN_MODIFIER, HCR_IN_PARAM_HI, HCR_IN_PARAM_LO, HCR_OUT_PARAM_HI,
    HCR_OUT_PARAM_LO, HCR_TOKEN, OWNER, RESET, RESET_VALUE,
};

/// BAR0 is 1 MiB; every offset used here is a constant inside it.
pub(crate) const BAR0_SIZE: usize = 0x10_0000;
pub(crate) type Bar0 = pci::Bar<'static, BAR0_SIZE>;

/// `CMD_POLL_TOKEN`.
const POLL_TOKEN: u32 = 0xffff;

/// `MLX4_MAILBOX_SIZE`, the one the MAP_* page lists are cut to as well.
pub(crate) const MAILBOX_SIZE: usize = crate::icm::map_cmd::MAILBOX_SIZE;

/// The two mailboxes; DMA memory goes away at unbind with the rest.
pub(crate) struct Mailboxes {
    inbox: Coherent<[u8]>,
    outbox: Coherent<[u8]>,
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
    /// `bar0` must already be owned (see `firmware::probe`).
    pub(crate) fn new(
        pdev: &pci::Device<device::Bound>,
        bar0: Devres<Bar0>,
    ) -> Result<Pin<KBox<Self>>> {
        let dev = pdev.as_ref();
        let mbox = Mailboxes {
            inbox: Coherent::zeroed_slice(dev, MAILBOX_SIZE, GFP_KERNEL)?,
            outbox: Coherent::zeroed_slice(dev, MAILBOX_SIZE, GFP_KERNEL)?,
        };
        let live = Live::new()?;
        KBox::pin_init(
            try_pin_init!(CmdIf {
                bar0,
                mbox: Devres::new(dev, mbox)?,
                state <- new_mutex!(CmdState {
                    toggle: true,
                    dead: false,
                    owned: false,
                    live,
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

    /// Posts `cmd` and polls for its completion, as `mlx4_cmd_post()` and
    /// `mlx4_cmd_poll()`. The caller holds the lock (`st`).
    pub(crate) fn exec(&self, st: &mut CmdState, mut cmd: Command<'_>) -> Result {
        if st.dead {
            return Err(ENODEV);
        }
        // In polling mode a busy HCR is an error, not a wait. Checked before
        // the mailboxes are touched: a command that timed out may still be
        // running and using them.
        let ctrl = self.read_ctrl()?;
        if Self::pending(ctrl, st.toggle) {
            dev_err!(
                self.dev,
                "{}: HCR busy ({:#010x})\n",
                cmd.op.name(),
                ctrl.into_raw()
            );
            return Err(EIO);
        }
        let params = self.stage(&cmd)?;
        self.post(st, &cmd, params)?;
        self.wait(st, &cmd)?;
        self.collect(&mut cmd)
    }

    /// Stages the in mailbox and names both mailboxes; returns `(in_param,
    /// out_param)`. Nothing is in flight: the lock is held and the HCR idle.
    fn stage(&self, cmd: &Command<'_>) -> Result<(u64, u64)> {
        let mbox = self.mbox.try_access().ok_or(ENODEV)?;
        let in_param = match cmd.input {
            Input::None => 0,
            Input::Imm(v) => v,
            Input::Mailbox(bytes) => {
                if bytes.len() > MAILBOX_SIZE {
                    return Err(EINVAL);
                }
                // SAFETY: `bytes` fits the mailbox (checked above); the
                // device reads the mailbox only during a command, and none
                // is in flight: the lock is held and the HCR idle.
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
                // What the device leaves unwritten reads as 0, not as the
                // previous command's output.
                // SAFETY: The length fits the mailbox; the device writes it
                // only during a command, as above.
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
        Ok((in_param, out_param))
    }

    /// Writes the HCR: dwords 0-5, a barrier, then dword 6 with GO, the
    /// toggle and the opcode; flips the toggle.
    fn post(&self, st: &mut CmdState, cmd: &Command<'_>, (inp, out): (u64, u64)) -> Result {
        let go = HCR_CTRL::zeroed()
            .with_go(true)
            .with_event(cmd.event)
            .with_toggle(st.toggle)
            .try_with_opmod(cmd.op_mod)?
            .try_with_opcode(cmd.op as u32)?;
        let bar0 = self.bar0.try_access().ok_or(ENODEV)?;
        let hcr = BeMmio::new(&bar0);
        hcr.write_reg(HCR_IN_PARAM_HI::from((inp >> 32) as u32));
        hcr.write_reg(HCR_IN_PARAM_LO::from(inp as u32));
        hcr.write_reg(HCR_IN_MODIFIER::from(cmd.in_mod));
        hcr.write_reg(HCR_OUT_PARAM_HI::from((out >> 32) as u32));
        hcr.write_reg(HCR_OUT_PARAM_LO::from(out as u32));
        hcr.write_reg(HCR_TOKEN::zeroed().with_const_token::<POLL_TOKEN>());
        // Dwords 0-5 before GO (mlx4's wmb() between them).
        crate::sys::barrier::wmb();
        hcr.write_reg(go);
        st.toggle = !st.toggle;
        Ok(())
    }

    /// Polls until GO clears and T flips; a nonzero status becomes an errno
    /// as in `mlx4_status_to_errno()`, with a message naming the command.
    fn wait(&self, st: &CmdState, cmd: &Command<'_>) -> Result {
        let (op, toggle) = (cmd.op, st.toggle);
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
        if status == 0 {
            return Ok(());
        }
        let err = command::status_to_errno(status);
        dev_err!(
            self.dev,
            "{} (in_mod {:#x}, op_mod {}) failed: status {:#04x} ({:?})\n",
            op.name(),
            cmd.in_mod,
            cmd.op_mod,
            status,
            err
        );
        Err(err)
    }

    /// The outputs of a completed command: the HCR's out_param, the out
    /// mailbox.
    fn collect(&self, cmd: &mut Command<'_>) -> Result {
        if let Some(out) = cmd.output_imm.as_deref_mut() {
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
