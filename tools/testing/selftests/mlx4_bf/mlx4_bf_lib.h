/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers of the mlx4_bf selftests: the ioctl calls, a libmlx4-style WQE
 * builder written independently of the driver's Rust one, and what the
 * adapter must see of a post. The oracle, the device model's analyzer, is
 * in mlx4_bf_model.h.
 */
#ifndef MLX4_BF_LIB_H
#define MLX4_BF_LIB_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/capability.h>

#include <mlx4_bf.h>

#define DRIVER_DIR	"/sys/bus/pci/drivers/mlx4_bf"
#define DEV_PATH	"/dev/mlx4_bf0"

#define OP_RDMA_WRITE	0x08
#define OP_RDMA_WRITE_IMM	0x09
#define OP_SEND		0x0a
#define OP_SEND_IMM	0x0b
#define OP_RDMA_READ	0x10
#define INLINE_SEG	0x80000000u
#define MAX_WQE		1008

struct call {
	struct mlx4_bf_ioctl_hdr hdr;
	struct mlx4_bf_attr attrs[MLX4_BF_MAX_ATTRS];
};

static inline void call_init(struct call *c, __u16 object, __u16 method)
{
	memset(c, 0, sizeof(*c));
	c->hdr.object_id = object;
	c->hdr.method_id = method;
	c->hdr.length = sizeof(c->hdr);
}

static inline struct mlx4_bf_attr *call_attr(struct call *c, __u16 id, __u16 len, __u64 data)
{
	struct mlx4_bf_attr *a = &c->attrs[c->hdr.num_attrs++];

	a->attr_id = id;
	a->len = len;
	a->data = data;
	c->hdr.length += sizeof(*a);
	return a;
}

static inline void call_inline_u32(struct call *c, __u16 id, __u32 v)
{
	struct mlx4_bf_attr *a = call_attr(c, id, 4, 0);

	memcpy(&a->data, &v, 4);
}

static inline void call_inline_u64(struct call *c, __u16 id, __u64 v)
{
	call_attr(c, id, 8, v);
}

/* Returns 0 or -errno. */
static inline int call_do(int fd, struct call *c)
{
	return ioctl(fd, MLX4_BF_IOCTL, c) ? -errno : 0;
}

static inline int query_device(int fd, struct mlx4_bf_device_info *info)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_DEVICE, MLX4_BF_METHOD_QUERY_DEVICE);
	call_attr(&c, MLX4_BF_ATTR_DEVICE_INFO, sizeof(*info), (uintptr_t)info);
	return call_do(fd, &c);
}

static inline int query_context(int fd, struct mlx4_bf_context_info *info)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_CONTEXT, MLX4_BF_METHOD_QUERY_CONTEXT);
	call_attr(&c, MLX4_BF_ATTR_CONTEXT_INFO, sizeof(*info), (uintptr_t)info);
	return call_do(fd, &c);
}

static inline int query_stats(int fd, struct mlx4_bf_stats *dev, struct mlx4_bf_stats *ctx)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_DEVICE, MLX4_BF_METHOD_QUERY_STATS);
	if (dev)
		call_attr(&c, MLX4_BF_ATTR_DEVICE_STATS, sizeof(*dev), (uintptr_t)dev);
	if (ctx)
		call_attr(&c, MLX4_BF_ATTR_CONTEXT_STATS, sizeof(*ctx), (uintptr_t)ctx);
	return call_do(fd, &c);
}

static inline int create_qp(int fd, struct mlx4_bf_qp_info *qp)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_QP, MLX4_BF_METHOD_CREATE_QP);
	call_attr(&c, MLX4_BF_ATTR_QP_INFO, sizeof(*qp), (uintptr_t)qp);
	return call_do(fd, &c);
}

static inline int destroy_qp(int fd, __u32 handle)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_QP, MLX4_BF_METHOD_DESTROY_QP);
	call_inline_u32(&c, MLX4_BF_ATTR_QP_HANDLE, handle);
	return call_do(fd, &c);
}

static inline void post_call(struct call *c, __u32 handle, const void *wqe, __u16 len,
			     __u32 flags, struct mlx4_bf_post_result *res)
{
	call_init(c, MLX4_BF_OBJECT_QP, MLX4_BF_METHOD_POST_SEND);
	call_inline_u32(c, MLX4_BF_ATTR_QP_HANDLE, handle);
	call_attr(c, MLX4_BF_ATTR_WQE, len, (uintptr_t)wqe);
	if (flags)
		call_inline_u32(c, MLX4_BF_ATTR_POST_FLAGS, flags);
	if (res)
		call_attr(c, MLX4_BF_ATTR_POST_RESULT, sizeof(*res), (uintptr_t)res);
}

/*
 * POST_SEND. -EAGAIN is back pressure, as ibv_post_send()'s ENOMEM: the send
 * queue was still full when the kernel stopped waiting for completions (the
 * device model, behind QEMU's posted writes on a loaded host, can lag that
 * far). Like any verbs user, retry: for up to a second.
 */
/* call_do(), retrying -EAGAIN (back pressure) for up to a second. */
static inline int call_retry(int fd, struct call *c)
{
	int ret, tries = 0;

	while ((ret = call_do(fd, c)) == -EAGAIN && tries++ < 1000)
		usleep(1000);
	return ret;
}

static inline int post_send(int fd, __u32 handle, const void *wqe, __u16 len, __u32 flags,
			    struct mlx4_bf_post_result *res)
{
	struct call c;

	post_call(&c, handle, wqe, len, flags, res);
	return call_retry(fd, &c);
}

/*
 * REG_MR of the user virtual range [@addr, @addr + @len) with @access (enum
 * mlx4_bf_access_flags; 0 leaves the attribute out); 0 or -errno.
 */
static inline int reg_mr(int fd, __u64 addr, __u64 len, __u32 access,
			 struct mlx4_bf_mr_info *mr)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_MR, MLX4_BF_METHOD_REG_MR);
	call_inline_u64(&c, MLX4_BF_ATTR_MR_ADDR, addr);
	call_inline_u64(&c, MLX4_BF_ATTR_MR_LENGTH, len);
	if (access)
		call_inline_u32(&c, MLX4_BF_ATTR_MR_ACCESS, access);
	call_attr(&c, MLX4_BF_ATTR_MR_INFO, sizeof(*mr), (uintptr_t)mr);
	return call_do(fd, &c);
}

static inline int dereg_mr(int fd, __u32 handle)
{
	struct call c;

	call_init(&c, MLX4_BF_OBJECT_MR, MLX4_BF_METHOD_DEREG_MR);
	call_inline_u32(&c, MLX4_BF_ATTR_MR_HANDLE, handle);
	return call_do(fd, &c);
}

/* Read and write access for the adapter, and for the connected peer. */
#define ACCESS_RDMA	(MLX4_BF_ACCESS_LOCAL_WRITE | MLX4_BF_ACCESS_REMOTE_WRITE)
#define SINK_BYTES	4096
#define PAGE		4096
/* The adapter's reserved lkey (the model's QUERY_DEV_CAP 0x98). */
#define RESERVED_LKEY	0x00000008

/* The memory-region tests' buffers: BUF_PAGES pages of map_pages(). */
#define BUF_PAGES	16
#define BUF_BYTES	(BUF_PAGES * PAGE)

/* @pages fresh anonymous pages of this process with @prot, or NULL. */
static inline uint8_t *map_pages(int pages, int prot)
{
	uint8_t *p = mmap(NULL, (size_t)pages * PAGE, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * Where a QP's RDMA writes land: a page of this process registered
 * remote-writable in the context @fd. A new QP is connected to itself, so its
 * RDMA writes must name an MR of its own context that way: anything else is
 * refused with -EACCES. The page is mapped on first use and kept, so one
 * sink serves one context after another. 0 or -errno.
 */
struct sink {
	uint8_t *buf;
	struct mlx4_bf_mr_info mr;
};

static inline int sink_open(int fd, struct sink *s)
{
	if (!s->buf) {
		void *p = mmap(NULL, SINK_BYTES, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return -errno;
		s->buf = p;
	}
	return reg_mr(fd, (uintptr_t)s->buf, SINK_BYTES, ACCESS_RDMA, &s->mr);
}

static inline __u64 sink_addr(const struct sink *s)
{
	return (uintptr_t)s->buf;
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

static inline void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, v >> 32);
	put_be32(p + 4, (uint32_t)v);
}

static inline uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

/*
 * An RDMA-write WQE with @payload inline bytes (pattern @seed + i), split at
 * 64-byte boundaries as libmlx4's set_data_inl() does, to @raddr of the MR
 * @rkey of the peer (for a QP connected to itself: a sink of its own
 * context). Returns its length.
 */
static inline int build_rdma_write(uint8_t *wqe, int payload, uint8_t seed, __u64 raddr,
				   __u32 rkey)
{
	int pos = 32, left = payload, len, k = 0;

	memset(wqe, 0, MAX_WQE + 64);
	put_be32(wqe, OP_RDMA_WRITE);
	put_be64(wqe + 16, raddr);
	put_be32(wqe + 24, rkey);
	while (left > 0) {
		int room = 64 - pos % 64 - 4;
		int chunk = left < room ? left : room;

		put_be32(wqe + pos, INLINE_SEG | chunk);
		for (int i = 0; i < chunk; i++)
			wqe[pos + 4 + i] = (uint8_t)(seed + k++);
		pos += 4 + chunk;
		left -= chunk;
	}
	len = (pos + 15) / 16 * 16;
	put_be32(wqe + 4, len / 16);
	return len;
}

/* The inline bytes build_rdma_write() put into its WQE. */
static inline void rdma_write_pattern(uint8_t *out, int payload, uint8_t seed)
{
	for (int k = 0; k < payload; k++)
		out[k] = (uint8_t)(seed + k);
}

/* The largest inline SEND payload: 1008-byte WQE, a header per 64 bytes. */
#define MAX_INLINE_SEND	928

/*
 * An inline SEND (or SEND_IMM with @imm) of @payload bytes (pattern
 * @seed + 7 * i): ctrl, then the data split at 64-byte boundaries as
 * libmlx4's set_data_inl() does; no remote address segment. Returns its
 * length.
 */
static inline int build_send(uint8_t *wqe, int payload, uint8_t seed, int with_imm, uint32_t imm)
{
	int pos = 16, left = payload, len, k = 0;

	memset(wqe, 0, MAX_WQE + 64);
	put_be32(wqe, with_imm ? OP_SEND_IMM : OP_SEND);
	if (with_imm)
		put_be32(wqe + 12, imm);
	while (left > 0) {
		int room = 64 - pos % 64 - 4;
		int chunk = left < room ? left : room;

		put_be32(wqe + pos, INLINE_SEG | chunk);
		for (int i = 0; i < chunk; i++)
			wqe[pos + 4 + i] = (uint8_t)(seed + 7 * k++);
		pos += 4 + chunk;
		left -= chunk;
	}
	len = (pos + 15) / 16 * 16;
	put_be32(wqe + 4, len / 16);
	return len;
}

/* The payload build_send() put into its WQE. */
static inline void expected_payload(uint8_t *out, int payload, uint8_t seed)
{
	for (int k = 0; k < payload; k++)
		out[k] = (uint8_t)(seed + 7 * k);
}

/* One gather (data) segment: @length bytes at user address @addr of MR @lkey. */
struct sge {
	__u64 addr;
	__u32 length;
	__u32 lkey;
};

/*
 * A WQE whose message is gathered from @n data segments (doorbell path
 * only): ctrl with @opcode, for an RDMA write (or RDMA_WRITE_IMM) or read the
 * remote address segment (@raddr, @rkey), then the segments as libmlx4's
 * set_data_seg() lays them out (for a read: where its data lands). Returns
 * its length.
 */
static inline int build_gather(uint8_t *wqe, __u32 opcode, __u64 raddr, __u32 rkey,
			       const struct sge *sg, int n)
{
	int pos = 16;

	memset(wqe, 0, MAX_WQE + 64);
	put_be32(wqe, opcode);
	if (opcode == OP_RDMA_WRITE || opcode == OP_RDMA_WRITE_IMM || opcode == OP_RDMA_READ) {
		put_be64(wqe + 16, raddr);
		put_be32(wqe + 24, rkey);
		pos += 16;
	}
	for (int i = 0; i < n; i++, pos += 16) {
		put_be32(wqe + pos, sg[i].length);
		put_be32(wqe + pos + 4, sg[i].lkey);
		put_be64(wqe + pos + 8, sg[i].addr);
	}
	put_be32(wqe + 4, pos / 16);
	return pos;
}

/* What the adapter must see for a BlueFlame post: the kernel's stamps. */
static inline int expected_bf(uint8_t *out, const uint8_t *wqe, int len, uint32_t qpn,
			      uint32_t head, uint32_t entries)
{
	int burst = (len + 63) / 64 * 64;

	memset(out, 0, burst);
	memcpy(out, wqe, len);
	put_be32(out, get_be32(out) | ((head & entries) ? 1u << 31 : 0) | (head & 0xffff) << 8);
	put_be32(out + 4, get_be32(out + 4) | qpn << 8);
	return burst;
}

/*
 * CQ_UPDATE in srcrb_flags (bytes 8..11). The driver creates its QPs in the
 * device and reuses a send-queue slot only after the slot's CQE came back,
 * so it asks for a CQE on every WQE: post_send() in
 * drivers/mlx4_bf/context.rs ORs CQ_UPDATE in on both paths before the other
 * stamps.
 */
#define CQ_UPDATE	(3u << 2)

static inline void stamp_cq_update(uint8_t *wqe)
{
	put_be32(wqe + 8, get_be32(wqe + 8) | CQ_UPDATE);
}

/*
 * What the send queue holds after a doorbell post: the kernel stamps only
 * the owner bit (no WQE counter, no QPN: the doorbell names the QP).
 */
static inline void expected_doorbell_wqe(uint8_t *out, const uint8_t *wqe, int len,
					 uint32_t head, uint32_t entries)
{
	memcpy(out, wqe, len);
	put_be32(out, get_be32(out) | ((head & entries) ? 1u << 31 : 0));
}

/* Offset in BAR2 of the BlueFlame page of UAR @uar: after num_uars UAR pages. */
static inline size_t bf_page(const struct mlx4_bf_device_info *dev, __u32 uar)
{
	return ((size_t)dev->num_uars + uar) * 4096;
}

/* The PCI address of the first function bound to mlx4_bf; 0 on success. */
static inline int bound_device(char *bdf, size_t len)
{
	struct dirent *de;
	DIR *dir = opendir(DRIVER_DIR);
	int ret = -1;

	if (!dir)
		return -1;
	while ((de = readdir(dir)))
		if (strchr(de->d_name, ':') && strlen(de->d_name) < len) {
			snprintf(bdf, len, "%s", de->d_name);
			ret = 0;
			break;
		}
	closedir(dir);
	return ret;
}

/* The size of BAR2 as sysfs reports it (resource2), or 0. */
static inline size_t bar2_resource_len(void)
{
	char bdf[64], path[128];
	struct stat st;

	if (bound_device(bdf, sizeof(bdf)))
		return 0;
	snprintf(path, sizeof(path), DRIVER_DIR "/%s/resource2", bdf);
	return stat(path, &st) ? 0 : st.st_size;
}

/*
 * Whether the module writes BlueFlame bursts in store blocks (writer=1, its
 * default) rather than write-combining (writer=2), as the suite loaded it
 * (run_guest.sh's MLX4_BF_PARAMS).
 */
static inline int store_block_writer(void)
{
	const char *params = getenv("MLX4_BF_PARAMS");

	return !(params && strstr(params, "writer=2"));
}

#define DEBUGFS_DIR "/sys/kernel/debug/mlx4_bf0"

/*
 * A counter from a debugfs stats file of mlx4_bf0 (@dir: "device", "ctx-N"),
 * or -1 if there is no such file (debugfs not mounted) or line.
 */
static inline long debugfs_counter(const char *dir, const char *name)
{
	char path[128], key[64];
	long value, found = -1;
	FILE *f;

	snprintf(path, sizeof(path), DEBUGFS_DIR "/%s/stats", dir);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %ld", key, &value) == 2)
		if (!strcmp(key, name))
			found = value;
	fclose(f);
	return found;
}

/* The line @key ("VmLck", "VmPin") of /proc/self/status in KiB, or -1. */
static inline long proc_status_kb(const char *key)
{
	size_t n = strlen(key);
	char line[128];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (kb < 0 && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':')
			sscanf(line + n + 1, "%ld", &kb);
	fclose(f);
	return kb;
}

/*
 * This process's locked memory in KiB (VmLck in /proc/self/status: REG_MR
 * accounts its pages there, as VFIO does), or -1.
 */
static inline long vm_locked_kb(void)
{
	return proc_status_kb("VmLck");
}

/*
 * This process's pinned memory in KiB (VmPin: mm->pinned_vm, which the
 * RDMA core's ib_umem_get() charges for a region's pages), or -1.
 */
static inline long vm_pinned_kb(void)
{
	return proc_status_kb("VmPin");
}

static inline int capabilities(struct __user_cap_data_struct *d)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };

	return syscall(SYS_capget, &h, d) ? -errno : 0;
}

static inline int has_cap_ipc_lock(void)
{
	struct __user_cap_data_struct d[2];

	return !capabilities(d) &&
	       (d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK));
}

/* Clears CAP_IPC_LOCK from this process's effective set; 0 or -errno. */
static inline int drop_cap_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (capabilities(d))
		return -errno;
	d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

/* This process's page tables, its user half included (x86 ptdump). */
#define PAGE_TABLES	"/sys/kernel/debug/page_tables/current_kernel"
#define PAT_LIST	"/sys/kernel/debug/x86/pat_memtype_list"

/*
 * The line of the kernel's page-table dump whose range holds @addr, into
 * @line: 1, 0 if there is none, -1 without the dump. x86 prints
 * "0x00007f...000-0x00007f...000           4K USR RW         PCD  ...  NX pte",
 * a range that is not present without flags.
 */
static inline int page_table_line(const void *addr, char *line, int len)
{
	unsigned long a = (unsigned long)addr, s, e;
	FILE *f = fopen(PAGE_TABLES, "r");
	int found = 0;

	if (!f)
		return -1;
	while (!found && fgets(line, len, f))
		found = sscanf(line, "0x%lx-0x%lx", &s, &e) == 2 && a >= s && a < e;
	fclose(f);
	return found;
}

/*
 * The cache bits of the present user PTE that maps @addr in this process, as
 * the kernel's page-table dump prints them ("PWT", "PCD", "PAT", in that
 * order, space-separated; "" for none). -1 if no such entry.
 */
static inline int pte_cache_bits(const void *addr, char *bits, size_t len)
{
	static const char * const names[] = { "PWT", "PCD", "PAT" };
	char line[256], tok[8];

	if (page_table_line(addr, line, sizeof(line)) != 1 || !strstr(line, " USR ") ||
	    !strstr(line, " pte"))
		return -1;
	bits[0] = '\0';
	for (int i = 0; i < 3; i++) {
		snprintf(tok, sizeof(tok), " %s ", names[i]);
		if (strstr(line, tok))
			snprintf(bits + strlen(bits), len - strlen(bits), "%s%s",
				 bits[0] ? " " : "", names[i]);
	}
	return 0;
}

/* Runs @fn in a child process: its exit status, or -1. */
static inline int in_child(int (*fn)(uint8_t *), uint8_t *buf)
{
	int status;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		int ret = fn(buf);

		fflush(stdout);
		_exit(ret);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

#endif /* MLX4_BF_LIB_H */
