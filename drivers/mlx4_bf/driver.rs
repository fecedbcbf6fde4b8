// SPDX-License-Identifier: GPL-2.0

//! The PCI driver: which functions it binds, what a bound adapter holds
//! (its number, RDMA device, debugfs and teardown), probe and unbind.

use kernel::{
    debugfs::Scope,
    device::Core,
    new_mutex, pci,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
};

use crate::{
    adapter::{new_adapter, show_stats, Adapter, Running},
    ib::IbRegistration,
    kping::Kping,
};

/// Adapters one module instance serves (each named `mlx4_bf<N>`).
const MAX_ADAPTERS: usize = 4;

static DEVICE_NAMES: [&CStr; MAX_ADAPTERS] = [c"mlx4_bf0", c"mlx4_bf1", c"mlx4_bf2", c"mlx4_bf3"];
static DEVICE_NUMBERS: Atomic<u32> = Atomic::new(0);

/// An adapter number, held while the adapter is bound: the name of its RDMA
/// device and of its debugfs directory, `mlx4_bf<N>`.
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

/// Driver data of a bound adapter. Dropped on unbind: the debugfs files go
/// away and `Adapter::hw` is revoked, while the kernel ping's ends keep
/// their `Arc<Adapter>` and get `-ENODEV`.
///
/// Fields drop in declaration order, the number last, so its name is free
/// only once the RDMA device and the debugfs directory are gone. They are initialized the other
/// way round.
#[pin_data]
pub(crate) struct AdapterBinding {
    /// The ib_device (`ib.rs`), taken and unregistered first at unbind.
    #[pin]
    ib: Mutex<Option<IbRegistration>>,
    /// The adapter's interrupt and teardown.
    running: Running,
    /// `/sys/kernel/debug/mlx4_bf<N>/device/`: `stats`, and `kping`, the
    /// kernel ping's command file. Removed before the adapter goes: its
    /// removal waits for the commands running (unbind ended them).
    #[pin]
    debugfs: Scope<Arc<Kping>>,
    adapter: Arc<Adapter>,
    number: DeviceNumber,
}

pub(crate) struct Mlx4BfDriver;

/// The ib_device of an adapter that is up. Without one (the reason is
/// logged) the adapter stays bound with only the kernel ping, as mlx4_core
/// stays bound when mlx4_ib fails.
fn register_ib(
    pdev: &pci::Device<Core<'_>>,
    adapter: &Arc<Adapter>,
    name: &'static CStr,
) -> Option<IbRegistration> {
    IbRegistration::new(pdev, adapter, name)
        .inspect_err(|e| dev_err!(pdev.as_ref(), "no RDMA device: {:?}\n", e))
        .ok()
}

fn show_device_stats(k: &Arc<Kping>, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    show_stats(k.adapter(), f)
}

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

impl pci::Driver for Mlx4BfDriver {
    type IdInfo = ();
    type Data<'bound> = AdapterBinding;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: &'bound Self::IdInfo,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let number = DeviceNumber::take();
        let name = number.as_ref().map_or(DEVICE_NAMES[0], DeviceNumber::name);
        let up = match number {
            Some(_) => new_adapter(pdev, name),
            None => {
                dev_err!(pdev.as_ref(), "more than {} adapters\n", MAX_ADAPTERS);
                Err(EBUSY)
            }
        };
        let adapter = up.as_ref().map(|up| up.adapter.clone()).map_err(|e| *e);
        try_pin_init!(AdapterBinding {
            number: number.ok_or(EBUSY)?,
            adapter: adapter?,
            // `adapter` here is the field initialized just above.
            debugfs <- adapter.debugfs().scope(
                Arc::pin_init(Kping::new(adapter.clone(), name), GFP_KERNEL)?,
                c"device",
                |k, dir| {
                    dir.read_callback_file(c"stats", k, &show_device_stats);
                    dir.read_write_callback_file(c"kping", k, &Kping::show, &Kping::write);
                }
            ),
            running: up?,
            ib <- new_mutex!(register_ib(pdev, adapter, name)),
        })
    }

    /// The adapter is taken down here, while the device is still bound:
    /// open kernel contexts then get -ENODEV (see `hw/firmware.rs`).
    fn unbind<'bound>(pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        // The ib_device goes while the adapter is up: unregistering it
        // destroys what user space still has and disassociates its verbs
        // verbs contexts (their mappings zapped).
        let retired = this.ib.lock().take().and_then(IbRegistration::unregister);
        this.running.shutdown(pdev.as_ref());
        // The adapter is reset: the memory of objects whose destroy command
        // failed is released, and the device let go.
        drop(retired);
    }
}
