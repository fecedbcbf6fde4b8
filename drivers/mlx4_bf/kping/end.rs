// SPDX-License-Identifier: GPL-2.0

//! One end of a kernel ping: a kernel context of its own (a UAR, a QP, its
//! receive queue and CQs, its regions) and two buffers of
//! `Resources::kping_pool`, its source and its sink. Everything goes
//! through the kernel context's methods: the checks and the BlueFlame writer a
//! post of QP_POST's gets too. Dropping it closes the kernel context (QP, CQs and
//! regions out of the device) before the buffers are given back.

use kernel::{
    prelude::*,
    sync::Arc,
    time::{Instant, Monotonic},
};

use super::{Kping, Msg, MSG_LEN};
use crate::{
    abi,
    adapter::Adapter,
    geometry::{KPING_BUF_BYTES, KPING_END_BYTES, RQ_ENTRIES},
    hw::memory::mr::MappedRegion,
    kernel_context::{KernelContext, SendRequest},
    kping_rules::command::{Command, MemMode, Path},
    region, wqe, wqe_build,
};

/// Receive buffers each end keeps posted.
const RECVS: u32 = RQ_ENTRIES / 2;

/// Which of an end's two buffers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Buf {
    /// What the client sends (the server reads it); the server's staging.
    Source = 0,
    /// Where the server writes the data back (the client's).
    Sink = 1,
}

pub(super) struct End {
    /// Dropped before `slot`: the device is done with the buffers then.
    ctx: Pin<KBox<KernelContext>>,
    pub(super) qpn: u32,
    /// The DMA address of its buffers.
    dma: u64,
    /// The lkey and rkey of each buffer (`mem_mode=dma`: the reserved lkey,
    /// and one PHYSICAL region's key for both).
    lkey: [u32; 2],
    rkey: [u32; 2],
    slot: EndSlot,
}

/// An end's buffers in `Resources::kping_pool`, given back when dropped.
struct EndSlot {
    kping: Arc<Kping>,
    index: usize,
}

impl Drop for EndSlot {
    fn drop(&mut self) {
        self.kping.registry.lock().put_end(self.index);
    }
}

impl End {
    /// A kernel context with one QP, its buffers registered as `cmd.mem_mode` says.
    pub(super) fn new(kping: &Arc<Kping>, cmd: &Command) -> Result<Self> {
        let adapter = &kping.adapter;
        let index = kping.registry.lock().take_end().ok_or(EBUSY)?;
        let slot = EndSlot {
            kping: kping.clone(),
            index,
        };
        let dma = {
            let hw = adapter.resources()?;
            hw.kping_pool.dma_handle() + (index * KPING_END_BYTES) as u64
        };
        // From here on, dropping `end` closes the kernel context, then frees the slot.
        let mut end = End {
            ctx: KernelContext::open(adapter)?,
            qpn: 0,
            dma,
            lkey: [0; 2],
            rkey: [0; 2],
            slot,
        };
        end.qpn = end.ctx.as_ref().create_qp()?;
        end.register(adapter, cmd)?;
        Ok(end)
    }

    fn register(&mut self, adapter: &Adapter, cmd: &Command) -> Result {
        let all = region::ACCESS_ALL;
        let perm = region::perm(all).ok_or(EINVAL)?;
        match cmd.mem_mode {
            MemMode::Dma => {
                let key = self.ctx.reg_kernel_mr(&MappedRegion {
                    pages: &[],
                    page_shift: region::PAGE_SHIFT,
                    start: 0,
                    len: u64::MAX,
                    perm,
                })?;
                self.lkey = [adapter.firmware().dev_cap.reserved_lkey; 2];
                self.rkey = [key; 2];
            }
            MemMode::Reg => {
                let len = u64::from(cmd.size);
                let pages = region::pages_spanned(0, len).ok_or(EINVAL)? as usize;
                let mut addrs = KVec::with_capacity(pages, GFP_KERNEL)?;
                for buf in [Buf::Source, Buf::Sink] {
                    addrs.clear();
                    let start = self.addr(buf);
                    for p in 0..pages {
                        addrs.push(start + (p as u64) * region::PAGE_SIZE, GFP_KERNEL)?;
                    }
                    let key = self.ctx.reg_kernel_mr(&MappedRegion {
                        pages: &addrs,
                        page_shift: region::PAGE_SHIFT,
                        start,
                        len,
                        perm,
                    })?;
                    self.lkey[buf as usize] = key;
                    self.rkey[buf as usize] = key;
                }
            }
        }
        Ok(())
    }

    /// Connects its QP to `remote` and posts its receive buffers.
    pub(super) fn connect(&self, remote: u32) -> Result {
        self.ctx.connect_qp(self.qpn, remote)?;
        self.ctx.post_recv(self.qpn, RECVS)
    }

    /// The DMA address of buffer `buf`, which WQEs name.
    pub(super) fn addr(&self, buf: Buf) -> u64 {
        self.dma + (buf as usize * KPING_BUF_BYTES) as u64
    }

    /// What the peer needs to read or write buffer `buf`.
    pub(super) fn describe(&self, tag: u32, buf: Buf, size: u32) -> Msg {
        Msg {
            tag,
            rkey: self.rkey[buf as usize],
            size,
            addr: self.addr(buf),
        }
    }

    /// Runs `f` on the bytes of buffer `buf`, `-ENODEV` once unbound.
    pub(super) fn with_buf<R>(&self, buf: Buf, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        self.with_bufs(|source, sink| {
            f(match buf {
                Buf::Source => source,
                Buf::Sink => sink,
            })
        })
    }

    /// Runs `f` on the bytes of both buffers (source, sink), in an RCU
    /// read-side section: `f` must not sleep.
    pub(super) fn with_bufs<R>(&self, f: impl FnOnce(&mut [u8], &mut [u8]) -> R) -> Result<R> {
        let hw = self.slot.kping.adapter.resources()?;
        let off = self.slot.index * KPING_END_BYTES;
        if off + KPING_END_BYTES > hw.kping_pool.size() {
            return Err(EINVAL);
        }
        // SAFETY: Inside the pool (checked above); the end owns this slot
        // (`Registry::take_end`), and the device touches the buffer only
        // through the WQEs this end posts, none of which is outstanding
        // when the ping looks at it (it waits for their completions, and
        // for the peer's go-ahead after the peer's).
        let bytes = unsafe {
            core::slice::from_raw_parts_mut(
                hw.kping_pool.as_mut_ptr().cast::<u8>().add(off),
                KPING_END_BYTES,
            )
        };
        let (source, sink) = bytes.split_at_mut(KPING_BUF_BYTES);
        Ok(f(source, sink))
    }

    fn post(&self, wqe_bytes: &[u8], flags: u32) -> Result {
        self.ctx.post_send(SendRequest {
            handle: self.qpn,
            flags,
            wqe: wqe_bytes,
        })
    }

    /// SENDs `msg`, inline: BlueFlame (`path=bf`) or doorbell.
    pub(super) fn send(&self, msg: &Msg, path: Path) -> Result {
        let mut buf = WqeBuf([0; 512]);
        let len = wqe_build::build_inline(&mut buf.0, wqe::OPCODE_SEND, None, &msg.encode())
            .ok_or(EINVAL)?;
        self.post(&buf.0[..len], path_flags(path))
    }

    /// RDMA READs the peer's buffer `from` into this end's `into`.
    pub(super) fn read(&self, from: &Msg, into: Buf) -> Result {
        let mut buf = WqeBuf([0; 512]);
        let seg = (self.addr(into), self.lkey[into as usize], from.size);
        let len = wqe_build::build_gather(
            &mut buf.0,
            wqe::OPCODE_RDMA_READ,
            Some((from.addr, from.rkey)),
            seg,
        )
        .ok_or(EINVAL)?;
        // A data segment: never BlueFlame.
        self.post(&buf.0[..len], 0)
    }

    /// RDMA WRITEs this end's buffer `from` (`size` bytes) into the peer's
    /// `to`: inline by BlueFlame (`path=bf`), or gathered after a doorbell.
    /// Returns how long `post_send()` took, in ns: the in-kernel post, the
    /// WQE built before it (as libmlx4 builds it before QP_POST).
    pub(super) fn write(&self, from: Buf, to: &Msg, path: Path) -> Result<u64> {
        let raddr = Some((to.addr, to.rkey));
        let size = to.size as usize;
        let mut buf = WqeBuf([0; 512]);
        let (len, flags) = match path {
            Path::Bf => {
                let len = self.with_buf(from, |b| {
                    wqe_build::build_inline(&mut buf.0, wqe::OPCODE_RDMA_WRITE, raddr, &b[..size])
                })?;
                (len, abi::POST_F_REQUIRE_BF)
            }
            Path::Db => {
                let seg = (self.addr(from), self.lkey[from as usize], to.size);
                let len = wqe_build::build_gather(&mut buf.0, wqe::OPCODE_RDMA_WRITE, raddr, seg);
                (len, abi::POST_F_FORCE_DOORBELL)
            }
        };
        let wqe_bytes = &buf.0[..len.ok_or(EINVAL)?];
        let start = Instant::<Monotonic>::now();
        self.post(wqe_bytes, flags)?;
        Ok(start.elapsed().as_nanos().max(0) as u64)
    }

    /// The next message received, if one arrived.
    pub(super) fn try_recv(&self) -> Result<Option<Msg>> {
        let mut buf = MsgBuf([0; 32]);
        match self.ctx.take_message(self.qpn, &mut buf.0)? {
            Some(n) if n == MSG_LEN => Ok(Some(Msg::decode(&buf.0))),
            Some(_) => Err(crate::sys::errno::eproto()),
            None => Ok(None),
        }
    }

    pub(super) fn sends_done(&self) -> Result<bool> {
        self.ctx.sends_done(self.qpn)
    }

    /// Arms the receive CQ: the next completion raises an event.
    pub(super) fn arm(&self) -> Result {
        self.ctx.arm_cq(self.qpn, false)
    }
}

/// The post flags of `path` for a WQE that may use BlueFlame.
fn path_flags(path: Path) -> u32 {
    match path {
        Path::Bf => abi::POST_F_REQUIRE_BF,
        Path::Db => abi::POST_F_FORCE_DOORBELL,
    }
}

/// A WQE being built: 8-byte aligned, so `post_send()` copies it by words
/// (`sys::copy::words`); the largest a BlueFlame buffer of a 1 KiB
/// register holds.
#[repr(C, align(8))]
struct WqeBuf([u8; 512]);

/// A message as `Area::read_qwords` copies it: 8-byte aligned.
#[repr(C, align(8))]
struct MsgBuf([u8; 32]);
