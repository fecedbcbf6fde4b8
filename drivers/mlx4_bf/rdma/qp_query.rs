// SPDX-License-Identifier: GPL-2.0

//! What `query_qp` answers: the attributes of `struct ib_qp_attr`, and the
//! capabilities and signalling of `struct ib_qp_init_attr`. This layer
//! writes them into the core's structures whole: `ib_uverbs_query_qp()`
//! allocates both with `kmalloc()` and copies every field to user space,
//! so each structure is zeroed first and no byte the provider did not set
//! reaches a process.

use kernel::bindings;

use super::attr::{AhAttr, QpCap, QpState};

/// An address vector on a port (`struct rdma_ah_attr` of type IB).
#[derive(Clone, Copy)]
pub(crate) struct PortAh {
    pub(crate) port_num: u8,
    pub(crate) ah: AhAttr,
}

/// A QP's attributes as its device reports them (`ib_query_qp()`).
#[derive(Clone, Copy)]
pub(crate) struct QpQuery {
    pub(crate) state: QpState,
    /// `enum ib_mtu`.
    pub(crate) path_mtu: u32,
    /// `enum ib_mig_state`.
    pub(crate) path_mig_state: u32,
    pub(crate) qkey: u32,
    pub(crate) rq_psn: u32,
    pub(crate) sq_psn: u32,
    pub(crate) dest_qp_num: u32,
    /// `IB_ACCESS_*`.
    pub(crate) qp_access_flags: u32,
    /// `None`: a zeroed address vector (no port).
    pub(crate) ah: Option<PortAh>,
    pub(crate) alt_ah: Option<PortAh>,
    pub(crate) pkey_index: u16,
    pub(crate) alt_pkey_index: u16,
    pub(crate) port_num: u8,
    pub(crate) alt_port_num: u8,
    pub(crate) sq_draining: bool,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) timeout: u8,
    pub(crate) alt_timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    /// Also the init attributes' capabilities.
    pub(crate) cap: QpCap,
    /// Every send completes (`IB_SIGNAL_ALL_WR`), not only those asking.
    pub(crate) sq_sig_all: bool,
    /// The init attributes' `IB_QP_CREATE_*` flags.
    pub(crate) create_flags: u32,
}

fn write_ah(raw: &mut bindings::rdma_ah_attr, a: &Option<PortAh>) {
    *raw = pin_init::zeroed();
    let Some(PortAh { port_num, ah }) = a else {
        return;
    };
    raw.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_IB;
    raw.port_num = u32::from(*port_num);
    raw.sl = ah.sl;
    raw.static_rate = ah.static_rate;
    raw.__bindgen_anon_1.ib = bindings::ib_ah_attr {
        dlid: ah.dlid,
        src_path_bits: ah.src_path_bits,
    };
    if let Some(g) = &ah.grh {
        raw.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        raw.grh.dgid.raw = g.dgid;
        raw.grh.flow_label = g.flow_label;
        raw.grh.sgid_index = g.sgid_index;
        raw.grh.hop_limit = g.hop_limit;
        raw.grh.traffic_class = g.traffic_class;
    }
}

impl QpQuery {
    /// Writes the answer into the core's `attr` and `init`, every byte of
    /// both.
    pub(super) fn write_to(
        &self,
        attr: &mut bindings::ib_qp_attr,
        init: &mut bindings::ib_qp_init_attr,
    ) {
        *attr = pin_init::zeroed();
        *init = pin_init::zeroed();
        attr.qp_state = self.state.raw();
        attr.cur_qp_state = self.state.raw();
        attr.path_mtu = self.path_mtu;
        attr.path_mig_state = self.path_mig_state;
        attr.qkey = self.qkey;
        attr.rq_psn = self.rq_psn;
        attr.sq_psn = self.sq_psn;
        attr.dest_qp_num = self.dest_qp_num;
        attr.qp_access_flags = self.qp_access_flags as i32;
        self.cap.write_to(&mut attr.cap);
        write_ah(&mut attr.ah_attr, &self.ah);
        write_ah(&mut attr.alt_ah_attr, &self.alt_ah);
        attr.pkey_index = self.pkey_index;
        attr.alt_pkey_index = self.alt_pkey_index;
        attr.sq_draining = u8::from(self.sq_draining);
        attr.max_rd_atomic = self.max_rd_atomic;
        attr.max_dest_rd_atomic = self.max_dest_rd_atomic;
        attr.min_rnr_timer = self.min_rnr_timer;
        attr.port_num = u32::from(self.port_num);
        attr.timeout = self.timeout;
        attr.retry_cnt = self.retry_cnt;
        attr.rnr_retry = self.rnr_retry;
        attr.alt_port_num = u32::from(self.alt_port_num);
        attr.alt_timeout = self.alt_timeout;
        self.cap.write_to(&mut init.cap);
        init.create_flags = self.create_flags;
        init.sq_sig_type = if self.sq_sig_all {
            bindings::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            bindings::ib_sig_type_IB_SIGNAL_REQ_WR
        };
    }
}
