// SPDX-License-Identifier: GPL-2.0

//! What a run measures: the jobs (one size of one path and wait mode each,
//! as the client sends them to the server), what the endpoints set up for
//! them, and the sizes a path cannot run.

use anyhow::{bail, Result};
use mlx4_bf_core::wqe_build;

use crate::rdma_write::{carry, Carry};

use super::{
    facts::Facts,
    options::{Op, PathMode, WaitMode},
};

/// One size of one configuration: what both endpoints run between two
/// barriers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Job {
    pub(super) size: u32,
    pub(super) path: PathMode,
    pub(super) wait: WaitMode,
    pub(super) iters: u32,
    pub(super) op: Op,
}

impl Job {
    pub(super) const LEN: usize = 20;
    /// Tells the server the run is over.
    pub(super) const DONE: [u8; Job::LEN] = [0; Job::LEN];

    pub(super) fn encode(&self) -> [u8; Job::LEN] {
        let mut b = [0u8; Job::LEN];
        b[0..4].copy_from_slice(&self.size.to_le_bytes());
        b[4..8].copy_from_slice(&self.path.flags().to_le_bytes());
        b[8..12].copy_from_slice(&u32::from(self.wait == WaitMode::Event).to_le_bytes());
        b[12..16].copy_from_slice(&self.iters.to_le_bytes());
        b[16..20].copy_from_slice(&self.op.code().to_le_bytes());
        b
    }

    pub(super) fn decode(b: &[u8; Job::LEN]) -> Option<Self> {
        let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        (u(0) != 0).then(|| Job {
            size: u(0),
            path: PathMode::from_flags(u(4)),
            wait: if u(8) != 0 {
                WaitMode::Event
            } else {
                WaitMode::Busy
            },
            iters: u(12),
            op: Op::from_code(u(16)),
        })
    }
}

/// What both endpoints set up before the first job.
#[derive(Clone, Copy, Debug)]
pub(super) struct Setup {
    pub(super) op: Op,
    /// The largest payload of the run: the registered regions' size.
    pub(super) max_size: usize,
}

/// What to run: sizes and configurations.
pub(super) struct Plan {
    pub(super) sizes: Vec<usize>,
    pub(super) configs: Vec<(PathMode, WaitMode)>,
    pub(super) iters: u32,
    pub(super) procs: bool,
    pub(super) op: Op,
}

impl Plan {
    pub(super) fn setup(&self) -> Setup {
        Setup {
            op: self.op,
            max_size: self.sizes.iter().copied().max().unwrap_or(1),
        }
    }

    /// The jobs, configuration by configuration; sizes that cannot run on
    /// a path of the endpoint `ep` are left out (and said so).
    pub(super) fn jobs(&self, ep: &Facts) -> Result<Vec<Job>> {
        let why = |size, path| skip_reason(size, self.op, path, ep);
        let mut jobs = Vec::new();
        for &(path, wait) in &self.configs {
            for &size in &self.sizes {
                if why(size, path).is_none() {
                    jobs.push(Job {
                        size: size as u32,
                        path,
                        wait,
                        iters: self.iters,
                        op: self.op,
                    });
                }
            }
        }
        if jobs.is_empty() {
            let why = self
                .sizes
                .first()
                .and_then(|&s| why(s, self.configs[0].0))
                .unwrap_or_default();
            bail!("no payload size of the sweep can run: {why}");
        }
        Ok(jobs)
    }
}

/// Why `size` cannot run as `op` on `path` of the endpoint `ep`, if it
/// cannot.
pub(super) fn skip_reason(size: usize, op: Op, path: PathMode, ep: &Facts) -> Option<String> {
    if op == Op::RdmaWriteImm {
        return skip_reason_rdma(size, path, ep);
    }
    let len = wqe_build::inline_size16(size, false) * 16;
    if len > ep.max_wqe {
        return Some(format!(
            "{size} bytes: its inline SEND would be {len} bytes, above the largest WQE ({})",
            ep.max_wqe
        ));
    }
    if size > ep.recv_buf_size as usize {
        return Some(format!(
            "{size} bytes: above the receive buffers ({} bytes)",
            ep.recv_buf_size
        ));
    }
    if path == PathMode::Bf && len > ep.max_bf_wqe {
        return Some(format!(
            "{size} bytes: its {len}-byte WQE does not fit a BlueFlame buffer ({})",
            ep.max_bf_wqe
        ));
    }
    None
}

/// [`skip_reason`] of an RDMA_WRITE_IMM: it must fit the peer's region;
/// on BlueFlame its WQE must carry the payload inline and fit a buffer.
fn skip_reason_rdma(size: usize, path: PathMode, ep: &Facts) -> Option<String> {
    if let Some(l) = ep.peer_len().filter(|&l| size as u64 > l) {
        return Some(format!(
            "{size} bytes: above the peer's registered region ({l} bytes)"
        ));
    }
    if path != PathMode::Bf {
        return None;
    }
    if carry(size, true, ep.max_wqe) == Carry::Gather {
        return Some(format!(
            "{size} bytes: too large for an inline WQE, so gathered: doorbell path only"
        ));
    }
    let len = wqe_build::inline_size16(size, true) * 16;
    (len > ep.max_bf_wqe).then(|| {
        format!(
            "{size} bytes: its {len}-byte WQE does not fit a BlueFlame buffer ({})",
            ep.max_bf_wqe
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::pingpong::facts::Regions;

    #[test]
    fn a_job_survives_the_wire_and_done_ends_the_server() {
        for path in [PathMode::Bf, PathMode::Db, PathMode::Auto] {
            for wait in [WaitMode::Busy, WaitMode::Event] {
                for op in [Op::Send, Op::RdmaWriteImm] {
                    let j = Job {
                        size: 208,
                        path,
                        wait,
                        iters: 300,
                        op,
                    };
                    assert_eq!(Job::decode(&j.encode()), Some(j));
                }
            }
        }
        assert_eq!(Job::decode(&Job::DONE), None);
    }

    /// An endpoint with 256-byte BlueFlame buffers, 1008-byte WQEs and
    /// `recv_buf_size`-byte receive buffers; `peer`: the peer's receive
    /// region of an RDMA-write run.
    fn endpoint(recv_buf_size: u32, peer: Option<u64>) -> Facts {
        Facts {
            writer: "store-block",
            max_wqe: 1008,
            max_bf_wqe: 256,
            qpn: 0,
            peer_qpn: 0,
            rq_entries: 64,
            recv_buf_size,
            cq_entries: 64,
            regions: peer.map(|peer_len| Regions {
                recv_len: 0,
                recv_rkey: 0,
                send_lkey: 0,
                peer_len,
                peer_rkey: 0,
            }),
        }
    }

    #[test]
    fn sizes_that_cannot_run_on_a_path_are_skipped() {
        let ep = endpoint(512, None);
        let skip = |size, path, ep: &Facts| skip_reason(size, Op::Send, path, ep);
        let qp = &ep;
        // A SEND with 224 inline bytes is 256 bytes: BlueFlame's last.
        assert_eq!(skip(224, PathMode::Bf, qp), None);
        assert!(skip(225, PathMode::Bf, qp)
            .unwrap()
            .contains("does not fit a BlueFlame buffer"));
        assert_eq!(skip(225, PathMode::Db, qp), None);
        assert!(skip(513, PathMode::Db, qp)
            .unwrap()
            .contains("above the receive buffers"));
        let big = endpoint(4096, None);
        assert!(skip(1000, PathMode::Auto, &big)
            .unwrap()
            .contains("above the largest WQE"));
        let plan = Plan {
            sizes: vec![4, 224, 300],
            configs: vec![
                (PathMode::Bf, WaitMode::Busy),
                (PathMode::Db, WaitMode::Event),
            ],
            iters: 10,
            procs: false,
            op: Op::Send,
        };
        let jobs = plan.jobs(&ep).unwrap();
        let got: Vec<(u32, PathMode)> = jobs.iter().map(|j| (j.size, j.path)).collect();
        assert_eq!(
            got,
            [
                (4, PathMode::Bf),
                (224, PathMode::Bf),
                (4, PathMode::Db),
                (224, PathMode::Db),
                (300, PathMode::Db)
            ]
        );
    }

    #[test]
    fn rdma_writes_fit_the_peer_s_region_and_go_gathered_on_the_doorbell_only() {
        let ep = endpoint(512, Some(4096));
        let skip = |size, path| skip_reason(size, Op::RdmaWriteImm, path, &ep);
        // 208 inline bytes after the remote address segment: 256 bytes.
        assert_eq!(skip(208, PathMode::Bf), None);
        assert!(skip(209, PathMode::Bf)
            .unwrap()
            .contains("does not fit a BlueFlame buffer (256)"));
        // The receive buffers do not limit a write, its WQE does not either.
        assert_eq!(skip(1000, PathMode::Db), None);
        assert_eq!(skip(4096, PathMode::Auto), None);
        assert!(skip(913, PathMode::Bf)
            .unwrap()
            .contains("gathered: doorbell path only"));
        assert!(skip(4097, PathMode::Db)
            .unwrap()
            .contains("above the peer's registered region (4096 bytes)"));
        let plan = Plan {
            sizes: vec![4, 208, 2000],
            configs: vec![
                (PathMode::Bf, WaitMode::Busy),
                (PathMode::Auto, WaitMode::Busy),
            ],
            iters: 10,
            procs: true,
            op: Op::RdmaWriteImm,
        };
        assert_eq!(plan.setup().max_size, 2000);
        let jobs = plan.jobs(&ep).unwrap();
        let got: Vec<(u32, PathMode, Op)> = jobs.iter().map(|j| (j.size, j.path, j.op)).collect();
        assert_eq!(
            got,
            [
                (4, PathMode::Bf, Op::RdmaWriteImm),
                (208, PathMode::Bf, Op::RdmaWriteImm),
                (4, PathMode::Auto, Op::RdmaWriteImm),
                (208, PathMode::Auto, Op::RdmaWriteImm),
                (2000, PathMode::Auto, Op::RdmaWriteImm)
            ]
        );
        let tiny = plan.jobs(&endpoint(512, Some(1))).unwrap_err().to_string();
        assert!(
            tiny.contains("no payload size of the sweep can run: 4 bytes: above"),
            "{tiny}"
        );
    }
}
