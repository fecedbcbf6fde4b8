// SPDX-License-Identifier: GPL-2.0

//! Property tests of the rules the kernel applies to untrusted input.

use mlx4_bf_core::{
    abi::{POST_F_FORCE_DOORBELL, POST_F_REQUIRE_BF},
    store_block::{plan, whole_blocks, Piece, MAX_BLOCK},
    wqe::{self, Transport},
    wqe_build,
};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Whatever user space hands in, validation answers without panicking,
    /// and what it accepts is consistent with its own findings.
    #[test]
    fn validate_is_total(bytes in proptest::collection::vec(any::<u8>(), 0..1100)) {
        if let Ok(info) = wqe::validate(&bytes, wqe::MAX_WQE_LEN) {
            prop_assert_eq!(info.size16 as usize * 16, bytes.len());
            prop_assert!(info.inline_bytes as usize <= bytes.len());
            prop_assert!(info.gather_segs == 0 || info.inline_bytes == 0);
        }
    }

    /// Mutating a valid WQE never produces something the kernel would write
    /// to the BlueFlame page beyond one buffer.
    #[test]
    fn mutated_wqes_never_overflow_a_bf_buffer(
        payload in 0usize..300,
        flips in proptest::collection::vec((0usize..1008, 0u8..8), 0..4),
        flags in 0u32..3,
    ) {
        let mut buf = [0u8; wqe::MAX_WQE_LEN];
        let data = vec![0xa5u8; payload];
        let len = wqe_build::build_inline(&mut buf, wqe::OPCODE_RDMA_WRITE, Some((1, 2)), &data).unwrap();
        for (at, bit) in flips {
            buf[at % len] ^= 1 << bit;
        }
        if let Ok(info) = wqe::validate(&buf[..len], wqe::MAX_WQE_LEN) {
            if let Ok(wqe::Path::BlueFlame) = wqe::choose_path(&info, flags, 256) {
                prop_assert!(wqe::bf_burst_len(len) <= 256);
                prop_assert_eq!(info.gather_segs, 0);
                prop_assert!(flags & POST_F_FORCE_DOORBELL == 0);
            }
        }
    }

    /// Every inline payload the builder makes is valid and takes BlueFlame
    /// exactly when it fits, and REQUIRE_BF refuses instead of falling back.
    #[test]
    fn built_wqes_are_valid(payload in 0usize..900) {
        let mut buf = [0u8; wqe::MAX_WQE_LEN];
        let data: Vec<u8> = (0..payload).map(|i| i as u8).collect();
        let len = wqe_build::build_inline(&mut buf, wqe::OPCODE_SEND, None, &data).unwrap();
        let info = wqe::validate(&buf[..len], wqe::MAX_WQE_LEN).unwrap();
        prop_assert_eq!(info.inline_bytes as usize, payload);
        let fits = len <= 256;
        prop_assert_eq!(wqe::choose_path(&info, 0, 256).unwrap() == wqe::Path::BlueFlame, fits);
        prop_assert_eq!(wqe::choose_path(&info, POST_F_REQUIRE_BF, 256).is_ok(), fits);
    }

    /// Whatever a send queue holds, the QP_POST method's validation answers
    /// without panicking, and what it accepts is a WQE for `qpn` alone: for
    /// a connected QP one the kernel's rules accept once the queue's stamps
    /// are cleared, for a UD QP of PD `pd` a SEND whose address vector
    /// names `pd`.
    #[test]
    fn validate_queued_is_total(
        bytes in proptest::collection::vec(any::<u8>(), 0..1100),
        qpn in 0u32..1 << 24,
        datagram_pd in proptest::option::of(0u32..1 << 24),
    ) {
        let mut wqe = bytes.clone();
        let transport = datagram_pd.map_or(Transport::Connected, |pd| Transport::Datagram { pd });
        if let Ok(info) = wqe::validate_queued(&mut wqe, qpn, wqe::MAX_WQE_LEN, transport) {
            prop_assert_eq!(info.size16 as usize * 16, wqe.len());
            prop_assert_eq!(u32::from_be_bytes([wqe[4], wqe[5], wqe[6], wqe[7]]) >> 8, qpn);
            prop_assert_eq!(&wqe[..4], &bytes[..4], "the owner bit and counter stay");
            if let Some(pd) = datagram_pd {
                let av = u32::from_be_bytes([wqe[16], wqe[17], wqe[18], wqe[19]]);
                prop_assert_eq!(av & 0xff_ffff, pd);
                prop_assert!(matches!(info.opcode, wqe::OPCODE_NOP | wqe::OPCODE_SEND | wqe::OPCODE_SEND_IMM));
            } else {
                let owner_opcode = u32::from_be_bytes([wqe[0], wqe[1], wqe[2], wqe[3]]);
                wqe[..4].copy_from_slice(&(owner_opcode & !(wqe::CTRL_OWNER | 0xffff << 8)).to_be_bytes());
                wqe[4..7].fill(0);
                prop_assert_eq!(wqe::validate(&wqe, wqe::MAX_WQE_LEN), Ok(info));
            }
        }
    }

    /// A WQE as libmlx4 leaves it in its send queue (owner bit, counter,
    /// maybe its QPN, stale bytes after the inline data) is the builder's
    /// WQE, stamped for the QP, with the padding cleared.
    #[test]
    fn a_queued_wqe_is_the_built_one_stamped(
        payload in 0usize..300,
        rdma in any::<bool>(),
        counter in any::<u16>(),
        owner in any::<bool>(),
        qpn in 0u32..1 << 24,
        stamped in any::<bool>(),
        stale in any::<u8>(),
    ) {
        let mut built = [0u8; wqe::MAX_WQE_LEN];
        let data: Vec<u8> = (0..payload).map(|i| i as u8 | 1).collect();
        let (opcode, raddr) = if rdma {
            (wqe::OPCODE_RDMA_WRITE, Some((0x1000, 7)))
        } else {
            (wqe::OPCODE_SEND, None)
        };
        let len = wqe_build::build_inline(&mut built, opcode, raddr, &data).unwrap();
        let info = wqe::validate(&built[..len], wqe::MAX_WQE_LEN).unwrap();
        let queue_bits = if owner { wqe::CTRL_OWNER } else { 0 } | u32::from(counter) << 8;
        let mut expect = built;
        expect[..4].copy_from_slice(&(opcode | queue_bits).to_be_bytes());
        expect[4..7].copy_from_slice(&qpn.to_be_bytes()[1..]);
        let mut queued = expect;
        if !stamped {
            queued[4..7].fill(0);
        }
        // Stale bytes after the inline data, up to the WQE's end.
        let mut end = if rdma { 32 } else { 16 };
        while end + 4 <= len && queued[end] & 0x80 != 0 {
            end += 4 + (u32::from_be_bytes([queued[end], queued[end + 1], queued[end + 2], queued[end + 3]]) & 0x7fff_ffff) as usize;
        }
        queued[end.min(len)..len].fill(stale);
        prop_assert_eq!(
            wqe::validate_queued(&mut queued[..len], qpn, wqe::MAX_WQE_LEN, Transport::Connected),
            Ok(info)
        );
        prop_assert_eq!(&queued[..len], &expect[..len]);
    }

    /// The store-block plan covers the copy exactly, with pieces whose
    /// memory source never crosses 4 KiB (zpci_memcpy_toio's rule), at most
    /// 128 bytes, blocks only above 8 bytes.
    /// Where the writer's fast path writes 128-byte blocks in order, the
    /// plan says exactly that.
    #[test]
    fn whole_blocks_is_the_plan(src in 0usize..3 * 4096, dst in 0usize..4096, len in 0usize..600) {
        if whole_blocks(src, dst, len) {
            let want: Vec<Piece> = (0..len)
                .step_by(MAX_BLOCK)
                .map(|offset| Piece::Block { offset, len: MAX_BLOCK.min(len - offset) })
                .collect();
            prop_assert_eq!(plan(src, dst, len).collect::<Vec<_>>(), want);
        }
    }

    /// Every BlueFlame burst from the 1 KiB aligned WQE buffer takes it.
    #[test]
    fn bursts_from_the_wqe_buffer_are_whole_blocks(
        src in (0usize..16).prop_map(|k| k * 1024),
        dst in (0usize..512).prop_map(|k| k * 8),
        len in (1usize..=16).prop_map(|k| k * 64),
    ) {
        prop_assert!(whole_blocks(src, dst, len));
    }

    #[test]
    fn store_block_plan_is_exact(src in 0usize..1 << 20, dst in 0usize..1 << 20, len in 0usize..2048) {
        let mut next = 0;
        for p in plan(src, dst, len) {
            prop_assert_eq!(p.offset(), next);
            prop_assert!(p.len() != 0 && p.len() <= MAX_BLOCK);
            let from = src + p.offset();
            prop_assert_eq!(from / 4096, (from + p.len() - 1) / 4096);
            let start = dst + p.offset();
            match p {
                Piece::Block { .. } => prop_assert!(p.len() > 8 && from % 8 == 0 && start % 8 == 0),
                Piece::Single { .. } => prop_assert!(p.len().is_power_of_two() && p.len() <= 8),
            }
            next += p.len();
        }
        prop_assert_eq!(next, len);
    }
}
