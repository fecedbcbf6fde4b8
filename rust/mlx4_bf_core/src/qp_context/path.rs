// SPDX-License-Identifier: GPL-2.0

//! A QP's primary path (`struct mlx4_qp_path`) from an IB address handle,
//! as `drivers/infiniband/hw/mlx4/qp.c:_mlx4_set_path()` fills it for a
//! port whose link is InfiniBand (no RoCE branch), and the responder's
//! access enables (`to_mlx4_access_flags()`).

use crate::verbs::{access, VerbsError, IB_RATE_2_5_GBPS};

/// `MLX4_IB_DEFAULT_SCHED_QUEUE`.
pub const DEFAULT_SCHED_QUEUE: u8 = 0x83;
/// `MLX4_STAT_RATE_OFFSET`: an `enum ib_rate` plus this is mlx4's rate.
pub const STAT_RATE_OFFSET: u8 = 5;
/// `params2`'s `MLX4_QP_BIT_RRE`, `MLX4_QP_BIT_RWE`, `MLX4_QP_BIT_RAE`.
pub const BIT_RRE: u32 = 1 << 15;
pub const BIT_RWE: u32 = 1 << 14;
pub const BIT_RAE: u32 = 1 << 13;

/// The global route of an address handle (`struct ib_global_route`);
/// `sgid_index` is the source GID's table index (on an IB port
/// `mlx4_ib_gid_index_to_real_index()` is that index).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grh {
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// An IB address handle (`struct rdma_ah_attr` of type IB).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AhAttr {
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    /// `enum ib_rate` (0: the port's rate).
    pub static_rate: u8,
    /// `IB_AH_GRH`.
    pub grh: Option<Grh>,
}

/// The fields of `struct mlx4_qp_path` a user RC or UC QP's transitions
/// set; the rest (VLAN, MAC, feup) stay 0 on an IB port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathFields {
    pub fl: u8,
    pub disable_pkey_check: u8,
    pub pkey_index: u8,
    pub counter_index: u8,
    pub grh_mylmc: u8,
    pub rlid: u16,
    pub ackto: u8,
    pub mgid_index: u8,
    pub static_rate: u8,
    pub hop_limit: u8,
    pub tclass_flowlabel: u32,
    pub rgid: [u8; 16],
    pub sched_queue: u8,
}

/// mlx4's rate for `enum ib_rate` `rate` (nonzero): the rate plus
/// [`STAT_RATE_OFFSET`], lowered to the fastest the device supports
/// (`stat_rate_support`, QUERY_DEV_CAP 0x3c, bit per mlx4 rate), no
/// lower than 2.5 Gb/s.
pub fn static_rate(rate: u8, stat_rate_support: u16) -> u8 {
    // `path->static_rate` is a u8: the sum wraps as C's store does.
    let mut r = rate.wrapping_add(STAT_RATE_OFFSET);
    let supported =
        |r: u8| 1u32.checked_shl(u32::from(r)).unwrap_or(0) & u32::from(stat_rate_support) != 0;
    while r > IB_RATE_2_5_GBPS + STAT_RATE_OFFSET && !supported(r) {
        r -= 1;
    }
    r
}

/// `_mlx4_set_path()` for an IB port: `ah` through `port` into `path`.
/// A GRH whose source GID index is not below `gid_table_len` is refused.
pub fn set_path(
    ah: &AhAttr,
    port: u8,
    (gid_table_len, stat_rate_support): (u16, u16),
    path: &mut PathFields,
) -> Result<(), VerbsError> {
    path.grh_mylmc = ah.src_path_bits & 0x7f;
    path.rlid = ah.dlid;
    path.static_rate = if ah.static_rate != 0 {
        static_rate(ah.static_rate, stat_rate_support)
    } else {
        0
    };
    if let Some(grh) = &ah.grh {
        if u16::from(grh.sgid_index) >= gid_table_len {
            return Err(VerbsError::Invalid);
        }
        path.grh_mylmc |= 1 << 7;
        path.mgid_index = grh.sgid_index;
        path.hop_limit = grh.hop_limit;
        path.tclass_flowlabel = (u32::from(grh.traffic_class) << 20) | grh.flow_label;
        path.rgid = grh.dgid;
    }
    // `(port - 1) << 6` of an int stored in a u8: wraps as C's does.
    path.sched_queue =
        DEFAULT_SCHED_QUEUE | port.wrapping_sub(1).wrapping_shl(6) | ((ah.sl & 0xf) << 2);
    Ok(())
}

/// `mlx4_set_sched()`: only the port bit of `sched_queue`.
pub fn set_sched(path: &mut PathFields, port: u8) {
    path.sched_queue = (path.sched_queue & 0xbf) | port.wrapping_sub(1).wrapping_shl(6);
}

/// `to_mlx4_access_flags()`: the responder enables of `params2` from the
/// access flags and the responder depth, each the new value if the
/// transition carries it, else the QP's current one. Without a responder
/// depth only remote writes are allowed.
pub fn access_flags(access_flags: u32, dest_rd_atomic: u8) -> u32 {
    let mut flags = access_flags;
    if dest_rd_atomic == 0 {
        flags &= access::REMOTE_WRITE;
    }
    let mut hw = 0;
    if flags & access::REMOTE_READ != 0 {
        hw |= BIT_RRE;
    }
    if flags & access::REMOTE_ATOMIC != 0 {
        hw |= BIT_RAE;
    }
    if flags & access::REMOTE_WRITE != 0 {
        hw |= BIT_RWE;
    }
    hw
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ib_path_as_mlx4_set_path() {
        let mut p = PathFields::default();
        let ah = AhAttr {
            dlid: 0x12,
            sl: 3,
            src_path_bits: 0x81,
            static_rate: 0,
            grh: None,
        };
        set_path(&ah, 1, (128, 0), &mut p).unwrap();
        assert_eq!(p.rlid, 0x12);
        assert_eq!(p.grh_mylmc, 0x01);
        assert_eq!(p.sched_queue, 0x83 | (3 << 2));
        assert_eq!(p.static_rate, 0);
        set_path(&ah, 2, (128, 0), &mut p).unwrap();
        assert_eq!(p.sched_queue, 0xc3 | (3 << 2));
    }

    #[test]
    fn grh_fields_and_sgid_bound() {
        let mut p = PathFields::default();
        let grh = Grh {
            dgid: [7; 16],
            flow_label: 0x12345,
            sgid_index: 2,
            hop_limit: 64,
            traffic_class: 0xa0,
        };
        let ah = AhAttr {
            dlid: 1,
            grh: Some(grh),
            ..AhAttr::default()
        };
        set_path(&ah, 1, (128, 0), &mut p).unwrap();
        assert_eq!(p.grh_mylmc, 0x80);
        assert_eq!(p.mgid_index, 2);
        assert_eq!(p.hop_limit, 64);
        assert_eq!(p.tclass_flowlabel, 0x0a01_2345);
        assert_eq!(p.rgid, [7; 16]);
        assert_eq!(set_path(&ah, 1, (2, 0), &mut p), Err(VerbsError::Invalid));
    }

    #[test]
    fn rates_fall_to_the_fastest_supported() {
        // IB_RATE_10_GBPS (3) + 5 = 8; IB_RATE_40_GBPS (7) + 5 = 12.
        assert_eq!(static_rate(3, 1 << 8), 8);
        assert_eq!(static_rate(7, 1 << 8), 8);
        assert_eq!(static_rate(7, (1 << 8) | (1 << 12)), 12);
        // Nothing supported: 2.5 Gb/s (7) is the floor.
        assert_eq!(static_rate(7, 0), 7);
        assert_eq!(static_rate(250, 0), 7);
    }

    #[test]
    fn access_flags_as_to_mlx4_access_flags() {
        let all = access::REMOTE_READ | access::REMOTE_WRITE | access::REMOTE_ATOMIC;
        assert_eq!(access_flags(all, 1), BIT_RRE | BIT_RWE | BIT_RAE);
        // No responder resources: only remote writes.
        assert_eq!(access_flags(all, 0), BIT_RWE);
        assert_eq!(access_flags(access::LOCAL_WRITE, 4), 0);
    }
}
