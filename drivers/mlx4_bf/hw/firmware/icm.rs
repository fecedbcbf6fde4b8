// SPDX-License-Identifier: GPL-2.0

//! The firmware and the memory it is given, brought up as mainline
//! mlx4_core does (`core/main.c:mlx4_init_fw`, `mlx4_init_icm`,
//! `mlx4_init_hca`) and taken down in the reverse order (`mlx4_close_hca`,
//! `mlx4_free_icms`, `mlx4_close_fw`):
//!
//! ```text
//! MAP_FA, RUN_FW                      the firmware area QUERY_FW asked for
//! (QUERY_DEV_CAP, by the caller)
//! SET_ICM_SIZE, MAP_ICM_AUX           ICM size of the profile; its aux pages
//! MAP_ICM x tables, INIT_HCA          every table mapped whole, once
//! ...
//! CLOSE_HCA, UNMAP_ICM x tables, UNMAP_ICM_AUX, UNMAP_FA
//! ```
//!
//! The profile is this driver's, not mlx4_core's 2^18 QPs: every table is
//! mapped whole at INIT_HCA (mainline maps QP, CQ and MPT contexts a chunk
//! at a time as objects appear, `mlx4_table_get()`), so it asks for what
//! a test machine's adapter serves: [`LOG_NUM_QPS`], [`LOG_NUM_CQS`] and
//! `MAX_MPTS`, each within the adapter's limits ([`Profile`]). The rules (layout,
//! INIT_HCA mailbox, page lists) are the pure `icm` module; this file
//! allocates, posts and records what the adapter holds, so that the
//! teardown gives back exactly that.

use kernel::{
    device::{Bound, Device},
    prelude::*,
};

use crate::{
    geometry::MAX_MPTS,
    hw::cmd::{CmdIf, CmdState, Command, Input, Op},
    hw::firmware::dev_cap::DevCap,
    hw::firmware::icm_pages::IcmPages,
    hw::memory::mtt::QueueMtt,
    icm::{
        init_hca::{write_init_hca, IcmParams, InitHcaOptions, INIT_HCA_IN_SIZE},
        map_cmd::{self, DmaChunk, MapEntries, MAILBOX_SIZE},
        profile::{self, EntrySizes, ProfileRequest, Reserved},
        table_chunks::{icm_tables, reserved_mtts_aligned, IcmTable},
        ICM_PAGE_SIZE,
    },
    region,
};

/// RDMA reads a QP may have outstanding as responder (log2): one RDMARC
/// entry per QP (`caps.max_qp_dest_rdma`, mlx4_core's `rdmarc_shift`).
pub(crate) const LOG_RDMARC_PER_QP: u8 = 0;
/// QPNs: the firmware's, the kernel's and about 3 800 of the provider's
/// (BlueFlame-safe ones, `geometry::KERNEL_QPN_END`); 6.5 MiB of contexts
/// with the model's entry sizes.
const LOG_NUM_QPS: u8 = 14;
/// CQs: the firmware's, the kernel's, the provider's.
const LOG_NUM_CQS: u8 = 12;
/// SRQs the provider may have beyond the firmware's reserved ones.
const PROVIDER_SRQS: u32 = 1024;
/// MTT entries: the queues' (`QueueMtt`) and 256 MiB of memory regions.
const LOG_NUM_MTTS: u8 = 16;
/// A two-entry multicast table of 1 KiB entries (the default
/// `MLX4_DEFAULT_MGM_LOG_ENTRY_SIZE`): INIT_HCA needs one; nothing joins.
const LOG_MCG_ENTRY_SIZE: u8 = 10;
const LOG_NUM_MCGS: u8 = 1;
/// `dma_get_cache_alignment()` at its largest (s390: 256 bytes): the MTT
/// entries the firmware reserves are rounded up to it.
const DMA_CACHE_ALIGN: u32 = 256;
/// `cache_line_size()`, which INIT_HCA is told.
const LOG_CACHE_LINE: u8 = if cfg!(target_arch = "s390x") { 8 } else { 6 };

/// What INIT_HCA gave this driver: the object numbers it may use.
#[derive(Clone, Copy)]
pub(crate) struct Profile {
    /// QPNs lie below this.
    pub(crate) num_qps: u32,
    pub(crate) num_cqs: u32,
    pub(crate) num_eqs: u32,
    pub(crate) num_mpts: u32,
    /// SRQNs lie below this, the first `DevCap::reserved_srqs` the
    /// firmware's.
    pub(crate) num_srqs: u32,
    /// MTT entries: the firmware's, the queues' ([`QueueMtt`]), then the
    /// memory regions' up to `num_mtts`.
    pub(crate) num_mtts: u32,
    pub(crate) queue_mtt: QueueMtt,
}

fn ceil_log2(n: u32) -> u8 {
    n.max(1).next_power_of_two().ilog2() as u8
}

/// The driver's profile checked against the adapter: its counts whole
/// (`mlx4_make_profile()` would cap them), the reservations leaving room,
/// the ICM layout, and the queue memory's MTT range after the reserved
/// entries.
struct IcmPlan {
    req: ProfileRequest,
    reserved: Reserved,
    sizes: EntrySizes,
    layout: profile::Layout,
}

fn plan(dev: &Device<Bound>, cap: &DevCap) -> Result<IcmPlan> {
    let req = request(cap);
    let reserved = Reserved {
        qps: cap.reserved_qps,
        srqs: cap.reserved_srqs,
        cqs: cap.reserved_cqs,
        eqs: cap.reserved_eqs,
        mpts: cap.reserved_mrws,
        mtts: reserved_mtts_aligned(cap.reserved_mtts, cap.entry_sizes.mtt, DMA_CACHE_ALIGN),
    };
    for (what, log, max) in [
        ("QPs", req.log_num_qps, cap.max_qps),
        ("CQs", req.log_num_cqs, cap.max_cqs),
        ("MPTs", req.log_num_mpts, cap.max_mpts),
        ("MTT entries", req.log_num_mtts, cap.max_mtts),
    ] {
        if 1u32 << log > max {
            dev_err!(
                dev,
                "needs {} {}, the adapter has {}\n",
                1u32 << log,
                what,
                max
            );
            return Err(ENODEV);
        }
    }
    profile::check_request(&req, &reserved, cap.log_max_eqs).map_err(|e| {
        dev_err!(dev, "the adapter's reservations leave no room: {:?}\n", e);
        ENODEV
    })?;
    let sizes = EntrySizes {
        mcg: 1 << LOG_MCG_ENTRY_SIZE,
        ..cap.entry_sizes
    };
    let layout = profile::make_layout(&sizes, &req, cap.max_icm_size).map_err(|e| {
        dev_err!(dev, "ICM profile: {:?}\n", e);
        ENODEV
    })?;
    if reserved.mtts + QueueMtt::ENTRIES >= 1u32 << req.log_num_mtts {
        dev_err!(
            dev,
            "{} reserved MTT entries leave too few\n",
            reserved.mtts
        );
        return Err(ENODEV);
    }
    Ok(IcmPlan {
        req,
        reserved,
        sizes,
        layout,
    })
}

/// The request: the driver's sizes, each no more than the adapter has.
fn request(cap: &DevCap) -> ProfileRequest {
    let at_most = |log: u8, max: u32| log.min(max.max(1).ilog2() as u8);
    ProfileRequest {
        log_num_qps: at_most(LOG_NUM_QPS, cap.max_qps),
        log_rdmarc_per_qp: LOG_RDMARC_PER_QP,
        log_num_srqs: at_most(ceil_log2(cap.reserved_srqs + PROVIDER_SRQS), cap.max_srqs),
        log_num_cqs: at_most(LOG_NUM_CQS, cap.max_cqs),
        log_num_eqs: ceil_log2(cap.reserved_eqs + crate::hw::queues::eq::wanted())
            .min(cap.log_max_eqs),
        log_num_mpts: at_most(ceil_log2(MAX_MPTS as u32), cap.max_mpts),
        log_num_mtts: LOG_NUM_MTTS,
        log_num_mcgs: LOG_NUM_MCGS,
    }
}

/// Memory given to the adapter, and whether it still holds it.
struct Mapped {
    /// ICM address (MAP_ICM); 0 for the firmware area and aux pages.
    virt: u64,
    pages: IcmPages,
    mapped: bool,
}

/// The firmware's state and the memory it holds. Dropping it frees the
/// memory: only after [`Icm::close`] returned true, or a reset.
pub(crate) struct Icm {
    /// MAP_FA (RUN_FW may have failed: UNMAP_FA undoes either).
    fa: Option<Mapped>,
    aux: Option<Mapped>,
    /// MAP_ICM of each table, in mapping order.
    icm: KVec<Mapped>,
    /// Which of `icm` is the MTT table.
    mtt: Option<usize>,
    hca_up: bool,
}

/// The page list of one MAP_* command, in mailboxes of 256 entries.
fn map(cmd: &CmdIf, st: &mut CmdState, op: Op, chunks: &[DmaChunk], virt: Option<u64>) -> Result {
    map_cmd::check_chunks(chunks).map_err(|_| EINVAL)?;
    let mut entries = match virt {
        Some(v) => MapEntries::at_virt(chunks, v),
        None => MapEntries::without_virt(chunks),
    };
    let mut mailbox = KBox::new([0u8; MAILBOX_SIZE], GFP_KERNEL)?;
    loop {
        let n = map_cmd::fill_mailbox(&mut entries, &mut mailbox).map_err(|_| EINVAL)?;
        if n == 0 {
            return Ok(());
        }
        let bytes = n * map_cmd::MAP_ENTRY_SIZE;
        cmd.exec(
            st,
            Command::new(op, n as u32).input(Input::Mailbox(&mailbox[..bytes])),
        )?;
    }
}

impl Icm {
    /// Nothing given to the adapter yet.
    pub(crate) fn new() -> Self {
        Icm {
            fa: None,
            aux: None,
            icm: KVec::new(),
            mtt: None,
            hca_up: false,
        }
    }

    /// MAP_FA of `fw_pages` (QUERY_FW) and RUN_FW. Whatever it did is
    /// undone with [`Icm::close`], also on failure.
    pub(crate) fn start(&mut self, dev: &Device<Bound>, cmd: &CmdIf, fw_pages: u32) -> Result {
        let pages = IcmPages::alloc(dev, u64::from(fw_pages) * ICM_PAGE_SIZE)?;
        let chunks = pages.dma_chunks()?;
        // Recorded first: a MAP_FA that fails half-way still needs UNMAP_FA.
        self.fa = Some(Mapped {
            virt: 0,
            pages,
            mapped: true,
        });
        let mut st = cmd.lock();
        map(cmd, &mut st, Op::MapFa, &chunks, None)?;
        cmd.exec(&mut st, Command::new(Op::RunFw, 0))
    }

    /// SET_ICM_SIZE, MAP_ICM_AUX, MAP_ICM of every table and INIT_HCA, for
    /// this driver's profile on a device with capabilities `cap` and
    /// `num_uars` UAR pages.
    pub(crate) fn init_hca(
        &mut self,
        dev: &Device<Bound>,
        cmd: &CmdIf,
        cap: &DevCap,
        num_uars: u32,
    ) -> Result<Profile> {
        let plan = plan(dev, cap)?;
        let mut st = cmd.lock();
        let (icm_bytes, aux_bytes) = self.map_icm(dev, cmd, &mut st, &plan)?;
        let options = InitHcaOptions {
            log_cache_line: LOG_CACHE_LINE,
            log_uar_sz: num_uars.max(1).ilog2() as u8,
            ..InitHcaOptions::default()
        };
        let mut inbox = KBox::new([0u8; INIT_HCA_IN_SIZE], GFP_KERNEL)?;
        write_init_hca(
            &IcmParams::from_layout(&plan.layout, LOG_MCG_ENTRY_SIZE),
            &options,
            &mut inbox,
        );
        cmd.exec(
            &mut st,
            Command::new(Op::InitHca, 0).input(Input::Mailbox(&inbox[..])),
        )?;
        self.hca_up = true;
        dev_info!(
            dev,
            "ICM: {} KiB of {} MiB mapped in {} tables, aux {} KiB, firmware area {} KiB\n",
            icm_bytes / 1024,
            plan.layout.total_size >> 20,
            self.icm.len(),
            aux_bytes / 1024,
            self.fa.as_ref().map_or(0, |m| m.pages.bytes() / 1024)
        );
        let num = |t| 1u32 << plan.layout.region(t).log_num;
        Ok(Profile {
            num_qps: num(profile::Table::Qpc),
            num_cqs: num(profile::Table::Cqc),
            num_eqs: num(profile::Table::Eqc),
            num_mpts: num(profile::Table::Dmpt),
            num_srqs: num(profile::Table::Srqc),
            num_mtts: 1u32 << plan.req.log_num_mtts,
            queue_mtt: QueueMtt {
                base: plan.reserved.mtts,
            },
        })
    }

    /// SET_ICM_SIZE, the aux pages it asks for (MAP_ICM_AUX), then every
    /// table allocated and mapped whole (MAP_ICM); returns the bytes of ICM
    /// and of aux pages.
    fn map_icm(
        &mut self,
        dev: &Device<Bound>,
        cmd: &CmdIf,
        st: &mut CmdState,
        plan: &IcmPlan,
    ) -> Result<(u64, u64)> {
        let mut aux_pages = 0u64;
        cmd.exec(
            st,
            Command::new(Op::SetIcmSize, 0)
                .input(Input::Imm(plan.layout.total_size))
                .output_imm(&mut aux_pages),
        )?;
        let aux = IcmPages::alloc(dev, aux_pages * ICM_PAGE_SIZE)?;
        let chunks = aux.dma_chunks()?;
        self.aux = Some(Mapped {
            virt: 0,
            pages: aux,
            mapped: true,
        });
        map(cmd, st, Op::MapIcmAux, &chunks, None)?;
        let mut icm_bytes = 0;
        for table in icm_tables(&plan.layout, &plan.sizes, &plan.reserved) {
            let bytes = table.whole_table_pages() * ICM_PAGE_SIZE;
            let pages = IcmPages::alloc(dev, bytes)?;
            let chunks = pages.dma_chunks()?;
            icm_bytes += pages.bytes();
            if table.table == IcmTable::Mtt {
                self.mtt = Some(self.icm.len());
            }
            self.icm.push(
                Mapped {
                    virt: table.virt,
                    pages,
                    mapped: true,
                },
                GFP_KERNEL,
            )?;
            map(cmd, st, Op::MapIcm, &chunks, Some(table.virt))?;
        }
        Ok((icm_bytes, aux_pages * ICM_PAGE_SIZE))
    }

    /// Writes the MTT entries of `pages` (DMA addresses of 4 KiB pages) from
    /// entry `first` on, straight into the MTT table's ICM, as mlx4_core
    /// does on a native function (`core/mr.c:mlx4_write_mtt_chunk`; the
    /// WRITE_MTT command is for virtual functions). The memory is coherent:
    /// the command that hands the entries to the adapter (SW2HW_*) is
    /// posted after these stores.
    pub(crate) fn write_mtt(&self, first: u32, pages: &[u64]) -> Result {
        let table = self.icm.get(self.mtt.ok_or(ENODEV)?).ok_or(ENODEV)?;
        for (i, &page) in pages.iter().enumerate() {
            let entry = u64::from(first) + i as u64;
            table
                .pages
                .write(entry * region::MTT_ENTRY_LEN, &region::mtt_entry(page))?;
        }
        Ok(())
    }

    /// CLOSE_HCA, UNMAP_ICM of every table, UNMAP_ICM_AUX, UNMAP_FA, as far
    /// as each was done, until one fails. Returns whether the adapter gave
    /// everything back; if not, it must be reset before this is dropped
    /// (the memory freed). After a failure the adapter is not in the state
    /// the next command assumes (UNMAP_FA with ICM still mapped, UNMAP_ICM
    /// of an HCA still open): the reset takes back what is left at once.
    pub(crate) fn close(&mut self, cmd: &CmdIf, st: &mut CmdState) -> bool {
        if self.hca_up {
            // op_mod 0: not a panic (`mlx4_CLOSE_HCA`).
            self.hca_up = cmd.exec(st, Command::new(Op::CloseHca, 0)).is_err();
            if self.hca_up {
                return false;
            }
        }
        for m in self.icm.iter_mut().rev().filter(|m| m.mapped) {
            let pages = map_cmd::unmap_icm_pages(m.pages.bytes());
            m.mapped = cmd
                .exec(
                    st,
                    Command::new(Op::UnmapIcm, pages).input(Input::Imm(m.virt)),
                )
                .is_err();
            if m.mapped {
                return false;
            }
        }
        for (area, op) in [
            (&mut self.aux, Op::UnmapIcmAux),
            (&mut self.fa, Op::UnmapFa),
        ] {
            if let Some(m) = area.as_mut().filter(|m| m.mapped) {
                // UNMAP_FA stops the firmware, running or not.
                m.mapped = cmd.exec(st, Command::new(op, 0)).is_err();
                if m.mapped {
                    return false;
                }
            }
        }
        true
    }
}
