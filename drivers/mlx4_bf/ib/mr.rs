// SPDX-License-Identifier: GPL-2.0

//! Memory regions of user memory (`mlx4_ib_reg_user_mr`,
//! `mlx4_ib_rereg_user_mr`, `mlx4_ib_dereg_mr` in
//! `drivers/infiniband/hw/mlx4/mr.c`): the core pins and maps the range
//! (`ib_umem`), its pages go into the MTT and an MPT names them with the
//! region's address and rights. A re-registration changes the MPT in place,
//! its keys kept: libmlx4's peers may hold them.

use kernel::{new_mutex, prelude::*, sync::Arc, sync::Mutex};

use super::{doorbell::pages_of, Provider};
use crate::{
    adapter::Adapter,
    hw::memory::mr::{MappedRegion, Rereg},
    rdma::{attr::MrChange, object::Pd, udata::Udata, umem::Umem, MrData},
    region::{self, PAGE_SHIFT},
    verbs::access,
};

pub(crate) struct MemoryRegion {
    adapter: Arc<Adapter>,
    key: u32,
    /// What a re-registration changes (one at a time: the core holds the
    /// region's uobject exclusively for it, and this lock for Rust).
    state: Pin<KBox<Mutex<State>>>,
}

struct State {
    pdn: u32,
    /// Its rights (`IB_ACCESS_*`), and those its memory was pinned with.
    access: u32,
    pinned_access: u32,
    umem: Option<Umem>,
    /// In the adapter: a failed re-registration can leave it out.
    in_device: bool,
}

impl MrData for MemoryRegion {
    fn lkey(&self) -> u32 {
        self.key
    }

    fn rkey(&self) -> u32 {
        self.key
    }
}

/// `[start, start + len)` checked against `iova`: the MPT's first page is
/// the one holding `iova`, so it must hold it where the memory's first page
/// holds `start`.
fn check_range((start, len, iova): (u64, u64, u64)) -> Result {
    let page = (1u64 << PAGE_SHIFT) - 1;
    if (start ^ iova) & page != 0 || len == 0 {
        return Err(EINVAL);
    }
    Ok(())
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
        check_range((start, len, iova))?;
        let adapter = udata.ucontext()?.data().adapter().clone();
        let pdn = pd.data().pdn();
        // Allocated first: nothing after the registration may fail.
        let state = KBox::pin_init(
            new_mutex!(State {
                pdn,
                access,
                pinned_access: access,
                umem: None,
                in_device: false,
            }),
            GFP_KERNEL,
        )?;
        let umem = pd.device().pin_user(start, usize::try_from(len)?, access)?;
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
        {
            let mut st = state.lock();
            st.umem = Some(umem);
            st.in_device = true;
        }
        Ok(MemoryRegion {
            adapter,
            key: mpt.key,
            state,
        })
    }

    /// `mlx4_ib_rereg_user_mr()`: the rights checked against the pinned
    /// memory's, the new memory pinned (a new translation), then the MPT
    /// changed in place; the old memory unpinned once the adapter names the
    /// new. On `pd`, the region's PD or the new one.
    pub(super) fn rereg(
        &self,
        change: &MrChange,
        pd: &Pd<Provider>,
        udata: &mut Udata<'_, Provider>,
    ) -> Result {
        udata.expect_empty()?;
        let mut st = self.state.lock();
        if !st.in_device {
            return Err(EINVAL);
        }
        access::rereg_check(change.access, change.range.is_some(), st.pinned_access)
            .map_err(super::errno)?;
        // Its rights stay without an access change; new memory is pinned
        // for the rights it will have.
        let rights = change.access.unwrap_or(st.access);
        let umem = match change.range {
            Some(range) => {
                check_range(range)?;
                Some(
                    pd.device()
                        .pin_user(range.0, usize::try_from(range.1)?, rights)?,
                )
            }
            None => None,
        };
        let pages = umem.as_ref().map(pages_of).transpose()?;
        let perm = region::ib_access_perm(rights);
        let rereg = Rereg {
            pd: pd.data().pdn(),
            perm,
            translation: match (&change.range, &pages) {
                (Some((_, len, iova)), Some(pages)) => Some(MappedRegion {
                    pages,
                    page_shift: PAGE_SHIFT,
                    start: *iova,
                    len: *len,
                    perm,
                }),
                _ => None,
            },
        };
        match self.adapter.reregister_mr(st.pdn, self.key, &rereg) {
            Ok(_) => {
                st.pdn = rereg.pd;
                st.access = rights;
                if let Some(new) = umem {
                    // The old pages go: the adapter names the new.
                    st.umem = Some(new);
                    st.pinned_access = rights;
                }
                Ok(())
            }
            Err(e) => {
                // Out of the adapter, or as it was: the old pages may be
                // unpinned only in the first case, at deregistration.
                st.in_device = e.registered;
                Err(e.err)
            }
        }
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        let mut st = self.state.lock();
        if st.in_device && self.adapter.deregister_mr(st.pdn, self.key).is_err() {
            // The adapter may still reach the pages: they stay pinned
            // until unbind has reset it and the device's teardown releases
            // them.
            if let Some(kept) = st.umem.take() {
                kept.keep_until_teardown();
            }
        }
    }
}
