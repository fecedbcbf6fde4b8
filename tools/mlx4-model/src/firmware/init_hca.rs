//! INIT_HCA's mailbox (`core/fw.c:mlx4_INIT_HCA`): where mlx4_core put
//! every context table in ICM and how many entries each has, as computed
//! by `core/profile.c:mlx4_make_profile`. The model records it (QUERY_HCA
//! gives it back) and places contexts by it.

use crate::bytes::{be32, be64};
use crate::command::CmdError;
use serde_json::{json, Value};

/// Bytes mlx4 fills (INIT_HCA_IN_SIZE).
pub const INIT_HCA_SIZE: usize = 0x200;
const VERSION: u8 = 2;
/// Flags dword at 0x14: bit 6 enables device-managed flow steering.
const FLAG_DMFS: u32 = 1 << 6;
/// Dword at 0x58: bits 29/30 switch EQEs/CQEs to 64 bytes.
const EQE_CQE_64: u32 = (1 << 29) | (1 << 30);

/// One context table: ICM base address and log2 of its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Table {
    pub base: u64,
    pub log_num: u8,
}

impl Table {
    /// A base qword whose low 5 bits hold the log count (the log byte is
    /// the qword's last byte, `mlx4_QUERY_HCA` masks them off).
    fn at(b: &[u8], off: usize) -> Table {
        let q = be64(b, off);
        Table {
            base: q & !0x1f,
            log_num: (q & 0x1f) as u8,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HcaProfile {
    pub qpc: Table,
    pub srqc: Table,
    pub cqc: Table,
    pub eqc: Table,
    pub altc: u64,
    pub auxc: u64,
    pub rdmarc: u64,
    pub log_rd_per_qp: u8,
    pub mcg: u64,
    pub log_mc_entry_sz: u8,
    pub log_mc_hash_sz: u8,
    pub log_mc_table_sz: u8,
    pub dmpt: u64,
    pub log_mpt_sz: u8,
    pub mtt: u64,
    pub cmpt: u64,
    pub log_uar_sz: u8,
    pub uar_page_sz: u8,
    /// The mailbox as sent, for QUERY_HCA.
    pub raw: Vec<u8>,
}

impl HcaProfile {
    /// Parses and checks the mailbox against what the model advertised:
    /// version 2; no device-managed steering, 64-byte EQEs/CQEs or
    /// strides (none is advertised in QUERY_DEV_CAP); 4 KiB UAR pages and
    /// no more UAR space than BAR2 has; every table base 4 KiB aligned
    /// (`mlx4_make_profile` rounds each table up to a page). BAD_PARAM
    /// otherwise. `num_uars` is a power of two (`Config::validate`).
    pub fn parse(b: &[u8], num_uars: u32) -> Result<HcaProfile, CmdError> {
        if b[0x00] != VERSION
            || be32(b, 0x14) & FLAG_DMFS != 0
            || be32(b, 0x58) & EQE_CQE_64 != 0
            || b[0x5b] != 0
        {
            return Err(CmdError::BadParam);
        }
        let p = HcaProfile {
            qpc: Table::at(b, 0x30),
            srqc: Table::at(b, 0x48),
            cqc: Table::at(b, 0x50),
            eqc: Table::at(b, 0x80),
            altc: be64(b, 0x60),
            auxc: be64(b, 0x70),
            rdmarc: be64(b, 0x90) & !0x1f,
            log_rd_per_qp: b[0x97] & 0x7,
            mcg: be64(b, 0xc0),
            log_mc_entry_sz: b[0xd3] & 0x1f,
            log_mc_hash_sz: b[0xd7] & 0x1f,
            log_mc_table_sz: b[0xdb] & 0x1f,
            dmpt: be64(b, 0xf0),
            log_mpt_sz: b[0xfb] & 0x3f,
            mtt: be64(b, 0x100),
            cmpt: be64(b, 0x108),
            log_uar_sz: b[0x12a],
            uar_page_sz: b[0x12b],
            raw: b[..INIT_HCA_SIZE].to_vec(),
        };
        let bases = [
            p.qpc.base,
            p.srqc.base,
            p.cqc.base,
            p.eqc.base,
            p.altc,
            p.auxc,
            p.rdmarc,
            p.mcg,
            p.dmpt,
            p.mtt,
            p.cmpt,
        ];
        if bases.iter().any(|a| a & 0xfff != 0)
            || p.uar_page_sz != 0
            || u32::from(p.log_uar_sz) > num_uars.trailing_zeros()
        {
            return Err(CmdError::BadParam);
        }
        Ok(p)
    }

    /// QUERY_HCA's answer (`core/fw.c:mlx4_QUERY_HCA`): the profile as
    /// INIT_HCA set it, no global caps, core clock 0.
    pub fn query(&self) -> Vec<u8> {
        let mut b = self.raw.clone();
        b[0x04..0x10].fill(0);
        b
    }

    /// The trace record's fields.
    pub fn record(&self) -> Value {
        let t = |t: &Table| json!({"base": t.base, "log_num": t.log_num});
        json!({
            "qpc": t(&self.qpc), "srqc": t(&self.srqc), "cqc": t(&self.cqc),
            "eqc": t(&self.eqc), "altc": self.altc, "auxc": self.auxc,
            "rdmarc": self.rdmarc, "log_rd_per_qp": self.log_rd_per_qp,
            "mcg": self.mcg, "log_mc_entry_sz": self.log_mc_entry_sz,
            "log_mc_hash_sz": self.log_mc_hash_sz, "log_mc_table_sz": self.log_mc_table_sz,
            "dmpt": self.dmpt, "log_mpt_sz": self.log_mpt_sz, "mtt": self.mtt,
            "cmpt": self.cmpt, "log_uar_sz": self.log_uar_sz,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::{put_be32, put_be64};

    pub(crate) fn mailbox() -> Vec<u8> {
        let mut b = vec![0u8; INIT_HCA_SIZE];
        b[0] = VERSION;
        put_be32(&mut b, 0x14, 1); // UD port check, little-endian host
        put_be64(&mut b, 0x30, 0x1_0000_0000 | 18);
        put_be64(&mut b, 0x50, 0x2000_0000 | 16);
        put_be64(&mut b, 0x80, 0x3000_0000 | 3);
        put_be64(&mut b, 0x90, 0x4000_0000 | 4);
        put_be64(&mut b, 0x100, 0x5000_0000);
        b[0xfb] = 19;
        b[0x12a] = 10;
        b
    }

    #[test]
    fn bases_and_logs() {
        let p = HcaProfile::parse(&mailbox(), 1024).unwrap();
        assert_eq!((p.qpc.base, p.qpc.log_num), (0x1_0000_0000, 18));
        assert_eq!((p.cqc.base, p.cqc.log_num), (0x2000_0000, 16));
        assert_eq!((p.eqc.base, p.eqc.log_num), (0x3000_0000, 3));
        assert_eq!((p.rdmarc, p.log_rd_per_qp), (0x4000_0000, 4));
        assert_eq!((p.mtt, p.log_mpt_sz, p.log_uar_sz), (0x5000_0000, 19, 10));
        assert_eq!(p.query()[0x30..0x38], mailbox()[0x30..0x38]);
    }

    #[test]
    fn refuses_what_was_not_advertised() {
        let bad = |f: fn(&mut Vec<u8>)| {
            let mut b = mailbox();
            f(&mut b);
            HcaProfile::parse(&b, 1024)
        };
        assert_eq!(bad(|b| b[0] = 1), Err(CmdError::BadParam));
        assert_eq!(bad(|b| b[0x17] |= 1 << 6), Err(CmdError::BadParam));
        assert_eq!(bad(|b| b[0x58] = 0x20), Err(CmdError::BadParam));
        assert_eq!(bad(|b| b[0x5b] = 0x11), Err(CmdError::BadParam));
        assert_eq!(bad(|b| b[0x12a] = 11), Err(CmdError::BadParam));
        assert_eq!(bad(|b| b[0x12a] = 200), Err(CmdError::BadParam));
        assert_eq!(bad(|b| b[0x12b] = 1), Err(CmdError::BadParam));
        assert_eq!(bad(|b| b[0x106] = 0x08), Err(CmdError::BadParam));
    }
}
