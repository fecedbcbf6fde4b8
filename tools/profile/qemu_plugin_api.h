/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few declarations of QEMU's TCG plugin API that insn_profile.c uses.
 *
 * Debian's QEMU packages ship no qemu-plugin.h, so these are our own
 * declarations of the C ABI, written from QEMU's include/plugins/qemu-plugin.h,
 * for the two QEMUs the test beds run (QEMU_PLUGIN_API, given when building):
 *
 * 7: Debian's qemu-system-x86_64 11.1.3, which accepts only version 7
 *    ("supports only a minimum version of 7" / "only up to version 7").
 *    Version 7 gave every callback a userdata pointer in place of the plugin
 *    id: the translation callback is (tb, userdata) and its registration
 *    takes the userdata; the atexit callback is (userdata). Those two were
 *    checked against the disassembly of Debian's binary
 *    (qemu_plugin_tb_trans_cb calls cb(tb, udata)), since copies of the
 *    header from before the release still show the older shapes under 7.
 * 5: the s390x QEMU built from Debian's 10.2.2 source
 *    (scripts/build-qemu.sh; include/qemu/qemu-plugin.h there: versions 2
 *    to 5): the translation callback is (id, tb), its registration takes no
 *    userdata, the atexit callback is (id, userdata).
 *
 * Only what is used is declared; see that header for the documentation of
 * each function.
 */
#ifndef MLX4_BF_QEMU_PLUGIN_API_H
#define MLX4_BF_QEMU_PLUGIN_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))

/* The API version this plugin is built for (see above). */
#ifndef QEMU_PLUGIN_API
#define QEMU_PLUGIN_API 7
#endif
#if QEMU_PLUGIN_API != 5 && QEMU_PLUGIN_API != 7
#error "QEMU_PLUGIN_API: 5 (QEMU 10.2) or 7 (QEMU 11.1)"
#endif

typedef uint64_t qemu_plugin_id_t;

typedef struct qemu_info_t {
	const char *target_name;
	struct {
		int min;
		int cur;
	} version;
	bool system_emulation;
	union {
		struct {
			int smp_vcpus;
			int max_vcpus;
		} system;
	};
} qemu_info_t;

struct qemu_plugin_tb;
struct qemu_plugin_insn;

enum qemu_plugin_cb_flags {
	QEMU_PLUGIN_CB_NO_REGS,
	QEMU_PLUGIN_CB_R_REGS,
	QEMU_PLUGIN_CB_RW_REGS,
	QEMU_PLUGIN_CB_RW_REGS_PC,
};

typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
#if QEMU_PLUGIN_API >= 7
typedef void (*qemu_plugin_udata_cb_t)(void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(struct qemu_plugin_tb *tb, void *userdata);
#else
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
#endif

/* Exported by the plugin. */
extern QEMU_PLUGIN_EXPORT int qemu_plugin_version;
QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv);

/* Provided by QEMU. */
#if QEMU_PLUGIN_API >= 7
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   qemu_plugin_vcpu_tb_trans_cb_t cb, void *userdata);
#else
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   qemu_plugin_vcpu_tb_trans_cb_t cb);
#endif
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
					    qemu_plugin_vcpu_udata_cb_t cb,
					    enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb,
				    void *userdata);

size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
/* Copies up to @len bytes of the instruction; returns how many. */
size_t qemu_plugin_insn_data(const struct qemu_plugin_insn *insn, void *dest, size_t len);

#endif /* MLX4_BF_QEMU_PLUGIN_API_H */
