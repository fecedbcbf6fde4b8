//! Memory regions as mainline mlx4_core registers them
//! (`core/mr.c:mlx4_mr_enable`, `mlx4_write_mtt_chunk`, `mlx4_mr_free`):
//! the MPT entry in the mailbox, its MTT entries in ICM, any page size
//! mlx4_ib picks (`ib/mr.c:mlx4_ib_reg_user_mr`), the PHYSICAL MPT of
//! `ib/mr.c:mlx4_ib_get_dma_mr`, and the keys the data path checks.

use super::bringup::*;
use super::harness::*;
use crate::bytes::{put_be32, put_be64};
use crate::command::{op, status};
use crate::keys::{self, Access, Fault};
use crate::mr::{flag, perm};

/// MLX4_MPT_PD_FLAG_EN_INV, MLX4_MPT_PD_FLAG_FAST_REG.
const EN_INV: u32 = 3 << 24;
const FAST_REG: u32 = 1 << 27;
const PD: u32 = 5;

/// `core/mr.c:hw_index_to_key`: `(index >> 24) | (index << 8)`.
fn key_of(index: u32) -> u32 {
    index.rotate_left(8)
}

/// The mailbox mlx4_mr_enable builds for MPT `index`: MIO | REGION |
/// access | SW_OWNS, the key field key_to_hw_index(key) (= index), pd |
/// EN_INV, start/length, entity_size `shift`, MTT at byte `mtt`.
fn mpt(index: u32, access: u32, start: u64, length: u64, shift: u32, mtt: u64) -> [u8; 64] {
    let mut b = [0u8; 64];
    put_be32(
        &mut b,
        0x00,
        flag::MIO | flag::REGION | perm::LOCAL_READ | access | flag::SW_OWNS,
    );
    put_be32(&mut b, 0x08, index);
    put_be32(&mut b, 0x0c, PD | EN_INV);
    put_be64(&mut b, 0x10, start);
    put_be64(&mut b, 0x18, length);
    put_be64(&mut b, 0x2c, mtt);
    put_be32(&mut b, 0x38, shift);
    b
}

/// HCA up, the MTT page and the dMPT page of MPTs 256..319 mapped (and
/// in memory: HW2SW_MPT writes the entry back there).
fn hca() -> Harness {
    let mut h = Harness::fresh();
    init_hca(&mut h);
    map_mtt(&mut h);
    h.dev.mem_mut().add_range(ICM_DMA + 0x8000, 0x1000);
    let dmpt_page = DMPT_BASE + 0x100 * 64;
    assert_eq!(
        map(&mut h, op::MAP_ICM, &[(dmpt_page, ICM_DMA + 0x8000, 0)]),
        status::OK
    );
    h
}

fn sw2hw(h: &mut Harness, in_mod: u32, e: &[u8; 64]) -> u8 {
    h.poke(IN_MB, e);
    h.cmd(op::SW2HW_MPT, 0, in_mod)
}

#[test]
fn a_user_region_takes_its_pages_from_the_mtt_in_icm() {
    let mut h = hca();
    // Two 4 KiB pages from byte 0x100 of the MTT table.
    write_mtt(&mut h, 0x100, &[0x7_3000, 0x7_1000]);
    let (index, va) = (0x101, 0x7f12_3456_7f00);
    let e = mpt(index, perm::LOCAL_WRITE, va, 0x200, 12, 0x100);
    assert_eq!(sw2hw(&mut h, index, &e), status::OK);
    let m = h.dev.mrs().mpt(index).unwrap();
    assert_eq!(
        (m.shift, m.pages.clone(), m.pd),
        (12, vec![0x7_3000, 0x7_1000], PD)
    );
    let lkey = key_of(index);
    assert_eq!(lkey, 0x1_0100);
    let r = keys::resolve(
        h.dev.mrs(),
        false,
        PD,
        lkey,
        va + 0x80,
        0x100,
        Access::LocalWrite,
    );
    assert_eq!(r, Ok(vec![(0x7_3f80, 0x80), (0x7_1000, 0x80)]));
    // Another PD, no REMOTE_WRITE, outside the region.
    let mrs = h.dev.mrs();
    let r = |pd, addr, len, a| keys::resolve(mrs, false, pd, lkey, addr, len, a);
    assert_eq!(r(PD + 1, va, 4, Access::LocalRead), Err(Fault::PdMismatch));
    assert_eq!(r(PD, va, 4, Access::RemoteWrite), Err(Fault::Permission));
    assert_eq!(
        r(PD, va + 0x1fd, 4, Access::LocalRead),
        Err(Fault::OutOfRange)
    );
    // mlx4_mr_free: HW2SW_MPT without a mailbox (opmod 1); the key is gone.
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, index), status::OK);
    assert_eq!(
        keys::resolve(h.dev.mrs(), false, PD, lkey, va, 4, Access::LocalRead),
        Err(Fault::NoRegion)
    );
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, index), status::BAD_RES_STATE);
    assert!(h.error_codes().is_empty());
}

#[test]
fn large_pages_translate_by_the_entity_size() {
    let mut h = hca();
    // 3 MiB on two 2 MiB pages (mlx4_ib: contiguous, va and DMA agree
    // modulo 2 MiB); the first entry holds the page containing start.
    write_mtt(&mut h, 0x200, &[0x8000_0000, 0x4020_0000]);
    let (index, va) = (0x102, 0x7f00_0010_0000);
    let e = mpt(
        index,
        perm::LOCAL_WRITE | perm::REMOTE_WRITE,
        va,
        3 << 20,
        21,
        0x200,
    );
    assert_eq!(sw2hw(&mut h, index, &e), status::OK);
    let rkey = key_of(index);
    let r = keys::resolve(
        h.dev.mrs(),
        false,
        PD,
        rkey,
        va + 0xf_fff0,
        0x20,
        Access::RemoteWrite,
    );
    assert_eq!(r, Ok(vec![(0x801f_fff0, 0x10), (0x4020_0000, 0x10)]));
    assert_eq!(h.records_of("mpt")[0]["shift"], 21);
    // An entry not aligned to the region's page size, a page size outside
    // 12..=31: refused.
    write_mtt(&mut h, 0x300, &[0x8010_0000]);
    let e = mpt(0x103, 0, va, 0x1000, 21, 0x300);
    assert_eq!(sw2hw(&mut h, 0x103, &e), status::BAD_PARAM);
    for shift in [11, 32] {
        let e = mpt(0x103, 0, 0, 0x1000, shift, 0x300);
        assert_eq!(sw2hw(&mut h, 0x103, &e), status::BAD_PARAM);
    }
    // A 1 GiB page region: one entry.
    write_mtt(&mut h, 0x308, &[0x1_4000_0000]);
    let e = mpt(0x103, 0, 0x4000_0000, 1 << 30, 30, 0x308);
    assert_eq!(sw2hw(&mut h, 0x103, &e), status::OK);
    assert_eq!(h.dev.mrs().mpt(0x103).unwrap().pages, [0x1_4000_0000]);
}

#[test]
fn indices_keys_and_mtt_are_checked() {
    let mut h = hca();
    write_mtt(&mut h, 0x100, &[0x7_3000]);
    // Firmware-reserved MPTs (2^8), their dMPT page mapped, and past
    // INIT_HCA's 2^10.
    let page = DMPT_BASE + 0xff * 64 / 0x1000 * 0x1000;
    assert_eq!(
        map(&mut h, op::MAP_ICM, &[(page, ICM_DMA + 0x9000, 0)]),
        status::OK
    );
    let e = mpt(0xff, 0, 0x1000, 0x100, 12, 0x100);
    assert_eq!(sw2hw(&mut h, 0xff, &e), status::BAD_INDEX);
    let e = mpt(0x400, 0, 0x1000, 0x100, 12, 0x100);
    assert_eq!(sw2hw(&mut h, 0x400, &e), status::BAD_INDEX);
    // The key field must name the MPT (mod num_mpts): 0x504 & 0x3ff.
    let e = mpt(0x504, 0, 0x1000, 0x100, 12, 0x100);
    assert_eq!(sw2hw(&mut h, 0x104, &e), status::OK);
    assert!(keys::check(
        h.dev.mrs(),
        false,
        PD,
        key_of(0x504),
        0x1000,
        4,
        Access::LocalRead
    )
    .is_ok());
    assert_eq!(
        keys::check(
            h.dev.mrs(),
            false,
            PD,
            key_of(0x104),
            0x1000,
            4,
            Access::LocalRead
        ),
        Err(Fault::KeyMismatch)
    );
    let e = mpt(0x105, 0, 0x1000, 0x100, 12, 0x100);
    assert_eq!(sw2hw(&mut h, 0x106, &e), status::BAD_PARAM);
    // The MTT entry on an ICM page nobody mapped; an entry not PRESENT.
    let e = mpt(0x106, 0, 0x1000, 0x100, 12, 0x1000);
    assert_eq!(sw2hw(&mut h, 0x106, &e), status::ICM_ERROR);
    h.poke(MTT_PAGE + 0x400, &[0u8; 8]);
    let e = mpt(0x106, 0, 0x1000, 0x100, 12, 0x400);
    assert_eq!(sw2hw(&mut h, 0x106, &e), status::BAD_PARAM);
    // Twice the same MPT.
    let e = mpt(0x104, 0, 0x1000, 0x100, 12, 0x100);
    assert_eq!(sw2hw(&mut h, 0x104, &e), status::BAD_RES_STATE);
    // mlx4 wrote the entries into ICM itself: no WRITE_MTT.
    assert_eq!(h.dev.counters().global.mtt_entries_written, 0);
}

#[test]
fn a_dma_mr_is_the_identity_and_fast_reg_is_refused() {
    let mut h = hca();
    // mlx4_ib_get_dma_mr: no MTT (PHYSICAL, mtt_addr 0), start 0, length
    // ~0, entity_size MLX4_ICM_PAGE_SHIFT.
    let mut e = mpt(
        0x100,
        perm::LOCAL_WRITE | perm::REMOTE_WRITE,
        0,
        u64::MAX,
        12,
        0,
    );
    let f = u32::from_be_bytes(e[0..4].try_into().unwrap()) | flag::PHYSICAL;
    put_be32(&mut e, 0, f);
    assert_eq!(sw2hw(&mut h, 0x100, &e), status::OK);
    let key = key_of(0x100);
    let r = keys::resolve(
        h.dev.mrs(),
        false,
        PD,
        key,
        0x1234_5678,
        0x3000,
        Access::RemoteWrite,
    );
    assert_eq!(r, Ok(vec![(0x1234_5678, 0x3000)]));
    // PHYSICAL with an MTT: refused.
    put_be64(&mut e, 0x2c, 0x100);
    assert_eq!(
        sw2hw(&mut h, 0x101, &{
            let mut x = e;
            put_be32(&mut x, 0x08, 0x101);
            x
        }),
        status::BAD_PARAM
    );
    // mlx4_ib_alloc_mr's fast-register MPT: FREE, FAST_REG | RAE.
    let mut e = mpt(0x102, 0, 0, 0, 0, 0x100);
    put_be32(&mut e, 0x00, flag::MIO | flag::REGION | (3 << 28));
    put_be32(&mut e, 0x0c, PD | EN_INV | FAST_REG | (1 << 28));
    assert_eq!(sw2hw(&mut h, 0x102, &e), status::BAD_PARAM);
    assert_eq!(h.dev.counters().global.fw_unmodelled, 1);
    assert_eq!(h.records_of("fw_refused")[0]["reason"], "fast_reg");
}
