// SPDX-License-Identifier: GPL-2.0

//! A kernel context: what one end of the kernel ping (`kping/end.rs`)
//! posts through, as a verbs context (`ib/ucontext.rs`) is what a process
//! posts through. It owns one UAR, its BlueFlame page and
//! `QPS_PER_KERNEL_CONTEXT` QP whose WQEs the kernel builds, posts and
//! completes itself; its protection domain is its UAR index.
//!
//! Where `KernelContext`'s methods are, by file (each file holds one verb's
//! family, as mlx4_ib splits its objects):
//!
//! | file | methods |
//! |---|---|
//! | `context.rs` | `open`, close (`drop`: its QPs, CQs and regions out of the device) |
//! | `kernel_context/qps.rs` | `create_qp`, `connect_qp`; a QP's buffer, CQs and area |
//! | `kernel_context/post.rs` | `post_send` and its phases: copy in, check regions, make room, stamp, place, commit |
//! | `kernel_context/send_cq.rs` | `make_room`, `reap`: the send CQ |
//! | `kernel_context/receive.rs` | `post_recv`, `arm_cq`; a QP's receive queue and CQ (`Recv`) |
//! | `kernel_context/kernel_user.rs` | `take_message`, `sends_done`, `reg_kernel_mr` |
//!
//! Locking: a kernel context's QPs, send-queue heads, BlueFlame half and WQE buffer
//! are under its own mutex (the per-UAR lock of mlx4), held from the copy
//! of the WQE to the write, so posts on different contexts never share a
//! lock. The hardware is reached through `Devres::try_access()`, an RCU read
//! section, not a lock; commands take the command lock after the kernel context's.
//!
//! A kernel context also has a send CQ while it has QPs, and each QP exists in the
//! device (RTS) with a receive queue and its own receive CQ. Posts stamp
//! CQ_UPDATE and reap the send CQ when the send queue is full (see
//! `hw/queues/cq.rs`): a send-queue slot is reused only after its CQE
//! arrived. Receive completions are the kernel's too: the receive CQ and
//! buffers lie in the kernel context's area (`hw/memory/recv_area.rs`), and
//! `take_message` polls them, or the kernel ping sleeps on the adapter's
//! events after arming the CQ.

use crate::{
    adapter::{Adapter, Resources},
    geometry::{QPS_PER_KERNEL_CONTEXT, SQ_ENTRIES, SQ_STRIDE},
    hw::firmware::Firmware,
    hw::memory::mr::CtxMrs,
    hw::queues::cq::Cq,
    reject::Reject,
    stats::AtomicCounts,
};
use kernel::{
    debugfs::Scope,
    new_mutex,
    prelude::*,
    str::CString,
    sync::{Arc, Mutex},
};

mod kernel_user;
mod post;
mod qps;
mod receive;

pub(crate) use post::SendRequest;
use receive::Recv;
mod send_cq;

/// Bytes of one send queue at the start of a QP buffer in `Resources::qp_pool`.
const SQ_BYTES: usize = SQ_ENTRIES as usize * SQ_STRIDE;
/// How long a post waits for the device to free a slot of a full send queue.
const SQ_FULL_WAIT_US: i64 = 5000;

struct Qp {
    qpn: u32,
    /// Index of its buffer in `Resources::qp_pool`.
    slot: usize,
    /// The QP it is connected to.
    remote_qpn: u32,
    /// That QP is one of this kernel context's: an RDMA write's rkey is one of
    /// its regions, checked without the adapter's locks.
    peer_local: bool,
    /// Its receive queue and receive CQ; its memory is at its index in
    /// `State::qps` within the kernel context's area.
    recv: Recv,
    /// Send-queue producer index (not wrapped).
    head: u32,
    /// Index after the last WQE completed (not wrapped).
    tail: u32,
    /// An error CQE arrived, the QP is in ERR.
    failed: bool,
}

/// The WQE being posted, padded to whole 64-byte chunks with zeroes. Aligned
/// to its size, so it never crosses a 4 KiB boundary: the store-block split
/// (`zpci_memcpy_toio()`'s) breaks a burst where its source crosses one.
#[repr(C, align(1024))]
struct WqeBuf([u8; SQ_STRIDE]);

struct State {
    qps: [Option<Qp>; QPS_PER_KERNEL_CONTEXT],
    /// The send CQ of all its QPs, while it has any.
    cq: Option<Cq>,
    /// Its receive area (`Resources::recv_areas`), from its first QP until
    /// it is closed.
    area: Option<usize>,
    /// A QP or receive CQ of its area could not be taken out of the
    /// device, which may still write there: the area is never reused.
    area_in_hw: bool,
    /// Offset of the next BlueFlame buffer in the register: 0 or bf_buf_size.
    bf_half: u32,
    wqe: WqeBuf,
    /// Its memory regions, for the checks of its posts (the adapter's
    /// table has them all).
    mrs: CtxMrs,
}

#[pin_data(PinnedDrop)]
pub(crate) struct KernelContext {
    adapter: Arc<Adapter>,
    uar_index: u32,
    #[pin]
    state: Mutex<State>,
    stats: Arc<AtomicCounts>,
    /// `/sys/kernel/debug/mlx4_bf<N>/kernel-uar<uar_index>/stats`
    #[pin]
    debugfs: Scope<Arc<AtomicCounts>>,
}

fn show_stats(
    stats: &Arc<AtomicCounts>,
    f: &mut kernel::fmt::Formatter<'_>,
) -> kernel::fmt::Result {
    crate::stats::show(&stats.snapshot(), f)
}

impl KernelContext {
    /// A new kernel context of `adapter`, for a kernel ping end: its UAR, its counters
    /// and their debugfs file.
    pub(crate) fn open(adapter: &Arc<Adapter>) -> Result<Pin<KBox<Self>>> {
        let ctx_stats = Arc::new(AtomicCounts::new(), GFP_KERNEL)?;
        let uar_index = adapter.open_uar()?;
        // Every failure from here on gives the UAR back.
        let free_uar = |e: Error| {
            adapter.close_uar(uar_index);
            e
        };
        let dir_name = CString::try_from_fmt(fmt!("kernel-uar{uar_index}")).map_err(free_uar)?;
        let owner = adapter.clone();
        let init = try_pin_init!(KernelContext {
            adapter: owner,
            uar_index,
            state <- new_mutex!(State {
                qps: [const { None }; QPS_PER_KERNEL_CONTEXT],
                cq: None,
                area: None,
                area_in_hw: false,
                bf_half: 0,
                wqe: WqeBuf([0; SQ_STRIDE]),
                mrs: CtxMrs::new(),
            }),
            stats: ctx_stats.clone(),
            // `adapter` is the field initialized above.
            debugfs <- adapter.debugfs().scope(ctx_stats, &dir_name, |s, dir| {
                dir.read_callback_file(c"stats", s, &show_stats)
            }),
        });
        let ctx = KBox::try_pin_init(init, GFP_KERNEL).map_err(free_uar)?;
        // Dropping `ctx` on failure gives everything back (PinnedDrop).
        adapter.stats().attach(ctx.stats.clone())?;
        Ok(ctx)
    }
}

#[pinned_drop]
impl PinnedDrop for KernelContext {
    fn drop(self: Pin<&mut Self>) {
        let mut state = self.state.lock();
        for i in 0..QPS_PER_KERNEL_CONTEXT {
            if let Some(qp) = state.qps[i].take() {
                state.area_in_hw |= !self.destroy_hw_qp(&qp);
            }
        }
        self.release_cq_if_idle(&mut state);
        // No QP of ours uses them any more.
        while let Some(m) = state.mrs.pop() {
            // A failure leaves the region to the adapter (`deregister`).
            let _ = self.adapter.deregister_mr(self.uar_index, m.key);
        }
        if let Some(area) = state.area.take() {
            if state.area_in_hw {
                kernel::pr_warn!("area {area} kept: the adapter may still write it\n");
            } else {
                self.adapter.release_area(area);
            }
        }
        drop(state);
        self.adapter.stats().detach(&*self.stats);
        self.adapter.close_uar(self.uar_index);
    }
}

impl KernelContext {
    /// The hardware, or `-ENODEV` once the adapter was unbound. The guard is
    /// an RCU read-side section: nothing may sleep while it is held.
    fn hw(&self) -> Result<kernel::revocable::RevocableGuard<'_, Resources>> {
        self.adapter.resources()
    }

    fn firmware(&self) -> &Firmware {
        self.adapter.firmware()
    }

    /// Counts a refused post under its reason; returns `err`.
    #[cold]
    fn reject(&self, why: Reject, err: Error) -> Error {
        self.stats.reject(why);
        err
    }
}
