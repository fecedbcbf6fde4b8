// SPDX-License-Identifier: GPL-2.0

//! A user RC, UC or UD QP's state transitions on an IB port, as mainline
//! mlx4_ib and mlx4_core make them: the checks of `mlx4_ib_modify_qp()` and
//! `_mlx4_ib_modify_qp()` (`drivers/infiniband/hw/mlx4/qp.c`), the QP
//! context and optional-parameter mask `__mlx4_ib_modify_qp()` fills from
//! the verbs attributes, and the command `__mlx4_qp_modify()`
//! (`drivers/net/ethernet/mellanox/mlx4/qp.c`) posts for the transition,
//! with what it adds (the MTT at RST2INIT, the local QPN).
//!
//! `ib_modify_qp_is_ok()` (which attributes a transition requires and
//! allows) is an ib_core export the provider calls first. What mainline
//! keeps in `struct mlx4_ib_qp` between transitions is [`QpSoft`]; the
//! caller stores [`Modify::next`] once the command succeeded.
//!
//! Scope: no SRQ, no XRC, no RSS, no alternate path (refused), no inline
//! receive, no RoCE; the device has no counters (the sink index).

pub mod path;
pub mod query;
mod transport;

use crate::qp_size::QpGeometry;
use crate::verbs::{mask, mig, mtu, QpState, VerbsError};
pub use path::{AhAttr, Grh, PathFields};

/// `MLX4_IB_ACK_REQ_FREQ`: params1 bits 31..28.
pub const ACK_REQ_FREQ: u32 = 8;
/// `MLX4_QP_PM_*` (flags bits 12..11).
pub(crate) const PM_MIGRATED: u32 = 3;
pub(crate) const PM_ARMED: u32 = 0;
pub(crate) const PM_REARM: u32 = 1;

/// `enum mlx4_qp_optpar`.
pub mod optpar {
    pub const ALT_ADDR_PATH: u32 = 1 << 0;
    pub const RRE: u32 = 1 << 1;
    pub const RAE: u32 = 1 << 2;
    pub const RWE: u32 = 1 << 3;
    pub const PKEY_INDEX: u32 = 1 << 4;
    pub const Q_KEY: u32 = 1 << 5;
    pub const RNR_TIMEOUT: u32 = 1 << 6;
    pub const PRIMARY_ADDR_PATH: u32 = 1 << 7;
    pub const SRA_MAX: u32 = 1 << 8;
    pub const RRA_MAX: u32 = 1 << 9;
    pub const PM_STATE: u32 = 1 << 10;
    pub const RETRY_COUNT: u32 = 1 << 12;
    pub const RNR_RETRY: u32 = 1 << 13;
    pub const ACK_TIMEOUT: u32 = 1 << 14;
    pub const SCHED_QUEUE: u32 = 1 << 16;
    pub const COUNTER_INDEX: u32 = 1 << 20;
}

/// The QP's transport (`to_mlx4_st()`: `MLX4_QP_ST_RC`, `_UC`, `_UD`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    Rc = 0,
    Uc = 1,
    Ud = 3,
}

/// `MLX4_IB_DEFAULT_SCHED_QUEUE`: the scheduling queue bits of a UD QP's
/// path (the port's in bit 6).
pub const DEFAULT_SCHED_QUEUE: u8 = 0x83;
/// A UD QP's message size limit (log2), without LSO: mainline's constant,
/// whatever the device's `max_msg_sz`.
pub const UD_LOG_MSGMAX: u8 = 13;

/// The commands of `__mlx4_qp_modify()`'s table (`MLX4_CMD_*_QP`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpOp {
    Rst2Init = 0x19,
    Init2Rtr = 0x1a,
    Rtr2Rts = 0x1b,
    Rts2Rts = 0x1c,
    Sqerr2Rts = 0x1d,
    ToErr = 0x1e,
    Rts2Sqd = 0x1f,
    Sqd2Rts = 0x20,
    ToRst = 0x21,
    Init2Init = 0x2d,
    Sqd2Sqd = 0x38,
}

/// The device's values the transitions read (`dev->dev->caps`).
#[derive(Clone, Copy, Debug)]
pub struct QpDevice {
    pub num_ports: u8,
    /// `pkey_table_len[port]`, `gid_table_len[port]` of every port.
    pub pkey_table_len: u16,
    pub gid_table_len: u16,
    /// `ilog2(caps.max_msg_sz)`.
    pub log_max_msg: u8,
    pub stat_rate_support: u16,
    /// `caps.max_qp_init_rdma`, `caps.max_qp_dest_rdma`.
    pub max_qp_init_rdma: u32,
    pub max_qp_dest_rdma: u32,
    /// `MLX4_SINK_COUNTER_INDEX(dev)`: `caps.max_counters - 1` as a u8.
    pub sink_counter_index: u8,
}

/// What the QP is, fixed at creation.
#[derive(Clone, Copy, Debug)]
pub struct QpFacts {
    pub qpn: u32,
    pub service: Service,
    pub pd: u32,
    /// The ucontext's UAR index (`mlx4_to_hw_uar_index()` is the index on
    /// a function without SR-IOV).
    pub usr_page: u32,
    pub cqn_send: u32,
    pub cqn_recv: u32,
    pub geometry: QpGeometry,
    pub sq_no_prefetch: bool,
    /// DMA address of the RQ doorbell record.
    pub db_rec: u64,
    /// MTT byte address of the buffer's first page and its page size
    /// (`mtt->page_shift - MLX4_ICM_PAGE_SHIFT`).
    pub mtt_addr: u64,
    pub log_page_size: u8,
    /// The shared receive queue it receives from (`ibqp->srq`), if any.
    pub srqn: Option<u32>,
}

/// `MLX4_QP_BIT_RIC` (params2): the QP receives from an SRQ.
pub const PARAMS2_RIC: u32 = 1 << 4;
/// The context's `srqn` word: bit 24 says the low 24 bits name an SRQ.
pub const SRQN_VALID: u32 = 1 << 24;

/// What mlx4_ib keeps of a QP between transitions (`struct mlx4_ib_qp`'s
/// `state`, `atomic_rd_en`, `resp_depth`, `port`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpSoft {
    pub state: QpState,
    pub atomic_rd_en: u32,
    pub resp_depth: u8,
    pub port: u8,
}

impl QpSoft {
    /// A new QP: in RESET (`create_qp_common()`).
    pub const fn new() -> Self {
        QpSoft {
            state: QpState::Reset,
            atomic_rd_en: 0,
            resp_depth: 0,
            port: 0,
        }
    }
}

impl Default for QpSoft {
    fn default() -> Self {
        Self::new()
    }
}

/// `struct ib_qp_attr` with its mask, for an RC or UC QP.
#[derive(Clone, Copy, Debug, Default)]
pub struct QpAttr {
    /// `enum ib_qp_attr_mask` bits.
    pub mask: u32,
    pub qp_state: u32,
    pub cur_qp_state: u32,
    /// `enum ib_mtu`.
    pub path_mtu: u8,
    /// `enum ib_mig_state`.
    pub path_mig_state: u8,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub pkey_index: u16,
    pub en_sqd_async_notify: bool,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub ah: AhAttr,
}

/// The fields of `struct mlx4_qp_context` a transition of a user RC/UC QP
/// carries; every other field (the alternate path, the RoCE and rate
/// limit fields, the counters) is 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpFields {
    pub flags: u32,
    pub pd: u32,
    pub mtu_msgmax: u8,
    pub rq_size_stride: u8,
    pub sq_size_stride: u8,
    pub usr_page: u32,
    pub local_qpn: u32,
    pub remote_qpn: u32,
    pub pri_path: PathFields,
    pub params1: u32,
    pub next_send_psn: u32,
    pub cqn_send: u32,
    pub params2: u32,
    pub rnr_nextrecvpsn: u32,
    pub cqn_recv: u32,
    pub db_rec_addr: u64,
    pub qkey: u32,
    /// `SRQN_VALID | srqn` of a QP on an SRQ, at every transition.
    pub srqn: u32,
    pub log_page_size: u8,
    /// `mtt_base_addr_h` and `_l`: 40 bits.
    pub mtt_base_addr: u64,
}

/// One command: `in_modifier` (the QPN, bit 31 the SQD event),
/// `op_modifier`, and the mailbox (optpar, then the context) unless the
/// command is 2RST, which has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCommand {
    pub op: QpOp,
    pub in_mod: u32,
    pub op_mod: u32,
    pub optpar: u32,
    pub context: QpFields,
}

impl QpCommand {
    /// Whether the command carries the mailbox.
    pub const fn has_mailbox(&self) -> bool {
        !matches!(self.op, QpOp::ToRst)
    }
}

/// What a modify does: the command to post (none for RESET to RESET) and
/// the QP's state once it succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Modify {
    pub command: Option<QpCommand>,
    pub next: QpSoft,
}

/// `__mlx4_qp_modify()`'s table: the command from `cur` to `new`.
pub fn op(cur: QpState, new: QpState) -> Option<QpOp> {
    use QpState::*;
    Some(match (cur, new) {
        (_, Reset) => QpOp::ToRst,
        (_, Err) => QpOp::ToErr,
        (Reset, Init) => QpOp::Rst2Init,
        (Init, Init) => QpOp::Init2Init,
        (Init, Rtr) => QpOp::Init2Rtr,
        (Rtr, Rts) => QpOp::Rtr2Rts,
        (Rts, Rts) => QpOp::Rts2Rts,
        (Rts, Sqd) => QpOp::Rts2Sqd,
        (Sqd, Rts) => QpOp::Sqd2Rts,
        (Sqd, Sqd) => QpOp::Sqd2Sqd,
        (Sqe, Rts) => QpOp::Sqerr2Rts,
        _ => return None,
    })
}

/// The pkey table length of port `p` (`caps.pkey_table_len[p]`: 0 for a
/// port the device does not have, index 0 included).
fn pkey_table_len(dev: &QpDevice, p: u8) -> u16 {
    if p >= 1 && p <= dev.num_ports {
        dev.pkey_table_len
    } else {
        0
    }
}

/// The checks of `mlx4_ib_modify_qp()` and `_mlx4_ib_modify_qp()`;
/// returns the current and the new state.
fn check(dev: &QpDevice, soft: &QpSoft, a: &QpAttr) -> Result<(QpState, QpState), VerbsError> {
    if a.mask & !mask::STANDARD_BITS != 0 {
        return Err(VerbsError::NotSupported);
    }
    // Out of this provider's scope (mainline would load the alternate path).
    if a.mask & mask::ALT_PATH != 0 {
        return Err(VerbsError::NotSupported);
    }
    let cur = if a.mask & mask::CUR_STATE != 0 {
        QpState::from_raw(a.cur_qp_state).ok_or(VerbsError::Invalid)?
    } else {
        soft.state
    };
    let new = if a.mask & mask::STATE != 0 {
        QpState::from_raw(a.qp_state).ok_or(VerbsError::Invalid)?
    } else {
        cur
    };
    let port_given = a.mask & mask::PORT != 0;
    if port_given && (a.port_num == 0 || a.port_num > dev.num_ports) {
        return Err(VerbsError::Invalid);
    }
    if a.mask & mask::PKEY_INDEX != 0 {
        let p = if port_given { a.port_num } else { soft.port };
        if a.pkey_index >= pkey_table_len(dev, p) {
            return Err(VerbsError::Invalid);
        }
    }
    if a.mask & mask::MAX_QP_RD_ATOMIC != 0 && u32::from(a.max_rd_atomic) > dev.max_qp_init_rdma {
        return Err(VerbsError::Invalid);
    }
    if a.mask & mask::MAX_DEST_RD_ATOMIC != 0
        && u32::from(a.max_dest_rd_atomic) > dev.max_qp_dest_rdma
    {
        return Err(VerbsError::Invalid);
    }
    Ok((cur, new))
}

/// `fls(n - 1)` of a nonzero read depth: log2 rounded up.
fn log_depth(n: u8) -> u32 {
    u32::BITS - u32::from(n - 1).leading_zeros()
}

/// The flags word, MTU and queue sizes, the pages and the doorbell record:
/// the part of the context that depends on the QP more than on `a`.
fn base_fields(
    dev: &QpDevice,
    f: &QpFacts,
    a: &QpAttr,
    (cur, new): (QpState, QpState),
    optpar: &mut u32,
) -> Result<QpFields, VerbsError> {
    let mut c = QpFields {
        flags: (new.mlx4() << 28) | ((f.service as u32) << 16),
        ..QpFields::default()
    };
    if a.mask & mask::PATH_MIG_STATE == 0 {
        c.flags |= PM_MIGRATED << 11;
    } else {
        *optpar |= optpar::PM_STATE;
        c.flags |= match a.path_mig_state {
            mig::MIGRATED => PM_MIGRATED << 11,
            mig::REARM => PM_REARM << 11,
            mig::ARMED => PM_ARMED << 11,
            _ => 0,
        };
    }
    if f.service == Service::Ud {
        // Every transition, whatever the mask: a datagram is one packet.
        c.mtu_msgmax = (mtu::MTU_4096 << 5) | UD_LOG_MSGMAX;
    } else if a.mask & mask::PATH_MTU != 0 {
        if !(mtu::MTU_256..=mtu::MTU_4096).contains(&a.path_mtu) {
            return Err(VerbsError::Invalid);
        }
        c.mtu_msgmax = (a.path_mtu << 5) | dev.log_max_msg;
    }
    c.rq_size_stride = f.geometry.rq.size_stride();
    c.sq_size_stride = f.geometry.sq.size_stride();
    let rst2init = cur == QpState::Reset && new == QpState::Init;
    if rst2init {
        c.sq_size_stride |= u8::from(f.sq_no_prefetch) << 7;
        if f.geometry.rq.wqe_cnt != 0 {
            c.db_rec_addr = f.db_rec;
        }
        // __mlx4_qp_modify(): the pages only at RST2INIT.
        c.mtt_base_addr = f.mtt_addr;
        c.log_page_size = f.log_page_size;
    }
    c.usr_page = f.usr_page;
    c.local_qpn = f.qpn;
    c.pd = f.pd;
    c.params1 = ACK_REQ_FREQ << 28;
    c.cqn_send = f.cqn_send;
    c.cqn_recv = f.cqn_recv;
    Ok(c)
}

/// The destination, the primary path and its pkey, ack timeout and port.
fn path_fields(
    dev: &QpDevice,
    f: &QpFacts,
    soft: &QpSoft,
    a: &QpAttr,
    (cur, new): (QpState, QpState),
    (c, optpar): (&mut QpFields, &mut u32),
) -> Result<(), VerbsError> {
    if a.mask & mask::DEST_QPN != 0 {
        c.remote_qpn = a.dest_qp_num;
    }
    if a.mask & mask::PORT != 0
        && cur == QpState::Sqd
        && new == QpState::Sqd
        && a.mask & mask::AV == 0
    {
        path::set_sched(&mut c.pri_path, a.port_num);
        *optpar |= optpar::SCHED_QUEUE;
    }
    if cur == QpState::Init && new == QpState::Rtr {
        // No counter on an IB port of a device without counters: the
        // sink, without its optpar bit (the default counter is -1).
        c.pri_path.counter_index = dev.sink_counter_index;
        // A UD QP has no address vector: its port and the default
        // scheduling queue, without an optpar bit.
        if f.service == Service::Ud {
            c.pri_path.sched_queue = (soft.port.wrapping_sub(1) << 6) | DEFAULT_SCHED_QUEUE;
        }
    }
    if a.mask & mask::PKEY_INDEX != 0 {
        c.pri_path.pkey_index = a.pkey_index as u8;
        *optpar |= optpar::PKEY_INDEX;
    }
    if a.mask & mask::AV != 0 {
        let port = if a.mask & mask::PORT != 0 {
            a.port_num
        } else {
            soft.port
        };
        let limits = (dev.gid_table_len, dev.stat_rate_support);
        path::set_path(&a.ah, port, limits, &mut c.pri_path)?;
        *optpar |= optpar::PRIMARY_ADDR_PATH | optpar::SCHED_QUEUE;
    }
    if a.mask & mask::TIMEOUT != 0 {
        c.pri_path.ackto |= a.timeout.wrapping_shl(3);
        *optpar |= optpar::ACK_TIMEOUT;
    }
    Ok(())
}

/// The state mlx4_ib keeps once the transition succeeded.
fn next_soft(soft: &QpSoft, a: &QpAttr, new: QpState) -> QpSoft {
    let mut next = *soft;
    next.state = new;
    if a.mask & mask::ACCESS_FLAGS != 0 {
        next.atomic_rd_en = a.qp_access_flags;
    }
    if a.mask & mask::MAX_DEST_RD_ATOMIC != 0 {
        next.resp_depth = a.max_dest_rd_atomic;
    }
    if a.mask & mask::PORT != 0 {
        next.port = a.port_num;
    }
    next
}

/// The transition `a` asks of the QP `f` whose kept state is `soft`: the
/// command mainline posts, or the errno it returns before posting.
pub fn modify(
    dev: &QpDevice,
    f: &QpFacts,
    soft: &QpSoft,
    a: &QpAttr,
) -> Result<Modify, VerbsError> {
    let (cur, new) = check(dev, soft, a)?;
    if cur == QpState::Reset && new == QpState::Reset {
        return Ok(Modify {
            command: None,
            next: *soft,
        });
    }
    let mut optpar = 0;
    let mut c = base_fields(dev, f, a, (cur, new), &mut optpar)?;
    path_fields(dev, f, soft, a, (cur, new), (&mut c, &mut optpar))?;
    transport::fields(soft, a, (&mut c, &mut optpar));
    if let Some(srqn) = f.srqn {
        // `__mlx4_ib_modify_qp()`: whatever the mask, without optpar.
        c.params2 |= PARAMS2_RIC;
        c.srqn = SRQN_VALID | (srqn & 0xff_ffff);
    }
    let sqd_event = cur == QpState::Rts
        && new == QpState::Sqd
        && a.mask & mask::EN_SQD_ASYNC_NOTIFY != 0
        && a.en_sqd_async_notify;
    let op = op(cur, new).ok_or(VerbsError::Invalid)?;
    Ok(Modify {
        command: Some(QpCommand {
            op,
            in_mod: (f.qpn & 0xff_ffff) | (u32::from(sqd_event) << 31),
            op_mod: if op == QpOp::ToRst { 2 } else { 0 },
            optpar,
            context: c,
        }),
        next: next_soft(soft, a, new),
    })
}

#[cfg(test)]
mod srq_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod ud_tests;
