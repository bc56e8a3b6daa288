/* Contexts: the allocator and the thread pool every model and session
 * created from the context uses.  Reference counted, so the caller may
 * destroy the context before the models made from it. */
#include <stdlib.h>
#include <string.h>

#include "device.h"

static void *libc_alloc(void *user, size_t bytes, size_t alignment) {
	(void)user;
	if (alignment < sizeof(void *)) alignment = sizeof(void *);
	void *p = NULL;
	if (posix_memalign(&p, alignment, bytes ? bytes : 1) != 0) return NULL;
	return p;
}

static void libc_free(void *user, void *p) {
	(void)user;
	free(p);
}

void *tbcrt__alloc(const tbcrt_context *c, size_t bytes, size_t alignment) {
	return c->allocator.alloc(c->allocator.user, bytes, alignment);
}

void *tbcrt__calloc(const tbcrt_context *c, size_t n, size_t size) {
	uint64_t bytes;
	if (!tbcrt__mul_within(n, size, SIZE_MAX / 2, &bytes)) return NULL;
	void *p = tbcrt__alloc(c, (size_t)bytes, 16);
	if (p) memset(p, 0, (size_t)bytes);
	return p;
}

void tbcrt__free(const tbcrt_context *c, void *p) {
	if (p) c->allocator.free(c->allocator.user, p);
}

char *tbcrt__strdup(const tbcrt_context *c, const char *s) {
	size_t n = strlen(s) + 1;
	char *d = tbcrt__alloc(c, n, 1);
	if (d) memcpy(d, s, n);
	return d;
}

void tbcrt_context_options_init(tbcrt_context_options *o) {
	if (!o) return;
	memset(o, 0, sizeof *o);
}

tbcrt_status tbcrt_context_create(const tbcrt_context_options *options, tbcrt_context **out_context) {
	if (!out_context) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_context_create: out_context is NULL");
	*out_context = NULL;
	tbcrt_context_options o;
	tbcrt_context_options_init(&o);
	if (options) o = *options;
	if (!o.allocator.alloc != !o.allocator.free)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT,
				  "tbcrt_context_create: the allocator needs both alloc and free, or neither");
	if (!o.allocator.alloc) {
		o.allocator.alloc = libc_alloc;
		o.allocator.free = libc_free;
		o.allocator.user = NULL;
	}
	if (o.thread_count > TBCRT_MAX_THREADS)
		return tbcrt__err(TBCRT_ERR_LIMIT, "tbcrt_context_create: thread count %u exceeds the limit of %u",
				  o.thread_count, TBCRT_MAX_THREADS);
	tbcrt_context tmp = {.allocator = o.allocator};
	tbcrt_context *c = tbcrt__alloc(&tmp, sizeof *c, 16);
	if (!c) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "tbcrt_context_create: out of memory");
	memset(c, 0, sizeof *c);
	c->allocator = o.allocator;
	atomic_init(&c->refs, 1);
	if (pthread_mutex_init(&c->devices_lock, NULL) != 0) {
		tbcrt__free(&tmp, c);
		return tbcrt__err(TBCRT_ERR_NO_MEMORY, "tbcrt_context_create: cannot create a mutex");
	}
	tbcrt_status s = tbcrt__pool_create(c, o.thread_count, &c->pool);
	if (s.code != TBCRT_OK) {
		pthread_mutex_destroy(&c->devices_lock);
		tbcrt__free(&tmp, c);
		return tbcrt__wrap(s, "tbcrt_context_create");
	}
	*out_context = c;
	return s;
}

void tbcrt__context_retain(tbcrt_context *c) {
	atomic_fetch_add(&c->refs, 1);
}

void tbcrt__context_release(tbcrt_context *c) {
	if (!c || atomic_fetch_sub(&c->refs, 1) != 1) return;
	tbcrt__devices_release(c);
	pthread_mutex_destroy(&c->devices_lock);
	tbcrt__pool_destroy(c, c->pool);
	tbcrt_context tmp = {.allocator = c->allocator};
	tbcrt__free(&tmp, c);
}

void tbcrt_context_destroy(tbcrt_context *c) {
	tbcrt__context_release(c);
}

tbcrt_status tbcrt_context_set_thread_count(tbcrt_context *c, uint32_t thread_count) {
	if (!c) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_context_set_thread_count: context is NULL");
	return tbcrt__wrap(tbcrt__pool_resize(c, c->pool, thread_count), "tbcrt_context_set_thread_count");
}

tbcrt_status tbcrt_context_thread_count(const tbcrt_context *c, uint32_t *out_count) {
	if (!out_count) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_context_thread_count: out_count is NULL");
	*out_count = 0;
	if (!c) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_context_thread_count: context is NULL");
	*out_count = tbcrt__pool_threads(c->pool);
	return tbcrt__ok();
}
