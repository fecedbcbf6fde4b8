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

use crate::{
    device::{Device, Mapping},
    mr::{self, Mr},
};

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
    /// The sweep's sizes that fit a BlueFlame post, and that limit.
    pub fn bf_sizes(&self, info: &abi::DeviceInfo) -> Result<(Vec<usize>, usize)> {
        let cutoff = bf_cutoff(info);
        let sizes: Vec<usize> = self.sizes()?.into_iter().filter(|&s| s <= cutoff).collect();
        if sizes.is_empty() {
            bail!("no payload size in the sweep fits BlueFlame (at most {cutoff} bytes)");
        }
        Ok((sizes, cutoff))
    }

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

/// How a payload travels in a WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carry {
    /// In the WQE: BlueFlame-capable while the WQE fits a BlueFlame buffer.
    Inline,
    /// DMA-read by the adapter from a registered buffer named by a gather
    /// segment (lkey, address, length): doorbell path only.
    Gather,
}

/// The largest WQE the device takes (on the doorbell path).
pub fn max_wqe(info: &abi::DeviceInfo) -> usize {
    match info.max_db_wqe_size as usize {
        0 => wqe::MAX_WQE_LEN,
        n => n.min(wqe::MAX_WQE_LEN),
    }
}

/// How a `payload`-byte message goes: inline if its WQE (with a remote
/// address segment for an RDMA write: `raddr`) fits `max_wqe` bytes, else
/// gathered, as libmlx4 does.
pub fn carry(payload: usize, raddr: bool, max_wqe: usize) -> Carry {
    if wqe::inline_size16(payload, raddr) * 16 <= max_wqe {
        Carry::Inline
    } else {
        Carry::Gather
    }
}

/// The largest payload that still goes inline (see [`carry`]).
pub fn inline_max(raddr: bool, max_wqe: usize) -> usize {
    (0..=max_wqe)
        .take_while(|&p| carry(p, raddr, max_wqe) == Carry::Inline)
        .last()
        .unwrap_or(0)
}

/// Builds the WQE of an RDMA write (`opcode`: RDMA_WRITE or
/// RDMA_WRITE_IMM) of `payload` to `dst` = `(raddr, rkey)`: inline if it
/// fits `max_wqe` and `gather` is not asked for, else one gather segment
/// naming `src` = `(addr, lkey)`, where the same bytes must be. Returns the
/// WQE's length and how the payload went.
pub fn build_rdma_write(
    buf: &mut [u8; wqe::MAX_WQE_LEN],
    opcode: u32,
    payload: &[u8],
    src: (u64, u32),
    dst: (u64, u32),
    gather: bool,
    max_wqe: usize,
) -> Option<(usize, Carry)> {
    let raddr = Some(dst);
    if !gather && carry(payload.len(), true, max_wqe) == Carry::Inline {
        let len = wqe::build_inline(buf, opcode, raddr, payload)?;
        return Some((len, Carry::Inline));
    }
    let seg = (src.0, src.1, u32::try_from(payload.len()).ok()?);
    let len = wqe::build_gather(buf, opcode, raddr, seg)?;
    Some((len, Carry::Gather))
}

/// Sets the immediate of a WQE's control segment (be32 at +0x0c), which an
/// RDMA_WRITE_IMM or SEND_IMM hands to the receiver's CQE.
pub fn set_imm(wqe: &mut [u8], imm: u32) {
    wqe[12..16].copy_from_slice(&imm.to_be_bytes());
}

/// The registered memory behind the RDMA writes of `post`, `lat`, `bench`
/// and `stress`. A new QP is connected to itself, so the write's target
/// must be a region of this same context registered for remote writes
/// (`ACCESS_REMOTE_WRITE`, which needs `LOCAL_WRITE`); a payload that does
/// not fit a WQE inline is gathered from the region's first bytes. Source
/// and target lie apart when the driver allows a region of both.
pub struct WriteScratch {
    mr: Mr,
    /// Offset of the write's target in the region.
    dst: usize,
    /// The payload: `i as u8` at byte `i`, also in the region at 0.
    data: Vec<u8>,
    max_wqe: usize,
}

impl WriteScratch {
    /// Registers room for payloads of up to `max_payload` bytes with the
    /// context of `dev`.
    pub fn new(dev: &Device, info: &abi::DeviceInfo, max_payload: usize) -> Result<Self> {
        let half = max_payload.max(1).next_multiple_of(mr::PAGE);
        let (len, dst) = if mr::reg_refusal(info, 2 * half).is_none() {
            (2 * half, half)
        } else {
            // The write then copies the payload onto itself.
            (half, 0)
        };
        let mr = Mr::register(dev, info, len, abi::ACCESS_ALL)?;
        let data: Vec<u8> = (0..max_payload).map(|i| i as u8).collect();
        mr.write(0, &data);
        Ok(WriteScratch {
            mr,
            dst,
            data,
            max_wqe: max_wqe(info),
        })
    }

    /// The WQE of an RDMA write of `payload` bytes into the region, inline
    /// when it fits (and `gather` is not asked for), else gathered from it;
    /// `None` above the size the region was made for.
    pub fn build(
        &self,
        buf: &mut [u8; wqe::MAX_WQE_LEN],
        payload: usize,
        gather: bool,
    ) -> Option<(usize, Carry)> {
        let data = self.data.get(..payload)?;
        let src = (self.mr.addr(), self.mr.lkey());
        let dst = (self.mr.addr() + self.dst as u64, self.mr.rkey());
        build_rdma_write(
            buf,
            wqe::OPCODE_RDMA_WRITE,
            data,
            src,
            dst,
            gather,
            self.max_wqe,
        )
    }

    /// How a `payload`-byte write goes.
    pub fn carry(&self, payload: usize) -> Carry {
        carry(payload, true, self.max_wqe)
    }

    pub fn lkey(&self) -> u32 {
        self.mr.lkey()
    }

    pub fn len(&self) -> usize {
        self.mr.len()
    }

    /// Deregisters the region (retried while posts are outstanding).
    pub fn close(self) -> Result<()> {
        self.mr.close()
    }
}

/// The sizes of `sizes` that a write gathers, as a list for the report
/// (`None` if all go inline).
pub fn gathered_sizes(sizes: &[usize], carry_of: impl Fn(usize) -> Carry) -> Option<String> {
    let g: Vec<String> = sizes
        .iter()
        .filter(|&&s| carry_of(s) == Carry::Gather)
        .map(|s| s.to_string())
        .collect();
    (!g.is_empty()).then(|| g.join(" "))
}

/// `EINVAL (Invalid argument)`: an errno by its name, with its text.
pub fn errno_text(e: &io::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" (os error ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    };
    match e.raw_os_error().and_then(errno_name) {
        Some(name) => format!("{name} ({text})"),
        None => text,
    }
}

/// The errnos an ioctl of this driver or an mmap() gives.
pub fn errno_name(errno: i32) -> Option<&'static str> {
    Some(match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::E2BIG => "E2BIG",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::ENOSPC => "ENOSPC",
        libc::ERANGE => "ERANGE",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EDQUOT => "EDQUOT",
        libc::ETIMEDOUT => "ETIMEDOUT",
        _ => return None,
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
        Some(libc::EACCES) => anyhow!(
            "{what}: a gather segment or an RDMA write names memory this context may not use \
             (EACCES): not a registered region of this context (lkey), or of the connected \
             peer's with REMOTE_WRITE (rkey), or the message is not inside it"
        ),
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
    fn rdma_writes_go_inline_up_to_912_bytes_and_are_gathered_above() {
        // ctrl 16 + raddr 16, then inline segments of 28 and 60 bytes per
        // 64-byte block: 912 bytes make a 1008-byte WQE, the largest.
        assert_eq!(inline_max(true, wqe::MAX_WQE_LEN), 912);
        assert_eq!(carry(912, true, wqe::MAX_WQE_LEN), Carry::Inline);
        assert_eq!(carry(913, true, wqe::MAX_WQE_LEN), Carry::Gather);
        // A SEND has no remote address segment: 16 bytes more.
        assert_eq!(inline_max(false, wqe::MAX_WQE_LEN), 928);
        // A device with smaller WQEs gathers sooner.
        assert_eq!(inline_max(true, 256), 208);
        let info = abi::DeviceInfo {
            max_db_wqe_size: 512,
            ..Default::default()
        };
        assert_eq!(max_wqe(&info), 512);
        assert_eq!(max_wqe(&abi::DeviceInfo::default()), wqe::MAX_WQE_LEN);
    }

    #[test]
    fn an_rdma_write_names_the_target_and_gathers_from_the_source() {
        let mut buf = [0u8; wqe::MAX_WQE_LEN];
        let data: Vec<u8> = (0..2000).map(|i| i as u8).collect();
        let (src, dst) = ((0x7f00_0000_0000, 0x1234), (0x7f00_0000_1000, 0x1234));
        let m = wqe::MAX_WQE_LEN;
        let (len, how) = build_rdma_write(
            &mut buf,
            wqe::OPCODE_RDMA_WRITE,
            &data[..100],
            src,
            dst,
            false,
            m,
        )
        .unwrap();
        assert_eq!((len, how), (144, Carry::Inline));
        let info = wqe::validate(&buf[..len], m).unwrap();
        assert_eq!((info.inline_bytes, info.gather_segs), (100, 0));
        assert_eq!(buf[16..24], 0x7f00_0000_1000u64.to_be_bytes());
        assert_eq!(buf[24..28], 0x1234u32.to_be_bytes());

        let (len, how) = build_rdma_write(
            &mut buf,
            wqe::OPCODE_RDMA_WRITE_IMM,
            &data,
            src,
            dst,
            false,
            m,
        )
        .unwrap();
        assert_eq!((len, how), (48, Carry::Gather));
        let info = wqe::validate(&buf[..len], m).unwrap();
        assert_eq!(
            (info.opcode, info.gather_segs),
            (wqe::OPCODE_RDMA_WRITE_IMM, 1)
        );
        // byte_count, lkey, address of the source.
        assert_eq!(buf[32..36], 2000u32.to_be_bytes());
        assert_eq!(buf[36..40], 0x1234u32.to_be_bytes());
        assert_eq!(buf[40..48], 0x7f00_0000_0000u64.to_be_bytes());
        assert!(wqe::gathers_with_lkey(&buf[..len], &info, 0x1234));

        // Asked for, a small payload is gathered too.
        let (_, how) = build_rdma_write(
            &mut buf,
            wqe::OPCODE_RDMA_WRITE,
            &data[..4],
            src,
            dst,
            true,
            m,
        )
        .unwrap();
        assert_eq!(how, Carry::Gather);
    }

    #[test]
    fn the_immediate_is_big_endian_at_0x0c_and_passes_validation() {
        let mut buf = [0u8; wqe::MAX_WQE_LEN];
        let (len, _) = build_rdma_write(
            &mut buf,
            wqe::OPCODE_RDMA_WRITE_IMM,
            &[1, 2, 3],
            (0, 1),
            (0x1000, 1),
            false,
            wqe::MAX_WQE_LEN,
        )
        .unwrap();
        set_imm(&mut buf[..len], 0x0102_0304);
        assert_eq!(buf[12..16], [1, 2, 3, 4]);
        assert!(wqe::validate(&buf[..len], wqe::MAX_WQE_LEN).is_ok());
    }

    #[test]
    fn gathered_sizes_are_listed() {
        let c = |s| carry(s, true, wqe::MAX_WQE_LEN);
        assert_eq!(gathered_sizes(&[4, 912, 913, 1024], c).unwrap(), "913 1024");
        assert_eq!(gathered_sizes(&[4, 208], c), None);
    }

    #[test]
    fn errnos_are_named() {
        let e = io::Error::from_raw_os_error(libc::EBUSY);
        assert_eq!(errno_text(&e), "EBUSY (Device or resource busy)");
        assert_eq!(errno_name(libc::EACCES), Some("EACCES"));
        assert_eq!(errno_name(4095), None);
        let odd = io::Error::from_raw_os_error(4095);
        assert!(!errno_text(&odd).contains("os error"));
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
