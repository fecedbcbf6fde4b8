/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * mlx4_bf: BlueFlame send path for mlx4 (ConnectX) adapters.
 *
 * One ioctl, modelled on the uverbs ioctl wire format
 * (include/uapi/rdma/rdma_user_ioctl_cmds.h): a header naming an object and a
 * method, followed by an array of attributes. Attributes of up to 8 bytes are
 * passed inline in @data; larger ones, and every output, through a user
 * pointer in @data with the buffer size in @len.
 *
 * This header is the single source of truth for the ABI; the Rust mirror
 * (rust/mlx4_bf_core/src/abi.rs) is checked against it with bindgen.
 */
#ifndef _UAPI_MLX4_BF_H
#define _UAPI_MLX4_BF_H

#include <linux/types.h>
#include <linux/ioctl.h>
#include <rdma/ib_user_ioctl_cmds.h>

#define MLX4_BF_ABI_VERSION	4

#define MLX4_BF_IOCTL_MAGIC	0xBF
#define MLX4_BF_IOCTL		_IOWR(MLX4_BF_IOCTL_MAGIC, 1, struct mlx4_bf_ioctl_hdr)

/* At most this many attributes in one call. */
#define MLX4_BF_MAX_ATTRS	8

enum mlx4_bf_attr_flags {
	/* The kernel must understand this attribute or fail with -EOPNOTSUPP. */
	MLX4_BF_ATTR_F_MANDATORY	= 1 << 0,
	/* Set by the kernel on an output attribute it wrote. */
	MLX4_BF_ATTR_F_VALID_OUTPUT	= 1 << 1,
};

/**
 * struct mlx4_bf_attr - one attribute of a method call
 * @attr_id: method-specific attribute id (enum mlx4_bf_attr_id)
 * @len: length of the value in bytes
 * @flags: enum mlx4_bf_attr_flags
 * @reserved: must be zero
 * @data: the value itself when @len <= 8 and the attribute is an input,
 *        otherwise a user pointer to @len bytes
 */
struct mlx4_bf_attr {
	__u16 attr_id;
	__u16 len;
	__u16 flags;
	__u16 reserved;
	__aligned_u64 data;
};

/**
 * struct mlx4_bf_ioctl_hdr - the argument of %MLX4_BF_IOCTL
 * @length: size of the header plus all attributes, in bytes
 * @object_id: enum mlx4_bf_object
 * @method_id: method of that object (enum mlx4_bf_*_method)
 * @num_attrs: number of entries in @attrs, at most %MLX4_BF_MAX_ATTRS
 * @reserved1: must be zero
 * @driver_id: must be zero
 * @reserved2: must be zero
 * @attrs: the attributes
 */
struct mlx4_bf_ioctl_hdr {
	__u16 length;
	__u16 object_id;
	__u16 method_id;
	__u16 num_attrs;
	__aligned_u64 reserved1;
	__u32 driver_id;
	__u32 reserved2;
	struct mlx4_bf_attr attrs[];
};

enum mlx4_bf_object {
	MLX4_BF_OBJECT_DEVICE = 1,
	MLX4_BF_OBJECT_CONTEXT,
	MLX4_BF_OBJECT_QP,
	MLX4_BF_OBJECT_MR,
};

enum mlx4_bf_device_method {
	/* out MLX4_BF_ATTR_DEVICE_INFO */
	MLX4_BF_METHOD_QUERY_DEVICE = 1,
	/* out MLX4_BF_ATTR_DEVICE_STATS and/or MLX4_BF_ATTR_CONTEXT_STATS */
	MLX4_BF_METHOD_QUERY_STATS,
};

enum mlx4_bf_context_method {
	/* out MLX4_BF_ATTR_CONTEXT_INFO; also the no-op round trip of benchmarks */
	MLX4_BF_METHOD_QUERY_CONTEXT = 1,
};

enum mlx4_bf_qp_method {
	/*
	 * in MLX4_BF_ATTR_QP_FLAGS (optional); out MLX4_BF_ATTR_QP_INFO,
	 * MLX4_BF_ATTR_QP_SEND_INFO (with MLX4_BF_QP_F_USER_SEND, and only then)
	 */
	MLX4_BF_METHOD_CREATE_QP = 1,
	/* in MLX4_BF_ATTR_QP_HANDLE */
	MLX4_BF_METHOD_DESTROY_QP,
	/*
	 * in MLX4_BF_ATTR_QP_HANDLE, MLX4_BF_ATTR_WQE or MLX4_BF_ATTR_WQE_LEN,
	 * MLX4_BF_ATTR_POST_FLAGS (optional), MLX4_BF_ATTR_PAYLOAD (optional);
	 * out MLX4_BF_ATTR_POST_RESULT (optional). A gather segment names a
	 * memory region of this context by its lkey and a user virtual address
	 * range inside it; an RDMA write's remote address segment names one of
	 * the connected peer's context, registered with
	 * MLX4_BF_ACCESS_REMOTE_WRITE, by its rkey, and the whole message must
	 * lie inside it. An RDMA read (opcode 0x10, no inline data, no
	 * MLX4_BF_ATTR_PAYLOAD) reads a region of the peer registered with
	 * MLX4_BF_ACCESS_REMOTE_READ into its data segments, whose regions must
	 * be this context's and registered with MLX4_BF_ACCESS_LOCAL_WRITE.
	 * Anything else fails with -EACCES.
	 */
	MLX4_BF_METHOD_POST_SEND,
	/*
	 * in MLX4_BF_ATTR_QP_HANDLE, MLX4_BF_ATTR_RECV_COUNT (optional, 1 if
	 * absent): hands the next receive buffers to the adapter
	 */
	MLX4_BF_METHOD_POST_RECV,
	/*
	 * in MLX4_BF_ATTR_QP_HANDLE, MLX4_BF_ATTR_REMOTE_QPN: connects the QP to
	 * another (RC: through RESET, INIT -> RTR with that remote QPN -> RTS)
	 */
	MLX4_BF_METHOD_CONNECT_QP,
	/*
	 * in MLX4_BF_ATTR_QP_HANDLE, MLX4_BF_ATTR_ARM_FLAGS (optional): asks
	 * for one completion event of the QP's receive CQ
	 */
	MLX4_BF_METHOD_ARM_CQ,
};

/*
 * What MLX4_BF_METHOD_POST_SEND returns. 0: the WQE is in the send queue and
 * the adapter was told (BlueFlame or doorbell); it completes later, and an
 * error it meets then is reported by a later call (-EIO below). Otherwise
 * nothing was posted:
 *   -EINVAL   a malformed call (an attribute missing, repeated or of the
 *             wrong size, unknown POST_FLAGS), a WQE length of 0, above the
 *             limit or (from the WQE page) not a multiple of 16, a WQE that
 *             fails validation (opcode, segment sizes and order, inline
 *             padding, a payload with a WQE that carries one), FORCE_BF for
 *             a WQE that does not fit the BlueFlame buffer, or a QP whose
 *             send queue user space owns;
 *   -ENOENT   no QP of this context has that handle;
 *   -EACCES   a gather segment or remote address segment outside the
 *             memory regions it may name (above);
 *   -EFAULT   the WQE, the payload or the result could not be copied;
 *   -EAGAIN   the send queue is full: sq_entries (struct
 *             mlx4_bf_device_info) posted WQEs the adapter has not completed. The kernel then takes every send
 *             completion there is and waits up to 5 ms for one more before
 *             it gives up; call again (a peer that does not post receives,
 *             or a slow adapter, keeps the queue full);
 *   -EIO      the QP is in the error state: an earlier WQE of it completed
 *             with an error (a SEND that met no receive WQE at the peer, or
 *             a message larger than its receive buffer; an RDMA write whose
 *             rkey, range or access the peer's adapter refused; a peer QP
 *             destroyed or connected elsewhere), or its receive CQ holds an
 *             error CQE. The adapter flushes every WQE posted after the
 *             failing one without executing it. The kernel reads send
 *             completions only when the send queue is full (and at
 *             CONNECT_QP, DEREG_MR and DESTROY_QP), so -EIO comes at the
 *             latest one send queue after the post that failed; the calls in
 *             between returned 0 and were flushed. The QP stays in error:
 *             CONNECT_QP takes it through RESET again (once its receive
 *             queue is drained), or DESTROY_QP it;
 *   -ENODEV   the adapter was unbound: every method fails so; close the file;
 *   -EOPNOTSUPP, -EPROTONOSUPPORT  as for every method (the header above).
 *
 * What MLX4_BF_METHOD_POST_RECV returns: 0, the receive WQEs are the
 * adapter's; -EINVAL a count of 0 or above rq_entries; -ENOENT no such QP;
 * -EOPNOTSUPP a QP whose send queue user space owns (it has no receive
 * queue); -EIO the QP is in the error state (its receive CQ holds an error
 * CQE: as for POST_SEND); -ENOSPC the receive queue has no room for that
 * many: consume receive completions (and store set_ci) first, as for
 * ibv_post_recv()'s ENOMEM; -ENODEV the adapter was unbound.
 */

enum mlx4_bf_mr_method {
	/*
	 * in MLX4_BF_ATTR_MR_ADDR, MLX4_BF_ATTR_MR_LENGTH,
	 * MLX4_BF_ATTR_MR_ACCESS (optional, 0 if absent);
	 * out MLX4_BF_ATTR_MR_INFO: pins the range, maps it for the adapter's
	 * DMA and registers it as a memory region of this context
	 */
	MLX4_BF_METHOD_REG_MR = 1,
	/* in MLX4_BF_ATTR_MR_HANDLE: deregisters and unpins it */
	MLX4_BF_METHOD_DEREG_MR,
};

enum mlx4_bf_attr_id {
	MLX4_BF_ATTR_DEVICE_INFO = 1,	/* struct mlx4_bf_device_info */
	MLX4_BF_ATTR_DEVICE_STATS,	/* struct mlx4_bf_stats */
	MLX4_BF_ATTR_CONTEXT_STATS,	/* struct mlx4_bf_stats */
	MLX4_BF_ATTR_CONTEXT_INFO,	/* struct mlx4_bf_context_info */
	MLX4_BF_ATTR_QP_INFO,		/* struct mlx4_bf_qp_info */
	MLX4_BF_ATTR_QP_HANDLE,		/* __u32, inline */
	MLX4_BF_ATTR_WQE,		/* the WQE bytes, big-endian segments */
	MLX4_BF_ATTR_POST_FLAGS,	/* __u32 enum mlx4_bf_post_flags, inline */
	MLX4_BF_ATTR_POST_RESULT,	/* struct mlx4_bf_post_result */
	MLX4_BF_ATTR_RECV_COUNT,	/* __u32, inline */
	MLX4_BF_ATTR_REMOTE_QPN,	/* __u32, inline */
	MLX4_BF_ATTR_ARM_FLAGS,		/* __u32 enum mlx4_bf_arm_flags, inline */
	/*
	 * The message, 1..MLX4_BF_MAX_PAYLOAD bytes: the kernel copies it into
	 * a buffer of its own and appends a data segment naming it to the WQE,
	 * which must then carry no payload itself (doorbell path)
	 */
	MLX4_BF_ATTR_PAYLOAD,
	/*
	 * __u32, inline: the WQE is the first that many bytes of the QP's WQE
	 * page (struct mlx4_bf_qp_info wqe_offset), instead of MLX4_BF_ATTR_WQE
	 */
	MLX4_BF_ATTR_WQE_LEN,
	MLX4_BF_ATTR_MR_ADDR,		/* __u64, inline: user virtual address */
	MLX4_BF_ATTR_MR_LENGTH,		/* __u64, inline: bytes */
	MLX4_BF_ATTR_MR_ACCESS,		/* __u32 enum mlx4_bf_access_flags, inline */
	MLX4_BF_ATTR_MR_INFO,		/* struct mlx4_bf_mr_info */
	MLX4_BF_ATTR_MR_HANDLE,		/* __u32, inline */
	MLX4_BF_ATTR_QP_FLAGS,		/* __u32 enum mlx4_bf_qp_flags, inline */
	MLX4_BF_ATTR_QP_SEND_INFO,	/* struct mlx4_bf_qp_send_info */
};

/*
 * How a QP posts. All QPs of a context post the same way, fixed by its
 * first CREATE_QP: a QP of the other kind fails with -EINVAL.
 */
enum mlx4_bf_qp_flags {
	/*
	 * User space owns the send queue, as rdma-core does: it writes WQEs
	 * into the queue's mapping (struct mlx4_bf_qp_send_info) and to the
	 * context's BlueFlame page, or rings the doorbell in its UAR page
	 * (both mapped at MLX4_BF_MMAP_BF_PAGE, MLX4_BF_MMAP_UAR_PAGE; on s390
	 * written with the s390_pci_mmio_write system call). POST_SEND fails
	 * with -EINVAL on such a QP. Its send completions go to its own CQ
	 * (the receive CQ of struct mlx4_bf_qp_info, with MLX4_BF_CQE_IS_SEND
	 * set); it has no receive queue (POST_RECV: -EOPNOTSUPP). The adapter
	 * checks the WQEs: the QP names memory only through the context's
	 * memory regions (no reserved lkey), and only the context's own QPs
	 * can be rung through its pages.
	 */
	MLX4_BF_QP_F_USER_SEND	= 1 << 0,
};

/* mmap() offsets of the context's UAR page and BlueFlame page, one page each */
#define MLX4_BF_MMAP_UAR_PAGE	0x100000ULL
#define MLX4_BF_MMAP_BF_PAGE	0x101000ULL

/* The largest MLX4_BF_ATTR_PAYLOAD. */
#define MLX4_BF_MAX_PAYLOAD	1024

/*
 * What the adapter may do with a memory region besides reading it for a
 * local gather, as enum ib_access_flags. REMOTE_WRITE requires LOCAL_WRITE.
 */
enum mlx4_bf_access_flags {
	MLX4_BF_ACCESS_LOCAL_WRITE	= 1 << 0,
	/* The connected peer may RDMA-write into it with its rkey. */
	MLX4_BF_ACCESS_REMOTE_WRITE	= 1 << 1,
	/* The connected peer may RDMA-read it with its rkey. */
	MLX4_BF_ACCESS_REMOTE_READ	= 1 << 2,
};

/**
 * struct mlx4_bf_qp_send_info - the send queue of a MLX4_BF_QP_F_USER_SEND QP
 * @sq_offset: mmap() offset of the send queue, @sq_entries * @sq_stride
 *             bytes, read-write. Every WQE starts with its owner bit set
 *             (invalid in the first pass); WQE n goes into slot
 *             n % @sq_entries with owner bit !!(n & @sq_entries)
 * @sq_entries: slots of the send queue
 * @sq_stride: bytes per slot; a WQE may use all of them (doorbell path)
 * @bf_buf_size: bytes of one BlueFlame buffer; a WQE of at most that many
 *               bytes may go to the BlueFlame page, the first at offset
 *               @bf_reg_offset, then alternating with @bf_reg_offset +
 *               @bf_buf_size
 * @bf_reg_offset: offset of the context's BlueFlame register in its page
 */
struct mlx4_bf_qp_send_info {
	__aligned_u64 sq_offset;
	__u32 sq_entries;
	__u32 sq_stride;
	__u32 bf_buf_size;
	__u32 bf_reg_offset;
};

/**
 * struct mlx4_bf_mr_info - a registered memory region
 * @mr_handle: handle for MLX4_BF_METHOD_DEREG_MR
 * @lkey: the key a gather segment names it with (its address is the user
 *        virtual address, as in verbs)
 * @rkey: the key the connected peer's RDMA write names it with (mlx4: equal
 *        to @lkey)
 * @reserved: zero
 *
 * A key is the MPT index shifted left by 8 with an 8-bit tag that changes
 * every time the index is reused, so a key is stale after DEREG_MR.
 */
struct mlx4_bf_mr_info {
	__u32 mr_handle;
	__u32 lkey;
	__u32 rkey;
	__u32 reserved;
};

enum mlx4_bf_writer {
	/* zPCI store-block semantics: <= 128-byte blocks, no 4 KiB crossing */
	MLX4_BF_WRITER_STORE_BLOCK = 1,
	/* x86 write combining, 64-bit copies, flushed with a barrier */
	MLX4_BF_WRITER_WRITE_COMBINING,
};

/**
 * struct mlx4_bf_device_info - what QUERY_DEVICE reports
 * @abi_version: %MLX4_BF_ABI_VERSION
 * @num_uars: UAR pages in BAR2 (the BlueFlame pages follow them)
 * @bf_reg_size: size of one BlueFlame register (two buffers)
 * @bf_buf_size: size of one BlueFlame buffer, half of @bf_reg_size
 * @max_bf_wqe_size: largest WQE, in bytes, that may take the BlueFlame path
 * @max_db_wqe_size: largest WQE, in bytes, accepted at all (doorbell path)
 * @writer: enum mlx4_bf_writer in use on this device
 * @store_block_max: largest store block, in bytes (zPCI: 128)
 * @max_qps_per_context: QPs one open file may create
 * @sq_entries: send-queue slots of each QP
 * @bar2_len: length of BAR2 in bytes
 * @max_mrs_per_context: memory regions one open file may register
 * @max_mr_pages: pages (4 KiB) one open file may have registered in all
 * @max_mr_size: largest memory region, in bytes
 */
struct mlx4_bf_device_info {
	__u32 abi_version;
	__u32 num_uars;
	__u32 bf_reg_size;
	__u32 bf_buf_size;
	__u32 max_bf_wqe_size;
	__u32 max_db_wqe_size;
	__u32 writer;
	__u32 store_block_max;
	__u32 max_qps_per_context;
	__u32 sq_entries;
	__aligned_u64 bar2_len;
	__u32 max_mrs_per_context;
	__u32 max_mr_pages;
	__aligned_u64 max_mr_size;
};

/**
 * struct mlx4_bf_context_info - what QUERY_CONTEXT reports for this open file
 * @uar_index: the UAR this context owns (never 0: reserved for the kernel)
 * @reserved: zero
 * @uar_offset: offset in BAR2 of its UAR page (doorbell at +0x14)
 * @bf_offset: offset in BAR2 of its BlueFlame page
 */
struct mlx4_bf_context_info {
	__u32 uar_index;
	__u32 reserved;
	__aligned_u64 uar_offset;
	__aligned_u64 bf_offset;
};

/**
 * struct mlx4_bf_qp_info - a new QP
 * @qp_handle: handle for the QP methods (the QPN)
 * @qpn: QP number stamped into each WQE; bits 6 and 7 are always clear
 * @rq_entries: receive WQEs, and receive buffers, of its receive queue
 * @recv_buf_size: bytes of one receive buffer: the largest message it takes
 * @cq_entries: CQEs in the ring of its receive CQ
 * @cqe_size: bytes of one CQE, whose last 32 bytes are a struct mlx4_bf_cqe
 *            (all of it when @cqe_size is 32)
 * @cq_offset: mmap() offset of the receive CQ ring, @cq_entries * @cqe_size
 *             bytes, read-only
 * @cq_db_offset: mmap() offset of one page whose first 4 bytes are the CQ's
 *                consumer index as the adapter reads it (set_ci: big-endian,
 *                24 bits), read-write
 * @recv_offset: mmap() offset of the receive buffers, @rq_entries *
 *               @recv_buf_size bytes, read-only; receive WQE i names buffer
 *               i % @rq_entries
 * @wqe_offset: mmap() offset of the QP's WQE page, one page, read-write: a
 *              POST_SEND with MLX4_BF_ATTR_WQE_LEN takes its WQE from there
 *              (the kernel copies it before it checks it, as from a pointer)
 *
 * A new QP is in RTS, connected to itself; MLX4_BF_METHOD_CONNECT_QP connects
 * it to another. Receive completions go to the QP's own CQ, which user space
 * polls in the mapping: CQE n is valid when its owner bit
 * (%MLX4_BF_CQE_OWNER) equals !!(n & @cq_entries); after reading it, user
 * space stores n + 1 into set_ci. poll() on the device file reports POLLIN
 * while a receive CQ has a CQE at its set_ci; an armed CQ
 * (MLX4_BF_METHOD_ARM_CQ) wakes it with the next completion. Send
 * completions are the kernel's.
 *
 * mmap() maps only the regions of a QP the context has now: an offset of a
 * QP it never created, or destroyed, fails with -EINVAL. A mapping made
 * before MLX4_BF_METHOD_DESTROY_QP stays valid and keeps showing the
 * context's own memory, which the next QP created at the same offsets
 * finds cleared; the memory never goes to another context before this one
 * is closed (every mapping holds the file open), and a context never sees
 * a byte another context left there. When the adapter is unbound, every
 * mapping of the device file (these regions and the UAR and BlueFlame
 * pages) is taken away: a later access raises SIGBUS (on s390 the
 * s390_pci_mmio_* system calls fail), and mmap() fails with -ENODEV.
 */
struct mlx4_bf_qp_info {
	__u32 qp_handle;
	__u32 qpn;
	__u32 rq_entries;
	__u32 recv_buf_size;
	__u32 cq_entries;
	__u32 cqe_size;
	__aligned_u64 cq_offset;
	__aligned_u64 cq_db_offset;
	__aligned_u64 recv_offset;
	__aligned_u64 wqe_offset;
};

/**
 * struct mlx4_bf_cqe - a completion in a QP's CQ, as the adapter writes it
 * @my_qpn: bits 23..0: the QP it completes a WQE of
 * @immed: the immediate data of a received SEND_IMM or RDMA_WRITE_IMM
 * @src_qpn: bits 23..0: the QP that sent the message (may be 0 for an
 *           RDMA_WRITE_IMM)
 * @reserved1: not part of the ABI
 * @byte_cnt: bytes received
 * @wqe_index: the WQE it completes: its receive queue index (mod 2^16) for
 *             a receive, its send queue index for a send
 * @vendor_err_syndrome: of an error CQE
 * @syndrome: of an error CQE (the MLX4_CQE_SYNDROME_* values)
 * @reserved2: not part of the ABI
 * @owner_sr_opcode: %MLX4_BF_CQE_OWNER, %MLX4_BF_CQE_IS_SEND and the
 *                   opcode (%MLX4_BF_CQE_OPCODE_MASK, enum
 *                   mlx4_bf_cqe_opcode); written last
 *
 * struct mlx4_cqe and struct mlx4_err_cqe of include/linux/mlx4/cq.h, as
 * mlx4 adapters write them: multi-byte fields are big-endian. @byte_cnt and
 * @immed are of receive completions only.
 */
struct mlx4_bf_cqe {
	__be32 my_qpn;
	__be32 immed;
	__be32 src_qpn;
	__u8 reserved1[8];
	__be32 byte_cnt;
	__be16 wqe_index;
	__u8 vendor_err_syndrome;
	__u8 syndrome;
	__u8 reserved2[3];
	__u8 owner_sr_opcode;
};

/* struct mlx4_bf_cqe @owner_sr_opcode */
#define MLX4_BF_CQE_OWNER		0x80
#define MLX4_BF_CQE_IS_SEND		0x40
#define MLX4_BF_CQE_OPCODE_MASK		0x1f

/*
 * The opcode of a receive completion; a send completion's (with
 * MLX4_BF_CQE_IS_SEND) is its WQE's, and an error CQE's is ERROR either way.
 */
enum mlx4_bf_cqe_opcode {
	/* The immediate and the byte count; no receive buffer is written. */
	MLX4_BF_CQE_OPCODE_RDMA_WRITE_IMM	= 0x00,
	MLX4_BF_CQE_OPCODE_SEND			= 0x01,
	MLX4_BF_CQE_OPCODE_SEND_IMM		= 0x02,
	/* The QP went to the error state; @syndrome says why. */
	MLX4_BF_CQE_OPCODE_ERROR		= 0x1e,
};

enum mlx4_bf_arm_flags {
	/* Only a solicited completion (or an error) raises the event. */
	MLX4_BF_ARM_F_SOLICITED	= 1 << 0,
};

enum mlx4_bf_post_flags {
	/* Take the doorbell path even when the WQE fits a BlueFlame buffer. */
	MLX4_BF_POST_F_FORCE_DOORBELL	= 1 << 0,
	/* Fail with -EINVAL rather than fall back to the doorbell path. */
	MLX4_BF_POST_F_REQUIRE_BF	= 1 << 1,
};

enum mlx4_bf_path {
	MLX4_BF_PATH_BLUEFLAME = 1,
	MLX4_BF_PATH_DOORBELL,
};

/**
 * struct mlx4_bf_post_result - what POST_SEND did
 * @path: enum mlx4_bf_path
 * @wqe_index: send-queue index the WQE took
 * @bf_offset: offset in BAR2 written (BlueFlame) or rung (doorbell register)
 * @bytes_written: bytes written to BAR2 (the 64-byte padded WQE, or 4)
 * @store_blocks: blocks issued by the store-block writer (0 otherwise)
 * @reserved: zero
 */
struct mlx4_bf_post_result {
	__u32 path;
	__u32 wqe_index;
	__aligned_u64 bf_offset;
	__u32 bytes_written;
	__u32 store_blocks;
	__u32 reserved[2];
};

enum mlx4_bf_reject {
	MLX4_BF_REJECT_LENGTH,		/* WQE length not a multiple of 16 or too long */
	MLX4_BF_REJECT_SIZE_FIELD,	/* ctrl size field differs from the length */
	MLX4_BF_REJECT_OPCODE,		/* opcode outside the allowed set */
	MLX4_BF_REJECT_CTRL,		/* bits only the kernel may set */
	MLX4_BF_REJECT_INLINE,		/* malformed or 64-byte-crossing inline segment */
	MLX4_BF_REJECT_GATHER,		/* gather segment where BlueFlame is required */
	MLX4_BF_REJECT_FAULT,		/* the WQE could not be copied from user space */
	MLX4_BF_REJECT_QP,		/* unknown QP handle */
	MLX4_BF_REJECT_LKEY,		/* gather lkey not one of the context's MRs */
	MLX4_BF_REJECT_RANGE,		/* gather segment outside its MR */
	MLX4_BF_REJECT_RKEY,		/* RDMA write outside a remote-writable MR of the peer */
	MLX4_BF_REJECT_MAX,
};

/**
 * struct mlx4_bf_stats - counters of a device or of one context
 * @bf_posts: WQEs written through the BlueFlame page
 * @db_posts: WQEs posted with the doorbell register
 * @bytes: bytes of WQE written to the BlueFlame page or send queue
 * @store_blocks: store blocks issued by the store-block writer
 * @rejects: POST_SEND calls refused, by enum mlx4_bf_reject
 */
struct mlx4_bf_stats {
	__aligned_u64 bf_posts;
	__aligned_u64 db_posts;
	__aligned_u64 bytes;
	__aligned_u64 store_blocks;
	__aligned_u64 rejects[MLX4_BF_REJECT_MAX];
};

/*
 * The RDMA provider's uverbs method (the ib_device mlx4_bf<N>, mainline
 * mlx4_ib's user ABI, include/uapi/rdma/mlx4-abi.h): a BlueFlame post of a
 * WQE that libmlx4 built in its send queue, called on the verbs context's
 * command file (RDMA_VERBS_IOCTL) on the device object (UVERBS_OBJECT_DEVICE),
 * in the driver's name space, as mlx5's QUERY_PORT is. The QP is the one
 * whose number the WQE's control segment carries (bf_qpn, as libmlx4
 * stamps it for BlueFlame), looked up among the calling context's own QPs
 * (-ENOENT for any other number); the kernel checks the WQE and writes it
 * to the context's BlueFlame page (store blocks on s390), or rings the
 * send doorbell when it does not fit. A device without the method answers
 * a call of it with -EPROTONOSUPPORT (the uverbs core's answer for an
 * unknown method): that is how user space learns whether it is there.
 */

enum mlx4_bf_ib_device_methods {
	MLX4_BF_IB_METHOD_QP_POST = (1U << UVERBS_ID_NS_SHIFT),
};

enum mlx4_bf_ib_qp_post_attrs {
	/*
	 * The WQE as libmlx4 built it: owner bit and WQE counter in the first
	 * dword are user space's (its send queue), the QPN in the second names
	 * the QP (one of the calling context's); 16 bytes at least, at most
	 * MLX4_BF_QP_POST_MAX_WQE.
	 */
	MLX4_BF_IB_ATTR_QP_POST_WQE = (1U << UVERBS_ID_NS_SHIFT),
	/* Flags, optional: enum mlx4_bf_post_flags. */
	MLX4_BF_IB_ATTR_QP_POST_FLAGS,
	/*
	 * struct mlx4_bf_post_result, optional; wqe_index is the WQE counter
	 * the WQE carries.
	 */
	MLX4_BF_IB_ATTR_QP_POST_RESULT,
};

/* The largest WQE the method takes: 63 units of 16 bytes (the size field). */
#define MLX4_BF_QP_POST_MAX_WQE		1008

#endif /* _UAPI_MLX4_BF_H */
