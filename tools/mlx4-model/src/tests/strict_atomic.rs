//! Atomics (`datapath::atomic`): CMP_SWAP and FETCH_ADD from QP 0x40 (PD
//! 0) to QP 0x41 (PD 1) of `Harness::pair_with_pds()`, posted as libmlx4 `mlx4_post_send` writes
//! them (ctrl, raddr, atomic, one 8-byte data segment: DS 4), on a region
//! of QP 0x41 with every right; each rule broken once.

use super::harness::*;
use crate::bytes::{be16, be32, put_be32, put_be64};
use crate::command::{op, status};
use crate::cq::{syndrome, CQE_IS_SEND, CQE_OPCODE_ERROR};
use crate::diag::{ATOMICS_CMP_SWAP, ATOMICS_FETCH_ADD, ATOMICS_REFUSED};
use crate::mr::perm;
use crate::qp::QpState;
use crate::wqe::opcode;

/// QP 0x41's protection domain.
const PD2: u32 = 1;
/// QP 0x41's region: one 4 KiB page at VA, MPT 0x106.
const PAGE: u64 = 0x12_0000;
const MTT: u64 = 16;
const VA: u64 = 0x7f00_0000_0000;
const KEY: u32 = (0x106 << 8) | 0x5a;
/// Every right a region can have.
const ALL: u32 =
    perm::LOCAL_READ | perm::LOCAL_WRITE | perm::REMOTE_READ | perm::REMOTE_WRITE | perm::ATOMIC;
/// QP 0x40's region over GATHER_BUF's page, MPT 0x107, LOCAL_WRITE.
const MTT_A: u64 = 17;
const VA_A: u64 = 0x7f00_1000_0000;
const LKEY_A: u32 = (0x107 << 8) | 0x01;
/// The operand's offset in the region, and its address.
const AT: u64 = 0x40;
const OPERAND: u64 = PAGE + AT;
/// The requester's data segment: 8 bytes at GATHER_BUF, reserved lkey.
const LANDING: (u32, u32, u64) = (8, RESERVED_LKEY, GATHER_BUF);
/// What the responder's operand and the requester's landing hold before a
/// refused atomic.
const BEFORE: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];
const LANDING_BEFORE: [u8; 8] = [0xee; 8];
/// params2 MLX4_QP_BIT_RRE, _RWE, _RAE.
const RRE: u32 = 1 << 15;
const RWE: u32 = 1 << 14;
const RAE: u32 = 1 << 13;

/// The two QPs with QP 0x41's region (rights `access`, PD 1) and QP
/// 0x40's (LOCAL_WRITE, PD 0) registered.
fn pair_with(access: u32) -> Harness {
    let mut h = Harness::pair_with_pds(0, PD2);
    assert_eq!(h.write_mtt(MTT, &[PAGE]), 0);
    let e = Harness::mpt_entry(KEY, access, PD2, VA, 0x1000, MTT);
    assert_eq!(h.sw2hw_mpt(&e), 0);
    assert_eq!(h.write_mtt(MTT_A, &[GATHER_BUF]), 0);
    let local = perm::LOCAL_READ | perm::LOCAL_WRITE;
    let e = Harness::mpt_entry(LKEY_A, local, 0, VA_A, 0x1000, MTT_A);
    assert_eq!(h.sw2hw_mpt(&e), 0);
    h
}

fn pair() -> Harness {
    pair_with(ALL)
}

/// QP 0x41 made again from RESET with `params2` (its access enables) in
/// its context, then to RTS as `pair()` made it.
fn remake_responder(h: &mut Harness, params2: u32) {
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN2), status::OK);
    h.init_sq(QP2_BUF, SQ_LOG);
    h.create_qp_with(QPN2, &responder_mailbox(params2, 0));
    h.fill_rq(QP2_BUF, RQ2_DB, RECV2_BUF);
}

/// QP 0x41's mailbox as `pair()` sends it, with `params2` and `optpar`.
fn responder_mailbox(params2: u32, optpar: u32) -> Vec<u8> {
    let mb = Harness::qp_mailbox(QPN2, UAR, CQN, mtt_of(QP2_BUF), SQ_LOG);
    let mb = Harness::connect_to(Harness::with_rq(mb, RCQN2, RQ2_DB), QPN);
    let mut mb = Harness::with_pd(mb, PD2);
    put_be32(&mut mb, 0, optpar);
    put_be32(&mut mb[8..], 0x90, params2);
    mb
}

/// QP 0x40's atomic `op` at SQ `index` on `raddr` under `rkey`, operands
/// (swap_add, compare), then the data segments `segs`. Signalled.
fn atomic_wqe(
    index: u32,
    op: u8,
    (raddr, rkey): (u64, u32),
    (swap_add, compare): (u64, u64),
    segs: &[(u32, u32, u64)],
) -> Vec<u8> {
    let mut w = data_wqe(QPN, index, op, Some((raddr, rkey)), b"", segs);
    let mut a = [0u8; 16];
    put_be64(&mut a, 0, swap_add);
    put_be64(&mut a, 8, compare);
    w.splice(32..32, a);
    w[7] += 1;
    w
}

/// An atomic as libmlx4 posts it: on the operand, landing at GATHER_BUF.
fn libmlx4(index: u32, op: u8, operands: (u64, u64)) -> Vec<u8> {
    atomic_wqe(index, op, (VA + AT, KEY), operands, &[LANDING])
}

fn post(h: &mut Harness, index: u32, w: &[u8]) {
    h.write_wqe(QP_BUF, index, w);
    h.doorbell(UAR, QPN);
}

/// Asserts QP 0x40's send CQE `index`: the atomic `op`'s, byte_cnt 8.
fn assert_done(h: &Harness, index: u32, op: u8) {
    let c = h.cqe(index);
    assert_eq!(be32(&c, 0), QPN);
    assert_eq!(c[0x1f] & 0x7f, CQE_IS_SEND | op);
    assert_eq!((be32(&c, 0x14), be16(&c, 0x18)), (8, index as u16));
}

/// The executed atomics' counters: (CMP_SWAP, FETCH_ADD, refused).
fn counted(h: &mut Harness) -> (u64, u64, u64) {
    (
        h.diag_read(ATOMICS_CMP_SWAP),
        h.diag_read(ATOMICS_FETCH_ADD),
        h.diag_read(ATOMICS_REFUSED),
    )
}

#[test]
fn query_dev_cap_advertises_atomics() {
    let mut h = Harness::new();
    assert_eq!(h.cmd_full(op::QUERY_DEV_CAP, 0, 0, 0, OUT_MB, None), 0);
    let flags = be32(&h.mem(OUT_MB + 0x44, 4), 0);
    assert_ne!(flags & (1 << 18), 0, "MLX4_DEV_CAP_FLAG_ATOMIC");
    assert_eq!(flags & 0x7, 0x7, "RC, UC, UD");
}

#[test]
fn a_matching_cmp_swap_swaps_and_returns_the_original() {
    let mut h = pair();
    let old = 0x1122_3344_5566_7788u64;
    h.poke(OPERAND, &old.to_be_bytes());
    // The landing through QP 0x40's own region this time.
    let w = atomic_wqe(
        0,
        opcode::ATOMIC_CS,
        (VA + AT, KEY),
        (0xdead_beef_0000_0001, old),
        &[(8, LKEY_A, VA_A + 0x10)],
    );
    post(&mut h, 0, &w);
    assert_eq!(h.mem(OPERAND, 8), 0xdead_beef_0000_0001u64.to_be_bytes());
    assert_eq!(h.mem(GATHER_BUF + 0x10, 8), old.to_be_bytes());
    assert_done(&h, 0, opcode::ATOMIC_CS);
    assert_eq!(counted(&mut h), (1, 0, 0));
    let r = &h.records_of("atomic")[0];
    assert_eq!(
        (r["from"].as_u64(), r["to"].as_u64()),
        (Some(0x40), Some(0x41))
    );
    assert_eq!(r["original"].as_u64(), Some(old));
    assert_eq!(r["stored"].as_u64(), Some(0xdead_beef_0000_0001));
    assert_eq!(h.sq_ci(QPN), 1);
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn a_cmp_swap_that_does_not_match_leaves_memory_and_returns_the_original() {
    let mut h = pair();
    let old = 0x0102_0304_0506_0708u64;
    h.poke(OPERAND, &old.to_be_bytes());
    // The compare is the operand's bytes read little-endian: no match.
    let le = u64::from_le_bytes(old.to_be_bytes());
    post(&mut h, 0, &libmlx4(0, opcode::ATOMIC_CS, (7, le)));
    assert_eq!(h.mem(OPERAND, 8), old.to_be_bytes(), "untouched");
    assert_eq!(h.mem(GATHER_BUF, 8), old.to_be_bytes());
    assert_done(&h, 0, opcode::ATOMIC_CS);
    assert_eq!(counted(&mut h), (1, 0, 0), "executed, not matched");
    assert!(h.records_of("atomic")[0]["stored"].is_null());
    // Nothing DMA-written but the original into the landing.
    let writes: Vec<_> = h
        .records_of("dma_write")
        .into_iter()
        .filter(|r| r["what"] == "atomic")
        .collect();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0]["addr"].as_u64(), Some(GATHER_BUF));
    assert!(h.error_codes().is_empty());
}

#[test]
fn fetch_add_adds_big_endian_with_carry_and_wraps() {
    let mut h = pair();
    // (in memory, addend, result): a carry out of the last byte in memory,
    // one through seven bytes, and the wrap at 2^64.
    let cases = [
        (0xffu64, 1u64, 0x100u64),
        (0x00ff_ffff_ffff_ffff, 1, 0x0100_0000_0000_0000),
        (u64::MAX, 2, 1),
        (0x1234, 0, 0x1234),
    ];
    for (i, &(old, add, new)) in cases.iter().enumerate() {
        let i = i as u32;
        h.poke(OPERAND, &old.to_be_bytes());
        h.poke(GATHER_BUF, &LANDING_BEFORE);
        post(&mut h, i, &libmlx4(i, opcode::ATOMIC_FA, (add, 0)));
        assert_eq!(h.mem(OPERAND, 8), new.to_be_bytes(), "{old:#x} + {add}");
        assert_eq!(h.mem(GATHER_BUF, 8), old.to_be_bytes());
        assert_done(&h, i, opcode::ATOMIC_FA);
    }
    assert_eq!(h.mem(OPERAND - 8, 8), [0; 8], "the bytes around untouched");
    assert_eq!(h.mem(OPERAND + 8, 8), [0; 8]);
    // Unsignalled: executed, no CQE.
    h.poke(OPERAND, &5u64.to_be_bytes());
    let mut w = libmlx4(4, opcode::ATOMIC_FA, (3, 0));
    put_be32(&mut w, 8, 0);
    post(&mut h, 4, &w);
    assert_eq!(h.mem(OPERAND, 8), 8u64.to_be_bytes());
    assert_eq!(h.dev.counters().global.cqes, 4);
    assert_eq!(counted(&mut h), (0, 5, 0));
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn an_atomic_by_blueflame_as_by_doorbell() {
    let mut h = pair();
    h.poke(OPERAND, &40u64.to_be_bytes());
    let w = libmlx4(0, opcode::ATOMIC_FA, (2, 0));
    h.write_wqe(QP_BUF, 0, &w);
    h.bf_copy(UAR, 0, &w, 8);
    assert_eq!(h.mem(OPERAND, 8), 42u64.to_be_bytes());
    assert_eq!(h.mem(GATHER_BUF, 8), 40u64.to_be_bytes());
    assert_done(&h, 0, opcode::ATOMIC_FA);
    assert_eq!(h.dev.counters().global.wqes_bf, 1);
    assert!(h.error_codes().is_empty());
}

/// Posts `w` on `h` (its operand and landing set first) and asserts the
/// refusal: an error CQE with `syn`, QP 0x40 in ERR, neither side's memory
/// touched, no atomic executed. Returns `h` for the rest.
fn refused(mut h: Harness, w: &[u8], syn: u8) -> Harness {
    h.poke(OPERAND, &BEFORE);
    h.poke(GATHER_BUF, &LANDING_BEFORE);
    post(&mut h, 0, w);
    let c = h.cqe(0);
    assert_eq!(c[0x1f] & 0x7f, CQE_IS_SEND | CQE_OPCODE_ERROR);
    assert_eq!(c[0x1b], syn, "syndrome");
    assert_eq!(h.dev.qps().get(QPN).unwrap().state, QpState::Err);
    assert_eq!(h.mem(OPERAND, 8), BEFORE, "the responder's memory");
    assert_eq!(h.mem(GATHER_BUF, 8), LANDING_BEFORE, "the landing");
    assert!(h.records_of("atomic").is_empty());
    let (cs, fa, _) = counted(&mut h);
    assert_eq!((cs, fa), (0, 0));
    h.check_invariants(false);
    h
}

/// The `prot_fault` reasons recorded.
fn reasons(h: &Harness) -> Vec<String> {
    let r = h.records_of("prot_fault");
    r.iter()
        .map(|f| f["reason"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_misaligned_raddr_is_an_invalid_request() {
    for at in [AT + 4, AT + 1, AT + 7] {
        let w = atomic_wqe(0, opcode::ATOMIC_FA, (VA + at, KEY), (1, 0), &[LANDING]);
        let mut h = refused(pair(), &w, syndrome::REMOTE_INVAL_REQ_ERR);
        assert_eq!(h.mem(OPERAND + 8, 8), [0; 8]);
        assert_eq!(counted(&mut h), (0, 0, 1));
        assert!(reasons(&h).is_empty(), "not a protection fault");
        assert_eq!(
            h.records_of("deliver_error")[0]["error"],
            "misaligned atomic"
        );
    }
}

#[test]
fn a_responder_without_remote_atomics_refuses() {
    let mut h = pair();
    remake_responder(&mut h, RWE | RRE);
    assert!(!h.dev.qps().get(QPN2).unwrap().rae);
    let w = libmlx4(0, opcode::ATOMIC_CS, (9, u64::from_be_bytes(BEFORE)));
    let mut h = refused(h, &w, syndrome::REMOTE_ACCESS_ERR);
    assert_eq!(counted(&mut h), (0, 0, 1));
    assert_eq!(reasons(&h), ["qp_access"]);
    assert_eq!(h.dev.counters().faults.remote_access_faults, 1);
}

#[test]
fn rae_is_decoded_as_mlx4_ib_sends_it_and_queried_back() {
    let mut h = pair();
    let query_p2 = |h: &mut Harness| {
        assert_eq!(h.cmd(op::QUERY_QP, 0, QPN2), status::OK);
        be32(&h.mem(OUT_MB + 8 + 0x90, 4), 0)
    };
    assert_eq!(query_p2(&mut h) & RAE, RAE, "pair()'s QPs enable atomics");
    // INIT2RTR with max_dest_rd_atomic 0: optpar RRE | RAE | RWE, only RWE
    // left (`ib/qp.c:to_mlx4_access_flags`).
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN2), status::OK);
    h.init_sq(QP2_BUF, SQ_LOG);
    h.poke(IN_MB, &responder_mailbox(RWE | RRE | RAE, 0));
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, QPN2), status::OK);
    assert!(h.dev.qps().get(QPN2).unwrap().rae);
    let optpar = (1 << 1) | (1 << 2) | (1 << 3);
    h.poke(IN_MB, &responder_mailbox(RWE, optpar));
    assert_eq!(h.cmd(op::INIT2RTR_QP, 0, QPN2), status::OK);
    assert!(!h.dev.qps().get(QPN2).unwrap().rae);
    let r = h.records_of("qp_context");
    assert_eq!(r.last().unwrap()["rae"], false);
    // A transition without the optpar bit keeps it.
    h.poke(IN_MB, &responder_mailbox(RWE | RAE, 0));
    assert_eq!(h.cmd(op::RTR2RTS_QP, 0, QPN2), status::OK);
    assert!(!h.dev.qps().get(QPN2).unwrap().rae);
    assert_eq!(query_p2(&mut h) & (RWE | RRE | RAE), RWE);
    h.fill_rq(QP2_BUF, RQ2_DB, RECV2_BUF);
    let w = libmlx4(0, opcode::ATOMIC_FA, (1, 0));
    refused(h, &w, syndrome::REMOTE_ACCESS_ERR);
}

#[test]
fn the_rkey_must_name_an_atomic_region_of_the_responder_holding_the_operand() {
    let fa =
        |raddr: u64, rkey: u32| atomic_wqe(0, opcode::ATOMIC_FA, (raddr, rkey), (1, 0), &[LANDING]);
    let no_atomic = perm::LOCAL_READ | perm::LOCAL_WRITE | perm::REMOTE_READ | perm::REMOTE_WRITE;
    for (h, w, reason) in [
        (pair_with(no_atomic), fa(VA + AT, KEY), "permission"),
        (pair(), fa(VA + AT, KEY ^ 0x01), "key_mismatch"),
        (pair(), fa(VA + AT, 0x1_7700), "no_region"),
        (pair(), fa(VA + 0x1000, KEY), "out_of_range"),
        (pair(), fa(VA - 8, KEY), "out_of_range"),
        (pair(), fa(OPERAND, RESERVED_LKEY), "reserved_key"),
        // QP 0x40's region: not the responder's to give.
        (pair(), fa(VA_A, LKEY_A), "pd_mismatch"),
    ] {
        let mut h = refused(h, &w, syndrome::REMOTE_ACCESS_ERR);
        assert_eq!(counted(&mut h), (0, 0, 1), "{reason}");
        assert_eq!(reasons(&h), [reason]);
        assert_eq!(h.dev.counters().faults.remote_access_faults, 1);
        assert_eq!(h.dev.counters().faults.local_prot_faults, 0);
    }
    // The last 8 bytes of the region are in it.
    let mut h = pair();
    post(&mut h, 0, &fa(VA + 0xff8, KEY));
    assert_done(&h, 0, opcode::ATOMIC_FA);
    assert_eq!(h.mem(PAGE + 0xff8, 8), 1u64.to_be_bytes());
}

#[test]
fn the_original_lands_in_exactly_one_8_byte_data_segment() {
    let op = (VA + AT, KEY);
    let seg = |len: u32| (len, RESERVED_LKEY, GATHER_BUF);
    for segs in [
        vec![seg(4)],
        vec![seg(16)],
        vec![seg(0)],
        vec![],
        vec![seg(8), (8, RESERVED_LKEY, GATHER_BUF + 8)],
        vec![seg(4), (4, RESERVED_LKEY, GATHER_BUF + 4)],
    ] {
        let w = atomic_wqe(0, opcode::ATOMIC_CS, op, (1, 0), &segs);
        let mut h = refused(pair(), &w, syndrome::LOCAL_LENGTH_ERR);
        assert_eq!(counted(&mut h), (0, 0, 1), "{segs:?}");
        assert_eq!(h.mem(GATHER_BUF + 8, 8), [0; 8]);
        assert!(reasons(&h).is_empty());
    }
    // Eight inline bytes are no landing either.
    let mut w = atomic_wqe(0, opcode::ATOMIC_CS, op, (1, 0), &[]);
    let mut inl = [0u8; 16];
    put_be32(&mut inl, 0, (1 << 31) | 8);
    w.extend_from_slice(&inl);
    w[7] += 1;
    let mut h = refused(pair(), &w, syndrome::LOCAL_LENGTH_ERR);
    assert_eq!(counted(&mut h), (0, 0, 1));
}

#[test]
fn the_landing_lkey_needs_local_write() {
    let mut h = pair();
    // QP 0x40's region again, read-only this time (MPT 0x108).
    let ro = (0x108 << 8) | 0x02;
    let e = Harness::mpt_entry(ro, perm::LOCAL_READ, 0, VA_A, 0x1000, MTT_A);
    assert_eq!(h.sw2hw_mpt(&e), 0);
    let w = atomic_wqe(
        0,
        opcode::ATOMIC_FA,
        (VA + AT, KEY),
        (1, 0),
        &[(8, ro, VA_A)],
    );
    let mut h = refused(h, &w, syndrome::LOCAL_PROT_ERR);
    assert_eq!(counted(&mut h), (0, 0, 1));
    assert_eq!(reasons(&h), ["permission"]);
    let f = &h.dev.counters().faults;
    assert_eq!((f.local_prot_faults, f.remote_access_faults), (1, 0));
    assert_eq!(h.dev.counters().global.refused_segments, 1);
    // And the responder's rkey is no lkey of the requester's.
    let w = atomic_wqe(
        0,
        opcode::ATOMIC_FA,
        (VA + AT, KEY),
        (1, 0),
        &[(8, KEY, VA)],
    );
    let h = refused(pair(), &w, syndrome::LOCAL_PROT_ERR);
    assert_eq!(reasons(&h), ["pd_mismatch"]);
}

#[test]
fn atomics_on_uc_and_masked_atomics_are_not_taken() {
    // UC: an opcode the QP does not carry, as RDMA_READ.
    let mut h = pair();
    for (qpn, peer, buf, rcqn, db, pd) in [
        (QPN, QPN2, QP_BUF, RCQN, RQ_DB, 0),
        (QPN2, QPN, QP2_BUF, RCQN2, RQ2_DB, PD2),
    ] {
        assert_eq!(h.cmd(op::TO_RST_QP, 2, qpn), status::OK);
        h.init_sq(buf, SQ_LOG);
        let mb = Harness::qp_mailbox(qpn, UAR, CQN, mtt_of(buf), SQ_LOG);
        let mb = Harness::connect_to(Harness::with_rq(mb, rcqn, db), peer);
        let mut mb = Harness::with_pd(mb, pd);
        mb[8 + 1] = crate::qp::service::UC;
        h.create_qp_with(qpn, &mb);
    }
    let w = libmlx4(0, opcode::ATOMIC_FA, (1, 0));
    let mut h = refused(h, &w, syndrome::LOCAL_QP_OP_ERR);
    assert_eq!(h.error_codes(), ["wqe_bad_opcode"]);
    assert_eq!(counted(&mut h), (0, 0, 0), "refused by the parser");
    // MASKED_ATOMIC_CS and _FA (0x14, 0x15) on RC: not advertised, not taken.
    for masked in [0x14u8, 0x15] {
        let w = libmlx4(0, masked, (1, 0));
        let mut h = refused(pair(), &w, syndrome::LOCAL_QP_OP_ERR);
        assert_eq!(h.error_codes(), ["wqe_bad_opcode"]);
        assert_eq!(counted(&mut h), (0, 0, 0));
    }
}

#[test]
fn an_unreachable_responder_is_a_transport_retry_error() {
    let mut h = pair();
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN2), status::OK);
    let w = libmlx4(0, opcode::ATOMIC_CS, (1, u64::from_be_bytes(BEFORE)));
    let mut h = refused(h, &w, syndrome::TRANSPORT_RETRY_EXC_ERR);
    assert_eq!(h.dev.counters().global.peer_errors, 1);
    assert_eq!(counted(&mut h), (0, 0, 0), "rule a: not the atomic's own");
}
