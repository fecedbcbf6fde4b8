// SPDX-License-Identifier: GPL-2.0

//! Port 1. INIT_PORT brings its link up (`core/fw.c:mlx4_INIT_PORT`, as
//! mlx4_ib does when it opens an IB port), CLOSE_PORT takes it down. Its
//! LID comes from the port's subnet management agent, a PortInfo SubnGet
//! through MAD_IFC as `ib/main.c:ib_link_query_port` asks it: RC QPs
//! connected on this port name it as the remote LID of their primary path.

use kernel::prelude::*;

use crate::{
    hw::cmd::be_fields::{get16, get8},
    hw::cmd::{CmdIf, CmdState, Command, Input, Op},
};

/// The port every QP of this driver uses.
pub(crate) const PORT: u32 = 1;

const MAD_SIZE: usize = 256;
/// `MLX4_MAD_IFC_IGNORE_MKEY | MLX4_MAD_IFC_IGNORE_BKEY`.
const MAD_IFC_IGNORE_KEYS: u32 = 3;
// The MAD header (`struct ib_mad_hdr`) and the SMP's data (+64).
const MAD_BASE_VERSION: usize = 0;
const MAD_MGMT_CLASS: usize = 1;
const MAD_CLASS_VERSION: usize = 2;
const MAD_METHOD: usize = 3;
const MAD_STATUS: usize = 4;
const MAD_ATTR_ID: usize = 16;
const MAD_ATTR_MOD: usize = 20;
const SMP_DATA: usize = 64;
const CLASS_SUBN_LID_ROUTED: u8 = 0x01;
const METHOD_GET: u8 = 0x01;
const ATTR_PORT_INFO: u16 = 0x0015;
// PortInfo: the LID and the port state (low nibble; 4 is ACTIVE).
const PORT_INFO_LID: usize = 16;
const PORT_INFO_STATE: usize = 32;
const PORT_ACTIVE: u8 = 4;

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

/// PortInfo of [`PORT`] from its subnet management agent.
pub(crate) fn query(cmd: &CmdIf, st: &mut CmdState) -> Result<PortInfo> {
    let mut mad = [0u8; MAD_SIZE];
    mad[MAD_BASE_VERSION] = 1;
    mad[MAD_MGMT_CLASS] = CLASS_SUBN_LID_ROUTED;
    mad[MAD_CLASS_VERSION] = 1;
    mad[MAD_METHOD] = METHOD_GET;
    mad[MAD_ATTR_ID..MAD_ATTR_ID + 2].copy_from_slice(&ATTR_PORT_INFO.to_be_bytes());
    mad[MAD_ATTR_MOD..MAD_ATTR_MOD + 4].copy_from_slice(&PORT.to_be_bytes());
    let mut out = [0u8; MAD_SIZE];
    cmd.exec(
        st,
        Command::new(Op::MadIfc, PORT)
            .op_mod(MAD_IFC_IGNORE_KEYS)
            .input(Input::Mailbox(&mad))
            .output(&mut out),
    )?;
    let status = get16(&out, MAD_STATUS)?;
    if status != 0 {
        dev_err!(cmd.dev(), "PortInfo: MAD status {:#06x}\n", status);
        return Err(EIO);
    }
    Ok(PortInfo {
        lid: get16(&out, SMP_DATA + PORT_INFO_LID)?,
        active: get8(&out, SMP_DATA + PORT_INFO_STATE)? & 0xf == PORT_ACTIVE,
    })
}
