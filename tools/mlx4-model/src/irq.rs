//! Interrupt delivery: the device asks for MSI-X vector `n`; the shell knows
//! whether the guest has set that vector up.

pub trait Irq {
    /// Raise MSI-X `vector`; false when the guest has not enabled it.
    fn raise(&mut self, vector: u16) -> bool;
}

/// Records raised vectors (tests).
#[derive(Debug, Default)]
pub struct RecordingIrq {
    pub raised: Vec<u16>,
    /// Vectors that count as not set up by the guest.
    pub disabled: Vec<u16>,
}

impl Irq for RecordingIrq {
    fn raise(&mut self, vector: u16) -> bool {
        if self.disabled.contains(&vector) {
            return false;
        }
        self.raised.push(vector);
        true
    }
}
