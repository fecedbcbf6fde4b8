// SPDX-License-Identifier: GPL-2.0

//! RDMA providers: a safe layer over the RDMA core (`include/rdma/ib_verbs.h`,
//! `drivers/infiniband/core/`), written as `rust/kernel/rdma` would be.
//!
//! A provider implements [`Driver`], a `#[vtable]` trait of the verbs it
//! offers (as `kernel::drm::Driver` is of a DRM driver's; the ops table is
//! a constant with only the ops the provider has), makes
//! its device as DRM does ([`device`]: allocated and initialized unregistered,
//! then registered; unregistered and its data dropped in the core's
//! `dealloc_driver`; the rest released when the provider says its hardware
//! is quiet), and may add uverbs methods of its own ([`method`]).
//!
//! # Safety model
//!
//! Every `unsafe` of a provider is in this layer; the provider's code has
//! none, and no safe function here can cause undefined behaviour whatever
//! its caller passes. The arguments, once:
//! - Objects the core allocates for user space (contexts, PDs, CQs, QPs,
//!   SRQs)
//!   are the core's struct followed by the provider's data, constructed in
//!   place by the create op before the core publishes the object and
//!   dropped in place by the destroy op ([`object::InCore`]). A reference to
//!   one is handed to the provider only for the duration of an op on it (or
//!   on an object that keeps it alive), never past its destroy op.
//! - The device's data lives from its initialization until `dealloc_driver`;
//!   references to the device are handed out only within that span (ops
//!   run only while the device is registered).
//! - What the core passes as untyped memory is read as typed values:
//!   udata through the core's copy functions ([`udata`]), a method's
//!   attributes through tokens whose kinds were checked against the
//!   method's C description before the device was registered ([`method`]).
//! - User memory is pinned through [`umem::Umem`], which the device's
//!   teardown releases if its handle is still held: none outlives the
//!   device, none is lost.
//! - `mmap()` maps only pages of the provider's memory BARs, at offsets
//!   checked against the BAR ([`mmap`]).
//! - Events reach a CQ, QP or SRQ by number, holding a reference the destroy op
//!   waits for ([`event`]).
//! - Hardware counters are described by a `'static` list, which outlives
//!   the core's statistics that point to it, and filled through a slice of
//!   exactly that many values ([`counters`]).
//! - sysfs' `show` functions are not generic: they read only the layer's
//!   part of a device, which is at the same offsets in every `Device<T>`
//!   (asserted), written before registration and never changed
//!   ([`sysfs`]).
//!
//! What this layer leaves out, because the provider needs none of it: kernel
//! verbs (post, poll, MAD agents: the ib_device serves user space only), XRC,
//! address handles, memory windows, flow steering, port counters and
//! counter binding, netdevs.

pub(crate) mod attr;
pub(crate) mod counters;
pub(crate) mod device;
pub(crate) mod event;
pub(crate) mod mad;
pub(crate) mod method;
pub(crate) mod mmap;
pub(crate) mod object;
mod ops;
pub(crate) mod qp_query;
pub(crate) mod sysfs;
pub(crate) mod udata;
pub(crate) mod umem;

use kernel::prelude::*;

use attr::{CqInit, DeviceAttr, MrChange, PortAttr, PortImmutable, QpAttr, QpCap, QpInit, SrqAttr};
use counters::HwCounter;
use mad::{MadIn, MadResult, MAD_SIZE};
use mmap::MmapTable;
use object::Device;
use object::{Cq, Mr, Pd, Qp, Srq, UContext};
use qp_query::QpQuery;
use udata::Udata;

pub(crate) use device::Registration;

/// What the core reads back from a CQ once the provider made it.
pub(crate) trait CqData {
    /// The CQ's capacity as verbs report it (`ib_cq.cqe`).
    fn cqe(&self) -> u32;
    /// The number the adapter's events name it by.
    fn number(&self) -> u32;
}

/// What the core reads back from a QP: its number, which events name it by.
pub(crate) trait QpData {
    /// `ib_qp.qp_num`.
    fn qp_num(&self) -> u32;
}

/// What the layer reads back from an SRQ: the number its events name it by.
pub(crate) trait SrqData {
    fn number(&self) -> u32;
}

/// What the core reads back from a memory region: its keys.
pub(crate) trait MrData {
    fn lkey(&self) -> u32;
    fn rkey(&self) -> u32;
}

/// `-EOPNOTSUPP`, the answer of a verb the provider does not offer.
fn not_supported() -> Error {
    Error::from_errno(-(kernel::bindings::EOPNOTSUPP as i32))
}

/// An RDMA provider: the verbs of its ib_device. The ops a provider does
/// not implement are not in its ops table: the core refuses them (or, for
/// `disassociate_ucontext`, keeps the device until every verbs context is
/// closed).
///
/// Objects are dropped when the core destroys them (and, at unregistration
/// or disassociation, for every object user space still holds): their
/// `Drop` takes them out of the hardware. The core destroys a ucontext's
/// objects before the ucontext, and every object before the device.
#[vtable]
pub(crate) trait Driver: Sized + 'static {
    /// The device's own data, in the ib_device's allocation.
    type Device: Send + Sync;
    /// A verbs context: one open of the uverbs device by a process.
    type UContext: Send + Sync;
    type Pd: Send + Sync;
    type Cq: Send + Sync + CqData;
    type Qp: Send + Sync + QpData;
    type Srq: Send + Sync + SrqData;
    type Mr: Send + Sync + MrData;

    /// `enum rdma_driver_id`: what libibverbs binds a provider by.
    const DRIVER_ID: u32;
    /// The user ABI version of its udata (`uverbs_abi_ver`).
    const ABI_VERSION: u32;

    /// `query_device`; `udata` is the extended query's, if user space asked.
    fn query_device(dev: &Device<Self>, udata: Option<&mut Udata<'_, Self>>) -> Result<DeviceAttr>;

    /// `query_port` of port `port` (from 1).
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr>;

    /// `get_port_immutable`: the port's protocol and table sizes.
    fn port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;

    /// GID `index` of port `port`.
    fn query_gid(dev: &Device<Self>, port: u32, index: u32) -> Result<[u8; 16]>;

    /// P_Key `index` of port `port`.
    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16>;

    /// The firmware version as `(major, minor, subminor)`.
    fn fw_version(_dev: &Device<Self>) -> (u32, u32, u32) {
        (0, 0, 0)
    }

    /// `process_mad`: a MAD the core hands port `port` (from 1) of the
    /// device, `input`; the answer goes into `out` with
    /// [`MadResult::Reply`].
    fn process_mad(
        _dev: &Device<Self>,
        _port: u32,
        _how: &MadIn,
        _input: &[u8; MAD_SIZE],
        _out: &mut [u8; MAD_SIZE],
    ) -> MadResult {
        MadResult::Failure
    }

    /// The device's hardware counters, in the order
    /// [`Driver::hw_counters`] fills them (sysfs `hw_counters/`).
    const HW_COUNTERS: &'static [HwCounter] = &[];

    /// The counters' values now: `values[i]` is `HW_COUNTERS[i]`'s.
    fn hw_counters(_dev: &Device<Self>, _values: &mut [u64]) -> Result {
        Err(not_supported())
    }

    /// A new verbs context for a process; the device pages its process
    /// may map go into `mmaps`.
    fn alloc_ucontext(
        dev: &Device<Self>,
        udata: &mut Udata<'_, Self>,
        mmaps: &mut MmapTable,
    ) -> impl PinInit<Self::UContext, Error>;

    /// The device is going away while the context is still open: the core
    /// has destroyed its objects and zaps its mappings; anything else the
    /// context reaches goes here. A provider that implements it lets the
    /// device be unregistered while processes hold it open (they get
    /// `IB_EVENT_DEVICE_FATAL`); one that does not, keeps unregistration
    /// waiting until they close it.
    fn disassociate_ucontext(_ctx: &UContext<Self>) {}

    fn alloc_pd(
        _ctx: &UContext<Self>,
        _udata: &mut Udata<'_, Self>,
    ) -> impl PinInit<Self::Pd, Error> {
        Err::<Self::Pd, _>(not_supported())
    }

    /// A CQ of a user context (`create_user_cq`).
    fn create_cq(
        _ctx: &UContext<Self>,
        _init: &CqInit,
        _udata: &mut Udata<'_, Self>,
    ) -> impl PinInit<Self::Cq, Error> {
        Err::<Self::Cq, _>(not_supported())
    }

    /// Resizes a user CQ to hold at least `entries` (`ib_uverbs_resize_cq`);
    /// the core then reports the data's [`CqData::cqe`]. The core calls it
    /// with the CQ's uobject held shared: for one CQ from several threads
    /// at once.
    fn resize_cq(_cq: &Cq<Self>, _entries: u32, _udata: &mut Udata<'_, Self>) -> Result {
        Err(not_supported())
    }

    /// A QP of a user context; `cap` comes in as asked and goes back as
    /// made.
    fn create_qp(
        _pd: &Pd<Self>,
        _init: &QpInit<'_, Self>,
        _cap: &mut QpCap,
        _udata: &mut Udata<'_, Self>,
    ) -> impl PinInit<Self::Qp, Error> {
        Err::<Self::Qp, _>(not_supported())
    }

    /// `modify_qp`: a state transition with its attributes.
    fn modify_qp(_qp: &Qp<Self>, _attr: &QpAttr, _udata: &mut Udata<'_, Self>) -> Result {
        Err(not_supported())
    }

    /// `query_qp`: the QP's attributes as the device has them (also what
    /// the core's QP dump for `rdma res show qp` asks).
    fn query_qp(_qp: &Qp<Self>) -> Result<QpQuery> {
        Err(not_supported())
    }

    /// A shared receive queue of a user context; `attr` comes in as asked
    /// and goes back as made.
    fn create_srq(
        _pd: &Pd<Self>,
        _attr: &mut SrqAttr,
        _udata: &mut Udata<'_, Self>,
    ) -> impl PinInit<Self::Srq, Error> {
        Err::<Self::Srq, _>(not_supported())
    }

    /// `modify_srq`: what `mask` (`attr::srq_mask`) names of `attr`.
    fn modify_srq(
        _srq: &Srq<Self>,
        _attr: &SrqAttr,
        _mask: u32,
        _udata: &mut Udata<'_, Self>,
    ) -> Result {
        Err(not_supported())
    }

    /// `query_srq`: its size and limit as the device has them.
    fn query_srq(_srq: &Srq<Self>) -> Result<SrqAttr> {
        Err(not_supported())
    }

    /// A region of user memory `[start, start + len)`, addressed by the
    /// adapter as `iova`.
    fn reg_user_mr(
        _pd: &Pd<Self>,
        _range: (u64, u64, u64),
        _access: u32,
        _udata: &mut Udata<'_, Self>,
    ) -> impl PinInit<Self::Mr, Error> {
        Err::<Self::Mr, _>(not_supported())
    }

    /// Changes a region in place, its keys kept (`ib_uverbs_rereg_mr()`):
    /// what `change` names, on `pd` (its own PD, or the new one of a PD
    /// change). The core holds the region's uobject exclusively for the
    /// call and `pd`'s shared; on success it records the new PD, address
    /// and length itself.
    fn rereg_user_mr(
        _mr: &Mr<Self>,
        _change: &MrChange,
        _pd: &Pd<Self>,
        _udata: &mut Udata<'_, Self>,
    ) -> Result {
        Err(not_supported())
    }
}
