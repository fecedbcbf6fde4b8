//! Memory regions (MTT, MPT), the key checks of data segments and rkeys,
//! and RDMA writes that land in registered memory.

use super::harness::*;
use crate::bytes::{be16, be32, put_be32, put_be64};
use crate::command::{op, status};
use crate::mr::perm;

/// The region's pages, deliberately not contiguous nor ascending.
const PAGES: [u64; 3] = [0x12_5000, 0x12_1000, 0x12_3000];
/// Its first MTT entry.
const MTT: u64 = 16;
/// Its virtual address: mid-page, so 0x2000 bytes span three pages.
const VA: u64 = 0x7f00_0000_0800;
const LEN: u64 = 0x2000;
/// MPT 0x105 (above the firmware's 256 reserved ones), tag 0x3c.
const KEY: u32 = 0x1_053c;
const MPT: u32 = 0x105;
const RW: u32 = perm::LOCAL_WRITE | perm::REMOTE_WRITE;

/// The DMA address of the region's virtual address `va`.
fn dma(va: u64) -> u64 {
    PAGES[((va >> 12) - (VA >> 12)) as usize] | (va & 0xfff)
}

/// Writes the MTT and registers the region with `access` in `pd`.
fn register(h: &mut Harness, access: u32, pd: u32) {
    assert_eq!(h.write_mtt(MTT, &PAGES), 0);
    let e = Harness::mpt_entry(KEY, access, pd, VA, LEN, MTT);
    assert_eq!(h.sw2hw_mpt(&e), 0);
}

fn post(h: &mut Harness, qpn: u32, buf: u64, index: u32, w: &[u8]) {
    h.write_wqe(buf, index, w);
    h.doorbell(UAR, qpn);
}

/// A SEND of QP 0x40 (`setup()`, connected to itself) gathering `len`
/// bytes at `addr` under `lkey`.
fn send_from(h: &mut Harness, index: u32, lkey: u32, addr: u64, len: u32) {
    let w = data_wqe(QPN, index, 0x0a, None, b"", &[(len, lkey, addr)]);
    post(h, QPN, QP_BUF, index, &w);
}

/// (my_qpn, wqe_index, syndrome, byte 0x1f) of an error CQE.
fn err(cqe: &[u8]) -> (u32, u16, u8, u8) {
    (be32(cqe, 0), be16(cqe, 0x18), cqe[0x1b], cqe[0x1f])
}

fn gathers(h: &Harness) -> Vec<(u64, u64)> {
    h.records_of("dma_read")
        .iter()
        .filter(|r| r["what"] == "gather")
        .map(|r| (r["addr"].as_u64().unwrap(), r["len"].as_u64().unwrap()))
        .collect()
}

fn rdma_writes(h: &Harness) -> Vec<(u64, u64)> {
    h.records_of("dma_write")
        .iter()
        .filter(|r| r["what"] == "rdma")
        .map(|r| (r["addr"].as_u64().unwrap(), r["len"].as_u64().unwrap()))
        .collect()
}

fn fault_reasons(h: &Harness) -> Vec<(String, String)> {
    h.records_of("prot_fault")
        .iter()
        .map(|r| {
            (
                r["side"].as_str().unwrap().to_string(),
                r["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn query_dev_cap_reports_the_memory_region_limits() {
    let mut h = Harness::new();
    assert_eq!(h.cmd(op::QUERY_DEV_CAP, 0, 0), 0);
    let b = h.mem(OUT_MB, 0x100);
    assert_eq!(b[0x1d] & 0x3f, 19, "2^19 MPTs (INIT_HCA sets how many)");
    assert_eq!(b[0x20] >> 4, 0, "one reserved MTT entry");
    assert_eq!(b[0x21] & 0x3f, 32, "regions up to 4 GiB");
    assert_eq!(b[0x22] & 0xf, 8, "256 reserved MPTs");
    assert_eq!(b[0x23] & 0x3f, 16, "65536 MTT entries");
    assert_eq!(be16(&b, 0x90), 8, "MTT entry size");
    assert_eq!(be32(&b, 0x98), 0x0000_0008, "reserved lkey");
}

#[test]
fn a_gather_through_a_region_reads_its_pages() {
    let mut h = Harness::setup();
    register(&mut h, 0, 0);
    // 8 bytes from the last 4 of the region's first page.
    h.poke(dma(VA + 0x7fc), b"abcd");
    h.poke(dma(VA + 0x800), b"efgh");
    send_from(&mut h, 0, KEY, VA + 0x7fc, 8);
    assert_eq!(h.mem(RECV_BUF, 8), b"abcdefgh");
    assert_eq!(gathers(&h), [(0x12_5ffc, 4), (0x12_1000, 4)]);
    assert_eq!(h.cqe(0)[0x1f], 0x4a);
    assert_eq!(h.diag_read(0x590), 1, "MPTs in hardware ownership");
    assert_eq!(h.diag_read(0x598), 3, "pages they translate");
    assert_eq!(h.diag_read(0x5c0), 3, "MTT entries written");
    assert_eq!((h.diag_read(0x5a0), h.diag_read(0x548)), (0, 0));
    let mpt = &h.records_of("mpt")[0];
    assert_eq!(
        (mpt["op"].as_str(), mpt["index"].as_u64()),
        (Some("sw2hw"), Some(0x105))
    );
    assert_eq!(mpt["pages"], 3);
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn write_mtt_refusals_write_nothing() {
    let mut h = Harness::new();
    let mut cases: Vec<(&str, Vec<u8>, u32)> = Vec::new();
    let mb = |first: u64, reserved: u64, entries: &[u64]| {
        let mut b = vec![0u8; 16 + 8 * entries.len()];
        put_be64(&mut b, 0, first);
        put_be64(&mut b, 8, reserved);
        for (i, e) in entries.iter().enumerate() {
            put_be64(&mut b, 16 + 8 * i, *e);
        }
        b
    };
    cases.push(("no entries", mb(1, 0, &[0x12_5001]), 0));
    cases.push(("511 entries", mb(1, 0, &[0x12_5001; 511]), 511));
    cases.push(("index 0 (reserved)", mb(0, 0, &[0x12_5001]), 1));
    cases.push(("past the table", mb(65535, 0, &[0x12_5001; 2]), 2));
    cases.push(("a huge index", mb(u64::MAX, 0, &[0x12_5001]), 1));
    cases.push(("not present", mb(1, 0, &[0x12_5001, 0x12_6000]), 2));
    cases.push(("not 4 KiB aligned", mb(1, 0, &[0x12_5801]), 1));
    cases.push(("reserved word", mb(1, 1, &[0x12_5001]), 1));
    for (name, b, n) in cases {
        h.poke(IN_MB, &b);
        assert_eq!(h.cmd(op::WRITE_MTT, 0, n), status::BAD_PARAM, "{name}");
    }
    h.poke(IN_MB, &mb(1, 0, &[0x12_5001]));
    assert_eq!(h.cmd(op::WRITE_MTT, 1, 1), status::BAD_PARAM, "opmod 1");
    assert_eq!(h.diag_read(0x5c0), 0);
    // Nothing was written: a region over entry 1 finds it missing.
    let e = Harness::mpt_entry(KEY, 0, 0, VA, 0x100, 1);
    assert_eq!(h.sw2hw_mpt(&e), status::BAD_PARAM);
    // Entries whose ICM page nobody mapped: ICM_ERROR, counted.
    assert_eq!(
        h.write_mtt(65536 - 510, &[0x12_5000; 510]),
        status::ICM_ERROR
    );
    assert_eq!(h.dev.counters().global.icm_errors, 1);
    assert_eq!(h.diag_read(0x5c0), 0);
    // 510 entries, the rest of the MTT's first ICM page, are fine; they
    // land in the table in ICM, where mlx4 would write them itself.
    assert_eq!(h.write_mtt(2, &[0x12_5000; 510]), 0);
    assert_eq!(h.diag_read(0x5c0), 510);
    assert_eq!(
        h.mem(super::bringup::MTT_PAGE + 0xff8, 8),
        0x12_5001u64.to_be_bytes()
    );
    assert!(h.error_codes().is_empty());
}

#[test]
fn write_mtt_under_a_region_in_hardware_ownership_is_busy() {
    let mut h = Harness::new();
    register(&mut h, 0, 0);
    // Overlapping the region's last entry, and an unrelated one next to it.
    assert_eq!(
        h.write_mtt(MTT + 2, &[0x12_6000, 0x12_7000]),
        status::RESOURCE_BUSY
    );
    assert_eq!(h.error_codes(), ["mtt_busy"]);
    assert_eq!(h.write_mtt(MTT + 3, &[0x12_6000]), 0);
    assert_eq!(h.write_mtt(MTT - 1, &[0x12_6000]), 0);
    // Back in software ownership, the entries may change.
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, MPT), 0);
    assert_eq!(h.write_mtt(MTT, &[0x12_6000]), 0);
    assert_eq!(h.error_codes().len(), 1);
}

#[test]
fn sw2hw_mpt_refusals() {
    let mut h = Harness::new();
    assert_eq!(h.write_mtt(MTT, &PAGES), 0);
    let good = Harness::mpt_entry(KEY, RW, 3, VA, LEN, MTT);
    let with = |off: usize, v: u32| {
        let mut e = good;
        put_be32(&mut e, off, v);
        e
    };
    let with64 = |off: usize, v: u64| {
        let mut e = good;
        put_be64(&mut e, off, v);
        e
    };
    let cases = [
        ("no REGION", with(0, RW)),
        ("PHYSICAL", with(0, crate::mr::flag::REGION | (1 << 9))),
        (
            "key of another MPT",
            with(8, crate::keys::hw_index(0x1_063c)),
        ),
        ("length 0", with64(0x18, 0)),
        ("end overflows", with64(0x10, u64::MAX - 0x100)),
        ("longer than 4 GiB", with64(0x18, (1 << 32) + 1)),
        ("8 KiB pages, the entries 4 KiB aligned", with(0x38, 13)),
        ("mtt_addr not 8-aligned", with64(0x2c, MTT * 8 + 4)),
        ("an entry not written", with64(0x2c, (MTT + 1) * 8)),
        ("entry 0", with64(0x2c, 0)),
    ];
    for (name, e) in cases {
        h.poke(IN_MB, &e);
        assert_eq!(h.cmd(op::SW2HW_MPT, 0, MPT), status::BAD_PARAM, "{name}");
    }
    // Entries past the MTT's mapped ICM.
    h.poke(IN_MB, &with64(0x2c, 65535 * 8));
    assert_eq!(h.cmd(op::SW2HW_MPT, 0, MPT), status::ICM_ERROR);
    // The index in in_modifier: 0..255 are the firmware's, 1024 is past.
    h.poke(IN_MB, &good);
    assert_eq!(h.cmd(op::SW2HW_MPT, 0, 0), status::BAD_INDEX);
    assert_eq!(h.cmd(op::SW2HW_MPT, 0, 0xff), status::BAD_INDEX);
    assert_eq!(h.cmd(op::SW2HW_MPT, 0, 1024), status::BAD_INDEX);
    assert_eq!(
        h.cmd(op::SW2HW_MPT, 0, MPT + 1),
        status::BAD_PARAM,
        "key names MPT 0x105"
    );
    assert_eq!(h.cmd(op::SW2HW_MPT, 1, MPT), status::BAD_PARAM, "opmod 1");
    assert_eq!(h.diag_read(0x590), 0);
    // SW_OWNS and MIO are ignored; an MPT in hardware ownership is taken.
    let mut e = good;
    put_be32(
        &mut e,
        0,
        crate::mr::flag::REGION | RW | (0xf << 28) | (1 << 17),
    );
    assert_eq!(h.sw2hw_mpt(&e), 0);
    assert_eq!(h.sw2hw_mpt(&e), status::BAD_RES_STATE);
    assert_eq!(h.dev.mrs().mpt(MPT).unwrap().pd, 3);
    assert!(h.error_codes().is_empty());
}

#[test]
fn hw2sw_mpt_returns_the_entry_and_ends_the_region() {
    let mut h = Harness::setup();
    register(&mut h, 0, 0);
    let e = Harness::mpt_entry(KEY, 0, 0, VA, LEN, MTT);
    assert_eq!(h.cmd(op::HW2SW_MPT, 2, MPT), status::BAD_PARAM);
    assert_eq!(h.cmd(op::HW2SW_MPT, 0, 1024), status::BAD_INDEX);
    assert_eq!(h.cmd(op::HW2SW_MPT, 0, MPT), 0);
    assert_eq!(h.mem(OUT_MB, 64), e);
    assert_eq!(h.cmd(op::HW2SW_MPT, 0, MPT), status::BAD_RES_STATE);
    assert_eq!(h.cmd(op::HW2SW_MPT, 1, MPT), status::BAD_RES_STATE);
    assert_eq!((h.diag_read(0x590), h.diag_read(0x598)), (0, 0));
    // Registered again, and back without a mailbox.
    assert_eq!(h.sw2hw_mpt(&e), 0);
    assert_eq!(h.cmd_full(op::HW2SW_MPT, 1, 0, MPT, 0, None), 0);
    let ops: Vec<_> = h
        .records_of("mpt")
        .iter()
        .map(|r| r["op"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ops, ["sw2hw", "hw2sw", "sw2hw", "hw2sw"]);
    // No access uses the region after it.
    send_from(&mut h, 0, KEY, VA, 4);
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x04, 0x5e));
    assert!(gathers(&h).is_empty());
    assert_eq!(fault_reasons(&h), [("gather".into(), "no_region".into())]);
}

#[test]
fn a_stale_key_is_refused() {
    let mut h = Harness::setup();
    register(&mut h, 0, 0);
    // MPT 5 with another tag: the key of an earlier registration.
    send_from(&mut h, 0, 0x1_053b, VA, 4);
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x04, 0x5e));
    assert_eq!(h.qp_state_from_query(QPN).0, 6);
    assert!(gathers(&h).is_empty());
    assert_eq!((h.diag_read(0x5a0), h.diag_read(0x548)), (1, 1));
    assert_eq!(
        fault_reasons(&h),
        [("gather".into(), "key_mismatch".into())]
    );
    let f = &h.records_of("prot_fault")[0];
    assert_eq!(
        (f["qpn"].as_u64(), f["key"].as_u64()),
        (Some(QPN.into()), Some(0x1_053b))
    );
    assert_eq!(h.dev.counters().global.deliveries, 0);
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn a_region_of_another_protection_domain_is_refused() {
    let mut h = Harness::setup();
    register(&mut h, 0, 9);
    send_from(&mut h, 0, KEY, VA, 4);
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x04, 0x5e));
    assert!(gathers(&h).is_empty());
    assert_eq!(fault_reasons(&h), [("gather".into(), "pd_mismatch".into())]);
    assert_eq!(h.diag_read(0x5a0), 1);
}

#[test]
fn a_gather_past_the_region_is_refused_with_nothing_read() {
    let mut h = Harness::setup();
    register(&mut h, 0, 0);
    // The first segment is fine; the second runs 1 byte past the end.
    let w = data_wqe(
        QPN,
        0,
        0x0a,
        None,
        b"",
        &[(4, KEY, VA), (4, KEY, VA + LEN - 3)],
    );
    post(&mut h, QPN, QP_BUF, 0, &w);
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x04, 0x5e));
    assert!(
        gathers(&h).is_empty(),
        "nothing read, not even the good one"
    );
    assert_eq!(
        fault_reasons(&h),
        [("gather".into(), "out_of_range".into())]
    );
    assert_eq!((h.diag_read(0x5a0), h.diag_read(0x548)), (1, 1));
    // Below the start, too; the last byte exactly is fine.
    let mut h = Harness::setup();
    register(&mut h, 0, 0);
    send_from(&mut h, 0, KEY, VA + LEN - 1, 1);
    assert_eq!(h.cqe(0)[0x1f], 0x4a);
    send_from(&mut h, 1, KEY, VA - 1, 2);
    assert_eq!(err(&h.cqe(1)), (QPN, 1, 0x04, 0x5e));
}

#[test]
fn a_zero_byte_segment_is_not_checked() {
    let mut h = Harness::setup();
    let w = data_wqe(QPN, 0, 0x0a, None, b"z", &[(0, 0xdead, 0)]);
    post(&mut h, QPN, QP_BUF, 0, &w);
    assert_eq!(h.mem(RECV_BUF, 1), b"z");
    assert_eq!(h.diag_read(0x5a0), 0);
}

#[test]
fn a_scatter_through_a_region_writes_its_pages() {
    let mut h = Harness::setup();
    register(&mut h, perm::LOCAL_WRITE, 0);
    h.post_recv(QP_BUF, 0, 256, KEY, VA + 0x7fe);
    let w = Harness::inline_send(QPN, 0, b"hello", true);
    post(&mut h, QPN, QP_BUF, 0, &w);
    assert_eq!(h.mem(0x12_5ffe, 2), b"he");
    assert_eq!(h.mem(0x12_1000, 3), b"llo");
    assert_eq!(be32(&h.recv_cqe(0), 0x14), 5);
    assert_eq!(h.diag_read(0x528), 2, "two payload DMA writes");
    assert!(h.error_codes().is_empty());
}

#[test]
fn a_scatter_without_local_write_is_refused() {
    let mut h = Harness::setup();
    register(&mut h, perm::REMOTE_WRITE, 0);
    h.post_recv(QP_BUF, 0, 256, KEY, VA);
    let w = Harness::inline_send(QPN, 0, b"w", true);
    post(&mut h, QPN, QP_BUF, 0, &w);
    assert_eq!(err(&h.recv_cqe(0)), (QPN, 0, 0x04, 0x1e));
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x14, 0x5e));
    assert_eq!(h.mem(dma(VA), 1), [0], "nothing written");
    assert_eq!(fault_reasons(&h), [("scatter".into(), "permission".into())]);
    assert_eq!((h.diag_read(0x5a0), h.diag_read(0x548)), (1, 1));
    h.check_invariants(false);
}

#[test]
fn a_ud_send_checks_its_gather() {
    let mut h = Harness::setup();
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), 0);
    let mut mb = Harness::qp_mailbox(QPN, UAR, CQN, mtt_of(QP_BUF), SQ_LOG);
    mb[8 + 1] = 3; // UD
    put_be32(&mut mb[8..], 0x90, 0); // no remote access enables on UD
    mb[8 + 0x08] = (5 << 5) | 13; // mtu_msgmax as INIT2RTR keeps it
    h.create_qp_with(QPN, &mb);
    let mut w = data_wqe(QPN, 0, 0x0a, None, b"", &[(4, 0x77, GATHER_BUF)]);
    // The datagram segment: port 1, PD 0, to QP 0x41 (which is not there).
    let mut dg = [0u8; 48];
    put_be32(&mut dg, 0, 1 << 24);
    put_be32(&mut dg, 32, QPN2);
    w.splice(16..16, dg);
    w[7] = (w.len() / 16) as u8;
    post(&mut h, QPN, QP_BUF, 0, &w);
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x04, 0x5e));
    assert_eq!(h.diag_read(0x5a0), 1);
}

/// `pair()` with QP 0x41's region registered (in `pd`, with `access`) and
/// an RDMA write of QP 0x40 (`opcode`) of `payload`, gathered from
/// GATHER_BUF, to `raddr` under `rkey`.
fn rdma(access: u32, pd: u32, opcode: u8, raddr: u64, rkey: u32, payload: &[u8]) -> Harness {
    let mut h = Harness::pair();
    register(&mut h, access, pd);
    h.poke(GATHER_BUF, payload);
    let segs = [(payload.len() as u32, RESERVED_LKEY, GATHER_BUF)];
    let segs = if payload.is_empty() {
        &[][..]
    } else {
        &segs[..]
    };
    let mut w = data_wqe(QPN, 0, opcode, Some((raddr, rkey)), b"", segs);
    w[12..16].copy_from_slice(&[0xca, 0xfe, 0xf0, 0x0d]); // the immediate
    post(&mut h, QPN, QP_BUF, 0, &w);
    h
}

#[test]
fn an_rdma_write_lands_byte_exact_across_a_page_boundary() {
    let data: Vec<u8> = (0..40u8).map(|i| i + 1).collect();
    let before = {
        let mut h = Harness::pair();
        register(&mut h, RW, 0);
        h.diag_read(0x538)
    };
    let mut h = rdma(RW, 0, 0x08, VA + 0x7ec, KEY, &data);
    // 20 bytes at the end of the first page, 20 at the start of the second.
    assert_eq!(h.mem(0x12_5fec, 20), &data[..20]);
    assert_eq!(h.mem(0x12_1000, 20), &data[20..]);
    assert_eq!(h.mem(0x12_5fe8, 4), [0; 4], "nothing before");
    assert_eq!(h.mem(0x12_1014, 4), [0; 4], "nothing after");
    assert_eq!(rdma_writes(&h), [(0x12_5fec, 20), (0x12_1000, 20)]);
    // The requester's CQE: RDMA_WRITE, byte_cnt 40; no receive WQE used.
    assert_eq!((h.cqe(0)[0x1f], be32(&h.cqe(0), 0x14)), (0x48, 40));
    assert_eq!(h.rq_ci(QPN2), 0);
    assert_eq!(h.dev.counters().global.recv_cqes, 0);
    assert_eq!((h.diag_read(0x5b0), h.diag_read(0x5b8)), (1, 40));
    // Two DMA writes of data and the send CQE.
    assert_eq!(h.diag_read(0x538), before + 3);
    let r = &h.records_of("rdma_write")[0];
    assert_eq!(
        (r["from"].as_u64(), r["to"].as_u64()),
        (Some(QPN.into()), Some(QPN2.into()))
    );
    assert_eq!(
        (r["len"].as_u64(), r["rq_index"].is_null()),
        (Some(40), true)
    );
    assert!(r["one_way_ns"].as_u64().unwrap() > 0);
    // The diag block sums what the trace says (0x658).
    assert_eq!(Some(h.diag_read(0x658)), r["one_way_ns"].as_u64());
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn an_rdma_write_with_inline_data() {
    let mut h = Harness::pair();
    register(&mut h, RW, 0);
    let w = data_wqe(QPN, 0, 0x08, Some((VA + 0x1000, KEY)), b"inline!", &[]);
    post(&mut h, QPN, QP_BUF, 0, &w);
    assert_eq!(h.mem(dma(VA + 0x1000), 7), b"inline!");
    assert_eq!(h.mem(0x12_1800, 7), b"inline!");
    assert_eq!(h.cqe(0)[0x1f], 0x48);
}

#[test]
fn an_rdma_write_imm_consumes_a_receive_wqe() {
    let mut h = rdma(RW, 0, 0x09, VA, KEY, b"imm data");
    assert_eq!(h.mem(dma(VA), 8), b"imm data");
    let mut want = [0u8; 32];
    put_be32(&mut want, 0x00, QPN2);
    want[0x04..0x08].copy_from_slice(&[0xca, 0xfe, 0xf0, 0x0d]);
    put_be32(&mut want, 0x08, QPN);
    put_be32(&mut want, 0x14, 8);
    want[0x1f] = 0x00; // RDMA_WRITE_IMM, IS_SEND clear
    assert_eq!(h.mem(RCQ2_BUF, 32), want);
    assert_eq!(h.rq_ci(QPN2), 1);
    assert_eq!(
        h.mem(RECV2_BUF, 8),
        [0; 8],
        "the receive buffer is untouched"
    );
    assert!(!h.records_of("dma_read").iter().any(|r| r["what"] == "rwqe"));
    // The receive CQE first, then the requester's.
    let cqns: Vec<_> = h
        .records_of("cqe")
        .iter()
        .map(|r| r["cqn"].clone())
        .collect();
    assert_eq!(cqns, [RCQN2, CQN]);
    assert_eq!(h.cqe(0)[0x1f], 0x49);
    assert_eq!(h.records_of("rdma_write")[0]["rq_index"], 0);
    assert_eq!((h.diag_read(0x508), h.diag_read(0x500)), (1, 0));
    assert_eq!((h.diag_read(0x5b0), h.diag_read(0x5b8)), (1, 8));
    assert!(h.error_codes().is_empty());
    h.check_invariants(false);
}

#[test]
fn an_rdma_write_imm_into_an_empty_rq_writes_nothing() {
    let mut h = Harness::pair();
    register(&mut h, RW, 0);
    h.set_rq_head(RQ2_DB, 0);
    let w = data_wqe(QPN, 0, 0x09, Some((VA, KEY)), b"rnr", &[]);
    post(&mut h, QPN, QP_BUF, 0, &w);
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x16, 0x5e));
    assert_eq!(h.mem(dma(VA), 3), [0; 3]);
    assert_eq!((h.diag_read(0x510), h.diag_read(0x5b0)), (1, 0));
    assert_eq!(h.qp_state_from_query(QPN2).0, 3);
}

#[test]
fn rkey_refusals_give_remote_access_errors_and_write_nothing() {
    let cases: [(&str, u32, u32, u64, u32, &str); 6] = [
        (
            "no REMOTE_WRITE",
            perm::LOCAL_WRITE,
            0,
            VA,
            KEY,
            "permission",
        ),
        ("another pd", RW, 4, VA, KEY, "pd_mismatch"),
        ("past the end", RW, 0, VA + LEN - 4, KEY, "out_of_range"),
        ("stale key", RW, 0, VA, KEY + 1, "key_mismatch"),
        ("no region", RW, 0, VA, 0x1_063c, "no_region"),
        (
            "the reserved lkey",
            RW,
            0,
            GATHER_BUF,
            RESERVED_LKEY,
            "reserved_key",
        ),
    ];
    for (name, access, pd, raddr, rkey, reason) in cases {
        let mut h = rdma(access, pd, 0x08, raddr, rkey, b"12345678");
        assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x13, 0x5e), "{name}");
        assert!(rdma_writes(&h).is_empty(), "{name}");
        assert!(PAGES
            .iter()
            .all(|&p| h.mem(p, 4096).iter().all(|&b| b == 0)));
        assert_eq!(h.qp_state_from_query(QPN).0, 6, "{name}: requester in ERR");
        assert_eq!(
            h.qp_state_from_query(QPN2).0,
            3,
            "{name}: responder untouched"
        );
        assert_eq!(
            fault_reasons(&h),
            [("rkey".into(), reason.into())],
            "{name}"
        );
        assert_eq!((h.diag_read(0x5a8), h.diag_read(0x5a0)), (1, 0), "{name}");
        assert_eq!(h.diag_read(0x5b0), 0);
        let e = &h.records_of("deliver_error")[0];
        assert_eq!(
            (e["error"].as_str(), e["syndrome"].as_u64()),
            (Some("rkey"), Some(0x13))
        );
        assert!(h.error_codes().is_empty(), "{name}");
        h.check_invariants(false);
    }
}

#[test]
fn the_rkey_is_checked_against_the_responders_pd() {
    let mut h = Harness::pair_with_pds(1, 2);
    register(&mut h, RW, 2);
    let w = data_wqe(QPN, 0, 0x08, Some((VA, KEY)), b"pd2", &[]);
    post(&mut h, QPN, QP_BUF, 0, &w);
    assert_eq!(h.mem(dma(VA), 3), b"pd2");
    assert_eq!(h.cqe(0)[0x1f], 0x48);
}

#[test]
fn a_zero_length_rdma_write_checks_no_rkey_and_writes_nothing() {
    let mut h = rdma(0, 7, 0x08, 0xdead_0000, 0xbad, b"");
    assert_eq!((h.cqe(0)[0x1f], be32(&h.cqe(0), 0x14)), (0x48, 0));
    assert!(rdma_writes(&h).is_empty());
    assert_eq!((h.diag_read(0x5b0), h.diag_read(0x5b8)), (1, 0));
    assert_eq!(h.diag_read(0x5a8), 0);
    // With immediate: the receive WQE and CQE all the same.
    let mut h = rdma(0, 7, 0x09, 0, 0, b"");
    assert_eq!(be32(&h.mem(RCQ2_BUF, 32), 0x14), 0);
    assert_eq!(h.mem(RCQ2_BUF, 32)[0x1f], 0x00);
    assert_eq!(h.rq_ci(QPN2), 1);
    assert_eq!(h.diag_read(0x5b0), 1);
    assert!(h.error_codes().is_empty());
}

#[test]
fn an_rdma_write_to_a_missing_peer_is_a_transport_error() {
    let mut h = Harness::pair();
    register(&mut h, RW, 0);
    assert_eq!(h.cmd(op::TO_ERR_QP, 0, QPN2), 0);
    let w = data_wqe(QPN, 0, 0x08, Some((VA, KEY)), b"x", &[]);
    post(&mut h, QPN, QP_BUF, 0, &w);
    assert_eq!(err(&h.cqe(0)), (QPN, 0, 0x15, 0x5e));
    assert_eq!(h.mem(dma(VA), 1), [0]);
}

#[test]
fn the_counter_reset_keeps_the_fault_counters_and_the_gauges() {
    let mut h = rdma(RW, 0, 0x08, VA, KEY + 1, b"f");
    assert_eq!(h.diag_read(0x5a8), 1);
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), 0);
    let mb = Harness::connect_to(
        Harness::with_rq(
            Harness::qp_mailbox(QPN, UAR, CQN, mtt_of(QP_BUF), SQ_LOG),
            RCQN,
            RQ_DB,
        ),
        QPN2,
    );
    h.create_qp_with(QPN, &mb);
    let w = data_wqe(QPN, 0, 0x0a, None, b"", &[(1, 0x77, GATHER_BUF)]);
    h.init_sq(QP_BUF, SQ_LOG);
    post(&mut h, QPN, QP_BUF, 0, &w);
    assert_eq!((h.diag_read(0x5a0), h.diag_read(0x548)), (1, 1));
    assert!(h.diag_read(0x5c0) > 0);
    h.diag_write(crate::diag::RESET_COUNTERS, 1);
    assert_eq!(
        (h.diag_read(0x5a0), h.diag_read(0x5a8)),
        (1, 1),
        "faults kept"
    );
    assert_eq!(
        (h.diag_read(0x590), h.diag_read(0x598)),
        (1, 3),
        "gauges kept"
    );
    for off in [0x548, 0x5b0, 0x5b8, 0x5c0] {
        assert_eq!(h.diag_read(off), 0, "{off:#x}");
    }
    let s = h.dev.summary();
    assert_eq!(
        (&s["local_prot_faults"], &s["remote_access_faults"]),
        (&1.into(), &1.into())
    );
    assert_eq!((&s["hw_mpts"], &s["hw_mpt_pages"]), (&1.into(), &3.into()));
    h.check_invariants(true);
}

#[test]
fn a_device_reset_drops_every_region_and_the_icm() {
    let mut h = Harness::new();
    register(&mut h, RW, 0);
    h.dev.reset("reset_register");
    assert_eq!((h.diag_read(0x590), h.diag_read(0x598)), (0, 0));
    assert!(h.dev.mrs().mpt(MPT).is_none());
    // The firmware stopped and the MTT's ICM is gone with it: the same
    // region cannot be registered until a driver brings the HCA up again.
    let e = Harness::mpt_entry(KEY, RW, 0, VA, LEN, MTT);
    assert_eq!(h.sw2hw_mpt(&e), status::BAD_SYS_STATE);
    assert!(h.dev.fw().icm().pages() == 0 && h.dev.fw().hca().is_none());
}

#[test]
fn a_later_transition_may_not_change_the_pd() {
    let mut h = Harness::setup();
    assert_eq!(h.cmd(op::TO_RST_QP, 2, QPN), 0);
    let mb = Harness::with_rq(
        Harness::qp_mailbox(QPN, UAR, CQN, mtt_of(QP_BUF), SQ_LOG),
        RCQN,
        RQ_DB,
    );
    h.poke(IN_MB, &Harness::with_pd(mb.clone(), 0x12));
    assert_eq!(h.cmd(op::RST2INIT_QP, 0, QPN), 0);
    assert_eq!(h.dev.qps().get(QPN).unwrap().pd, 0x12);
    // INIT2RTR takes only what it changes (the destination, the path):
    // the PD stays as RST2INIT set it.
    h.poke(IN_MB, &Harness::with_pd(mb, 0x13));
    assert_eq!(h.cmd(op::INIT2RTR_QP, 0, QPN), 0);
    assert!(h.error_codes().is_empty());
    assert_eq!(h.dev.qps().get(QPN).unwrap().pd, 0x12);
}
