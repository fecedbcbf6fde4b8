//! The firmware's port commands, port 1 only (one IB port): SET_PORT
//! of an IB port (`core/port.c:mlx4_SET_PORT`), INIT_PORT and CLOSE_PORT
//! (`core/fw.c:mlx4_INIT_PORT`, `mlx4_CLOSE_PORT`; command interface
//! revision 3: no mailbox), and CONF_SPECIAL_QP
//! (`core/qp.c:mlx4_CONF_SPECIAL_QP`), which names the base of the special
//! QPs (QP0/QP1 of each port).
//!
//! A port that INIT_PORT brings up reports it as real firmware does when
//! the link comes up: a PORT_CHANGE EQE, subtype PORT_ACTIVE, on the EQ
//! MAP_EQ mapped PORT_CHANGE to (`core/eq.c:mlx4_eq_int`), posted after the
//! command completes (`hcr`). CLOSE_PORT posts no PORT_DOWN (see
//! Documentation/mlx4-model.rst).

use crate::bytes::be32;
use crate::command::{CmdError, CommandRequest};
use serde_json::{json, Value};

/// SET_PORT dword 0 (opmod 0): change MTU (bit 22), change VL cap (21),
/// MTU cap in bits 15..12, VL cap (a number of VLs) in bits 7..4.
const CHANGE_MTU: u32 = 1 << 22;
const CHANGE_VL: u32 = 1 << 21;
/// IB MTU 4096 (enum 5), the port's cap (QUERY_PORT 0x01).
const MAX_MTU: u32 = 5;
/// Data VLs the port has (VL0-7): SET_PORT with more is BAD_SIZE, which
/// mlx4 retries with half as many.
const MAX_VLS: u32 = 8;

/// EQE type PORT_CHANGE and its subtype PORT_ACTIVE
/// (`include/linux/mlx4/device.h`).
pub const PORT_CHANGE: u8 = 0x09;
pub const PORT_ACTIVE: u8 = 0x04;

/// A PORT_CHANGE EQE's subtype and body (EQE bytes 0x04..0x1c): the
/// subtype at EQE 0x03 goes in the EQE's header, the port in bits 31..28 of
/// the be32 at EQE 0x0c (`eqe->event.port_change.port`, read `>> 28`).
pub fn port_change_body(port: u32) -> [u8; 24] {
    let mut b = [0u8; 24];
    b[8..12].copy_from_slice(&(port << 28).to_be_bytes());
    b
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortState {
    /// INIT_PORT ran and no CLOSE_PORT since.
    pub up: bool,
    /// SET_PORT: MTU cap (IB enum), VLs and capability mask.
    pub mtu_cap: u32,
    pub vls: u32,
    pub cap_mask: u32,
    /// CONF_SPECIAL_QP's base QPN (0: none).
    pub base_sqpn: u32,
    /// A PORT_CHANGE subtype to post once the command completes.
    pub pending_event: Option<u8>,
}

fn port(in_mod: u32) -> Result<(), CmdError> {
    if in_mod != 1 {
        return Err(CmdError::BadParam);
    }
    Ok(())
}

impl PortState {
    /// SET_PORT, opmod 0 (IB) only: the in mailbox's first two dwords.
    pub fn set_port(&mut self, r: &CommandRequest, mb: &[u8]) -> Result<(), CmdError> {
        port(r.in_mod)?;
        if r.op_mod != 0 {
            return Err(CmdError::BadOp);
        }
        let d0 = be32(mb, 0);
        if d0 & CHANGE_MTU != 0 {
            let mtu = (d0 >> 12) & 0xf;
            if mtu == 0 || mtu > MAX_MTU {
                return Err(CmdError::BadParam);
            }
            self.mtu_cap = mtu;
        }
        if d0 & CHANGE_VL != 0 {
            let vls = (d0 >> 4) & 0xf;
            if vls > MAX_VLS {
                return Err(CmdError::BadSize);
            }
            self.vls = vls;
        }
        self.cap_mask = be32(mb, 4);
        Ok(())
    }

    pub fn init_port(&mut self, r: &CommandRequest) -> Result<(), CmdError> {
        port(r.in_mod)?;
        if !self.up {
            self.pending_event = Some(PORT_ACTIVE);
        }
        self.up = true;
        Ok(())
    }

    /// CLOSE_PORT of a port that is not up is no error: mlx4_core closes
    /// every port at unload whether mlx4_ib opened it or not
    /// (`core/main.c:mlx4_unload_one`).
    pub fn close_port(&mut self, r: &CommandRequest) -> Result<(), CmdError> {
        port(r.in_mod)?;
        self.up = false;
        Ok(())
    }

    /// in_mod = the base QPN, a multiple of 8 (`core/qp.c:mlx4_init_qp_table`
    /// aligns it), or 0 to release the special QPs.
    pub fn conf_special_qp(&mut self, r: &CommandRequest) -> Result<(), CmdError> {
        if !r.in_mod.is_multiple_of(8) || r.in_mod > 0xff_ffff {
            return Err(CmdError::BadParam);
        }
        self.base_sqpn = r.in_mod;
        Ok(())
    }

    pub fn record(&self) -> Value {
        json!({"up": self.up, "mtu_cap": self.mtu_cap, "vls": self.vls,
               "cap_mask": self.cap_mask, "base_sqpn": self.base_sqpn})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::put_be32;

    fn req(in_mod: u32, op_mod: u8) -> CommandRequest {
        CommandRequest {
            in_param: 0,
            in_mod,
            out_param: 0,
            token: 0,
            op_mod,
            opcode: 0,
            event: false,
        }
    }

    #[test]
    fn set_port_as_mlx4_core_retries_it() {
        let mut p = PortState::default();
        let mut mb = [0u8; 8];
        // mlx4_SET_PORT: MTU 4096, 8 VLs first, then 4, 2, 1 on BAD_SIZE.
        let d0 = |vl: u32| CHANGE_MTU | CHANGE_VL | (5 << 12) | (vl << 4);
        put_be32(&mut mb, 0, d0(8));
        put_be32(&mut mb, 4, 0x0251_0868);
        assert_eq!(p.set_port(&req(1, 0), &mb), Ok(()));
        assert_eq!((p.mtu_cap, p.vls, p.cap_mask), (5, 8, 0x0251_0868));
        put_be32(&mut mb, 0, d0(15));
        assert_eq!(p.set_port(&req(1, 0), &mb), Err(CmdError::BadSize));
        put_be32(&mut mb, 0, CHANGE_MTU | (6 << 12));
        assert_eq!(p.set_port(&req(1, 0), &mb), Err(CmdError::BadParam));
        assert_eq!(p.set_port(&req(2, 0), &mb), Err(CmdError::BadParam));
        assert_eq!(p.set_port(&req(1, 1), &mb), Err(CmdError::BadOp));
    }

    #[test]
    fn ports_and_special_qps() {
        let mut p = PortState::default();
        assert_eq!(p.close_port(&req(1, 0)), Ok(()));
        assert_eq!(p.init_port(&req(1, 0)), Ok(()));
        assert!(p.up);
        assert_eq!(p.pending_event.take(), Some(PORT_ACTIVE));
        // Up already: no second event.
        assert_eq!(p.init_port(&req(1, 0)), Ok(()));
        assert_eq!(p.pending_event, None);
        assert_eq!(p.init_port(&req(2, 0)), Err(CmdError::BadParam));
        assert_eq!(port_change_body(1)[8], 0x10);
        assert_eq!(p.conf_special_qp(&req(0x200, 0)), Ok(()));
        assert_eq!(p.base_sqpn, 0x200);
        assert_eq!(p.conf_special_qp(&req(0x204, 0)), Err(CmdError::BadParam));
        assert_eq!(p.conf_special_qp(&req(0, 0)), Ok(()));
    }
}
