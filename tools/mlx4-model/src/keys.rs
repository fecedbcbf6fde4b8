//! Which data segments the model may dereference (§5.7). No memory regions
//! exist yet (no MPT/MTT), so the only usable lkey is the reserved one,
//! QUERY_DEV_CAP 0x98, on a QP whose context sets rlkey: it means "addr is
//! a DMA address". Any other lkey is refused and that memory never touched.

/// QUERY_DEV_CAP 0x98 (be32).
pub const RESERVED_LKEY: u32 = 0x0000_0008;
/// MLX4_INVALID_LKEY: ends a receive WQE's scatter list early.
pub const INVALID_LKEY: u32 = 0x100;

/// May a data segment with `lkey` be read or written on a QP whose rlkey
/// bit is `rlkey`?
pub fn accepted(rlkey: bool, lkey: u32) -> bool {
    rlkey && lkey == RESERVED_LKEY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_reserved_lkey_on_an_rlkey_qp() {
        assert!(accepted(true, RESERVED_LKEY));
        assert!(!accepted(false, RESERVED_LKEY));
        assert!(!accepted(true, 0));
        assert!(!accepted(true, INVALID_LKEY));
        assert!(!accepted(true, 0x1234_5608));
    }
}
