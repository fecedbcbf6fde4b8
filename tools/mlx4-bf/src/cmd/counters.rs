// SPDX-License-Identifier: GPL-2.0

//! `counters`: the device model's analyzer counters, one `name value` line
//! each, read through sysfs `resource0` whichever driver owns the adapter
//! (mainline mlx4_core in the upstream boot): a script takes two readings
//! around what it runs and compares them. Then the gauges of what the
//! device holds now (MPTs, queues, the firmware's phase), which a teardown
//! or a process's exit must bring back.
//!
//! With `--qp QPN`: that QP's counters instead, the UAR its context named
//! and the writes to that UAR's two pages (its UAR page and its BlueFlame
//! page), so that a script can tell whose pages a run wrote.
//!
//! With `--expect N`: N goes to the EXPECT register first. While it is not
//! 0 the model counts its protocol errors as expected: a run that makes
//! them on purpose (WQEs that user space built, fuzzed) is found in the
//! trace but fails no boot.
//!
//! With `--mark V`: V goes to the MARK register first, a `mark` record in
//! the model's trace, so that the same window can be found there
//! (`tools/vm/side_by_side.py`).
//!
//! With `--fail-command OPCODE`: the model's firmware fails the next
//! command with that opcode (CMD_FAULT, mode fail; `--skip N` lets N such
//! commands through first), for a test of what the driver does when a
//! command it cannot take back fails. The lines `cmd_fault_armed` and
//! `cmd_faults_fired` tell whether it has fired.

use anyhow::{bail, Result};

use crate::analyzer::Analyzer;

#[derive(clap::Args)]
pub struct Args {
    /// The adapter's PCI function (default: the one mlx4_bf drives, else
    /// the first ConnectX-3).
    #[arg(long)]
    bdf: Option<String>,
    /// A QP number (decimal or 0x-hex): its counters and its UAR's pages.
    #[arg(long, value_parser = parse_number)]
    qp: Option<u32>,
    /// Write this to the EXPECT register first (not 0: protocol errors
    /// from now on are expected ones).
    #[arg(long)]
    expect: Option<u32>,
    /// Write this value to the diagnostic block's MARK register first.
    #[arg(long)]
    mark: Option<u32>,
    /// Arm the model to fail the next firmware command with this opcode
    /// (decimal or 0x-hex; 0 disarms).
    #[arg(long, value_parser = parse_number)]
    fail_command: Option<u32>,
    /// With --fail-command: let this many commands of the opcode through
    /// first.
    #[arg(long, default_value_t = 0, requires = "fail_command")]
    skip: u32,
}

/// The global counters, by their diagnostic block offset
/// (`Documentation/mlx4-model.rst`, "Diagnostic block").
const COUNTERS: &[(&str, usize)] = &[
    ("protocol_errors", 0x20),
    ("wqes_bf", 0x30),
    ("wqes_dma", 0x38),
    ("bf_fallbacks", 0x40),
    ("send_doorbells", 0x48),
    ("cqes", 0x50),
    ("eqes", 0x58),
    ("irqs", 0x60),
    ("commands", 0x68),
    ("sq_dma_reads", 0x70),
    ("bar2_writes", 0x78),
    ("deliveries", 0x500),
    ("recv_cqes", 0x508),
    ("rnr_errors", 0x510),
    ("peer_errors", 0x518),
    ("recv_length_errors", 0x520),
    ("payload_dma_writes", 0x528),
    ("bar2_bytes", 0x540),
    ("cq_overruns", 0x550),
    ("local_prot_faults", 0x5a0),
    ("remote_access_faults", 0x5a8),
    ("rdma_writes", 0x5b0),
    // The modelled latencies, summed, and how many each sum holds:
    // post-to-wire of the WQEs executed, one-way of the SENDs delivered
    // (by deliveries) and of the RDMA writes landed; not of a WQE a
    // doorbell's scan ran ahead to (its post had not reached the bus).
    ("post_to_wire_sum_ns", 0x560),
    ("post_to_wire_samples", 0x660),
    ("one_way_sum_ns", 0x570),
    ("rdma_write_one_way_sum_ns", 0x658),
    ("rdma_write_one_way_samples", 0x668),
    ("fw_refused", 0x5e8),
    ("icm_errors", 0x5f0),
    ("rdma_reads", 0x618),
    // Atomics executed (version 13), and those refused.
    ("atomics_cmp_swap", 0x670),
    ("atomics_fetch_add", 0x678),
    ("atomics_refused", 0x680),
    // SRQ WQEs consumed, limit events raised, SRQ commands and WQEs
    // refused (version 15).
    ("srq_wqes", 0x6b0),
    ("srq_limit_events", 0x6b8),
    ("srq_refused", 0x6c0),
];

/// Gauges of the device's state, never reset: MPTs in hardware ownership
/// and their pages, the firmware's phase.
const GAUGES: &[(&str, usize)] = &[
    ("hw_mpts", 0x590),
    ("hw_mpt_pages", 0x598),
    ("fw_phase", 0x600),
];
/// EQs and CQs in hardware ownership (low half), QPs out of RESET (high).
const LIVE: usize = 0x5d8;

/// A `mark` record in the model's trace, with the value written.
const MARK: usize = 0x0c;
/// Not 0: the model's protocol errors are expected ones.
const EXPECT: usize = 0x10;
/// `opcode | mode << 16 | skip << 20`; reads back the armed value and, in
/// the high half, the faults fired (version 12).
const CMD_FAULT: usize = 0x5c8;
const CMD_FAULT_FAIL: u32 = 1 << 16;

/// The per-QP registers (QP_SELECT) and per-UAR ones (UAR_SELECT).
const QP_SELECT: usize = 0x08;
const QP_COUNTERS: &[(&str, usize)] = &[
    ("qp_wqes_bf", 0x80),
    ("qp_wqes_dma", 0x88),
    ("qp_send_doorbells", 0xb0),
    ("qp_cqes", 0xb8),
];
/// Its BF fallbacks, by reason: foreign page, counter or owner, order,
/// forced.
const QP_FALLBACKS: [usize; 4] = [0x90, 0x98, 0xa0, 0xa8];
const QP_UAR: usize = 0x650;
const UAR_SELECT: usize = 0x630;
const UAR_COUNTERS: &[(&str, usize)] = &[
    ("uar_page_writes", 0x638),
    ("bf_page_writes", 0x640),
    ("bf_page_bytes", 0x648),
];

/// Version 15 has every register above.
const MIN_VERSION: u32 = 15;

fn parse_number(s: &str) -> Result<u32, String> {
    match s.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    }
    .map_err(|e| format!("{s}: {e}"))
}

pub fn run(args: &Args) -> Result<()> {
    let a = match &args.bdf {
        Some(bdf) => Analyzer::open_bdf(bdf),
        None => Analyzer::open(),
    };
    let Some(a) = a else {
        bail!("no device model's diagnostic block (real hardware, or no ConnectX-3)");
    };
    if a.version < MIN_VERSION {
        bail!(
            "diagnostic block version {} (counters need {MIN_VERSION})",
            a.version
        );
    }
    if let Some(v) = args.mark {
        a.write(MARK, v);
    }
    if let Some(v) = args.expect {
        a.write(EXPECT, v);
    }
    if let Some(opcode) = args.fail_command {
        if opcode > 0xfff || args.skip > 0xfff {
            bail!(
                "--fail-command {opcode:#x} --skip {}: opcode and skip are 12 bits",
                args.skip
            );
        }
        if a.version < 12 && args.skip != 0 {
            bail!("diagnostic block version {}: --skip needs 12", a.version);
        }
        let mode = if opcode == 0 { 0 } else { CMD_FAULT_FAIL };
        a.write(CMD_FAULT, opcode | mode | args.skip << 20);
    }
    if let Some(qpn) = args.qp {
        return show_qp(&a, qpn);
    }
    for &(name, off) in COUNTERS.iter().chain(GAUGES) {
        println!("{name} {}", a.read(off));
    }
    let live = a.read(LIVE);
    println!("live_eqs_cqs {}", live & 0xffff_ffff);
    println!("live_qps {}", live >> 32);
    let fault = a.read(CMD_FAULT);
    println!("cmd_fault_armed {:#x}", fault & 0xffff_ffff);
    println!("cmd_faults_fired {}", fault >> 32);
    Ok(())
}

/// QP `qpn`'s counters, its UAR and the writes to that UAR's pages.
fn show_qp(a: &Analyzer, qpn: u32) -> Result<()> {
    a.write(QP_SELECT, qpn);
    let uar = a.read(QP_UAR);
    if uar >> 32 == 0 {
        bail!("qp {qpn:#x} never left RESET (the model knows no UAR of it)");
    }
    let uar = uar as u32;
    println!("qp_uar {uar}");
    for &(name, off) in QP_COUNTERS {
        println!("{name} {}", a.read(off));
    }
    let fallbacks: u64 = QP_FALLBACKS.iter().map(|&off| a.read(off)).sum();
    println!("qp_bf_fallbacks {fallbacks}");
    a.write(UAR_SELECT, uar);
    for &(name, off) in UAR_COUNTERS {
        println!("{name} {}", a.read(off));
    }
    Ok(())
}
