/* Running an artifact's launch table (device_table.h) on a device: the
 * walk kir_program_run does in the compiler (codegen/host/program.c), over device
 * buffers.  Per model and device, once: the program built (or found in the
 * device's cache), its kernels, the weights uploaded and every constant a
 * view of them.  Per session: one arena buffer whose views hold the
 * temporaries at the compiler's offsets, the inputs' and outputs' buffers,
 * the symbols and the status word.  Per run: inputs written, launches
 * queued in order with If/Loop markers decided on the host, the symbols
 * read back after each kernel that stores them (shape kernels), so buffers
 * of data-dependent size are allocated once those are known; the status
 * words (one per launch) read before the symbols are and at the end, not
 * after every kernel with checks; outputs read back at the end. */
#include <stdio.h>
#include <string.h>

#include "device_table.h"

typedef struct tbcrt__dmodel {
	struct tbcrt__dmodel *next;
	tbcrt__device *device;
	const tbcrt__dtable *t; /* the artifact's table for the device */
	tbcrt__program *program;
	tbcrt__kernel **kernels;
	tbcrt__buffer *weights;
	tbcrt__buffer **consts; /* per buffer: a constant root's view of the weights, or its own copy */
	char loaded[96];        /* what the device loaded (tbcrt_session_stats.device_code) */
} tbcrt__dmodel;

struct tbcrt__dsession {
	tbcrt_model *m;
	const tbcrt__dtable *t;
	tbcrt__dmodel *dm;
	tbcrt__device *dev;
	tbcrt__buffer *arena;
	uint64_t arena_bytes;
	tbcrt__buffer **buf; /* per root buffer: its memory (owned; a constant's is the model's) */
	uint64_t *cap;       /* bytes of buf[r] */
	int64_t *at;         /* arena offset of a view; -1: a buffer of its own */
	bool *placed;        /* this run */
	int64_t *offsets;
	tbcrt__buffer *syms;
	/* The status words: one slot per launch, `slot` bytes apart (the view
	 * alignment), zero until a check of that launch fails (the kernel's
	 * message number, set once); read when the host needs the run's state
	 * (symbols read back, the run's end), not after every kernel. */
	tbcrt__buffer *status;
	tbcrt__buffer **status_views; /* per launch, made on its first use */
	uint64_t slot;
	bool status_dirty; /* a slot was seen set: zero them before the next run */
	/* Profiling (tbcrt_session_set_profiling): per kernel of the table, its
	 * launches and their device milliseconds over the runs since it was
	 * turned on; the marks of the run in progress, two per launch. */
	bool profiling;
	uint64_t *prof_launches;
	double *prof_ms;
	uint64_t prof_runs;
	double prof_device_ms;
	tbcrt__event **marks;
	uint32_t *mark_kernel; /* per pair */
	uint32_t n_marks, cap_marks;
	/* A training step's state (m->state), kept on the device between runs:
	 * per piece, the buffer the next run reads and the one it writes,
	 * swapped after a successful run (never updated over itself, as on the
	 * CPU); per root buffer, the piece it reads or writes, -1 for none. */
	tbcrt__buffer **state_cur, **state_next;
	uint64_t *state_bytes;
	int32_t *state_in, *state_out;
};

static bool is_state_root(const tbcrt__dsession *s, uint32_t r) {
	return s->state_in && (s->state_in[r] >= 0 || s->state_out[r] >= 0);
}

static void dmodel_free(tbcrt__dmodel *dm, const tbcrt_context *c) {
	const tbcrt__dtable *t = dm->t;
	for (uint32_t i = 0; dm->consts && i < t->n_bufs; i++) tbcrt__buffer_free(dm->consts[i]);
	tbcrt__buffer_free(dm->weights);
	for (uint32_t i = 0; dm->kernels && i < t->n_kernels; i++) tbcrt__kernel_destroy(dm->kernels[i]);
	tbcrt__program_release(dm->program);
	tbcrt__free(c, dm->consts);
	tbcrt__free(c, dm->kernels);
	tbcrt__free(c, dm);
}

void tbcrt__dmodels_free(tbcrt_model *m) {
	for (tbcrt__dmodel *dm = m->dmodels, *next; dm; dm = next) {
		next = dm->next;
		dmodel_free(dm, m->context);
	}
	m->dmodels = NULL;
}

/* What runs a table of each kind, and how its program is named. */
typedef struct table_kind {
	int32_t kind;
	tbcrt_device_kind device;
	tbcrt__program_kind program;
	const char *extension;
} table_kind;

static const table_kind *kind_of(int32_t kind) {
	static const table_kind kinds[] = {
		{TBC_ABI_DEVICE_OPENCL_C, TBCRT_DEVICE_OPENCL, TBCRT__PROGRAM_SOURCE, "cl"},
		{TBC_ABI_DEVICE_PTX, TBCRT_DEVICE_CUDA, TBCRT__PROGRAM_BINARY, "ptx"},
		{TBC_ABI_DEVICE_AMDGPU_ELF, TBCRT_DEVICE_HIP, TBCRT__PROGRAM_BINARY, "hsaco"},
	};
	for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
		if (kinds[i].kind == kind) return &kinds[i];
	return &kinds[0]; /* unreachable: device_table.c admits no other kind */
}

static uint64_t align_of(const tbcrt__device *d) { return d->align_bytes ? d->align_bytes : TBCRT_ARENA_ALIGN; }

static tbcrt_status dmodel_open(tbcrt_model *m, tbcrt__device *d, tbcrt__dmodel **out) {
	const tbcrt__dtable *t = tbcrt__dtable_for(m, &d->info);
	if (!t)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET, "model '%s' holds no code for %s%s%s%s (it holds %s)", m->name,
				  d->info.name, d->info.arch[0] ? " (" : "", d->info.arch, d->info.arch[0] ? ")" : "",
				  m->device_targets[0] ? m->device_targets : "no device code");
	const tbcrt_context *c = m->context;
	tbcrt__dmodel *dm = tbcrt__calloc(c, 1, sizeof *dm);
	if (!dm) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	dm->device = d;
	dm->t = t;
	dm->kernels = tbcrt__calloc(c, t->n_kernels ? t->n_kernels : 1, sizeof *dm->kernels);
	dm->consts = tbcrt__calloc(c, t->n_bufs ? t->n_bufs : 1, sizeof *dm->consts);
	tbcrt_status s = dm->kernels && dm->consts ? tbcrt__ok() : tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	char name[4200];
	const table_kind *tk = kind_of(t->kind);
	/* A cubin the device runs is loaded as it is; otherwise the driver
	 * JIT-compiles the PTX (docs/gpu-runtime.md, "Programs"). */
	bool cubin = tbcrt__dtable_cubin_runs(t, &d->info);
	snprintf(name, sizeof name, "%s.%s", m->name, cubin ? "cubin" : tk->extension);
	tbcrt__program_desc desc = {tk->program, name, cubin ? t->binary : t->source,
				    cubin ? t->binary_size : t->source_size, t->options};
	snprintf(dm->loaded, sizeof dm->loaded, "%s %s", t->target,
		 cubin ? "cubin"
		 : t->kind == TBC_ABI_DEVICE_PTX ? (t->binary_size ? "PTX (JIT; the cubin is for another GPU)" : "PTX (JIT)")
						 : tbcrt__dtable_kind_name(t->kind));
	if (s.code == TBCRT_OK) s = tbcrt__program_load(d, &desc, &dm->program);
	if (cubin && (s.code == TBCRT_ERR_BUILD_FAILED || s.code == TBCRT_ERR_UNSUPPORTED_TARGET)) {
		/* A driver older than the ptxas that made the cubin may refuse it;
		 * the PTX (ISA 8.0, any driver from CUDA 12.0) is JIT-compiled instead. */
		snprintf(name, sizeof name, "%s.%s", m->name, tk->extension);
		desc = (tbcrt__program_desc){tk->program, name, t->source, t->source_size, t->options};
		snprintf(dm->loaded, sizeof dm->loaded, "%s PTX (JIT; the driver refused the cubin)", t->target);
		s = tbcrt__program_load(d, &desc, &dm->program);
	}
	for (uint32_t k = 0; s.code == TBCRT_OK && k < t->n_kernels; k++)
		s = tbcrt__kernel_create(dm->program, t->kernels[k].name, &dm->kernels[k]);
	if (s.code == TBCRT_OK) s = tbcrt__buffer_alloc(d, m->weights_size ? m->weights_size : 1, &dm->weights);
	if (s.code == TBCRT_OK && m->weights_size) s = tbcrt__buffer_write(dm->weights, 0, m->weights, m->weights_size);
	for (uint32_t i = 0; s.code == TBCRT_OK && i < t->n_bufs; i++) {
		const tbcrt__dbuf *b = &t->bufs[i];
		uint64_t bytes = 0;
		if (b->role != TBC_ABI_BUF_CONST || b->alias_of >= 0) continue;
		(void)tbcrt__dbuf_bytes(t, b, NULL, &bytes); /* checked at load */
		if (bytes && (uint64_t)b->offset % align_of(d) == 0) {
			s = tbcrt__buffer_view(dm->weights, (uint64_t)b->offset, bytes, &dm->consts[i]);
			continue;
		}
		s = tbcrt__buffer_alloc(d, bytes ? bytes : 1, &dm->consts[i]);
		if (s.code == TBCRT_OK && bytes)
			s = tbcrt__buffer_write(dm->consts[i], 0, (const char *)m->weights + b->offset, bytes);
	}
	if (s.code != TBCRT_OK) {
		dmodel_free(dm, c);
		return s;
	}
	*out = dm;
	return s;
}

/* ---- Profiling ---- */
static void drop_marks(tbcrt__dsession *s) {
	for (uint32_t i = 0; i < s->n_marks; i++) tbcrt__event_free(s->marks[i]);
	s->n_marks = 0;
}

tbcrt_status tbcrt__dsession_set_profiling(tbcrt__dsession *s, bool on) {
	const tbcrt_context *c = s->m->context;
	if (on) {
		tbcrt__event *probe = NULL; /* can the device time its work? */
		tbcrt_status st = tbcrt__event_record(s->dev, &probe);
		if (st.code != TBCRT_OK) return st;
		tbcrt__event_free(probe);
		uint32_t nk = s->t->n_kernels ? s->t->n_kernels : 1;
		if (!s->prof_launches) s->prof_launches = tbcrt__calloc(c, nk, sizeof *s->prof_launches);
		if (!s->prof_ms) s->prof_ms = tbcrt__calloc(c, nk, sizeof *s->prof_ms);
		if (!s->prof_launches || !s->prof_ms)
			return tbcrt__err(TBCRT_ERR_NO_MEMORY, "tbcrt_session_set_profiling: out of memory");
		memset(s->prof_launches, 0, nk * sizeof *s->prof_launches);
		memset(s->prof_ms, 0, nk * sizeof *s->prof_ms);
		s->prof_runs = 0;
		s->prof_device_ms = 0;
	}
	s->profiling = on;
	return tbcrt__ok();
}

/* Two marks around a launch of kernel k, queued: start before it, end after. */
static tbcrt_status keep_marks(tbcrt__dsession *s, tbcrt__event *start, tbcrt__event *end, uint32_t k) {
	const tbcrt_context *c = s->m->context;
	if (s->n_marks + 2 > s->cap_marks) {
		uint32_t cap = s->cap_marks ? 2 * s->cap_marks : 64;
		tbcrt__event **marks = tbcrt__calloc(c, cap, sizeof *marks);
		uint32_t *kernel = tbcrt__calloc(c, cap / 2, sizeof *kernel);
		if (!marks || !kernel) {
			tbcrt__free(c, marks);
			tbcrt__free(c, kernel);
			tbcrt__event_free(start);
			tbcrt__event_free(end);
			return tbcrt__err(TBCRT_ERR_NO_MEMORY, "profiling: out of memory");
		}
		if (s->n_marks) {
			memcpy(marks, s->marks, s->n_marks * sizeof *marks);
			memcpy(kernel, s->mark_kernel, s->n_marks / 2 * sizeof *kernel);
		}
		tbcrt__free(c, s->marks);
		tbcrt__free(c, s->mark_kernel);
		s->marks = marks;
		s->mark_kernel = kernel;
		s->cap_marks = cap;
	}
	s->mark_kernel[s->n_marks / 2] = k;
	s->marks[s->n_marks++] = start;
	s->marks[s->n_marks++] = end;
	return tbcrt__ok();
}

/* After a run's last launch is done: its marks into the totals. */
static tbcrt_status tally_marks(tbcrt__dsession *s) {
	tbcrt_status st = tbcrt__ok();
	for (uint32_t i = 0; st.code == TBCRT_OK && i + 1 < s->n_marks; i += 2) {
		double ms = 0;
		st = tbcrt__event_elapsed(s->marks[i], s->marks[i + 1], &ms);
		s->prof_ms[s->mark_kernel[i / 2]] += ms;
		s->prof_launches[s->mark_kernel[i / 2]]++;
	}
	if (st.code == TBCRT_OK && s->n_marks) {
		double ms = 0;
		st = tbcrt__event_elapsed(s->marks[0], s->marks[s->n_marks - 1], &ms);
		s->prof_device_ms += ms;
	}
	if (st.code == TBCRT_OK) s->prof_runs++;
	drop_marks(s);
	return st;
}

tbcrt_status tbcrt__dsession_profile(const tbcrt__dsession *s, uint32_t kernel, const char **out_name,
				     uint64_t *out_launches, double *out_ms, uint64_t *out_runs, double *out_device_ms,
				     uint32_t *out_n_kernels) {
	if (!s->prof_launches)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "the session has not been profiled (tbcrt_session_set_profiling)");
	*out_runs = s->prof_runs;
	*out_device_ms = s->prof_device_ms;
	*out_n_kernels = s->t->n_kernels;
	if (kernel == UINT32_MAX) return tbcrt__ok();
	if (kernel >= s->t->n_kernels)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "kernel %u: the device code has %u kernels", kernel,
				  s->t->n_kernels);
	*out_name = s->t->kernels[kernel].name;
	*out_launches = s->prof_launches[kernel];
	*out_ms = s->prof_ms[kernel];
	return tbcrt__ok();
}

void tbcrt__dsession_destroy(tbcrt__dsession *s) {
	if (!s) return;
	const tbcrt_context *c = s->m->context;
	for (uint32_t i = 0; s->buf && i < s->t->n_bufs; i++)
		if (s->t->bufs[i].role != TBC_ABI_BUF_CONST && s->t->bufs[i].role != TBC_ABI_BUF_SYMS && !is_state_root(s, i))
			tbcrt__buffer_free(s->buf[i]);
	for (uint32_t k = 0; s->state_cur && k < s->m->n_state; k++) {
		tbcrt__buffer_free(s->state_cur[k]);
		tbcrt__buffer_free(s->state_next[k]);
	}
	tbcrt__free(c, s->state_cur);
	tbcrt__free(c, s->state_next);
	tbcrt__free(c, s->state_bytes);
	tbcrt__free(c, s->state_in);
	tbcrt__free(c, s->state_out);
	tbcrt__buffer_free(s->arena);
	tbcrt__buffer_free(s->syms);
	for (uint32_t l = 0; s->status_views && l < s->t->n_launches; l++) tbcrt__buffer_free(s->status_views[l]);
	tbcrt__free(c, s->status_views);
	tbcrt__buffer_free(s->status);
	tbcrt__free(c, s->buf);
	tbcrt__free(c, s->cap);
	tbcrt__free(c, s->at);
	tbcrt__free(c, s->placed);
	tbcrt__free(c, s->offsets);
	drop_marks(s);
	tbcrt__free(c, s->marks);
	tbcrt__free(c, s->mark_kernel);
	tbcrt__free(c, s->prof_launches);
	tbcrt__free(c, s->prof_ms);
	tbcrt_model *m = s->m;
	tbcrt__free(c, s);
	tbcrt__model_release(m);
}

const char *tbcrt__dsession_loaded(const tbcrt__dsession *s) { return s->dm->loaded; }

/* The training state's two buffers per piece on the device, the first
 * holding the piece's initial value (from the weights, or zeros). */
static tbcrt_status state_create(tbcrt__dsession *s) {
	const tbcrt_model *m = s->m;
	const tbcrt_context *c = m->context;
	uint32_t n = m->n_state, nb = s->t->n_bufs ? s->t->n_bufs : 1;
	s->state_cur = tbcrt__calloc(c, n, sizeof *s->state_cur);
	s->state_next = tbcrt__calloc(c, n, sizeof *s->state_next);
	s->state_bytes = tbcrt__calloc(c, n, sizeof *s->state_bytes);
	s->state_in = tbcrt__calloc(c, nb, sizeof *s->state_in);
	s->state_out = tbcrt__calloc(c, nb, sizeof *s->state_out);
	if (!s->state_cur || !s->state_next || !s->state_bytes || !s->state_in || !s->state_out)
		return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory for the training state");
	for (uint32_t r = 0; r < nb; r++) s->state_in[r] = s->state_out[r] = -1;
	tbcrt_status st = tbcrt__ok();
	for (uint32_t k = 0; st.code == TBCRT_OK && k < n; k++) {
		const tbcrt__tensor *t = &m->inputs[m->state[k].input];
		uint64_t bytes = tbcrt_dtype_size(t->dtype); /* static and within the limit: validate.c */
		for (uint32_t i = 0; i < t->rank; i++) bytes *= (uint64_t)t->dims[i];
		s->state_bytes[k] = bytes;
		int32_t ri = s->t->inputs[m->state[k].input], ro = s->t->outputs[m->state[k].output];
		if (ri >= 0 && ro >= 0 && ri == ro)
			return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "model '%s': state '%s' is read and written in one buffer",
					  m->name, t->name);
		if (ri >= 0) s->state_in[ri] = (int32_t)k;
		if (ro >= 0) s->state_out[ro] = (int32_t)k;
		st = tbcrt__buffer_alloc(s->dev, bytes ? bytes : 1, &s->state_cur[k]);
		if (st.code == TBCRT_OK) st = tbcrt__buffer_alloc(s->dev, bytes ? bytes : 1, &s->state_next[k]);
		if (st.code != TBCRT_OK || !bytes) continue;
		if (m->state[k].init_offset != TBC_ABI_STATE_ZEROS) {
			st = tbcrt__buffer_write(s->state_cur[k], 0, (const char *)m->weights + m->state[k].init_offset, bytes);
			continue;
		}
		void *zeros = tbcrt__calloc(c, 1, (size_t)bytes);
		st = zeros ? tbcrt__buffer_write(s->state_cur[k], 0, zeros, bytes)
			   : tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory for the training state '%s'", t->name);
		tbcrt__free(c, zeros);
	}
	return st;
}

tbcrt_status tbcrt__dsession_state_read(tbcrt__dsession *s, uint32_t k, void *dst) {
	tbcrt_status st = s->state_bytes[k] ? tbcrt__buffer_read(s->state_cur[k], 0, dst, s->state_bytes[k]) : tbcrt__ok();
	return st.code == TBCRT_OK ? tbcrt__device_synchronize(s->dev) : st;
}

void tbcrt__dsession_state_commit(tbcrt__dsession *s) {
	for (uint32_t k = 0; s->state_cur && k < s->m->n_state; k++) {
		tbcrt__buffer *b = s->state_cur[k];
		s->state_cur[k] = s->state_next[k];
		s->state_next[k] = b;
	}
}

tbcrt_status tbcrt__dsession_state_write(tbcrt__dsession *s, uint32_t k, const void *src) {
	return s->state_bytes[k] ? tbcrt__buffer_write(s->state_cur[k], 0, src, s->state_bytes[k]) : tbcrt__ok();
}

tbcrt_status tbcrt__dsession_create(tbcrt_model *m, tbcrt__device *d, tbcrt__dsession **out) {
	*out = NULL;
	const tbcrt_context *c = m->context;
	pthread_mutex_lock(&m->device_lock);
	tbcrt__dmodel *dm = m->dmodels;
	while (dm && dm->device != d) dm = dm->next;
	tbcrt_status s = tbcrt__ok();
	if (!dm && (s = dmodel_open(m, d, &dm)).code == TBCRT_OK) {
		dm->next = m->dmodels;
		m->dmodels = dm;
	}
	pthread_mutex_unlock(&m->device_lock);
	if (s.code != TBCRT_OK) return s;
	tbcrt__dsession *ds = tbcrt__calloc(c, 1, sizeof *ds);
	if (!ds) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	tbcrt__model_retain(m);
	const tbcrt__dtable *t = dm->t;
	*ds = (tbcrt__dsession){.m = m, .t = t, .dm = dm, .dev = d};
	uint32_t n = t->n_bufs ? t->n_bufs : 1;
	ds->buf = tbcrt__calloc(c, n, sizeof *ds->buf);
	ds->cap = tbcrt__calloc(c, n, sizeof *ds->cap);
	ds->at = tbcrt__calloc(c, n, sizeof *ds->at);
	ds->placed = tbcrt__calloc(c, n, sizeof *ds->placed);
	ds->offsets = tbcrt__calloc(c, n, sizeof *ds->offsets);
	if (!ds->buf || !ds->cap || !ds->at || !ds->placed || !ds->offsets) {
		tbcrt__dsession_destroy(ds);
		return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	}
	for (uint32_t i = 0; i < n; i++) ds->at[i] = -1;
	s = tbcrt__buffer_alloc(d, (uint64_t)(t->n_syms ? t->n_syms : 1) * 8, &ds->syms);
	uint32_t nl = t->n_launches ? t->n_launches : 1;
	ds->slot = align_of(d);
	ds->status_views = tbcrt__calloc(c, nl, sizeof *ds->status_views);
	if (!ds->status_views) s = tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	if (s.code == TBCRT_OK) s = tbcrt__buffer_alloc(d, (uint64_t)nl * ds->slot, &ds->status);
	ds->status_dirty = true; /* zeroed before the first run */
	if (s.code == TBCRT_OK && m->n_state) s = state_create(ds);
	if (s.code != TBCRT_OK) {
		tbcrt__dsession_destroy(ds);
		return s;
	}
	*out = ds;
	return s;
}

/* The arena layout of kir_program_layout: the parts, then the temporaries
 * no part holds, each 64-byte aligned.  Returns false past the limit. */
static bool layout(tbcrt__dsession *s, const int64_t *syms, uint64_t *out_end) {
	const tbcrt__dtable *t = s->t;
	uint64_t end = 0;
	for (uint32_t i = 0; i < t->n_bufs; i++) s->offsets[i] = -1;
	/* Part bases: part j starts where part j-1 ends. */
	for (uint32_t i = 0; i < t->n_bufs; i++) {
		const tbcrt__dbuf *b = &t->bufs[i];
		if (b->role != TBC_ABI_BUF_TEMP || b->alias_of >= 0 || b->flags || b->part < 0) continue;
		uint64_t base = 0, scale = 1;
		for (int32_t j = 0; j <= b->part; j++) {
			const tbcrt__dpart *q = &t->parts[j];
			uint64_t prod = 1, bytes;
			for (uint32_t k = 0; k < q->n_syms; k++)
				if (syms[q->syms[k]] < 0 || !tbcrt__mul_within(prod, (uint64_t)syms[q->syms[k]], TBCRT_MAX_TENSOR_BYTES, &prod))
					return false;
			if (j == b->part) {
				scale = prod;
				break;
			}
			if (!tbcrt__mul_within((uint64_t)q->bytes, prod, TBCRT_MAX_TENSOR_BYTES, &bytes)) return false;
			base += bytes;
		}
		uint64_t within;
		if (!tbcrt__mul_within((uint64_t)b->part_offset, scale, TBCRT_MAX_TENSOR_BYTES, &within)) return false;
		s->offsets[i] = (int64_t)(base + within);
	}
	for (uint32_t j = 0; j < t->n_parts; j++) {
		uint64_t prod = 1, bytes;
		for (uint32_t k = 0; k < t->parts[j].n_syms; k++) {
			int64_t v = syms[t->parts[j].syms[k]];
			if (v < 0 || !tbcrt__mul_within(prod, (uint64_t)v, TBCRT_MAX_TENSOR_BYTES, &prod)) return false;
		}
		if (!tbcrt__mul_within((uint64_t)t->parts[j].bytes, prod, TBCRT_MAX_TENSOR_BYTES, &bytes)) return false;
		end += bytes;
	}
	for (uint32_t i = 0; i < t->n_bufs; i++) {
		const tbcrt__dbuf *b = &t->bufs[i];
		if (b->role != TBC_ABI_BUF_TEMP || b->alias_of >= 0 || b->flags || b->part >= 0) continue;
		uint64_t bytes;
		if (!tbcrt__dbuf_bytes(t, b, syms, &bytes) || end > TBCRT_MAX_TENSOR_BYTES) return false;
		s->offsets[i] = (int64_t)end;
		end += (bytes + TBCRT_ARENA_ALIGN - 1) / TBCRT_ARENA_ALIGN * TBCRT_ARENA_ALIGN;
	}
	if (end > TBCRT_MAX_TENSOR_BYTES) return false;
	*out_end = end;
	return true;
}

typedef struct run {
	tbcrt__dsession *s;
	int64_t *syms;
	const void *const *in;
	bool syms_dirty;
	bool checks_pending; /* a kernel with checks ran since the status words were read */
} run;

/* Reads the status words when a kernel with checks ran since they were
 * last read: the first launch (in table order) whose check failed fails
 * the run with its kernel's message.  A failed check does not stop its
 * kernel or the ones queued after it (their indices are clamped: nothing
 * reads or writes outside a buffer), so the host looks before it uses
 * anything the device computed. */
static tbcrt_status check_status(run *x) {
	tbcrt__dsession *s = x->s;
	const tbcrt__dtable *t = s->t;
	if (!x->checks_pending) return tbcrt__ok();
	x->checks_pending = false;
	uint64_t bytes = (uint64_t)(t->n_launches ? t->n_launches : 1) * s->slot;
	uint8_t *words = tbcrt__calloc(s->m->context, 1, (size_t)bytes);
	if (!words) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	tbcrt_status st = tbcrt__buffer_read(s->status, 0, words, bytes);
	for (uint32_t l = 0; st.code == TBCRT_OK && l < t->n_launches; l++) {
		int32_t code;
		memcpy(&code, words + (uint64_t)l * s->slot, sizeof code);
		if (!code) continue;
		const tbcrt__dkernel *k = &t->kernels[t->launches[l].kernel];
		s->status_dirty = true;
		st = tbcrt__err(TBCRT_ERR_RUN_FAILED, "model '%s' failed in kernel %s: %s", s->m->name, k->name,
				code > 0 && (uint32_t)code <= k->n_messages ? k->messages[code - 1]
									    : "(a check the kernel does not have)");
	}
	tbcrt__free(s->m->context, words);
	return st;
}

static void drop(tbcrt__dsession *s, uint32_t r) {
	tbcrt__buffer_free(s->buf[r]);
	s->buf[r] = NULL;
	s->cap[r] = 0;
	s->at[r] = -1;
}

/* A buffer of its own for root r of at least bytes; contents kept when keep. */
static tbcrt_status own(tbcrt__dsession *s, uint32_t r, uint64_t bytes, bool keep) {
	if (s->buf[r] && s->at[r] < 0 && s->cap[r] >= bytes) return tbcrt__ok();
	if (keep && s->buf[r] && bytes < s->cap[r] * 2) bytes = s->cap[r] * 2;
	tbcrt__buffer *b;
	tbcrt_status st = tbcrt__buffer_alloc(s->dev, bytes ? bytes : 1, &b);
	if (st.code != TBCRT_OK) return st;
	if (keep && s->buf[r] && s->cap[r]) st = tbcrt__buffer_copy(b, 0, s->buf[r], 0, s->cap[r]);
	if (st.code != TBCRT_OK) {
		tbcrt__buffer_free(b);
		return st;
	}
	drop(s, r);
	s->buf[r] = b;
	s->cap[r] = bytes ? bytes : 1;
	s->at[r] = -1;
	return st;
}

static tbcrt_status too_large(const tbcrt__dsession *s, uint32_t r) {
	return tbcrt__err(TBCRT_ERR_RUN_FAILED,
			  "model '%s': buffer %u's size is negative or past %llu bytes with the symbols computed so far", s->m->name,
			  r, (unsigned long long)TBCRT_MAX_TENSOR_BYTES);
}

/* Gives root buffer r its memory for this run (or checks that a dynamic one
 * still fits the symbols). */
static tbcrt_status place(run *x, uint32_t r) {
	tbcrt__dsession *s = x->s;
	const tbcrt__dbuf *b = &s->t->bufs[r];
	if (s->placed[r] && !b->flags) return tbcrt__ok();
	if (is_state_root(s, r)) { /* the training state, already on the device */
		int32_t k = s->state_in[r] >= 0 ? s->state_in[r] : s->state_out[r];
		s->buf[r] = s->state_in[r] >= 0 ? s->state_cur[k] : s->state_next[k];
		s->cap[r] = s->state_bytes[k];
		s->placed[r] = true;
		return tbcrt__ok();
	}
	uint64_t bytes = 0;
	if (b->role != TBC_ABI_BUF_CONST && b->role != TBC_ABI_BUF_SYMS && !tbcrt__dbuf_bytes(s->t, b, x->syms, &bytes))
		return too_large(s, r);
	tbcrt_status st = tbcrt__ok();
	switch (b->role) {
	case TBC_ABI_BUF_CONST: s->buf[r] = s->dm->consts[r]; break;
	case TBC_ABI_BUF_SYMS: s->buf[r] = s->syms; break;
	case TBC_ABI_BUF_INPUT:
		st = own(s, r, bytes, false);
		if (st.code == TBCRT_OK && bytes) st = tbcrt__buffer_write(s->buf[r], 0, x->in[b->io_index], bytes);
		break;
	case TBC_ABI_BUF_OUTPUT: st = own(s, r, bytes, false); break;
	case TBC_ABI_BUF_TEMP:
		if (b->flags) {
			st = own(s, r, bytes, (b->flags & TBCRT__DBUF_KEEP) && s->placed[r]);
			break;
		}
		uint64_t off = (uint64_t)s->offsets[r];
		if (off > s->arena_bytes || bytes > s->arena_bytes - off)
			return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "model '%s': buffer %u (%llu bytes at %llu) lies outside the "
					  "arena of %llu bytes", s->m->name, r, (unsigned long long)bytes, (unsigned long long)off,
					  (unsigned long long)s->arena_bytes);
		if (s->buf[r] && s->at[r] == (int64_t)off && s->cap[r] == bytes) break;
		if (!bytes || off % align_of(s->dev)) { /* a device whose views need more alignment */
			if (s->at[r] >= 0) drop(s, r);
			st = own(s, r, bytes, false);
			break;
		}
		drop(s, r);
		st = tbcrt__buffer_view(s->arena, off, bytes, &s->buf[r]);
		if (st.code == TBCRT_OK) s->at[r] = (int64_t)off, s->cap[r] = bytes;
		break;
	}
	if (st.code == TBCRT_OK) s->placed[r] = true;
	return st;
}

/* The value of a grid expression; false when it overflows or divides by 0. */
static bool eval_expr(const tbcrt__dexpr *e, const int64_t *sizes, int64_t *out) {
	int64_t stack[TBCRT_MAX_EXPR_OPS];
	int n = 0;
	for (uint32_t i = 0; i < e->n; i++) {
		int64_t op = e->ops[2 * i], v = e->ops[2 * i + 1];
		if (op == TBC_ABI_EXPR_CONST || op == TBC_ABI_EXPR_SIZE) {
			stack[n++] = op == TBC_ABI_EXPR_CONST ? v : sizes[v];
			continue;
		}
		int64_t b = stack[--n], a = stack[n - 1], r = 0;
		bool ok = true;
		switch (op) {
		case TBC_ABI_EXPR_ADD: ok = !__builtin_add_overflow(a, b, &r); break;
		case TBC_ABI_EXPR_SUB: ok = !__builtin_sub_overflow(a, b, &r); break;
		case TBC_ABI_EXPR_MUL: ok = !__builtin_mul_overflow(a, b, &r); break;
		case TBC_ABI_EXPR_DIV:
		case TBC_ABI_EXPR_REM:
		case TBC_ABI_EXPR_FLOORDIV:
		case TBC_ABI_EXPR_FLOORMOD:
			ok = b != 0 && !(a == INT64_MIN && b == -1);
			if (!ok) break;
			r = op == TBC_ABI_EXPR_DIV || op == TBC_ABI_EXPR_FLOORDIV ? a / b : a % b;
			if (op == TBC_ABI_EXPR_FLOORDIV && (a % b != 0) && ((a < 0) != (b < 0))) r--;
			if (op == TBC_ABI_EXPR_FLOORMOD && r != 0 && ((r < 0) != (b < 0))) r += b;
			break;
		case TBC_ABI_EXPR_MIN: r = a < b ? a : b; break;
		case TBC_ABI_EXPR_MAX: r = a > b ? a : b; break;
		default: ok = false;
		}
		if (!ok) return false;
		stack[n - 1] = r;
	}
	*out = stack[0];
	return true;
}

/* The most work-items a grid-stride launch gets per dim; its loop strides
 * over the rest, so any count is correct.  A GPU needs several resident
 * threads per ALU to keep its memory busy: 8192 per multiprocessor (four
 * times the 2048 one holds), 1.08 million on a 132-SM H200, where 65536
 * ran an elementwise kernel at 29% of the copy bandwidth (docs/gpu.md).
 * The CPU's and OpenCL's: 65536. */
static uint64_t grid_items(const tbcrt__device *dev) {
	const tbcrt_device_info *i = &dev->info;
	if ((i->kind == TBCRT_DEVICE_CUDA || i->kind == TBCRT_DEVICE_HIP) && i->compute_units)
		return (uint64_t)i->compute_units * 8192;
	return 65536;
}

/* A launch's NDRange (include/tbc/abi.h): per dim the units of its loop,
 * the trip count at most grid_items for a grid-stride kernel's work-items
 * and 65536 for a grouped one's work-groups of the kernel's size (the loops
 * stride over the rest); one work-item for a kernel that runs on one. */
static void geometry(const tbcrt__device *dev, const tbcrt__dkernel *k, const int64_t *sizes,
		     tbcrt__launch_desc *d) {
	d->dims = k->n_dims;
	for (uint32_t g = 0; g < 3; g++) d->global[g] = 1, d->local[g] = 0;
	if (k->shape == 0) return;
	uint64_t left = grid_items(dev); /* a grid-stride launch's work-items, over all its dims */
	for (uint32_t g = 0; g < k->n_dims; g++) {
		int64_t lo, hi;
		uint64_t cap = k->shape == 1 ? (left > 65536 || g == 0 ? left : 65536) : 65536;
		if (cap < 1) cap = 1;
		uint64_t units = cap;
		if (eval_expr(&k->lo[g], sizes, &lo) && eval_expr(&k->hi[g], sizes, &hi)) {
			uint64_t trips = hi <= lo ? 1 : ((uint64_t)hi - (uint64_t)lo + (uint64_t)k->step[g] - 1) / (uint64_t)k->step[g];
			units = trips > cap ? cap : trips ? trips : 1;
		}
		left /= units;
		d->global[g] = k->shape == 2 ? units * k->local[g] : units;
		d->local[g] = k->shape == 2 ? k->local[g] : 0;
	}
}

static tbcrt_status launch(run *x, uint32_t l) {
	tbcrt__dsession *s = x->s;
	const tbcrt__dtable *t = s->t;
	const tbcrt__dlaunch *la = &t->launches[l];
	const tbcrt__dkernel *k = &t->kernels[la->kernel];
	tbcrt__arg args[TBCRT__MAX_ARGS];
	int64_t sizes[TBCRT__MAX_ARGS];
	uint32_t n = 0;
	bool binds_syms = false, stores_syms = false;
	for (uint32_t a = 0; a < k->n_buffers; a++) {
		uint32_t pb = (uint32_t)la->args[a];
		uint32_t r = t->bufs[pb].alias_of >= 0 ? (uint32_t)t->bufs[pb].alias_of : pb;
		tbcrt_status st = place(x, r);
		if (st.code != TBCRT_OK) return st;
		if (t->bufs[r].role == TBC_ABI_BUF_SYMS) {
			binds_syms = true;
			stores_syms |= k->stored[a] != 0;
		}
		args[n++] = (tbcrt__arg){TBCRT__ARG_BUFFER, s->buf[r], NULL, 0};
	}
	for (uint32_t j = 0; j < k->n_sizes; j++) {
		sizes[j] = x->syms[la->syms[j]];
		args[n++] = (tbcrt__arg){TBCRT__ARG_SCALAR, NULL, &sizes[j], sizeof sizes[j]};
	}
	if (k->n_messages) {
		if (!s->status_views[l]) {
			tbcrt_status st = tbcrt__buffer_view(s->status, (uint64_t)l * s->slot, s->slot, &s->status_views[l]);
			if (st.code != TBCRT_OK) return st;
		}
		args[n++] = (tbcrt__arg){TBCRT__ARG_BUFFER, s->status_views[l], NULL, 0};
	}
	/* Every buffer holds what the kernel may touch at these sizes: the
	 * table's bindings cannot make a kernel reach past a buffer. */
	for (uint32_t a = 0; a < k->n_buffers; a++) {
		uint64_t need = k->elem_bytes[a];
		bool ok = true;
		for (uint32_t d = 0; d < k->rank[a] && ok; d++) {
			int64_t v;
			ok = eval_expr(&k->dims[a * TBCRT_MAX_RANK + d], sizes, &v) && v >= 0 &&
			     tbcrt__mul_within(need, (uint64_t)v, TBCRT_MAX_TENSOR_BYTES, &need);
		}
		if (!ok || need > args[a].buffer->bytes)
			return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT,
					  "model '%s': launch %u binds buffer %d of %llu bytes to argument %u of kernel %s, which "
					  "may touch %s%llu bytes of it",
					  s->m->name, l, (int)la->args[a], (unsigned long long)args[a].buffer->bytes, a, k->name,
					  ok ? "" : "more than ", (unsigned long long)need);
	}
	if (binds_syms && x->syms_dirty) {
		tbcrt_status st = tbcrt__buffer_write(s->syms, 0, x->syms, (uint64_t)t->n_syms * 8);
		if (st.code != TBCRT_OK) return st;
		x->syms_dirty = false;
	}
	tbcrt__launch_desc d = {.n_args = n, .args = args};
	geometry(s->dev, k, sizes, &d);
	tbcrt__event *start = NULL, *end = NULL;
	tbcrt_status st = s->profiling ? tbcrt__event_record(s->dev, &start) : tbcrt__ok();
	if (st.code == TBCRT_OK) st = tbcrt__launch(s->dm->kernels[la->kernel], &d);
	if (st.code == TBCRT_OK && s->profiling && (st = tbcrt__event_record(s->dev, &end)).code == TBCRT_OK) {
		st = keep_marks(s, start, end, (uint32_t)la->kernel);
		start = end = NULL; /* kept, or freed by keep_marks */
	}
	tbcrt__event_free(start);
	if (st.code != TBCRT_OK) return st;
	x->checks_pending |= k->n_messages != 0;
	if (stores_syms) { /* a shape kernel: the host sizes what follows, from sizes no check refused */
		if ((st = check_status(x)).code != TBCRT_OK) return st;
		st = tbcrt__buffer_read(s->syms, 0, x->syms, (uint64_t)t->n_syms * 8);
	}
	return st;
}

static tbcrt_status walk(run *x) {
	const tbcrt__dtable *t = x->s->t;
	int64_t *syms = x->syms;
	for (uint32_t l = 0; l < t->n_launches; l++) {
		const tbcrt__dlaunch *la = &t->launches[l];
		const int32_t *cs = la->ctl_sym;
		switch (la->ctl) {
		case TBC_ABI_CTL_KERNEL: {
			tbcrt_status st = launch(x, l);
			if (st.code != TBCRT_OK) return st;
			continue;
		}
		case TBC_ABI_CTL_IF:
			if (!syms[cs[0]]) l = (uint32_t)la->match; /* on at the ELSE */
			continue;
		case TBC_ABI_CTL_ELSE: l = (uint32_t)la->match; continue;
		case TBC_ABI_CTL_END_IF: continue;
		case TBC_ABI_CTL_LOOP:
		case TBC_ABI_CTL_END_LOOP: {
			uint32_t head = la->ctl == TBC_ABI_CTL_LOOP ? l : (uint32_t)la->match;
			if (la->ctl == TBC_ABI_CTL_LOOP) syms[cs[0]] = 0;
			else if (syms[cs[0]] < INT64_MAX) syms[cs[0]]++;
			x->syms_dirty = true;
			bool more = (cs[1] < 0 || syms[cs[0]] < syms[cs[1]]) && (cs[2] < 0 || syms[cs[2]] != 0);
			l = more ? head : (uint32_t)t->launches[head].match;
			continue;
		}
		}
	}
	return tbcrt__ok();
}

tbcrt_status tbcrt__dsession_run(tbcrt__dsession *s, int64_t *syms, const void *const *in, void **out,
				 void *(*alloc)(void *ctx, uint64_t bytes), void *alloc_ctx) {
	const tbcrt__dtable *t = s->t;
	uint64_t arena_bytes;
	if (!layout(s, syms, &arena_bytes))
		return tbcrt__err(TBCRT_ERR_LIMIT, "model '%s': the arena for these input sizes passes %llu bytes", s->m->name,
				  (unsigned long long)TBCRT_MAX_TENSOR_BYTES);
	if (!s->arena || s->arena_bytes < arena_bytes) {
		for (uint32_t i = 0; i < t->n_bufs; i++)
			if (s->at[i] >= 0 && s->buf[i]) drop(s, i); /* views of the old arena */
		tbcrt__buffer_free(s->arena);
		s->arena = NULL;
		s->arena_bytes = 0;
		tbcrt_status st = tbcrt__buffer_alloc(s->dev, arena_bytes ? arena_bytes : 1, &s->arena);
		if (st.code != TBCRT_OK) return st;
		s->arena_bytes = arena_bytes;
	}
	for (uint32_t i = 0; i < t->n_bufs; i++) {
		s->placed[i] = false;
		if (t->bufs[i].role == TBC_ABI_BUF_CONST || t->bufs[i].role == TBC_ABI_BUF_SYMS || is_state_root(s, i))
			s->buf[i] = NULL; /* not the session's (or swapped since): placed again */
	}
	run x = {.s = s, .syms = syms, .in = in, .syms_dirty = true};
	tbcrt_status st = tbcrt__ok();
	if (s->status_dirty) { /* a check failed in an earlier run (or none ran yet): every slot to 0 */
		uint64_t bytes = (uint64_t)(t->n_launches ? t->n_launches : 1) * s->slot;
		void *zeros = tbcrt__calloc(s->m->context, 1, (size_t)bytes);
		st = zeros ? tbcrt__buffer_write(s->status, 0, zeros, bytes) : tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
		tbcrt__free(s->m->context, zeros);
		if (st.code == TBCRT_OK) s->status_dirty = false;
	}
	if (st.code == TBCRT_OK) st = walk(&x);
	if (st.code == TBCRT_OK) st = check_status(&x); /* before any output is read */
	if (x.checks_pending) s->status_dirty = true; /* failed before reading them: they may hold a code */
	for (uint32_t o = 0; st.code == TBCRT_OK && o < t->n_outputs; o++) {
		uint32_t r = (uint32_t)t->outputs[o];
		const tbcrt__dbuf *b = &t->bufs[r];
		uint64_t bytes;
		if (s->state_out && s->state_out[r] >= 0) continue; /* stays on the device */
		if (!tbcrt__dbuf_bytes(t, b, syms, &bytes)) {
			st = tbcrt__err(TBCRT_ERR_RUN_FAILED, "model '%s' gave output '%s' a negative size or one past the limit",
					s->m->name, s->m->outputs[o].name);
			break;
		}
		if (b->flags) { /* data dependent: host memory the session returns */
			out[o] = alloc(alloc_ctx, bytes);
			if (!out[o]) {
				st = tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory for output '%s'", s->m->outputs[o].name);
				break;
			}
		}
		if (!s->placed[r]) { /* an empty output no launch wrote */
			if (bytes) memset(out[o], 0, (size_t)bytes);
			continue;
		}
		if (bytes > s->cap[r]) {
			st = tbcrt__err(TBCRT_ERR_RUN_FAILED, "model '%s': output '%s' grew after its last launch", s->m->name,
					s->m->outputs[o].name);
			break;
		}
		if (bytes) st = tbcrt__buffer_read(s->buf[r], 0, out[o], bytes);
	}
	if (st.code == TBCRT_OK) st = tbcrt__device_synchronize(s->dev);
	if (st.code == TBCRT_OK && s->profiling) st = tally_marks(s);
	drop_marks(s);
	return st;
}
