//! Fault injection, to drive the paths a correct model never takes. The
//! diag block (`diag`) arms both kinds; each is one-shot, kept across
//! counter and device resets until it fires or is disarmed, and no
//! protocol error when it fires.
//!
//! - Command faults (diag CMD_FAULT, +0x5c8): the next command with a
//!   given opcode, or (version 12) the Nth, fails or hangs, for the
//!   driver's paths for firmware that does. The HCR (`hcr`) fires it.
//! - Data faults (diag DATA_FAULT, +0x628, version 9): the next RDMA
//!   payload long enough lands with one byte inverted, for a test's own
//!   check of the data it moved (a ping's validate step) to catch. The
//!   data path (`datapath::rdma`) fires it.

use crate::layout::MAX_MESSAGE;

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

/// The armed fault, as CMD_FAULT reads back: `opcode | mode << 16 | skip
/// << 20`, 0 when none is armed. `skip` (version 12) is how many more
/// commands with the opcode run before the one it fires on; 0 fires on the
/// next.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmdFault {
    armed: u32,
    /// Commands with the opcode let through since it was armed.
    skipped: u32,
}

/// One command of `skip` in the armed value.
const SKIP_ONE: u32 = 1 << 20;

impl CmdFault {
    pub fn armed(&self) -> u32 {
        self.armed
    }

    /// A write of CMD_FAULT: mode 0 disarms (whatever the skip), 1 and 2
    /// arm (replacing what was armed). Anything else is refused with the
    /// reason, nothing changed.
    pub fn write(&mut self, v: u32) -> Result<(), String> {
        let (opcode, mode) = (v & 0xffff, (v >> 16) & 0xf);
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
        self.skipped = 0;
        Ok(())
    }

    /// The fault armed for `opcode` if this command is the one it fires on,
    /// with the commands with the opcode let through before it; disarmed as
    /// it fires. One it lets through counts the skip down.
    pub fn take(&mut self, opcode: u16) -> Option<(Mode, u32)> {
        if self.armed == 0 || self.armed & 0xffff != u32::from(opcode) {
            return None;
        }
        if self.armed >= SKIP_ONE {
            self.armed -= SKIP_ONE;
            self.skipped += 1;
            return None;
        }
        let mode = if (self.armed >> 16) & 0xf == Mode::Fail as u32 {
            Mode::Fail
        } else {
            Mode::Stall
        };
        self.armed = 0;
        Some((mode, self.skipped))
    }
}

/// The armed data fault, as DATA_FAULT reads back: the byte offset + 1, 0
/// when none is armed (so that offset 0 can be armed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataFault {
    armed: u32,
}

impl DataFault {
    pub fn armed(&self) -> u32 {
        self.armed
    }

    /// A write of DATA_FAULT: 0 disarms, `offset + 1` arms (replacing what
    /// was armed). An offset the model's longest message
    /// (`MAX_MESSAGE`) cannot reach would never fire: refused with the
    /// reason, nothing changed.
    pub fn write(&mut self, v: u32) -> Result<(), String> {
        if u64::from(v) > MAX_MESSAGE {
            return Err(format!(
                "DATA_FAULT {v:#x}: offset {:#x} at or past the longest message ({MAX_MESSAGE:#x})",
                v - 1
            ));
        }
        self.armed = v;
        Ok(())
    }

    /// The armed offset if a payload of `len` bytes reaches it. Not
    /// disarmed: the data path inverts the byte and calls `fired` once the
    /// payload has landed, so one refused or whose DMA failed leaves it
    /// armed for the next.
    pub fn offset_in(&self, len: usize) -> Option<usize> {
        let at = (self.armed as usize).checked_sub(1)?;
        (at < len).then_some(at)
    }

    pub fn fired(&mut self) {
        self.armed = 0;
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
        assert_eq!(f.take(0x17), Some((Mode::Fail, 0)));
        assert_eq!((f.armed(), f.take(0x17)), (0, None), "one-shot");
        f.write(0x21 | 2 << 16).unwrap();
        f.write(0x21).unwrap();
        assert_eq!(f.armed(), 0, "mode 0 disarms");
        f.write(0x21 | 2 << 16).unwrap();
        assert!(f.write(0x21 | 3 << 16).is_err());
        assert!(f.write(0x1000 | 1 << 16).is_err());
        assert_eq!(
            f.take(0x21),
            Some((Mode::Stall, 0)),
            "a refused write keeps it"
        );
    }

    #[test]
    fn skip_counts_down_to_the_one_it_fires_on() {
        let mut f = CmdFault::default();
        f.write(0x17 | 1 << 16 | 2 << 20).unwrap();
        assert_eq!(f.armed(), 0x21_0017);
        assert_eq!(f.take(0x14), None, "another opcode");
        assert_eq!(f.armed(), 0x21_0017, "does not count");
        assert_eq!(f.take(0x17), None);
        assert_eq!(f.armed(), 0x11_0017);
        assert_eq!(f.take(0x17), None);
        assert_eq!(f.armed(), 0x1_0017);
        assert_eq!(f.take(0x17), Some((Mode::Fail, 2)));
        assert_eq!((f.armed(), f.take(0x17)), (0, None), "one-shot");
        f.write(0x21 | 2 << 16 | 0xfff << 20).unwrap();
        assert_eq!(f.armed(), 0xfff2_0021, "the largest skip");
        f.write(0x21 | 0xfff << 20).unwrap();
        assert_eq!(f.armed(), 0, "mode 0 disarms, whatever the skip");
        f.write(0x21 | 2 << 16 | 1 << 20).unwrap();
        assert!(f.write(0x21 | 3 << 16 | 1 << 20).is_err());
        assert!(f.write(0x21 | 15 << 16).is_err());
        assert!(f.write(0x1021 | 1 << 16 | 1 << 20).is_err());
        assert_eq!(f.armed(), 0x12_0021, "a refused write keeps it");
        assert_eq!(f.take(0x21), None);
        f.write(0x21 | 2 << 16).unwrap();
        assert_eq!(
            f.take(0x21),
            Some((Mode::Stall, 0)),
            "a write restarts the count"
        );
    }

    #[test]
    fn data_fault_arm_reach_disarm() {
        let mut f = DataFault::default();
        assert_eq!(f.offset_in(100), None);
        f.write(1).unwrap();
        assert_eq!(
            (f.armed(), f.offset_in(1), f.offset_in(0)),
            (1, Some(0), None)
        );
        f.write(64).unwrap();
        assert_eq!(f.offset_in(63), None, "too short");
        assert_eq!(f.offset_in(64), Some(63), "not disarmed by a look");
        f.fired();
        assert_eq!((f.armed(), f.offset_in(64)), (0, None), "one-shot");
        f.write(5).unwrap();
        f.write(0).unwrap();
        assert_eq!(f.armed(), 0, "0 disarms");
        f.write(MAX_MESSAGE as u32).unwrap();
        assert_eq!(f.offset_in(1 << 20), Some((1 << 20) - 1), "the last byte");
        assert!(f.write(MAX_MESSAGE as u32 + 1).is_err());
        assert!(f.write(u32::MAX).is_err());
        assert_eq!(f.armed(), MAX_MESSAGE as u32, "a refused write keeps it");
    }
}
