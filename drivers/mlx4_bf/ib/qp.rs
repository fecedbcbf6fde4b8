// SPDX-License-Identifier: GPL-2.0

//! RC, UC and UD QPs in user memory (`create_qp_common()` with udata,
//! `_mlx4_ib_modify_qp()`, `destroy_qp_common()` in
//! `drivers/infiniband/hw/mlx4/qp.c`): libmlx4 allocates the send and
//! receive queues in one buffer and the receive queue's doorbell record,
//! posts and rings by itself; the kernel sizes the queues as mainline does
//! (`qp_size`), pins the buffer and names its pages in the MTT, and takes
//! the QP through its states with mainline's contexts (`qp_context`).

use kernel::{new_mutex, prelude::*, sync::Arc, sync::Mutex};

use super::{
    doorbell::{keep_until_teardown, pages, Record, UserDoorbell},
    post::PostQps,
    user_abi, Provider,
};
use crate::{
    adapter::{Adapter, MttRange, QpHandle, QpSpec},
    qp_context::{self, query::PathAh, AhAttr, Grh, Service},
    qp_size::{self, QpGeometry, UserQpRequest},
    rdma::{
        attr::{self, qp_create, QpAttr, QpCap, QpInit, QpState, QpType},
        object::Pd,
        qp_query::{PortAh, QpQuery},
        udata::Udata,
        umem::Umem,
        CqData, QpData,
    },
    region::PAGE_SHIFT,
    sys::errno::eopnotsupp,
};

/// What the QP is, fixed at creation.
struct Fixed {
    qp_type: QpType,
    pdn: u32,
    service: Service,
    uar: u32,
    cqn_send: u32,
    cqn_recv: u32,
    geometry: QpGeometry,
    sq_no_prefetch: bool,
    db_rec: u64,
    /// Every send completes (`IB_SIGNAL_ALL_WR`): mainline's
    /// `sq_signal_bits`, which only `query_qp` reports for a user QP.
    sq_sig_all: bool,
    /// The SRQ it receives from (held by the core while the QP lives).
    srqn: Option<u32>,
    /// `IB_QP_CREATE_*`: only mlx4_ib's one for user QPs, which blocks
    /// multicast loopback; with no multicast attach here, `query_qp`
    /// reports it and nothing else reads it.
    create_flags: u32,
}

pub(crate) struct QueuePair {
    adapter: Arc<Adapter>,
    qpn: u32,
    fixed: Fixed,
    /// mlx4_ib's `qp->mutex`: one transition at a time (the core takes the
    /// QP's handle shared for a modify). `None` once the QP is out of the
    /// device.
    handle: Pin<KBox<Mutex<Option<QpHandle>>>>,
    mtt: Option<MttRange>,
    buf: Option<Umem>,
    db: Option<UserDoorbell>,
    /// The context's table its posts find it in (`ib/post.rs`).
    posts: PostQps,
}

impl QpData for QueuePair {
    fn qp_num(&self) -> u32 {
        self.qpn
    }
}

/// The service of a QP type this provider makes.
fn service(t: QpType) -> Result<Service> {
    match t {
        QpType::Rc => Ok(Service::Rc),
        QpType::Uc => Ok(Service::Uc),
        QpType::Ud => Ok(Service::Ud),
        _ => Err(eopnotsupp()),
    }
}

impl QueuePair {
    pub(super) fn new(
        pd: &Pd<Provider>,
        init: &QpInit<'_, Provider>,
        cap: &mut QpCap,
        udata: &mut Udata<'_, Provider>,
    ) -> Result<Self> {
        let service = service(init.qp_type)?;
        // mlx4_ib's user create flags: the multicast loopback block, of
        // any QP type; the others the uverbs core lets through, as it,
        // EOPNOTSUPP.
        if init.has_xrc_or_rss || init.create_flags & !qp_create::BLOCK_MULTICAST_LOOPBACK != 0 {
            return Err(eopnotsupp());
        }
        let srqn = init.srq.map(super::srq::srqn_of);
        let ctx = udata.ucontext()?.data();
        let adapter = ctx.adapter();
        let req: user_abi::CreateQp = udata.read(core::mem::size_of::<user_abi::CreateQp>())?;
        let (geometry, recv) = qp_size::user_qp(
            &adapter.device_caps()?.qp_limits(),
            &UserQpRequest {
                max_recv_wr: cap.max_recv_wr,
                max_recv_sge: cap.max_recv_sge,
                log_sq_bb_count: req.log_sq_bb_count,
                log_sq_stride: req.log_sq_stride,
                inl_recv_sz: req.inl_recv_sz,
                srq: srqn.is_some(),
            },
        )
        .map_err(super::errno)?;
        let dev = pd.device();
        let buf = dev.pin_user(req.buf_addr, usize::try_from(geometry.buf_size())?, 0)?;
        let mtt = adapter.alloc_mtt(&pages(&buf)?, PAGE_SHIFT)?;
        let mut qp = QueuePair {
            adapter: adapter.clone(),
            qpn: 0,
            fixed: Fixed {
                qp_type: init.qp_type,
                pdn: pd.data().pdn(),
                service,
                uar: ctx.uar_index(),
                cqn_send: init.send_cq.data().number(),
                cqn_recv: init.recv_cq.data().number(),
                geometry,
                sq_no_prefetch: req.sq_no_prefetch != 0,
                db_rec: 0,
                sq_sig_all: init.sq_sig_all,
                srqn,
                create_flags: init.create_flags,
            },
            handle: KBox::pin_init(new_mutex!(None), GFP_KERNEL)?,
            mtt: Some(mtt),
            buf: Some(buf),
            db: None,
            posts: ctx.poster().qps().clone(),
        };
        // A QP on an SRQ has no receive queue, so no record (libmlx4 sends
        // none; mainline maps it only if `qp_has_rq()`).
        if srqn.is_none() {
            let db = qp
                .db
                .insert(UserDoorbell::map(dev, req.db_addr, Record::Rq)?);
            qp.fixed.db_rec = db.dma();
        }
        let handle = adapter.reserve_qp(qp.fixed.pdn)?;
        qp.qpn = handle.qpn();
        *qp.handle.lock() = Some(handle);
        qp.posts
            .add(qp.qpn, qp.fixed.pdn, qp.fixed.service == Service::Ud)?;
        // The receive queue as made; the send queue is user space's own.
        cap.max_recv_wr = recv.max_recv_wr;
        cap.max_recv_sge = recv.max_recv_sge;
        Ok(qp)
    }

    fn spec<'a>(&self, mtt: &'a MttRange) -> QpSpec<'a> {
        let f = &self.fixed;
        QpSpec {
            service: f.service,
            uar: f.uar,
            cqn_send: f.cqn_send,
            cqn_recv: f.cqn_recv,
            geometry: f.geometry,
            sq_no_prefetch: f.sq_no_prefetch,
            db_rec: f.db_rec,
            srqn: f.srqn,
            mtt,
        }
    }

    /// `modify_qp`: verbs' state machine first (`ib_modify_qp_is_ok()`),
    /// then the transition as mainline posts it.
    pub(super) fn modify(&self, attr: &QpAttr, udata: &mut Udata<'_, Provider>) -> Result {
        udata.expect_empty()?;
        let mtt = self.mtt.as_ref().ok_or(EINVAL)?;
        let mut guard = self.handle.lock();
        let handle = Option::as_mut(&mut *guard).ok_or(EINVAL)?;
        let cur = match attr.cur_state {
            Some(s) => s,
            None => from_core_state(handle.state()),
        };
        let new = attr.new_state.unwrap_or(cur);
        if !cur.may_move(new, self.fixed.qp_type, attr.mask) {
            return Err(EINVAL);
        }
        self.adapter
            .modify_qp(handle, &self.spec(mtt), &core_attr(attr, cur, new))?;
        // Posts see the state the device has it in now.
        self.posts.set_state(self.qpn, handle.state());
        Ok(())
    }
}

impl QueuePair {
    /// `query_qp` (`mlx4_ib_query_qp()`): the device's answer, the receive
    /// queue as made (a user QP's send queue is libmlx4's: 0, as mainline
    /// says), no inline data.
    pub(super) fn query(&self) -> Result<QpQuery> {
        let q = {
            let mut guard = self.handle.lock();
            let handle = Option::as_mut(&mut *guard).ok_or(EINVAL)?;
            let q = self.adapter.query_qp(handle, self.fixed.service)?;
            self.posts.set_state(self.qpn, handle.state());
            q
        };
        let g = &self.fixed.geometry;
        Ok(QpQuery {
            state: from_core_state(q.state),
            path_mtu: q.path_mtu.into(),
            path_mig_state: q.path_mig_state.into(),
            qkey: q.qkey,
            rq_psn: q.rq_psn,
            sq_psn: q.sq_psn,
            dest_qp_num: q.dest_qp_num,
            qp_access_flags: q.qp_access_flags,
            ah: q.ah.map(port_ah),
            alt_ah: q.alt_ah.map(port_ah),
            pkey_index: q.pkey_index,
            alt_pkey_index: q.alt_pkey_index,
            port_num: q.port_num,
            alt_port_num: q.alt_port_num,
            sq_draining: q.sq_draining,
            max_rd_atomic: q.max_rd_atomic,
            max_dest_rd_atomic: q.max_dest_rd_atomic,
            min_rnr_timer: q.min_rnr_timer,
            timeout: q.timeout,
            alt_timeout: q.alt_timeout,
            retry_cnt: q.retry_cnt,
            rnr_retry: q.rnr_retry,
            cap: QpCap {
                max_send_wr: 0,
                max_recv_wr: g.rq.wqe_cnt,
                max_send_sge: 0,
                max_recv_sge: g.rq_max_gs,
                max_inline_data: 0,
            },
            sq_sig_all: self.fixed.sq_sig_all,
            create_flags: self.fixed.create_flags,
        })
    }
}

/// The layer's view of a path's address.
fn port_ah(p: PathAh) -> PortAh {
    let a = p.ah;
    PortAh {
        port_num: p.port_num,
        ah: attr::AhAttr {
            dlid: a.dlid,
            sl: a.sl,
            src_path_bits: a.src_path_bits,
            static_rate: a.static_rate,
            grh: a.grh.map(|g| attr::Grh {
                dgid: g.dgid,
                flow_label: g.flow_label,
                sgid_index: g.sgid_index,
                hop_limit: g.hop_limit,
                traffic_class: g.traffic_class,
            }),
        },
    }
}

/// The core's state as verbs name it (the same values).
fn from_core_state(s: crate::verbs::QpState) -> QpState {
    use crate::verbs::QpState as C;
    match s {
        C::Reset => QpState::Reset,
        C::Init => QpState::Init,
        C::Rtr => QpState::Rtr,
        C::Rts => QpState::Rts,
        C::Sqd => QpState::Sqd,
        C::Sqe => QpState::Sqe,
        C::Err => QpState::Err,
    }
}

/// The rules' view of the attributes.
fn core_attr(a: &QpAttr, cur: QpState, new: QpState) -> qp_context::QpAttr {
    qp_context::QpAttr {
        mask: a.mask,
        qp_state: new.raw(),
        cur_qp_state: cur.raw(),
        path_mtu: a.path_mtu as u8,
        path_mig_state: a.path_mig_state as u8,
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: a.qp_access_flags,
        pkey_index: a.pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num.min(u8::MAX.into()) as u8,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        ah: AhAttr {
            dlid: a.ah.dlid,
            sl: a.ah.sl,
            src_path_bits: a.ah.src_path_bits,
            static_rate: a.ah.static_rate,
            grh: a.ah.grh.map(|g| Grh {
                dgid: g.dgid,
                flow_label: g.flow_label,
                sgid_index: g.sgid_index,
                hop_limit: g.hop_limit,
                traffic_class: g.traffic_class,
            }),
        },
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // No post finds it from here on (one under way has finished).
        self.posts.remove(self.qpn);
        let handle = self.handle.lock().take();
        let Some(mut handle) = handle else {
            return self.release_memory();
        };
        // `destroy_qp_common()`: to RESET unless it is there.
        let reset = handle.state() == crate::verbs::QpState::Reset
            || self.adapter.reset_qp(&mut handle).is_ok();
        if !reset || self.adapter.release_qp(handle).is_err() {
            // The adapter may still use the queues and the record.
            return keep_until_teardown(self.buf.take(), self.db.take());
        }
        self.release_memory();
    }
}

impl QueuePair {
    fn release_memory(&mut self) {
        if let Some(mtt) = self.mtt.take() {
            self.adapter.free_mtt(mtt);
        }
    }
}
