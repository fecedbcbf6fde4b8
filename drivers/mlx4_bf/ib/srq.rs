// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues in user memory (`mlx4_ib_create_srq()` with udata,
//! `mlx4_ib_modify_srq()`, `mlx4_ib_query_srq()`, `mlx4_ib_destroy_srq()`
//! in `drivers/infiniband/hw/mlx4/srq.c`): libmlx4 allocates the queue and
//! its doorbell record, links the WQEs and posts by itself; the kernel
//! sizes the queue as mainline does (`srq_size`), pins the buffer, names
//! its pages in the MTT and hands the SRQ to the adapter. QPs created on it
//! receive from it (`ib/qp.rs`).

use kernel::{new_mutex, prelude::*, sync::Arc, sync::Mutex};

use super::{
    doorbell::{keep_until_teardown, pages, Record, UserDoorbell},
    user_abi, Provider,
};
use crate::{
    adapter::{Adapter, MttRange, SrqHandle, SrqSpec},
    rdma::{
        attr::{srq_mask, SrqAttr},
        object::{Pd, Srq},
        udata::Udata,
        umem::Umem,
        SrqData,
    },
    region::PAGE_SHIFT,
    srq_size::{self, SrqGeometry},
};

pub(crate) struct SharedReceiveQueue {
    adapter: Arc<Adapter>,
    srqn: u32,
    geometry: SrqGeometry,
    /// mlx4_ib's `srq->mutex`: one ARM_SRQ at a time. `None` once the SRQ
    /// is out of the device.
    handle: Pin<KBox<Mutex<Option<SrqHandle>>>>,
    mtt: Option<MttRange>,
    buf: Option<Umem>,
    db: Option<UserDoorbell>,
}

impl SrqData for SharedReceiveQueue {
    fn number(&self) -> u32 {
        self.srqn
    }
}

impl SharedReceiveQueue {
    pub(super) fn new(
        pd: &Pd<Provider>,
        attr: &mut SrqAttr,
        udata: &mut Udata<'_, Provider>,
    ) -> Result<Self> {
        let ctx = udata.ucontext()?.data();
        let adapter = ctx.adapter();
        let geometry = srq_size::user_srq(&adapter.srq_limits(), attr.max_wr, attr.max_sge)
            .map_err(super::errno)?;
        let req: user_abi::CreateSrq = udata.read(core::mem::size_of::<user_abi::CreateSrq>())?;
        let dev = pd.device();
        let mut srq = SharedReceiveQueue {
            adapter: adapter.clone(),
            srqn: 0,
            geometry,
            handle: KBox::pin_init(new_mutex!(None), GFP_KERNEL)?,
            mtt: None,
            buf: None,
            db: None,
        };
        let buf =
            srq.buf
                .insert(dev.pin_user(req.buf_addr, usize::try_from(geometry.buf_size())?, 0)?);
        let mtt = srq.mtt.insert(adapter.alloc_mtt(&pages(buf)?, PAGE_SHIFT)?);
        let db = srq
            .db
            .insert(UserDoorbell::map(dev, req.db_addr, Record::Rq)?);
        let handle = adapter.create_srq(&SrqSpec {
            geometry,
            pd: pd.data().pdn(),
            mtt,
            db_rec: db.dma(),
        })?;
        srq.srqn = handle.srqn();
        *srq.handle.lock() = Some(handle);
        udata.respond(&user_abi::CreateSrqResp {
            srqn: srq.srqn,
            reserved: 0,
        })?;
        attr.max_wr = geometry.max_wr();
        Ok(srq)
    }

    /// `modify_srq`: the limit (armed), never the size (mainline's
    /// "We don't support resizing SRQs").
    pub(super) fn modify(
        &self,
        attr: &SrqAttr,
        mask: u32,
        udata: &mut Udata<'_, Provider>,
    ) -> Result {
        udata.expect_empty()?;
        if mask & srq_mask::MAX_WR != 0 {
            return Err(EINVAL);
        }
        if mask & srq_mask::LIMIT != 0 {
            self.geometry
                .check_limit(attr.srq_limit)
                .map_err(super::errno)?;
            let guard = self.handle.lock();
            let handle = Option::as_ref(&*guard).ok_or(EINVAL)?;
            // Below the queue's size, which is at most 2^16.
            let limit = u16::try_from(attr.srq_limit).map_err(|_| EINVAL)?;
            self.adapter.arm_srq(handle, limit)?;
        }
        Ok(())
    }

    /// `query_srq`: the limit QUERY_SRQ reads, the size as made.
    pub(super) fn query(&self) -> Result<SrqAttr> {
        let guard = self.handle.lock();
        let handle = Option::as_ref(&*guard).ok_or(EINVAL)?;
        Ok(SrqAttr {
            max_wr: self.geometry.max_wr(),
            max_sge: self.geometry.max_gs,
            srq_limit: self.adapter.srq_limit(handle)?.into(),
        })
    }
}

/// The number a QP created on `srq` names in its context.
pub(super) fn srqn_of(srq: &Srq<Provider>) -> u32 {
    srq.data().number()
}

impl Drop for SharedReceiveQueue {
    fn drop(&mut self) {
        if let Some(h) = self.handle.lock().take() {
            if self.adapter.destroy_srq(h).is_err() {
                // The adapter may still read the queue and the record.
                return keep_until_teardown(self.buf.take(), self.db.take());
            }
        }
        if let Some(mtt) = self.mtt.take() {
            self.adapter.free_mtt(mtt);
        }
    }
}
