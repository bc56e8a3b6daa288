/* Device buffers, copies and arenas.  Every range is checked here, so a
 * device's functions see only offsets and sizes inside their buffers. */
#include <string.h>

#include "device.h"

/* [offset, offset + bytes) inside a buffer of size bytes. */
static tbcrt_status check_range(const tbcrt__buffer *b, uint64_t offset, uint64_t bytes, const char *what) {
	if (offset > b->bytes || bytes > b->bytes - offset)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT,
				  "%s: %s of %llu bytes at offset %llu lies outside the buffer of %llu bytes",
				  b->device->info.name, what, (unsigned long long)bytes, (unsigned long long)offset,
				  (unsigned long long)b->bytes);
	return tbcrt__ok();
}

static tbcrt_status buffer_new(tbcrt__device *d, uint64_t bytes, const tbcrt__buffer *parent, uint64_t offset,
			       tbcrt__buffer **out_buffer) {
	*out_buffer = NULL;
	if (bytes > d->info.max_alloc_bytes)
		return tbcrt__err(TBCRT_ERR_NO_MEMORY,
				  "%s: a buffer of %llu bytes exceeds the device's largest allocation (%llu bytes)",
				  d->info.name, (unsigned long long)bytes, (unsigned long long)d->info.max_alloc_bytes);
	tbcrt__buffer *b = tbcrt__calloc(d->context, 1, sizeof *b);
	if (!b) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "%s: out of host memory for a buffer", d->info.name);
	b->device = d;
	b->bytes = bytes;
	b->parent = parent;
	b->offset = offset;
	pthread_mutex_lock(&d->lock);
	tbcrt_status s = parent ? d->ops->buffer_view(d, b) : d->ops->buffer_alloc(d, b);
	pthread_mutex_unlock(&d->lock);
	if (s.code != TBCRT_OK) {
		tbcrt__free(d->context, b);
		return tbcrt__wrap(s, d->info.name);
	}
	*out_buffer = b;
	return s;
}

tbcrt_status tbcrt__buffer_alloc(tbcrt__device *d, uint64_t bytes, tbcrt__buffer **out_buffer) {
	return buffer_new(d, bytes, NULL, 0, out_buffer);
}

void tbcrt__buffer_free(tbcrt__buffer *b) {
	if (!b) return;
	tbcrt__device *d = b->device;
	pthread_mutex_lock(&d->lock);
	d->ops->buffer_free(d, b);
	pthread_mutex_unlock(&d->lock);
	tbcrt__free(d->context, b);
}

tbcrt_status tbcrt__buffer_write(tbcrt__buffer *b, uint64_t offset, const void *src, uint64_t bytes) {
	tbcrt_status s = check_range(b, offset, bytes, "a write");
	if (s.code != TBCRT_OK || !bytes) return s;
	tbcrt__device *d = b->device;
	pthread_mutex_lock(&d->lock);
	s = d->ops->write(d, b, offset, src, bytes);
	pthread_mutex_unlock(&d->lock);
	return tbcrt__wrap(s, d->info.name);
}

tbcrt_status tbcrt__buffer_read(const tbcrt__buffer *b, uint64_t offset, void *dst, uint64_t bytes) {
	tbcrt_status s = check_range(b, offset, bytes, "a read");
	if (s.code != TBCRT_OK || !bytes) return s;
	tbcrt__device *d = b->device;
	pthread_mutex_lock(&d->lock);
	s = d->ops->read(d, b, offset, dst, bytes);
	pthread_mutex_unlock(&d->lock);
	return tbcrt__wrap(s, d->info.name);
}

/* The buffer a view belongs to, and the view's offset in it. */
static const tbcrt__buffer *root_of(const tbcrt__buffer *b, uint64_t *offset) {
	while (b->parent) {
		*offset += b->offset;
		b = b->parent;
	}
	return b;
}

tbcrt_status tbcrt__buffer_copy(tbcrt__buffer *dst, uint64_t dst_offset, const tbcrt__buffer *src,
				uint64_t src_offset, uint64_t bytes) {
	if (dst->device != src->device)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "a copy from %s to %s: copy through the host",
				  src->device->info.name, dst->device->info.name);
	tbcrt_status s = check_range(src, src_offset, bytes, "a copy's source");
	if (s.code == TBCRT_OK) s = check_range(dst, dst_offset, bytes, "a copy's destination");
	if (s.code != TBCRT_OK || !bytes) return s;
	uint64_t a = dst_offset, b = src_offset;
	if (root_of(dst, &a) == root_of(src, &b) && a < b + bytes && b < a + bytes)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "%s: a copy's source and destination overlap",
				  dst->device->info.name);
	tbcrt__device *d = dst->device;
	pthread_mutex_lock(&d->lock);
	s = d->ops->copy(d, dst, dst_offset, src, src_offset, bytes);
	pthread_mutex_unlock(&d->lock);
	return tbcrt__wrap(s, d->info.name);
}

tbcrt_status tbcrt__buffer_view(const tbcrt__buffer *parent, uint64_t offset, uint64_t bytes,
				tbcrt__buffer **out_buffer) {
	*out_buffer = NULL;
	tbcrt__device *d = parent->device;
	uint64_t align = d->align_bytes ? d->align_bytes : TBCRT_ARENA_ALIGN;
	if (parent->parent || offset % align || !bytes)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT,
				  "%s: a view of %llu bytes at offset %llu: views are of whole buffers, non-empty, at multiples "
				  "of %llu bytes",
				  d->info.name, (unsigned long long)bytes, (unsigned long long)offset, (unsigned long long)align);
	tbcrt_status s = check_range(parent, offset, bytes, "a view");
	return s.code == TBCRT_OK ? buffer_new(d, bytes, parent, offset, out_buffer) : s;
}

/* ---- Arenas ---- */
struct tbcrt__arena {
	tbcrt__device *device;
	tbcrt__buffer *base;
	uint64_t used;
};

tbcrt_status tbcrt__arena_create(tbcrt__device *d, uint64_t bytes, tbcrt__arena **out_arena) {
	*out_arena = NULL;
	tbcrt__arena *a = tbcrt__calloc(d->context, 1, sizeof *a);
	if (!a) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "%s: out of host memory for an arena", d->info.name);
	a->device = d;
	tbcrt_status s = tbcrt__buffer_alloc(d, bytes, &a->base);
	if (s.code != TBCRT_OK) {
		tbcrt__free(d->context, a);
		return s;
	}
	*out_arena = a;
	return s;
}

tbcrt_status tbcrt__arena_alloc(tbcrt__arena *a, uint64_t bytes, tbcrt__buffer **out_buffer) {
	uint64_t align = a->device->align_bytes ? a->device->align_bytes : TBCRT_ARENA_ALIGN;
	uint64_t at = (a->used + align - 1) / align * align, need = bytes ? bytes : 1;
	if (at <= a->base->bytes && need <= a->base->bytes - at) {
		tbcrt_status s = buffer_new(a->device, bytes, a->base, at, out_buffer);
		if (s.code == TBCRT_OK) a->used = at + need;
		return s;
	}
	return tbcrt__buffer_alloc(a->device, bytes, out_buffer);
}

void tbcrt__arena_reset(tbcrt__arena *a) {
	a->used = 0;
}

void tbcrt__arena_destroy(tbcrt__arena *a) {
	if (!a) return;
	tbcrt__buffer_free(a->base);
	tbcrt__free(a->device->context, a);
}
