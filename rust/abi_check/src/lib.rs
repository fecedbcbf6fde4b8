// SPDX-License-Identifier: GPL-2.0

//! The Rust ABI mirror (`mlx4_bf_core::abi`) against the C header, as bindgen
//! reads it: every size, field offset and constant must agree.

#[cfg(test)]
#[allow(non_camel_case_types, non_upper_case_globals, dead_code, clippy::all)]
mod c {
    include!(concat!(env!("OUT_DIR"), "/uapi.rs"));
}

#[cfg(test)]
// bindgen's integer types for enums and macros differ by target; cast all.
#[allow(clippy::unnecessary_cast)]
mod tests {
    use super::c;
    use core::mem::{offset_of, size_of};
    use mlx4_bf_core::abi;

    /// Same size, and each listed field at the same offset with the same size.
    macro_rules! same_layout {
        ($c:ty, $rust:ty, [$($field:ident),* $(,)?]) => {{
            assert_eq!(size_of::<$c>(), size_of::<$rust>(), "size of {}", stringify!($c));
            $(
                assert_eq!(
                    offset_of!($c, $field),
                    offset_of!($rust, $field),
                    "offset of {}.{}", stringify!($c), stringify!($field)
                );
                let cz = { let v: $c = unsafe { core::mem::zeroed() }; size_of_val(&v.$field) };
                let rz = { let v = <$rust>::default(); size_of_val(&v.$field) };
                assert_eq!(cz, rz, "size of {}.{}", stringify!($c), stringify!($field));
            )*
        }};
    }

    #[test]
    fn structs_match_the_c_header() {
        same_layout!(
            c::mlx4_bf_post_result,
            abi::PostResult,
            [
                path,
                wqe_index,
                bf_offset,
                bytes_written,
                store_blocks,
                reserved
            ]
        );
    }

    #[test]
    fn constants_match_the_c_header() {
        for (cv, rv) in [
            (c::MLX4_BF_WRITER_STORE_BLOCK, abi::WRITER_STORE_BLOCK),
            (
                c::MLX4_BF_WRITER_WRITE_COMBINING,
                abi::WRITER_WRITE_COMBINING,
            ),
            (c::MLX4_BF_POST_F_FORCE_DOORBELL, abi::POST_F_FORCE_DOORBELL),
            (c::MLX4_BF_POST_F_REQUIRE_BF, abi::POST_F_REQUIRE_BF),
            (c::MLX4_BF_PATH_BLUEFLAME, abi::PATH_BLUEFLAME),
            (c::MLX4_BF_PATH_DOORBELL, abi::PATH_DOORBELL),
        ] {
            assert_eq!(cv as u32, rv);
        }
        assert_eq!(
            c::UVERBS_ID_NS_SHIFT as u16,
            abi::UVERBS_ID_NS.trailing_zeros() as u16
        );
        for (cv, rv) in [
            (c::MLX4_BF_IB_METHOD_QP_POST as u32, abi::IB_METHOD_QP_POST),
            (
                c::MLX4_BF_IB_ATTR_QP_POST_WQE as u32,
                abi::IB_ATTR_QP_POST_WQE,
            ),
            (
                c::MLX4_BF_IB_ATTR_QP_POST_FLAGS as u32,
                abi::IB_ATTR_QP_POST_FLAGS,
            ),
            (
                c::MLX4_BF_IB_ATTR_QP_POST_RESULT as u32,
                abi::IB_ATTR_QP_POST_RESULT,
            ),
        ] {
            assert_eq!(cv, u32::from(rv));
        }
        assert_eq!(c::MLX4_BF_QP_POST_MAX_WQE as usize, abi::QP_POST_MAX_WQE);
    }
}
