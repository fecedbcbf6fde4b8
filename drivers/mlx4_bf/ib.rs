// SPDX-License-Identifier: GPL-2.0

//! The adapter as an RDMA provider: an ib_device with mainline mlx4_ib's
//! user ABI (`include/uapi/rdma/mlx4-abi.h`, ABI 4, `RDMA_DRIVER_MLX4`), so
//! that unmodified rdma-core (libmlx4) and perftest run over this driver.
//! It is written over the adapter and hardware layers: a verbs context owns
//! a UAR and its BlueFlame page, PDs, CQs and QPs live in user memory
//! described by MTT entries, and user space posts and polls by itself, as
//! with mlx4_ib, or posts through the QP_POST method (`ib/post.rs`).
//!
//! | file | verbs |
//! |---|---|
//! | `ib.rs` | the provider ([`Provider`]), registration, events |
//! | `ib/device.rs` | `query_device`, `query_port`, GIDs, P_Keys, the port's immutable data |
//! | `ib/ucontext.rs` | verbs contexts (a UAR each), `mmap`, PDs |
//! | `ib/cq.rs` | CQs in user memory |
//! | `ib/qp.rs` | RC QPs in user memory, their state machine |
//! | `ib/mr.rs` | memory regions of user memory |
//! | `ib/post.rs`, `ib/methods.c` | the QP_POST method: a BlueFlame post through the kernel |
//! | `ib/user_abi.rs` | mlx4_ib's udata, as typed values |
//!
//! The device is named `mlx4_bf<N>`, `N` the adapter's number (its debugfs
//! directory's too): beside mainline mlx4_ib's `mlx4_<N>` in one boot. It has no MAD agent: the port is InfiniBand without the
//! MAD, CM and SA capabilities (`RDMA_CORE_CAP_PROT_IB`), because the
//! provider offers no kernel verbs (QP0/QP1 would be kernel QPs), and
//! user space learns the LID from `query_port` (PortInfo through MAD_IFC)
//! and exchanges it out of band, as ibv_rc_pingpong and perftest do.

mod cq;
mod device;
mod doorbell;
mod mr;
mod post;
mod qp;
mod srq;
mod ucontext;
mod user_abi;

use kernel::{device::Bound, pci, prelude::*, sync::Arc};

use crate::{
    adapter::{Adapter, EventDispatch},
    eqe::{self, AsyncEvent},
    hw::bf::bar2::Bar2,
    rdma::{
        self,
        attr::{
            CqInit, DeviceAttr, MrChange, PortAttr, PortImmutable, QpAttr, QpCap, QpInit, SrqAttr,
        },
        counters::HwCounter,
        device::{DeviceInfo, NodeType, Retired, UnregisteredDevice},
        event::{Events, PortEvent, QpEvent, SrqEvent},
        mad::{MadIn, MadResult, MAD_SIZE},
        mmap::{IoRegion, MmapTable},
        object::{Cq, Device, Mr, Pd, Qp, Srq, UContext},
        qp_query::QpQuery,
        sysfs::{Identity, Text},
        udata::Udata,
    },
    stats,
};

/// The provider.
pub(crate) struct Provider;

/// The device's hardware counters: the posts' (`stats::NAMES`).
const HW_COUNTERS: [HwCounter; stats::NAMES.len()] = {
    let mut list = [HwCounter::new(c""); stats::NAMES.len()];
    let mut i = 0;
    while i < list.len() {
        list[i] = HwCounter::new(stats::NAMES[i]);
        i += 1;
    }
    list
};

// The errno of a refusal of the pure rules.
use crate::adapter::errno;

/// The device's data: the adapter it drives, and its BAR2, whose UAR and
/// BlueFlame pages verbs contexts map.
pub(crate) struct IbDevice {
    adapter: Arc<Adapter>,
    bar2: IoRegion,
}

#[vtable]
impl rdma::Driver for Provider {
    type Device = IbDevice;
    type UContext = ucontext::Context;
    type Pd = ucontext::ProtectionDomain;
    type Cq = cq::CompletionQueue;
    type Qp = qp::QueuePair;
    type Srq = srq::SharedReceiveQueue;
    type Mr = mr::MemoryRegion;

    const DRIVER_ID: u32 = kernel::bindings::rdma_driver_id_RDMA_DRIVER_MLX4;
    const ABI_VERSION: u32 = kernel::uapi::MLX4_IB_UVERBS_ABI_VERSION;

    fn query_device(
        dev: &Device<Self>,
        udata: Option<&mut Udata<'_, Provider>>,
    ) -> Result<DeviceAttr> {
        device::query_device(&dev.data().adapter, udata)
    }

    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr> {
        device::query_port(&dev.data().adapter, port)
    }

    fn port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable> {
        device::port_immutable(&dev.data().adapter, port)
    }

    fn query_gid(dev: &Device<Self>, port: u32, index: u32) -> Result<[u8; 16]> {
        device::query_gid(&dev.data().adapter, port, index)
    }

    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        device::query_pkey(&dev.data().adapter, port, index)
    }

    fn process_mad(
        dev: &Device<Self>,
        port: u32,
        how: &MadIn,
        input: &[u8; MAD_SIZE],
        out: &mut [u8; MAD_SIZE],
    ) -> MadResult {
        device::process_mad(&dev.data().adapter, port, how, input, out)
    }

    fn fw_version(dev: &Device<Self>) -> (u32, u32, u32) {
        let fw = &dev.data().adapter.firmware().fw;
        (fw.major.into(), fw.minor.into(), fw.subminor.into())
    }

    /// The post counters, as debugfs shows them (`stats::NAMES`).
    const HW_COUNTERS: &'static [HwCounter] = &HW_COUNTERS;

    fn hw_counters(dev: &Device<Self>, values: &mut [u64]) -> Result {
        let now = stats::values(&dev.data().adapter.stats().snapshot());
        for (value, count) in values.iter_mut().zip(now) {
            *value = count;
        }
        Ok(())
    }

    fn alloc_ucontext(
        dev: &Device<Self>,
        udata: &mut Udata<'_, Provider>,
        mmaps: &mut MmapTable,
    ) -> impl PinInit<Self::UContext, Error> {
        let d = dev.data();
        ucontext::Context::new(&d.adapter, &d.bar2, udata, mmaps)
    }

    /// Nothing of a verbs context outlives its objects and mappings, which the
    /// core destroys and zaps: the device may go while processes hold it
    /// open (they get `IB_EVENT_DEVICE_FATAL`, then `EIO`).
    fn disassociate_ucontext(_ctx: &UContext<Self>) {}

    fn alloc_pd(
        ctx: &UContext<Self>,
        udata: &mut Udata<'_, Provider>,
    ) -> impl PinInit<Self::Pd, Error> {
        ucontext::ProtectionDomain::new(ctx.data(), udata)
    }

    fn create_cq(
        ctx: &UContext<Self>,
        init: &CqInit,
        udata: &mut Udata<'_, Provider>,
    ) -> impl PinInit<Self::Cq, Error> {
        cq::CompletionQueue::new(ctx, init, udata)
    }

    fn create_qp(
        pd: &Pd<Self>,
        init: &QpInit<'_, Self>,
        cap: &mut QpCap,
        udata: &mut Udata<'_, Provider>,
    ) -> impl PinInit<Self::Qp, Error> {
        qp::QueuePair::new(pd, init, cap, udata)
    }

    fn modify_qp(qp: &Qp<Self>, attr: &QpAttr, udata: &mut Udata<'_, Provider>) -> Result {
        qp.data().modify(attr, udata)
    }

    fn query_qp(qp: &Qp<Self>) -> Result<QpQuery> {
        qp.data().query()
    }

    fn create_srq(
        pd: &Pd<Self>,
        attr: &mut SrqAttr,
        udata: &mut Udata<'_, Provider>,
    ) -> impl PinInit<Self::Srq, Error> {
        srq::SharedReceiveQueue::new(pd, attr, udata)
    }

    fn resize_cq(cq: &Cq<Self>, entries: u32, udata: &mut Udata<'_, Provider>) -> Result {
        cq.data().resize(cq, entries, udata)
    }

    fn modify_srq(
        srq: &Srq<Self>,
        attr: &SrqAttr,
        mask: u32,
        udata: &mut Udata<'_, Provider>,
    ) -> Result {
        srq.data().modify(attr, mask, udata)
    }

    fn query_srq(srq: &Srq<Self>) -> Result<SrqAttr> {
        srq.data().query()
    }

    fn reg_user_mr(
        pd: &Pd<Self>,
        range: (u64, u64, u64),
        access: u32,
        udata: &mut Udata<'_, Provider>,
    ) -> impl PinInit<Self::Mr, Error> {
        mr::MemoryRegion::new(pd, range, access, udata)
    }

    fn rereg_user_mr(
        mr: &Mr<Self>,
        change: &MrChange,
        pd: &Pd<Self>,
        udata: &mut Udata<'_, Provider>,
    ) -> Result {
        mr.data().rereg(change, pd, udata)
    }
}

/// The adapter's events, to the ib_device's CQs, QPs, SRQs and port.
struct ToCore(Arc<Events>);

impl EventDispatch for ToCore {
    fn completion(&self, cqn: u32) {
        self.0.completion(cqn);
    }

    fn event(&self, e: AsyncEvent) {
        match e {
            AsyncEvent::CqError { cqn, .. } => {
                self.0.cq_error(cqn);
            }
            AsyncEvent::Qp { qpn, event } => {
                let kind = match event {
                    eqe::QpEvent::CommEst => QpEvent::CommEstablished,
                    eqe::QpEvent::LastWqeReached => QpEvent::LastWqeReached,
                    eqe::QpEvent::SqDrained => QpEvent::SqDrained,
                    eqe::QpEvent::PathMig => QpEvent::PathMigrated,
                    eqe::QpEvent::PathMigFailed => QpEvent::PathMigrationError,
                    eqe::QpEvent::CatasError => QpEvent::Fatal,
                    eqe::QpEvent::InvalidRequest => QpEvent::RequestError,
                    eqe::QpEvent::AccessError => QpEvent::AccessError,
                };
                self.0.qp_event(qpn, kind);
            }
            AsyncEvent::Srq { srqn, limit } => {
                let kind = if limit {
                    SrqEvent::LimitReached
                } else {
                    SrqEvent::Error
                };
                self.0.srq_event(srqn, kind);
            }
            AsyncEvent::Port { port, active } => {
                let kind = if active {
                    PortEvent::Active
                } else {
                    PortEvent::Error
                };
                self.0.port_event(port.into(), kind);
            }
        }
    }
}

/// The ib_device of a bound adapter, registered after the adapter is up
/// and unregistered before the adapter is taken down (which disassociates
/// every verbs context first); what failed destroys kept goes after the
/// adapter's reset ([`IbRegistration::unregister`]).
pub(crate) struct IbRegistration {
    adapter: Arc<Adapter>,
    reg: Option<rdma::Registration<Provider>>,
}

impl IbRegistration {
    /// Registers the device as `name`, the adapter's own (`mlx4_bf<N>`,
    /// as its debugfs directory).
    pub(crate) fn new(
        pdev: &pci::Device<Bound>,
        adapter: &Arc<Adapter>,
        name: &'static CStr,
    ) -> Result<Self> {
        let node = adapter.node_info()?;
        let board_id = adapter.board_id()?;
        // mlx4_ib's: "MT%d" of the PCI device, "%x" of NodeInfo's revision
        // (`init_node_data()` sets `rev_id` from it), the board id.
        let identity = Identity {
            hca_type: Text::fmt(format_args!("MT{}", pdev.device_id())),
            hw_rev: Text::fmt(format_args!("{:x}", node.hw_ver)),
            board_id: Text::new(crate::identity::board_id_str(&board_id)),
        };
        let info = DeviceInfo {
            name,
            node_type: NodeType::IbCa,
            node_guid: u64::from_be_bytes(node.node_guid),
            node_desc: c"mlx4_bf ConnectX-3 (BlueFlame provider)",
            ports: 1,
            comp_vectors: adapter.comp_vectors(),
            driver_def: Some(&post::METHODS),
            identity: Some(identity),
        };
        let data = IbDevice {
            adapter: adapter.clone(),
            bar2: IoRegion::pci_bar(pdev, Bar2::BAR)?,
        };
        let dev = UnregisteredDevice::<Provider>::new(
            &crate::THIS_MODULE,
            pdev.as_ref(),
            &info,
            Ok::<_, Error>(data),
        )?;
        // Events reach the device's objects from the moment user space can
        // make one; port events are held until the registration is done.
        adapter.set_event_dispatch(Some(Arc::new(ToCore(dev.events()), GFP_KERNEL)?));
        let reg = dev
            .register(pdev.as_ref())
            .inspect_err(|_| adapter.set_event_dispatch(None))?;
        Ok(IbRegistration {
            adapter: adapter.clone(),
            reg: Some(reg),
        })
    }

    /// Unregisters the device. The returned [`Retired`] holds the memory
    /// of objects whose destroy command failed: drop it once the adapter
    /// is reset.
    pub(crate) fn unregister(mut self) -> Option<Retired<Provider>> {
        // No event reaches the device once this returns (a running
        // dispatch finishes first); then the device goes.
        self.adapter.set_event_dispatch(None);
        self.reg.take().map(rdma::Registration::unregister)
    }
}

impl Drop for IbRegistration {
    fn drop(&mut self) {
        self.adapter.set_event_dispatch(None);
    }
}
