// SPDX-License-Identifier: GPL-2.0

//! What the RDMA provider reports of the device, from what QUERY_FW,
//! QUERY_DEV_CAP, QUERY_PORT and this driver's profile say: mlx4_core's
//! `caps` as `mlx4_dev_cap()` (drivers/net/ethernet/mellanox/mlx4/main.c)
//! derives them, and `struct ib_device_attr` as `mlx4_ib_query_device()`
//! (drivers/infiniband/hw/mlx4/main.c) fills it, less what NodeInfo adds
//! (`mad::node_info`) and the PCI device ID (`vendor_part_id`).
//!
//! The "quotas" (QPs, CQs, MRs, PDs the provider may have) are this
//! driver's, not the profile's: mainline reports `dev->quotas`, the
//! objects its bitmaps hand out.

use crate::qp_context::QpDevice;
use crate::qp_size::{QpLimits, SQ_MAX_SPARE};

/// `MLX4_DEV_CAP_FLAG_*` of the device flags word (QUERY_DEV_CAP 0x44,
/// extended flags 0x40 in the high half).
pub mod dev_flag {
    pub const BAD_PKEY_CNTR: u64 = 1 << 8;
    pub const BAD_QKEY_CNTR: u64 = 1 << 9;
    pub const ATOMIC: u64 = 1 << 18;
    pub const COUNTERS: u64 = 1 << 48;
}

/// `enum ib_device_cap_flags` (`IB_UVERBS_DEVICE_*`) mlx4_ib may set.
pub mod cap_flag {
    pub const BAD_PKEY_CNTR: u64 = 1 << 1;
    pub const BAD_QKEY_CNTR: u64 = 1 << 2;
    pub const CHANGE_PHY_PORT: u64 = 1 << 5;
    pub const PORT_ACTIVE_EVENT: u64 = 1 << 10;
    pub const SYS_IMAGE_GUID: u64 = 1 << 11;
    pub const RC_RNR_NAK_GEN: u64 = 1 << 12;
    pub const RAW_IP_CSUM: u64 = 1 << 26;
}

/// `MLX4_MAX_SGE_RD`: `(512 - 16 - 16) / 16`.
pub const MAX_SGE_RD: u32 = (512 - 16 - 16) / 16;
/// `enum ib_atomic_cap`.
pub const IB_ATOMIC_NONE: u32 = 0;
pub const IB_ATOMIC_HCA: u32 = 1;

/// The device as this driver brought it up: QUERY_FW's version,
/// QUERY_DEV_CAP's fields (decoded as `mlx4_QUERY_DEV_CAP()` does), port
/// 1's table sizes (QUERY_PORT), the profile's RDMA read depth and the
/// objects the provider may have.
#[derive(Clone, Copy, Debug, Default)]
pub struct DevCaps {
    /// `caps.fw_ver`: major << 32 | minor << 16 | subminor.
    pub fw_ver: u64,
    pub max_qp_sz: u32,
    pub max_sq_sg: u32,
    pub max_rq_sg: u32,
    pub max_sq_desc_sz: u32,
    pub max_cq_sz: u32,
    pub max_requester_per_qp: u32,
    /// `1 << rdmarc_shift`: the RDMARC entries the profile gives a QP.
    pub max_qp_dest_rdma: u32,
    pub local_ca_ack_delay: u8,
    pub log_max_msg: u8,
    pub stat_rate_support: u16,
    pub min_page_sz: u64,
    pub flags: u64,
    pub max_counters: u32,
    pub num_ports: u8,
    pub gid_table_len: u16,
    pub pkey_table_len: u16,
    /// `caps.num_qps`: the QP numbers the profile gives (all below it).
    pub num_qps: u32,
    pub bf_reg_size: u32,
    pub bf_regs_per_page: u32,
    /// Bytes of a CQE (32: this driver leaves 64-byte CQEs off).
    pub cqe_size: u32,
    /// What the provider may have.
    pub quota_qps: u32,
    pub quota_cqs: u32,
    pub quota_mrs: u32,
    pub quota_pds: u32,
    pub quota_srqs: u32,
    /// `caps.max_srq_wqes`, `caps.max_srq_sge`.
    pub max_srq_wqes: u32,
    pub max_srq_sge: u32,
}

/// `struct ib_device_attr` as `mlx4_ib_query_device()` fills it (the
/// fields an IB port with no multicast, memory windows or XRC has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceAttr {
    pub fw_ver: u64,
    pub device_cap_flags: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_sge_rd: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_pd: u32,
    pub max_qp_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    pub max_res_rd_atom: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
    pub local_ca_ack_delay: u8,
    pub atomic_cap: u32,
    pub max_pkeys: u16,
}

impl DevCaps {
    /// `caps.max_cqes`: the CQ size less the spare entry resizing needs.
    pub const fn max_cqes(&self) -> u32 {
        self.max_cq_sz.saturating_sub(1)
    }

    /// The limits QP sizes are checked against (`qp_size`).
    pub const fn qp_limits(&self) -> QpLimits {
        QpLimits {
            max_wqes: self.max_qp_sz,
            max_sq_sg: self.max_sq_sg,
            max_rq_sg: self.max_rq_sg,
            max_sq_desc_sz: self.max_sq_desc_sz,
        }
    }

    /// What the QP transitions read (`qp_context`).
    pub const fn qp_device(&self) -> QpDevice {
        QpDevice {
            num_ports: self.num_ports,
            pkey_table_len: self.pkey_table_len,
            gid_table_len: self.gid_table_len,
            log_max_msg: self.log_max_msg,
            stat_rate_support: self.stat_rate_support,
            max_qp_init_rdma: self.max_requester_per_qp,
            max_qp_dest_rdma: self.max_qp_dest_rdma,
            // MLX4_SINK_COUNTER_INDEX(): max_counters - 1 in a u8 (0xff on a
            // device without counters, whose max_counters stays 0).
            sink_counter_index: (self.max_counters as u8).wrapping_sub(1),
        }
    }

    /// `ib_device_attr`.
    pub fn device_attr(&self) -> DeviceAttr {
        let mut flags = cap_flag::CHANGE_PHY_PORT
            | cap_flag::PORT_ACTIVE_EVENT
            | cap_flag::SYS_IMAGE_GUID
            | cap_flag::RC_RNR_NAK_GEN
            | cap_flag::RAW_IP_CSUM;
        if self.flags & dev_flag::BAD_PKEY_CNTR != 0 {
            flags |= cap_flag::BAD_PKEY_CNTR;
        }
        if self.flags & dev_flag::BAD_QKEY_CNTR != 0 {
            flags |= cap_flag::BAD_QKEY_CNTR;
        }
        let sge = self.max_sq_sg.min(self.max_rq_sg);
        DeviceAttr {
            fw_ver: self.fw_ver,
            device_cap_flags: flags,
            max_mr_size: u64::MAX,
            // caps.page_size_cap = ~(u32)(min_page_sz - 1)
            page_size_cap: u64::from(!(self.min_page_sz.saturating_sub(1) as u32)),
            max_qp: self.quota_qps,
            max_qp_wr: self.max_qp_sz.saturating_sub(SQ_MAX_SPARE),
            max_send_sge: sge,
            max_recv_sge: sge,
            max_sge_rd: MAX_SGE_RD,
            max_cq: self.quota_cqs,
            max_cqe: self.max_cqes(),
            max_mr: self.quota_mrs,
            max_pd: self.quota_pds,
            max_qp_rd_atom: self.max_qp_dest_rdma,
            max_qp_init_rd_atom: self.max_requester_per_qp,
            max_res_rd_atom: self.max_qp_dest_rdma.saturating_mul(self.quota_qps),
            max_srq: self.quota_srqs,
            max_srq_wr: self.max_srq_wqes.saturating_sub(1),
            max_srq_sge: self.max_srq_sge,
            local_ca_ack_delay: self.local_ca_ack_delay,
            atomic_cap: if self.flags & dev_flag::ATOMIC != 0 {
                IB_ATOMIC_HCA
            } else {
                IB_ATOMIC_NONE
            },
            max_pkeys: self.pkey_table_len,
        }
    }
}

/// `MLX4_IB_UVERBS_ABI_VERSION` and `MLX4_IB_UVERBS_NO_DEV_CAPS_ABI_VERSION`.
pub const UVERBS_ABI_VERSION: u32 = 4;
pub const UVERBS_NO_DEV_CAPS_ABI_VERSION: u32 = 3;
/// `MLX4_USER_DEV_CAP_LARGE_CQE`.
pub const USER_DEV_CAP_LARGE_CQE: u32 = 1 << 0;

/// What `mlx4_ib_alloc_ucontext()` answers (`struct
/// mlx4_ib_alloc_ucontext_resp`, or its `_v3` form without `dev_caps` and
/// `cqe_size` under ABI 3) and the ABI version the device registers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UcontextResp {
    /// `ops.uverbs_abi_ver`: 4 only with user-space capabilities
    /// (`mlx4_ib_add()` lowers it to 3 when `caps.userspace_caps` is 0).
    pub abi_ver: u32,
    pub dev_caps: u32,
    pub qp_tab_size: u32,
    pub bf_reg_size: u16,
    pub bf_regs_per_page: u16,
    pub cqe_size: u32,
}

impl DevCaps {
    /// The ucontext response; `caps.userspace_caps` has LARGE_CQE only
    /// with 64-byte CQEs (`mlx4_init_hca()`).
    pub const fn ucontext(&self) -> UcontextResp {
        let dev_caps = if self.cqe_size == 64 {
            USER_DEV_CAP_LARGE_CQE
        } else {
            0
        };
        UcontextResp {
            abi_ver: if dev_caps != 0 {
                UVERBS_ABI_VERSION
            } else {
                UVERBS_NO_DEV_CAPS_ABI_VERSION
            },
            dev_caps,
            qp_tab_size: self.num_qps,
            bf_reg_size: self.bf_reg_size as u16,
            bf_regs_per_page: self.bf_regs_per_page as u16,
            cqe_size: self.cqe_size,
        }
    }
}

/// `caps.fw_ver` from QUERY_FW's version fields.
pub const fn fw_ver(major: u16, minor: u16, subminor: u16) -> u64 {
    ((major as u64) << 32) | ((minor as u64) << 16) | subminor as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's ConnectX-3 (tools/mlx4-model/src/firmware/caps.rs).
    fn model() -> DevCaps {
        DevCaps {
            fw_ver: fw_ver(2, 42, 5000),
            max_qp_sz: 1 << 14,
            max_sq_sg: 32,
            max_rq_sg: 32,
            max_sq_desc_sz: 1008,
            max_cq_sz: 1 << 16,
            max_requester_per_qp: 16,
            max_qp_dest_rdma: 1,
            local_ca_ack_delay: 15,
            log_max_msg: 31,
            stat_rate_support: 0,
            min_page_sz: 4096,
            flags: 0x7,
            max_counters: 0,
            num_ports: 1,
            gid_table_len: 128,
            pkey_table_len: 128,
            num_qps: 1024,
            bf_reg_size: 512,
            bf_regs_per_page: 8,
            cqe_size: 32,
            quota_qps: 32,
            quota_cqs: 64,
            quota_mrs: 1000,
            quota_pds: 64,
            quota_srqs: 1024,
            max_srq_wqes: 1 << 14,
            max_srq_sge: 31,
        }
    }

    #[test]
    fn device_attr_as_mlx4_ib_query_device() {
        let a = model().device_attr();
        assert_eq!(a.fw_ver, 0x2_002a_1388);
        assert_eq!(
            a.device_cap_flags,
            (1 << 5) | (1 << 10) | (1 << 11) | (1 << 12) | (1 << 26)
        );
        assert_eq!(a.page_size_cap, 0xffff_f000);
        assert_eq!(a.max_qp_wr, (1 << 14) - 33);
        assert_eq!((a.max_send_sge, a.max_recv_sge, a.max_sge_rd), (32, 32, 30));
        assert_eq!(a.max_cqe, 65535);
        assert_eq!(
            (a.max_qp_rd_atom, a.max_qp_init_rd_atom, a.max_res_rd_atom),
            (1, 16, 32)
        );
        assert_eq!(a.atomic_cap, IB_ATOMIC_NONE);
        assert_eq!(a.max_pkeys, 128);
        assert_eq!(a.max_mr_size, u64::MAX);
        assert_eq!((a.max_srq, a.max_srq_wr, a.max_srq_sge), (1024, 16383, 31));
    }

    #[test]
    fn ucontext_abi_follows_the_cqe_size() {
        let r = model().ucontext();
        // 32-byte CQEs: no user-space capabilities, ABI 3 (the v3 answer).
        assert_eq!((r.abi_ver, r.dev_caps, r.cqe_size), (3, 0, 32));
        assert_eq!(
            (r.qp_tab_size, r.bf_reg_size, r.bf_regs_per_page),
            (1024, 512, 8)
        );
        let big = DevCaps {
            cqe_size: 64,
            ..model()
        };
        assert_eq!((big.ucontext().abi_ver, big.ucontext().dev_caps), (4, 1));
    }

    #[test]
    fn sink_counter_and_limits() {
        let c = model();
        assert_eq!(c.qp_device().sink_counter_index, 0xff);
        assert_eq!(
            DevCaps {
                max_counters: 128,
                ..c
            }
            .qp_device()
            .sink_counter_index,
            127
        );
        assert_eq!(c.qp_limits().max_wqes, 1 << 14);
        let f = DevCaps {
            flags: dev_flag::BAD_PKEY_CNTR | dev_flag::ATOMIC,
            ..c
        };
        let a = f.device_attr();
        assert_ne!(a.device_cap_flags & cap_flag::BAD_PKEY_CNTR, 0);
        assert_eq!(a.atomic_cap, IB_ATOMIC_HCA);
    }
}
