//! MODIFY_CQ as mainline sends it (`core/cq.c:mlx4_cq_resize`,
//! `mlx4_cq_modify`): a resize as `ib/cq.c:mlx4_ib_resize_cq` and
//! libmlx4's `mlx4_resize_cq` drive it (the RESIZE CQE, the copy they do
//! themselves, the new buffer's ownership), moderation, and the strict
//! refusals.

use super::harness::*;
use crate::bytes::{be16, be32, put_be16};
use crate::command::{op, status};
use crate::cq::CQE_OPCODE_RESIZE;

/// The resized CQ's new buffer (its MTT entries `mtt_of` it).
const NEW_BUF: u64 = 0x13_0000;
const NENT: u32 = 1 << CQ_LOG;

/// A signalled inline SEND of QP 0x40 at SQ `index`: a send CQE on CQ 1.
fn send(h: &mut Harness, index: u32) {
    let w = Harness::inline_send(QPN, index, b"c", true);
    h.write_wqe(QP_BUF, index, &w);
    h.doorbell(UAR, QPN);
}

/// MODIFY_CQ opmod 0 of CQ 1 to 2^`log` entries at NEW_BUF, the mailbox
/// as mlx4_cq_resize fills it (no UAR, EQ or doorbell record).
fn resize(h: &mut Harness, log: u8) -> u8 {
    h.poke(IN_MB, &Harness::cq_ctx(log, 0, 0, mtt_of(NEW_BUF), 0));
    h.cmd(op::MODIFY_CQ, 0, CQN)
}

/// CQE `index` of a buffer of `nent` at `buf`, if its owner bit says it is
/// software's (`get_sw_cqe`).
fn sw_cqe(h: &Harness, buf: u64, nent: u32, index: u32) -> Option<Vec<u8>> {
    let c = h.mem(buf + u64::from(index & (nent - 1)) * 32, 32);
    ((c[31] & 0x80 != 0) == (index & nent != 0)).then_some(c)
}

/// libmlx4's `mlx4_cq_resize_copy_cqes`: from consumer index `ci` up to
/// the RESIZE CQE, each CQE one index later in the new buffer, its owner
/// bit for the new size; the consumer index steps over the RESIZE CQE,
/// and `mlx4_update_cons_index` writes it. Returns it.
fn copy_cqes(h: &mut Harness, new_nent: u32, ci: u32) -> u32 {
    let mut i = ci;
    loop {
        let c = h.mem(CQ_BUF + u64::from(i & (NENT - 1)) * 32, 32);
        if c[31] & 0x1f == CQE_OPCODE_RESIZE {
            break;
        }
        let mut n = c.clone();
        n[31] = (c[31] & 0x7f) | if (i + 1) & new_nent != 0 { 0x80 } else { 0 };
        h.poke(NEW_BUF + u64::from((i + 1) & (new_nent - 1)) * 32, &n);
        i += 1;
        assert!(i - ci <= NENT, "no RESIZE CQE");
    }
    h.set_ci(ci + 1);
    ci + 1
}

/// The wqe_index of a send CQE.
fn wqe_index(cqe: &[u8]) -> u16 {
    be16(cqe, 0x18)
}

#[test]
fn a_resize_ends_the_old_buffer_and_goes_on_in_the_new() {
    let mut h = Harness::setup();
    for i in 0..3 {
        send(&mut h, i);
    }
    // Software polled one.
    h.set_ci(1);
    assert_eq!(resize(&mut h, 5), status::OK);
    // The RESIZE CQE at the producer index, owner as for index 3.
    assert_eq!(h.cqe(3)[31], CQE_OPCODE_RESIZE);
    let cq = h.dev.cqs().get(CQN).unwrap();
    assert_eq!((cq.log_size, cq.pi, cq.buf.base()), (5, 4, NEW_BUF));
    // The new buffer: every CQE hardware's for the index due there next.
    for slot in 0..32u32 {
        let index = if slot >= 4 { slot } else { 32 + slot };
        assert!(sw_cqe(&h, NEW_BUF, 32, index).is_none(), "slot {slot}");
    }
    // libmlx4 copies CQEs 1 and 2 to indices 2 and 3.
    let ci = copy_cqes(&mut h, 32, 1);
    assert_eq!(ci, 2);
    let seen: Vec<_> = (2..4)
        .map(|i| wqe_index(&sw_cqe(&h, NEW_BUF, 32, i).unwrap()))
        .collect();
    assert_eq!(seen, [1, 2]);
    assert!(sw_cqe(&h, NEW_BUF, 32, 4).is_none());
    // The next completion lands at index 4 of the new buffer.
    send(&mut h, 3);
    assert_eq!(wqe_index(&sw_cqe(&h, NEW_BUF, 32, 4).unwrap()), 3);
    assert!(sw_cqe(&h, NEW_BUF, 32, 5).is_none());
    assert_eq!(h.cqe(4)[31] & 0x1f, 0, "old buffer untouched");
    let rec = &h.records_of("cq_resize")[0];
    assert_eq!(
        (rec["resize_cqe"].as_u64(), rec["log_size"].as_u64()),
        (Some(3), Some(5))
    );
    // The RESIZE CQE completes nothing.
    let g = &h.dev.counters().global;
    assert_eq!((g.cqes, g.recv_cqes, g.eqes), (8, 4, 0));
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn a_shrink_in_the_second_pass_sets_ownership_by_the_new_size() {
    let mut h = Harness::setup();
    // 20 completions, software two behind: producer 20, set_ci 18.
    for i in 0..20 {
        send(&mut h, i);
        h.set_ci(i.saturating_sub(1));
    }
    assert_eq!(resize(&mut h, 3), status::OK);
    // Index 20 is in the old buffer's second pass: owner 1.
    assert_eq!(h.cqe(20)[31], 0x80 | CQE_OPCODE_RESIZE);
    let ci = copy_cqes(&mut h, 8, 18);
    assert_eq!(ci, 19);
    assert_eq!(wqe_index(&sw_cqe(&h, NEW_BUF, 8, 19).unwrap()), 18);
    assert_eq!(wqe_index(&sw_cqe(&h, NEW_BUF, 8, 20).unwrap()), 19);
    // 21..=26 land where the pass bit of 8 is clear or set alike.
    for index in 21..27 {
        assert!(sw_cqe(&h, NEW_BUF, 8, index).is_none(), "{index}");
    }
    send(&mut h, 20);
    let c = sw_cqe(&h, NEW_BUF, 8, 21).unwrap();
    assert_eq!((wqe_index(&c), c[31] & 0x1f), (20, 0x0a));
    assert!(h.error_codes().is_empty());
}

#[test]
fn moderation_is_kept_in_the_context_not_applied() {
    let mut h = Harness::setup();
    let mut mb = [0u8; 0x40];
    put_be16(&mut mb, 0x10, 10); // cq_period
    put_be16(&mut mb, 0x12, 16); // cq_max_count
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::MODIFY_CQ, 1, CQN), status::OK);
    assert_eq!(h.dev.cqs().get(CQN).unwrap().moderation(), (16, 10));
    let rec = &h.records_of("cq_moderation")[0];
    assert_eq!(
        (rec["count"].as_u64(), rec["period"].as_u64()),
        (Some(16), Some(10))
    );
    // Armed: the first completion raises its event at once.
    h.eq_doorbell(1, 0, true);
    h.arm_cq(UAR, CQN, 2, 0);
    send(&mut h, 0);
    assert_eq!(h.dev.counters().global.eqes, 1);
    assert_eq!(be32(&h.eqe(EQ1_BUF, 0), 4), CQN);
    // HW2SW_CQ returns them (a CQ no QP uses).
    assert_eq!(h.sw2hw_cq(5, CQ_LOG, UAR, 1, NEW_BUF, CQ_DB + 0x300), 0);
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::MODIFY_CQ, 1, 5), status::OK);
    assert_eq!(h.cmd(op::HW2SW_CQ, 0, 5), status::OK);
    assert_eq!(h.mem(OUT_MB + 0x10, 4), [0, 10, 0, 16]);
    assert!(h.error_codes().is_empty());
}

#[test]
fn what_the_model_refuses() {
    let mut h = Harness::setup();
    let old = h.dev.cqs().get(CQN).unwrap().buf.clone();
    assert_eq!(h.cmd(op::MODIFY_CQ, 2, CQN), status::BAD_PARAM);
    assert_eq!(h.cmd(op::MODIFY_CQ, 1, 9), status::BAD_RES_STATE);
    assert_eq!(h.cmd(op::MODIFY_CQ, 0, 1 << 12), status::BAD_INDEX);
    assert_eq!(resize(&mut h, 13), status::BAD_SIZE);
    let mut mb = Harness::cq_ctx(5, 0, 0, mtt_of(NEW_BUF), 0);
    put_be16(&mut mb, 0x0a, 0x40); // page_offset
    h.poke(IN_MB, &mb);
    assert_eq!(h.cmd(op::MODIFY_CQ, 0, CQN), status::BAD_PARAM);
    // Three outstanding into two entries (the drivers check it first).
    for i in 0..3 {
        send(&mut h, i);
    }
    assert_eq!(resize(&mut h, 1), status::BAD_SIZE);
    // 16 outstanding: no room for the RESIZE CQE.
    for i in 3..16 {
        send(&mut h, i);
    }
    assert_eq!(resize(&mut h, 5), status::RESOURCE_BUSY);
    assert_eq!(h.cqe(16)[31] & 0x1f, 0x0a, "the old CQE 0 stays");
    // Overrun: the CQ in error.
    send(&mut h, 16);
    assert_eq!(h.dev.counters().global.cq_overruns, 1);
    h.set_ci(16);
    assert_eq!(resize(&mut h, 5), status::BAD_RES_STATE);
    let cq = h.dev.cqs().get(CQN).unwrap();
    assert_eq!((cq.log_size, &cq.buf), (CQ_LOG, &old));
    assert!(h.records_of("cq_resize").is_empty());
    let reasons: Vec<_> = h
        .records_of("fw_refused")
        .iter()
        .map(|r| r["reason"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        reasons,
        [
            "modify_cq_opmod",
            "resize_too_small",
            "resize_full",
            "resize_cq_error"
        ]
    );
    assert_eq!(h.dev.counters().global.fw_unmodelled, 4);
    assert!(h.error_codes().is_empty());
}
