// SPDX-License-Identifier: GPL-2.0

//! Completion vectors over the EQs, as mlx4_core lays them out
//! (`mlx4_enable_msi_x()`, `MLX4_CQ_TO_EQ_VECTOR()`): EQ 0 is the async EQ,
//! on MSI-X vector 0; each further EQ is a completion EQ, completion vector
//! `v` being EQ `v + 1`. With one EQ there is one completion vector, and the
//! async EQ takes the completions too.

/// The completion vectors `eqs` EQs give (`num_comp_vectors`).
pub const fn vectors(eqs: usize) -> u32 {
    if eqs <= 1 {
        1
    } else if eqs - 1 > u32::MAX as usize {
        u32::MAX
    } else {
        (eqs - 1) as u32
    }
}

/// The EQ, by index, that takes the completions of CQs on completion
/// vector `vector` when `eqs` EQs are up; a vector beyond [`vectors`] wraps
/// (mlx4_ib's `vector % num_comp_vectors`).
pub const fn eq_of(eqs: usize, vector: u32) -> usize {
    if eqs <= 1 {
        0
    } else {
        1 + vector as usize % (eqs - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn every_vector_has_an_eq_that_is_up(eqs in 0usize..64, vector in any::<u32>()) {
            prop_assert!(eq_of(eqs, vector) < eqs.max(1));
            prop_assert_eq!(eq_of(eqs, vector), eq_of(eqs, vector % vectors(eqs)));
        }

        #[test]
        fn the_async_eq_takes_completions_only_alone(eqs in 0usize..64, vector in any::<u32>()) {
            prop_assert_eq!(eq_of(eqs, vector) == 0, eqs <= 1);
        }

        #[test]
        fn each_vector_its_own_eq(eqs in 2usize..64, a in 0u32..64, b in 0u32..64) {
            let n = vectors(eqs);
            prop_assume!(a < n && b < n && a != b);
            prop_assert_ne!(eq_of(eqs, a), eq_of(eqs, b));
        }
    }

    #[test]
    fn mainline_layout() {
        // Two CPUs, one port: three vectors, two completion vectors.
        assert_eq!(vectors(3), 2);
        assert_eq!([eq_of(3, 0), eq_of(3, 1)], [1, 2]);
        assert_eq!((vectors(1), eq_of(1, 0)), (1, 0));
    }
}
