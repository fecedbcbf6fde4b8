// SPDX-License-Identifier: GPL-2.0

//! BlueFlame send path for Mellanox ConnectX (mlx4) adapters.
//!
//! Each open of `/dev/mlx4_bf<N>` is a context owning one UAR and the
//! BlueFlame page of the same index. User space posts send WQEs through a
//! uverbs-style ioctl; the kernel validates them, stamps what only it may set
//! and writes them to the BlueFlame page with store-block (zPCI) or
//! write-combining (x86) semantics, or rings the doorbell. See
//! Documentation/mlx4_bf.rst.
//!
//! The adapter, a Mellanox mlx4 function, is driven through mlx4's command
//! interface (`hca.rs`): its capabilities come from QUERY_DEV_CAP, and each
//! context gets a CQ and QPs in the device.

use kernel::{
    debugfs::{Dir, Scope},
    device::{Bound, Core},
    devres::Devres,
    dma::Coherent,
    irq,
    miscdevice::{MiscDeviceOptions, MiscDeviceRegistration},
    new_mutex, new_poll_condvar, pci,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Atomic, Relaxed},
        poll::PollCondVar,
        Arc, Mutex,
    },
};

// The pure rules, shared with the host tools (rust/mlx4_bf_core).
#[path = "../../rust/mlx4_bf_core/src/abi.rs"]
#[allow(dead_code, unreachable_pub)]
mod abi;
#[path = "../../rust/mlx4_bf_core/src/layout.rs"]
#[allow(dead_code, unreachable_pub)]
mod layout;
#[path = "../../rust/mlx4_bf_core/src/region.rs"]
#[allow(dead_code, unreachable_pub)]
mod region;
#[path = "../../rust/mlx4_bf_core/src/store_block.rs"]
#[allow(dead_code, unreachable_pub)]
mod store_block;
#[path = "../../rust/mlx4_bf_core/src/uar_alloc.rs"]
#[allow(dead_code, unreachable_pub)]
mod uar_alloc;
#[path = "../../rust/mlx4_bf_core/src/wqe.rs"]
#[allow(dead_code, unreachable_pub)]
mod wqe;

mod bar2;
mod be;
mod cmd;
mod context;
mod copy;
mod cq;
mod eq;
mod events;
mod fw;
mod hca;
mod mmio;
mod mr;
mod pin;
mod qp;
mod recv;
mod reset;
mod stats;
mod umem;
mod usermap;
mod uverbs;
mod writer;

use bar2::Bar2;
use eq::EqHandler;
use fw::DevCap;
use hca::{Hca, HcaMem};
use layout::Caps;
use mr::MrTable;
use stats::DeviceStats;
use uar_alloc::UarAllocator;
use umem::UserMem;
use usermap::UserMaps;
use writer::Writer;

/// Send-queue slots per QP, and bytes per slot (the largest WQE, rounded).
pub(crate) const SQ_ENTRIES: u32 = 16;
pub(crate) const SQ_STRIDE: usize = 1024;
/// Receive WQEs per QP, each one data segment naming a kernel buffer.
pub(crate) const RQ_ENTRIES: u32 = 16;
pub(crate) const RQ_STRIDE: usize = 16;
pub(crate) const RECV_BUF_SIZE: usize = 1024;
/// One QP's buffer in `Hw::qp_pool`: the SQ, then the RQ (mlx4 puts the
/// queue with the larger stride first), then the RQ doorbell record.
pub(crate) const RQ_OFFSET: usize = SQ_ENTRIES as usize * SQ_STRIDE;
pub(crate) const RQ_DB_OFFSET: usize = RQ_OFFSET + 2048;
pub(crate) const QP_BUF_BYTES: usize = RQ_OFFSET + 4096;
const _: () = assert!(RQ_ENTRIES as usize * RQ_STRIDE <= RQ_DB_OFFSET - RQ_OFFSET);
/// A QP's kernel send buffers in `Hw::send_pool`, one per send-queue slot.
pub(crate) const SEND_BUFS_BYTES: usize = SQ_ENTRIES as usize * abi::MAX_PAYLOAD;
/// QPs per adapter; their send queues come from one DMA pool set up at probe.
pub(crate) const MAX_QPS: usize = 32;
pub(crate) const MAX_QPS_PER_CONTEXT: usize = 4;
/// Adapters one module instance serves (each gets `/dev/mlx4_bf<N>`).
const MAX_ADAPTERS: usize = 4;
/// QPNs start above the range mlx4 reserves for special QPs.
const FIRST_QPN: u32 = 0x200;
/// QPNs are 24 bits.
const QPN_LIMIT: u32 = 1 << 24;

static DEVICE_NAMES: [&CStr; MAX_ADAPTERS] = [c"mlx4_bf0", c"mlx4_bf1", c"mlx4_bf2", c"mlx4_bf3"];
static DEVICE_NUMBERS: Atomic<u32> = Atomic::new(0);

/// The hardware resources that go away when the device is unbound.
pub(crate) struct Hw {
    pub(crate) bar2: Bar2,
    /// `MAX_QPS` QP buffers of `QP_BUF_BYTES`.
    pub(crate) qp_pool: Coherent<[u8]>,
    /// `MAX_QPS` times `SEND_BUFS_BYTES`: messages POST_SEND copied in.
    pub(crate) send_pool: Coherent<[u8]>,
    /// The EQ and CQ memory.
    pub(crate) hca: HcaMem,
}

/// Send-queue slots and QP numbers of one adapter.
pub(crate) struct QpTable {
    used_slots: u64,
    next_qpn: u32,
    /// QPNs handed out lie in `FIRST_QPN..qpn_limit`.
    qpn_limit: u32,
    /// The QPN of each slot in use (0: free).
    qpns: [u32; MAX_QPS],
    /// Protection domain of each slot's QP: its context's UAR index.
    pds: [u32; MAX_QPS],
}

impl QpTable {
    fn new(qpn_limit: u32) -> Self {
        QpTable {
            used_slots: 0,
            next_qpn: FIRST_QPN,
            qpn_limit,
            qpns: [0; MAX_QPS],
            pds: [0; MAX_QPS],
        }
    }

    /// A free send-queue slot and a BlueFlame-safe QPN no QP uses; QPNs
    /// wrap back to `FIRST_QPN` at the limit.
    pub(crate) fn alloc(&mut self, pd: u32) -> Option<(usize, u32)> {
        let slot = (!self.used_slots).trailing_zeros() as usize;
        if slot >= MAX_QPS {
            return None;
        }
        let mut qpn = wqe::next_bf_safe_qpn(self.next_qpn);
        // At most MAX_QPS - 1 others are in use: this ends on a free QPN.
        for _ in 0..=MAX_QPS {
            if !(FIRST_QPN..self.qpn_limit).contains(&qpn) {
                qpn = wqe::next_bf_safe_qpn(FIRST_QPN);
            }
            if !self.qpns.contains(&qpn) {
                break;
            }
            qpn = wqe::next_bf_safe_qpn(qpn + 1);
        }
        self.next_qpn = wqe::next_bf_safe_qpn(qpn + 1);
        self.used_slots |= 1 << slot;
        self.qpns[slot] = qpn;
        self.pds[slot] = pd;
        Some((slot, qpn))
    }

    pub(crate) fn free(&mut self, slot: usize) {
        if slot < MAX_QPS {
            self.used_slots &= !(1 << slot);
            self.qpns[slot] = 0;
            self.pds[slot] = 0;
        }
    }

    /// The protection domain of QP `qpn`, if it exists.
    pub(crate) fn pd(&self, qpn: u32) -> Option<u32> {
        let slot = self.qpns.iter().position(|&q| q == qpn && q != 0)?;
        Some(self.pds[slot])
    }
}

/// One bound adapter, shared by its open contexts.
#[pin_data]
pub(crate) struct Adapter {
    pub(crate) caps: Caps,
    pub(crate) writer: Writer,
    pub(crate) hw: Devres<Hw>,
    #[pin]
    pub(crate) uars: Mutex<UarAllocator>,
    #[pin]
    pub(crate) qps: Mutex<QpTable>,
    /// The memory contexts map (outside `hw`: mappings may outlive unbind).
    pub(crate) umem: UserMem,
    /// Areas of `umem` in use (bit = area).
    #[pin]
    pub(crate) areas: Mutex<u64>,
    /// Memory regions of all contexts (`mr.rs`).
    #[pin]
    pub(crate) mrs: Mutex<MrTable>,
    /// Where BAR2 starts, for the pages contexts map (`usermap.rs`).
    pub(crate) bar2_start: u64,
    /// The files that map BAR pages, zapped at unbind.
    #[pin]
    pub(crate) user_maps: Mutex<UserMaps>,
    /// Woken by completion events and by unbind: pollers look at their CQs.
    #[pin]
    pub(crate) events: PollCondVar,
    #[pin]
    pub(crate) stats: DeviceStats,
    /// `/sys/kernel/debug/mlx4_bf<N>/`: the device's and each context's counters.
    pub(crate) debugfs: Dir,
    /// The command interface and EQ.
    pub(crate) hca: Pin<KBox<Hca>>,
}

/// An adapter that is up: its interrupt registration, and the teardown
/// (`Hca::shutdown`) when unbound or when probe fails after bring-up.
struct HcaUp {
    adapter: Arc<Adapter>,
    /// For the teardown's last resort (`reset.rs`).
    pdev: ARef<pci::Device>,
    irq: Option<Pin<KBox<irq::Registration<EqHandler>>>>,
}

impl HcaUp {
    /// At unbind: the handler is waited for through the bound device (not
    /// `try_synchronize()`, which would wait inside an RCU section).
    fn shutdown(&self, dev: &kernel::device::Device<Bound>) {
        self.adapter.hca.shutdown(
            || {
                if let Some(irq) = self.irq.as_ref() {
                    let _ = irq.synchronize(dev);
                }
            },
            &self.pdev,
        );
        // Every MPT is out of the device: unmap while still bound, unpin
        // outside the lock.
        let pinned = self.adapter.mrs.lock().release_all();
        drop(pinned);
        // Pollers see the adapter gone (POLLHUP).
        self.adapter.events.notify_all();
    }
}

impl Drop for HcaUp {
    fn drop(&mut self) {
        // A no-op after unbind(). When probe fails after bring-up, the
        // handler is waited for by freeing the interrupt (free_irq()).
        let irq = &mut self.irq;
        self.adapter.hca.shutdown(|| drop(irq.take()), &self.pdev);
    }
}

/// An adapter number (`/dev/mlx4_bf<N>`), held while the adapter is bound.
struct DeviceNumber(u32);

impl DeviceNumber {
    fn take() -> Option<Self> {
        let mut used = DEVICE_NUMBERS.load(Relaxed);
        loop {
            let n = (!used).trailing_zeros();
            if n as usize >= MAX_ADAPTERS {
                return None;
            }
            match DEVICE_NUMBERS.cmpxchg(used, used | (1 << n), Relaxed) {
                Ok(_) => return Some(DeviceNumber(n)),
                Err(now) => used = now,
            }
        }
    }

    fn name(&self) -> &'static CStr {
        DEVICE_NAMES[self.0 as usize]
    }
}

impl Drop for DeviceNumber {
    fn drop(&mut self) {
        let mut used = DEVICE_NUMBERS.load(Relaxed);
        while let Err(now) = DEVICE_NUMBERS.cmpxchg(used, used & !(1 << self.0), Relaxed) {
            used = now;
        }
    }
}

/// Driver data of a bound adapter. Dropped on unbind: the misc device and
/// the debugfs files go away (no new opens) and `Adapter::hw` is revoked,
/// while open contexts keep their `Arc<Adapter>` and get `-ENODEV`.
///
/// Fields drop in declaration order: the misc device first, so no `open()`
/// can still be looking at `adapter` when it goes, and the number last, so
/// its name is free only once the misc device is gone. They are initialized
/// the other way round, so `open()` never sees an `adapter` not yet written.
#[pin_data]
pub(crate) struct Mlx4BfDevice {
    #[pin]
    pub(crate) misc: MiscDeviceRegistration<context::Context>,
    /// The adapter's interrupt and teardown.
    hca_up: HcaUp,
    /// `/sys/kernel/debug/mlx4_bf<N>/device/stats`
    #[pin]
    debugfs: Scope<Arc<Adapter>>,
    pub(crate) adapter: Arc<Adapter>,
    number: DeviceNumber,
}

/// The device counters as debugfs shows them.
fn show_stats(adapter: &Arc<Adapter>, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    writeln!(f, "contexts {}", adapter.uars.lock().in_use())?;
    {
        let mrs = adapter.mrs.lock();
        writeln!(f, "mrs {}", mrs.count())?;
        writeln!(f, "pinned_pages {}", mrs.pinned_pages())?;
    }
    stats::show(&adapter.stats.snapshot(), f)?;
    adapter.hca.stats.show(f)
}

struct Mlx4BfDriver;

kernel::pci_device_table!(
    PCI_TABLE,
    MODULE_PCI_TABLE,
    <Mlx4BfDriver as pci::Driver>::IdInfo,
    [
        // ConnectX / ConnectX-2 (mlx4 PF IDs; virtual functions are not served).
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x6340), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x634a), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x6354), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x6732), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x673c), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x6368), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x6750), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x6372), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x675a), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x6764), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x6746), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x676e), ()),
        // ConnectX-3, ConnectX-3 Pro and later mlx4 PFs.
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x1003), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x1005), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x1006), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x1007), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x1008), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x1009), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x100a), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x100b), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x100c), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x100d), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x100e), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x100f), ()),
        (pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x1010), ()),
    ]
);

/// The BAR2 geometry from QUERY_DEV_CAP; the module parameters, if set, must
/// match it.
fn probe_caps(pdev: &pci::Device<Bound>, cap: &DevCap) -> Result<(Caps, Writer)> {
    #[allow(
        clippy::useless_conversion,
        reason = "resource_size_t is u32 on some 32-bit configs"
    )]
    let bar2_len = u64::from(pdev.resource_len(Bar2::BAR)?);
    // mlx4_dev_cap(): the UAR area must fit BAR2.
    if cap.uar_size > bar2_len {
        dev_err!(
            pdev.as_ref(),
            "UAR area of {:#x} bytes does not fit BAR2 of {:#x}\n",
            cap.uar_size,
            bar2_len
        );
        return Err(ENODEV);
    }
    let num_uars = u32::try_from(cap.uar_size / layout::PAGE_SIZE).map_err(|_| ENODEV)?;
    let bf_reg_size = cap.bf_reg_size;
    let param_uars = *module_parameters::num_uars.value();
    let param_bf = *module_parameters::bf_reg_size.value();
    for (name, param, device) in [
        ("num_uars", param_uars, num_uars),
        ("bf_reg_size", param_bf, bf_reg_size),
    ] {
        if param != 0 && param != device {
            dev_err!(
                pdev.as_ref(),
                "{}={} but the device has {}\n",
                name,
                param,
                device
            );
            return Err(EINVAL);
        }
    }
    let caps = Caps::new(bar2_len, num_uars, bf_reg_size).map_err(|e| {
        dev_err!(
            pdev.as_ref(),
            "{} UARs, BlueFlame register {} B: do not fit BAR2 of {:#x} bytes: {:?}\n",
            num_uars,
            bf_reg_size,
            bar2_len,
            e
        );
        ENODEV
    })?;
    if caps.num_uars as usize > uar_alloc::MAX_UARS {
        dev_err!(
            pdev.as_ref(),
            "{} UARs, at most {} supported\n",
            caps.num_uars,
            uar_alloc::MAX_UARS
        );
        return Err(EINVAL);
    }
    let w = *module_parameters::writer.value();
    let writer = Writer::from_abi(w).ok_or_else(|| {
        dev_err!(
            pdev.as_ref(),
            "writer={} unknown: 1 (store block) or 2 (write combining)\n",
            w
        );
        EINVAL
    })?;
    Ok((caps, writer))
}

impl Mlx4BfDriver {
    /// The adapter brought up, with its interrupt and teardown.
    fn new_adapter(pdev: &pci::Device<Core<'_>>, name: &'static CStr) -> Result<HcaUp> {
        // The ID table names mlx4 functions only; a function bound to the
        // driver by hand is not talked to.
        let vendor = pdev.vendor_id();
        if vendor != pci::Vendor::MELLANOX {
            dev_err!(pdev.as_ref(), "vendor {} is not Mellanox\n", vendor);
            return Err(ENODEV);
        }
        pdev.enable_device_mem()?;
        pdev.set_master();
        let (hca, mem) = hca::probe(pdev)?;
        let (caps, writer) = probe_caps(pdev, &hca.dev_cap)?;

        let qp_pool_len = MAX_QPS * QP_BUF_BYTES;
        let hw = Hw {
            bar2: Bar2::new(pdev, &caps, writer.mapping())?,
            qp_pool: Coherent::zeroed_slice(pdev.as_ref(), qp_pool_len, GFP_KERNEL)?,
            send_pool: Coherent::zeroed_slice(
                pdev.as_ref(),
                MAX_QPS * SEND_BUFS_BYTES,
                GFP_KERNEL,
            )?,
            hca: mem,
        };
        dev_info!(
            pdev.as_ref(),
            "firmware {}.{}.{} (cmd_if_rev {}), {} BlueFlame registers per page\n",
            hca.fw.major,
            hca.fw.minor,
            hca.fw.subminor,
            hca.fw.cmd_if_rev,
            hca.dev_cap.bf_regs_per_page
        );
        dev_info!(
            pdev.as_ref(),
            "BAR2 {} KiB: {} UARs, BlueFlame register {} B, {} writer, /dev/{}\n",
            caps.bar2_len / 1024,
            caps.num_uars,
            caps.bf_reg_size,
            writer.name(),
            name.to_str().unwrap_or("?")
        );
        let qpn_limit = hca.qpn_limit.min(QPN_LIMIT);
        let umem = UserMem::new(pdev.as_ref())?;
        #[allow(
            clippy::useless_conversion,
            reason = "resource_size_t is u32 on some 32-bit configs"
        )]
        let bar2_start = u64::from(pdev.resource_start(Bar2::BAR)?);
        let mrs = MrTable::new(pdev.as_ref(), &hca.dev_cap)?;
        let adapter = Arc::pin_init(
            try_pin_init!(Adapter {
                caps,
                writer,
                hw: Devres::new(pdev.as_ref(), hw)?,
                uars <- new_mutex!(UarAllocator::new(caps.num_uars)),
                qps <- new_mutex!(QpTable::new(qpn_limit)),
                umem,
                areas <- new_mutex!(0),
                mrs <- new_mutex!(mrs),
                bar2_start,
                user_maps <- new_mutex!(UserMaps::new()),
                events <- new_poll_condvar!("mlx4_bf events"),
                stats <- DeviceStats::new(),
                debugfs: Dir::new(name),
                hca,
            }),
            GFP_KERNEL,
        )?;

        // One MSI-X vector, for the EQ.
        let vectors = pdev
            .alloc_irq_vectors(1, 1, pci::IrqTypes::default().with(pci::IrqType::MsiX))
            .inspect_err(|e| dev_err!(pdev.as_ref(), "no MSI-X vector: {:?}\n", e))?;
        let irq = KBox::pin_init(
            pdev.request_irq(
                *vectors.start(),
                irq::Flags::TRIGGER_NONE,
                c"mlx4_bf",
                Ok::<_, Error>(EqHandler {
                    adapter: adapter.clone(),
                }),
            ),
            GFP_KERNEL,
        )?;
        // From here on a failure takes the device down again (HcaUp's drop).
        let up = HcaUp {
            adapter,
            pdev: pdev.into(),
            irq: Some(irq),
        };
        {
            let hw = up.adapter.hw.access(pdev.as_ref())?;
            up.adapter.hca.start(pdev.as_ref(), hw.bar2.uar())?;
        }
        Ok(up)
    }
}

impl pci::Driver for Mlx4BfDriver {
    type IdInfo = ();
    type Data<'bound> = Mlx4BfDevice;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: &'bound Self::IdInfo,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let number = DeviceNumber::take();
        let name = number.as_ref().map_or(DEVICE_NAMES[0], DeviceNumber::name);
        let up = match number {
            Some(_) => Self::new_adapter(pdev, name),
            None => {
                dev_err!(pdev.as_ref(), "more than {} adapters\n", MAX_ADAPTERS);
                Err(EBUSY)
            }
        };
        let adapter = up.as_ref().map(|up| up.adapter.clone()).map_err(|e| *e);
        try_pin_init!(Mlx4BfDevice {
            number: number.ok_or(EBUSY)?,
            adapter: adapter?,
            // `adapter` here is the field initialized just above.
            debugfs <- adapter.debugfs.scope(adapter.clone(), c"device", |a, dir| {
                dir.read_callback_file(c"stats", a, &show_stats)
            }),
            hca_up: up?,
            misc <- MiscDeviceRegistration::register(MiscDeviceOptions { name }),
        })
    }

    /// The adapter is taken down here, while the device is still bound:
    /// open contexts then get -ENODEV (see `hca.rs`).
    fn unbind<'bound>(pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        // No process writes to the BAR from here on.
        this.hca_up.adapter.user_maps.lock().revoke();
        this.hca_up.shutdown(pdev.as_ref());
    }
}

kernel::module_pci_driver! {
    type: Mlx4BfDriver,
    name: "mlx4_bf",
    authors: ["mlx4-bf developers"],
    description: "mlx4 BlueFlame send path (zPCI store-block / write-combining)",
    license: "GPL v2",
    params: {
        num_uars: u32 {
            default: 0,
            description: "UAR pages in BAR2 (0: the device's; anything else must equal it)",
        },
        bf_reg_size: u32 {
            default: 0,
            description: "BlueFlame register size in bytes, two buffers (0: the device's; anything else must equal it)",
        },
        writer: u32 {
            default: 1,
            description: "BlueFlame writer: 1 store block (zPCI semantics), 2 write combining",
        },
    },
}
