// SPDX-License-Identifier: GPL-2.0

//! RDMA providers: a safe layer over the RDMA core (`include/rdma/ib_verbs.h`,
//! `drivers/infiniband/core/`), written as `rust/kernel/rdma` would be.
//!
//! A provider implements [`Driver`], a `#[vtable]` trait of the verbs it
//! offers (as [`kernel::miscdevice::MiscDevice`] is of the file operations),
//! and registers an ib_device with [`Registration`]. The core allocates the
//! objects user space creates (ucontexts, PDs, CQs, QPs) with room for the
//! provider's data behind the core's struct; this layer constructs that data
//! in place from the provider's initializer and drops it in place when the
//! core destroys the object ([`object`]: the safety argument, once). What
//! user space passes in and gets back (`udata`) is read and written as typed
//! values ([`udata::Udata`]), user memory is pinned and mapped by the core
//! ([`umem::Umem`], its DMA blocks an iterator), and the rest of the verbs'
//! structures are plain Rust values ([`attr`]). Every `unsafe` of the
//! provider is here; the provider's code has none.
//!
//! What this layer leaves out, because the provider needs none of it: kernel
//! verbs (post, poll, MADs: the ib_device serves user space only), SRQs,
//! address handles, memory windows, flow steering, counters, netdevs.

pub(crate) mod attr;
pub(crate) mod device;
pub(crate) mod event;
pub(crate) mod method;
pub(crate) mod object;
mod ops;
pub(crate) mod udata;
pub(crate) mod umem;
pub(crate) mod vma;

use kernel::prelude::*;

use attr::{CqInit, DeviceAttr, PortAttr, PortImmutable, QpAttr, QpCap, QpInit};
use object::Device;
use object::{Pd, Qp, UContext};
use udata::Udata;
use vma::Vma;

pub(crate) use device::Registration;

/// What the core reads back from a CQ once the provider made it: its size.
pub(crate) trait CqData {
    /// The CQ's capacity as verbs report it (`ib_cq.cqe`).
    fn cqe(&self) -> u32;
    /// The number the adapter's events name it by.
    fn number(&self) -> u32;
}

/// What the core reads back from a QP: its number.
pub(crate) trait QpData {
    /// `ib_qp.qp_num`.
    fn qp_num(&self) -> u32;
}

/// What the core reads back from a memory region: its keys.
pub(crate) trait MrData {
    fn lkey(&self) -> u32;
    fn rkey(&self) -> u32;
}

/// An RDMA provider: the verbs of its ib_device.
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
    type Mr: Send + Sync + MrData;

    /// `enum rdma_driver_id`: what libibverbs binds a provider by.
    const DRIVER_ID: u32;
    /// The user ABI version of its udata (`uverbs_abi_ver`).
    const ABI_VERSION: u32;

    /// `query_device`; `udata` is the extended query's, if user space asked.
    fn query_device(dev: &Device<Self>, udata: Option<&mut Udata<'_>>) -> Result<DeviceAttr>;

    /// `query_port` of port `port` (from 1).
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr>;

    /// `get_port_immutable`: the port's protocol and table sizes.
    fn port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;

    /// GID `index` of port `port`.
    fn query_gid(dev: &Device<Self>, port: u32, index: u32) -> Result<[u8; 16]>;

    /// P_Key `index` of port `port`.
    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16>;

    /// The firmware version as `(major, minor, subminor)`.
    fn fw_version(dev: &Device<Self>) -> (u32, u32, u32);

    /// A new verbs context for a process.
    fn alloc_ucontext(
        dev: &Device<Self>,
        udata: &mut Udata<'_>,
    ) -> impl PinInit<Self::UContext, Error>;

    /// `mmap()` on the verbs context's file.
    fn mmap(ctx: &UContext<Self>, vma: &Vma<'_>) -> Result;

    /// The device is going away while the context is still open: the core
    /// has destroyed its objects and zaps its mappings; anything else the
    /// context reaches goes here.
    fn disassociate_ucontext(_ctx: &UContext<Self>) {}

    fn alloc_pd(ctx: &UContext<Self>, udata: &mut Udata<'_>) -> impl PinInit<Self::Pd, Error>;

    /// A CQ of a user context (`create_user_cq`).
    fn create_cq(
        ctx: &UContext<Self>,
        init: &CqInit,
        udata: &mut Udata<'_>,
    ) -> impl PinInit<Self::Cq, Error>;

    /// A QP of a user context; `cap` comes in as asked and goes back as
    /// made.
    fn create_qp(
        pd: &Pd<Self>,
        init: &QpInit<'_, Self>,
        cap: &mut QpCap,
        udata: &mut Udata<'_>,
    ) -> impl PinInit<Self::Qp, Error>;

    /// `modify_qp`: a state transition with its attributes.
    fn modify_qp(qp: &Qp<Self>, attr: &QpAttr, udata: &mut Udata<'_>) -> Result;

    /// A region of user memory `[start, start + len)`, addressed by the
    /// adapter as `iova`.
    fn reg_user_mr(
        pd: &Pd<Self>,
        range: (u64, u64, u64),
        access: u32,
        udata: &mut Udata<'_>,
    ) -> impl PinInit<Self::Mr, Error>;
}
