// SPDX-License-Identifier: GPL-2.0

//! QUERY_FW and QUERY_DEV_CAP: their out mailboxes decoded as mlx4's
//! `mlx4_QUERY_FW()` and `mlx4_QUERY_DEV_CAP()` (`mlx4/fw.c`) do, and what
//! this driver requires of them.

use kernel::{device, prelude::*};

use crate::{
    hw::cmd::be_fields::{get16, get32, get64, get8},
    hw::cmd::{CmdIf, Command, Op},
    icm::profile::{self, EntrySizes},
    identity,
};

// QUERY_FW out mailbox.
const FW_PAGES: usize = 0x00;
const FW_VER_MAJOR: usize = 0x02;
const FW_VER_SUBMINOR: usize = 0x04;
const FW_VER_MINOR: usize = 0x06;
const FW_CMD_IF_REV: usize = 0x0a;
/// `MLX4_COMMAND_INTERFACE_MIN_REV` / `_MAX_REV`.
const CMD_IF_REVS: core::ops::RangeInclusive<u16> = 2..=3;

// QUERY_DEV_CAP out mailbox.
const DEV_CAP_MAX_SRQ_SZ: usize = 0x10;
const DEV_CAP_MAX_QP_SZ: usize = 0x11;
const DEV_CAP_RSVD_QP: usize = 0x12;
const DEV_CAP_MAX_QP: usize = 0x13;
const DEV_CAP_RSVD_SRQ: usize = 0x14;
const DEV_CAP_MAX_SRQ: usize = 0x15;
const DEV_CAP_MAX_CQ_SZ: usize = 0x19;
const DEV_CAP_RSVD_CQ: usize = 0x1a;
const DEV_CAP_MAX_CQ: usize = 0x1b;
const DEV_CAP_MAX_MPT: usize = 0x1d;
const DEV_CAP_RSVD_EQ: usize = 0x1e;
const DEV_CAP_MAX_EQ: usize = 0x1f;
const DEV_CAP_RSVD_MTT: usize = 0x20;
const DEV_CAP_RSVD_MRW: usize = 0x22;
const DEV_CAP_MAX_MTT_SEG: usize = 0x23;
const DEV_CAP_MAX_REQ_QP: usize = 0x29;
const DEV_CAP_ACK_DELAY: usize = 0x35;
const DEV_CAP_VL_PORT: usize = 0x37;
const DEV_CAP_MAX_MSG_SZ: usize = 0x38;
const DEV_CAP_MAX_GID: usize = 0x3b;
const DEV_CAP_RATE_SUPPORT: usize = 0x3c;
const DEV_CAP_MAX_PKEY: usize = 0x3f;
const DEV_CAP_EXT_FLAGS: usize = 0x40;
const DEV_CAP_FLAGS: usize = 0x44;
const DEV_CAP_RSVD_UAR: usize = 0x48;
const DEV_CAP_UAR_SZ: usize = 0x49;
const DEV_CAP_PAGE_SZ: usize = 0x4b;
const DEV_CAP_BF: usize = 0x4c;
const DEV_CAP_LOG_BF_REG_SZ: usize = 0x4d;
const DEV_CAP_LOG_MAX_BF_REGS_PER_PAGE: usize = 0x4e;
const DEV_CAP_MAX_SG_SQ: usize = 0x51;
const DEV_CAP_MAX_DESC_SZ_SQ: usize = 0x52;
const DEV_CAP_MAX_SG_RQ: usize = 0x55;
const DEV_CAP_RSVD_PD: usize = 0x64;
const DEV_CAP_MAX_PD: usize = 0x65;
const DEV_CAP_MAX_COUNTERS: usize = 0x68;
const DEV_CAP_RSVD_LKEY: usize = 0x98;
/// The ICM entry sizes, 16 bits each: RDMARC, QPC, AUXC, ALTC, EQC, CQC,
/// SRQC, cMPT, MTT, dMPT.
const DEV_CAP_RDMARC_ENTRY_SZ: usize = 0x80;
const DEV_CAP_MAX_ICM_SZ: usize = 0xa0;

const MAILBOX_USED: usize = 0x100;
/// `MLX4_COMMAND_INTERFACE_NEW_PORT_CMDS`: from this revision on, a
/// port's GID and P_Key table sizes come from QUERY_PORT.
pub(crate) const CMD_IF_NEW_PORT_CMDS: u16 = 3;

pub(crate) struct FwInfo {
    /// The firmware area it asks for, in 4 KiB pages (MAP_FA).
    pub(crate) fw_pages: u32,
    pub(crate) major: u16,
    pub(crate) minor: u16,
    pub(crate) subminor: u16,
    pub(crate) cmd_if_rev: u16,
}

/// The capabilities this driver uses, decoded as mlx4 decodes them.
pub(crate) struct DevCap {
    pub(crate) log_max_qp_sz: u8,
    pub(crate) reserved_qps: u32,
    pub(crate) reserved_srqs: u32,
    pub(crate) max_srqs: u32,
    /// WQEs of an SRQ at most (log2; `caps.max_srq_wqes`).
    pub(crate) log_max_srq_sz: u8,
    pub(crate) max_qps: u32,
    pub(crate) log_max_cq_sz: u8,
    pub(crate) reserved_cqs: u32,
    pub(crate) max_cqs: u32,
    /// Four per reserved UAR at least (their doorbells are in it).
    pub(crate) reserved_eqs: u32,
    pub(crate) log_max_eqs: u8,
    /// Bytes of UAR pages (`1 << (field + 20)`).
    pub(crate) uar_size: u64,
    pub(crate) min_page_sz: u64,
    pub(crate) blueflame: bool,
    pub(crate) bf_reg_size: u32,
    pub(crate) bf_regs_per_page: u32,
    pub(crate) max_desc_sz_sq: u16,
    /// The lkey that makes a data segment's address a DMA address.
    pub(crate) reserved_lkey: u32,
    /// MPTs (memory regions), the first `reserved_mrws` the firmware's.
    pub(crate) max_mpts: u32,
    pub(crate) reserved_mrws: u32,
    /// MTT entries, the first `reserved_mtts` the firmware's. mlx4 calls
    /// the field at 0x23 "max MTT segments"; with 8-byte segments (0x90)
    /// they are entries.
    pub(crate) max_mtts: u32,
    pub(crate) reserved_mtts: u32,
    /// Bytes of an entry of each ICM table.
    pub(crate) entry_sizes: EntrySizes,
    /// ICM the adapter can address.
    pub(crate) max_icm_size: u64,
    /// What the RDMA provider reports (`mlx4_QUERY_DEV_CAP()`'s fields of
    /// these names).
    pub(crate) rdma: RdmaCap,
}

/// The capabilities only the RDMA provider reads. (The responder's read
/// depth is the profile's, `icm::LOG_RDMARC_PER_QP`, as mlx4_core's
/// `caps.max_qp_dest_rdma` is its `rdmarc_shift`'s.)
#[derive(Clone, Copy)]
pub(crate) struct RdmaCap {
    pub(crate) max_requester_per_qp: u32,
    pub(crate) local_ca_ack_delay: u8,
    pub(crate) num_ports: u8,
    pub(crate) log_max_msg: u8,
    /// Before command interface revision 3 (`MLX4_FLAG_OLD_PORT_CMDS`),
    /// the GID and P_Key table sizes of every port.
    pub(crate) old_max_gids: u16,
    pub(crate) old_max_pkeys: u16,
    pub(crate) stat_rate_support: u16,
    /// `MLX4_DEV_CAP_FLAG_*`: 0x44, and 0x40 above it.
    pub(crate) flags: u64,
    pub(crate) max_sq_sg: u8,
    pub(crate) max_rq_sg: u8,
    pub(crate) reserved_pds: u32,
    pub(crate) max_pds: u32,
    /// Only with `MLX4_DEV_CAP_FLAG_COUNTERS`; else 0.
    pub(crate) max_counters: u32,
}

/// QUERY_FW, the one command the firmware takes before it runs. Refuses a
/// command interface revision mlx4 would refuse.
pub(crate) fn query_fw(cmd: &CmdIf) -> Result<FwInfo> {
    let mut out = [0u8; MAILBOX_USED];
    cmd.exec(
        &mut cmd.lock(),
        Command::new(Op::QueryFw, 0).output(&mut out),
    )?;
    let fw = FwInfo {
        fw_pages: u32::from(get16(&out, FW_PAGES)?),
        major: get16(&out, FW_VER_MAJOR)?,
        minor: get16(&out, FW_VER_MINOR)?,
        subminor: get16(&out, FW_VER_SUBMINOR)?,
        cmd_if_rev: get16(&out, FW_CMD_IF_REV)?,
    };
    let dev = cmd.dev();
    if !CMD_IF_REVS.contains(&fw.cmd_if_rev) {
        dev_err!(
            dev,
            "command interface revision {} not supported (2..3)\n",
            fw.cmd_if_rev
        );
        return Err(ENODEV);
    }
    Ok(fw)
}

/// QUERY_ADAPTER's board id (`mlx4_QUERY_ADAPTER()`), as `get_board_id()`
/// reads it from the vendor-specific data.
pub(crate) fn query_board_id(cmd: &CmdIf) -> Result<[u8; identity::BOARD_ID_LEN]> {
    let mut out = [0u8; MAILBOX_USED];
    cmd.exec(
        &mut cmd.lock(),
        Command::new(Op::QueryAdapter, 0).output(&mut out),
    )?;
    Ok(identity::board_id(&out))
}

fn log_at(out: &[u8], at: usize, mask: u8) -> Result<u32> {
    let log = get8(out, at)? & mask;
    1u32.checked_shl(u32::from(log)).ok_or(EINVAL)
}

/// QUERY_DEV_CAP.
pub(crate) fn query_dev_cap(cmd: &CmdIf) -> Result<DevCap> {
    let mut out = [0u8; MAILBOX_USED];
    cmd.exec(
        &mut cmd.lock(),
        Command::new(Op::QueryDevCap, 0).output(&mut out),
    )?;
    let entry =
        |i: usize| -> Result<u32> { Ok(u32::from(get16(&out, DEV_CAP_RDMARC_ENTRY_SZ + 2 * i)?)) };
    let reserved_uars = u32::from(get8(&out, DEV_CAP_RSVD_UAR)? >> 4);
    Ok(DevCap {
        log_max_qp_sz: get8(&out, DEV_CAP_MAX_QP_SZ)?,
        reserved_qps: log_at(&out, DEV_CAP_RSVD_QP, 0xf)?,
        reserved_srqs: 1 << (get8(&out, DEV_CAP_RSVD_SRQ)? >> 4),
        max_srqs: log_at(&out, DEV_CAP_MAX_SRQ, 0x1f)?,
        log_max_srq_sz: get8(&out, DEV_CAP_MAX_SRQ_SZ)?,
        max_qps: log_at(&out, DEV_CAP_MAX_QP, 0x1f)?,
        log_max_cq_sz: get8(&out, DEV_CAP_MAX_CQ_SZ)?,
        reserved_cqs: log_at(&out, DEV_CAP_RSVD_CQ, 0xf)?,
        max_cqs: log_at(&out, DEV_CAP_MAX_CQ, 0x1f)?,
        reserved_eqs: profile::reserved_eqs(get8(&out, DEV_CAP_RSVD_EQ)?, reserved_uars),
        log_max_eqs: get8(&out, DEV_CAP_MAX_EQ)? & 0xf,
        uar_size: 1u64
            .checked_shl(u32::from(get8(&out, DEV_CAP_UAR_SZ)? & 0x3f) + 20)
            .ok_or(EINVAL)?,
        min_page_sz: 1u64
            .checked_shl(u32::from(get8(&out, DEV_CAP_PAGE_SZ)? & 0x3f))
            .ok_or(EINVAL)?,
        blueflame: get8(&out, DEV_CAP_BF)? & 0x80 != 0,
        bf_reg_size: log_at(&out, DEV_CAP_LOG_BF_REG_SZ, 0x1f)?,
        // Firmware once reported a count here, not a log: mlx4 then takes 8.
        bf_regs_per_page: log_at(&out, DEV_CAP_LOG_MAX_BF_REGS_PER_PAGE, 0x3f).unwrap_or(8),
        max_desc_sz_sq: get16(&out, DEV_CAP_MAX_DESC_SZ_SQ)?,
        reserved_lkey: get32(&out, DEV_CAP_RSVD_LKEY)?,
        // Memory regions are optional: logs beyond 31 are capped, not refused.
        max_mpts: 1 << (get8(&out, DEV_CAP_MAX_MPT)? & 0x3f).min(31),
        reserved_mrws: log_at(&out, DEV_CAP_RSVD_MRW, 0xf)?,
        max_mtts: 1 << (get8(&out, DEV_CAP_MAX_MTT_SEG)? & 0x3f).min(31),
        reserved_mtts: 1 << (get8(&out, DEV_CAP_RSVD_MTT)? >> 4),
        entry_sizes: EntrySizes {
            rdmarc: entry(0)?,
            qpc: entry(1)?,
            auxc: entry(2)?,
            altc: entry(3)?,
            eqc: entry(4)?,
            cqc: entry(5)?,
            srqc: entry(6)?,
            cmpt: entry(7)?,
            mtt: entry(8)?,
            dmpt: entry(9)?,
            // Not reported: the driver chooses it (`firmware/icm.rs`).
            mcg: 0,
        },
        max_icm_size: get64(&out, DEV_CAP_MAX_ICM_SZ)?,
        rdma: rdma_cap(&out)?,
    })
}

/// The part of QUERY_DEV_CAP only the RDMA provider reads.
fn rdma_cap(out: &[u8]) -> Result<RdmaCap> {
    let flags =
        u64::from(get32(out, DEV_CAP_FLAGS)?) | u64::from(get32(out, DEV_CAP_EXT_FLAGS)?) << 32;
    let max_counters = if flags & crate::ib_device::dev_flag::COUNTERS != 0 {
        get32(out, DEV_CAP_MAX_COUNTERS)?
    } else {
        0
    };
    Ok(RdmaCap {
        max_requester_per_qp: log_at(out, DEV_CAP_MAX_REQ_QP, 0x3f).unwrap_or(0),
        local_ca_ack_delay: get8(out, DEV_CAP_ACK_DELAY)? & 0x1f,
        num_ports: get8(out, DEV_CAP_VL_PORT)? & 0xf,
        log_max_msg: get8(out, DEV_CAP_MAX_MSG_SZ)? & 0x1f,
        old_max_gids: 1 << (get8(out, DEV_CAP_MAX_GID)? & 0xf),
        old_max_pkeys: 1 << (get8(out, DEV_CAP_MAX_PKEY)? & 0xf),
        stat_rate_support: get16(out, DEV_CAP_RATE_SUPPORT)?,
        flags,
        max_sq_sg: get8(out, DEV_CAP_MAX_SG_SQ)?,
        max_rq_sg: get8(out, DEV_CAP_MAX_SG_RQ)?,
        reserved_pds: u32::from(get8(out, DEV_CAP_RSVD_PD)? >> 4),
        max_pds: log_at(out, DEV_CAP_MAX_PD, 0x3f).unwrap_or(0),
        max_counters,
    })
}

impl DevCap {
    /// Checks what the send path needs; `sq_log` and `cq_log` are the queue
    /// sizes this driver uses, `max_wqe` its largest WQE.
    pub(crate) fn check(
        &self,
        dev: &device::Device,
        sq_log: u8,
        cq_log: u8,
        max_wqe: usize,
    ) -> Result {
        let fail = |what: &str| {
            dev_err!(dev, "QUERY_DEV_CAP: {}\n", what);
            Err(ENODEV)
        };
        if !self.blueflame {
            return fail("no BlueFlame");
        }
        if self.min_page_sz > 4096 {
            return fail("minimum page size above 4 KiB");
        }
        if self.log_max_qp_sz < sq_log {
            return fail("send queues too small");
        }
        if usize::from(self.max_desc_sz_sq) < max_wqe {
            return fail("send WQEs too small");
        }
        if self.log_max_cq_sz < cq_log {
            return fail("CQs too small");
        }
        if self.entry_sizes.mtt != 8 {
            // MTT entries are 64-bit addresses (`mlx4_write_mtt_chunk`).
            return fail("MTT entries are not 8 bytes");
        }
        Ok(())
    }
}
