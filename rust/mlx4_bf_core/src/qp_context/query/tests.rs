// SPDX-License-Identifier: GPL-2.0

//! QUERY_QP read back: what each transition ibv_rc_pingpong makes wrote
//! into the context is what `query()` says, as mlx4_ib_query_qp() would.

use super::*;
use crate::qp_context::tests::{init_attr, rtr_attr, rts_attr, step, DEV};
use crate::qp_context::{QpAttr, QpCommand};
use crate::verbs::{mask, mtu};
use proptest::prelude::*;

fn queried(c: &QpCommand, soft: &QpSoft) -> Queried {
    query(
        &c.context,
        &PathFields::default(),
        soft,
        Service::Rc,
        DEV.num_ports,
    )
    .unwrap()
}

#[test]
fn states_decode_as_to_ib_qp_state() {
    for s in [
        QpState::Reset,
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Sqd,
        QpState::Sqe,
        QpState::Err,
    ] {
        assert_eq!(state_of(s.mlx4()), Some(s));
    }
    assert_eq!(state_of(MLX4_SQ_DRAINING), Some(QpState::Sqd));
    assert_eq!(state_of(8), None);
    assert_eq!(state_of(15), None);
}

#[test]
fn init_says_the_port_it_was_given_and_only_remote_write_before_rtr() {
    let all = access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC;
    let (c, soft) = step(&QpSoft::new(), &init_attr(all));
    let q = queried(&c, &soft);
    assert_eq!(q.state, QpState::Init);
    assert_eq!((q.port_num, q.pkey_index), (1, 0));
    assert_eq!(q.path_mig_state, mig::MIGRATED);
    // No responder resources yet: mainline enables only RDMA writes
    // (`to_mlx4_access_flags()` with dest_rd_atomic 0).
    assert_eq!(q.qp_access_flags, access::REMOTE_WRITE);
    assert!(!q.sq_draining);
}

#[test]
fn rtr_reads_back_the_path_and_the_responder() {
    let all = access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC;
    let (_, soft) = step(&QpSoft::new(), &init_attr(all));
    let (c, soft) = step(&soft, &rtr_attr());
    let q = queried(&c, &soft);
    let a = rtr_attr();
    assert_eq!(q.state, QpState::Rtr);
    assert_eq!(q.path_mtu, mtu::MTU_1024);
    assert_eq!((q.dest_qp_num, q.rq_psn), (a.dest_qp_num, a.rq_psn));
    assert_eq!((q.max_dest_rd_atomic, q.min_rnr_timer), (1, 12));
    assert_eq!(
        q.ah,
        Some(PathAh {
            port_num: 1,
            ah: a.ah
        })
    );
    assert_eq!(q.port_num, 1);
    assert_eq!(q.qp_access_flags, all);
    // No alternate path was set: the zeroed one names port 1, LID 0.
    assert_eq!(
        q.alt_ah,
        Some(PathAh::default()).map(|p| PathAh { port_num: 1, ..p })
    );
}

#[test]
fn rts_reads_back_the_requester() {
    let (_, soft) = step(&QpSoft::new(), &init_attr(0));
    let (_, soft) = step(&soft, &rtr_attr());
    let (c, soft) = step(&soft, &rts_attr());
    let q = queried(&c, &soft);
    let a = rts_attr();
    assert_eq!(q.state, QpState::Rts);
    assert_eq!((q.timeout, q.retry_cnt, q.rnr_retry), (14, 7, 7));
    assert_eq!((q.sq_psn, q.max_rd_atomic), (a.sq_psn, 1));
}

#[test]
fn undefined_state_or_migration_state_is_invalid() {
    let (c, soft) = step(&QpSoft::new(), &init_attr(0));
    let mut f = c.context;
    f.flags = (f.flags & 0x0fff_ffff) | (9 << 28);
    let alt = PathFields::default();
    assert_eq!(
        query(&f, &alt, &soft, Service::Rc, 1),
        Err(VerbsError::Invalid)
    );
    let mut f = c.context;
    f.flags = (f.flags & !(3 << 11)) | (2 << 11);
    assert_eq!(
        query(&f, &alt, &soft, Service::Rc, 1),
        Err(VerbsError::Invalid)
    );
}

#[test]
fn a_path_on_a_port_the_device_lacks_has_no_address() {
    let p = PathFields {
        sched_queue: 0x40,
        ..PathFields::default()
    };
    assert_eq!(ah_of(&p, 1), None);
    assert_eq!(ah_of(&p, 2).map(|a| a.port_num), Some(2));
}

proptest! {
    #[test]
    fn rtr_attributes_round_trip(
        dest_qp_num in 0u32..1 << 24,
        rq_psn in 0u32..1 << 24,
        min_rnr_timer in 0u8..32,
        path_mtu in mtu::MTU_256..=mtu::MTU_2048,
        dlid in any::<u16>(),
        sl in 0u8..16,
        src_path_bits in 0u8..128,
        grh in proptest::option::of((any::<[u8; 16]>(), 0u32..1 << 20, 0u8..128, any::<u8>(), any::<u8>())),
    ) {
        let mut a = rtr_attr();
        a.dest_qp_num = dest_qp_num;
        a.rq_psn = rq_psn;
        a.min_rnr_timer = min_rnr_timer;
        a.path_mtu = path_mtu;
        a.ah = AhAttr {
            dlid,
            sl,
            src_path_bits,
            static_rate: 0,
            grh: grh.map(|(dgid, flow_label, sgid_index, hop_limit, traffic_class)| Grh {
                dgid, flow_label, sgid_index, hop_limit, traffic_class,
            }),
        };
        let (_, soft) = step(&QpSoft::new(), &init_attr(access::REMOTE_WRITE));
        let (c, soft) = step(&soft, &a);
        let q = queried(&c, &soft);
        prop_assert_eq!((q.dest_qp_num, q.rq_psn, q.min_rnr_timer), (dest_qp_num, rq_psn, min_rnr_timer));
        prop_assert_eq!(q.path_mtu, path_mtu);
        prop_assert_eq!(q.ah, Some(PathAh { port_num: 1, ah: a.ah }));
    }

    #[test]
    fn rts_attributes_round_trip(
        timeout in 0u8..32,
        retry_cnt in 0u8..8,
        rnr_retry in 0u8..8,
        sq_psn in 0u32..1 << 24,
        log_rd_atomic in 0u32..5,
    ) {
        let a = QpAttr {
            timeout,
            retry_cnt,
            rnr_retry,
            sq_psn,
            max_rd_atomic: 1 << log_rd_atomic,
            ..rts_attr()
        };
        assert!(a.mask & mask::MAX_QP_RD_ATOMIC != 0);
        let (_, soft) = step(&QpSoft::new(), &init_attr(0));
        let (_, soft) = step(&soft, &rtr_attr());
        let (c, soft) = step(&soft, &a);
        let q = queried(&c, &soft);
        prop_assert_eq!((q.timeout, q.retry_cnt, q.rnr_retry), (timeout, retry_cnt, rnr_retry));
        prop_assert_eq!((q.sq_psn, q.max_rd_atomic), (sq_psn, 1 << log_rd_atomic));
    }
}
