//! MAD_IFC: the port's subnet management agent answers
//! the SMPs mlx4_core and mlx4_ib send through the command interface
//! (`ib/mad.c:mlx4_MAD_IFC`, `core/port.c:mlx4_get_port_ib_caps`): in
//! mailbox a 256-byte MAD, out mailbox the response, data at +64. One IB
//! port, ACTIVE, with a LID as if a subnet manager had configured it.
//! PerfMgmt MADs go to the performance agent (`pma`) instead.

use super::caps::{NODE_GUID, PORT1_GUID};
use crate::bytes::{be16, be32, put_be16, put_be32, put_be64};

pub const MAD_SIZE: usize = 256;
const DATA: usize = 64;
/// Subnet management classes: LID-routed and directed route.
const CLASS_SUBN_LID: u8 = 0x01;
const CLASS_SUBN_DR: u8 = 0x81;
const METHOD_GET: u8 = 0x01;
const METHOD_GET_RESP: u8 = 0x81;
/// MAD status: unsupported method/attribute combination.
const STATUS_UNSUPPORTED: u16 = 0x000c;

pub mod attr {
    pub const NODE_DESC: u16 = 0x0010;
    pub const NODE_INFO: u16 = 0x0011;
    pub const GUID_INFO: u16 = 0x0014;
    pub const PORT_INFO: u16 = 0x0015;
    pub const PKEY_TABLE: u16 = 0x0016;
    pub const SL_TO_VL: u16 = 0x0017;
}

/// The LIDs the "subnet manager" gave: ours and its own.
pub const LID: u16 = 1;
pub const SM_LID: u16 = 1;
/// PortInfo capability mask: a ConnectX-3's (rdma-core pull request 847,
/// 0x02594868) less bits 14 (extended speeds) and 15 (CapabilityMask2),
/// whose queries the model does not answer.
pub const CAP_MASK: u32 = 0x0251_0868;
pub const NODE_DESC: &[u8] = b"MT4099 ConnectX3 Mellanox Technologies";
/// PortInfo's GID prefix (link-local).
pub const GID_PREFIX: u64 = 0xfe80_0000_0000_0000;
/// The default P_Key, full membership: the P_Key table's entry 0.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// The port's GUID at `index` (GUIDInfo): the port GUID at 0, 0 (none)
/// elsewhere. Its GID at `index` is `GID_PREFIX` then this GUID
/// (`ib/main.c:__mlx4_ib_query_gid`).
pub fn guid(index: u8) -> u64 {
    if index == 0 {
        PORT1_GUID
    } else {
        0
    }
}

/// The port's P_Key at `index` (PKeyTable): the default P_Key at 0, 0
/// (invalid) elsewhere.
pub fn pkey(index: u8) -> u16 {
    if index == 0 {
        DEFAULT_PKEY
    } else {
        0
    }
}

/// The response to `mad` (GetResp, or the request with MAD status
/// "unsupported" for what the agent does not answer).
pub fn respond(mad: &[u8]) -> [u8; MAD_SIZE] {
    let mut out = [0u8; MAD_SIZE];
    out.copy_from_slice(&mad[..MAD_SIZE]);
    let class = mad[1];
    let attr_id = be16(mad, 16);
    let attr_mod = be32(mad, 20);
    out[3] = METHOD_GET_RESP;
    // Directed route: the D bit (status bit 15) marks the response.
    let dr = if class == CLASS_SUBN_DR { 0x8000 } else { 0 };
    put_be16(&mut out, 4, dr);
    out[DATA..DATA + 64].fill(0);
    let ok = (class == CLASS_SUBN_LID || class == CLASS_SUBN_DR)
        && mad[3] == METHOD_GET
        && fill(&mut out[DATA..DATA + 64], attr_id, attr_mod);
    if !ok {
        put_be16(&mut out, 4, dr | STATUS_UNSUPPORTED);
    }
    out
}

/// The attribute's data; false for an attribute (or block) there is none
/// of.
fn fill(d: &mut [u8], attr_id: u16, attr_mod: u32) -> bool {
    match attr_id {
        // ib/main.c:init_node_data
        attr::NODE_DESC => d[..NODE_DESC.len()].copy_from_slice(NODE_DESC),
        // ib/main.c:init_node_data, mlx4_ib_query_device
        attr::NODE_INFO => {
            d[0] = 1; // base version
            d[1] = 1; // class version
            d[2] = 1; // node type: channel adapter
            d[3] = 1; // ports
            put_be64(d, 4, NODE_GUID); // system image GUID
            put_be64(d, 12, NODE_GUID);
            put_be64(d, 20, PORT1_GUID);
            put_be16(d, 28, 128); // partition cap
            put_be16(d, 30, 0x1003); // device id
            put_be32(d, 32, 1); // revision
            d[36] = 1; // local port
            d[37..40].copy_from_slice(&[0x00, 0x02, 0xc9]); // vendor id
        }
        // ib/main.c:__mlx4_ib_query_gid: block attr_mod of 8 GUIDs.
        attr::GUID_INFO => {
            if attr_mod != 0 {
                return attr_mod < 16;
            }
            put_be64(d, 0, guid(0));
        }
        // ib/main.c:ib_link_query_port, core/port.c:mlx4_get_port_ib_caps
        attr::PORT_INFO => {
            if attr_mod > 1 {
                return false;
            }
            put_be64(d, 8, GID_PREFIX);
            put_be16(d, 16, LID);
            put_be16(d, 18, SM_LID);
            put_be32(d, 20, CAP_MASK);
            d[28] = 1; // local port
            d[29] = 3; // link width enabled: 1x, 4x
            d[30] = 3; // link width supported
            d[31] = 2; // link width active: 4x
            d[32] = (3 << 4) | 4; // speeds SDR, DDR supported; state ACTIVE
            d[33] = (5 << 4) | 2; // phys state LinkUp; down default Polling
            d[34] = 0; // LMC 0
            d[35] = (2 << 4) | 3; // speed active DDR; enabled SDR, DDR
            d[36] = 5 << 4; // neighbour MTU 4096; master SM SL 0
            d[37] = 4 << 4; // VL cap VL0-7
            d[41] = 5; // MTU cap 4096
            d[51] = 18; // subnet timeout
        }
        // ib/main.c:__mlx4_ib_query_pkey: block attr_mod of 32 P_Keys.
        attr::PKEY_TABLE => {
            if attr_mod != 0 {
                return attr_mod < 4;
            }
            put_be16(d, 0, pkey(0));
        }
        // ib/main.c:mlx4_ib_query_sl2vl: all SLs on VL 0.
        attr::SL_TO_VL => {}
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::be64;

    fn smp(attr_id: u16, attr_mod: u32) -> [u8; MAD_SIZE] {
        let mut m = [0u8; MAD_SIZE];
        m[0] = 1;
        m[1] = CLASS_SUBN_LID;
        m[2] = 1;
        m[3] = METHOD_GET;
        put_be64(&mut m, 8, 0x1234); // transaction id
        put_be16(&mut m, 16, attr_id);
        put_be32(&mut m, 20, attr_mod);
        m
    }

    #[test]
    fn node_and_port_as_mlx4_ib_reads_them() {
        let r = respond(&smp(attr::NODE_INFO, 0));
        assert_eq!(
            (r[3], be16(&r, 4), be64(&r, 8)),
            (METHOD_GET_RESP, 0, 0x1234)
        );
        let d = &r[DATA..];
        assert_eq!(
            (d[2], d[3], be64(d, 12), be16(d, 30)),
            (1, 1, NODE_GUID, 0x1003)
        );
        assert_eq!(&d[37..40], &[0, 2, 0xc9]);
        let d = &respond(&smp(attr::PORT_INFO, 1))[DATA..];
        assert_eq!((be16(d, 16), be32(d, 20)), (LID, CAP_MASK));
        assert_eq!((d[32] & 0xf, d[33] >> 4, d[41] & 0xf), (4, 5, 5));
        let d = &respond(&smp(attr::PKEY_TABLE, 0))[DATA..];
        assert_eq!(be16(d, 0), 0xffff);
        let d = &respond(&smp(attr::GUID_INFO, 0))[DATA..];
        assert_eq!(be64(d, 0), PORT1_GUID);
        assert!(respond(&smp(attr::NODE_DESC, 0))[DATA..].starts_with(b"MT4099"));
    }

    #[test]
    fn unsupported_attributes_methods_and_classes() {
        assert_eq!(be16(&respond(&smp(0xff90, 0)), 4), STATUS_UNSUPPORTED);
        assert_eq!(
            be16(&respond(&smp(attr::PKEY_TABLE, 4)), 4),
            STATUS_UNSUPPORTED
        );
        let mut set = smp(attr::PORT_INFO, 0);
        set[3] = 0x02;
        assert_eq!(be16(&respond(&set), 4), STATUS_UNSUPPORTED);
        let mut perf = smp(attr::PORT_INFO, 0);
        perf[1] = 0x04;
        assert_eq!(be16(&respond(&perf), 4), STATUS_UNSUPPORTED);
        let mut dr = smp(attr::NODE_INFO, 0);
        dr[1] = CLASS_SUBN_DR;
        assert_eq!(be16(&respond(&dr), 4), 0x8000);
    }
}
