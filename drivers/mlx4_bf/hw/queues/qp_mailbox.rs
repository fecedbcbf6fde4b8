// SPDX-License-Identifier: GPL-2.0

//! The mailbox of the QP transitions (`mlx4_qp_modify()`): the optional
//! parameter mask, then `struct mlx4_qp_context` with its primary and
//! alternate `struct mlx4_qp_path`, laid out as include/linux/mlx4/qp.h
//! lays them out. The kernel contexts' QPs (`qp.rs`) and the provider's
//! (`user_qp.rs`) fill it; QUERY_QP answers in it.

use core::mem::{offset_of, size_of};
use kernel::{bitfield, prelude::*};
use zerocopy::FromZeros;
use zerocopy_derive::Immutable;

use crate::{
    hw::cmd::be_fields::{mtt_fields, Be16, Be32, Be64},
    qp_context::{PathFields, QpCommand, QpFields},
};

/// `struct mlx4_qp_path`.
#[repr(C)]
#[derive(IntoBytes, FromBytes, Immutable)]
pub(crate) struct QpPath {
    pub(crate) fl: u8,
    pub(crate) control: u8,
    pub(crate) disable_pkey_check: u8,
    pub(crate) pkey_index: u8,
    pub(crate) counter_index: u8,
    pub(crate) grh_mylmc: u8,
    pub(crate) rlid: Be16,
    pub(crate) ackto: u8,
    pub(crate) mgid_index: u8,
    pub(crate) static_rate: u8,
    pub(crate) hop_limit: u8,
    pub(crate) tclass_flowlabel: Be32,
    pub(crate) rgid: [u8; 16],
    pub(crate) sched_queue: u8,
    pub(crate) vlan_index: u8,
    pub(crate) feup: u8,
    pub(crate) fvl_rx: u8,
    pub(crate) reserved4: [u8; 2],
    pub(crate) dmac: [u8; 6],
}

/// `struct mlx4_qp_context`.
#[repr(C)]
#[derive(IntoBytes, FromBytes, Immutable)]
pub(crate) struct QpContext {
    pub(crate) flags: Be32,
    pub(crate) pd: Be32,
    pub(crate) mtu_msgmax: u8,
    pub(crate) rq_size_stride: u8,
    pub(crate) sq_size_stride: u8,
    pub(crate) rlkey_roce_mode: u8,
    pub(crate) usr_page: Be32,
    pub(crate) local_qpn: Be32,
    pub(crate) remote_qpn: Be32,
    pub(crate) pri_path: QpPath,
    pub(crate) alt_path: QpPath,
    pub(crate) params1: Be32,
    pub(crate) reserved1: [u8; 4],
    pub(crate) next_send_psn: Be32,
    pub(crate) cqn_send: Be32,
    pub(crate) roce_entropy: Be16,
    pub(crate) reserved2: [u8; 6],
    pub(crate) last_acked_psn: Be32,
    pub(crate) ssn: Be32,
    pub(crate) params2: Be32,
    pub(crate) rnr_nextrecvpsn: Be32,
    pub(crate) xrcd: Be32,
    pub(crate) cqn_recv: Be32,
    pub(crate) db_rec_addr: Be64,
    pub(crate) qkey: Be32,
    pub(crate) srqn: Be32,
    pub(crate) msn: Be32,
    pub(crate) rq_wqe_counter: Be16,
    pub(crate) sq_wqe_counter: Be16,
    pub(crate) reserved3: [u8; 4],
    pub(crate) rate_limit_params: Be16,
    pub(crate) reserved4: u8,
    pub(crate) qos_vport: u8,
    pub(crate) param3: Be32,
    pub(crate) nummmcpeers_basemkey: Be32,
    pub(crate) log_page_size: u8,
    pub(crate) reserved5: [u8; 2],
    pub(crate) mtt_base_addr_h: u8,
    pub(crate) mtt_base_addr_l: Be32,
    pub(crate) reserved6: [u8; 40],
}

/// The mailbox of the QP transitions (`mlx4_qp_modify()`): the optional
/// parameter mask, then the context.
#[repr(C)]
#[derive(IntoBytes, FromBytes, Immutable)]
pub(crate) struct QpModify {
    pub(crate) optpar: Be32,
    pub(crate) reserved: [u8; 4],
    pub(crate) context: QpContext,
}

const _: () = {
    assert!(size_of::<QpPath>() == 0x2c);
    assert!(size_of::<QpContext>() == 0xf8);
    assert!(offset_of!(QpContext, pri_path) == 0x18);
    assert!(offset_of!(QpContext, pri_path) + offset_of!(QpPath, sched_queue) == 0x38);
    assert!(offset_of!(QpPath, pkey_index) == 0x03);
    assert!(offset_of!(QpPath, counter_index) == 0x04);
    assert!(offset_of!(QpPath, rlid) == 0x06);
    assert!(offset_of!(QpPath, ackto) == 0x08);
    assert!(offset_of!(QpPath, tclass_flowlabel) == 0x0c);
    assert!(offset_of!(QpPath, rgid) == 0x10);
    assert!(offset_of!(QpContext, usr_page) == 0x0c);
    assert!(offset_of!(QpContext, remote_qpn) == 0x14);
    assert!(offset_of!(QpContext, alt_path) == 0x44);
    assert!(offset_of!(QpContext, params1) == 0x70);
    assert!(offset_of!(QpContext, next_send_psn) == 0x78);
    assert!(offset_of!(QpContext, cqn_send) == 0x7c);
    assert!(offset_of!(QpContext, params2) == 0x90);
    assert!(offset_of!(QpContext, rnr_nextrecvpsn) == 0x94);
    assert!(offset_of!(QpContext, qkey) == 0xa8);
    assert!(offset_of!(QpContext, cqn_recv) == 0x9c);
    assert!(offset_of!(QpContext, db_rec_addr) == 0xa0);
    assert!(offset_of!(QpContext, log_page_size) == 0xc8);
    assert!(offset_of!(QpContext, mtt_base_addr_h) == 0xcb);
    assert!(offset_of!(QpModify, context) == 8);
};

bitfield! {
    /// `QpContext::flags`.
    pub(crate) struct QpFlags(u32) {
        /// `enum mlx4_qp_state`.
        31:28 state;
        /// `MLX4_QP_ST_*`.
        23:16 service_type;
        /// `MLX4_QP_PM_*`.
        12:11 pm_state;
    }
}

fn fill_path(p: &mut QpPath, f: &PathFields) {
    p.fl = f.fl;
    p.disable_pkey_check = f.disable_pkey_check;
    p.pkey_index = f.pkey_index;
    p.counter_index = f.counter_index;
    p.grh_mylmc = f.grh_mylmc;
    p.rlid = f.rlid.into();
    p.ackto = f.ackto;
    p.mgid_index = f.mgid_index;
    p.static_rate = f.static_rate;
    p.hop_limit = f.hop_limit;
    p.tclass_flowlabel = f.tclass_flowlabel.into();
    p.rgid = f.rgid;
    p.sched_queue = f.sched_queue;
}

fn read_path(p: &QpPath) -> PathFields {
    PathFields {
        fl: p.fl,
        disable_pkey_check: p.disable_pkey_check,
        pkey_index: p.pkey_index,
        counter_index: p.counter_index,
        grh_mylmc: p.grh_mylmc,
        rlid: p.rlid.get(),
        ackto: p.ackto,
        mgid_index: p.mgid_index,
        static_rate: p.static_rate,
        hop_limit: p.hop_limit,
        tclass_flowlabel: p.tclass_flowlabel.get(),
        rgid: p.rgid,
        sched_queue: p.sched_queue,
    }
}

impl QpModify {
    /// The mailbox of the transition `c` (`qp_context::modify()`), as
    /// `__mlx4_qp_modify()` copies the context behind the optpar word.
    pub(crate) fn of_command(c: &QpCommand) -> Result<Self> {
        let x = &c.context;
        let mut m = QpModify::new_zeroed();
        m.optpar = c.optpar.into();
        let ctx = &mut m.context;
        ctx.flags = x.flags.into();
        ctx.pd = x.pd.into();
        ctx.mtu_msgmax = x.mtu_msgmax;
        ctx.rq_size_stride = x.rq_size_stride;
        ctx.sq_size_stride = x.sq_size_stride;
        ctx.usr_page = x.usr_page.into();
        ctx.local_qpn = x.local_qpn.into();
        ctx.remote_qpn = x.remote_qpn.into();
        fill_path(&mut ctx.pri_path, &x.pri_path);
        ctx.params1 = x.params1.into();
        ctx.next_send_psn = x.next_send_psn.into();
        ctx.cqn_send = x.cqn_send.into();
        ctx.params2 = x.params2.into();
        ctx.rnr_nextrecvpsn = x.rnr_nextrecvpsn.into();
        ctx.cqn_recv = x.cqn_recv.into();
        ctx.db_rec_addr = x.db_rec_addr.into();
        ctx.qkey = x.qkey.into();
        ctx.srqn = x.srqn.into();
        ctx.log_page_size = x.log_page_size;
        (ctx.mtt_base_addr_h, ctx.mtt_base_addr_l) = mtt_fields(x.mtt_base_addr)?;
        Ok(m)
    }

    /// What QUERY_QP returned in this layout (`mlx4_qp_query()` reads the
    /// context behind the optpar word): the fields a transition carries,
    /// and the alternate path.
    pub(crate) fn fields(&self) -> (QpFields, PathFields) {
        let c = &self.context;
        let fields = QpFields {
            flags: c.flags.get(),
            pd: c.pd.get(),
            mtu_msgmax: c.mtu_msgmax,
            rq_size_stride: c.rq_size_stride,
            sq_size_stride: c.sq_size_stride,
            usr_page: c.usr_page.get(),
            local_qpn: c.local_qpn.get(),
            remote_qpn: c.remote_qpn.get(),
            pri_path: read_path(&c.pri_path),
            params1: c.params1.get(),
            next_send_psn: c.next_send_psn.get(),
            cqn_send: c.cqn_send.get(),
            params2: c.params2.get(),
            rnr_nextrecvpsn: c.rnr_nextrecvpsn.get(),
            cqn_recv: c.cqn_recv.get(),
            db_rec_addr: c.db_rec_addr.get(),
            qkey: c.qkey.get(),
            srqn: c.srqn.get(),
            log_page_size: c.log_page_size,
            mtt_base_addr: u64::from(c.mtt_base_addr_h) << 32 | u64::from(c.mtt_base_addr_l.get()),
        };
        (fields, read_path(&c.alt_path))
    }
}
