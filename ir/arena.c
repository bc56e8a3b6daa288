#include "arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct chunk {
	struct chunk *next;
	size_t size, used;
	_Alignas(16) unsigned char data[];
} chunk;

struct tbc_arena {
	chunk *head;
	size_t total;
};

enum { CHUNK_MIN = 64 * 1024 };

tbc_arena *tbc_arena_create(void) { return calloc(1, sizeof(tbc_arena)); }

void tbc_arena_destroy(tbc_arena *a) {
	if (!a) return;
	for (chunk *c = a->head, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	free(a);
}

void *tbc_arena_alloc(tbc_arena *a, size_t size) {
	if (size > SIZE_MAX / 2) return NULL;
	size = (size + 15) & ~(size_t)15;
	if (size == 0) size = 16;
	chunk *c = a->head;
	if (!c || c->size - c->used < size) {
		/* Large blocks get a chunk of their own so the current chunk keeps its free tail. */
		size_t cap = size > CHUNK_MIN ? size : CHUNK_MIN;
		chunk *nc = malloc(sizeof(chunk) + cap);
		if (!nc) return NULL;
		nc->size = cap;
		nc->used = 0;
		if (c && size > CHUNK_MIN) {
			nc->next = c->next;
			c->next = nc;
		} else {
			nc->next = c;
			a->head = nc;
		}
		c = nc;
	}
	void *p = c->data + c->used;
	c->used += size;
	a->total += size;
	memset(p, 0, size);
	return p;
}

void *tbc_arena_array(tbc_arena *a, size_t n, size_t size) {
	if (size && n > SIZE_MAX / size) return NULL;
	return tbc_arena_alloc(a, n * size);
}

char *tbc_arena_strndup(tbc_arena *a, const char *s, size_t n) {
	char *d = tbc_arena_alloc(a, n + 1);
	if (d) memcpy(d, s, n);
	return d;
}

char *tbc_arena_strdup(tbc_arena *a, const char *s) { return tbc_arena_strndup(a, s, strlen(s)); }

char *tbc_arena_printf(tbc_arena *a, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) return NULL;
	char *s = tbc_arena_alloc(a, (size_t)n + 1);
	if (!s) return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

size_t tbc_arena_used(const tbc_arena *a) { return a->total; }
