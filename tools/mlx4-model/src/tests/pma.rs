//! The port's Performance Management Agent through MAD_IFC, as the RDMA
//! core's sysfs `ports/1/counters/*` and perfquery use it
//! (`core/sysfs.c:get_perf_mad`): ClassPortInfo, PortCounters,
//! PortCountersExtended, counting what the port really moves.

use super::harness::*;
use crate::bytes::{be16, be32, be64, put_be16};
use crate::command::{op, status};
use crate::firmware::pma::{self, attr, status as mad_status, CAP_MASK, RESP_TIME};
use crate::port_counters::PortCounters;

/// mlx4_ib's op_mod for a MAD the core originates: ignore M_Key and
/// B_Key, no work completion (`ib/mad.c:mlx4_MAD_IFC`).
const OPMOD: u8 = 0x1 | 0x2 | 0x8;
/// PMA data in the MAD.
const D: usize = 64;

/// A PerfMgmt MAD as get_perf_mad builds it (PortSelect at data +1).
fn pma_mad(method: u8, attr_id: u16, port_select: u8, select: u16) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[..4].copy_from_slice(&[1, pma::CLASS_PERF_MGMT, 1, method]);
    m[8..16].copy_from_slice(&0x0bad_cafe_u64.to_be_bytes());
    put_be16(&mut m, 16, attr_id);
    m[D + 1] = port_select;
    put_be16(&mut m, D + 2, select);
    m
}

/// MAD_IFC to port 1; the response MAD.
fn ask(h: &mut Harness, mad: &[u8; 256]) -> Vec<u8> {
    h.poke(IN_MB, mad);
    assert_eq!(h.cmd(op::MAD_IFC, OPMOD, 1), status::OK);
    let out = h.mem(OUT_MB, 256);
    assert_eq!(out[3], 0x81, "GetResp");
    assert_eq!(be64(&out, 8), 0x0bad_cafe, "transaction id echoed");
    assert_eq!(be16(&out, 16), be16(mad, 16), "attribute echoed");
    out
}

fn get(h: &mut Harness, attr_id: u16) -> Vec<u8> {
    let out = ask(h, &pma_mad(1, attr_id, 1, 0));
    assert_eq!(be16(&out, 4), 0, "MAD status");
    out
}

/// (xmit data, rcv data, xmit packets, rcv packets) of PortCounters.
fn counters(h: &mut Harness) -> [u32; 4] {
    let d = get(h, attr::PORT_COUNTERS);
    [24, 28, 32, 36].map(|o| be32(&d, D + o))
}

/// The same and unicast xmit, rcv of PortCountersExtended.
fn counters_ext(h: &mut Harness) -> [u64; 6] {
    let d = get(h, attr::PORT_COUNTERS_EXT);
    [8, 16, 24, 32, 40, 48].map(|o| be64(&d, D + o))
}

#[test]
fn class_port_info_advertises_extended_counters() {
    let mut h = Harness::setup();
    let d = get(&mut h, attr::CLASS_PORT_INFO);
    assert_eq!((d[D], d[D + 1]), (1, 1), "base, class version");
    // core/sysfs.c:get_counter_table: IB_PMA_CLASS_CAP_EXT_WIDTH.
    assert_ne!(be16(&d, D + 2) & (1 << 9), 0);
    assert_eq!(be16(&d, D + 2), CAP_MASK);
    assert_eq!(be32(&d, D + 4) & 0x1f, RESP_TIME);
}

#[test]
fn a_fresh_port_counts_nothing() {
    let mut h = Harness::setup();
    let d = get(&mut h, attr::PORT_COUNTERS);
    assert!(
        d[D + 2..D + 44].iter().all(|&b| b == 0),
        "errors and data 0"
    );
    assert_eq!(counters_ext(&mut h), [0; 6]);
    let d = get(&mut h, attr::PORT_COUNTERS_EXT);
    assert_eq!((be64(&d, D + 56), be64(&d, D + 64)), (0, 0), "multicast");
}

#[test]
fn a_send_moves_the_counters_both_ways() {
    let mut h = Harness::setup();
    // The first WQE takes SQ entries 0 and 1.
    for (i, n) in [(0u32, 98usize), (2, 5)] {
        let wqe = Harness::inline_send(QPN, i, &vec![0x5a; n], true);
        h.write_wqe(QP_BUF, i, &wqe);
        h.doorbell(UAR, QPN);
    }
    assert_eq!(h.dev.counters().global.deliveries, 2);
    // One packet each: LRH, BTH, payload padded to 4, ICRC, VCRC.
    let octets = (26 + 100) + (26 + 8);
    let words = octets / 4;
    assert_eq!(
        counters_ext(&mut h),
        [words, words, 2, 2, 2, 2],
        "sent on the port and, in loopback, received"
    );
    assert_eq!(counters(&mut h), [words as u32, words as u32, 2, 2]);
    assert!(h.error_codes().is_empty());
}

#[test]
fn set_clears_the_selected_counters() {
    let mut h = Harness::setup();
    let wqe = Harness::inline_send(QPN, 0, &[1; 40], true);
    h.write_wqe(QP_BUF, 0, &wqe);
    h.doorbell(UAR, QPN);
    // PortXmitData and PortXmitPkts only.
    let out = ask(&mut h, &pma_mad(2, attr::PORT_COUNTERS, 1, 0x5000));
    assert_eq!(be16(&out, 4), 0);
    assert_eq!(
        [24, 28, 32, 36].map(|o| be32(&out, D + o)),
        [0, 66 / 4, 0, 1],
        "the values after the clear"
    );
    // perfquery -r: all of them, PortSelect 0xFF.
    let out = ask(&mut h, &pma_mad(2, attr::PORT_COUNTERS, 0xff, 0xffff));
    assert_eq!((be16(&out, 4), out[D + 1]), (0, 0xff));
    assert_eq!(counters_ext(&mut h), [0, 0, 0, 0, 1, 1], "unicast kept");
    let out = ask(&mut h, &pma_mad(2, attr::PORT_COUNTERS_EXT, 1, 0x30));
    assert_eq!(be16(&out, 4), 0);
    assert_eq!(counters_ext(&mut h), [0; 6]);
}

#[test]
fn the_32_bit_counters_saturate() {
    let mut p = PortCounters {
        xmit_octets: 4 * u64::from(u32::MAX) + 12,
        rcv_octets: 4 * (u64::from(u32::MAX) - 1),
        xmit_packets: u64::from(u32::MAX) + 1,
        rcv_packets: 1 << 40,
        ..Default::default()
    };
    let out = pma::respond(&pma_mad(1, attr::PORT_COUNTERS, 1, 0), &mut p);
    assert_eq!(
        [24, 28, 32, 36].map(|o| be32(&out, D + o)),
        [u32::MAX, u32::MAX - 1, u32::MAX, u32::MAX]
    );
    let out = pma::respond(&pma_mad(1, attr::PORT_COUNTERS_EXT, 1, 0), &mut p);
    assert_eq!(
        be64(&out, D + 8),
        u64::from(u32::MAX) + 3,
        "64 bits wrap later"
    );
    assert_eq!(be64(&out, D + 32), 1 << 40);
}

#[test]
fn statuses_of_what_the_agent_does_not_take() {
    let mut p = PortCounters::default();
    let st = |m: [u8; 256], p: &mut PortCounters| be16(&pma::respond(&m, p), 4);
    assert_eq!(
        st(pma_mad(1, attr::PORT_COUNTERS, 2, 0), &mut p),
        mad_status::INVALID_FIELD
    );
    assert_eq!(
        st(pma_mad(1, attr::PORT_COUNTERS_EXT, 0, 0), &mut p),
        mad_status::INVALID_FIELD
    );
    assert_eq!(
        st(pma_mad(1, 0x0010, 1, 0), &mut p),
        mad_status::ATTR_UNSUPPORTED
    );
    assert_eq!(
        st(pma_mad(2, attr::CLASS_PORT_INFO, 0, 0), &mut p),
        mad_status::ATTR_UNSUPPORTED
    );
    assert_eq!(
        st(pma_mad(6, attr::PORT_COUNTERS, 1, 0), &mut p),
        mad_status::METHOD_UNSUPPORTED
    );
    let mut v2 = pma_mad(1, attr::PORT_COUNTERS, 1, 0);
    v2[2] = 2;
    assert_eq!(st(v2, &mut p), mad_status::BAD_VERSION);
    let out = pma::respond(&pma_mad(1, 0x0010, 1, 0), &mut p);
    assert_eq!(out[3], 0x81);
}
