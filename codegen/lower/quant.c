/* Quantization ops lowered for the CPU: QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and
 * QLinearConv.
 *
 * The arithmetic follows the interpreter (ir/kernels/conv_quant.c,
 * ir/kernels/reduce_matmul.c, ir/kernels/conv.c) step by step, so results
 * agree bit for bit:
 *   quantize:   y = saturate(round_half_even(x / scale) + zero_point), with
 *               x / scale in the precision dtype (x's float type, f32 for
 *               int32 x, or the `precision` attribute), narrow precisions
 *               rounded after each step;
 *   dequantize: y = (x - zero_point) * scale in f32 (f64 when the scale or
 *               the output is f64);
 *   the integer matmuls/convs: exact int32 sums of (a - a_zp)(b - b_zp); the
 *               requantization of QLinear* in f64 as the interpreter does.
 * Scales and zero points are per tensor, per axis (a broadcast operand the
 * loop nest indexes) or blocked (the axis coordinate divided by block_size).
 * Combinations the interpreter allows but this file does not handle (zero
 * points of the operand's full rank in MatMulInteger, symbolic parameter
 * shapes, float outputs of QLinearMatMul) are refused with "no lowering
 * yet". */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codegen/lower/lower_gemm.h"
#include "codegen/lower/kir_short.h"
#include "codegen/lower/quant_internal.h"
#include "codegen/lower/quant_vnni.h"
#include "ir/kernels/conv_util.h"

/* ---- Shorthands ----------------------------------------------------------------*/

static lower_result done(bool ok) { return ok ? LOWER_OK : LOWER_FAILED; }
lower_result quant_refuse(lower_cx *cx, const tbc_op *op, const char *why) {
	lower_error(cx, op, "%s: %s has no lowering yet", tbc_ops[op->code].onnx_name, why);
	return LOWER_FAILED;
}

static bool is_float8(tbc_dtype dt) {
	return dt == TBC_DT_F8E4M3FN || dt == TBC_DT_F8E4M3FNUZ || dt == TBC_DT_F8E5M2 || dt == TBC_DT_F8E5M2FNUZ;
}

/* The integer range of a quantized integer type; false for other types. */
bool quant_int_range(tbc_dtype dt, double *lo, double *hi) {
	switch (dt) {
	case TBC_DT_U8: *lo = 0, *hi = 255; return true;
	case TBC_DT_I8: *lo = -128, *hi = 127; return true;
	case TBC_DT_U16: *lo = 0, *hi = 65535; return true;
	case TBC_DT_I16: *lo = -32768, *hi = 32767; return true;
	case TBC_DT_U4: *lo = 0, *hi = 15; return true;
	case TBC_DT_I4: *lo = -8, *hi = 7; return true;
	case TBC_DT_U2: *lo = 0, *hi = 3; return true;
	case TBC_DT_I2: *lo = -2, *hi = 1; return true;
	default: return false;
	}
}

bool quant_static_type(const tbc_type *t) {
	if (t->rank < 0) return false;
	for (int d = 0; d < t->rank; d++)
		if (t->dims[d].sym) return false;
	return true;
}

static int64_t static_numel(const tbc_type *t) {
	int64_t n = 1;
	for (int d = 0; d < t->rank; d++) n *= t->dims[d].size;
	return n;
}

/* e rounded to dtype pdt and back to its own type (the compute type) when
 * the two differ: arithmetic in a narrower precision. */
static kir_expr *narrow(kir_kernel *k, tbc_dtype pdt, kir_expr *e) {
	if (!e || pdt == e->type) return e;
	return CAST(k, e->type, CAST(k, pdt, e));
}

static kir_expr *clamp_nan0(kir_kernel *k, kir_expr *v, double lo, double hi) {
	if (!v) return NULL;
	tbc_dtype t = v->type;
	kir_expr *c = BIN(k, KIR_MIN, BIN(k, KIR_MAX, v, F(k, t, lo)), F(k, t, hi));
	return kir_e_select(k, kir_e_unary(k, KIR_ISNAN, v), F(k, t, 0.0), c);
}

/* select(isnan(v), 0, clamp(v, lo, hi)) in v's float type. */
kir_expr *quant_clamp_nan0(lk *l, kir_expr *v, double lo, double hi) { return clamp_nan0(l->k, v, lo, hi); }

/* ---- Where an element finds its scale / zero point ---------------------------*/
typedef struct qmap {
	int kind; /* 0 per tensor, 1 per axis, 2 blocked */
	int axis;
	int64_t block, nb; /* blocked: block size and the parameter's axis dim */
} qmap;

/* The map of parameter p (static shape) over x; false (diagnostic) when it
 * does not fit or cannot lower. */
static bool qmap_make(lower_cx *cx, const tbc_op *op, const tbc_type *x, const tbc_value *p, qmap *m) {
	memset(m, 0, sizeof *m);
	const tbc_type *pt = &p->type;
	if (!quant_static_type(pt)) return quant_refuse(cx, op, "a scale or zero point of symbolic shape"), false;
	int64_t block = tbc_attr_int(op, "block_size", 0), pn = static_numel(pt);
	if (block < 0) return lower_error(cx, op, "block_size must not be negative");
	if (pt->rank == 0 || (pn == 1 && block == 0 && pt->rank <= 1)) return true;
	if (x->rank < 0 || !tbc_norm_axis(tbc_attr_int(op, "axis", 1), x->rank, &m->axis))
		return lower_error(cx, op, "axis is out of range");
	if (block == 0) {
		if (pt->rank != 1) return lower_error(cx, op, "a per-axis scale must be 1-D");
		m->kind = 1;
		return true;
	}
	if (pt->rank != x->rank) return lower_error(cx, op, "a blocked scale must have the rank of x");
	m->kind = 2;
	m->block = block;
	m->nb = pt->dims[m->axis].size;
	return true;
}

/* The operand types given to nest_build for the maps: per axis, x's rank
 * with 1 everywhere but the axis; blocked, x's shape with 1 at the axis. */
static void qmap_types(const tbc_type *x, const qmap *m, tbc_type *axis_t, tbc_type *rest_t) {
	*axis_t = *x;
	*rest_t = *x;
	for (int d = 0; d < x->rank; d++) {
		if (d != m->axis) axis_t->dims[d] = (tbc_dim){.size = 1};
	}
	if (x->rank > 0) rest_t->dims[m->axis] = (tbc_dim){.size = 1};
}

/* The index into the parameter at the nest's current point. */
static kir_expr *qmap_index(lk *l, const nest *n, const tbc_type *x, const qmap *m, const tbc_type *axis_t,
			    const tbc_type *rest_t) {
	if (m->kind == 0) return I(l->k, 0);
	if (m->kind == 1) return nest_index(l, n, axis_t);
	/* Blocked: the axis coordinate a, and the rest (outer * inner + in). */
	kir_expr *a = NULL;
	if (!x->dims[m->axis].sym && x->dims[m->axis].size == 1) a = I(l->k, 0);
	for (int g = 0; g < n->rank && !a; g++) {
		if (n->first[g] > m->axis || n->first[g + 1] <= m->axis) continue;
		/* The axis's loop: its variable is the axis coordinate when every
		 * other dim the loop covers has size 1. */
		bool alone = true;
		for (int d = n->first[g]; d < n->first[g + 1]; d++)
			if (d != m->axis && (x->dims[d].sym || x->dims[d].size != 1)) alone = false;
		if (alone) a = V(l->k, n->vars[g]);
	}
	if (!a) return NULL; /* the caller refuses */
	kir_expr *inner = I(l->k, 1);
	for (int d = m->axis + 1; d < x->rank; d++) inner = MUL(l->k, inner, lk_dim(l, x->dims[d]));
	kir_expr *rest = nest_index(l, n, rest_t);
	kir_expr *outer = DIV(l->k, rest, inner), *in = MOD(l->k, rest, inner);
	return ADD(l->k, ADD(l->k, MUL(l->k, outer, MUL(l->k, I(l->k, m->nb), inner)), MUL(l->k, DIV(l->k, a, I(l->k, m->block)), inner)), in);
}

/* ---- QuantizeLinear / DequantizeLinear ------------------------------------------*/
/* The value of one element of a QuantizeLinear or DequantizeLinear op: x, its
 * scale and zero point (NULL: none) loaded in their own types.  Run-time
 * checks (a float8 zero point must be 0) go into `checks`.  lower_qdq checks
 * the types first; fused loops (codegen/lower/elementwise.c) take the
 * per-tensor forms of passes/util.c's pass_qdq_elementwise. */
kir_expr *quant_qdq_value(kir_kernel *k, const tbc_op *op, kir_expr *xl, kir_expr *sl, kir_expr *zl, kir_block *checks) {
	const tbc_dtype dt = op->outputs[0]->type.dtype, xdt = op->inputs[0]->type.dtype;
	double lo = 0, hi = 0;
	bool is_int = quant_int_range(dt, &lo, &hi);
	if (op->code == TBC_OP_QuantizeLinear) {
		int64_t prec = tbc_attr_int(op, "precision", 0);
		tbc_dtype pdt = prec ? (tbc_dtype)prec : tbc_dtype_is_float(xdt) ? xdt : TBC_DT_F32;
		tbc_dtype ct = pdt == TBC_DT_F64 ? TBC_DT_F64 : TBC_DT_F32;
		kir_expr *xq = CAST(k, ct, CAST(k, pdt, xl)), *sq = CAST(k, ct, CAST(k, pdt, sl));
		kir_expr *q = narrow(k, pdt, BIN(k, KIR_DIV, xq, sq));
		if (is_int) {
			q = kir_e_unary(k, KIR_ROUND_EVEN, q);
			if (zl) q = BIN(k, KIR_ADD, q, CAST(k, ct, zl));
			return CAST(k, dt, clamp_nan0(k, q, lo, hi));
		}
		double fm = conv_dtype_float_max(dt);
		if (dt == TBC_DT_F4E2M1 && zl) q = BIN(k, KIR_ADD, q, CAST(k, ct, zl));
		bool saturate = tbc_attr_int(op, "saturate", 1) != 0 || dt == TBC_DT_F4E2M1;
		if (!saturate) return kir_e_cast_nosat(k, dt, q);
		kir_expr *c = BIN(k, KIR_MIN, BIN(k, KIR_MAX, q, F(k, ct, -fm)), F(k, ct, fm));
		return CAST(k, dt, kir_e_select(k, kir_e_unary(k, KIR_ISNAN, q), q, c));
	}
	tbc_dtype ct = op->inputs[1]->type.dtype == TBC_DT_F64 || dt == TBC_DT_F64 ? TBC_DT_F64 : TBC_DT_F32;
	bool use_zp = zl && !is_float8(xdt) && xdt != TBC_DT_F4E2M1;
	if (zl && is_float8(xdt) && checks)
		kir_block_add(k, checks,
			      kir_s_error(k, kir_e_cmp(k, KIR_NE, CAST(k, TBC_DT_F32, zl), F(k, TBC_DT_F32, 0.0)),
					  "a float8 zero point must be 0"));
	kir_expr *xd = CAST(k, ct, xl);
	if (use_zp) xd = BIN(k, KIR_SUB, xd, CAST(k, ct, zl));
	return CAST(k, dt, BIN(k, KIR_MUL, xd, CAST(k, ct, sl)));
}

static lower_result lower_qdq(lower_cx *cx, const tbc_op *op, bool quantize) {
	const tbc_value *xv = op->inputs[0], *sv = op->inputs[1], *zv = op->n_inputs > 2 ? op->inputs[2] : NULL;
	const tbc_value *yv = op->outputs[0];
	if (!yv) return LOWER_OK;
	const tbc_type *x = &xv->type;
	tbc_dtype dt = yv->type.dtype;
	if (x->rank < 0) return quant_refuse(cx, op, "x of unknown rank");
	qmap ms, mz = {0};
	if (!qmap_make(cx, op, x, sv, &ms) || (zv && !qmap_make(cx, op, x, zv, &mz))) return LOWER_FAILED;
	double lo = 0, hi = 0;
	bool is_int = quant_int_range(dt, &lo, &hi);
	if (quantize && !is_int && !is_float8(dt) && dt != TBC_DT_F4E2M1)
		return quant_refuse(cx, op, "quantizing to this type");
	int64_t prec = tbc_attr_int(op, "precision", 0);
	if (quantize && prec && !tbc_dtype_is_float((tbc_dtype)prec)) {
		lower_error(cx, op, "precision must be a float type");
		return LOWER_FAILED;
	}

	int ob = lower_result_buf(cx, yv);
	char name[64];
	snprintf(name, sizeof name, "%s", quantize ? "quantize" : "dequantize");
	lk l;
	if (ob < 0 || !lk_begin(&l, cx, name)) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *out = lk_buf(&l, ob), *xb = lk_value(&l, xv), *sb = lk_value(&l, sv), *zb = zv ? lk_value(&l, zv) : NULL;
	tbc_type ts[4];
	const tbc_type *ops[5];
	int n_ops = 0;
	ops[n_ops++] = x;
	qmap_types(x, &ms, &ts[0], &ts[1]);
	qmap_types(x, &mz, &ts[2], &ts[3]);
	if (ms.kind == 1) ops[n_ops++] = &ts[0];
	if (ms.kind == 2) ops[n_ops++] = &ts[1];
	if (zv && mz.kind == 1) ops[n_ops++] = &ts[2];
	if (zv && mz.kind == 2) ops[n_ops++] = &ts[3];
	nest n;
	if (!out || !xb || !sb || (zv && !zb) || !nest_build(&l, &n, &yv->type, n_ops, ops)) return LOWER_FAILED;
	kir_expr *lin = n.linear ? n.linear : I(l.k, 0);
	kir_expr *sidx = qmap_index(&l, &n, x, &ms, &ts[0], &ts[1]);
	kir_expr *zidx = zv ? qmap_index(&l, &n, x, &mz, &ts[2], &ts[3]) : NULL;
	if (!sidx || (zv && !zidx)) return quant_refuse(cx, op, "this blocked layout");
	kir_expr *xl = kir_e_load(k, xb, lin), *sl = kir_e_load(k, sb, sidx);
	kir_expr *zl = zv ? kir_e_load(k, zb, zidx) : NULL;
	kir_expr *v = quant_qdq_value(k, op, xl, sl, zl, &n.body);
	kir_block_add(k, &n.body, kir_s_store(k, out, lin, v));
	kir_stmt *body = nest_finish(&l, &n);
	if (!body) body = n.body.first;
	return done(lk_end(&l, body));
}

/* ---- DynamicQuantizeLinear ----------------------------------------------------
 * Three kernels: the range in parallel chunks (each a partial min and max,
 * 16 lanes at a time), the partials combined with the scale and the zero
 * point, stored in the second and third outputs (or scratch when those are
 * not wanted); then the elementwise quantization.  Every step keeps the
 * interpreter's rule, x replaces the max when x > max (and the min when x
 * < min), starting from 0: NaN never replaces, -0 never replaces the +0
 * every lane starts from, and the max (min) of the partials is the max
 * (min) of all, so the result does not depend on the split. */
#define DQ_CHUNKS 16
#define DQ_LANES 16

static kir_stmt *keep_if(kir_kernel *k, kir_var *v, kir_cmp cmp, kir_expr *x) {
	return kir_s_set(k, v, kir_e_select(k, kir_e_cmp(k, cmp, x, V(k, v)), x, V(k, v)));
}

static lower_result lower_dynamic_quantize(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0];
	const tbc_type *x = &xv->type;
	if (x->dtype != TBC_DT_F32 || x->rank < 0) return quant_refuse(cx, op, "x other than float32 of known rank");
	tbc_type st;
	memset(&st, 0, sizeof st);
	st.dtype = TBC_DT_F32;
	const tbc_value *ysv = op->n_outputs > 1 ? op->outputs[1] : NULL, *yzv = op->n_outputs > 2 ? op->outputs[2] : NULL;
	int sbuf = ysv ? lower_result_buf(cx, ysv) : lower_temp_buf(cx, &st, "tbc.dq_scale");
	st.dtype = TBC_DT_U8;
	int zbuf = yzv ? lower_result_buf(cx, yzv) : lower_temp_buf(cx, &st, "tbc.dq_zero_point");
	tbc_type pt;
	memset(&pt, 0, sizeof pt);
	pt.dtype = TBC_DT_F32, pt.rank = 1, pt.dims[0].size = 2 * DQ_CHUNKS;
	int pbuf = lower_temp_buf(cx, &pt, "tbc.dq_partials");
	if (sbuf < 0 || zbuf < 0 || pbuf < 0) return LOWER_FAILED;
	const tbc_dtype f = TBC_DT_F32;

	/* The partial ranges: chunk c of DQ_CHUNKS, its whole groups of
	 * DQ_LANES in lanes, the rest in lane 0; the lanes combined. */
	lk l;
	if (!lk_begin(&l, cx, "dynamic_quantize_minmax")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	/* contract: no float multiply-add here to fuse; it makes the host run
	 * the chunks one per task (cpu_hooks.c's grain) */
	k->contract = true;
	kir_buffer *xb = lk_value(&l, xv), *pb = lk_buf(&l, pbuf);
	if (!xb || !pb) return LOWER_FAILED;
	kir_expr *numel = I(l.k, 1);
	for (int d = 0; d < x->rank; d++) numel = MUL(l.k, numel, lk_dim(&l, x->dims[d]));
	kir_var *c = kir_var_new(k, "c", KIR_INDEX);
	kir_block cb = {0};
	kir_expr *len = LET(k, &cb, "len", DIV(k, ADD(k, numel, I(k, DQ_CHUNKS - 1)), I(k, DQ_CHUNKS)));
	kir_expr *lo = LET(k, &cb, "lo", MIN(k, MUL(k, V(k, c), len), numel));
	kir_expr *hi = LET(k, &cb, "hi", MIN(k, ADD(k, lo, len), numel));
	kir_expr *whole = LET(k, &cb, "whole", ADD(k, lo, MUL(k, DIV(k, SUB(k, hi, lo), I(k, DQ_LANES)), I(k, DQ_LANES))));
	kir_var *mx[DQ_LANES], *mn[DQ_LANES];
	for (int i = 0; i < DQ_LANES; i++) {
		mx[i] = kir_var_new(k, "maxx", f), mn[i] = kir_var_new(k, "minx", f);
		kir_block_add(k, &cb, kir_s_set(k, mx[i], F(k, f, 0.0)));
		kir_block_add(k, &cb, kir_s_set(k, mn[i], F(k, f, 0.0)));
	}
	kir_var *e = kir_var_new(k, "e", KIR_INDEX), *e2 = kir_var_new(k, "e", KIR_INDEX);
	kir_block lb = {0};
	/* e + DQ_LANES <= numel where the loop runs; the min says so to the
	 * verifier, whose intervals cannot tell (a tensor of fewer elements
	 * than the lanes has no such loop) */
	int64_t nstatic = -1;
	kir_e_const_index(numel, &nstatic);
	kir_expr *e0 = LET(k, &lb, "e0", MAX(k, MIN(k, V(k, e), SUB(k, numel, I(k, DQ_LANES))), I(k, 0)));
	for (int i = 0; i < DQ_LANES; i++) {
		kir_expr *xe = LET(k, &lb, "x", kir_e_load(k, xb, ADD(k, e0, I(k, i))));
		kir_block_add(k, &lb, keep_if(k, mx[i], KIR_GT, xe));
		kir_block_add(k, &lb, keep_if(k, mn[i], KIR_LT, xe));
	}
	if (nstatic < 0 || nstatic >= DQ_LANES)
		kir_block_add(k, &cb, kir_s_for(k, e, lo, whole, DQ_LANES, KIR_LOOP_SEQUENTIAL, lb.first));
	else whole = lo;
	kir_block tb = {0};
	kir_expr *xt = LET(k, &tb, "x", kir_e_load(k, xb, MAX(k, MIN(k, V(k, e2), SUB(k, numel, I(k, 1))), I(k, 0))));
	kir_block_add(k, &tb, keep_if(k, mx[0], KIR_GT, xt));
	kir_block_add(k, &tb, keep_if(k, mn[0], KIR_LT, xt));
	kir_block_add(k, &cb, kir_s_for(k, e2, whole, hi, 1, KIR_LOOP_SEQUENTIAL, tb.first));
	for (int i = 1; i < DQ_LANES; i++) {
		kir_block_add(k, &cb, keep_if(k, mx[0], KIR_GT, V(k, mx[i])));
		kir_block_add(k, &cb, keep_if(k, mn[0], KIR_LT, V(k, mn[i])));
	}
	kir_block_add(k, &cb, kir_s_store(k, pb, MUL(k, V(k, c), I(k, 2)), V(k, mx[0])));
	kir_block_add(k, &cb, kir_s_store(k, pb, ADD(k, MUL(k, V(k, c), I(k, 2)), I(k, 1)), V(k, mn[0])));
	if (!lk_end(&l, kir_s_for(k, c, I(k, 0), I(k, DQ_CHUNKS), 1, KIR_LOOP_PARALLEL, cb.first))) return LOWER_FAILED;

	/* The range, the scale and the zero point. */
	if (!lk_begin(&l, cx, "dynamic_quantize_range")) return LOWER_FAILED;
	k = l.k;
	kir_buffer *sb = lk_buf(&l, sbuf), *zb = lk_buf(&l, zbuf);
	pb = lk_buf(&l, pbuf);
	if (!pb || !sb || !zb) return LOWER_FAILED;
	kir_block blk = {0};
	kir_var *mxv = kir_var_new(k, "maxx", f), *mnv = kir_var_new(k, "minx", f), *cc = kir_var_new(k, "c", KIR_INDEX);
	kir_block_add(k, &blk, kir_s_set(k, mxv, F(l.k, f, 0.0)));
	kir_block_add(k, &blk, kir_s_set(k, mnv, F(l.k, f, 0.0)));
	kir_block pl = {0};
	kir_block_add(k, &pl, keep_if(k, mxv, KIR_GT, kir_e_load(k, pb, MUL(k, V(k, cc), I(k, 2)))));
	kir_block_add(k, &pl, keep_if(k, mnv, KIR_LT, kir_e_load(k, pb, ADD(k, MUL(k, V(k, cc), I(k, 2)), I(k, 1)))));
	kir_block_add(k, &blk, kir_s_for(k, cc, I(l.k, 0), I(l.k, DQ_CHUNKS), 1, KIR_LOOP_SEQUENTIAL, pl.first));
	kir_expr *range = kir_e_select(k, kir_e_cmp(k, KIR_EQ, V(l.k, mxv), V(l.k, mnv)), F(l.k, f, 1.0),
				       BIN(l.k, KIR_SUB, V(l.k, mxv), V(l.k, mnv)));
	kir_expr *scale = LET(l.k, &blk, "scale", BIN(l.k, KIR_DIV, range, F(l.k, f, 255.0)));
	kir_expr *zp = LET(l.k, &blk, "zp", BIN(l.k, KIR_SUB, F(l.k, f, 0.0), BIN(l.k, KIR_DIV, V(l.k, mnv), scale)));
	zp = kir_e_select(k, kir_e_cmp(k, KIR_LT, zp, F(l.k, f, 0.0)), F(l.k, f, 0.0),
			  kir_e_select(k, kir_e_cmp(k, KIR_GT, zp, F(l.k, f, 255.0)), F(l.k, f, 255.0), zp));
	kir_expr *zpi = kir_e_unary(k, KIR_ROUND_EVEN, zp);
	kir_block_add(k, &blk, kir_s_store(k, sb, I(l.k, 0), scale));
	kir_block_add(k, &blk, kir_s_store(k, zb, I(l.k, 0), CAST(l.k, TBC_DT_U8, zpi)));
	if (!lk_end(&l, blk.first)) return LOWER_FAILED;

	/* The quantization. */
	const tbc_value *yv = op->outputs[0];
	if (!yv) return LOWER_OK;
	int ob = lower_result_buf(cx, yv);
	if (ob < 0 || !lk_begin(&l, cx, "dynamic_quantize")) return LOWER_FAILED;
	k = l.k;
	kir_buffer *out = lk_buf(&l, ob);
	xb = lk_value(&l, xv), sb = lk_buf(&l, sbuf), zb = lk_buf(&l, zbuf);
	nest n;
	const tbc_type *ops[1] = {x};
	if (!out || !xb || !sb || !zb || !nest_build(&l, &n, &yv->type, 1, ops)) return LOWER_FAILED;
	kir_expr *lin = n.linear ? n.linear : I(l.k, 0);
	kir_expr *q = kir_e_unary(k, KIR_ROUND_EVEN, BIN(l.k, KIR_DIV, kir_e_load(k, xb, lin), kir_e_load(k, sb, I(l.k, 0))));
	q = BIN(l.k, KIR_ADD, q, CAST(l.k, f, kir_e_load(k, zb, I(l.k, 0))));
	kir_block_add(k, &n.body, kir_s_store(k, out, lin, CAST(l.k, TBC_DT_U8, quant_clamp_nan0(&l, q, 0, 255))));
	kir_stmt *body = nest_finish(&l, &n);
	if (!body) body = n.body.first;
	return done(lk_end(&l, body));
}

/* ---- MatMulInteger / QLinearMatMul ---------------------------------------------
 * A parallel loop over (batch, row); per output element an int32 sum over k
 * of (a - a_zp)(b - b_zp); zero points per tensor, per row of a, per column
 * of b. */

/* Element `at` of a per-tensor or 1-D (size `len`) parameter: the index. */
bool quant_vec_param(lower_cx *cx, const tbc_op *op, const tbc_value *p, int64_t len, const char *what, bool *per) {
	*per = false;
	if (!p) return true;
	if (!quant_static_type(&p->type)) return quant_refuse(cx, op, "a parameter of symbolic shape"), false;
	int64_t nel = static_numel(&p->type);
	if (nel == 1) return true;
	if (p->type.rank == 1 && nel == len) {
		*per = true;
		return true;
	}
	lower_error(cx, op, "%s: this shape of %s has no lowering yet", tbc_ops[op->code].onnx_name, what);
	return false;
}

/* Whether v is a constant of zeros (a zero point that shifts nothing). */
bool quant_zero_const(const tbc_value *v) {
	int64_t z;
	return quant_uniform_const(v, &z) && z == 0;
}

/* Whether integer v is a constant whose elements are all one value, *out
 * (an empty constant: 0). */
bool quant_uniform_const(const tbc_value *v, int64_t *out) {
	if (!v || v->kind != TBC_VALUE_CONST || !v->constant || !tbc_dtype_is_int(v->constant->dtype)) return false;
	const tbc_tensor *t = v->constant;
	int64_t first = t->numel ? tbc_load_i64(t->dtype, t->data, 0) : 0;
	for (int64_t i = 1; i < t->numel; i++)
		if (tbc_load_i64(t->dtype, t->data, (size_t)i) != first) return false;
	*out = first;
	return true;
}

/* v - zp into a new int16 scratch of v's shape, or of shape vt when given
 * (v's elements read as that shape: a convolution's weights as a matrix)
 * (8-bit values: the difference fits); zp per tensor, per row (per &&
 * !per_col) or per column.  Returns the scratch's program buffer, -1 on
 * failure (with a diagnostic). */
int quant_shift_operand(lower_cx *cx, const tbc_op *op, const tbc_value *v, const tbc_type *vt, const tbc_value *zv, bool per,
			bool per_col) {
	const tbc_type *shape = vt ? vt : &v->type;
	tbc_type t = *shape;
	t.dtype = TBC_DT_I16;
	int pb = lower_temp_buf(cx, &t, per_col ? "tbc.qmm_b" : "tbc.qmm_a");
	if (pb < 0) {
		quant_refuse(cx, op, "an operand of this shape");
		return -1;
	}
	lk l;
	if (!lk_begin(&l, cx, "qmm_shift")) return -1;
	kir_buffer *dst = lk_buf(&l, pb), *src = lk_value(&l, v), *zb = lk_value(&l, zv);
	tbc_type zt;
	memset(&zt, 0, sizeof zt);
	zt.dtype = zv->type.dtype;
	if (per && per_col) {
		zt.rank = 1;
		zt.dims[0] = shape->dims[shape->rank - 1];
	} else if (per) {
		zt.rank = 2;
		zt.dims[0] = shape->dims[shape->rank - 2];
		zt.dims[1] = (tbc_dim){.size = 1};
	}
	const tbc_type *ops[2] = {shape, &zt};
	nest n;
	if (!dst || !src || !zb || !nest_build(&l, &n, shape, per ? 2 : 1, ops)) return -1;
	kir_expr *lin = n.linear ? n.linear : I(l.k, 0);
	kir_expr *zi = per ? nest_index(&l, &n, &zt) : I(l.k, 0);
	kir_expr *val = BIN(l.k, KIR_SUB, CAST(l.k, TBC_DT_I16, kir_e_load(l.k, src, lin)),
			    CAST(l.k, TBC_DT_I16, kir_e_load(l.k, zb, zi)));
	kir_block_add(l.k, &n.body, kir_s_store(l.k, dst, lin, val));
	kir_stmt *body = nest_finish(&l, &n);
	if (!body) body = n.body.first;
	return lk_end(&l, body) ? pb : -1;
}

/* The GEMM's batch bases and QLinearMatMul's requantizing epilogue. */
typedef struct qmm_cx {
	int nbatch;
	kir_expr *bdims[TBC_MAX_RANK], *str[2][TBC_MAX_RANK], *ymat;
	kir_buffer *as, *bs, *ys, *yz;
	bool as_row, bs_col, ys_col, yz_col;
	double lo, hi;
	tbc_dtype ydt;
} qmm_cx;

static kir_expr *qmm_base(void *ctx, lk *l, int which, kir_expr *batch) {
	qmm_cx *m = ctx;
	if (which == 2) return MUL(l->k, batch, m->ymat);
	kir_expr *off = I(l->k, 0), *rest = batch;
	for (int d = m->nbatch - 1; d >= 0; d--) {
		kir_expr *c = d == 0 ? rest : MOD(l->k, rest, m->bdims[d]);
		off = ADD(l->k, off, MUL(l->k, c, m->str[which][d]));
		if (d > 0) rest = DIV(l->k, rest, m->bdims[d]);
	}
	return off;
}

/* y = saturate(round_half_even(acc * mult + y_zp)), mult the scales' product
 * and quotient rounded to their types, the rest in f64 (as the interpreter). */
static kir_expr *qmm_epi(void *ctx, lk *l, kir_expr *acc, kir_expr *batch, kir_expr *row, kir_expr *col) {
	qmm_cx *m = ctx;
	kir_kernel *k = l->k;
	tbc_dtype ad = m->as->dtype, bd = m->bs->dtype, yd = m->ys->dtype;
	tbc_dtype ct = ad == TBC_DT_F64 || bd == TBC_DT_F64 || yd == TBC_DT_F64 ? TBC_DT_F64 : TBC_DT_F32;
	kir_expr *as = CAST(l->k, ct, kir_e_load(k, m->as, m->as_row ? row : I(l->k, 0)));
	kir_expr *bs = CAST(l->k, ct, kir_e_load(k, m->bs, m->bs_col ? col : I(l->k, 0)));
	kir_expr *ys = CAST(l->k, ct, kir_e_load(k, m->ys, m->ys_col ? col : I(l->k, 0)));
	kir_expr *mult = narrow(l->k, yd, BIN(l->k, KIR_DIV, narrow(l->k, ad, BIN(l->k, KIR_MUL, as, bs)), ys));
	const tbc_dtype d = TBC_DT_F64;
	kir_expr *r = BIN(l->k, KIR_MUL, CAST(l->k, d, acc), CAST(l->k, d, mult));
	if (m->yz) r = BIN(l->k, KIR_ADD, r, CAST(l->k, d, kir_e_load(k, m->yz, m->yz_col ? col : I(l->k, 0))));
	return CAST(l->k, m->ydt, quant_clamp_nan0(l, kir_e_unary(k, KIR_ROUND_EVEN, r), m->lo, m->hi));
}

/* The type the integer GEMM sums in: the int32 sum of K products of 8-bit
 * operands (16-bit after a zero point's shift) is exact in f32 while
 * K * max|a| * max|b| < 2^24, and in f64 while it is below 2^53 (then also
 * below 2^31: no int32 wraps); a float GEMM is what the CPU multiplies
 * fastest (FMAs of 16 lanes, where int32 products are one vpmulld of 16).
 * Any partial sum is bounded the same way, so the order of the sums
 * changes nothing.  int32 when K is symbolic or too large. */
tbc_dtype quant_exact_ct(tbc_dtype adt, tbc_dtype bdt, bool a_shifted, bool b_shifted, tbc_dim K) {
	double amax = a_shifted ? 255 : adt == TBC_DT_U8 ? 255 : 128, bmax = b_shifted ? 255 : bdt == TBC_DT_U8 ? 255 : 128;
	if (K.sym) return TBC_DT_I32;
	double bound = (double)K.size * amax * bmax;
	if (bound < 16777216.0) return TBC_DT_F32;
	if (bound < 2147483648.0) return TBC_DT_F64;
	return TBC_DT_I32;
}

static lower_result lower_qmatmul(lower_cx *cx, const tbc_op *op, bool qlinear) {
	const tbc_value *av = op->inputs[0], *bv = op->inputs[qlinear ? 3 : 1];
	const tbc_value *azv = op->n_inputs > (qlinear ? 2 : 2) ? op->inputs[2] : NULL;
	const tbc_value *bzv = qlinear ? op->inputs[5] : op->n_inputs > 3 ? op->inputs[3] : NULL;
	const tbc_value *yv = op->outputs[0];
	if (!yv) return LOWER_OK;
	const tbc_type *at = &av->type, *bt = &bv->type, *yt = &yv->type;
	if (at->rank < 1 || bt->rank < 1 || yt->rank < 0) return quant_refuse(cx, op, "operands of unknown rank or rank 0");
	int ra = at->rank, rb = bt->rank;
	tbc_dim M = ra > 1 ? at->dims[ra - 2] : (tbc_dim){.size = 1}, K = at->dims[ra - 1];
	tbc_dim N = rb > 1 ? bt->dims[rb - 1] : (tbc_dim){.size = 1};
	int nbatch = yt->rank - (ra > 1) - (rb > 1);
	if (nbatch < 0) return lower_error(cx, op, "unexpected output rank"), LOWER_FAILED;
	/* Each operand's batch dims must be 1 or the output's. */
	for (int w = 0; w < 2; w++) {
		const tbc_type *t = w ? bt : at;
		int tb = t->rank - 2;
		for (int d = 0; d < tb; d++) {
			tbc_dim td = t->dims[d], od = yt->dims[nbatch - tb + d];
			bool same = td.sym ? od.sym && !strcmp(td.sym, od.sym) : !od.sym && td.size == od.size;
			if (!same && !(!td.sym && td.size == 1)) return quant_refuse(cx, op, "run-time batch broadcasting");
		}
	}
	bool az_row, bz_col, as_row = false, bs_col = false, ys_col = false, yz_col = false;
	const tbc_value *asv = qlinear ? op->inputs[1] : NULL, *bsv = qlinear ? op->inputs[4] : NULL;
	const tbc_value *ysv = qlinear ? op->inputs[6] : NULL, *yzv = qlinear ? op->inputs[7] : NULL;
	/* A symbolic row or column count: per-tensor parameters along it (a
	 * per-row or per-column one is refused by vec_param: its length -1
	 * matches no tensor). */
	int64_t Ml = M.sym ? -1 : M.size, Nl = N.sym ? -1 : N.size;
	if (!quant_vec_param(cx, op, azv, Ml, "a_zero_point", &az_row) || !quant_vec_param(cx, op, bzv, Nl, "b_zero_point", &bz_col))
		return LOWER_FAILED;
	if (qlinear && (!quant_vec_param(cx, op, asv, Ml, "a_scale", &as_row) || !quant_vec_param(cx, op, bsv, Nl, "b_scale", &bs_col) ||
			!quant_vec_param(cx, op, ysv, Nl, "y_scale", &ys_col) || !quant_vec_param(cx, op, yzv, Nl, "y_zero_point", &yz_col)))
		return LOWER_FAILED;
	double lo = 0, hi = 0;
	if (qlinear && !quant_int_range(yt->dtype, &lo, &hi)) return quant_refuse(cx, op, "a non-integer output");

	if (at->dtype != TBC_DT_I8 && at->dtype != TBC_DT_U8) return quant_refuse(cx, op, "an operand other than int8/uint8");
	if (bt->dtype != TBC_DT_I8 && bt->dtype != TBC_DT_U8) return quant_refuse(cx, op, "an operand other than int8/uint8");
	int ob = lower_result_buf(cx, yv);
	/* With a byte dot product (AVX-512 VNNI), 8-bit operands as they are
	 * and B packed (quant_vnni.c) in place of its own layout. */
	bool vnni = rb == 2 && qgemm_vnni_wanted(cx, av, bv);
	int apb = lower_value_buf(cx, av), bpb = vnni ? 0 : lower_value_buf(cx, bv);
	if (ob < 0 || apb < 0 || bpb < 0) return LOWER_FAILED;
	for (int d = 0; d < yt->rank; d++)
		if (!yt->dims[d].sym && yt->dims[d].size == 0) return LOWER_OK;
	/* Else operands with a zero point shifted into int16 scratch first. */
	if (!vnni && azv && !quant_zero_const(azv) && (apb = quant_shift_operand(cx, op, av, NULL, azv, az_row, false)) < 0) return LOWER_FAILED;
	if (!vnni && bzv && !quant_zero_const(bzv) && (bpb = quant_shift_operand(cx, op, bv, NULL, bzv, bz_col, true)) < 0) return LOWER_FAILED;

	lk l;
	if (!lk_begin(&l, cx, qlinear ? "qlinear_matmul" : "matmul_integer")) return LOWER_FAILED;
	gemm_spec s = {.ct = vnni ? TBC_DT_I32 : quant_exact_ct(at->dtype, bt->dtype, azv && !quant_zero_const(azv), bzv && !quant_zero_const(bzv), K)};
	s.a.buf = lk_buf(&l, apb);
	s.b.buf = vnni ? NULL : lk_buf(&l, bpb);
	s.y.buf = lk_buf(&l, ob);
	qmm_cx m;
	memset(&m, 0, sizeof m);
	if (qlinear) {
		m.as = lk_value(&l, asv), m.bs = lk_value(&l, bsv), m.ys = lk_value(&l, ysv);
		m.yz = yzv ? lk_value(&l, yzv) : NULL;
		if (!m.as || !m.bs || !m.ys || (yzv && !m.yz)) return LOWER_FAILED;
		m.as_row = as_row, m.bs_col = bs_col, m.ys_col = ys_col, m.yz_col = yz_col;
		m.lo = lo, m.hi = hi, m.ydt = yt->dtype;
	}
	if (!s.a.buf || (!vnni && !s.b.buf) || !s.y.buf) return LOWER_FAILED;
	kir_expr *Me = lk_dim(&l, M), *Ne = lk_dim(&l, N), *Ke = lk_dim(&l, K);
	s.M = Me, s.N = Ne, s.K = Ke;
	s.a.rs = Ke, s.a.cs = I(l.k, 1);
	s.b.rs = Ne, s.b.cs = I(l.k, 1);
	s.y.rs = Ne, s.y.cs = I(l.k, 1);
	m.nbatch = nbatch;
	m.ymat = MUL(l.k, Me, Ne);
	s.NB = I(l.k, 1);
	kir_expr *str[2] = {MUL(l.k, Me, Ke), MUL(l.k, Ke, Ne)};
	for (int d = nbatch - 1; d >= 0; d--) {
		m.bdims[d] = lk_dim(&l, yt->dims[d]);
		s.NB = MUL(l.k, s.NB, m.bdims[d]);
		for (int w = 0; w < 2; w++) {
			const tbc_type *t = w ? bt : at;
			int od = d - (nbatch - (t->rank - 2));
			m.str[w][d] = I(l.k, 0);
			if (od < 0) continue;
			if (t->dims[od].sym || t->dims[od].size != 1) m.str[w][d] = str[w];
			str[w] = MUL(l.k, str[w], lk_dim(&l, t->dims[od]));
		}
	}
	s.ctx = &m;
	s.base = qmm_base;
	s.epi = qlinear ? qmm_epi : NULL;
	if (vnni) {
		qgemm_vnni q = {.b = bv, .bzv = bzv, .az_row = az_row, .bz_col = bz_col};
		q.az = azv ? lk_value(&l, azv) : NULL;
		q.bz = bzv ? lk_value(&l, bzv) : NULL;
		if ((azv && !q.az) || (bzv && !q.bz)) return LOWER_FAILED;
		return done(lk_end(&l, qgemm_vnni_generate(&l, &s, &q)));
	}
	return done(lk_end(&l, gemm_generate(&l, &s)));
}

/* ---- Entry ------------------------------------------------------------------*/
lower_result lower_family_quant(lower_cx *cx, const tbc_op *op) {
	switch (op->code) {
	case TBC_OP_QuantizeLinear: return lower_qdq(cx, op, true);
	case TBC_OP_DequantizeLinear: return lower_qdq(cx, op, false);
	case TBC_OP_DynamicQuantizeLinear: return lower_dynamic_quantize(cx, op);
	case TBC_OP_MatMulInteger: return lower_qmatmul(cx, op, false);
	case TBC_OP_QLinearMatMul: return lower_qmatmul(cx, op, true);
	case TBC_OP_ConvInteger: return lower_qconv(cx, op, false);
	case TBC_OP_QLinearConv: return lower_qconv(cx, op, true);
	default: return LOWER_NOT_MINE;
	}
}
