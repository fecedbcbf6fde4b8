/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The analyzer: counters of the ConnectX-3 device model (tools/mlx4-model)
 * and its records of the last executed WQE and the last send doorbell, read
 * through its diagnostic block in BAR0 (Documentation/mlx4-model.rst).
 * The block is the model's own, never the driver's; on an adapter without it
 * (real hardware) model_open() fails and tests SKIP.
 * Every access is a trapped MMIO round trip (tens of microseconds): read
 * sparingly. A read also waits for every posted write before it, so what a
 * counter shows includes all posts made before.
 */
#ifndef MLX4_BF_MODEL_H
#define MLX4_BF_MODEL_H

#include <endian.h>

#include "mlx4_bf_lib.h"

#define MODEL_DIAG		0xe0000
#define MODEL_MAGIC		0x4d4c584d	/* "MXLM" */

/* Registers, offsets in the diagnostic block. */
#define MODEL_QP_SELECT		0x08
#define MODEL_MARK		0x0c
#define MODEL_EXPECT		0x10
#define MODEL_FALLBACK_EVERY	0x14
#define MODEL_ERRORS		0x20
#define MODEL_UNEXPECTED	0x28
#define MODEL_WQE_BF		0x30
#define MODEL_WQE_DMA		0x38
#define MODEL_BF_FALLBACKS	0x40
#define MODEL_DOORBELLS		0x48
#define MODEL_CQES		0x50
#define MODEL_EQES		0x58
#define MODEL_IRQS		0x60
#define MODEL_COMMANDS		0x68
#define MODEL_SQ_DMA_READS	0x70
#define MODEL_BAR2_WRITES	0x78
/* Version 3: receive queues and delivery. */
#define MODEL_VERSION		0x04
#define MODEL_RECV_WQES		0x500
#define MODEL_RECV_CQES		0x508
#define MODEL_RNR_ERRORS	0x510
#define MODEL_PEER_ERRORS	0x518
#define MODEL_PAYLOAD_BYTES	0x530
#define MODEL_REFUSED_SEGS	0x548
#define MODEL_CQ_OVERRUNS	0x550
/*
 * Version 4: memory regions and RDMA writes. Gauges: MPTs in hardware
 * ownership and the pages they translate, now. Counters: the faults (never
 * reset, not even by a counter reset), RDMA writes executed and their bytes,
 * MTT entries written.
 */
#define MODEL_MPTS		0x590
#define MODEL_MR_PAGES		0x598
#define MODEL_LOCAL_PROT_FAULTS	0x5a0
#define MODEL_REMOTE_ACCESS_FAULTS	0x5a8
#define MODEL_RDMA_WRITES	0x5b0
#define MODEL_RDMA_WRITE_BYTES	0x5b8
#define MODEL_MTT_WRITES	0x5c0
/*
 * Version 5: command faults and what a teardown leaves behind. A write of
 * MODEL_CMD_FAULT arms a fault for the next command with an opcode, once:
 * CMD_FAULT_FAIL completes it unexecuted with status 0x01 (INTERNAL_ERR),
 * CMD_FAULT_STALL never completes it (GO stays set until a device reset);
 * mode 0 disarms. Version 12: a skip in bits 20..31 lets that many
 * commands with the opcode run first, counting down in the armed value (the
 * fault fires on the (skip + 1)th). Its read: the armed value (0 once it
 * fired), then the faults fired. Counters since the model started, never
 * reset: device resets, and the DMA and MSI-X the adapter tried while bus
 * mastering was off (refused). Gauge: EQs + CQs in the adapter, then QPs
 * out of RESET.
 */
#define MODEL_CMD_FAULT		0x5c8
#define MODEL_RESETS		0x5d0
#define MODEL_LIVE		0x5d8
#define MODEL_NO_MASTER_DMA	0x5e0
/*
 * Version 7: what the firmware holds of the host, gauges: its phase (0 off,
 * 1 running, 2 HCA up), the firmware area and aux pages, the ICM pages
 * mapped (4 KiB each). A driver's teardown brings all three back to 0.
 */
#define MODEL_FW_PHASE		0x600
#define MODEL_FW_PAGES		0x608
#define MODEL_ICM_PAGES		0x610
#define MODEL_FW_HCA_UP		2
/* Version 8: RDMA reads whose data landed, and their bytes (counters). */
#define MODEL_RDMA_READS	0x618
#define MODEL_RDMA_READ_BYTES	0x620
/*
 * Version 9: data faults. A write of MODEL_DATA_FAULT with offset + 1 arms a
 * fault for the next RDMA payload the model executes that is longer than
 * offset bytes, once: it lands with byte offset inverted (XOR 0xff), an RDMA
 * READ's response in the requester's memory, an RDMA WRITE's data in the
 * responder's. 0 disarms; an offset of 2^20 or more (the model's longest
 * message) is refused as a protocol error. Its read: the armed value (0 once
 * it fired), then the faults fired since the model started (never reset).
 * Counter and device resets keep it armed, as they keep MODEL_CMD_FAULT.
 */
#define MODEL_DATA_FAULT	0x628
#define MODEL_DATA_FAULT_MAX	(1u << 20)	/* offsets below this */
/* Per QP, for the QP written to MODEL_QP_SELECT. */
#define MODEL_QP_WQE_BF		0x80
#define MODEL_QP_WQE_DMA	0x88
#define MODEL_QP_FB_PAGE	0x90
#define MODEL_QP_FB_STAMP	0x98
#define MODEL_QP_FB_ORDER	0xa0
#define MODEL_QP_FB_FORCED	0xa8
#define MODEL_QP_DOORBELLS	0xb0
#define MODEL_QP_CQES		0xb8
/* The last executed WQE: 4-byte registers, read two at a time. */
#define MODEL_LAST_QPN		0xc0	/* qpn, then source at 0xc4 */
#define MODEL_LAST_PAGE		0xc8	/* BF or UAR page, then BF half at 0xcc */
#define MODEL_LAST_LEN		0xd0	/* length, then SQ index at 0xd4 */
#define MODEL_LAST_DOORBELL	0xd8	/* UAR page, then the 4 bytes at 0xdc */
#define MODEL_LAST_BYTES	0x100	/* the WQE's bytes, up to 0x4ff */
#define MODEL_LAST_BYTES_MAX	0x400

#define MODEL_SOURCE_BF		1	/* executed from the BlueFlame bytes */
#define MODEL_SOURCE_DMA	2	/* fetched from the send queue by DMA */

#define CMD_FAULT_FAIL		1	/* completes with status 0x01, not executed */
#define CMD_FAULT_STALL		2	/* never completes */
#define CMD_FAULT_SKIP_SHIFT	20	/* version 12 */
#define CMD_FAULT_SKIP_MAX	0xfff

/*
 * One MMIO load or store of the diagnostic block, as the bus bytes in
 * memory order (the registers are little-endian). s390 without MIO cannot
 * load from a mapped BAR in user space (the mapping succeeds, the load
 * faults): the s390_pci_mmio_read/write system calls do one PCI load or
 * store of the size given on the mapping's address and copy the bytes in
 * bus order. Elsewhere a relaxed atomic: exactly one load or store of the
 * register's width, which the compiler may neither merge nor drop.
 */
#ifdef __s390x__
#include <sys/syscall.h>

static inline uint64_t mmio_load(const uint8_t *addr, size_t len)
{
	/* a failed PCI load reads all ones */
	uint64_t raw64 = ~0ULL;
	uint32_t raw32 = ~0U;

	if (len == 4) {
		syscall(__NR_s390_pci_mmio_read, (unsigned long)addr, &raw32, len);
		return raw32;
	}
	syscall(__NR_s390_pci_mmio_read, (unsigned long)addr, &raw64, len);
	return raw64;
}

static inline void mmio_store32(uint8_t *addr, uint32_t raw)
{
	syscall(__NR_s390_pci_mmio_write, (unsigned long)addr, &raw, sizeof(raw));
}
#else
static inline uint64_t mmio_load(const uint8_t *addr, size_t len)
{
	if (len == 4)
		return __atomic_load_n((const uint32_t *)addr, __ATOMIC_RELAXED);
	return __atomic_load_n((const uint64_t *)addr, __ATOMIC_RELAXED);
}

static inline void mmio_store32(uint8_t *addr, uint32_t raw)
{
	__atomic_store_n((uint32_t *)addr, raw, __ATOMIC_RELAXED);
}
#endif

#define NO_ANALYZER	"no device model behind mlx4_bf (no analyzer)"

/*
 * Protection faults a test makes the adapter see on purpose: what the
 * adapter alone checks (libmlx4's own posts, which never reach the kernel;
 * what an RDMA names remotely, the responder's). Each is one line, "local"
 * or "remote", in this file, which the suite's last check
 * (mlx4_bf_invariants) subtracts from the model's fault counters: every
 * other fault is one the kernel let through.
 */
#define DECLARED_FAULTS	"/tmp/mlx4_bf_declared_faults"

static inline void declare_fault(const char *kind)
{
	FILE *f = fopen(DECLARED_FAULTS, "a");

	if (f) {
		fprintf(f, "%s\n", kind);
		fclose(f);
	}
}

struct model {
	uint8_t *diag;
	void *map;
	size_t map_len;
};

/* Maps the model's diagnostic block; 0 on success, -1 if there is none. */
static inline int model_open(struct model *m)
{
	char bdf[64], path[160];
	int fd;

	if (bound_device(bdf, sizeof(bdf)))
		return -1;
	snprintf(path, sizeof(path), DRIVER_DIR "/%s/resource0", bdf);
	fd = open(path, O_RDWR | O_SYNC);
	if (fd < 0)
		return -1;
	m->map_len = 4096;
	m->map = mmap(NULL, m->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, MODEL_DIAG);
	close(fd);
	if (m->map == MAP_FAILED)
		return -1;
	m->diag = m->map;
	if (le32toh(mmio_load(m->diag, 4)) != MODEL_MAGIC) {
		munmap(m->map, m->map_len);
		return -1;
	}
	return 0;
}

static inline void model_close(struct model *m)
{
	munmap(m->map, m->map_len);
}

/* Register @reg's 8 bytes, as the bus carries them (memory order). */
static inline uint64_t model_read_raw(struct model *m, unsigned int reg)
{
	return mmio_load(m->diag + reg, 8);
}

static inline uint64_t model_read(struct model *m, unsigned int reg)
{
	return le64toh(model_read_raw(m, reg));
}

/*
 * The block's version (register 0x04), from one aligned 8-byte load of the
 * magic and the version. Registers a version does not have must not be
 * read: the model counts such a read as a protocol error.
 */
static inline uint32_t model_version(struct model *m)
{
	return model_read(m, 0) >> 32;
}

#define NO_V4		NO_ANALYZER " (diag version 4)"

/*
 * The analyzer: 1 with @m mapped on a version 4 block (the MR, RDMA and
 * protection fault counters); 0 without one (real hardware, or an older
 * model: the tests run, their analyzer checks not).
 */
static inline int analyzer_v4(struct model *m)
{
	if (model_open(m))
		return 0;
	if (model_version(m) >= 4)
		return 1;
	model_close(m);
	return 0;
}

static inline void model_write(struct model *m, unsigned int reg, uint32_t value)
{
	mmio_store32(m->diag + reg, htole32(value));
}

/*
 * Arms a fault (CMD_FAULT_FAIL, CMD_FAULT_STALL) for the next command with
 * @opcode; mode 0 disarms. Version 5.
 */
static inline void model_cmd_fault(struct model *m, uint16_t opcode, int mode)
{
	model_write(m, MODEL_CMD_FAULT, (uint32_t)opcode | (uint32_t)mode << 16);
}

/*
 * As model_cmd_fault(), for the command with @opcode after @skip more (at
 * most CMD_FAULT_SKIP_MAX): 0 the next, 2 the third. Version 12; an older
 * model refuses a skip (a protocol error, nothing changed).
 */
static inline void model_cmd_fault_nth(struct model *m, uint16_t opcode,
				       int mode, unsigned int skip)
{
	model_write(m, MODEL_CMD_FAULT, (uint32_t)opcode | (uint32_t)mode << 16 |
		    (uint32_t)skip << CMD_FAULT_SKIP_SHIFT);
}

/*
 * CMD_FAULT's read, one 8-byte load: the armed value in @armed (0 when none is
 * armed or it fired; its skip left in bits 20..31), the faults fired since the
 * model started in @fired. Version 5.
 */
static inline void model_cmd_fault_read(struct model *m, uint32_t *armed,
					uint32_t *fired)
{
	uint64_t v = model_read(m, MODEL_CMD_FAULT);

	*armed = (uint32_t)v;
	*fired = v >> 32;
}

/*
 * Arms a data fault at byte @offset (below MODEL_DATA_FAULT_MAX) of the next
 * RDMA payload longer than @offset. Version 9.
 */
static inline void model_data_fault(struct model *m, uint32_t offset)
{
	model_write(m, MODEL_DATA_FAULT, offset + 1);
}

/* The per-QP counters of @qpn, and the global ones a test looks at. */
struct model_counts {
	uint64_t wqe_bf, wqe_dma, fb_page, fb_stamp, fb_order, fb_forced, doorbells, cqes;
	uint64_t sq_dma_reads, errors, unexpected;
};

static inline void model_counts(struct model *m, uint32_t qpn, struct model_counts *c)
{
	model_write(m, MODEL_QP_SELECT, qpn);
	c->wqe_bf = model_read(m, MODEL_QP_WQE_BF);
	c->wqe_dma = model_read(m, MODEL_QP_WQE_DMA);
	c->fb_page = model_read(m, MODEL_QP_FB_PAGE);
	c->fb_stamp = model_read(m, MODEL_QP_FB_STAMP);
	c->fb_order = model_read(m, MODEL_QP_FB_ORDER);
	c->fb_forced = model_read(m, MODEL_QP_FB_FORCED);
	c->doorbells = model_read(m, MODEL_QP_DOORBELLS);
	c->cqes = model_read(m, MODEL_QP_CQES);
	c->sq_dma_reads = model_read(m, MODEL_SQ_DMA_READS);
	c->errors = model_read(m, MODEL_ERRORS);
	c->unexpected = model_read(m, MODEL_UNEXPECTED);
}

/* What changed between two snapshots, as one line for a failure message. */
static inline const char *model_delta_str(const struct model_counts *a,
					  const struct model_counts *b)
{
	static char s[320];

	snprintf(s, sizeof(s),
		 "analyzer saw: %llu WQE(s) from BlueFlame, %llu fetched by DMA, %llu SQ DMA read(s), BF fallbacks %llu foreign page / %llu counter-owner / %llu order / %llu forced, %llu doorbell(s), %llu CQE(s), %llu protocol error(s)",
		 (unsigned long long)(b->wqe_bf - a->wqe_bf),
		 (unsigned long long)(b->wqe_dma - a->wqe_dma),
		 (unsigned long long)(b->sq_dma_reads - a->sq_dma_reads),
		 (unsigned long long)(b->fb_page - a->fb_page),
		 (unsigned long long)(b->fb_stamp - a->fb_stamp),
		 (unsigned long long)(b->fb_order - a->fb_order),
		 (unsigned long long)(b->fb_forced - a->fb_forced),
		 (unsigned long long)(b->doorbells - a->doorbells),
		 (unsigned long long)(b->cqes - a->cqes),
		 (unsigned long long)(b->errors - a->errors));
	return s;
}

/*
 * The last executed WQE as the model recorded it: for BlueFlame the burst
 * as written (padded to 64 bytes), for DMA the DS * 16 bytes fetched. Three
 * 8-byte loads for the six registers, then one per 8 bytes of the WQE.
 */
struct model_wqe {
	uint32_t qpn, source, page, half, len, index;
	uint8_t bytes[MODEL_LAST_BYTES_MAX];
};

static inline void model_last_wqe(struct model *m, struct model_wqe *w)
{
	uint64_t v = model_read(m, MODEL_LAST_QPN);

	w->qpn = v;
	w->source = v >> 32;
	v = model_read(m, MODEL_LAST_PAGE);
	w->page = v;
	w->half = v >> 32;
	v = model_read(m, MODEL_LAST_LEN);
	w->len = v;
	w->index = v >> 32;
	memset(w->bytes, 0, sizeof(w->bytes));
	for (uint32_t i = 0; i < w->len && i < sizeof(w->bytes); i += 8) {
		/* the load's bytes are the bus's, in order */
		v = model_read_raw(m, MODEL_LAST_BYTES + i);
		memcpy(w->bytes + i, &v, 8);
	}
}

/* The last send doorbell: its UAR page and its bytes in bus order. */
struct model_doorbell {
	uint32_t page;
	uint8_t bytes[4];
};

static inline void model_last_doorbell(struct model *m, struct model_doorbell *d)
{
	uint64_t v = model_read_raw(m, MODEL_LAST_DOORBELL);
	uint8_t raw[8];
	uint32_t page;

	/* one load: the page (little-endian), then the bytes in bus order */
	memcpy(raw, &v, 8);
	memcpy(&page, raw, 4);
	d->page = le32toh(page);
	memcpy(d->bytes, raw + 4, 4);
}

/* The global counters a post moves, read in four loads. */
struct model_posts {
	uint64_t wqe_bf, wqe_dma, doorbells, bar2_writes;
};

static inline void model_posts(struct model *m, struct model_posts *p)
{
	p->wqe_bf = model_read(m, MODEL_WQE_BF);
	p->wqe_dma = model_read(m, MODEL_WQE_DMA);
	p->doorbells = model_read(m, MODEL_DOORBELLS);
	p->bar2_writes = model_read(m, MODEL_BAR2_WRITES);
}

static inline const char *model_source_str(uint32_t source)
{
	return source == MODEL_SOURCE_BF ? "BlueFlame bytes" :
	       source == MODEL_SOURCE_DMA ? "a DMA fetch" : "nothing";
}

/*
 * With posted writes (QEMU's default) the model runs behind the guest: when
 * a doorbell or fallback makes it scan the send queue, the driver may have
 * written the next WQEs already, and the scan runs them too. Counts that
 * depend on when the model looked at memory need x-no-posted-writes, which
 * the test bed announces with MLX4_BF_WRITES=nonposted.
 */
static inline int writes_posted(void)
{
	const char *v = getenv("MLX4_BF_WRITES");

	return !v || strcmp(v, "nonposted");
}

/* The first byte where @len bytes of @got and @want differ, or -1. */
static inline long first_difference(const uint8_t *got, const uint8_t *want, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (got[i] != want[i])
			return (long)i;
	return -1;
}

#endif /* MLX4_BF_MODEL_H */
