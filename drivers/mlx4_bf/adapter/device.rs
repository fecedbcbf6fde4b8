// SPDX-License-Identifier: GPL-2.0

//! What the RDMA provider reports of the device: the capabilities
//! QUERY_FW, QUERY_DEV_CAP, QUERY_PORT and this driver's profile give
//! (`ib_device::DevCaps`, from which `ib_device_attr`, the ucontext answer
//! and the QP limits follow), and what port 1's subnet management agent
//! answers (`mad`): NodeInfo, PortInfo, GIDs and P_Keys, the MAD_IFC
//! queries of mlx4_ib's `mlx4_ib_query_device()`, `ib_link_query_port()`,
//! `__mlx4_ib_query_gid()` and `__mlx4_ib_query_pkey()`.

use kernel::{prelude::*, sync::atomic::Relaxed};

use super::Adapter;
use crate::{
    geometry::{CQE_SIZE, FIRST_PROVIDER_CQ},
    hw::firmware::{dev_cap, icm::LOG_RDMARC_PER_QP, port},
    ib_device::{self, DevCaps},
    identity,
    mad::{self, NodeInfo, PortAttr},
};

impl Adapter {
    /// Port 1's GID and P_Key table sizes: QUERY_PORT the first time,
    /// kept (`caps.gid_table_len`, `pkey_table_len`).
    fn port_tables(&self) -> Result<(u16, u16)> {
        let kept = self.port_tables.load(Relaxed);
        if kept != 0 {
            return Ok(((kept >> 16) as u16, kept as u16));
        }
        let fw = &*self.firmware;
        let (gids, pkeys) = port::query_caps(
            &fw.cmd,
            &mut fw.cmd.lock(),
            fw.fw.cmd_if_rev,
            &fw.dev_cap.rdma,
        )?;
        self.port_tables
            .store((u32::from(gids) << 16) | u32::from(pkeys), Relaxed);
        Ok((gids, pkeys))
    }

    /// The device's capabilities as mlx4_core's `caps` holds them, and the
    /// objects the provider may have.
    pub(crate) fn device_caps(&self) -> Result<DevCaps> {
        let (gid_table_len, pkey_table_len) = self.port_tables()?;
        let fw = &*self.firmware;
        let (c, r) = (&fw.dev_cap, &fw.dev_cap.rdma);
        let pow2 = |log: u8| 1u32.checked_shl(log.into()).unwrap_or(0);
        let srq = self.srq_limits();
        Ok(DevCaps {
            fw_ver: ib_device::fw_ver(fw.fw.major, fw.fw.minor, fw.fw.subminor),
            max_qp_sz: pow2(c.log_max_qp_sz),
            max_sq_sg: r.max_sq_sg.into(),
            max_rq_sg: r.max_rq_sg.into(),
            max_sq_desc_sz: c.max_desc_sz_sq.into(),
            max_cq_sz: pow2(c.log_max_cq_sz),
            max_requester_per_qp: r.max_requester_per_qp,
            max_qp_dest_rdma: pow2(LOG_RDMARC_PER_QP),
            local_ca_ack_delay: r.local_ca_ack_delay,
            log_max_msg: r.log_max_msg,
            stat_rate_support: r.stat_rate_support,
            min_page_sz: c.min_page_sz,
            flags: r.flags,
            max_counters: r.max_counters,
            num_ports: r.num_ports,
            gid_table_len,
            pkey_table_len,
            num_qps: fw.profile.num_qps,
            bf_reg_size: self.caps.bf_reg_size,
            bf_regs_per_page: c.bf_regs_per_page,
            cqe_size: CQE_SIZE as u32,
            quota_qps: self.user_qpns.lock().count(),
            quota_cqs: (fw.cq_slots() - FIRST_PROVIDER_CQ) as u32,
            quota_mrs: self.mrs.lock().capacity() as u32,
            quota_pds: self.pds.lock().count(),
            quota_srqs: self.srq_quota(),
            max_srq_wqes: srq.max_srq_wqes,
            max_srq_sge: srq.max_srq_sge,
        })
    }

    /// Attribute `attr_id` (block `attr_mod`) from port 1's agent.
    fn smp(&self, attr_id: u16, attr_mod: u32) -> Result<[u8; mad::SMP_DATA_LEN]> {
        let fw = &*self.firmware;
        port::smp(&fw.cmd, &mut fw.cmd.lock(), attr_id, attr_mod)
    }

    /// Completion vectors (`Eqs::comp_vectors`).
    pub(crate) fn comp_vectors(&self) -> u32 {
        self.firmware.eqs.comp_vectors()
    }

    /// NodeInfo: the GUIDs, vendor and hardware version.
    pub(crate) fn node_info(&self) -> Result<NodeInfo> {
        Ok(mad::node_info(&self.smp(mad::attr::NODE_INFO, 0)?))
    }

    /// A Performance Management MAD to port 1's agent, its answer
    /// (`ib/mad.c:ib_process_mad()` forwards them to the firmware).
    pub(crate) fn perf_mad(&self, input: &[u8; mad::MAD_SIZE]) -> Result<[u8; mad::MAD_SIZE]> {
        if !mad::is_pma_query(input) {
            return Err(EINVAL);
        }
        let fw = &*self.firmware;
        port::mad_ifc(&fw.cmd, &mut fw.cmd.lock(), input)
    }

    /// The board id QUERY_ADAPTER reports (mlx4_core's `dev->board_id`).
    pub(crate) fn board_id(&self) -> Result<[u8; identity::BOARD_ID_LEN]> {
        dev_cap::query_board_id(&self.firmware.cmd)
    }

    /// Port 1's PortInfo (`ib_link_query_port()`); its table sizes and
    /// message size are [`Adapter::device_caps`]'s.
    pub(crate) fn port_attr(&self) -> Result<PortAttr> {
        Ok(mad::port_info(&self.smp(mad::attr::PORT_INFO, port::PORT)?))
    }

    /// GID `index` of port 1: PortInfo's prefix and a GUIDInfo block.
    pub(crate) fn query_gid(&self, index: u16) -> Result<[u8; 16]> {
        if index >= self.port_tables()?.0 {
            return Err(EINVAL);
        }
        let prefix = self.port_attr()?.gid_prefix;
        let block = u32::from(index / mad::GUIDS_PER_BLOCK);
        Ok(mad::gid(
            prefix,
            &self.smp(mad::attr::GUID_INFO, block)?,
            index,
        ))
    }

    /// P_Key `index` of port 1, from a P_KeyTable block.
    pub(crate) fn query_pkey(&self, index: u16) -> Result<u16> {
        if index >= self.port_tables()?.1 {
            return Err(EINVAL);
        }
        let block = u32::from(index / mad::PKEYS_PER_BLOCK);
        Ok(mad::pkey(&self.smp(mad::attr::PKEY_TABLE, block)?, index))
    }
}
