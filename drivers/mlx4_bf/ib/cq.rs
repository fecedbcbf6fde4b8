// SPDX-License-Identifier: GPL-2.0

//! CQs in user memory (`mlx4_ib_create_user_cq`, `mlx4_ib_destroy_cq` in
//! `drivers/infiniband/hw/mlx4/cq.c`): libmlx4 allocates the ring and the
//! doorbell record, polls the ring and arms the CQ through its UAR; the
//! kernel pins them, names the ring's pages in the MTT and hands the CQ to
//! the adapter, whose completion events reach the CQ's handler
//! (`ib.rs`, `rdma/event.rs`).

use kernel::{prelude::*, sync::Arc};

use super::{
    doorbell::{keep_until_teardown, pages, Record, UserDoorbell},
    user_abi, Provider,
};
use crate::{
    adapter::{Adapter, CqHandle, CqSpec, MttRange},
    qp_size,
    rdma::{
        attr::CqInit,
        object::UContext,
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
    cqe: u32,
    /// In the device until dropped.
    handle: Option<CqHandle>,
    mtt: Option<MttRange>,
    ring: Option<Umem>,
    db: Option<UserDoorbell>,
}

impl CqData for CompletionQueue {
    fn cqe(&self) -> u32 {
        self.cqe
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
            cqe: size.cqe,
            handle: None,
            mtt: None,
            ring: None,
            db: None,
        };
        let bytes = usize::try_from(size.bytes(CQE_SIZE as u32))?;
        let ring = cq.ring.insert(ctx.device().pin_user(
            req.buf_addr,
            bytes,
            ACCESS_LOCAL_WRITE,
        )?);
        let mtt = cq.mtt.insert(adapter.alloc_mtt(&pages(ring)?, PAGE_SHIFT)?);
        let db = cq
            .db
            .insert(UserDoorbell::map(ctx.device(), req.db_addr, Record::Cq)?);
        let handle = adapter.create_cq(&CqSpec {
            log_entries: size.log_entries(),
            uar: uctx.uar_index(),
            mtt,
            db_rec: db.dma(),
            timestamp: init.flags & FLAG_TIMESTAMP != 0,
        })?;
        cq.cqn = handle.cqn();
        cq.handle = Some(handle);
        udata.respond(&user_abi::CreateCqResp {
            cqn: cq.cqn,
            reserved: 0,
        })?;
        Ok(cq)
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            if self.adapter.destroy_cq(h).is_err() {
                // The adapter may still write the ring and the record.
                return keep_until_teardown(self.ring.take(), self.db.take());
            }
        }
        if let Some(mtt) = self.mtt.take() {
            self.adapter.free_mtt(mtt);
        }
    }
}
