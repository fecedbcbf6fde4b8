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
            c::mlx4_bf_attr,
            abi::Attr,
            [attr_id, len, flags, reserved, data]
        );
        same_layout!(
            c::mlx4_bf_ioctl_hdr,
            abi::IoctlHdr,
            [length, object_id, method_id, num_attrs, reserved1, driver_id, reserved2]
        );
        same_layout!(
            c::mlx4_bf_device_info,
            abi::DeviceInfo,
            [
                abi_version,
                num_uars,
                bf_reg_size,
                bf_buf_size,
                max_bf_wqe_size,
                max_db_wqe_size,
                writer,
                store_block_max,
                max_qps_per_context,
                sq_entries,
                bar2_len,
                max_mrs_per_context,
                max_mr_pages,
                max_mr_size
            ]
        );
        same_layout!(
            c::mlx4_bf_mr_info,
            abi::MrInfo,
            [mr_handle, lkey, rkey, reserved]
        );
        same_layout!(
            c::mlx4_bf_qp_send_info,
            abi::QpSendInfo,
            [sq_offset, sq_entries, sq_stride, bf_buf_size, bf_reg_offset]
        );
        same_layout!(
            c::mlx4_bf_context_info,
            abi::ContextInfo,
            [uar_index, reserved, uar_offset, bf_offset]
        );
        same_layout!(
            c::mlx4_bf_qp_info,
            abi::QpInfo,
            [
                qp_handle,
                qpn,
                rq_entries,
                recv_buf_size,
                cq_entries,
                cqe_size,
                cq_offset,
                cq_db_offset,
                recv_offset,
                wqe_offset
            ]
        );
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
        same_layout!(
            c::mlx4_bf_stats,
            abi::Stats,
            [bf_posts, db_posts, bytes, store_blocks, rejects]
        );
        same_layout!(
            c::mlx4_bf_cqe,
            abi::Cqe,
            [
                my_qpn,
                immed,
                src_qpn,
                reserved1,
                byte_cnt,
                wqe_index,
                vendor_err_syndrome,
                syndrome,
                reserved2,
                owner_sr_opcode
            ]
        );
        assert_eq!(
            offset_of!(c::mlx4_bf_ioctl_hdr, attrs),
            size_of::<abi::IoctlHdr>()
        );
    }

    #[test]
    fn constants_match_the_c_header() {
        assert_eq!(c::MLX4_BF_ABI_VERSION, abi::ABI_VERSION);
        assert_eq!(c::MLX4_BF_IOCTL_MAGIC, abi::IOCTL_MAGIC);
        assert_eq!(c::MLX4_BF_IOCTL as u32, abi::IOCTL);
        assert_eq!(c::MLX4_BF_MAX_ATTRS as usize, abi::MAX_ATTRS);
        assert_eq!(c::MLX4_BF_MAX_PAYLOAD as usize, abi::MAX_PAYLOAD);
        assert_eq!(c::MLX4_BF_ATTR_F_MANDATORY as u16, abi::ATTR_F_MANDATORY);
        assert_eq!(
            c::MLX4_BF_ATTR_F_VALID_OUTPUT as u16,
            abi::ATTR_F_VALID_OUTPUT
        );
        for (cv, rv) in [
            (c::MLX4_BF_OBJECT_DEVICE, abi::OBJECT_DEVICE),
            (c::MLX4_BF_OBJECT_CONTEXT, abi::OBJECT_CONTEXT),
            (c::MLX4_BF_OBJECT_QP, abi::OBJECT_QP),
            (c::MLX4_BF_OBJECT_MR, abi::OBJECT_MR),
            (c::MLX4_BF_METHOD_REG_MR, abi::METHOD_REG_MR),
            (c::MLX4_BF_METHOD_DEREG_MR, abi::METHOD_DEREG_MR),
            (c::MLX4_BF_METHOD_QUERY_DEVICE, abi::METHOD_QUERY_DEVICE),
            (c::MLX4_BF_METHOD_QUERY_STATS, abi::METHOD_QUERY_STATS),
            (c::MLX4_BF_METHOD_QUERY_CONTEXT, abi::METHOD_QUERY_CONTEXT),
            (c::MLX4_BF_METHOD_CREATE_QP, abi::METHOD_CREATE_QP),
            (c::MLX4_BF_METHOD_DESTROY_QP, abi::METHOD_DESTROY_QP),
            (c::MLX4_BF_METHOD_POST_SEND, abi::METHOD_POST_SEND),
            (c::MLX4_BF_METHOD_POST_RECV, abi::METHOD_POST_RECV),
            (c::MLX4_BF_METHOD_CONNECT_QP, abi::METHOD_CONNECT_QP),
            (c::MLX4_BF_METHOD_ARM_CQ, abi::METHOD_ARM_CQ),
            (c::MLX4_BF_ATTR_DEVICE_INFO, abi::ATTR_DEVICE_INFO),
            (c::MLX4_BF_ATTR_DEVICE_STATS, abi::ATTR_DEVICE_STATS),
            (c::MLX4_BF_ATTR_CONTEXT_STATS, abi::ATTR_CONTEXT_STATS),
            (c::MLX4_BF_ATTR_CONTEXT_INFO, abi::ATTR_CONTEXT_INFO),
            (c::MLX4_BF_ATTR_QP_INFO, abi::ATTR_QP_INFO),
            (c::MLX4_BF_ATTR_QP_HANDLE, abi::ATTR_QP_HANDLE),
            (c::MLX4_BF_ATTR_WQE, abi::ATTR_WQE),
            (c::MLX4_BF_ATTR_POST_FLAGS, abi::ATTR_POST_FLAGS),
            (c::MLX4_BF_ATTR_POST_RESULT, abi::ATTR_POST_RESULT),
            (c::MLX4_BF_ATTR_RECV_COUNT, abi::ATTR_RECV_COUNT),
            (c::MLX4_BF_ATTR_REMOTE_QPN, abi::ATTR_REMOTE_QPN),
            (c::MLX4_BF_ATTR_ARM_FLAGS, abi::ATTR_ARM_FLAGS),
            (c::MLX4_BF_ATTR_PAYLOAD, abi::ATTR_PAYLOAD),
            (c::MLX4_BF_ATTR_WQE_LEN, abi::ATTR_WQE_LEN),
            (c::MLX4_BF_ATTR_MR_ADDR, abi::ATTR_MR_ADDR),
            (c::MLX4_BF_ATTR_MR_LENGTH, abi::ATTR_MR_LENGTH),
            (c::MLX4_BF_ATTR_MR_ACCESS, abi::ATTR_MR_ACCESS),
            (c::MLX4_BF_ATTR_MR_INFO, abi::ATTR_MR_INFO),
            (c::MLX4_BF_ATTR_MR_HANDLE, abi::ATTR_MR_HANDLE),
            (c::MLX4_BF_ATTR_QP_FLAGS, abi::ATTR_QP_FLAGS),
            (c::MLX4_BF_ATTR_QP_SEND_INFO, abi::ATTR_QP_SEND_INFO),
        ] {
            assert_eq!(cv as u16, rv);
        }
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
            (c::MLX4_BF_ARM_F_SOLICITED, abi::ARM_F_SOLICITED),
            (c::MLX4_BF_ACCESS_LOCAL_WRITE, abi::ACCESS_LOCAL_WRITE),
            (c::MLX4_BF_ACCESS_REMOTE_WRITE, abi::ACCESS_REMOTE_WRITE),
            (c::MLX4_BF_ACCESS_REMOTE_READ, abi::ACCESS_REMOTE_READ),
            (c::MLX4_BF_QP_F_USER_SEND, abi::QP_F_USER_SEND),
        ] {
            assert_eq!(cv as u32, rv);
        }
        for (cv, rv) in [
            (c::MLX4_BF_REJECT_LENGTH, abi::Reject::Length),
            (c::MLX4_BF_REJECT_SIZE_FIELD, abi::Reject::SizeField),
            (c::MLX4_BF_REJECT_OPCODE, abi::Reject::Opcode),
            (c::MLX4_BF_REJECT_CTRL, abi::Reject::Ctrl),
            (c::MLX4_BF_REJECT_INLINE, abi::Reject::Inline),
            (c::MLX4_BF_REJECT_GATHER, abi::Reject::Gather),
            (c::MLX4_BF_REJECT_FAULT, abi::Reject::Fault),
            (c::MLX4_BF_REJECT_QP, abi::Reject::Qp),
            (c::MLX4_BF_REJECT_LKEY, abi::Reject::Lkey),
            (c::MLX4_BF_REJECT_RANGE, abi::Reject::Range),
            (c::MLX4_BF_REJECT_RKEY, abi::Reject::Rkey),
        ] {
            assert_eq!(cv as u32, rv as u32);
        }
        for (cv, rv) in [
            (c::MLX4_BF_CQE_OWNER, abi::CQE_OWNER),
            (c::MLX4_BF_CQE_IS_SEND, abi::CQE_IS_SEND),
            (c::MLX4_BF_CQE_OPCODE_MASK, abi::CQE_OPCODE_MASK),
        ] {
            assert_eq!(cv as u32, u32::from(rv));
        }
        for (cv, rv) in [
            (
                c::MLX4_BF_CQE_OPCODE_RDMA_WRITE_IMM,
                abi::CQE_OPCODE_RDMA_WRITE_IMM,
            ),
            (c::MLX4_BF_CQE_OPCODE_SEND, abi::CQE_OPCODE_SEND),
            (c::MLX4_BF_CQE_OPCODE_SEND_IMM, abi::CQE_OPCODE_SEND_IMM),
            (c::MLX4_BF_CQE_OPCODE_ERROR, abi::CQE_OPCODE_ERROR),
        ] {
            assert_eq!(cv as u32, u32::from(rv));
        }
        assert_eq!(c::MLX4_BF_REJECT_MAX as usize, abi::REJECT_MAX);
        assert_eq!(c::MLX4_BF_MMAP_UAR_PAGE as u64, abi::MMAP_UAR_PAGE);
        assert_eq!(c::MLX4_BF_MMAP_BF_PAGE as u64, abi::MMAP_BF_PAGE);
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
