// SPDX-License-Identifier: GPL-2.0

//! One endpoint on the misc device: its context and connected QP, how it
//! posts (retrying under back pressure), builds its messages, and waits
//! for and checks what it receives (busy or by event, watching the peer
//! meanwhile).

use std::{
    os::unix::net::UnixStream,
    path::Path,
    thread,
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context, Error, Result};
use mlx4_bf_core::abi;

use crate::{
    back_pressure::is_back_pressure,
    cq::RecvQueue,
    device::{open, Device},
    errors::ioerr,
};

use super::{
    facts::{Facts, Regions},
    link::Link,
    message::{check_bytes, imm_of, Buffers, Side},
    options::{Op, WaitMode},
    peer::{Endpoints, Peer, Waiting},
    plan::Setup,
    rdma::Rdma,
};

/// One endpoint: its context, its QP's receive side, the peer's QPN.
pub(super) struct Endpoint {
    dev: Device,
    rq: RecvQueue,
    /// `--op rdma-write-imm` only.
    rdma: Option<Rdma>,
    link: Link,
    timeout: Duration,
    facts: Facts,
}

/// The misc device's endpoints: a context of the device node each.
impl Endpoints for Path {
    fn with_endpoint<T>(
        &self,
        sock: UnixStream,
        timeout: Duration,
        setup: Setup,
        body: impl FnOnce(&mut dyn Peer) -> Result<T>,
    ) -> Result<T> {
        let mut ep = Endpoint::setup(self, sock, timeout, setup)?;
        let r = body(&mut ep)?;
        ep.close()?;
        Ok(r)
    }
}

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
        let mut facts = Facts::of_misc(&info, &qp, peer_qpn);
        facts.regions = rdma.as_ref().map(|r| Regions {
            recv_len: r.recv.len() as u64,
            recv_rkey: r.recv.rkey(),
            send_lkey: r.send.lkey(),
            peer_len: r.peer.len,
            peer_rkey: r.peer.rkey,
        });
        Ok(Endpoint {
            dev,
            rq,
            rdma,
            link,
            timeout,
            facts,
        })
    }

    fn qp(&self) -> &abi::QpInfo {
        &self.rq.qp
    }

    /// Builds message `seq` of `size` bytes from `side` into `bufs.wqe`:
    /// the inline SEND, or the RDMA_WRITE_IMM into the peer's region
    /// (inline if it fits, else gathered from the send region, which gets
    /// the payload). Returns the WQE's length.
    fn build(&self, bufs: &mut Buffers, size: usize, side: Side, seq: u32) -> Result<usize> {
        let Some(r) = &self.rdma else {
            return bufs.build(size, side, seq);
        };
        bufs.write_imm(
            (size, side, seq),
            (r.send.addr(), r.send.lkey()),
            (r.peer.addr, r.peer.rkey),
            r.max_wqe,
            |payload| r.send.write(0, payload),
        )
    }

    /// Deregisters the regions of an RDMA-write run.
    fn close(self) -> Result<()> {
        match self.rdma {
            Some(r) => r.close(),
            None => Ok(()),
        }
    }

    /// Posts a SEND, retrying while the adapter pushes back (-EAGAIN).
    fn post(&self, wqe: &[u8], flags: u32) -> Result<()> {
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
            self.facts.op().title()
        )
    }

    /// Spins on the owner byte of the next CQE, or arms the CQ (ARM_CQ),
    /// checks once more (a CQE written before the arm raises no event)
    /// and sleeps in poll(2) until the device says the CQ has a CQE at the
    /// consumer index.
    fn wait(&self, wait: WaitMode, seq: u32) -> Result<()> {
        let timed_out = || self.timed_out(seq);
        let w = Waiting {
            link: &self.link,
            timeout: self.timeout,
            timed_out: &timed_out,
        };
        if wait == WaitMode::Busy {
            return w.spin(|| Ok(self.rq.ready().then_some(())));
        }
        let start = Instant::now();
        loop {
            if self.rq.ready() {
                return Ok(());
            }
            self.dev.arm_cq(self.qp(), 0).map_err(ioerr("ARM_CQ"))?;
            if self.rq.ready() {
                return Ok(());
            }
            // POLLIN: the next CQE should be there; if not, arm again.
            w.sleep_on(self.dev.fd(), "the device", start)?;
        }
    }

    /// Waits for the next receive, checks it is the SEND of `expect` from
    /// the peer (`from`), byte for byte, or its RDMA_WRITE_IMM (the
    /// immediate, and the bytes in this side's receive region), consumes
    /// the CQE and reposts its receive WQE.
    fn take(&mut self, expect: &[u8], wait: WaitMode, seq: u32, from: Side) -> Result<()> {
        self.wait(wait, seq)?;
        let cqe = self.rq.read();
        let (qpn, peer) = (self.qp().qpn, self.facts.peer_qpn);
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
        check_bytes(got, expect, seq, &place)?;
        self.rq.consume();
        self.dev.post_recv(self.qp(), 1).map_err(ioerr("POST_RECV"))
    }
}

impl Peer for Endpoint {
    fn facts(&self) -> &Facts {
        &self.facts
    }

    fn link(&mut self) -> &mut Link {
        &mut self.link
    }

    fn message(&mut self, bufs: &mut Buffers, size: usize, side: Side, seq: u32) -> Result<usize> {
        self.build(bufs, size, side, seq)
    }

    fn send(&mut self, wqe: &[u8], flags: u32) -> Result<()> {
        self.post(wqe, flags)
    }

    fn receive(&mut self, expect: &[u8], wait: WaitMode, seq: u32, from: Side) -> Result<()> {
        self.take(expect, wait, seq, from)
    }
}
