// SPDX-License-Identifier: GPL-2.0

//! BlueFlame send path for Mellanox ConnectX (mlx4) adapters.
//!
//! A PCI driver for mlx4 functions (`driver.rs`) whose interface is an
//! RDMA device, `mlx4_bf<N>`, with mainline mlx4_ib's user ABI
//! (`include/uapi/rdma/mlx4-abi.h`), so that unmodified rdma-core (libmlx4)
//! and perftest run over it (`ib/`), and one driver-specific uverbs method,
//! QP_POST (`uapi/mlx4_bf.h`): the kernel takes a WQE libmlx4 built in its
//! send queue, finds the QP it names among the caller's own, checks it and
//! writes it to the context's BlueFlame page with store-block (zPCI) or
//! write-combining (x86) semantics, or rings the doorbell, for a process
//! that cannot store to that page (s390 without MIO) or chooses not to.
//! Each adapter also has a kernel ping in the manner of krping, run from
//! debugfs (`/sys/kernel/debug/mlx4_bf<N>/device/kping`, `kping/`), whose
//! kernel QPs (`kernel_context/`) post on the same path.
//!
//! The layers, lowest first, each importing only from those below: the
//! pure rules (`rust/mlx4_bf_core`, included here with `#[path]`), `sys/`
//! (what the kernel crate lacks), `rdma/` (the RDMA core for a provider),
//! `stats.rs`, `hw/` (the adapter as mlx4 describes it, brought up through
//! its command interface as mlx4_core does: QUERY_DEV_CAP, ICM, INIT_HCA),
//! `adapter/` (the bound adapter its users share), `kernel_context/` and `ib/`,
//! `kping/`, and `driver.rs`. See Documentation/mlx4_bf.rst.

// The pure rules, shared with the host tools (rust/mlx4_bf_core).
#[path = "../../rust/mlx4_bf_core/src/abi.rs"]
#[allow(unreachable_pub)]
mod abi;
#[path = "../../rust/mlx4_bf_core/src/comp_vector.rs"]
#[allow(unreachable_pub)]
mod comp_vector;
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
#[path = "../../rust/mlx4_bf_core/src/identity.rs"]
#[allow(unreachable_pub)]
mod identity;
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
#[path = "../../rust/mlx4_bf_core/src/srq_size.rs"]
#[allow(unreachable_pub)]
mod srq_size;
#[path = "../../rust/mlx4_bf_core/src/store_block.rs"]
#[allow(unreachable_pub)]
mod store_block;
#[path = "../../rust/mlx4_bf_core/src/uar_alloc.rs"]
#[allow(unreachable_pub)]
mod uar_alloc;
#[path = "../../rust/mlx4_bf_core/src/verbs.rs"]
#[allow(unreachable_pub, dead_code)]
mod verbs;
#[path = "../../rust/mlx4_bf_core/src/wqe/mod.rs"]
#[allow(unreachable_pub)]
mod wqe;
#[path = "../../rust/mlx4_bf_core/src/wqe_build.rs"]
#[allow(unreachable_pub, dead_code)]
mod wqe_build;

mod adapter;
mod driver;
mod geometry;
mod hw;
mod ib;
mod kernel_context;
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
