//! Where a queue's bytes are: one contiguous buffer whose DMA address sits
//! where mlx4 puts the MTT address (ready mode's shortcut), or the pages the
//! MTT entries name, each 4 KiB << log_page_size (strict firmware; mlx4
//! allocates EQs page by page, `core/eq.c:mlx4_create_eq`).

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueBuf {
    Contiguous(u64),
    Pages { shift: u32, pages: Vec<u64> },
}

impl QueueBuf {
    /// The DMA address of byte `off` of the queue. `off` must lie inside
    /// the queue (its pages were resolved for its whole size); past the
    /// last page it is address 0, which no DMA reaches.
    pub fn addr(&self, off: u64) -> u64 {
        match self {
            QueueBuf::Contiguous(base) => base + off,
            QueueBuf::Pages { shift, pages } => match pages.get((off >> shift) as usize) {
                Some(p) => p + (off & ((1u64 << shift) - 1)),
                None => 0,
            },
        }
    }

    /// Where the queue starts (its first page), for records.
    pub fn base(&self) -> u64 {
        self.addr(0)
    }

    /// `len` bytes from `off` as (DMA address, length) spans, split where
    /// the pages are (one span for a contiguous buffer).
    pub fn spans(&self, off: u64, len: u64) -> Vec<(u64, u64)> {
        match self {
            QueueBuf::Contiguous(base) => vec![(base + off, len)],
            QueueBuf::Pages { shift, .. } => {
                let page = 1u64 << shift;
                let mut out = Vec::new();
                let (mut at, end) = (off, off + len);
                while at < end {
                    let n = (page - at % page).min(end - at);
                    out.push((self.addr(at), n));
                    at += n;
                }
                out
            }
        }
    }

    /// The first `len` bytes as (DMA address, length) runs, none crossing
    /// a page.
    pub fn runs(&self, len: u64) -> Vec<(u64, u64)> {
        match self {
            QueueBuf::Contiguous(base) => vec![(*base, len)],
            QueueBuf::Pages { shift, pages } => {
                let page = 1u64 << shift;
                pages
                    .iter()
                    .enumerate()
                    .map(|(i, &p)| (p, len.saturating_sub(i as u64 * page).min(page)))
                    .filter(|&(_, n)| n > 0)
                    .collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_and_paged() {
        let c = QueueBuf::Contiguous(0x10000);
        assert_eq!(
            (c.addr(0x1234), c.runs(0x2000)),
            (0x11234, vec![(0x10000, 0x2000)])
        );
        let p = QueueBuf::Pages {
            shift: 12,
            pages: vec![0x5000, 0x2000, 0x9000],
        };
        assert_eq!(p.base(), 0x5000);
        assert_eq!(p.addr(0x1020), 0x2020);
        assert_eq!(p.addr(0x2fff), 0x9fff);
        assert_eq!(p.addr(0x3000), 0);
        assert_eq!(
            p.runs(0x2800),
            vec![(0x5000, 0x1000), (0x2000, 0x1000), (0x9000, 0x800)]
        );
    }
}
