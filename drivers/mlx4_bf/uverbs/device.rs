// SPDX-License-Identifier: GPL-2.0

//! The device and context objects: QUERY_DEVICE, QUERY_STATS and
//! QUERY_CONTEXT.

use kernel::prelude::*;

use super::Bundle;
use crate::{abi, context::Context};

pub(super) fn query_device(ctx: &Context, b: &mut Bundle<'_>) -> Result {
    let out = b.output(abi::ATTR_DEVICE_INFO).ok_or(EINVAL)?;
    b.check_unused()?;
    b.write(out, &ctx.device_info())
}

pub(super) fn query_stats(ctx: &Context, b: &mut Bundle<'_>) -> Result {
    let dev = b.output(abi::ATTR_DEVICE_STATS);
    let own = b.output(abi::ATTR_CONTEXT_STATS);
    b.check_unused()?;
    if dev.is_none() && own.is_none() {
        return Err(EINVAL);
    }
    if let Some(i) = dev {
        b.write(i, &ctx.device_stats())?;
    }
    if let Some(i) = own {
        b.write(i, &ctx.context_stats())?;
    }
    Ok(())
}

pub(super) fn query_context(ctx: &Context, b: &mut Bundle<'_>) -> Result {
    let out = b.output(abi::ATTR_CONTEXT_INFO);
    b.check_unused()?;
    // Also the benchmarks' no-op round trip: without an output it does nothing.
    let Some(out) = out else { return Ok(()) };
    b.write(out, &ctx.context_info())
}
