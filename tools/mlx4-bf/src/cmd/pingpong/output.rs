// SPDX-License-Identifier: GPL-2.0

//! What the client prints, line by line as it measures (kept for
//! pingpong.txt): the run's heading, each configuration's table, and what
//! the analyzer saw.

use std::fmt::Write as _;

use crate::{
    analyzer::{self, PerPost},
    progress::Printer,
    rdma_write::{bf_cutoff_within, carry, gathered_sizes, inline_max},
    report,
    stats::Summary,
};

use super::{
    facts::Facts,
    options::{Op, PathMode, WaitMode},
    plan::{skip_reason, Job, Plan},
};

/// One job's results, as the client saw them.
pub(super) struct Measured {
    pub(super) job: Job,
    pub(super) summary: Summary,
    pub(super) seen: PerPost,
}

/// What the client prints, kept for pingpong.txt.
#[derive(Default)]
pub(super) struct Output {
    pub(super) text: String,
    pub(super) printer: Printer,
    /// The largest SEND payload that fits BlueFlame, for the plots.
    pub(super) cutoff: usize,
}

impl Output {
    pub(super) fn line(&mut self, s: &str) {
        self.printer.line(s);
        let _ = writeln!(self.text, "{s}");
    }

    pub(super) fn start(&mut self, ep: &Facts, plan: &Plan) {
        let procs = if plan.procs {
            "two processes"
        } else {
            "two threads"
        };
        match &ep.regions {
            None => self.line(&format!(
                "# mlx4-bf pingpong: ib_send_lat-style SEND ping-pong, inline payloads, {procs} ({} writer); \
                 QPs {:#x} <-> {:#x}, {} receive buffers of {} bytes, {} CQEs",
                ep.writer, ep.qpn, ep.peer_qpn, ep.rq_entries, ep.recv_buf_size, ep.cq_entries
            )),
            Some(r) => self.line(&format!(
                "# mlx4-bf pingpong: op rdma-write-imm: RDMA_WRITE_IMM ping-pong into the peer's \
                 registered region (inline payloads up to {} bytes, gathered above from a registered \
                 send region), the immediate in a receive CQE, {procs} ({} writer); QPs {:#x} <-> \
                 {:#x}, regions of {} bytes at rkeys {:#x} <-> {:#x}, {} receive WQEs, {} CQEs",
                inline_max(true, ep.max_wqe),
                ep.writer,
                ep.qpn,
                ep.peer_qpn,
                r.recv_len,
                r.recv_rkey,
                r.peer_rkey,
                ep.rq_entries,
                ep.cq_entries
            )),
        }
        self.cutoff = bf_cutoff_within(ep.max_bf_wqe, ep.regions.is_some());
        let skip = |s: usize, path| skip_reason(s, plan.op, path, ep);
        let mut paths: Vec<PathMode> = Vec::new();
        for &(path, _) in &plan.configs {
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
        for path in paths {
            let skipped: Vec<String> = plan
                .sizes
                .iter()
                .filter(|&&s| skip(s, path).is_some())
                .map(|s| s.to_string())
                .collect();
            if let Some(why) = plan.sizes.iter().find_map(|&s| skip(s, path)) {
                self.line(&format!(
                    "# path {}: sizes skipped: {} ({why}, ...)",
                    path.name(),
                    skipped.join(" ")
                ));
            }
            let Some(r) = &ep.regions else {
                continue;
            };
            let run: Vec<usize> = plan
                .sizes
                .iter()
                .copied()
                .filter(|&s| skip(s, path).is_none())
                .collect();
            if let Some(list) = gathered_sizes(&run, |s| carry(s, true, ep.max_wqe)) {
                self.line(&format!(
                    "# path {}: sizes gathered from the registered send region (lkey {:#x}): {list}",
                    path.name(),
                    r.send_lkey
                ));
            }
        }
    }

    pub(super) fn config_header(&mut self, job: &Job, plan: &Plan, ep: &Facts) {
        let op = match job.op {
            Op::Send => String::new(),
            op => format!("op {}, ", op.name()),
        };
        self.line(&format!(
            "---- pingpong: {op}path {}, wait {} ({} iterations per size, {}, {} writer)",
            job.path.name(),
            job.wait.name(),
            plan.iters,
            if plan.procs {
                "two processes"
            } else {
                "two threads"
            },
            ep.writer
        ));
        self.line(report::PERFTEST_HEADER);
    }

    /// Per configuration: what the analyzer saw per post (both
    /// directions), beside the guest's t_typical.
    pub(super) fn analyzer_tables(&mut self, results: &[Measured], op: Op) {
        let op = match op {
            Op::Send => String::new(),
            op => format!("op {}, ", op.name()),
        };
        let mut last: Option<(PathMode, WaitMode)> = None;
        for m in results {
            let key = (m.job.path, m.job.wait);
            if last != Some(key) {
                self.line(&format!(
                    "---- analyzer: {op}path {}, wait {}: per post (both directions), beside the guest's \
                     t_typical (wall clock under emulation); modelled_* are the device model's PCIe \
                     clock, not measured",
                    m.job.path.name(),
                    m.job.wait.name()
                ));
                self.line(&analyzer::header("t_typical[usec]"));
                last = Some(key);
            }
            self.line(&analyzer::row(
                m.job.size as usize,
                m.job.path.name(),
                m.summary.typical,
                2,
                &m.seen,
            ));
        }
    }
}
