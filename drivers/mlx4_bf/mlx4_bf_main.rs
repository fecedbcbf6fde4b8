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
//! interface (`hw/firmware.rs`): its capabilities come from QUERY_DEV_CAP, and each
//! context gets a CQ and QPs in the device.

// The pure rules, shared with the host tools (rust/mlx4_bf_core).
#[path = "../../rust/mlx4_bf_core/src/abi.rs"]
#[allow(unreachable_pub)]
mod abi;
#[path = "../../rust/mlx4_bf_core/src/cqe.rs"]
#[allow(unreachable_pub)]
mod cqe;
#[path = "../../rust/mlx4_bf_core/src/eqe.rs"]
#[allow(unreachable_pub, dead_code)]
mod eqe;
#[path = "../../rust/mlx4_bf_core/src/ib_device.rs"]
#[allow(unreachable_pub, dead_code)]
mod ib_device;
#[path = "../../rust/mlx4_bf_core/src/icm/mod.rs"]
#[allow(unreachable_pub, dead_code)]
mod icm;
#[path = "../../rust/mlx4_bf_core/src/kping/mod.rs"]
#[allow(unreachable_pub, dead_code)]
mod kping_rules;
#[path = "../../rust/mlx4_bf_core/src/layout.rs"]
#[allow(unreachable_pub)]
mod layout;
#[path = "../../rust/mlx4_bf_core/src/mad.rs"]
#[allow(unreachable_pub, dead_code)]
mod mad;
#[path = "../../rust/mlx4_bf_core/src/qp_context/mod.rs"]
#[allow(unreachable_pub, dead_code, unused_imports)]
mod qp_context;
#[path = "../../rust/mlx4_bf_core/src/qp_size.rs"]
#[allow(unreachable_pub, dead_code)]
mod qp_size;
#[path = "../../rust/mlx4_bf_core/src/region.rs"]
#[allow(unreachable_pub, dead_code)]
mod region;
#[path = "../../rust/mlx4_bf_core/src/reject.rs"]
#[allow(unreachable_pub)]
mod reject;
#[path = "../../rust/mlx4_bf_core/src/ring.rs"]
#[allow(unreachable_pub)]
mod ring;
#[path = "../../rust/mlx4_bf_core/src/store_block.rs"]
#[allow(unreachable_pub)]
mod store_block;
#[path = "../../rust/mlx4_bf_core/src/uar_alloc.rs"]
#[allow(unreachable_pub)]
mod uar_alloc;
#[path = "../../rust/mlx4_bf_core/src/verbs.rs"]
#[allow(unreachable_pub, dead_code)]
mod verbs;
#[path = "../../rust/mlx4_bf_core/src/wqe.rs"]
#[allow(unreachable_pub)]
mod wqe;
#[path = "../../rust/mlx4_bf_core/src/wqe_build.rs"]
#[allow(unreachable_pub, dead_code)]
mod wqe_build;

mod adapter;
mod context;
mod driver;
mod geometry;
mod hw;
mod ib;
mod kping;
mod rdma;
mod stats;
mod sys;

kernel::module_pci_driver! {
    type: driver::Mlx4BfDriver,
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
        ib_blueflame: u32 {
            default: 1,
            description: "RDMA provider: 1 gives each verbs context its BlueFlame register and the QP_POST method, 0 neither (libmlx4 rings the doorbell only)",
        },
    },
}
