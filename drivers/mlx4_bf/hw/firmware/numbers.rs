// SPDX-License-Identifier: GPL-2.0

//! The numbers the driver takes inside the profile INIT_HCA set: its EQs
//! and its first CQ after the firmware's reserved ones, and a check that
//! the kernel's QPNs fit.

use kernel::prelude::*;

use super::{dev_cap::DevCap, icm::Profile};
use crate::{
    geometry::{FIRST_PROVIDER_CQ, FIRST_QPN, KERNEL_QPN_END},
    hw::queues::eq,
};

/// The first EQ and CQ numbers the firmware does not reserve, and how many
/// EQs the driver makes from there.
pub(super) struct Numbers {
    pub(super) first_eqn: u32,
    pub(super) eqs: usize,
    pub(super) first_cqn: u32,
}

/// The [`Numbers`] inside the profile INIT_HCA set: as many EQs as are
/// wanted and left.
pub(super) fn numbers(dev: &kernel::device::Device, cap: &DevCap, p: &Profile) -> Result<Numbers> {
    let first_eqn = cap.reserved_eqs;
    if first_eqn >= p.num_eqs {
        dev_err!(
            dev,
            "no usable EQ ({} reserved of {})\n",
            first_eqn,
            p.num_eqs
        );
        return Err(ENODEV);
    }
    let eqs = (p.num_eqs - first_eqn).min(eq::wanted()) as usize;
    let first_cqn = cap.reserved_cqs;
    // Send CQs (one per context), receive CQs (one per QP), the provider's.
    if first_cqn as usize + FIRST_PROVIDER_CQ >= p.num_cqs as usize {
        dev_err!(
            dev,
            "too few CQs ({} reserved of {})\n",
            first_cqn,
            p.num_cqs
        );
        return Err(ENODEV);
    }
    // The kernel's QPNs, then the provider's.
    if FIRST_QPN < cap.reserved_qps || KERNEL_QPN_END >= p.num_qps {
        dev_err!(
            dev,
            "too few QPs ({} reserved of {})\n",
            cap.reserved_qps,
            p.num_qps
        );
        return Err(ENODEV);
    }
    Ok(Numbers {
        first_eqn,
        eqs,
        first_cqn,
    })
}
