// SPDX-License-Identifier: GPL-2.0

//! One bound adapter: its hardware (revoked at unbind), its tables, the
//! memory its contexts map, and how it is brought up and taken down.

use kernel::{
    debugfs::Dir,
    device::{Bound, Core, Device},
    devres::Devres,
    dma::Coherent,
    irq::{self, IrqReturn},
    new_mutex, new_poll_condvar, pci,
    prelude::*,
    sync::{aref::ARef, atomic::Acquire, poll::PollCondVar, Arc, Mutex},
};

use crate::{
    hw::bar2::Bar2,
    hw::fw::DevCap,
    hw::geometry::{
        FIRST_QPN, KPING_ENDS, KPING_END_BYTES, MAX_QPS, QPN_LIMIT, QP_BUF_BYTES, SEND_BUFS_BYTES,
    },
    hw::hca::{self, Hca},
    hw::mr::MrTable,
    hw::mtt::Pool,
    hw::queue_mem::HcaMem,
    hw::stats::{self, DeviceStats},
    hw::umem::{UserMem, AREAS},
    hw::writer::Writer,
    layout::{self, Caps},
    module_parameters,
    sys::usermap::UserMaps,
    uar_alloc::{self, UarAllocator},
    wqe,
};

/// The hardware resources that go away when the device is unbound.
pub(crate) struct Hw {
    pub(crate) bar2: Bar2,
    /// `MAX_QPS` QP buffers of `QP_BUF_BYTES`.
    pub(crate) qp_pool: Coherent<[u8]>,
    /// `MAX_QPS` times `SEND_BUFS_BYTES`: messages POST_SEND copied in.
    pub(crate) send_pool: Coherent<[u8]>,
    /// The EQ and CQ memory.
    pub(crate) hca: HcaMem,
    /// `KPING_ENDS` times `KPING_END_BYTES`: the kernel ping's buffers.
    pub(crate) kping_pool: Coherent<[u8]>,
}

/// Send-queue slots and QP numbers of one adapter.
pub(crate) struct QpTable {
    used_slots: u64,
    next_qpn: u32,
    /// QPNs handed out lie in `FIRST_QPN..qpn_limit`.
    qpn_limit: u32,
    /// The QPN of each slot in use (0: free).
    qpns: [u32; MAX_QPS],
    /// Protection domain of each slot's QP: its context's UAR index.
    pds: [u32; MAX_QPS],
}

impl QpTable {
    fn new(qpn_limit: u32) -> Self {
        QpTable {
            used_slots: 0,
            next_qpn: FIRST_QPN,
            qpn_limit,
            qpns: [0; MAX_QPS],
            pds: [0; MAX_QPS],
        }
    }

    /// A free send-queue slot and a BlueFlame-safe QPN no QP uses; QPNs
    /// wrap back to `FIRST_QPN` at the limit.
    pub(crate) fn alloc(&mut self, pd: u32) -> Option<(usize, u32)> {
        let slot = (!self.used_slots).trailing_zeros() as usize;
        if slot >= MAX_QPS {
            return None;
        }
        let mut qpn = wqe::next_bf_safe_qpn(self.next_qpn);
        // At most MAX_QPS - 1 others are in use: this ends on a free QPN.
        for _ in 0..=MAX_QPS {
            if !(FIRST_QPN..self.qpn_limit).contains(&qpn) {
                qpn = wqe::next_bf_safe_qpn(FIRST_QPN);
            }
            if !self.qpns.contains(&qpn) {
                break;
            }
            qpn = wqe::next_bf_safe_qpn(qpn + 1);
        }
        self.next_qpn = wqe::next_bf_safe_qpn(qpn + 1);
        self.used_slots |= 1 << slot;
        self.qpns[slot] = qpn;
        self.pds[slot] = pd;
        Some((slot, qpn))
    }

    pub(crate) fn free(&mut self, slot: usize) {
        if slot < MAX_QPS {
            self.used_slots &= !(1 << slot);
            self.qpns[slot] = 0;
            self.pds[slot] = 0;
        }
    }

    /// The protection domain of QP `qpn`, if it exists.
    pub(crate) fn pd(&self, qpn: u32) -> Option<u32> {
        let slot = self.qpns.iter().position(|&q| q == qpn && q != 0)?;
        Some(self.pds[slot])
    }
}

/// One bound adapter, shared by its open contexts.
#[pin_data]
pub(crate) struct Adapter {
    pub(crate) caps: Caps,
    pub(crate) writer: Writer,
    pub(crate) hw: Devres<Hw>,
    #[pin]
    pub(crate) uars: Mutex<UarAllocator>,
    #[pin]
    pub(crate) qps: Mutex<QpTable>,
    /// The memory contexts map (outside `hw`: mappings may outlive unbind).
    pub(crate) umem: UserMem,
    /// Areas of `umem` in use (bit = area).
    #[pin]
    pub(crate) areas: Mutex<u64>,
    /// Memory regions of all contexts (`mr.rs`).
    #[pin]
    pub(crate) mrs: Mutex<MrTable>,
    /// Where BAR2 starts, for the pages contexts map (`usermap.rs`).
    pub(crate) bar2_start: u64,
    /// The files that map BAR pages, zapped at unbind.
    #[pin]
    pub(crate) user_maps: Mutex<UserMaps>,
    /// Woken by completion events and by unbind: pollers look at their CQs.
    #[pin]
    pub(crate) events: PollCondVar,
    #[pin]
    pub(crate) stats: DeviceStats,
    /// `/sys/kernel/debug/mlx4_bf<N>/`: the device's and each context's counters.
    pub(crate) debugfs: Dir,
    /// The command interface and EQ.
    pub(crate) hca: Pin<KBox<Hca>>,
}

/// An adapter that is up: its interrupt registration, and the teardown
/// (`Hca::shutdown`) when unbound or when probe fails after bring-up.
pub(crate) struct HcaUp {
    pub(crate) adapter: Arc<Adapter>,
    /// For the teardown's last resort (`reset.rs`).
    pdev: ARef<pci::Device>,
    irq: Option<Pin<KBox<irq::Registration<EqHandler>>>>,
}

impl HcaUp {
    /// At unbind: the handler is waited for through the bound device (not
    /// `try_synchronize()`, which would wait inside an RCU section).
    pub(crate) fn shutdown(&self, dev: &kernel::device::Device<Bound>) {
        self.adapter.hca.shutdown(
            || {
                if let Some(irq) = self.irq.as_ref() {
                    let _ = irq.synchronize(dev);
                }
            },
            &self.pdev,
        );
        // Every MPT is out of the device: unmap while still bound, unpin
        // outside the lock.
        let pinned = self.adapter.mrs.lock().release_all();
        drop(pinned);
        // Pollers see the adapter gone (POLLHUP).
        self.adapter.events.notify_all();
    }
}

impl Drop for HcaUp {
    fn drop(&mut self) {
        // A no-op after unbind(). When probe fails after bring-up, the
        // handler is waited for by freeing the interrupt (free_irq()).
        let irq = &mut self.irq;
        self.adapter.hca.shutdown(|| drop(irq.take()), &self.pdev);
    }
}

/// The device counters as debugfs shows them.
pub(crate) fn show_stats(
    adapter: &Arc<Adapter>,
    f: &mut kernel::fmt::Formatter<'_>,
) -> kernel::fmt::Result {
    writeln!(f, "contexts {}", adapter.uars.lock().in_use())?;
    {
        let mrs = adapter.mrs.lock();
        writeln!(f, "mrs {}", mrs.count())?;
        writeln!(f, "pinned_pages {}", mrs.pinned_pages())?;
    }
    stats::show(&adapter.stats.snapshot(), f)?;
    adapter.hca.stats.show(f)
}

/// The BAR2 geometry from QUERY_DEV_CAP; the module parameters, if set, must
/// match it.
fn probe_caps(pdev: &pci::Device<Bound>, cap: &DevCap) -> Result<(Caps, Writer)> {
    #[allow(
        clippy::useless_conversion,
        reason = "resource_size_t is u32 on some 32-bit configs"
    )]
    let bar2_len = u64::from(pdev.resource_len(Bar2::BAR)?);
    // mlx4_dev_cap(): the UAR area must fit BAR2.
    if cap.uar_size > bar2_len {
        dev_err!(
            pdev.as_ref(),
            "UAR area of {:#x} bytes does not fit BAR2 of {:#x}\n",
            cap.uar_size,
            bar2_len
        );
        return Err(ENODEV);
    }
    let num_uars = u32::try_from(cap.uar_size / layout::PAGE_SIZE).map_err(|_| ENODEV)?;
    let bf_reg_size = cap.bf_reg_size;
    let param_uars = *module_parameters::num_uars.value();
    let param_bf = *module_parameters::bf_reg_size.value();
    for (name, param, device) in [
        ("num_uars", param_uars, num_uars),
        ("bf_reg_size", param_bf, bf_reg_size),
    ] {
        if param != 0 && param != device {
            dev_err!(
                pdev.as_ref(),
                "{}={} but the device has {}\n",
                name,
                param,
                device
            );
            return Err(EINVAL);
        }
    }
    let caps = Caps::new(bar2_len, num_uars, bf_reg_size).map_err(|e| {
        dev_err!(
            pdev.as_ref(),
            "{} UARs, BlueFlame register {} B: do not fit BAR2 of {:#x} bytes: {:?}\n",
            num_uars,
            bf_reg_size,
            bar2_len,
            e
        );
        ENODEV
    })?;
    if caps.num_uars as usize > uar_alloc::MAX_UARS {
        dev_err!(
            pdev.as_ref(),
            "{} UARs, at most {} supported\n",
            caps.num_uars,
            uar_alloc::MAX_UARS
        );
        return Err(EINVAL);
    }
    let w = *module_parameters::writer.value();
    let writer = Writer::from_abi(w).ok_or_else(|| {
        dev_err!(
            pdev.as_ref(),
            "writer={} unknown: 1 (store block) or 2 (write combining)\n",
            w
        );
        EINVAL
    })?;
    Ok((caps, writer))
}

/// The adapter brought up, with its interrupt and teardown.
pub(crate) fn new_adapter(pdev: &pci::Device<Core<'_>>, name: &'static CStr) -> Result<HcaUp> {
    // The ID table names mlx4 functions only; a function bound to the
    // driver by hand is not talked to.
    let vendor = pdev.vendor_id();
    if vendor != pci::Vendor::MELLANOX {
        dev_err!(pdev.as_ref(), "vendor {} is not Mellanox\n", vendor);
        return Err(ENODEV);
    }
    pdev.enable_device_mem()?;
    pdev.set_master();
    let (hca, mem) = hca::probe(pdev)?;
    let (caps, writer) = probe_caps(pdev, &hca.dev_cap)?;

    let qp_pool_len = MAX_QPS * QP_BUF_BYTES;
    let hw = Hw {
        bar2: Bar2::new(pdev, &caps, writer.mapping())?,
        qp_pool: Coherent::zeroed_slice(pdev.as_ref(), qp_pool_len, GFP_KERNEL)?,
        send_pool: Coherent::zeroed_slice(pdev.as_ref(), MAX_QPS * SEND_BUFS_BYTES, GFP_KERNEL)?,
        hca: mem,
        kping_pool: Coherent::zeroed_slice(
            pdev.as_ref(),
            KPING_ENDS * KPING_END_BYTES,
            GFP_KERNEL,
        )?,
    };
    dev_info!(
        pdev.as_ref(),
        "firmware {}.{}.{} (cmd_if_rev {}), {} BlueFlame registers per page\n",
        hca.fw.major,
        hca.fw.minor,
        hca.fw.subminor,
        hca.fw.cmd_if_rev,
        hca.dev_cap.bf_regs_per_page
    );
    dev_info!(
        pdev.as_ref(),
        "BAR2 {} KiB: {} UARs, BlueFlame register {} B, {} writer, /dev/{}\n",
        caps.bar2_len / 1024,
        caps.num_uars,
        caps.bf_reg_size,
        writer.name(),
        name.to_str().unwrap_or("?")
    );
    let qpn_limit = hca.qpn_limit.min(QPN_LIMIT);
    let umem = UserMem::new(pdev.as_ref())?;
    // The adapter finds the queues in these pools through the MTT.
    hca.write_pool_mtt(Pool::KernelQps, hw.qp_pool.dma_handle())?;
    for area in 0..AREAS {
        hca.write_pool_mtt(Pool::Area(area), umem.area(area)?.dma_base())?;
    }
    #[allow(
        clippy::useless_conversion,
        reason = "resource_size_t is u32 on some 32-bit configs"
    )]
    let bar2_start = u64::from(pdev.resource_start(Bar2::BAR)?);
    let mrs = MrTable::new(pdev.as_ref(), &hca.dev_cap, &hca.profile)?;
    let kernel_uars = hca.kernel_uars();
    let adapter = Arc::pin_init(
        try_pin_init!(Adapter {
            caps,
            writer,
            hw: Devres::new(pdev.as_ref(), hw)?,
            uars <- new_mutex!(UarAllocator::with_reserved(caps.num_uars, kernel_uars)),
            qps <- new_mutex!(QpTable::new(qpn_limit)),
            umem,
            areas <- new_mutex!(0),
            mrs <- new_mutex!(mrs),
            bar2_start,
            user_maps <- new_mutex!(UserMaps::new()),
            events <- new_poll_condvar!("mlx4_bf events"),
            stats <- DeviceStats::new(),
            debugfs: Dir::new(name),
            hca,
        }),
        GFP_KERNEL,
    )?;

    // One MSI-X vector, for the EQ.
    let vectors = pdev
        .alloc_irq_vectors(1, 1, pci::IrqTypes::default().with(pci::IrqType::MsiX))
        .inspect_err(|e| dev_err!(pdev.as_ref(), "no MSI-X vector: {:?}\n", e))?;
    let irq = KBox::pin_init(
        pdev.request_irq(
            *vectors.start(),
            irq::Flags::TRIGGER_NONE,
            c"mlx4_bf",
            Ok::<_, Error>(EqHandler {
                adapter: adapter.clone(),
            }),
        ),
        GFP_KERNEL,
    )?;
    // From here on a failure takes the device down again (HcaUp's drop).
    let up = HcaUp {
        adapter,
        pdev: pdev.into(),
        irq: Some(irq),
    };
    {
        let hw = up.adapter.hw.access(pdev.as_ref())?;
        up.adapter.hca.start(pdev.as_ref(), hw.bar2.uar())?;
    }
    Ok(up)
}

/// The MSI-X handler of the EQ.
pub(crate) struct EqHandler {
    pub(crate) adapter: Arc<Adapter>,
}

impl irq::Handler for EqHandler {
    fn handle(&self, dev: &Device<Bound>) -> IrqReturn {
        let hca = &self.adapter.hca;
        hca.stats.interrupt();
        if !hca.eq.live.load(Acquire) {
            return IrqReturn::Handled;
        }
        // The registration is dropped before the device's resources are
        // released, so the hardware is still there while this runs.
        let Ok(hw) = self.adapter.hw.access(dev) else {
            return IrqReturn::None;
        };
        // An EQE the driver cannot read is a driver bug; still re-arm.
        let completion = hca.eq.poll(&hw.hca, &hca.stats).unwrap_or(false);
        let _ = hca.eq.arm(hw.bar2.uar());
        if completion {
            // Pollers look at their receive CQs; the CQ that fired is one of them.
            self.adapter.events.notify_all();
        }
        IrqReturn::Handled
    }
}
