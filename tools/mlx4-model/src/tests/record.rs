//! The diag block's BAR2 write counter and its records of the last executed
//! WQE and the last send doorbell, read as a test in the guest reads them.

use super::harness::*;
use crate::bytes::put_be32;
use crate::diag;
use crate::layout::*;

/// The record as the guest sees it: (qpn, source, page, half, length, index).
fn last_wqe(h: &mut Harness) -> (u32, u32, u32, u32, u32, u32) {
    let split = |v: u64| (v as u32, (v >> 32) as u32);
    let (qpn, source) = split(h.diag_read(0xc0));
    let (page, half) = split(h.diag_read(0xc8));
    let (len, index) = split(h.diag_read(0xd0));
    (qpn, source, page, half, len, index)
}

/// The first `len` bytes of the byte window, in 8-byte loads.
fn last_bytes(h: &mut Harness, len: usize) -> Vec<u8> {
    (0..len.div_ceil(8))
        .flat_map(|i| {
            h.diag_read(diag::LAST_WQE_BYTES + 8 * i as u64)
                .to_le_bytes()
        })
        .take(len)
        .collect()
}

fn read4(h: &mut Harness, off: u64) -> u32 {
    let mut b = [0u8; 4];
    h.dev.mmio_read(0, DIAG_BASE + off, &mut b);
    u32::from_le_bytes(b)
}

/// A SEND with 16 data segments of 8 bytes (reserved lkey, in
/// GATHER_BUF): DS 17, 272 bytes, too large for BlueFlame.
fn gather_send(qpn: u32, index: u32) -> Vec<u8> {
    let mut b = vec![0u8; 17 * 16];
    let owner = if index & (1 << SQ_LOG) != 0 {
        1 << 31
    } else {
        0
    };
    put_be32(&mut b, 0, owner | ((index & 0xffff) << 8) | 0x0a);
    put_be32(&mut b, 4, (qpn << 8) | 17);
    put_be32(&mut b, 8, 0xc);
    for s in 0..16 {
        let seg = 16 + 16 * s;
        put_be32(&mut b, seg, 8);
        put_be32(&mut b, seg + 4, RESERVED_LKEY);
        put_be32(&mut b, seg + 12, GATHER_BUF as u32 + 8 * s as u32);
    }
    b
}

#[test]
fn nothing_executed_reads_as_zero() {
    let mut h = Harness::setup();
    assert_eq!(last_wqe(&mut h), (0, 0, 0, 0, 0, 0));
    assert_eq!(h.diag_read(0xd8), 0);
    assert_eq!(h.diag_read(0x78), 0, "setup wrote nothing to BAR2");
    assert_eq!(
        h.diag_read(0x00) >> 32,
        15,
        "version 15 (2 added the records)"
    );
    assert!(h.error_codes().is_empty());
}

#[test]
fn bf_post_records_the_burst_with_its_padding() {
    let mut h = Harness::setup();
    let wqe = Harness::inline_send(QPN, 0, b"hi", true);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.bf_copy(UAR, 0, &wqe, 8);
    assert_eq!(last_wqe(&mut h), (QPN, 1, UAR, 0, 64, 0));
    let mut burst = wqe.clone();
    burst.resize(64, 0);
    assert_eq!(last_bytes(&mut h, 64), burst);
    // Beyond the length: zero.
    assert_eq!(h.diag_read(diag::LAST_WQE_BYTES + 64), 0);
    // 4-byte loads read one register each.
    assert_eq!((read4(&mut h, 0xc4), read4(&mut h, 0xcc)), (1, 0));
    // The next post, in the other half: the record follows.
    let wqe = Harness::inline_send(QPN, 1, &[7; 40], true);
    h.write_wqe(QP_BUF, 1, &wqe);
    h.bf_copy(UAR, 1, &wqe, 64);
    assert_eq!(last_wqe(&mut h), (QPN, 1, UAR, 1, 64, 1));
    assert_eq!(last_bytes(&mut h, 64), wqe);
    assert!(h.error_codes().is_empty());
}

#[test]
fn doorbell_fetch_records_the_wqe_and_the_doorbell() {
    let mut h = Harness::setup();
    let wqe = gather_send(QPN, 0);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.doorbell(UAR, QPN);
    assert_eq!(h.dev.counters().global.wqes_dma, 1);
    assert_eq!(last_wqe(&mut h), (QPN, 2, UAR, 0, 272, 0));
    assert_eq!(last_bytes(&mut h, 272), wqe);
    // The doorbell: its page, then its bytes as on the bus, so a
    // little-endian load gives them in memory order.
    let db = h.diag_read(diag::LAST_DOORBELL);
    assert_eq!(db as u32, UAR);
    assert_eq!(((db >> 32) as u32).to_le_bytes(), (QPN << 8).to_be_bytes());
    assert_eq!(read4(&mut h, 0xdc).to_le_bytes(), (QPN << 8).to_be_bytes());
    assert!(h.error_codes().is_empty());
}

#[test]
fn a_shorter_wqe_leaves_no_bytes_of_a_longer_one() {
    let mut h = Harness::setup();
    h.write_wqe(QP_BUF, 0, &gather_send(QPN, 0));
    h.doorbell(UAR, QPN);
    // 272 bytes take five 64-byte entries: the next WQE is at index 5.
    let wqe = Harness::inline_send(QPN, 5, b"abc", true);
    h.write_wqe(QP_BUF, 5, &wqe);
    h.doorbell(UAR, QPN);
    assert_eq!(last_wqe(&mut h), (QPN, 2, UAR, 0, 32, 5));
    assert_eq!(last_bytes(&mut h, 272)[..32], wqe[..]);
    assert!(last_bytes(&mut h, 272)[32..].iter().all(|&b| b == 0));
    assert!(h.error_codes().is_empty());
}

#[test]
fn fallback_records_a_dma_fetch_for_the_bf_page() {
    let mut h = Harness::setup();
    let wqe = Harness::inline_send(QPN, 0, b"bf", true);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.bf_copy(UAR + 5, 1, &wqe, 8);
    assert_eq!(last_wqe(&mut h), (QPN, 2, UAR + 5, 0, 32, 0));
    assert_eq!(last_bytes(&mut h, 32), wqe);
    // A fallback is no doorbell.
    assert_eq!(h.diag_read(diag::LAST_DOORBELL), 0);
}

#[test]
fn the_largest_wqe_fits_the_window() {
    let mut h = Harness::setup();
    // DS 63 (1008 bytes) on the 1024-byte ring; it fails to parse, but ran.
    let mut wqe = vec![0x5a; 1008];
    put_be32(&mut wqe, 0, 0x0a);
    put_be32(&mut wqe, 4, (QPN << 8) | 63);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.doorbell(UAR, QPN);
    assert_eq!(last_wqe(&mut h), (QPN, 2, UAR, 0, 1008, 0));
    assert_eq!(last_bytes(&mut h, 1008), wqe);
    assert_eq!(h.diag_read(diag::LAST_WQE_BYTES + 1008), 0);
    assert_eq!(h.diag_read(diag::LAST_WQE_BYTES + 1016), 0);
}

#[test]
fn bar2_write_counter_counts_every_region() {
    let mut h = Harness::setup();
    let wqe = Harness::inline_send(QPN, 0, b"hi", true);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.bf_copy(UAR, 0, &wqe, 8); // 8 writes
    h.doorbell(UAR, 0x99); // 1, a protocol error
    h.write32(2, u64::from(UAR) * PAGE_SIZE + 0x100, 0); // 1, hits nothing
    h.dev.mmio_write(2, 2 * 1024 * PAGE_SIZE, &[0; 4]); // 1, outside BAR2
    h.read32(2, u64::from(UAR) * PAGE_SIZE + UAR_SEND_DB); // reads do not count
    h.diag_write(diag::MARK, 1); // nor BAR0 writes
    assert_eq!(h.diag_read(0x78), 11);
    assert_eq!(h.dev.summary()["bar2_writes"], 11);
    // A counter reset clears it; the records stay.
    h.diag_write(diag::RESET_COUNTERS, 1);
    assert_eq!(h.diag_read(0x78), 0);
    assert_eq!(last_wqe(&mut h), (QPN, 1, UAR, 0, 64, 0));
    assert_eq!(h.diag_read(diag::LAST_DOORBELL) as u32, UAR);
}

#[test]
fn reads_past_the_records_are_undefined() {
    let mut h = Harness::setup();
    h.diag_read(0xe0);
    h.diag_read(0xf8);
    // Past the block: BAR0 that holds nothing.
    h.diag_read(DIAG_SIZE);
    assert_eq!(
        h.error_codes(),
        ["undefined_offset", "undefined_offset", "undefined_offset"]
    );
    // The records are read-only.
    h.diag_write(0xc0, 1);
    assert_eq!(h.error_codes().last().unwrap(), "undefined_offset");
    assert_eq!(h.diag_read(0xc0), 0);
}
