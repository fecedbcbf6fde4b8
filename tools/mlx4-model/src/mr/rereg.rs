//! Re-registration in place, as mainline mlx4_ib does it natively
//! (`ib/mr.c:mlx4_ib_rereg_user_mr` through `core/mr.c:mlx4_mr_hw_get_mpt`,
//! `mlx4_mr_hw_change_pd`, `mlx4_mr_hw_change_access`,
//! `mlx4_mr_rereg_mem_write`, `mlx4_mr_hw_write_mpt`): HW2SW_MPT (opmod 1,
//! no mailbox) hands the MPT to software, which finds the entry in the
//! dMPT table's ICM (`core/icm.c:mlx4_table_find`), edits it there (PD,
//! access, start, length, entity size, a new MTT whose entries it writes
//! straight into ICM too), sets its status byte (byte 0) to HW (0x00,
//! `MLX4_MPT_STATUS_HW`) and sends SYNC_TPT: the firmware takes the entry
//! back into hardware ownership.
//!
//! The model keeps the MPTs in hardware ownership in its own table, like a
//! cache; a dMPT slot in ICM holds what HW2SW_MPT wrote there: the entry as
//! the model had it, status byte SW (0xf0, `MLX4_MPT_STATUS_SW`). Such an
//! MPT is "parked". SYNC_TPT reads every parked entry and takes back each
//! whose status byte reads HW, decoding it as SW2HW_MPT decodes its mailbox
//! (the same checks; its pages from the MTT in ICM, read now), so later
//! accesses use the new PD, access rights, range and pages. Strict:
//!
//! - Only parked entries are read. A status byte HW in a slot HW2SW_MPT
//!   did not hand over (never an MPT, or one in hardware ownership) is not
//!   looked at: an MPT enters hardware ownership by SW2HW_MPT, or by
//!   SYNC_TPT after HW2SW_MPT, as mainline does it.
//! - A parked entry with status HW that does not decode is refused: it
//!   stays in software ownership, counted (`fw_unmodelled`) and recorded
//!   (`fw_refused`, reason `sync_tpt` or the decoder's own); the other
//!   entries are still taken back, and SYNC_TPT fails with the first
//!   refusal's status.
//! - A parked MPT whose dMPT page UNMAP_ICM unmaps is forgotten (mainline
//!   frees the ICM of a deregistered MR, `core/mr.c:mlx4_mpt_free_icm`):
//!   what a page mapped there later holds is nobody's MPT.
//! - HW2SW_MPT of an MPT whose dMPT page is not mapped any more (mainline
//!   unmaps it only after HW2SW_MPT) writes nothing and parks nothing.

use super::{decode_mpt, strict_refusal, MrTable, MPT_ENTRY_SIZE};
use crate::command::{CmdError, CmdResult, CommandRequest};
use crate::env::Env;
use crate::firmware::Firmware;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::timing::Read;
use serde_json::json;

/// The status byte (entry byte 0): MLX4_MPT_STATUS_SW, MLX4_MPT_STATUS_HW.
pub const STATUS_SW: u8 = 0xf0;
pub const STATUS_HW: u8 = 0x00;

/// The DMA address of MPT `index`'s dMPT slot, if its ICM page is mapped
/// (an entry never crosses a page: the table is page aligned).
fn slot(fw: &Firmware, index: u32) -> Option<u64> {
    let hca = fw.hca()?;
    let off = u64::from(index) * MPT_ENTRY_SIZE as u64;
    fw.icm().translate(hca.dmpt.checked_add(off)?)
}

/// HW2SW_MPT's write of `raw` into MPT `index`'s dMPT slot, status SW;
/// false if the slot's page is not mapped (nothing written).
pub(super) fn write_back<M: GuestMemory, I: Irq>(
    env: &mut Env<M, I>,
    fw: &Firmware,
    index: u32,
    raw: &[u8; MPT_ENTRY_SIZE],
) -> Result<bool, CmdError> {
    let Some(dma) = slot(fw, index) else {
        return Ok(false);
    };
    let mut b = *raw;
    b[0] = STATUS_SW;
    env.dma_write(dma, &b, "dmpt")?;
    Ok(true)
}

impl MrTable {
    /// MPTs HW2SW_MPT handed to software through ICM, not yet taken back.
    pub fn parked(&self) -> usize {
        self.parked.len()
    }

    /// SYNC_TPT (no mailbox, opmod 0): every parked entry whose status byte
    /// in ICM reads HW back into hardware ownership.
    pub(crate) fn sync_tpt<M: GuestMemory, I: Irq>(
        &mut self,
        env: &mut Env<M, I>,
        r: &CommandRequest,
        fw: &Firmware,
    ) -> CmdResult {
        self.follow(fw)?;
        if r.op_mod != 0 {
            return Err(CmdError::BadParam);
        }
        let mut refused = None;
        for index in self.parked.clone() {
            let Some(dma) = slot(fw, index) else {
                self.parked.remove(&index);
                continue;
            };
            let mut b = [0u8; MPT_ENTRY_SIZE];
            env.dma_read(dma, &mut b, "dmpt", Read::Fresh)?;
            if b[0] != STATUS_HW {
                continue;
            }
            match decode_mpt(env, fw, index, &b) {
                Ok(mpt) => {
                    env.trace.record("mpt", || {
                        json!({"op": "sync_tpt", "index": index, "key": mpt.key,
                               "pd": mpt.pd, "flags": mpt.flags, "start": mpt.start,
                               "length": mpt.length, "mtt": mpt.first_mtt,
                               "shift": mpt.shift, "pages": mpt.pages.len()})
                    });
                    self.parked.remove(&index);
                    self.mpts.insert(index, mpt);
                }
                Err((e, why)) => {
                    let e = strict_refusal(env, index, why.unwrap_or("sync_tpt"), e);
                    refused.get_or_insert(e);
                }
            }
        }
        refused.map_or(Ok(None), Err)
    }

    /// After UNMAP_ICM: parked MPTs whose dMPT page is gone are forgotten.
    pub(crate) fn forget_unmapped(&mut self, fw: &Firmware) {
        self.parked.retain(|&i| slot(fw, i).is_some());
    }
}
