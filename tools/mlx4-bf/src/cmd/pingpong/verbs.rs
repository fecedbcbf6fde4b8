// SPDX-License-Identifier: GPL-2.0

//! One endpoint on the RDMA device: a verbs context with its own PD, a
//! send CQ, a receive CQ on a completion channel and an RC QP connected to
//! the peer's. Its WQEs are built here, stamped in the QP's send queue as
//! libmlx4 stamps a BlueFlame WQE and posted through QP_POST, every one
//! signaled: its completion is reaped when the queue would fill. Receives
//! are posted and polled through libibverbs: a SEND lands in one of the
//! receive buffers (a slot of a registered region, the WQE's `wr_id`); an
//! RDMA_WRITE_IMM in the receive region, its immediate in the completion.

use std::{
    os::unix::net::UnixStream,
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context as _, Error, Result};
use mlx4_bf_core::{wqe, wqe_build};

use crate::{
    device,
    errors::ioerr,
    qp_post::qp_post,
    rdma_write::set_signaled,
    verbs::{Cq, Mr, Qp, QpSize, Wc, WC_RECV, WC_RECV_RDMA_WITH_IMM},
    verbs_post::with_self_qp,
};

use super::{
    facts::{Facts, Regions},
    link::{Link, Remote},
    message::{check_bytes, imm_of, Buffers, Side},
    options::{Op, WaitMode},
    peer::{Endpoints, Peer, Waiting},
    plan::Setup,
};

/// The RDMA device whose contexts the endpoints are.
pub(super) struct Verbs<'n>(pub(super) &'n str);

/// Send and receive WQEs of a QP; the send WQEs' room for inline bytes
/// (1 KiB strides: any WQE QP_POST takes fits).
const SEND_WR: u32 = 64;
const RECV_WR: u32 = 64;
const MAX_INLINE: u32 = 512;
/// `IBV_ACCESS_LOCAL_WRITE`, `IBV_ACCESS_REMOTE_WRITE`.
const LOCAL_WRITE: u32 = 1;
const REMOTE_WRITE: u32 = 2;
/// `IBV_PORT_ACTIVE`.
const PORT_ACTIVE: u8 = 4;

/// One endpoint's objects, borrowed for the run.
struct Endpoint<'a> {
    qp: &'a Qp<'a>,
    send_cq: &'a Cq<'a>,
    recv_cq: &'a Cq<'a>,
    /// The receive buffers (SEND: a slot each) or the receive region.
    recv: &'a Mr<'a>,
    /// Where a gathered RDMA-write payload is read from.
    send: Option<&'a Mr<'a>>,
    peer: Option<Remote>,
    cmd_fd: i32,
    link: Link,
    timeout: Duration,
    facts: Facts,
    /// Bytes of a receive slot (SEND).
    slot: usize,
    /// Send WQEs posted (not wrapped), and not yet completed.
    head: u32,
    outstanding: u32,
    window: u32,
    staged: [u8; wqe::MAX_WQE_LEN],
}

impl Endpoints for Verbs<'_> {
    fn with_endpoint<T>(
        &self,
        sock: UnixStream,
        timeout: Duration,
        setup: Setup,
        body: impl FnOnce(&mut dyn Peer) -> Result<T>,
    ) -> Result<T> {
        let name = self.0;
        let mut link = Link::new(sock, timeout)?;
        // What the kernel posts by BlueFlame, and how: learnt on a QP of a
        // context of its own, connected to itself.
        let (cutoff, writer) = with_self_qp(name, 1, |s| Ok((s.bf_cutoff()?, s.writer()?)))?;
        let ctx = device::open(name)?;
        let port = ctx.facts().map_err(ioerr("ibv_query_port"))?;
        if port.port_state != PORT_ACTIVE {
            bail!("port 1 is not ACTIVE (state {})", port.port_state);
        }
        let pd = ctx.alloc_pd().map_err(ioerr("ibv_alloc_pd"))?;
        let send_cq = ctx.create_cq(SEND_WR).map_err(ioerr("ibv_create_cq"))?;
        let recv_cq = ctx
            .create_cq_with_events(RECV_WR)
            .map_err(ioerr("ibv_create_cq"))?;
        let size = QpSize {
            send_wr: SEND_WR,
            recv_wr: RECV_WR,
            max_inline: MAX_INLINE,
        };
        let qp = pd
            .create_rc_qp_with((&send_cq, &recv_cq), size)
            .map_err(ioerr("ibv_create_qp"))?;
        let peer_qpn = link.exchange_u32(qp.qpn)?;
        qp.connect(peer_qpn, port.lid)
            .map_err(ioerr("ibv_modify_qp to RTS"))?;
        let region = setup.max_size.max(1).next_multiple_of(4096);
        let slot = setup.max_size.max(1).next_multiple_of(64);
        let (recv, send) = match setup.op {
            Op::Send => (pd.reg_mr(RECV_WR as usize * slot, LOCAL_WRITE), None),
            Op::RdmaWriteImm => (
                pd.reg_mr(region, LOCAL_WRITE | REMOTE_WRITE),
                Some(pd.reg_mr(region, 0).map_err(ioerr("ibv_reg_mr"))?),
            ),
        };
        let recv = recv.map_err(ioerr("ibv_reg_mr"))?;
        let peer = match setup.op {
            Op::Send => None,
            Op::RdmaWriteImm => Some(link.exchange_remote(&Remote {
                addr: recv.addr(),
                rkey: recv.rkey,
                len: recv.len() as u64,
            })?),
        };
        for i in 0..RECV_WR as usize {
            // An RDMA write with immediate consumes a receive WQE and
            // writes nothing into it.
            let (off, len) = if peer.is_some() {
                (0, 0)
            } else {
                (i * slot, slot)
            };
            qp.post_recv(i as u64, &recv, off, len)
                .map_err(ioerr("ibv_post_recv"))?;
        }
        // The barrier: both connected, with receives posted (and regions
        // registered).
        link.exchange_u32(0)?;
        let facts = Facts {
            writer,
            max_wqe: qp.max_wqe(),
            max_bf_wqe: wqe_build::inline_size16(cutoff, true) * 16,
            qpn: qp.qpn,
            peer_qpn,
            rq_entries: RECV_WR,
            recv_buf_size: slot as u32,
            cq_entries: RECV_WR,
            regions: peer.map(|p| Regions {
                recv_len: recv.len() as u64,
                recv_rkey: recv.rkey,
                send_lkey: send.as_ref().map_or(0, |s| s.lkey),
                peer_len: p.len,
                peer_rkey: p.rkey,
            }),
        };
        let mut ep = Endpoint {
            qp: &qp,
            send_cq: &send_cq,
            recv_cq: &recv_cq,
            recv: &recv,
            send: send.as_ref(),
            peer,
            cmd_fd: ctx.cmd_fd(),
            link,
            timeout,
            facts,
            slot,
            head: 0,
            outstanding: 0,
            window: qp.send_window(),
            staged: [0; wqe::MAX_WQE_LEN],
        };
        body(&mut ep)
    }
}

impl Endpoint<'_> {
    fn timed_out(&self, seq: u32, what: &str) -> Error {
        anyhow!(
            "no {what} completion within {:?} (message {seq}): the peer's {} never arrived",
            self.timeout,
            self.facts.op().title()
        )
    }

    /// Takes a send completion, which must be a success.
    fn reaped(&mut self, wc: Wc) -> Result<()> {
        if wc.status != 0 {
            bail!(
                "a send on QP {:#x} completed with status {}",
                self.qp.qpn,
                wc.status
            );
        }
        self.outstanding -= 1;
        Ok(())
    }

    /// Reaps the send completions there are; while the send queue is
    /// full, waits for the oldest.
    fn make_room(&mut self, seq: u32) -> Result<()> {
        while let Some(wc) = self.send_cq.poll().context("ibv_poll_cq")? {
            self.reaped(wc)?;
        }
        if self.outstanding < self.window {
            return Ok(());
        }
        let timed_out = || self.timed_out(seq, "send");
        let w = Waiting {
            link: &self.link,
            timeout: self.timeout,
            timed_out: &timed_out,
        };
        let wc = w.spin(|| self.send_cq.poll().context("ibv_poll_cq"))?;
        self.reaped(wc)
    }

    /// The next receive completion: spinning, or with the CQ armed and
    /// asleep on its channel (polled once more after the arm: a
    /// completion before it raises no event).
    fn next_receive(&self, wait: WaitMode, seq: u32) -> Result<Wc> {
        let timed_out = || self.timed_out(seq, "receive");
        let w = Waiting {
            link: &self.link,
            timeout: self.timeout,
            timed_out: &timed_out,
        };
        let poll = || self.recv_cq.poll().context("ibv_poll_cq");
        if wait == WaitMode::Busy {
            return w.spin(poll);
        }
        let fd = self
            .recv_cq
            .event_fd()
            .ok_or_else(|| anyhow!("the receive CQ has no completion channel"))?;
        let start = Instant::now();
        loop {
            if let Some(wc) = poll()? {
                return Ok(wc);
            }
            self.recv_cq.arm().map_err(ioerr("ibv_req_notify_cq"))?;
            if let Some(wc) = poll()? {
                return Ok(wc);
            }
            w.sleep_on(fd, "the completion channel", start)?;
            self.recv_cq
                .take_event()
                .map_err(ioerr("ibv_get_cq_event"))?;
        }
    }

    /// Why `wc` is not the receive of message `seq` (`len` bytes) from
    /// `from`, if it is not.
    fn wrong(&self, wc: &Wc, len: usize, seq: u32, from: Side) -> Option<String> {
        let (opcode, imm) = match self.peer {
            None => (WC_RECV, None),
            Some(_) => (WC_RECV_RDMA_WITH_IMM, Some(imm_of(from, seq))),
        };
        if wc.status != 0 {
            return Some(format!("completed with status {}", wc.status));
        }
        if wc.qp_num != self.qp.qpn {
            return Some(format!("the completion names QP {:#x}", wc.qp_num));
        }
        if wc.opcode != opcode {
            return Some(format!("opcode {}, not {opcode}", wc.opcode));
        }
        if wc.byte_len as usize != len {
            return Some(format!("{} bytes, not {len}", wc.byte_len));
        }
        if wc.wr_id >= u64::from(RECV_WR) {
            return Some(format!("wr_id {} of no receive WQE", wc.wr_id));
        }
        match imm {
            Some(want) if wc.with_imm == 0 || wc.imm != want => Some(format!(
                "immediate {:#x} (with_imm {}), not {want:#x}",
                wc.imm, wc.with_imm
            )),
            _ => None,
        }
    }
}

impl Peer for Endpoint<'_> {
    fn facts(&self) -> &Facts {
        &self.facts
    }

    fn link(&mut self) -> &mut Link {
        &mut self.link
    }

    /// The inline SEND, or the RDMA_WRITE_IMM into the peer's region
    /// (inline if it fits, else gathered from the send region, which gets
    /// the payload).
    fn message(&mut self, bufs: &mut Buffers, size: usize, side: Side, seq: u32) -> Result<usize> {
        let (Some(peer), Some(send)) = (self.peer, self.send) else {
            return bufs.build(size, side, seq);
        };
        bufs.write_imm(
            (size, side, seq),
            (send.addr(), send.lkey),
            (peer.addr, peer.rkey),
            self.facts.max_wqe,
            |payload| send.write(0, payload),
        )
    }

    /// Stamps the WQE, signaled, for the next slot of the send queue, puts
    /// it there and hands it to QP_POST.
    fn send(&mut self, wqe: &[u8], flags: u32) -> Result<()> {
        self.make_room(self.head)?;
        let staged = &mut self.staged[..wqe.len()];
        staged.copy_from_slice(wqe);
        set_signaled(staged);
        self.qp.stage_blueflame(self.head, staged);
        qp_post(self.cmd_fd, staged, Some(flags), None).map_err(ioerr("QP_POST"))?;
        self.head = self.head.wrapping_add(1);
        self.outstanding += 1;
        Ok(())
    }

    fn receive(&mut self, expect: &[u8], wait: WaitMode, seq: u32, from: Side) -> Result<()> {
        let wc = self.next_receive(wait, seq)?;
        if let Some(why) = self.wrong(&wc, expect.len(), seq, from) {
            bail!(
                "receive of message {seq} ({} bytes) on QP {:#x}: {why}",
                expect.len(),
                self.qp.qpn
            );
        }
        let (off, place) = match self.peer {
            None => (
                wc.wr_id as usize * self.slot,
                format!("receive buffer {}", wc.wr_id),
            ),
            Some(_) => (
                0,
                format!(
                    "RDMA-written into the registered region at {:#x}, rkey {:#x}",
                    self.recv.addr(),
                    self.recv.rkey
                ),
            ),
        };
        let mut got = vec![0u8; expect.len()];
        self.recv.read(off, &mut got);
        check_bytes(&got, expect, seq, &place)?;
        let len = if self.peer.is_some() { 0 } else { self.slot };
        self.qp
            .post_recv(wc.wr_id, self.recv, off, len)
            .map_err(ioerr("ibv_post_recv"))
    }
}
