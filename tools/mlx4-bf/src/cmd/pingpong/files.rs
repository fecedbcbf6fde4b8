// SPDX-License-Identifier: GPL-2.0

//! The files of `--out-dir`: the tables, a data file per path and wait
//! mode, and the plots.

use std::{fs, path::Path};

use anyhow::{Context, Result};

use crate::{report, stats::Summary};

use super::{
    options::{Op, PathMode, WaitMode},
    output::Measured,
};

/// Writes pingpong.txt, the data files and the plots (their names start
/// with the op's prefix).
pub(super) fn write_files(
    dir: &Path,
    text: &str,
    results: &[Measured],
    sep: &str,
    cutoff: usize,
    op: Op,
) -> Result<Vec<String>> {
    let prefix = op.file_prefix();
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let put = |name: &str, text: &str| -> Result<String> {
        let p = dir.join(name);
        fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
        Ok(name.to_owned())
    };
    let mut written = vec![put(&format!("{prefix}.txt"), text)?];
    let mut configs: Vec<(PathMode, WaitMode)> = Vec::new();
    for m in results {
        if !configs.contains(&(m.job.path, m.job.wait)) {
            configs.push((m.job.path, m.job.wait));
        }
    }
    let of = |c: (PathMode, WaitMode)| {
        results
            .iter()
            .filter(move |m| (m.job.path, m.job.wait) == c)
    };
    let labels: Vec<String> = configs
        .iter()
        .map(|(p, w)| format!("{}, {} wait", p.name(), w.name()))
        .collect();
    for &c in &configs {
        let rows: Vec<(usize, Summary)> = of(c).map(|m| (m.job.size as usize, m.summary)).collect();
        written.push(put(
            &format!("{prefix}-{}-{}.dat", c.0.name(), c.1.name()),
            &report::data_file(&rows, sep),
        )?);
    }
    let series: Vec<report::Series<'_>> = configs
        .iter()
        .zip(&labels)
        .map(|(&c, label)| report::Series {
            label,
            points: of(c)
                .map(|m| (f64::from(m.job.size), m.summary.typical))
                .collect(),
        })
        .collect();
    let svg = format!("{prefix}.svg");
    report::plot_svg(
        &dir.join(&svg),
        &format!(
            "{} ping-pong, one way (perftest t_typical = median round trip / 2), guest wall clock",
            op.title()
        ),
        "latency [us]",
        &series,
        Some(cutoff as f64),
    )?;
    written.push(svg);
    let modelled: Vec<report::Series<'_>> = configs
        .iter()
        .zip(&labels)
        .map(|(&c, label)| report::Series {
            label,
            points: of(c)
                .filter_map(|m| Some((f64::from(m.job.size), m.seen.one_way_ns? / 1000.0)))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    if !modelled.is_empty() {
        let svg = format!("{prefix}-modelled.svg");
        report::plot_svg(
            &dir.join(&svg),
            &format!(
                "{} one way as the device model's PCIe clock models it (not measured)",
                op.title()
            ),
            "modelled latency [us]",
            &modelled,
            Some(cutoff as f64),
        )?;
        written.push(svg);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{analyzer::PerPost, cmd::pingpong::plan::Job};

    #[test]
    fn files_are_one_data_file_per_path_and_wait_mode_and_the_plots() {
        let m = |size, path, wait, typical, one_way| Measured {
            job: Job {
                size,
                path,
                wait,
                iters: 4,
                op: Op::Send,
            },
            summary: Summary {
                iters: 4,
                min: 1.0,
                max: 3.0,
                typical,
                ..Default::default()
            },
            seen: PerPost {
                one_way_ns: one_way,
                ..Default::default()
            },
        };
        let results = [
            m(4, PathMode::Bf, WaitMode::Busy, 2.0, Some(2600.0)),
            m(72, PathMode::Bf, WaitMode::Busy, 2.5, Some(2900.0)),
            m(4, PathMode::Db, WaitMode::Event, 9.0, None),
        ];
        let dir =
            std::env::temp_dir().join(format!("mlx4-bf-pingpong-test-{}", std::process::id()));
        let written = write_files(&dir, "tables\n", &results, ", ", 224, Op::Send).unwrap();
        assert_eq!(
            written,
            [
                "pingpong.txt",
                "pingpong-bf-busy.dat",
                "pingpong-db-event.dat",
                "pingpong.svg",
                "pingpong-modelled.svg"
            ]
        );
        let dat = fs::read_to_string(dir.join("pingpong-bf-busy.dat")).unwrap();
        assert_eq!(
            dat,
            "# PacketSize, LatTypical, LatBest, LatWorst\n4, 2.000, 1.000, 3.000\n72, 2.500, 1.000, 3.000\n"
        );
        let svg = fs::read_to_string(dir.join("pingpong.svg")).unwrap();
        assert!(svg.contains("bf, busy wait") && svg.contains("db, event wait"));
        assert!(svg.contains("SEND ping-pong"));
        // The op names the files of an RDMA-write run, beside the SEND's.
        let written =
            write_files(&dir, "tables\n", &results[..2], ", ", 208, Op::RdmaWriteImm).unwrap();
        assert_eq!(
            written,
            [
                "pingpong-rdma-write-imm.txt",
                "pingpong-rdma-write-imm-bf-busy.dat",
                "pingpong-rdma-write-imm.svg",
                "pingpong-rdma-write-imm-modelled.svg"
            ]
        );
        let svg = fs::read_to_string(dir.join("pingpong-rdma-write-imm.svg")).unwrap();
        assert!(svg.contains("RDMA_WRITE_IMM ping-pong"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
