// SPDX-License-Identifier: GPL-2.0

//! A QP on a shared receive queue: the contexts `__mlx4_ib_modify_qp()`
//! posts for `ibv_srq_pingpong`'s QPs (no receive queue of their own, so no
//! doorbell record; RIC and the SRQN at every transition).

use super::tests::{
    expect, facts, init_attr, mailbox, rtr_attr, CQN_RECV, CQN_SEND, PD, QPN, USR_PAGE,
};
use super::*;
use crate::qp_size::{self, UserQpRequest};

const SRQN: u32 = 0x41;

fn on_srq() -> QpFacts {
    let r = UserQpRequest {
        max_recv_wr: 0,
        max_recv_sge: 0,
        log_sq_bb_count: 6,
        log_sq_stride: 6,
        inl_recv_sz: 0,
        srq: true,
    };
    let limits = qp_size::QpLimits {
        max_wqes: 1 << 14,
        max_sq_sg: 32,
        max_rq_sg: 32,
        max_sq_desc_sz: 1008,
    };
    QpFacts {
        geometry: qp_size::user_qp(&limits, &r).unwrap().0,
        // libmlx4 maps no receive doorbell record for it.
        db_rec: 0,
        srqn: Some(SRQN),
        ..facts()
    }
}

fn step(soft: &QpSoft, a: &QpAttr) -> (QpCommand, QpSoft) {
    let m = modify(&super::tests::DEV, &on_srq(), soft, a).unwrap();
    (m.command.unwrap(), m.next)
}

/// `1 << 24 | srqn`.
const SRQN_WORD: (usize, &[u8]) = (8 + 0xac, &[0x01, 0, 0, 0x41]);

#[test]
fn srq_pingpong_rst2init() {
    let (c, _) = step(&QpSoft::new(), &init_attr(0));
    let want = expect(&[
        (0x00, &[0, 0, 0, 0x1e]),
        (8, &[0x10, 0, 0x18, 0]),
        PD,
        // No RQ: `wqe_shift - 4` of a zeroed queue; SQ 2^6 x 64.
        (8 + 0x09, &[0xfc, 0x32]),
        USR_PAGE,
        QPN,
        (8 + 0x70, &[0x80, 0, 0, 0]),
        CQN_SEND,
        (8 + 0x90, &[0, 0, 0, 0x10]), // RIC
        CQN_RECV,
        // No doorbell record at 0xa0.
        SRQN_WORD,
        (8 + 0xcc, &[0, 1, 0, 0]),
    ]);
    assert_eq!(mailbox(&c), want);
}

#[test]
fn every_transition_names_the_srq() {
    let (_, init) = step(&QpSoft::new(), &init_attr(0));
    let (c, _) = step(&init, &rtr_attr());
    let b = mailbox(&c);
    assert_eq!(&b[8 + 0xac..8 + 0xb0], SRQN_WORD.1);
    assert_eq!(c.context.params2 & PARAMS2_RIC, PARAMS2_RIC);
    // RIC carries no optpar bit: INIT2RTR's optpar is the RC QP's.
    let (rc, _) = super::tests::step(&init, &rtr_attr());
    assert_eq!(c.optpar, rc.optpar);
    // A QP with its own receive queue names none.
    assert_eq!((rc.context.srqn, rc.context.params2 & PARAMS2_RIC), (0, 0));
}
