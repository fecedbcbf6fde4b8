// SPDX-License-Identifier: GPL-2.0

//! The adapter (a Mellanox function; in the test bed the vfio-user device
//! model of Documentation/mlx4-model.rst): bring-up through the command
//! interface, the EQs and their interrupts, the CQ and QP commands contexts
//! need, and the teardown at unbind.
//!
//! Probe, as mainline mlx4_core brings a ConnectX up: 64-bit DMA masks;
//! BAR0 mapped; ownership word read (nonzero: owned by someone else,
//! -EBUSY); the HCR toggle taken from the device (no reset, see
//! `CmdIf::sync_toggle`); QUERY_FW (cmd_if_rev 2..3); the firmware area,
//! RUN_FW, QUERY_DEV_CAP, ICM and INIT_HCA (`firmware/icm.rs`); the MTT
//! entries of the queue memory (`memory/mtt.rs`). Then, once the adapter exists,
//! an MSI-X vector and its handler per EQ (the async EQ and a completion
//! EQ per CPU, as the adapter's EQs and the vectors allow), SW2HW_EQ of
//! each, MAP_EQ of the async one, each armed, a NOP with the E bit, which
//! must come back as an interrupt, and port 1 up (INIT_PORT; its LID from
//! PortInfo, `firmware/port.rs`).
//!
//! Unbind: posts are stopped (`posting` revoked, which waits for those in
//! flight), every QP still in hardware is reset and every CQ and MPT
//! returned (2RST_QP, HW2SW_CQ, HW2SW_MPT), port 1 closed, the EQs
//! returned after their interrupt handlers have finished, the HCA closed
//! and the firmware's memory taken back (CLOSE_HCA, UNMAP_ICM,
//! UNMAP_ICM_AUX, UNMAP_FA), the command interface marked dead and the
//! ownership word cleared. If the adapter kept any of them, it is reset
//! first (`reset.rs`). Verbs and kernel contexts still open then get -ENODEV. A probe that
//! fails half-way, or an adapter dropped without unbind, goes the same way
//! (`Firmware`'s drop).

pub(crate) mod dev_cap;
pub(crate) mod icm;
pub(crate) mod icm_pages;
mod numbers;
pub(crate) mod port;

use dev_cap::{DevCap, FwInfo};
use icm::{Icm, Profile};
use numbers::{numbers, Numbers};

use kernel::{
    device::{Bound, Core, Device},
    dma::{Device as _, DmaMask},
    io::{poll::read_poll_timeout, Mmio},
    new_mutex, pci,
    prelude::*,
    revocable::Revocable,
    sync::{
        aref::ARef,
        atomic::{Atomic, Relaxed},
        Mutex,
    },
    time::Delta,
};

use crate::{
    geometry::{CQ_LOG_ENTRIES, KERNEL_QPS, KERNEL_SEND_CQS, RCQ_LOG_ENTRIES, SQ_ENTRIES},
    hw::cmd::{CmdIf, CmdState, Command, Op, BAR0_SIZE},
    hw::memory::mr,
    hw::memory::mtt::Pool,
    hw::queues::cq::{self, Cq, CqParams},
    hw::queues::eqs::Eqs,
    hw::queues::kernel_mem::{QueueDma, QueueMem},
    hw::queues::qp::{self, QpParams},
    hw::queues::{srq, user_qp},
    stats::QueueStats,
    wqe,
};

/// `NOP`'s in_modifier: "finish as soon as possible".
const NOP_IN_MOD: u32 = 0x1f;
/// How long the NOP's event may take to arrive as an interrupt.
const NOP_IRQ_TIMEOUT_MS: i64 = 1000;

/// The adapter's firmware as this driver brought it up: the command
/// interface, what QUERY_FW and QUERY_DEV_CAP said, the profile INIT_HCA
/// set up and the memory it holds, the EQs, port 1, and the posting gate.
/// Dropping it takes all of that down (`shutdown`).
#[pin_data(PinnedDrop)]
pub(crate) struct Firmware {
    pub(crate) cmd: Pin<KBox<CmdIf>>,
    pub(crate) fw: FwInfo,
    pub(crate) dev_cap: DevCap,
    /// What INIT_HCA set up: the numbers of QPs, CQs, MPTs, MTT entries.
    pub(crate) profile: Profile,
    /// The firmware area and ICM; taken at shutdown, once given back.
    /// Locked inside the command lock.
    #[pin]
    icm: Mutex<Option<Icm>>,
    pdev: ARef<pci::Device>,
    /// Port 1's LID (PortInfo), once it is up.
    lid: Atomic<u32>,
    /// The EQs the profile and the CPUs allow; those the MSI-X vectors
    /// allow are in the device once started.
    pub(crate) eqs: Eqs,
    dma: QueueDma,
    /// CQ slot `i` is CQ number `first_cqn + i`.
    first_cqn: u32,
    /// Posts to the device run inside this; unbind revokes it first.
    #[pin]
    pub(crate) posting: Revocable<()>,
    pub(crate) stats: QueueStats,
}

/// The longest DMA segment, set as the device's at probe (mlx4_core's).
const MAX_DMA_SEGMENT: u32 = 1 << 30;

/// Maps BAR0, takes ownership, starts the firmware, sets up ICM and the
/// HCA, and allocates the queue memory. If anything fails after the
/// ownership was taken, what was done is undone (`abort`) and `CmdIf`'s
/// drop gives the ownership back.
pub(crate) fn probe(pdev: &pci::Device<Core<'_>>) -> Result<(Pin<KBox<Firmware>>, QueueMem)> {
    let dev = pdev.as_ref();
    // SAFETY: Called once in probe, before any DMA allocation for `pdev`.
    unsafe { pdev.dma_set_mask_and_coherent(DmaMask::new::<64>())? };
    // mlx4_core's 1 GiB: the PCI core's default is 64 KiB per segment, and
    // a memory region's pages (`ib_umem_get()`) are mapped in longer ones.
    // SAFETY: As above.
    unsafe { pdev.dma_set_max_seg_size(MAX_DMA_SEGMENT) };
    let bar0 = pdev
        .iomap_region_sized::<BAR0_SIZE>(0, c"mlx4_bf")?
        .into_devres()?;
    let cmd = CmdIf::new(pdev, bar0)?;
    // mlx4_get_ownership(): reading 0 takes the device.
    let owner = cmd.read_owner()?;
    if owner != 0 {
        dev_err!(
            dev,
            "owned by another driver: ownership word BAR0+{:#x} reads {:#x}\n",
            <crate::hw::cmd::regs::OWNER as kernel::io::register::Register>::OFFSET,
            owner
        );
        return Err(EBUSY);
    }
    cmd.sync_toggle()?;
    let fw = dev_cap::query_fw(&cmd)?;
    let mut icm = Icm::new();
    let up = bring_up(pdev, &cmd, &fw, &mut icm);
    let (dev_cap, profile, numbers, mem) = match up {
        Ok(up) => up,
        Err(e) => {
            abort(pdev, &cmd, icm);
            return Err(e);
        }
    };
    let dma = mem.dma();
    let eqs = Eqs::new(numbers.first_eqn, numbers.eqs)?;
    let firmware = KBox::pin_init(
        try_pin_init!(Firmware {
            cmd,
            fw,
            dev_cap,
            profile,
            icm <- new_mutex!(Some(icm)),
            pdev: ARef::from(&**pdev),
            lid: Atomic::new(0),
            eqs,
            dma,
            first_cqn: numbers.first_cqn,
            posting <- Revocable::new(()),
            stats: QueueStats::new(),
        }),
        GFP_KERNEL,
    )?;
    Ok((firmware, mem))
}

/// The part of the probe that gives the adapter memory: firmware, ICM,
/// INIT_HCA, the queue memory and its MTT entries.
fn bring_up(
    pdev: &pci::Device<Core<'_>>,
    cmd: &CmdIf,
    fw: &FwInfo,
    icm: &mut Icm,
) -> Result<(DevCap, Profile, Numbers, QueueMem)> {
    let dev = pdev.as_ref();
    icm.start(dev, cmd, fw.fw_pages)?;
    let dev_cap = dev_cap::query_dev_cap(cmd)?;
    dev_cap.check(
        dev,
        SQ_ENTRIES.ilog2() as u8,
        CQ_LOG_ENTRIES as u8,
        wqe::MAX_WQE_LEN,
    )?;
    let num_uars =
        u32::try_from(dev_cap.uar_size / crate::layout::PAGE_SIZE).map_err(|_| ENODEV)?;
    let profile = icm.init_hca(dev, cmd, &dev_cap, num_uars)?;
    let numbers = numbers(dev, &dev_cap, &profile)?;
    cmd.lock().live.size(
        profile.num_cqs - numbers.first_cqn,
        (profile.num_qps, profile.num_srqs),
        profile.num_mpts,
    )?;
    let mem = QueueMem::new(dev)?;
    let mtt = &profile.queue_mtt;
    let fw = &*icm;
    mtt.write_pool(Pool::Eq, mem.eq.dma_handle(), |f, p| fw.write_mtt(f, p))?;
    mtt.write_pool(Pool::SendCqs, mem.cqs.dma_handle(), |f, p| {
        fw.write_mtt(f, p)
    })?;
    Ok((dev_cap, profile, numbers, mem))
}

/// Undoes a bring-up that failed half-way: the firmware gives its memory
/// back, or the adapter is reset before the memory is freed.
fn abort(pdev: &pci::Device, cmd: &CmdIf, mut icm: Icm) {
    let given_back = icm.close(cmd, &mut cmd.lock());
    if !given_back {
        crate::sys::reset::last_resort(pdev, || cmd.write_reset());
    }
    drop(icm);
}

impl Firmware {
    /// The bring-up that needs the adapter and the interrupt handlers of
    /// its first `vectors` MSI-X vectors: SW2HW_EQ of an EQ per vector (at
    /// most `Eqs::wanted`), MAP_EQ of the async one, each armed, NOP
    /// with an event, port 1 up. `uar` is the adapter's UAR area (an EQ's
    /// doorbell is in page `eqn / 4`).
    pub(crate) fn start(&self, dev: &Device<Bound>, uar: &Mmio, vectors: usize) -> Result {
        self.eqs
            .start(&self.cmd, &self.profile.queue_mtt, uar, vectors)?;
        let before = self.stats.cmd_events();
        let nop = self.cmd.exec(
            &mut self.cmd.lock(),
            Command::new(Op::Nop, NOP_IN_MOD).event(),
        );
        // mlx4_setup_hca(): the NOP must raise an interrupt. Commands are
        // polled, so a lost interrupt costs only the async events: warn.
        let seen = nop.and_then(|()| {
            read_poll_timeout(
                || Ok(self.stats.cmd_events()),
                |n| *n != before,
                Delta::from_millis(1),
                Delta::from_millis(NOP_IRQ_TIMEOUT_MS),
            )
        });
        match seen {
            Err(e) if e == ETIMEDOUT => {
                dev_warn!(dev, "NOP command failed to generate an MSI-X interrupt\n");
            }
            r => r.map(|_| ())?,
        }
        self.open_port(dev)
    }

    /// INIT_PORT of port 1 and its LID from PortInfo.
    fn open_port(&self, dev: &Device<Bound>) -> Result {
        let mut st = self.cmd.lock();
        port::init(&self.cmd, &mut st)?;
        st.live.port = true;
        let info = port::query(&self.cmd, &mut st)?;
        if !info.active {
            // The link may come up later; QPs connect anyway.
            dev_warn!(dev, "port {} is not active\n", port::PORT);
        }
        self.lid.store(u32::from(info.lid), Relaxed);
        Ok(())
    }

    /// Port 1's LID, the remote LID of every QP's primary path.
    pub(crate) fn lid(&self) -> u16 {
        self.lid.load(Relaxed) as u16
    }

    /// UAR pages below this are the kernel's (`Eqs::kernel_uars`).
    pub(crate) fn kernel_uars(&self) -> u32 {
        self.eqs.kernel_uars()
    }

    /// The MTT entries of a queue pool allocated after the probe (QP
    /// buffers, areas), physically contiguous from `dma`.
    pub(crate) fn write_pool_mtt(&self, pool: Pool, dma: u64) -> Result {
        self.profile
            .queue_mtt
            .write_pool(pool, dma, |f, p| self.write_mtt(f, p))
    }

    /// MTT entries `first..` for `pages` (a memory region's).
    pub(crate) fn write_mtt(&self, first: u32, pages: &[u64]) -> Result {
        let fw = self.icm.lock();
        Option::as_ref(&fw).ok_or(ENODEV)?.write_mtt(first, pages)
    }

    /// Takes the device down (see the module documentation); idempotent.
    /// `sync_irq` waits for a running interrupt handler. If the adapter
    /// keeps any QP, CQ, EQ or MPT, it is reset (`reset::last_resort`)
    /// before the caller frees or unpins the memory they name.
    pub(crate) fn shutdown(&self, sync_irq: impl FnOnce(), pdev: &pci::Device) {
        // No post starts after this, and those running have finished.
        self.posting.revoke();
        let mut st = self.cmd.lock();
        if st.dead {
            return;
        }
        for slot in 0..KERNEL_QPS {
            qp::destroy(&self.cmd, &mut st, slot);
        }
        user_qp::reset_all(&self.cmd, &mut st);
        // No QP receives from them any more.
        srq::destroy_all(&self.cmd, &mut st);
        let mut next = 0;
        while let Some(slot) = st.live.cqs.next(next) {
            // A CQ left in the device is what `live.any()` finds below.
            let _ = cq::destroy(&self.cmd, &mut st, slot, self.cqn(slot));
            next = slot + 1;
        }
        // No QP is left to use them: the memory regions go last.
        let mut next = 0;
        while let Some(slot) = st.live.mpts.next(next) {
            let _ = mr::mpt_destroy(&self.cmd, &mut st, slot);
            next = slot + 1;
        }
        if core::mem::take(&mut st.live.port) {
            // A failure is logged; CLOSE_HCA takes the port down anyway.
            let _ = port::close(&self.cmd, &mut st);
        }
        self.eqs.quiesce();
        sync_irq();
        self.eqs.destroy(&self.cmd, &mut st);
        let mut icm = self.icm.lock();
        // The HCA goes only once nothing is left in it.
        let given_back =
            !st.live.any() && Option::as_mut(&mut icm).is_none_or(|f| f.close(&self.cmd, &mut st));
        st.dead = true;
        if !given_back {
            crate::sys::reset::last_resort(pdev, || self.cmd.write_reset());
            // The reset took everything out of the adapter.
            st.live.forget_all();
        }
        // Nothing of it is the adapter's any more.
        drop(Option::take(&mut icm));
        drop(icm);
        drop(st);
        self.cmd.free_ownership();
    }

    /// The CQ number of CQ slot `slot` (below [`Firmware::cq_slots`]).
    pub(crate) fn cqn(&self, slot: usize) -> u32 {
        self.first_cqn + slot as u32
    }

    /// CQ slots: every CQ of the profile above the firmware's.
    pub(crate) fn cq_slots(&self) -> usize {
        (self.profile.num_cqs - self.first_cqn) as usize
    }

    /// A CQ for the context owning UAR `uar`. `clear` empties the buffer of
    /// the slot it is given (in a short RCU section of the hardware, which
    /// the caller holds); the command runs outside it.
    pub(crate) fn open_cq(
        &self,
        uar: u32,
        clear: impl FnOnce(usize, &CmdState) -> Result,
    ) -> Result<Cq> {
        let mut st = self.cmd.lock();
        if st.dead {
            return Err(ENODEV);
        }
        let slot = st.live.free_cq(0..KERNEL_SEND_CQS).ok_or(ENOSPC)?;
        clear(slot, &st)?;
        let p = Cq::send_cq_params(
            (&self.dma, &self.profile.queue_mtt),
            slot,
            self.cqn(slot),
            uar,
            self.eqs.comp_eqn(0),
        )?;
        Cq::create(&self.cmd, &mut st, &p)
    }

    pub(crate) fn close_cq(&self, cq: &Cq) {
        // Failed, the slot stays the device's (`cq::destroy`).
        let _ = cq::destroy(&self.cmd, &mut self.cmd.lock(), cq.slot, cq.cqn);
    }

    /// SW2HW_CQ of the receive CQ of the QP in `qp_slot`, with its ring at
    /// byte `off` of `pool` and its doorbell record at DMA address
    /// `db_rec`; returns its CQN and the `Live::cqs` bit that records it.
    pub(crate) fn open_recv_cq(
        &self,
        qp_slot: usize,
        uar: u32,
        (pool, off): (Pool, usize),
        db_rec: u64,
    ) -> Result<(u32, usize)> {
        if qp_slot >= KERNEL_QPS {
            return Err(EINVAL);
        }
        let live_bit = KERNEL_SEND_CQS + qp_slot;
        let cqn = self.cqn(live_bit);
        let mut st = self.cmd.lock();
        if st.dead {
            return Err(ENODEV);
        }
        let p = CqParams {
            live_bit,
            cqn,
            log_entries: RCQ_LOG_ENTRIES,
            uar,
            eqn: self.eqs.comp_eqn(0),
            buf_mtt: self.profile.queue_mtt.addr(pool, off)?,
            db_rec,
            // One 4 KiB page.
            log_page_size: 0,
            timestamp: false,
        };
        cq::create(&self.cmd, &mut st, &p)?;
        Ok((cqn, live_bit))
    }

    pub(crate) fn close_recv_cq(&self, cqn: u32, live_bit: usize) {
        // Failed, the QP's receive CQ is still in hardware: `recv_cq_in_hw`.
        let _ = cq::destroy(&self.cmd, &mut self.cmd.lock(), live_bit, cqn);
    }

    pub(crate) fn create_qp(&self, p: &QpParams, slot: usize) -> Result {
        qp::create(&self.cmd, &mut self.cmd.lock(), p, slot)
    }

    /// Takes the QP in `slot` through RESET and up to RTS again with `p`
    /// (a new remote QPN). If it fails the QP is left in RESET (or ERR).
    pub(crate) fn reconnect_qp(&self, p: &QpParams, slot: usize) -> Result {
        let mut st = self.cmd.lock();
        if st.dead {
            return Err(ENODEV);
        }
        qp::destroy(&self.cmd, &mut st, slot);
        qp::create(&self.cmd, &mut st, p, slot)
    }

    pub(crate) fn destroy_qp(&self, slot: usize) {
        qp::destroy(&self.cmd, &mut self.cmd.lock(), slot);
    }

    /// Whether the receive CQ recorded under `live_bit` is (still) in the
    /// device: its HW2SW_CQ failed, and it may still write its ring.
    pub(crate) fn recv_cq_in_hw(&self, live_bit: usize) -> bool {
        live_bit < KERNEL_SEND_CQS + KERNEL_QPS && self.cmd.lock().live.cq(live_bit)
    }

    /// Whether a QP is (still) in the device under send-queue slot `slot`.
    pub(crate) fn qp_in_hw(&self, slot: usize) -> bool {
        self.cmd.lock().live.qps.get(slot).is_some_and(|&q| q != 0)
    }

    /// Whether the provider's QP `qpn` is (still) in the device.
    pub(crate) fn user_qp_in_hw(&self, qpn: u32) -> bool {
        self.cmd.lock().live.user_qps.contains(qpn as usize)
    }

    /// Whether the provider's SRQ `srqn` is (still) in the device.
    pub(crate) fn srq_in_hw(&self, srqn: u32) -> bool {
        self.cmd.lock().live.srqs.contains(srqn as usize)
    }
}

/// An adapter dropped without `shutdown()` (a probe that failed after the
/// bring-up) is taken down here; after unbind this finds it dead.
#[pinned_drop]
impl PinnedDrop for Firmware {
    fn drop(self: Pin<&mut Self>) {
        let pdev = self.pdev.clone();
        self.shutdown(|| (), &pdev);
    }
}
