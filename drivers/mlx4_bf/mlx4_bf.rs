// SPDX-License-Identifier: GPL-2.0

//! BlueFlame send path for Mellanox ConnectX (mlx4) adapters.
//!
//! Each open of `/dev/mlx4_bf<N>` is a context owning one UAR and the
//! BlueFlame page of the same index. User space posts send WQEs through a
//! uverbs-style ioctl; the kernel validates them, stamps what only it may set
//! and writes them to the BlueFlame page with store-block (zPCI) or
//! write-combining (x86) semantics, or rings the doorbell. See
//! Documentation/mlx4_bf.rst.

use kernel::{
    debugfs::{Dir, Scope},
    device::{Bound, Core},
    devres::Devres,
    dma::Coherent,
    miscdevice::{MiscDeviceOptions, MiscDeviceRegistration},
    new_mutex, pci,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
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
mod context;
mod stats;
mod uverbs;
mod writer;

use bar2::Bar2;
use layout::Caps;
use stats::Stats;
use uar_alloc::UarAllocator;
use writer::Writer;

/// Send-queue slots per QP, and bytes per slot (the largest WQE, rounded).
pub(crate) const SQ_ENTRIES: u32 = 16;
pub(crate) const SQ_STRIDE: usize = 1024;
/// QPs per adapter; their send queues come from one DMA pool set up at probe.
pub(crate) const MAX_QPS: usize = 32;
pub(crate) const MAX_QPS_PER_CONTEXT: usize = 4;
/// Adapters one module instance serves (each gets `/dev/mlx4_bf<N>`).
const MAX_ADAPTERS: usize = 4;
/// QPNs start above the range mlx4 reserves for special QPs.
const FIRST_QPN: u32 = 0x200;

static DEVICE_NAMES: [&CStr; MAX_ADAPTERS] = [c"mlx4_bf0", c"mlx4_bf1", c"mlx4_bf2", c"mlx4_bf3"];
static DEVICE_NUMBERS: Atomic<u32> = Atomic::new(0);

/// The hardware resources that go away when the device is unbound.
pub(crate) struct Hw {
    pub(crate) bar2: Bar2,
    /// `MAX_QPS` send queues of `SQ_ENTRIES * SQ_STRIDE` bytes.
    pub(crate) sq_pool: Coherent<[u8]>,
}

/// Send-queue slots and QP numbers of one adapter.
pub(crate) struct QpTable {
    pub(crate) used_slots: u64,
    pub(crate) next_qpn: u32,
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
    pub(crate) stats: Stats,
    /// `/sys/kernel/debug/mlx4_bf<N>/`: the device's and each context's counters.
    pub(crate) debugfs: Dir,
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
    /// `/sys/kernel/debug/mlx4_bf<N>/device/stats`
    #[pin]
    debugfs: Scope<Arc<Adapter>>,
    pub(crate) adapter: Arc<Adapter>,
    number: DeviceNumber,
}

/// The device counters as debugfs shows them.
fn show_stats(adapter: &Arc<Adapter>, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    writeln!(f, "contexts {}", adapter.uars.lock().in_use())?;
    stats::show(&adapter.stats, f)
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

fn probe_caps(pdev: &pci::Device<Bound>) -> Result<(Caps, Writer)> {
    #[allow(
        clippy::useless_conversion,
        reason = "resource_size_t is u32 on some 32-bit configs"
    )]
    let bar2_len = u64::from(pdev.resource_len(Bar2::BAR)?);
    let caps = Caps::new(
        bar2_len,
        *module_parameters::num_uars.value(),
        *module_parameters::bf_reg_size.value(),
    )
    .map_err(|e| {
        dev_err!(
            pdev.as_ref(),
            "num_uars={} bf_reg_size={} do not fit BAR2 of {:#x} bytes: {:?}\n",
            *module_parameters::num_uars.value(),
            *module_parameters::bf_reg_size.value(),
            bar2_len,
            e
        );
        EINVAL
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
    fn new_adapter(pdev: &pci::Device<Core<'_>>, name: &'static CStr) -> Result<Arc<Adapter>> {
        let (caps, writer) = probe_caps(pdev)?;
        pdev.enable_device_mem()?;
        pdev.set_master();

        let sq_pool_len = MAX_QPS * SQ_ENTRIES as usize * SQ_STRIDE;
        let hw = Hw {
            bar2: Bar2::new(pdev, &caps, writer.mapping())?,
            sq_pool: Coherent::zeroed_slice(pdev.as_ref(), sq_pool_len, GFP_KERNEL)?,
        };
        dev_info!(
            pdev.as_ref(),
            "BAR2 {} KiB: {} UARs, BlueFlame register {} B, {} writer, /dev/{}\n",
            caps.bar2_len / 1024,
            caps.num_uars,
            caps.bf_reg_size,
            writer.name(),
            name.to_str().unwrap_or("?")
        );
        Arc::pin_init(
            try_pin_init!(Adapter {
                caps,
                writer,
                hw: Devres::new(pdev.as_ref(), hw)?,
                uars <- new_mutex!(UarAllocator::new(caps.num_uars)),
                qps <- new_mutex!(QpTable { used_slots: 0, next_qpn: FIRST_QPN }),
                stats: Stats::new(),
                debugfs: Dir::new(name),
            }),
            GFP_KERNEL,
        )
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
        let adapter = match number {
            Some(_) => Self::new_adapter(pdev, name),
            None => {
                dev_err!(pdev.as_ref(), "more than {} adapters\n", MAX_ADAPTERS);
                Err(EBUSY)
            }
        };
        try_pin_init!(Mlx4BfDevice {
            number: number.ok_or(EBUSY)?,
            adapter: adapter?,
            // `adapter` here is the field initialized just above.
            debugfs <- adapter.debugfs.scope(adapter.clone(), c"device", |a, dir| {
                dir.read_callback_file(c"stats", a, &show_stats)
            }),
            misc <- MiscDeviceRegistration::register(MiscDeviceOptions { name }),
        })
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
            description: "UAR pages in BAR2 (0: the first half of BAR2)",
        },
        bf_reg_size: u32 {
            default: 512,
            description: "BlueFlame register size in bytes (two buffers)",
        },
        writer: u32 {
            default: 1,
            description: "BlueFlame writer: 1 store block (zPCI semantics), 2 write combining",
        },
    },
}
