// SPDX-License-Identifier: GPL-2.0

//! mlx4_ib's user ABI (`include/uapi/rdma/mlx4-abi.h`, ABI version 4): the
//! udata libmlx4 sends and gets back, as typed values. Each struct mirrors
//! the header's and is checked against the kernel's own binding of it
//! (`kernel::uapi`) for size and field offsets.

use core::mem::{offset_of, size_of};
use kernel::prelude::*;
use kernel::uapi;
use zerocopy_derive::{Immutable, KnownLayout};

/// `struct mlx4_ib_alloc_ucontext_resp`.
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Default)]
pub(super) struct AllocUcontextResp {
    pub(super) dev_caps: u32,
    pub(super) qp_tab_size: u32,
    pub(super) bf_reg_size: u16,
    pub(super) bf_regs_per_page: u16,
    pub(super) cqe_size: u32,
}

/// `struct mlx4_ib_alloc_pd_resp`.
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Default)]
pub(super) struct AllocPdResp {
    pub(super) pdn: u32,
    pub(super) reserved: u32,
}

/// `struct mlx4_ib_create_cq`.
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Default)]
pub(super) struct CreateCq {
    pub(super) buf_addr: u64,
    pub(super) db_addr: u64,
}

/// `struct mlx4_ib_resize_cq`: the new ring libmlx4 allocated.
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Default)]
pub(super) struct ResizeCq {
    pub(super) buf_addr: u64,
}

/// `struct mlx4_ib_create_cq_resp`.
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Default)]
pub(super) struct CreateCqResp {
    pub(super) cqn: u32,
    pub(super) reserved: u32,
}

/// `struct mlx4_ib_create_srq`.
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Default)]
pub(super) struct CreateSrq {
    pub(super) buf_addr: u64,
    pub(super) db_addr: u64,
}

/// `struct mlx4_ib_create_srq_resp`.
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Default)]
pub(super) struct CreateSrqResp {
    pub(super) srqn: u32,
    pub(super) reserved: u32,
}

/// `struct mlx4_ib_create_qp`.
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Default)]
pub(super) struct CreateQp {
    pub(super) buf_addr: u64,
    pub(super) db_addr: u64,
    pub(super) log_sq_bb_count: u8,
    pub(super) log_sq_stride: u8,
    pub(super) sq_no_prefetch: u8,
    pub(super) reserved: u8,
    pub(super) inl_recv_sz: u32,
}

/// `struct mlx4_uverbs_ex_query_device` (`hw/mlx4/mlx4_ib.h`).
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Default)]
pub(super) struct QueryDevice {
    pub(super) comp_mask: u32,
    pub(super) reserved: u32,
}

/// `struct mlx4_uverbs_ex_query_device_resp`, its RSS and TSO capabilities
/// as bytes: this device reports none.
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Default)]
pub(super) struct QueryDeviceResp {
    pub(super) comp_mask: u32,
    pub(super) response_length: u32,
    pub(super) hca_core_clock_offset: u64,
    pub(super) max_inl_recv_sz: u32,
    pub(super) reserved: u32,
    pub(super) rss_caps: [u8; 16],
    pub(super) tso_caps: [u8; 8],
}

impl QueryDeviceResp {
    /// The response `mlx4_ib_query_device()` makes for `room` bytes of user
    /// space, without a core clock (no `CORE_CLOCK_OFFSET`: libmlx4 maps no
    /// clock page), without inline receive (`max_inl_recv_sz` 0: the
    /// provider takes no `inl_recv_sz`) and without RSS or TSO, which an IB
    /// port has none of: `response_length` grows by each field there is
    /// room for, as mainline's does.
    pub(super) fn for_room(room: usize) -> Self {
        let mut len = offset_of!(Self, response_length) + size_of::<u32>();
        for end in [
            offset_of!(Self, hca_core_clock_offset) + 8,
            offset_of!(Self, max_inl_recv_sz) + 4,
        ] {
            if room >= end {
                len = end;
            }
        }
        for end in [
            offset_of!(Self, rss_caps) + 16,
            offset_of!(Self, tso_caps) + 8,
        ] {
            if room >= end {
                len = end;
            }
        }
        QueryDeviceResp {
            response_length: len as u32,
            ..Default::default()
        }
    }
}

macro_rules! same_layout {
    ($ours:ty, $theirs:ty, $($field:ident),*) => {
        const _: () = {
            assert!(size_of::<$ours>() == size_of::<$theirs>());
            $(assert!(offset_of!($ours, $field) == offset_of!($theirs, $field));)*
        };
    };
}

same_layout!(
    AllocUcontextResp,
    uapi::mlx4_ib_alloc_ucontext_resp,
    dev_caps,
    qp_tab_size,
    bf_reg_size,
    bf_regs_per_page,
    cqe_size
);
same_layout!(AllocPdResp, uapi::mlx4_ib_alloc_pd_resp, pdn, reserved);
same_layout!(CreateCq, uapi::mlx4_ib_create_cq, buf_addr, db_addr);
same_layout!(ResizeCq, uapi::mlx4_ib_resize_cq, buf_addr);
same_layout!(CreateCqResp, uapi::mlx4_ib_create_cq_resp, cqn, reserved);
same_layout!(CreateSrq, uapi::mlx4_ib_create_srq, buf_addr, db_addr);
same_layout!(CreateSrqResp, uapi::mlx4_ib_create_srq_resp, srqn, reserved);
same_layout!(
    CreateQp,
    uapi::mlx4_ib_create_qp,
    buf_addr,
    db_addr,
    log_sq_bb_count,
    log_sq_stride,
    sq_no_prefetch,
    reserved,
    inl_recv_sz
);
same_layout!(
    QueryDeviceResp,
    uapi::mlx4_uverbs_ex_query_device_resp,
    comp_mask,
    response_length,
    hca_core_clock_offset,
    max_inl_recv_sz,
    reserved,
    rss_caps,
    tso_caps
);
