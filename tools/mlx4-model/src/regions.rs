//! What an MMIO access hits: the register blocks of BAR0 and the UAR and
//! BlueFlame pages of BAR2 (§1), and how an access is recorded.

use crate::bytes::hex;
use crate::layout::*;
use serde_json::{json, Value};

/// What a BAR0 access hits; the whole access must lie inside one register
/// block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bar0Region {
    Hcr,
    Owner,
    Reset,
    Diag,
    Msix,
    /// The catastrophic error buffer QUERY_FW names (`firmware`).
    Catas,
    ClrInt,
    Undefined,
}

impl Bar0Region {
    pub(crate) fn decode(off: u64, len: u64) -> Self {
        let inside = |base: u64, size: u64| off >= base && off.saturating_add(len) <= base + size;
        if len == 0 {
            Bar0Region::Undefined
        } else if inside(HCR_BASE, HCR_SIZE) {
            Bar0Region::Hcr
        } else if inside(OWNER_OFF, 4) {
            Bar0Region::Owner
        } else if inside(RESET_BASE, RESET_SIZE) {
            Bar0Region::Reset
        } else if inside(DIAG_BASE, DIAG_SIZE) {
            Bar0Region::Diag
        } else if inside(MSIX_TABLE_OFF, PAGE_SIZE) || inside(MSIX_PBA_OFF, PAGE_SIZE) {
            Bar0Region::Msix
        } else if inside(CATAS_OFF, CATAS_SIZE) {
            Bar0Region::Catas
        } else if inside(CLR_INT_OFF, CLR_INT_SIZE) {
            Bar0Region::ClrInt
        } else {
            Bar0Region::Undefined
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Bar0Region::Hcr => "hcr",
            Bar0Region::Owner => "ownership",
            Bar0Region::Reset => "reset",
            Bar0Region::Diag => "diag",
            Bar0Region::Msix => "msix",
            Bar0Region::Catas => "catas",
            Bar0Region::ClrInt => "clr_int",
            Bar0Region::Undefined => "none",
        }
    }
}

/// What a BAR2 access hits: a UAR page or a BlueFlame page (numbered like
/// the UAR it belongs to), never crossing a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bar2Region {
    Uar { page: u32, in_page: u64 },
    Bf { page: u32, in_page: u64 },
    Undefined,
}

impl Bar2Region {
    pub(crate) fn decode(off: u64, len: u64, num_uars: u32) -> Self {
        let page = off / PAGE_SIZE;
        let in_page = off % PAGE_SIZE;
        let uars = u64::from(num_uars);
        if len == 0 || in_page.saturating_add(len) > PAGE_SIZE || page >= 2 * uars {
            Bar2Region::Undefined
        } else if page < uars {
            Bar2Region::Uar {
                page: page as u32,
                in_page,
            }
        } else {
            Bar2Region::Bf {
                page: (page - uars) as u32,
                in_page,
            }
        }
    }

    /// The fields of an access's trace record.
    pub(crate) fn record(self, off: u64, data: &[u8]) -> Value {
        let mut rec = json!({"bar": 2, "off": off, "len": data.len(), "data": hex(data)});
        match self {
            Bar2Region::Uar { page, .. } => {
                rec["region"] = "uar".into();
                rec["page"] = page.into();
            }
            Bar2Region::Bf { page, in_page } => {
                rec["region"] = "bf".into();
                rec["page"] = page.into();
                rec["half"] = ((in_page % BF_REG_SIZE) / BF_HALF).into();
                rec["chunk_off"] = (in_page % BF_HALF).into();
            }
            Bar2Region::Undefined => rec["region"] = "none".into(),
        }
        rec
    }
}
