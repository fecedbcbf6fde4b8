// SPDX-License-Identifier: GPL-2.0
/*
 * POST_SEND through the BlueFlame and doorbell paths, checked against what
 * the adapter got: the exact bytes at the exact page and half, the stamps
 * only the kernel may set, the doorbell value at its UAR.
 *
 * The oracle is the device model's analyzer (tools/mlx4-model,
 * mlx4_bf_model.h): which WQE it executed last, from where and from which
 * bytes, and how many WQEs, doorbells and BAR2 writes it saw. Without the
 * model every test that posts SKIPs.
 */
#include "kselftest_harness.h"
#include "mlx4_bf_model.h"

/* The analyzer and what it saw around one post. */
struct oracle {
	struct model model;
	struct model_posts before, after;
	struct model_wqe got;
	struct model_doorbell db;
};

/*
 * A context with one QP, connected to itself, whose RDMA writes land in its
 * sink, and what the kernel must have done so far.
 */
struct poster {
	int fd;
	struct oracle *oracle;
	struct mlx4_bf_device_info dev;
	struct mlx4_bf_context_info info;
	struct mlx4_bf_qp_info qp;
	struct sink sink;
	uint32_t head;		/* the QP's send-queue index, as the kernel counts */
	uint32_t half;		/* the next BlueFlame buffer of this context */
	uint8_t wqe[MAX_WQE + 64];
	uint8_t want[MAX_WQE + 64];
};

/* Opens a context and creates its QP; 0 on success. */
static int poster_open(struct poster *p, struct oracle *o)
{
	p->oracle = o;
	p->head = 0;
	p->half = 0;
	p->sink.buf = NULL;
	p->fd = open(DEV_PATH, O_RDWR);
	if (p->fd < 0)
		return -1;
	if (query_device(p->fd, &p->dev) || query_context(p->fd, &p->info) ||
	    create_qp(p->fd, &p->qp) || sink_open(p->fd, &p->sink)) {
		close(p->fd);
		p->fd = -1;
		return -1;
	}
	return 0;
}

FIXTURE(ctx)
{
	struct oracle oracle;
	struct poster p;
};

FIXTURE_SETUP(ctx)
{
	self->p.fd = -1;
	if (access(DEV_PATH, F_OK))
		SKIP(return, NO_DEVICE);
	if (model_open(&self->oracle.model))
		SKIP(return, NO_ANALYZER);
	ASSERT_EQ(0, poster_open(&self->p, &self->oracle));
}

FIXTURE_TEARDOWN(ctx)
{
	if (self->p.fd >= 0) {
		model_close(&self->oracle.model);
		close(self->p.fd);
	}
}

/* What the analyzer saw of one post, as one line for a failure message. */
static const char *seen(const struct oracle *o)
{
	static char s[256];

	snprintf(s, sizeof(s),
		 "analyzer saw %llu WQE(s) from BlueFlame, %llu by DMA, %llu doorbell(s); the last WQE: qp %#x, SQ index %u, from %s, page %u half %u, %u bytes",
		 (unsigned long long)(o->after.wqe_bf - o->before.wqe_bf),
		 (unsigned long long)(o->after.wqe_dma - o->before.wqe_dma),
		 (unsigned long long)(o->after.doorbells - o->before.doorbells),
		 o->got.qpn, o->got.index, model_source_str(o->got.source), o->got.page,
		 o->got.half, o->got.len);
	return s;
}

/*
 * The analyzer's record of the last executed WQE: this QP's next index,
 * from @source, on the context's UAR page (computed here, not taken from the
 * driver), exactly @want (@len bytes, @what in a failure message).
 */
static void expect_last_wqe(struct __test_metadata *_metadata, struct poster *self,
			    int payload, __u32 source, int len, const char *what)
{
	struct oracle *o = self->oracle;
	long diff;

	EXPECT_EQ(source, o->got.source) TH_LOG("payload %d: %s", payload, seen(o));
	EXPECT_EQ(self->qp.qpn, o->got.qpn) TH_LOG("payload %d: %s", payload, seen(o));
	EXPECT_EQ(self->head, o->got.index) TH_LOG("payload %d: %s", payload, seen(o));
	EXPECT_EQ(self->info.uar_index, o->got.page) TH_LOG("payload %d: %s", payload, seen(o));
	EXPECT_EQ(len, o->got.len) TH_LOG("payload %d: %s", payload, seen(o));
	diff = first_difference(o->got.bytes, self->want, len);
	EXPECT_EQ(-1, diff) TH_LOG("payload %d: %s byte %ld is %#04x, expected %#04x",
				   payload, what, diff, o->got.bytes[diff], self->want[diff]);
}

/* The analyzer executed exactly @want (@len bytes) from the BF bytes. */
static void check_bf_executed(struct __test_metadata *_metadata, struct poster *self,
			      int payload, int len)
{
	struct oracle *o = self->oracle;

	stamp_cq_update(self->want);
	model_posts(&o->model, &o->after);
	model_last_wqe(&o->model, &o->got);
	EXPECT_EQ(1, o->after.wqe_bf - o->before.wqe_bf) TH_LOG("payload %d: %s", payload, seen(o));
	EXPECT_EQ(0, o->after.wqe_dma - o->before.wqe_dma) TH_LOG("payload %d: %s", payload, seen(o));
	EXPECT_EQ(self->half / self->dev.bf_buf_size, o->got.half)
		TH_LOG("payload %d: %s", payload, seen(o));
	expect_last_wqe(_metadata, self, payload, MODEL_SOURCE_BF, len, "burst");
}

/* The analyzer fetched exactly @want (@len bytes) after one doorbell. */
static void check_doorbell_executed(struct __test_metadata *_metadata, struct poster *self,
				    int payload, int len)
{
	struct oracle *o = self->oracle;
	uint8_t db[4];

	put_be32(db, self->qp.qpn << 8);
	stamp_cq_update(self->want);
	model_posts(&o->model, &o->after);
	model_last_wqe(&o->model, &o->got);
	model_last_doorbell(&o->model, &o->db);
	EXPECT_EQ(1, o->after.doorbells - o->before.doorbells) TH_LOG("payload %d: %s", payload, seen(o));
	/* the doorbell is the post's only write to BAR2 */
	EXPECT_EQ(1, o->after.bar2_writes - o->before.bar2_writes)
		TH_LOG("payload %d: %llu BAR2 writes", payload,
		       (unsigned long long)(o->after.bar2_writes - o->before.bar2_writes));
	EXPECT_EQ(self->info.uar_index, o->db.page) TH_LOG("payload %d: doorbell on UAR %u",
							    payload, o->db.page);
	EXPECT_EQ(0, memcmp(o->db.bytes, db, 4))
		TH_LOG("payload %d: doorbell bytes %02x %02x %02x %02x, expected %02x %02x %02x %02x",
		       payload, o->db.bytes[0], o->db.bytes[1], o->db.bytes[2], o->db.bytes[3],
		       db[0], db[1], db[2], db[3]);
	EXPECT_EQ(1, o->after.wqe_dma - o->before.wqe_dma) TH_LOG("payload %d: %s", payload, seen(o));
	EXPECT_EQ(0, o->after.wqe_bf - o->before.wqe_bf) TH_LOG("payload %d: %s", payload, seen(o));
	expect_last_wqe(_metadata, self, payload, MODEL_SOURCE_DMA, len, "fetched WQE");
}

/* Posts an RDMA write of @payload bytes and checks what the adapter got. */
static void post_and_check(struct __test_metadata *_metadata, struct poster *self,
			   int payload, uint32_t flags)
{
	struct mlx4_bf_post_result res = {};
	struct oracle *o = self->oracle;
	int len = build_rdma_write(self->wqe, payload, payload, sink_addr(&self->sink),
				   self->sink.mr.rkey);
	int bf = len <= (int)self->dev.bf_buf_size && !(flags & MLX4_BF_POST_F_FORCE_DOORBELL);

	model_posts(&o->model, &o->before);
	ASSERT_EQ(0, post_send(self->fd, self->qp.qp_handle, self->wqe, len, flags, &res))
		TH_LOG("payload %d", payload);
	if (bf) {
		/* computed here, not taken from the driver: the page of the UAR */
		size_t at = bf_page(&self->dev, self->info.uar_index) + self->half;
		int burst = expected_bf(self->want, self->wqe, len, self->qp.qpn, self->head,
					self->dev.sq_entries);

		EXPECT_EQ(MLX4_BF_PATH_BLUEFLAME, res.path) TH_LOG("payload %d", payload);
		EXPECT_EQ(at, res.bf_offset);
		EXPECT_EQ((__u32)burst, res.bytes_written);
		check_bf_executed(_metadata, self, payload, burst);
		self->half ^= self->dev.bf_buf_size;
	} else {
		size_t db_at = self->info.uar_index * 4096 + 0x14;

		EXPECT_EQ(MLX4_BF_PATH_DOORBELL, res.path) TH_LOG("payload %d", payload);
		EXPECT_EQ(db_at, res.bf_offset);
		expected_doorbell_wqe(self->want, self->wqe, len, self->head, self->dev.sq_entries);
		check_doorbell_executed(_metadata, self, payload, len);
	}
	self->head++;
}

/* With num_uars and bf_reg_size at 0 the driver takes the device's layout. */
TEST_F(ctx, device_reports_the_default_layout)
{
	EXPECT_EQ(MLX4_BF_ABI_VERSION, self->p.dev.abi_version);
	EXPECT_EQ(bar2_resource_len(), self->p.dev.bar2_len);
	EXPECT_EQ(self->p.dev.bar2_len / 2 / 4096, self->p.dev.num_uars);
	EXPECT_EQ(512, self->p.dev.bf_reg_size);
	EXPECT_EQ(256, self->p.dev.bf_buf_size);
	EXPECT_EQ(256, self->p.dev.max_bf_wqe_size);
	EXPECT_EQ(128, self->p.dev.store_block_max);
}

TEST_F(ctx, writer_is_the_one_asked_for)
{
	const char *params = getenv("MLX4_BF_PARAMS");
	__u32 want = params && strstr(params, "writer=2") ? MLX4_BF_WRITER_WRITE_COMBINING
							  : MLX4_BF_WRITER_STORE_BLOCK;

	EXPECT_EQ(want, self->p.dev.writer);
}

TEST_F(ctx, context_owns_the_bf_page_of_its_uar)
{
	EXPECT_NE(0, self->p.info.uar_index);
	EXPECT_LT(self->p.info.uar_index, self->p.dev.num_uars);
	EXPECT_EQ((__u64)self->p.info.uar_index * 4096, self->p.info.uar_offset);
	EXPECT_EQ(((__u64)self->p.dev.num_uars + self->p.info.uar_index) * 4096, self->p.info.bf_offset);
	/* bits 6 and 7 overlap the ctrl segment's VLAN-insert flags */
	EXPECT_EQ(0, self->p.qp.qpn & 0xc0);
}

TEST_F(ctx, bf_post_lands_at_the_contexts_page_and_half)
{
	post_and_check(_metadata, &self->p, 16, 0);
}

TEST_F(ctx, consecutive_posts_alternate_halves)
{
	for (int i = 0; i < 5; i++)
		post_and_check(_metadata, &self->p, 8 + i, 0);
}

/* The size table: payload -> BF burst -> store blocks. */
TEST_F(ctx, table_sizes_take_bf_up_to_208_bytes)
{
	static const struct { int payload, burst, blocks; } table[] = {
		{ 1, 64, 1 }, { 28, 64, 1 }, { 29, 128, 1 }, { 88, 128, 1 }, { 89, 192, 2 },
		{ 148, 192, 2 }, { 149, 256, 2 }, { 192, 256, 2 }, { 193, 256, 2 }, { 208, 256, 2 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
		struct mlx4_bf_post_result res = {};
		int len = build_rdma_write(self->p.wqe, table[i].payload, 1,
					   sink_addr(&self->p.sink), self->p.sink.mr.rkey);

		ASSERT_EQ(0, post_send(self->p.fd, self->p.qp.qp_handle, self->p.wqe, len,
				       MLX4_BF_POST_F_REQUIRE_BF, &res))
			TH_LOG("payload %d", table[i].payload);
		EXPECT_EQ(MLX4_BF_PATH_BLUEFLAME, res.path);
		EXPECT_EQ((__u32)table[i].burst, res.bytes_written) TH_LOG("payload %d", table[i].payload);
		if (self->p.dev.writer == MLX4_BF_WRITER_STORE_BLOCK)
			EXPECT_EQ((__u32)table[i].blocks, res.store_blocks)
				TH_LOG("payload %d", table[i].payload);
	}
}

TEST_F(ctx, payload_209_takes_the_doorbell)
{
	post_and_check(_metadata, &self->p, 209, 0);
}

TEST_F(ctx, every_payload_1_to_256_lands_exactly)
{
	for (int payload = 1; payload <= 256; payload++)
		post_and_check(_metadata, &self->p, payload, 0);
}

TEST_F(ctx, force_doorbell_rings_the_uar)
{
	post_and_check(_metadata, &self->p, 16, MLX4_BF_POST_F_FORCE_DOORBELL);
	/* the doorbell path does not move the BlueFlame half */
	post_and_check(_metadata, &self->p, 16, 0);
}

TEST_F(ctx, stats_count_posts_and_store_blocks)
{
	struct mlx4_bf_stats before, after;

	ASSERT_EQ(0, query_stats(self->p.fd, NULL, &before));
	post_and_check(_metadata, &self->p, 100, 0);	/* 192 B burst: 2 blocks */
	post_and_check(_metadata, &self->p, 209, 0);	/* doorbell */
	ASSERT_EQ(0, query_stats(self->p.fd, NULL, &after));
	EXPECT_EQ(before.bf_posts + 1, after.bf_posts);
	EXPECT_EQ(before.db_posts + 1, after.db_posts);
	EXPECT_EQ(before.bytes + 192 + 272, after.bytes);
	if (self->p.dev.writer == MLX4_BF_WRITER_STORE_BLOCK)
		EXPECT_EQ(before.store_blocks + 2, after.store_blocks);
}

TEST_F(ctx, debugfs_counts_device_posts)
{
	long bf = debugfs_counter("device", "bf_posts"), db = debugfs_counter("device", "db_posts");
	long rejects = debugfs_counter("device", "rejects_opcode");

	if (bf < 0)
		SKIP(return, "no debugfs stats (debugfs not mounted?)");
	post_and_check(_metadata, &self->p, 10, 0);
	post_and_check(_metadata, &self->p, 10, MLX4_BF_POST_F_FORCE_DOORBELL);
	put_be32(self->p.wqe, 0x1f);
	EXPECT_EQ(-EINVAL, post_send(self->p.fd, self->p.qp.qp_handle, self->p.wqe, 64, 0, NULL));
	EXPECT_EQ(bf + 1, debugfs_counter("device", "bf_posts"));
	EXPECT_EQ(db + 1, debugfs_counter("device", "db_posts"));
	EXPECT_EQ(rejects + 1, debugfs_counter("device", "rejects_opcode"));
	EXPECT_LE(1, debugfs_counter("device", "contexts"));
}

TEST_F(ctx, debugfs_counts_context_posts)
{
	char dir[32];

	snprintf(dir, sizeof(dir), "ctx-%u", self->p.info.uar_index);
	if (debugfs_counter(dir, "bf_posts") < 0)
		SKIP(return, "no debugfs stats (debugfs not mounted?)");
	EXPECT_EQ(0, debugfs_counter(dir, "bf_posts"));
	post_and_check(_metadata, &self->p, 10, 0);
	post_and_check(_metadata, &self->p, 100, 0);
	post_and_check(_metadata, &self->p, 10, MLX4_BF_POST_F_FORCE_DOORBELL);
	EXPECT_EQ(2, debugfs_counter(dir, "bf_posts"));
	EXPECT_EQ(1, debugfs_counter(dir, "db_posts"));
	/* BlueFlame bursts are padded to 64 bytes; the doorbell WQE is 48 */
	EXPECT_EQ(64 + 192 + 48, debugfs_counter(dir, "bytes"));
}

TEST(context_debugfs_goes_away_on_close)
{
	struct mlx4_bf_context_info info;
	char path[96];
	int fd = open(DEV_PATH, O_RDWR);

	if (fd < 0)
		SKIP(return, DEV_PATH " is missing");
	ASSERT_EQ(0, query_context(fd, &info));
	snprintf(path, sizeof(path), DEBUGFS_DIR "/ctx-%u/stats", info.uar_index);
	if (access(path, R_OK))
		SKIP(close(fd); return, "no debugfs stats (debugfs not mounted?)");
	close(fd);
	EXPECT_NE(0, access(path, F_OK));
}

TEST(two_contexts_write_their_own_bf_pages)
{
	struct oracle oracle;
	struct poster p[2];

	if (access(DEV_PATH, F_OK))
		SKIP(return, DEV_PATH " is missing");
	if (model_open(&oracle.model))
		SKIP(return, NO_ANALYZER);
	ASSERT_EQ(0, poster_open(&p[0], &oracle));
	ASSERT_EQ(0, poster_open(&p[1], &oracle));
	ASSERT_NE(p[0].info.uar_index, p[1].info.uar_index);
	ASSERT_NE(p[0].info.bf_offset, p[1].info.bf_offset);
	/* interleaved: each context's WQE at its own page, halves 0, 0, 1, 1, ... */
	for (int i = 0; i < 6; i++)
		post_and_check(_metadata, &p[i % 2], 20 + i, 0);
	model_close(&oracle.model);
	close(p[1].fd);
	close(p[0].fd);
}

TEST_HARNESS_MAIN
