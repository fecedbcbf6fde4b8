// SPDX-License-Identifier: GPL-2.0

//! Port 1. INIT_PORT brings its link up (`core/fw.c:mlx4_INIT_PORT`, as
//! mlx4_ib does when it opens an IB port), CLOSE_PORT takes it down. Its
//! LID comes from the port's subnet management agent, a PortInfo SubnGet
//! through MAD_IFC as `ib/main.c:ib_link_query_port` asks it: RC QPs
//! connected on this port name it as the remote LID of their primary path.
//! The RDMA provider reads the port's attributes through the same agent
//! ([`smp`]) and its table sizes through QUERY_PORT ([`query_caps`]).

use kernel::prelude::*;

use crate::{
    hw::cmd::be_fields::get8,
    hw::cmd::{CmdIf, CmdState, Command, Input, Op},
    hw::firmware::dev_cap::{RdmaCap, CMD_IF_NEW_PORT_CMDS},
    mad,
};

/// The port every QP of this driver uses.
pub(crate) const PORT: u32 = 1;

/// `MLX4_MAD_IFC_IGNORE_MKEY | MLX4_MAD_IFC_IGNORE_BKEY`.
const MAD_IFC_IGNORE_KEYS: u32 = 3;
/// PortInfo's state (low nibble of byte 32): ACTIVE.
const PORT_ACTIVE: u8 = 4;
/// QUERY_PORT's out mailbox: log2 of the GIDs (bits 7..4) and P_Keys.
const QUERY_PORT_MAX_GID_PKEY: usize = 0x07;
const QUERY_PORT_OUT: usize = 0x100;

/// What PortInfo says of the port.
pub(crate) struct PortInfo {
    pub(crate) lid: u16,
    pub(crate) active: bool,
}

/// INIT_PORT of [`PORT`].
pub(crate) fn init(cmd: &CmdIf, st: &mut CmdState) -> Result {
    cmd.exec(st, Command::new(Op::InitPort, PORT))
}

/// CLOSE_PORT of [`PORT`].
pub(crate) fn close(cmd: &CmdIf, st: &mut CmdState) -> Result {
    cmd.exec(st, Command::new(Op::ClosePort, PORT))
}

/// The attribute `attr_id` (block `attr_mod`) of [`PORT`] from its
/// subnet management agent: a SubnGet through MAD_IFC as `mlx4_MAD_IFC()`
/// posts it with the keys ignored. An answer with a MAD status is `-EIO`.
pub(crate) fn smp(
    cmd: &CmdIf,
    st: &mut CmdState,
    attr_id: u16,
    attr_mod: u32,
) -> Result<[u8; mad::SMP_DATA_LEN]> {
    let out = mad_ifc(cmd, st, &mad::query(attr_id, attr_mod))?;
    let status = mad::status(&out);
    if status != 0 {
        dev_err!(
            cmd.dev(),
            "SMP attribute {:#06x}: MAD status {:#06x}\n",
            attr_id,
            status
        );
        return Err(EIO);
    }
    Ok(*mad::data(&out))
}

/// MAD `mad` to [`PORT`]'s agents through MAD_IFC, as `mlx4_MAD_IFC()`
/// posts one without a work completion (the keys ignored); their answer,
/// whatever its MAD status.
pub(crate) fn mad_ifc(
    cmd: &CmdIf,
    st: &mut CmdState,
    mad: &[u8; mad::MAD_SIZE],
) -> Result<[u8; mad::MAD_SIZE]> {
    let mut out = [0u8; mad::MAD_SIZE];
    cmd.exec(
        st,
        Command::new(Op::MadIfc, PORT)
            .op_mod(MAD_IFC_IGNORE_KEYS)
            .input(Input::Mailbox(mad))
            .output(&mut out),
    )?;
    Ok(out)
}

/// PortInfo of [`PORT`] from its subnet management agent.
pub(crate) fn query(cmd: &CmdIf, st: &mut CmdState) -> Result<PortInfo> {
    let info = mad::port_info(&smp(cmd, st, mad::attr::PORT_INFO, PORT)?);
    Ok(PortInfo {
        lid: info.lid,
        active: info.state == PORT_ACTIVE,
    })
}

/// The sizes of [`PORT`]'s GID and P_Key tables: QUERY_PORT, or before
/// command interface revision 3 QUERY_DEV_CAP's (`mlx4_QUERY_PORT()`).
pub(crate) fn query_caps(
    cmd: &CmdIf,
    st: &mut CmdState,
    cmd_if_rev: u16,
    cap: &RdmaCap,
) -> Result<(u16, u16)> {
    if cmd_if_rev < CMD_IF_NEW_PORT_CMDS {
        return Ok((cap.old_max_gids, cap.old_max_pkeys));
    }
    let mut out = [0u8; QUERY_PORT_OUT];
    cmd.exec(st, Command::new(Op::QueryPort, PORT).output(&mut out))?;
    let field = get8(&out, QUERY_PORT_MAX_GID_PKEY)?;
    Ok((1 << (field >> 4), 1 << (field & 0xf)))
}
