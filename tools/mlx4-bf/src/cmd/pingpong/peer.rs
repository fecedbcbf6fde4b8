// SPDX-License-Identifier: GPL-2.0

//! An endpoint as the roles use it (the RDMA device's: [`super::verbs`]),
//! and the waits it makes for a completion, spinning or asleep in
//! poll(2), watching the peer and the deadline meanwhile.

use std::{
    io,
    os::{
        fd::{AsRawFd, RawFd},
        unix::net::UnixStream,
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Error, Result};

use super::{
    facts::Facts,
    link::Link,
    message::{Buffers, Side},
    options::WaitMode,
    plan::Setup,
};

/// One side of the ping-pong, set up and connected to the other.
pub(super) trait Peer {
    fn facts(&self) -> &Facts;
    fn link(&mut self) -> &mut Link;
    /// Builds message `seq` of `size` bytes from `side` into `bufs.wqe`;
    /// returns the WQE's length.
    fn message(&mut self, bufs: &mut Buffers, size: usize, side: Side, seq: u32) -> Result<usize>;
    /// Posts the WQE with `flags` (`abi::POST_F_*`).
    fn send(&mut self, wqe: &[u8], flags: u32) -> Result<()>;
    /// Waits for the next receive, checks it is message `seq` from `from`
    /// with the bytes `expect`, and makes room for the next one.
    fn receive(&mut self, expect: &[u8], wait: WaitMode, seq: u32, from: Side) -> Result<()>;
}

/// Where endpoints are opened: the RDMA device, by its name.
pub(super) trait Endpoints: Sync {
    /// Sets up an endpoint talking to its peer over `sock`, runs `body` on
    /// it and takes it down.
    fn with_endpoint<T>(
        &self,
        sock: UnixStream,
        timeout: Duration,
        setup: Setup,
        body: impl FnOnce(&mut dyn Peer) -> Result<T>,
    ) -> Result<T>;
}

/// How often a busy wait looks at the clock, the peer and (on one CPU)
/// yields.
const SPINS_PER_CHECK: u32 = 1024;
/// How long one poll(2) sleeps before the peer and the deadline are looked at.
const POLL_SLICE_MS: i32 = 100;

/// How an endpoint waits: its peer, its deadline, its CPUs.
pub(super) struct Waiting<'a> {
    pub(super) link: &'a Link,
    pub(super) timeout: Duration,
    /// What timed out: the receive of which message.
    pub(super) timed_out: &'a dyn Fn() -> Error,
}

/// Spinning alone on one CPU would starve the peer: yield now and then.
pub(super) fn single_cpu() -> bool {
    thread::available_parallelism().map_or(true, |n| n.get() == 1)
}

impl Waiting<'_> {
    /// Spins until `ready` has something.
    pub(super) fn spin<T>(&self, mut ready: impl FnMut() -> Result<Option<T>>) -> Result<T> {
        let (start, single) = (Instant::now(), single_cpu());
        let mut spins = 0u32;
        loop {
            if let Some(v) = ready()? {
                return Ok(v);
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(SPINS_PER_CHECK) {
                if start.elapsed() > self.timeout {
                    return Err((self.timed_out)());
                }
                self.link.check_peer()?;
                if single {
                    thread::yield_now();
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Sleeps in poll(2) until `fd` (`what`) is readable, waking every
    /// slice to look at the peer; fails past `start + timeout`, or if the
    /// file reports an error or hang-up (the adapter gone, the QP in
    /// error).
    pub(super) fn sleep_on(&self, fd: RawFd, what: &str, start: Instant) -> Result<()> {
        loop {
            if start.elapsed() > self.timeout {
                return Err((self.timed_out)());
            }
            let mut fds = [
                libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.link.sock.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, POLL_SLICE_MS) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e).with_context(|| format!("poll() on {what}"));
            }
            let got = fds[0].revents;
            if got & libc::POLLNVAL != 0 {
                bail!("poll() on {what}: POLLNVAL");
            }
            if got & (libc::POLLERR | libc::POLLHUP) != 0 {
                bail!(
                    "poll() on {what}: {} (the adapter is gone or the QP is in error)",
                    if got & libc::POLLHUP != 0 {
                        "POLLHUP"
                    } else {
                        "POLLERR"
                    }
                );
            }
            if fds[1].revents != 0 {
                self.link.check_peer()?;
            }
            if got & libc::POLLIN != 0 {
                return Ok(());
            }
        }
    }
}
