// SPDX-License-Identifier: GPL-2.0

//! Posts through the QP_POST method on the RDMA device: a QP connected to
//! itself, RDMA writes into a region of the same context, each WQE built
//! and stamped in the QP's send queue as libmlx4 stamps a BlueFlame WQE
//! (owner bit, counter, `bf_qpn`), then handed to the method; its
//! completion polled.

use std::{io, os::fd::RawFd, time::Duration};

use anyhow::{anyhow, bail, Result};
use mlx4_bf_core::{
    abi::{self, PostResult},
    wqe,
};

use crate::{
    device,
    errors::ioerr,
    qp_post::qp_post,
    rdma_write::{build_rdma_write, payload, set_signaled, Carry},
    report::writer_name,
    verbs::{Context, Cq, Mr, Qp},
};

/// `IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE`.
pub(crate) const ACCESS_WRITE: u32 = 1 | 2;
/// Send WQEs of the QP, and the inline room that sizes them: 1 KiB
/// strides, so a WQE of up to QP_POST's 1008 bytes fits.
pub(crate) const SEND_WR: u32 = 64;
pub(crate) const MAX_INLINE: u32 = 512;
/// `IBV_PORT_ACTIVE`.
pub(crate) const PORT_ACTIVE: u8 = 4;
pub(crate) const COMPLETION_WAIT: Duration = Duration::from_secs(5);

/// The objects of a post: the context's QP connected to itself, its CQ,
/// the region the writes go to (and a gathered payload comes from).
pub struct SelfQp<'a> {
    ctx: &'a Context,
    qp: &'a Qp<'a>,
    cq: &'a Cq<'a>,
    mr: &'a Mr<'a>,
    /// WQEs posted (not wrapped).
    head: u32,
    /// Where the write lands in the region.
    dst: usize,
    /// The WQE staged last, as stamped (its length in `staged_len`).
    staged: [u8; wqe::MAX_WQE_LEN],
    staged_len: usize,
}

impl<'a> SelfQp<'a> {
    /// The QP connected to itself at the port's LID; the payload bytes
    /// (`i as u8` at byte `i`) in the region's first half.
    pub fn connect(
        ctx: &'a Context,
        qp: &'a Qp<'a>,
        cq: &'a Cq<'a>,
        mr: &'a Mr<'a>,
    ) -> Result<Self> {
        let facts = ctx.facts().map_err(ioerr("ibv_query_port"))?;
        if facts.port_state != PORT_ACTIVE {
            bail!("port 1 is not ACTIVE (state {})", facts.port_state);
        }
        qp.connect(qp.qpn, facts.lid)
            .map_err(ioerr("ibv_modify_qp to RTS"))?;
        let dst = mr.len() / 2;
        mr.write(0, &payload(dst));
        Ok(SelfQp {
            ctx,
            qp,
            cq,
            mr,
            head: 0,
            dst,
            staged: [0; wqe::MAX_WQE_LEN],
            staged_len: 0,
        })
    }

    pub fn qpn(&self) -> u32 {
        self.qp.qpn
    }

    /// The context's command file, which the method is called on.
    pub fn cmd_fd(&self) -> RawFd {
        self.ctx.cmd_fd()
    }

    /// The region's lkey, which a gathered payload names.
    pub fn lkey(&self) -> u32 {
        self.mr.lkey
    }

    /// WQEs that may be outstanding at once ([`Qp::send_window`]).
    pub fn window(&self) -> u32 {
        self.qp.send_window()
    }

    /// The largest WQE the QP's send queue holds and the method takes.
    pub fn max_wqe(&self) -> usize {
        self.qp.max_wqe()
    }

    /// How an RDMA write of `size` bytes carries its data: inline if its
    /// WQE fits the largest one, else gathered from the region.
    pub fn carry(&self, size: usize) -> Carry {
        crate::rdma_write::carry(size, true, self.max_wqe())
    }

    /// The bytes a gathered write may read: the region's first half.
    pub fn gather_len(&self) -> usize {
        self.dst
    }

    /// The WQE of an RDMA write of `size` bytes into the region, inline
    /// unless it does not fit or `gather` is asked for; signaled.
    pub fn build(
        &self,
        buf: &mut [u8; wqe::MAX_WQE_LEN],
        size: usize,
        gather: bool,
    ) -> Option<(usize, Carry)> {
        if size > self.dst {
            return None;
        }
        let (len, how) = build_rdma_write(
            buf,
            wqe::OPCODE_RDMA_WRITE,
            &payload(size),
            (self.mr.addr(), self.mr.lkey),
            (self.mr.addr() + self.dst as u64, self.mr.rkey),
            gather,
            self.max_wqe(),
        )?;
        set_signaled(buf);
        Some((len, how))
    }

    /// Stages `wqe` and posts it through the method with `flags`; then
    /// waits for its completion.
    pub fn post(&mut self, wqe: &[u8], flags: u32) -> Result<PostResult> {
        let mut r = PostResult::default();
        self.stage(wqe);
        self.call(flags, Some(&mut r)).map_err(ioerr("QP_POST"))?;
        self.await_completion()?;
        Ok(r)
    }

    /// Stamps a copy of `wqe` for the next slot and puts it there, as
    /// libmlx4 does before its BlueFlame copy; `wqe` stays as built (the
    /// stamps are ORed in: a WQE stamped twice would carry both counters).
    pub fn stage(&mut self, wqe: &[u8]) {
        let staged = &mut self.staged[..wqe.len()];
        staged.copy_from_slice(wqe);
        self.qp.stage_blueflame(self.head, staged);
        self.staged_len = wqe.len();
    }

    /// The WQE staged last, as stamped.
    pub fn staged(&self) -> &[u8] {
        &self.staged[..self.staged_len]
    }

    /// The method's call on the staged WQE; the slot is taken if it
    /// posted. Completions are [`Self::await_completion`]'s to reap.
    pub fn call(&mut self, flags: u32, result: Option<&mut PostResult>) -> io::Result<()> {
        qp_post(self.ctx.cmd_fd(), self.staged(), Some(flags), result)?;
        self.head = self.head.wrapping_add(1);
        Ok(())
    }

    /// [`Self::stage`] and [`Self::call`].
    pub fn submit(&mut self, wqe: &[u8], flags: u32) -> io::Result<()> {
        self.stage(wqe);
        self.call(flags, None)
    }

    /// Waits for the next completion, which must be a success.
    pub fn await_completion(&self) -> Result<()> {
        self.cq.await_success(COMPLETION_WAIT)
    }

    /// libmlx4's own post of the RDMA write of `size` bytes (not a WQE of
    /// this helper's): `ibv_post_send()`, inline if asked, through the
    /// path `set_bf_post` chose. Not to be mixed with [`Self::stage`] on
    /// one QP: libmlx4 keeps its own place in the send queue.
    pub fn post_libmlx4(&self, size: usize, inline: bool) -> io::Result<()> {
        self.qp.post_write(self.mr, (0, self.dst), size, inline)
    }

    /// How libmlx4 posts this QP's BlueFlame WQEs: its own stores, or the
    /// kernel's QP_POST.
    pub fn set_bf_post(&self, kernel: bool) -> io::Result<()> {
        self.qp.set_bf_post(kernel)
    }

    /// The largest inline payload the kernel still posts by BlueFlame (a
    /// `REQUIRE_BF` post above it is refused with EINVAL): bisected over
    /// the sizes a WQE holds, each probe a post whose completion is reaped.
    pub fn bf_cutoff(&mut self) -> Result<usize> {
        let mut buf = [0u8; wqe::MAX_WQE_LEN];
        // Invariant: `fits` posts by BlueFlame (0: nothing to prove),
        // `refused` does not.
        let (mut fits, mut refused) = (0, self.max_wqe() + 1);
        while refused - fits > 1 {
            let mid = (fits + refused) / 2;
            if self.posts_by_blueflame(&mut buf, mid)? {
                fits = mid;
            } else {
                refused = mid;
            }
        }
        Ok(fits)
    }

    fn posts_by_blueflame(
        &mut self,
        buf: &mut [u8; wqe::MAX_WQE_LEN],
        size: usize,
    ) -> Result<bool> {
        let Some((len, Carry::Inline)) = self.build(buf, size, false) else {
            return Ok(false);
        };
        match self.submit(&buf[..len], abi::POST_F_REQUIRE_BF) {
            Ok(()) => self.await_completion().map(|()| true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(false),
            Err(e) => Err(ioerr("QP_POST")(e)),
        }
    }

    /// The kernel's BlueFlame writer, as a post's result tells it: store
    /// blocks (zPCI) or write combining.
    pub fn writer(&mut self) -> Result<&'static str> {
        let mut buf = [0u8; wqe::MAX_WQE_LEN];
        let (len, _) = self
            .build(&mut buf, 4, false)
            .ok_or_else(|| anyhow!("a 4-byte payload does not fit a WQE"))?;
        let r = self.post(&buf[..len], abi::POST_F_REQUIRE_BF)?;
        Ok(writer_name(if r.store_blocks > 0 {
            abi::WRITER_STORE_BLOCK
        } else {
            abi::WRITER_WRITE_COMBINING
        }))
    }

    /// Whether the `size` bytes landed where the write put them.
    pub fn landed(&self, size: usize) -> bool {
        let mut got = vec![0u8; size];
        self.mr.read(self.dst, &mut got);
        got == payload(size)
    }
}

/// Opens `name` and runs `f` on a QP connected to itself with a region of
/// room for `max_payload` bytes each way.
pub fn with_self_qp<T>(
    name: &str,
    max_payload: usize,
    f: impl FnOnce(&mut SelfQp<'_>) -> Result<T>,
) -> Result<T> {
    let ctx = device::open(name)?;
    let pd = ctx.alloc_pd().map_err(ioerr("ibv_alloc_pd"))?;
    let cq = ctx.create_cq(2 * SEND_WR).map_err(ioerr("ibv_create_cq"))?;
    let qp = pd
        .create_rc_qp(&cq, SEND_WR, MAX_INLINE)
        .map_err(ioerr("ibv_create_qp"))?;
    let half = max_payload.max(1).next_multiple_of(4096);
    let mr = pd
        .reg_mr(2 * half, ACCESS_WRITE)
        .map_err(ioerr("ibv_reg_mr"))?;
    let mut s = SelfQp::connect(&ctx, &qp, &cq, &mr)?;
    f(&mut s)
}
