//! What a UD QP's (service type 3, MLX4_QP_ST_UD) transitions may carry.
//! mainline mlx4_ib (`ib/qp.c:__mlx4_ib_modify_qp`) sends, as IB's
//! `qp_state_table` allows for UD (`core/verbs.c`):
//!
//! - RST2INIT: the Q_Key (ctx 0xa8, optpar Q_KEY bit 5) and the P_Key
//!   index (path +0x03, optpar PKEY_INDEX bit 4); the port is mlx4_ib's
//!   own until INIT2RTR;
//! - INIT2RTR: the state, mtu_msgmax `(IB_MTU_4096 << 5) | 13` and the
//!   path's scheduling queue `((port - 1) << 6) | 0x83`
//!   (MLX4_IB_DEFAULT_SCHED_QUEUE) without an optpar bit, the sink counter
//!   index; no address vector, no destination QP;
//! - RTR2RTS: the send PSN.
//!
//! Any of them may carry a new Q_Key or P_Key index with its optpar bit.
//! Strict, as the adapter documents nothing here: a UD transition that
//! names an attribute of the connected services (remote access enables,
//! read limits, RNR timer and retries, retry count, ACK timeout,
//! alternate path, migration state) in its optpar is BAD_PARAM, and so is
//! INIT2RTR's scheduling queue naming port 2 (the adapter has one) or a
//! path MTU outside 256..4096 (1..5), the UD message limit the data path
//! takes from it.

use super::query::{MTU_MSGMAX, SCHED_QUEUE};
use super::QpState;
use crate::command::CmdError;

/// `enum mlx4_qp_optpar` bits only RC/UC transitions carry: ALT_ADDR_PATH,
/// RRE, RAE, RWE, RNR_TIMEOUT, SRA_MAX, RRA_MAX, PM_STATE, RETRY_COUNT,
/// RNR_RETRY, ACK_TIMEOUT.
pub(super) const CONNECTED_ONLY: u32 =
    1 | 1 << 1 | 1 << 2 | 1 << 3 | 1 << 6 | 1 << 8 | 1 << 9 | 1 << 10 | 1 << 12 | 1 << 13 | 1 << 14;
/// The scheduling queue's port bit (port 2).
const SCHED_PORT2: u8 = 1 << 6;
/// IB's MTU encodings: 1 (256 bytes) to 5 (4096).
const MTU_MAX: u8 = 5;

/// Checks the optpar and the context `ctx` (mailbox byte 8 on) of a UD
/// QP's transition to `to` (RST2INIT's included).
pub(super) fn check(to: QpState, optpar: u32, ctx: &[u8]) -> Result<(), CmdError> {
    if optpar & CONNECTED_ONLY != 0 {
        return Err(CmdError::BadParam);
    }
    if to == QpState::Rtr {
        let mtu = ctx[MTU_MSGMAX] >> 5;
        if ctx[SCHED_QUEUE] & SCHED_PORT2 != 0 || !(1..=MTU_MAX).contains(&mtu) {
            return Err(CmdError::BadParam);
        }
    }
    Ok(())
}

/// The largest UD message of path MTU `mtu` (IB's encoding): one packet.
pub fn max_message(mtu: u8) -> u64 {
    128 << mtu.clamp(1, MTU_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mainline_transitions_pass_connected_attributes_do_not() {
        let mut ctx = vec![0u8; 0x100];
        // RST2INIT: PKEY_INDEX | Q_KEY.
        assert_eq!(check(QpState::Init, 0x30, &ctx), Ok(()));
        // INIT2RTR: no optpar, 4096 / 2^13, port 1's default queue.
        ctx[MTU_MSGMAX] = (5 << 5) | 13;
        ctx[SCHED_QUEUE] = 0x83;
        assert_eq!(check(QpState::Rtr, 0, &ctx), Ok(()));
        assert_eq!(check(QpState::Rts, 0, &ctx), Ok(()));
        for bit in [0, 1, 2, 3, 6, 8, 9, 10, 12, 13, 14] {
            assert_eq!(check(QpState::Rts, 1 << bit, &ctx), Err(CmdError::BadParam));
        }
        ctx[SCHED_QUEUE] = 0xc3;
        assert_eq!(check(QpState::Rtr, 0, &ctx), Err(CmdError::BadParam));
        ctx[SCHED_QUEUE] = 0x83;
        ctx[MTU_MSGMAX] = 13;
        assert_eq!(check(QpState::Rtr, 0, &ctx), Err(CmdError::BadParam));
        assert_eq!((max_message(5), max_message(1)), (4096, 256));
    }
}
