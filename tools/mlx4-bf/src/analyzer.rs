// SPDX-License-Identifier: GPL-2.0

//! What the analyzer saw: the counters of the ConnectX-3 device model's
//! diagnostic block (BAR0 + 0xe0000, `Documentation/mlx4-model.rst`), read
//! from the guest through sysfs `resource0`.
//!
//! Every read is a trapped MMIO round trip (30-77 us under TCG): snapshots
//! are taken before and after a size's run, never inside a timed loop. On
//! real hardware there is no block (no magic): every column prints `-`.

use std::{
    fmt::Write as _,
    fs,
    os::fd::AsRawFd,
    path::{Path, PathBuf},
};

use crate::mapping::Mapping;

pub const DIAG_OFFSET: u64 = 0xe0000;
pub const MAGIC: u32 = 0x4d4c_584d;
const PCI_DEVICES: &str = "/sys/bus/pci/devices";
const VENDOR_MELLANOX: &str = "0x15b3";
const DEVICE_CONNECTX3: &str = "0x1003";

/// Counter registers (8 bytes, little-endian).
mod reg {
    pub const WQE_BF: usize = 0x30;
    pub const WQE_DMA: usize = 0x38;
    pub const DOORBELLS: usize = 0x48;
    pub const CQES: usize = 0x50;
    pub const EQES: usize = 0x58;
    pub const IRQS: usize = 0x60;
    pub const SQ_DMA_READS: usize = 0x70;
    pub const BAR2_WRITES: usize = 0x78;
    // Version 3.
    pub const RECV_WQES: usize = 0x500;
    pub const RECV_CQES: usize = 0x508;
    pub const RNR_ERRORS: usize = 0x510;
    pub const PEER_ERRORS: usize = 0x518;
    pub const RECV_LEN_ERRORS: usize = 0x520;
    pub const PAYLOAD_DMA_WRITES: usize = 0x528;
    pub const PAYLOAD_DMA_BYTES: usize = 0x530;
    pub const DMA_WRITES: usize = 0x538;
    pub const BAR2_BYTES: usize = 0x540;
    pub const REFUSED_DATA_SEGS: usize = 0x548;
    pub const CQ_OVERRUNS: usize = 0x550;
    pub const POST_TO_WIRE_SUM_NS: usize = 0x560;
    pub const ONE_WAY_SUM_NS: usize = 0x570;
    pub const PCIE_CLOCK_NS: usize = 0x578;
    // Version 11: the WQEs the post-to-wire sum holds.
    pub const POST_TO_WIRE_SAMPLES: usize = 0x660;
}

/// The block's size as version 3 defines it.
const MAP_LEN: usize = 4096;

/// The model's diagnostic block, mapped.
pub struct Analyzer {
    map: Mapping,
    pub version: u32,
    pub bdf: String,
}

/// One reading of the counters; the version-3 ones are `None` before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub wqe_bf: u64,
    pub wqe_dma: u64,
    pub doorbells: u64,
    pub cqes: u64,
    pub eqes: u64,
    pub irqs: u64,
    pub sq_dma_reads: u64,
    pub bar2_writes: u64,
    pub v3: Option<V3>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct V3 {
    pub recv_wqes: u64,
    pub recv_cqes: u64,
    pub rnr_errors: u64,
    pub peer_errors: u64,
    pub recv_len_errors: u64,
    pub payload_dma_writes: u64,
    pub payload_dma_bytes: u64,
    pub dma_writes: u64,
    pub bar2_bytes: u64,
    pub refused_data_segs: u64,
    pub cq_overruns: u64,
    pub post_to_wire_sum_ns: u64,
    pub one_way_sum_ns: u64,
    pub pcie_clock_ns: u64,
    /// The WQEs in `post_to_wire_sum_ns` (version 11: not one a doorbell's
    /// scan ran ahead to); before it, every WQE executed.
    pub post_to_wire_samples: Option<u64>,
}

/// The PCI function of the ConnectX-3 (vendor 0x15b3, device 0x1003): of
/// several, the one mlx4_bf drives (our tools measure our adapter; another
/// may be mainline mlx4_core's), else the first.
fn find_function() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(PCI_DEVICES)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let id = |f: &str| fs::read_to_string(p.join(f)).unwrap_or_default();
            id("vendor").trim() == VENDOR_MELLANOX && id("device").trim() == DEVICE_CONNECTX3
        })
        .collect();
    found.sort();
    let ours = found.iter().position(|p| {
        fs::read_link(p.join("driver")).is_ok_and(|d| d.file_name().is_some_and(|n| n == "mlx4_bf"))
    });
    found.into_iter().nth(ours.unwrap_or(0))
}

/// One 8-byte MMIO load at `addr`, the bus bytes in order: read_volatile of
/// a u64 is one 8-byte load, which the model answers.
///
/// # Safety
///
/// `addr` is 8-byte aligned inside a live mapping of the block.
#[cfg(not(target_arch = "s390x"))]
unsafe fn load8(addr: *const u8) -> [u8; 8] {
    // SAFETY: By the caller's guarantee.
    unsafe { addr.cast::<u64>().read_volatile() }.to_ne_bytes()
}

/// One 8-byte MMIO load at `addr`, the bus bytes in order. s390 without
/// MIO cannot load from a mapped BAR in user space (the load faults): the
/// `s390_pci_mmio_read` system call does one PCI load on the mapping's
/// address. A failed load reads all ones.
///
/// # Safety
///
/// `addr` is 8-byte aligned inside a live mapping of the block.
#[cfg(target_arch = "s390x")]
unsafe fn load8(addr: *const u8) -> [u8; 8] {
    let mut raw = [0xff_u8; 8];
    // SAFETY: The kernel checks the address against the caller's mappings
    // and writes at most 8 bytes to `raw`.
    unsafe {
        libc::syscall(
            libc::SYS_s390_pci_mmio_read,
            addr as libc::c_ulong,
            raw.as_mut_ptr(),
            raw.len(),
        )
    };
    raw
}

/// One 4-byte MMIO store of `v` (little-endian, as the block's registers
/// are) at `addr`.
///
/// # Safety
///
/// `addr` is 4-byte aligned inside a live mapping of the block.
#[cfg(not(target_arch = "s390x"))]
unsafe fn store4(addr: *mut u8, v: u32) {
    // SAFETY: By the caller's guarantee.
    unsafe { addr.cast::<u32>().write_volatile(v.to_le()) }
}

/// One 4-byte MMIO store of `v` (little-endian) at `addr`: on s390
/// without MIO the `s390_pci_mmio_write` system call, as [`load8`] reads.
///
/// # Safety
///
/// `addr` is 4-byte aligned inside a live mapping of the block.
#[cfg(target_arch = "s390x")]
unsafe fn store4(addr: *mut u8, v: u32) {
    let raw = v.to_le_bytes();
    // SAFETY: The kernel checks the address against the caller's mappings
    // and reads 4 bytes from `raw`.
    unsafe {
        libc::syscall(
            libc::SYS_s390_pci_mmio_write,
            addr as libc::c_ulong,
            raw.as_ptr(),
            raw.len(),
        )
    };
}

impl Analyzer {
    /// Maps the block of the first ConnectX-3; `None` where there is none
    /// or it does not carry the model's magic (real hardware).
    pub fn open() -> Option<Self> {
        Self::open_at(&find_function()?)
    }

    /// Maps the block of the PCI function `bdf` (e.g. 0000:00:03.0).
    pub fn open_bdf(bdf: &str) -> Option<Self> {
        Self::open_at(&Path::new(PCI_DEVICES).join(bdf))
    }

    fn open_at(function: &Path) -> Option<Self> {
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(function.join("resource0"))
            .ok()?;
        // Writable: the selectors (QP_SELECT, UAR_SELECT) are registers too.
        let map = Mapping::new(file.as_raw_fd(), DIAG_OFFSET, MAP_LEN, true).ok()?;
        let mut a = Analyzer {
            map,
            version: 0,
            bdf: function
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        // One 8-byte read: the magic, then the version.
        let v = a.read(0);
        if v as u32 != MAGIC {
            return None;
        }
        a.version = (v >> 32) as u32;
        Some(a)
    }

    /// One 8-byte load of register `off`: a single trapped read.
    pub fn read(&self, off: usize) -> u64 {
        debug_assert!(off.is_multiple_of(8) && off + 8 <= MAP_LEN);
        // SAFETY: an aligned register inside the mapping.
        u64::from_le_bytes(unsafe { load8(self.map.as_ptr().add(off)) })
    }

    /// One 4-byte store to register `off` (a selector: QP_SELECT,
    /// UAR_SELECT).
    pub fn write(&self, off: usize, v: u32) {
        debug_assert!(off.is_multiple_of(4) && off + 4 <= MAP_LEN);
        // SAFETY: an aligned register inside the mapping.
        unsafe { store4(self.map.as_ptr().add(off), v) }
    }

    /// Reads the counters this version has (about 10 reads, 24 from
    /// version 3 on: a few milliseconds under TCG).
    pub fn snapshot(&self) -> Snapshot {
        let r = |off| self.read(off);
        Snapshot {
            wqe_bf: r(reg::WQE_BF),
            wqe_dma: r(reg::WQE_DMA),
            doorbells: r(reg::DOORBELLS),
            cqes: r(reg::CQES),
            eqes: r(reg::EQES),
            irqs: r(reg::IRQS),
            sq_dma_reads: r(reg::SQ_DMA_READS),
            bar2_writes: r(reg::BAR2_WRITES),
            v3: (self.version >= 3).then(|| V3 {
                recv_wqes: r(reg::RECV_WQES),
                recv_cqes: r(reg::RECV_CQES),
                rnr_errors: r(reg::RNR_ERRORS),
                peer_errors: r(reg::PEER_ERRORS),
                recv_len_errors: r(reg::RECV_LEN_ERRORS),
                payload_dma_writes: r(reg::PAYLOAD_DMA_WRITES),
                payload_dma_bytes: r(reg::PAYLOAD_DMA_BYTES),
                dma_writes: r(reg::DMA_WRITES),
                bar2_bytes: r(reg::BAR2_BYTES),
                refused_data_segs: r(reg::REFUSED_DATA_SEGS),
                cq_overruns: r(reg::CQ_OVERRUNS),
                post_to_wire_sum_ns: r(reg::POST_TO_WIRE_SUM_NS),
                one_way_sum_ns: r(reg::ONE_WAY_SUM_NS),
                pcie_clock_ns: r(reg::PCIE_CLOCK_NS),
                post_to_wire_samples: (self.version >= 11).then(|| r(reg::POST_TO_WIRE_SAMPLES)),
            }),
        }
    }

    /// What the helper prints about the block, once per run.
    pub fn describe(a: Option<&Analyzer>) -> String {
        match a {
            None => "analyzer: none (no device model's diagnostic block): analyzer columns print '-'"
                .into(),
            Some(a) if a.version < 3 => format!(
                "analyzer: device model at {}, diagnostic block version {} (< 3: the receive, DMA-write, \
                 BAR2-byte and modelled-latency columns print '-')",
                a.bdf, a.version
            ),
            Some(a) => format!(
                "analyzer: device model at {}, diagnostic block version {}",
                a.bdf, a.version
            ),
        }
    }
}

/// What changed between two snapshots, per post: the analyzer's columns.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PerPost {
    pub bar2_writes: Option<f64>,
    pub bar2_bytes: Option<f64>,
    pub wqe_dma_reads: Option<f64>,
    pub dma_writes: Option<f64>,
    pub irqs: Option<f64>,
    /// Modelled post-to-wire latency: delta 0x560 / WQEs executed, ns.
    pub post_to_wire_ns: Option<f64>,
    /// Modelled one-way latency: delta 0x570 / SENDs delivered, ns.
    pub one_way_ns: Option<f64>,
    /// How far the model's PCIe clock (a virtual time that only
    /// transactions advance) moved, ns per post.
    pub pcie_clock_ns: Option<f64>,
    /// Errors the model counted in the window (RNR, peer, length, refused
    /// data segments, CQ overruns), summed.
    pub errors: Option<u64>,
}

fn ratio(num: u64, den: u64) -> Option<f64> {
    (den != 0).then(|| num as f64 / den as f64)
}

impl PerPost {
    /// The deltas between `a` and `b` divided by `posts`.
    pub fn between(a: &Snapshot, b: &Snapshot, posts: u64) -> Self {
        let d = |x: u64, y: u64| y.wrapping_sub(x);
        let per = |x, y| ratio(d(x, y), posts);
        let wqes = d(a.wqe_bf, b.wqe_bf) + d(a.wqe_dma, b.wqe_dma);
        let mut p = PerPost {
            bar2_writes: per(a.bar2_writes, b.bar2_writes),
            wqe_dma_reads: per(a.sq_dma_reads, b.sq_dma_reads),
            irqs: per(a.irqs, b.irqs),
            ..Default::default()
        };
        if let (Some(a), Some(b)) = (a.v3, b.v3) {
            p.bar2_bytes = per(a.bar2_bytes, b.bar2_bytes);
            p.dma_writes = per(a.dma_writes, b.dma_writes);
            let timed = match (a.post_to_wire_samples, b.post_to_wire_samples) {
                (Some(x), Some(y)) => d(x, y),
                _ => wqes,
            };
            p.post_to_wire_ns = ratio(d(a.post_to_wire_sum_ns, b.post_to_wire_sum_ns), timed);
            p.one_way_ns = ratio(
                d(a.one_way_sum_ns, b.one_way_sum_ns),
                d(a.recv_wqes, b.recv_wqes),
            );
            p.pcie_clock_ns = per(a.pcie_clock_ns, b.pcie_clock_ns);
            p.errors = Some(
                d(a.rnr_errors, b.rnr_errors)
                    + d(a.peer_errors, b.peer_errors)
                    + d(a.recv_len_errors, b.recv_len_errors)
                    + d(a.refused_data_segs, b.refused_data_segs)
                    + d(a.cq_overruns, b.cq_overruns),
            );
        }
        p
    }
}

/// The analyzer table's header; `time` names the guest-time column.
pub fn header(time: &str) -> String {
    format!(
        " {:<7} {:<6} {:<16} {:<11} {:<11} {:<13} {:<11} {:<9} {:<26} {:<21} {}",
        "#bytes",
        "path",
        time,
        "BAR2_wr",
        "BAR2_bytes",
        "WQE_DMA_rd",
        "DMA_wr",
        "IRQs",
        "modelled_post_to_wire[ns]",
        "modelled_one_way[ns]",
        "modelled_PCIe_time[ns]"
    )
}

fn col(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.decimals$}"))
}

/// One row: per post, beside the guest's time `t` (printed with
/// `decimals`).
pub fn row(bytes: usize, path: &str, t: f64, decimals: usize, p: &PerPost) -> String {
    let mut s = format!(
        " {:<7} {:<6} {:<16} {:<11} {:<11} {:<13} {:<11} {:<9} {:<26} {:<21} {}",
        bytes,
        path,
        format!("{t:.decimals$}"),
        col(p.bar2_writes, 2),
        col(p.bar2_bytes, 1),
        col(p.wqe_dma_reads, 2),
        col(p.dma_writes, 2),
        col(p.irqs, 2),
        col(p.post_to_wire_ns, 0),
        col(p.one_way_ns, 0),
        col(p.pcie_clock_ns, 0),
    );
    if let Some(e) = p.errors.filter(|&e| e != 0) {
        let _ = write!(s, "  ({e} model-counted errors)");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_are_per_post_and_modelled_latency_per_wqe() {
        let a = Snapshot {
            wqe_bf: 10,
            bar2_writes: 100,
            sq_dma_reads: 5,
            irqs: 1,
            v3: Some(V3 {
                post_to_wire_sum_ns: 1000,
                one_way_sum_ns: 50,
                recv_wqes: 3,
                bar2_bytes: 640,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut b = a;
        b.wqe_bf += 3;
        b.wqe_dma += 1;
        b.bar2_writes += 40;
        b.irqs += 2;
        let mut v = a.v3.unwrap();
        v.post_to_wire_sum_ns += 4 * 2600;
        v.one_way_sum_ns += 2 * 3000;
        v.recv_wqes += 2;
        v.bar2_bytes += 4 * 64;
        v.pcie_clock_ns = a.v3.unwrap().pcie_clock_ns + 4 * 5000;
        b.v3 = Some(v);
        let p = PerPost::between(&a, &b, 4);
        assert_eq!(p.bar2_writes, Some(10.0));
        assert_eq!(p.bar2_bytes, Some(64.0));
        assert_eq!(p.wqe_dma_reads, Some(0.0));
        assert_eq!(p.irqs, Some(0.5));
        assert_eq!(p.post_to_wire_ns, Some(2600.0));
        assert_eq!(p.one_way_ns, Some(3000.0));
        assert_eq!(p.pcie_clock_ns, Some(5000.0));
        assert_eq!(p.errors, Some(0));
        // Version 11: divided by the WQEs the sum holds, not all executed.
        let mut a11 = a;
        a11.v3 = Some(V3 {
            post_to_wire_samples: Some(7),
            ..a.v3.unwrap()
        });
        let mut b11 = b;
        b11.v3 = Some(V3 {
            post_to_wire_samples: Some(9),
            ..b.v3.unwrap()
        });
        let p = PerPost::between(&a11, &b11, 4);
        assert_eq!(p.post_to_wire_ns, Some(5200.0));
    }

    #[test]
    fn version_2_and_no_block_print_dashes() {
        let a = Snapshot::default();
        let p = PerPost::between(&a, &a, 4);
        assert_eq!(
            (p.bar2_bytes, p.dma_writes, p.one_way_ns),
            (None, None, None)
        );
        assert_eq!(p.bar2_writes, Some(0.0));
        let r = row(4, "bf", 1.5, 2, &PerPost::default());
        assert_eq!(
            r.split_whitespace().collect::<Vec<_>>(),
            ["4", "bf", "1.50", "-", "-", "-", "-", "-", "-", "-", "-"]
        );
        assert_eq!(header("t").split_whitespace().count(), 11);
    }
}
