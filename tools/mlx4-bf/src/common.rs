// SPDX-License-Identifier: GPL-2.0

//! What the subcommands share: opening the device, the WQEs they post,
//! back-pressure retries, names, the size sweep and progress.

use std::{
    io::{self, IsTerminal},
    path::{Path, PathBuf},
    thread,
};

use anyhow::{anyhow, bail, Error, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mlx4_bf_core::{abi, wqe};

use crate::device::{Device, Mapping};

/// The size sweep of `lat`, `bench` and `pingpong`.
#[derive(clap::Args, Clone, Copy)]
pub struct Sweep {
    /// Smallest payload in bytes.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub min: u32,
    /// Largest payload in bytes.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub max: u32,
    /// Step between payload sizes.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub step: u32,
    /// Timed iterations per size (after a warm-up).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub iters: u32,
}

impl Sweep {
    pub fn sizes(&self) -> Result<Vec<usize>> {
        if self.min > self.max {
            bail!("--min {} is above --max {}", self.min, self.max);
        }
        Ok((self.min..=self.max)
            .step_by(self.step as usize)
            .map(|s| s as usize)
            .collect())
    }
}

pub const WARMUP: u32 = 50;
const RKEY: u32 = 0x1234;
const RADDR: u64 = 0x10_0000;

/// A WQE of an RDMA write of `payload` bytes: inline if it fits a WQE (and
/// `gather` is not asked for), else one DMA-gathered data segment.
pub fn build_wqe(buf: &mut [u8; wqe::MAX_WQE_LEN], payload: usize, gather: bool) -> usize {
    let data: Vec<u8> = (0..payload).map(|i| i as u8).collect();
    let inline = (!gather && wqe::inline_size16(payload, true) * 16 <= wqe::MAX_WQE_LEN)
        .then(|| wqe::build_inline(buf, wqe::OPCODE_RDMA_WRITE, Some((RADDR, RKEY)), &data))
        .flatten();
    inline.unwrap_or_else(|| {
        let seg = (data.as_ptr() as u64, 0, payload as u32);
        wqe::build_gather(buf, wqe::OPCODE_RDMA_WRITE, Some((RADDR, RKEY)), seg).unwrap_or(0)
    })
}

pub fn open(path: &Path) -> Result<Device> {
    Device::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => anyhow!(
            "{} does not exist: is mlx4_bf loaded and an adapter bound?",
            path.display()
        ),
        io::ErrorKind::PermissionDenied => anyhow!(
            "cannot open {}: permission denied (the device is root's, mode 0600)",
            path.display()
        ),
        _ if e.raw_os_error() == Some(libc::EBUSY) => {
            anyhow!("cannot open {}: all UARs are in use", path.display())
        }
        _ => anyhow!("cannot open {}: {e}", path.display()),
    })
}

/// How often a timed post is retried while the send queue is full.
const FULL_RETRIES: u32 = 1000;

/// Is this `-EAGAIN`, the adapter's back pressure?
pub fn is_back_pressure(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

/// Retries `post` while it answers `-EAGAIN`, back pressure (the adapter,
/// the device model under emulation above all, has not caught up with the
/// send queue within the kernel's wait); the wait counts in the post's time.
fn retry_back_pressure<T>(mut post: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut retries = 0;
    loop {
        match post() {
            Err(e) if is_back_pressure(&e) && retries < FULL_RETRIES => {
                retries += 1;
                thread::yield_now();
            }
            r => return r,
        }
    }
}

/// A post for the timing loops, retried under back pressure.
pub fn post_timed(dev: &Device, qp: &abi::QpInfo, wqe: &[u8], flags: u32) -> io::Result<()> {
    retry_back_pressure(|| dev.post_send(qp, wqe, flags)).map(|_| ())
}

/// [`post_timed`] of a WQE staged in the QP's WQE page.
pub fn post_staged_timed(
    dev: &Device,
    qp: &abi::QpInfo,
    page: &Mapping,
    wqe: &[u8],
    flags: u32,
) -> io::Result<()> {
    retry_back_pressure(|| dev.post_send_staged(qp, page, wqe, flags))
}

/// An ioctl's error, named after the method, with what the common errnos
/// mean for this driver.
pub fn ioerr(what: &'static str) -> impl Fn(io::Error) -> Error {
    move |e| match e.raw_os_error() {
        Some(libc::EPROTONOSUPPORT) => anyhow!(
            "{what}: the driver does not know this method (EPROTONOSUPPORT): \
             it speaks an older ABI than this helper (version {})",
            abi::ABI_VERSION
        ),
        Some(libc::ENODEV) => anyhow!("{what}: the adapter is gone (ENODEV)"),
        _ => anyhow!("{what}: {e}"),
    }
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

/// The largest inline payload whose WQE (with a remote-address segment for
/// an RDMA write: `raddr`) still fits a BlueFlame buffer.
pub fn bf_cutoff_for(info: &abi::DeviceInfo, raddr: bool) -> usize {
    (1..4096)
        .take_while(|&p| wqe::inline_size16(p, raddr) * 16 <= info.bf_buf_size as usize)
        .last()
        .unwrap_or(0)
}

/// The largest RDMA-write inline payload that still fits a BlueFlame buffer.
pub fn bf_cutoff(info: &abi::DeviceInfo) -> usize {
    bf_cutoff_for(info, true)
}

pub fn suffixed(path: &Path, tag: &str) -> PathBuf {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("lat");
    let name = match path.extension().and_then(|e| e.to_str()) {
        Some(ext) => format!("{stem}-{tag}.{ext}"),
        None => format!("{stem}-{tag}"),
    };
    path.with_file_name(name)
}

/// Is stderr an interactive terminal, one that knows its width? A serial
/// console (the test bed's guest) is a terminal of no size: there a bar's
/// redraws would only fill the log.
fn interactive_stderr() -> bool {
    if !io::stderr().is_terminal() {
        return false;
    }
    // SAFETY: TIOCGWINSZ fills a winsize.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) };
    rc == 0 && ws.ws_col > 0
}

/// Progress on stderr: an indicatif bar on an interactive terminal; in a
/// log (or on a serial console) one line per quarter.
pub struct Progress {
    bar: ProgressBar,
    tty: bool,
    shown: u64,
    what: &'static str,
}

impl Progress {
    pub fn new(total: usize, what: &'static str) -> Self {
        let tty = interactive_stderr();
        let bar = if tty {
            let style = ProgressStyle::with_template(
                "{prefix}: {percent:>3}% [{bar:30}] {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr())
                .with_style(style)
                .with_prefix(what)
        } else {
            ProgressBar::hidden()
        };
        bar.set_length(total as u64);
        Progress {
            bar,
            tty,
            shown: 0,
            what,
        }
    }

    /// `done` of the total are done; `msg` says what runs now.
    pub fn step(&mut self, done: usize, msg: &str) {
        self.bar.set_position(done as u64);
        if self.tty {
            self.bar.set_message(msg.to_owned());
            return;
        }
        let total = self.bar.length().unwrap_or(0).max(1);
        let pct = done as u64 * 100 / total;
        if pct >= self.shown + 25 || done as u64 == total {
            eprintln!("{}: {pct}% ({done}/{total})", self.what);
            self.shown = pct;
        }
    }

    /// A handle that prints a line on stdout without tearing the bar.
    pub fn printer(&self) -> Printer {
        Printer(self.tty.then(|| self.bar.clone()))
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// Prints lines on stdout, hiding the progress bar meanwhile.
#[derive(Clone, Default)]
pub struct Printer(Option<ProgressBar>);

impl Printer {
    pub fn line(&self, s: &str) {
        match &self.0 {
            Some(bar) => bar.suspend(|| println!("{s}")),
            None => println!("{s}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_that_do_not_fit_inline_are_gathered() {
        let mut buf = [0u8; wqe::MAX_WQE_LEN];
        assert_eq!(build_wqe(&mut buf, 100, false), 144);
        let len = build_wqe(&mut buf, 2000, false);
        let info = wqe::validate(&buf[..len], wqe::MAX_WQE_LEN).unwrap();
        assert_eq!((len, info.gather_segs), (48, 1));
    }

    #[test]
    fn bf_cutoff_is_208_for_256_byte_buffers() {
        let info = abi::DeviceInfo {
            bf_buf_size: 256,
            ..Default::default()
        };
        assert_eq!(bf_cutoff(&info), 208);
        // A SEND has no remote-address segment: 16 more bytes.
        assert_eq!(bf_cutoff_for(&info, false), 224);
    }

    #[test]
    fn suffixed_keeps_the_extension() {
        assert_eq!(
            suffixed(Path::new("r/lat.dat"), "bf"),
            Path::new("r/lat-bf.dat")
        );
    }

    #[test]
    fn the_sweep_includes_both_ends_when_the_step_lands_on_them() {
        let s = Sweep {
            min: 4,
            max: 208,
            step: 68,
            iters: 1,
        };
        assert_eq!(s.sizes().unwrap(), [4, 72, 140, 208]);
        let bad = Sweep {
            min: 9,
            max: 8,
            ..s
        };
        assert_eq!(
            bad.sizes().unwrap_err().to_string(),
            "--min 9 is above --max 8"
        );
    }
}
