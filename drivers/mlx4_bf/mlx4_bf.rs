// SPDX-License-Identifier: GPL-2.0

//! BlueFlame send path for Mellanox ConnectX (mlx4) adapters.

use kernel::{io::Io, pci, prelude::*};

/// The BAR holding the UAR pages followed by the BlueFlame pages.
const UAR_BAR: u32 = 2;

struct Mlx4BfDriver;

kernel::pci_device_table!(
    PCI_TABLE,
    MODULE_PCI_TABLE,
    <Mlx4BfDriver as pci::Driver>::IdInfo,
    [(pci::DeviceId::from_id(pci::Vendor::MELLANOX, 0x1003), ())]
);

impl pci::Driver for Mlx4BfDriver {
    type IdInfo = ();
    type Data<'bound> = pci::Bar<'bound>;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<kernel::device::Core<'_>>,
        _info: &'bound Self::IdInfo,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        pdev.enable_device_mem()?;
        let bar = pdev.iomap_region(UAR_BAR, c"mlx4_bf")?;
        dev_info!(pdev, "BAR2: {} bytes\n", bar.maxsize());
        Ok(bar)
    }
}

kernel::module_pci_driver! {
    type: Mlx4BfDriver,
    name: "mlx4_bf",
    authors: ["mlx4-bf developers"],
    description: "mlx4 BlueFlame send path (zPCI store-block / write-combining)",
    license: "GPL v2",
}
