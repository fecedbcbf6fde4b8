// SPDX-License-Identifier: GPL-2.0

//! One open of `/dev/mlx4_bf<N>`: a context owning one UAR, its BlueFlame
//! page and up to `MAX_QPS_PER_CONTEXT` QPs, and the methods of the ioctl.
//!
//! Locking: a context's QPs, send-queue heads, BlueFlame half and WQE buffer
//! are under its own mutex (the per-UAR lock of mlx4), held across the
//! `copy_from_user` of the WQE, so posts on different contexts never share a
//! lock. The hardware is reached through `Devres::try_access()`, an RCU read
//! section, not a lock; commands take the command lock after the context's.
//!
//! A context also has a send CQ while it has QPs, and each QP exists in the
//! device (RTS) with a receive queue and its own receive CQ. Posts stamp
//! CQ_UPDATE and reap the send CQ first (see `cq.rs`): a send-queue slot is
//! reused only after its CQE arrived. Receive completions are the process's:
//! it maps the receive CQ and buffers (`umem.rs`, `recv.rs`) and polls them
//! without a system call, or sleeps in `poll()` after arming the CQ.

use kernel::{
    bindings,
    debugfs::Scope,
    fs::File,
    io::{poll::read_poll_timeout, Io},
    miscdevice::{MiscDevice, MiscDeviceRegistration},
    mm::virt::VmaNew,
    new_mutex,
    prelude::*,
    str::CString,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        poll::PollTable,
        Arc, Mutex,
    },
    time::Delta,
};

use crate::{
    abi::{self, Reject},
    adapter::Adapter,
    adapter::Hw,
    cq::{Cq, CQE_SIZE},
    driver::Mlx4BfDevice,
    events,
    geometry::{
        MAX_QPS_PER_CONTEXT, QP_BUF_BYTES, RECV_BUF_SIZE, RQ_DB_OFFSET, RQ_ENTRIES,
        SEND_BUFS_BYTES, SQ_ENTRIES, SQ_STRIDE,
    },
    hca::Hca,
    layout,
    mr::{CtxMr, CtxMrs, MAX_CONTEXT_PAGES, MAX_MRS_PER_CONTEXT, MAX_MR_SIZE},
    pin::Pinned,
    qp,
    recv::Recv,
    region,
    stats::Stats,
    umem::{self, Area, QP_AREA_BYTES},
    usermap::{BarPage, Fault, VmOps},
    uverbs::Bundle,
    wqe,
    writer::Writer,
};

/// Bytes of one send queue at the start of a QP buffer in `Hw::qp_pool`.
const SQ_BYTES: usize = SQ_ENTRIES as usize * SQ_STRIDE;
/// `Context::area_index` before the context has an area.
const NO_AREA: u32 = u32::MAX;
/// `Context::send_mode`: how its QPs post, fixed by the first QP or by a
/// mapping of its UAR or BlueFlame page, never changed after.
const SEND_UNSET: u32 = 0;
const SEND_KERNEL: u32 = 1;
const SEND_USER: u32 = 2;
/// How long a post waits for the device to free a slot of a full send queue.
const SQ_FULL_WAIT_US: i64 = 5000;

struct Qp {
    qpn: u32,
    /// Index of its buffer in `Hw::qp_pool`.
    slot: usize,
    /// The QP it is connected to.
    remote_qpn: u32,
    /// That QP is one of this context's: an RDMA write's rkey is one of
    /// its regions, checked without the adapter's locks.
    peer_local: bool,
    /// Its receive queue and receive CQ; its memory is at its index in
    /// `State::qps` within the context's area.
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
    qps: [Option<Qp>; MAX_QPS_PER_CONTEXT],
    /// The send CQ of all its QPs, while it has any.
    cq: Option<Cq>,
    /// Its area of `Adapter::umem`, from its first QP until it is closed.
    area: Option<usize>,
    /// A QP or receive CQ of its area could not be taken out of the
    /// device, which may still write there: the area is never reused.
    area_in_hw: bool,
    /// Offset of the next BlueFlame buffer in the register: 0 or bf_buf_size.
    bf_half: u32,
    wqe: WqeBuf,
    /// A message of POST_SEND's PAYLOAD on its way to a send buffer.
    payload: [u8; abi::MAX_PAYLOAD],
    /// Its memory regions, for the checks of its posts (the adapter's
    /// table has them all).
    mrs: CtxMrs,
}

#[pin_data(PinnedDrop)]
pub(crate) struct Context {
    adapter: Arc<Adapter>,
    uar_index: u32,
    #[pin]
    state: Mutex<State>,
    /// `State::area` for `mmap()`, which may not take the mutex; set once.
    area_index: Atomic<u32>,
    /// The QP indices of the area with a QP now (bit = index), for
    /// `mmap()`; written under `state`'s mutex.
    qp_mask: Atomic<u32>,
    /// `SEND_UNSET`, `SEND_KERNEL` or `SEND_USER`; set once.
    send_mode: Atomic<u32>,
    stats: Arc<Stats>,
    /// `/sys/kernel/debug/mlx4_bf<N>/ctx-<uar_index>/stats`
    #[pin]
    debugfs: Scope<Arc<Stats>>,
}

fn show_stats(stats: &Arc<Stats>, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    crate::stats::show(&stats.snapshot(), f)
}

#[vtable]
impl MiscDevice for Context {
    type Ptr = Pin<KBox<Self>>;

    fn open(file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<Self>>> {
        // SAFETY: Every registration of `Context` is the `misc` field of a
        // `Mlx4BfDevice`, which outlives this call (misc_deregister() waits
        // for open() under misc_mtx).
        let dev = unsafe { &*kernel::container_of!(core::ptr::from_ref(misc), Mlx4BfDevice, misc) };
        let adapter = dev.adapter.clone();
        let ctx_stats = Arc::new(Stats::new(), GFP_KERNEL)?;
        let uar_index = adapter.uars.lock().alloc().ok_or_else(|| {
            kernel::pr_warn_once!(
                "all {} UARs in use: open() fails with -EBUSY\n",
                adapter.caps.num_uars - 1
            );
            EBUSY
        })?;
        // Every failure from here on gives the UAR back.
        let free_uar = |e: Error| {
            adapter.uars.lock().free(uar_index);
            e
        };
        let dir_name = CString::try_from_fmt(fmt!("ctx-{uar_index}")).map_err(free_uar)?;
        let owner = adapter.clone();
        let init = try_pin_init!(Context {
            adapter: owner,
            uar_index,
            area_index: Atomic::new(NO_AREA),
            qp_mask: Atomic::new(0),
            send_mode: Atomic::new(SEND_UNSET),
            state <- new_mutex!(State {
                qps: [const { None }; MAX_QPS_PER_CONTEXT],
                cq: None,
                area: None,
                area_in_hw: false,
                bf_half: 0,
                wqe: WqeBuf([0; SQ_STRIDE]),
                payload: [0; abi::MAX_PAYLOAD],
                mrs: CtxMrs::new(),
            }),
            stats: ctx_stats.clone(),
            // `adapter` is the field initialized above.
            debugfs <- adapter.debugfs.scope(ctx_stats, &dir_name, |s, dir| {
                dir.read_callback_file(c"stats", s, &show_stats)
            }),
        });
        let ctx = KBox::try_pin_init(init, GFP_KERNEL).map_err(free_uar)?;
        // Dropping `ctx` on failure gives everything back (PinnedDrop).
        adapter.stats.attach(&ctx.stats)?;
        // The file holds a reference on this module from here on.
        events::install_fops(file)?;
        Ok(ctx)
    }

    /// Runs under the process's `mmap_lock`, so it takes no lock that is
    /// held around copies from and to user space (the context's mutex is:
    /// they may fault and take `mmap_lock`, lockdep saw the cycle); the
    /// adapter's `user_maps` lock is held around nothing but preparing,
    /// faulting in and zapping BAR pages.
    fn mmap(me: Pin<&Context>, file: &File, vma: &VmaNew) -> Result {
        // SAFETY: `vma` is the VMA being set up by this mmap() call.
        let pgoff = unsafe { (*vma.as_ptr()).vm_pgoff };
        let offset = pgoff.checked_mul(4096).ok_or(EINVAL)?;
        if offset as u64 == abi::MMAP_UAR_PAGE || offset as u64 == abi::MMAP_BF_PAGE {
            return me.map_bar_page(file, vma, offset as u64);
        }
        // Nothing new is mapped once the adapter is unbound.
        drop(me.hw()?);
        let area = me.area_index.load(Acquire);
        let index = offset / umem::QP_AREA_BYTES;
        // Only the QP indices with a QP of this context now. A mapping made
        // earlier outlives DESTROY_QP: it still shows the context's own
        // memory, cleared again when a QP is created there.
        let created = me.qp_mask.load(Acquire);
        if area == NO_AREA || index >= MAX_QPS_PER_CONTEXT || created & (1 << index) == 0 {
            return Err(EINVAL);
        }
        me.adapter
            .umem
            .check_mmap(area as usize, vma, offset, me.user_posted())?;
        let mut maps = me.adapter.user_maps.lock();
        // The VMA holds the file open, so this context outlives it.
        let private = core::ptr::from_ref(&*me).cast();
        maps.prepare_ram(me.uar_index, file, vma, (&AREA_OPS, private))
    }

    fn ioctl(me: Pin<&Context>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        if cmd != abi::IOCTL {
            return Err(ENOTTY);
        }
        // Every method answers -ENODEV once the adapter is unbound.
        drop(me.hw()?);
        let mut store = crate::uverbs::attr_store();
        let mut b = Bundle::read(arg, &mut store)?;
        match (b.object_id, b.method_id) {
            (abi::OBJECT_DEVICE, abi::METHOD_QUERY_DEVICE) => me.query_device(&mut b),
            (abi::OBJECT_DEVICE, abi::METHOD_QUERY_STATS) => me.query_stats(&mut b),
            (abi::OBJECT_CONTEXT, abi::METHOD_QUERY_CONTEXT) => me.query_context(&mut b),
            (abi::OBJECT_QP, abi::METHOD_CREATE_QP) => me.create_qp(&mut b),
            (abi::OBJECT_QP, abi::METHOD_DESTROY_QP) => me.destroy_qp(&mut b),
            (abi::OBJECT_QP, abi::METHOD_POST_SEND) => me.post_send(&mut b),
            (abi::OBJECT_QP, abi::METHOD_POST_RECV) => me.post_recv(&mut b),
            (abi::OBJECT_QP, abi::METHOD_CONNECT_QP) => me.connect_qp(&mut b),
            (abi::OBJECT_QP, abi::METHOD_ARM_CQ) => me.arm_cq(&mut b),
            (abi::OBJECT_MR, abi::METHOD_REG_MR) => me.reg_mr(&mut b),
            (abi::OBJECT_MR, abi::METHOD_DEREG_MR) => me.dereg_mr(&mut b),
            _ => Err(crate::uverbs::eprotonosupport()),
        }?;
        Ok(0)
    }
}

#[pinned_drop]
impl PinnedDrop for Context {
    fn drop(self: Pin<&mut Self>) {
        let mut state = self.state.lock();
        for i in 0..MAX_QPS_PER_CONTEXT {
            if let Some(qp) = state.qps[i].take() {
                state.area_in_hw |= !self.destroy_hw_qp(&qp);
            }
        }
        self.release_cq_if_idle(&mut state);
        // No QP of ours uses them any more.
        while let Some(m) = state.mrs.pop() {
            let pinned = self
                .adapter
                .mrs
                .lock()
                .deregister(&self.hca().cmd, self.uar_index, m.key);
            drop(pinned);
        }
        if let Some(area) = state.area.take() {
            if state.area_in_hw {
                kernel::pr_warn!("area {area} kept: the adapter may still write it\n");
            } else {
                *self.adapter.areas.lock() &= !(1 << area);
            }
        }
        drop(state);
        self.adapter.user_maps.lock().forget(self.uar_index);
        self.adapter.stats.detach(&self.stats);
        self.adapter.uars.lock().free(self.uar_index);
    }
}

/// The operations of a UAR or BlueFlame page mapping.
static BAR_PAGE_OPS: VmOps = VmOps::new(bar_page_fault);
/// The operations of a mapping of the context's area.
static AREA_OPS: VmOps = VmOps::new(area_fault);

/// # Safety
///
/// Called by the mm core for a fault in a VMA that `mmap()` set up with
/// `AREA_OPS`.
unsafe extern "C" fn area_fault(vmf: *mut bindings::vm_fault) -> bindings::vm_fault_t {
    // SAFETY: The mm core hands us the fault being handled, in a VMA set up
    // by `mmap()` with `AREA_OPS`.
    let fault = unsafe { Fault::from_raw(vmf) };
    // SAFETY: As in `bar_page_fault()`.
    let ctx = unsafe { &*fault.private().cast::<Context>() };
    ctx.area_fault(&fault)
}

/// # Safety
///
/// Called by the mm core for a fault in a VMA that `map_bar_page()` set up.
unsafe extern "C" fn bar_page_fault(vmf: *mut bindings::vm_fault) -> bindings::vm_fault_t {
    // SAFETY: The mm core hands us the fault being handled, in a VMA set up
    // by `map_bar_page()` (the only user of `BAR_PAGE_OPS`).
    let fault = unsafe { Fault::from_raw(vmf) };
    // SAFETY: That VMA's private data is the context of the file it holds
    // open: pinned, and alive until the file is released, after the VMA.
    let ctx = unsafe { &*fault.private().cast::<Context>() };
    ctx.bar_page_fault(&fault)
}

impl Context {
    /// The hardware, or `-ENODEV` once the adapter was unbound. The guard is
    /// an RCU read-side section: nothing may sleep while it is held.
    fn hw(&self) -> Result<kernel::revocable::RevocableGuard<'_, Hw>> {
        self.adapter.hw.try_access().ok_or(ENODEV)
    }

    /// User space owns the send queues of this context's QPs
    /// (`abi::QP_F_USER_SEND`): all of them, or none.
    fn user_posted(&self) -> bool {
        self.send_mode.load(Acquire) == SEND_USER
    }

    /// Fixes how the context's QPs post, unless it was fixed the other way.
    fn claim_send_mode(&self, mode: u32) -> Result {
        match self
            .send_mode
            .cmpxchg(SEND_UNSET, mode, kernel::sync::atomic::Full)
        {
            Ok(_) => Ok(()),
            Err(m) if m == mode => Ok(()),
            Err(_) => Err(EINVAL),
        }
    }

    /// The context's UAR or BlueFlame page into its process, for QPs it
    /// posts to itself: the context's QPs are all of that kind from now on.
    /// A context whose QPs the kernel posts to never maps them: the
    /// reserved lkey its QPs may use would reach any memory.
    fn map_bar_page(&self, file: &File, vma: &VmaNew, offset: u64) -> Result {
        // A mapping that cannot be made decides nothing.
        crate::usermap::check(vma)?;
        if self.claim_send_mode(SEND_USER).is_err() {
            return Err(EPERM);
        }
        let page = self.bar_page(offset);
        // Under the lock unbind revokes them with: prepared before, zapped.
        let mut maps = self.adapter.user_maps.lock();
        if self.hw().is_err() {
            return Err(ENODEV);
        }
        // The VMA holds the file open, so this context outlives it.
        let private = core::ptr::from_ref(self).cast();
        maps.prepare(self.uar_index, file, vma, &page, (&BAR_PAGE_OPS, private))
    }

    /// The page of BAR2 that mmap() offset `offset` maps for this context.
    fn bar_page(&self, offset: u64) -> BarPage {
        let caps = &self.adapter.caps;
        let start = self.adapter.bar2_start;
        if offset == abi::MMAP_BF_PAGE {
            BarPage::BlueFlame(start + caps.bf_page_offset(self.uar_index))
        } else {
            BarPage::Uar(start + caps.uar_offset(self.uar_index))
        }
    }

    /// The first access to a page `map_bar_page()` set up: the page goes
    /// in while the adapter is bound, under the lock unbind revokes with.
    fn bar_page_fault(&self, fault: &Fault) -> bindings::vm_fault_t {
        let page = self.bar_page(fault.offset());
        let maps = self.adapter.user_maps.lock();
        if self.hw().is_err() {
            return bindings::vm_fault_reason_VM_FAULT_SIGBUS;
        }
        maps.insert(fault, &page)
    }

    /// A page of the context's area, faulted in while the adapter is
    /// bound, under the lock unbind revokes with. `mmap()` checked the
    /// range, which the VMA cannot grow beyond (VM_DONTEXPAND).
    fn area_fault(&self, fault: &Fault) -> bindings::vm_fault_t {
        let area = self.area_index.load(Acquire) as usize;
        let Some(page) = self.adapter.umem.page(area, fault.offset() as usize) else {
            return bindings::vm_fault_reason_VM_FAULT_SIGBUS;
        };
        let maps = self.adapter.user_maps.lock();
        if self.hw().is_err() {
            return bindings::vm_fault_reason_VM_FAULT_SIGBUS;
        }
        maps.insert_page(fault, page)
    }

    fn query_device(&self, b: &mut Bundle<'_>) -> Result {
        let out = b.output(abi::ATTR_DEVICE_INFO).ok_or(EINVAL)?;
        b.check_unused()?;
        let caps = &self.adapter.caps;
        let info = abi::DeviceInfo {
            abi_version: abi::ABI_VERSION,
            num_uars: caps.num_uars,
            bf_reg_size: caps.bf_reg_size,
            bf_buf_size: caps.bf_buf_size(),
            max_bf_wqe_size: caps.bf_buf_size(),
            max_db_wqe_size: wqe::MAX_WQE_LEN as u32,
            writer: self.adapter.writer.abi(),
            store_block_max: crate::store_block::MAX_BLOCK as u32,
            max_qps_per_context: MAX_QPS_PER_CONTEXT as u32,
            sq_entries: SQ_ENTRIES,
            bar2_len: caps.bar2_len,
            max_mrs_per_context: MAX_MRS_PER_CONTEXT as u32,
            max_mr_pages: MAX_CONTEXT_PAGES,
            max_mr_size: MAX_MR_SIZE,
        };
        b.write(out, &info)
    }

    fn query_stats(&self, b: &mut Bundle<'_>) -> Result {
        let dev = b.output(abi::ATTR_DEVICE_STATS);
        let ctx = b.output(abi::ATTR_CONTEXT_STATS);
        b.check_unused()?;
        if dev.is_none() && ctx.is_none() {
            return Err(EINVAL);
        }
        if let Some(i) = dev {
            b.write(i, &self.adapter.stats.snapshot())?;
        }
        if let Some(i) = ctx {
            b.write(i, &self.stats.snapshot())?;
        }
        Ok(())
    }

    fn query_context(&self, b: &mut Bundle<'_>) -> Result {
        let out = b.output(abi::ATTR_CONTEXT_INFO);
        b.check_unused()?;
        // Also the benchmarks' no-op round trip: without an output it does nothing.
        let Some(out) = out else { return Ok(()) };
        let caps = &self.adapter.caps;
        let info = abi::ContextInfo {
            uar_index: self.uar_index,
            reserved: 0,
            uar_offset: caps.uar_offset(self.uar_index),
            bf_offset: caps.bf_page_offset(self.uar_index),
        };
        b.write(out, &info)
    }

    fn hca(&self) -> &Hca {
        &self.adapter.hca
    }

    fn create_qp(&self, b: &mut Bundle<'_>) -> Result {
        let out = b.output(abi::ATTR_QP_INFO).ok_or(EINVAL)?;
        let flags = b.inline_u32(abi::ATTR_QP_FLAGS)?.unwrap_or(0);
        let send_out = b.output(abi::ATTR_QP_SEND_INFO);
        b.check_unused()?;
        let user_send = flags & abi::QP_F_USER_SEND != 0;
        if flags & !abi::QP_F_ALL != 0 || user_send != send_out.is_some() {
            return Err(EINVAL);
        }
        let mut state = self.state.lock();
        self.claim_send_mode(if user_send { SEND_USER } else { SEND_KERNEL })?;
        let index = state.qps.iter().position(Option::is_none).ok_or(ENOSPC)?;
        let area = self.area(&mut state)?;
        let (slot, qpn) = self
            .adapter
            .qps
            .lock()
            .alloc(self.uar_index)
            .ok_or(ENOSPC)?;
        let qp = match self.create_hw_qp(&mut state, area, index, slot, qpn, user_send) {
            Ok(qp) => qp,
            Err(e) => {
                self.free_slot(slot);
                return Err(e);
            }
        };
        let base = (index * QP_AREA_BYTES) as u64;
        let info = abi::QpInfo {
            qp_handle: qpn,
            qpn,
            rq_entries: RQ_ENTRIES,
            recv_buf_size: RECV_BUF_SIZE as u32,
            cq_entries: umem::RCQ_ENTRIES,
            cqe_size: CQE_SIZE as u32,
            cq_offset: base + umem::CQ_OFFSET as u64,
            cq_db_offset: base + umem::CQ_DB_OFFSET as u64,
            recv_offset: base + umem::RECV_OFFSET as u64,
            wqe_offset: base + umem::WQE_OFFSET as u64,
        };
        let caps = &self.adapter.caps;
        let send_info = abi::QpSendInfo {
            sq_offset: base + umem::USER_QP_OFFSET as u64,
            sq_entries: SQ_ENTRIES,
            sq_stride: SQ_STRIDE as u32,
            bf_buf_size: caps.bf_buf_size(),
            bf_reg_offset: 0,
        };
        let written = b
            .write(out, &info)
            .and_then(|()| send_out.map_or(Ok(()), |o| b.write(o, &send_info)));
        if let Err(e) = written {
            state.area_in_hw |= !self.destroy_hw_qp(&qp);
            self.release_cq_if_idle(&mut state);
            return Err(e);
        }
        state.qps[index] = Some(qp);
        self.set_qp_mapped(index, true);
        Ok(())
    }

    /// Whether `mmap()` may map QP index `index` (under `state`'s mutex,
    /// the only writer).
    fn set_qp_mapped(&self, index: usize, created: bool) {
        let mask = self.qp_mask.load(Relaxed);
        let bit = 1u32 << index;
        self.qp_mask
            .store(if created { mask | bit } else { mask & !bit }, Release);
    }

    /// The context's area of shared memory, taken with its first QP and
    /// cleared whole then: it may hold the bytes of the context that had
    /// it before (receive buffers, WQE pages, user send queues).
    fn area(&self, state: &mut State) -> Result<usize> {
        if let Some(area) = state.area {
            return Ok(area);
        }
        let mut used = self.adapter.areas.lock();
        let area = (!*used).trailing_zeros() as usize;
        if area >= umem::AREAS {
            kernel::pr_warn_once!(
                "more than {} contexts with QPs: CREATE_QP fails with -ENOSPC\n",
                umem::AREAS
            );
            return Err(ENOSPC);
        }
        self.adapter.umem.area(area)?.clear_all();
        *used |= 1 << area;
        state.area = Some(area);
        self.area_index.store(area as u32, Release);
        Ok(area)
    }

    fn user_area(&self, state: &State) -> Result<Area<'_>> {
        self.adapter.umem.area(state.area.ok_or(EINVAL)?)
    }

    /// The QP context of the QP in buffer `slot` (or, posted to by user
    /// space, at QP index `index` of the context's area) as QP `qpn`.
    fn qp_params(
        &self,
        state: &State,
        (slot, index, user_send): (usize, usize, bool),
        qpn: u32,
        remote_qpn: u32,
        cqn_recv: u32,
    ) -> Result<qp::QpParams> {
        let buf_dma = if user_send {
            self.user_area(state)?
                .dma(index * QP_AREA_BYTES + umem::USER_QP_OFFSET)
        } else {
            let hw = self.hw()?;
            let base = slot * QP_BUF_BYTES;
            if base + QP_BUF_BYTES > hw.qp_pool.size() {
                return Err(EINVAL);
            }
            hw.qp_pool.dma_handle() + base as u64
        };
        Ok(qp::QpParams {
            qpn,
            remote_qpn,
            uar: self.uar_index,
            pd: self.uar_index,
            // User space polls its send completions in the QP's own CQ.
            cqn_send: if user_send {
                cqn_recv
            } else {
                state.cq.as_ref().ok_or(EINVAL)?.cqn
            },
            cqn_recv,
            buf_dma,
            rq_db_dma: buf_dma + RQ_DB_OFFSET as u64,
            rlkey: !user_send,
        })
    }

    /// A QP's buffer as a new QP's: in the QP pool, or in the area.
    fn init_any_qp_buffer(
        &self,
        state: &State,
        (slot, index, user_send): (usize, usize, bool),
    ) -> Result {
        if user_send {
            self.user_area(state)?.init_user_qp(index)
        } else {
            self.init_qp_buffer(slot)
        }
    }

    /// Sets the send queue of the QP buffer in `slot` to its initial
    /// ownership and clears its RQ doorbell record.
    fn init_qp_buffer(&self, slot: usize) -> Result {
        let hw = self.hw()?;
        let base = slot * QP_BUF_BYTES;
        if base + QP_BUF_BYTES > hw.qp_pool.size() {
            return Err(EINVAL);
        }
        // SAFETY: The range is inside the pool (checked above) and is the
        // buffer of `slot`, this context's QP, which is not in the device
        // (new, or reset); a slot whose previous QP the device could not
        // reset is never handed out again (`free_slot`): nobody else reads
        // or writes it.
        let buf = unsafe {
            core::slice::from_raw_parts_mut(
                hw.qp_pool.as_mut_ptr().cast::<u8>().add(base),
                QP_BUF_BYTES,
            )
        };
        qp::init_sq_ownership(&mut buf[..SQ_BYTES]);
        buf[SQ_BYTES..].fill(0);
        Ok(())
    }

    /// The context's send CQ (with its first QP), the QP's receive CQ in
    /// the context's area at `index`, and the QP taken to RTS, connected to
    /// itself.
    fn create_hw_qp(
        &self,
        state: &mut State,
        area: usize,
        index: usize,
        slot: usize,
        qpn: u32,
        user_send: bool,
    ) -> Result<Qp> {
        let hca = self.hca();
        if state.cq.is_none() {
            state.cq = Some(hca.open_cq(&self.adapter.hw, self.uar_index)?);
        }
        let mem = self.adapter.umem.area(area)?;
        let qp_off = index * QP_AREA_BYTES;
        let opened = mem.clear_qp(index).and_then(|()| {
            hca.open_recv_cq(
                slot,
                self.uar_index,
                mem.dma(qp_off + umem::CQ_OFFSET),
                mem.dma(qp_off + umem::CQ_DB_OFFSET),
            )
        });
        let (cqn, live_bit) = match opened {
            Ok(cq) => cq,
            Err(e) => {
                self.release_cq_if_idle(state);
                return Err(e);
            }
        };
        let qp = Qp {
            qpn,
            slot,
            remote_qpn: qpn,
            peer_local: true,
            recv: Recv::new(cqn, live_bit, index),
            head: 0,
            tail: 0,
            failed: false,
        };
        let at = (slot, index, user_send);
        let created = self
            .init_any_qp_buffer(state, at)
            .and_then(|()| self.qp_params(state, at, qpn, qpn, cqn))
            .and_then(|p| hca.create_qp(&p, slot));
        if let Err(e) = created {
            hca.close_recv_cq(cqn, live_bit);
            self.release_cq_if_idle(state);
            return Err(e);
        }
        Ok(qp)
    }

    /// 2RST_QP (nothing if unbind did it already), HW2SW_CQ of its receive
    /// CQ, and its buffer given back. Returns whether the device let go of
    /// both: if not, it may still write the QP's part of the area.
    fn destroy_hw_qp(&self, qp: &Qp) -> bool {
        let hca = self.hca();
        hca.destroy_qp(qp.slot);
        hca.close_recv_cq(qp.recv.cqn, qp.recv.live_bit);
        self.free_slot(qp.slot) && !hca.recv_cq_in_hw(qp.recv.live_bit)
    }

    /// Gives QP buffer `slot` back, unless a QP the device could not reset
    /// still uses it: the device may then read that buffer, so it is never
    /// handed out (nor cleared) again. Returns whether it was given back.
    fn free_slot(&self, slot: usize) -> bool {
        let in_hw = self.hca().qp_in_hw(slot);
        if !in_hw {
            self.adapter.qps.lock().free(slot);
        }
        !in_hw
    }

    /// HW2SW_CQ once the context has no QP left.
    fn release_cq_if_idle(&self, state: &mut State) {
        if state.qps.iter().any(Option::is_some) {
            return;
        }
        if let Some(cq) = state.cq.take() {
            self.hca().close_cq(&cq);
        }
    }

    /// The index in `State::qps` of the QP with handle `handle`.
    fn find_qp(&self, state: &State, handle: u32) -> Result<usize> {
        state
            .qps
            .iter()
            .position(|q| q.as_ref().is_some_and(|q| q.qpn == handle))
            .ok_or(ENOENT)
    }

    fn destroy_qp(&self, b: &mut Bundle<'_>) -> Result {
        let handle = b.inline_u32(abi::ATTR_QP_HANDLE)?.ok_or(EINVAL)?;
        b.check_unused()?;
        let mut state = self.state.lock();
        let index = self.find_qp(&state, handle)?;
        if let Some(q) = state.qps[index].take() {
            self.set_qp_mapped(index, false);
            state.area_in_hw |= !self.destroy_hw_qp(&q);
            // Its CQEs left in the CQ (a post reaps only a full queue) name
            // a QPN a new QP may get: consume them now that the reset QP
            // writes no more; they match no QP. Unbound: nothing to reap.
            let _ = self.reap(self.hca(), &mut state);
            self.release_cq_if_idle(&mut state);
            // Its QPN may go to another context's QP now.
            for p in state.qps.iter_mut().flatten() {
                if p.remote_qpn == q.qpn {
                    p.peer_local = false;
                }
            }
        }
        Ok(())
    }

    /// Looks at the receive CQ of QP `index`: an error CQE there means the
    /// QP is in ERR, and sends must not reach it any more.
    #[inline(always)]
    fn scan_recv(&self, state: &mut State, index: usize) -> Result {
        // No receive WQE outstanding, no CQE to read: a sender's case.
        if state.qps[index].as_ref().is_some_and(|q| q.recv.idle()) {
            return Ok(());
        }
        self.scan_recv_cq(state, index)
    }

    #[inline(never)]
    fn scan_recv_cq(&self, state: &mut State, index: usize) -> Result {
        let area = self.user_area(state)?;
        let Some(qp) = state.qps[index].as_mut() else {
            return Err(ENOENT);
        };
        if qp.recv.scan(&area)? {
            qp.failed = true;
        }
        Ok(())
    }

    fn post_recv(&self, b: &mut Bundle<'_>) -> Result {
        let handle = b.inline_u32(abi::ATTR_QP_HANDLE)?.ok_or(EINVAL)?;
        let count = b.inline_u32(abi::ATTR_RECV_COUNT)?.unwrap_or(1);
        b.check_unused()?;
        if count == 0 || count > RQ_ENTRIES {
            return Err(EINVAL);
        }
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let index = self.find_qp(state, handle)?;
        self.scan_recv(state, index)?;
        let area = self.user_area(state)?;
        let lkey = self.hca().dev_cap.reserved_lkey;
        let Some(qp) = state.qps[index].as_mut() else {
            return Err(ENOENT);
        };
        if self.user_posted() {
            // Its buffer holds no receive buffers (`umem.rs`).
            return Err(crate::uverbs::eopnotsupp());
        }
        if qp.failed {
            return Err(EIO);
        }
        if !qp.recv.has_room(&area, count)? {
            // Like ibv_post_recv()'s ENOMEM: consume completions first.
            return Err(ENOSPC);
        }
        let hw = self.hw()?;
        let _posting = self.hca().posting.try_access().ok_or(ENODEV)?;
        qp.recv
            .post(&hw.qp_pool, qp.slot * QP_BUF_BYTES, &area, lkey, count)?;
        self.hca().stats.receives(count);
        Ok(())
    }

    fn connect_qp(&self, b: &mut Bundle<'_>) -> Result {
        let handle = b.inline_u32(abi::ATTR_QP_HANDLE)?.ok_or(EINVAL)?;
        let remote = b.inline_u32(abi::ATTR_REMOTE_QPN)?.ok_or(EINVAL)?;
        b.check_unused()?;
        if remote >> 24 != 0 {
            return Err(EINVAL);
        }
        let hca = self.hca();
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let index = self.find_qp(state, handle)?;
        self.reap(hca, state)?;
        self.scan_recv(state, index)?;
        let (slot, qpn, cqn_recv, busy) = match &state.qps[index] {
            Some(q) => (
                q.slot,
                q.qpn,
                q.recv.cqn,
                q.head != q.tail || !q.recv.idle(),
            ),
            None => return Err(ENOENT),
        };
        if busy {
            // Sends or receives outstanding: RESET would drop them.
            return Err(EBUSY);
        }
        // A user-posted QP's sends in flight are dropped, as by a verbs
        // modify to RESET: its send queue starts again at WQE 0.
        let at = (slot, index, self.user_posted());
        let params = self.qp_params(state, at, qpn, remote, cqn_recv)?;
        self.init_any_qp_buffer(state, at)?;
        let reconnected = hca.reconnect_qp(&params, slot);
        let local = state.qps.iter().flatten().any(|q| q.qpn == remote);
        let hw = self.hw()?;
        let Some(qp) = state.qps[index].as_mut() else {
            return Err(ENOENT);
        };
        // Whatever happened, the QP went through RESET: its queues start over.
        qp.head = 0;
        qp.tail = 0;
        qp.recv.restart(&hw.qp_pool, slot * QP_BUF_BYTES)?;
        match reconnected {
            Ok(()) => {
                qp.failed = false;
                qp.remote_qpn = remote;
                qp.peer_local = local;
                Ok(())
            }
            Err(e) => {
                // Not in the device any more (or in ERR): posts fail with -EIO.
                qp.failed = true;
                Err(e)
            }
        }
    }

    fn arm_cq(&self, b: &mut Bundle<'_>) -> Result {
        let handle = b.inline_u32(abi::ATTR_QP_HANDLE)?.ok_or(EINVAL)?;
        let flags = b.inline_u32(abi::ATTR_ARM_FLAGS)?.unwrap_or(0);
        b.check_unused()?;
        if flags & !abi::ARM_F_SOLICITED != 0 {
            return Err(EINVAL);
        }
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let index = self.find_qp(state, handle)?;
        let area = self.user_area(state)?;
        let Some(qp) = state.qps[index].as_mut() else {
            return Err(ENOENT);
        };
        let hw = self.hw()?;
        // A doorbell like a post's: none after unbind has reset the CQs.
        let _posting = self.hca().posting.try_access().ok_or(ENODEV)?;
        let uar = self.adapter.caps.uar_offset(self.uar_index) as usize;
        qp.recv
            .arm(&area, hw.bar2.uar(), uar, flags & abi::ARM_F_SOLICITED != 0)
    }

    /// `poll()`: readable when a receive CQ has a CQE at the consumer index
    /// its process published; an error once the adapter is gone.
    pub(crate) fn poll(&self, file: &File, table: &PollTable<'_>) -> kernel::ffi::c_uint {
        table.register_wait(file, &self.adapter.events);
        if self.hw().is_err() {
            return events::GONE;
        }
        let state = self.state.lock();
        let Ok(area) = self.user_area(&state) else {
            return 0;
        };
        let ready = state
            .qps
            .iter()
            .flatten()
            .any(|q| q.recv.readable(&area).unwrap_or(false));
        if ready {
            events::READABLE
        } else {
            0
        }
    }

    /// Consumes the context's CQEs (DMA memory only) and moves
    /// each QP's tail past the WQEs they complete.
    fn reap(&self, hca: &Hca, state: &mut State) -> Result {
        let State { qps, cq, .. } = state;
        let Some(cq) = cq.as_mut() else {
            return Ok(());
        };
        let hw = self.hw()?;
        let mut errors = 0;
        let n = cq.poll(&hw.hca, |c| {
            errors += u32::from(c.error.is_some());
            let Some(qp) = qps.iter_mut().flatten().find(|q| q.qpn == c.qpn) else {
                return;
            };
            // libmlx4: tail += (u16)(wqe_index - (u16)tail), then past it.
            // An index beyond what was posted is ignored.
            let done = u32::from(c.wqe_index.wrapping_sub(qp.tail as u16)) + 1;
            if done <= qp.head.wrapping_sub(qp.tail) {
                qp.tail = qp.tail.wrapping_add(done);
            }
            if c.error.is_some() {
                qp.failed = true;
            }
        })?;
        hca.stats.cqes(n, errors);
        Ok(())
    }

    /// Makes sure QP `index` has a free send-queue slot, waiting briefly
    /// for the device if it has none. The CQ is reaped only when the send
    /// queue is full: one reap then takes up to a queue of CQEs, whatever
    /// the adapter finished, and most posts read none. An error CQE is
    /// found there too, so a failed QP's posts fail with -EIO at the
    /// latest a queue later (the adapter flushes those in between, as a
    /// verbs QP the hardware moved to ERR).
    #[inline(always)]
    fn make_room(&self, hca: &Hca, state: &mut State, index: usize) -> Result {
        match &state.qps[index] {
            Some(q) if !q.failed && q.head.wrapping_sub(q.tail) < SQ_ENTRIES => Ok(()),
            _ => self.reap_for_room(hca, state, index),
        }
    }

    #[inline(never)]
    fn reap_for_room(&self, hca: &Hca, state: &mut State, index: usize) -> Result {
        // Slots in use; a QP in error never frees one again: -EIO at once,
        // not -EAGAIN after the wait.
        let in_use = |s: &State| match &s.qps[index] {
            Some(q) if q.failed => Err(EIO),
            Some(q) => Ok(q.head.wrapping_sub(q.tail)),
            None => Err(ENOENT),
        };
        // `make_room()` sends only a full queue, a failed or a missing QP
        // here: the last two fail before any reap.
        in_use(state)?;
        self.reap(hca, state)?;
        if in_use(state)? < SQ_ENTRIES {
            return Ok(());
        }
        // Polls DMA memory, sleeping in between (outside the RCU section).
        let waited = read_poll_timeout(
            || {
                self.reap(hca, state)?;
                in_use(state)
            },
            |n| *n < SQ_ENTRIES,
            Delta::from_micros(20),
            Delta::from_micros(SQ_FULL_WAIT_US),
        );
        hca.stats.sq_full(waited.is_err());
        match waited {
            Err(e) if e == ETIMEDOUT => Err(EAGAIN),
            Err(e) => Err(e),
            Ok(_) => Ok(()),
        }
    }

    /// REG_MR: pins `[addr, addr + len)` of the calling process, maps it
    /// and registers it with the adapter as a region of this context.
    fn reg_mr(&self, b: &mut Bundle<'_>) -> Result {
        let addr = b.inline_u64(abi::ATTR_MR_ADDR)?.ok_or(EINVAL)?;
        let len = b.inline_u64(abi::ATTR_MR_LENGTH)?.ok_or(EINVAL)?;
        let access = b.inline_u32(abi::ATTR_MR_ACCESS)?.unwrap_or(0);
        let out = b.output(abi::ATTR_MR_INFO).ok_or(EINVAL)?;
        b.check_unused()?;
        let perm = region::perm(access).ok_or(EINVAL)?;
        if len > MAX_MR_SIZE {
            return Err(EINVAL);
        }
        let pages = region::pages_spanned(addr, len).ok_or(EINVAL)? as u32;
        let mut state = self.state.lock();
        if state.mrs.is_full() || state.mrs.pages + pages > MAX_CONTEXT_PAGES {
            return Err(ENOSPC);
        }
        let first_page = addr & !(region::PAGE_SIZE - 1);
        let writable = access & abi::ACCESS_LOCAL_WRITE != 0;
        let pinned = Pinned::pin(first_page, pages as usize, writable)?;
        let cmd = &self.hca().cmd;
        let key = self
            .adapter
            .mrs
            .lock()
            .register(cmd, pinned, self.uar_index, addr, len, perm)?;
        let info = abi::MrInfo {
            mr_handle: key,
            lkey: key,
            rkey: key,
            reserved: 0,
        };
        if let Err(e) = b.write(out, &info) {
            let pinned = self.adapter.mrs.lock().deregister(cmd, self.uar_index, key);
            drop(pinned);
            return Err(e);
        }
        state.mrs.push(CtxMr {
            key,
            start: addr,
            len,
            pages,
            remote_write: region::remote_writable(perm),
        });
        Ok(())
    }

    /// DEREG_MR: takes the region out of the adapter and unpins it. Refused
    /// while a send of this context is outstanding: the adapter may still
    /// gather from it.
    fn dereg_mr(&self, b: &mut Bundle<'_>) -> Result {
        let handle = b.inline_u32(abi::ATTR_MR_HANDLE)?.ok_or(EINVAL)?;
        b.check_unused()?;
        let hca = self.hca();
        let mut guard = self.state.lock();
        let state = &mut *guard;
        if state.mrs.find(handle).is_none() {
            return Err(ENOENT);
        }
        self.reap(hca, state)?;
        // A QP in ERR touches no memory again: its WQEs are flushed.
        if state
            .qps
            .iter()
            .flatten()
            .any(|q| q.head != q.tail && !q.failed)
        {
            return Err(EBUSY);
        }
        let pinned = self
            .adapter
            .mrs
            .lock()
            .deregister(&hca.cmd, self.uar_index, handle)?;
        state.mrs.remove(handle);
        drop(pinned);
        Ok(())
    }

    /// Counts a refused post under its reason; returns `err`.
    #[cold]
    fn reject(&self, why: Reject, err: Error) -> Error {
        self.stats.reject(why);
        err
    }

    fn post_send(&self, b: &mut Bundle<'_>) -> Result {
        let handle = b.inline_u32(abi::ATTR_QP_HANDLE)?.ok_or(EINVAL)?;
        let flags = b.inline_u32(abi::ATTR_POST_FLAGS)?.unwrap_or(0);
        // The WQE by pointer, or staged in the QP's WQE page.
        let (user_wqe, len) = match (b.input_ptr(abi::ATTR_WQE), b.inline_u32(abi::ATTR_WQE_LEN)?) {
            (Some(w), None) => {
                let r = w.reader();
                let len = r.len();
                (Some(r), len)
            }
            (None, Some(n)) => (None, n as usize),
            _ => return Err(EINVAL),
        };
        let payload = b.input_ptr(abi::ATTR_PAYLOAD).map(|p| p.reader());
        let out = b.output(abi::ATTR_POST_RESULT);
        b.check_unused()?;
        if flags & !abi::POST_F_ALL != 0 || flags == abi::POST_F_ALL {
            return Err(EINVAL);
        }
        if len == 0 || len > wqe::MAX_WQE_LEN || (user_wqe.is_none() && len % 16 != 0) {
            return Err(self.reject(Reject::Length, EINVAL));
        }
        if payload
            .as_ref()
            .is_some_and(|p| p.is_empty() || p.len() > abi::MAX_PAYLOAD)
        {
            return Err(self.reject(Reject::Length, EINVAL));
        }

        let mut guard = self.state.lock();
        let state = &mut *guard;
        let qp_index = self
            .find_qp(state, handle)
            .map_err(|e| self.reject(Reject::Qp, e))?;
        if self.user_posted() {
            // User space owns the send queues of this context's QPs.
            return Err(self.reject(Reject::Qp, EINVAL));
        }
        match user_wqe {
            Some(mut w) => w
                .read_slice(&mut state.wqe.0[..len])
                .map_err(|e| self.reject(Reject::Fault, e))?,
            None => self.user_area(state)?.read_qwords(
                qp_index * QP_AREA_BYTES + umem::WQE_OFFSET,
                &mut state.wqe.0[..len],
            )?,
        }
        let State { wqe, mrs, .. } = &mut *state;
        let buf = &mut wqe.0;
        let mut info =
            wqe::validate(&buf[..len], wqe::MAX_WQE_LEN).map_err(|r| self.reject(r, EINVAL))?;
        // Every gather names one of this context's regions and stays inside
        // it. The reserved lkey, which makes an address a DMA address (the
        // kernel's receive and send buffers), names none of them.
        if info.gather_segs != 0 {
            region::check_gathers(&buf[..len], &info, |k| {
                mrs.find(k).map(|m| (m.start, m.len))
            })
            .map_err(|r| self.reject(r, EACCES))?;
        }
        let hca = self.hca();
        let lkey = hca.dev_cap.reserved_lkey;

        self.scan_recv(state, qp_index)?;
        self.make_room(hca, state, qp_index)?;
        let State {
            qps,
            bf_half,
            wqe,
            payload: kbuf,
            mrs,
            ..
        } = state;
        let buf = &mut wqe.0;
        let Some(qp) = qps[qp_index].as_mut() else {
            return Err(ENOENT);
        };
        let head = qp.head;
        let send_buf =
            qp.slot * SEND_BUFS_BYTES + (head & (SQ_ENTRIES - 1)) as usize * abi::MAX_PAYLOAD;
        let mut len = len;
        let payload_len = match payload {
            Some(mut p) => {
                // The message into the kernel's buffer of this send-queue
                // slot (free: its last WQE completed), named by a data
                // segment the kernel appends.
                let n = p.len();
                p.read_slice(&mut kbuf[..n])
                    .map_err(|e| self.reject(Reject::Fault, e))?;
                let dma = self.hw()?.send_pool.dma_handle() + send_buf as u64;
                len = wqe::append_kernel_gather(buf, len, &info, (dma, lkey, n as u32))
                    .map_err(|r| self.reject(r, EINVAL))?;
                info = wqe::validate(&buf[..len], wqe::MAX_WQE_LEN)
                    .map_err(|r| self.reject(r, EINVAL))?;
                n
            }
            None => 0,
        };
        // An RDMA write lands in a region of the peer's context that takes
        // remote writes, all of it. A peer in this context (a QP connected
        // to itself, say) is checked without the adapter's locks.
        if region::is_rdma_write(info.opcode) {
            let checked = if qp.peer_local {
                region::check_rdma(&buf[..len], &info, |rkey| {
                    mrs.find(rkey).map(|m| (m.start, m.len, m.remote_write))
                })
            } else {
                let peer = self.adapter.qps.lock().pd(qp.remote_qpn);
                region::check_rdma(&buf[..len], &info, |rkey| {
                    self.adapter.mrs.lock().remote(rkey, peer?)
                })
            };
            checked.map_err(|r| self.reject(r, EACCES))?;
        }
        let caps = &self.adapter.caps;
        let path = wqe::choose_path(&info, flags, caps.bf_buf_size())
            .map_err(|r| self.reject(r, EINVAL))?;
        qp::stamp_cq_update(&mut buf[..len])?;
        match path {
            wqe::Path::BlueFlame => wqe::stamp_blueflame(&mut buf[..len], qp.qpn, head, SQ_ENTRIES),
            wqe::Path::Doorbell => wqe::stamp_doorbell(&mut buf[..len], head, SQ_ENTRIES),
        }

        // Where the WQE goes and what the post reports, all decided and
        // checked before the device sees anything.
        let mut result = abi::PostResult {
            wqe_index: head & (SQ_ENTRIES - 1),
            ..Default::default()
        };
        let (offset, burst) = match path {
            wqe::Path::BlueFlame => {
                let burst = wqe::bf_burst_len(len);
                zero_qwords(&mut buf[len..burst]);
                let offset = (caps.bf_page_offset(self.uar_index) - caps.bf_area().0) as usize
                    + *bf_half as usize;
                result.path = abi::PATH_BLUEFLAME;
                result.bf_offset = caps.bf_area().0 + offset as u64;
                result.bytes_written = burst as u32;
                (offset, burst)
            }
            wqe::Path::Doorbell => {
                let doorbell = caps.doorbell_offset(self.uar_index) as usize;
                result.path = abi::PATH_DOORBELL;
                result.bf_offset = doorbell as u64;
                result.bytes_written = 4;
                (doorbell, 4)
            }
        };
        // The offsets against the mapped BAR: nothing fails after them.
        let check = |hw: &Hw| match path {
            wqe::Path::BlueFlame => Writer::check(hw.bar2.bf(), offset, burst),
            wqe::Path::Doorbell => hw.bar2.uar().io_addr::<u32>(offset).map(|_| ()),
        };
        // Copying the result out is the one step that could fail after the
        // device saw the WQE: it goes first, so a failed call posted nothing.
        if let Some(i) = out {
            {
                let hw = self.hw()?;
                check(&hw)?;
                if path == wqe::Path::BlueFlame {
                    result.store_blocks =
                        self.adapter
                            .writer
                            .blocks(hw.bar2.bf(), offset, &buf[..burst]);
                }
            }
            b.write(i, &result)?;
        }

        // One RCU read-side section for the hardware and the posting gate.
        let rcu = kernel::sync::rcu::read_lock();
        let hw = self.adapter.hw.try_access_with_guard(&rcu).ok_or(ENODEV)?;
        check(hw)?;
        hca.posting.try_access_with_guard(&rcu).ok_or(ENODEV)?;
        // From here on nothing fails: the offsets were checked above.
        if payload_len != 0 {
            write_send_buf(hw, send_buf, &kbuf[..payload_len]);
        }
        write_sq_slot(hw, qp, &buf[..len]);
        match path {
            wqe::Path::BlueFlame => {
                let written = self
                    .adapter
                    .writer
                    .write(hw.bar2.bf(), offset, &buf[..burst]);
                *bf_half = layout::next_bf_half(*bf_half, caps.bf_buf_size());
                match written {
                    Ok(blocks) => self.stats.blueflame(burst, blocks),
                    // A store block failed (s390: PCISTB status) after the
                    // WQE went into its send-queue slot, owned by the
                    // adapter: past the commit point. Ring the doorbell for
                    // it, as for a WQE that does not fit; the adapter
                    // executes a WQE once, whichever way it learns of it.
                    Err(_) => {
                        let doorbell = caps.doorbell_offset(self.uar_index) as usize;
                        hw.bar2.uar().try_write32(
                            u32::from_le_bytes(wqe::doorbell_bytes(qp.qpn)),
                            doorbell,
                        )?;
                        self.stats.doorbell(len);
                    }
                }
            }
            wqe::Path::Doorbell => {
                // writel() orders the send-queue stores above before the doorbell.
                hw.bar2
                    .uar()
                    .try_write32(u32::from_le_bytes(wqe::doorbell_bytes(qp.qpn)), offset)?;
                self.stats.doorbell(len);
            }
        }
        qp.head = head.wrapping_add(1);
        Ok(())
    }
}

/// Zeroes `b` (a multiple of 8 bytes long, 8-aligned: the BlueFlame
/// padding) with 8-byte stores; volatile, so they do not become a `memset`
/// (one instruction per byte under `-icount`).
fn zero_qwords(b: &mut [u8]) {
    let p = b.as_mut_ptr().cast::<u64>();
    for i in 0..b.len() / 8 {
        // SAFETY: `p + i` lies inside `b`; `b` starts at a multiple of 16 in
        // the 64-byte aligned WQE buffer.
        unsafe { core::ptr::write_volatile(p.add(i), 0) };
    }
}

/// Copies a message into the kernel send buffer at `off` in the pool.
fn write_send_buf(hw: &Hw, off: usize, msg: &[u8]) {
    if off + abi::MAX_PAYLOAD > hw.send_pool.size() || msg.len() > abi::MAX_PAYLOAD {
        return;
    }
    // SAFETY: Inside the pool (checked above); the buffer belongs to a
    // send-queue slot of this context's QP (its lock is held) whose last
    // WQE completed, so the device does not read it until the WQE naming
    // it is posted after this copy.
    unsafe {
        core::ptr::copy_nonoverlapping(
            msg.as_ptr(),
            hw.send_pool.as_mut_ptr().cast::<u8>().add(off),
            msg.len(),
        )
    };
}

/// Copies a stamped WQE (8-byte aligned: the WQE buffer) into its
/// send-queue slot, the control segment's first word last, so the adapter
/// never sees a valid owner bit on a partial WQE (`copy.rs`).
fn write_sq_slot(hw: &Hw, qp: &Qp, wqe_bytes: &[u8]) {
    let base = qp.slot * QP_BUF_BYTES + (qp.head & (SQ_ENTRIES - 1)) as usize * SQ_STRIDE;
    let len = wqe_bytes.len();
    if len < 16 || len % 8 != 0 || len > SQ_STRIDE || base + SQ_STRIDE > hw.qp_pool.size() {
        return;
    }
    let src = wqe_bytes.as_ptr();
    if !(src as usize).is_multiple_of(8) {
        return;
    }
    // SAFETY: `base + SQ_STRIDE` lies inside the pool and `16 <= len <=
    // SQ_STRIDE`, a multiple of 8 (checked above); the slot is 1 KiB
    // aligned in the page-aligned pool. It belongs to this QP, whose
    // context lock the caller holds, and is free (its last WQE completed):
    // the device ignores it until the first word gives it the pass's owner
    // bit. `src` has `len` bytes, 8-byte aligned (checked).
    unsafe {
        let dst = hw.qp_pool.as_mut_ptr().cast::<u8>().add(base);
        crate::copy::qwords(dst.add(8).cast(), src.add(8).cast(), len / 8 - 1);
        let v = src.add(4).cast::<u32>().read_unaligned();
        core::ptr::write_volatile(dst.add(4).cast::<u32>(), v);
        crate::writer::wmb();
        let v = src.cast::<u32>().read_unaligned();
        core::ptr::write_volatile(dst.cast::<u32>(), v);
    }
}
