// SPDX-License-Identifier: GPL-2.0
/*
 * syscount: the system calls a command makes, counted by number as the
 * kernel reports them at each syscall-entry stop (ptrace PTRACE_SYSCALL and
 * PTRACE_GET_SYSCALL_INFO), the command's threads and children included,
 * as `strace -c -f` counts them. The guest has no strace; the upstream boot
 * on s390x uses this to count the s390_pci_mmio_write() calls libmlx4 makes
 * per post (rdma-core util/mmio.h: one per BlueFlame copy or doorbell
 * when the CPU lacks the PCI MIO instructions).
 *
 * Usage: syscount -o FILE COMMAND [ARG...]
 * Writes "NR COUNT [NAME]" lines to FILE, one per system call number the
 * command made, and "total COUNT"; exits with the command's status.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_NR 1024
#define MAX_TASKS 256

static unsigned long counts[MAX_NR];
static pid_t known[MAX_TASKS];
static int nknown;

static void die(const char *what)
{
	fprintf(stderr, "syscount: %s: %s\n", what, strerror(errno));
	exit(125);
}

static const char *name_of(unsigned long nr)
{
#ifdef __NR_s390_pci_mmio_write
	if (nr == __NR_s390_pci_mmio_write)
		return "s390_pci_mmio_write";
	if (nr == __NR_s390_pci_mmio_read)
		return "s390_pci_mmio_read";
#endif
	if (nr == __NR_ioctl)
		return "ioctl";
	return NULL;
}

/* A task's first stop: the child's own SIGSTOP, or a new thread's. */
static int first_stop(pid_t pid)
{
	int i;

	for (i = 0; i < nknown; i++)
		if (known[i] == pid)
			return 0;
	if (nknown < MAX_TASKS)
		known[nknown++] = pid;
	return 1;
}

/* Counts an entry stop; returns the signal to pass on at this stop. */
static int on_stop(pid_t pid, int status)
{
	struct __ptrace_syscall_info info;
	int sig = WSTOPSIG(status);

	if (sig == (SIGTRAP | 0x80)) {
		if (ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof(info), &info) < 0)
			die("PTRACE_GET_SYSCALL_INFO");
		if (info.op == PTRACE_SYSCALL_INFO_ENTRY && info.entry.nr < MAX_NR)
			counts[info.entry.nr]++;
		return 0;
	}
	/* Clone, fork and exec events; a task's first SIGSTOP. */
	if (sig == SIGTRAP && status >> 16)
		return 0;
	if (sig == SIGSTOP && first_stop(pid))
		return 0;
	return sig;
}

static void report(const char *path)
{
	unsigned long nr, total = 0;
	FILE *f = fopen(path, "w");

	if (!f)
		die(path);
	for (nr = 0; nr < MAX_NR; nr++) {
		if (!counts[nr])
			continue;
		total += counts[nr];
		fprintf(f, "%lu %lu%s%s\n", nr, counts[nr], name_of(nr) ? " " : "",
			name_of(nr) ?: "");
	}
	fprintf(f, "total %lu\n", total);
	fclose(f);
}

int main(int argc, char **argv)
{
	int status, rc = 125;
	const char *out;
	pid_t child, pid;

	if (argc < 4 || strcmp(argv[1], "-o")) {
		fprintf(stderr, "usage: syscount -o FILE COMMAND [ARG...]\n");
		return 2;
	}
	out = argv[2];
	child = fork();
	if (child < 0)
		die("fork");
	if (!child) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0)
			die("PTRACE_TRACEME");
		raise(SIGSTOP);
		execvp(argv[3], &argv[3]);
		die(argv[3]);
	}
	if (waitpid(child, &status, 0) < 0 || !WIFSTOPPED(status))
		die("waitpid");
	first_stop(child);
	if (ptrace(PTRACE_SETOPTIONS, child, NULL,
		   PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK |
		   PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL) < 0)
		die("PTRACE_SETOPTIONS");
	if (ptrace(PTRACE_SYSCALL, child, NULL, NULL) < 0)
		die("PTRACE_SYSCALL");
	while ((pid = waitpid(-1, &status, __WALL)) > 0) {
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			if (pid == child)
				rc = WIFEXITED(status) ? WEXITSTATUS(status) :
					128 + WTERMSIG(status);
			continue;
		}
		/* A task that is gone meanwhile (ESRCH) reports its exit next. */
		ptrace(PTRACE_SYSCALL, pid, NULL, on_stop(pid, status));
	}
	if (errno != ECHILD)
		die("waitpid");
	report(out);
	return rc;
}
