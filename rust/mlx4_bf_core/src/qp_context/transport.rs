// SPDX-License-Identifier: GPL-2.0

//! The transport part of a transition's context: retry counts, read
//! depths, PSNs, the responder's access enables, the RNR timer and the
//! Q_Key, each with its optpar bit (`__mlx4_ib_modify_qp()`).

use super::{log_depth, mask, optpar, path, QpAttr, QpFields, QpSoft};

/// Retries, read depths, PSNs, access enables, RNR timer and Q_Key.
pub(super) fn fields(soft: &QpSoft, a: &QpAttr, (c, optpar): (&mut QpFields, &mut u32)) {
    let m = a.mask;
    if m & mask::RNR_RETRY != 0 {
        c.params1 |= u32::from(a.rnr_retry) << 13;
        *optpar |= optpar::RNR_RETRY;
    }
    if m & mask::RETRY_CNT != 0 {
        c.params1 |= u32::from(a.retry_cnt) << 16;
        *optpar |= optpar::RETRY_COUNT;
    }
    if m & mask::MAX_QP_RD_ATOMIC != 0 {
        if a.max_rd_atomic != 0 {
            c.params1 |= log_depth(a.max_rd_atomic) << 21;
        }
        *optpar |= optpar::SRA_MAX;
    }
    if m & mask::SQ_PSN != 0 {
        c.next_send_psn = a.sq_psn;
    }
    if m & mask::MAX_DEST_RD_ATOMIC != 0 {
        if a.max_dest_rd_atomic != 0 {
            c.params2 |= log_depth(a.max_dest_rd_atomic) << 21;
        }
        *optpar |= optpar::RRA_MAX;
    }
    if m & (mask::ACCESS_FLAGS | mask::MAX_DEST_RD_ATOMIC) != 0 {
        let depth = if m & mask::MAX_DEST_RD_ATOMIC != 0 {
            a.max_dest_rd_atomic
        } else {
            soft.resp_depth
        };
        let flags = if m & mask::ACCESS_FLAGS != 0 {
            a.qp_access_flags
        } else {
            soft.atomic_rd_en
        };
        c.params2 |= path::access_flags(flags, depth);
        *optpar |= optpar::RWE | optpar::RRE | optpar::RAE;
    }
    if m & mask::MIN_RNR_TIMER != 0 {
        c.rnr_nextrecvpsn |= u32::from(a.min_rnr_timer) << 24;
        *optpar |= optpar::RNR_TIMEOUT;
    }
    if m & mask::RQ_PSN != 0 {
        c.rnr_nextrecvpsn |= a.rq_psn;
    }
    if m & mask::QKEY != 0 {
        c.qkey = a.qkey;
        *optpar |= optpar::Q_KEY;
    }
}
