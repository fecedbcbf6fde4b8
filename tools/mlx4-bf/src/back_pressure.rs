// SPDX-License-Identifier: GPL-2.0

//! Posts retried while the adapter pushes back (`-EAGAIN`): the timing
//! loops count the wait in the post's time rather than fail.

use std::{io, thread};

use mlx4_bf_core::abi;

use crate::device::{Device, Mapping};

/// How often a timed post is retried while the send queue is full.
const FULL_RETRIES: u32 = 1000;

/// Is this `-EAGAIN`, the adapter's back pressure?
pub fn is_back_pressure(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

/// Retries `post` while it answers `-EAGAIN`, back pressure (the adapter,
/// the device model under emulation above all, has not caught up with the
/// send queue within the kernel's wait); the wait counts in the post's time.
fn retry_back_pressure<T>(mut post: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut retries = 0;
    loop {
        match post() {
            Err(e) if is_back_pressure(&e) && retries < FULL_RETRIES => {
                retries += 1;
                thread::yield_now();
            }
            r => return r,
        }
    }
}

/// A post for the timing loops, retried under back pressure.
pub fn post_timed(dev: &Device, qp: &abi::QpInfo, wqe: &[u8], flags: u32) -> io::Result<()> {
    retry_back_pressure(|| dev.post_send(qp, wqe, flags)).map(|_| ())
}

/// [`post_timed`] of a WQE staged in the QP's WQE page.
pub fn post_staged_timed(
    dev: &Device,
    qp: &abi::QpInfo,
    page: &Mapping,
    wqe: &[u8],
    flags: u32,
) -> io::Result<()> {
    retry_back_pressure(|| dev.post_send_staged(qp, page, wqe, flags))
}
