//! Diag version 9: data faults (DATA_FAULT). An armed offset inverts one
//! byte of the next RDMA payload long enough, once: in the requester's
//! memory for a READ, the responder's for a WRITE.

use super::harness::*;
use crate::command::{op, status};
use crate::cq::{CQE_IS_SEND, CQE_OPCODE_ERROR};
use crate::diag::{DATA_FAULT, RDMA_READS, RESET_COUNTERS};
use crate::mr::perm;
use crate::trace::TraceLevel;
use crate::wqe::opcode;
use serde_json::Value;

/// QP 0x41's region (`pair()`): one 4 KiB page at VA, MPT 0x105.
const PAGE: u64 = 0x12_0000;
const MTT: u64 = 16;
const VA: u64 = 0x7f00_0000_0000;
const KEY: u32 = 0x1_053c;

/// `pair()` with QP 0x41's region registered, every right, PD 0.
fn pair_with_region() -> Harness {
    let mut h = Harness::pair();
    assert_eq!(h.write_mtt(MTT, &[PAGE]), 0);
    let all = perm::LOCAL_READ | perm::LOCAL_WRITE | perm::REMOTE_WRITE | perm::REMOTE_READ;
    let e = Harness::mpt_entry(KEY, all, 0, VA, 0x1000, MTT);
    assert_eq!(h.sw2hw_mpt(&e), 0);
    h
}

/// DATA_FAULT: (the armed value, the faults fired).
fn data_fault(h: &mut Harness) -> (u32, u32) {
    let v = h.diag_read(DATA_FAULT);
    (v as u32, (v >> 32) as u32)
}

/// QP 0x40's `op` at SQ `index`: `len` bytes between GATHER_BUF (through
/// the reserved lkey) and the region at VA + `at` (under `rkey`), by
/// doorbell.
fn rdma(h: &mut Harness, index: u32, op: u8, at: u64, rkey: u32, len: u32) {
    let w = data_wqe(
        QPN,
        index,
        op,
        Some((VA + at, rkey)),
        b"",
        &[(len, RESERVED_LKEY, GATHER_BUF)],
    );
    h.write_wqe(QP_BUF, index, &w);
    h.doorbell(UAR, QPN);
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
}

/// `data` with byte `at` inverted.
fn flipped(data: &[u8], at: usize) -> Vec<u8> {
    let mut v = data.to_vec();
    v[at] ^= 0xff;
    v
}

/// The CQE at `index` of the send CQ: (opcode byte 0x1f, syndrome).
fn cqe(h: &Harness, index: u32) -> (u8, u8) {
    let c = h.cqe(index);
    (c[0x1f], c[0x1b])
}

#[test]
fn a_read_lands_with_the_armed_byte_inverted_once() {
    let mut h = pair_with_region();
    let src = pattern(64, 0x5a);
    h.poke(PAGE + 0x40, &src);
    h.diag_write(DATA_FAULT, 5 + 1);
    assert_eq!(data_fault(&mut h), (6, 0));
    rdma(&mut h, 0, opcode::RDMA_READ, 0x40, KEY, 64);
    assert_eq!(h.mem(GATHER_BUF, 64), flipped(&src, 5), "byte 5 only");
    assert_eq!(h.mem(PAGE + 0x40, 64), src, "the responder's untouched");
    assert_eq!(cqe(&h, 0), (CQE_IS_SEND | opcode::RDMA_READ, 0), "success");
    assert_eq!(data_fault(&mut h), (0, 1), "fired, disarmed");
    let r = h.records_of("data_fault");
    assert_eq!(r.len(), 1);
    assert_eq!(
        (&r[0]["qpn"], &r[0]["peer"], &r[0]["opcode"]),
        (&Value::from(QPN), &Value::from(QPN2), &Value::from(0x10))
    );
    assert_eq!((&r[0]["offset"], &r[0]["len"]), (&5.into(), &64.into()));
    assert_eq!(h.diag_read(RDMA_READS), 1, "a read like any other");
    assert!(h.error_codes().is_empty(), "an injected fault is no error");
    // Once: the same read again lands clean.
    h.poke(GATHER_BUF, &[0; 64]);
    rdma(&mut h, 1, opcode::RDMA_READ, 0x40, KEY, 64);
    assert_eq!(h.mem(GATHER_BUF, 64), src);
    assert_eq!(data_fault(&mut h), (0, 1));
    assert_eq!(h.dev.summary()["data_faults"], 1);
    h.check_invariants(false);
}

#[test]
fn a_write_lands_with_the_armed_byte_inverted_once() {
    let mut h = pair_with_region();
    let src = pattern(40, 0x11);
    h.poke(GATHER_BUF, &src);
    h.diag_write(DATA_FAULT, 1); // offset 0
    rdma(&mut h, 0, opcode::RDMA_WRITE, 0x100, KEY, 40);
    assert_eq!(h.mem(PAGE + 0x100, 40), flipped(&src, 0));
    assert_eq!(h.mem(GATHER_BUF, 40), src, "the requester's untouched");
    assert_eq!(cqe(&h, 0), (CQE_IS_SEND | opcode::RDMA_WRITE, 0));
    assert_eq!(data_fault(&mut h), (0, 1));
    let r = h.records_of("data_fault");
    assert_eq!((&r[0]["opcode"], &r[0]["offset"]), (&8.into(), &0.into()));
    // The last byte of a payload, on RDMA_WRITE_IMM (which consumes a
    // receive WQE of QP 0x41's full RQ).
    h.diag_write(DATA_FAULT, 40);
    rdma(&mut h, 1, opcode::RDMA_WRITE_IMM, 0x200, KEY, 40);
    assert_eq!(h.mem(PAGE + 0x200, 40), flipped(&src, 39));
    assert_eq!(data_fault(&mut h), (0, 2));
    // Then clean.
    rdma(&mut h, 2, opcode::RDMA_WRITE, 0x300, KEY, 40);
    assert_eq!(h.mem(PAGE + 0x300, 40), src);
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn a_payload_too_short_or_refused_leaves_it_armed() {
    let mut h = pair_with_region();
    let src = pattern(65, 0x33);
    h.poke(PAGE, &src);
    h.diag_write(DATA_FAULT, 64 + 1);
    // 64 bytes do not reach offset 64.
    rdma(&mut h, 0, opcode::RDMA_READ, 0, KEY, 64);
    assert_eq!(h.mem(GATHER_BUF, 64), src[..64]);
    assert_eq!(data_fault(&mut h), (65, 0), "still armed");
    // QP 0x41's read refused by the rkey check lands nothing: still armed.
    let w = data_wqe(
        QPN2,
        0,
        opcode::RDMA_READ,
        Some((VA, KEY + 1)),
        b"",
        &[(65, RESERVED_LKEY, RECV2_BUF)],
    );
    h.write_wqe(QP2_BUF, 0, &w);
    h.doorbell(UAR, QPN2);
    assert_eq!(cqe(&h, 1).0, CQE_IS_SEND | CQE_OPCODE_ERROR);
    assert_eq!(data_fault(&mut h), (65, 0));
    // QP 0x41 back from ERR (2RST, then RST2INIT..RTS as `pair()` made
    // it), and QP 0x40's read of 65 bytes fires it.
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN2), status::OK);
    h.init_sq(QP2_BUF, SQ_LOG);
    let mb = Harness::qp_mailbox(QPN2, UAR, CQN, mtt_of(QP2_BUF), SQ_LOG);
    let mb = Harness::with_rq(mb, RCQN2, RQ2_DB);
    h.create_qp_with(QPN2, &Harness::connect_to(mb, QPN));
    rdma(&mut h, 1, opcode::RDMA_READ, 0, KEY, 65);
    assert_eq!(h.mem(GATHER_BUF, 65), flipped(&src, 64));
    assert_eq!(data_fault(&mut h), (0, 1));
    assert_eq!(h.records_of("data_fault")[0]["len"], 65);
}

#[test]
fn a_send_does_not_fire_it() {
    let mut h = pair_with_region();
    h.diag_write(DATA_FAULT, 1);
    let w = Harness::inline_send(QPN, 0, b"not an RDMA payload", true);
    h.write_wqe(QP_BUF, 0, &w);
    h.doorbell(UAR, QPN);
    assert_eq!(h.mem(RECV2_BUF, 19), b"not an RDMA payload");
    assert_eq!(data_fault(&mut h), (1, 0));
}

#[test]
fn zero_disarms_and_a_bad_value_is_refused() {
    let mut h = pair_with_region();
    assert_eq!(data_fault(&mut h), (0, 0));
    h.diag_write(DATA_FAULT, 3);
    h.diag_write(DATA_FAULT, 0);
    assert_eq!(data_fault(&mut h), (0, 0), "0 disarms");
    let src = pattern(8, 0);
    h.poke(GATHER_BUF, &src);
    rdma(&mut h, 0, opcode::RDMA_WRITE, 0, KEY, 8);
    assert_eq!(h.mem(PAGE, 8), src);
    // Offsets at or past the longest message (2^20) could never fire:
    // refused, what was armed kept.
    h.diag_write(DATA_FAULT, 2);
    h.diag_write(DATA_FAULT, (1 << 20) + 1);
    h.diag_write(DATA_FAULT, u32::MAX);
    assert_eq!(h.error_codes(), ["diag_bad_access", "diag_bad_access"]);
    assert_eq!(data_fault(&mut h), (2, 0));
    h.diag_write(DATA_FAULT, 1 << 20);
    assert_eq!(data_fault(&mut h), (1 << 20, 0), "the last byte is fine");
    // A 4-byte read gives the armed value; writes are 4 bytes, as for
    // every diag register.
    let mut b = [0u8; 4];
    h.dev
        .mmio_read(0, crate::layout::DIAG_BASE + DATA_FAULT, &mut b);
    assert_eq!(u32::from_le_bytes(b), 1 << 20);
    h.dev
        .mmio_write(0, crate::layout::DIAG_BASE + DATA_FAULT, &[0; 8]);
    assert_eq!(h.error_codes().last().unwrap(), "diag_bad_access");
    assert_eq!(data_fault(&mut h), (1 << 20, 0));
}

/// As CMD_FAULT: armed through counter and device resets until it fires
/// or is disarmed; the count is never reset.
#[test]
fn resets_keep_it_armed_and_the_count() {
    let mut h = pair_with_region();
    let src = pattern(16, 0x77);
    h.poke(GATHER_BUF, &src);
    h.diag_write(DATA_FAULT, 1);
    rdma(&mut h, 0, opcode::RDMA_WRITE, 0, KEY, 16);
    assert_eq!(data_fault(&mut h), (0, 1));
    h.diag_write(DATA_FAULT, 9);
    h.diag_write(RESET_COUNTERS, 1);
    h.dev.reset("vfio_user");
    h.reset_adapter();
    assert_eq!(data_fault(&mut h), (9, 1), "armed, counted");
    assert_eq!(h.dev.summary()["data_faults"], 1);
    h.diag_write(DATA_FAULT, 0);
    assert_eq!(data_fault(&mut h), (0, 1));
}

/// The errors trace keeps the record, as it keeps `command_fault`.
#[test]
fn the_errors_trace_keeps_it() {
    assert!(TraceLevel::Errors.keeps("data_fault"));
}
