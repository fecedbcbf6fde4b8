//! Command fault injection (diag CMD_FAULT, +0x5c8): a test arms one fault
//! for the next command with a given opcode, to drive the driver's paths
//! for firmware that fails or hangs, which a correct model never takes.
//! One-shot, kept across counter and device resets until it fires or is
//! disarmed; not a protocol error when it fires. The HCR (`hcr`) fires
//! it, the diag block (`diag`) arms it.

/// What an armed fault does to its command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Not executed; completes with status 0x01, mlx4's INTERNAL_ERR (and
    /// its EQE if E=1).
    Fail = 1,
    /// Never completes: GO stays set, no status, no EQE, until a device
    /// reset.
    Stall = 2,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Fail => "fail",
            Mode::Stall => "stall",
        }
    }
}

/// The armed fault, as CMD_FAULT reads back: `opcode | mode << 16`, 0 when
/// none is armed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmdFault {
    armed: u32,
}

impl CmdFault {
    pub fn armed(&self) -> u32 {
        self.armed
    }

    /// A write of CMD_FAULT: mode 0 disarms, 1 and 2 arm (replacing what
    /// was armed). Anything else is refused with the reason, nothing
    /// changed.
    pub fn write(&mut self, v: u32) -> Result<(), String> {
        let (opcode, mode) = (v & 0xffff, v >> 16);
        match mode {
            0 => self.armed = 0,
            _ if mode > Mode::Stall as u32 => {
                return Err(format!(
                    "CMD_FAULT {v:#x}: mode {mode} (0 disarms, 1 fail, 2 stall)"
                ))
            }
            // The HCR carries 12 opcode bits: a wider one would never fire.
            _ if opcode > 0xfff => {
                return Err(format!("CMD_FAULT {v:#x}: opcode {opcode:#x} above 0xfff"))
            }
            _ => self.armed = v,
        }
        Ok(())
    }

    /// The fault armed for `opcode`, disarmed as it fires.
    pub fn take(&mut self, opcode: u16) -> Option<Mode> {
        if self.armed == 0 || self.armed & 0xffff != u32::from(opcode) {
            return None;
        }
        let mode = if self.armed >> 16 == Mode::Fail as u32 {
            Mode::Fail
        } else {
            Mode::Stall
        };
        self.armed = 0;
        Some(mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_take_disarm() {
        let mut f = CmdFault::default();
        assert_eq!(f.take(0x17), None);
        f.write(0x17 | 1 << 16).unwrap();
        assert_eq!(f.armed(), 0x1_0017);
        assert_eq!(f.take(0x14), None, "another opcode");
        assert_eq!(f.take(0x17), Some(Mode::Fail));
        assert_eq!((f.armed(), f.take(0x17)), (0, None), "one-shot");
        f.write(0x21 | 2 << 16).unwrap();
        f.write(0x21).unwrap();
        assert_eq!(f.armed(), 0, "mode 0 disarms");
        f.write(0x21 | 2 << 16).unwrap();
        assert!(f.write(0x21 | 3 << 16).is_err());
        assert!(f.write(0x1000 | 1 << 16).is_err());
        assert_eq!(f.take(0x21), Some(Mode::Stall), "a refused write keeps it");
    }
}
