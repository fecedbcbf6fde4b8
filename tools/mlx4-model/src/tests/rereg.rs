//! Re-registration as mainline mlx4_ib does it natively
//! (`ib/mr.c:mlx4_ib_rereg_user_mr`): HW2SW_MPT without a mailbox, the
//! entry edited in its dMPT slot in ICM (`core/mr.c:mlx4_mr_hw_change_pd`,
//! `mlx4_mr_hw_change_access`, `mlx4_mr_rereg_mem_write`, the new MTT
//! entries straight into ICM), its status byte set to HW and SYNC_TPT
//! (`mlx4_mr_hw_write_mpt`); then deregistration's HW2SW_MPT.

use super::bringup::*;
use super::harness::*;
use crate::bytes::{be32, put_be32, put_be64};
use crate::command::{op, status};
use crate::keys::{self, Access, Fault};
use crate::mr::{flag, perm, PD_MASK};

/// MPT 0x105, tag 0x3c; its first region: one page at VA, MTT entry 16.
const KEY: u32 = 0x1_053c;
const MPT: u32 = 0x105;
const VA: u64 = 0x7f00_0000_0000;
const PAGE: u64 = 0x12_5000;
const MTT: u64 = 16;
/// The region after `rereg`: two pages at VA2 from MTT entry 40.
const VA2: u64 = 0x7f00_1000_0800;
const PAGES2: [u64; 2] = [GATHER_BUF, 0x12_1000];
const MTT2: u64 = 40;
const PD2: u32 = 7;
/// MLX4_PERM_MASK, MLX4_MPT_FLAG_FREE, MLX4_MPT_PD_FLAG_EN_INV.
const PERM_MASK: u32 = 0x3f << 10;
const FREE: u32 = 3 << 28;
const EN_INV: u32 = 3 << 24;

/// `setup()` (QP 0x40 in PD 0) and the region registered local-read in
/// PD 0.
fn registered() -> Harness {
    let mut h = Harness::setup();
    write_mtt(&mut h, 8 * MTT, &[PAGE]);
    let e = Harness::mpt_entry(KEY, perm::LOCAL_READ, 0, VA, 0x1000, MTT);
    assert_eq!(h.sw2hw_mpt(&e), status::OK);
    h
}

/// MPT `index`'s dMPT slot in ICM (`core/icm.c:mlx4_table_find`).
fn slot(index: u32) -> u64 {
    DMPT_DMA + 64 * u64::from(index)
}

/// Edits MPT `index`'s entry in ICM, as mainline does between HW2SW_MPT
/// and SYNC_TPT.
fn edit(h: &mut Harness, index: u32, f: impl FnOnce(&mut [u8])) {
    let mut e = h.mem(slot(index), 64);
    f(&mut e);
    h.poke(slot(index), &e);
}

/// mlx4_ib_rereg_user_mr with every flag: PD2, REMOTE_WRITE and
/// LOCAL_WRITE, 0x1800 bytes at VA2 on PAGES2 (written into ICM first),
/// status HW. SYNC_TPT is the caller's.
fn rereg(h: &mut Harness, index: u32) {
    write_mtt(h, 8 * MTT2, &PAGES2);
    edit(h, index, |e| {
        let pd_flags = be32(e, 0x0c) & !PD_MASK;
        put_be32(e, 0x0c, pd_flags | PD2 | EN_INV);
        let access = perm::LOCAL_READ | perm::LOCAL_WRITE | perm::REMOTE_WRITE;
        let mut flags = (be32(e, 0x00) & !PERM_MASK) | access;
        flags = (flags & !(FREE | flag::SW_OWNS)) | flag::SW_OWNS;
        put_be32(e, 0x00, flags);
        put_be64(e, 0x10, VA2);
        put_be64(e, 0x18, 0x1800);
        put_be32(e, 0x38, 12);
        put_be64(e, 0x2c, 8 * MTT2);
        e[0] = 0x00;
    });
}

#[test]
fn sync_tpt_takes_the_edited_entry_back() {
    let mut h = registered();
    let taken = Harness::mpt_entry(KEY, perm::LOCAL_READ, 0, VA, 0x1000, MTT);
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, MPT), status::OK);
    // The entry in its slot as the firmware had it, status SW.
    let mut in_icm = taken;
    in_icm[0] = 0xf0;
    assert_eq!(h.mem(slot(MPT), 64), in_icm);
    assert_eq!(h.dev.mrs().parked(), 1);
    assert!(h.dev.mrs().mpt(MPT).is_none());
    rereg(&mut h, MPT);
    assert_eq!(h.cmd(op::SYNC_TPT, 0, 0), status::OK);
    assert_eq!(h.dev.mrs().parked(), 0);
    let m = h.dev.mrs().mpt(MPT).unwrap();
    assert_eq!(
        (m.pd, m.start, m.length, m.pages.clone()),
        (PD2, VA2, 0x1800, PAGES2.to_vec())
    );
    let mrs = h.dev.mrs();
    let r = |pd, addr, len, a| keys::resolve(mrs, false, pd, KEY, addr, len, a);
    // The new range, PD and rights; the old ones no more.
    assert_eq!(
        r(PD2, VA2 + 0x7f0, 0x20, Access::RemoteWrite),
        Ok(vec![(GATHER_BUF + 0xff0, 0x10), (0x12_1000, 0x10)])
    );
    assert_eq!(r(0, VA2, 4, Access::LocalRead), Err(Fault::PdMismatch));
    assert_eq!(r(PD2, VA, 4, Access::LocalRead), Err(Fault::OutOfRange));
    // Deregistration: HW2SW_MPT finds it in hardware ownership.
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, MPT), status::OK);
    assert_eq!(h.mem(slot(MPT), 1), [0xf0]);
    let ops: Vec<_> = h
        .records_of("mpt")
        .iter()
        .map(|r| r["op"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ops, ["sw2hw", "hw2sw", "sync_tpt", "hw2sw"]);
    assert!(h.error_codes().is_empty());
    assert_eq!(h.dev.counters().global.fw_unmodelled, 0);
}

#[test]
fn the_data_path_uses_the_reregistered_translation() {
    let mut h = registered();
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, MPT), status::OK);
    // Only the translation (IB_MR_REREG_TRANS): PD 0 stays.
    write_mtt(&mut h, 8 * MTT2, &PAGES2);
    edit(&mut h, MPT, |e| {
        put_be64(e, 0x10, VA2);
        put_be64(e, 0x18, 0x1800);
        put_be64(e, 0x2c, 8 * MTT2);
        e[0] = 0x00;
    });
    assert_eq!(h.cmd(op::SYNC_TPT, 0, 0), status::OK);
    h.poke(GATHER_BUF + 0xffc, b"rere");
    let w = data_wqe(QPN, 0, 0x0a, None, b"", &[(4, KEY, VA2 + 0x7fc)]);
    h.write_wqe(QP_BUF, 0, &w);
    h.doorbell(UAR, QPN);
    assert_eq!(h.cqe(0)[0x1f] & 0x1f, 0x0a);
    assert_eq!(h.mem(RECV_BUF, 4), b"rere");
    let gathers: Vec<_> = h
        .records_of("dma_read")
        .iter()
        .filter(|r| r["what"] == "gather")
        .map(|r| r["addr"].as_u64().unwrap())
        .collect();
    assert_eq!(gathers, [GATHER_BUF + 0xffc]);
    assert!(h.error_codes().is_empty());
}

#[test]
fn an_entry_left_in_software_ownership_stays_there() {
    let mut h = registered();
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, MPT), status::OK);
    // Status still SW: nothing to take.
    assert_eq!(h.cmd(op::SYNC_TPT, 0, 0), status::OK);
    assert!(h.dev.mrs().mpt(MPT).is_none());
    assert_eq!(h.dev.mrs().parked(), 1);
    assert_eq!(h.cmd(op::SYNC_TPT, 1, 0), status::BAD_PARAM);
    // A new region at the same index (mlx4_mr_enable): parked no more.
    let e = Harness::mpt_entry(KEY, perm::LOCAL_READ, 0, VA, 0x1000, MTT);
    assert_eq!(h.sw2hw_mpt(&e), status::OK);
    assert_eq!(h.dev.mrs().parked(), 0);
    assert!(h.error_codes().is_empty());
}

#[test]
fn a_malformed_entry_is_refused_and_the_others_still_taken() {
    let mut h = registered();
    let key2 = 0x1_0600;
    write_mtt(&mut h, 8 * 20, &[0x12_3000]);
    let e2 = Harness::mpt_entry(key2, perm::LOCAL_READ, 0, VA, 0x1000, 20);
    assert_eq!(h.sw2hw_mpt(&e2), status::OK);
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, MPT), status::OK);
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, 0x106), status::OK);
    // MPT 0x105: length 0; MPT 0x106: only its status byte, as is.
    edit(&mut h, MPT, |e| {
        put_be64(e, 0x18, 0);
        e[0] = 0x00;
    });
    edit(&mut h, 0x106, |e| e[0] = 0x00);
    assert_eq!(h.cmd(op::SYNC_TPT, 0, 0), status::BAD_PARAM);
    assert!(h.dev.mrs().mpt(MPT).is_none());
    assert_eq!(h.dev.mrs().mpt(0x106).unwrap().pages, [0x12_3000]);
    assert_eq!(h.dev.mrs().parked(), 1);
    assert_eq!(h.dev.counters().global.fw_unmodelled, 1);
    let refused = h.records_of("fw_refused");
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["mpt"], MPT);
    assert_eq!(refused[0]["reason"], "sync_tpt");
    // mlx4_mr_hw_write_mpt failed: the MR stays MLX4_MPT_EN_SW, mainline
    // sends no HW2SW_MPT for it; one would find it in software ownership.
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, MPT), status::BAD_RES_STATE);
    // Fixed and synced again.
    edit(&mut h, MPT, |e| put_be64(e, 0x18, 0x1000));
    assert_eq!(h.cmd(op::SYNC_TPT, 0, 0), status::OK);
    assert!(h.dev.mrs().mpt(MPT).is_some());
    assert!(h.error_codes().is_empty());
}

#[test]
fn a_status_hw_where_no_mpt_was_handed_over_is_not_read() {
    let mut h = registered();
    // A good entry at MPT 0x107, which never was one, status HW (0).
    write_mtt(&mut h, 8 * 20, &[0x12_3000]);
    let e = Harness::mpt_entry(0x1_0700, perm::LOCAL_READ, 0, VA, 0x1000, 20);
    h.poke(slot(0x107), &e);
    // The slot of MPT 0x105, in hardware ownership, scribbled on.
    h.poke(slot(MPT), &[0u8; 64]);
    assert_eq!(h.cmd(op::SYNC_TPT, 0, 0), status::OK);
    assert!(h.dev.mrs().mpt(0x107).is_none());
    assert_eq!(h.dev.mrs().mpt(MPT).unwrap().pages, [PAGE]);
    assert!(h.records_of("dma_read").iter().all(|r| r["what"] != "dmpt"));
    assert!(h.error_codes().is_empty());
}

#[test]
fn unmapping_the_dmpt_page_forgets_what_was_handed_over() {
    let mut h = registered();
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, MPT), status::OK);
    assert_eq!(h.dev.mrs().parked(), 1);
    // mlx4_mpt_free_icm: the chunk goes (here the whole table), and comes
    // back for another MR with what its pages hold: status HW.
    assert_eq!(h.cmd_full(op::UNMAP_ICM, 0, DMPT_BASE, 16, 0, None), 0);
    assert_eq!(h.dev.mrs().parked(), 0);
    assert_eq!(map(&mut h, op::MAP_ICM, &[(DMPT_BASE, DMPT_DMA, 4)]), 0);
    edit(&mut h, MPT, |e| e[0] = 0x00);
    assert_eq!(h.cmd(op::SYNC_TPT, 0, 0), status::OK);
    assert!(h.dev.mrs().mpt(MPT).is_none());
    assert!(h.error_codes().is_empty());
}

#[test]
fn hw2sw_with_the_dmpt_page_unmapped_writes_nothing() {
    let mut h = registered();
    h.poke(slot(MPT), &[0x5a; 64]);
    assert_eq!(h.cmd_full(op::UNMAP_ICM, 0, DMPT_BASE, 16, 0, None), 0);
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, MPT), status::OK);
    assert_eq!(h.mem(slot(MPT), 64), [0x5a; 64]);
    assert_eq!(h.dev.mrs().parked(), 0);
    let rec = h.records_of("mpt");
    assert_eq!(rec.last().unwrap()["icm"], false);
    assert!(h.error_codes().is_empty());
}

#[test]
fn the_mtt_is_free_to_write_while_in_software_ownership() {
    let mut h = registered();
    // A VF's way (WRITE_MTT): busy while the MPT is in hardware ownership.
    assert_eq!(h.write_mtt(MTT, &[0x12_3000]), status::RESOURCE_BUSY);
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, MPT), status::OK);
    assert_eq!(h.write_mtt(MTT, &[0x12_3000]), status::OK);
    edit(&mut h, MPT, |e| e[0] = 0x00);
    assert_eq!(h.cmd(op::SYNC_TPT, 0, 0), status::OK);
    assert_eq!(h.dev.mrs().mpt(MPT).unwrap().pages, [0x12_3000]);
    assert_eq!(h.write_mtt(MTT, &[PAGE]), status::RESOURCE_BUSY);
    assert_eq!(h.error_codes(), ["mtt_busy", "mtt_busy"]);
}
