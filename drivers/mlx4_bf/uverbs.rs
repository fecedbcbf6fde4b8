// SPDX-License-Identifier: GPL-2.0

//! `MLX4_BF_IOCTL`, as uverbs: the call's attributes read into a bundle
//! (`bundle.rs`), dispatched on (object, method) to the handler of that
//! object's file — `device.rs`, `qp.rs`, `mr.rs`, as uverbs'
//! `uverbs_std_types_*.c` — which takes its attributes out of the bundle,
//! calls the context with typed arguments and writes the outputs back.
//! The context knows nothing of the wire format.

mod bundle;
mod device;
mod mr;
mod qp;

use kernel::prelude::*;

use crate::{abi, context::Context, sys::errno};
use bundle::{attr_store, Bundle};

/// One ioctl on `ctx`'s file. The table is a `match`: a post (the hot
/// method) costs one compare-and-branch to find, no indirect call.
#[inline(always)]
pub(crate) fn dispatch(ctx: &Context, cmd: u32, arg: usize) -> Result<isize> {
    if cmd != abi::IOCTL {
        return Err(ENOTTY);
    }
    // Every method answers -ENODEV once the adapter is unbound.
    ctx.check_bound()?;
    let mut store = attr_store();
    let mut b = Bundle::read(arg, &mut store)?;
    match (b.object_id, b.method_id) {
        (abi::OBJECT_DEVICE, abi::METHOD_QUERY_DEVICE) => device::query_device(ctx, &mut b),
        (abi::OBJECT_DEVICE, abi::METHOD_QUERY_STATS) => device::query_stats(ctx, &mut b),
        (abi::OBJECT_CONTEXT, abi::METHOD_QUERY_CONTEXT) => device::query_context(ctx, &mut b),
        (abi::OBJECT_QP, abi::METHOD_CREATE_QP) => qp::create(ctx, &mut b),
        (abi::OBJECT_QP, abi::METHOD_DESTROY_QP) => qp::destroy(ctx, &mut b),
        (abi::OBJECT_QP, abi::METHOD_POST_SEND) => qp::post_send(ctx, &mut b),
        (abi::OBJECT_QP, abi::METHOD_POST_RECV) => qp::post_recv(ctx, &mut b),
        (abi::OBJECT_QP, abi::METHOD_CONNECT_QP) => qp::connect(ctx, &mut b),
        (abi::OBJECT_QP, abi::METHOD_ARM_CQ) => qp::arm_cq(ctx, &mut b),
        (abi::OBJECT_MR, abi::METHOD_REG_MR) => mr::reg(ctx, &mut b),
        (abi::OBJECT_MR, abi::METHOD_DEREG_MR) => mr::dereg(ctx, &mut b),
        _ => Err(errno::eprotonosupport()),
    }?;
    Ok(0)
}
