/* The device registry: every device of this machine, found on a context's
 * first device call, and the public enumeration (tbcrt_device_*).  Devices
 * open on first use and close with the context. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "device.h"

struct tbcrt__registry {
	tbcrt_context *context;
	uint32_t count, cap;
	tbcrt__device **devices;
};

void tbcrt__copy_string(char *dst, size_t size, const char *src) {
	if (!size) return;
	size_t n = src ? strnlen(src, size - 1) : 0;
	if (n) memcpy(dst, src, n);
	dst[n] = '\0';
}

void *tbcrt__driver_open(tbcrt_device_info *info, const char *name, tbcrt_device_kind kind, const char *library,
			 const char *what) {
	memset(info, 0, sizeof *info);
	tbcrt__copy_string(info->name, sizeof info->name, name);
	info->kind = kind;
	void *h = dlopen(library, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(info->unavailable_reason, sizeof info->unavailable_reason, "no %s (%s)", what,
			 e ? e : library);
	}
	return h;
}

const char *tbcrt_device_kind_name(tbcrt_device_kind kind) {
	switch (kind) {
	case TBCRT_DEVICE_CPU: return "cpu";
	case TBCRT_DEVICE_OPENCL: return "opencl";
	case TBCRT_DEVICE_CUDA: return "cuda";
	case TBCRT_DEVICE_HIP: return "hip";
	}
	return "unknown";
}

tbcrt_status tbcrt__registry_add(tbcrt__registry *r, const tbcrt__device_ops *ops, const tbcrt_device_info *info,
				 void *native0, void *native1) {
	const tbcrt_context *c = r->context;
	if (r->count == r->cap) {
		uint32_t cap = r->cap ? 2 * r->cap : 8;
		tbcrt__device **grown = tbcrt__calloc(c, cap, sizeof *grown);
		if (!grown) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory listing devices");
		if (r->count) memcpy(grown, r->devices, r->count * sizeof *grown);
		tbcrt__free(c, r->devices);
		r->devices = grown;
		r->cap = cap;
	}
	tbcrt__device *d = tbcrt__calloc(c, 1, sizeof *d);
	if (!d) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory listing devices");
	if (pthread_mutex_init(&d->lock, NULL) != 0) {
		tbcrt__free(c, d);
		return tbcrt__err(TBCRT_ERR_NO_MEMORY, "cannot create a device's mutex");
	}
	d->ops = info->available ? ops : NULL;
	d->context = r->context;
	d->info = *info;
	d->native[0] = native0;
	d->native[1] = native1;
	r->devices[r->count++] = d;
	return tbcrt__ok();
}

static void device_free(const tbcrt_context *c, tbcrt__device *d) {
	if (d->impl) {
		tbcrt__program_cache_clear(d);
		d->ops->close(d);
	}
	if (d->ops && d->ops->release) d->ops->release(d);
	pthread_mutex_destroy(&d->lock);
	tbcrt__free(c, d);
}

void tbcrt__devices_release(tbcrt_context *c) {
	tbcrt__registry *r = c->devices;
	if (!r) return;
	for (uint32_t i = 0; i < r->count; i++) device_free(c, r->devices[i]);
	tbcrt__free(c, r->devices);
	tbcrt__free(c, r);
	c->devices = NULL;
}

/* Called with c->devices_lock held. */
static tbcrt_status registry_ensure(tbcrt_context *c) {
	if (c->devices) return tbcrt__ok();
	tbcrt__registry *r = tbcrt__calloc(c, 1, sizeof *r);
	if (!r) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory listing devices");
	r->context = c;
	c->devices = r;
	tbcrt_status (*const enumerate[])(tbcrt_context *, tbcrt__registry *) = {
		tbcrt__cpu_enumerate, tbcrt__opencl_enumerate, tbcrt__cuda_enumerate, tbcrt__hip_enumerate};
	for (size_t i = 0; i < sizeof enumerate / sizeof *enumerate; i++) {
		tbcrt_status s = enumerate[i](c, r);
		if (s.code != TBCRT_OK) {
			tbcrt__devices_release(c);
			return s;
		}
	}
	return tbcrt__ok();
}

tbcrt_status tbcrt_device_count(tbcrt_context *c, uint32_t *out_count) {
	if (!out_count) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_device_count: out_count is NULL");
	*out_count = 0;
	if (!c) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_device_count: context is NULL");
	pthread_mutex_lock(&c->devices_lock);
	tbcrt_status s = registry_ensure(c);
	if (s.code == TBCRT_OK) *out_count = c->devices->count;
	pthread_mutex_unlock(&c->devices_lock);
	return tbcrt__wrap(s, "tbcrt_device_count");
}

tbcrt_status tbcrt_device_info_get(tbcrt_context *c, uint32_t index, tbcrt_device_info *out_info) {
	if (!out_info) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_device_info_get: out_info is NULL");
	memset(out_info, 0, sizeof *out_info);
	if (!c) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_device_info_get: context is NULL");
	pthread_mutex_lock(&c->devices_lock);
	tbcrt_status s = registry_ensure(c);
	if (s.code == TBCRT_OK && index >= c->devices->count)
		s = tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "device index %u is out of range (this machine has %u)", index,
			       c->devices->count);
	if (s.code == TBCRT_OK) *out_info = c->devices->devices[index]->info;
	pthread_mutex_unlock(&c->devices_lock);
	return tbcrt__wrap(s, "tbcrt_device_info_get");
}

/* The names of the devices, for a message saying which ones there are. */
static void list_names(const tbcrt__registry *r, char *buf, size_t size) {
	size_t at = 0;
	buf[0] = '\0';
	for (uint32_t i = 0; i < r->count && at + 1 < size; i++) {
		int n = snprintf(buf + at, size - at, "%s%s", i ? ", " : "", r->devices[i]->info.name);
		if (n < 0) break;
		at += (size_t)n;
	}
}

static tbcrt_status find(tbcrt_context *c, const char *name, uint32_t *out_index) {
	tbcrt_status s = registry_ensure(c);
	if (s.code != TBCRT_OK) return s;
	const tbcrt__registry *r = c->devices;
	for (uint32_t i = 0; i < r->count; i++)
		if (!strcmp(r->devices[i]->info.name, name)) {
			*out_index = i;
			return tbcrt__ok();
		}
	char names[256];
	list_names(r, names, sizeof names);
	return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "no device '%s' on this machine (it has %s)", name, names);
}

tbcrt_status tbcrt_device_find(tbcrt_context *c, const char *name, uint32_t *out_index) {
	if (!out_index) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_device_find: out_index is NULL");
	*out_index = 0;
	if (!c || !name) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_device_find: context or name is NULL");
	pthread_mutex_lock(&c->devices_lock);
	tbcrt_status s = find(c, name, out_index);
	pthread_mutex_unlock(&c->devices_lock);
	return tbcrt__wrap(s, "tbcrt_device_find");
}

tbcrt_status tbcrt__device_get(tbcrt_context *c, const char *name, tbcrt__device **out_device) {
	*out_device = NULL;
	pthread_mutex_lock(&c->devices_lock);
	uint32_t i = 0;
	tbcrt_status s = find(c, name, &i);
	if (s.code == TBCRT_OK) {
		tbcrt__device *d = c->devices->devices[i];
		if (!d->info.available) {
			s = tbcrt__err(TBCRT_ERR_DEVICE_UNAVAILABLE, "device '%s' is unavailable: %s", name,
				       d->info.unavailable_reason);
		} else if (!d->impl) {
			s = d->ops->open(d);
			if (s.code == TBCRT_OK && !d->impl)
				s = tbcrt__err(TBCRT_ERR_DEVICE, "device '%s' opened without state", name);
			s = tbcrt__wrap(s, d->info.name);
		}
		if (s.code == TBCRT_OK) *out_device = d;
	} else {
		/* "cuda:0" when the registry has only "cuda", unavailable: say why. */
		size_t kind = strcspn(name, ":");
		const tbcrt__registry *r = c->devices;
		for (uint32_t k = 0; r && k < r->count; k++)
			if (!r->devices[k]->info.available && strlen(r->devices[k]->info.name) == kind &&
			    !strncmp(r->devices[k]->info.name, name, kind)) {
				s = tbcrt__err(TBCRT_ERR_DEVICE_UNAVAILABLE, "device '%s' is unavailable: %s", name,
					       r->devices[k]->info.unavailable_reason);
				break;
			}
		s.code = TBCRT_ERR_DEVICE_UNAVAILABLE;
	}
	pthread_mutex_unlock(&c->devices_lock);
	return s;
}

uint64_t tbcrt__device_builds(tbcrt__device *d) {
	pthread_mutex_lock(&d->lock);
	uint64_t n = d->builds;
	pthread_mutex_unlock(&d->lock);
	return n;
}
