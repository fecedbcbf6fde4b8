// SPDX-License-Identifier: GPL-2.0

//! The ping-pong on the RDMA device: two verbs contexts, each with its PD,
//! CQ, an RC QP connected to the other's and a region the other writes
//! into, made and used in a thread of its own (the wrappers of libibverbs'
//! objects stay with the thread that made them). Through the kernel: the
//! WQE built here, stamped in the QP's send queue as libmlx4 stamps it and
//! handed to QP_POST with BlueFlame required; from user space: libmlx4's
//! `ibv_post_send()` of the same inline write with its own BlueFlame
//! stores (`MLX4DV_QP_BF_POST_USER`). Every post is signaled, its
//! completion reaped after the round, off the clock.

use std::sync::{atomic::AtomicU32, mpsc};

use anyhow::{anyhow, bail, Result};
use mlx4_bf_core::{abi, wqe};

use crate::{
    device,
    errors::ioerr,
    qp_post::qp_post,
    rdma_write::{build_rdma_write, set_signaled},
    verbs::{Context, Cq, Mr, Qp},
    verbs_post::{ACCESS_WRITE, COMPLETION_WAIT, MAX_INLINE, PORT_ACTIVE, SEND_WR},
};

/// What one side tells the other: its QP and where the other's writes go;
/// then that its QP is in RTS, so the other may write.
enum Hello {
    Qp {
        qpn: u32,
        lid: u16,
        addr: u64,
        rkey: u32,
    },
    Ready,
}

/// One side's end of the two channels between the threads.
struct Line {
    tx: mpsc::Sender<Hello>,
    rx: mpsc::Receiver<Hello>,
}

impl Line {
    fn say(&self, h: Hello) -> Result<()> {
        self.tx
            .send(h)
            .map_err(|_| anyhow!("the peer's side ended before connecting"))
    }

    fn hear(&self) -> Result<Hello> {
        self.rx
            .recv()
            .map_err(|_| anyhow!("the peer's side ended before connecting"))
    }
}

/// A connected side: its objects, how it posts, and the peer's landing
/// region. Its region's first half is the source of libmlx4's inline
/// payload, the second where the peer's writes land.
struct Side<'a> {
    ctx: &'a Context,
    qp: &'a Qp<'a>,
    cq: &'a Cq<'a>,
    mr: &'a Mr<'a>,
    user: bool,
    half: usize,
    peer: (u64, u32),
    /// WQEs this side stamped (not wrapped): through the kernel only.
    head: u32,
}

impl super::Side for Side<'_> {
    fn landed(&self, size: usize) -> &AtomicU32 {
        let at = self.mr.addr() as usize + self.half + size - 4;
        // SAFETY: `at` is 4-aligned (the half is a whole number of pages,
        // sizes multiples of 4) and inside the region, whose memory lives
        // as long as `self` borrows it; the adapter writes the word, so it
        // is read atomically.
        unsafe { AtomicU32::from_ptr(at as *mut u32) }
    }

    fn send(&mut self, size: usize, tag: u32) -> Result<()> {
        let mut payload = vec![0x5a_u8; size];
        payload[size - 4..].copy_from_slice(&tag.to_ne_bytes());
        if self.user {
            self.mr.write(0, &payload);
            return self
                .qp
                .post_write_to(self.mr, 0, self.peer, size, true)
                .map_err(ioerr("ibv_post_send"));
        }
        let mut buf = [0u8; wqe::MAX_WQE_LEN];
        let (len, _) = build_rdma_write(
            &mut buf,
            wqe::OPCODE_RDMA_WRITE,
            &payload,
            (self.mr.addr(), self.mr.lkey),
            self.peer,
            false,
            self.qp.max_wqe(),
        )
        .ok_or_else(|| anyhow!("a {size}-byte write does not fit a WQE"))?;
        set_signaled(&mut buf);
        self.qp.stage_blueflame(self.head, &mut buf[..len]);
        qp_post(
            self.ctx.cmd_fd(),
            &buf[..len],
            Some(abi::POST_F_REQUIRE_BF),
            None,
        )
        .map_err(ioerr("QP_POST"))?;
        self.head = self.head.wrapping_add(1);
        Ok(())
    }

    fn settle(&mut self) -> Result<()> {
        self.cq.await_success(COMPLETION_WAIT)
    }
}

/// Opens a context on `name`, connects its QP to the peer's over `line`
/// and runs `f` on the side; `max` is the largest message.
fn with_side<T>(
    name: &str,
    user: bool,
    max: usize,
    line: Line,
    f: impl FnOnce(&mut Side<'_>) -> Result<T>,
) -> Result<T> {
    let ctx = device::open(name)?;
    let port = ctx.facts().map_err(ioerr("ibv_query_port"))?;
    if port.port_state != PORT_ACTIVE {
        bail!("port 1 is not ACTIVE (state {})", port.port_state);
    }
    let pd = ctx.alloc_pd().map_err(ioerr("ibv_alloc_pd"))?;
    let cq = ctx.create_cq(2 * SEND_WR).map_err(ioerr("ibv_create_cq"))?;
    let qp = pd
        .create_rc_qp(&cq, SEND_WR, MAX_INLINE)
        .map_err(ioerr("ibv_create_qp"))?;
    let half = max.max(4).next_multiple_of(4096);
    let mr = pd
        .reg_mr(2 * half, ACCESS_WRITE)
        .map_err(ioerr("ibv_reg_mr"))?;
    line.say(Hello::Qp {
        qpn: qp.qpn,
        lid: port.lid,
        addr: mr.addr() + half as u64,
        rkey: mr.rkey,
    })?;
    let Hello::Qp {
        qpn,
        lid,
        addr,
        rkey,
    } = line.hear()?
    else {
        bail!("the peer said it was ready before naming its QP");
    };
    qp.connect(qpn, lid)
        .map_err(ioerr("ibv_modify_qp to RTS"))?;
    if user {
        qp.set_bf_post(false)
            .map_err(ioerr("mlx4dv_qp_set_bf_post"))?;
    }
    line.say(Hello::Ready)?;
    let Hello::Ready = line.hear()? else {
        bail!("the peer named its QP twice");
    };
    f(&mut Side {
        ctx: &ctx,
        qp: &qp,
        cq: &cq,
        mr: &mr,
        user,
        half,
        peer: (addr, rkey),
        head: 0,
    })
}

/// Median one-way latency in microseconds (half the round trip) of `iters`
/// rounds per size between two new contexts on `name`, posting through
/// QP_POST or with libmlx4's own stores; `warmup` rounds first.
pub fn one_way_us(
    name: &str,
    user: bool,
    sizes: &[usize],
    iters: u32,
    warmup: u32,
) -> Result<Vec<f64>> {
    let max = sizes.iter().copied().max().unwrap_or(4);
    let (a_tx, b_rx) = mpsc::channel();
    let (b_tx, a_rx) = mpsc::channel();
    let (a_line, b_line) = (Line { tx: a_tx, rx: a_rx }, Line { tx: b_tx, rx: b_rx });
    super::run_pair(
        || {
            with_side(name, user, max, a_line, |a| {
                super::initiate(a, sizes, iters, warmup)
            })
        },
        || {
            with_side(name, user, max, b_line, |b| {
                super::respond(b, sizes, iters + warmup)
            })
        },
    )
}
