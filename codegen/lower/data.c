/* Data movement: the helpers every data-movement file shares (storage
 * views, index helpers, loop nests, affine copies, the parameters of shape
 * kernels) and the family's two entries: the lowering of each op and, for an
 * output shape given by a tensor's values while running, its shape kernel.
 * The ops: data_copy.c (Transpose, Slice, Concat, Split, Expand, Tile,
 * DepthToSpace, SpaceToDepth), data_pad.c (Pad, CenterCropPad),
 * data_index.c (gathers, scatters, OneHot, ReverseSequence,
 * TensorScatter), data_gen.c (Shape, Size, ConstantOfShape, Range, Trilu,
 * EyeLike), data_more.c (TopK, AffineGrid, Col2Im).  Design notes:
 * docs/lower-data.md and docs/lower-dynamic.md.
 *
 * Pure copies move storage bits (u8/u16/u32/u64 views of the buffers), so
 * every dtype the IR stores is copied byte-exactly, whatever the backend can
 * compute on. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_data.h"
#include "codegen/lower/lower_dyn.h"
#include "ir/kernels/conv_util.h"
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
	return lk_bind(l, pb) ? kb : NULL;
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

kir_expr *data_wrap_checked(lk *l, kir_expr *v, kir_expr *n, kir_block *checks, const char *msg) {
	kir_kernel *k = l->k;
	kir_expr *bad = kir_e_binary(k, KIR_OR, kir_e_cmp(k, KIR_LT, v, kir_e_unary(k, KIR_NEG, n)), kir_e_cmp(k, KIR_GE, v, n));
	kir_block_add(k, checks, kir_s_error(k, bad, msg));
	return data_wrap_clamp(l, v, n);
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
void data_add(lk *l, kir_block *b, kir_stmt *s) {
	if (s) kir_block_add(l->k, b, s);
}

/* Ends a kernel whose body may be empty (every copy empty). */
bool data_finish(lk *l, kir_block *b) {
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

bool data_begin(lk *l, lower_cx *cx, const tbc_op *op) {
	char name[64];
	return lk_begin(l, cx, kname(op, name, sizeof name));
}


/* ---- Shape kernels' parameters (codegen/lower/lower_dyn.h) ------------------*/
kir_expr *data_clamp(shk *s, kir_expr *v, kir_expr *lo, kir_expr *hi) { return MAX(s->k, MIN(s->k, v, hi), lo); }

/* A run-time parameter of the op (>= 0: the runtime takes a negative
 * computed symbol for one never set) as a computed symbol named after the
 * op's position; *out is the dim later kernels read it through. */
bool data_param_sym(shk *s, const char *what, int d, kir_expr *value, tbc_dim *out) {
	char name[64];
	snprintf(name, sizeof name, "_op%d.%s%d", s->l.cx->op_pos, what, d);
	return shk_store_sym(s, name, value, out);
}

/* The length of a parameter tensor (a scalar counts 1); -1 (with a
 * diagnostic) when it is not static, not 1-D or longer than max. */
int data_param_len(lower_cx *cx, const tbc_op *op, int input, int max, const char *what) {
	const tbc_value *v = op->n_inputs > input ? op->inputs[input] : NULL;
	if (!v) return -1;
	if (!tbc_dtype_is_int(v->type.dtype)) {
		lower_error(cx, op, "%s must be an integer tensor", what);
		return -1;
	}
	if (v->type.rank == 0) return 1;
	if (v->type.rank != 1 || v->type.dims[0].sym || v->type.dims[0].size > max) {
		lower_error(cx, op, "%s of unknown length has no lowering yet", what);
		return -1;
	}
	return (int)v->type.dims[0].size;
}

/* Axes given while running (n values of input `input`), normalised against
 * rank and checked in range and distinct, into out; NULL input: 0..n-1. */
bool data_load_axes(shk *s, const tbc_value *axes, int n, int rank, const char *twice, kir_expr **out) {
	for (int a = 0; a < n; a++) {
		if (!axes) {
			out[a] = I(s->k, a);
			continue;
		}
		char name[16];
		snprintf(name, sizeof name, "axis%d", a);
		kir_expr *v = shk_let(s, name, shk_elem(s, axes, a));
		shk_fail_if(s, OR(s->k, CMP(s->k, KIR_LT, v, I(s->k, -rank)), CMP(s->k, KIR_GE, v, I(s->k, rank))), "axes[%d] is out of range for rank %d",
			a, rank);
		out[a] = shk_let(s, name, SEL(s->k, CMP(s->k, KIR_LT, v, I(s->k, 0)), ADD(s->k, v, I(s->k, rank)), v));
		for (int b = 0; b < a; b++) shk_fail_if(s, CMP(s->k, KIR_EQ, out[a], out[b]), "%s", twice);
	}
	return !s->k->failed;
}

/* Whether dim d may be named by axes: always when they are given while
 * running, else when the constant list holds it. */
bool data_maybe_axis(const tbc_op *op, int input, int n, int rank, int d) {
	if (op->n_inputs <= input || !op->inputs[input]) return d < n;
	int64_t v[TBC_MAX_RANK];
	int k = tbc_data_const_ints(op, input, v, TBC_MAX_RANK);
	if (k < 0) return true;
	for (int i = 0; i < k; i++) {
		int a;
		if (tbc_norm_axis(v[i], rank, &a) && a == d) return true;
	}
	return false;
}



bool data_empty_type(const tbc_type *t) {
	for (int d = 0; d < t->rank; d++)
		if (!t->dims[d].sym && t->dims[d].size == 0) return true;
	return false;
}

/* Ends a kernel with nothing to do: no launch. */
bool data_no_kernel(lk *l) {
	l->cx->n_kernels--;
	return !l->k->failed;
}

/* Fills every element of dst (type t) with value. */
kir_stmt *data_fill(lk *l, kir_buffer *dst, const tbc_type *t, kir_expr *value) {
	dloops lp = {0};
	kir_expr *i = dl_add(l, &lp, data_prod(l, t, 0, t->rank), false);
	return dl_wrap(l, &lp, kir_s_store(l->k, dst, i, value));
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
	case TBC_OP_Transpose: fn = lower_data_transpose; break;
	case TBC_OP_Slice: fn = lower_data_slice; break;
	case TBC_OP_Concat: fn = lower_data_concat; break;
	case TBC_OP_Split: fn = lower_data_split; break;
	case TBC_OP_Expand: fn = lower_data_expand; break;
	case TBC_OP_Tile: fn = lower_data_tile; break;
	case TBC_OP_DepthToSpace:
	case TBC_OP_SpaceToDepth: fn = lower_data_depth_space; break;
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


/* ---- Entry ------------------------------------------------------------------------*/
lower_result lower_family_data_shape(lower_cx *cx, const tbc_op *op) {
	bool (*fn)(lower_cx *, const tbc_op *) = NULL;
	bool complete = false; /* lowers data too (else the ordinary lowering follows) */
	switch (op->code) {
	case TBC_OP_Slice: fn = lower_data_slice_dyn, complete = true; break;
	case TBC_OP_Pad: fn = lower_data_pad_dyn, complete = true; break;
	case TBC_OP_Split: fn = lower_data_split_dyn, complete = true; break;
	case TBC_OP_OneHot: fn = lower_data_onehot_shape; break;
	case TBC_OP_Concat: fn = lower_data_concat_shape; break;
	case TBC_OP_TopK: fn = lower_data_topk_shape; break;
	case TBC_OP_CenterCropPad: fn = lower_data_center_crop_pad_shape; break;
	case TBC_OP_AffineGrid: fn = lower_data_affine_grid_shape; break;
	case TBC_OP_Col2Im: fn = lower_data_col2im, complete = true; break;
	default: return LOWER_NOT_MINE;
	}
	for (int i = 0; i < op->n_inputs; i++)
		if (op->inputs[i] && op->inputs[i]->type.rank < 0) {
			lower_error(cx, op, "an input of unknown rank has no lowering yet");
			return LOWER_FAILED;
		}
	for (int i = 0; i < op->n_outputs; i++)
		if (op->outputs[i] && (op->outputs[i]->type.rank < 0 || data_storage_type(op->outputs[i]->type.dtype) == TBC_DT_UNDEFINED)) {
			lower_error(cx, op, "op %s with this output has no lowering yet", tbc_ops[op->code].onnx_name);
			return LOWER_FAILED;
		}
	if (!fn(cx, op)) return LOWER_FAILED;
	return complete ? LOWER_OK : LOWER_SHAPED;
}

