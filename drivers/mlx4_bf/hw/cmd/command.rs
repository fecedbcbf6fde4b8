// SPDX-License-Identifier: GPL-2.0

//! The vocabulary of the command interface: the opcodes this driver posts,
//! their names and time limits, the errno of a status, and a command with
//! its parameters as `mlx4_cmd_box()` / `mlx4_cmd_imm()` take them.

use kernel::prelude::*;

/// How long a command may keep GO set. mlx4 gives every command a minute
/// (`MLX4_CMD_TIME_CLASS_A`..`C`); the firmware's own life cycle (MAP_FA,
/// RUN_FW, INIT_HCA, CLOSE_HCA, UNMAP_FA ...) gets that here too, the
/// commands on contexts 10 s, so that a teardown stuck on one does not
/// hold unbind for minutes.
const TIMEOUT_MS: i64 = 10_000;
const FIRMWARE_TIMEOUT_MS: i64 = 60_000;

/// The op_mod of HW2SW_EQ, HW2SW_CQ and HW2SW_MPT that asks for no context
/// back (mainline's `mlx4_HW2SW_*()`): nothing needs it.
pub(crate) const HW2SW_NO_OUTPUT: u32 = 1;

/// The commands this driver issues (`include/linux/mlx4/cmd.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    QueryDevCap = 0x03,
    QueryFw = 0x04,
    QueryAdapter = 0x06,
    InitHca = 0x07,
    CloseHca = 0x08,
    InitPort = 0x09,
    ClosePort = 0x0a,
    Sw2HwMpt = 0x0d,
    Hw2SwMpt = 0x0f,
    MapEq = 0x12,
    Sw2HwEq = 0x13,
    Hw2SwEq = 0x14,
    Sw2HwCq = 0x16,
    Hw2SwCq = 0x17,
    Rst2InitQp = 0x19,
    Init2RtrQp = 0x1a,
    Rtr2RtsQp = 0x1b,
    Rts2RtsQp = 0x1c,
    Sqerr2RtsQp = 0x1d,
    ToErrQp = 0x1e,
    Rts2SqdQp = 0x1f,
    Sqd2RtsQp = 0x20,
    ToRstQp = 0x21,
    QueryQp = 0x22,
    MadIfc = 0x24,
    ModifyCq = 0x2c,
    Init2InitQp = 0x2d,
    Nop = 0x31,
    Sw2HwSrq = 0x35,
    Hw2SwSrq = 0x36,
    QuerySrq = 0x37,
    Sqd2SqdQp = 0x38,
    ArmSrq = 0x40,
    QueryPort = 0x43,
    UnmapIcm = 0xff9,
    MapIcm = 0xffa,
    UnmapIcmAux = 0xffb,
    MapIcmAux = 0xffc,
    SetIcmSize = 0xffd,
    UnmapFa = 0xffe,
    MapFa = 0xfff,
    RunFw = 0xff6,
}

impl Op {
    /// The command of a QP transition `qp_context::modify()` chose.
    pub(crate) fn of_qp(op: crate::qp_context::QpOp) -> Op {
        use crate::qp_context::QpOp;
        match op {
            QpOp::Rst2Init => Op::Rst2InitQp,
            QpOp::Init2Init => Op::Init2InitQp,
            QpOp::Init2Rtr => Op::Init2RtrQp,
            QpOp::Rtr2Rts => Op::Rtr2RtsQp,
            QpOp::Rts2Rts => Op::Rts2RtsQp,
            QpOp::Sqerr2Rts => Op::Sqerr2RtsQp,
            QpOp::ToErr => Op::ToErrQp,
            QpOp::Rts2Sqd => Op::Rts2SqdQp,
            QpOp::Sqd2Rts => Op::Sqd2RtsQp,
            QpOp::Sqd2Sqd => Op::Sqd2SqdQp,
            QpOp::ToRst => Op::ToRstQp,
        }
    }

    pub(super) fn timeout_ms(self) -> i64 {
        match self {
            Op::InitHca
            | Op::CloseHca
            | Op::MapFa
            | Op::UnmapFa
            | Op::RunFw
            | Op::SetIcmSize
            | Op::MapIcmAux
            | Op::UnmapIcmAux
            | Op::MapIcm
            | Op::UnmapIcm => FIRMWARE_TIMEOUT_MS,
            _ => TIMEOUT_MS,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::QueryDevCap => "QUERY_DEV_CAP",
            Op::QueryFw => "QUERY_FW",
            Op::QueryAdapter => "QUERY_ADAPTER",
            Op::InitHca => "INIT_HCA",
            Op::CloseHca => "CLOSE_HCA",
            Op::InitPort => "INIT_PORT",
            Op::ClosePort => "CLOSE_PORT",
            Op::Sw2HwMpt => "SW2HW_MPT",
            Op::Hw2SwMpt => "HW2SW_MPT",
            Op::MapEq => "MAP_EQ",
            Op::Sw2HwEq => "SW2HW_EQ",
            Op::Hw2SwEq => "HW2SW_EQ",
            Op::Sw2HwCq => "SW2HW_CQ",
            Op::Hw2SwCq => "HW2SW_CQ",
            Op::ModifyCq => "MODIFY_CQ",
            Op::Rst2InitQp => "RST2INIT_QP",
            Op::Init2RtrQp => "INIT2RTR_QP",
            Op::Rtr2RtsQp => "RTR2RTS_QP",
            Op::Rts2RtsQp => "RTS2RTS_QP",
            Op::Sqerr2RtsQp => "SQERR2RTS_QP",
            Op::ToErrQp => "2ERR_QP",
            Op::Rts2SqdQp => "RTS2SQD_QP",
            Op::Sqd2RtsQp => "SQD2RTS_QP",
            Op::ToRstQp => "2RST_QP",
            Op::QueryQp => "QUERY_QP",
            Op::MadIfc => "MAD_IFC",
            Op::Init2InitQp => "INIT2INIT_QP",
            Op::Nop => "NOP",
            Op::Sw2HwSrq => "SW2HW_SRQ",
            Op::Hw2SwSrq => "HW2SW_SRQ",
            Op::QuerySrq => "QUERY_SRQ",
            Op::Sqd2SqdQp => "SQD2SQD_QP",
            Op::ArmSrq => "ARM_SRQ",
            Op::QueryPort => "QUERY_PORT",
            Op::UnmapIcm => "UNMAP_ICM",
            Op::MapIcm => "MAP_ICM",
            Op::UnmapIcmAux => "UNMAP_ICM_AUX",
            Op::MapIcmAux => "MAP_ICM_AUX",
            Op::SetIcmSize => "SET_ICM_SIZE",
            Op::UnmapFa => "UNMAP_FA",
            Op::MapFa => "MAP_FA",
            Op::RunFw => "RUN_FW",
        }
    }
}

/// The errno of a `CMD_STAT_*` status (`mlx4_status_to_errno()`).
pub(super) fn status_to_errno(status: u32) -> Error {
    match status {
        0x01 => EIO,    // INTERNAL_ERR
        0x02 => EPERM,  // BAD_OP
        0x03 => EINVAL, // BAD_PARAM
        0x04 => ENXIO,  // BAD_SYS_STATE
        0x05 => EBADF,  // BAD_RESOURCE
        0x06 => EBUSY,  // RESOURCE_BUSY
        0x08 => ENOMEM, // EXCEED_LIM
        0x09 => EBADF,  // BAD_RES_STATE
        0x0a => EBADF,  // BAD_INDEX
        0x0b => EFAULT, // BAD_NVMEM
        0x0c => ENFILE, // ICM_ERROR
        0x10 => EINVAL, // BAD_QP_STATE
        0x20 => EFAULT, // BAD_SEG_PARAM
        0x21 => EBUSY,  // REG_BOUND
        0x22 => EAGAIN, // LAM_NOT_PRE
        0x30 => EINVAL, // BAD_PKT
        0x40 => ENOMEM, // BAD_SIZE
        0x50 => EACCES, // MULTI_FUNC_REQ
        _ => EIO,
    }
}

/// What goes into `in_param`.
pub(crate) enum Input<'a> {
    None,
    /// An immediate value (e.g. MAP_EQ's event mask).
    Imm(u64),
    /// Bytes copied to the start of the in mailbox, whose address is passed.
    Mailbox(&'a [u8]),
}

/// One command.
pub(crate) struct Command<'a> {
    pub(crate) op: Op,
    pub(crate) in_mod: u32,
    pub(crate) op_mod: u32,
    pub(crate) input: Input<'a>,
    /// Filled from the start of the out mailbox, whose address is passed.
    pub(crate) output: Option<&'a mut [u8]>,
    /// Filled from the HCR's out_param after completion (`mlx4_cmd_imm()`:
    /// SET_ICM_SIZE's auxiliary pages).
    pub(crate) output_imm: Option<&'a mut u64>,
    /// Also report the completion as a CMD EQE (E bit).
    pub(crate) event: bool,
}

impl<'a> Command<'a> {
    pub(crate) fn new(op: Op, in_mod: u32) -> Self {
        Command {
            op,
            in_mod,
            op_mod: 0,
            input: Input::None,
            output: None,
            output_imm: None,
            event: false,
        }
    }

    pub(crate) fn op_mod(mut self, op_mod: u32) -> Self {
        self.op_mod = op_mod;
        self
    }

    pub(crate) fn input(mut self, input: Input<'a>) -> Self {
        self.input = input;
        self
    }

    pub(crate) fn output(mut self, out: &'a mut [u8]) -> Self {
        self.output = Some(out);
        self
    }

    pub(crate) fn output_imm(mut self, out: &'a mut u64) -> Self {
        self.output_imm = Some(out);
        self
    }

    pub(crate) fn event(mut self) -> Self {
        self.event = true;
        self
    }
}
