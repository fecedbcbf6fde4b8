// SPDX-License-Identifier: GPL-2.0

//! Output formats: perftest's table, the classic study's data file, SVG
//! plots, and the ABI's writer and path values by name.

use std::{fmt::Write as _, path::Path};

use anyhow::{anyhow, Result};
use mlx4_bf_core::abi;
use plotters::prelude::*;

use crate::stats::Summary;

/// perftest `ib_send_lat`'s header line.
pub const PERFTEST_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]";

pub fn perftest_row(bytes: usize, s: &Summary) -> String {
    format!(
        " {:<7} {:<10} {:<14.2} {:<14.2} {:<16.2} {:<14.2} {:<16.2} {:<22.2} {:.2}",
        bytes, s.iters, s.min, s.max, s.typical, s.avg, s.stdev, s.p99, s.p999
    )
}

pub fn writer_name(w: u32) -> &'static str {
    match w {
        abi::WRITER_STORE_BLOCK => "store-block",
        abi::WRITER_WRITE_COMBINING => "write-combining",
        _ => "unknown",
    }
}

pub fn path_name(p: u32) -> &'static str {
    match p {
        abi::PATH_BLUEFLAME => "BlueFlame",
        abi::PATH_DOORBELL => "doorbell",
        _ => "unknown",
    }
}

/// The classic data file: `# PacketSize, LatTypical, LatBest, LatWorst`.
pub fn data_file(rows: &[(usize, Summary)], sep: &str) -> String {
    let mut out = String::from("# PacketSize, LatTypical, LatBest, LatWorst\n");
    for (size, s) in rows {
        let _ = writeln!(
            out,
            "{size}{sep}{:.3}{sep}{:.3}{sep}{:.3}",
            s.typical, s.min, s.max
        );
    }
    out
}

/// One line of a plot.
pub struct Series<'a> {
    pub label: &'a str,
    pub points: Vec<(f64, f64)>,
}

/// Plots `series` (y against payload size) to an SVG file, with a vertical
/// marker at `cutoff` bytes (the largest BlueFlame payload), if given.
pub fn plot_svg(
    path: &Path,
    title: &str,
    y_label: &str,
    series: &[Series<'_>],
    cutoff: Option<f64>,
) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("cannot plot {}: {e}", path.display());
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut x_max, mut y_max) = (1.0f64, 0.0f64);
    for &(x, y) in all {
        x_max = x_max.max(x);
        y_max = y_max.max(y);
    }
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max * 1.02, 0.0..y_max * 1.15 + f64::EPSILON)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("payload [bytes]")
        .y_desc(y_label)
        .draw()
        .map_err(|e| err(&e))?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| err(&e))?
            .label(s.label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(&e))?;
    }
    if let Some(c) = cutoff {
        chart
            .draw_series(LineSeries::new(
                [(c, 0.0), (c, y_max * 1.1)],
                BLACK.stroke_width(1),
            ))
            .map_err(|e| err(&e))?
            .label(format!("BlueFlame limit ({c} B)"))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_file_has_the_classic_header_and_columns() {
        let s = Summary {
            iters: 3,
            min: 1.0,
            max: 3.0,
            typical: 2.0,
            ..Default::default()
        };
        assert_eq!(
            data_file(&[(4, s), (14, s)], ", "),
            "# PacketSize, LatTypical, LatBest, LatWorst\n4, 2.000, 1.000, 3.000\n14, 2.000, 1.000, 3.000\n"
        );
        assert!(perftest_row(4, &s).starts_with(" 4       3 "));
    }
}
