// SPDX-License-Identifier: GPL-2.0

//! A QP's attributes read back from the context QUERY_QP returns, as
//! `mlx4_ib_query_qp()` and `to_rdma_ah_attr()` decode it
//! (`drivers/infiniband/hw/mlx4/qp.c`), for an RC or UC QP on an IB port.
//! A QP in RESET is not queried (mainline answers from `qp->state`).

use super::{
    path::{BIT_RAE, BIT_RRE, BIT_RWE, STAT_RATE_OFFSET},
    AhAttr, Grh, PathFields, QpFields, QpSoft, Service, PM_ARMED, PM_MIGRATED, PM_REARM,
};
use crate::verbs::{access, mig, QpState, VerbsError};

/// `MLX4_QP_STATE_SQ_DRAINING`: SQD with sends still to drain.
const MLX4_SQ_DRAINING: u32 = 7;

/// An address handle as `to_rdma_ah_attr()` gives it: of type IB, on
/// `port_num`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathAh {
    pub port_num: u8,
    pub ah: AhAttr,
}

/// What `mlx4_ib_query_qp()` fills in of `struct ib_qp_attr` (the
/// capabilities, from the QP's sizes, are the caller's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queried {
    pub state: QpState,
    /// `enum ib_mtu`.
    pub path_mtu: u8,
    /// `enum ib_mig_state`.
    pub path_mig_state: u8,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    /// `IB_ACCESS_REMOTE_*`.
    pub qp_access_flags: u32,
    /// `None` where the path names no port of the device (mainline's
    /// zeroed `rdma_ah_attr`).
    pub ah: Option<PathAh>,
    pub alt_ah: Option<PathAh>,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub port_num: u8,
    pub alt_port_num: u8,
    pub sq_draining: bool,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub timeout: u8,
    pub alt_timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
}

impl Queried {
    /// A QP in RESET: its state, nothing else.
    pub const fn reset() -> Self {
        Queried {
            state: QpState::Reset,
            path_mtu: 0,
            path_mig_state: 0,
            qkey: 0,
            rq_psn: 0,
            sq_psn: 0,
            dest_qp_num: 0,
            qp_access_flags: 0,
            ah: None,
            alt_ah: None,
            pkey_index: 0,
            alt_pkey_index: 0,
            port_num: 0,
            alt_port_num: 0,
            sq_draining: false,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            timeout: 0,
            alt_timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
        }
    }
}

/// `to_ib_qp_state()`: `enum mlx4_qp_state` to verbs; `None` for a value
/// mlx4 does not define.
pub const fn state_of(mlx4_state: u32) -> Option<QpState> {
    Some(match mlx4_state {
        0 => QpState::Reset,
        1 => QpState::Init,
        2 => QpState::Rtr,
        3 => QpState::Rts,
        4 => QpState::Sqe,
        5 | MLX4_SQ_DRAINING => QpState::Sqd,
        6 => QpState::Err,
        _ => return None,
    })
}

/// `to_ib_mig_state()`; `None` for mlx4's undefined value 2.
const fn mig_state_of(pm: u32) -> Option<u8> {
    Some(match pm {
        PM_ARMED => mig::ARMED,
        PM_REARM => mig::REARM,
        PM_MIGRATED => mig::MIGRATED,
        _ => return None,
    })
}

/// `to_ib_qp_access_flags()`.
const fn access_of(params2: u32) -> u32 {
    let mut flags = 0;
    if params2 & BIT_RRE != 0 {
        flags |= access::REMOTE_READ;
    }
    if params2 & BIT_RWE != 0 {
        flags |= access::REMOTE_WRITE;
    }
    if params2 & BIT_RAE != 0 {
        flags |= access::REMOTE_ATOMIC;
    }
    flags
}

/// The port a path's `sched_queue` names (bit 6: port 2).
const fn port_of(p: &PathFields) -> u8 {
    if p.sched_queue & 0x40 != 0 {
        2
    } else {
        1
    }
}

/// `to_rdma_ah_attr()` on a device with `num_ports` IB ports.
pub fn ah_of(p: &PathFields, num_ports: u8) -> Option<PathAh> {
    let port_num = port_of(p);
    if port_num > num_ports {
        return None;
    }
    let grh = (p.grh_mylmc & 0x80 != 0).then_some(Grh {
        dgid: p.rgid,
        flow_label: p.tclass_flowlabel & 0xf_ffff,
        sgid_index: p.mgid_index,
        hop_limit: p.hop_limit,
        traffic_class: (p.tclass_flowlabel >> 20) as u8,
    });
    Some(PathAh {
        port_num,
        ah: AhAttr {
            dlid: p.rlid,
            sl: (p.sched_queue >> 2) & 0xf,
            src_path_bits: p.grh_mylmc & 0x7f,
            static_rate: p.static_rate.saturating_sub(STAT_RATE_OFFSET),
            grh,
        },
    })
}

/// The attributes of a QP not in RESET whose context QUERY_QP returned as
/// `f` (primary path included) and `alt` (the alternate path), on a device
/// with `num_ports` ports; `soft` is what the driver keeps of it (the port
/// an INIT QP was given). A state or migration state mlx4 does not define
/// is `Invalid` (mainline returns -1 in the field). A UD QP's paths are no
/// address vectors: mainline decodes them for RC and UC only.
pub fn query(
    f: &QpFields,
    alt: &PathFields,
    soft: &QpSoft,
    service: Service,
    num_ports: u8,
) -> Result<Queried, VerbsError> {
    let mlx4_state = f.flags >> 28;
    let state = state_of(mlx4_state).ok_or(VerbsError::Invalid)?;
    let connected = service != Service::Ud;
    let alt_ah = ah_of(alt, num_ports).filter(|_| connected);
    Ok(Queried {
        state,
        path_mtu: f.mtu_msgmax >> 5,
        path_mig_state: mig_state_of((f.flags >> 11) & 3).ok_or(VerbsError::Invalid)?,
        qkey: f.qkey,
        rq_psn: f.rnr_nextrecvpsn & 0xff_ffff,
        sq_psn: f.next_send_psn & 0xff_ffff,
        dest_qp_num: f.remote_qpn & 0xff_ffff,
        qp_access_flags: access_of(f.params2),
        ah: ah_of(&f.pri_path, num_ports).filter(|_| connected),
        alt_ah,
        pkey_index: u16::from(f.pri_path.pkey_index & 0x7f),
        alt_pkey_index: if connected {
            u16::from(alt.pkey_index & 0x7f)
        } else {
            0
        },
        port_num: if state == QpState::Init {
            soft.port
        } else {
            port_of(&f.pri_path)
        },
        alt_port_num: alt_ah.map_or(0, |a| a.port_num),
        sq_draining: mlx4_state == MLX4_SQ_DRAINING,
        max_rd_atomic: 1 << ((f.params1 >> 21) & 7),
        max_dest_rd_atomic: 1 << ((f.params2 >> 21) & 7),
        min_rnr_timer: ((f.rnr_nextrecvpsn >> 24) & 0x1f) as u8,
        timeout: f.pri_path.ackto >> 3,
        alt_timeout: alt.ackto >> 3,
        retry_cnt: ((f.params1 >> 16) & 7) as u8,
        rnr_retry: ((f.params1 >> 13) & 7) as u8,
    })
}

#[cfg(test)]
mod tests;
