/* Data movement: Transpose, Slice, Concat, Split, Expand, Tile, DepthToSpace,
 * SpaceToDepth (affine copies, here), the index ops (lower_data_index.c) and
 * the generators (lower_data_gen.c).  Design notes: docs/lower-data.md.
 *
 * Pure copies move storage bits (u8/u16/u32/u64 views of the buffers), so
 * every dtype the IR stores is copied byte-exactly, whatever the backend can
 * compute on. */
#include <stdio.h>
#include <string.h>

#include "codegen/lower/lower_data.h"
#include "ir/kernels/data.h"

/* ---- Storage views ---------------------------------------------------------*/
tbc_dtype data_storage_type(tbc_dtype dt) {
	switch (tbc_dtype_size(dt)) {
	case 1: return TBC_DT_U8;
	case 2: return TBC_DT_U16;
	case 4: return TBC_DT_U32;
	case 8: return TBC_DT_U64;
	default: return TBC_DT_UNDEFINED;
	}
}

/* The kernel buffer bound to program buffer pb with element type dt: one per
 * (buffer, type), so a buffer read both as data and as indices gets two
 * views. */
static kir_buffer *view(lk *l, int pb, tbc_dtype dt) {
	if (pb < 0 || dt == TBC_DT_UNDEFINED) return NULL;
	for (int i = 0; i < l->n_args; i++)
		if (l->args[i] == pb && l->k->buffers[i]->dtype == dt) return l->k->buffers[i];
	const kir_pbuf *b = l->cx->p->bufs[pb];
	if (dt == b->type.dtype) return lk_buf(l, pb);
	kir_expr *dims[TBC_MAX_RANK];
	for (int d = 0; d < b->type.rank; d++) dims[d] = lk_dim(l, b->type.dims[d]);
	char name[80];
	snprintf(name, sizeof name, "%s", b->name);
	for (int i = 0; i < l->k->n_buffers; i++)
		if (!strcmp(l->k->buffers[i]->name, name)) snprintf(name, sizeof name, "%s_%s", b->name, kir_type_name(dt));
	kir_buffer *kb = kir_buffer_new(l->k, name, dt, b->role, b->type.rank, dims);
	if (!kb) return NULL;
	if (l->n_args == l->cap_args) {
		int cap = l->cap_args ? l->cap_args * 2 : 8;
		int *grown = tbc_arena_array(l->cx->p->arena, (size_t)cap, sizeof *grown);
		if (!grown) return NULL;
		if (l->n_args) memcpy(grown, l->args, (size_t)l->n_args * sizeof *grown);
		l->args = grown;
		l->cap_args = cap;
	}
	l->args[l->n_args++] = pb;
	return kb;
}

kir_buffer *data_in(lk *l, const tbc_value *v) {
	return view(l, lower_value_buf(l->cx, v), data_storage_type(v->type.dtype));
}

kir_buffer *data_out(lk *l, const tbc_value *v) {
	return view(l, lower_result_buf(l->cx, v), data_storage_type(v->type.dtype));
}

kir_expr *data_bits(lk *l, tbc_dtype dt, const void *data, size_t i) {
	return kir_e_int(l->k, data_storage_type(dt), (int64_t)tbc_load_bits(dt, data, i));
}

kir_expr *data_bits_of(lk *l, tbc_dtype dt, double v) {
	unsigned char buf[16] = {0};
	tbc_store_f64(dt, buf, 0, v);
	return data_bits(l, dt, buf, 0);
}

/* ---- Index helpers ---------------------------------------------------------*/
kir_expr *data_strides(lk *l, const tbc_type *t, kir_expr **strides) {
	kir_expr *s = kir_e_index(l->k, 1);
	for (int d = t->rank - 1; d >= 0; d--) {
		strides[d] = s;
		s = kir_e_mul(l->k, s, lk_dim(l, t->dims[d]));
	}
	return s;
}

kir_expr *data_prod(lk *l, const tbc_type *t, int lo, int hi) {
	kir_expr *p = kir_e_index(l->k, 1);
	for (int d = lo; d < hi; d++) p = kir_e_mul(l->k, p, lk_dim(l, t->dims[d]));
	return p;
}

kir_expr *data_to_index(lk *l, kir_expr *e) {
	if (!e) return NULL;
	if (e->type != KIR_INDEX && tbc_dtype_is_float(e->type)) e = kir_e_cast(l->k, TBC_DT_I64, e);
	return kir_e_cast(l->k, KIR_INDEX, e);
}

kir_expr *data_wrap_clamp(lk *l, kir_expr *v, kir_expr *n) {
	kir_kernel *k = l->k;
	kir_expr *zero = kir_e_index(k, 0);
	kir_expr *w = kir_e_select(k, kir_e_cmp(k, KIR_LT, v, zero), kir_e_add(k, v, n), v);
	kir_expr *hi = kir_e_binary(k, KIR_SUB, n, kir_e_index(k, 1));
	return kir_e_binary(k, KIR_MAX, kir_e_binary(k, KIR_MIN, w, hi), zero);
}

kir_expr *data_nonempty(lk *l, const tbc_type *t, bool *always, bool *never) {
	*always = true;
	*never = false;
	kir_expr *n = kir_e_index(l->k, 1);
	for (int d = 0; d < t->rank; d++) {
		if (t->dims[d].sym) *always = false;
		else if (t->dims[d].size == 0) *never = true;
		n = kir_e_mul(l->k, n, lk_dim(l, t->dims[d]));
	}
	if (*never) *always = false;
	if (*always || *never) return NULL;
	return kir_e_cmp(l->k, KIR_GT, n, kir_e_index(l->k, 0));
}

kir_stmt *data_guarded_store(lk *l, kir_buffer *dst, kir_expr *di, kir_expr *cond, kir_expr *value) {
	if (!cond) return kir_s_store(l->k, dst, di, value);
	kir_expr *zero = tbc_dtype_is_float(dst->dtype) ? kir_e_float(l->k, dst->dtype, 0) : kir_e_int(l->k, dst->dtype, 0);
	return kir_s_if(l->k, cond, kir_s_store(l->k, dst, di, value), kir_s_store(l->k, dst, di, zero));
}

/* ---- Loop nests ------------------------------------------------------------*/
kir_expr *dl_add(lk *l, dloops *d, kir_expr *size, bool sequential) {
	int64_t c;
	if (kir_e_const_index(size, &c) && c == 1) return kir_e_index(l->k, 0);
	if (d->n == DL_MAX) {
		l->k->failed = true;
		return NULL;
	}
	static const char *const names[] = {"i", "j", "k", "l", "m", "n"};
	char name[16];
	if (d->n < 6) snprintf(name, sizeof name, "%s", names[d->n]);
	else snprintf(name, sizeof name, "i%d", d->n);
	d->v[d->n] = kir_var_new(l->k, name, KIR_INDEX);
	d->size[d->n] = size;
	d->seq[d->n] = sequential;
	return kir_e_var(l->k, d->v[d->n++]);
}

kir_stmt *dl_wrap(lk *l, dloops *d, kir_stmt *body) {
	kir_stmt *s = body;
	int first = -1, last = -1;
	for (int g = 0; g < d->n; g++)
		if (!d->seq[g]) {
			if (first < 0) first = g;
			last = g;
		}
	/* The vector loop is the innermost loop, and only when it is not
	 * sequential; the parallel one the outermost free loop. */
	bool inner_vec = d->n > 0 && !d->seq[d->n - 1] && d->n - 1 != first;
	for (int g = d->n - 1; g >= 0; g--) {
		kir_loop_kind kind = KIR_LOOP_SEQUENTIAL;
		if (g == first) kind = KIR_LOOP_PARALLEL;
		else if (g == d->n - 1 && inner_vec) kind = KIR_LOOP_VECTOR;
		s = kir_s_for(l->k, d->v[g], kir_e_index(l->k, 0), d->size[g], 1, kind, s);
	}
	(void)last;
	return s;
}

/* ---- Affine copies ---------------------------------------------------------*/
void aff_init(lk *l, affine *a) {
	memset(a, 0, sizeof *a);
	a->dst_off = kir_e_index(l->k, 0);
	a->src_off = kir_e_index(l->k, 0);
}

void aff_dim(affine *a, kir_expr *size, kir_expr *dst_stride, kir_expr *src_stride) {
	int64_t c;
	if (kir_e_const_index(size, &c) && c == 1) return;
	if (a->n == DL_MAX) return;
	a->size[a->n] = size;
	a->dst[a->n] = dst_stride;
	a->src[a->n] = src_stride;
	a->n++;
}

static bool contiguous(const kir_expr *outer, const kir_expr *inner, const kir_expr *size) {
	int64_t o, i, s;
	return kir_e_const_index(outer, &o) && kir_e_const_index(inner, &i) && kir_e_const_index(size, &s) && o == i * s;
}

kir_stmt *aff_copy(lk *l, affine *a, kir_buffer *dst, kir_buffer *src) {
	kir_kernel *k = l->k;
	/* An empty box copies nothing. */
	for (int d = 0; d < a->n; d++) {
		int64_t c;
		if (kir_e_const_index(a->size[d], &c) && c == 0) return NULL;
	}
	/* Merge dim d into d - 1 when both buffers are contiguous across them. */
	int n = 0;
	for (int d = 0; d < a->n; d++) {
		if (n > 0 && contiguous(a->dst[n - 1], a->dst[d], a->size[d]) &&
		    contiguous(a->src[n - 1], a->src[d], a->size[d])) {
			a->size[n - 1] = kir_e_mul(k, a->size[n - 1], a->size[d]);
			a->dst[n - 1] = a->dst[d];
			a->src[n - 1] = a->src[d];
			continue;
		}
		a->size[n] = a->size[d];
		a->dst[n] = a->dst[d];
		a->src[n] = a->src[d];
		n++;
	}
	a->n = n;
	dloops lp = {0};
	kir_expr *di = a->dst_off, *si = a->src_off;
	for (int d = 0; d < a->n; d++) {
		kir_expr *v = dl_add(l, &lp, a->size[d], false);
		di = kir_e_add(k, di, kir_e_mul(k, v, a->dst[d]));
		si = kir_e_add(k, si, kir_e_mul(k, v, a->src[d]));
	}
	return dl_wrap(l, &lp, kir_s_store(k, dst, di, kir_e_load(k, src, si)));
}

/* Adds s (may be NULL: nothing) to a kernel body. */
static void add(lk *l, kir_block *b, kir_stmt *s) {
	if (s) kir_block_add(l->k, b, s);
}

/* Ends a kernel whose body may be empty (every copy empty). */
static bool finish(lk *l, kir_block *b) {
	if (!b->first) {
		/* Nothing to move: the kernel is dropped (its launch never made). */
		l->cx->n_kernels--;
		return !l->k->failed;
	}
	return lk_end(l, b->first);
}

static const char *kname(const tbc_op *op, char *buf, size_t size) {
	const char *s = tbc_ops[op->code].name;
	size_t i = 0;
	for (; s[i] && i + 1 < size; i++) buf[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
	buf[i] = 0;
	return buf;
}

static bool begin(lk *l, lower_cx *cx, const tbc_op *op) {
	char name[64];
	return lk_begin(l, cx, kname(op, name, sizeof name));
}

/* ---- Transpose ---------------------------------------------------------------*/
static bool lower_transpose(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int r = x->type.rank, perm[TBC_MAX_RANK];
	const int64_t *p;
	int np = tbc_attr_ints(op, "perm", &p);
	for (int d = 0; d < r; d++) perm[d] = np == r ? (int)p[d] : r - 1 - d;
	for (int d = 0; d < r; d++)
		if (perm[d] < 0 || perm[d] >= r) return lower_error(cx, op, "Transpose's perm is out of range");
	lk l;
	if (!begin(&l, cx, op)) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y);
	if (!src || !dst) return false;
	kir_expr *xs[TBC_MAX_RANK], *ys[TBC_MAX_RANK];
	data_strides(&l, &x->type, xs);
	data_strides(&l, &y->type, ys);
	affine a;
	aff_init(&l, &a);
	for (int d = 0; d < r; d++) aff_dim(&a, lk_dim(&l, y->type.dims[d]), ys[d], xs[perm[d]]);
	kir_block b = {0};
	if (r == 0) add(&l, &b, kir_s_store(l.k, dst, kir_e_index(l.k, 0), kir_e_load(l.k, src, kir_e_index(l.k, 0))));
	else add(&l, &b, aff_copy(&l, &a, dst, src));
	return finish(&l, &b);
}

/* A whole-tensor copy through an affine box (rank 0 included). */
static kir_stmt *copy_box(lk *l, affine *a, kir_buffer *dst, kir_buffer *src) {
	if (a->n == 0) return kir_s_store(l->k, dst, a->dst_off, kir_e_load(l->k, src, a->src_off));
	return aff_copy(l, a, dst, src);
}

/* ---- Slice -------------------------------------------------------------------*/
static bool lower_slice(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int r = x->type.rank;
	int64_t v[4][TBC_MAX_RANK];
	int cnt[4] = {0, 0, 0, 0};
	for (int i = 0; i < 4; i++) {
		if (i + 1 >= op->n_inputs || !op->inputs[i + 1]) {
			cnt[i] = -1;
			continue;
		}
		cnt[i] = tbc_data_const_ints(op, i + 1, v[i], TBC_MAX_RANK);
		if (cnt[i] < 0)
			return lower_error(cx, op, "Slice with non-constant starts, ends, axes or steps has no lowering yet");
	}
	int n = cnt[0];
	if (cnt[1] != n || (cnt[2] >= 0 && cnt[2] != n) || (cnt[3] >= 0 && cnt[3] != n) || n > r)
		return lower_error(cx, op, "Slice's starts, ends, axes and steps disagree in length");
	int64_t start[TBC_MAX_RANK], step[TBC_MAX_RANK];
	for (int d = 0; d < r; d++) start[d] = 0, step[d] = 1;
	for (int i = 0; i < n; i++) {
		int a = i;
		if (cnt[2] >= 0 && !tbc_norm_axis(v[2][i], r, &a)) return lower_error(cx, op, "Slice's axis is out of range");
		int64_t s = v[0][i], st = cnt[3] >= 0 ? v[3][i] : 1;
		if (st == 0) return lower_error(cx, op, "Slice's step is 0");
		tbc_dim dim = x->type.dims[a];
		if (dim.sym) {
			/* The shape rule keeps a symbolic dim only for the whole-dim slice. */
			if (!tbc_dim_eq(dim, y->type.dims[a]) || s != 0 || st != 1)
				return lower_error(cx, op, "Slice of a symbolic dim has no lowering yet");
			continue;
		}
		int64_t D = dim.size;
		if (s < 0) s += D;
		if (st > 0) s = s < 0 ? 0 : s > D ? D : s;
		else s = s < 0 ? 0 : s > D - 1 ? D - 1 : s;
		start[a] = s;
		step[a] = st;
	}
	lk l;
	if (!begin(&l, cx, op)) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y);
	if (!src || !dst) return false;
	kir_expr *xs[TBC_MAX_RANK], *ys[TBC_MAX_RANK];
	data_strides(&l, &x->type, xs);
	data_strides(&l, &y->type, ys);
	affine a;
	aff_init(&l, &a);
	bool empty = false;
	for (int d = 0; d < r; d++) {
		empty |= !y->type.dims[d].sym && y->type.dims[d].size == 0;
		a.src_off = kir_e_add(l.k, a.src_off, kir_e_mul(l.k, kir_e_index(l.k, start[d]), xs[d]));
		aff_dim(&a, lk_dim(&l, y->type.dims[d]), ys[d], kir_e_mul(l.k, xs[d], kir_e_index(l.k, step[d])));
	}
	kir_block b = {0};
	if (!empty) add(&l, &b, copy_box(&l, &a, dst, src));
	return finish(&l, &b);
}

/* ---- Concat / Split ------------------------------------------------------------*/
static bool lower_concat(lower_cx *cx, const tbc_op *op) {
	const tbc_value *y = op->outputs[0];
	int r = y->type.rank, ax;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), r, &ax)) return lower_error(cx, op, "Concat's axis is out of range");
	lk l;
	if (!begin(&l, cx, op)) return false;
	kir_buffer *dst = data_out(&l, y);
	if (!dst) return false;
	kir_expr *ys[TBC_MAX_RANK];
	data_strides(&l, &y->type, ys);
	kir_expr *off = kir_e_index(l.k, 0);
	kir_block b = {0};
	for (int i = 0; i < op->n_inputs; i++) {
		const tbc_value *x = op->inputs[i];
		tbc_dim len = x->type.dims[ax];
		if (!len.sym && len.size == 0) continue;
		kir_buffer *src = data_in(&l, x);
		if (!src) return false;
		kir_expr *xs[TBC_MAX_RANK];
		data_strides(&l, &x->type, xs);
		affine a;
		aff_init(&l, &a);
		a.dst_off = kir_e_mul(l.k, off, ys[ax]);
		for (int d = 0; d < r; d++) aff_dim(&a, lk_dim(&l, x->type.dims[d]), ys[d], xs[d]);
		add(&l, &b, copy_box(&l, &a, dst, src));
		off = kir_e_add(l.k, off, lk_dim(&l, len));
	}
	return finish(&l, &b);
}

static bool lower_split(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0];
	int r = x->type.rank, ax;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), r, &ax)) return lower_error(cx, op, "Split's axis is out of range");
	for (int i = 0; i < op->n_outputs; i++)
		if (!op->outputs[i]) return lower_error(cx, op, "Split with an omitted output has no lowering yet");
	lk l;
	if (!begin(&l, cx, op)) return false;
	kir_buffer *src = data_in(&l, x);
	if (!src) return false;
	kir_expr *xs[TBC_MAX_RANK];
	data_strides(&l, &x->type, xs);
	kir_expr *off = kir_e_index(l.k, 0);
	kir_block b = {0};
	for (int i = 0; i < op->n_outputs; i++) {
		const tbc_value *y = op->outputs[i];
		kir_buffer *dst = data_out(&l, y);
		if (!dst) return false;
		tbc_dim len = y->type.dims[ax];
		kir_expr *ys[TBC_MAX_RANK];
		data_strides(&l, &y->type, ys);
		affine a;
		aff_init(&l, &a);
		a.src_off = kir_e_mul(l.k, off, xs[ax]);
		for (int d = 0; d < r; d++) aff_dim(&a, lk_dim(&l, y->type.dims[d]), ys[d], xs[d]);
		if (len.sym || len.size > 0) add(&l, &b, copy_box(&l, &a, dst, src));
		off = kir_e_add(l.k, off, lk_dim(&l, len));
	}
	return finish(&l, &b);
}

/* ---- Expand / Tile ---------------------------------------------------------------*/
static bool lower_expand(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	lk l;
	if (!begin(&l, cx, op)) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y);
	nest n;
	const tbc_type *ops[1] = {&x->type};
	if (!src || !dst || !nest_build(&l, &n, &y->type, 1, ops)) return false;
	kir_block_add(l.k, &n.body, kir_s_store(l.k, dst, n.linear, kir_e_load(l.k, src, nest_index(&l, &n, &x->type))));
	return lk_end(&l, nest_finish(&l, &n));
}

/* Each output dim d splits into (repeat, position): out = rep * D + pos. */
static bool lower_tile(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int r = x->type.rank;
	lk l;
	if (!begin(&l, cx, op)) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y);
	if (!src || !dst) return false;
	kir_expr *xs[TBC_MAX_RANK], *ys[TBC_MAX_RANK];
	data_strides(&l, &x->type, xs);
	data_strides(&l, &y->type, ys);
	affine a;
	aff_init(&l, &a);
	bool empty = false;
	for (int d = 0; d < r; d++) {
		tbc_dim xd = x->type.dims[d], yd = y->type.dims[d];
		kir_expr *reps;
		if (tbc_dim_eq(xd, yd)) reps = kir_e_index(l.k, 1);
		else if (!xd.sym && !yd.sym) reps = kir_e_index(l.k, xd.size ? yd.size / xd.size : 0);
		else { /* a symbolic dim (a dynamic batch, or repeats given while running) */
			kir_expr *xs_ = lk_dim(&l, xd);
			kir_expr *zero = kir_e_cmp(l.k, KIR_EQ, xs_, kir_e_index(l.k, 0));
			reps = kir_e_select(l.k, zero, kir_e_index(l.k, 0),
					    kir_e_binary(l.k, KIR_FLOORDIV, lk_dim(&l, yd),
							 kir_e_select(l.k, zero, kir_e_index(l.k, 1), xs_)));
		}
		empty |= (!xd.sym && xd.size == 0) || (!yd.sym && yd.size == 0);
		kir_expr *D = lk_dim(&l, xd);
		aff_dim(&a, reps, kir_e_mul(l.k, D, ys[d]), kir_e_index(l.k, 0));
		aff_dim(&a, D, ys[d], xs[d]);
	}
	kir_block b = {0};
	if (!empty) add(&l, &b, copy_box(&l, &a, dst, src));
	return finish(&l, &b);
}

/* ---- DepthToSpace / SpaceToDepth ----------------------------------------------
 * A reshape to 6 dims, a transpose, a reshape: the transposed box is an affine
 * copy whose source strides are the 6-dim view's. */
static bool lower_depth_space(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	if (x->type.rank != 4) return lower_error(cx, op, "%s needs a rank-4 input", tbc_ops[op->code].onnx_name);
	int64_t bs = tbc_attr_int(op, "blocksize", 0);
	if (bs <= 0) return lower_error(cx, op, "blocksize must be positive");
	lk l;
	if (!begin(&l, cx, op)) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y);
	if (!src || !dst) return false;
	kir_kernel *k = l.k;
	kir_expr *B = kir_e_index(k, bs);
	kir_expr *N = lk_dim(&l, x->type.dims[0]), *H = lk_dim(&l, x->type.dims[2]), *W = lk_dim(&l, x->type.dims[3]);
	kir_expr *view[6];
	int perm[6];
	if (op->code == TBC_OP_DepthToSpace) {
		kir_expr *C = lk_dim(&l, y->type.dims[1]);
		bool crd = !strcmp(tbc_attr_string(op, "mode", "DCR"), "CRD");
		if (crd) {
			kir_expr *v[6] = {N, C, B, B, H, W};
			static const int p[6] = {0, 1, 4, 2, 5, 3};
			memcpy(view, v, sizeof v);
			memcpy(perm, p, sizeof p);
		} else {
			kir_expr *v[6] = {N, B, B, C, H, W};
			static const int p[6] = {0, 3, 4, 1, 5, 2};
			memcpy(view, v, sizeof v);
			memcpy(perm, p, sizeof p);
		}
	} else {
		kir_expr *C = lk_dim(&l, x->type.dims[1]);
		kir_expr *h = lk_dim(&l, y->type.dims[2]), *w = lk_dim(&l, y->type.dims[3]);
		kir_expr *v[6] = {N, C, h, B, w, B};
		static const int p[6] = {0, 3, 5, 1, 2, 4};
		memcpy(view, v, sizeof v);
		memcpy(perm, p, sizeof p);
	}
	kir_expr *vs[6], *s = kir_e_index(k, 1);
	for (int d = 5; d >= 0; d--) {
		vs[d] = s;
		s = kir_e_mul(k, s, view[d]);
	}
	kir_expr *os[6];
	s = kir_e_index(k, 1);
	for (int d = 5; d >= 0; d--) {
		os[d] = s;
		s = kir_e_mul(k, s, view[perm[d]]);
	}
	affine a;
	aff_init(&l, &a);
	bool empty = false;
	for (int d = 0; d < 4; d++) empty |= !y->type.dims[d].sym && y->type.dims[d].size == 0;
	for (int d = 0; d < 6; d++) aff_dim(&a, view[perm[d]], os[d], vs[perm[d]]);
	kir_block b = {0};
	if (!empty) add(&l, &b, copy_box(&l, &a, dst, src));
	return finish(&l, &b);
}

/* ---- Entry -----------------------------------------------------------------------*/
/* Every input and output of op has a dtype with a storage type. */
static bool storable(lower_cx *cx, const tbc_op *op) {
	for (int i = 0; i < op->n_inputs; i++)
		if (op->inputs[i] && data_storage_type(op->inputs[i]->type.dtype) == TBC_DT_UNDEFINED)
			return lower_error(cx, op, "op %s on %s has no lowering yet", tbc_ops[op->code].onnx_name,
					   tbc_dtype_name(op->inputs[i]->type.dtype));
	for (int i = 0; i < op->n_outputs; i++)
		if (op->outputs[i] && data_storage_type(op->outputs[i]->type.dtype) == TBC_DT_UNDEFINED)
			return lower_error(cx, op, "op %s on %s has no lowering yet", tbc_ops[op->code].onnx_name,
					   tbc_dtype_name(op->outputs[i]->type.dtype));
	return true;
}

lower_result lower_family_data(lower_cx *cx, const tbc_op *op) {
	bool (*fn)(lower_cx *, const tbc_op *) = NULL;
	switch (op->code) {
	case TBC_OP_Transpose: fn = lower_transpose; break;
	case TBC_OP_Slice: fn = lower_slice; break;
	case TBC_OP_Concat: fn = lower_concat; break;
	case TBC_OP_Split: fn = lower_split; break;
	case TBC_OP_Expand: fn = lower_expand; break;
	case TBC_OP_Tile: fn = lower_tile; break;
	case TBC_OP_DepthToSpace:
	case TBC_OP_SpaceToDepth: fn = lower_depth_space; break;
	case TBC_OP_Gather: fn = lower_data_gather; break;
	case TBC_OP_GatherElements: fn = lower_data_gather_elements; break;
	case TBC_OP_GatherND: fn = lower_data_gather_nd; break;
	case TBC_OP_ScatterElements: fn = lower_data_scatter_elements; break;
	case TBC_OP_ScatterND: fn = lower_data_scatter_nd; break;
	case TBC_OP_OneHot: fn = lower_data_onehot; break;
	case TBC_OP_Pad: fn = lower_data_pad; break;
	case TBC_OP_Shape: fn = lower_data_shape; break;
	case TBC_OP_Size: fn = lower_data_size; break;
	case TBC_OP_ConstantOfShape: fn = lower_data_constant_of_shape; break;
	case TBC_OP_Range: fn = lower_data_range; break;
	case TBC_OP_Trilu: fn = lower_data_trilu; break;
	case TBC_OP_EyeLike: fn = lower_data_eye_like; break;
	case TBC_OP_ReverseSequence: fn = lower_data_reverse_sequence; break;
	case TBC_OP_TensorScatter: fn = lower_data_tensor_scatter; break;
	case TBC_OP_TopK: fn = lower_data_topk; break;
	case TBC_OP_CenterCropPad: fn = lower_data_center_crop_pad; break;
	case TBC_OP_AffineGrid: fn = lower_data_affine_grid; break;
	case TBC_OP_Col2Im: fn = lower_data_col2im; break;
	default: return LOWER_NOT_MINE;
	}
	bool any_out = false;
	for (int i = 0; i < op->n_outputs; i++) any_out |= op->outputs[i] != NULL;
	if (!any_out) return LOWER_OK;
	for (int i = 0; i < op->n_inputs; i++)
		if (op->inputs[i] && op->inputs[i]->type.rank < 0) {
			lower_error(cx, op, "an input of unknown rank has no lowering yet");
			return LOWER_FAILED;
		}
	if (!storable(cx, op)) return LOWER_FAILED;
	return fn(cx, op) ? LOWER_OK : LOWER_FAILED;
}
