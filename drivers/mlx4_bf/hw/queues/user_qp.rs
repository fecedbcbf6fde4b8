// SPDX-License-Identifier: GPL-2.0

//! The RDMA provider's QPs in the adapter: each transition is the command
//! `qp_context::modify()` chose, posted as `__mlx4_qp_modify()` posts it
//! (drivers/net/ethernet/mellanox/mlx4/qp.c): 2RST with op_mod 2 and no
//! mailbox, every other with the optpar word and the context. The command
//! lock records the QP under its table slot from the first command that
//! puts it in the device until its 2RST, as the contexts' QPs (`qp.rs`),
//! so that unbind resets whatever the provider left.

use kernel::prelude::*;
use zerocopy::IntoBytes;

use super::{qp::TO_RST_OP_MOD, qp_mailbox::QpModify};
use crate::{
    hw::cmd::{CmdIf, CmdState, Command, Input, Op},
    qp_context::{QpCommand, QpOp},
};

/// Posts `c` for the QP in table slot `slot`. The QP is recorded as in
/// the device once a command other than 2RST succeeded, and no longer
/// once a 2RST did; a QP the device does not have (never modified, or
/// reset by unbind) needs no 2RST. A failed 2RST leaves it recorded: the
/// device may still use its queues.
pub(crate) fn modify(cmd: &CmdIf, st: &mut CmdState, slot: usize, c: &QpCommand) -> Result {
    let qpn = c.in_mod & 0xff_ffff;
    let recorded = *st.live.qps.get(slot).ok_or(EINVAL)?;
    if recorded != 0 && recorded != qpn {
        return Err(EINVAL);
    }
    if c.op == QpOp::ToRst {
        if recorded != 0 {
            cmd.exec(
                st,
                Command::new(Op::ToRstQp, c.in_mod).op_mod(TO_RST_OP_MOD),
            )?;
            st.live.qps[slot] = 0;
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
    st.live.qps[slot] = qpn;
    Ok(())
}
