/* Programs, kernels and launches on a device.  The program cache lives
 * here, for every device alike: a program is keyed by its kind, bytes and
 * build options (the device is the cache's owner), compared in full, not
 * only by hash, so two programs never share a build by accident. */
#include <stdio.h>
#include <string.h>

#include "device.h"

struct tbcrt__cache_entry {
	struct tbcrt__cache_entry *next;
	tbcrt__program_kind kind;
	uint64_t hash;
	void *bytes;
	size_t size;
	char *options;
	tbcrt__program *program;
};

static uint64_t key_hash(const tbcrt__program_desc *p, const char *options) {
	uint64_t h = tbcrt__fnv1a64(p->bytes, p->size);
	return h ^ (tbcrt__fnv1a64(options, strlen(options)) * 31u) ^ (uint64_t)p->kind;
}

static void program_free(tbcrt__program *p) {
	tbcrt__device *d = p->device;
	d->ops->program_free(d, p);
	tbcrt__free(d->context, p->name);
	tbcrt__free(d->context, p);
}

void tbcrt__program_release(tbcrt__program *p) {
	if (!p || atomic_fetch_sub(&p->refs, 1) != 1) return;
	tbcrt__device *d = p->device;
	pthread_mutex_lock(&d->lock);
	program_free(p);
	pthread_mutex_unlock(&d->lock);
}

void tbcrt__program_cache_clear(tbcrt__device *d) {
	const tbcrt_context *c = d->context;
	for (struct tbcrt__cache_entry *e = d->cache, *next; e; e = next) {
		next = e->next;
		if (atomic_fetch_sub(&e->program->refs, 1) == 1) program_free(e->program);
		tbcrt__free(c, e->bytes);
		tbcrt__free(c, e->options);
		tbcrt__free(c, e);
	}
	d->cache = NULL;
}

static struct tbcrt__cache_entry *cache_find(tbcrt__device *d, const tbcrt__program_desc *p, const char *options,
					     uint64_t hash) {
	for (struct tbcrt__cache_entry *e = d->cache; e; e = e->next)
		if (e->hash == hash && e->kind == p->kind && e->size == p->size && !memcmp(e->bytes, p->bytes, p->size) &&
		    !strcmp(e->options, options))
			return e;
	return NULL;
}

/* Called with d->lock held; on success the cache holds one reference. */
static tbcrt_status cache_add(tbcrt__device *d, const tbcrt__program_desc *p, const char *options, uint64_t hash,
			      tbcrt__program *program) {
	const tbcrt_context *c = d->context;
	struct tbcrt__cache_entry *e = tbcrt__calloc(c, 1, sizeof *e);
	if (e) e->bytes = tbcrt__alloc(c, p->size ? p->size : 1, 16);
	if (e) e->options = tbcrt__strdup(c, options);
	if (!e || !e->bytes || !e->options) {
		if (e) tbcrt__free(c, e->bytes);
		if (e) tbcrt__free(c, e->options);
		tbcrt__free(c, e);
		return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory caching program '%s'", p->name);
	}
	memcpy(e->bytes, p->bytes, p->size);
	e->kind = p->kind;
	e->hash = hash;
	e->size = p->size;
	e->program = program;
	atomic_fetch_add(&program->refs, 1);
	e->next = d->cache;
	d->cache = e;
	return tbcrt__ok();
}

tbcrt_status tbcrt__program_load(tbcrt__device *d, const tbcrt__program_desc *desc, tbcrt__program **out_program) {
	*out_program = NULL;
	if (!desc || !desc->bytes || !desc->name)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "%s: a program needs a name and bytes", d->info.name);
	const char *options = desc->options ? desc->options : "";
	uint64_t hash = key_hash(desc, options);
	pthread_mutex_lock(&d->lock);
	struct tbcrt__cache_entry *e = cache_find(d, desc, options, hash);
	if (e) {
		atomic_fetch_add(&e->program->refs, 1);
		*out_program = e->program;
		pthread_mutex_unlock(&d->lock);
		return tbcrt__ok();
	}
	tbcrt_status s = tbcrt__ok();
	tbcrt__program *p = tbcrt__calloc(d->context, 1, sizeof *p);
	if (p) p->name = tbcrt__strdup(d->context, desc->name);
	if (!p || !p->name) {
		if (p) tbcrt__free(d->context, p);
		s = tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory loading program '%s'", desc->name);
	} else {
		p->device = d;
		atomic_init(&p->refs, 1);
		s = d->ops->program_build(d, desc, p);
		if (s.code == TBCRT_OK) {
			d->builds++;
			s = cache_add(d, desc, options, hash, p);
			if (s.code != TBCRT_OK) d->ops->program_free(d, p);
		}
		if (s.code != TBCRT_OK) {
			tbcrt__free(d->context, p->name);
			tbcrt__free(d->context, p);
		} else {
			*out_program = p;
		}
	}
	pthread_mutex_unlock(&d->lock);
	return tbcrt__wrap(s, d->info.name);
}

tbcrt_status tbcrt__kernel_create(tbcrt__program *p, const char *name, tbcrt__kernel **out_kernel) {
	*out_kernel = NULL;
	tbcrt__device *d = p->device;
	if (!name) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "%s: a kernel needs a name", d->info.name);
	tbcrt__kernel *k = tbcrt__calloc(d->context, 1, sizeof *k);
	if (k) k->name = tbcrt__strdup(d->context, name);
	if (!k || !k->name) {
		if (k) tbcrt__free(d->context, k);
		return tbcrt__err(TBCRT_ERR_NO_MEMORY, "%s: out of memory for kernel '%s'", d->info.name, name);
	}
	k->program = p;
	k->max_group_size = d->info.max_work_group_size;
	pthread_mutex_lock(&d->lock);
	tbcrt_status s = d->ops->kernel_create(d, p, name, k);
	pthread_mutex_unlock(&d->lock);
	if (s.code != TBCRT_OK) {
		tbcrt__free(d->context, k->name);
		tbcrt__free(d->context, k);
		return tbcrt__wrap(s, d->info.name);
	}
	atomic_fetch_add(&p->refs, 1);
	*out_kernel = k;
	return s;
}

void tbcrt__kernel_destroy(tbcrt__kernel *k) {
	if (!k) return;
	tbcrt__program *p = k->program;
	tbcrt__device *d = p->device;
	pthread_mutex_lock(&d->lock);
	d->ops->kernel_free(d, k);
	pthread_mutex_unlock(&d->lock);
	tbcrt__free(d->context, k->name);
	tbcrt__free(d->context, k);
	tbcrt__program_release(p);
}

static tbcrt_status check_launch(const tbcrt__kernel *k, const tbcrt__launch_desc *l) {
	const tbcrt__device *d = k->program->device;
	const char *kn = k->name;
	if (l->dims < 1 || l->dims > 3)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "kernel '%s': %u dims (1 to 3)", kn, l->dims);
	bool chosen = true;
	uint64_t group = 1;
	for (uint32_t i = 0; i < l->dims; i++) {
		if (l->local[i]) chosen = false;
		if (!l->local[i] != !l->local[0])
			return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT,
					  "kernel '%s': give every local size or none (dim %u is 0)", kn,
					  l->local[i] ? 0 : i);
		if (l->local[i] && l->global[i] % l->local[i])
			return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT,
					  "kernel '%s': global size %llu of dim %u is not a multiple of the local size %llu",
					  kn, (unsigned long long)l->global[i], i, (unsigned long long)l->local[i]);
		if (l->local[i] && !tbcrt__mul_within(group, l->local[i], UINT32_MAX, &group))
			return tbcrt__err(TBCRT_ERR_LIMIT, "kernel '%s': the work-group is too large", kn);
	}
	if (!chosen && group > k->max_group_size)
		return tbcrt__err(TBCRT_ERR_LIMIT, "kernel '%s': a work-group of %llu items exceeds the kernel's limit of %llu",
				  kn, (unsigned long long)group, (unsigned long long)k->max_group_size);
	if (l->n_args > TBCRT__MAX_ARGS || (l->n_args && !l->args))
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "kernel '%s': %u arguments (at most %u)", kn, l->n_args,
				  TBCRT__MAX_ARGS);
	uint64_t local_bytes = 0;
	for (uint32_t i = 0; i < l->n_args; i++) {
		const tbcrt__arg *a = &l->args[i];
		bool ok = false;
		switch (a->kind) {
		case TBCRT__ARG_BUFFER: ok = a->buffer && a->buffer->device == d; break;
		case TBCRT__ARG_SCALAR: ok = a->value && a->bytes && a->bytes <= 256; break;
		case TBCRT__ARG_LOCAL: ok = a->bytes > 0 && (local_bytes += a->bytes) <= d->info.local_memory_bytes; break;
		}
		if (!ok)
			return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT,
					  "kernel '%s': argument %u is not a buffer of this device, a scalar of 1-256 "
					  "bytes, or local memory within the device's %llu bytes",
					  kn, i, (unsigned long long)d->info.local_memory_bytes);
	}
	return tbcrt__ok();
}

tbcrt_status tbcrt__launch(tbcrt__kernel *k, const tbcrt__launch_desc *l) {
	tbcrt__device *d = k->program->device;
	tbcrt_status s = check_launch(k, l);
	if (s.code != TBCRT_OK) return tbcrt__wrap(s, d->info.name);
	for (uint32_t i = 0; i < l->dims; i++)
		if (!l->global[i]) return s; /* no work-items: nothing to run */
	pthread_mutex_lock(&d->lock);
	s = d->ops->launch(d, k, l);
	pthread_mutex_unlock(&d->lock);
	if (s.code == TBCRT_OK) return s;
	char what[256];
	snprintf(what, sizeof what, "%s: kernel '%s' of program '%s'", d->info.name, k->name, k->program->name);
	return tbcrt__wrap(s, what);
}

tbcrt_status tbcrt__device_synchronize(tbcrt__device *d) {
	pthread_mutex_lock(&d->lock);
	tbcrt_status s = d->ops->synchronize(d);
	pthread_mutex_unlock(&d->lock);
	return tbcrt__wrap(s, d->info.name);
}

/* ---- Events ---- */
struct tbcrt__event {
	tbcrt__device *device;
	void *impl;
};

tbcrt_status tbcrt__event_record(tbcrt__device *d, tbcrt__event **out_event) {
	*out_event = NULL;
	if (!d->ops->event_record)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET, "%s: the device does not time its work (no events)",
				  d->info.name);
	tbcrt__event *e = tbcrt__calloc(d->context, 1, sizeof *e);
	if (!e) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "%s: out of memory for an event", d->info.name);
	e->device = d;
	pthread_mutex_lock(&d->lock);
	tbcrt_status s = d->ops->event_record(d, &e->impl);
	pthread_mutex_unlock(&d->lock);
	if (s.code != TBCRT_OK) {
		tbcrt__free(d->context, e);
		return tbcrt__wrap(s, d->info.name);
	}
	*out_event = e;
	return s;
}

tbcrt_status tbcrt__event_elapsed(const tbcrt__event *start, const tbcrt__event *end, double *out_ms) {
	*out_ms = 0;
	tbcrt__device *d = start->device;
	if (end->device != d)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "events of %s and %s: time events of one device",
				  d->info.name, end->device->info.name);
	pthread_mutex_lock(&d->lock);
	tbcrt_status s = d->ops->event_elapsed(d, start->impl, end->impl, out_ms);
	pthread_mutex_unlock(&d->lock);
	return tbcrt__wrap(s, d->info.name);
}

void tbcrt__event_free(tbcrt__event *e) {
	if (!e) return;
	tbcrt__device *d = e->device;
	pthread_mutex_lock(&d->lock);
	d->ops->event_free(d, e->impl);
	pthread_mutex_unlock(&d->lock);
	tbcrt__free(d->context, e);
}
