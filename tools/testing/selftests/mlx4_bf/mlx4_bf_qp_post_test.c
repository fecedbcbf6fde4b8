// SPDX-License-Identifier: GPL-2.0
/*
 * The RDMA device's QP_POST method (uapi/mlx4_bf.h) through BlueFlame and
 * the doorbell, checked against what the adapter got: the exact bytes at
 * the context's own UAR and BlueFlame half, the halves alternating, BlueFlame
 * up to 208 bytes of payload and the doorbell above, the store blocks, and
 * the memory types of the pages libmlx4 maps for its own posts.
 *
 * The process builds and stamps its WQEs in the send queue of a QP libmlx4
 * created (mlx4_bf_verbs.h), as libmlx4 does; the kernel checks them and
 * writes them out. The oracle is the device model's analyzer
 * (mlx4_bf_model.h); without it every test SKIPs. The device's post
 * counters are the RDMA core's hw_counters.
 *
 * Ported from the misc device's mlx4_bf_post_test and mlx4_bf_analyzer_test,
 * every rule a post through the method still has; their refusals are
 * mlx4_bf_qp_post_refusal_test's. Dropped:
 * - the device and context the misc device's QUERY_DEVICE and
 *   QUERY_CONTEXT reported (layout, writer, the context's UAR and
 *   BlueFlame page): the method's result names the offset of each burst,
 *   checked against where the adapter saw it, and the writer shows in the
 *   store blocks (and in mlx4_bf_probe_test's memory types);
 * - QUERY_STATS and the per-context debugfs directory (ctx-N/stats, gone
 *   at close): the misc device's own; the device's counters are the RDMA
 *   core's hw_counters here (hw_counters_count_posts_and_rejects);
 * - the kernel's stamps of owner bit, WQE counter and QPN: libmlx4's here,
 *   which the kernel leaves as they are (expect_last_wqe() compares the
 *   bytes as the process stamped them).
 */
#include "kselftest_harness.h"
#include "mlx4_bf_model.h"
#include "mlx4_bf_verbs.h"

/*
 * One buffer of the BlueFlame register, half of the device's bf_reg_size
 * (the model's default layout: the offsets the kernel reports, checked
 * against where the adapter saw each burst, prove it). libmlx4 keeps its
 * own to itself.
 */
#define BF_BUF_SIZE	256

/* A context connected to itself, the analyzer, and what it saw of a post. */
FIXTURE(qp)
{
	struct verbs v;
	struct model model;
	int have_model;
	/* BAR2's UAR pages, the BlueFlame pages after them */
	uint32_t num_uars;
	/* the context's UAR as the adapter saw its first post, or -1 */
	int64_t uar;
	/* the BlueFlame buffer the context's next post takes */
	uint32_t half;
	struct model_posts before, after;
	struct model_wqe got;
	struct model_doorbell db;
	uint8_t wqe[MAX_WQE + 64];
	uint8_t want[MAX_WQE + 64];
};

/* Its helpers spell FIXTURE_DATA(qp) as struct _test_data_qp: checkpatch sees a type. */

FIXTURE_SETUP(qp)
{
	self->have_model = 0;
	self->v.ctx = NULL;
	if (!verbs_device_present())
		SKIP(return, NO_VERBS_DEVICE);
	if (model_open(&self->model))
		SKIP(return, NO_ANALYZER);
	self->have_model = 1;
	ASSERT_EQ(0, verbs_open(&self->v));
	self->num_uars = bar2_resource_len() / 2 / PAGE;
	self->uar = -1;
	self->half = 0;
}

FIXTURE_TEARDOWN(qp)
{
	if (self->v.ctx)
		verbs_close(&self->v);
	if (self->have_model)
		model_close(&self->model);
}

/* What the analyzer saw of one post, for a failure message. */
static const char *seen(struct _test_data_qp *self)
{
	static char s[256];

	snprintf(s, sizeof(s),
		 "analyzer saw %llu WQE(s) from BlueFlame, %llu by DMA, %llu doorbell(s), %llu BAR2 write(s); the last WQE: qp %#x, SQ index %u, from %s, UAR %u half %u, %u bytes",
		 (unsigned long long)(self->after.wqe_bf - self->before.wqe_bf),
		 (unsigned long long)(self->after.wqe_dma - self->before.wqe_dma),
		 (unsigned long long)(self->after.doorbells - self->before.doorbells),
		 (unsigned long long)(self->after.bar2_writes - self->before.bar2_writes),
		 self->got.qpn, self->got.index, model_source_str(self->got.source),
		 self->got.page, self->got.half, self->got.len);
	return s;
}

/*
 * The analyzer's record of the last executed WQE: this QP's, at @index,
 * from @source, through the context's UAR (the first post's, every post
 * after), exactly self->want's @len bytes.
 */
static void expect_last_wqe(struct __test_metadata *_metadata, struct _test_data_qp *self,
			    int payload, uint32_t index, uint32_t source, int len)
{
	long diff;

	EXPECT_EQ(source, self->got.source) TH_LOG("payload %d: %s", payload, seen(self));
	EXPECT_EQ(verbs_qpn(&self->v), self->got.qpn) TH_LOG("payload %d: %s", payload, seen(self));
	EXPECT_EQ(index & 0xffff, self->got.index) TH_LOG("payload %d: %s", payload, seen(self));
	EXPECT_EQ(len, self->got.len) TH_LOG("payload %d: %s", payload, seen(self));
	if (self->uar < 0)
		self->uar = self->got.page;
	EXPECT_EQ(self->uar, self->got.page) TH_LOG("payload %d: %s", payload, seen(self));
	diff = first_difference(self->got.bytes, self->want, len);
	EXPECT_EQ(-1, diff) TH_LOG("payload %d: byte %ld is %#04x, expected %#04x", payload, diff,
				   self->got.bytes[diff], self->want[diff]);
}

/*
 * Posts an inline RDMA write of @payload bytes through the method with
 * @flags, waits for its completion, and checks the data landed and what the
 * adapter got: the path the WQE's size and the flags call for. The result
 * the kernel reported goes to @res.
 */
static void post_and_check(struct __test_metadata *_metadata, struct _test_data_qp *self,
			   int payload, uint32_t flags, struct mlx4_bf_post_result *res)
{
	uint32_t index = self->v.head, bf_buf = BF_BUF_SIZE;
	int len = build_rdma_write(self->wqe, payload, (uint8_t)payload,
				   verbs_sink_addr(&self->v), self->v.sink_mr->rkey);
	uint8_t *slot = verbs_put_wqe(&self->v, self->wqe, len);
	int bf = len <= (int)bf_buf && !(flags & MLX4_BF_POST_F_FORCE_DOORBELL);
	uint8_t data[MAX_WQE];

	memset(res, 0, sizeof(*res));
	memset(self->v.sink, 0, payload);
	model_posts(&self->model, &self->before);
	ASSERT_EQ(0, verbs_post(&self->v, slot, len, flags, res)) TH_LOG("payload %d", payload);
	ASSERT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(self->v.cq)) TH_LOG("payload %d", payload);
	rdma_write_pattern(data, payload, (uint8_t)payload);
	EXPECT_EQ(0, memcmp(self->v.sink, data, payload)) TH_LOG("payload %d: the data", payload);
	model_posts(&self->model, &self->after);
	model_last_wqe(&self->model, &self->got);
	EXPECT_EQ(index & 0xffff, res->wqe_index);
	if (bf) {
		/* the WQE as stamped, padded with zeros to whole 64 bytes */
		int burst = (len + 63) / 64 * 64;

		memset(self->want, 0, burst);
		memcpy(self->want, self->wqe, len);
		EXPECT_EQ(MLX4_BF_PATH_BLUEFLAME, res->path) TH_LOG("payload %d", payload);
		EXPECT_EQ((uint32_t)burst, res->bytes_written) TH_LOG("payload %d", payload);
		EXPECT_EQ(1, self->after.wqe_bf - self->before.wqe_bf)
			TH_LOG("payload %d: %s", payload, seen(self));
		EXPECT_EQ(0, self->after.wqe_dma - self->before.wqe_dma)
			TH_LOG("payload %d: %s", payload, seen(self));
		EXPECT_EQ(0, self->after.doorbells - self->before.doorbells)
			TH_LOG("payload %d: %s", payload, seen(self));
		EXPECT_EQ(self->half, self->got.half) TH_LOG("payload %d: %s", payload, seen(self));
		expect_last_wqe(_metadata, self, payload, index, MODEL_SOURCE_BF, burst);
		/* what the kernel says it wrote is where the adapter saw it */
		EXPECT_EQ(((uint64_t)self->num_uars + self->got.page) * PAGE +
			  self->got.half * bf_buf, res->bf_offset);
		self->half ^= 1;
	} else {
		uint8_t db[4];

		memcpy(self->want, self->wqe, len);
		put_be32(db, verbs_qpn(&self->v) << 8);
		model_last_doorbell(&self->model, &self->db);
		EXPECT_EQ(MLX4_BF_PATH_DOORBELL, res->path) TH_LOG("payload %d", payload);
		EXPECT_EQ(1, self->after.doorbells - self->before.doorbells)
			TH_LOG("payload %d: %s", payload, seen(self));
		/* the doorbell is the post's only write to BAR2 */
		EXPECT_EQ(1, self->after.bar2_writes - self->before.bar2_writes)
			TH_LOG("payload %d: %s", payload, seen(self));
		EXPECT_EQ(1, self->after.wqe_dma - self->before.wqe_dma)
			TH_LOG("payload %d: %s", payload, seen(self));
		EXPECT_EQ(0, self->after.wqe_bf - self->before.wqe_bf)
			TH_LOG("payload %d: %s", payload, seen(self));
		EXPECT_EQ(0, memcmp(self->db.bytes, db, 4))
			TH_LOG("payload %d: doorbell %02x %02x %02x %02x, expected %02x %02x %02x %02x",
			       payload, self->db.bytes[0], self->db.bytes[1], self->db.bytes[2],
			       self->db.bytes[3], db[0], db[1], db[2], db[3]);
		expect_last_wqe(_metadata, self, payload, index, MODEL_SOURCE_DMA, len);
		EXPECT_EQ(self->got.page, self->db.page) TH_LOG("payload %d: doorbell on UAR %u",
								 payload, self->db.page);
		EXPECT_EQ((uint64_t)self->db.page * PAGE + 0x14, res->bf_offset);
	}
}

TEST_F(qp, bf_post_lands_at_the_contexts_uar_and_half)
{
	struct mlx4_bf_post_result res;

	post_and_check(_metadata, self, 16, 0, &res);
	/* UAR 0 is the kernel's own (mlx4_core reserves it) */
	EXPECT_LT(0, self->uar);
	EXPECT_GT(self->num_uars, self->uar);
}

TEST_F(qp, consecutive_posts_alternate_halves)
{
	struct mlx4_bf_post_result res;

	for (int i = 0; i < 5; i++)
		post_and_check(_metadata, self, 8 + i, 0, &res);
}

/* The size table: payload -> BlueFlame burst -> store blocks. */
TEST_F(qp, table_sizes_take_bf_up_to_208_bytes)
{
	static const struct { int payload, burst, blocks; } table[] = {
		{ 1, 64, 1 }, { 28, 64, 1 }, { 29, 128, 1 }, { 88, 128, 1 }, { 89, 192, 2 },
		{ 148, 192, 2 }, { 149, 256, 2 }, { 192, 256, 2 }, { 193, 256, 2 }, { 208, 256, 2 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
		struct mlx4_bf_post_result res;

		post_and_check(_metadata, self, table[i].payload, MLX4_BF_POST_F_REQUIRE_BF, &res);
		EXPECT_EQ((uint32_t)table[i].burst, res.bytes_written)
			TH_LOG("payload %d", table[i].payload);
		EXPECT_EQ(store_block_writer() ? (uint32_t)table[i].blocks : 0, res.store_blocks)
			TH_LOG("payload %d", table[i].payload);
	}
}

TEST_F(qp, payload_209_takes_the_doorbell)
{
	struct mlx4_bf_post_result res;

	post_and_check(_metadata, self, 209, 0, &res);
	/* and REQUIRE_BF of it is refused, nothing posted */
	model_posts(&self->model, &self->before);
	build_rdma_write(self->wqe, 209, 1, verbs_sink_addr(&self->v), self->v.sink_mr->rkey);
	EXPECT_EQ(EINVAL, verbs_post(&self->v, verbs_put_wqe(&self->v, self->wqe, 288), 288,
				     MLX4_BF_POST_F_REQUIRE_BF, NULL));
	model_posts(&self->model, &self->after);
	EXPECT_EQ(0, memcmp(&self->before, &self->after, sizeof(self->after))) TH_LOG("%s", seen(self));
}

TEST_F(qp, every_payload_1_to_256_lands_exactly)
{
	struct mlx4_bf_post_result res;

	for (int payload = 1; payload <= 256; payload++)
		post_and_check(_metadata, self, payload, 0, &res);
}

TEST_F(qp, force_doorbell_rings_the_uar_and_keeps_the_half)
{
	struct mlx4_bf_post_result res;

	post_and_check(_metadata, self, 16, 0, &res);
	post_and_check(_metadata, self, 16, MLX4_BF_POST_F_FORCE_DOORBELL, &res);
	/* the doorbell did not take a BlueFlame buffer: this one is the second */
	post_and_check(_metadata, self, 16, 0, &res);
}

/*
 * A burst's padding is zeros, never the tail of a longer WQE posted before
 * through the same context's copy: sizes going down.
 */
TEST_F(qp, padding_never_carries_an_earlier_wqe)
{
	struct mlx4_bf_post_result res;

	for (int payload = 208; payload > 0; payload -= 23)
		post_and_check(_metadata, self, payload, 0, &res);
}

/* A WQE whose data is gathered from a region, by DMA after the doorbell. */
TEST_F(qp, gathered_write_takes_the_doorbell)
{
	uint8_t *src = aligned_alloc(PAGE, PAGE);
	struct mlx4_bf_post_result res = {};
	struct ibv_mr *mr;
	struct sge sg;
	uint8_t *slot;
	int len;

	ASSERT_NE(NULL, src);
	for (int i = 0; i < PAGE; i++)
		src[i] = (uint8_t)(i * 13 + 5);
	mr = ibv_reg_mr(self->v.pd, src, PAGE, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, mr);
	sg = (struct sge){ .addr = (uintptr_t)src, .length = 1000, .lkey = mr->lkey };
	len = build_gather(self->wqe, OP_RDMA_WRITE, verbs_sink_addr(&self->v),
			   self->v.sink_mr->rkey, &sg, 1);
	slot = verbs_put_wqe(&self->v, self->wqe, len);
	model_posts(&self->model, &self->before);
	ASSERT_EQ(0, verbs_post(&self->v, slot, len, 0, &res));
	ASSERT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(self->v.cq));
	model_posts(&self->model, &self->after);
	EXPECT_EQ(MLX4_BF_PATH_DOORBELL, res.path);
	EXPECT_EQ(1, self->after.doorbells - self->before.doorbells) TH_LOG("%s", seen(self));
	EXPECT_EQ(0, self->after.wqe_bf - self->before.wqe_bf) TH_LOG("%s", seen(self));
	EXPECT_EQ(0, memcmp(src, self->v.sink, 1000));
	ibv_dereg_mr(mr);
	free(src);
}

/* Two contexts, two UARs: each posts through its own. */
TEST_F(qp, each_context_posts_through_its_own_uar)
{
	struct mlx4_bf_post_result res;
	struct verbs other;
	int64_t first;

	post_and_check(_metadata, self, 16, 0, &res);
	first = self->uar;
	ASSERT_EQ(0, verbs_open(&other));
	build_rdma_write(self->wqe, 16, 3, verbs_sink_addr(&other), other.sink_mr->rkey);
	ASSERT_EQ(0, verbs_post(&other, verbs_put_wqe(&other, self->wqe, 64), 64, 0, &res));
	EXPECT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(other.cq));
	model_last_wqe(&self->model, &self->got);
	EXPECT_EQ(verbs_qpn(&other), self->got.qpn);
	EXPECT_EQ(MODEL_SOURCE_BF, self->got.source);
	EXPECT_NE(first, self->got.page) TH_LOG("both contexts on UAR %u", self->got.page);
	/* a new context starts at its register's first buffer */
	EXPECT_EQ(0, self->got.half);
	verbs_close(&other);
	/* and the first context's alternation went on without the other's */
	post_and_check(_metadata, self, 16, 0, &res);
}

/*
 * The adapter may always fetch a WQE from the send queue instead of running
 * its BlueFlame copy (the model is told to, every second post): what the
 * process put in its queue is the whole WQE, and it runs from there.
 */
TEST_F(qp, fallback_finds_the_whole_wqe_in_the_send_queue)
{
	struct model_counts before, after;

	if (writes_posted())
		SKIP(return, "needs non-posted writes (MLX4_BF_WRITES=nonposted)");
	model_counts(&self->model, verbs_qpn(&self->v), &before);
	model_write(&self->model, MODEL_FALLBACK_EVERY, 2);
	for (int i = 0; i < 8; i++) {
		int len = build_rdma_write(self->wqe, 100, i, verbs_sink_addr(&self->v),
					   self->v.sink_mr->rkey);
		uint8_t *slot = verbs_put_wqe(&self->v, self->wqe, len);

		ASSERT_EQ(0, verbs_post(&self->v, slot, len, 0, NULL));
		ASSERT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(self->v.cq));
	}
	model_write(&self->model, MODEL_FALLBACK_EVERY, 0);
	model_counts(&self->model, verbs_qpn(&self->v), &after);
	EXPECT_EQ(4, after.fb_forced - before.fb_forced) TH_LOG("%s", model_delta_str(&before, &after));
	EXPECT_EQ(4, after.wqe_bf - before.wqe_bf) TH_LOG("%s", model_delta_str(&before, &after));
	EXPECT_EQ(4, after.wqe_dma - before.wqe_dma) TH_LOG("%s", model_delta_str(&before, &after));
	EXPECT_EQ(8, after.cqes - before.cqes) TH_LOG("%s", model_delta_str(&before, &after));
	EXPECT_EQ(0, after.errors - before.errors) TH_LOG("%s", model_delta_str(&before, &after));
	EXPECT_EQ(0, after.unexpected - before.unexpected);
}

/* The RDMA device's counter @name (hw_counters/), or -1. */
static long hw_counter(struct verbs *v, const char *name)
{
	char path[256];
	long value = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/hw_counters/%s",
		 ibv_get_device_name(v->ctx->device), name);
	/* the core refreshes what it shows once its lifespan (10 ms) is over */
	usleep(50000);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &value) != 1)
		value = -1;
	fclose(f);
	return value;
}

/*
 * The device's post counters (the RDMA core's hw_counters, the driver's
 * debugfs stats under the same names) count each post by its path, the
 * bytes written (a burst padded to 64, a doorbell's WQE), the store blocks
 * of the store-block writer, and each refusal by its reason.
 */
TEST_F(qp, hw_counters_count_posts_and_rejects)
{
	static const char * const names[] = {
		"bf_posts", "db_posts", "bytes", "store_blocks", "rejects_opcode",
	};
	long before[ARRAY_SIZE(names)], after[ARRAY_SIZE(names)];
	struct mlx4_bf_post_result res;
	int len;

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		before[i] = hw_counter(&self->v, names[i]);
		if (before[i] < 0)
			SKIP(return, "no hw_counters/%s", names[i]);
	}
	/* a burst of 192 bytes (two store blocks), then a doorbell WQE of 272 */
	post_and_check(_metadata, self, 100, 0, &res);
	post_and_check(_metadata, self, 209, 0, &res);
	len = build_rdma_write(self->wqe, 16, 1, verbs_sink_addr(&self->v),
			       self->v.sink_mr->rkey);
	put_be32(self->wqe, 0x1f);
	EXPECT_EQ(EINVAL, verbs_post(&self->v, verbs_put_wqe(&self->v, self->wqe, len), len, 0,
				     NULL));
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		after[i] = hw_counter(&self->v, names[i]);
	EXPECT_EQ(before[0] + 1, after[0]) TH_LOG("bf_posts");
	EXPECT_EQ(before[1] + 1, after[1]) TH_LOG("db_posts");
	EXPECT_EQ(before[2] + 192 + 272, after[2]) TH_LOG("bytes");
	EXPECT_EQ(before[3] + (store_block_writer() ? 2 : 0), after[3]) TH_LOG("store_blocks");
	EXPECT_EQ(before[4] + 1, after[4]) TH_LOG("rejects_opcode");
}

/*
 * libmlx4's UAR page is mapped uncached and its BlueFlame page
 * write-combining, as mlx4_ib maps them: read from the page-table entries
 * once a post of libmlx4's own through each has faulted them in. x86
 * encodes UC- as PCD (with PAT and with nopat) and WC as PWT (slot 1 of
 * Linux's PAT); without PAT write-combining falls back to UC-. With PAT the
 * user page gets the type the kernel's own mapping of it reserved
 * (arch/x86/mm/pat/memtype.c), so the store-block writer's BlueFlame page,
 * which the kernel maps uncached, is UC- too.
 */
TEST_F(qp, libmlx4_pages_are_mapped_uncached_and_write_combining)
{
	int pat = !access(PAT_LIST, F_OK);
	struct ibv_sge sge = { .addr = verbs_sink_addr(&self->v), .length = 16 };
	struct ibv_send_wr wr = {
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED,
		.sg_list = &sge,
		.num_sge = 1,
		.wr.rdma = { .remote_addr = verbs_sink_addr(&self->v),
			     .rkey = self->v.sink_mr->rkey },
	}, *bad;
	char bits[32];
	void *bf;

	if (access(PAGE_TABLES, R_OK))
		SKIP(return, "no " PAGE_TABLES " (x86, CONFIG_PTDUMP_DEBUGFS)");
	/* libmlx4's BlueFlame post, then its doorbell (a gathered WQE) */
	ASSERT_EQ(0, ibv_post_send(self->v.qp, &wr, &bad));
	ASSERT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(self->v.cq));
	wr.send_flags = IBV_SEND_SIGNALED;
	sge.lkey = self->v.sink_mr->lkey;
	ASSERT_EQ(0, ibv_post_send(self->v.qp, &wr, &bad));
	ASSERT_EQ(IBV_WC_SUCCESS, verbs_wait_cqe(self->v.cq));

	ASSERT_EQ((void *)((uint8_t *)self->v.dv.sdb - 0x14), uverbs_mapping(UAR_PGOFF * PAGE));
	ASSERT_EQ(0, pte_cache_bits(self->v.dv.sdb, bits, sizeof(bits)));
	EXPECT_STREQ("PCD", bits) TH_LOG("the UAR page (PAT %s)", pat ? "on" : "off");
	bf = uverbs_mapping(BF_PGOFF * PAGE);
	ASSERT_NE(NULL, bf) TH_LOG("no BlueFlame page in /proc/self/maps");
	ASSERT_EQ(0, pte_cache_bits(bf, bits, sizeof(bits)));
	EXPECT_STREQ(pat && !store_block_writer() ? "PWT" : "PCD", bits)
		TH_LOG("the BlueFlame page (PAT %s, %s writer)", pat ? "on" : "off",
		       store_block_writer() ? "store-block" : "write-combining");
}

TEST_HARNESS_MAIN
