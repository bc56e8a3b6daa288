/* Lowering driver: graph IR -> program of kernel IR.
 *
 * Requires: a module whose main graph is shape-inferred (every value typed),
 * optionally fused (passes/fusion.c) and memory-planned (passes/memplan.c:
 * tbc_value.mem_offset).  Guarantees: every op becomes zero or more launches
 * of verified kernels, or lowering fails with a diagnostic naming the op; an
 * op without a lowering is TBC_ERR_UNSUPPORTED, never a wrong result. */
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/lower/lower_internal.h"
#include "ir/symdim.h"
#include "passes/passes.h"

/* ---- Diagnostics -----------------------------------------------------------*/
bool lower_error(lower_cx *cx, const tbc_op *op, const char *fmt, ...) {
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (op) tbc_diags_op(cx->d, TBC_ERR_UNSUPPORTED, op, "%s", msg);
	else tbc_diags_add(cx->d, TBC_ERR_UNSUPPORTED, cx->m->path, NULL, NULL, NULL, "%s", msg);
	return false;
}

bool lower_unsupported(lower_cx *cx, const tbc_op *op) {
	return lower_error(cx, op, "op %s has no lowering yet", tbc_ops[op->code].onnx_name);
}

static bool internal(lower_cx *cx, const char *what) {
	tbc_diags_add(cx->d, TBC_ERR_INTERNAL, cx->m->path, NULL, NULL, NULL, "lowering: %s (%s:%d)", what, __FILE__,
		      __LINE__);
	return false;
}

/* ---- Program buffers -------------------------------------------------------*/
static int64_t align_up(int64_t x) { return (x + KIR_ALIGN - 1) / KIR_ALIGN * KIR_ALIGN; }

/* A C identifier from a value name: letters, digits and '_'. */
static const char *ident(tbc_arena *a, const char *name, const char *fallback, int id) {
	char buf[64];
	size_t n = 0;
	if (name)
		for (const char *s = name; *s && n < 40; s++)
			buf[n++] = ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')) ? *s : '_';
	buf[n] = 0;
	if (!n || (buf[0] >= '0' && buf[0] <= '9')) snprintf(buf, sizeof buf, "%s%d", fallback, id);
	return tbc_arena_strdup(a, buf);
}

static int new_pbuf(lower_cx *cx, kir_buffer_role role, const tbc_type *type, const char *name) {
	kir_program *p = cx->p;
	if (p->n_bufs == p->cap_bufs) {
		int cap = p->cap_bufs ? p->cap_bufs * 2 : 32;
		kir_pbuf **grown = tbc_arena_array(p->arena, (size_t)cap, sizeof *grown);
		if (!grown) return -1;
		if (p->n_bufs) memcpy(grown, p->bufs, (size_t)p->n_bufs * sizeof *grown);
		p->bufs = grown;
		p->cap_bufs = cap;
	}
	kir_pbuf *b = tbc_arena_alloc(p->arena, sizeof *b);
	if (!b) return -1;
	b->id = p->n_bufs;
	b->role = role;
	b->type = *type;
	b->name = ident(p->arena, name, "t", b->id);
	/* Names are unique in the program (kernels name their buffers after
	 * them): one cut to length or made alike by the spelling gets the id. */
	bool clash = name && strlen(name) > 40;
	for (int i = 0; i < p->n_bufs && !clash && b->name; i++) clash = !strcmp(p->bufs[i]->name, b->name);
	if (clash && b->name) {
		char buf[64];
		snprintf(buf, sizeof buf, "%s_%d", b->name, b->id);
		b->name = tbc_arena_strdup(p->arena, buf);
	}
	if (!b->name) return -1;
	b->onnx_name = name ? tbc_arena_strdup(p->arena, name) : NULL;
	b->offset = -1;
	b->alias_of = -1;
	b->io_index = -1;
	b->part = -1;
	b->part_offset = -1;
	b->scratch_of = -1;
	p->bufs[p->n_bufs++] = b;
	return b->id;
}

int64_t kir_pbuf_bytes(const kir_program *p, const kir_pbuf *b, const int64_t *syms) {
	int64_t n = 1;
	for (int d = 0; d < b->type.rank; d++) {
		int64_t x = b->type.dims[d].size;
		if (b->type.dims[d].sym) {
			x = -1;
			for (int s = 0; s < p->n_syms; s++)
				if (!strcmp(p->sym_names[s], b->type.dims[d].sym)) x = syms ? syms[s] : -1;
		}
		if (x < 0 || (x && n > INT64_MAX / x)) return -1;
		n *= x;
	}
	int64_t size = (int64_t)tbc_dtype_size(b->type.dtype);
	if (n && size > INT64_MAX / n) return -1;
	return n * size;
}

/* Whether memory planning placed v (tbc_value.mem_offset, in a part the
 * program knows); else lowering places it itself, apart from every other
 * value. */
static bool is_planned(const lower_cx *cx, const tbc_value *v) {
	return v->mem_offset >= 0 && cx->val_part && cx->val_part[v->id] >= 0;
}

/* Bytes of v per unit of its part's symbol product (its static factor). */
static int64_t unit_bytes(const tbc_value *v) {
	int64_t n = (int64_t)tbc_dtype_size(v->type.dtype);
	for (int d = 0; d < v->type.rank; d++)
		if (!v->type.dims[d].sym) n *= v->type.dims[d].size;
	return n;
}

static bool type_is_supported(lower_cx *cx, const tbc_value *v) { return lower_type_known(cx, &v->type); }

int lower_value_buf(lower_cx *cx, const tbc_value *v) {
	if (cx->buf_of[v->id] >= 0) return cx->buf_of[v->id];
	if (v->kind != TBC_VALUE_CONST) {
		internal(cx, "a value is used before its definition was lowered");
		return -1;
	}
	int b = new_pbuf(cx, KIR_BUF_CONST, &v->type, v->name);
	if (b < 0) return -1;
	kir_pbuf *pb = cx->p->bufs[b];
	pb->constant = v->constant;
	pb->offset = (int64_t)cx->p->weights_size;
	cx->p->weights_size += (uint64_t)align_up(kir_pbuf_bytes(cx->p, pb, NULL));
	cx->buf_of[v->id] = b;
	return b;
}

static int const_layout(lower_cx *cx, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, int64_t pitch,
			bool pairs, int64_t panel) {
	kir_program *p = cx->p;
	for (int i = 0; i < p->n_bufs; i++) {
		const kir_pbuf *b = p->bufs[i];
		if (b->role == KIR_BUF_CONST && b->constant == v->constant && b->lay.pitch == pitch &&
		    b->lay.rows == rows && b->lay.cols == cols && b->lay.transpose == transpose && b->lay.pairs == pairs &&
		    b->lay.panel == panel)
			return i;
	}
	tbc_type t = {.dtype = v->type.dtype, .rank = 2};
	int64_t k = transpose ? cols : rows, n = transpose ? rows : cols;
	t.dims[0] = (tbc_dim){panel ? (n + panel - 1) / panel : pairs ? (k + 1) / 2 : k, NULL};
	t.dims[1] = (tbc_dim){panel || !pairs ? pitch : 2 * pitch, NULL};
	int b = new_pbuf(cx, KIR_BUF_CONST, &t, v->name);
	if (b < 0) return -1;
	kir_pbuf *pb = p->bufs[b];
	pb->constant = v->constant;
	pb->lay.rows = rows, pb->lay.cols = cols, pb->lay.pitch = pitch, pb->lay.transpose = transpose;
	pb->lay.pairs = pairs;
	pb->lay.panel = panel;
	pb->offset = (int64_t)p->weights_size;
	p->weights_size += (uint64_t)align_up(kir_pbuf_bytes(p, pb, NULL));
	return b;
}

int lower_const_matrix(lower_cx *cx, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, int64_t pitch) {
	return const_layout(cx, v, rows, cols, transpose, pitch, false, 0);
}

int lower_const_pairs(lower_cx *cx, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, int64_t pitch) {
	return const_layout(cx, v, rows, cols, transpose, pitch, true, 0);
}

int lower_const_panels(lower_cx *cx, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, int64_t panel,
		       int64_t stride) {
	return const_layout(cx, v, rows, cols, transpose, stride, false, panel);
}

int lower_const_new(lower_cx *cx, tbc_dtype dt, int rank, const int64_t *dims, const char *name, void **out_data) {
	*out_data = NULL;
	tbc_tensor *t = tbc_arena_alloc(cx->p->arena, sizeof *t);
	if (!t) return -1;
	memset(t, 0, sizeof *t);
	t->dtype = dt, t->rank = rank, t->numel = 1;
	for (int i = 0; i < rank; i++) t->dims[i] = dims[i], t->numel *= dims[i];
	size_t bytes = (size_t)t->numel * tbc_dtype_size(dt);
	t->data = tbc_arena_alloc(cx->p->arena, bytes ? bytes : 1);
	if (!t->data) return -1;
	memset(t->data, 0, bytes ? bytes : 1);
	tbc_type ty;
	memset(&ty, 0, sizeof ty);
	tbc_type_set(&ty, dt, rank, dims);
	int b = new_pbuf(cx, KIR_BUF_CONST, &ty, name);
	if (b < 0) return -1;
	kir_pbuf *pb = cx->p->bufs[b];
	pb->constant = t;
	pb->offset = (int64_t)cx->p->weights_size;
	cx->p->weights_size += (uint64_t)align_up(kir_pbuf_bytes(cx->p, pb, NULL));
	*out_data = t->data;
	return b;
}

int lower_result_buf(lower_cx *cx, const tbc_value *v) {
	if (cx->buf_of[v->id] >= 0) return cx->buf_of[v->id]; /* a graph output */
	if (!type_is_supported(cx, v)) {
		tbc_diags_op(cx->d, TBC_ERR_UNSUPPORTED, v->def,
			     "the shape of its output depends on the data; such ops have no lowering yet");
		return -1;
	}
	int b = new_pbuf(cx, KIR_BUF_TEMP, &v->type, v->name);
	if (b < 0) return -1;
	kir_pbuf *pb = cx->p->bufs[b];
	/* A value of a control-flow body lives while its op runs: scratch of
	 * that op (memory planning places main-graph values only). */
	if (cx->body_depth > 0) pb->scratch_of = cx->op_pos;
	if (is_planned(cx, v)) {
		pb->part = cx->val_part[v->id];
		pb->part_offset = v->mem_offset;
		pb->offset = pb->part == 0 ? v->mem_offset : -1;
	}
	cx->buf_of[v->id] = b;
	return b;
}

int lower_temp_buf(lower_cx *cx, const tbc_type *type, const char *name) {
	if (!lower_type_known(cx, type)) return -1;
	int b = new_pbuf(cx, KIR_BUF_TEMP, type, name); /* part -1: placed by place_temps, apart from planned values */
	if (b >= 0) cx->p->bufs[b]->scratch_of = cx->op_pos;
	return b;
}

int lower_shared_temp(lower_cx *cx, const char *name, tbc_dtype dt, tbc_dim n, int64_t per) {
	char full[64];
	snprintf(full, sizeof full, "tbc.%s", name);
	for (int i = 0; i < cx->p->n_bufs; i++) {
		kir_pbuf *b = cx->p->bufs[i];
		if (b->role == KIR_BUF_TEMP && b->onnx_name && !strcmp(b->onnx_name, full) && b->type.dtype == dt &&
		    tbc_dim_eq(b->type.dims[0], n)) {
			if (b->type.dims[1].size < per) b->type.dims[1].size = per;
			return i;
		}
	}
	tbc_type t;
	memset(&t, 0, sizeof t);
	t.dtype = dt;
	t.rank = 2;
	t.dims[0] = n;
	t.dims[1] = (tbc_dim){per, NULL};
	int b = lower_temp_buf(cx, &t, full);
	if (b >= 0) cx->p->bufs[b]->name = tbc_arena_strdup(cx->p->arena, name);
	return b;
}

/* The storage a value occupies (or will): its part, offset and bytes per
 * unit; false when it is not in a planned part of the arena (inputs,
 * outputs, constants, and temporaries lowering places apart). */
typedef struct region {
	int part;
	int64_t offset, bytes;
} region;

static region pbuf_region(const kir_pbuf *pb) {
	int64_t bytes = (int64_t)tbc_dtype_size(pb->type.dtype);
	for (int d = 0; d < pb->type.rank; d++)
		if (!pb->type.dims[d].sym) bytes *= pb->type.dims[d].size;
	return (region){pb->part, pb->part_offset, bytes};
}

static bool storage_of(const lower_cx *cx, const tbc_value *w, int *root, region *r) {
	*root = -1;
	int b = cx->buf_of[w->id];
	if (b >= 0) {
		const kir_pbuf *pb = cx->p->bufs[b];
		*root = pb->alias_of >= 0 ? pb->alias_of : b;
		pb = cx->p->bufs[*root];
		if (pb->role != KIR_BUF_TEMP || pb->part < 0) return false;
		*r = pbuf_region(pb);
		return true;
	}
	if (!is_planned(cx, w)) return false;
	*r = (region){cx->val_part[w->id], w->mem_offset, unit_bytes(w)};
	return true;
}

bool lower_storage_overlaps(lower_cx *cx, const tbc_value *a, const tbc_value *b) {
	int ra, rb;
	region x, y;
	if (!storage_of(cx, a, &ra, &x) || !storage_of(cx, b, &rb, &y)) return false;
	if (ra >= 0 && ra == rb) return true;
	return x.part == y.part && x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
}

int lower_result_buf_apart(lower_cx *cx, const tbc_value *v) {
	if (cx->buf_of[v->id] >= 0) return cx->buf_of[v->id];
	int b = lower_result_buf(cx, v);
	if (b < 0) return b;
	kir_pbuf *pb = cx->p->bufs[b];
	if (pb->role == KIR_BUF_TEMP) pb->part = -1, pb->part_offset = -1, pb->offset = -1;
	return b;
}

/* May v (about to be defined) share the storage of program buffer root for
 * its whole life?  Memory planning gave root's bytes to other values once
 * root's own value dies; sharing is safe when none of those (nor any value
 * sharing their storage) lives while v does.  Values not lowered yet count
 * at their planned place: if one later shares other storage, its own check
 * sees v. */
static bool may_share(const lower_cx *cx, const tbc_value *v, int root) {
	const kir_pbuf *rb = cx->p->bufs[root];
	if (rb->role != KIR_BUF_TEMP || rb->part < 0) return true; /* storage of its own for the whole run */
	region want = pbuf_region(rb);
	int s = cx->life_start[v->id], e = cx->life_end[v->id];
	for (const tbc_op *op = cx->m->main->first; op; op = op->next)
		for (int i = 0; i < op->n_outputs; i++) {
			const tbc_value *w = op->outputs[i];
			int wroot;
			region r;
			if (!w || w == v || !storage_of(cx, w, &wroot, &r) || wroot == root) continue;
			if (r.part != want.part || r.offset >= want.offset + want.bytes || want.offset >= r.offset + r.bytes)
				continue;
			if (cx->life_start[w->id] <= e && s <= cx->life_end[w->id]) return false;
		}
	return true;
}

bool lower_alias(lower_cx *cx, const tbc_value *v, const tbc_value *src) {
	int s = lower_value_buf(cx, src);
	if (s < 0) return false;
	if (cx->buf_of[v->id] >= 0) return lower_copy(cx, cx->buf_of[v->id], s); /* a graph output */
	const kir_pbuf *sb = cx->p->bufs[s];
	/* Sharing storage is safe only while no other value reuses the source's
	 * bytes (memory planning reuses them once the source dies); else copy. */
	if (!may_share(cx, v, sb->alias_of >= 0 ? sb->alias_of : s)) {
		int d = lower_result_buf(cx, v);
		return d >= 0 && lower_copy(cx, d, s);
	}
	return lower_alias_buf(cx, v, s);
}

bool lower_alias_buf(lower_cx *cx, const tbc_value *v, int src) {
	const kir_pbuf *sb = cx->p->bufs[src];
	int b = new_pbuf(cx, sb->role, &v->type, v->name);
	if (b < 0) return internal(cx, "out of memory");
	kir_pbuf *pb = cx->p->bufs[b];
	pb->alias_of = sb->alias_of >= 0 ? sb->alias_of : src;
	const kir_pbuf *root = cx->p->bufs[pb->alias_of];
	pb->role = root->role;
	pb->io_index = root->io_index;
	pb->offset = root->offset;
	pb->part = root->part;
	pb->part_offset = root->part_offset;
	pb->constant = root->constant;
	cx->buf_of[v->id] = b;
	return true;
}

/* ---- Kernels under construction ---------------------------------------------*/
bool lk_begin(lk *l, lower_cx *cx, const char *what) {
	memset(l, 0, sizeof *l);
	l->cx = cx;
	char name[96];
	snprintf(name, sizeof name, "k%d_%s", cx->n_kernels, what);
	l->k = kir_kernel_new(cx->p->arena, name);
	if (!l->k) return false;
	cx->n_kernels++;
	return true;
}

kir_expr *lk_dim(lk *l, tbc_dim d) {
	if (!d.sym) return kir_e_index(l->k, d.size);
	return kir_e_size(l->k, kir_size_param(l->k, d.sym));
}

bool lk_bind(lk *l, int pb) {
	if (l->n_args == l->cap_args) {
		int cap = l->cap_args ? l->cap_args * 2 : 8;
		int *grown = tbc_arena_array(l->cx->p->arena, (size_t)cap, sizeof *grown);
		if (!grown) return false;
		if (l->n_args) memcpy(grown, l->args, (size_t)l->n_args * sizeof *grown);
		l->args = grown;
		l->cap_args = cap;
	}
	l->args[l->n_args++] = pb;
	return true;
}

kir_buffer *lk_buf(lk *l, int pb) {
	if (pb < 0) return NULL;
	for (int i = 0; i < l->n_args; i++)
		if (l->args[i] == pb) return l->k->buffers[i];
	const kir_pbuf *b = l->cx->p->bufs[pb];
	kir_expr *dims[TBC_MAX_RANK];
	for (int d = 0; d < b->type.rank; d++) dims[d] = lk_dim(l, b->type.dims[d]);
	char name[64];
	snprintf(name, sizeof name, "%s", b->name);
	for (int i = 0; i < l->k->n_buffers; i++)
		if (!strcmp(l->k->buffers[i]->name, name)) snprintf(name, sizeof name, "%s_%d", b->name, pb);
	kir_buffer *kb = kir_buffer_new(l->k, name, b->type.dtype, b->role, b->type.rank, dims);
	if (!kb) return NULL;
	return lk_bind(l, pb) ? kb : NULL;
}

kir_buffer *lk_value(lk *l, const tbc_value *v) { return lk_buf(l, lower_value_buf(l->cx, v)); }

static bool append_launch(lk *l, kir_kernel *k);

bool lk_split_first(lk *l, kir_stmt *body, const char *suffix) {
	kir_kernel *k = l->k;
	if (l->first || !body || k->failed) return k->failed = true, false;
	kir_kernel *f = kir_kernel_copy(k);
	char name[160];
	snprintf(name, sizeof name, "%s_%s", k->name, suffix);
	if (!f || !(f->name = tbc_arena_strdup(k->arena, name))) return k->failed = true, false;
	f->body = body;
	k->group_dims = 0, k->n_locals = 0, k->locals = NULL;
	l->first = f;
	return true;
}

/* Verifies k, one of l's kernels, and appends its launches. */
static bool end_kernel(lk *l, kir_kernel *k) {
	lower_cx *cx = l->cx;
	if (!kir_verify(k, cx->d)) return internal(cx, "a lowered kernel does not verify");
	if (!kir_fits_target(k, cx->target, cx->d)) return internal(cx, "a lowered kernel does not fit its target");
	kir_kernel **parts = &k;
	int n_parts = 1;
	if (cx->target->parallel == TBC_PAR_GRID && (n_parts = lower_device_form(k, &parts)) < 0)
		return internal(cx, "out of memory building a kernel");
	for (int i = 0; i < n_parts; i++)
		if (!append_launch(l, parts[i])) return false;
	return true;
}

bool lk_end(lk *l, kir_stmt *body) {
	lower_cx *cx = l->cx;
	kir_program *p = cx->p;
	if (!body || l->k->failed) return internal(cx, "out of memory building a kernel");
	l->k->body = body;
	for (int i = 0; i < l->n_args; i++) /* the symbols known by now: all this kernel can name */
		if (l->args[i] == p->syms_buf) l->k->buffers[i]->dims[0] = kir_e_index(l->k, p->n_syms);
	if (l->first) {
		/* What the kernel gained after the split (buffers bound by an
		 * epilogue, variables, sizes) the first kernel shares. */
		kir_kernel *f = l->first, *k = l->k;
		f->n_buffers = k->n_buffers, f->buffers = k->buffers;
		f->n_sizes = k->n_sizes, f->size_names = k->size_names;
		f->n_vars = k->n_vars, f->vars = k->vars;
		f->contract = k->contract;
		if (!end_kernel(l, f)) return false;
	}
	return end_kernel(l, l->k);
}

/* Appends the launch of kernel k (l's, or a part of it) binding l's buffers. */
static bool append_launch(lk *l, kir_kernel *k) {
	lower_cx *cx = l->cx;
	kir_program *p = cx->p;
	if (cx->target->parallel == TBC_PAR_GRID && !kir_verify(k, cx->d))
		return internal(cx, "a kernel's device form does not verify");
	if (p->n_launches == p->cap_launches) {
		int cap = p->cap_launches ? p->cap_launches * 2 : 16;
		kir_launch *grown = tbc_arena_array(p->arena, (size_t)cap, sizeof *grown);
		if (!grown) return false;
		if (p->n_launches) memcpy(grown, p->launches, (size_t)p->n_launches * sizeof *grown);
		p->launches = grown;
		p->cap_launches = cap;
	}
	kir_launch *la = &p->launches[p->n_launches];
	la->kernel = k;
	la->args = l->args;
	la->op_pos = cx->op_pos;
	la->syms = tbc_arena_array(p->arena, (size_t)k->n_sizes + 1, sizeof(int));
	if (!la->syms) return false;
	for (int i = 0; i < k->n_sizes; i++) {
		la->syms[i] = -1;
		for (int s = 0; s < p->n_syms; s++)
			if (!strcmp(p->sym_names[s], k->size_names[i])) la->syms[i] = s;
		if (la->syms[i] < 0) return internal(cx, "a kernel size is not a program symbol");
	}
	p->n_launches++;
	return true;
}

bool lower_marker(lower_cx *cx, kir_ctl ctl, int s0, int s1, int s2) {
	kir_program *p = cx->p;
	if (p->n_launches == p->cap_launches) {
		int cap = p->cap_launches ? p->cap_launches * 2 : 16;
		kir_launch *grown = tbc_arena_array(p->arena, (size_t)cap, sizeof *grown);
		if (!grown) return internal(cx, "out of memory");
		if (p->n_launches) memcpy(grown, p->launches, (size_t)p->n_launches * sizeof *grown);
		p->launches = grown;
		p->cap_launches = cap;
	}
	p->launches[p->n_launches++] = (kir_launch){.op_pos = cx->op_pos, .ctl = ctl, .ctl_sym = {s0, s1, s2}};
	return true;
}

/* ---- Loop nests ------------------------------------------------------------*/
typedef enum { PAT_ANY, PAT_FULL, PAT_BCAST, PAT_RUNTIME } pattern;

static pattern dim_pattern(const tbc_type *out, const tbc_type *t, int d) {
	int di = d - (out->rank - t->rank);
	tbc_dim od = out->dims[d];
	if (!od.sym && od.size == 1) return PAT_ANY;
	if (di < 0) return PAT_BCAST;
	tbc_dim id = t->dims[di];
	if (!id.sym) return id.size == 1 ? PAT_BCAST : PAT_FULL;
	return tbc_dim_eq(id, od) ? PAT_FULL : PAT_RUNTIME;
}

bool nest_build(lk *l, nest *n, const tbc_type *out, int n_operands, const tbc_type *const *operands) {
	memset(n, 0, sizeof *n);
	n->out = out;
	int r = out->rank;
	n->rank = 0;
	/* group[i]: operand i's pattern over the dims of the loop being built
	 * (ANY until a dim decides it); a dim joins the loop when it agrees for
	 * every operand, so size-1 dims between others never hide a change. */
	pattern small_group[16];
	pattern *group = n_operands <= 16 ? small_group : calloc((size_t)n_operands, sizeof *group);
	if (!group) return false;
	for (int d = 0; d < r; d++) {
		bool merge = n->rank > 0;
		for (int i = 0; i < n_operands && merge; i++) {
			pattern a = group[i], b = dim_pattern(out, operands[i], d);
			if (a == PAT_RUNTIME || b == PAT_RUNTIME) merge = false;
			else if (a != PAT_ANY && b != PAT_ANY && a != b) merge = false;
		}
		for (int i = 0; i < n_operands; i++) {
			pattern b = dim_pattern(out, operands[i], d);
			if (!merge) group[i] = b;
			else if (b != PAT_ANY) group[i] = b;
		}
		/* A run of ANY dims merges into the previous loop as well. */
		if (merge) {
			n->size[n->rank - 1] = kir_e_mul(l->k, n->size[n->rank - 1], lk_dim(l, out->dims[d]));
		} else {
			n->first[n->rank] = d;
			n->size[n->rank] = lk_dim(l, out->dims[d]);
			n->rank++;
		}
	}
	if (group != small_group) free(group);
	n->first[n->rank] = r;
	static const char *const names[] = {"i", "j", "k", "l", "m", "n"};
	for (int g = 0; g < n->rank; g++) {
		char name[16];
		if (g < 6) snprintf(name, sizeof name, "%s", names[g]);
		else snprintf(name, sizeof name, "i%d", g);
		n->vars[g] = kir_var_new(l->k, name, KIR_INDEX);
		n->kinds[g] = g == 0 ? KIR_LOOP_PARALLEL : g == n->rank - 1 ? KIR_LOOP_VECTOR : KIR_LOOP_SEQUENTIAL;
	}
	n->linear = nest_index(l, n, out);
	return !l->k->failed;
}

kir_expr *nest_index(lk *l, const nest *n, const tbc_type *t) {
	kir_kernel *k = l->k;
	kir_expr *idx = kir_e_index(k, 0), *stride = kir_e_index(k, 1);
	for (int g = n->rank - 1; g >= 0; g--) {
		pattern p = PAT_ANY;
		for (int d = n->first[g]; d < n->first[g + 1]; d++) {
			pattern q = dim_pattern(n->out, t, d);
			if (q != PAT_ANY) p = q;
		}
		if (p == PAT_BCAST || p == PAT_ANY) continue;
		kir_expr *var = kir_e_var(k, n->vars[g]);
		if (p == PAT_FULL) {
			idx = kir_e_add(k, idx, kir_e_mul(k, var, stride));
			stride = kir_e_mul(k, stride, n->size[g]);
		} else { /* a symbolic dim that may be 1 at run time */
			kir_expr *dim = lk_dim(l, t->dims[n->first[g] - (n->out->rank - t->rank)]);
			kir_expr *eff = kir_e_select(k, kir_e_cmp(k, KIR_EQ, dim, kir_e_index(k, 1)), kir_e_index(k, 0), stride);
			idx = kir_e_add(k, idx, kir_e_mul(k, var, eff));
			stride = kir_e_mul(k, stride, dim);
		}
	}
	return idx;
}

kir_stmt *nest_finish(lk *l, nest *n) {
	kir_stmt *s = n->body.first;
	for (int g = n->rank - 1; g >= 0; g--)
		s = kir_s_for(l->k, n->vars[g], kir_e_index(l->k, 0), n->size[g], 1, n->kinds[g], s);
	return s;
}

/* ---- Copies and aliases ----------------------------------------------------*/
bool lower_copy(lower_cx *cx, int dst, int src) {
	lk l;
	if (!lk_begin(&l, cx, "copy")) return false;
	kir_buffer *d = lk_buf(&l, dst), *s = lk_buf(&l, src);
	const kir_pbuf *db = cx->p->bufs[dst];
	tbc_type flat = db->type;
	nest n;
	const tbc_type *ops[1] = {&flat};
	if (!d || !s || !nest_build(&l, &n, &flat, 1, ops)) return false;
	kir_block_add(l.k, &n.body, kir_s_store(l.k, d, n.linear, kir_e_load(l.k, s, n.linear)));
	kir_stmt *body = nest_finish(&l, &n);
	if (!body) { /* rank 0 */
		body = kir_s_store(l.k, d, kir_e_index(l.k, 0), kir_e_load(l.k, s, kir_e_index(l.k, 0)));
	}
	return lk_end(&l, body);
}

static bool lower_reshape_like(lower_cx *cx, const tbc_op *op) {
	return lower_alias(cx, op->outputs[0], op->inputs[0]);
}

/* Dropout at inference is the identity; its mask, when wanted, is all true. */
static bool lower_dropout(lower_cx *cx, const tbc_op *op) {
	if (op->n_inputs > 2 && op->inputs[2]) {
		const tbc_tensor *t = tbc_input_const(op, 2);
		if (!t || tbc_load_i64(t->dtype, t->data, 0) != 0) return lower_family_misc(cx, op) == LOWER_OK;
	}
	if (op->n_outputs > 1 && op->outputs[1]) {
		int b = lower_result_buf(cx, op->outputs[1]);
		lk l;
		if (b < 0 || !lk_begin(&l, cx, "mask")) return false;
		kir_buffer *m = lk_buf(&l, b);
		nest n;
		const tbc_type *t = &op->outputs[1]->type;
		if (!m || !nest_build(&l, &n, t, 0, NULL)) return false;
		kir_block_add(l.k, &n.body, kir_s_store(l.k, m, n.linear, kir_e_int(l.k, TBC_DT_BOOL, 1)));
		kir_stmt *body = nest_finish(&l, &n);
		if (!body) body = kir_s_store(l.k, m, kir_e_index(l.k, 0), kir_e_int(l.k, TBC_DT_BOOL, 1));
		if (!lk_end(&l, body)) return false;
	}
	return lower_alias(cx, op->outputs[0], op->inputs[0]);
}

/* ---- Driver ----------------------------------------------------------------*/
/* Whether op's output shape is given by the values of an input that is not a
 * constant (a shape computed from other shapes while running). */
static bool reads_shape_tensor(const tbc_op *op) {
	int first = 1, last = 1;
	switch (op->code) {
	case TBC_OP_Reshape:
	case TBC_OP_Expand:
	case TBC_OP_Tile: break;
	case TBC_OP_ConstantOfShape: first = last = 0; break;
	case TBC_OP_Range: first = 0, last = 2; break;
	case TBC_OP_Slice: last = 4; break;
	default: return false;
	}
	for (int i = first; i <= last && i < op->n_inputs; i++)
		if (op->inputs[i] && op->inputs[i]->kind != TBC_VALUE_CONST) return true;
	return false;
}


/* ---- Op families ---------------------------------------------------------
 * Each op's lowering family is a column of ir/ops.def.  A family lowers an
 * op in two steps: when the op's output shape is known only while running
 * (or comes from a tensor computed while running), `shape` emits the shape
 * kernel that computes or checks the output dims (LOWER_SHAPED: `lower`
 * follows; LOWER_OK: it lowered the data too); then `lower` emits the data
 * kernels.  Both live in the family's file, static and dynamic shapes
 * together. */
typedef struct lower_family {
	lower_result (*shape)(lower_cx *cx, const tbc_op *op); /* NULL: every output shape must be known */
	lower_result (*lower)(lower_cx *cx, const tbc_op *op); /* NULL: not lowered */
} lower_family;

/* The view family: Identity, Reshape, Flatten, Squeeze and Unsqueeze share
 * their input's storage when that is safe (lower_alias), as does Dropout at
 * inference. */
static lower_result lower_family_view(lower_cx *cx, const tbc_op *op) {
	bool ok = op->code == TBC_OP_Dropout ? lower_dropout(cx, op) : lower_reshape_like(cx, op);
	return ok ? LOWER_OK : LOWER_FAILED;
}

static lower_result lower_family_control(lower_cx *cx, const tbc_op *op) {
	return lower_control(cx, op) ? LOWER_OK : LOWER_FAILED;
}

static lower_result lower_family_elementwise(lower_cx *cx, const tbc_op *op) {
	if (!lower_ew_supported(op)) return LOWER_NOT_MINE;
	return lower_elementwise(cx, op) ? LOWER_OK : LOWER_FAILED;
}

/* A fused region: a reduction with its elementwise prologue and epilogue
 * (fused_reduce.c), else an elementwise region (elementwise.c). */
static lower_result lower_family_fused(lower_cx *cx, const tbc_op *op) {
	lower_result r = lower_fused_reduce(cx, op);
	if (r != LOWER_NOT_MINE) return r;
	return lower_fused(cx, op) ? LOWER_OK : LOWER_FAILED;
}

enum {
#define FAMILY(name, shape, lower) LF_##name,
#include "codegen/lower/families.def"
#undef FAMILY
	LF_COUNT
};

static const lower_family families[LF_COUNT] = {
#define FAMILY(name, shape, lower) [LF_##name] = {shape, lower},
#include "codegen/lower/families.def"
#undef FAMILY
};

static const unsigned char family_of[TBC_OP_COUNT] = {
#define TBC_OP(id, onnx, min_in, max_in, min_out, max_out, cat, shape, interp, lower, grad) [TBC_OP_##id] = LF_##lower,
#include "ir/ops.def"
#undef TBC_OP
};

bool lower_op(lower_cx *cx, const tbc_op *op) {
	if (cx->computed && op->n_outputs == 1 && op->outputs[0] && cx->computed[op->outputs[0]->id]) return true;
	const lower_family *f = &families[op->code < TBC_OP_COUNT ? family_of[op->code] : LF_none];
	if (op->code == TBC_OP_If || op->code == TBC_OP_Loop || op->code == TBC_OP_Scan) return f->lower(cx, op) == LOWER_OK;
	bool outputs_known = true;
	for (int i = 0; i < op->n_outputs; i++)
		if (op->outputs[i] && !lower_type_known(cx, &op->outputs[i]->type)) outputs_known = false;
	/* Squeeze without axes over a symbolic dim: the rank was fixed assuming
	 * the dim is not 1, and its shape kernel checks that. */
	if (op->code == TBC_OP_Squeeze && (op->n_inputs < 2 || !op->inputs[1]))
		for (int d = 0; d < op->inputs[0]->type.rank; d++)
			if (op->inputs[0]->type.dims[d].sym) outputs_known = false;
	if (!outputs_known || reads_shape_tensor(op)) {
		/* A data-dependent output shape: the family's shape kernel computes
		 * the new symbols before the op's buffers are made.  An op whose
		 * shape comes from a tensor computed while running takes the same
		 * path when inference derived its dims from that tensor's symbolic
		 * value (ir/symval.c): the shape kernel then checks the tensor
		 * against the derived dims instead of storing them, so an
		 * assumption inference made (a symbolic Reshape's element count, a
		 * slice within bounds) is verified, not trusted. */
		lower_result r = f->shape ? f->shape(cx, op) : LOWER_NOT_MINE;
		if (r == LOWER_NOT_MINE && outputs_known) r = LOWER_SHAPED;
		if (r == LOWER_NOT_MINE)
			return lower_error(cx, op, "the shape of its output depends on the data; op %s with such a shape has no lowering yet",
					   tbc_ops[op->code].onnx_name);
		if (r != LOWER_SHAPED) return r == LOWER_OK;
		for (int i = 0; i < op->n_outputs; i++)
			if (op->outputs[i] && !lower_type_known(cx, &op->outputs[i]->type))
				return internal(cx, "a shape kernel left an output dim unknown");
	}
	lower_result r = f->lower ? f->lower(cx, op) : LOWER_NOT_MINE;
	if (r != LOWER_NOT_MINE) return r == LOWER_OK;
	return lower_unsupported(cx, op);
}

/* The program symbol named name, added when new; -1 when out of memory. */
static int add_sym_as(lower_cx *cx, const char *name, bool computed, bool derived) {
	kir_program *p = cx->p;
	for (int s = 0; s < p->n_syms; s++)
		if (!strcmp(p->sym_names[s], name)) return s;
	const char **grown = tbc_arena_array(p->arena, (size_t)p->n_syms + 1, sizeof *grown);
	bool *flags = tbc_arena_array(p->arena, (size_t)p->n_syms + 1, sizeof *flags);
	bool *dflags = tbc_arena_array(p->arena, (size_t)p->n_syms + 1, sizeof *dflags);
	if (!grown || !flags || !dflags) return -1;
	if (p->n_syms) {
		memcpy(grown, p->sym_names, (size_t)p->n_syms * sizeof *grown);
		memcpy(flags, p->sym_computed, (size_t)p->n_syms * sizeof *flags);
		memcpy(dflags, p->sym_derived, (size_t)p->n_syms * sizeof *dflags);
	}
	grown[p->n_syms] = tbc_arena_strdup(p->arena, name);
	if (!grown[p->n_syms]) return -1;
	flags[p->n_syms] = computed;
	dflags[p->n_syms] = derived;
	p->sym_names = grown;
	p->sym_computed = flags;
	p->sym_derived = dflags;
	return p->n_syms++;
}

static bool add_sym(lower_cx *cx, const char *name) { return add_sym_as(cx, name, false, false) >= 0; }

int lower_sym_computed(lower_cx *cx, const char *name) {
	int s = add_sym_as(cx, name, true, false);
	if (s < 0) internal(cx, "out of memory");
	return s;
}

/* The index of the program symbol named name, -1 when the program has none.
 * A derived dim (`past_seq + seq`) whose atoms are all symbols known before
 * the run becomes one here, on first use: the binder evaluates it from them
 * (program.c, the runtime), so it is known before the run too.  One with a
 * computed atom is left to the op that defines it, whose shape kernel
 * stores it as a computed symbol. */
int lower_find_sym(lower_cx *cx, const char *name) {
	kir_program *p = cx->p;
	for (int s = 0; s < p->n_syms; s++)
		if (!strcmp(p->sym_names[s], name)) return s;
	tbc_poly poly;
	if (!tbc_sym_is_derived(name) || !tbc_poly_of_sym(name, &poly)) return -1;
	for (int a = 0; a < poly.n_atoms; a++) {
		int s = 0;
		while (s < p->n_syms && strcmp(p->sym_names[s], tbc_poly_atom_name(&poly, a))) s++;
		if (s == p->n_syms || p->sym_computed[s]) return -1;
	}
	int s = add_sym_as(cx, name, false, true);
	if (s < 0) internal(cx, "out of memory");
	return s;
}

bool lower_dim_known(lower_cx *cx, tbc_dim d) { return !d.sym || lower_find_sym(cx, d.sym) >= 0; }

bool lower_dim_computed(lower_cx *cx, tbc_dim d) {
	int s = d.sym ? lower_find_sym(cx, d.sym) : -1;
	return s >= 0 && cx->p->sym_computed[s];
}

bool lower_type_known(lower_cx *cx, const tbc_type *t) {
	if (t->rank < 0) return false;
	for (int d = 0; d < t->rank; d++)
		if (!lower_dim_known(cx, t->dims[d])) return false;
	return true;
}

/* ---- Shape kernels ---------------------------------------------------------*/
kir_buffer *lk_syms(lk *l) {
	kir_program *p = l->cx->p;
	if (p->syms_buf < 0) {
		tbc_type t = {.dtype = TBC_DT_I64, .rank = 1};
		t.dims[0].size = 0; /* set to the symbol count once lowering is done */
		p->syms_buf = new_pbuf(l->cx, KIR_BUF_SYMS, &t, "syms");
		if (p->syms_buf < 0) return NULL;
	}
	return lk_buf(l, p->syms_buf);
}

bool lower_shape_dim(lk *l, kir_block *b, const tbc_op *op, tbc_dim dim, const char *what, kir_expr *value) {
	lower_cx *cx = l->cx;
	kir_kernel *k = l->k;
	const char *msg = tbc_arena_printf(k->arena, "%s is negative", what);
	kir_block_add(k, b, kir_s_error(k, kir_e_cmp(k, KIR_LT, value, kir_e_index(k, 0)), msg));
	if (lower_dim_known(cx, dim)) {
		/* Compiled for a known dim: the run-time value must agree. */
		if (dim.sym) msg = tbc_arena_printf(k->arena, "%s differs from %s, the size the model was compiled for", what, dim.sym);
		else msg = tbc_arena_printf(k->arena, "%s differs from %" PRId64 ", the size the model was compiled for", what, dim.size);
		kir_block_add(k, b, kir_s_error(k, kir_e_cmp(k, KIR_NE, value, lk_dim(l, dim)), msg));
		return !k->failed;
	}
	(void)op;
	int s = lower_sym_computed(cx, dim.sym);
	kir_buffer *syms = s >= 0 ? lk_syms(l) : NULL;
	if (!syms) return false;
	kir_block_add(k, b, kir_s_store(k, syms, kir_e_index(k, s), kir_e_cast(k, TBC_DT_I64, value)));
	return !k->failed;
}

/* Buffers whose size depends on a computed symbol are allocated while
 * running (kir_pbuf.dynamic); the symbols buffer gets its final length. */
static void mark_dynamic(kir_program *p) {
	for (int i = 0; i < p->n_bufs; i++) {
		kir_pbuf *b = p->bufs[i];
		if (i == p->syms_buf) {
			b->type.dims[0].size = p->n_syms;
			continue;
		}
		if ((b->role != KIR_BUF_TEMP && b->role != KIR_BUF_OUTPUT) || b->alias_of >= 0) continue;
		for (int d = 0; d < b->type.rank; d++)
			for (int s = 0; b->type.dims[d].sym && s < p->n_syms; s++)
				if (p->sym_computed[s] && !strcmp(p->sym_names[s], b->type.dims[d].sym)) b->dynamic = true;
		if (b->dynamic && b->role == KIR_BUF_TEMP) b->part = -1, b->part_offset = -1, b->offset = -1;
	}
}

/* Places the temporaries memory planning did not: statically sized ones
 * after the planned part 0, symbolic ones at run time after every part
 * (part -1, offset -1). */
static void place_temps(kir_program *p) {
	int64_t end = p->parts[0].bytes;
	for (int i = 0; i < p->n_bufs; i++) {
		kir_pbuf *b = p->bufs[i];
		if (b->role != KIR_BUF_TEMP || b->alias_of >= 0 || b->part != 0) continue;
		int64_t bytes = kir_pbuf_bytes(p, b, NULL);
		if (bytes >= 0 && align_up(b->offset + bytes) > end) end = align_up(b->offset + bytes);
	}
	for (int i = 0; i < p->n_bufs; i++) {
		kir_pbuf *b = p->bufs[i];
		if (b->role != KIR_BUF_TEMP || b->alias_of >= 0 || b->part >= 0 || b->scratch_of >= 0 || b->dynamic) continue;
		int64_t bytes = kir_pbuf_bytes(p, b, NULL);
		if (bytes < 0) continue; /* symbolic: at run time */
		b->part = 0;
		b->offset = b->part_offset = end;
		end += align_up(bytes);
	}
	/* Scratch: one region after that.  A scratch buffer lives from the first
	 * to the last op whose launches use it (ops run one after another); each
	 * goes at the lowest offset clear of the scratch placed before it that
	 * lives at the same time. */
	int64_t scratch = end;
	int n_scratch = 0;
	for (int i = 0; i < p->n_bufs; i++) n_scratch += p->bufs[i]->scratch_of >= 0 && p->bufs[i]->alias_of < 0;
	int *first = n_scratch ? malloc((size_t)p->n_bufs * 2 * sizeof *first) : NULL;
	int *last = first ? first + p->n_bufs : NULL;
	for (int i = 0; first && i < p->n_bufs; i++) first[i] = INT_MAX, last[i] = -1;
	for (int l = 0; first && l < p->n_launches; l++)
		for (int a = 0; p->launches[l].kernel && a < p->launches[l].kernel->n_buffers; a++) {
			int pb = p->launches[l].args[a];
			if (p->bufs[pb]->alias_of >= 0) pb = p->bufs[pb]->alias_of;
			if (p->launches[l].op_pos < first[pb]) first[pb] = p->launches[l].op_pos;
			if (p->launches[l].op_pos > last[pb]) last[pb] = p->launches[l].op_pos;
		}
	for (int i = 0; i < p->n_bufs; i++) {
		kir_pbuf *b = p->bufs[i];
		if (b->role != KIR_BUF_TEMP || b->alias_of >= 0 || b->part >= 0 || b->scratch_of < 0) continue;
		int64_t bytes = kir_pbuf_bytes(p, b, NULL);
		if (bytes < 0) continue; /* symbolic: at run time */
		int64_t at = end;
		/* Without the use table (out of memory) every scratch gets its own place. */
		for (bool moved = true; moved;) {
			moved = false;
			for (int j = 0; j < i; j++) {
				const kir_pbuf *o = p->bufs[j];
				if (o->role != KIR_BUF_TEMP || o->alias_of >= 0 || o->scratch_of < 0 || o->part != 0 || o->offset < end)
					continue;
				if (first && (first[j] > last[i] || first[i] > last[j])) continue; /* not at the same time */
				int64_t ob = align_up(kir_pbuf_bytes(p, o, NULL));
				if (at < o->offset + ob && o->offset < at + align_up(bytes)) at = o->offset + ob, moved = true;
			}
		}
		b->part = 0;
		b->offset = b->part_offset = at;
		if (at + align_up(bytes) > scratch) scratch = at + align_up(bytes);
	}
	free(first);
	end = scratch;
	for (int i = 0; i < p->n_bufs; i++) {
		kir_pbuf *b = p->bufs[i];
		if (b->alias_of < 0) continue;
		b->offset = p->bufs[b->alias_of]->offset;
		b->part = p->bufs[b->alias_of]->part;
		b->part_offset = p->bufs[b->alias_of]->part_offset;
	}
	p->parts[0].bytes = end;
	p->arena_static = (uint64_t)end;
}

/* The arena parts of memory planning (passes/memplan.c), as program parts;
 * val_part for every value of the main graph it placed. */
static bool plan_parts(lower_cx *cx) {
	const tbc_module *m = cx->m;
	kir_program *p = cx->p;
	tbc_memplan_part small[16], *mp = small;
	int n = tbc_memplan_layout(m, small, 16);
	if (n > 16) {
		mp = malloc((size_t)n * sizeof *mp);
		if (!mp) return false;
		n = tbc_memplan_layout(m, mp, n);
	}
	if (n < 1) n = 1, mp[0] = (tbc_memplan_part){0};
	p->parts = tbc_arena_array(p->arena, (size_t)n, sizeof *p->parts);
	bool ok = p->parts != NULL;
	bool *known = calloc((size_t)n, sizeof *known);
	ok = ok && known;
	for (int j = 0; ok && j < n; j++) {
		kir_part *q = &p->parts[j];
		q->n_syms = mp[j].n_syms;
		q->bytes = mp[j].bytes;
		known[j] = true;
		for (int i = 0; i < q->n_syms; i++) {
			q->syms[i] = lower_find_sym(cx, mp[j].syms[i]);
			/* Not a symbol known before the run: its values are placed apart. */
			if (q->syms[i] < 0 || p->sym_computed[q->syms[i]]) known[j] = false;
		}
		if (!known[j]) q->n_syms = 0, q->bytes = 0;
	}
	if (ok) {
		p->n_parts = n;
		for (const tbc_op *op = m->main->first; op; op = op->next)
			for (int i = 0; i < op->n_outputs; i++) {
				const tbc_value *v = op->outputs[i];
				if (!v || v->mem_offset < 0) continue;
				int j = tbc_memplan_part_of(mp, n, v);
				cx->val_part[v->id] = j >= 0 && known[j] ? j : -1;
			}
	}
	free(known);
	if (mp != small) free(mp);
	return ok;
}

/* Lives of values in positions of main-graph ops: a value defined or read
 * inside a subgraph counts at the op owning it. */
static void mark_lives(lower_cx *cx, const tbc_graph *g, int pos) {
	for (const tbc_op *op = g->first; op; op = op->next) {
		int at = g == cx->m->main ? pos++ : pos;
		for (int i = 0; i < op->n_outputs; i++)
			if (op->outputs[i]) cx->life_start[op->outputs[i]->id] = cx->life_end[op->outputs[i]->id] = at;
		for (int i = 0; i < op->n_inputs; i++) {
			const tbc_value *v = op->inputs[i];
			if (v && cx->life_end[v->id] < at) cx->life_end[v->id] = at;
		}
		for (int a = 0; a < op->n_attrs; a++) {
			const tbc_attr *at_ = &op->attrs[a];
			int n = at_->kind == TBC_ATTR_GRAPH ? 1 : at_->kind == TBC_ATTR_GRAPHS ? at_->n : 0;
			for (int k = 0; k < n; k++) {
				const tbc_graph *body = at_->graphs[k];
				if (!body) continue;
				mark_lives(cx, body, at);
				for (int o = 0; o < body->n_outputs; o++) {
					const tbc_value *v = body->outputs[o];
					if (v && cx->life_end[v->id] < at) cx->life_end[v->id] = at;
				}
			}
		}
	}
}

tbc_code kir_lower(const tbc_module *m, const tbc_target_desc *t, tbc_arena *arena, tbc_diags *d,
		   kir_program **out) {
	*out = NULL;
	kir_program *p = tbc_arena_alloc(arena, sizeof *p);
	if (!p) return TBC_ERR_NO_MEMORY;
	p->arena = arena;
	/* The descriptor's model name (messages, tbc inspect): the graph's. */
	const char *gname = m->main ? m->main->name : NULL;
	p->name = gname && *gname && strlen(gname) <= 200 ? gname : "model";
	p->syms_buf = -1;
	lower_cx cx = {.m = m, .target = t, .p = p, .d = d};
	const tbc_graph *g = m->main;
	size_t nv = (size_t)m->n_values + 1;
	cx.buf_of = malloc(nv * sizeof(int));
	cx.val_part = malloc(nv * sizeof(int));
	cx.life_start = calloc(nv, sizeof(int));
	cx.life_end = calloc(nv, sizeof(int));
	cx.computed = calloc(nv, sizeof(bool));
	if (!cx.buf_of || !cx.val_part || !cx.life_start || !cx.life_end || !cx.computed) {
		free(cx.buf_of);
		free(cx.val_part);
		free(cx.life_start);
		free(cx.life_end);
		free(cx.computed);
		return TBC_ERR_NO_MEMORY;
	}
	for (uint32_t i = 0; i < m->n_values; i++) cx.buf_of[i] = cx.val_part[i] = -1;
	mark_lives(&cx, g, 0);
	if (t->parallel == TBC_PAR_HOST_THREADS && !lower_mark_load_time(&cx)) {
		free(cx.buf_of);
		free(cx.val_part);
		free(cx.life_start);
		free(cx.life_end);
		free(cx.computed);
		return TBC_ERR_NO_MEMORY;
	}
	for (int i = 0; i < g->n_outputs; i++) cx.life_end[g->outputs[i]->id] = INT_MAX;
	bool ok = true;
	p->inputs = tbc_arena_array(arena, (size_t)g->n_inputs + 1, sizeof(int));
	p->outputs = tbc_arena_array(arena, (size_t)g->n_outputs + 1, sizeof(int));
	if (!p->inputs || !p->outputs) ok = false;
	for (int i = 0; ok && i < g->n_inputs; i++) {
		const tbc_value *v = g->inputs[i];
		if (v->type.rank < 0 || !tbc_dtype_supported(v->type.dtype)) {
			ok = lower_error(&cx, NULL, "graph input %d has no known rank or a non-numeric dtype", i);
			break;
		}
		for (int dd = 0; dd < v->type.rank && ok; dd++)
			if (v->type.dims[dd].sym) ok = add_sym(&cx, v->type.dims[dd].sym);
		int b = ok ? new_pbuf(&cx, KIR_BUF_INPUT, &v->type, v->name) : -1;
		if (b < 0) ok = false;
		else {
			p->bufs[b]->io_index = i;
			p->inputs[p->n_inputs++] = b;
			cx.buf_of[v->id] = b;
		}
	}
	if (ok && !plan_parts(&cx)) ok = false;
	/* Outputs: the op defining an output writes straight into it. */
	int *copy_from = calloc((size_t)g->n_outputs + 1, sizeof(int));
	if (!copy_from) ok = false;
	for (int i = 0; ok && i < g->n_outputs; i++) {
		const tbc_value *v = g->outputs[i];
		copy_from[i] = -1;
		if (v->type.rank < 0 || !tbc_dtype_supported(v->type.dtype)) {
			char name[128];
			ok = lower_error(&cx, NULL,
					 "graph output %d '%s' has an unknown rank or a non-numeric dtype; no lowering yet",
					 i, tbc_value_display_name(v, name, sizeof name));
			break;
		}
		int b = new_pbuf(&cx, KIR_BUF_OUTPUT, &v->type, v->name);
		if (b < 0) {
			ok = false;
			break;
		}
		p->bufs[b]->io_index = i;
		p->outputs[p->n_outputs++] = b;
		if (v->kind == TBC_VALUE_RESULT && cx.buf_of[v->id] < 0) cx.buf_of[v->id] = b;
		else copy_from[i] = (int)v->id;
	}
	for (const tbc_op *op = g->first; ok && op; op = op->next, cx.op_pos++) ok = lower_op(&cx, op);
	for (int i = 0; ok && i < g->n_outputs; i++) {
		if (copy_from[i] < 0) continue;
		int src = lower_value_buf(&cx, g->outputs[i]);
		ok = src >= 0 && lower_copy(&cx, p->outputs[i], src);
	}
	for (int i = 0; ok && i < g->n_outputs; i++)
		if (!type_is_supported(&cx, g->outputs[i]))
			ok = lower_error(&cx, NULL, "graph output %d has a shape no op computes; no lowering yet", i);
	if (ok) mark_dynamic(p);
	/* A training step's state: its value before the first step goes into
	 * the weights blob, for the runtime to start from. */
	if (ok && m->n_state) {
		p->state = tbc_arena_array(arena, (size_t)m->n_state, sizeof *p->state);
		if (!p->state) ok = false;
		for (int i = 0; ok && i < m->n_state; i++) {
			const tbc_state *st = &m->state[i];
			const tbc_value *in = g->inputs[st->input];
			kir_state *ks = &p->state[p->n_state++];
			ks->input = st->input;
			ks->output = st->output;
			ks->init_buf = -1;
			ks->weight = st->weight;
			if (!st->init) continue;
			int b = new_pbuf(&cx, KIR_BUF_CONST, &in->type, in->name);
			if (b < 0) {
				ok = false;
				break;
			}
			p->bufs[b]->constant = (tbc_tensor *)st->init;
			p->bufs[b]->offset = (int64_t)p->weights_size;
			p->weights_size += (uint64_t)align_up(kir_pbuf_bytes(p, p->bufs[b], NULL));
			ks->init_buf = b;
		}
	}
	free(copy_from);
	free(cx.buf_of);
	free(cx.val_part);
	free(cx.life_start);
	free(cx.life_end);
	free(cx.load_time);
	free(cx.computed);
	if (!ok) return tbc_diags_first_code(d) != TBC_OK ? tbc_diags_first_code(d) : TBC_ERR_NO_MEMORY;
	place_temps(p);
	/* The host threads' runner computes load-time values once per session;
	 * a device table runs every launch at each run (docs/load-time.md). */
	if (t->parallel == TBC_PAR_HOST_THREADS && !kir_program_split_init(p)) return TBC_ERR_NO_MEMORY;
	*out = p;
	return TBC_OK;
}

/* ---- Printing --------------------------------------------------------------*/
char *kir_program_print(const kir_program *p) {
	size_t cap = 4096, len = 0;
	char *s = malloc(cap);
	if (!s) return NULL;
	s[0] = 0;
#define APPEND(str)                                                              \
	do {                                                                     \
		const char *a_ = (str);                                          \
		size_t n_ = strlen(a_);                                          \
		if (len + n_ + 1 > cap) {                                        \
			while (len + n_ + 1 > cap) cap *= 2;                     \
			char *g_ = realloc(s, cap);                              \
			if (!g_) {                                               \
				free(s);                                         \
				return NULL;                                     \
			}                                                        \
			s = g_;                                                  \
		}                                                                \
		memcpy(s + len, a_, n_ + 1);                                     \
		len += n_;                                                       \
	} while (0)
	char line[256];
	for (int i = 0; i < p->n_launches; i++) {
		const kir_launch *la = &p->launches[i];
		if (la->ctl != KIR_CTL_KERNEL) {
			const char *const *sn = p->sym_names;
			const int *cs = la->ctl_sym;
			switch (la->ctl) {
			case KIR_CTL_IF: snprintf(line, sizeof line, "if %s {\n", sn[cs[0]]); break;
			case KIR_CTL_ELSE: snprintf(line, sizeof line, "} else {\n"); break;
			case KIR_CTL_LOOP:
				snprintf(line, sizeof line, "loop %s < %s while %s {\n", sn[cs[0]], cs[1] >= 0 ? sn[cs[1]] : "inf",
					 cs[2] >= 0 ? sn[cs[2]] : "true");
				break;
			default: snprintf(line, sizeof line, "}\n"); break;
			}
			APPEND(line);
			continue;
		}
		char *k = kir_print(la->kernel);
		if (!k) {
			free(s);
			return NULL;
		}
		APPEND(k);
		free(k);
		/* "init": computed once per session (codegen/lower/load_time.c). */
		snprintf(line, sizeof line, "%s %s(", la->init ? "init" : "launch", la->kernel->name);
		APPEND(line);
		for (int a = 0; a < la->kernel->n_buffers; a++) {
			const kir_pbuf *b = p->bufs[la->args[a]];
			const char *role = b->role == KIR_BUF_INPUT ? "input" : b->role == KIR_BUF_OUTPUT ? "output"
									: b->role == KIR_BUF_CONST  ? "weights"
												    : "arena";
			if (b->role == KIR_BUF_INPUT || b->role == KIR_BUF_OUTPUT)
				snprintf(line, sizeof line, "%s%s %d", a ? ", " : "", role, b->io_index);
			else if (b->offset >= 0)
				snprintf(line, sizeof line, "%s%s+%" PRId64, a ? ", " : "", role, b->offset);
			else if (b->part > 0)
				snprintf(line, sizeof line, "%s%s.part%d+%" PRId64, a ? ", " : "", role, b->part, b->part_offset);
			else
				snprintf(line, sizeof line, "%s%s+dynamic", a ? ", " : "", role);
			APPEND(line);
		}
		APPEND(")\n");
	}
#undef APPEND
	return s;
}

void kir_program_weights(const kir_program *p, void *dst) {
	memset(dst, 0, (size_t)p->weights_size);
	for (int i = 0; i < p->n_bufs; i++) {
		const kir_pbuf *b = p->bufs[i];
		if (b->role != KIR_BUF_CONST || b->alias_of >= 0 || !b->constant) continue;
		char *to = (char *)dst + b->offset;
		const char *from = b->constant->data;
		if (b->lay.panel > 0) { /* matrix element (i, j) at (j / panel) pitch + i panel + j % panel */
			size_t es = tbc_dtype_size(b->type.dtype), panel = (size_t)b->lay.panel, pitch = (size_t)b->lay.pitch;
			size_t rows = (size_t)b->lay.rows, cols = (size_t)b->lay.cols;
			for (size_t r = 0; r < rows; r++)
				for (size_t c = 0; c < cols; c++) {
					size_t i = b->lay.transpose ? c : r, j = b->lay.transpose ? r : c;
					memcpy(to + ((j / panel) * pitch + i * panel + j % panel) * es, from + (r * cols + c) * es, es);
				}
			continue;
		}
		if (b->lay.pitch > 0) {
			size_t es = tbc_dtype_size(b->type.dtype), pitch = (size_t)b->lay.pitch * es;
			size_t rows = (size_t)b->lay.rows, cols = (size_t)b->lay.cols;
			if (b->lay.pairs) { /* matrix element (i, j) at (i / 2) * 2 pitch + 2 j + i % 2 */
				for (size_t r = 0; r < rows; r++)
					for (size_t c = 0; c < cols; c++) {
						size_t i = b->lay.transpose ? c : r, j = b->lay.transpose ? r : c;
						memcpy(to + ((i / 2) * 2 * (size_t)b->lay.pitch + 2 * j + i % 2) * es,
						       from + (r * cols + c) * es, es);
					}
				continue;
			}
			for (size_t r = 0; r < rows; r++) {
				if (!b->lay.transpose) memcpy(to + r * pitch, from + r * cols * es, cols * es);
				else
					for (size_t c = 0; c < cols; c++) memcpy(to + c * pitch + r * es, from + (r * cols + c) * es, es);
			}
			continue;
		}
		int64_t bytes = kir_pbuf_bytes(p, b, NULL);
		if (bytes > 0) memcpy(to, from, (size_t)bytes);
	}
}
