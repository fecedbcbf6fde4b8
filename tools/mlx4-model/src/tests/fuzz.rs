//! Property test: arbitrary MMIO against a small fake memory never panics,
//! never reaches outside it, and keeps the counters consistent.

use super::harness::*;
use super::strict_ud::{av, init2rtr, modify, rst2init, rtr2rts, ud_wqe, QKEY};
use crate::bytes::{put_be32, put_be64};
use crate::command::op;
use crate::datapath::ud::port_gid;
use crate::layout::*;
use crate::trace::{TraceLevel, ERROR_KINDS};
use crate::Config;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Write {
        bar: u32,
        off: u64,
        data: Vec<u8>,
    },
    Read {
        bar: u32,
        off: u64,
        len: usize,
    },
    Cmd {
        opcode: u16,
        op_mod: u8,
        in_param: u64,
        in_mod: u32,
        out_param: u64,
        event: bool,
    },
    Poke {
        addr: u64,
        data: Vec<u8>,
    },
    Post {
        index: Option<u32>,
        payload: Vec<u8>,
        bf: Option<(u32, u32, usize)>,
    },
    Doorbell {
        page: u32,
        qpn: u32,
    },
    /// The RQ doorbell record's head (RNR, a head too far ahead).
    RqHead {
        head: u16,
    },
    /// A receive WQE of `setup()`'s QP.
    Recv {
        index: u32,
        len: u32,
        lkey: u32,
    },
    /// WRITE_MTT of raw entries from MTT index `first`.
    Mtt {
        first: u64,
        entries: Vec<u64>,
    },
    /// SW2HW_MPT of a region (MPT `index`, key tag, access bits, pd, start,
    /// length, first MTT entry).
    Mpt {
        index: u32,
        tag: u32,
        access: u32,
        pd: u32,
        start: u64,
        length: u64,
        mtt: u64,
    },
    /// `setup()`'s QP again, from RST, with a fresh SQ and a full RQ
    /// (errors put it in ERR for good otherwise).
    Revive,
    /// A well-formed region: WRITE_MTT of `pages` (fake-memory page numbers)
    /// from entry `mtt`, then SW2HW_MPT of MPT `index` over them, all
    /// rights, protection domain 0, from REGION_VA + `offset`.
    Region {
        index: u32,
        tag: u32,
        mtt: u64,
        pages: Vec<u64>,
        offset: u64,
    },
    /// A SEND with one data segment under `lkey`, or an RDMA write, read
    /// or atomic (opcode, raddr, rkey; an atomic's operands 1 and 0) with
    /// it, posted by doorbell.
    Keyed {
        index: Option<u32>,
        lkey: u32,
        addr: u64,
        len: u32,
        rdma: Option<(u8, u64, u32)>,
    },
    /// CMD_FAULT: fail the next command with `opcode`, or disarm (a stall
    /// would leave the HCR busy for every later op).
    Fault {
        opcode: u16,
        fail: bool,
    },
    /// DATA_FAULT: arm (`offset + 1`, refused past the longest message)
    /// or disarm (0).
    DataFault(u32),
    /// Bus Master Enable on or off.
    Master(bool),
    /// QP 0x41 made again as a UD QP (`strict_ud`), receiving on CQ 2.
    UdQp,
    /// A UD SEND of QP 0x41 gathering `len` bytes at GATHER_BUF, by
    /// doorbell or BlueFlame, to `dqpn` under `qkey`, `dlid`, with a GRH
    /// or not, the vector's PD `pd`.
    UdSend {
        dqpn: u32,
        qkey: u32,
        dlid: u16,
        grh: bool,
        pd: u32,
        len: u32,
        bf: bool,
    },
}

/// Where the fuzz test's regions start.
const REGION_VA: u64 = 0x7000_0000;
/// The first MPT above the firmware's 256 reserved ones.
const MPT0: u32 = 0x100;

const NUM_UARS: u32 = 256;

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![Just(4usize), Just(8), Just(1), Just(2), 0usize..20]
}

fn bar0_off() -> impl Strategy<Value = u64> {
    prop_oneof![
        (0u64..7).prop_map(|i| HCR_BASE + 4 * i),
        (0u64..0x20).prop_map(|i| HCR_BASE + i),
        Just(OWNER_OFF),
        (0u64..0x40).prop_map(|i| DIAG_BASE + 4 * i),
        (0u64..0x400).prop_map(|i| RESET_BASE + i),
        0u64..BAR0_SIZE + 16,
    ]
}

fn bar2_off() -> impl Strategy<Value = u64> {
    let pages = u64::from(NUM_UARS);
    prop_oneof![
        (
            0u64..4,
            prop_oneof![
                Just(0x14u64),
                Just(0x20),
                Just(0x24),
                (0u64..4).prop_map(|k| 0x800 + 8 * k)
            ]
        )
            .prop_map(|(p, o)| p * PAGE_SIZE + o),
        (0u64..4, 0u64..1024).prop_map(move |(p, o)| (pages + p) * PAGE_SIZE + o),
        (0u64..4, 0u64..64).prop_map(move |(p, c)| (pages + p) * PAGE_SIZE + c * 8),
        0u64..2 * pages * PAGE_SIZE + 64,
    ]
}

fn addr() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(IN_MB),
        Just(OUT_MB),
        (0u64..64).prop_map(|p| MEM_BASE + p * PAGE_SIZE),
        any::<u64>(),
        (0u64..0x100).prop_map(|i| MEM_BASE + MEM_LEN as u64 - 0x80 + i),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let opcodes = prop_oneof![
        Just(op::SW2HW_EQ),
        Just(op::HW2SW_EQ),
        Just(op::MAP_EQ),
        Just(op::SW2HW_CQ),
        Just(op::HW2SW_CQ),
        Just(op::MODIFY_CQ),
        Just(op::RST2INIT_QP),
        Just(op::INIT2RTR_QP),
        Just(op::RTR2RTS_QP),
        Just(op::TO_ERR_QP),
        Just(op::TO_RST_QP),
        Just(op::QUERY_QP),
        Just(op::NOP),
        Just(op::QUERY_DEV_CAP),
        Just(op::WRITE_MTT),
        Just(op::SW2HW_MPT),
        Just(op::HW2SW_MPT),
        Just(op::SYNC_TPT),
        any::<u16>().prop_map(|o| o & 0xfff),
    ];
    let key = || {
        prop_oneof![
            2 => Just(RESERVED_LKEY),
            2 => (1u32..4, 0u32..2).prop_map(|(i, t)| ((MPT0 + i) << 8) | t),
            1 => any::<u32>(),
        ]
    };
    let va = || {
        prop_oneof![
            2 => (0u64..0x4000).prop_map(|o| REGION_VA + o),
            2 => (0u64..0x1000).prop_map(|o| GATHER_BUF + o),
            1 => any::<u64>(),
        ]
    };
    let page = prop_oneof![
        (0u64..64).prop_map(|p| MEM_BASE + p * PAGE_SIZE + 1),
        any::<u64>(),
    ];
    prop_oneof![
        3 => (prop_oneof![Just(0u32), Just(2), 0u32..6], size()).prop_flat_map(|(bar, n)| {
            let off = if bar == 2 { bar2_off().boxed() } else { bar0_off().boxed() };
            (Just(bar), off, proptest::collection::vec(any::<u8>(), n))
        }).prop_map(|(bar, off, data)| Op::Write { bar, off, data }),
        1 => (prop_oneof![Just(0u32), Just(2)], size()).prop_flat_map(|(bar, n)| {
            let off = if bar == 2 { bar2_off().boxed() } else { bar0_off().boxed() };
            (Just(bar), off, Just(n))
        }).prop_map(|(bar, off, len)| Op::Read { bar, off, len }),
        3 => (opcodes.clone(), 0u8..3, addr(), prop_oneof![0u32..10, Just(QPN), Just(QPN2), any::<u32>()], addr(), any::<bool>())
            .prop_map(|(opcode, op_mod, in_param, in_mod, out_param, event)| Op::Cmd { opcode, op_mod, in_param, in_mod, out_param, event }),
        2 => (addr(), proptest::collection::vec(any::<u8>(), 1..64)).prop_map(|(addr, data)| Op::Poke { addr, data }),
        3 => (prop_oneof![Just(None), (0u32..40).prop_map(Some)], proptest::collection::vec(any::<u8>(), 0..44),
              proptest::option::of((prop_oneof![Just(UAR), 0u32..4], 0u32..2, prop_oneof![Just(8usize), Just(8), Just(4), Just(64), Just(16), Just(12)])))
            .prop_map(|(index, payload, bf)| Op::Post { index, payload, bf }),
        2 => (0u32..4, prop_oneof![Just(QPN), Just(QPN2), 0u32..0x80]).prop_map(|(page, qpn)| Op::Doorbell { page, qpn }),
        1 => prop_oneof![Just(0u16), 0u16..4, 30u16..40, any::<u16>()].prop_map(|head| Op::RqHead { head }),
        1 => (0u32..64, prop_oneof![Just(RECV_LEN), 0u32..64], prop_oneof![Just(RESERVED_LKEY), Just(0x100), any::<u32>()])
            .prop_map(|(index, len, lkey)| Op::Recv { index, len, lkey }),
        1 => (prop_oneof![1u64..8, 65530u64..65540, any::<u64>()], proptest::collection::vec(page, 1..5))
            .prop_map(|(first, entries)| Op::Mtt { first, entries }),
        1 => ((0u32..4).prop_map(|i| MPT0 + i), 0u32..2, prop_oneof![Just(0x3c00u32), any::<u32>().prop_map(|a| a & 0x7c00)], 0u32..2,
              prop_oneof![(0u64..0x3000).prop_map(|o| REGION_VA + o), any::<u64>()],
              prop_oneof![1u64..0x4000, any::<u64>()], 0u64..8)
            .prop_map(|(index, tag, access, pd, start, length, mtt)| Op::Mpt { index, tag, access, pd, start, length, mtt }),
        1 => Just(Op::Revive),
        1 => ((1u32..4).prop_map(|i| MPT0 + i), 0u32..2, 1u64..8, proptest::collection::vec(0u64..64, 1..5), 0u64..0x1000)
            .prop_map(|(index, tag, mtt, pages, offset)| Op::Region { index, tag, mtt, pages, offset }),
        2 => (prop_oneof![Just(None), (0u32..40).prop_map(Some)], key(), va(), prop_oneof![0u32..64, 0u32..0x2000],
              proptest::option::of((prop_oneof![Just(8u8), Just(9)], va(), key())))
            .prop_map(|(index, lkey, addr, len, rdma)| Op::Keyed { index, lkey, addr, len, rdma }),
        // An RDMA write, read or atomic that may well land: a gather
        // (scatter) that passes, an rkey of a region the Region op makes,
        // often an atomic's 8 aligned bytes.
        2 => (prop_oneof![0u32..64, Just(8)], (1u32..4, 0u32..2),
              prop_oneof![0u64..0x2000, (0u64..0x400).prop_map(|o| o * 8)],
              prop_oneof![Just(8u8), Just(9), Just(0x10), Just(0x11), Just(0x12)])
            .prop_map(|(len, (i, t), off, opcode)| Op::Keyed {
                index: None,
                lkey: RESERVED_LKEY,
                addr: GATHER_BUF,
                len,
                rdma: Some((opcode, REGION_VA + off, ((MPT0 + i) << 8) | t)),
            }),
        1 => (opcodes, any::<bool>()).prop_map(|(opcode, fail)| Op::Fault { opcode, fail }),
        1 => prop_oneof![3 => Just(true), 1 => Just(false)].prop_map(Op::Master),
        1 => prop_oneof![Just(0u32), 1u32..70, any::<u32>()].prop_map(Op::DataFault),
        1 => Just(Op::UdQp),
        2 => (prop_oneof![3 => Just(QPN2), 1 => Just(QPN), 1 => 0u32..0x50],
              prop_oneof![Just(QKEY), Just(0x8000_0000u32), any::<u32>()],
              prop_oneof![3 => Just(1u16), 1 => any::<u16>()], any::<bool>(),
              prop_oneof![3 => Just(0u32), 1 => 1u32..3],
              prop_oneof![0u32..300, 4090u32..4100], any::<bool>())
            .prop_map(|(dqpn, qkey, dlid, grh, pd, len, bf)| Op::UdSend { dqpn, qkey, dlid, grh, pd, len, bf }),
    ]
}

fn apply(h: &mut Harness, op: &Op, touched_reset: &mut bool) {
    match op {
        Op::Write { bar, off, data } => {
            if *bar == 0 && *off <= DIAG_BASE + 0x18 && off + data.len() as u64 > DIAG_BASE + 0x18 {
                *touched_reset = true;
            }
            h.dev.mmio_write(*bar, *off, data);
        }
        Op::Read { bar, off, len } => {
            let mut b = vec![0u8; *len];
            h.dev.mmio_read(*bar, *off, &mut b);
        }
        Op::Cmd {
            opcode,
            op_mod,
            in_param,
            in_mod,
            out_param,
            event,
        } => {
            let ev = event.then_some(0x42);
            h.cmd_full(*opcode, *op_mod, *in_param, *in_mod, *out_param, ev);
        }
        Op::Poke { addr, data } => {
            let end = addr.saturating_add(data.len() as u64);
            if *addr >= MEM_BASE && end <= MEM_BASE + MEM_LEN as u64 {
                h.poke(*addr, data);
            }
        }
        Op::Post { index, payload, bf } => {
            // None: the next index, as a correct driver would post.
            let next = h.dev.qps().get(QPN).map_or(0, |qp| qp.sq_ci);
            let index = index.unwrap_or(next);
            let wqe = Harness::inline_send(QPN, index, payload, index % 3 != 0);
            h.write_wqe(QP_BUF, index, &wqe);
            if let Some((page, half, chunk)) = bf {
                h.bf_copy(*page, *half, &wqe, *chunk);
            }
        }
        Op::Doorbell { page, qpn } => h.doorbell(*page, *qpn),
        Op::RqHead { head } => h.set_rq_head(RQ_DB, u32::from(*head)),
        Op::Recv { index, len, lkey } => {
            let addr = RECV_BUF + u64::from(index % 32) * u64::from(RECV_LEN);
            h.post_recv(QP_BUF, *index, *len, *lkey, addr);
        }
        Op::Mtt { first, entries } => {
            let mut mb = vec![0u8; 16 + 8 * entries.len()];
            put_be64(&mut mb, 0, *first);
            for (i, e) in entries.iter().enumerate() {
                put_be64(&mut mb, 16 + 8 * i, *e);
            }
            h.poke(IN_MB, &mb);
            h.cmd(op::WRITE_MTT, 0, entries.len() as u32);
        }
        Op::Mpt {
            index,
            tag,
            access,
            pd,
            start,
            length,
            mtt,
        } => {
            let e = Harness::mpt_entry((index << 8) | tag, *access, *pd, *start, *length, *mtt);
            h.poke(IN_MB, &e);
            h.cmd(op::SW2HW_MPT, 0, *index);
        }
        Op::Revive => {
            h.cmd(op::TO_RST_QP, 2, QPN);
            h.init_sq(QP_BUF, SQ_LOG);
            let mb = Harness::qp_mailbox(QPN, UAR, CQN, mtt_of(QP_BUF), SQ_LOG);
            h.poke(IN_MB, &Harness::with_rq(mb, RCQN, RQ_DB));
            for o in [op::RST2INIT_QP, op::INIT2RTR_QP, op::RTR2RTS_QP] {
                h.cmd(o, 0, QPN);
            }
            h.fill_rq(QP_BUF, RQ_DB, RECV_BUF);
        }
        Op::Region {
            index,
            tag,
            mtt,
            pages,
            offset,
        } => {
            let addrs: Vec<u64> = pages.iter().map(|p| MEM_BASE + p * PAGE_SIZE).collect();
            h.write_mtt(*mtt, &addrs);
            let start = REGION_VA + offset;
            let length = addrs.len() as u64 * PAGE_SIZE - offset;
            let e = Harness::mpt_entry((index << 8) | tag, 0x7c00, 0, start, length, *mtt);
            h.sw2hw_mpt(&e);
        }
        Op::Keyed {
            index,
            lkey,
            addr,
            len,
            rdma,
        } => {
            let next = h.dev.qps().get(QPN).map_or(0, |qp| qp.sq_ci);
            let index = index.unwrap_or(next);
            let mut w = vec![0u8; 16];
            let opcode = match rdma {
                Some((opcode, raddr, rkey)) => {
                    let mut r = [0u8; 16];
                    put_be64(&mut r, 0, *raddr);
                    put_be32(&mut r, 8, *rkey);
                    w.extend_from_slice(&r);
                    if matches!(*opcode, 0x11 | 0x12) {
                        let mut a = [0u8; 16];
                        put_be64(&mut a, 0, 1);
                        w.extend_from_slice(&a);
                    }
                    *opcode
                }
                None => 0x0a,
            };
            let mut s = [0u8; 16];
            put_be32(&mut s, 0, *len);
            put_be32(&mut s, 4, *lkey);
            put_be64(&mut s, 8, *addr);
            w.extend_from_slice(&s);
            let owner = if index & (1 << SQ_LOG) != 0 {
                1 << 31
            } else {
                0
            };
            put_be32(
                &mut w,
                0,
                owner | ((index & 0xffff) << 8) | u32::from(opcode),
            );
            let ds = (w.len() / 16) as u32;
            put_be32(&mut w, 4, (QPN << 8) | ds);
            put_be32(&mut w, 8, 0xc);
            h.write_wqe(QP_BUF, index, &w);
            h.doorbell(UAR, QPN);
        }
        Op::Fault { opcode, fail } => {
            let mode = if *fail { 1 << 16 } else { 0 };
            h.diag_write(crate::diag::CMD_FAULT, u32::from(*opcode) | mode);
        }
        Op::Master(on) => h.set_master(*on),
        Op::DataFault(v) => h.diag_write(crate::diag::DATA_FAULT, *v),
        Op::UdQp => {
            h.cmd(op::TO_RST_QP, 2, QPN2);
            h.init_sq(QP2_BUF, SQ_LOG);
            let mb = rst2init(QPN2, QP2_BUF, RCQN, RQ2_DB, 0, QKEY);
            for (o, mb) in [
                (op::RST2INIT_QP, mb),
                (op::INIT2RTR_QP, init2rtr(QPN2)),
                (op::RTR2RTS_QP, rtr2rts(QPN2)),
            ] {
                modify(h, o, QPN2, &mb);
            }
            h.fill_rq(QP2_BUF, RQ2_DB, RECV2_BUF);
        }
        Op::UdSend {
            dqpn,
            qkey,
            dlid,
            grh,
            pd,
            len,
            bf,
        } => {
            let index = h.dev.qps().get(QPN2).map_or(0, |qp| qp.sq_ci);
            let mut a = av(*dqpn);
            (a.qkey, a.dlid, a.port_pd) = (*qkey, *dlid, (1 << 24) | pd);
            if *grh {
                (a.g_slid, a.dgid) = (0x80, port_gid());
            }
            let segs = [(*len, RESERVED_LKEY, GATHER_BUF)];
            let w = ud_wqe(QPN2, index, 0x0a, &a, b"", &segs);
            h.write_wqe(QP2_BUF, index, &w);
            if *bf {
                h.bf_copy(UAR, 0, &w, 64);
            } else {
                h.doorbell(UAR, QPN2);
            }
        }
    }
}

/// The fuzz test's starting points, at a trace level: `setup()`'s queues,
/// or the HCA up with none.
fn start(with_queues: bool, level: TraceLevel) -> Harness {
    if with_queues {
        // Start from a working device so deep paths get exercised.
        let mut h = Harness::setup_at(
            Config {
                num_uars: NUM_UARS,
                fallback_every: 3,
            },
            level,
        );
        h.cmd_full(op::MAP_EQ, 0, 1 << 0x04, 0, 0, None);
        h.arm_cq(UAR, CQN, 2, 0);
        h.arm_cq(UAR, RCQN, 1, 0);
        h.eq_doorbell(1, 0, true);
        h
    } else {
        Harness::up_at(
            Config {
                num_uars: NUM_UARS,
                fallback_every: 0,
            },
            level,
        )
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn mmio_fuzz(ops in proptest::collection::vec(op_strategy(), 1..60), with_queues in any::<bool>()) {
        let mut h = start(with_queues, TraceLevel::All);
        let mut touched_reset = false;
        for op in &ops {
            apply(&mut h, op, &mut touched_reset);
            h.check_invariants(touched_reset);
        }
        if std::env::var_os("FUZZ_STATS").is_some() { let g = &h.dev.counters().global; eprintln!("STATS bf={} dma={} cqe={} eqe={} irq={} fb={} cmds={} pe={} deliveries={} rnr={} peer={} overruns={} mtt={} mpts={} rdma={} atomics={} ud={}/{}/{}/{}/{} lfaults={} rfaults={}", g.wqes_bf, g.wqes_dma, g.cqes, g.eqes, g.msix_irqs, g.bf_fallbacks, g.commands, g.protocol_errors, g.deliveries, g.rnr_errors, g.peer_errors, g.cq_overruns, g.mtt_entries_written, h.dev.mrs().hw_mpts(), g.rdma_writes, g.atomics_cmp_swap + g.atomics_fetch_add, g.ud_sends, g.ud_delivered, g.ud_dropped, g.ud_refused, g.ud_recv_errors, h.dev.counters().faults.local_prot_faults, h.dev.counters().faults.remote_access_faults); }
        h.dev.finish();
        h.check_invariants(touched_reset);
        // Every line is one JSON object with consecutive seq.
        for (i, l) in h.dev.tracer().lines().iter().enumerate() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            prop_assert_eq!(v["seq"].as_u64(), Some(i as u64 + 1));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The `errors` trace is the `all` trace with the other kinds left out,
    /// seq and all, and the level changes nothing else.
    #[test]
    fn errors_level_is_the_full_trace_filtered(ops in proptest::collection::vec(op_strategy(), 1..60), with_queues in any::<bool>()) {
        let mut all = start(with_queues, TraceLevel::All);
        let mut errors = start(with_queues, TraceLevel::Errors);
        let (mut t1, mut t2) = (false, false);
        for op in &ops {
            apply(&mut all, op, &mut t1);
            apply(&mut errors, op, &mut t2);
        }
        all.dev.finish();
        errors.dev.finish();
        let kept: Vec<&String> = all
            .dev
            .tracer()
            .lines()
            .iter()
            .filter(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                ERROR_KINDS.contains(&v["kind"].as_str().unwrap())
            })
            .collect();
        let got: Vec<&String> = errors.dev.tracer().lines().iter().collect();
        prop_assert_eq!(got, kept);
        let (mut s1, mut s2) = (all.dev.summary(), errors.dev.summary());
        prop_assert_eq!(&s1["trace_level"], "all");
        prop_assert_eq!(&s2["trace_level"], "errors");
        prop_assert_eq!(&s1["trace_lines"], &s1["trace_records"]);
        prop_assert_eq!(s2["trace_lines"].as_u64(), Some(errors.dev.tracer().lines().len() as u64));
        for s in [&mut s1, &mut s2] {
            let m = s.as_object_mut().unwrap();
            m.remove("trace_level");
            m.remove("trace_lines");
        }
        prop_assert_eq!(s1, s2);
        prop_assert_eq!(all.mem(MEM_BASE, MEM_LEN), errors.mem(MEM_BASE, MEM_LEN));
    }
}
