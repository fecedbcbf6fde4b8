// SPDX-License-Identifier: GPL-2.0

//! What the device and its port report (`mlx4_ib_query_device`,
//! `ib_link_query_port`, `__mlx4_ib_query_gid`, `__mlx4_ib_query_pkey`,
//! `mlx4_port_immutable` in `drivers/infiniband/hw/mlx4/main.c`): from the
//! port's subnet management agent (MAD_IFC), QUERY_DEV_CAP and QUERY_PORT,
//! with the limits of this driver's profile.

use kernel::{prelude::*, sync::Arc};

use super::user_abi;
use crate::{
    adapter::Adapter,
    hw::firmware::port::{self, PORT},
    rdma::{
        attr::{DeviceAttr, PortAttr, PortImmutable, PortState, CORE_CAP_PROT_IB},
        udata::Udata,
    },
    smp,
};

/// `IB_DEVICE_*` capabilities mlx4_ib reports for a ConnectX-3 on an IB
/// link: CHANGE_PHY_PORT, PORT_ACTIVE_EVENT, SYS_IMAGE_GUID and
/// RC_RNR_NAK_GEN (`mlx4_ib_query_device`), and RAW_IP_CSUM.
const DEVICE_CAP_FLAGS: u64 = kernel::bindings::IB_DEVICE_CHANGE_PHY_PORT as u64
    | kernel::bindings::IB_DEVICE_PORT_ACTIVE_EVENT as u64
    | kernel::bindings::IB_DEVICE_SYS_IMAGE_GUID as u64
    | kernel::bindings::IB_DEVICE_RC_RNR_NAK_GEN as u64
    | kernel::bindings::IB_DEVICE_RAW_IP_CSUM as u64;
/// `MLX4_IB_SQ_MAX_SPARE`: send-queue entries mlx4_ib keeps back.
pub(super) const SQ_MAX_SPARE: u32 = 16;
/// `MLX4_MAX_SGE_RD`.
const MAX_SGE_RD: u32 = 30;
/// The PCI device ID libibverbs and perftest know a ConnectX-3 by.
const VENDOR_PART_CONNECTX3: u32 = 0x1003;

/// NodeInfo: the node and system image GUIDs, the vendor.
pub(super) fn node_info(adapter: &Adapter) -> Result<smp::NodeInfo> {
    let cmd = &adapter.firmware().cmd;
    let data = port::get(cmd, &mut cmd.lock(), smp::ATTR_NODE_INFO, 0)?;
    Ok(smp::NodeInfo::parse(&data))
}

fn port_info(adapter: &Adapter) -> Result<smp::PortInfo> {
    let cmd = &adapter.firmware().cmd;
    let data = port::get(cmd, &mut cmd.lock(), smp::ATTR_PORT_INFO, PORT)?;
    Ok(smp::PortInfo::parse(&data))
}

fn port_caps(adapter: &Adapter) -> Result<port::PortCaps> {
    let cmd = &adapter.firmware().cmd;
    port::caps(cmd, &mut cmd.lock())
}

fn check_port(port: u32) -> Result {
    if port != PORT {
        return Err(EINVAL);
    }
    Ok(())
}

/// `query_device`, with mlx4_ib's extended response when user space asks
/// for it (no core clock: libmlx4 then maps no clock page).
pub(super) fn query_device(adapter: &Arc<Adapter>, udata: Option<&mut Udata<'_>>) -> Result<DeviceAttr> {
    if let Some(u) = udata {
        if u.has_request() {
            // ib_copy_validate_udata_in_cm(.., reserved, 0): no comp_mask bit.
            let req: user_abi::QueryDevice = u.read(core::mem::size_of::<user_abi::QueryDevice>())?;
            if req.comp_mask != 0 {
                return Err(EOPNOTSUPP);
            }
            if req.reserved != 0 {
                return Err(EINVAL);
            }
        }
        if u.out_len() != 0 {
            u.respond(&user_abi::QueryDeviceResp::for_room(u.out_len()))?;
        }
    }
    let node = node_info(adapter)?;
    let caps = port_caps(adapter)?;
    let limits = adapter.provider_limits();
    let fw = &adapter.firmware().fw;
    Ok(DeviceAttr {
        fw_ver: (u64::from(fw.major) << 32) | (u64::from(fw.minor) << 16) | u64::from(fw.subminor),
        sys_image_guid: node.sys_image_guid,
        max_mr_size: u64::MAX,
        page_size_cap: limits.page_size_cap,
        vendor_id: node.vendor_id,
        vendor_part_id: VENDOR_PART_CONNECTX3,
        hw_ver: node.hw_ver,
        device_cap_flags: DEVICE_CAP_FLAGS,
        max_qp: limits.max_qp,
        max_qp_wr: limits.max_wqes - SQ_MAX_SPARE,
        max_send_sge: limits.max_sge,
        max_recv_sge: limits.max_sge,
        max_sge_rd: MAX_SGE_RD,
        max_cq: limits.max_cq,
        max_cqe: limits.max_cqes,
        max_mr: limits.max_mr,
        max_pd: limits.max_pd,
        max_qp_rd_atom: limits.max_qp_dest_rdma,
        max_qp_init_rd_atom: limits.max_qp_init_rdma,
        max_res_rd_atom: limits.max_qp_dest_rdma * limits.max_qp,
        max_pkeys: caps.max_pkeys as u16,
        local_ca_ack_delay: limits.local_ca_ack_delay,
    })
}

/// `query_port` of the IB port, as `ib_link_query_port()`.
pub(super) fn query_port(adapter: &Arc<Adapter>, port: u32) -> Result<PortAttr> {
    check_port(port)?;
    let p = port_info(adapter)?;
    let caps = port_caps(adapter)?;
    Ok(PortAttr {
        state: match p.state {
            2 => PortState::Init,
            3 => PortState::Armed,
            4 => PortState::Active,
            _ => PortState::Down,
        },
        phys_state: p.phys_state,
        max_mtu: p.max_mtu.into(),
        active_mtu: p.active_mtu.into(),
        gid_tbl_len: caps.max_gids,
        pkey_tbl_len: caps.max_pkeys as u16,
        port_cap_flags: p.cap_flags,
        max_msg_sz: adapter.provider_limits().max_msg_sz,
        lid: p.lid.into(),
        sm_lid: p.sm_lid.into(),
        lmc: p.lmc,
        sm_sl: p.sm_sl,
        max_vl_num: p.max_vl_num,
        subnet_timeout: p.subnet_timeout,
        active_width: p.active_width,
        active_speed: p.active_speed,
        bad_pkey_cntr: p.bad_pkey_cntr.into(),
        qkey_viol_cntr: p.qkey_viol_cntr.into(),
    })
}

/// An InfiniBand port without a MAD agent (see `ib.rs`), with the table
/// sizes QUERY_PORT gives.
pub(super) fn port_immutable(adapter: &Arc<Adapter>, port: u32) -> Result<PortImmutable> {
    check_port(port)?;
    let caps = port_caps(adapter)?;
    Ok(PortImmutable {
        pkey_tbl_len: caps.max_pkeys,
        gid_tbl_len: caps.max_gids,
        core_cap_flags: CORE_CAP_PROT_IB,
        max_mad_size: 0,
    })
}

/// GID `index`: the subnet prefix (PortInfo) and GUID `index` (GUIDInfo).
pub(super) fn query_gid(adapter: &Arc<Adapter>, port: u32, index: u32) -> Result<[u8; 16]> {
    check_port(port)?;
    let prefix = port_info(adapter)?.subnet_prefix;
    let cmd = &adapter.firmware().cmd;
    let block = index / smp::GUIDS_PER_BLOCK;
    let guids = port::get(cmd, &mut cmd.lock(), smp::ATTR_GUID_INFO, block)?;
    let mut gid = [0u8; 16];
    gid[..8].copy_from_slice(&prefix.to_be_bytes());
    gid[8..].copy_from_slice(&smp::guid(&guids, index).to_be_bytes());
    Ok(gid)
}

/// P_Key `index` (P_KeyTable).
pub(super) fn query_pkey(adapter: &Arc<Adapter>, port: u32, index: u16) -> Result<u16> {
    check_port(port)?;
    let cmd = &adapter.firmware().cmd;
    let block = u32::from(index) / smp::PKEYS_PER_BLOCK;
    let pkeys = port::get(cmd, &mut cmd.lock(), smp::ATTR_PKEY_TABLE, block)?;
    Ok(smp::pkey(&pkeys, index.into()))
}
