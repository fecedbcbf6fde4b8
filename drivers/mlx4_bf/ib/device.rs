// SPDX-License-Identifier: GPL-2.0

//! What the device and its port report: `mlx4_ib_query_device`,
//! `ib_link_query_port`, `mlx4_port_immutable` (`drivers/infiniband/hw/mlx4/
//! main.c`), from the adapter's capabilities (`ib_device::DevCaps`) and
//! port 1's subnet management agent (`Adapter::port_attr`, GIDs, P_Keys).

use kernel::prelude::*;

use super::{user_abi, Provider};
use crate::{
    adapter::Adapter,
    hw::firmware::port::PORT,
    mad,
    rdma::{
        attr::{DeviceAttr, PortAttr, PortImmutable, PortState, CORE_CAP_PROT_IB},
        mad::{MadIn, MadResult, MAD_SIZE},
        udata::Udata,
    },
};

/// The PCI device ID libibverbs and perftest know a ConnectX-3 by
/// (`vendor_part_id`, the function's device ID as mlx4_ib reports it).
const VENDOR_PART_CONNECTX3: u32 = 0x1003;

fn check_port(port: u32) -> Result {
    if port != PORT {
        return Err(EINVAL);
    }
    Ok(())
}

/// `query_device`, with mlx4_ib's extended response when user space asks
/// for it.
pub(super) fn query_device(
    adapter: &Adapter,
    udata: Option<&mut Udata<'_, Provider>>,
) -> Result<DeviceAttr> {
    if let Some(u) = udata {
        if u.has_request() {
            // ib_copy_validate_udata_in_cm(.., reserved, 0): no comp_mask bit.
            let req: user_abi::QueryDevice =
                u.read(core::mem::size_of::<user_abi::QueryDevice>())?;
            if req.comp_mask != 0 {
                return Err(crate::sys::errno::eopnotsupp());
            }
            if req.reserved != 0 {
                return Err(EINVAL);
            }
        }
        if u.out_len() != 0 {
            u.respond(&user_abi::QueryDeviceResp::for_room(u.out_len()))?;
        }
    }
    let node = adapter.node_info()?;
    let a = adapter.device_caps()?.device_attr();
    Ok(DeviceAttr {
        fw_ver: a.fw_ver,
        sys_image_guid: u64::from_be_bytes(node.sys_image_guid),
        max_mr_size: a.max_mr_size,
        page_size_cap: a.page_size_cap,
        vendor_id: node.vendor_id,
        vendor_part_id: VENDOR_PART_CONNECTX3,
        hw_ver: node.hw_ver,
        device_cap_flags: a.device_cap_flags,
        max_qp: a.max_qp,
        max_qp_wr: a.max_qp_wr,
        max_send_sge: a.max_send_sge,
        max_recv_sge: a.max_recv_sge,
        max_sge_rd: a.max_sge_rd,
        max_cq: a.max_cq,
        max_cqe: a.max_cqe,
        max_mr: a.max_mr,
        max_pd: a.max_pd,
        max_qp_rd_atom: a.max_qp_rd_atom,
        max_qp_init_rd_atom: a.max_qp_init_rd_atom,
        max_res_rd_atom: a.max_res_rd_atom,
        max_srq: a.max_srq,
        max_srq_wr: a.max_srq_wr,
        max_srq_sge: a.max_srq_sge,
        max_pkeys: a.max_pkeys,
        local_ca_ack_delay: a.local_ca_ack_delay,
        atomic_cap: a.atomic_cap,
    })
}

/// `query_port` of the IB port, as `ib_link_query_port()`.
pub(super) fn query_port(adapter: &Adapter, port: u32) -> Result<PortAttr> {
    check_port(port)?;
    let p = adapter.port_attr()?;
    let caps = adapter.device_caps()?;
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
        gid_tbl_len: caps.gid_table_len.into(),
        pkey_tbl_len: caps.pkey_table_len,
        port_cap_flags: p.port_cap_flags,
        max_msg_sz: 1u32.checked_shl(caps.log_max_msg.into()).unwrap_or(0),
        lid: p.lid.into(),
        sm_lid: p.sm_lid.into(),
        lmc: p.lmc,
        sm_sl: p.sm_sl,
        max_vl_num: p.max_vl_num,
        subnet_timeout: p.subnet_timeout,
        init_type_reply: p.init_type_reply,
        active_width: p.active_width,
        active_speed: p.active_speed.into(),
        bad_pkey_cntr: p.bad_pkey_cntr.into(),
        qkey_viol_cntr: p.qkey_viol_cntr.into(),
    })
}

/// An InfiniBand port without a MAD agent (see `ib.rs`), with the table
/// sizes QUERY_PORT gives.
pub(super) fn port_immutable(adapter: &Adapter, port: u32) -> Result<PortImmutable> {
    check_port(port)?;
    let caps = adapter.device_caps()?;
    Ok(PortImmutable {
        pkey_tbl_len: caps.pkey_table_len.into(),
        gid_tbl_len: caps.gid_table_len.into(),
        core_cap_flags: CORE_CAP_PROT_IB,
        max_mad_size: 0,
    })
}

pub(super) fn query_gid(adapter: &Adapter, port: u32, index: u32) -> Result<[u8; 16]> {
    check_port(port)?;
    adapter.query_gid(u16::try_from(index)?)
}

pub(super) fn query_pkey(adapter: &Adapter, port: u32, index: u16) -> Result<u16> {
    check_port(port)?;
    adapter.query_pkey(index)
}

/// `process_mad` as mlx4_ib's `ib_process_mad()` does it for the MADs the
/// core hands an IB port: a Performance Management Get or Set goes to the
/// port's agent in the firmware and its answer is the reply; any other is
/// left alone. No MAD agent runs over this device (`max_mad_size` 0), so
/// none comes from the wire.
pub(super) fn process_mad(
    adapter: &Adapter,
    port: u32,
    how: &MadIn,
    input: &[u8; MAD_SIZE],
    out: &mut [u8; MAD_SIZE],
) -> MadResult {
    if how.from_wire || check_port(port).is_err() {
        return MadResult::Failure;
    }
    if !mad::is_pma_query(input) {
        return MadResult::Ignored;
    }
    match adapter.perf_mad(input) {
        Ok(answer) => {
            *out = answer;
            MadResult::Reply
        }
        Err(_) => MadResult::Failure,
    }
}
