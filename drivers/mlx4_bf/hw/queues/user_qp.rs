// SPDX-License-Identifier: GPL-2.0

//! The RDMA provider's QPs in the adapter: each transition is the command
//! `qp_context::modify()` chose, posted as `__mlx4_qp_modify()` posts it
//! (drivers/net/ethernet/mellanox/mlx4/qp.c): 2RST with op_mod 2 and no
//! mailbox, every other with the optpar word and the context. The command
//! lock records the QP by its QPN from the first command that puts it in
//! the device until its 2RST, so that unbind resets whatever the provider
//! left.

use kernel::prelude::*;
use zerocopy::{FromBytes, IntoBytes};

use super::{qp::TO_RST_OP_MOD, qp_mailbox::QpModify};
use crate::{
    hw::cmd::{CmdIf, CmdState, Command, Input, Op},
    qp_context::{PathFields, QpCommand, QpFields, QpOp},
};

/// Posts `c` for a QP of the provider's. The QP is recorded as in the
/// device (by QPN) once a command other than 2RST succeeded, and no longer
/// once a 2RST did; a QP the device does not have (never modified, or
/// reset by unbind) needs no 2RST. A failed 2RST leaves it recorded: the
/// device may still use its queues.
pub(crate) fn modify(cmd: &CmdIf, st: &mut CmdState, c: &QpCommand) -> Result {
    let qpn = (c.in_mod & 0xff_ffff) as usize;
    if qpn >= st.live.user_qps.len() {
        return Err(EINVAL);
    }
    let recorded = st.live.user_qps.contains(qpn);
    if c.op == QpOp::ToRst {
        if recorded {
            reset(cmd, st, qpn)?;
        }
        return Ok(());
    }
    let mbox = QpModify::of_command(c)?;
    cmd.exec(
        st,
        Command::new(Op::of_qp(c.op), c.in_mod)
            .op_mod(c.op_mod)
            .input(Input::Mailbox(mbox.as_bytes())),
    )?;
    st.live.user_qps.set(qpn, true);
    Ok(())
}

/// QUERY_QP of a QP of the provider's the device has (`mlx4_qp_query()`):
/// its context and its alternate path. `-EINVAL` for a QP the device does
/// not have.
pub(crate) fn query(cmd: &CmdIf, st: &mut CmdState, qpn: u32) -> Result<(QpFields, PathFields)> {
    if !st.live.user_qps.contains(qpn as usize) {
        return Err(EINVAL);
    }
    let mut out = [0u8; core::mem::size_of::<QpModify>()];
    cmd.exec(st, Command::new(Op::QueryQp, qpn).output(&mut out))?;
    let answer = QpModify::read_from_bytes(&out).map_err(|_| EINVAL)?;
    Ok(answer.fields())
}

/// 2RST of a QP recorded as in the device.
fn reset(cmd: &CmdIf, st: &mut CmdState, qpn: usize) -> Result {
    cmd.exec(
        st,
        Command::new(Op::ToRstQp, qpn as u32).op_mod(TO_RST_OP_MOD),
    )?;
    st.live.user_qps.set(qpn, false);
    Ok(())
}

/// At unbind: 2RST of every QP of the provider's still in the device. One
/// that fails stays recorded (the adapter is then reset).
pub(crate) fn reset_all(cmd: &CmdIf, st: &mut CmdState) {
    let mut next = 0;
    while let Some(qpn) = st.live.user_qps.next(next) {
        // A failure is logged by the command path.
        let _ = reset(cmd, st, qpn);
        next = qpn + 1;
    }
}
