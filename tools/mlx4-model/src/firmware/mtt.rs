//! MTT entries where mainline mlx4_core puts them: it writes each one,
//! `page_dma | 1` (PRESENT), straight into the MTT table's ICM
//! (`core/mr.c:mlx4_write_mtt_chunk` through `core/icm.c:mlx4_table_find`),
//! never with WRITE_MTT in native mode; WRITE_MTT (a VF's way,
//! `core/mr.c:mlx4_WRITE_MTT`) writes them there too. A context names its first entry by
//! its byte offset from INIT_HCA's MTT base (`core/mr.c:mlx4_mtt_addr`);
//! the firmware reads the entries through MAP_ICM's pages.

use super::icm::{IcmMap, ICM_PAGE};
use crate::bytes::{be64, put_be64};
use crate::command::CmdError;
use crate::env::Env;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::timing::Read;
use serde_json::json;

pub const MTT_ENTRY: u64 = 8;
const PRESENT: u64 = 1;
/// The most entries one context may name (2^20 pages).
pub const MAX_ENTRIES: u64 = 1 << 20;

/// The `n` pages of 2^`shift` bytes whose entries start at byte `mtt_addr`
/// of the MTT table at ICM `mtt_base`. An entry's ICM page not mapped:
/// ICM_ERROR (counted, recorded); an entry not PRESENT, or a page not
/// aligned to its size: BAD_PARAM.
pub(crate) fn read_pages<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    mtt_base: u64,
    icm: &IcmMap,
    mtt_addr: u64,
    shift: u32,
    n: u64,
) -> Result<Vec<u64>, CmdError> {
    if !mtt_addr.is_multiple_of(MTT_ENTRY) || n > MAX_ENTRIES {
        return Err(CmdError::BadParam);
    }
    let mut pages = Vec::with_capacity(n as usize);
    // Past the end of the address space is as unmapped as anywhere else.
    let mut virt = mtt_base.saturating_add(mtt_addr);
    while (pages.len() as u64) < n {
        let Some(dma) = icm.translate(virt) else {
            env.counters.global.icm_errors += 1;
            env.trace
                .record("fw_refused", || json!({"mtt_icm_unmapped": virt}));
            return Err(CmdError::IcmError);
        };
        // The entries on this ICM page, in one read.
        let here = ((ICM_PAGE - virt % ICM_PAGE) / MTT_ENTRY).min(n - pages.len() as u64);
        let mut b = vec![0u8; (here * MTT_ENTRY) as usize];
        env.dma_read(dma, &mut b, "mtt", Read::Fresh)?;
        for e in b.chunks_exact(MTT_ENTRY as usize) {
            let v = be64(e, 0);
            let page = v & !(ICM_PAGE - 1);
            if v & PRESENT == 0 || page & ((1u64 << shift) - 1) != 0 {
                return Err(CmdError::BadParam);
            }
            pages.push(page);
        }
        virt = virt.saturating_add(here * MTT_ENTRY);
    }
    Ok(pages)
}

/// WRITE_MTT: `entries` into the MTT table at ICM `mtt_base` from entry
/// `first` on. Every entry's ICM page must be mapped (ICM_ERROR, counted
/// and recorded, nothing written); then one DMA write per ICM page.
pub(crate) fn write_entries<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    mtt_base: u64,
    icm: &IcmMap,
    first: u64,
    entries: &[u64],
) -> Result<(), CmdError> {
    let start = first
        .checked_mul(MTT_ENTRY)
        .and_then(|b| mtt_base.checked_add(b))
        .ok_or(CmdError::BadParam)?;
    let mut runs = Vec::new();
    let mut virt = start;
    let mut left = entries;
    while !left.is_empty() {
        let Some(dma) = icm.translate(virt) else {
            env.counters.global.icm_errors += 1;
            env.trace
                .record("fw_refused", || json!({"mtt_icm_unmapped": virt}));
            return Err(CmdError::IcmError);
        };
        let here = (((ICM_PAGE - virt % ICM_PAGE) / MTT_ENTRY).max(1) as usize).min(left.len());
        runs.push((dma, &left[..here]));
        left = &left[here..];
        virt = virt.saturating_add(here as u64 * MTT_ENTRY);
    }
    for (dma, es) in runs {
        let mut b = vec![0u8; es.len() * MTT_ENTRY as usize];
        for (i, e) in es.iter().enumerate() {
            put_be64(&mut b, i * MTT_ENTRY as usize, *e);
        }
        env.dma_write(dma, &b, "mtt")?;
    }
    Ok(())
}
