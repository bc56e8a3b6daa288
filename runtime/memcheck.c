/* The loaded segments of the object that holds an address, from
 * dl_iterate_phdr.  Descriptor fields are pointers; checking each against
 * these segments turns a corrupt count or a truncated table into an error
 * instead of a read outside the artifact. */
#include <link.h>
#include <string.h>

#include "internal.h"

typedef struct {
	uintptr_t addr;
	tbcrt_segments *out;
} search;

static int visit(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	search *s = arg;
	bool inside = false;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD) continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
		if (s->addr >= lo && s->addr < hi) inside = true;
	}
	if (!inside) return 0;
	tbcrt_segments *o = s->out;
	o->count = 0;
	for (int i = 0; i < info->dlpi_phnum && o->count < TBCRT_MAX_SEGMENTS; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R)) continue;
		o->seg[o->count].lo = info->dlpi_addr + ph->p_vaddr;
		o->seg[o->count].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		o->seg[o->count].exec = (ph->p_flags & PF_X) != 0;
		o->count++;
	}
	return 1;
}

void tbcrt__segments_of(const void *addr, tbcrt_segments *out) {
	memset(out, 0, sizeof *out);
	search s = {(uintptr_t)addr, out};
	dl_iterate_phdr(visit, &s);
}

static int find(const tbcrt_segments *s, uintptr_t a) {
	for (int i = 0; i < s->count; i++)
		if (a >= s->seg[i].lo && a < s->seg[i].hi) return i;
	return -1;
}

bool tbcrt__range_ok(const tbcrt_segments *s, const void *p, uint64_t bytes) {
	if (!p) return false;
	if (s->count == 0 || bytes == 0) return true;
	int i = find(s, (uintptr_t)p);
	return i >= 0 && bytes <= s->seg[i].hi - (uintptr_t)p;
}

bool tbcrt__code_ok(const tbcrt_segments *s, const void *fn) {
	if (!fn) return false;
	if (s->count == 0) return true;
	int i = find(s, (uintptr_t)fn);
	return i >= 0 && s->seg[i].exec;
}

bool tbcrt__string_ok(const tbcrt_segments *s, const char *p, size_t max) {
	if (!p) return false;
	size_t room = max + 1;
	if (s->count != 0) {
		int i = find(s, (uintptr_t)p);
		if (i < 0) return false;
		uintptr_t left = s->seg[i].hi - (uintptr_t)p;
		if (left < room) room = left;
	}
	return memchr(p, '\0', room) != NULL;
}
