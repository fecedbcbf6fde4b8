//! The model's diagnostic block at BAR0 + 0xe0000 (not mlx4's): magic,
//! version, little-endian counters, QP_SELECT, MARK, EXPECT, FALLBACK_EVERY
//! and the counter reset.

use crate::counters::Counters;
use crate::device::Device;
use crate::guest_memory::GuestMemory;
use crate::irq::Irq;
use crate::protocol::Code;
use serde_json::json;

pub const MAGIC: u32 = 0x4d4c_584d; // "MXLM"
pub const VERSION: u32 = 1;

pub const QP_SELECT: u64 = 0x08;
pub const MARK: u64 = 0x0c;
pub const EXPECT: u64 = 0x10;
pub const FALLBACK_EVERY: u64 = 0x14;
pub const RESET_COUNTERS: u64 = 0x18;

#[derive(Debug, Clone)]
pub struct DiagState {
    pub qp_select: u32,
    /// Nonzero while a test's EXPECT window is open.
    pub expect: u32,
    pub fallback_every: u32,
    /// Valid BF posts since FALLBACK_EVERY was last set.
    valid_posts: u64,
}

impl DiagState {
    pub fn new(fallback_every: u32) -> Self {
        DiagState {
            qp_select: 0,
            expect: 0,
            fallback_every,
            valid_posts: 0,
        }
    }

    /// Counts a valid BF post; true if it is the Nth and must fall back.
    pub fn count_valid_bf_post(&mut self) -> bool {
        self.valid_posts += 1;
        self.fallback_every != 0
            && self
                .valid_posts
                .is_multiple_of(u64::from(self.fallback_every))
    }
}

impl<M: GuestMemory, I: Irq> Device<M, I> {
    /// Returns a protocol error to record (after the read's trace record).
    pub(crate) fn diag_read(&mut self, off: u64, data: &mut [u8]) -> Option<(Code, String)> {
        let len = data.len() as u64;
        if !(len == 4 || len == 8) || !off.is_multiple_of(len) {
            return Some((
                Code::DiagBadAccess,
                format!("{len}-byte diag read at +{off:#x}"),
            ));
        }
        // Counters are 64-bit; a 4-byte read returns the addressed half.
        let base = off & !7;
        let value: Option<u64> = match base {
            0x00 => Some(u64::from(MAGIC) | (u64::from(VERSION) << 32)),
            0x08 => Some(u64::from(self.diag.qp_select)),
            0x10 => Some(u64::from(self.diag.expect) | (u64::from(self.diag.fallback_every) << 32)),
            0x18 => Some(0),
            o => self.counters.diag_value(o, self.diag.qp_select),
        };
        let Some(v) = value else {
            return Some((
                Code::UndefinedOffset,
                format!("diag read at undefined +{off:#x}"),
            ));
        };
        let bytes = v.to_le_bytes();
        let start = (off - base) as usize;
        data.copy_from_slice(&bytes[start..start + data.len()]);
        None
    }

    pub(crate) fn diag_write(&mut self, off: u64, data: &[u8]) {
        if data.len() != 4 || !off.is_multiple_of(4) {
            self.protocol_error(
                Code::DiagBadAccess,
                format!("{}-byte diag write at +{off:#x}", data.len()),
            );
            return;
        }
        let v = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
        match off {
            QP_SELECT => self.diag.qp_select = v,
            MARK => {
                self.trace.record("mark", json!({"value": v}));
                self.trace.flush();
            }
            EXPECT => self.diag.expect = v,
            FALLBACK_EVERY => {
                self.diag.fallback_every = v;
                self.diag.valid_posts = 0;
            }
            RESET_COUNTERS => self.counters = Counters::default(),
            _ => self.protocol_error(
                Code::UndefinedOffset,
                format!("diag write at read-only or undefined +{off:#x}"),
            ),
        }
    }
}
