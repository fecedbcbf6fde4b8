// SPDX-License-Identifier: GPL-2.0

//! What the command line chooses per message and post: the op, the path
//! and the wait, each with its names (tables, files) and its wire code.

use clap::ValueEnum;
use mlx4_bf_core::abi;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Op {
    /// SEND into the peer's receive buffer, payload inline (ib_send_lat)
    Send,
    /// RDMA_WRITE_IMM into the peer's registered region (inline, or gathered
    /// from a registered send region), completed by a receive CQE
    RdmaWriteImm,
}

impl Op {
    pub(super) fn name(self) -> &'static str {
        match self {
            Op::Send => "send",
            Op::RdmaWriteImm => "rdma-write-imm",
        }
    }

    /// The start of the output files' names.
    pub(super) fn file_prefix(self) -> &'static str {
        match self {
            Op::Send => "pingpong",
            Op::RdmaWriteImm => "pingpong-rdma-write-imm",
        }
    }

    /// The message, as the plots' titles name it.
    pub(super) fn title(self) -> &'static str {
        match self {
            Op::Send => "SEND",
            Op::RdmaWriteImm => "RDMA_WRITE_IMM",
        }
    }

    pub(super) fn code(self) -> u32 {
        match self {
            Op::Send => 0,
            Op::RdmaWriteImm => 1,
        }
    }

    pub(super) fn from_code(code: u32) -> Self {
        if code == 1 {
            Op::RdmaWriteImm
        } else {
            Op::Send
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PathMode {
    /// BlueFlame only (MLX4_BF_POST_F_REQUIRE_BF; sizes that do not fit are skipped)
    Bf,
    /// Doorbell only (MLX4_BF_POST_F_FORCE_DOORBELL)
    Db,
    /// Whatever the driver picks (no flag)
    Auto,
}

impl PathMode {
    pub(super) fn flags(self) -> u32 {
        match self {
            PathMode::Bf => abi::POST_F_REQUIRE_BF,
            PathMode::Db => abi::POST_F_FORCE_DOORBELL,
            PathMode::Auto => 0,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            PathMode::Bf => "bf",
            PathMode::Db => "db",
            PathMode::Auto => "auto",
        }
    }

    pub(super) fn from_flags(flags: u32) -> Self {
        match flags {
            abi::POST_F_REQUIRE_BF => PathMode::Bf,
            abi::POST_F_FORCE_DOORBELL => PathMode::Db,
            _ => PathMode::Auto,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WaitMode {
    /// Spin polling the receive CQ (ibv_poll_cq)
    Busy,
    /// Arm the receive CQ (ibv_req_notify_cq), poll once more, sleep in
    /// poll(2) on its completion channel
    Event,
}

impl WaitMode {
    pub(super) fn name(self) -> &'static str {
        match self {
            WaitMode::Busy => "busy",
            WaitMode::Event => "event",
        }
    }
}
