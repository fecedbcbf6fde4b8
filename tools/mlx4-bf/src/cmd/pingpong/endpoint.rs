// SPDX-License-Identifier: GPL-2.0

//! One endpoint: its context and connected QP, how it posts (retrying
//! under back pressure), builds its messages, and waits for and checks
//! what it receives (busy or by event, watching the peer meanwhile).

use std::{
    io,
    os::{fd::AsRawFd, unix::net::UnixStream},
    path::Path,
    thread,
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context, Error, Result};
use mlx4_bf_core::{abi, wqe};

use crate::{
    back_pressure::is_back_pressure,
    cq::RecvQueue,
    device::{open, Device},
    errors::ioerr,
    rdma_write::{build_rdma_write, set_imm, Carry},
};

use super::{
    link::Link,
    message::{fill, imm_of, Buffers, Side},
    options::{Op, WaitMode},
    plan::Setup,
    rdma::Rdma,
};

/// One endpoint: its context, its QP's receive side, the peer's QPN.
pub(super) struct Endpoint {
    dev: Device,
    rq: RecvQueue,
    pub(super) peer_qpn: u32,
    /// `--op rdma-write-imm` only.
    pub(super) rdma: Option<Rdma>,
    pub(super) link: Link,
    timeout: Duration,
    pub(super) info: abi::DeviceInfo,
    /// Spinning alone on one CPU would starve the peer: yield now and then.
    single_cpu: bool,
}

/// How often a busy wait looks at the clock, the peer and (on one CPU)
/// yields.
const SPINS_PER_CHECK: u32 = 1024;
/// How long one poll(2) sleeps before the peer and the deadline are looked at.
const POLL_SLICE_MS: i32 = 100;

impl Endpoint {
    /// Opens a context, creates and connects its QP to the peer's, maps
    /// the receive side and fills the receive queue, registers the regions
    /// of an RDMA-write run and learns the peer's; then waits for the peer
    /// to have done the same.
    pub(super) fn setup(
        path: &Path,
        sock: UnixStream,
        timeout: Duration,
        setup: Setup,
    ) -> Result<Self> {
        let mut link = Link::new(sock, timeout)?;
        let dev = open(path)?;
        let info = dev.query_device().map_err(ioerr("QUERY_DEVICE"))?;
        if info.abi_version < 2 {
            bail!(
                "the driver speaks ABI version {}: pingpong needs version 2 \
                 (POST_RECV, CONNECT_QP, ARM_CQ)",
                info.abi_version
            );
        }
        let qp = dev.create_qp().map_err(ioerr("CREATE_QP"))?;
        let peer_qpn = link.exchange_u32(qp.qpn)?;
        dev.connect_qp(&qp, peer_qpn).map_err(ioerr("CONNECT_QP"))?;
        let rq = RecvQueue::map(&dev, qp)?;
        dev.post_recv(&qp, qp.rq_entries)
            .map_err(ioerr("POST_RECV"))?;
        let rdma = match setup.op {
            Op::Send => None,
            Op::RdmaWriteImm => Some(Rdma::setup(&dev, &info, &mut link, setup.max_size)?),
        };
        // The barrier: both connected, with receives posted (and regions
        // registered).
        link.exchange_u32(0)?;
        Ok(Endpoint {
            dev,
            rq,
            peer_qpn,
            rdma,
            link,
            timeout,
            info,
            single_cpu: thread::available_parallelism().map_or(true, |n| n.get() == 1),
        })
    }

    pub(super) fn qp(&self) -> &abi::QpInfo {
        &self.rq.qp
    }

    pub(super) fn op(&self) -> Op {
        if self.rdma.is_some() {
            Op::RdmaWriteImm
        } else {
            Op::Send
        }
    }

    /// The size of the peer's receive region, the largest RDMA write.
    pub(super) fn peer_len(&self) -> Option<u64> {
        self.rdma.as_ref().map(|r| r.peer.len)
    }

    /// Builds message `seq` of `size` bytes from `side` into `bufs.wqe`:
    /// the inline SEND, or the RDMA_WRITE_IMM into the peer's region
    /// (inline if it fits, else gathered from the send region, which gets
    /// the payload). Returns the WQE's length.
    pub(super) fn message(
        &self,
        bufs: &mut Buffers,
        size: usize,
        side: Side,
        seq: u32,
    ) -> Result<usize> {
        let Some(r) = &self.rdma else {
            return bufs.build(size, side, seq);
        };
        let payload = &mut bufs.payload[..size];
        fill(payload, side, seq);
        let (len, how) = build_rdma_write(
            &mut bufs.wqe,
            wqe::OPCODE_RDMA_WRITE_IMM,
            payload,
            (r.send.addr(), r.send.lkey()),
            (r.peer.addr, r.peer.rkey),
            false,
            r.max_wqe,
        )
        .ok_or_else(|| anyhow!("a {size}-byte RDMA write does not fit a WQE"))?;
        if how == Carry::Gather {
            // The peer has answered the previous message: the adapter is
            // done reading the region.
            r.send.write(0, payload);
        }
        set_imm(&mut bufs.wqe[..len], imm_of(side, seq));
        Ok(len)
    }

    /// Deregisters the regions of an RDMA-write run.
    pub(super) fn close(self) -> Result<()> {
        match self.rdma {
            Some(r) => r.close(),
            None => Ok(()),
        }
    }

    /// Posts a SEND, retrying while the adapter pushes back (-EAGAIN).
    pub(super) fn send(&self, wqe: &[u8], flags: u32) -> Result<()> {
        let deadline = Instant::now() + self.timeout;
        loop {
            match self.dev.post_send(self.qp(), wqe, flags) {
                Ok(_) => return Ok(()),
                Err(e) if is_back_pressure(&e) => {
                    if Instant::now() > deadline {
                        bail!(
                            "POST_SEND: the send queue stayed full for {:?}",
                            self.timeout
                        );
                    }
                    thread::yield_now();
                }
                Err(e) => return Err(ioerr("POST_SEND")(e)),
            }
        }
    }

    fn timed_out(&self, seq: u32) -> Error {
        anyhow!(
            "no receive completion within {:?} (message {seq}): the peer's {} never arrived",
            self.timeout,
            self.op().title()
        )
    }

    /// Spins on the owner byte of the next CQE.
    fn wait_busy(&self, seq: u32) -> Result<()> {
        let start = Instant::now();
        let mut spins = 0u32;
        while !self.rq.ready() {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(SPINS_PER_CHECK) {
                if start.elapsed() > self.timeout {
                    return Err(self.timed_out(seq));
                }
                self.link.check_peer()?;
                if self.single_cpu {
                    thread::yield_now();
                }
            }
            std::hint::spin_loop();
        }
        Ok(())
    }

    /// ARM_CQ, check once more (a CQE written before the arm raises no
    /// event), then sleep in poll(2) until the device says the CQ has a
    /// CQE at the consumer index.
    fn wait_event(&self, seq: u32) -> Result<()> {
        let start = Instant::now();
        loop {
            if self.rq.ready() {
                return Ok(());
            }
            self.dev.arm_cq(self.qp(), 0).map_err(ioerr("ARM_CQ"))?;
            if self.rq.ready() {
                return Ok(());
            }
            loop {
                if start.elapsed() > self.timeout {
                    return Err(self.timed_out(seq));
                }
                let mut fds = [
                    libc::pollfd {
                        fd: self.dev.fd(),
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
                    return Err(e).context("poll() on the device");
                }
                let dev = fds[0].revents;
                if dev & libc::POLLNVAL != 0 {
                    bail!("poll() on the device: POLLNVAL");
                }
                if dev & (libc::POLLERR | libc::POLLHUP) != 0 {
                    bail!(
                        "poll() on the device: {} (the adapter is gone or the QP is in error)",
                        if dev & libc::POLLHUP != 0 {
                            "POLLHUP"
                        } else {
                            "POLLERR"
                        }
                    );
                }
                if fds[1].revents != 0 {
                    self.link.check_peer()?;
                }
                if dev & libc::POLLIN != 0 {
                    break;
                }
            }
            // POLLIN: the next CQE should be there; if not, arm again.
        }
    }

    /// Waits for the next receive, checks it is the SEND of `expect` from
    /// the peer (`from`), byte for byte, or its RDMA_WRITE_IMM (the
    /// immediate, and the bytes in this side's receive region), consumes
    /// the CQE and reposts its receive WQE.
    pub(super) fn receive(
        &mut self,
        expect: &[u8],
        wait: WaitMode,
        seq: u32,
        from: Side,
    ) -> Result<()> {
        match wait {
            WaitMode::Busy => self.wait_busy(seq)?,
            WaitMode::Event => self.wait_event(seq)?,
        }
        let cqe = self.rq.read();
        let (qpn, peer) = (self.qp().qpn, self.peer_qpn);
        let wrong = match &self.rdma {
            None => cqe.check_send(qpn, peer, expect.len()),
            Some(_) => cqe.check_write_imm(qpn, peer, expect.len(), imm_of(from, seq)),
        };
        if let Some(why) = wrong {
            bail!(
                "receive of message {seq} ({} bytes) on QP {qpn:#x}: {why}",
                expect.len()
            );
        }
        let (got, place) = match &self.rdma {
            None => (
                self.rq
                    .buffer(cqe.wqe_index, expect.len())
                    .context("receive buffer")?,
                format!(
                    "receive buffer {}",
                    usize::from(cqe.wqe_index) % self.qp().rq_entries as usize
                ),
            ),
            Some(r) => (
                r.recv.bytes(0, expect.len()),
                format!(
                    "RDMA-written into the registered region at {:#x}, rkey {:#x}",
                    r.recv.addr(),
                    r.recv.rkey()
                ),
            ),
        };
        if let Some(i) = got.iter().zip(expect).position(|(g, e)| g != e) {
            bail!(
                "message {seq} ({} bytes, {place}): byte {i} is {:#04x}, {:#04x} was sent",
                expect.len(),
                got[i],
                expect[i]
            );
        }
        self.rq.consume();
        self.dev.post_recv(self.qp(), 1).map_err(ioerr("POST_RECV"))
    }
}
