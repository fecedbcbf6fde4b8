// SPDX-License-Identifier: GPL-2.0

//! The adapter: one bound mlx4 function, shared by the RDMA provider, the
//! kernel ping's kernel contexts and the driver. Its state is private;
//! what a caller may do with it is a method here: take a UAR, a QP buffer
//! or a receive area, register a memory region, look up a peer's region,
//! reach the hardware while it is bound.
//! How it is brought up and taken down: `adapter/bring_up.rs`. What the
//! RDMA provider does with it (PDs, MTT ranges, CQs and QPs in user
//! memory, the device's facts, its events): `adapter/provider.rs`,
//! `adapter/device.rs`, `adapter/events.rs`.

use kernel::{
    debugfs::Dir,
    devres::Devres,
    dma::Coherent,
    prelude::*,
    revocable::RevocableGuard,
    sync::{atomic::Atomic, rcu, Arc, CondVar, Mutex},
};

use crate::{
    hw::bf::{bar2::Bar2, writer::Writer},
    hw::firmware::Firmware,
    hw::memory::{
        mr::{MappedRegion, MrTable, Rereg, ReregError},
        recv_area::{Area, AREAS},
    },
    hw::queues::kernel_mem::QueueMem,
    layout::Caps,
    region::Mpt,
    stats::DeviceStats,
    uar_alloc::UarAllocator,
};

mod bring_up;
mod device;
mod events;
mod number_pool;
mod post;
mod provider;
mod qp_table;
mod srq;

pub(crate) use bring_up::{new_adapter, show_stats, Running};
pub(crate) use events::EventDispatch;
use events::EventRouter;
use number_pool::NumberRange;
pub(crate) use post::{Placement, Posted};
use provider::QpnPool;
pub(crate) use provider::{errno, CqHandle, CqSpec, MttRange, QpHandle, QpSpec};
use qp_table::QpTable;
pub(crate) use srq::{SrqHandle, SrqSpec};

/// The hardware resources that go away when the device is unbound.
pub(crate) struct Resources {
    pub(crate) bar2: Bar2,
    /// `KERNEL_QPS` QP buffers of `QP_BUF_BYTES`.
    pub(crate) qp_pool: Coherent<[u8]>,
    /// The EQs' and CQs' memory.
    pub(crate) queues: QueueMem,
    /// `KPING_ENDS` times `KPING_END_BYTES`: the kernel ping's buffers.
    pub(crate) kping_pool: Coherent<[u8]>,
    /// `AREAS` receive areas of the kernel contexts (`hw/memory/recv_area.rs`).
    pub(crate) recv_areas: Coherent<[u8]>,
}

impl Resources {
    /// Receive area `index`, which the caller's kernel context owns.
    pub(crate) fn recv_area(&self, index: usize) -> Result<Area<'_>> {
        Area::of(&self.recv_areas, index)
    }
}

/// One bound adapter, shared by the provider and the kernel ping's kernel contexts.
#[pin_data]
pub(crate) struct Adapter {
    caps: Caps,
    writer: Writer,
    resources: Devres<Resources>,
    #[pin]
    uars: Mutex<UarAllocator>,
    #[pin]
    qps: Mutex<QpTable>,
    /// Receive areas (`Resources::recv_areas`) in use (bit = area). An
    /// area the adapter may still write stays taken until unbind.
    #[pin]
    areas_used: Mutex<u64>,
    /// Memory regions of the kernel contexts and the provider (`hw/memory/mr.rs`).
    #[pin]
    mrs: Mutex<MrTable>,
    /// Woken by completion events and by unbind: the kernel ping's waiters
    /// look at their CQs.
    #[pin]
    events: CondVar,
    #[pin]
    stats: DeviceStats,
    /// `/sys/kernel/debug/mlx4_bf<N>/`: the device's and each kernel context's counters.
    debugfs: Dir,
    /// The command interface, the EQs and the posting gate.
    firmware: Pin<KBox<Firmware>>,
    /// The RDMA provider's events, from the EQs' handlers to its dispatcher.
    router: Arc<EventRouter>,
    /// The RDMA provider's protection domains.
    #[pin]
    pds: Mutex<NumberRange>,
    /// The RDMA provider's QP numbers.
    #[pin]
    user_qpns: Mutex<QpnPool>,
    /// The RDMA provider's SRQ numbers.
    #[pin]
    srqns: Mutex<NumberRange>,
    /// Port 1's GID and P_Key table sizes (`gids << 16 | pkeys`), once
    /// QUERY_PORT said them; 0 before.
    port_tables: Atomic<u32>,
}

impl Adapter {
    /// BAR2's geometry: UARs and BlueFlame registers.
    pub(crate) fn caps(&self) -> &Caps {
        &self.caps
    }

    pub(crate) fn writer(&self) -> Writer {
        self.writer
    }

    pub(crate) fn firmware(&self) -> &Firmware {
        &self.firmware
    }

    pub(crate) fn stats(&self) -> &DeviceStats {
        &self.stats
    }

    pub(crate) fn debugfs(&self) -> &Dir {
        &self.debugfs
    }

    /// Woken by completion events and by unbind.
    pub(crate) fn events(&self) -> &CondVar {
        &self.events
    }

    /// The hardware, or `-ENODEV` once the adapter was unbound. The guard
    /// is an RCU read-side section: nothing may sleep while it is held.
    pub(crate) fn resources(&self) -> Result<RevocableGuard<'_, Resources>> {
        self.resources.try_access().ok_or(ENODEV)
    }

    /// The hardware inside the caller's RCU read-side section.
    pub(crate) fn resources_in<'a>(&'a self, rcu: &'a rcu::Guard) -> Result<&'a Resources> {
        self.resources.try_access_with_guard(rcu).ok_or(ENODEV)
    }

    /// `-ENODEV` once unbind has stopped posts to the device: a post or a
    /// wait for the device checks this.
    pub(crate) fn posting(&self) -> Result {
        self.firmware.posting.try_access().map(drop).ok_or(ENODEV)
    }

    /// [`Adapter::posting`] inside the caller's RCU read-side section,
    /// which a post holds from this check until its last write.
    pub(crate) fn posting_in(&self, rcu: &rcu::Guard) -> Result {
        self.firmware
            .posting
            .try_access_with_guard(rcu)
            .map(drop)
            .ok_or(ENODEV)
    }

    /// A UAR for a new verbs or kernel context; `-EBUSY` when all are taken.
    pub(crate) fn open_uar(&self) -> Result<u32> {
        self.uars.lock().alloc().ok_or_else(|| {
            kernel::pr_warn_once!(
                "all {} UARs in use: a new context fails with -EBUSY\n",
                self.caps.num_uars - 1
            );
            EBUSY
        })
    }

    pub(crate) fn close_uar(&self, uar_index: u32) {
        self.uars.lock().free(uar_index);
    }

    /// Verbs and kernel contexts open now (each holds one UAR).
    pub(crate) fn contexts(&self) -> u32 {
        self.uars.lock().in_use()
    }

    /// A free QP buffer and a new QPN for a QP of protection domain `pd`.
    pub(crate) fn alloc_qp(&self, pd: u32) -> Option<(usize, u32)> {
        self.qps.lock().alloc(pd)
    }

    /// Gives QP buffer `slot` back; its QP is out of the device.
    pub(crate) fn free_qp(&self, slot: usize) {
        self.qps.lock().free(slot);
    }

    /// `(start, len, region::perm() bits)` of the region `rkey` names, if it
    /// is one of the kernel context QP `qpn` belongs to: where an RDMA to that QP
    /// may reach.
    pub(crate) fn remote_region(&self, qpn: u32, rkey: u32) -> Option<(u64, u64, u32)> {
        let pd = self.qps.lock().pd(qpn)?;
        self.mrs.lock().remote(rkey, pd)
    }

    /// `(start, len, region::perm() bits)` of the region `key` names, if it
    /// belongs to protection domain `pd`: where a data segment of a QP of
    /// that PD may point.
    pub(crate) fn region(&self, key: u32, pd: u32) -> Option<(u64, u64, u32)> {
        self.mrs.lock().remote(key, pd)
    }

    /// A free receive area for a kernel context's QPs, cleared whole (it
    /// may hold the bytes of the context that had it before).
    pub(crate) fn take_area(&self) -> Result<usize> {
        let mut used = self.areas_used.lock();
        let area = (!*used).trailing_zeros() as usize;
        if area >= AREAS {
            kernel::pr_warn_once!(
                "more than {} kernel contexts with QPs: a new one fails with -ENOSPC\n",
                AREAS
            );
            return Err(ENOSPC);
        }
        self.resources()?.recv_area(area)?.clear_all()?;
        *used |= 1 << area;
        Ok(area)
    }

    /// Gives area `area` back; nothing in the device writes it any more.
    pub(crate) fn release_area(&self, area: usize) {
        *self.areas_used.lock() &= !(1 << area);
    }

    /// Registers memory its owner mapped for DMA (the kernel ping's
    /// buffers, the RDMA provider's `ib_umem` pages), `r`, as a region of
    /// protection domain `pd`; returns its MPT. The pages must stay mapped
    /// until [`Adapter::deregister_mr`] returned `Ok`.
    pub(crate) fn register_mapped_mr(&self, pd: u32, r: &MappedRegion<'_>) -> Result<Mpt> {
        let fw = &*self.firmware;
        self.mrs.lock().register_mapped(
            (&fw.cmd, |first, pages: &[u64]| fw.write_mtt(first, pages)),
            pd,
            r,
        )
    }

    /// Re-registers region `key` of protection domain `pd` in place
    /// ([`MrTable::reregister`]).
    pub(crate) fn reregister_mr(
        &self,
        pd: u32,
        key: u32,
        change: &Rereg<'_>,
    ) -> Result<Mpt, ReregError> {
        let fw = &*self.firmware;
        self.mrs.lock().reregister(
            (&fw.cmd, |first, pages: &[u64]| fw.write_mtt(first, pages)),
            (pd, key),
            change,
        )
    }

    /// Takes region `key` of protection domain `pd` out of the device;
    /// its owner may unmap its pages once this returned `Ok`.
    pub(crate) fn deregister_mr(&self, pd: u32, key: u32) -> Result {
        self.mrs.lock().deregister(&self.firmware.cmd, pd, key)
    }
}
