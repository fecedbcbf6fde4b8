//! The modelled PCIe clock measured on posts, as a test in the guest reads
//! it: the calibration against the seed's System Z table, and the trace's
//! timestamps.

use super::harness::*;
use crate::timing::{self, CALIBRATION_TOLERANCE_US, SEED_SYSTEM_Z};

/// One inline SEND of `len` bytes on `setup()`'s self-connected QP, by
/// BlueFlame (8-byte writes, as QEMU delivers them) or by doorbell:
/// (post-to-wire, one-way) in ns from the diag block.
fn post_once(len: usize, bf: bool) -> (u64, u64) {
    let mut h = Harness::setup();
    let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let wqe = Harness::inline_send(QPN, 0, &payload, true);
    h.write_wqe(QP_BUF, 0, &wqe);
    if bf {
        h.bf_copy(UAR, 0, &wqe, 8);
    } else {
        h.doorbell(UAR, QPN);
    }
    assert_eq!(h.mem(RECV_BUF, len), payload);
    assert!(h.error_codes().is_empty());
    let g = &h.dev.counters().global;
    assert_eq!(
        (g.deliveries, g.wqes_bf, g.wqes_dma),
        (1, u64::from(bf), u64::from(!bf))
    );
    (h.diag_read(0x558), h.diag_read(0x568))
}

/// `MLX4_MODEL_CALIBRATION=1 cargo test -p mlx4-model calibration --
/// --nocapture` prints the table of the design document.
#[test]
fn calibration_through_the_device() {
    let show = std::env::var_os("MLX4_MODEL_CALIBRATION").is_some();
    for len in [1usize, 2, 28, 44, 45, 88, 104, 105, 148, 164, 165, 208, 224] {
        let wqe = timing::inline_send_bytes(len as u64);
        let burst = wqe.div_ceil(64) * 64;
        let &(_, bf_us, db_us) = SEED_SYSTEM_Z.iter().find(|e| e.0 == burst).unwrap();
        let (bf_wire, bf) = post_once(len, true);
        let (db_wire, db) = post_once(len, false);
        let us = |ns: u64| ns as f64 / 1000.0;
        if show {
            println!(
                "{len:>4} B  burst {burst:>3}  BF {:.3} (seed {bf_us})  doorbell {:.3} (seed {db_us})  \
                 post-to-wire BF {bf_wire} ns, doorbell {db_wire} ns",
                us(bf),
                us(db)
            );
        }
        assert!(
            (us(bf) - bf_us).abs() <= CALIBRATION_TOLERANCE_US,
            "BF {len} B: {} µs, seed {bf_us}",
            us(bf)
        );
        assert!(
            (us(db) - db_us).abs() <= CALIBRATION_TOLERANCE_US,
            "doorbell {len} B: {} µs, seed {db_us}",
            us(db)
        );
        // Post-to-wire: BF = the store blocks; doorbell = the posted write
        // and the WQE's read.
        let blocks: u64 = timing::store_blocks(burst)
            .iter()
            .map(|&b| timing::STORE_BLOCK_NS * 1000 + b * timing::STORE_BLOCK_BYTE_PS)
            .sum::<u64>()
            / 1000;
        assert_eq!(bf_wire, blocks, "{len}");
        let fetch = timing::POSTED_WRITE_NS
            + timing::DMA_READ_RTT_NS
            + burst / 64 * timing::DMA_READ_UNIT_NS;
        assert_eq!(db_wire, fetch, "{len}");
    }
}

/// The seed's first prototype wrote to a foreign BF page: the adapter fell
/// back to the DMA read, and the post cost the store block more than a
/// doorbell post (0.5–0.7 µs).
#[test]
fn a_fallback_costs_the_store_block_on_top() {
    let mut h = Harness::setup();
    let wqe = Harness::inline_send(QPN, 0, b"hi", true);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.bf_copy(UAR + 1, 0, &wqe, 8);
    assert_eq!(h.dev.counters().global.bf_fallbacks, 1);
    let fallback = h.diag_read(0x568);
    let (_, doorbell) = post_once(2, false);
    let extra = fallback - doorbell;
    assert!((500..=700).contains(&extra), "{extra} ns");
}

/// A gathered payload is read after the WQE: a second round trip.
#[test]
fn a_gathered_send_pays_a_second_round_trip() {
    let mut h = Harness::setup();
    h.poke(GATHER_BUF, b"hi");
    let mut wqe = Harness::inline_send(QPN, 0, b"", true);
    wqe.truncate(16);
    let mut seg = [0u8; 16];
    crate::bytes::put_be32(&mut seg, 0, 2);
    crate::bytes::put_be32(&mut seg, 4, RESERVED_LKEY);
    crate::bytes::put_be64(&mut seg, 8, GATHER_BUF);
    wqe.extend_from_slice(&seg);
    wqe[7] = 2;
    h.write_wqe(QP_BUF, 0, &wqe);
    h.doorbell(UAR, QPN);
    assert_eq!(h.mem(RECV_BUF, 2), b"hi");
    let (_, inline) = post_once(2, false);
    let gathered = h.diag_read(0x568);
    assert!(
        gathered >= inline + timing::DMA_READ_RTT_NS,
        "{gathered} vs {inline}"
    );
    // Post-to-wire includes the gather.
    assert!(h.diag_read(0x558) >= 2 * timing::DMA_READ_RTT_NS);
}

/// Every record carries t_ns, never decreasing; a BF burst's writes advance
/// it by their store-block share, and the WQE names its post's start.
#[test]
fn records_carry_the_clock() {
    let mut h = Harness::setup();
    let wqe = Harness::inline_send(QPN, 0, &[7; 100], true);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.bf_copy(UAR, 0, &wqe, 8);
    let recs = h.records();
    let mut last = 0;
    for r in &recs {
        let t = r["t_ns"].as_u64().expect("t_ns");
        assert!(t >= last, "{r}");
        last = t;
    }
    let chunks: Vec<u64> = h
        .records_of("mmio_write")
        .iter()
        .filter(|r| r["region"] == "bf")
        .map(|r| r["t_ns"].as_u64().unwrap())
        .collect();
    assert_eq!(chunks.len(), 16);
    // The first write of each 128-byte block carries the block's fixed part.
    assert_eq!(chunks[1] - chunks[0], 350 + 42);
    assert_eq!(chunks[2] - chunks[1], 42);
    let w = &h.records_of("wqe")[0];
    assert_eq!(w["post_t_ns"].as_u64(), Some(chunks[0]));
    let d = &h.records_of("deliver")[0];
    assert_eq!(d["post_t_ns"].as_u64(), Some(chunks[0]));
    assert_eq!(d["one_way_ns"].as_u64(), Some(h.diag_read(0x568)));
    // The sums: one WQE, one delivery.
    assert_eq!(h.diag_read(0x560), h.diag_read(0x558));
    assert_eq!(h.diag_read(0x570), h.diag_read(0x568));
}

/// A doorbell's scan that runs ahead to a WQE whose own doorbell has not
/// come (QEMU posts the guest's writes; the guest runs on) executes it, but
/// its post has not reached the bus: it is not timed from this doorbell,
/// and its own doorbell, finding it run, times nothing either.
#[test]
fn a_wqe_a_scan_ran_ahead_to_is_not_timed() {
    let mut h = Harness::setup();
    for i in 0..2 {
        let wqe = Harness::inline_send(QPN, i, b"hi", true);
        h.write_wqe(QP_BUF, i, &wqe);
    }
    h.doorbell(UAR, QPN);
    let g = &h.dev.counters().global;
    assert_eq!((g.wqes_dma, g.deliveries), (2, 2));
    let (sum, samples) = (h.diag_read(0x560), h.diag_read(0x660));
    assert_eq!(samples, 1, "only the announced WQE");
    assert_eq!(sum, h.diag_read(0x558));
    h.doorbell(UAR, QPN);
    assert_eq!(h.dev.counters().global.already_executed, 1);
    assert_eq!((h.diag_read(0x560), h.diag_read(0x660)), (sum, 1));
    assert!(h.error_codes().is_empty());
}
