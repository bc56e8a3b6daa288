/* Reductions (Reduce*, ArgMax/ArgMin, CumSum/CumProd) and the softmaxes,
 * with constant axes and with axes given while running (at the end), and the
 * reduction spaces they share with norm.c and fused_reduce.c
 * (codegen/lower/lower_reduce.h).
 *
 * Each op is one kernel: parallel over the output points (the kept dims),
 * with sequential passes over the reduced dims accumulating into scalar
 * locals.  Precision mirrors the interpreter (ir/kernels/reduce*.c): float
 * sums, products and norms accumulate in f64 whatever the input's float
 * type; max/min compare in the input's own precision (narrow floats in f32);
 * integers accumulate exactly in 64 bits, wrapping, and wrap again on
 * store.  Elementwise parts (exp in softmax) compute in f32 for f32 and
 * narrower, f64 for f64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_dyn.h"
#include "codegen/lower/lower_reduce.h"
#include "ir/kernels/kernels.h"

/* ---- Reduction spaces --------------------------------------------------------*/
static void block_append(kir_block *b, kir_stmt *list) {
	for (kir_stmt *s = list; s;) {
		kir_stmt *next = s->next;
		s->next = NULL;
		if (b->last) b->last->next = s;
		else b->first = s;
		b->last = s;
		s = next;
	}
}

static bool rs_init(lk *l, rspace *s, int rank, const bool *mask) {
	memset(s, 0, sizeof *s);
	s->l = l;
	s->k = l->k;
	s->rank = rank;
	for (int d = 0; d < rank; d++) s->mask[d] = mask ? mask[d] : false;
	return true;
}

static void rs_make_kept(rspace *s) {
	for (int d = 0; d < s->rank; d++) {
		if (s->mask[d]) continue;
		int64_t c;
		if (kir_e_const_index(s->size[d], &c) && c == 1) {
			s->cur[d] = kir_e_index(s->k, 0);
			continue;
		}
		char name[16];
		snprintf(name, sizeof name, "i%d", d);
		s->kvar[d] = kir_var_new(s->k, name, KIR_INDEX);
		s->cur[d] = kir_e_var(s->k, s->kvar[d]);
	}
}

bool rs_begin_type(lk *l, rspace *s, const tbc_type *t, const bool *mask) {
	rs_init(l, s, t->rank, mask);
	s->has_dims = true;
	for (int d = 0; d < t->rank; d++) {
		s->dims[d] = t->dims[d];
		s->size[d] = lk_dim(l, t->dims[d]);
	}
	rs_make_kept(s);
	return !s->k->failed;
}

bool rs_begin_sizes(lk *l, rspace *s, int rank, kir_expr *const *sizes, const bool *mask) {
	rs_init(l, s, rank, mask);
	for (int d = 0; d < rank; d++) s->size[d] = sizes[d];
	rs_make_kept(s);
	return !s->k->failed;
}

/* The parallel form: one variable over the pass's elements, split among
 * the items; the reduced dims' indices decomposed from it. */
static void rs_group_pass_begin(rspace *s) {
	kir_kernel *k = s->k;
	s->rlin = kir_var_new(k, "r", KIR_INDEX);
	kir_expr *stride = kir_e_index(k, 1);
	for (int d = s->rank - 1; d >= 0; d--) {
		if (!s->mask[d]) continue;
		s->rvar[d] = NULL;
		s->cur[d] = kir_e_binary(k, KIR_FLOORMOD, kir_e_binary(k, KIR_FLOORDIV, kir_e_var(k, s->rlin), stride), s->size[d]);
		stride = kir_e_mul(k, stride, s->size[d]);
	}
}

void rs_pass_begin(rspace *s) {
	s->inner = (kir_block){0};
	s->in_pass = true;
	if (s->group) {
		rs_group_pass_begin(s);
		return;
	}
	for (int d = 0; d < s->rank; d++) {
		if (!s->mask[d]) continue;
		s->rvar[d] = NULL;
		int64_t c;
		if (kir_e_const_index(s->size[d], &c) && c == 1) {
			s->cur[d] = kir_e_index(s->k, 0);
			continue;
		}
		char name[16];
		snprintf(name, sizeof name, "r%d", d);
		s->rvar[d] = kir_var_new(s->k, name, KIR_INDEX);
		kir_expr *v = kir_e_var(s->k, s->rvar[d]);
		if (s->reverse)
			v = kir_e_binary(s->k, KIR_SUB, kir_e_binary(s->k, KIR_SUB, s->size[d], kir_e_index(s->k, 1)), v);
		s->cur[d] = v;
	}
}

static bool static_zero(kir_expr *size) {
	int64_t c;
	return kir_e_const_index(size, &c) && c == 0;
}

kir_expr *rs_count(rspace *s);

void rs_pass_end(rspace *s) {
	kir_stmt *body = s->inner.first;
	for (int d = 0; d < s->rank; d++)
		if (s->mask[d] && static_zero(s->size[d])) body = NULL; /* an empty reduction: no iterations */
	if (s->group && body) {
		body = kir_s_for(s->k, s->rlin, kir_e_local_id(s->k, 0), rs_count(s), s->group,
				 s->independent_pass ? KIR_LOOP_PARALLEL : KIR_LOOP_SEQUENTIAL, body);
		s->point_has_loops = true;
	}
	for (int d = s->rank - 1; d >= 0 && body && !s->group; d--) {
		if (!s->mask[d] || !s->rvar[d]) continue;
		body = kir_s_for(s->k, s->rvar[d], kir_e_index(s->k, 0), s->size[d], 1, KIR_LOOP_SEQUENTIAL, body);
		s->point_has_loops = true;
	}
	block_append(&s->point, body);
	for (int d = 0; d < s->rank; d++)
		if (s->mask[d]) s->cur[d] = NULL, s->rvar[d] = NULL;
	s->inner = (kir_block){0};
	s->in_pass = false;
	s->independent_pass = false;
}

static kir_expr *linear_of(rspace *s, bool kept_only) {
	kir_expr *idx = kir_e_index(s->k, 0), *stride = kir_e_index(s->k, 1);
	for (int d = s->rank - 1; d >= 0; d--) {
		if (kept_only && s->mask[d]) continue;
		if (s->cur[d]) idx = kir_e_add(s->k, idx, kir_e_mul(s->k, s->cur[d], stride));
		stride = kir_e_mul(s->k, stride, s->size[d]);
	}
	return idx;
}
kir_expr *rs_linear(rspace *s) { return linear_of(s, false); }
kir_expr *rs_out_linear(rspace *s) { return linear_of(s, true); }

kir_expr *rs_index_map(rspace *s, const tbc_type *t, int n, const int *map) {
	kir_kernel *k = s->k;
	kir_expr *idx = kir_e_index(k, 0), *stride = kir_e_index(k, 1);
	for (int i = t->rank - 1; i >= 0; i--) {
		tbc_dim td = t->dims[i];
		if (!td.sym && td.size == 1) continue;
		int fi = i + (n - t->rank);
		int fd = fi >= 0 ? map[fi] : -1;
		kir_expr *dim = lk_dim(s->l, td);
		if (fd >= 0 && s->cur[fd]) {
			kir_expr *eff = stride;
			if (td.sym && s->has_dims && !tbc_dim_eq(td, s->dims[fd]))
				eff = kir_e_select(k, kir_e_cmp(k, KIR_EQ, dim, kir_e_index(k, 1)), kir_e_index(k, 0), stride);
			idx = kir_e_add(k, idx, kir_e_mul(k, s->cur[fd], eff));
		}
		stride = kir_e_mul(k, stride, dim);
	}
	return idx;
}

kir_expr *rs_index(rspace *s, const tbc_type *t) {
	int map[TBC_MAX_RANK];
	for (int d = 0; d < s->rank; d++) map[d] = d;
	return rs_index_map(s, t, s->rank, map);
}

void rs_set(rspace *s, kir_var *v, kir_expr *e) {
	kir_block_add(s->k, s->in_pass ? &s->inner : &s->point, kir_s_set(s->k, v, e));
}

kir_expr *rs_local(rspace *s, const char *name, kir_expr *e) {
	if (!e) {
		s->k->failed = true;
		return NULL;
	}
	kir_var *v = kir_var_new(s->k, name, e->type);
	rs_set(s, v, e);
	return kir_e_var(s->k, v);
}

/* The parallel form: one grid loop over the points, the kept dims'
 * indices decomposed from it. */
static kir_stmt *rs_group_finish(rspace *s) {
	kir_kernel *k = s->k;
	kir_var *o = kir_var_new(k, "o", KIR_INDEX);
	kir_block head = {0};
	kir_expr *stride = kir_e_index(k, 1);
	for (int d = s->rank - 1; d >= 0; d--) {
		if (s->mask[d]) continue;
		if (s->kvar[d])
			kir_block_add(k, &head, kir_s_set(k, s->kvar[d], kir_e_binary(k, KIR_FLOORMOD,
										  kir_e_binary(k, KIR_FLOORDIV, kir_e_var(k, o), stride), s->size[d])));
		stride = kir_e_mul(k, stride, s->size[d]);
	}
	block_append(&head, s->point.first);
	kir_kernel_set_group(k, 1, &s->group);
	return kir_s_for(k, o, kir_e_index(k, 0), stride, 1, KIR_LOOP_GRID, head.first);
}

bool rs_group(rspace *s) {
	const tbc_target_desc *t = s->l->cx->target;
	if (t->parallel != TBC_PAR_GRID || !t->workgroups || t->max_workgroup_size < 2) return false;
	int64_t g = 1;
	while (g * 2 <= t->max_workgroup_size && g < 64) g *= 2;
	int64_t n;
	if (kir_e_const_index(rs_count(s), &n) && n < 256) {
		/* A shorter row still goes to a group when it is contiguous (the
		 * reduced dims innermost) and fills the group: its items then read
		 * consecutive elements, where items owning a row each read addresses
		 * a row apart. */
		bool inner = true, reduced = false;
		for (int d = 0; d < s->rank; d++) {
			int64_t c;
			bool unit = kir_e_const_index(s->size[d], &c) && c == 1;
			if (s->mask[d]) reduced = true;
			else if (reduced && !unit) inner = false;
		}
		if (!inner || n < g) return false;
	}
	s->group = g;
	return true;
}

void rs_group_combine(rspace *s, kir_var *v, kir_binop op) {
	if (!s->group) return;
	kir_kernel *k = s->k;
	char name[32];
	snprintf(name, sizeof name, "part_%s", kir_type_name(v->type));
	kir_buffer *part = NULL;
	for (int i = 0; i < k->n_locals; i++)
		if (!strcmp(k->locals[i]->name, name)) part = k->locals[i];
	if (!part) part = kir_local_new(k, name, v->type, 1, &s->group);
	kir_expr *lid = kir_e_local_id(k, 0);
	kir_block *b = &s->point;
	kir_block_add(k, b, kir_s_store(k, part, lid, kir_e_var(k, v)));
	kir_block_add(k, b, kir_s_barrier(k));
	for (int64_t st = s->group / 2; st >= 1; st /= 2) {
		kir_expr *both = kir_e_binary(k, op, kir_e_load(k, part, lid), kir_e_load(k, part, kir_e_add(k, lid, kir_e_index(k, st))));
		kir_block_add(k, b, kir_s_if(k, kir_e_cmp(k, KIR_LT, lid, kir_e_index(k, st)), kir_s_store(k, part, lid, both), NULL));
		kir_block_add(k, b, kir_s_barrier(k));
	}
	kir_block_add(k, b, kir_s_set(k, v, kir_e_load(k, part, kir_e_index(k, 0))));
	kir_block_add(k, b, kir_s_barrier(k)); /* before part is stored again */
}

void rs_store(rspace *s, kir_buffer *buf, kir_expr *idx, kir_expr *value) {
	kir_kernel *k = s->k;
	kir_stmt *st = kir_s_store(k, buf, idx, value);
	if (s->group) st = kir_s_if(k, kir_e_cmp(k, KIR_EQ, kir_e_local_id(k, 0), kir_e_index(k, 0)), st, NULL);
	kir_block_add(k, &s->point, st);
}

kir_stmt *rs_finish(rspace *s) {
	if (s->group) return rs_group_finish(s);
	kir_stmt *body = s->point.first;
	for (int d = 0; d < s->rank; d++)
		if (!s->mask[d] && static_zero(s->size[d])) /* no output points */
			return kir_s_for(s->k, s->kvar[d], kir_e_index(s->k, 0), s->size[d], 1, KIR_LOOP_SEQUENTIAL, NULL);
	int outer = -1, inner = -1;
	for (int d = 0; d < s->rank; d++)
		if (!s->mask[d] && s->kvar[d]) {
			if (outer < 0) outer = d;
			inner = d;
		}
	for (int d = s->rank - 1; d >= 0 && body; d--) {
		if (s->mask[d] || !s->kvar[d]) continue;
		kir_loop_kind kind = d == outer ? KIR_LOOP_PARALLEL
				     : d == inner && !s->point_has_loops ? KIR_LOOP_VECTOR
									   : KIR_LOOP_SEQUENTIAL;
		body = kir_s_for(s->k, s->kvar[d], kir_e_index(s->k, 0), s->size[d], 1, kind, body);
	}
	return body;
}

/* ---- The Reduce* engine ------------------------------------------------------*/
bool rk_of(tbc_opcode code, rkind *out) {
	switch (code) {
	case TBC_OP_ReduceSum: *out = RK_SUM; return true;
	case TBC_OP_ReduceMean: *out = RK_MEAN; return true;
	case TBC_OP_ReduceProd: *out = RK_PROD; return true;
	case TBC_OP_ReduceMax: *out = RK_MAX; return true;
	case TBC_OP_ReduceMin: *out = RK_MIN; return true;
	case TBC_OP_ReduceL1: *out = RK_L1; return true;
	case TBC_OP_ReduceL2: *out = RK_L2; return true;
	case TBC_OP_ReduceSumSquare: *out = RK_SUMSQ; return true;
	case TBC_OP_ReduceLogSum: *out = RK_LOGSUM; return true;
	case TBC_OP_ReduceLogSumExp: *out = RK_LOGSUMEXP; return true;
	default: return false;
	}
}

bool rs_reduce_mask(const tbc_op *op, int rank, bool *mask) {
	bool noop = tbc_attr_int(op, "noop_with_empty_axes", 0) != 0;
	const tbc_tensor *axes = NULL;
	bool empty = true;
	if (op->n_inputs > 1 && op->inputs[1]) {
		const tbc_type *at = &op->inputs[1]->type;
		axes = tbc_input_const(op, 1);
		/* A run-time axes input of static shape [0] is known to be empty. */
		bool known_empty = !axes && at->rank == 1 && !at->dims[0].sym && at->dims[0].size == 0;
		if (!known_empty && (!axes || tbc_dtype_is_float(axes->dtype))) return false;
		if (known_empty) axes = NULL;
		else empty = axes->numel == 0;
	}
	for (int d = 0; d < rank; d++) mask[d] = empty ? !noop : false;
	for (int64_t i = 0; axes && i < axes->numel; i++) {
		int a;
		if (!tbc_norm_axis(tbc_load_i64(axes->dtype, axes->data, (size_t)i), rank, &a)) return false;
		mask[a] = true;
	}
	return true;
}

static bool is_signed_int(tbc_dtype dt) {
	return dt == TBC_DT_I8 || dt == TBC_DT_I16 || dt == TBC_DT_I32 || dt == TBC_DT_I64 || dt == TBC_DT_I4;
}

/* Smallest / largest value of an integer dtype as a constant of it. */
static kir_expr *int_limit(kir_kernel *k, tbc_dtype dt, bool largest) {
	int64_t lo = 0;
	uint64_t hi = UINT64_MAX;
	switch (dt) {
	case TBC_DT_I8: lo = INT8_MIN, hi = INT8_MAX; break;
	case TBC_DT_I16: lo = INT16_MIN, hi = INT16_MAX; break;
	case TBC_DT_I32: lo = INT32_MIN, hi = INT32_MAX; break;
	case TBC_DT_I64: lo = INT64_MIN, hi = INT64_MAX; break;
	case TBC_DT_U8: hi = UINT8_MAX; break;
	case TBC_DT_U16: hi = UINT16_MAX; break;
	case TBC_DT_U32: hi = UINT32_MAX; break;
	default: break;
	}
	return kir_e_int(k, dt, largest ? (int64_t)hi : lo);
}

/* The number of elements a pass visits, as an index expression. */
kir_expr *rs_count(rspace *s) {
	kir_expr *n = kir_e_index(s->k, 1);
	for (int d = 0; d < s->rank; d++)
		if (s->mask[d]) n = kir_e_mul(s->k, n, s->size[d]);
	return n;
}

kir_expr *rs_reduce(rspace *s, const tbc_op *op, rkind kind, tbc_dtype dt, rs_elem_fn elem, void *ctx) {
	kir_kernel *k = s->k;
	lower_cx *cx = s->l->cx;
	bool is_f = tbc_dtype_is_float(dt), is_int = tbc_dtype_is_int(dt);
	bool minmax = kind == RK_MAX || kind == RK_MIN;
	if (!tbc_dtype_supported(dt) || (!is_f && !is_int && !(dt == TBC_DT_BOOL && minmax)) || dt == TBC_DT_I4 ||
	    dt == TBC_DT_U4 || (is_f && tbc_dtype_bits(dt) < 16)) {
		lower_error(cx, op, "op %s on %s has no lowering yet", tbc_ops[op->code].onnx_name, tbc_dtype_name(dt));
		return NULL;
	}
	bool float_path = is_f || kind == RK_LOGSUM || kind == RK_LOGSUMEXP;
	tbc_dtype at; /* accumulator type */
	if (float_path) at = minmax && dt != TBC_DT_F64 ? TBC_DT_F32 : TBC_DT_F64;
	else if (dt == TBC_DT_BOOL) at = TBC_DT_U8;
	else if (minmax) at = dt;
	else at = is_signed_int(dt) ? TBC_DT_I64 : TBC_DT_U64;
	bool at_f = tbc_dtype_is_float(at);
	kir_expr *init;
	if (kind == RK_PROD) init = at_f ? kir_e_float(k, at, 1) : kir_e_int(k, at, 1);
	else if (minmax && at_f) init = kir_e_float(k, at, kind == RK_MAX ? -INFINITY : INFINITY);
	else if (minmax) init = dt == TBC_DT_BOOL ? kir_e_int(k, at, kind == RK_MAX ? 0 : 1) : int_limit(k, at, kind == RK_MIN);
	else init = at_f ? kir_e_float(k, at, 0) : kir_e_int(k, at, 0);

	kir_expr *shift = NULL;
	bool first = true;
	if (kind == RK_LOGSUMEXP) {
		/* The largest value (NaN wins) keeps exp() in range; not finite: 0. */
		kir_var *sv = kir_var_new(k, "shift", TBC_DT_F64);
		rs_set(s, sv, kir_e_float(k, TBC_DT_F64, -INFINITY));
		rs_pass_begin(s);
		kir_expr *v = kir_e_cast(k, TBC_DT_F64, elem(ctx, s, true));
		rs_set(s, sv, kir_e_binary(k, KIR_MAX, kir_e_var(k, sv), v));
		rs_pass_end(s);
		rs_group_combine(s, sv, KIR_MAX);
		first = false;
		kir_expr *sh = kir_e_var(k, sv);
		kir_expr *bad = kir_e_binary(k, KIR_OR, kir_e_unary(k, KIR_ISNAN, sh), kir_e_unary(k, KIR_ISINF, sh));
		shift = rs_local(s, "shift", kir_e_select(k, bad, kir_e_float(k, TBC_DT_F64, 0), sh));
	}
	kir_var *acc = kir_var_new(k, "acc", at);
	/* An f64 sum of f32 (or narrower) float terms: its order changes it
	 * far below f32's rounding, so it may be vectorized (as softmax's; not
	 * a product, whose order decides where it overflows, nor integers). */
	acc->reassoc = at == TBC_DT_F64 && is_f && dt != TBC_DT_F64 && kind != RK_PROD && !minmax;
	rs_set(s, acc, init);
	rs_pass_begin(s);
	kir_expr *v = kir_e_cast(k, at, elem(ctx, s, first));
	kir_expr *a = kir_e_var(k, acc), *u = NULL;
	switch (kind) {
	case RK_SUM:
	case RK_MEAN:
	case RK_LOGSUM: u = kir_e_binary(k, KIR_ADD, a, v); break;
	case RK_PROD: u = kir_e_binary(k, KIR_MUL, a, v); break;
	case RK_MAX: u = kir_e_binary(k, KIR_MAX, a, v); break;
	case RK_MIN: u = kir_e_binary(k, KIR_MIN, a, v); break;
	case RK_L1:
		u = kir_e_binary(k, KIR_ADD, a, tbc_dtype_is_unsigned(at) ? v : kir_e_unary(k, KIR_ABS, v));
		break;
	case RK_L2:
	case RK_SUMSQ: u = kir_e_binary(k, KIR_ADD, a, kir_e_binary(k, KIR_MUL, v, v)); break;
	case RK_LOGSUMEXP:
		u = kir_e_binary(k, KIR_ADD, a, kir_e_unary(k, KIR_EXP, kir_e_binary(k, KIR_SUB, v, shift)));
		break;
	}
	rs_set(s, acc, u);
	rs_pass_end(s);
	rs_group_combine(s, acc, kind == RK_PROD ? KIR_MUL : kind == RK_MAX ? KIR_MAX : kind == RK_MIN ? KIR_MIN : KIR_ADD);
	kir_expr *r = kir_e_var(k, acc);
	switch (kind) {
	case RK_MEAN: r = kir_e_binary(k, KIR_DIV, r, kir_e_cast(k, at, rs_count(s))); break;
	case RK_L2: r = kir_e_unary(k, KIR_SQRT, at_f ? r : kir_e_cast(k, TBC_DT_F64, r)); break;
	case RK_LOGSUM: r = kir_e_unary(k, KIR_LOG, r); break;
	case RK_LOGSUMEXP: r = kir_e_binary(k, KIR_ADD, kir_e_unary(k, KIR_LOG, r), shift); break;
	default: break;
	}
	return kir_e_cast(k, dt, r);
}

/* ---- Reduce* ops --------------------------------------------------------------*/
typedef struct load_ctx {
	kir_buffer *b;
	const tbc_type *t;
	tbc_dtype ct; /* cast to this (0: none) */
} load_ctx;

static kir_expr *load_elem(void *p, rspace *s, bool first) {
	(void)first;
	load_ctx *c = p;
	kir_expr *v = kir_e_load(s->k, c->b, rs_index(s, c->t));
	return c->ct ? kir_e_cast(s->k, c->ct, v) : v;
}

static const char *kname(const tbc_op *op, char *buf, size_t size) {
	const char *n = tbc_ops[op->code].name;
	size_t i = 0;
	for (; n[i] && i + 1 < size; i++) buf[i] = (n[i] >= 'A' && n[i] <= 'Z') ? (char)(n[i] - 'A' + 'a') : n[i];
	buf[i] = 0;
	return buf;
}

/* Begins kernel l writing op's output 0 and reading input 0 (x). */
static bool begin1(lower_cx *cx, const tbc_op *op, lk *l, kir_buffer **out, kir_buffer **x) {
	int ob = lower_result_buf(cx, op->outputs[0]);
	char name[64];
	if (ob < 0 || !lk_begin(l, cx, kname(op, name, sizeof name))) return false;
	*out = lk_buf(l, ob);
	*x = lk_value(l, op->inputs[0]);
	return *out && *x;
}

static lower_result lower_reduce_op(lower_cx *cx, const tbc_op *op, rkind kind) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	if (!y) return LOWER_OK;
	bool mask[TBC_MAX_RANK];
	if (x->type.rank < 0 || !rs_reduce_mask(op, x->type.rank, mask))
		return lower_dyn_reduce(cx, op); /* axes given while running (codegen/lower/reduce.c) */
	lk l;
	kir_buffer *out, *xb;
	rspace s;
	if (!begin1(cx, op, &l, &out, &xb) || !rs_begin_type(&l, &s, &x->type, mask)) return LOWER_FAILED;
	load_ctx c = {xb, &x->type, 0};
	rs_group(&s); /* devices: a work-group per output point */
	kir_expr *r = rs_reduce(&s, op, kind, x->type.dtype, load_elem, &c);
	if (!r) return LOWER_FAILED;
	rs_store(&s, out, rs_out_linear(&s), r);
	return lk_end(&l, rs_finish(&s)) ? LOWER_OK : LOWER_FAILED;
}

/* The compute type of float elementwise math: f64 stays, others in f32. */
static tbc_dtype float_ct(tbc_dtype dt) { return dt == TBC_DT_F64 ? TBC_DT_F64 : TBC_DT_F32; }

static bool float_input(lower_cx *cx, const tbc_op *op) {
	tbc_dtype dt = op->inputs[0]->type.dtype;
	if (tbc_dtype_is_float(dt) && tbc_dtype_bits(dt) >= 16 && tbc_dtype_supported(dt)) return true;
	return lower_error(cx, op, "op %s on %s has no lowering yet", tbc_ops[op->code].onnx_name,
			   tbc_dtype_name(dt));
}

/* ---- ArgMax / ArgMin ----------------------------------------------------------
 * The first (or with select_last_index the last) extreme; NaN wins and the
 * first NaN stays (the last with select_last_index), as the interpreter
 * does. */

/* The parallel form: every item's candidate (best value bv at index bi, bi
 * -1 for none) combined by a tree in local memory into the row's, with the
 * scan's rules: NaN beats numbers, the extreme beats the rest, and between
 * equals (two NaNs too) the first index, or the last with last. */
static void arg_combine(rspace *s, kir_var *bv, kir_var *bi, bool want_max, bool last, bool is_f) {
	kir_kernel *k = s->k;
	kir_buffer *pv = kir_local_new(k, "part_best", bv->type, 1, &s->group);
	kir_buffer *pi = kir_local_new(k, "part_at", TBC_DT_I64, 1, &s->group);
	kir_expr *lid = kir_e_local_id(k, 0);
	kir_block *b = &s->point;
	kir_block_add(k, b, kir_s_store(k, pv, lid, kir_e_var(k, bv)));
	kir_block_add(k, b, kir_s_store(k, pi, lid, kir_e_cast(k, TBC_DT_I64, kir_e_var(k, bi))));
	kir_block_add(k, b, kir_s_barrier(k));
	for (int64_t st = s->group / 2; st >= 1; st /= 2) {
		kir_expr *other = kir_e_add(k, lid, kir_e_index(k, st));
		kir_expr *va = kir_e_load(k, pv, lid), *vb = kir_e_load(k, pv, other);
		kir_expr *ia = kir_e_load(k, pi, lid), *ib = kir_e_load(k, pi, other);
		kir_expr *by_index = kir_e_cmp(k, last ? KIR_GT : KIR_LT, ib, ia);
		kir_expr *better = kir_e_binary(k, KIR_OR, kir_e_cmp(k, want_max ? KIR_GT : KIR_LT, vb, va),
						kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_EQ, vb, va), by_index));
		if (is_f) {
			kir_expr *an = kir_e_unary(k, KIR_ISNAN, va), *bn = kir_e_unary(k, KIR_ISNAN, vb);
			better = kir_e_select(k, an, kir_e_binary(k, KIR_AND, bn, by_index), kir_e_binary(k, KIR_OR, bn, better));
		}
		kir_expr *zero = kir_e_int(k, TBC_DT_I64, 0);
		kir_expr *take = kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_GE, ib, zero),
					      kir_e_binary(k, KIR_OR, kir_e_cmp(k, KIR_LT, ia, zero), better));
		kir_var *tv = kir_var_new(k, "take_b", TBC_DT_BOOL);
		kir_block step = {0};
		kir_block_add(k, &step, kir_s_set(k, tv, take));
		kir_block_add(k, &step, kir_s_store(k, pv, lid, kir_e_select(k, kir_e_var(k, tv), vb, va)));
		kir_block_add(k, &step, kir_s_store(k, pi, lid, kir_e_select(k, kir_e_var(k, tv), ib, ia)));
		kir_block_add(k, b, kir_s_if(k, kir_e_cmp(k, KIR_LT, lid, kir_e_index(k, st)), step.first, NULL));
		kir_block_add(k, b, kir_s_barrier(k));
	}
	kir_block_add(k, b, kir_s_set(k, bi, kir_e_cast(k, KIR_INDEX, kir_e_load(k, pi, kir_e_index(k, 0)))));
}

static lower_result lower_arg(lower_cx *cx, const tbc_op *op, bool want_max) {
	const tbc_value *x = op->inputs[0];
	tbc_dtype dt = x->type.dtype;
	bool last = tbc_attr_int(op, "select_last_index", 0) != 0;
	int a;
	if (!op->outputs[0]) return LOWER_OK;
	if (x->type.rank < 1 || !tbc_norm_axis(tbc_attr_int(op, "axis", 0), x->type.rank, &a))
		return lower_error(cx, op, "op %s: bad axis", tbc_ops[op->code].onnx_name), LOWER_FAILED;
	bool is_f = tbc_dtype_is_float(dt);
	if (!tbc_dtype_supported(dt) || dt == TBC_DT_BOOL || dt == TBC_DT_I4 || dt == TBC_DT_U4 ||
	    (is_f && tbc_dtype_bits(dt) < 16))
		return lower_error(cx, op, "op %s on %s has no lowering yet", tbc_ops[op->code].onnx_name,
				   tbc_dtype_name(dt)), LOWER_FAILED;
	tbc_dim n = x->type.dims[a];
	if (!n.sym && n.size == 0) {
		lower_error(cx, op, "cannot take the arg%s of an empty axis", want_max ? "max" : "min");
		return LOWER_FAILED;
	}
	bool mask[TBC_MAX_RANK] = {0};
	mask[a] = true;
	lk l;
	kir_buffer *out, *xb;
	rspace s;
	if (!begin1(cx, op, &l, &out, &xb) || !rs_begin_type(&l, &s, &x->type, mask)) return LOWER_FAILED;
	kir_kernel *k = l.k;
	tbc_dtype ct = is_f ? float_ct(dt) : dt;
	/* Devices: a work-group per long row, each item's candidate (at -1
	 * until it has one) then a tree of candidates. */
	bool grouped = rs_group(&s);
	kir_var *bv = kir_var_new(k, "best", ct), *bi = kir_var_new(k, "at", KIR_INDEX);
	rs_set(&s, bv, is_f ? kir_e_float(k, ct, 0) : kir_e_int(k, ct, 0));
	rs_set(&s, bi, kir_e_index(k, grouped ? -1 : 0));
	rs_pass_begin(&s);
	kir_expr *j = s.cur[a];
	kir_expr *v = rs_local(&s, "v", kir_e_cast(k, ct, kir_e_load(k, xb, rs_linear(&s))));
	kir_expr *b = kir_e_var(k, bv);
	kir_expr *better = kir_e_cmp(k, want_max ? KIR_GT : KIR_LT, v, b);
	if (last) better = kir_e_binary(k, KIR_OR, better, kir_e_cmp(k, KIR_EQ, v, b));
	kir_expr *take;
	if (is_f) {
		kir_expr *vn = kir_e_unary(k, KIR_ISNAN, v), *bn = kir_e_unary(k, KIR_ISNAN, b);
		take = kir_e_select(k, bn, last ? vn : kir_e_int(k, TBC_DT_BOOL, 0), kir_e_binary(k, KIR_OR, vn, better));
	} else {
		take = better;
	}
	kir_expr *none = grouped ? kir_e_cmp(k, KIR_LT, kir_e_var(k, bi), kir_e_index(k, 0)) : kir_e_cmp(k, KIR_EQ, j, kir_e_index(k, 0));
	take = kir_e_binary(k, KIR_OR, none, take);
	kir_expr *t = rs_local(&s, "take", take);
	rs_set(&s, bi, kir_e_select(k, t, j, kir_e_var(k, bi)));
	rs_set(&s, bv, kir_e_select(k, t, v, kir_e_var(k, bv)));
	rs_pass_end(&s);
	if (grouped) arg_combine(&s, bv, bi, want_max, last, is_f);
	rs_store(&s, out, rs_out_linear(&s), kir_e_cast(k, TBC_DT_I64, kir_e_var(k, bi)));
	return lk_end(&l, rs_finish(&s)) ? LOWER_OK : LOWER_FAILED;
}

/* ---- CumSum / CumProd ----------------------------------------------------------
 * Running sums and products along one axis, as the interpreter
 * (ir/kernels/reduce_scan.c): floats (narrow ones too) accumulate in f64 and
 * round on each store, integers and bool in 64 bits, wrapping, stored
 * wrapped to the width (bool: != 0).  A constant axis uses the reduction
 * space (on a device a long line is a work-group's: cum_group); an axis
 * given at run time gets its own kernel (lower_cum_dynamic). */
static tbc_dtype cum_acc_type(tbc_dtype dt) {
	return tbc_dtype_is_float(dt) ? TBC_DT_F64 : is_signed_int(dt) ? TBC_DT_I64 : TBC_DT_U64;
}

static kir_expr *cum_init(kir_kernel *k, tbc_dtype ac, bool prod) {
	return tbc_dtype_is_float(ac) ? kir_e_float(k, ac, prod) : kir_e_int(k, ac, prod);
}

/* The axis is the scalar input 1, read at run time: the kernel checks it is
 * in [-rank, rank) (else the run fails with the interpreter's message and
 * nothing is computed), then takes the axis's extent n, the product `outer`
 * of the dims before it and `inner` of those after it as select chains over
 * the static rank.  One parallel loop over outer * inner lines, a
 * sequential scan of n elements (stride inner) in each. */
static lower_result lower_cum_dynamic(lower_cx *cx, const tbc_op *op, bool prod) {
	const tbc_value *x = op->inputs[0], *ax = op->inputs[1];
	tbc_dtype dt = x->type.dtype, at = ax->type.dtype;
	int r = x->type.rank;
	bool one = ax->type.rank == 0 || (ax->type.rank == 1 && !ax->type.dims[0].sym && ax->type.dims[0].size == 1);
	bool sym_one = ax->type.rank == 1 && ax->type.dims[0].sym;
	if (r < 1 || !tbc_dtype_is_int(at) || (!one && !sym_one))
		return lower_error(cx, op, "op %s with this axis input has no lowering yet", tbc_ops[op->code].onnx_name),
		       LOWER_FAILED;
	bool exclusive = tbc_attr_int(op, "exclusive", 0) != 0, reverse = tbc_attr_int(op, "reverse", 0) != 0;
	lk l;
	kir_buffer *out, *xb;
	if (!begin1(cx, op, &l, &out, &xb)) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *ab = lk_value(&l, ax);
	if (!ab) return LOWER_FAILED;
	kir_block body = {0};
	char msg[256];
	const char *who = op->name ? op->name : "";
	const char *opn = tbc_ops[op->code].onnx_name;
	kir_expr *zero = kir_e_index(k, 0), *one_i = kir_e_index(k, 1);
	if (sym_one) {
		snprintf(msg, sizeof msg, "node '%s' (%s): axis must hold one integer", who, opn);
		kir_block_add(k, &body, kir_s_error(k, kir_e_cmp(k, KIR_NE, lk_dim(&l, ax->type.dims[0]), one_i), msg));
	}
	kir_var *av = kir_var_new(k, "axis", KIR_INDEX);
	kir_block_add(k, &body, kir_s_set(k, av, kir_e_cast(k, KIR_INDEX, kir_e_load(k, ab, zero))));
	kir_expr *a = kir_e_var(k, av);
	kir_expr *bad = kir_e_binary(k, KIR_OR, kir_e_cmp(k, KIR_LT, a, kir_e_index(k, -r)),
				     kir_e_cmp(k, KIR_GE, a, kir_e_index(k, r)));
	if (sym_one) bad = kir_e_binary(k, KIR_OR, bad, kir_e_cmp(k, KIR_NE, lk_dim(&l, ax->type.dims[0]), one_i));
	snprintf(msg, sizeof msg, "node '%s' (%s): axis is out of range for rank %d", who, opn, r);
	kir_block_add(k, &body, kir_s_error(k, bad, msg));
	kir_block_add(k, &body, kir_s_set(k, av, kir_e_select(k, kir_e_cmp(k, KIR_LT, a, zero), kir_e_add(k, a, kir_e_index(k, r)), a)));
	/* n, outer, inner from the normalized axis. */
	kir_expr *n = one_i, *outer = one_i, *inner = one_i;
	for (int d = 0; d < r; d++) {
		kir_expr *dim = lk_dim(&l, x->type.dims[d]), *di = kir_e_index(k, d);
		n = kir_e_select(k, kir_e_cmp(k, KIR_EQ, a, di), dim, n);
		if (d < r - 1) outer = kir_e_mul(k, outer, kir_e_select(k, kir_e_cmp(k, KIR_GT, a, di), dim, one_i));
		if (d > 0) inner = kir_e_mul(k, inner, kir_e_select(k, kir_e_cmp(k, KIR_LT, a, di), dim, one_i));
	}
	kir_var *nv = kir_var_new(k, "n", KIR_INDEX), *inv = kir_var_new(k, "inner", KIR_INDEX),
		*lv = kir_var_new(k, "lines", KIR_INDEX);
	kir_block run = {0};
	kir_block_add(k, &run, kir_s_set(k, nv, n));
	kir_block_add(k, &run, kir_s_set(k, inv, inner));
	kir_block_add(k, &run, kir_s_set(k, lv, kir_e_mul(k, outer, kir_e_var(k, inv))));
	n = kir_e_var(k, nv);
	inner = kir_e_var(k, inv);
	/* for p in lines parallel: base = (p / inner) * n * inner + p % inner */
	kir_var *p = kir_var_new(k, "p", KIR_INDEX), *base = kir_var_new(k, "base", KIR_INDEX);
	kir_expr *pv = kir_e_var(k, p);
	kir_block line = {0};
	kir_block_add(k, &line, kir_s_set(k, base, kir_e_add(k, kir_e_mul(k, kir_e_mul(k, kir_e_binary(k, KIR_FLOORDIV, pv, inner), n), inner),
							    kir_e_binary(k, KIR_FLOORMOD, pv, inner))));
	tbc_dtype ac = cum_acc_type(dt);
	kir_var *acc = kir_var_new(k, "acc", ac);
	kir_block_add(k, &line, kir_s_set(k, acc, cum_init(k, ac, prod)));
	kir_var *sv = kir_var_new(k, "s", KIR_INDEX);
	kir_expr *j = kir_e_var(k, sv);
	/* max(., 0) changes nothing (s < n) but lets the verifier's interval
	 * check, which does not relate s to n, prove the index in bounds. */
	if (reverse) j = kir_e_binary(k, KIR_MAX, kir_e_binary(k, KIR_SUB, kir_e_binary(k, KIR_SUB, n, one_i), j), zero);
	kir_var *ev = kir_var_new(k, "e", KIR_INDEX);
	kir_block scan = {0};
	kir_block_add(k, &scan, kir_s_set(k, ev, kir_e_add(k, kir_e_var(k, base), kir_e_mul(k, j, inner))));
	kir_expr *e = kir_e_var(k, ev);
	if (exclusive) kir_block_add(k, &scan, kir_s_store(k, out, e, kir_e_cast(k, dt, kir_e_var(k, acc))));
	kir_expr *v = kir_e_cast(k, ac, kir_e_load(k, xb, e));
	kir_block_add(k, &scan, kir_s_set(k, acc, kir_e_binary(k, prod ? KIR_MUL : KIR_ADD, kir_e_var(k, acc), v)));
	if (!exclusive) kir_block_add(k, &scan, kir_s_store(k, out, e, kir_e_cast(k, dt, kir_e_var(k, acc))));
	kir_block_add(k, &line, kir_s_for(k, sv, zero, n, 1, KIR_LOOP_SEQUENTIAL, scan.first));
	kir_block_add(k, &run, kir_s_for(k, p, zero, kir_e_var(k, lv), 1, KIR_LOOP_PARALLEL, line.first));
	kir_block_add(k, &body, kir_s_if(k, kir_e_unary(k, KIR_NOT, bad), run.first, NULL));
	return lk_end(&l, body.first) ? LOWER_OK : LOWER_FAILED;
}

/* The parallel form of a line (rs_group: a work-group per line): item t
 * scans the t-th chunk of ceil(n / group) elements in scan order for its
 * total, the totals go to local memory, each item starts its chunk from the
 * combination of the totals before it and scans it again, storing.  Floats
 * accumulate in f64 as the sequential scan does (in another association:
 * the chunks' totals first); integers wrap alike. */
static kir_stmt *cum_group(rspace *s, int a, kir_buffer *out, kir_buffer *xb, tbc_dtype dt, bool prod, bool exclusive,
			   bool reverse) {
	kir_kernel *k = s->k;
	tbc_dtype ac = cum_acc_type(dt);
	kir_binop op = prod ? KIR_MUL : KIR_ADD;
	kir_block *b = &s->point;
	kir_expr *n = s->size[a], *lid = kir_e_local_id(k, 0);
	kir_expr *c = LET(k, b, "chunk", DIV(k, ADD(k, n, I(k, s->group - 1)), I(k, s->group)));
	kir_expr *lo = LET(k, b, "lo", MUL(k, lid, c));
	kir_expr *hi = LET(k, b, "hi", MIN(k, ADD(k, lo, c), n));
	kir_var *pv[2];
	kir_expr *e[2];
	for (int i = 0; i < 2; i++) {
		pv[i] = kir_var_new(k, "p", KIR_INDEX);
		/* max(., 0) changes nothing (p < n) but lets the verifier prove the
		 * index in bounds. */
		s->cur[a] = reverse ? MAX(k, SUB(k, SUB(k, n, I(k, 1)), V(k, pv[i])), I(k, 0)) : V(k, pv[i]);
		e[i] = rs_linear(s);
	}
	s->cur[a] = NULL;
	kir_var *total = kir_var_new(k, "total", ac), *acc = kir_var_new(k, "acc", ac);
	kir_block_add(k, b, kir_s_set(k, total, cum_init(k, ac, prod)));
	kir_block_add(k, b, kir_s_for(k, pv[0], lo, hi, 1, KIR_LOOP_SEQUENTIAL,
				      kir_s_set(k, total, BIN(k, op, V(k, total), CAST(k, ac, LOAD(k, xb, e[0]))))));
	kir_buffer *part = kir_local_new(k, "part", ac, 1, &s->group);
	kir_block_add(k, b, kir_s_store(k, part, lid, V(k, total)));
	kir_block_add(k, b, kir_s_barrier(k));
	kir_var *t = kir_var_new(k, "t", KIR_INDEX);
	kir_block_add(k, b, kir_s_set(k, acc, cum_init(k, ac, prod)));
	kir_block_add(k, b, kir_s_for(k, t, I(k, 0), lid, 1, KIR_LOOP_SEQUENTIAL,
				      kir_s_set(k, acc, BIN(k, op, V(k, acc), LOAD(k, part, V(k, t))))));
	kir_block_add(k, b, kir_s_barrier(k)); /* before part is stored again */
	kir_block scan = {0};
	kir_expr *ev = LET(k, &scan, "e", e[1]);
	if (exclusive) kir_block_add(k, &scan, kir_s_store(k, out, ev, CAST(k, dt, V(k, acc))));
	kir_block_add(k, &scan, kir_s_set(k, acc, BIN(k, op, V(k, acc), CAST(k, ac, LOAD(k, xb, ev)))));
	if (!exclusive) kir_block_add(k, &scan, kir_s_store(k, out, ev, CAST(k, dt, V(k, acc))));
	kir_block_add(k, b, kir_s_for(k, pv[1], lo, hi, 1, KIR_LOOP_SEQUENTIAL, scan.first));
	return rs_finish(s);
}

static lower_result lower_cum(lower_cx *cx, const tbc_op *op, bool prod) {
	const tbc_value *x = op->inputs[0];
	tbc_dtype dt = x->type.dtype;
	int a;
	if (!op->outputs[0]) return LOWER_OK;
	if (!tbc_dtype_supported(dt))
		return lower_error(cx, op, "op %s on %s has no lowering yet", tbc_ops[op->code].onnx_name,
				   tbc_dtype_name(dt)), LOWER_FAILED;
	const tbc_tensor *at = tbc_input_const(op, 1);
	if (!at) return lower_cum_dynamic(cx, op, prod);
	if (at->numel != 1 || tbc_dtype_is_float(at->dtype) || x->type.rank < 1 ||
	    !tbc_norm_axis(tbc_load_i64(at->dtype, at->data, 0), x->type.rank, &a))
		return lower_error(cx, op, "op %s: bad axis", tbc_ops[op->code].onnx_name), LOWER_FAILED;
	bool exclusive = tbc_attr_int(op, "exclusive", 0) != 0, reverse = tbc_attr_int(op, "reverse", 0) != 0;
	bool mask[TBC_MAX_RANK] = {0};
	mask[a] = true;
	lk l;
	kir_buffer *out, *xb;
	rspace s;
	if (!begin1(cx, op, &l, &out, &xb) || !rs_begin_type(&l, &s, &x->type, mask)) return LOWER_FAILED;
	kir_kernel *k = l.k;
	if (rs_group(&s)) /* devices: a work-group per long line */
		return lk_end(&l, cum_group(&s, a, out, xb, dt, prod, exclusive, reverse)) ? LOWER_OK : LOWER_FAILED;
	s.reverse = reverse;
	tbc_dtype ac = cum_acc_type(dt);
	kir_var *acc = kir_var_new(k, "acc", ac);
	rs_set(&s, acc, cum_init(k, ac, prod));
	rs_pass_begin(&s);
	kir_expr *idx = rs_local(&s, "e", rs_linear(&s));
	if (exclusive) kir_block_add(k, &s.inner, kir_s_store(k, out, idx, kir_e_cast(k, dt, kir_e_var(k, acc))));
	kir_expr *v = kir_e_cast(k, ac, kir_e_load(k, xb, idx));
	rs_set(&s, acc, kir_e_binary(k, prod ? KIR_MUL : KIR_ADD, kir_e_var(k, acc), v));
	if (!exclusive) kir_block_add(k, &s.inner, kir_s_store(k, out, idx, kir_e_cast(k, dt, kir_e_var(k, acc))));
	rs_pass_end(&s);
	return lk_end(&l, rs_finish(&s)) ? LOWER_OK : LOWER_FAILED;
}

/* ---- Softmax / LogSoftmax / Hardmax --------------------------------------------
 * Max first (NaN sticks), then the sum of exp(x - max) in f64 (Softmax
 * keeping each exp in y), then the results; Hardmax marks the first
 * maximum.  On a device a long row is a
 * work-group's (rs_group): max and sum combined by trees (Hardmax's first
 * maximum by ArgMax's), each item writing its strided part of the row. */
typedef enum { SM_SOFT, SM_LOG, SM_HARD } sm_kind;

static lower_result lower_softmax(lower_cx *cx, const tbc_op *op, sm_kind kind) {
	const tbc_value *x = op->inputs[0];
	if (!op->outputs[0]) return LOWER_OK;
	if (!float_input(cx, op)) return LOWER_FAILED;
	tbc_dtype dt = x->type.dtype, ct = float_ct(dt);
	int r = x->type.rank, a = -1;
	if (r < 0 || (r > 0 && !tbc_norm_axis(tbc_attr_int(op, "axis", -1), r, &a)))
		return lower_error(cx, op, "op %s: bad axis", tbc_ops[op->code].onnx_name), LOWER_FAILED;
	bool mask[TBC_MAX_RANK] = {0};
	if (a >= 0) mask[a] = true;
	lk l;
	kir_buffer *out, *xb;
	rspace s;
	if (!begin1(cx, op, &l, &out, &xb) || !rs_begin_type(&l, &s, &x->type, mask)) return LOWER_FAILED;
	kir_kernel *k = l.k;
	/* Devices: a work-group per long row (Hardmax: each item's first
	 * maximum, at -1 until it has one, then ArgMax's tree of candidates). */
	bool grouped = rs_group(&s);
	/* Softmax in the type it computes in keeps exp(x - max) in y between
	 * the sum and the last pass, which then multiplies: one exp per
	 * element instead of two, the same values (a narrower y would round
	 * them: it computes exp twice).  Each pass visits a row's elements
	 * alike (a device's items their same strided part), so each element
	 * is read back by whoever stored it.  Not on a device: there the
	 * passes stream the rows from memory and exp is cheap beside a store,
	 * so the kept exps cost a write and a read of y more than they save
	 * (Softmax over 8192 rows of 8192 on an H100: 0.544 ms against 0.472;
	 * docs/gpu.md, run 24).  TBC_SOFTMAX_KEEP_EXP=0 / 1: never / always,
	 * for measuring. */
	const char *ke = getenv("TBC_SOFTMAX_KEEP_EXP");
	bool keep_exp = kind == SM_SOFT && ct == dt &&
			(ke ? strcmp(ke, "0") != 0 : cx->target->parallel != TBC_PAR_GRID);
	kir_var *mx = kir_var_new(k, "max", ct), *best = kind == SM_HARD ? kir_var_new(k, "at", KIR_INDEX) : NULL;
	rs_set(&s, mx, kir_e_float(k, ct, -INFINITY));
	if (best) rs_set(&s, best, kir_e_index(k, grouped ? -1 : 0));
	rs_pass_begin(&s);
	kir_expr *v = kir_e_cast(k, ct, kir_e_load(k, xb, rs_linear(&s)));
	if (kind == SM_HARD) {
		kir_expr *m = kir_e_var(k, mx);
		kir_expr *take = kir_e_binary(k, KIR_AND, kir_e_unary(k, KIR_NOT, kir_e_unary(k, KIR_ISNAN, m)),
					      kir_e_binary(k, KIR_OR, kir_e_cmp(k, KIR_GT, v, m), kir_e_unary(k, KIR_ISNAN, v)));
		if (grouped) take = kir_e_binary(k, KIR_OR, kir_e_cmp(k, KIR_LT, kir_e_var(k, best), kir_e_index(k, 0)), take);
		kir_expr *t = rs_local(&s, "take", take);
		rs_set(&s, best, kir_e_select(k, t, a >= 0 ? s.cur[a] : kir_e_index(k, 0), kir_e_var(k, best)));
		rs_set(&s, mx, kir_e_select(k, t, v, kir_e_var(k, mx)));
	} else {
		rs_set(&s, mx, kir_e_binary(k, KIR_MAX, kir_e_var(k, mx), v));
	}
	rs_pass_end(&s);
	if (kind != SM_HARD) rs_group_combine(&s, mx, KIR_MAX);
	else if (grouped) arg_combine(&s, mx, best, true, false, true);
	kir_expr *sum = NULL;
	if (kind != SM_HARD) {
		/* The f64 sum of f32 (or narrower) terms: its order changes it
		 * far below f32's rounding, so it may be vectorized. */
		kir_var *sv = kir_var_new(k, "sum", TBC_DT_F64);
		sv->reassoc = ct != TBC_DT_F64;
		rs_set(&s, sv, kir_e_float(k, TBC_DT_F64, 0));
		rs_pass_begin(&s);
		kir_expr *at = rs_local(&s, "e", rs_linear(&s));
		v = kir_e_cast(k, ct, kir_e_load(k, xb, at));
		kir_expr *e = kir_e_unary(k, KIR_EXP, kir_e_binary(k, KIR_SUB, v, kir_e_var(k, mx)));
		if (keep_exp) { /* exp(x - max) kept in y for the last pass */
			e = rs_local(&s, "exp", e);
			kir_block_add(k, &s.inner, kir_s_store(k, out, at, e));
		}
		rs_set(&s, sv, kir_e_binary(k, KIR_ADD, kir_e_var(k, sv), kir_e_cast(k, TBC_DT_F64, e)));
		rs_pass_end(&s);
		rs_group_combine(&s, sv, KIR_ADD);
		sum = kind == SM_LOG ? rs_local(&s, "lse", kir_e_cast(k, ct, kir_e_unary(k, KIR_LOG, kir_e_var(k, sv))))
				     : rs_local(&s, "inv", kir_e_cast(k, ct, kir_e_binary(k, KIR_DIV, kir_e_float(k, TBC_DT_F64, 1),
											 kir_e_var(k, sv))));
	}
	rs_pass_begin(&s);
	s.independent_pass = true; /* each iteration stores its element from x (or its kept exp) and the row's scalars */
	kir_expr *idx = rs_local(&s, "e", rs_linear(&s)), *y;
	if (kind == SM_HARD) {
		kir_expr *j = a >= 0 ? s.cur[a] : kir_e_index(k, 0);
		y = kir_e_select(k, kir_e_cmp(k, KIR_EQ, j, kir_e_var(k, best)), kir_e_float(k, ct, 1), kir_e_float(k, ct, 0));
	} else if (keep_exp) {
		y = kir_e_binary(k, KIR_MUL, kir_e_load(k, out, idx), sum);
	} else {
		kir_expr *d = kir_e_binary(k, KIR_SUB, kir_e_cast(k, ct, kir_e_load(k, xb, idx)), kir_e_var(k, mx));
		y = kind == SM_LOG ? kir_e_binary(k, KIR_SUB, d, sum) : kir_e_binary(k, KIR_MUL, kir_e_unary(k, KIR_EXP, d), sum);
	}
	kir_block_add(k, &s.inner, kir_s_store(k, out, idx, kir_e_cast(k, dt, y)));
	rs_pass_end(&s);
	return lk_end(&l, rs_finish(&s)) ? LOWER_OK : LOWER_FAILED;
}

lower_result lower_family_reduce(lower_cx *cx, const tbc_op *op) {
	rkind kind;
	if (rk_of(op->code, &kind)) return lower_reduce_op(cx, op, kind);
	switch (op->code) {
	case TBC_OP_ArgMax: return lower_arg(cx, op, true);
	case TBC_OP_ArgMin: return lower_arg(cx, op, false);
	case TBC_OP_CumSum: return lower_cum(cx, op, false);
	case TBC_OP_CumProd: return lower_cum(cx, op, true);
	case TBC_OP_Softmax: return lower_softmax(cx, op, SM_SOFT);
	case TBC_OP_LogSoftmax: return lower_softmax(cx, op, SM_LOG);
	case TBC_OP_Hardmax: return lower_softmax(cx, op, SM_HARD);
	default: return LOWER_NOT_MINE;
	}
}

/* ---- Axes given while running ------------------------------------------------
 * The Reduce* ops with axes given while running (a graph input rather than
 * a constant): which dims are reduced is known only from the data, so the
 * output's dims are computed symbols and the loop structure cannot be fixed
 * at compile time.  Two kernels:
 *
 *  - a shape kernel reads the axes, checks them as the interpreter does
 *    (ir/kernels/reduce.c mark_axes: in range, not repeated; empty axes
 *    reduce everything, or nothing with noop_with_empty_axes), stores the
 *    output dims (lower_shape_dim) and, per input dim d, two symbols of its
 *    own: kext_d (size_d when kept, else 1) and rext_d (size_d when reduced,
 *    else 1);
 *  - a data kernel: the reduction engine of codegen/lower/reduce.c (rs_reduce, so
 *    the accumulation rules and precision are exactly those of the
 *    constant-axes lowering) over the space [n_out | rext_0 .. rext_{r-1}]:
 *    one parallel loop over the output's elements, and inside it a nest of
 *    sequential loops over every input dim with run-time extent rext_d.  A
 *    kept dim's loop runs once, so no element index needs a division; the
 *    input index of an output point (its base) is decomposed from the flat
 *    output index with run-time strides once per point.
 *
  * Called from lower_op for a data-dependent output shape, and from the
 * constant-axes lowering when the axes are not constant but every output dim
 * is known anyway (all dims reduced without keepdims, dims of size 1). */

/* The name of the symbol `what`_d of op's lowering (distinct per output value). */
static const char *sym_name(const tbc_op *op, const char *what, int d, char *buf, size_t size) {
	snprintf(buf, size, "_red%d.%s%d", op->outputs[0]->id, what, d);
	return buf;
}

/* ---- The shape kernel -----------------------------------------------------*/

static bool shape_kernel(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *ax = op->inputs[1], *y = op->outputs[0];
	int r = x->type.rank;
	bool keep = tbc_attr_int(op, "keepdims", 1) != 0;
	bool noop = tbc_attr_int(op, "noop_with_empty_axes", 0) != 0;
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_kernel *k = s.k;
	kir_buffer *ab = lk_value(&s.l, ax);
	if (!ab) return false;

	/* marked_d: axis d listed so far (0 or 1), over a sequential loop on the
	 * axes in their order, so the first bad axis gives the run's error. */
	kir_expr *n = ax->type.rank == 0 ? I(s.k, 1) : shk_dim_of(&s, ax, 0);
	kir_expr *marked[TBC_MAX_RANK];
	for (int d = 0; d < r; d++) marked[d] = shk_let(&s, "marked", I(s.k, 0));
	kir_block outer = s.b;
	s.b = (kir_block){0}; /* the loop's body */
	kir_var *iv = kir_var_new(k, "i", KIR_INDEX);
	kir_expr *v = shk_let(&s, "v", kir_e_cast(k, KIR_INDEX, kir_e_load(k, ab, kir_e_var(k, iv))));
	/* The interpreter names the value; a compiled message cannot hold it. */
	shk_fail_if(&s, OR(s.k, CMP(s.k, KIR_LT, v, I(s.k, -r)), CMP(s.k, KIR_GE, v, I(s.k, r))), "an axis is out of range for rank %d", r);
	kir_expr *a = shk_let(&s, "a", SEL(s.k, CMP(s.k, KIR_LT, v, I(s.k, 0)), kir_e_add(k, v, I(s.k, r)), v));
	for (int d = 0; d < r; d++) {
		/* In range, a repeated axis is one of 2r values: each its own message. */
		kir_expr *seen = CMP(s.k, KIR_NE, marked[d], I(s.k, 0));
		shk_fail_if(&s, AND(s.k, seen, CMP(s.k, KIR_EQ, v, I(s.k, d))), "axis %d is repeated", d);
		shk_fail_if(&s, AND(s.k, seen, CMP(s.k, KIR_EQ, v, I(s.k, d - r))), "axis %d is repeated", d - r);
	}
	for (int d = 0; d < r; d++)
		kir_block_add(k, &s.b, kir_s_set(k, marked[d]->var, SEL(s.k, CMP(s.k, KIR_EQ, a, I(s.k, d)), I(s.k, 1), marked[d])));
	kir_stmt *loop = kir_s_for(k, iv, I(s.k, 0), n, 1, KIR_LOOP_SEQUENTIAL, s.b.first);
	s.b = outer;
	kir_block_add(k, &s.b, loop);

	/* No axes: every dim reduced, or none with noop_with_empty_axes. */
	kir_expr *empty = CMP(s.k, KIR_EQ, n, I(s.k, 0));
	kir_expr *red[TBC_MAX_RANK], *size[TBC_MAX_RANK];
	char name[64];
	for (int d = 0; d < r; d++) {
		size[d] = shk_dim_of(&s, x, d);
		red[d] = shk_let(&s, "red", SEL(s.k, empty, kir_e_int(k, TBC_DT_BOOL, !noop), CMP(s.k, KIR_NE, marked[d], I(s.k, 0))));
		if (!shk_store_sym(&s, sym_name(op, "k", d, name, sizeof name), SEL(s.k, red[d], I(s.k, 1), size[d]), NULL) ||
		    !shk_store_sym(&s, sym_name(op, "r", d, name, sizeof name), SEL(s.k, red[d], size[d], I(s.k, 1)), NULL))
			return false;
	}
	/* Output dims: each input dim kept, 1 where reduced with keepdims; without
	 * keepdims output dim j is the input dim kept with j kept before it. */
	for (int j = 0; j < y->type.rank; j++) {
		kir_expr *val;
		if (keep) {
			val = SEL(s.k, red[j], I(s.k, 1), size[j]);
		} else {
			val = I(s.k, 1);
			kir_expr *before = I(s.k, 0);
			for (int d = 0; d < r; d++) {
				kir_expr *kept = kir_e_unary(k, KIR_NOT, red[d]);
				val = SEL(s.k, AND(s.k, kept, CMP(s.k, KIR_EQ, before, I(s.k, j))), size[d], val);
				before = kir_e_add(k, before, SEL(s.k, kept, I(s.k, 1), I(s.k, 0)));
			}
		}
		if (!shk_out_dim(&s, 0, j, val)) return false;
	}
	return shk_end(&s);
}

/* ---- The data kernel ------------------------------------------------------*/
typedef struct elem_ctx {
	kir_buffer *x;
	kir_expr *base;                  /* input index of the point's first element */
	kir_expr *stride[TBC_MAX_RANK];  /* the input's row-major strides */
	int rank;
} elem_ctx;

static kir_expr *dyn_elem(void *p, rspace *s, bool first) {
	(void)first;
	elem_ctx *c = p;
	kir_expr *idx = c->base;
	for (int d = 0; d < c->rank; d++)
		if (s->cur[1 + d]) idx = kir_e_add(s->k, idx, kir_e_mul(s->k, s->cur[1 + d], c->stride[d]));
	kir_expr *v = kir_e_load(s->k, c->x, idx);
	/* Bool (ReduceMax/Min) accumulates in u8; the select spares the CPU
	 * backend a bool-to-u8 cast, which it emits as a bare i1. */
	if (c->x->dtype == TBC_DT_BOOL) v = kir_e_select(s->k, v, kir_e_int(s->k, TBC_DT_U8, 1), kir_e_int(s->k, TBC_DT_U8, 0));
	return v;
}

static bool data_kernel(lower_cx *cx, const tbc_op *op, rkind kind) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int r = x->type.rank;
	int ob = lower_result_buf(cx, y);
	lk l;
	char what[64];
	snprintf(what, sizeof what, "%s_dynaxes", tbc_ops[op->code].onnx_name);
	if (ob < 0 || !lk_begin(&l, cx, what)) return false;
	kir_kernel *k = l.k;
	kir_buffer *out = lk_buf(&l, ob), *xb = lk_value(&l, x);
	if (!out || !xb) return false;
	/* Space dim 0: the output's elements; dims 1..r: the input's, run-time
	 * extent rext_d (1 where kept).  A dim of static size 1 is 1 in both. */
	kir_expr *sizes[1 + TBC_MAX_RANK], *kext[TBC_MAX_RANK];
	bool mask[1 + TBC_MAX_RANK] = {false};
	kir_expr *n_out = kir_e_index(k, 1);
	char name[64];
	for (int d = 0; d < r; d++) {
		tbc_dim xd = x->type.dims[d];
		bool unit = !xd.sym && xd.size == 1;
		kext[d] = unit ? kir_e_index(k, 1) : lk_dim(&l, (tbc_dim){-1, sym_name(op, "k", d, name, sizeof name)});
		sizes[1 + d] = unit ? kir_e_index(k, 1) : lk_dim(&l, (tbc_dim){-1, sym_name(op, "r", d, name, sizeof name)});
		mask[1 + d] = true;
		n_out = kir_e_mul(k, n_out, kext[d]);
	}
	sizes[0] = n_out;
	rspace s;
	if (!rs_begin_sizes(&l, &s, 1 + r, sizes, mask)) return false;
	/* base = sum over dims of (o / ostride_d % kext_d) * stride_d, from the
	 * innermost dim out; a reduced dim's coordinate is 0 (kext_d = 1). */
	elem_ctx c = {.x = xb, .rank = r};
	kir_expr *o = s.cur[0], *base = kir_e_index(k, 0), *ostride = kir_e_index(k, 1), *stride = kir_e_index(k, 1);
	for (int d = r - 1; d >= 0; d--) {
		c.stride[d] = stride;
		int64_t one;
		if (!(kir_e_const_index(kext[d], &one) && one == 1)) {
			kir_expr *q = kir_e_binary(k, KIR_DIV, o, ostride);
			kir_expr *coord = d == 0 ? q : kir_e_binary(k, KIR_REM, q, kext[d]);
			base = kir_e_add(k, base, kir_e_mul(k, coord, stride));
		}
		ostride = kir_e_mul(k, ostride, kext[d]);
		stride = kir_e_mul(k, stride, lk_dim(&l, x->type.dims[d]));
	}
	c.base = rs_local(&s, "base", base);
	kir_expr *res = rs_reduce(&s, op, kind, x->type.dtype, dyn_elem, &c);
	if (!res) return false;
	kir_block_add(k, &s.point, kir_s_store(k, out, rs_out_linear(&s), res));
	return lk_end(&l, rs_finish(&s));
}

lower_result lower_dyn_reduce(lower_cx *cx, const tbc_op *op) {
	rkind kind;
	if (!rk_of(op->code, &kind)) return LOWER_NOT_MINE;
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	if (!y) return LOWER_OK;
	bool mask[TBC_MAX_RANK];
	if (x->type.rank >= 0 && rs_reduce_mask(op, x->type.rank, mask)) return LOWER_NOT_MINE; /* constant axes */
	const tbc_value *ax = op->n_inputs > 1 ? op->inputs[1] : NULL;
	const char *opn = tbc_ops[op->code].onnx_name;
	if (x->type.rank < 0 || y->type.rank < 0 || !ax || ax->type.rank > 1 || tbc_dtype_is_float(ax->type.dtype))
		return lower_error(cx, op, "op %s with axes of unknown count has no lowering yet", opn), LOWER_FAILED;
	bool keep = tbc_attr_int(op, "keepdims", 1) != 0;
	int64_t n_axes = ax->type.rank == 0 ? 1 : ax->type.dims[0].sym ? -1 : ax->type.dims[0].size;
	if (keep ? y->type.rank != x->type.rank : n_axes < 0 || y->type.rank != x->type.rank - n_axes)
		return lower_error(cx, op, "op %s: the output's rank does not fit the axes", opn), LOWER_FAILED;
	if (!shape_kernel(cx, op) || !data_kernel(cx, op, kind)) return LOWER_FAILED;
	return LOWER_OK;
}
