// SPDX-License-Identifier: GPL-2.0

//! CQs in user memory (`mlx4_ib_create_user_cq`, `mlx4_ib_resize_cq`,
//! `mlx4_ib_destroy_cq` in `drivers/infiniband/hw/mlx4/cq.c`): libmlx4
//! allocates the ring and the doorbell record, polls the ring and arms the
//! CQ through its UAR; the kernel pins them, names the ring's pages in the
//! MTT and hands the CQ to the adapter, whose completion events reach the
//! CQ's handler (`ib.rs`, `rdma/event.rs`). A resize moves the CQ to a new
//! ring libmlx4 allocated, which copies the CQEs it has not polled.

use kernel::{
    new_mutex,
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
    sync::{Arc, Mutex},
};

use super::{
    doorbell::{keep_until_teardown, pages, Record, UserDoorbell},
    user_abi, Provider,
};
use crate::{
    adapter::{Adapter, CqHandle, CqSpec, MttRange},
    qp_size,
    rdma::{
        attr::CqInit,
        object::{Cq, UContext},
        udata::Udata,
        umem::{Umem, ACCESS_LOCAL_WRITE},
        CqData,
    },
    region::PAGE_SHIFT,
};

/// Bytes of a CQE: 32 (no `MLX4_USER_DEV_CAP_LARGE_CQE`).
pub(super) const CQE_SIZE: usize = crate::geometry::CQE_SIZE;
/// `IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION`, mlx4_ib's one CQ flag.
const FLAG_TIMESTAMP: u32 =
    kernel::bindings::ib_uverbs_ex_create_cq_flags_IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION;

pub(crate) struct CompletionQueue {
    adapter: Arc<Adapter>,
    cqn: u32,
    /// `ibcq.cqe`; a resize changes it under `ring`'s lock.
    cqe: Atomic<u32>,
    /// In the device until dropped.
    handle: Option<CqHandle>,
    /// mlx4_ib's `resize_mutex` over what a resize replaces.
    ring: Pin<KBox<Mutex<Ring>>>,
    db: Option<UserDoorbell>,
}

/// The ring's pages and their MTT.
#[derive(Default)]
struct Ring {
    mtt: Option<MttRange>,
    umem: Option<Umem>,
}

impl CqData for CompletionQueue {
    fn cqe(&self) -> u32 {
        self.cqe.load(Relaxed)
    }

    fn number(&self) -> u32 {
        self.cqn
    }
}

impl CompletionQueue {
    pub(super) fn new(
        ctx: &UContext<Provider>,
        init: &CqInit,
        udata: &mut Udata<'_, Provider>,
    ) -> Result<Self> {
        let uctx = ctx.data();
        let adapter = uctx.adapter();
        if init.flags & !FLAG_TIMESTAMP != 0 {
            return Err(EINVAL);
        }
        let size = qp_size::cq_size(init.entries, adapter.device_caps()?.max_cqes())
            .map_err(super::errno)?;
        let req: user_abi::CreateCq = udata.read(core::mem::size_of::<user_abi::CreateCq>())?;
        let mut cq = CompletionQueue {
            adapter: adapter.clone(),
            cqn: 0,
            cqe: Atomic::new(size.cqe),
            handle: None,
            ring: KBox::pin_init(new_mutex!(Ring::default()), GFP_KERNEL)?,
            db: None,
        };
        let bytes = usize::try_from(size.bytes(CQE_SIZE as u32))?;
        let mut guard = cq.ring.lock();
        let ring = &mut *guard;
        let umem = ring.umem.insert(ctx.device().pin_user(
            req.buf_addr,
            bytes,
            ACCESS_LOCAL_WRITE,
        )?);
        let mtt = ring
            .mtt
            .insert(adapter.alloc_mtt(&pages(umem)?, PAGE_SHIFT)?);
        let db = cq
            .db
            .insert(UserDoorbell::map(ctx.device(), req.db_addr, Record::Cq)?);
        let handle = adapter.create_cq(&CqSpec {
            log_entries: size.log_entries(),
            uar: uctx.uar_index(),
            mtt,
            db_rec: db.dma(),
            timestamp: init.flags & FLAG_TIMESTAMP != 0,
            vector: init.comp_vector,
        })?;
        drop(guard);
        cq.cqn = handle.cqn();
        cq.handle = Some(handle);
        udata.respond(&user_abi::CreateCqResp {
            cqn: cq.cqn,
            reserved: 0,
        })?;
        Ok(cq)
    }

    /// `mlx4_ib_resize_cq()` of a user CQ: libmlx4's new ring pinned and
    /// named in a new MTT, MODIFY_CQ, then the old ring's MTT freed and its
    /// pages unpinned (the device writes only the new one). One resize of a
    /// CQ at a time; a size that gives the same ring does nothing.
    pub(super) fn resize(
        &self,
        cq: &Cq<Provider>,
        entries: u32,
        udata: &mut Udata<'_, Provider>,
    ) -> Result {
        let handle = self.handle.as_ref().ok_or(EINVAL)?;
        let mut ring = self.ring.lock();
        let max = self.adapter.device_caps()?.max_cqes();
        let Some(size) = qp_size::cq_resize(entries, self.cqe(), max).map_err(super::errno)? else {
            return Ok(());
        };
        let req: user_abi::ResizeCq = udata.read(core::mem::size_of::<user_abi::ResizeCq>())?;
        let bytes = usize::try_from(size.bytes(CQE_SIZE as u32))?;
        let umem = cq
            .device()
            .pin_user(req.buf_addr, bytes, ACCESS_LOCAL_WRITE)?;
        let mtt = self.adapter.alloc_mtt(&pages(&umem)?, PAGE_SHIFT)?;
        if let Err(e) = self.adapter.resize_cq(handle, size.log_entries(), &mtt) {
            // On its old ring still (mlx4_ib's err_buf).
            self.adapter.free_mtt(mtt);
            return Err(e);
        }
        if let Some(old) = ring.mtt.replace(mtt) {
            self.adapter.free_mtt(old);
        }
        ring.umem = Some(umem);
        self.cqe.store(size.cqe, Relaxed);
        Ok(())
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        let mut ring = self.ring.lock();
        if let Some(h) = self.handle.take() {
            if self.adapter.destroy_cq(h).is_err() {
                // The adapter may still write the ring and the record.
                return keep_until_teardown(ring.umem.take(), self.db.take());
            }
        }
        if let Some(mtt) = ring.mtt.take() {
            self.adapter.free_mtt(mtt);
        }
    }
}
