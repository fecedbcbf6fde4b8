/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibv_fault_walk's parts: ibv_fault_walk.c walks the failures and reports
 * them; fault_walk_ops.c has the operations, each with the objects it needs
 * made first; fault_walk_state.c reads what the kernel, the driver and the
 * device model hold, binds and unbinds the adapter, arms the faults and
 * reads the kernel log.
 */
#ifndef FAULT_WALK_H
#define FAULT_WALK_H

#include <infiniband/verbs.h>
#include <stdint.h>
#include <sys/types.h>

#define DEV_NAME	"mlx4_bf0"
#define IB_DEV		"/sys/class/infiniband/" DEV_NAME
#define DRV		"/sys/bus/pci/drivers/mlx4_bf"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* An operation that returned success without making its object. */
#define ERR_NO_ERRNO	(-1)
/* A bind that succeeded without an RDMA device ("no RDMA device: ..."). */
#define ERR_NO_IBDEV	(-2)
/* QP_POST: a post that succeeded without a completion, or the reverse. */
#define ERR_NO_COMPLETION	(-3)
#define ERR_COMPLETED	(-4)

void die(const char *what, int err);

/* What the kernel, the driver and the model hold now. */
struct held {
	long vm_pin, vm_lck;	/* kB, this process (/proc/self/status) */
	long pins;		/* pages pinned: vmstat's taken less released */
	long contexts, mrs;	/* the driver's debugfs, -1 unbound */
	uint64_t mpts, eqs_cqs, qps;	/* the model's gauges */
	long vectors;		/* the driver's interrupts: an EQ each */
	uint64_t fw_phase, fw_pages, icm_pages;
};

void held_now(struct held *h);
/* What differs from @want, as text in @buf; 0 if nothing does. */
int held_diff(const struct held *want, const struct held *now, char *buf,
	      size_t len);

/* The adapter: its PCI function, the model's diagnostic block. */
extern char bdf[32];
void state_open(void);
int is_bound(void);
int ibdev_present(void);
int port_active(int tenths);
/* Writes the function's name to DRV/bind or DRV/unbind: 0 or an errno. */
int sysfs_bdf(const char *file);
/* Unbound, or bound with mlx4_bf0's port 1 ACTIVE: 0 or an errno. */
int unbind_now(void);
int bind_now(void);

/* What is held bound and idle, and unbound; both measured again. */
extern struct held idle, unbound;
void rebaseline(void);
struct tally;
/*
 * The adapter bound, everything as idle; what a destroy kept (KEEPS) gone
 * after unbind and rebind: 1, or 0 and what was left in LEFT.
 */
int back_to_idle(int keeps, struct tally *t, char *left, size_t len);
/* Unbound, everything as unbound: 1, or 0 and what was left in LEFT. */
int unbound_again(struct tally *t, char *left, size_t len);

/* Allocation faults: the Nth failable allocation of this task. */
void fail_nth_arm(unsigned int n);
/* Disarms; returns what was left of N (0: it fired). */
unsigned int fail_nth_disarm(void);

/* Command faults of the model (diag CMD_FAULT, version 12). */
void cmd_fault_arm(uint16_t opcode, unsigned int skip);
/* Disarms; 1 if it fired. LEFT: the skip it had left (may be NULL). */
int cmd_fault_disarm(unsigned int *left);
#define CMD_SKIP_MAX	0xfff
/* Commands the model executed (diag 0x68), and the device resets. */
uint64_t model_commands(void);
uint64_t model_resets(void);
/* Protocol errors the model logged outside a declared window (diag 0x28). */
uint64_t model_protocol_errors(void);

/* The kernel log's problem reports since the last call, "#" lines. */
void kmsg_open(void);
int kmsg_reports(void);

/* The objects of one step, made without faults up to its operation. */
struct world {
	struct ibv_device **list;
	struct ibv_device *dev;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_srq *srq;	/* if made, the QPs made after it receive from it */
	struct ibv_qp *qp[2];	/* the QP operated on, its peer */
	uint8_t *buf;
	uint16_t lid;
	int fd;			/* bind, unbind: the sysfs file */
};

/* The region's buffer. */
#define BUF_SIZE	4096

/*
 * fault_walk_world.c: each makes what it names and what comes before it
 * (a context, its PD, a buffer, a region on them); 0 or the errno.
 */
int find_device(struct world *w);
int make_ctx(struct world *w);
int make_pd(struct world *w);
/* The region's memory, touched (w->buf), for a world that has its PD. */
int alloc_buf(struct world *w);
int make_buf(struct world *w);
int make_mr(struct world *w);
/* A CQ of 16 entries on the context. */
int make_cq(struct world *w);
/* An SRQ of 4 WQEs on the PD, 4 receives posted. */
int make_srq(struct world *w);
/*
 * An RC QP on the PD and CQ, 16 send WRs, 64 bytes inline, receiving
 * from the SRQ if there is one; or NULL.
 */
struct ibv_qp *new_qp(struct world *w);
/* The transitions: 0 or the errno ibv_modify_qp() returned. */
int to_init(struct ibv_qp *qp);
int to_rtr(struct ibv_qp *qp, struct ibv_qp *peer, uint16_t lid);
int to_rts(struct ibv_qp *qp);
/* Context, PD, CQ and two QPs connected to each other, in STATE. */
int make_qps(struct world *w, enum ibv_qp_state state);
/* errno after a call that failed, or ERR_NO_ERRNO if it set none. */
int failed(void);

#define DEV_BIND	1
#define DEV_UNBIND	2

/* One operation: what it needs made first, it, and its undoing. */
struct op {
	const char *name;
	/* The objects it needs, made without faults: 0 or an errno. */
	int (*setup)(struct world *w);
	/* The operation: 0, an errno, ERR_NO_ERRNO. */
	int (*run)(struct world *w);
	/* After the fault is disarmed: RESULT corrected (bind's RDMA device). */
	int (*settle)(struct world *w, int result);
	/* After a success: its object taken back. */
	void (*undo)(struct world *w);
	/* How it reports an error, for the "#" lines. */
	const char *reports;
	/* A destroy: after a failed command it returns success and the
	 * driver keeps the memory until unbind resets the adapter.
	 */
	int keeps;
	/* Bind or unbind (DEV_*): of the adapter, not of a context. */
	int device;
	/* The kernel function whose allocations are spared (SPARE if NULL). */
	const char *spare;
};

/* fault_walk_spare.c: allocations with FN on the stack never fail. */
#define SPARE	"add_dma_entry"
void spare(const char *fn);
/* dma-debug checks: 1 on, 0 off (it turned itself off), -1 not built. */
int dma_debug_on(void);

extern const struct op ops[];
extern const int nr_ops;
/* Everything the step made, given back: 0, or how many refused. */
int world_free(struct world *w);
/* An error as text: its name (ENOMEM), or what the ERR_* says. */
const char *err_name(int err);

/* fault_walk_report.c: the model's opcodes, the results and the table. */
struct opcode {
	uint16_t op;
	const char *name;
};

extern const struct opcode opcodes[];
#define NR_OPCODES	43

enum kind { ALLOC, CMD };

struct fault {
	enum kind kind;
	unsigned int n;		/* ALLOC: the Nth allocation */
	unsigned int opcode;	/* CMD: index in opcodes[] */
	unsigned int skip;	/* CMD: that many of them first */
};

/* What one operation's walk of one kind found. */
struct tally {
	long census;		/* allocations or commands of a run */
	int points;		/* failure points walked (the fault fired) */
	int errors;		/* ... the operation returned an error */
	int unclean, leaks, reports, kept;
	int protocol;		/* the model's protocol errors */
	unsigned int dense, stride;	/* every point to dense, then stride */
	unsigned int sent[NR_OPCODES];	/* CMD: commands of a run, by opcode */
	int by_opcode[NR_OPCODES];	/* CMD: failed, by opcode */
	char errs[128];		/* the errors it returned */
	double seconds;		/* the walk */
	double step_s;		/* a failure point, on average */
};

/* Every line after PREFIX: stdout's writes through fopencookie(). */
extern const char *prefix;
ssize_t prefixed_write(void *cookie, const char *buf, size_t len);
/* Results that failed so far. */
extern int failures;
double now(void);
/*
 * The stride past the first DENSE points of each of the N COUNTS that
 * keeps them, at PER seconds a point, within BUDGET seconds (1: all fit);
 * next_point(): the point after I of COUNT with them, the last included.
 */
unsigned int stride_for(const unsigned int *counts, int n,
			unsigned int dense, double per, double budget);
unsigned int next_point(unsigned int i, unsigned int count,
			unsigned int dense, unsigned int stride);
/* NAME is one of ONLY's, a list with commas (all if ONLY is NULL). */
int chosen(const char *only, const char *name);
void result(int ok, const char *fmt, const char *name, const char *text);
void report(const struct op *op, struct tally *t, enum kind kind);
void table(struct tally tallies[][2], const char *only, double seconds);

#endif
