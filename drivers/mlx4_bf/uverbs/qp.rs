// SPDX-License-Identifier: GPL-2.0

//! The QP object: CREATE_QP, DESTROY_QP, CONNECT_QP, POST_SEND, POST_RECV
//! and ARM_CQ (its receive CQ's).

use kernel::prelude::*;

use super::Bundle;
use crate::{
    abi,
    context::{Context, SendRequest, WqeSource},
};

pub(super) fn create(ctx: &Context, b: &mut Bundle<'_>) -> Result {
    let out = b.output(abi::ATTR_QP_INFO).ok_or(EINVAL)?;
    let flags = b.inline_u32(abi::ATTR_QP_FLAGS)?.unwrap_or(0);
    let send_out = b.output(abi::ATTR_QP_SEND_INFO);
    b.check_unused()?;
    // A user-posted QP's send queue is described to its process.
    let user_send = flags & abi::QP_F_USER_SEND != 0;
    if flags & !abi::QP_F_ALL != 0 || user_send != send_out.is_some() {
        return Err(EINVAL);
    }
    ctx.create_qp(user_send, |info, send_info| {
        b.write(out, info)?;
        send_out.map_or(Ok(()), |o| b.write(o, send_info))
    })
}

pub(super) fn destroy(ctx: &Context, b: &mut Bundle<'_>) -> Result {
    let handle = b.inline_u32(abi::ATTR_QP_HANDLE)?.ok_or(EINVAL)?;
    b.check_unused()?;
    ctx.destroy_qp(handle)
}

pub(super) fn connect(ctx: &Context, b: &mut Bundle<'_>) -> Result {
    let handle = b.inline_u32(abi::ATTR_QP_HANDLE)?.ok_or(EINVAL)?;
    let remote = b.inline_u32(abi::ATTR_REMOTE_QPN)?.ok_or(EINVAL)?;
    b.check_unused()?;
    if remote >> 24 != 0 {
        return Err(EINVAL);
    }
    ctx.connect_qp(handle, remote)
}

/// The hot method: one call from the ioctl, the attributes and the post
/// itself in one frame (`Context::post_send` is inlined here). Inlining it
/// into the ioctl as well costs ~70 instructions per post under `-icount`
/// (register pressure in a frame holding every method), measured.
#[inline(never)]
pub(super) fn post_send(ctx: &Context, b: &mut Bundle<'_>) -> Result {
    let handle = b.inline_u32(abi::ATTR_QP_HANDLE)?.ok_or(EINVAL)?;
    let flags = b.inline_u32(abi::ATTR_POST_FLAGS)?.unwrap_or(0);
    // The WQE by pointer, or staged in the QP's WQE page.
    let wqe = match (b.input_ptr(abi::ATTR_WQE), b.inline_u32(abi::ATTR_WQE_LEN)?) {
        (Some(w), None) => WqeSource::User(w.reader()),
        (None, Some(n)) => WqeSource::Staged(n as usize),
        _ => return Err(EINVAL),
    };
    let payload = b.input_ptr(abi::ATTR_PAYLOAD).map(|p| p.reader());
    let out = b.output(abi::ATTR_POST_RESULT);
    b.check_unused()?;
    if flags & !abi::POST_F_ALL != 0 || flags == abi::POST_F_ALL {
        return Err(EINVAL);
    }
    let req = SendRequest {
        handle,
        flags,
        wqe,
        payload,
    };
    match out {
        Some(i) => ctx.post_send(req, Some(|r: &abi::PostResult| b.write(i, r))),
        None => ctx.post_send(req, None::<fn(&abi::PostResult) -> Result>),
    }
}

pub(super) fn post_recv(ctx: &Context, b: &mut Bundle<'_>) -> Result {
    let handle = b.inline_u32(abi::ATTR_QP_HANDLE)?.ok_or(EINVAL)?;
    let count = b.inline_u32(abi::ATTR_RECV_COUNT)?.unwrap_or(1);
    b.check_unused()?;
    ctx.post_recv(handle, count)
}

pub(super) fn arm_cq(ctx: &Context, b: &mut Bundle<'_>) -> Result {
    let handle = b.inline_u32(abi::ATTR_QP_HANDLE)?.ok_or(EINVAL)?;
    let flags = b.inline_u32(abi::ATTR_ARM_FLAGS)?.unwrap_or(0);
    b.check_unused()?;
    if flags & !abi::ARM_F_SOLICITED != 0 {
        return Err(EINVAL);
    }
    ctx.arm_cq(handle, flags & abi::ARM_F_SOLICITED != 0)
}
