// SPDX-License-Identifier: GPL-2.0

//! Verbs contexts and protection domains (`mlx4_ib_alloc_ucontext`,
//! `mlx4_ib_mmap`, `mlx4_ib_alloc_pd` in `drivers/infiniband/hw/mlx4/main.c`).
//!
//! A context owns one UAR, taken from the same allocator as the misc
//! device's contexts, and offers its process the UAR page (pgoff 0,
//! uncached: the doorbells) and the BlueFlame page of the same index
//! (pgoff 1, write-combining), as `mlx4_ib_mmap()` does, where libmlx4 posts
//! by itself. There is no clock page (pgoff 3): the device reports no core
//! clock.

use kernel::{prelude::*, sync::Arc};

use super::{post::Poster, user_abi, Provider};
use crate::{
    adapter::Adapter,
    rdma::{
        mmap::{Caching, IoRegion, MmapTable},
        udata::Udata,
    },
};

/// The page offsets of the context's file libmlx4 maps (`mlx4_ib_mmap()`).
const UAR_PGOFF: u32 = 0;
const BF_PGOFF: u32 = 1;

/// A verbs context: its UAR, given back when it is dropped, and what the
/// QP_POST method keeps for it.
pub(crate) struct Context {
    adapter: Arc<Adapter>,
    uar_index: u32,
    poster: Poster,
}

impl Context {
    /// A context of `adapter`, whose BAR2 is `bar2`; its pages go into
    /// `mmaps`.
    pub(super) fn new(
        adapter: &Arc<Adapter>,
        bar2: &IoRegion,
        udata: &mut Udata<'_, Provider>,
        mmaps: &mut MmapTable,
    ) -> Result<Self> {
        // libmlx4 sends no request with GET_CONTEXT.
        udata.expect_empty()?;
        let uar_index = adapter.open_uar()?;
        let blueflame =
            *crate::module_parameters::ib_blueflame.value() != 0 && adapter.caps().bf_reg_size != 0;
        let ctx = Context {
            adapter: adapter.clone(),
            uar_index,
            poster: Poster::new(adapter, uar_index, blueflame).inspect_err(|_| {
                adapter.close_uar(uar_index);
            })?,
        };
        let caps = adapter.caps();
        mmaps.offer(
            UAR_PGOFF,
            bar2.page(caps.uar_offset(uar_index), Caching::Uncached)?,
        )?;
        if blueflame {
            mmaps.offer(
                BF_PGOFF,
                bar2.page(caps.bf_page_offset(uar_index), Caching::WriteCombining)?,
            )?;
        }
        let fw = adapter.firmware();
        let resp = user_abi::AllocUcontextResp {
            // 32-byte CQEs: no MLX4_USER_DEV_CAP_LARGE_CQE. The QP_POST
            // method is found by calling it, not by a bit of mainline's.
            dev_caps: 0,
            qp_tab_size: fw.profile.num_qps,
            // No BlueFlame register: libmlx4 rings the doorbell only.
            bf_reg_size: if blueflame {
                adapter.caps().bf_reg_size as u16
            } else {
                0
            },
            bf_regs_per_page: fw.dev_cap.bf_regs_per_page as u16,
            cqe_size: super::cq::CQE_SIZE as u32,
        };
        udata.respond(&resp)?;
        Ok(ctx)
    }

    /// The UAR its QPs and CQs ring (`usr_page`).
    pub(super) fn uar_index(&self) -> u32 {
        self.uar_index
    }

    pub(super) fn adapter(&self) -> &Arc<Adapter> {
        &self.adapter
    }

    /// The QP_POST method's state of this context.
    pub(super) fn poster(&self) -> &Poster {
        &self.poster
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        self.adapter.close_uar(self.uar_index);
    }
}

/// A protection domain: its number, given back when it is dropped.
pub(crate) struct ProtectionDomain {
    adapter: Arc<Adapter>,
    pdn: u32,
}

impl ProtectionDomain {
    pub(super) fn new(ctx: &Context, udata: &mut Udata<'_, Provider>) -> Result<Self> {
        udata.expect_empty()?;
        let pd = ProtectionDomain {
            adapter: ctx.adapter.clone(),
            pdn: ctx.adapter.alloc_pd()?,
        };
        udata.respond(&user_abi::AllocPdResp {
            pdn: pd.pdn,
            reserved: 0,
        })?;
        Ok(pd)
    }

    pub(super) fn pdn(&self) -> u32 {
        self.pdn
    }
}

impl Drop for ProtectionDomain {
    fn drop(&mut self) {
        self.adapter.free_pd(self.pdn);
    }
}
