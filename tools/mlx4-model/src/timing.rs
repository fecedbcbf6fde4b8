//! The modelled PCIe clock: a virtual time in ns that every transaction
//! advances by its cost from one small table. It is **a model**, calibrated
//! so that the one-way latency of an inline SEND reproduces the seed's
//! System Z measurements (mission-and-facts.md, "Measured on real
//! hardware"); it is not a measurement of this machine. Idle time does not
//! exist for it: only transactions move the clock.
//!
//! Composition (Documentation/mlx4-model-design.rst, "The PCIe clock"):
//!
//! - post-to-wire, BlueFlame: the burst's store blocks (the burst split in
//!   pieces of at most 128 bytes, as `zpci_memcpy_toio` does);
//! - post-to-wire, doorbell: one posted write, then the WQE's DMA read
//!   round trip plus its 64-byte units;
//! - one-way: post-to-wire + wire + the payload's DMA write + the receive
//!   CQE's DMA write.

/// One posted MMIO write (one TLP): a doorbell, an HCR dword, a diag
/// register. 100 ns: with the store block below it puts a BlueFlame
/// fallback 0.59 µs above a doorbell post for a 64-byte WQE, inside the
/// 0.5–0.7 µs the seed's first prototype lost.
pub const POSTED_WRITE_NS: u64 = 100;
/// A zPCI store block (PCISTB): fixed part per block.
pub const STORE_BLOCK_NS: u64 = 350;
/// A store block: per byte (5.3 ns).
pub const STORE_BLOCK_BYTE_PS: u64 = 5_300;
/// The largest store block `zpci_memcpy_toio` issues.
pub const STORE_BLOCK_MAX: u64 = 128;
/// A DMA read's round trip (request out, first completion back).
pub const DMA_READ_RTT_NS: u64 = 2_430;
/// A DMA read: per 64-byte unit (the HCA reads whole 64-byte lines).
pub const DMA_READ_UNIT_NS: u64 = 155;
pub const DMA_READ_UNIT: u64 = 64;
/// A DMA write (posted, device to memory): fixed part.
pub const DMA_WRITE_NS: u64 = 250;
/// A DMA write: per byte (0.25 ns, 4 GB/s).
pub const DMA_WRITE_BYTE_PS: u64 = 250;
/// The wire and both ports: from the sender's "ready to transmit" to the
/// receiver's first DMA write. It also absorbs what the model does not
/// model separately (the receiving software's poll).
pub const WIRE_NS: u64 = 1_370;
/// A non-posted MMIO or config access the CPU waits for. Not calibrated
/// (the seed has no measurement); assumed equal to a DMA read round trip.
/// On no latency path the model reports.
pub const NON_POSTED_NS: u64 = DMA_READ_RTT_NS;
/// An MSI-X message: a posted write from the device.
pub const MSI_NS: u64 = DMA_WRITE_NS;

/// A DMA read's place in the adapter's pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// A new read: round trip plus units.
    Fresh,
    /// A further read of the same object issued without waiting (the rest
    /// of a WQE, the wrapped part, the next gather segment): units only.
    Continued,
    /// A read a real HCA serves from its caches or prefetches off the
    /// critical path (doorbell records, receive WQEs): free. The model
    /// performs and records it for its checks.
    Cached,
}

/// One transaction, for the cost table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tx {
    PostedWrite,
    /// A write of `len` bytes at offset `off` of a BlueFlame half: its
    /// bytes at the store-block rate, plus a block's fixed part if it
    /// starts a block (offset 0 or 128 of the half).
    StoreBlock {
        off: u64,
        len: u64,
    },
    NonPosted,
    DmaRead {
        len: u64,
        read: Read,
    },
    DmaWrite {
        len: u64,
    },
    Msi,
    Wire,
    /// Records that are no bus transaction (DMA maps, resets, marks).
    None,
}

const PS: u64 = 1000;

/// The cost of one transaction in ps (the clock keeps ps so that per-byte
/// costs of 8-byte chunks add up exactly).
pub fn cost_ps(tx: Tx) -> u64 {
    match tx {
        Tx::PostedWrite => POSTED_WRITE_NS * PS,
        Tx::StoreBlock { off, len } => {
            let fixed = if off.is_multiple_of(STORE_BLOCK_MAX) {
                STORE_BLOCK_NS * PS
            } else {
                0
            };
            fixed + len.saturating_mul(STORE_BLOCK_BYTE_PS)
        }
        Tx::NonPosted => NON_POSTED_NS * PS,
        Tx::DmaRead { len, read } => {
            let units = len.div_ceil(DMA_READ_UNIT) * DMA_READ_UNIT_NS * PS;
            match read {
                Read::Fresh => DMA_READ_RTT_NS * PS + units,
                Read::Continued => units,
                Read::Cached => 0,
            }
        }
        Tx::DmaWrite { len } => DMA_WRITE_NS * PS + len.saturating_mul(DMA_WRITE_BYTE_PS),
        Tx::Msi => MSI_NS * PS,
        Tx::Wire => WIRE_NS * PS,
        Tx::None => 0,
    }
}

/// The store blocks of a burst of `len` bytes: pieces of at most 128 bytes
/// (no 4 KiB crossing: the driver's source buffer is assumed aligned).
pub fn store_blocks(len: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut left = len;
    while left > 0 {
        let b = left.min(STORE_BLOCK_MAX);
        out.push(b);
        left -= b;
    }
    out
}

/// The virtual clock since the model started, kept in ps, read in ns.
/// Never reset.
#[derive(Debug, Default, Clone)]
pub struct Clock {
    ps: u64,
}

impl Clock {
    pub fn now(&self) -> u64 {
        self.ps / PS
    }

    pub fn advance(&mut self, tx: Tx) {
        self.ps = self.ps.saturating_add(cost_ps(tx));
    }
}

/// The seed's System Z measurements the clock is calibrated to: (the WQE
/// padded to 64 bytes = the BlueFlame burst, BF µs, doorbell µs), typical
/// one-way latency (half a round trip). The seed states them for payloads
/// of 1–28, 29–88, 89–148 and 149–208 bytes of an RDMA write (32-byte
/// header); a SEND (16-byte header) reaches the same bursts with 1–44,
/// 45–104, 105–164 and 165–224 bytes.
pub const SEED_SYSTEM_Z: [(u64, f64, f64); 4] = [
    (64, 2.6, 4.6),
    (128, 2.9, 4.7),
    (192, 3.6, 4.9),
    (256, 4.0, 5.1),
];
/// How far the model may be from each entry (µs).
pub const CALIBRATION_TOLERANCE_US: f64 = 0.15;

/// Bytes of an inline SEND WQE carrying `payload` bytes: the 16-byte
/// control segment, then inline segments with a 4-byte header each, none
/// crossing a 64-byte boundary.
pub fn inline_send_bytes(payload: u64) -> u64 {
    if payload <= 44 {
        return 16 + 4 + payload;
    }
    let rest = payload - 44;
    let full = (rest - 1) / 60;
    64 + 64 * full + 4 + (rest - 60 * full)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One-way latency in µs by the composition the device uses (the device
    /// test `timing::calibration_through_the_device` measures it on posts).
    fn one_way_us(payload: u64, bf: bool) -> f64 {
        let wqe = inline_send_bytes(payload);
        let burst = wqe.div_ceil(64) * 64;
        let to_wire = if bf {
            (0..burst / 8)
                .map(|i| cost_ps(Tx::StoreBlock { off: i * 8, len: 8 }))
                .sum::<u64>()
        } else {
            cost_ps(Tx::PostedWrite)
                + cost_ps(Tx::DmaRead {
                    len: 64,
                    read: Read::Fresh,
                })
                + cost_ps(Tx::DmaRead {
                    len: wqe.saturating_sub(64),
                    read: Read::Continued,
                })
        };
        let rest = cost_ps(Tx::Wire)
            + cost_ps(Tx::DmaWrite { len: payload })
            + cost_ps(Tx::DmaWrite { len: 32 });
        (to_wire + rest) as f64 / 1e6
    }

    #[test]
    fn calibrated_to_the_seed_system_z_table() {
        for payload in 1..=224u64 {
            let burst = inline_send_bytes(payload).div_ceil(64) * 64;
            let &(_, bf, db) = SEED_SYSTEM_Z.iter().find(|e| e.0 == burst).unwrap();
            let (m_bf, m_db) = (one_way_us(payload, true), one_way_us(payload, false));
            assert!(
                (m_bf - bf).abs() <= CALIBRATION_TOLERANCE_US,
                "BF {payload} B: model {m_bf:.3} µs, seed {bf}"
            );
            assert!(
                (m_db - db).abs() <= CALIBRATION_TOLERANCE_US,
                "doorbell {payload} B: model {m_db:.3} µs, seed {db}"
            );
            assert!(m_bf < m_db, "BlueFlame is faster at {payload} B");
        }
        // The gain shrinks as the store blocks grow.
        let gain = |p| one_way_us(p, false) - one_way_us(p, true);
        assert!(gain(20) > gain(60) && gain(60) > gain(120) && gain(120) > gain(200));
    }

    #[test]
    fn inline_send_sizes() {
        assert_eq!(inline_send_bytes(2), 22);
        assert_eq!(inline_send_bytes(44), 64);
        assert_eq!(inline_send_bytes(45), 69);
        assert_eq!(inline_send_bytes(104), 128);
        assert_eq!(inline_send_bytes(105), 133);
        assert_eq!(inline_send_bytes(224), 256);
        assert_eq!(inline_send_bytes(225), 261);
    }

    #[test]
    fn store_blocks_split_at_128() {
        assert_eq!(store_blocks(64), [64]);
        assert_eq!(store_blocks(128), [128]);
        assert_eq!(store_blocks(192), [128, 64]);
        assert_eq!(store_blocks(256), [128, 128]);
        assert!(store_blocks(0).is_empty());
    }

    /// Charged chunk by chunk (QEMU's 8-byte or 4-byte writes), a burst
    /// costs exactly what its store blocks cost.
    #[test]
    fn chunks_cost_their_blocks() {
        for len in [64u64, 128, 192, 256] {
            let by_blocks: u64 = store_blocks(len)
                .iter()
                .map(|&b| STORE_BLOCK_NS * PS + b * STORE_BLOCK_BYTE_PS)
                .sum();
            for chunk in [4u64, 8, 64] {
                let by_chunks: u64 = (0..len / chunk)
                    .map(|i| {
                        cost_ps(Tx::StoreBlock {
                            off: i * chunk,
                            len: chunk,
                        })
                    })
                    .sum();
                assert_eq!(by_chunks, by_blocks, "{len} in {chunk}-byte writes");
            }
        }
    }

    #[test]
    fn reads_in_the_pipeline() {
        let fresh = cost_ps(Tx::DmaRead {
            len: 64,
            read: Read::Fresh,
        });
        assert_eq!(fresh, (DMA_READ_RTT_NS + DMA_READ_UNIT_NS) * PS);
        let cont = cost_ps(Tx::DmaRead {
            len: 16,
            read: Read::Continued,
        });
        assert_eq!(cont, DMA_READ_UNIT_NS * PS);
        let cached = cost_ps(Tx::DmaRead {
            len: 4,
            read: Read::Cached,
        });
        assert_eq!(cached, 0);
    }

    #[test]
    fn clock_only_moves_forward() {
        let mut c = Clock::default();
        c.advance(Tx::Wire);
        c.advance(Tx::None);
        assert_eq!(c.now(), WIRE_NS);
    }
}
