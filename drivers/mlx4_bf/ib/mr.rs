// SPDX-License-Identifier: GPL-2.0

//! Memory regions of user memory (`mlx4_ib_reg_user_mr`,
//! `mlx4_ib_dereg_mr` in `drivers/infiniband/hw/mlx4/mr.c`): the core pins
//! and maps the range (`ib_umem`), its pages go into the MTT and an MPT
//! names them with the region's address and rights.

use kernel::{prelude::*, sync::Arc};

use super::{doorbell::pages_of, Provider};
use crate::{
    adapter::Adapter,
    hw::memory::mr::MappedRegion,
    rdma::{object::Pd, udata::Udata, umem::Umem, MrData},
    region::{self, PAGE_SHIFT},
};

pub(crate) struct MemoryRegion {
    adapter: Arc<Adapter>,
    pdn: u32,
    key: u32,
    umem: Option<Umem>,
}

impl MrData for MemoryRegion {
    fn lkey(&self) -> u32 {
        self.key
    }

    fn rkey(&self) -> u32 {
        self.key
    }
}

impl MemoryRegion {
    /// `[start, start + len)` of the process's memory, named by the adapter
    /// as `iova` onwards, with IB `access`.
    pub(super) fn new(
        pd: &Pd<Provider>,
        (start, len, iova): (u64, u64, u64),
        access: u32,
        udata: &mut Udata<'_, Provider>,
    ) -> Result<Self> {
        udata.expect_empty()?;
        let page = (1u64 << PAGE_SHIFT) - 1;
        // The MPT's first page is the one holding `iova`: it must hold it
        // where the memory's first page holds `start`.
        if (start ^ iova) & page != 0 || len == 0 {
            return Err(EINVAL);
        }
        let adapter = udata.ucontext()?.data().adapter().clone();
        let umem = pd.device().pin_user(start, usize::try_from(len)?, access)?;
        let pdn = pd.data().pdn();
        let mpt = adapter.register_mapped_mr(
            pdn,
            &MappedRegion {
                pages: &pages_of(&umem)?,
                page_shift: PAGE_SHIFT,
                start: iova,
                len,
                perm: region::ib_access_perm(access),
            },
        )?;
        Ok(MemoryRegion {
            adapter,
            pdn,
            key: mpt.key,
            umem: Some(umem),
        })
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        if self.adapter.deregister_mr(self.pdn, self.key).is_err() {
            // The adapter may still reach the pages: they stay pinned
            // until unbind has reset it and the device's teardown releases
            // them.
            if let Some(kept) = self.umem.take() {
                kept.keep_until_teardown();
            }
        }
    }
}
