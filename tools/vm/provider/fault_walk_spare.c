// SPDX-License-Identifier: GPL-2.0
/*
 * What the walk does not fail: the allocations made with one kernel
 * function on the stack (FAULT_INJECTION_STACKTRACE_FILTER: reject-start
 * and reject-end, one range each for failslab and fail_page_alloc), where
 * a failure is mainline's to handle, not the provider's:
 *
 *   add_dma_entry(): dma-debug's own bookkeeping. A radix tree node it
 *   could not get turns dma-debug off for the rest of the boot ("cacheline
 *   tracking ENOMEM, dma-debug disabled", kernel/dma/debug.c): every later
 *   step would go unchecked. Spared by every operation but bind.
 *   register_irq_proc(): ignores a /proc/irq/N it could not make, and
 *   unregister_irq_proc() WARNs removing it. Spared by bind, which
 *   requests the EQs' interrupts, and which is walked last: its DMA
 *   mappings may still turn dma-debug off (dma_debug_on() tells).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_walk.h"

#define FI		"/sys/kernel/debug/"
#define DMA_DEBUG_OFF	FI "dma-api/disabled"

/*
 * The text of kernel function FN: its address and the next symbol's.
 * 0 or -errno, as write_hex().
 */
static int text_range(const char *fn, unsigned long *start,
		      unsigned long *end)
{
	unsigned long addr, next = ~0ul;
	char type, name[128], line[256];
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return -errno;
	*start = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %c %127s", &addr, &type, name) == 3 &&
		    (type == 't' || type == 'T') && !strcmp(name, fn))
			*start = addr;
	rewind(f);
	while (*start && fgets(line, sizeof(line), f)) {
		addr = strtoul(line, NULL, 16);
		if (addr > *start && addr < next)
			next = addr;
	}
	fclose(f);
	if (!*start || next == ~0ul)
		return -ENOENT;
	*end = next;
	return 0;
}

static int write_hex(const char *attr, const char *knob, unsigned long v)
{
	char path[96], s[24];
	int fd, len, err = 0;

	snprintf(path, sizeof(path), FI "%s/%s", attr, knob);
	len = snprintf(s, sizeof(s), "0x%lx", v);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	if (write(fd, s, len) != len)
		err = -errno;
	close(fd);
	return err;
}

void spare(const char *fn)
{
	static const char *const attrs[] = { "failslab", "fail_page_alloc" };
	static const char *now;
	unsigned long start, end;
	int err;

	if (now && !strcmp(now, fn))
		return;
	if (text_range(fn, &start, &end)) {
		/* Inlined by this build: nothing spared, any harm reported. */
		printf("# %s() is not in /proc/kallsyms: none of its allocations spared\n",
		       fn);
		start = end = 0;
	}
	err = 0;
	for (size_t i = 0; !err && i < ARRAY_SIZE(attrs); i++)
		err = write_hex(attrs[i], "reject-start", start) ?:
		      write_hex(attrs[i], "reject-end", end);
	if (err)
		die(fn, -err);
	now = fn;
}

int dma_debug_on(void)
{
	char c = 0;
	int fd = open(DMA_DEBUG_OFF, O_RDONLY);

	if (fd < 0)
		return -1;
	if (read(fd, &c, 1) != 1)
		c = 0;
	close(fd);
	return c == 'N';
}
