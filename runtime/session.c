/* Sessions: one invocation's state.  Inputs are checked when bound (dtype,
 * rank, static dims, buffer size); at run the symbolic dims are resolved from
 * the inputs' shapes and must agree, outputs of known size go to the caller's
 * buffers or to buffers the session keeps, the arena is sized by the model's
 * arena_bytes(syms), and outputs of data-dependent size come back through
 * host->alloc.  Every host allocation of a run is freed after it, except the
 * data-dependent outputs, which live until the next run or destroy. */
#include <stdio.h>
#include <string.h>

#include "device_table.h"
#include "internal.h"

typedef struct {
	bool bound;
	const void *data;
	size_t bytes;
	int64_t dims[TBCRT_MAX_RANK];
} input_slot;

typedef struct {
	void *bound; /* caller memory, or NULL */
	size_t bound_bytes;
	void *owned; /* the session's buffer for an unbound output of known size */
	size_t owned_bytes;
	/* The last successful run's result. */
	void *data;
	size_t bytes;
	int64_t dims[TBCRT_MAX_RANK];
} output_slot;

typedef struct {
	void *ptr;
	uint64_t bytes;
} host_alloc;

/* A piece of training state: cur is what the next run reads, next what it
 * writes; a successful run swaps them (two buffers: the step's kernels may
 * read a weight after its update is computed, so it is never updated over
 * itself). */
typedef struct {
	void *cur, *next;
	size_t bytes;
	/* On a device the state stays there (device_session.c) and cur is a
	 * copy for tbcrt_session_state: handed out since the last run, which
	 * then writes it back first, as its caller may have changed it. */
	bool lent;
} state_slot;

struct tbcrt_session {
	tbcrt_model *model;
	tbcrt_context *context;
	input_slot *in;
	output_slot *out;
	const void **in_ptrs;
	void **out_ptrs;
	int64_t *syms;
	uint32_t *sym_from; /* input * TBCRT_MAX_RANK + dim that gave a symbol its value */
	void *arena;
	size_t arena_bytes;
	bool ran;
	tbc_abi_host host;
	pthread_mutex_t mu; /* guards what host callbacks touch: they may come from pool threads */
	host_alloc *allocs;
	size_t n_allocs, cap_allocs;
	bool failed;
	int32_t error_code;
	char error_message[384];
	state_slot *state;          /* model->n_state of them */
	/* Load-time values (ABI 5): computed into the arena when the session is
	 * created; a failure there is every run's error. */
	tbcrt_session_stats stats;
	int32_t init_code; /* 0: computed (or none) */
	char init_message[384];
	uint32_t device;            /* index in the context's device list */
	tbcrt__dsession *dsession; /* on a device other than the CPU: the launch table's state there */
};

/* "[batch,3,224]" for a model tensor, "[2,3,224]" for given dims. */
static void format_dims(char *buf, size_t size, const tbcrt__tensor *t, const int64_t *given) {
	size_t at = 0;
	buf[0] = '\0';
	at += (size_t)snprintf(buf, size, "[");
	for (uint32_t i = 0; i < t->rank && at < size; i++) {
		const char *sep = i ? "," : "";
		if (given) at += (size_t)snprintf(buf + at, size - at, "%s%lld", sep, (long long)given[i]);
		else if (t->sym[i] >= 0) at += (size_t)snprintf(buf + at, size - at, "%s%s", sep, t->sym_names[i]);
		else at += (size_t)snprintf(buf + at, size - at, "%s%lld", sep, (long long)t->dims[i]);
	}
	if (at < size) snprintf(buf + at, size - at, "]");
}

static void host_parallel_for(void *ctx, void (*body)(void *, int64_t, int64_t), void *closure, int64_t n,
			      int64_t grain) {
	tbcrt_session *s = ctx;
	tbcrt__pool_parallel_for(s->context->pool, body, closure, n, grain);
}

static void *host_alloc_fn(void *ctx, uint64_t bytes) {
	tbcrt_session *s = ctx;
	if (bytes > TBCRT_MAX_TENSOR_BYTES || bytes > SIZE_MAX) return NULL;
	pthread_mutex_lock(&s->mu);
	void *p = NULL;
	if (s->n_allocs == s->cap_allocs) {
		size_t cap = s->cap_allocs ? s->cap_allocs * 2 : 16;
		host_alloc *grown = tbcrt__calloc(s->context, cap, sizeof *grown);
		if (!grown) goto out;
		if (s->n_allocs) memcpy(grown, s->allocs, s->n_allocs * sizeof *grown);
		tbcrt__free(s->context, s->allocs);
		s->allocs = grown;
		s->cap_allocs = cap;
	}
	p = tbcrt__alloc(s->context, bytes ? (size_t)bytes : 1, TBCRT_ARENA_ALIGN);
	if (p) s->allocs[s->n_allocs++] = (host_alloc){p, bytes};
out:
	pthread_mutex_unlock(&s->mu);
	return p;
}

static int32_t host_error(void *ctx, int32_t code, const char *message) {
	tbcrt_session *s = ctx;
	if (code == 0) code = 1;
	pthread_mutex_lock(&s->mu);
	if (!s->failed) { /* the first error is the one to report */
		s->failed = true;
		s->error_code = code;
		snprintf(s->error_message, sizeof s->error_message, "%s", message ? message : "(no message)");
	}
	pthread_mutex_unlock(&s->mu);
	return code;
}

/* Frees the host allocations, keeping those still used as outputs when keep. */
static void release_allocs(tbcrt_session *s, bool keep) {
	size_t kept = 0;
	for (size_t i = 0; i < s->n_allocs; i++) {
		bool used = false;
		for (uint32_t o = 0; keep && o < s->model->n_outputs && !used; o++)
			used = s->model->outputs[o].data_dependent && s->out[o].data == s->allocs[i].ptr;
		if (used) s->allocs[kept++] = s->allocs[i];
		else tbcrt__free(s->context, s->allocs[i].ptr);
	}
	s->n_allocs = kept;
}

void tbcrt_session_options_init(tbcrt_session_options *o) {
	if (!o) return;
	memset(o, 0, sizeof *o);
	o->device = TBCRT_DEVICE_AUTO;
}

/* Whether m holds code for the device info describes. */
static bool runs_on(const tbcrt_model *m, const tbcrt_device_info *info) {
	return info->kind == TBCRT_DEVICE_CPU ? m->has_cpu_code : tbcrt__dtable_for(m, info) != NULL;
}

/* The device a session of m runs on (the registry's index) and, when it is
 * not the CPU, the device itself.  Without a choice, the first available
 * device m holds code for, in this order (docs/gpu-runtime.md): a CUDA GPU,
 * a HIP GPU, the CPU, an OpenCL device. */
static tbcrt_status choose_device(tbcrt_model *m, uint32_t want, uint32_t *out_index, tbcrt__device **out_device) {
	*out_device = NULL;
	tbcrt_context *c = m->context;
	uint32_t n = 0;
	tbcrt_status s = tbcrt_device_count(c, &n);
	if (s.code != TBCRT_OK) return s;
	tbcrt_device_info info;
	if (want == TBCRT_DEVICE_AUTO) {
		static const tbcrt_device_kind order[] = {TBCRT_DEVICE_CUDA, TBCRT_DEVICE_HIP, TBCRT_DEVICE_CPU,
							  TBCRT_DEVICE_OPENCL};
		char why[300] = "";
		for (size_t o = 0; o < sizeof order / sizeof *order && want == TBCRT_DEVICE_AUTO; o++)
			for (uint32_t i = 0; i < n && want == TBCRT_DEVICE_AUTO; i++) {
				if (tbcrt_device_info_get(c, i, &info).code != TBCRT_OK || info.kind != order[o]) continue;
				if (info.available && runs_on(m, &info)) want = i;
				else if (!info.available && !why[0] && info.kind == TBCRT_DEVICE_OPENCL)
					snprintf(why, sizeof why, ": %s", info.unavailable_reason);
			}
		if (want == TBCRT_DEVICE_AUTO)
			return tbcrt__err(TBCRT_ERR_DEVICE_UNAVAILABLE,
					  "model '%s' holds code for %s only, and this machine has no device that runs it%s", m->name,
					  m->device_targets, why);
	}
	if (want >= n)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "device index %u is out of range: this machine has %u devices", want,
				  n);
	if ((s = tbcrt_device_info_get(c, want, &info)).code != TBCRT_OK) return s;
	*out_index = want;
	if (!runs_on(m, &info)) {
		if (info.kind == TBCRT_DEVICE_CPU)
			return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET,
					  "model '%s' holds no CPU code (compiled with --target %s): run it on one of those "
					  "devices, or compile it with --target cpu,...",
					  m->name, m->device_targets);
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET,
				  "model '%s' holds no code for %s (%s%s%s): it was compiled for %s%s%s; compile it with "
				  "--target naming that device",
				  m->name, info.name, tbcrt_device_kind_name(info.kind), info.arch[0] ? " " : "", info.arch,
				  m->has_cpu_code ? "the CPU" : "", m->has_cpu_code && m->device_targets[0] ? " and " : "",
				  m->device_targets);
	}
	if (info.kind == TBCRT_DEVICE_CPU) return tbcrt__ok();
	return tbcrt__device_get(c, info.name, out_device);
}

tbcrt_status tbcrt_session_create(tbcrt_model *m, tbcrt_session **out_session) {
	return tbcrt_session_create_with(m, NULL, out_session);
}

tbcrt_status tbcrt_session_device(const tbcrt_session *s, uint32_t *out_device) {
	if (!out_device) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_device: out_device is NULL");
	*out_device = 0;
	if (!s) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_device: session is NULL");
	*out_device = s->device;
	return tbcrt__ok();
}

/* The state's buffers, each starting from its value in the weights (or
 * zeros).  On a device cur is the copy tbcrt_session_state hands out and
 * there is no next: the state itself is the device's (device_session.c). */
static tbcrt_status state_create(tbcrt_session *s, bool on_device) {
	const tbcrt_model *m = s->model;
	s->state = tbcrt__calloc(s->context, m->n_state, sizeof *s->state);
	if (!s->state) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory for the training state");
	for (uint32_t k = 0; k < m->n_state; k++) {
		const tbcrt__tensor *t = &m->inputs[m->state[k].input];
		size_t bytes = tbcrt_dtype_size(t->dtype); /* static and within the limit: validate.c */
		for (uint32_t i = 0; i < t->rank; i++) bytes *= (size_t)t->dims[i];
		state_slot *st = &s->state[k];
		st->bytes = bytes;
		st->cur = tbcrt__alloc(s->context, bytes ? bytes : 1, TBCRT_ARENA_ALIGN);
		st->next = on_device ? NULL : tbcrt__alloc(s->context, bytes ? bytes : 1, TBCRT_ARENA_ALIGN);
		if (!st->cur || (!on_device && !st->next))
			return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory for the training state '%s' (%zu bytes)", t->name, bytes);
		if (m->state[k].init_offset == TBC_ABI_STATE_ZEROS) memset(st->cur, 0, bytes);
		else memcpy(st->cur, (const char *)m->weights + m->state[k].init_offset, bytes);
	}
	return tbcrt__ok();
}

/* Computes the load-time values into a new arena of init_end bytes (runs
 * grow it keeping them: prepare_arena).  Out of memory fails the session;
 * a failure of init itself (a check of a kernel) fails every run as it
 * failed before they were split off. */
static tbcrt_status run_init(tbcrt_session *s) {
	const tbcrt_model *m = s->model;
	size_t need = m->init_end ? (size_t)m->init_end : 1;
	s->arena = tbcrt__alloc(s->context, need, TBCRT_ARENA_ALIGN);
	if (!s->arena)
		return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory for the load-time values (%llu bytes)",
				  (unsigned long long)m->init_end);
	s->arena_bytes = (size_t)m->init_end;
	s->failed = false;
	int32_t rc = m->init(&s->host, s->arena, m->weights);
	s->stats.init_runs++;
	s->stats.init_bytes = m->init_end - m->init_begin;
	if (s->failed || rc != 0) {
		s->init_code = s->failed ? s->error_code : rc;
		snprintf(s->init_message, sizeof s->init_message, "%s",
			 s->failed ? s->error_message : "(its load-time values failed and reported no error)");
	}
	s->failed = false;
	return tbcrt__ok();
}

tbcrt_status tbcrt_session_create_with(tbcrt_model *m, const tbcrt_session_options *options,
				       tbcrt_session **out_session) {
	if (!out_session) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_create: out_session is NULL");
	*out_session = NULL;
	if (!m) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_create: model is NULL");
	tbcrt_context *c = m->context;
	uint32_t device = 0;
	tbcrt__device *dev = NULL;
	tbcrt_status ds = choose_device(m, options ? options->device : TBCRT_DEVICE_AUTO, &device, &dev);
	if (ds.code != TBCRT_OK) return ds;
	tbcrt_session *s = tbcrt__calloc(c, 1, sizeof *s);
	if (!s) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "tbcrt_session_create: out of memory");
	s->model = m;
	s->context = c;
	tbcrt__model_retain(m);
	pthread_mutex_init(&s->mu, NULL);
	s->host = (tbc_abi_host){.ctx = s, .parallel_for = host_parallel_for, .alloc = host_alloc_fn, .error = host_error};
	uint32_t ni = m->n_inputs ? m->n_inputs : 1, no = m->n_outputs ? m->n_outputs : 1, ns = m->n_syms ? m->n_syms : 1;
	s->in = tbcrt__calloc(c, ni, sizeof *s->in);
	s->out = tbcrt__calloc(c, no, sizeof *s->out);
	s->in_ptrs = tbcrt__calloc(c, ni, sizeof *s->in_ptrs);
	s->out_ptrs = tbcrt__calloc(c, no, sizeof *s->out_ptrs);
	s->syms = tbcrt__calloc(c, ns, sizeof *s->syms);
	s->sym_from = tbcrt__calloc(c, ns, sizeof *s->sym_from);
	if (!s->in || !s->out || !s->in_ptrs || !s->out_ptrs || !s->syms || !s->sym_from) {
		tbcrt_session_destroy(s);
		return tbcrt__err(TBCRT_ERR_NO_MEMORY, "tbcrt_session_create: out of memory");
	}
	s->device = device;
	if (m->n_state && (ds = state_create(s, dev != NULL)).code != TBCRT_OK) {
		tbcrt_session_destroy(s);
		return ds;
	}
	if (dev && (ds = tbcrt__dsession_create(m, dev, &s->dsession)).code != TBCRT_OK) {
		tbcrt_session_destroy(s);
		return ds;
	}
	if (dev) s->stats.device_code = tbcrt__dsession_loaded(s->dsession);
	if (!dev && m->init && (ds = run_init(s)).code != TBCRT_OK) {
		tbcrt_session_destroy(s);
		return ds;
	}
	*out_session = s;
	return tbcrt__ok();
}

void tbcrt_session_destroy(tbcrt_session *s) {
	if (!s) return;
	tbcrt_context *c = s->context;
	tbcrt__dsession_destroy(s->dsession);
	release_allocs(s, false);
	tbcrt__free(c, s->allocs);
	for (uint32_t o = 0; s->out && o < s->model->n_outputs; o++) tbcrt__free(c, s->out[o].owned);
	for (uint32_t k = 0; s->state && k < s->model->n_state; k++) {
		tbcrt__free(c, s->state[k].cur);
		tbcrt__free(c, s->state[k].next);
	}
	tbcrt__free(c, s->state);
	tbcrt__free(c, s->arena);
	tbcrt__free(c, s->in);
	tbcrt__free(c, s->out);
	tbcrt__free(c, s->in_ptrs);
	tbcrt__free(c, s->out_ptrs);
	tbcrt__free(c, s->syms);
	tbcrt__free(c, s->sym_from);
	pthread_mutex_destroy(&s->mu);
	tbcrt_model *m = s->model;
	tbcrt__free(c, s);
	tbcrt__model_release(m);
}

/* Bytes of a tensor of dtype and dims; false past the limit. */
static bool tensor_bytes(int32_t dtype, uint32_t rank, const int64_t *dims, uint64_t *out) {
	uint64_t b = tbcrt_dtype_size(dtype);
	for (uint32_t i = 0; i < rank; i++)
		if (dims[i] < 0 || !tbcrt__mul_within(b, (uint64_t)dims[i], TBCRT_MAX_TENSOR_BYTES, &b)) return false;
	*out = b;
	return true;
}

tbcrt_status tbcrt_session_bind_input(tbcrt_session *s, uint32_t index, int32_t dtype, uint32_t rank,
				      const int64_t *dims, const void *data, size_t bytes) {
	if (!s) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_bind_input: session is NULL");
	const tbcrt_model *m = s->model;
	if (index >= m->n_inputs)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "input index %u is out of range: model '%s' has %u inputs", index,
				  m->name, m->n_inputs);
	const tbcrt__tensor *t = &m->inputs[index];
	if (m->state_of_input && m->state_of_input[index] >= 0)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT,
				  "input '%s' is training state the session holds; set it with tbcrt_session_set_state", t->name);
	input_slot *slot = &s->in[index];
	slot->bound = false;
	char want[512], got[512];
	if (dtype != t->dtype)
		return tbcrt__err(TBCRT_ERR_DTYPE_MISMATCH, "input '%s': given %s, the model takes %s", t->name,
				  tbcrt_dtype_name(dtype), tbcrt_dtype_name(t->dtype));
	if (rank > TBCRT_MAX_RANK || (rank > 0 && !dims))
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "input '%s': rank %u without dims, or past the limit of %d",
				  t->name, rank, TBCRT_MAX_RANK);
	format_dims(want, sizeof want, t, NULL);
	if (rank != t->rank) {
		return tbcrt__err(TBCRT_ERR_SHAPE_MISMATCH, "input '%s': given rank %u, the model takes rank %u %s", t->name,
				  rank, t->rank, want);
	}
	format_dims(got, sizeof got, t, dims);
	for (uint32_t i = 0; i < rank; i++) {
		if (dims[i] < 0)
			return tbcrt__err(TBCRT_ERR_SHAPE_MISMATCH, "input '%s': dim %u is negative (shape %s)", t->name, i, got);
		if (t->sym[i] < 0 && dims[i] != t->dims[i])
			return tbcrt__err(TBCRT_ERR_SHAPE_MISMATCH, "input '%s': given shape %s, the model takes %s (dim %u must be %lld)",
					  t->name, got, want, i, (long long)t->dims[i]);
	}
	uint64_t need;
	if (!tensor_bytes(dtype, rank, dims, &need))
		return tbcrt__err(TBCRT_ERR_LIMIT, "input '%s': shape %s is larger than the limit of %llu bytes", t->name, got,
				  (unsigned long long)TBCRT_MAX_TENSOR_BYTES);
	if (bytes < need)
		return tbcrt__err(TBCRT_ERR_SHAPE_MISMATCH, "input '%s': shape %s %s needs %llu bytes; the buffer holds %zu",
				  t->name, got, tbcrt_dtype_name(dtype), (unsigned long long)need, bytes);
	if (!data && need > 0)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "input '%s': data is NULL", t->name);
	slot->bound = true;
	slot->data = data;
	slot->bytes = bytes;
	memcpy(slot->dims, dims, rank * sizeof *dims);
	return tbcrt__ok();
}

tbcrt_status tbcrt_session_bind_output(tbcrt_session *s, uint32_t index, void *data, size_t bytes) {
	if (!s) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_bind_output: session is NULL");
	const tbcrt_model *m = s->model;
	if (index >= m->n_outputs)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "output index %u is out of range: model '%s' has %u outputs", index,
				  m->name, m->n_outputs);
	if (m->state_of_output && m->state_of_output[index] >= 0)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT,
				  "output '%s' is training state the session holds; read it with tbcrt_session_state",
				  m->outputs[index].name);
	if (m->outputs[index].data_dependent && data)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT,
				  "output '%s' has a data-dependent size and cannot be bound; read it with tbcrt_session_output "
				  "after the run",
				  m->outputs[index].name);
	s->out[index].bound = data;
	s->out[index].bound_bytes = data ? bytes : 0;
	return tbcrt__ok();
}

/* Symbol values from the bound inputs; they must agree. */
static tbcrt_status resolve_symbols(tbcrt_session *s) {
	const tbcrt_model *m = s->model;
	for (uint32_t k = 0; k < m->n_syms; k++) s->syms[k] = -1;
	for (uint32_t i = 0; i < m->n_inputs; i++) {
		const tbcrt__tensor *t = &m->inputs[i];
		if (!s->in[i].bound)
			return tbcrt__err(TBCRT_ERR_NOT_READY, "input '%s' is not bound", t->name);
		for (uint32_t d = 0; d < t->rank; d++) {
			int32_t k = t->sym[d];
			if (k < 0) continue;
			int64_t v = s->in[i].dims[d];
			if (s->syms[k] < 0) {
				s->syms[k] = v;
				s->sym_from[k] = i * TBCRT_MAX_RANK + d;
			} else if (s->syms[k] != v) {
				uint32_t fi = s->sym_from[k] / TBCRT_MAX_RANK, fd = s->sym_from[k] % TBCRT_MAX_RANK;
				return tbcrt__err(TBCRT_ERR_SHAPE_MISMATCH,
						  "input '%s' dim %u is %lld, but symbol '%s' is %lld from input '%s' dim %u", t->name, d,
						  (long long)v, m->sym_names[k], (long long)s->syms[k], m->inputs[fi].name, fd);
			}
		}
	}
	/* Derived symbols (past_seq + seq) follow from the inputs' ones. */
	uint32_t bad = tbc_abi_derive_syms(m->n_syms, m->sym_derived, m->sym_poly, s->syms);
	if (bad < m->n_syms)
		return tbcrt__err(TBCRT_ERR_SHAPE_MISMATCH,
				  "the inputs' sizes make symbol '%s' negative or too large: they fit no valid shape of the model",
				  m->sym_names[bad]);
	return tbcrt__ok();
}

static void output_dims(const tbcrt_session *s, const tbcrt__tensor *t, int64_t *dims) {
	for (uint32_t d = 0; d < t->rank; d++) dims[d] = t->sym[d] >= 0 ? s->syms[t->sym[d]] : t->dims[d];
}

/* Buffers for the outputs of known size. */
static tbcrt_status prepare_outputs(tbcrt_session *s) {
	const tbcrt_model *m = s->model;
	for (uint32_t o = 0; o < m->n_outputs; o++) {
		const tbcrt__tensor *t = &m->outputs[o];
		output_slot *slot = &s->out[o];
		s->out_ptrs[o] = NULL;
		if (t->data_dependent) continue;
		output_dims(s, t, slot->dims);
		uint64_t need;
		char shape[512];
		format_dims(shape, sizeof shape, t, slot->dims);
		if (!tensor_bytes(t->dtype, t->rank, slot->dims, &need))
			return tbcrt__err(TBCRT_ERR_LIMIT, "output '%s': shape %s is larger than the limit of %llu bytes", t->name,
					  shape, (unsigned long long)TBCRT_MAX_TENSOR_BYTES);
		slot->bytes = (size_t)need;
		if (slot->bound) {
			if (slot->bound_bytes < need)
				return tbcrt__err(TBCRT_ERR_SHAPE_MISMATCH,
						  "output '%s': shape %s %s needs %llu bytes; the bound buffer holds %zu", t->name,
						  shape, tbcrt_dtype_name(t->dtype), (unsigned long long)need, slot->bound_bytes);
			slot->data = slot->bound;
		} else {
			if (!slot->owned || slot->owned_bytes < need) {
				tbcrt__free(s->context, slot->owned);
				slot->owned_bytes = 0;
				slot->owned = tbcrt__alloc(s->context, need ? (size_t)need : 1, TBCRT_ARENA_ALIGN);
				if (!slot->owned)
					return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory for output '%s' (%llu bytes)", t->name,
							  (unsigned long long)need);
				slot->owned_bytes = (size_t)need;
			}
			slot->data = slot->owned;
		}
		s->out_ptrs[o] = slot->data;
	}
	return tbcrt__ok();
}

static tbcrt_status prepare_arena(tbcrt_session *s) {
	const tbcrt_model *m = s->model;
	/* arena_bytes sees 0 for the symbols run computes: their values are not
	 * known yet, so the arena cannot depend on them. */
	for (uint32_t k = 0; k < m->n_syms; k++)
		if (m->sym_computed[k]) s->syms[k] = 0;
	uint64_t need = m->desc->arena_bytes(s->syms);
	if (need > TBCRT_MAX_TENSOR_BYTES || need > SIZE_MAX)
		return tbcrt__err(TBCRT_ERR_LIMIT, "model '%s' asks for an arena of %llu bytes, past the limit of %llu", m->name,
				  (unsigned long long)need, (unsigned long long)TBCRT_MAX_TENSOR_BYTES);
	if (m->init && need < m->init_end)
		return tbcrt__err(TBCRT_ERR_RUN_FAILED, "model '%s' asks for an arena of %llu bytes, short of its load-time values",
				  m->name, (unsigned long long)need);
	if (need > s->arena_bytes) {
		void *grown = tbcrt__alloc(s->context, (size_t)need, TBCRT_ARENA_ALIGN);
		if (!grown)
			return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory for the arena (%llu bytes)", (unsigned long long)need);
		/* The load-time values stay: computed once per session. */
		if (m->init && s->arena)
			memcpy((char *)grown + m->init_begin, (const char *)s->arena + m->init_begin,
			       (size_t)(m->init_end - m->init_begin));
		tbcrt__free(s->context, s->arena);
		s->arena = grown;
		s->arena_bytes = (size_t)need;
	}
	for (uint32_t k = 0; k < m->n_syms; k++)
		if (m->sym_computed[k]) s->syms[k] = -1;
	return tbcrt__ok();
}

static const host_alloc *find_alloc(const tbcrt_session *s, const void *p) {
	for (size_t i = 0; i < s->n_allocs; i++)
		if (s->allocs[i].ptr == p) return &s->allocs[i];
	return NULL;
}

/* After run: computed symbols set, data-dependent outputs allocated through
 * host->alloc and large enough, other outputs where we put them. */
static tbcrt_status collect_outputs(tbcrt_session *s) {
	const tbcrt_model *m = s->model;
	for (uint32_t k = 0; k < m->n_syms; k++)
		if (m->sym_computed[k] && s->syms[k] < 0)
			return tbcrt__err(TBCRT_ERR_RUN_FAILED, "model '%s' left its computed symbol '%s' unset (%lld)", m->name,
					  m->sym_names[k], (long long)s->syms[k]);
	for (uint32_t o = 0; o < m->n_outputs; o++) {
		const tbcrt__tensor *t = &m->outputs[o];
		output_slot *slot = &s->out[o];
		if (!t->data_dependent) {
			if (s->out_ptrs[o] != slot->data)
				return tbcrt__err(TBCRT_ERR_RUN_FAILED, "model '%s' replaced the buffer of output '%s'", m->name,
						  t->name);
			continue;
		}
		output_dims(s, t, slot->dims);
		uint64_t need;
		if (!tensor_bytes(t->dtype, t->rank, slot->dims, &need))
			return tbcrt__err(TBCRT_ERR_RUN_FAILED, "model '%s' gave output '%s' a shape past the limit", m->name,
					  t->name);
		const host_alloc *a = find_alloc(s, s->out_ptrs[o]);
		if (!a)
			return tbcrt__err(TBCRT_ERR_RUN_FAILED, "model '%s' returned output '%s' in memory not from host->alloc",
					  m->name, t->name);
		if (a->bytes < need)
			return tbcrt__err(TBCRT_ERR_RUN_FAILED,
					  "model '%s' returned output '%s' in %llu bytes; its shape needs %llu", m->name, t->name,
					  (unsigned long long)a->bytes, (unsigned long long)need);
		for (uint32_t p = 0; p < o; p++)
			if (m->outputs[p].data_dependent && s->out_ptrs[p] == s->out_ptrs[o])
				return tbcrt__err(TBCRT_ERR_RUN_FAILED, "model '%s' returned outputs '%s' and '%s' in one buffer",
						  m->name, m->outputs[p].name, t->name);
		slot->data = s->out_ptrs[o];
		slot->bytes = (size_t)need;
	}
	return tbcrt__ok();
}

tbcrt_status tbcrt_session_run(tbcrt_session *s) {
	if (!s) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_run: session is NULL");
	const tbcrt_model *m = s->model;
	s->ran = false;
	for (uint32_t o = 0; o < m->n_outputs; o++) s->out[o].data = NULL;
	release_allocs(s, false); /* the previous run's data-dependent outputs */
	for (uint32_t k = 0; k < m->n_state; k++) { /* the state binds itself */
		const tbcrt__tensor *t = &m->inputs[m->state[k].input];
		input_slot *in = &s->in[m->state[k].input];
		in->bound = true;
		in->data = s->state[k].cur;
		in->bytes = s->state[k].bytes;
		memcpy(in->dims, t->dims, t->rank * sizeof *t->dims);
		/* on a device the state's outputs stay there: the slot is never written */
		s->out[m->state[k].output].bound = s->dsession ? s->state[k].cur : s->state[k].next;
		s->out[m->state[k].output].bound_bytes = s->state[k].bytes;
	}
	tbcrt_status st = resolve_symbols(s);
	if (st.code == TBCRT_OK) st = prepare_outputs(s);
	if (st.code == TBCRT_OK && !s->dsession) st = prepare_arena(s);
	if (st.code != TBCRT_OK) return st;
	for (uint32_t i = 0; i < m->n_inputs; i++) s->in_ptrs[i] = s->in[i].data;
	s->failed = false;
	s->error_code = 0;
	s->error_message[0] = '\0';
	int32_t rc = 0;
	if (s->dsession) { /* the launch table on the session's device */
		for (uint32_t k = 0; k < m->n_syms; k++)
			if (m->sym_computed[k]) s->syms[k] = -1;
		for (uint32_t k = 0; k < m->n_state; k++) {
			if (!s->state[k].lent) continue;
			st = tbcrt__dsession_state_write(s->dsession, k, s->state[k].cur);
			if (st.code != TBCRT_OK) return st;
			s->state[k].lent = false;
		}
		st = tbcrt__dsession_run(s->dsession, s->syms, s->in_ptrs, s->out_ptrs, host_alloc_fn, s);
		if (st.code != TBCRT_OK) {
			release_allocs(s, false);
			return st;
		}
	} else if (s->init_code) { /* the load-time values failed: so does the run, as it did when it computed them */
		host_error(s, s->init_code, s->init_message);
	} else {
		rc = m->desc->run(&s->host, s->syms, (void *const *)s->in_ptrs, s->out_ptrs, s->arena, m->weights);
	}
	if (s->failed)
		st = tbcrt__err(TBCRT_ERR_RUN_FAILED, "model '%s' failed (code %d): %s", m->name, (int)s->error_code,
				s->error_message);
	else if (rc != 0)
		st = tbcrt__err(TBCRT_ERR_RUN_FAILED, "model '%s' failed with code %d and reported no error", m->name, (int)rc);
	else
		st = collect_outputs(s);
	if (st.code != TBCRT_OK) {
		for (uint32_t o = 0; o < m->n_outputs; o++)
			if (m->outputs[o].data_dependent) s->out[o].data = NULL;
		release_allocs(s, false);
		return st;
	}
	release_allocs(s, true);
	if (s->dsession) tbcrt__dsession_state_commit(s->dsession);
	for (uint32_t k = 0; !s->dsession && k < m->n_state; k++) { /* the step's output is the next step's input */
		void *t = s->state[k].cur;
		s->state[k].cur = s->state[k].next;
		s->state[k].next = t;
	}
	s->ran = true;
	s->stats.runs++;
	return st;
}

static tbcrt_status state_slot_of(tbcrt_session *s, uint32_t index, const char *fn, state_slot **out) {
	if (!s) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "%s: session is NULL", fn);
	if (index >= s->model->n_state)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "%s: state index %u is out of range: model '%s' holds %u", fn,
				  index, s->model->name, s->model->n_state);
	*out = &s->state[index];
	return tbcrt__ok();
}

tbcrt_status tbcrt_session_state(tbcrt_session *s, uint32_t index, tbcrt_tensor *out_tensor) {
	if (!out_tensor) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_state: out_tensor is NULL");
	memset(out_tensor, 0, sizeof *out_tensor);
	state_slot *st = NULL;
	tbcrt_status r = state_slot_of(s, index, "tbcrt_session_state", &st);
	if (r.code != TBCRT_OK) return r;
	const tbcrt__tensor *t = &s->model->inputs[s->model->state[index].input];
	out_tensor->dtype = t->dtype;
	out_tensor->rank = t->rank;
	memcpy(out_tensor->dims, t->dims, t->rank * sizeof *t->dims);
	if (s->dsession && !st->lent) { /* a copy of the device's */
		r = tbcrt__dsession_state_read(s->dsession, index, st->cur);
		if (r.code != TBCRT_OK) return r;
		st->lent = true;
	}
	out_tensor->data = st->cur;
	out_tensor->bytes = st->bytes;
	return tbcrt__ok();
}

tbcrt_status tbcrt_session_set_state(tbcrt_session *s, uint32_t index, const void *data, size_t bytes) {
	state_slot *st = NULL;
	tbcrt_status r = state_slot_of(s, index, "tbcrt_session_set_state", &st);
	if (r.code != TBCRT_OK) return r;
	const char *name = s->model->inputs[s->model->state[index].input].name;
	if (bytes != st->bytes || (!data && bytes))
		return tbcrt__err(TBCRT_ERR_SHAPE_MISMATCH, "state '%s' holds %zu bytes; %zu were given", name, st->bytes, bytes);
	if (bytes) memcpy(st->cur, data, bytes);
	if (s->dsession) st->lent = false;
	return s->dsession ? tbcrt__dsession_state_write(s->dsession, index, st->cur) : tbcrt__ok();
}

tbcrt_status tbcrt_session_get_stats(const tbcrt_session *s, tbcrt_session_stats *out_stats) {
	if (!out_stats) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_get_stats: out_stats is NULL");
	memset(out_stats, 0, sizeof *out_stats);
	if (!s) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_get_stats: session is NULL");
	*out_stats = s->stats;
	return tbcrt__ok();
}

tbcrt_status tbcrt_session_output(const tbcrt_session *s, uint32_t index, tbcrt_tensor *out_tensor) {
	if (!out_tensor) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_output: out_tensor is NULL");
	memset(out_tensor, 0, sizeof *out_tensor);
	if (!s) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_output: session is NULL");
	const tbcrt_model *m = s->model;
	if (index >= m->n_outputs)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "output index %u is out of range: model '%s' has %u outputs", index,
				  m->name, m->n_outputs);
	if (!s->ran) return tbcrt__err(TBCRT_ERR_NOT_READY, "output '%s': the session has no successful run", m->outputs[index].name);
	const tbcrt__tensor *t = &m->outputs[index];
	out_tensor->dtype = t->dtype;
	out_tensor->rank = t->rank;
	memcpy(out_tensor->dims, s->out[index].dims, t->rank * sizeof *t->dims);
	out_tensor->data = s->out[index].data;
	out_tensor->bytes = s->out[index].bytes;
	return tbcrt__ok();
}

tbcrt_status tbcrt_session_symbol(const tbcrt_session *s, const char *name, int64_t *out_value) {
	if (!out_value) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_symbol: out_value is NULL");
	*out_value = 0;
	if (!s || !name) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_symbol: session or name is NULL");
	const tbcrt_model *m = s->model;
	for (uint32_t k = 0; k < m->n_syms; k++) {
		if (strcmp(m->sym_names[k], name) != 0) continue;
		if (!s->ran) return tbcrt__err(TBCRT_ERR_NOT_READY, "symbol '%s': the session has no successful run", name);
		*out_value = s->syms[k];
		return tbcrt__ok();
	}
	return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "model '%s' has no symbol named '%s'", m->name, name);
}

/* ---- Profiling ---- */
tbcrt_status tbcrt_session_set_profiling(tbcrt_session *s, bool on) {
	if (!s) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_set_profiling: session is NULL");
	if (!s->dsession)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET,
				  "tbcrt_session_set_profiling: the session runs on the CPU; profiling times a GPU's kernels");
	return tbcrt__dsession_set_profiling(s->dsession, on);
}

static tbcrt_status profile(const tbcrt_session *s, uint32_t kernel, tbcrt_kernel_profile *k,
			    tbcrt_session_profile *p) {
	if (!s || !(k || p)) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_session_get_profile: NULL argument");
	if (!s->dsession)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET, "the session runs on the CPU: it has no profile");
	tbcrt_kernel_profile kk = {0};
	tbcrt_session_profile pp = {0};
	tbcrt_status st = tbcrt__dsession_profile(s->dsession, kernel, &kk.name, &kk.launches, &kk.ms, &pp.runs,
						  &pp.device_ms, &pp.n_kernels);
	if (st.code != TBCRT_OK) return st;
	if (k) *k = kk;
	if (p) *p = pp;
	return st;
}

tbcrt_status tbcrt_session_get_profile(const tbcrt_session *s, tbcrt_session_profile *out) {
	return profile(s, UINT32_MAX, NULL, out);
}

tbcrt_status tbcrt_session_kernel_profile(const tbcrt_session *s, uint32_t kernel, tbcrt_kernel_profile *out) {
	if (kernel == UINT32_MAX) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "kernel %u: no such kernel", kernel);
	return profile(s, kernel, out, NULL);
}
