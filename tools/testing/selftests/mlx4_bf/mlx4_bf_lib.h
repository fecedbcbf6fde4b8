/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers of the mlx4_bf selftests: a libmlx4-style WQE builder written
 * independently of the driver's Rust one, the bound adapter and its sysfs
 * and debugfs files, what a process holds (pinned pages, capabilities) and
 * its page tables. The RDMA device's side (verbs, QP_POST) is
 * mlx4_bf_verbs.h; the oracle, the device model's analyzer, is
 * mlx4_bf_model.h.
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/capability.h>
#include <linux/types.h>

#define DRIVER_DIR	"/sys/bus/pci/drivers/mlx4_bf"

#define OP_RDMA_WRITE	0x08
#define OP_RDMA_WRITE_IMM	0x09
#define OP_SEND		0x0a
#define OP_SEND_IMM	0x0b
#define OP_RDMA_READ	0x10
#define OP_ATOMIC_CS	0x11
#define OP_ATOMIC_FA	0x12
#define INLINE_SEG	0x80000000u
#define MAX_WQE		1008

#define PAGE		4096
/* The region a context's RDMA writes land in (mlx4_bf_verbs.h's sink). */
#define SINK_BYTES	4096
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
 * @payload inline bytes from byte @pos of @wqe, byte k being @seed + @step
 * * k, split at 64-byte boundaries as libmlx4's set_data_inl() does; sets
 * the control segment's size. Returns the WQE's length.
 */
static inline int put_inline(uint8_t *wqe, int pos, int payload, uint8_t seed, int step)
{
	int left = payload, len, k = 0;

	while (left > 0) {
		int room = 64 - pos % 64 - 4;
		int chunk = left < room ? left : room;

		put_be32(wqe + pos, INLINE_SEG | chunk);
		for (int i = 0; i < chunk; i++)
			wqe[pos + 4 + i] = (uint8_t)(seed + step * k++);
		pos += 4 + chunk;
		left -= chunk;
	}
	len = (pos + 15) / 16 * 16;
	put_be32(wqe + 4, len / 16);
	return len;
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
	memset(wqe, 0, MAX_WQE + 64);
	put_be32(wqe, OP_RDMA_WRITE);
	put_be64(wqe + 16, raddr);
	put_be32(wqe + 24, rkey);
	return put_inline(wqe, 32, payload, seed, 1);
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
	memset(wqe, 0, MAX_WQE + 64);
	put_be32(wqe, with_imm ? OP_SEND_IMM : OP_SEND);
	if (with_imm)
		put_be32(wqe + 12, imm);
	return put_inline(wqe, 16, payload, seed, 7);
}

/* Where a UD SEND goes: libmlx4's address vector and the work request's. */
struct ud_dest {
	/* the AV's first dword: port << 24 | PD number */
	__u32 port_pd;
	__u16 dlid;
	__u32 dqpn;
	__u32 qkey;
};

/*
 * A UD SEND as libmlx4 builds it: ctrl, the datagram segment (address
 * vector with @to's port, PD and LID; destination QPN and Q_Key), then
 * @payload bytes inline (build_send()'s pattern) from byte 64. Returns its
 * length.
 */
static inline int build_ud_send(uint8_t *wqe, const struct ud_dest *to, int payload, uint8_t seed)
{
	memset(wqe, 0, MAX_WQE + 64);
	put_be32(wqe, OP_SEND);
	put_be32(wqe + 16, to->port_pd);
	put_be32(wqe + 20, to->dlid);
	put_be32(wqe + 48, to->dqpn);
	put_be32(wqe + 52, to->qkey);
	return put_inline(wqe, 64, payload, seed, 7);
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

/*
 * An atomic as libmlx4 builds it (doorbell path: it gathers): ctrl with
 * @opcode (OP_ATOMIC_CS, OP_ATOMIC_FA), the remote address segment (@raddr,
 * @rkey), the atomic segment (@swap_add: the swap or the addend;
 * @compare), then the one data segment @result, where the remote's old
 * value lands (8 bytes). Returns its length, 64.
 */
static inline int build_atomic(uint8_t *wqe, __u32 opcode, __u64 raddr, __u32 rkey,
			       __u64 swap_add, __u64 compare, const struct sge *result)
{
	memset(wqe, 0, MAX_WQE + 64);
	put_be32(wqe, opcode);
	put_be32(wqe + 4, 4);
	put_be64(wqe + 16, raddr);
	put_be32(wqe + 24, rkey);
	put_be64(wqe + 32, swap_add);
	put_be64(wqe + 40, compare);
	put_be32(wqe + 48, result->length);
	put_be32(wqe + 52, result->lkey);
	put_be64(wqe + 56, result->addr);
	return 64;
}

/*
 * CQ_UPDATE in srcrb_flags (bytes 8..11): a CQE for the WQE, which libmlx4
 * asks for on a signaled send (IBV_SEND_SIGNALED) and the tests on every
 * WQE they post.
 */
#define CQ_UPDATE	(3u << 2)

static inline void stamp_cq_update(uint8_t *wqe)
{
	put_be32(wqe + 8, get_be32(wqe + 8) | CQ_UPDATE);
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
 * The value of line @name in @path, a file of "name value" lines
 * (/proc/vmstat, a debugfs stats file), or -1 if there is no such file or
 * line.
 */
static inline long file_key_value(const char *path, const char *name)
{
	char key[64];
	long value, found = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (fscanf(f, "%63s %ld", key, &value) == 2)
		if (!strcmp(key, name))
			found = value;
	fclose(f);
	return found;
}

/*
 * A counter from a debugfs stats file of mlx4_bf0 (@dir: "device",
 * "kernel-uarN"), or -1 if there is no such file (debugfs not mounted) or
 * line.
 */
static inline long debugfs_counter(const char *dir, const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), DEBUGFS_DIR "/%s/stats", dir);
	return file_key_value(path, name);
}

/* The line @key ("VmPin") of /proc/self/status in KiB, or -1. */
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
