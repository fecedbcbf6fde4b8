//! Where a queue's bytes are: the pages its context's MTT entries name,
//! each 4 KiB << log_page_size (mlx4 allocates EQs page by page,
//! `core/eq.c:mlx4_create_eq`; `firmware::Firmware::queue_buf`).

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueBuf {
    /// log2 of the page size.
    pub shift: u32,
    /// The DMA address of each page, in queue order.
    pub pages: Vec<u64>,
}

impl QueueBuf {
    /// The DMA address of byte `off` of the queue. `off` must lie inside
    /// the queue (its pages were resolved for its whole size); past the
    /// last page it is address 0, which no DMA reaches.
    pub fn addr(&self, off: u64) -> u64 {
        match self.pages.get((off >> self.shift) as usize) {
            Some(p) => p + (off & ((1u64 << self.shift) - 1)),
            None => 0,
        }
    }

    /// Where the queue starts (its first page), for records.
    pub fn base(&self) -> u64 {
        self.addr(0)
    }

    /// `len` bytes from `off` as (DMA address, length) spans, split where
    /// the pages are.
    pub fn spans(&self, off: u64, len: u64) -> Vec<(u64, u64)> {
        let page = 1u64 << self.shift;
        let mut out = Vec::new();
        let (mut at, end) = (off, off + len);
        while at < end {
            let n = (page - at % page).min(end - at);
            out.push((self.addr(at), n));
            at += n;
        }
        out
    }

    /// The first `len` bytes as (DMA address, length) runs, none crossing
    /// a page.
    pub fn runs(&self, len: u64) -> Vec<(u64, u64)> {
        let page = 1u64 << self.shift;
        self.pages
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, len.saturating_sub(i as u64 * page).min(page)))
            .filter(|&(_, n)| n > 0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_addresses_spans_and_runs() {
        let p = QueueBuf {
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
        assert_eq!(p.spans(0xff0, 0x20), vec![(0x5ff0, 0x10), (0x2000, 0x10)]);
    }
}
