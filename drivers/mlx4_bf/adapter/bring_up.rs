// SPDX-License-Identifier: GPL-2.0

//! How an adapter is brought up at probe and taken down at unbind: the
//! firmware (`hw/firmware.rs`), BAR2 and the memory of its queues and
//! posts, its interrupts; and [`Running`], whose drop is the teardown.

use kernel::{
    debugfs::Dir,
    device::{Bound, Core, Device},
    devres::Devres,
    dma::Coherent,
    irq::{self, IrqReturn},
    new_condvar, new_mutex, pci,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Acquire, Atomic},
        Arc,
    },
};

use super::{events::Routed, Adapter, EventRouter, NumberRange, QpTable, QpnPool, Resources};
use crate::{
    geometry::{
        FIRST_PROVIDER_CQ, KERNEL_QPN_END, KERNEL_QPS, KPING_ENDS, KPING_END_BYTES, MAX_EQS,
        QP_BUF_BYTES,
    },
    hw::{
        self,
        bf::{bar2::Bar2, writer::Writer},
        firmware::{dev_cap::DevCap, Firmware},
        memory::{
            mr::MrTable,
            mtt::Pool,
            recv_area::{AREAS, AREAS_BYTES},
        },
        queues::kernel_mem::QueueMem,
    },
    layout::{self, Caps},
    module_parameters,
    stats::{self, DeviceStats},
    uar_alloc::{self, UarAllocator},
};

/// An adapter that is up: its interrupt registrations, and the teardown
/// (`Firmware::shutdown`) when unbound or when probe fails after bring-up.
pub(crate) struct Running {
    pub(crate) adapter: Arc<Adapter>,
    /// For the teardown's last resort (`reset.rs`).
    pdev: ARef<pci::Device>,
    /// A handler per MSI-X vector, vector `i` for EQ `i`.
    irqs: KVec<Pin<KBox<irq::Registration<EqHandler>>>>,
}

impl Running {
    /// At unbind: the handlers are waited for through the bound device
    /// (not `try_synchronize()`, which would wait inside an RCU section).
    pub(crate) fn shutdown(&self, dev: &kernel::device::Device<Bound>) {
        self.adapter.firmware.shutdown(
            || {
                for irq in &self.irqs {
                    let _ = irq.synchronize(dev);
                }
            },
            &self.pdev,
        );
        // The interrupt is quiet: no event is recorded any more.
        self.adapter.router.stop();
        // Every MPT is out of the device: no region is registered any more.
        self.adapter.mrs.lock().close();
        // Waiters see the adapter gone.
        self.adapter.events.notify_all();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // A no-op after unbind(). When probe fails after bring-up, the
        // handlers are waited for by freeing the interrupts (free_irq()).
        let irqs = &mut self.irqs;
        self.adapter.firmware.shutdown(|| irqs.clear(), &self.pdev);
        self.adapter.router.stop();
    }
}

/// The device counters as debugfs shows them.
pub(crate) fn show_stats(
    adapter: &Arc<Adapter>,
    f: &mut kernel::fmt::Formatter<'_>,
) -> kernel::fmt::Result {
    writeln!(f, "contexts {}", adapter.contexts())?;
    {
        let mrs = adapter.mrs.lock();
        writeln!(f, "mrs {}", mrs.count())?;
    }
    stats::show(&adapter.stats.snapshot(), f)?;
    adapter.firmware.stats.show(f)
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
pub(crate) fn new_adapter(pdev: &pci::Device<Core<'_>>, name: &'static CStr) -> Result<Running> {
    // The ID table names mlx4 functions only; a function bound to the
    // driver by hand is not talked to.
    let vendor = pdev.vendor_id();
    if vendor != pci::Vendor::MELLANOX {
        dev_err!(pdev.as_ref(), "vendor {} is not Mellanox\n", vendor);
        return Err(ENODEV);
    }
    pdev.enable_device_mem()?;
    pdev.set_master();
    let (firmware, queues) = hw::firmware::probe(pdev)?;
    let (caps, writer) = probe_caps(pdev, &firmware.dev_cap)?;
    let resources = alloc_resources(pdev, &caps, writer, queues)?;
    announce(pdev, &firmware, &caps, writer, name);
    // The adapter finds the queues in these pools through the MTT.
    firmware.write_pool_mtt(Pool::KernelQps, resources.qp_pool.dma_handle())?;
    for area in 0..AREAS {
        firmware.write_pool_mtt(Pool::Area(area), resources.recv_area(area)?.dma_base())?;
    }
    let mrs = MrTable::new(&firmware.dev_cap, &firmware.profile)?;
    let kernel_uars = firmware.kernel_uars();
    let router = EventRouter::new(
        firmware.cqn(FIRST_PROVIDER_CQ),
        firmware.cq_slots() - FIRST_PROVIDER_CQ,
    )?;
    // The provider's PDs above every kernel context's (a UAR index) and the
    // firmware's reserved ones.
    let rdma = &firmware.dev_cap.rdma;
    let pds = NumberRange::new(caps.num_uars.max(rdma.reserved_pds), rdma.max_pds)?;
    let user_qpns = QpnPool::new(firmware.profile.num_qps)?;
    let srqns = NumberRange::new(firmware.dev_cap.reserved_srqs, firmware.profile.num_srqs)?;
    let adapter = Arc::pin_init(
        try_pin_init!(Adapter {
            caps,
            writer,
            resources: Devres::new(pdev.as_ref(), resources)?,
            uars <- new_mutex!(UarAllocator::with_reserved(caps.num_uars, kernel_uars)),
            qps <- new_mutex!(QpTable::new(KERNEL_QPN_END)),
            areas_used <- new_mutex!(0),
            mrs <- new_mutex!(mrs),
            events <- new_condvar!("mlx4_bf events"),
            stats <- DeviceStats::new(),
            debugfs: Dir::new(name),
            firmware,
            router,
            pds <- new_mutex!(pds),
            user_qpns <- new_mutex!(user_qpns),
            srqns <- new_mutex!(srqns),
            port_tables: Atomic::new(0),
        }),
        GFP_KERNEL,
    )?;
    start(pdev, adapter)
}

/// The memory the adapter's queues and posts use, and BAR2 mapped.
fn alloc_resources(
    pdev: &pci::Device<Core<'_>>,
    caps: &Caps,
    writer: Writer,
    queues: QueueMem,
) -> Result<Resources> {
    let dev = pdev.as_ref();
    Ok(Resources {
        bar2: Bar2::new(pdev, caps, writer.mapping())?,
        qp_pool: Coherent::zeroed_slice(dev, KERNEL_QPS * QP_BUF_BYTES, GFP_KERNEL)?,
        queues,
        kping_pool: Coherent::zeroed_slice(dev, KPING_ENDS * KPING_END_BYTES, GFP_KERNEL)?,
        recv_areas: Coherent::zeroed_slice(dev, AREAS_BYTES, GFP_KERNEL)?,
    })
}

/// What probe found, in two lines of the kernel log.
fn announce(
    pdev: &pci::Device<Core<'_>>,
    firmware: &Firmware,
    caps: &Caps,
    writer: Writer,
    name: &CStr,
) {
    let fw = &firmware.fw;
    dev_info!(
        pdev.as_ref(),
        "firmware {}.{}.{} (cmd_if_rev {}), {} BlueFlame registers per page\n",
        fw.major,
        fw.minor,
        fw.subminor,
        fw.cmd_if_rev,
        firmware.dev_cap.bf_regs_per_page
    );
    dev_info!(
        pdev.as_ref(),
        "BAR2 {} KiB: {} UARs, BlueFlame register {} B, {} writer, debugfs {}\n",
        caps.bar2_len / 1024,
        caps.num_uars,
        caps.bf_reg_size,
        writer.name(),
        name.to_str().unwrap_or("?")
    );
}

/// The names of the EQs' interrupts in /proc/interrupts, by `Eq::index`
/// (mlx4_core's are "mlx4-async@pci:…" and "mlx4-N@…").
const IRQ_NAMES: [&CStr; MAX_EQS] = [
    c"mlx4_bf-async",
    c"mlx4_bf-comp0",
    c"mlx4_bf-comp1",
    c"mlx4_bf-comp2",
    c"mlx4_bf-comp3",
    c"mlx4_bf-comp4",
    c"mlx4_bf-comp5",
    c"mlx4_bf-comp6",
];

/// The bring-up that needs the adapter: an MSI-X vector and its handler
/// per EQ (at least one: the async EQ then takes the completions too),
/// then the EQs, the NOP's interrupt and port 1 (`Firmware::start`).
fn start(pdev: &pci::Device<Core<'_>>, adapter: Arc<Adapter>) -> Result<Running> {
    let wanted = adapter.firmware.eqs.wanted() as u32;
    let vectors = pdev
        .alloc_irq_vectors(1, wanted, pci::IrqTypes::default().with(pci::IrqType::MsiX))
        .inspect_err(|e| dev_err!(pdev.as_ref(), "no MSI-X vector: {:?}\n", e))?;
    let mut irqs = KVec::new();
    for (index, vector) in pci::IrqVector::iter(&vectors).enumerate() {
        let name = *IRQ_NAMES.get(index).ok_or(EINVAL)?;
        let irq = KBox::pin_init(
            pdev.request_irq(
                vector,
                irq::Flags::TRIGGER_NONE,
                name,
                Ok::<_, Error>(EqHandler {
                    adapter: adapter.clone(),
                    index,
                }),
            ),
            GFP_KERNEL,
        )?;
        irqs.push(irq, GFP_KERNEL)?;
    }
    // From here on a failure takes the device down again (Running's drop).
    let up = Running {
        adapter,
        pdev: pdev.into(),
        irqs,
    };
    {
        let hw = up.adapter.resources.access(pdev.as_ref())?;
        let fw = &up.adapter.firmware;
        fw.start(pdev.as_ref(), hw.bar2.uar(), up.irqs.len())?;
        dev_info!(
            pdev.as_ref(),
            "{} EQs on as many MSI-X vectors: {} completion vectors\n",
            fw.eqs.up().len(),
            fw.eqs.comp_vectors()
        );
    }
    Ok(up)
}

/// The MSI-X handler of EQ `index`.
pub(crate) struct EqHandler {
    pub(crate) adapter: Arc<Adapter>,
    index: usize,
}

impl irq::Handler for EqHandler {
    fn handle(&self, dev: &Device<Bound>) -> IrqReturn {
        let fw = &self.adapter.firmware;
        fw.stats.interrupt();
        let Some(eq) = fw.eqs.get(self.index) else {
            return IrqReturn::None;
        };
        if !eq.live.load(Acquire) {
            return IrqReturn::Handled;
        }
        // The registration is dropped before the device's resources are
        // released, so the hardware is still there while this runs.
        let Ok(hw) = self.adapter.resources.access(dev) else {
            return IrqReturn::None;
        };
        let router = &self.adapter.router;
        let (mut kernel, mut provider) = (false, false);
        // An EQE the driver cannot read is a driver bug; still re-arm.
        let _ = eq.poll(&hw.queues, &fw.stats, |e| match router.record(e) {
            Routed::KernelContexts => kernel = true,
            Routed::Provider => provider = true,
            Routed::Nothing => (),
        });
        let _ = eq.arm(hw.bar2.uar());
        if kernel {
            // Waiters look at their receive CQs; the CQ that fired is one of them.
            self.adapter.events.notify_all();
        }
        if provider {
            EventRouter::kick(router);
        }
        IrqReturn::Handled
    }
}
