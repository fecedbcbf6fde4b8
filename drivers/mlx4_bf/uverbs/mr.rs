// SPDX-License-Identifier: GPL-2.0

//! The MR object: REG_MR and DEREG_MR.

use kernel::prelude::*;

use super::Bundle;
use crate::{abi, context::Context};

pub(super) fn reg(ctx: &Context, b: &mut Bundle<'_>) -> Result {
    let addr = b.inline_u64(abi::ATTR_MR_ADDR)?.ok_or(EINVAL)?;
    let len = b.inline_u64(abi::ATTR_MR_LENGTH)?.ok_or(EINVAL)?;
    let access = b.inline_u32(abi::ATTR_MR_ACCESS)?.unwrap_or(0);
    let out = b.output(abi::ATTR_MR_INFO).ok_or(EINVAL)?;
    b.check_unused()?;
    ctx.reg_mr(addr, len, access, |info| b.write(out, info))
}

pub(super) fn dereg(ctx: &Context, b: &mut Bundle<'_>) -> Result {
    let handle = b.inline_u32(abi::ATTR_MR_HANDLE)?.ok_or(EINVAL)?;
    b.check_unused()?;
    ctx.dereg_mr(handle)
}
