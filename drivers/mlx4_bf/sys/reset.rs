// SPDX-License-Identifier: GPL-2.0

//! The last resort of a teardown: when the adapter did not give back a QP,
//! CQ, EQ or MPT (its 2RST_QP, HW2SW_* failed or timed out), it may still
//! write the memory those name, which the driver is about to free or
//! unpin. So bus mastering is cleared (no DMA from here on) and the
//! adapter is reset through BAR0, as `mlx4_reset()` does: the reset
//! register, a second for the device to come back, its vendor ID readable
//! again, its config space restored (bus mastering still off; the next
//! probe enables it).
//!
//! The kernel crate has no `pci_clear_master()`, `pci_save_state()` or
//! `pci_restore_state()`, nor config-space access outside a bound device:
//! they are called here.

use kernel::{bindings, pci, prelude::*, time::delay::fsleep, time::Delta};

/// `PCI_VENDOR_ID` reads this while the device is still in reset.
const NOT_PRESENT: u16 = 0xffff;
/// `MLX4_RESET_TIMEOUT_JIFFIES`: how long the device may take after the
/// first second.
const BACK_TIMEOUT_MS: i64 = 2000;

/// Stops `pdev`'s DMA and resets it with `write_reset` (the BAR0 reset
/// register write).
pub(crate) fn last_resort(pdev: &pci::Device, write_reset: impl FnOnce()) {
    // `pci::Device` is a transparent wrapper of `struct pci_dev`.
    let raw = core::ptr::from_ref(pdev)
        .cast_mut()
        .cast::<bindings::pci_dev>();
    dev_err!(
        pdev.as_ref(),
        "the adapter kept a queue or region: clearing bus mastering and resetting it\n"
    );
    // SAFETY: `raw` is a live `struct pci_dev` (`pdev` borrows it), still
    // bound to this driver (unbind or a failed probe runs this).
    let saved = unsafe {
        bindings::pci_clear_master(raw);
        bindings::pci_save_state(raw)
    };
    write_reset();
    // mlx4_reset(): a second, then until the vendor ID reads again.
    fsleep(Delta::from_millis(1000));
    let mut waited = 0;
    loop {
        let mut vendor = NOT_PRESENT;
        // SAFETY: As above; `vendor` is a valid place for the word.
        unsafe { bindings::pci_read_config_word(raw, bindings::PCI_VENDOR_ID as i32, &mut vendor) };
        if vendor != NOT_PRESENT {
            break;
        }
        if waited >= BACK_TIMEOUT_MS {
            dev_err!(pdev.as_ref(), "no vendor ID after the reset\n");
            return;
        }
        fsleep(Delta::from_millis(10));
        waited += 10;
    }
    if saved == 0 {
        // SAFETY: As above; the state was saved above.
        unsafe { bindings::pci_restore_state(raw) };
    }
}
