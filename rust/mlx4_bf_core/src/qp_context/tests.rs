// SPDX-License-Identifier: GPL-2.0

//! The transitions ibv_rc_pingpong and perftest make, as the mailboxes
//! mainline posts for them (`struct mlx4_qp_context` at mailbox byte 8,
//! after the optpar word; offsets from include/linux/mlx4/qp.h), and the
//! refusals.

use super::*;
use crate::qp_size::{self, UserQpRequest};
use crate::verbs::access;

/// The model's ConnectX-3 with this driver's profile: one IB port, 128
/// P_Keys and GIDs, messages up to 2^31, 16 outstanding reads as
/// requester, one as responder (one RDMARC entry per QP), no counters.
pub(super) const DEV: QpDevice = QpDevice {
    num_ports: 1,
    pkey_table_len: 128,
    gid_table_len: 128,
    log_max_msg: 31,
    stat_rate_support: 0,
    max_qp_init_rdma: 16,
    max_qp_dest_rdma: 1,
    sink_counter_index: 0xff,
};

pub(super) fn facts() -> QpFacts {
    let r = UserQpRequest {
        max_recv_wr: 500,
        max_recv_sge: 1,
        log_sq_bb_count: 6,
        log_sq_stride: 6,
        inl_recv_sz: 0,
        srq: false,
    };
    let limits = qp_size::QpLimits {
        max_wqes: 1 << 14,
        max_sq_sg: 32,
        max_rq_sg: 32,
        max_sq_desc_sz: 1008,
    };
    QpFacts {
        qpn: 0x248,
        service: Service::Rc,
        pd: 0x2001,
        usr_page: 5,
        cqn_send: 0xc0,
        cqn_recv: 0xc1,
        geometry: qp_size::user_qp(&limits, &r).unwrap().0,
        sq_no_prefetch: false,
        db_rec: 0x1_2345_6040,
        mtt_addr: 0x1_0000,
        log_page_size: 0,
        srqn: None,
    }
}

/// The mailbox `__mlx4_qp_modify()` posts for `c`: optpar, 4 reserved
/// bytes, the 0xf8-byte context.
pub(super) fn mailbox(c: &QpCommand) -> [u8; 0x100] {
    let mut b = [0u8; 0x100];
    let mut put = |at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
    let x = &c.context;
    let p = &x.pri_path;
    put(0x00, &c.optpar.to_be_bytes());
    let ctx = 8;
    put(ctx, &x.flags.to_be_bytes());
    put(ctx + 0x04, &x.pd.to_be_bytes());
    put(
        ctx + 0x08,
        &[x.mtu_msgmax, x.rq_size_stride, x.sq_size_stride],
    );
    put(ctx + 0x0c, &x.usr_page.to_be_bytes());
    put(ctx + 0x10, &x.local_qpn.to_be_bytes());
    put(ctx + 0x14, &x.remote_qpn.to_be_bytes());
    let path = ctx + 0x18;
    put(path, &[p.fl, 0, p.disable_pkey_check, p.pkey_index]);
    put(path + 0x04, &[p.counter_index, p.grh_mylmc]);
    put(path + 0x06, &p.rlid.to_be_bytes());
    put(
        path + 0x08,
        &[p.ackto, p.mgid_index, p.static_rate, p.hop_limit],
    );
    put(path + 0x0c, &p.tclass_flowlabel.to_be_bytes());
    put(path + 0x10, &p.rgid);
    put(path + 0x20, &[p.sched_queue]);
    put(ctx + 0x70, &x.params1.to_be_bytes());
    put(ctx + 0x78, &x.next_send_psn.to_be_bytes());
    put(ctx + 0x7c, &x.cqn_send.to_be_bytes());
    put(ctx + 0x90, &x.params2.to_be_bytes());
    put(ctx + 0x94, &x.rnr_nextrecvpsn.to_be_bytes());
    put(ctx + 0x9c, &x.cqn_recv.to_be_bytes());
    put(ctx + 0xa0, &x.db_rec_addr.to_be_bytes());
    put(ctx + 0xa8, &x.qkey.to_be_bytes());
    put(ctx + 0xac, &x.srqn.to_be_bytes());
    put(ctx + 0xc8, &[x.log_page_size]);
    put(ctx + 0xcb, &[(x.mtt_base_addr >> 32) as u8]);
    put(ctx + 0xcc, &(x.mtt_base_addr as u32).to_be_bytes());
    b
}

/// A mailbox of zeros but for `fields` (mailbox offset, big-endian bytes).
pub(super) fn expect(fields: &[(usize, &[u8])]) -> [u8; 0x100] {
    let mut b = [0u8; 0x100];
    for (at, v) in fields {
        b[*at..*at + v.len()].copy_from_slice(v);
    }
    b
}

pub(super) fn step(soft: &QpSoft, a: &QpAttr) -> (QpCommand, QpSoft) {
    let m = modify(&DEV, &facts(), soft, a).unwrap();
    (m.command.unwrap(), m.next)
}

pub(super) fn init_attr(access_flags: u32) -> QpAttr {
    QpAttr {
        mask: mask::STATE | mask::PKEY_INDEX | mask::PORT | mask::ACCESS_FLAGS,
        qp_state: QpState::Init as u32,
        pkey_index: 0,
        port_num: 1,
        qp_access_flags: access_flags,
        ..QpAttr::default()
    }
}

pub(super) fn rtr_attr() -> QpAttr {
    QpAttr {
        mask: mask::STATE
            | mask::AV
            | mask::PATH_MTU
            | mask::DEST_QPN
            | mask::RQ_PSN
            | mask::MAX_DEST_RD_ATOMIC
            | mask::MIN_RNR_TIMER,
        qp_state: QpState::Rtr as u32,
        path_mtu: mtu::MTU_1024,
        dest_qp_num: 0x249,
        rq_psn: 0xabcde,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 12,
        ah: AhAttr {
            dlid: 1,
            ..AhAttr::default()
        },
        ..QpAttr::default()
    }
}

pub(super) fn rts_attr() -> QpAttr {
    QpAttr {
        mask: mask::STATE
            | mask::TIMEOUT
            | mask::RETRY_CNT
            | mask::RNR_RETRY
            | mask::SQ_PSN
            | mask::MAX_QP_RD_ATOMIC,
        qp_state: QpState::Rts as u32,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        sq_psn: 0x12345,
        max_rd_atomic: 1,
        ..QpAttr::default()
    }
}

// What every transition of this QP carries: pd, the queue sizes (RQ 512
// x 16 B, SQ 64 x 64 B), the UAR, the QPN, ACK_REQ_FREQ and the CQs.
pub(super) const PD: (usize, &[u8]) = (8 + 0x04, &[0, 0, 0x20, 0x01]);
pub(super) const USR_PAGE: (usize, &[u8]) = (8 + 0x0c, &[0, 0, 0, 5]);
pub(super) const QPN: (usize, &[u8]) = (8 + 0x10, &[0, 0, 0x02, 0x48]);
pub(super) const CQN_SEND: (usize, &[u8]) = (8 + 0x7c, &[0, 0, 0, 0xc0]);
pub(super) const CQN_RECV: (usize, &[u8]) = (8 + 0x9c, &[0, 0, 0, 0xc1]);

#[test]
fn rc_pingpong_rst2init() {
    let (c, next) = step(&QpSoft::new(), &init_attr(0));
    assert_eq!((c.op, c.in_mod, c.op_mod), (QpOp::Rst2Init, 0x248, 0));
    let want = expect(&[
        (0x00, &[0, 0, 0, 0x1e]), // PKEY_INDEX | RWE | RAE | RRE
        (8, &[0x10, 0, 0x18, 0]), // INIT, RC, PM MIGRATED
        PD,
        (8 + 0x09, &[0x48, 0x32]), // rq 2^9 x 16, sq 2^6 x 64
        USR_PAGE,
        QPN,
        (8 + 0x70, &[0x80, 0, 0, 0]), // ACK_REQ_FREQ
        CQN_SEND,
        CQN_RECV,
        (8 + 0xa0, &0x1_2345_6040u64.to_be_bytes()),
        (8 + 0xcc, &[0, 1, 0, 0]), // MTT at byte 0x10000
    ]);
    assert_eq!(mailbox(&c), want);
    assert_eq!(
        next,
        QpSoft {
            state: QpState::Init,
            atomic_rd_en: 0,
            resp_depth: 0,
            port: 1
        }
    );
}

#[test]
fn rc_pingpong_init2rtr() {
    let (_, init) = step(&QpSoft::new(), &init_attr(0));
    let (c, next) = step(&init, &rtr_attr());
    assert_eq!((c.op, c.in_mod), (QpOp::Init2Rtr, 0x248));
    let want = expect(&[
        // PRIMARY_ADDR_PATH | SCHED_QUEUE | RRA_MAX | RWE | RAE | RRE |
        // RNR_TIMEOUT
        (0x00, &[0, 0x01, 0x02, 0xce]),
        (8, &[0x20, 0, 0x18, 0]),
        PD,
        (8 + 0x08, &[0x7f, 0x48, 0x32]), // MTU 1024, 2^31 messages
        USR_PAGE,
        QPN,
        (8 + 0x14, &[0, 0, 0x02, 0x49]),
        (8 + 0x18 + 0x04, &[0xff]), // the sink counter
        (8 + 0x18 + 0x06, &[0, 1]), // rlid
        (8 + 0x18 + 0x20, &[0x83]), // port 1, SL 0
        (8 + 0x70, &[0x80, 0, 0, 0]),
        CQN_SEND,
        (8 + 0x94, &[12, 0x0a, 0xbc, 0xde]), // RNR timer, RQ PSN
        CQN_RECV,
    ]);
    assert_eq!(mailbox(&c), want);
    assert_eq!(next.resp_depth, 1);
}

#[test]
fn rc_pingpong_rtr2rts() {
    let (_, init) = step(&QpSoft::new(), &init_attr(0));
    let (_, rtr) = step(&init, &rtr_attr());
    let (c, next) = step(&rtr, &rts_attr());
    assert_eq!(c.op, QpOp::Rtr2Rts);
    let want = expect(&[
        // ACK_TIMEOUT | RNR_RETRY | RETRY_COUNT | SRA_MAX
        (0x00, &[0, 0, 0x71, 0x00]),
        (8, &[0x30, 0, 0x18, 0]),
        PD,
        (8 + 0x09, &[0x48, 0x32]),
        USR_PAGE,
        QPN,
        (8 + 0x18 + 0x08, &[14 << 3]),      // ackto
        (8 + 0x70, &[0x80, 0x07, 0xe0, 0]), // retry 7, rnr retry 7
        (8 + 0x78, &[0, 0x01, 0x23, 0x45]),
        CQN_SEND,
        CQN_RECV,
    ]);
    assert_eq!(mailbox(&c), want);
    assert_eq!(next.state, QpState::Rts);
}

#[test]
fn perftest_access_flags_follow_the_responder_depth() {
    let rw = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ;
    // RST2INIT without a responder depth yet: remote write only.
    let (c, init) = step(&QpSoft::new(), &init_attr(rw));
    assert_eq!(c.context.params2, path::BIT_RWE);
    // INIT2RTR with max_dest_rd_atomic 1: reads too, from the kept flags.
    let (c, _) = step(&init, &rtr_attr());
    assert_eq!(c.context.params2, path::BIT_RWE | path::BIT_RRE);
    // Read depths: fls(n - 1) << 21.
    let a = QpAttr {
        max_rd_atomic: 16,
        ..rts_attr()
    };
    let (_, rtr) = step(&init, &rtr_attr());
    let (c, _) = step(&rtr, &a);
    assert_eq!(c.context.params1 >> 21 & 7, 4);
}

#[test]
fn sq_no_prefetch_and_grh_at_their_transitions() {
    let f = QpFacts {
        sq_no_prefetch: true,
        ..facts()
    };
    let m = modify(&DEV, &f, &QpSoft::new(), &init_attr(0)).unwrap();
    assert_eq!(m.command.unwrap().context.sq_size_stride, 0x80 | 0x32);
    let (_, init) = step(&QpSoft::new(), &init_attr(0));
    let mut a = rtr_attr();
    a.ah.sl = 2;
    a.ah.grh = Some(Grh {
        sgid_index: 0,
        hop_limit: 1,
        ..Grh::default()
    });
    let (c, _) = step(&init, &a);
    let p = c.context.pri_path;
    assert_eq!((p.grh_mylmc, p.hop_limit, p.sched_queue), (0x80, 1, 0x8b));
    // Only RST2INIT carries the pages and the doorbell record.
    assert_eq!((c.context.mtt_base_addr, c.context.db_rec_addr), (0, 0));
}

#[test]
fn error_reset_and_drain() {
    let (_, init) = step(&QpSoft::new(), &init_attr(0));
    let (_, rtr) = step(&init, &rtr_attr());
    let (_, rts) = step(&rtr, &rts_attr());
    let to = |s: QpState| QpAttr {
        mask: mask::STATE,
        qp_state: s as u32,
        ..QpAttr::default()
    };
    let (c, err) = step(&rts, &to(QpState::Err));
    assert_eq!((c.op, c.op_mod, c.has_mailbox()), (QpOp::ToErr, 0, true));
    let (c, rst) = step(&err, &to(QpState::Reset));
    assert_eq!((c.op, c.op_mod, c.has_mailbox()), (QpOp::ToRst, 2, false));
    assert_eq!(rst.state, QpState::Reset);
    // RESET to RESET posts nothing.
    let m = modify(&DEV, &facts(), &rst, &to(QpState::Reset)).unwrap();
    assert_eq!(m.command, None);
    // RTS to SQD with the event asked for: bit 31 of in_mod.
    let a = QpAttr {
        mask: mask::STATE | mask::EN_SQD_ASYNC_NOTIFY,
        qp_state: QpState::Sqd as u32,
        en_sqd_async_notify: true,
        ..QpAttr::default()
    };
    let (c, _) = step(&rts, &a);
    assert_eq!((c.op, c.in_mod), (QpOp::Rts2Sqd, 0x8000_0248));
    // SQE back to RTS; CUR_STATE names the state the caller knows.
    let a = QpAttr {
        mask: mask::STATE | mask::CUR_STATE,
        qp_state: QpState::Rts as u32,
        cur_qp_state: QpState::Sqe as u32,
        ..QpAttr::default()
    };
    assert_eq!(step(&rts, &a).0.op, QpOp::Sqerr2Rts);
}

#[test]
fn refusals_as_mainline() {
    let (_, init) = step(&QpSoft::new(), &init_attr(0));
    let refuse = |soft: &QpSoft, a: QpAttr| modify(&DEV, &facts(), soft, &a).unwrap_err();
    for bad in [0, 6, 7] {
        let a = QpAttr {
            path_mtu: bad,
            ..rtr_attr()
        };
        assert_eq!(refuse(&init, a), VerbsError::Invalid, "MTU {bad}");
    }
    let a = QpAttr {
        mask: rtr_attr().mask | (1 << 25),
        ..rtr_attr()
    };
    assert_eq!(refuse(&init, a), VerbsError::NotSupported);
    let a = QpAttr {
        mask: rtr_attr().mask | mask::ALT_PATH,
        ..rtr_attr()
    };
    assert_eq!(refuse(&init, a), VerbsError::NotSupported);
    let new = QpSoft::new();
    assert_eq!(
        refuse(
            &new,
            QpAttr {
                port_num: 2,
                ..init_attr(0)
            }
        ),
        VerbsError::Invalid
    );
    assert_eq!(
        refuse(
            &new,
            QpAttr {
                pkey_index: 128,
                ..init_attr(0)
            }
        ),
        VerbsError::Invalid
    );
    // A pkey index without a port, on a QP that has none yet.
    let a = QpAttr {
        mask: mask::STATE | mask::PKEY_INDEX,
        qp_state: QpState::Init as u32,
        ..QpAttr::default()
    };
    assert_eq!(refuse(&new, a), VerbsError::Invalid);
    assert_eq!(
        refuse(
            &init,
            QpAttr {
                max_dest_rd_atomic: 2,
                ..rtr_attr()
            }
        ),
        VerbsError::Invalid
    );
    let (_, rtr) = step(&init, &rtr_attr());
    assert_eq!(
        refuse(
            &rtr,
            QpAttr {
                max_rd_atomic: 17,
                ..rts_attr()
            }
        ),
        VerbsError::Invalid
    );
    // No command goes from RTR back to INIT.
    let back = QpAttr {
        mask: mask::STATE,
        qp_state: QpState::Init as u32,
        ..QpAttr::default()
    };
    assert_eq!(refuse(&rtr, back), VerbsError::Invalid);
    let mut a = rtr_attr();
    a.ah.grh = Some(Grh {
        sgid_index: 200,
        ..Grh::default()
    });
    assert_eq!(refuse(&init, a), VerbsError::Invalid);
}
