// SPDX-License-Identifier: GPL-2.0
/*
 * Registered memory (ABI 3) named by posts: gather segments, which must
 * name an MR of the same context by its lkey with the range inside it; RDMA
 * writes, which must name by its rkey a remote-writable MR of the context
 * that owns the connected peer QP, with the whole message inside it; RDMA
 * reads, the same for a remote-readable MR, into local-writable ones. What
 * arrives is checked in the receiver's memory. The device model's analyzer
 * (diagnostic block version 4) counts RDMA writes and protection faults:
 * the kernel refuses what the adapter would fault on, so the last test
 * finds none. Checks on it are left out where it is missing (real
 * hardware, a model older than version 4); a test that is nothing else
 * SKIPs.
 */
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "mlx4_bf_pair.h"

/*
 * The model's fault counters when the program started: no test may make
 * the adapter see a protection fault (the last test compares). Read before
 * the harness forks its tests; the tests' processes inherit them.
 */
static struct {
	int v4;
	uint64_t local, remote;
} faults_at_start;

static void __attribute__((constructor)) read_faults_at_start(void)
{
	struct model m;

	if (!analyzer_v4(&m))
		return;
	faults_at_start.v4 = 1;
	faults_at_start.local = model_read(&m, MODEL_LOCAL_PROT_FAULTS);
	faults_at_start.remote = model_read(&m, MODEL_REMOTE_ACCESS_FAULTS);
	model_close(&m);
}

TEST_F(pair, gather_send_lands_byte_exact_in_the_receivers_buffer)
{
	struct pair *p = &self->p;
	/* 700 bytes across a page boundary of the MR */
	struct sge sg = { (uintptr_t)p->abuf + PAGE - 300, 700, p->amr.lkey };
	uint64_t recvs = 0, bytes = 0, refused = 0;

	if (p->v4) {
		recvs = model_read(&p->m, MODEL_RECV_WQES);
		bytes = model_read(&p->m, MODEL_PAYLOAD_BYTES);
		refused = model_read(&p->m, MODEL_REFUSED_SEGS);
	}
	ASSERT_EQ(0, send_gather(p, &sg, 1));
	expect_received(_metadata, p, p->abuf + PAGE - 300, 700);
	if (p->v4) {
		EXPECT_EQ(recvs + 1, model_read(&p->m, MODEL_RECV_WQES));
		EXPECT_EQ(bytes + 700, model_read(&p->m, MODEL_PAYLOAD_BYTES));
		EXPECT_EQ(refused, model_read(&p->m, MODEL_REFUSED_SEGS));
	}
}

TEST_F(pair, gather_from_two_mrs_arrives_in_segment_order)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info second;
	struct sge sg[2];
	uint8_t want[300];

	ASSERT_EQ(0, reg_mr(p->a.fd, (uintptr_t)p->abuf + 9 * PAGE, PAGE, 0, &second));
	sg[0] = (struct sge){ (uintptr_t)p->abuf + 9 * PAGE + 50, 100, second.lkey };
	sg[1] = (struct sge){ (uintptr_t)p->abuf + 3, 200, p->amr.lkey };
	memcpy(want, p->abuf + 9 * PAGE + 50, 100);
	memcpy(want + 100, p->abuf + 3, 200);
	ASSERT_EQ(0, send_gather(p, sg, 2));
	expect_received(_metadata, p, want, 300);
}

TEST_F(pair, unregistered_address_is_refused_and_nothing_is_posted)
{
	struct pair *p = &self->p;
	struct sge sg = { 0xffff888000000000ull, 64, 0x1234 };

	build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1);
	expect_refused(_metadata, p, 32, 0, MLX4_BF_REJECT_LKEY);
}

TEST_F(pair, reserved_lkey_is_refused)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf, 64, RESERVED_LKEY };

	build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1);
	expect_refused(_metadata, p, 32, 0, MLX4_BF_REJECT_LKEY);
}

TEST_F(pair, another_files_lkey_is_refused)
{
	struct pair *p = &self->p;
	/* b's MR, in the same process: a key of another open file all the same */
	struct sge sg = { (uintptr_t)p->bbuf, 64, p->bmr.lkey };

	build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1);
	expect_refused(_metadata, p, 32, 0, MLX4_BF_REJECT_LKEY);
}

TEST_F(pair, stale_lkey_after_dereg_is_refused)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info gone;
	struct sge sg;

	ASSERT_EQ(0, reg_mr(p->a.fd, (uintptr_t)p->abuf, PAGE, 0, &gone));
	ASSERT_EQ(0, dereg_mr(p->a.fd, gone.mr_handle));
	sg = (struct sge){ (uintptr_t)p->abuf, 64, gone.lkey };
	build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1);
	expect_refused(_metadata, p, 32, 0, MLX4_BF_REJECT_LKEY);
}

/* An MR of a over 3000 bytes from abuf + 100, not page-aligned at either end. */
#define PART_OFF	100
#define PART_LEN	3000

static __u32 reg_part(struct __test_metadata *_metadata, struct pair *p)
{
	struct mlx4_bf_mr_info part;

	EXPECT_EQ(0, reg_mr(p->a.fd, (uintptr_t)p->abuf + PART_OFF, PART_LEN, 0, &part));
	return part.lkey;
}

TEST_F(pair, gather_one_byte_past_the_mrs_end_is_refused)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf + PART_OFF + PART_LEN - 64, 65,
			  reg_part(_metadata, p) };

	build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1);
	expect_refused(_metadata, p, 32, 0, MLX4_BF_REJECT_RANGE);
}

TEST_F(pair, gather_ending_at_the_mrs_last_byte_is_accepted)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf + PART_OFF + PART_LEN - 64, 64,
			  reg_part(_metadata, p) };

	ASSERT_EQ(0, send_gather(p, &sg, 1));
	expect_received(_metadata, p, p->abuf + PART_OFF + PART_LEN - 64, 64);
}

TEST_F(pair, gather_starting_before_the_mr_is_refused)
{
	struct pair *p = &self->p;
	/* in the MR's first page, one byte before the MR */
	struct sge sg = { (uintptr_t)p->abuf + PART_OFF - 1, 10, reg_part(_metadata, p) };

	build_gather(p->wqe, OP_SEND, 0, 0, &sg, 1);
	expect_refused(_metadata, p, 32, 0, MLX4_BF_REJECT_RANGE);
}

TEST_F(pair, gather_segment_past_the_end_after_a_good_one_is_refused)
{
	struct pair *p = &self->p;
	struct sge sg[2] = {
		{ (uintptr_t)p->abuf, 64, p->amr.lkey },
		{ (uintptr_t)p->abuf + BUF_BYTES - 10, 11, p->amr.lkey },
	};

	build_gather(p->wqe, OP_SEND, 0, 0, sg, 2);
	expect_refused(_metadata, p, 48, 0, MLX4_BF_REJECT_RANGE);
}

TEST_F(pair, rdma_write_lands_exactly_in_the_peers_memory)
{
	struct pair *p = &self->p;
	uint8_t want[100];
	int len = build_rdma_write(p->wqe, 100, 0x40, (uintptr_t)p->bbuf + 1000,
				   p->bmr.rkey);

	rdma_write_pattern(want, 100, 0x40);
	expect_landed(_metadata, p, len, 0, p->bbuf + 1000, want, 100);
}

TEST_F(pair, rdma_write_by_doorbell_lands_exactly_in_the_peers_memory)
{
	struct pair *p = &self->p;
	uint8_t want[100];
	int len = build_rdma_write(p->wqe, 100, 0x41, (uintptr_t)p->bbuf + 1000,
				   p->bmr.rkey);

	rdma_write_pattern(want, 100, 0x41);
	expect_landed(_metadata, p, len, MLX4_BF_POST_F_FORCE_DOORBELL, p->bbuf + 1000,
		      want, 100);
}

TEST_F(pair, rdma_write_from_a_gather_source_lands_exactly)
{
	struct pair *p = &self->p;
	/* 3000 bytes, across a page boundary at both ends */
	struct sge sg = { (uintptr_t)p->abuf + 2 * PAGE - 1000, 3000, p->amr.lkey };
	int len = build_gather(p->wqe, OP_RDMA_WRITE, (uintptr_t)p->bbuf + 5 * PAGE - 7,
			       p->bmr.rkey, &sg, 1);

	expect_landed(_metadata, p, len, 0, p->bbuf + 5 * PAGE - 7,
		      p->abuf + 2 * PAGE - 1000, 3000);
}

TEST_F(pair, rdma_write_ending_at_the_peers_last_byte_lands)
{
	struct pair *p = &self->p;
	uint8_t want[100];
	uint8_t *dst = p->bbuf + BUF_BYTES - 100;
	int len = build_rdma_write(p->wqe, 100, 0x42, (uintptr_t)dst, p->bmr.rkey);
	uint64_t writes = 0;

	rdma_write_pattern(want, 100, 0x42);
	if (p->v4)
		writes = model_read(&p->m, MODEL_RDMA_WRITES);
	ASSERT_EQ(0, post_send(p->a.fd, p->a.qp.qp_handle, p->wqe, len, 0, NULL));
	if (p->v4)
		EXPECT_EQ(writes + 1, model_read(&p->m, MODEL_RDMA_WRITES));
	EXPECT_EQ(0, wait_landed(dst, want, 100));
}

TEST_F(pair, rdma_write_imm_gives_the_peer_a_receive_cqe)
{
	struct pair *p = &self->p;
	uint8_t want[48];
	const struct mlx4_bf_cqe *cqe;
	int len = build_rdma_write(p->wqe, 48, 0x43, (uintptr_t)p->bbuf + 64,
				   p->bmr.rkey);

	put_be32(p->wqe, OP_RDMA_WRITE_IMM);
	put_be32(p->wqe + 12, 0xfeedf00d);
	rdma_write_pattern(want, 48, 0x43);
	ASSERT_EQ(0, post_send(p->a.fd, p->a.qp.qp_handle, p->wqe, len, 0, NULL));
	cqe = ep_wait(&p->b, 2000);
	ASSERT_NE(NULL, cqe) TH_LOG("b got no completion");
	EXPECT_EQ(MLX4_BF_CQE_OPCODE_RDMA_WRITE_IMM, cqe_opcode(cqe));
	EXPECT_EQ(0, cqe->owner_sr_opcode & MLX4_BF_CQE_IS_SEND) TH_LOG("a receive CQE has IS_SEND clear");
	EXPECT_EQ(0xfeedf00d, ntohl(cqe->immed)) TH_LOG("immediate");
	EXPECT_EQ(48, ntohl(cqe->byte_cnt)) TH_LOG("byte_cnt");
	EXPECT_EQ(p->b.qp.qpn, ntohl(cqe->my_qpn) & 0xffffff) TH_LOG("my_qpn");
	EXPECT_EQ(p->a.qp.qpn, ntohl(cqe->src_qpn) & 0xffffff) TH_LOG("source QPN");
	/* the receive CQE comes after the data: it is there already */
	EXPECT_EQ(0, memcmp(p->bbuf + 64, want, 48));
}

TEST_F(pair, rkey_without_remote_write_is_refused)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info local;
	int len;

	ASSERT_EQ(0, reg_mr(p->b.fd, (uintptr_t)p->bbuf, BUF_BYTES,
			    MLX4_BF_ACCESS_LOCAL_WRITE, &local));
	len = build_rdma_write(p->wqe, 40, 1, (uintptr_t)p->bbuf + 8, local.rkey);
	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
	expect_refused(_metadata, p, len, MLX4_BF_POST_F_FORCE_DOORBELL, MLX4_BF_REJECT_RKEY);
	EXPECT_EQ(0, p->bbuf[8]);
}

TEST_F(pair, rkey_of_a_file_that_is_not_the_peer_is_refused)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info own, third;
	int c = open(DEV_PATH, O_RDWR), len;

	ASSERT_LE(0, c);
	/* a's own remote-writable MR: a's QP is connected to b, not to itself */
	ASSERT_EQ(0, reg_mr(p->a.fd, (uintptr_t)p->bbuf, BUF_BYTES, ACCESS_RDMA, &own));
	ASSERT_EQ(0, reg_mr(c, (uintptr_t)p->bbuf, BUF_BYTES, ACCESS_RDMA, &third));
	len = build_rdma_write(p->wqe, 40, 1, (uintptr_t)p->bbuf + 8, own.rkey);
	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
	len = build_rdma_write(p->wqe, 40, 1, (uintptr_t)p->bbuf + 8, third.rkey);
	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
	EXPECT_EQ(0, p->bbuf[8]);
	close(c);
}

TEST_F(pair, rdma_write_one_byte_past_the_peers_end_is_refused)
{
	struct pair *p = &self->p;
	int len = build_rdma_write(p->wqe, 100, 1, (uintptr_t)p->bbuf + BUF_BYTES - 99,
				   p->bmr.rkey);

	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
	expect_refused(_metadata, p, len, MLX4_BF_POST_F_FORCE_DOORBELL, MLX4_BF_REJECT_RKEY);
}

TEST_F(pair, rdma_write_gathered_past_the_peers_end_is_refused)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf, 2 * PAGE, p->amr.lkey };
	int len = build_gather(p->wqe, OP_RDMA_WRITE,
			       (uintptr_t)p->bbuf + BUF_BYTES - 2 * PAGE + 1, p->bmr.rkey,
			       &sg, 1);

	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
}

TEST_F(pair, rdma_write_starting_before_the_peers_mr_is_refused)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info part;
	int len;

	ASSERT_EQ(0, reg_mr(p->b.fd, (uintptr_t)p->bbuf + 200, 1000, ACCESS_RDMA, &part));
	len = build_rdma_write(p->wqe, 16, 1, (uintptr_t)p->bbuf + 199, part.rkey);
	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
}

TEST_F(pair, stale_rkey_after_the_peer_deregisters_is_refused)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info gone;
	int len;

	ASSERT_EQ(0, reg_mr(p->b.fd, (uintptr_t)p->bbuf, PAGE, ACCESS_RDMA, &gone));
	ASSERT_EQ(0, dereg_mr(p->b.fd, gone.mr_handle));
	len = build_rdma_write(p->wqe, 16, 1, (uintptr_t)p->bbuf, gone.rkey);
	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
}

TEST_F(pair, rdma_read_lands_exactly_in_the_requesters_memory)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info readable;
	/* 3000 bytes, across page boundaries at both ends, on both sides */
	uint8_t *src = p->bbuf + 3 * PAGE - 500, *dst = p->abuf + 6 * PAGE - 7;
	struct sge sg = { (uintptr_t)dst, 3000, p->amr.lkey };
	uint64_t reads = 0, bytes = 0;
	int v8 = p->v4 && model_version(&p->m) >= 8;
	int len;

	readable_source(_metadata, p, &readable, src, 3000);
	memset(dst - 1, 0, 3002);
	len = build_gather(p->wqe, OP_RDMA_READ, (uintptr_t)src, readable.rkey, &sg, 1);
	if (v8) {
		reads = model_read(&p->m, MODEL_RDMA_READS);
		bytes = model_read(&p->m, MODEL_RDMA_READ_BYTES);
	}
	ASSERT_EQ(0, post_send(p->a.fd, p->a.qp.qp_handle, p->wqe, len, 0, NULL));
	if (v8) {
		/* the read waits for the post's writes; the model ran the WQE */
		EXPECT_EQ(reads + 1, model_read(&p->m, MODEL_RDMA_READS));
		EXPECT_EQ(bytes + 3000, model_read(&p->m, MODEL_RDMA_READ_BYTES));
	}
	EXPECT_EQ(0, wait_landed(dst, src, 3000)) TH_LOG("byte %ld differs",
							 first_difference(dst, src, 3000));
	EXPECT_EQ(0, dst[-1]) TH_LOG("the byte before the target was written");
	EXPECT_EQ(0, dst[3000]) TH_LOG("the byte after the target was written");
}

TEST_F(pair, rdma_read_into_a_region_without_local_write_is_refused)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info readable, read_only;
	struct sge sg;
	int len;

	readable_source(_metadata, p, &readable, p->bbuf, 64);
	ASSERT_EQ(0, reg_mr(p->a.fd, (uintptr_t)p->abuf, BUF_BYTES, 0, &read_only));
	sg = (struct sge){ (uintptr_t)p->abuf + 64, 64, read_only.lkey };
	len = build_gather(p->wqe, OP_RDMA_READ, (uintptr_t)p->bbuf, readable.rkey, &sg, 1);
	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_LKEY);
	/* the same region gathers for a SEND: local read is always allowed */
	ASSERT_EQ(0, send_gather(p, &sg, 1));
	expect_received(_metadata, p, p->abuf + 64, 64);
}

TEST_F(pair, rdma_read_of_a_region_without_remote_read_is_refused)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf, 64, p->amr.lkey };
	/* b's region takes remote writes, not reads */
	int len = build_gather(p->wqe, OP_RDMA_READ, (uintptr_t)p->bbuf, p->bmr.rkey, &sg, 1);

	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
}

TEST_F(pair, rdma_read_one_byte_past_the_peers_end_is_refused)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info readable;
	struct sge sg = { (uintptr_t)p->abuf, 100, p->amr.lkey };
	int len;

	readable_source(_metadata, p, &readable, p->bbuf, 16);
	len = build_gather(p->wqe, OP_RDMA_READ, (uintptr_t)p->bbuf + BUF_BYTES - 99,
			   readable.rkey, &sg, 1);
	expect_refused(_metadata, p, len, 0, MLX4_BF_REJECT_RKEY);
}

TEST_F(pair, rdma_read_with_inline_data_is_einval)
{
	struct pair *p = &self->p;
	struct mlx4_bf_mr_info readable;
	int len;

	readable_source(_metadata, p, &readable, p->bbuf, 16);
	len = build_rdma_write(p->wqe, 16, 1, (uintptr_t)p->bbuf, readable.rkey);
	put_be32(p->wqe, OP_RDMA_READ);
	EXPECT_EQ(-EINVAL, post_send(p->a.fd, p->a.qp.qp_handle, p->wqe, len, 0, NULL));
}

TEST_F(pair, dereg_with_sends_outstanding_is_ebusy_until_they_complete)
{
	struct pair *p = &self->p;
	struct sge sg = { (uintptr_t)p->abuf, BUF_BYTES, 0 };
	int busy = 0, ret, len;

	/* RDMA writes of 64 KiB each: the adapter takes a while for them */
	for (int round = 0; round < 10 && !busy; round++) {
		struct mlx4_bf_mr_info src;
		uint64_t end;

		ASSERT_EQ(0, reg_mr(p->a.fd, (uintptr_t)p->abuf, BUF_BYTES, 0, &src));
		sg.lkey = src.lkey;
		len = build_gather(p->wqe, OP_RDMA_WRITE, (uintptr_t)p->bbuf, p->bmr.rkey,
				   &sg, 1);
		for (__u32 i = 0; i < p->dev.sq_entries; i++) {
			ASSERT_EQ(0, post_send(p->a.fd, p->a.qp.qp_handle, p->wqe, len,
					       0, NULL)) TH_LOG("round %d, post %u", round, i);
		}
		ret = dereg_mr(p->a.fd, src.mr_handle);
		if (!ret)
			continue;	/* all completed already: nothing outstanding */
		ASSERT_EQ(-EBUSY, ret) TH_LOG("round %d", round);
		busy = 1;
		/* each DEREG_MR reaps completions first: it succeeds once they are in */
		end = now_ns() + 5000000000ull;
		while ((ret = dereg_mr(p->a.fd, src.mr_handle)) == -EBUSY && now_ns() < end)
			usleep(1000);
		EXPECT_EQ(0, ret) TH_LOG("DEREG_MR after the sends completed");
	}
	if (!busy)
		SKIP(return, "the adapter completed every send before DEREG_MR looked");
}

TEST_F(pair, fork_keeps_the_parents_mr_and_its_pages)
{
	struct pair *p = &self->p;
	long pinned = debugfs_counter("device", "pinned_pages"), locked = vm_locked_kb();
	struct sge sg = { (uintptr_t)p->abuf, 256, p->amr.lkey };
	int go[2], done[2], status;
	uint8_t want[256];
	char c = 0;
	pid_t pid;

	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(done));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* the child writes its copy of the pages, then exits */
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		memset(p->abuf, 0xee, BUF_BYTES);
		_exit(write(done[1], &c, 1) == 1 ? 0 : 2);
	}
	/* the parent writes its pages while the child shares the rest */
	for (int i = 0; i < 256; i++)
		p->abuf[i] = want[i] = (uint8_t)(0x31 + 5 * i);
	ASSERT_EQ(0, send_gather(p, &sg, 1));
	expect_received(_metadata, p, want, 256);
	ASSERT_EQ(1, write(go[1], &c, 1));
	ASSERT_EQ(1, read(done[0], &c, 1));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* what the child wrote is not what the adapter reads for the parent */
	ASSERT_EQ(0, send_gather(p, &sg, 1));
	expect_received(_metadata, p, want, 256);
	EXPECT_EQ(locked, vm_locked_kb()) TH_LOG("the parent's VmLck");
	if (pinned >= 0)
		EXPECT_EQ(pinned, debugfs_counter("device", "pinned_pages"));
}

/* Last: the fault counters over every test before. */
FIXTURE(program) {};
FIXTURE_SETUP(program) {}
FIXTURE_TEARDOWN(program) {}

TEST_F(program, adapter_saw_no_protection_fault_in_any_test)
{
	struct model m;

	if (!faults_at_start.v4 || !analyzer_v4(&m))
		SKIP(return, NO_V4);
	EXPECT_EQ(faults_at_start.local, model_read(&m, MODEL_LOCAL_PROT_FAULTS))
		TH_LOG("local protection faults");
	EXPECT_EQ(faults_at_start.remote, model_read(&m, MODEL_REMOTE_ACCESS_FAULTS))
		TH_LOG("remote access faults");
	model_close(&m);
}

TEST_HARNESS_MAIN
