// SPDX-License-Identifier: GPL-2.0

//! The registers this driver touches, as mlx4 names them, big-endian (read
//! and written through [`super::be_mmio::BeMmio`]).
//!
//! BAR0: the HCR (`MLX4_HCR_BASE`, seven dwords, `mlx4_cmd_post()`), the
//! ownership semaphore (`MLX4_OWNER_BASE`) and the reset register
//! (`MLX4_RESET_BASE + MLX4_RESET_OFFSET`). The UAR page's doorbells are in
//! `bf/bar2.rs` (their offsets are per UAR).

use kernel::io::register;

register! {
    /// HCR dword 0: the input parameter's high half (an inbox's DMA address).
    pub(crate) HCR_IN_PARAM_HI(u32) @ 0x80680 { 31:0 value; }
    /// HCR dword 1: its low half.
    pub(crate) HCR_IN_PARAM_LO(u32) @ 0x80684 { 31:0 value; }
    /// HCR dword 2: the input modifier.
    pub(crate) HCR_IN_MODIFIER(u32) @ 0x80688 { 31:0 value; }
    /// HCR dword 3: the output parameter's high half (an outbox's address).
    pub(crate) HCR_OUT_PARAM_HI(u32) @ 0x8068c { 31:0 value; }
    /// HCR dword 4: its low half.
    pub(crate) HCR_OUT_PARAM_LO(u32) @ 0x80690 { 31:0 value; }
    /// HCR dword 5: the token a completion event carries.
    pub(crate) HCR_TOKEN(u32) @ 0x80694 {
        31:16 token;
    }
    /// HCR dword 6: status, GO, event, toggle, opcode modifier and opcode
    /// (`HCR_GO_BIT`, `HCR_E_BIT`, `HCR_T_BIT`, `HCR_OPMOD_SHIFT`).
    pub(crate) HCR_CTRL(u32) @ 0x80698 {
        31:24 status;
        23:23 go => bool;
        22:22 event => bool;
        21:21 toggle => bool;
        15:12 opmod;
        11:0 opcode;
    }
    /// The ownership semaphore: reads 0 if nobody owns the device (and
    /// takes it); writing 0 frees it (`mlx4_get_ownership()`).
    pub(crate) OWNER(u32) @ 0x8069c { 31:0 value; }
    /// The reset register: `MLX4_RESET_VALUE` resets the device.
    pub(crate) RESET(u32) @ 0xf0010 { 31:0 value; }
}

/// `MLX4_RESET_VALUE`.
pub(crate) const RESET_VALUE: u32 = 1;
