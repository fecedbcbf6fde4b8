// SPDX-License-Identifier: GPL-2.0

//! The subnet management queries mlx4_ib sends to its own port through
//! MAD_IFC and what it reads from the answers
//! (drivers/infiniband/hw/mlx4/main.c: `mlx4_ib_query_device()` and
//! `init_node_data()` (NodeInfo), `ib_link_query_port()` (PortInfo),
//! `__mlx4_ib_query_gid()` (PortInfo, GUIDInfo), `__mlx4_ib_query_pkey()`
//! (P_KeyTable)): 256-byte MADs, the SMP's data at byte 64; and which MADs
//! the core hands `process_mad` go to the port's Performance Management
//! Agent (`ib/mad.c:ib_process_mad()`).
//!
//! GUIDs are handed on as the eight bytes on the wire, which is what the
//! RDMA core's `__be64` fields hold.

/// Bytes of a MAD, and where an SMP's attribute data starts.
pub const MAD_SIZE: usize = 256;
pub const SMP_DATA: usize = 64;
pub const SMP_DATA_LEN: usize = 64;

const MAD_STATUS: usize = 4;
const MAD_ATTR_ID: usize = 16;
const MAD_ATTR_MOD: usize = 20;
/// `IB_MGMT_CLASS_SUBN_LID_ROUTED`, `IB_MGMT_METHOD_GET`.
const CLASS_SUBN_LID_ROUTED: u8 = 0x01;
const METHOD_GET: u8 = 0x01;
/// `IB_MGMT_CLASS_PERF_MGMT`, `IB_MGMT_METHOD_SET`.
const CLASS_PERF_MGMT: u8 = 0x04;
const METHOD_SET: u8 = 0x02;
const MAD_CLASS: usize = 1;
const MAD_METHOD: usize = 3;

/// `IB_SMP_ATTR_*`.
pub mod attr {
    pub const NODE_INFO: u16 = 0x0011;
    pub const GUID_INFO: u16 = 0x0014;
    pub const PORT_INFO: u16 = 0x0015;
    pub const PKEY_TABLE: u16 = 0x0016;
}

/// GIDs per GUIDInfo block, P_Keys per P_KeyTable block.
pub const GUIDS_PER_BLOCK: u16 = 8;
pub const PKEYS_PER_BLOCK: u16 = 32;

/// `IB_PORT_EXTENDED_SPEEDS_SUP` of PortInfo's capability mask.
const PORT_EXTENDED_SPEEDS_SUP: u32 = 1 << 14;
/// `enum ib_port_speed`, `enum ib_port_state`.
const IB_SPEED_SDR: u8 = 1;
const IB_SPEED_FDR: u8 = 16;
const IB_SPEED_EDR: u8 = 32;
const IB_PORT_DOWN: u8 = 1;

/// `ib_init_query_mad()` with `attr_id` and `attr_mod`: a LID-routed
/// SubnGet(attribute).
pub fn query(attr_id: u16, attr_mod: u32) -> [u8; MAD_SIZE] {
    let mut mad = [0u8; MAD_SIZE];
    mad[0] = 1; // base_version
    mad[1] = CLASS_SUBN_LID_ROUTED;
    mad[2] = 1; // class_version
    mad[3] = METHOD_GET;
    mad[MAD_ATTR_ID..MAD_ATTR_ID + 2].copy_from_slice(&attr_id.to_be_bytes());
    mad[MAD_ATTR_MOD..MAD_ATTR_MOD + 4].copy_from_slice(&attr_mod.to_be_bytes());
    mad
}

/// Whether `mad` is a Performance Management Get or Set, which mlx4_ib
/// hands to the firmware's agent through MAD_IFC (sysfs' port counters
/// send them: `core/sysfs.c:get_perf_mad()`).
pub fn is_pma_query(mad: &[u8; MAD_SIZE]) -> bool {
    mad[MAD_CLASS] == CLASS_PERF_MGMT && matches!(mad[MAD_METHOD], METHOD_GET | METHOD_SET)
}

/// The MAD status of an answer (0: the attribute is there).
pub fn status(mad: &[u8; MAD_SIZE]) -> u16 {
    u16::from_be_bytes([mad[MAD_STATUS], mad[MAD_STATUS + 1]])
}

/// The attribute data of an answer.
pub fn data(mad: &[u8; MAD_SIZE]) -> &[u8; SMP_DATA_LEN] {
    mad[SMP_DATA..SMP_DATA + SMP_DATA_LEN]
        .try_into()
        .unwrap_or(&[0; SMP_DATA_LEN])
}

fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

fn guid(d: &[u8], at: usize) -> [u8; 8] {
    let mut g = [0u8; 8];
    g.copy_from_slice(&d[at..at + 8]);
    g
}

/// What NodeInfo gives `mlx4_ib_query_device()` and `init_node_data()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    pub sys_image_guid: [u8; 8],
    pub node_guid: [u8; 8],
    /// `props->hw_ver`.
    pub hw_ver: u32,
    /// `props->vendor_id`: 24 bits (0x02c9 for Mellanox).
    pub vendor_id: u32,
}

pub fn node_info(d: &[u8; SMP_DATA_LEN]) -> NodeInfo {
    NodeInfo {
        sys_image_guid: guid(d, 4),
        node_guid: guid(d, 12),
        hw_ver: be32(d, 32),
        vendor_id: be32(d, 36) & 0xff_ffff,
    }
}

/// What `ib_link_query_port()` reads from PortInfo (`struct
/// ib_port_attr`'s fields of the same names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortAttr {
    pub lid: u16,
    pub lmc: u8,
    pub sm_lid: u16,
    pub sm_sl: u8,
    /// `enum ib_port_state` (4: ACTIVE).
    pub state: u8,
    pub phys_state: u8,
    pub port_cap_flags: u32,
    pub bad_pkey_cntr: u16,
    pub qkey_viol_cntr: u16,
    pub active_width: u8,
    /// `enum ib_port_speed`.
    pub active_speed: u8,
    /// `enum ib_mtu`.
    pub max_mtu: u8,
    pub active_mtu: u8,
    pub subnet_timeout: u8,
    pub max_vl_num: u8,
    pub init_type_reply: u8,
    /// The port's GID prefix (the first half of every GID).
    pub gid_prefix: [u8; 8],
}

/// PortInfo as `ib_link_query_port()` decodes it, extended speeds
/// (FDR, EDR) included; its FDR-10 query (ExtendedPortInfo of a QDR
/// port) is not made.
pub fn port_info(d: &[u8; SMP_DATA_LEN]) -> PortAttr {
    let mut p = PortAttr {
        lid: be16(d, 16),
        lmc: d[34] & 0x7,
        sm_lid: be16(d, 18),
        sm_sl: d[36] & 0xf,
        state: d[32] & 0xf,
        phys_state: d[33] >> 4,
        port_cap_flags: be32(d, 20),
        bad_pkey_cntr: be16(d, 46),
        qkey_viol_cntr: be16(d, 48),
        active_width: d[31] & 0xf,
        active_speed: d[35] >> 4,
        max_mtu: d[41] & 0xf,
        active_mtu: d[36] >> 4,
        subnet_timeout: d[51] & 0x1f,
        max_vl_num: d[37] >> 4,
        init_type_reply: d[41] >> 4,
        gid_prefix: guid(d, 8),
    };
    if p.port_cap_flags & PORT_EXTENDED_SPEEDS_SUP != 0 {
        match d[62] >> 4 {
            1 => p.active_speed = IB_SPEED_FDR,
            2 => p.active_speed = IB_SPEED_EDR,
            _ => {}
        }
    }
    // "Avoid wrong speed value returned by FW if the IB link is down."
    if p.state == IB_PORT_DOWN {
        p.active_speed = IB_SPEED_SDR;
    }
    p
}

/// GID `index`: the port's prefix, then GUID `index % 8` of the GUIDInfo
/// block `index / 8` (`__mlx4_ib_query_gid()`).
pub fn gid(prefix: [u8; 8], guid_block: &[u8; SMP_DATA_LEN], index: u16) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&prefix);
    let at = usize::from(index % GUIDS_PER_BLOCK) * 8;
    g[8..].copy_from_slice(&guid_block[at..at + 8]);
    g
}

/// P_Key `index` of the P_KeyTable block `index / 32`
/// (`__mlx4_ib_query_pkey()`).
pub fn pkey(block: &[u8; SMP_DATA_LEN], index: u16) -> u16 {
    be16(block, usize::from(index % PKEYS_PER_BLOCK) * 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pma_gets_and_sets_go_to_the_agent() {
        let mut mad = [0u8; MAD_SIZE];
        mad[MAD_CLASS] = CLASS_PERF_MGMT;
        for (method, to_agent) in [(1, true), (2, true), (0x81, false), (5, false)] {
            mad[MAD_METHOD] = method;
            assert_eq!(is_pma_query(&mad), to_agent, "method {method:#x}");
        }
        // A subnet management query is not the PMA's.
        assert!(!is_pma_query(&query(attr::NODE_INFO, 0)));
    }

    #[test]
    fn queries_are_lid_routed_subn_gets() {
        let m = query(attr::PORT_INFO, 1);
        assert_eq!(&m[..4], &[1, 1, 1, 1]);
        assert_eq!(&m[16..18], &[0x00, 0x15]);
        assert_eq!(&m[20..24], &[0, 0, 0, 1]);
        assert!(m[24..].iter().all(|&b| b == 0));
        assert_eq!(status(&m), 0);
    }

    /// The model's agent (tools/mlx4-model/src/firmware/mad.rs).
    #[test]
    fn node_info_fields() {
        let mut d = [0u8; 64];
        d[4..12].copy_from_slice(&0x0002_c903_00b1_0000u64.to_be_bytes());
        d[12..20].copy_from_slice(&0x0002_c903_00b1_0000u64.to_be_bytes());
        d[32..36].copy_from_slice(&1u32.to_be_bytes());
        d[37..40].copy_from_slice(&[0x00, 0x02, 0xc9]);
        let n = node_info(&d);
        assert_eq!(n.vendor_id, 0x02c9);
        assert_eq!(n.hw_ver, 1);
        assert_eq!(n.node_guid, [0x00, 0x02, 0xc9, 0x03, 0x00, 0xb1, 0, 0]);
    }

    #[test]
    fn port_info_fields() {
        let mut d = [0u8; 64];
        d[8..16].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
        d[16..18].copy_from_slice(&1u16.to_be_bytes());
        d[18..20].copy_from_slice(&1u16.to_be_bytes());
        d[20..24].copy_from_slice(&0x0251_0868u32.to_be_bytes());
        d[31] = 2; // 4x
        d[32] = 0x04; // ACTIVE
        d[33] = 0x50; // LinkUp
        d[35] = 0x40; // QDR
        d[36] = 0x50; // MTU 4096
        d[37] = 0x40; // VL0-7
        d[41] = 0x05;
        d[51] = 18;
        let p = port_info(&d);
        assert_eq!((p.lid, p.sm_lid, p.state, p.phys_state), (1, 1, 4, 5));
        assert_eq!((p.active_mtu, p.max_mtu, p.max_vl_num), (5, 5, 4));
        assert_eq!((p.active_width, p.active_speed), (2, 4));
        assert_eq!(p.subnet_timeout, 18);
        assert_eq!(p.gid_prefix, [0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
        // Down: SDR whatever the firmware says.
        d[32] = 1;
        assert_eq!(port_info(&d).active_speed, 1);
        // Extended speeds: FDR.
        d[32] = 4;
        d[20..24].copy_from_slice(&(0x0251_0868u32 | 1 << 14).to_be_bytes());
        d[62] = 0x10;
        assert_eq!(port_info(&d).active_speed, 16);
    }

    #[test]
    fn gids_and_pkeys_from_their_blocks() {
        let mut block = [0u8; 64];
        block[8..16].copy_from_slice(&[9; 8]);
        let g = gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0], &block, 9);
        assert_eq!(&g[..8], &[0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&g[8..], &[9; 8]);
        let mut t = [0u8; 64];
        t[0..2].copy_from_slice(&0xffffu16.to_be_bytes());
        assert_eq!(pkey(&t, 0), 0xffff);
        assert_eq!(pkey(&t, 32), 0xffff);
        assert_eq!(pkey(&t, 1), 0);
    }
}
