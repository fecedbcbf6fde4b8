// SPDX-License-Identifier: GPL-2.0

//! A UD QP's transitions as ibv_ud_pingpong makes them (RESET to INIT with
//! port, P_Key index and Q_Key; INIT to RTR with the state alone; RTR to
//! RTS with the send PSN), as the mailboxes mainline posts, and its query:
//! the Q_Key read back, no address vector.

use super::query::query;
use super::tests::{expect, facts, mailbox, CQN_RECV, CQN_SEND, DEV, PD, QPN, USR_PAGE};
use super::*;

fn ud() -> QpFacts {
    QpFacts {
        service: Service::Ud,
        ..facts()
    }
}

fn step(soft: &QpSoft, a: &QpAttr) -> (QpCommand, QpSoft) {
    let m = modify(&DEV, &ud(), soft, a).unwrap();
    (m.command.unwrap(), m.next)
}

const QKEY: u32 = 0x1111_1111;

fn init() -> QpAttr {
    QpAttr {
        mask: mask::STATE | mask::PKEY_INDEX | mask::PORT | mask::QKEY,
        qp_state: QpState::Init as u32,
        port_num: 1,
        qkey: QKEY,
        ..QpAttr::default()
    }
}

fn rtr() -> QpAttr {
    QpAttr {
        mask: mask::STATE,
        qp_state: QpState::Rtr as u32,
        ..QpAttr::default()
    }
}

fn rts() -> QpAttr {
    QpAttr {
        mask: mask::STATE | mask::SQ_PSN,
        qp_state: QpState::Rts as u32,
        sq_psn: 0x12345,
        ..QpAttr::default()
    }
}

// Every transition of a UD QP: 4096-byte MTU and 2^13-byte messages,
// whatever the mask or the device's limit.
const MTU_MSGMAX: (usize, &[u8]) = (8 + 0x08, &[0xad, 0x48, 0x32]);

#[test]
fn ud_pingpong_rst2init() {
    let (c, next) = step(&QpSoft::new(), &init());
    assert_eq!((c.op, c.in_mod), (QpOp::Rst2Init, 0x248));
    let want = expect(&[
        (0x00, &[0, 0, 0, 0x30]),    // PKEY_INDEX | Q_KEY
        (8, &[0x10, 0x03, 0x18, 0]), // INIT, UD, PM MIGRATED
        PD,
        MTU_MSGMAX,
        USR_PAGE,
        QPN,
        (8 + 0x70, &[0x80, 0, 0, 0]), // ACK_REQ_FREQ
        CQN_SEND,
        CQN_RECV,
        (8 + 0xa0, &0x1_2345_6040u64.to_be_bytes()),
        (8 + 0xa8, &QKEY.to_be_bytes()),
        (8 + 0xcc, &[0, 1, 0, 0]),
    ]);
    assert_eq!(mailbox(&c), want);
    assert_eq!(next.port, 1);
}

#[test]
fn ud_pingpong_init2rtr_has_a_scheduling_queue_and_no_path() {
    let (_, init) = step(&QpSoft::new(), &init());
    let (c, _) = step(&init, &rtr());
    assert_eq!(c.op, QpOp::Init2Rtr);
    let want = expect(&[
        (8, &[0x20, 0x03, 0x18, 0]),
        PD,
        MTU_MSGMAX,
        USR_PAGE,
        QPN,
        (8 + 0x18 + 0x04, &[0xff]), // the sink counter
        (8 + 0x18 + 0x20, &[0x83]), // port 1, the default queue
        (8 + 0x70, &[0x80, 0, 0, 0]),
        CQN_SEND,
        CQN_RECV,
    ]);
    assert_eq!(mailbox(&c), want);
}

#[test]
fn ud_pingpong_rtr2rts() {
    let (_, init) = step(&QpSoft::new(), &init());
    let (_, rtr) = step(&init, &rtr());
    let (c, next) = step(&rtr, &rts());
    assert_eq!(c.op, QpOp::Rtr2Rts);
    let want = expect(&[
        (8, &[0x30, 0x03, 0x18, 0]),
        PD,
        MTU_MSGMAX,
        USR_PAGE,
        QPN,
        (8 + 0x70, &[0x80, 0, 0, 0]),
        (8 + 0x78, &[0, 0x01, 0x23, 0x45]),
        CQN_SEND,
        CQN_RECV,
    ]);
    assert_eq!(mailbox(&c), want);
    assert_eq!(next.state, QpState::Rts);
}

#[test]
fn a_ud_path_mtu_is_not_asked_for() {
    // Were one given (ib_modify_qp_is_ok() would refuse it first), it
    // changes nothing: mainline's UD branch comes before the MTU check.
    let (_, init) = step(&QpSoft::new(), &init());
    let mut a = rtr();
    a.mask |= mask::PATH_MTU;
    a.path_mtu = 0;
    let (c, _) = step(&init, &a);
    assert_eq!(c.context.mtu_msgmax, 0xad);
}

#[test]
fn a_ud_query_reads_the_q_key_and_no_address_vector() {
    let (_, init) = step(&QpSoft::new(), &init());
    let (_, rtr_soft) = step(&init, &rtr());
    let (c, rts_soft) = step(&rtr_soft, &rts());
    // What the device keeps across the transitions: RST2INIT's Q_Key.
    let mut kept = c.context;
    kept.qkey = QKEY;
    let alt = PathFields {
        pkey_index: 3,
        ..PathFields::default()
    };
    let q = query(&kept, &alt, &rts_soft, Service::Ud, DEV.num_ports).unwrap();
    assert_eq!(q.state, QpState::Rts);
    assert_eq!(q.qkey, QKEY);
    assert_eq!(q.sq_psn, 0x12345);
    assert_eq!((q.ah, q.alt_ah, q.alt_pkey_index), (None, None, 0));
    assert_eq!(q.port_num, 1);
    // The same context read as an RC QP's decodes the paths.
    let rc = query(&kept, &alt, &rts_soft, Service::Rc, DEV.num_ports).unwrap();
    assert_eq!(rc.alt_pkey_index, 3);
}
