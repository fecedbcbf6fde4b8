// SPDX-License-Identifier: GPL-2.0

//! What the RDMA provider (drivers/mlx4_bf/ib/) makes in the adapter, with
//! plain values: protection domains, MTT ranges for the pages of its
//! `ib_umem`s, CQs and QPs in user memory with mainline mlx4_ib's geometry
//! and state machine (`qp_size`, `qp_context`), and its event dispatcher.
//! Memory regions over mapped pages are [`Adapter::register_mapped_mr`].
//!
//! Ports: `mlx4_pd_alloc()` (core/pd.c), `mlx4_mtt_init()` and
//! `mlx4_write_mtt()` (core/mr.c), `mlx4_cq_alloc()` and `mlx4_cq_free()`
//! (core/cq.c) as `mlx4_ib_create_user_cq()` calls them,
//! `mlx4_qp_reserve_range()`, `__mlx4_ib_modify_qp()` and the 2RST of
//! `destroy_qp_common()` (ib/qp.c).
//!
//! What the device may still use is never handed back: a CQ whose
//! HW2SW_CQ failed, a QP whose 2RST failed keep their slots, and the
//! caller must then keep their memory (pinned, mapped) until unbind has
//! reset the device. After unbind, whatever the provider still holds is
//! out of the device: taking it down succeeds without a command.

use kernel::{prelude::*, sync::Arc};

use super::{events::EventDispatch, number_pool::NumberPool, Adapter};
use crate::{
    geometry::{CQE_SIZE, FIRST_PROVIDER_CQ, KERNEL_QPN_END},
    hw::queues::{
        cq::{self, CqParams},
        user_qp,
    },
    qp_context::{
        self, query::Queried, QpAttr, QpCommand, QpFacts, QpFields, QpOp, QpSoft, Service,
    },
    qp_size::QpGeometry,
    region::{MTT_ENTRY_LEN, PAGE_SHIFT},
    sys::errno::eopnotsupp,
    verbs::{QpState, VerbsError},
    wqe,
};

/// The errno of a rule's refusal.
pub(crate) fn errno(e: VerbsError) -> Error {
    match e {
        VerbsError::Invalid => EINVAL,
        VerbsError::NotSupported => eopnotsupp(),
        VerbsError::Access => EACCES,
        VerbsError::Permission => EPERM,
    }
}

/// The provider's QPNs: the BlueFlame-safe ones from `KERNEL_QPN_END` up
/// to the profile's last (`mlx4_qp_reserve_range()`'s bitmap).
pub(crate) struct QpnPool(NumberPool);

impl QpnPool {
    pub(super) fn new(num_qps: u32) -> Result<Self> {
        Ok(QpnPool(NumberPool::new(wqe::bf_safe_count(
            KERNEL_QPN_END,
            num_qps,
        ))?))
    }

    /// QPs the provider may have.
    pub(super) fn count(&self) -> u32 {
        self.0.count()
    }
}

/// A run of MTT entries naming the pages of one buffer.
pub(crate) struct MttRange {
    first: u32,
    count: u32,
    page_shift: u32,
}

impl MttRange {
    /// The MTT byte address a verbs context names it by (`mlx4_mtt_addr()`).
    pub(crate) fn addr(&self) -> u64 {
        u64::from(self.first) * MTT_ENTRY_LEN
    }

    /// The verbs contexts' `log_page_size`: `page_shift - MLX4_ICM_PAGE_SHIFT`.
    pub(crate) fn log_page_size(&self) -> u8 {
        (self.page_shift - PAGE_SHIFT) as u8
    }

    /// Bytes its pages hold.
    pub(crate) fn bytes(&self) -> u64 {
        u64::from(self.count) << self.page_shift
    }
}

/// A CQ in user memory (`mlx4_ib_create_user_cq()`).
pub(crate) struct CqSpec<'a> {
    /// `log2` of its entries (`qp_size::cq_size()`).
    pub(crate) log_entries: u8,
    /// The ucontext's UAR, through which it is armed.
    pub(crate) uar: u32,
    /// Its ring's pages, which must hold `1 << log_entries` CQEs.
    pub(crate) mtt: &'a MttRange,
    /// DMA address of its doorbell record (`mlx4_ib_db_map_user()`).
    pub(crate) db_rec: u64,
    /// `IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION`.
    pub(crate) timestamp: bool,
    /// Its completion vector (`Eqs::comp_eqn`).
    pub(crate) vector: u32,
}

/// A CQ of the provider's in the device.
pub(crate) struct CqHandle {
    cqn: u32,
    slot: usize,
}

impl CqHandle {
    pub(crate) fn cqn(&self) -> u32 {
        self.cqn
    }
}

/// What a QP is, fixed at creation (`create_qp_common()` with udata).
pub(crate) struct QpSpec<'a> {
    pub(crate) service: Service,
    /// The ucontext's UAR: the QP's `usr_page`, its doorbells' page.
    pub(crate) uar: u32,
    /// Two of the provider's CQs (`CqHandle::cqn`).
    pub(crate) cqn_send: u32,
    pub(crate) cqn_recv: u32,
    /// `qp_size::user_qp()`'s.
    pub(crate) geometry: QpGeometry,
    pub(crate) sq_no_prefetch: bool,
    /// DMA address of the RQ doorbell record.
    pub(crate) db_rec: u64,
    /// The SRQ it receives from, if any.
    pub(crate) srqn: Option<u32>,
    /// The buffer's pages, which must hold `geometry.buf_size()` bytes.
    pub(crate) mtt: &'a MttRange,
}

/// A QP number of the provider's, with what mlx4_ib keeps between its
/// transitions. The caller serialises its modifications (mlx4_ib's
/// `qp->mutex`).
pub(crate) struct QpHandle {
    qpn: u32,
    pd: u32,
    soft: QpSoft,
}

impl QpHandle {
    pub(crate) fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The state its last successful transition left it in.
    pub(crate) fn state(&self) -> QpState {
        self.soft.state
    }
}

impl Adapter {
    /// A protection domain for the provider (`mlx4_pd_alloc()`); `-ENOSPC`
    /// when all are taken.
    pub(crate) fn alloc_pd(&self) -> Result<u32> {
        self.pds.lock().alloc().ok_or(ENOSPC)
    }

    /// Gives PD `pdn` back; nothing of it may be left in the device.
    pub(crate) fn free_pd(&self, pdn: u32) {
        self.pds.lock().free(pdn);
    }

    /// An MTT range for `pages`, DMA addresses of pages of `1 <<
    /// page_shift` bytes (12 to 31), each aligned to it, its entries
    /// written. `-ENOSPC` when the MTT has no run that long.
    pub(crate) fn alloc_mtt(&self, pages: &[u64], page_shift: u32) -> Result<MttRange> {
        let fw = &*self.firmware;
        let first = self.mrs.lock().alloc_mtt(
            |first, p: &[u64]| fw.write_mtt(first, p),
            pages,
            page_shift,
        )?;
        Ok(MttRange {
            first,
            count: pages.len() as u32,
            page_shift,
        })
    }

    /// Gives `range` back: the CQ or QP that used it is out of the device.
    pub(crate) fn free_mtt(&self, range: MttRange) {
        self.mrs.lock().free_mtt(range.first, range.count);
    }

    /// Whether `uar` may be a provider object's: a UAR verbs contexts get, not
    /// the kernel's (`Firmware::kernel_uars`).
    fn user_uar(&self, uar: u32) -> Result {
        if uar < self.firmware.kernel_uars() || uar >= self.caps.num_uars {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// SW2HW_CQ of a CQ in user memory with `mlx4_cq_alloc()`'s context,
    /// completions to the EQ of its completion vector.
    pub(crate) fn create_cq(&self, spec: &CqSpec<'_>) -> Result<CqHandle> {
        self.user_uar(spec.uar)?;
        self.check_cq_ring(spec.log_entries, spec.mtt)?;
        let fw = &*self.firmware;
        let mut st = fw.cmd.lock();
        if st.dead {
            return Err(ENODEV);
        }
        let slot = st
            .live
            .free_cq(FIRST_PROVIDER_CQ..fw.cq_slots())
            .ok_or(ENOSPC)?;
        let p = CqParams {
            live_bit: slot,
            cqn: fw.cqn(slot),
            log_entries: spec.log_entries.into(),
            uar: spec.uar,
            eqn: fw.eqs.comp_eqn(spec.vector),
            buf_mtt: spec.mtt.addr(),
            db_rec: spec.db_rec,
            log_page_size: spec.mtt.log_page_size(),
            timestamp: spec.timestamp,
        };
        cq::create(&fw.cmd, &mut st, &p)?;
        Ok(CqHandle { cqn: p.cqn, slot })
    }

    /// A ring of `1 << log_entries` CQEs: within the device's CQ size, and
    /// in `mtt`'s pages.
    fn check_cq_ring(&self, log_entries: u8, mtt: &MttRange) -> Result {
        let ring = (CQE_SIZE as u64).checked_shl(log_entries.into());
        if log_entries > self.firmware.dev_cap.log_max_cq_sz || ring.is_none_or(|b| b > mtt.bytes())
        {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// MODIFY_CQ (`mlx4_cq_resize()`): the CQ onto a ring of `1 <<
    /// log_entries` CQEs in `mtt`'s pages. On return the device writes the
    /// new ring, not the old; an error leaves it on the old.
    pub(crate) fn resize_cq(&self, cq: &CqHandle, log_entries: u8, mtt: &MttRange) -> Result {
        self.check_cq_ring(log_entries, mtt)?;
        let fw = &*self.firmware;
        let mut st = fw.cmd.lock();
        if st.dead {
            return Err(ENODEV);
        }
        cq::resize(
            &fw.cmd,
            &mut st,
            (cq.slot, cq.cqn),
            log_entries.into(),
            (mtt.addr(), mtt.log_page_size()),
        )
    }

    /// HW2SW_CQ (`mlx4_cq_free()`); a completion recorded for it is
    /// forgotten, and a dispatch under way finished, on return. Must not
    /// be called from the dispatcher. An error: the device may still write
    /// the CQ's ring and doorbell record (keep them).
    pub(crate) fn destroy_cq(&self, cq: CqHandle) -> Result {
        {
            let fw = &*self.firmware;
            cq::destroy(&fw.cmd, &mut fw.cmd.lock(), cq.slot, cq.cqn)?;
        }
        self.router.forget_cq(cq.cqn);
        Ok(())
    }

    /// A QP number (BlueFlame-safe, as the kernel contexts' are) for a QP of
    /// protection domain `pd`, in RESET (`create_qp_common()`'s
    /// `mlx4_qp_reserve_range()`); `-ENOSPC` when all are taken.
    pub(crate) fn reserve_qp(&self, pd: u32) -> Result<QpHandle> {
        let index = self.user_qpns.lock().0.alloc().ok_or(ENOSPC)?;
        let qpn = wqe::bf_safe_qpn(KERNEL_QPN_END, index).ok_or(ENOSPC)?;
        Ok(QpHandle {
            qpn,
            pd,
            soft: QpSoft::new(),
        })
    }

    /// The QP's fixed facts, checked: its UAR, its buffer within its pages,
    /// its CQs two of the provider's in the device.
    fn qp_facts(&self, qp: &QpHandle, spec: &QpSpec<'_>) -> Result<QpFacts> {
        self.user_uar(spec.uar)?;
        if spec.geometry.buf_size() > spec.mtt.bytes() {
            return Err(EINVAL);
        }
        {
            let fw = &*self.firmware;
            let st = fw.cmd.lock();
            if let Some(srqn) = spec.srqn {
                if !st.live.srqs.contains(srqn as usize) {
                    return Err(EINVAL);
                }
            }
            for cqn in [spec.cqn_send, spec.cqn_recv] {
                let slot = cqn.checked_sub(fw.cqn(FIRST_PROVIDER_CQ)).ok_or(EINVAL)? as usize;
                if !st.live.cq(FIRST_PROVIDER_CQ + slot) {
                    return Err(EINVAL);
                }
            }
        }
        Ok(QpFacts {
            qpn: qp.qpn,
            service: spec.service,
            pd: qp.pd,
            usr_page: spec.uar,
            cqn_send: spec.cqn_send,
            cqn_recv: spec.cqn_recv,
            geometry: spec.geometry,
            sq_no_prefetch: spec.sq_no_prefetch,
            db_rec: spec.db_rec,
            mtt_addr: spec.mtt.addr(),
            log_page_size: spec.mtt.log_page_size(),
            srqn: spec.srqn,
        })
    }

    /// The transition `attr` asks (`mlx4_ib_modify_qp()`): the command
    /// `qp_context::modify()` chose, posted; on success the QP's kept
    /// state follows. `ib_modify_qp_is_ok()` is the caller's, first.
    pub(crate) fn modify_qp(&self, qp: &mut QpHandle, spec: &QpSpec<'_>, attr: &QpAttr) -> Result {
        let facts = self.qp_facts(qp, spec)?;
        let dev = self.device_caps()?.qp_device();
        let m = qp_context::modify(&dev, &facts, &qp.soft, attr).map_err(errno)?;
        if let Some(c) = m.command {
            let fw = &*self.firmware;
            user_qp::modify(&fw.cmd, &mut fw.cmd.lock(), &c)?;
        }
        qp.soft = m.next;
        Ok(())
    }

    /// `mlx4_ib_query_qp()`: a QP in RESET as it is, any other as QUERY_QP
    /// says, its kept state following what the device says (an error may
    /// have moved it). Any failure of the command is `-EINVAL`, as mainline's.
    pub(crate) fn query_qp(&self, qp: &mut QpHandle, service: Service) -> Result<Queried> {
        if qp.soft.state == QpState::Reset {
            return Ok(Queried::reset());
        }
        let num_ports = self.device_caps()?.qp_device().num_ports;
        let fw = &*self.firmware;
        let (fields, alt) =
            user_qp::query(&fw.cmd, &mut fw.cmd.lock(), qp.qpn).map_err(|_| EINVAL)?;
        let q =
            qp_context::query::query(&fields, &alt, &qp.soft, service, num_ports).map_err(errno)?;
        qp.soft.state = q.state;
        Ok(q)
    }

    /// 2RST of a QP the device has (`destroy_qp_common()`: any state but
    /// RESET). An error: the device may still use the QP's queues.
    pub(crate) fn reset_qp(&self, qp: &mut QpHandle) -> Result {
        let c = QpCommand {
            op: QpOp::ToRst,
            in_mod: qp.qpn,
            op_mod: 2,
            optpar: 0,
            context: QpFields::default(),
        };
        let fw = &*self.firmware;
        user_qp::modify(&fw.cmd, &mut fw.cmd.lock(), &c)?;
        qp.soft = QpSoft::new();
        Ok(())
    }

    /// Gives the QP's number back. `-EBUSY` if the device still has the
    /// QP (its 2RST failed): the number stays taken, and the caller keeps
    /// its memory.
    pub(crate) fn release_qp(&self, qp: QpHandle) -> Result {
        if self.firmware.user_qp_in_hw(qp.qpn) {
            return Err(EBUSY);
        }
        if let Some(index) = wqe::bf_safe_index(KERNEL_QPN_END, qp.qpn) {
            self.user_qpns.lock().0.free(index);
        }
        Ok(())
    }

    /// Sets (or clears, with `None`) what the provider's events go to; a
    /// dispatch under way has finished on return.
    pub(crate) fn set_event_dispatch(&self, d: Option<Arc<dyn EventDispatch>>) {
        self.router.set_dispatch(d);
    }
}
