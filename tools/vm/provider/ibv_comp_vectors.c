// SPDX-License-Identifier: GPL-2.0
/*
 * ibv_comp_vectors: a CQ on each of the device's completion vectors, each
 * armed with a completion channel under an RC QP connected to itself; one
 * signaled RDMA write each, its completion event awaited, and the
 * interrupt lines of /proc/interrupts whose name starts with PREFIX (and
 * does not name the async EQ) read around it. Checked:
 *
 *   - the device has at least -m completion vectors;
 *   - each vector's event came through exactly one of those lines, and no
 *     two vectors through the same one (a CQ's EQ is its vector's);
 *   - with -e, vector V's line is PREFIX followed by V (mlx4_bf's names);
 *   - a CQ on vector num_comp_vectors is refused with EINVAL.
 *
 * Usage: ibv_comp_vectors [-d DEV] -p PREFIX [-m MIN] [-e]
 * Exit status: 0 if every check held, 1 if not.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../upstream/verbs_util.h"

#define BUF_SIZE 4096
#define MAX_LINES 64
#define MAX_VECTORS 64
#define NAME_LEN 64

struct irq_line {
	char name[NAME_LEN];
	unsigned long long count;
};

void die(const char *what, int err)
{
	printf("ibv_comp_vectors: %s: %s\n", what, strerror(err));
	exit(1);
}

/*
 * The lines of /proc/interrupts named PREFIX... (not "async"): each line's
 * per-CPU counts summed, its name the last field. Returns how many.
 */
static int read_irqs(const char *prefix, struct irq_line *lines)
{
	FILE *f = fopen("/proc/interrupts", "r");
	char buf[4096];
	int n = 0;

	if (!f)
		die("/proc/interrupts", errno);
	while (n < MAX_LINES && fgets(buf, sizeof(buf), f)) {
		unsigned long long sum = 0;
		char *tok, *save, *last = NULL;
		int counting = 1;

		if (!strchr(buf, ':'))
			continue;
		tok = strtok_r(strchr(buf, ':') + 1, " \t\n", &save);
		for (; tok; tok = strtok_r(NULL, " \t\n", &save)) {
			char *end;
			unsigned long long v = strtoull(tok, &end, 10);

			if (counting && *end == '\0')
				sum += v;
			else
				counting = 0;
			last = tok;
		}
		if (!last || strncmp(last, prefix, strlen(prefix)) || strstr(last, "async"))
			continue;
		snprintf(lines[n].name, NAME_LEN, "%s", last);
		lines[n].count = sum;
		n++;
	}
	fclose(f);
	return n;
}

/* The one line of AFTER whose count grew from BEFORE, or -1 (none or more). */
static int grown(const struct irq_line *before, int nb,
		 const struct irq_line *after, int na, int *how_many)
{
	int i, j, which = -1;

	*how_many = 0;
	for (i = 0; i < na; i++) {
		unsigned long long was = 0;

		for (j = 0; j < nb; j++)
			if (!strcmp(before[j].name, after[i].name))
				was = before[j].count;
		if (after[i].count > was) {
			which = i;
			++*how_many;
		}
	}
	return *how_many == 1 ? which : -1;
}

/* One signaled inline RDMA write through QP and its completion event on CH. */
static int write_and_wait(struct ibv_qp *qp, struct ibv_cq *cq,
			  struct ibv_comp_channel *ch, struct ibv_mr *mr, char *buf)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)buf,
		.length = 32,
		.lkey = mr->lkey,
	};
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
		.wr.rdma.remote_addr = (uintptr_t)buf + BUF_SIZE / 2,
		.wr.rdma.rkey = mr->rkey,
	};
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct ibv_send_wr *bad;
	struct ibv_cq *ev_cq;
	struct ibv_wc wc;
	void *ev_ctx;

	if (ibv_req_notify_cq(cq, 0))
		die("ibv_req_notify_cq", errno);
	errno = ibv_post_send(qp, &wr, &bad);
	if (errno)
		die("ibv_post_send", errno);
	if (poll(&p, 1, 5000) != 1) {
		printf("    no completion event in 5 s\n");
		return 1;
	}
	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx))
		die("ibv_get_cq_event", errno);
	ibv_ack_cq_events(ev_cq, 1);
	if (ibv_poll_cq(cq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS) {
		printf("    the write did not complete with success\n");
		return 1;
	}
	return 0;
}

static int print_usage(const char *prog)
{
	fprintf(stderr, "usage: %s [-d DEV] -p PREFIX [-m MIN] [-e]\n", prog);
	return 2;
}

int main(int argc, char **argv)
{
	struct irq_line before[MAX_LINES], after[MAX_LINES];
	char fired[MAX_VECTORS][NAME_LEN];
	const char *dev = "mlx4_bf0", *prefix = NULL;
	int opt, min = 1, exact = 0, failed = 0, i, v, w;
	struct ibv_qp_init_attr qpa = { 0 };
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	uint16_t lid;
	char *buf;
	int n;

	while ((opt = getopt(argc, argv, "d:p:m:e")) != -1) {
		switch (opt) {
		case 'd':
			dev = optarg;
			break;
		case 'p':
			prefix = optarg;
			break;
		case 'm':
			min = atoi(optarg);
			break;
		case 'e':
			exact = 1;
			break;
		default:
			return print_usage(argv[0]);
		}
	}
	if (!prefix)
		return print_usage(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	buf = aligned_alloc(BUF_SIZE, BUF_SIZE);
	if (!buf)
		die("memory", ENOMEM);
	ctx = open_device(dev);
	lid = port_lid(ctx);
	n = ctx->num_comp_vectors;
	printf("ibv_comp_vectors: %s has %d completion vectors (at least %d wanted)\n",
	       dev, n, min);
	if (n < min || n > MAX_VECTORS)
		failed = 1;
	pd = ibv_alloc_pd(ctx);
	mr = pd ? ibv_reg_mr(pd, buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			     IBV_ACCESS_REMOTE_WRITE) : NULL;
	if (!mr)
		die("PD or MR", errno);
	for (v = 0; v < n && v < MAX_VECTORS; v++) {
		struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
		struct ibv_qp *qp;
		const char *line;
		int nb, na, lines;

		cq = ch ? ibv_create_cq(ctx, 16, NULL, ch, v) : NULL;
		if (!cq)
			die("a CQ on the vector", errno);
		qpa.send_cq = cq;
		qpa.recv_cq = cq;
		qpa.qp_type = IBV_QPT_RC;
		qpa.cap.max_send_wr = 4;
		qpa.cap.max_recv_wr = 4;
		qpa.cap.max_send_sge = 1;
		qpa.cap.max_recv_sge = 1;
		qpa.cap.max_inline_data = 64;
		qp = ibv_create_qp(pd, &qpa);
		if (!qp)
			die("ibv_create_qp", errno);
		connect_to_self(qp, lid);
		nb = read_irqs(prefix, before);
		failed |= write_and_wait(qp, cq, ch, mr, buf);
		na = read_irqs(prefix, after);
		i = grown(before, nb, after, na, &lines);
		line = i < 0 ? NULL : after[i].name;
		memcpy(fired[v], line ? line : "", line ? NAME_LEN : 1);
		printf("    vector %d: CQ 0x%x, its event through %d %s line%s%s%s\n",
		       v, cq->handle, lines, prefix, lines == 1 ? "" : "s",
		       line ? ": " : "", line ? line : "");
		if (!line) {
			failed = 1;
		} else if (exact) {
			char want[NAME_LEN];

			snprintf(want, NAME_LEN, "%s%d", prefix, v);
			if (strcmp(line, want)) {
				printf("    vector %d: wanted %s\n", v, want);
				failed = 1;
			}
		}
		for (w = 0; w < v; w++) {
			if (line && !strcmp(fired[w], line)) {
				printf("    vectors %d and %d share %s\n", w, v, line);
				failed = 1;
			}
		}
		if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_destroy_comp_channel(ch))
			die("destroying the vector's QP, CQ or channel", errno);
	}
	errno = 0;
	cq = ibv_create_cq(ctx, 16, NULL, NULL, n);
	printf("    a CQ on vector %d: %s, errno %d (%s)\n", n,
	       cq ? "made" : "refused", errno, strerror(errno));
	if (cq || errno != EINVAL)
		failed = 1;
	if (cq)
		ibv_destroy_cq(cq);
	if (ibv_dereg_mr(mr) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("destroying the MR, PD or context", errno);
	printf("ibv_comp_vectors: %s\n", failed ? "FAILED" : "every check held");
	return failed;
}
