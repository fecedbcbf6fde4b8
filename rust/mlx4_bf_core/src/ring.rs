// SPDX-License-Identifier: GPL-2.0

//! The owner bit of mlx4's rings (send queue, CQ, EQ): index `n` of a ring
//! of `entries` (a power of two) is in pass `n & entries`, and an entry
//! belongs to software while its owner bit equals that pass — how
//! `get_sw_cqe()` and `next_eqe_sw()` test a CQE or EQE, and how
//! `mlx4_ib_post_send()` stamps a send WQE. One rule, written once.

/// Whether `n` (not wrapped) is in an odd pass of a ring of `entries`: the
/// owner bit that index carries.
#[inline]
pub const fn odd_pass(n: u32, entries: u32) -> bool {
    n & entries != 0
}

/// Whether the entry at `n`, whose owner bit is `owner_set`, is software's
/// (written by the device in this pass).
#[inline]
pub const fn sw_owned(owner_set: bool, n: u32, entries: u32) -> bool {
    owner_set == odd_pass(n, entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn owner_flips_each_pass(log in 0u32..16, n in any::<u32>()) {
            let entries = 1 << log;
            let next_pass = n.wrapping_add(entries);
            prop_assert_ne!(odd_pass(n, entries), odd_pass(next_pass, entries));
            prop_assert!(sw_owned(odd_pass(n, entries), n, entries));
            prop_assert!(!sw_owned(!odd_pass(n, entries), n, entries));
        }
    }

    #[test]
    fn first_pass_is_even() {
        assert!(!odd_pass(0, 8));
        assert!(!odd_pass(7, 8));
        assert!(odd_pass(8, 8));
    }
}
