// SPDX-License-Identifier: GPL-2.0

//! The verbs' structures as plain Rust values: what a provider reports of
//! its device and ports, and what a CQ, a QP and a QP's modification ask of
//! it. The ops (`ops.rs`) convert them from and to the core's structs.

use kernel::{bindings, prelude::*};

use super::{
    object::{Cq, Srq},
    Driver,
};

/// `struct ib_device_attr`: what `query_device` reports (the rest zero).
#[derive(Default, Clone, Copy)]
pub(crate) struct DeviceAttr {
    /// `(major << 32) | (minor << 16) | subminor`, as mlx4's `fw_ver`.
    pub(crate) fw_ver: u64,
    pub(crate) sys_image_guid: u64,
    pub(crate) max_mr_size: u64,
    pub(crate) page_size_cap: u64,
    pub(crate) vendor_id: u32,
    pub(crate) vendor_part_id: u32,
    pub(crate) hw_ver: u32,
    pub(crate) device_cap_flags: u64,
    pub(crate) max_qp: u32,
    pub(crate) max_qp_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_sge_rd: u32,
    pub(crate) max_cq: u32,
    pub(crate) max_cqe: u32,
    pub(crate) max_mr: u32,
    pub(crate) max_pd: u32,
    pub(crate) max_qp_rd_atom: u32,
    pub(crate) max_qp_init_rd_atom: u32,
    pub(crate) max_res_rd_atom: u32,
    pub(crate) max_srq: u32,
    pub(crate) max_srq_wr: u32,
    pub(crate) max_srq_sge: u32,
    pub(crate) max_pkeys: u16,
    pub(crate) local_ca_ack_delay: u8,
    /// `enum ib_atomic_cap`.
    pub(crate) atomic_cap: u32,
}

impl DeviceAttr {
    pub(super) fn write_to(&self, raw: &mut bindings::ib_device_attr) {
        let int = |v: u32| v.min(i32::MAX as u32) as i32;
        raw.fw_ver = self.fw_ver;
        raw.sys_image_guid = self.sys_image_guid.to_be();
        raw.max_mr_size = self.max_mr_size;
        raw.page_size_cap = self.page_size_cap;
        raw.vendor_id = self.vendor_id;
        raw.vendor_part_id = self.vendor_part_id;
        raw.hw_ver = self.hw_ver;
        raw.device_cap_flags = self.device_cap_flags;
        raw.max_qp = int(self.max_qp);
        raw.max_qp_wr = int(self.max_qp_wr);
        raw.max_send_sge = int(self.max_send_sge);
        raw.max_recv_sge = int(self.max_recv_sge);
        raw.max_sge_rd = int(self.max_sge_rd);
        raw.max_cq = int(self.max_cq);
        raw.max_cqe = int(self.max_cqe);
        raw.max_mr = int(self.max_mr);
        raw.max_pd = int(self.max_pd);
        raw.max_qp_rd_atom = int(self.max_qp_rd_atom);
        raw.max_qp_init_rd_atom = int(self.max_qp_init_rd_atom);
        raw.max_res_rd_atom = int(self.max_res_rd_atom);
        raw.max_srq = int(self.max_srq);
        raw.max_srq_wr = int(self.max_srq_wr);
        raw.max_srq_sge = int(self.max_srq_sge);
        raw.max_pkeys = self.max_pkeys;
        raw.local_ca_ack_delay = self.local_ca_ack_delay;
        raw.atomic_cap = self.atomic_cap;
        raw.masked_atomic_cap = self.atomic_cap;
    }
}

/// `enum ib_port_state`.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PortState {
    #[default]
    Down,
    Init,
    Armed,
    Active,
}

/// `struct ib_port_attr`: what `query_port` reports.
#[derive(Default, Clone, Copy)]
pub(crate) struct PortAttr {
    pub(crate) state: PortState,
    /// `enum ib_port_phys_state` (5: LinkUp).
    pub(crate) phys_state: u8,
    /// `enum ib_mtu` (1: 256 .. 5: 4096).
    pub(crate) max_mtu: u32,
    pub(crate) active_mtu: u32,
    pub(crate) gid_tbl_len: u32,
    pub(crate) pkey_tbl_len: u16,
    pub(crate) port_cap_flags: u32,
    pub(crate) max_msg_sz: u32,
    pub(crate) lid: u32,
    pub(crate) sm_lid: u32,
    pub(crate) lmc: u8,
    pub(crate) sm_sl: u8,
    pub(crate) max_vl_num: u8,
    pub(crate) subnet_timeout: u8,
    pub(crate) init_type_reply: u8,
    pub(crate) active_width: u8,
    pub(crate) active_speed: u16,
    pub(crate) bad_pkey_cntr: u32,
    pub(crate) qkey_viol_cntr: u32,
}

impl PortAttr {
    pub(super) fn write_to(&self, raw: &mut bindings::ib_port_attr) {
        raw.state = match self.state {
            PortState::Down => bindings::ib_port_state_IB_PORT_DOWN,
            PortState::Init => bindings::ib_port_state_IB_PORT_INIT,
            PortState::Armed => bindings::ib_port_state_IB_PORT_ARMED,
            PortState::Active => bindings::ib_port_state_IB_PORT_ACTIVE,
        };
        raw.phys_state = self.phys_state;
        raw.max_mtu = self.max_mtu;
        raw.active_mtu = self.active_mtu;
        raw.gid_tbl_len = self.gid_tbl_len as i32;
        raw.pkey_tbl_len = self.pkey_tbl_len;
        raw.port_cap_flags = self.port_cap_flags;
        raw.max_msg_sz = self.max_msg_sz;
        raw.lid = self.lid;
        raw.sm_lid = self.sm_lid;
        raw.lmc = self.lmc;
        raw.sm_sl = self.sm_sl;
        raw.max_vl_num = self.max_vl_num;
        raw.subnet_timeout = self.subnet_timeout;
        raw.init_type_reply = self.init_type_reply;
        raw.active_width = self.active_width;
        raw.active_speed = self.active_speed;
        raw.bad_pkey_cntr = self.bad_pkey_cntr;
        raw.qkey_viol_cntr = self.qkey_viol_cntr;
    }
}

/// `struct ib_port_immutable`.
#[derive(Clone, Copy)]
pub(crate) struct PortImmutable {
    pub(crate) pkey_tbl_len: u32,
    pub(crate) gid_tbl_len: u32,
    /// `RDMA_CORE_*` capability bits.
    pub(crate) core_cap_flags: u32,
    /// 0: no MAD agent on the port.
    pub(crate) max_mad_size: u32,
}

/// `RDMA_CORE_CAP_PROT_IB`: an InfiniBand port, without the MAD, CM and SA
/// capabilities of `RDMA_CORE_PORT_IBA_IB`.
pub(crate) const CORE_CAP_PROT_IB: u32 = bindings::RDMA_CORE_CAP_PROT_IB;

/// `struct ib_cq_init_attr`.
#[derive(Clone, Copy)]
pub(crate) struct CqInit {
    /// Entries asked for.
    pub(crate) entries: u32,
    /// `IB_UVERBS_CQ_FLAGS_*`.
    pub(crate) flags: u32,
    /// The completion vector, below the device's `comp_vectors` (the core
    /// refuses others).
    pub(crate) comp_vector: u32,
}

/// `enum ib_qp_type`, the ones a provider may see.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum QpType {
    Rc,
    Uc,
    Ud,
    /// Anything else (SMI, GSI, raw packet, XRC, driver-specific).
    Other(u32),
}

impl QpType {
    pub(super) fn from_raw(v: u32) -> Self {
        match v {
            bindings::ib_qp_type_IB_QPT_RC => QpType::Rc,
            bindings::ib_qp_type_IB_QPT_UC => QpType::Uc,
            bindings::ib_qp_type_IB_QPT_UD => QpType::Ud,
            other => QpType::Other(other),
        }
    }
}

/// `struct ib_qp_cap`.
#[derive(Default, Clone, Copy)]
pub(crate) struct QpCap {
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline_data: u32,
}

impl QpCap {
    pub(super) fn from_raw(raw: &bindings::ib_qp_cap) -> Self {
        QpCap {
            max_send_wr: raw.max_send_wr,
            max_recv_wr: raw.max_recv_wr,
            max_send_sge: raw.max_send_sge,
            max_recv_sge: raw.max_recv_sge,
            max_inline_data: raw.max_inline_data,
        }
    }

    pub(super) fn write_to(&self, raw: &mut bindings::ib_qp_cap) {
        raw.max_send_wr = self.max_send_wr;
        raw.max_recv_wr = self.max_recv_wr;
        raw.max_send_sge = self.max_send_sge;
        raw.max_recv_sge = self.max_recv_sge;
        raw.max_inline_data = self.max_inline_data;
    }
}

/// `struct ib_srq_attr`: a shared receive queue's size and limit.
#[derive(Default, Clone, Copy)]
pub(crate) struct SrqAttr {
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
    pub(crate) srq_limit: u32,
}

impl SrqAttr {
    pub(super) fn from_raw(raw: &bindings::ib_srq_attr) -> Self {
        SrqAttr {
            max_wr: raw.max_wr,
            max_sge: raw.max_sge,
            srq_limit: raw.srq_limit,
        }
    }

    pub(super) fn write_to(&self, raw: &mut bindings::ib_srq_attr) {
        raw.max_wr = self.max_wr;
        raw.max_sge = self.max_sge;
        raw.srq_limit = self.srq_limit;
    }
}

/// `enum ib_srq_attr_mask`: what a modify_srq changes.
pub(crate) mod srq_mask {
    use kernel::bindings;
    pub(crate) const MAX_WR: u32 = bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR;
    pub(crate) const LIMIT: u32 = bindings::ib_srq_attr_mask_IB_SRQ_LIMIT;
}

/// What `ibv_rereg_mr()` changes of a region (`enum ib_mr_rereg_flags`),
/// as the core checked it (`ib_uverbs_rereg_mr()`: some change, the
/// rights valid, the new range's offset in its page the new address's).
pub(crate) struct MrChange {
    /// `IB_MR_REREG_TRANS`: the new `(start, length, iova)`.
    pub(crate) range: Option<(u64, u64, u64)>,
    /// `IB_MR_REREG_ACCESS`: the new `IB_ACCESS_*` rights. (A PD change,
    /// `IB_MR_REREG_PD`, is the op's PD: the region's own without one.)
    pub(crate) access: Option<u32>,
}

impl MrChange {
    pub(super) fn from_raw(flags: i32, range: (u64, u64, u64), access: i32) -> Self {
        let has = |f: i32| flags & f != 0;
        MrChange {
            range: has(bindings::ib_mr_rereg_flags_IB_MR_REREG_TRANS as i32).then_some(range),
            access: has(bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS as i32)
                .then_some(access as u32),
        }
    }
}

/// `enum ib_qp_create_flags`: what a QP is created with.
pub(crate) mod qp_create {
    use kernel::bindings;
    /// No multicast the QP sends comes back to it. (The enum is `i32`:
    /// its reserved end is bit 31; this flag is bit 1.)
    pub(crate) const BLOCK_MULTICAST_LOOPBACK: u32 =
        bindings::ib_qp_create_flags_IB_QP_CREATE_BLOCK_MULTICAST_LOOPBACK as u32;
}

/// `struct ib_qp_init_attr` of a user QP.
pub(crate) struct QpInit<'a, T: Driver> {
    pub(crate) qp_type: QpType,
    pub(crate) send_cq: &'a Cq<T>,
    pub(crate) recv_cq: &'a Cq<T>,
    /// The shared receive queue it receives from, if any.
    pub(crate) srq: Option<&'a Srq<T>>,
    /// An XRC domain or an RSS table was given.
    pub(crate) has_xrc_or_rss: bool,
    /// `IB_QP_CREATE_*` flags ([`qp_create`]).
    pub(crate) create_flags: u32,
    /// Every send completes (`IB_SIGNAL_ALL_WR`), not only those asking.
    pub(crate) sq_sig_all: bool,
}

/// `enum ib_qp_state`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum QpState {
    Reset,
    Init,
    Rtr,
    Rts,
    Sqd,
    Sqe,
    Err,
}

impl QpState {
    /// Its `enum ib_qp_state` value.
    pub(crate) fn raw(self) -> u32 {
        match self {
            QpState::Reset => bindings::ib_qp_state_IB_QPS_RESET,
            QpState::Init => bindings::ib_qp_state_IB_QPS_INIT,
            QpState::Rtr => bindings::ib_qp_state_IB_QPS_RTR,
            QpState::Rts => bindings::ib_qp_state_IB_QPS_RTS,
            QpState::Sqd => bindings::ib_qp_state_IB_QPS_SQD,
            QpState::Sqe => bindings::ib_qp_state_IB_QPS_SQE,
            QpState::Err => bindings::ib_qp_state_IB_QPS_ERR,
        }
    }

    /// Whether verbs allow moving a QP of `qp_type` from `self` to `new`
    /// with the attributes of `mask`: given the required ones, none that the
    /// transition does not take (`ib_modify_qp_is_ok()`).
    pub(crate) fn may_move(self, new: QpState, qp_type: QpType, mask: u32) -> bool {
        let ty = match qp_type {
            QpType::Rc => bindings::ib_qp_type_IB_QPT_RC,
            QpType::Uc => bindings::ib_qp_type_IB_QPT_UC,
            QpType::Ud => bindings::ib_qp_type_IB_QPT_UD,
            QpType::Other(t) => t,
        };
        // SAFETY: A pure function of its arguments, on the core's table.
        unsafe { bindings::ib_modify_qp_is_ok(self.raw(), new.raw(), ty, mask) }
    }

    pub(super) fn from_raw(v: u32) -> Result<Self> {
        Ok(match v {
            bindings::ib_qp_state_IB_QPS_RESET => QpState::Reset,
            bindings::ib_qp_state_IB_QPS_INIT => QpState::Init,
            bindings::ib_qp_state_IB_QPS_RTR => QpState::Rtr,
            bindings::ib_qp_state_IB_QPS_RTS => QpState::Rts,
            bindings::ib_qp_state_IB_QPS_SQD => QpState::Sqd,
            bindings::ib_qp_state_IB_QPS_SQE => QpState::Sqe,
            bindings::ib_qp_state_IB_QPS_ERR => QpState::Err,
            _ => return Err(EINVAL),
        })
    }
}

/// The global route header of an address vector (`struct ib_global_route`).
#[derive(Default, Clone, Copy)]
pub(crate) struct Grh {
    pub(crate) dgid: [u8; 16],
    pub(crate) flow_label: u32,
    pub(crate) sgid_index: u8,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
}

/// An InfiniBand address vector (`struct rdma_ah_attr`, IB type).
#[derive(Default, Clone, Copy)]
pub(crate) struct AhAttr {
    pub(crate) dlid: u16,
    pub(crate) sl: u8,
    pub(crate) src_path_bits: u8,
    pub(crate) static_rate: u8,
    pub(crate) grh: Option<Grh>,
}

/// `ib_modify_qp`'s attributes, with the mask of those given (`IB_QP_*`).
#[derive(Clone, Copy)]
pub(crate) struct QpAttr {
    pub(crate) mask: u32,
    /// The state user space says the QP is in (`IB_QP_CUR_STATE`).
    pub(crate) cur_state: Option<QpState>,
    /// The state to move to (`IB_QP_STATE`).
    pub(crate) new_state: Option<QpState>,
    /// `enum ib_mtu`.
    pub(crate) path_mtu: u32,
    pub(crate) qkey: u32,
    pub(crate) rq_psn: u32,
    pub(crate) sq_psn: u32,
    pub(crate) dest_qp_num: u32,
    pub(crate) qp_access_flags: u32,
    pub(crate) pkey_index: u16,
    pub(crate) port_num: u32,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    /// `enum ib_mig_state`.
    pub(crate) path_mig_state: u32,
    pub(crate) en_sqd_async_notify: bool,
    pub(crate) ah: AhAttr,
}

/// `IB_QP_*` attribute mask bits this layer reads.
pub(crate) mod qp_mask {
    use kernel::bindings;
    pub(crate) const STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_STATE;
    pub(crate) const CUR_STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_CUR_STATE;
}

impl QpAttr {
    /// The attributes `raw` gives with `mask`.
    pub(super) fn from_raw(raw: &bindings::ib_qp_attr, mask: u32) -> Result<Self> {
        let cur_state = (mask & qp_mask::CUR_STATE != 0)
            .then(|| QpState::from_raw(raw.cur_qp_state))
            .transpose()?;
        let new_state = (mask & qp_mask::STATE != 0)
            .then(|| QpState::from_raw(raw.qp_state))
            .transpose()?;
        let ah = &raw.ah_attr;
        let grh = (u32::from(ah.ah_flags) & bindings::ib_ah_flags_IB_AH_GRH != 0).then_some(Grh {
            // SAFETY: `ib_gid` is a union of bytes and words: its bytes are
            // always valid.
            dgid: unsafe { ah.grh.dgid.raw },
            flow_label: ah.grh.flow_label,
            sgid_index: ah.grh.sgid_index,
            hop_limit: ah.grh.hop_limit,
            traffic_class: ah.grh.traffic_class,
        });
        // The address vector's IB part, where the core filled it in (an IB
        // port's); an address of another kind (RoCE, OPA) is the provider's
        // to refuse, and reads as none here.
        let ib = if ah.type_ == bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_IB {
            // SAFETY: The member the type says is live; plain integers.
            unsafe { ah.__bindgen_anon_1.ib }
        } else {
            bindings::ib_ah_attr::default()
        };
        Ok(QpAttr {
            mask,
            cur_state,
            new_state,
            path_mtu: raw.path_mtu,
            qkey: raw.qkey,
            rq_psn: raw.rq_psn,
            sq_psn: raw.sq_psn,
            dest_qp_num: raw.dest_qp_num,
            qp_access_flags: raw.qp_access_flags as u32,
            pkey_index: raw.pkey_index,
            port_num: raw.port_num,
            max_rd_atomic: raw.max_rd_atomic,
            max_dest_rd_atomic: raw.max_dest_rd_atomic,
            min_rnr_timer: raw.min_rnr_timer,
            timeout: raw.timeout,
            retry_cnt: raw.retry_cnt,
            rnr_retry: raw.rnr_retry,
            path_mig_state: raw.path_mig_state,
            en_sqd_async_notify: raw.en_sqd_async_notify != 0,
            ah: AhAttr {
                dlid: ib.dlid,
                sl: ah.sl,
                src_path_bits: ib.src_path_bits,
                static_rate: ah.static_rate,
                grh,
            },
        })
    }
}
