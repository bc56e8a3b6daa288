/* The CPU as a device: host memory from the context's allocator, and
 * kernels that are host functions (tbcrt__host_kernel) run one work-group
 * per call on the context's thread pool.  Compiled CPU artifacts still run
 * through tbcrt_session_run (the whole model is one host function); this
 * device is what the kernel-level host program will launch on. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "../device.h"

#define CPU_LOCAL_BYTES (1u << 20)  /* local memory of one work-group: the scratch a group may ask for */
#define CPU_MAX_GROUP 4096u         /* items of one work-group (the kernel loops over them) */

/* The CPU's marketing name: cpuid's brand string, else /proc/cpuinfo. */
static void cpu_name(char *buf, size_t size) {
	tbcrt__copy_string(buf, size, tbcrt__host_description());
#if defined(__x86_64__)
	unsigned r[12], max = __get_cpuid_max(0x80000000u, NULL);
	if (max >= 0x80000004u) {
		for (unsigned i = 0; i < 3; i++) __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
		char brand[49];
		memcpy(brand, r, 48);
		brand[48] = '\0';
		const char *b = brand;
		while (*b == ' ') b++;
		if (*b) tbcrt__copy_string(buf, size, b);
		return;
	}
#endif
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f) return;
	char line[256];
	while (fgets(line, sizeof line, f)) {
		const char *colon = strchr(line, ':');
		if (colon && (!strncmp(line, "model name", 10) || !strncmp(line, "Model", 5))) {
			colon++;
			while (*colon == ' ') colon++;
			line[strcspn(line, "\n")] = '\0';
			tbcrt__copy_string(buf, size, colon);
			break;
		}
	}
	fclose(f);
}

/* cpuid's vendor ("GenuineIntel", "AuthenticAMD"); empty elsewhere. */
static void cpu_vendor(char *buf, size_t size) {
	buf[0] = '\0';
#if defined(__x86_64__)
	unsigned a, r[3];
	if (!__get_cpuid(0, &a, &r[0], &r[2], &r[1])) return;
	char v[13];
	memcpy(v, r, 12);
	v[12] = '\0';
	tbcrt__copy_string(buf, size, v);
#endif
}

/* "+name,..." of the features of runtime/cpu_features.def the host has. */
static void cpu_features(char *buf, size_t size) {
	static const char *const names[] = {
#if defined(__x86_64__)
#define X86_FEATURE(name, leaf, reg, bit, state) name,
#elif defined(__aarch64__)
#define A64_FEATURE(name, word, bit) name,
#endif
#include "../cpu_features.def"
#undef X86_FEATURE
#undef A64_FEATURE
		NULL};
	size_t at = 0;
	buf[0] = '\0';
	for (size_t i = 0; names[i] && at + 1 < size; i++) {
		if (tbcrt__host_has_feature(names[i]) != 1) continue;
		int n = snprintf(buf + at, size - at, "%s+%s", at ? "," : "", names[i]);
		if (n < 0 || (size_t)n >= size - at) {
			buf[at] = '\0';
			break;
		}
		at += (size_t)n;
	}
}

static bool has(const char *feature) {
	return tbcrt__host_has_feature(feature) == 1;
}


static const tbcrt__device_ops cpu_ops;

tbcrt_status tbcrt__cpu_enumerate(tbcrt_context *c, tbcrt__registry *r) {
	tbcrt_device_info info;
	memset(&info, 0, sizeof info);
	tbcrt__copy_string(info.name, sizeof info.name, "cpu");
	info.kind = TBCRT_DEVICE_CPU;
	info.available = true;
	cpu_name(info.device_name, sizeof info.device_name);
	cpu_vendor(info.vendor, sizeof info.vendor);
	tbcrt__copy_string(info.version, sizeof info.version, tbcrt__host_description());
	info.compute_units = tbcrt__pool_threads(c->pool);
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	info.global_memory_bytes = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
	info.max_alloc_bytes = info.global_memory_bytes && info.global_memory_bytes < TBCRT_MAX_TENSOR_BYTES
				       ? info.global_memory_bytes
				       : TBCRT_MAX_TENSOR_BYTES;
	info.local_memory_bytes = CPU_LOCAL_BYTES;
	info.max_work_group_size = CPU_MAX_GROUP;
	info.fp16 = has("f16c") || has("fullfp16");
	info.fp64 = true;
	cpu_features(info.features, sizeof info.features);
	return tbcrt__registry_add(r, &cpu_ops, &info, NULL, NULL);
}

static tbcrt_status cpu_open(tbcrt__device *d) {
	d->impl = d; /* nothing to open: the state is the context's */
	d->align_bytes = TBCRT_ARENA_ALIGN;
	return tbcrt__ok();
}

static void cpu_close(tbcrt__device *d) {
	d->impl = NULL;
}

static tbcrt_status cpu_buffer_alloc(tbcrt__device *d, tbcrt__buffer *b) {
	b->impl = tbcrt__alloc(d->context, b->bytes ? (size_t)b->bytes : 1, TBCRT_ARENA_ALIGN);
	if (!b->impl)
		return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory for a buffer of %llu bytes",
				  (unsigned long long)b->bytes);
	return tbcrt__ok();
}

static tbcrt_status cpu_buffer_view(tbcrt__device *d, tbcrt__buffer *b) {
	b->impl = (char *)b->parent->impl + b->offset;
	return tbcrt__ok();
}

static void cpu_buffer_free(tbcrt__device *d, tbcrt__buffer *b) {
	if (!b->parent) tbcrt__free(d->context, b->impl);
}

static tbcrt_status cpu_write(tbcrt__device *d, tbcrt__buffer *b, uint64_t offset, const void *src, uint64_t bytes) {
	memcpy((char *)b->impl + offset, src, (size_t)bytes);
	return tbcrt__ok();
}

static tbcrt_status cpu_read(tbcrt__device *d, const tbcrt__buffer *b, uint64_t offset, void *dst, uint64_t bytes) {
	memcpy(dst, (const char *)b->impl + offset, (size_t)bytes);
	return tbcrt__ok();
}

static tbcrt_status cpu_copy(tbcrt__device *d, tbcrt__buffer *dst, uint64_t dst_offset, const tbcrt__buffer *src,
			     uint64_t src_offset, uint64_t bytes) {
	memcpy((char *)dst->impl + dst_offset, (const char *)src->impl + src_offset, (size_t)bytes);
	return tbcrt__ok();
}

/* A CPU program is a copy of the caller's kernel table. */
typedef struct cpu_program {
	size_t count;
	tbcrt__host_kernel kernels[];
} cpu_program;

static tbcrt_status cpu_program_build(tbcrt__device *d, const tbcrt__program_desc *desc, tbcrt__program *p) {
	if (desc->kind != TBCRT__PROGRAM_HOST)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET,
				  "program '%s' is %s; the cpu device runs only code compiled for this host", desc->name,
				  desc->kind == TBCRT__PROGRAM_SOURCE ? "OpenCL C source" : "a device binary");
	size_t n = desc->size / sizeof(tbcrt__host_kernel);
	if (!n || desc->size % sizeof(tbcrt__host_kernel))
		return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "program '%s': %zu bytes is not a table of host kernels",
				  desc->name, desc->size);
	const tbcrt__host_kernel *table = desc->bytes;
	for (size_t i = 0; i < n; i++)
		if (!table[i].name || !table[i].fn)
			return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "program '%s': kernel %zu has no name or no code",
					  desc->name, i);
	cpu_program *cp = tbcrt__alloc(d->context, sizeof *cp + n * sizeof *table, 16);
	if (!cp) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory loading program '%s'", desc->name);
	cp->count = n;
	memcpy(cp->kernels, table, n * sizeof *table);
	p->impl = cp;
	return tbcrt__ok();
}

static void cpu_program_free(tbcrt__device *d, tbcrt__program *p) {
	tbcrt__free(d->context, p->impl);
}

static tbcrt_status cpu_kernel_create(tbcrt__device *d, tbcrt__program *p, const char *name, tbcrt__kernel *k) {
	const cpu_program *cp = p->impl;
	for (size_t i = 0; i < cp->count; i++)
		if (!strcmp(cp->kernels[i].name, name)) {
			k->impl = (void *)&cp->kernels[i];
			return tbcrt__ok();
		}
	return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "program '%s' has no kernel '%s'", p->name, name);
}

static void cpu_kernel_free(tbcrt__device *d, tbcrt__kernel *k) {
	k->impl = NULL;
}

typedef struct cpu_launch {
	const tbcrt_context *context;
	tbcrt__cpu_kernel_fn fn;
	const tbcrt__launch_desc *l;
	uint64_t local[3], groups[3];
	uint64_t local_bytes; /* every local argument, each 64-byte aligned */
	atomic_bool failed;
} cpu_launch;

static void cpu_groups(void *closure, int64_t begin, int64_t end) {
	cpu_launch *cl = closure;
	const tbcrt__launch_desc *l = cl->l;
	char *scratch = NULL;
	if (cl->local_bytes && !(scratch = tbcrt__alloc(cl->context, (size_t)cl->local_bytes, TBCRT_ARENA_ALIGN))) {
		atomic_store(&cl->failed, true);
		return;
	}
	void *args[TBCRT__MAX_ARGS];
	uint64_t at = 0;
	for (uint32_t i = 0; i < l->n_args; i++) {
		const tbcrt__arg *a = &l->args[i];
		if (a->kind == TBCRT__ARG_BUFFER) args[i] = a->buffer->impl;
		else if (a->kind == TBCRT__ARG_SCALAR) args[i] = (void *)a->value;
		else {
			args[i] = scratch + at;
			at += (a->bytes + TBCRT_ARENA_ALIGN - 1) / TBCRT_ARENA_ALIGN * TBCRT_ARENA_ALIGN;
		}
	}
	tbcrt__cpu_group g = {.dims = l->dims};
	for (uint32_t i = 0; i < 3; i++) {
		g.local_size[i] = cl->local[i];
		g.global_size[i] = i < l->dims ? l->global[i] : 1;
	}
	for (int64_t n = begin; n < end; n++) {
		uint64_t rest = (uint64_t)n;
		for (uint32_t i = 0; i < 3; i++) {
			g.group_id[i] = rest % cl->groups[i];
			rest /= cl->groups[i];
		}
		cl->fn(&g, args);
	}
	tbcrt__free(cl->context, scratch);
}

/* With no local size given, dim 0 takes its largest divisor up to 64. */
static uint64_t chosen_local(uint64_t global) {
	for (uint64_t l = global < 64 ? global : 64; l > 1; l--)
		if (global % l == 0) return l;
	return 1;
}

static tbcrt_status cpu_launch_kernel(tbcrt__device *d, tbcrt__kernel *k, const tbcrt__launch_desc *l) {
	cpu_launch cl = {.context = d->context, .fn = ((const tbcrt__host_kernel *)k->impl)->fn, .l = l};
	atomic_init(&cl.failed, false);
	uint64_t total = 1;
	for (uint32_t i = 0; i < 3; i++) {
		uint64_t global = i < l->dims ? l->global[i] : 1;
		cl.local[i] = i >= l->dims ? 1 : l->local[0] ? l->local[i] : i == 0 ? chosen_local(global) : 1;
		cl.groups[i] = global / cl.local[i];
		if (!tbcrt__mul_within(total, cl.groups[i], INT64_MAX, &total))
			return tbcrt__err(TBCRT_ERR_LIMIT, "too many work-groups");
	}
	for (uint32_t i = 0; i < l->n_args; i++)
		if (l->args[i].kind == TBCRT__ARG_LOCAL)
			cl.local_bytes += (l->args[i].bytes + TBCRT_ARENA_ALIGN - 1) / TBCRT_ARENA_ALIGN * TBCRT_ARENA_ALIGN;
	tbcrt__pool_parallel_for(d->context->pool, cpu_groups, &cl, (int64_t)total, 1);
	if (atomic_load(&cl.failed))
		return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory for %llu bytes of local memory",
				  (unsigned long long)cl.local_bytes);
	return tbcrt__ok();
}

static tbcrt_status cpu_synchronize(tbcrt__device *d) {
	return tbcrt__ok(); /* launches run to completion */
}

static const tbcrt__device_ops cpu_ops = {
	.kind = "cpu",
	.open = cpu_open,
	.close = cpu_close,
	.buffer_alloc = cpu_buffer_alloc,
	.buffer_view = cpu_buffer_view,
	.buffer_free = cpu_buffer_free,
	.write = cpu_write,
	.read = cpu_read,
	.copy = cpu_copy,
	.program_build = cpu_program_build,
	.program_free = cpu_program_free,
	.kernel_create = cpu_kernel_create,
	.kernel_free = cpu_kernel_free,
	.launch = cpu_launch_kernel,
	.synchronize = cpu_synchronize,
};
