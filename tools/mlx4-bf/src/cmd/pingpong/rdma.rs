// SPDX-License-Identifier: GPL-2.0

//! The registered regions of an `--op rdma-write-imm` run: where the peer
//! writes, where a gathered payload is read from, and the peer's region.

use anyhow::Result;
use mlx4_bf_core::abi;

use crate::{
    device::Device,
    mr::{self, Mr},
    rdma_write::max_wqe,
};

use super::link::{Link, Remote};

/// What an endpoint needs for `--op rdma-write-imm`: its two registered
/// regions and the peer's receive region.
pub(super) struct Rdma {
    /// Where the peer's writes land (LOCAL_WRITE|REMOTE_WRITE); every
    /// message at offset 0 (one message is in flight at a time).
    pub(super) recv: Mr,
    /// Where a payload too large for an inline WQE is gathered from (local
    /// reads only).
    pub(super) send: Mr,
    pub(super) peer: Remote,
    pub(super) max_wqe: usize,
}

/// The bytes of the registered regions for payloads of up to `max_size`
/// bytes: whole pages, at most what the driver allows one region.
fn region_len(max_size: usize, info: &abi::DeviceInfo) -> usize {
    let want = max_size.max(1).next_multiple_of(mr::PAGE);
    match info.max_mr_size {
        0 => want,
        cap => want.min((cap as usize / mr::PAGE * mr::PAGE).max(mr::PAGE)),
    }
}

impl Rdma {
    /// Registers both regions and exchanges the receive regions with the
    /// peer (which does the same, in the same order).
    pub(super) fn setup(
        dev: &Device,
        info: &abi::DeviceInfo,
        link: &mut Link,
        max_size: usize,
    ) -> Result<Self> {
        let len = region_len(max_size, info);
        let recv = Mr::register(dev, info, len, abi::ACCESS_ALL)?;
        let send = Mr::register(dev, info, len, 0)?;
        let mine = Remote {
            addr: recv.addr(),
            rkey: recv.rkey(),
            len: recv.len() as u64,
        };
        let peer = link.exchange_remote(&mine)?;
        Ok(Rdma {
            recv,
            send,
            peer,
            max_wqe: max_wqe(info),
        })
    }

    pub(super) fn close(self) -> Result<()> {
        let send = self.send.close();
        self.recv.close()?;
        send
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_whole_pages_up_to_the_driver_s_largest() {
        let mut info = abi::DeviceInfo {
            max_mr_size: 1 << 20,
            ..Default::default()
        };
        assert_eq!(region_len(4, &info), 4096);
        assert_eq!(region_len(4097, &info), 8192);
        assert_eq!(region_len(65536, &info), 65536);
        info.max_mr_size = 40_000;
        assert_eq!(region_len(65536, &info), 36_864);
        info.max_mr_size = 0;
        assert_eq!(region_len(65536, &info), 65536);
    }
}
