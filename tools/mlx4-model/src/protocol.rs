//! Protocol errors: every driver action the contract forbids or leaves
//! undefined. Each has a stable snake_case code used in the trace and summary.

macro_rules! codes {
    ($($variant:ident => $code:literal),* $(,)?) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code { $($variant),* }

        impl Code {
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code),* }
            }
        }
    };
}

codes! {
    UndefinedRegion => "undefined_region",
    UndefinedOffset => "undefined_offset",
    BadAccessSize => "bad_access_size",
    HcrNarrowWrite => "hcr_narrow_write",
    HcrWriteWithoutGo => "hcr_write_without_go",
    HcrToggleRepeated => "hcr_toggle_repeated",
    CmdWhilePending => "cmd_while_pending",
    CmdEventWithoutEq => "cmd_event_without_eq",
    OwnershipBadWrite => "ownership_bad_write",
    ResetBadWrite => "reset_bad_write",
    DiagBadAccess => "diag_bad_access",
    DmaUnmapped => "dma_unmapped",
    DoorbellBadSize => "doorbell_bad_size",
    DoorbellBadValue => "doorbell_bad_value",
    DoorbellUnknownQp => "doorbell_unknown_qp",
    DoorbellNotRts => "doorbell_not_rts",
    DoorbellForeignUar => "doorbell_foreign_uar",
    DoorbellNothingToFetch => "doorbell_nothing_to_fetch",
    FallbackNothingToFetch => "fallback_nothing_to_fetch",
    CqDoorbellBadSize => "cq_doorbell_bad_size",
    CqDoorbellIncomplete => "cq_doorbell_incomplete",
    CqDoorbellUnknownCq => "cq_doorbell_unknown_cq",
    CqDoorbellForeignUar => "cq_doorbell_foreign_uar",
    CqDoorbellBadCmd => "cq_doorbell_bad_cmd",
    EqDoorbellBadSize => "eq_doorbell_bad_size",
    EqDoorbellUnknownEq => "eq_doorbell_unknown_eq",
    EqOverflow => "eq_overflow",
    MsixNotEnabled => "msix_not_enabled",
    WqeBadOpcode => "wqe_bad_opcode",
    WqeDsTooLarge => "ds_too_large",
    WqeSegmentOverrun => "wqe_segment_overrun",
    WqeTooManySges => "wqe_too_many_sges",
    WqeInlineCrosses64 => "inline_crosses_64b",
    WqeMissingSegment => "wqe_missing_segment",
    BfOutOfOrder => "bf_out_of_order",
    BfIncomplete => "bf_incomplete",
    BfDsZero => "bf_ds_zero",
    BfTooLarge => "bf_too_large",
    BfStrayWrite => "bf_stray_write",
    BfCrossesHalf => "bf_crosses_half",
    BfBadRegister => "bf_bad_register",
    BfUnknownQp => "bf_unknown_qp",
    BfNotRts => "bf_not_rts",
    RqHeadAhead => "rq_head_ahead",
    MttBusy => "mtt_busy",
    UnmapFaWithIcm => "unmap_fa_with_icm",
}

/// Why a BlueFlame post was not executed from its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FallbackReason {
    ForeignPage,
    Counter,
    Owner,
    OutOfOrder,
    Incomplete,
    /// DS of 0, or a WQE larger than a BlueFlame half (256 bytes).
    Malformed,
    Forced,
}

impl FallbackReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackReason::ForeignPage => "foreign_page",
            FallbackReason::Counter => "counter",
            FallbackReason::Owner => "owner",
            FallbackReason::OutOfOrder => "out_of_order",
            FallbackReason::Incomplete => "incomplete",
            FallbackReason::Malformed => "malformed",
            FallbackReason::Forced => "forced",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for c in Code::ALL {
            let s = c.as_str();
            assert!(s
                .chars()
                .all(|ch| ch.is_ascii_lowercase() || ch == '_' || ch.is_ascii_digit()));
            assert!(seen.insert(s), "duplicate {s}");
        }
    }
}
