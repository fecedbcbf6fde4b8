// SPDX-License-Identifier: GPL-2.0

//! Completion queues: polled by the process, and, made with events, on a
//! completion channel of their own whose file poll(2) watches.

use std::{
    ffi::c_int,
    io,
    marker::PhantomData,
    os::fd::RawFd,
    ptr,
    ptr::NonNull,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};

use super::{check, ffi, Context};

impl Context {
    /// A CQ of at least `entries` entries, polled by this process.
    pub fn create_cq(&self, entries: u32) -> io::Result<Cq<'_>> {
        self.new_cq(entries, false)
    }

    /// A CQ whose completions raise events, when asked for one
    /// ([`Cq::arm`]), on a channel of its own ([`Cq::event_fd`]).
    pub fn create_cq_with_events(&self, entries: u32) -> io::Result<Cq<'_>> {
        self.new_cq(entries, true)
    }

    fn new_cq(&self, entries: u32, events: bool) -> io::Result<Cq<'_>> {
        let (mut cq, mut fd) = (ptr::null_mut(), -1);
        let entries = c_int::try_from(entries).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: the context is open; `cq` and `fd` are written on success.
        check(unsafe {
            ffi::hv_create_cq(self.ctx.as_ptr(), entries, events.into(), &mut cq, &mut fd)
        })?;
        Ok(Cq {
            cq: NonNull::new(cq).ok_or(io::ErrorKind::Other)?,
            event_fd: (fd >= 0).then_some(fd),
            _ctx: PhantomData,
        })
    }
}

/// A completion queue; its completions polled through libmlx4.
pub struct Cq<'c> {
    pub(super) cq: NonNull<ffi::Opaque>,
    /// The completion channel's file, if the CQ has one.
    event_fd: Option<RawFd>,
    _ctx: PhantomData<&'c Context>,
}

/// One work completion (`struct hv_wc`: `ibv_wc`'s fields, the immediate
/// in host order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Wc {
    pub wr_id: u64,
    /// `enum ibv_wc_status`: 0 is success.
    pub status: u32,
    /// `enum ibv_wc_opcode`.
    pub opcode: u32,
    pub byte_len: u32,
    pub imm: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    /// `IBV_WC_WITH_IMM` was set.
    pub with_imm: u32,
}

/// `IBV_WC_RECV` and `IBV_WC_RECV_RDMA_WITH_IMM`.
pub const WC_RECV: u32 = 128;
pub const WC_RECV_RDMA_WITH_IMM: u32 = 129;

impl Cq<'_> {
    /// The next completion, if one is there.
    pub fn poll(&self) -> io::Result<Option<Wc>> {
        let mut wc = Wc::default();
        // SAFETY: the CQ lives; `wc` is written whole when 1 is returned.
        match unsafe { ffi::hv_poll_wc(self.cq.as_ptr(), &mut wc) } {
            1 => Ok(Some(wc)),
            0 => Ok(None),
            e => Err(io::Error::from_raw_os_error(-e)),
        }
    }

    /// Spins for the next completion, which must be a success, for at
    /// most `wait`.
    pub fn await_success(&self, wait: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            if let Some(c) = self.poll().context("ibv_poll_cq")? {
                if c.status != 0 {
                    bail!("the work request completed with status {}", c.status);
                }
                return Ok(());
            }
            if start.elapsed() > wait {
                bail!("no completion within {wait:?}");
            }
        }
    }

    /// The file that turns readable when an asked-for event comes.
    pub fn event_fd(&self) -> Option<RawFd> {
        self.event_fd
    }

    /// Asks for an event at the next completion (`ibv_req_notify_cq`).
    pub fn arm(&self) -> io::Result<()> {
        if self.event_fd.is_none() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: the CQ lives.
        check(unsafe { ffi::hv_req_notify(self.cq.as_ptr()) })
    }

    /// Takes and acknowledges the event its channel holds (after poll(2)
    /// found the file readable; EAGAIN if there is none).
    pub fn take_event(&self) -> io::Result<()> {
        if self.event_fd.is_none() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: the CQ lives and has a channel.
        check(unsafe { ffi::hv_take_event(self.cq.as_ptr()) })
    }
}

impl Drop for Cq<'_> {
    fn drop(&mut self) {
        // SAFETY: its QPs borrowed it and are gone; every event taken was
        // acknowledged, so the destroy does not wait.
        unsafe { ffi::hv_destroy_cq(self.cq.as_ptr()) };
    }
}
