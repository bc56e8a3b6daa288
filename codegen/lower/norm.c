/* Normalizations: LayerNormalization, RMSNormalization, BatchNormalization
 * (inference), InstanceNormalization, GroupNormalization, LpNormalization,
 * MeanVarianceNormalization, LRN.
 *
 * One kernel each, over a reduction space (codegen/lower/lower_reduce.h): parallel
 * over the normalized groups, statistics in sequential passes accumulating in
 * f64 (two-pass mean and variance, as the interpreter computes them), then a
 * pass writing the results.  On a device a long normalized group is a
 * work-group's (rs_group: the sums combined by trees in local memory).  The final affine step computes in f32 for f32
 * inputs and in f64 otherwise (narrow floats too, so rounding on store
 * matches the interpreter's double). */
#include <math.h>
#include <string.h>

#include "codegen/lower/lower_reduce.h"
#include "codegen/lower/kir_short.h"
#include "ir/kernels/kernels.h"

#define F64 TBC_DT_F64

static tbc_dtype norm_ct(tbc_dtype dt) { return dt == TBC_DT_F32 ? TBC_DT_F32 : F64; }

static bool want(const tbc_op *op, int i) { return op->n_outputs > i && op->outputs[i]; }

static lower_result refuse(lower_cx *cx, const tbc_op *op, const char *why) {
	lower_error(cx, op, "op %s %s has no lowering yet", tbc_ops[op->code].onnx_name, why);
	return LOWER_FAILED;
}

static bool float_ok(const tbc_op *op) {
	tbc_dtype dt = op->inputs[0]->type.dtype;
	return tbc_dtype_is_float(dt) && tbc_dtype_bits(dt) >= 16 && tbc_dtype_supported(dt) &&
	       op->inputs[0]->type.rank >= 0;
}

typedef struct kb {
	lk l;
	kir_kernel *k;
} kb;


/* Adds mean (when centred) and inv = 1 / sqrt(var + eps) of the reduced
 * dims of x (read at rs_linear) to the point body; in the parallel form
 * (rs_group) each sum is combined across the group. */
static void moments(rspace *s, kir_buffer *xb, bool centred, double eps, kir_expr **mean, kir_expr **inv) {
	kir_kernel *k = s->k;
	kir_expr *n = rs_local(s, "n", kir_e_cast(k, F64, rs_count(s)));
	/* f64 sums of f32 (or narrower) terms: their order changes them far
	 * below f32's rounding, so they may be vectorized (as softmax's). */
	bool reassoc = xb->dtype != F64;
	*mean = NULL;
	if (centred) {
		kir_var *sum = kir_var_new(k, "sum", F64);
		sum->reassoc = reassoc;
		rs_set(s, sum, F(k, F64, 0));
		rs_pass_begin(s);
		rs_set(s, sum, BIN(k, KIR_ADD, kir_e_var(k, sum), LOAD_F64(k, xb, rs_linear(s))));
		rs_pass_end(s);
		rs_group_combine(s, sum, KIR_ADD);
		*mean = rs_local(s, "mean", BIN(k, KIR_DIV, kir_e_var(k, sum), n));
	}
	kir_var *q = kir_var_new(k, "q", F64);
	q->reassoc = reassoc;
	rs_set(s, q, F(k, F64, 0));
	rs_pass_begin(s);
	kir_expr *d = LOAD_F64(k, xb, rs_linear(s));
	if (centred) d = rs_local(s, "d", BIN(k, KIR_SUB, d, *mean));
	rs_set(s, q, BIN(k, KIR_ADD, kir_e_var(k, q), BIN(k, KIR_MUL, d, d)));
	rs_pass_end(s);
	rs_group_combine(s, q, KIR_ADD);
	kir_expr *var = BIN(k, KIR_DIV, kir_e_var(k, q), n);
	*inv = rs_local(s, "inv", BIN(k, KIR_DIV, F(k, F64, 1), kir_e_unary(k, KIR_SQRT, BIN(k, KIR_ADD, var, F(k, F64, eps)))));
}

/* ---- LayerNormalization / RMSNormalization -----------------------------------*/
static lower_result lower_trailing(lower_cx *cx, const tbc_op *op, bool rms) {
	const tbc_value *x = op->inputs[0];
	if (!want(op, 0) && (rms || (!want(op, 1) && !want(op, 2)))) return LOWER_OK;
	if (!float_ok(op)) return refuse(cx, op, "on this dtype");
	int a;
	int r = x->type.rank;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", -1), r, &a)) return refuse(cx, op, "with a bad axis");
	double eps = tbc_attr_float(op, "epsilon", 1e-5);
	tbc_dtype dt = x->type.dtype, ct = norm_ct(dt);
	bool mask[TBC_MAX_RANK] = {0};
	for (int d = a; d < r; d++) mask[d] = true;
	const tbc_value *sc = op->inputs[1], *bi = !rms && op->n_inputs > 2 ? op->inputs[2] : NULL;
	int ob[3] = {-1, -1, -1};
	for (int i = 0; i < (rms ? 1 : 3); i++)
		if (want(op, i) && (ob[i] = lower_result_buf(cx, op->outputs[i])) < 0) return LOWER_FAILED;
	lk l;
	rspace s;
	if (!lk_begin(&l, cx, rms ? "rmsnorm" : "layernorm")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *xb = lk_value(&l, x), *sb = lk_value(&l, sc), *bb = bi ? lk_value(&l, bi) : NULL;
	if (!xb || !sb || (bi && !bb) || !rs_begin_type(&l, &s, &x->type, mask)) return LOWER_FAILED;
	rs_group(&s); /* devices: a work-group per long row */
	kir_expr *mean, *inv;
	moments(&s, xb, !rms, eps, &mean, &inv);
	if (want(op, 0)) {
		kir_expr *m = mean ? rs_local(&s, "m", kir_e_cast(k, ct, mean)) : NULL;
		kir_expr *iv = rs_local(&s, "iv", kir_e_cast(k, ct, inv));
		kir_buffer *yb = lk_buf(&l, ob[0]);
		rs_pass_begin(&s);
		kir_expr *idx = rs_local(&s, "e", rs_linear(&s));
		kir_expr *v = kir_e_cast(k, ct, kir_e_load(k, xb, idx));
		if (m) v = BIN(k, KIR_SUB, v, m);
		v = BIN(k, KIR_MUL, BIN(k, KIR_MUL, v, iv), kir_e_cast(k, ct, kir_e_load(k, sb, rs_index(&s, &sc->type))));
		if (bb) v = BIN(k, KIR_ADD, v, kir_e_cast(k, ct, kir_e_load(k, bb, rs_index(&s, &bi->type))));
		kir_block_add(k, &s.inner, kir_s_store(k, yb, idx, kir_e_cast(k, dt, v)));
		rs_pass_end(&s);
	}
	for (int i = 1; i < 3; i++) {
		if (ob[i] < 0) continue;
		kir_buffer *b = lk_buf(&l, ob[i]);
		kir_expr *v = i == 1 ? mean : inv;
		rs_store(&s, b, rs_out_linear(&s), kir_e_cast(k, b->dtype, v));
	}
	return lk_end(&l, rs_finish(&s)) ? LOWER_OK : LOWER_FAILED;
}

/* ---- BatchNormalization (training) -----------------------------------------------
 * As the interpreter: per channel, the batch mean and the population
 * variance over N and the spatial dims (two passes, f64), the running
 * statistics mean * momentum + batch * (1 - momentum), and
 * y = scale * (x - mean) * inv + bias with everything in f64 (the
 * interpreter's order and precision).  One kernel, parallel over channels;
 * the passes are sequential loops over (n, spatial), the output pass's inner
 * loop a vector loop. */
static lower_result lower_batchnorm_training(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0];
	if (!float_ok(op) || x->type.rank < 2) return refuse(cx, op, "on this input");
	for (int i = 1; i < 5; i++) {
		const tbc_type *t = &op->inputs[i]->type;
		if (!tbc_dtype_supported(t->dtype) || t->rank != 1 || !tbc_dim_eq(t->dims[0], x->type.dims[1]))
			return refuse(cx, op, "in training mode with these parameters");
	}
	if (!want(op, 0) && !want(op, 1) && !want(op, 2)) return LOWER_OK;
	double eps = tbc_attr_float(op, "epsilon", 1e-5), mom = tbc_attr_float(op, "momentum", 0.9);
	tbc_dtype dt = x->type.dtype;
	int ob[3] = {-1, -1, -1};
	for (int i = 0; i < 3; i++)
		if (want(op, i) && (ob[i] = lower_result_buf(cx, op->outputs[i])) < 0) return LOWER_FAILED;
	lk l;
	if (!lk_begin(&l, cx, "batchnorm_train")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *xb = lk_value(&l, x), *p[5], *o[3] = {NULL, NULL, NULL};
	if (!xb) return LOWER_FAILED;
	for (int i = 1; i < 5; i++)
		if (!(p[i] = lk_value(&l, op->inputs[i]))) return LOWER_FAILED;
	for (int i = 0; i < 3; i++)
		if (ob[i] >= 0 && !(o[i] = lk_buf(&l, ob[i]))) return LOWER_FAILED;
	kir_expr *N = lk_dim(&l, x->type.dims[0]), *C = lk_dim(&l, x->type.dims[1]), *S = kir_e_index(k, 1);
	for (int d = 2; d < x->type.rank; d++) S = kir_e_mul(k, S, lk_dim(&l, x->type.dims[d]));
	kir_var *cv = kir_var_new(k, "c", KIR_INDEX);
	kir_expr *c = kir_e_var(k, cv);
	kir_block point = {0};
	kir_var *cnt = kir_var_new(k, "cnt", F64);
	kir_block_add(k, &point, kir_s_set(k, cnt, kir_e_cast(k, F64, kir_e_mul(k, N, S))));
	/* A pass over (b, i) of channel c: body(e) with e the element's index. */
	kir_var *bv[3], *iv[3];
	kir_expr *e[3];
	for (int j = 0; j < 3; j++) {
		bv[j] = kir_var_new(k, "b", KIR_INDEX);
		iv[j] = kir_var_new(k, "i", KIR_INDEX);
		e[j] = kir_e_add(k, kir_e_mul(k, kir_e_add(k, kir_e_mul(k, kir_e_var(k, bv[j]), C), c), S), kir_e_var(k, iv[j]));
	}
#define PASS(j, stmts, kind)                                                                                     \
	kir_s_for(k, bv[j], kir_e_index(k, 0), N, 1, KIR_LOOP_SEQUENTIAL,                                        \
		  kir_s_for(k, iv[j], kir_e_index(k, 0), S, 1, kind, stmts))
	kir_var *sum = kir_var_new(k, "sum", F64), *q = kir_var_new(k, "q", F64);
	sum->reassoc = q->reassoc = dt != F64; /* as moments' */
	kir_block_add(k, &point, kir_s_set(k, sum, F(k, F64, 0)));
	kir_block_add(k, &point, PASS(0, kir_s_set(k, sum, BIN(k, KIR_ADD, kir_e_var(k, sum), LOAD_F64(k, xb, e[0]))),
				      KIR_LOOP_SEQUENTIAL));
	kir_var *mean = kir_var_new(k, "mean", F64);
	kir_block_add(k, &point, kir_s_set(k, mean, BIN(k, KIR_DIV, kir_e_var(k, sum), kir_e_var(k, cnt))));
	kir_block_add(k, &point, kir_s_set(k, q, F(k, F64, 0)));
	kir_expr *d = BIN(k, KIR_SUB, LOAD_F64(k, xb, e[1]), kir_e_var(k, mean));
	kir_var *dv = kir_var_new(k, "d", F64);
	kir_block qb = {0};
	kir_block_add(k, &qb, kir_s_set(k, dv, d));
	kir_block_add(k, &qb, kir_s_set(k, q, BIN(k, KIR_ADD, kir_e_var(k, q), BIN(k, KIR_MUL, kir_e_var(k, dv), kir_e_var(k, dv)))));
	kir_block_add(k, &point, PASS(1, qb.first, KIR_LOOP_SEQUENTIAL));
	kir_var *var = kir_var_new(k, "var", F64);
	kir_block_add(k, &point, kir_s_set(k, var, BIN(k, KIR_DIV, kir_e_var(k, q), kir_e_var(k, cnt))));
	kir_expr *keep = F(k, F64, mom), *take = F(k, F64, 1 - mom);
	for (int i = 1; i < 3; i++) {
		if (!o[i]) continue;
		kir_expr *run = BIN(k, KIR_ADD, BIN(k, KIR_MUL, LOAD_F64(k, p[i + 2], c), keep),
				  BIN(k, KIR_MUL, kir_e_var(k, i == 1 ? mean : var), take));
		kir_block_add(k, &point, kir_s_store(k, o[i], c, kir_e_cast(k, o[i]->dtype, run)));
	}
	if (o[0]) {
		kir_var *sc = kir_var_new(k, "scale", F64), *bi = kir_var_new(k, "bias", F64), *inv = kir_var_new(k, "inv", F64);
		kir_block_add(k, &point, kir_s_set(k, sc, LOAD_F64(k, p[1], c)));
		kir_block_add(k, &point, kir_s_set(k, bi, LOAD_F64(k, p[2], c)));
		kir_block_add(k, &point, kir_s_set(k, inv, BIN(k, KIR_DIV, F(k, F64, 1), kir_e_unary(k, KIR_SQRT, BIN(k, KIR_ADD, kir_e_var(k, var), F(k, F64, eps))))));
		kir_expr *v = BIN(k, KIR_MUL, kir_e_var(k, sc), BIN(k, KIR_SUB, LOAD_F64(k, xb, e[2]), kir_e_var(k, mean)));
		v = BIN(k, KIR_ADD, BIN(k, KIR_MUL, v, kir_e_var(k, inv)), kir_e_var(k, bi));
		kir_block_add(k, &point, PASS(2, kir_s_store(k, o[0], e[2], kir_e_cast(k, dt, v)), KIR_LOOP_VECTOR));
	}
#undef PASS
	return lk_end(&l, kir_s_for(k, cv, kir_e_index(k, 0), C, 1, KIR_LOOP_PARALLEL, point.first)) ? LOWER_OK
												     : LOWER_FAILED;
}

/* ---- BatchNormalization (inference) ---------------------------------------------
 * Per channel scalars once, then a vector loop over the spatial dims:
 * for nc parallel { c = nc % C; ...; for s vector { y = sc * (x - mean) * inv + b } } */
static lower_result lower_batchnorm(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0];
	if (tbc_attr_int(op, "training_mode", 0) != 0) return lower_batchnorm_training(cx, op);
	if (!float_ok(op) || x->type.rank < 2) return refuse(cx, op, "on this input");
	for (int i = 1; i < 5; i++)
		if (!tbc_dtype_is_float(op->inputs[i]->type.dtype) || tbc_dtype_bits(op->inputs[i]->type.dtype) < 16)
			return refuse(cx, op, "with these parameter dtypes");
	double eps = tbc_attr_float(op, "epsilon", 1e-5);
	tbc_dtype dt = x->type.dtype, ct = norm_ct(dt);
	if (want(op, 0)) {
		int ob = lower_result_buf(cx, op->outputs[0]);
		lk l;
		if (ob < 0 || !lk_begin(&l, cx, "batchnorm")) return LOWER_FAILED;
		kir_kernel *k = l.k;
		kir_buffer *yb = lk_buf(&l, ob), *xb = lk_value(&l, x), *p[5];
		for (int i = 1; i < 5; i++)
			if (!(p[i] = lk_value(&l, op->inputs[i]))) return LOWER_FAILED;
		if (!yb || !xb) return LOWER_FAILED;
		kir_expr *C = lk_dim(&l, x->type.dims[1]), *NC = kir_e_mul(k, lk_dim(&l, x->type.dims[0]), C);
		kir_expr *S = kir_e_index(k, 1);
		for (int d = 2; d < x->type.rank; d++) S = kir_e_mul(k, S, lk_dim(&l, x->type.dims[d]));
		kir_var *nc = kir_var_new(k, "nc", KIR_INDEX), *sv = kir_var_new(k, "s", KIR_INDEX);
		kir_block outer = {0}, inner = {0};
		kir_expr *c = kir_e_binary(k, KIR_FLOORMOD, kir_e_var(k, nc), C);
		kir_var *vc = kir_var_new(k, "c", KIR_INDEX);
		kir_block_add(k, &outer, kir_s_set(k, vc, c));
		c = kir_e_var(k, vc);
		const char *names[5] = {NULL, "scale", "bias", "mean", "var"};
		kir_expr *pv[5];
		for (int i = 1; i < 5; i++) {
			kir_var *v = kir_var_new(k, names[i], F64);
			kir_block_add(k, &outer, kir_s_set(k, v, LOAD_F64(k, p[i], c)));
			pv[i] = kir_e_var(k, v);
		}
		kir_expr *inv = BIN(k, KIR_DIV, F(k, F64, 1), kir_e_unary(k, KIR_SQRT, BIN(k, KIR_ADD, pv[4], F(k, F64, eps))));
		kir_var *mul = kir_var_new(k, "mul", ct), *mean = kir_var_new(k, "m", ct), *bias = kir_var_new(k, "b", ct);
		kir_block_add(k, &outer, kir_s_set(k, mul, kir_e_cast(k, ct, BIN(k, KIR_MUL, pv[1], inv))));
		kir_block_add(k, &outer, kir_s_set(k, mean, kir_e_cast(k, ct, pv[3])));
		kir_block_add(k, &outer, kir_s_set(k, bias, kir_e_cast(k, ct, pv[2])));
		kir_expr *idx = kir_e_add(k, kir_e_mul(k, kir_e_var(k, nc), S), kir_e_var(k, sv));
		kir_expr *v = BIN(k, KIR_SUB, kir_e_cast(k, ct, kir_e_load(k, xb, idx)), kir_e_var(k, mean));
		v = BIN(k, KIR_ADD, BIN(k, KIR_MUL, v, kir_e_var(k, mul)), kir_e_var(k, bias));
		kir_block_add(k, &inner, kir_s_store(k, yb, idx, kir_e_cast(k, dt, v)));
		kir_block_add(k, &outer, kir_s_for(k, sv, kir_e_index(k, 0), S, 1, KIR_LOOP_VECTOR, inner.first));
		if (!lk_end(&l, kir_s_for(k, nc, kir_e_index(k, 0), NC, 1, KIR_LOOP_PARALLEL, outer.first)))
			return LOWER_FAILED;
	}
	/* Inference: the running statistics pass through. */
	for (int i = 1; i < 3; i++) {
		if (!want(op, i)) continue;
		int dst = lower_result_buf(cx, op->outputs[i]), src = lower_value_buf(cx, op->inputs[i + 2]);
		if (dst < 0 || src < 0 || !lower_copy(cx, dst, src)) return LOWER_FAILED;
	}
	return LOWER_OK;
}

/* ---- InstanceNormalization / GroupNormalization -----------------------------------
 * X viewed as [N, G, C/G, S]: statistics over the last two dims. */
static lower_result lower_channel_norm(lower_cx *cx, const tbc_op *op, int64_t groups) {
	const tbc_value *x = op->inputs[0];
	if (!want(op, 0)) return LOWER_OK;
	if (!float_ok(op) || x->type.rank < 2) return refuse(cx, op, "on this input");
	double eps = tbc_attr_float(op, "epsilon", 1e-5);
	tbc_dtype dt = x->type.dtype, ct = norm_ct(dt);
	tbc_dim cd = x->type.dims[1];
	if (groups && (cd.sym || groups <= 0 || cd.size % groups)) return refuse(cx, op, "with these groups");
	/* Scale and bias: per channel, or per group (GroupNormalization-18). */
	bool per_group[3] = {false, false, false};
	for (int i = 1; i < 3; i++) {
		const tbc_type *t = &op->inputs[i]->type;
		if (t->rank != 1) return refuse(cx, op, "with scale/bias of this shape");
		if (tbc_dim_eq(t->dims[0], cd)) continue;
		if (groups && !t->dims[0].sym && t->dims[0].size == groups) per_group[i] = true;
		else return refuse(cx, op, "with scale/bias of this shape");
	}
	int ob = lower_result_buf(cx, op->outputs[0]);
	lk l;
	rspace s;
	if (ob < 0 || !lk_begin(&l, cx, groups ? "groupnorm" : "instancenorm")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *yb = lk_buf(&l, ob), *xb = lk_value(&l, x), *sb = lk_value(&l, op->inputs[1]),
		   *bb = lk_value(&l, op->inputs[2]);
	if (!yb || !xb || !sb || !bb) return LOWER_FAILED;
	kir_expr *sizes[4];
	sizes[0] = lk_dim(&l, x->type.dims[0]);
	sizes[1] = groups ? kir_e_index(k, groups) : lk_dim(&l, cd);
	sizes[2] = groups ? kir_e_index(k, cd.size / groups) : kir_e_index(k, 1);
	sizes[3] = kir_e_index(k, 1);
	for (int d = 2; d < x->type.rank; d++) sizes[3] = kir_e_mul(k, sizes[3], lk_dim(&l, x->type.dims[d]));
	bool mask[4] = {false, false, true, true};
	if (!rs_begin_sizes(&l, &s, 4, sizes, mask)) return LOWER_FAILED;
	rs_group(&s); /* devices: a work-group per (image, group) */
	kir_expr *mean, *inv;
	moments(&s, xb, true, eps, &mean, &inv);
	kir_expr *m = rs_local(&s, "m", kir_e_cast(k, ct, mean)), *iv = rs_local(&s, "iv", kir_e_cast(k, ct, inv));
	rs_pass_begin(&s);
	kir_expr *g = s.cur[1] ? s.cur[1] : kir_e_index(k, 0);
	kir_expr *ch = kir_e_add(k, kir_e_mul(k, g, sizes[2]), s.cur[2]);
	kir_expr *idx = rs_local(&s, "e", rs_linear(&s));
	kir_expr *v = BIN(k, KIR_MUL, BIN(k, KIR_SUB, kir_e_cast(k, ct, kir_e_load(k, xb, idx)), m), iv);
	v = BIN(k, KIR_MUL, v, kir_e_cast(k, ct, kir_e_load(k, sb, per_group[1] ? g : ch)));
	v = BIN(k, KIR_ADD, v, kir_e_cast(k, ct, kir_e_load(k, bb, per_group[2] ? g : ch)));
	kir_block_add(k, &s.inner, kir_s_store(k, yb, idx, kir_e_cast(k, dt, v)));
	rs_pass_end(&s);
	return lk_end(&l, rs_finish(&s)) ? LOWER_OK : LOWER_FAILED;
}

/* ---- LpNormalization / MeanVarianceNormalization ----------------------------------*/
static lower_result lower_lp(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0];
	if (!want(op, 0)) return LOWER_OK;
	int64_t p = tbc_attr_int(op, "p", 2);
	int a;
	if (!float_ok(op) || (p != 1 && p != 2) || !tbc_norm_axis(tbc_attr_int(op, "axis", -1), x->type.rank, &a))
		return refuse(cx, op, "with these attributes or dtype");
	tbc_dtype dt = x->type.dtype, ct = norm_ct(dt);
	bool mask[TBC_MAX_RANK] = {0};
	mask[a] = true;
	int ob = lower_result_buf(cx, op->outputs[0]);
	lk l;
	rspace s;
	if (ob < 0 || !lk_begin(&l, cx, "lpnorm")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *yb = lk_buf(&l, ob), *xb = lk_value(&l, x);
	if (!yb || !xb || !rs_begin_type(&l, &s, &x->type, mask)) return LOWER_FAILED;
	rs_group(&s);
	kir_var *acc = kir_var_new(k, "norm", F64);
	rs_set(&s, acc, F(k, F64, 0));
	rs_pass_begin(&s);
	kir_expr *v = LOAD_F64(k, xb, rs_linear(&s));
	rs_set(&s, acc, BIN(k, KIR_ADD, kir_e_var(k, acc), p == 1 ? kir_e_unary(k, KIR_ABS, v) : BIN(k, KIR_MUL, v, v)));
	rs_pass_end(&s);
	rs_group_combine(&s, acc, KIR_ADD);
	kir_expr *norm = kir_e_var(k, acc);
	if (p == 2) norm = kir_e_unary(k, KIR_SQRT, norm);
	norm = rs_local(&s, "n", kir_e_cast(k, ct, norm));
	kir_expr *zero = rs_local(&s, "z", kir_e_cmp(k, KIR_EQ, norm, kir_e_float(k, ct, 0)));
	rs_pass_begin(&s);
	kir_expr *idx = rs_local(&s, "e", rs_linear(&s));
	kir_expr *y = kir_e_select(k, zero, kir_e_float(k, ct, 0), BIN(k, KIR_DIV, kir_e_cast(k, ct, kir_e_load(k, xb, idx)), norm));
	kir_block_add(k, &s.inner, kir_s_store(k, yb, idx, kir_e_cast(k, dt, y)));
	rs_pass_end(&s);
	return lk_end(&l, rs_finish(&s)) ? LOWER_OK : LOWER_FAILED;
}

static lower_result lower_mvn(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0];
	if (!want(op, 0)) return LOWER_OK;
	if (!float_ok(op)) return refuse(cx, op, "on this dtype");
	static const int64_t dflt[] = {0, 2, 3};
	const int64_t *ax;
	int n = tbc_attr_ints(op, "axes", &ax);
	if (n < 0) ax = dflt, n = 3;
	bool mask[TBC_MAX_RANK] = {0};
	for (int i = 0; i < n; i++) {
		int a;
		if (!tbc_norm_axis(ax[i], x->type.rank, &a)) return refuse(cx, op, "with a bad axis");
		mask[a] = true;
	}
	tbc_dtype dt = x->type.dtype, ct = norm_ct(dt);
	int ob = lower_result_buf(cx, op->outputs[0]);
	lk l;
	rspace s;
	if (ob < 0 || !lk_begin(&l, cx, "mvn")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *yb = lk_buf(&l, ob), *xb = lk_value(&l, x);
	if (!yb || !xb || !rs_begin_type(&l, &s, &x->type, mask)) return LOWER_FAILED;
	rs_group(&s);
	kir_expr *mean, *inv;
	moments(&s, xb, true, 0, &mean, &inv);
	/* (x - mean) / (sqrt(var) + 1e-9): inv is 1 / sqrt(var) here. */
	kir_expr *den = rs_local(&s, "den", kir_e_cast(k, ct, BIN(k, KIR_ADD, BIN(k, KIR_DIV, F(k, F64, 1), inv), F(k, F64, 1e-9))));
	kir_expr *m = rs_local(&s, "m", kir_e_cast(k, ct, mean));
	rs_pass_begin(&s);
	kir_expr *idx = rs_local(&s, "e", rs_linear(&s));
	kir_expr *y = BIN(k, KIR_DIV, BIN(k, KIR_SUB, kir_e_cast(k, ct, kir_e_load(k, xb, idx)), m), den);
	kir_block_add(k, &s.inner, kir_s_store(k, yb, idx, kir_e_cast(k, dt, y)));
	rs_pass_end(&s);
	return lk_end(&l, rs_finish(&s)) ? LOWER_OK : LOWER_FAILED;
}

/* ---- LRN ----------------------------------------------------------------------------
 * y = x / (bias + alpha / size * sum of squares over the channel window)^beta, in f64. */
static lower_result lower_lrn(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0];
	if (!want(op, 0)) return LOWER_OK;
	int64_t size = tbc_attr_int(op, "size", 0);
	double alpha = tbc_attr_float(op, "alpha", 1e-4), beta = tbc_attr_float(op, "beta", 0.75),
	       bias = tbc_attr_float(op, "bias", 1.0);
	if (!float_ok(op) || size <= 0 || x->type.rank < 2) return refuse(cx, op, "with these attributes or input");
	tbc_dtype dt = x->type.dtype;
	int ob = lower_result_buf(cx, op->outputs[0]);
	lk l;
	rspace s;
	if (ob < 0 || !lk_begin(&l, cx, "lrn")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *yb = lk_buf(&l, ob), *xb = lk_value(&l, x);
	if (!yb || !xb) return LOWER_FAILED;
	kir_expr *sizes[3] = {lk_dim(&l, x->type.dims[0]), lk_dim(&l, x->type.dims[1]), kir_e_index(k, 1)};
	for (int d = 2; d < x->type.rank; d++) sizes[2] = kir_e_mul(k, sizes[2], lk_dim(&l, x->type.dims[d]));
	bool mask[3] = {false, false, false};
	if (!rs_begin_sizes(&l, &s, 3, sizes, mask)) return LOWER_FAILED;
	kir_expr *zero = kir_e_index(k, 0);
	kir_expr *n = s.cur[0] ? s.cur[0] : zero, *c = s.cur[1] ? s.cur[1] : zero, *sp = s.cur[2] ? s.cur[2] : zero;
	int64_t before = (size - 1) / 2, after = size / 2;
	kir_expr *lo = BIN(k, KIR_MAX, zero, BIN(k, KIR_SUB, c, kir_e_index(k, before)));
	kir_expr *hi = BIN(k, KIR_MIN, sizes[1], kir_e_add(k, c, kir_e_index(k, after + 1)));
	kir_var *sq = kir_var_new(k, "sq", F64), *j = kir_var_new(k, "w", KIR_INDEX);
	rs_set(&s, sq, F(k, F64, 0));
	kir_expr *at = kir_e_add(k, kir_e_mul(k, kir_e_add(k, kir_e_mul(k, n, sizes[1]), kir_e_var(k, j)), sizes[2]), sp);
	kir_expr *v = LOAD_F64(k, xb, at);
	kir_stmt *upd = kir_s_set(k, sq, BIN(k, KIR_ADD, kir_e_var(k, sq), BIN(k, KIR_MUL, v, v)));
	kir_block_add(k, &s.point, kir_s_for(k, j, lo, hi, 1, KIR_LOOP_SEQUENTIAL, upd));
	s.point_has_loops = true;
	kir_expr *idx = rs_linear(&s);
	kir_expr *den = BIN(k, KIR_POW, BIN(k, KIR_ADD, F(k, F64, bias), BIN(k, KIR_MUL, F(k, F64, alpha / (double)size), kir_e_var(k, sq))),
			  F(k, F64, beta));
	kir_block_add(k, &s.point, kir_s_store(k, yb, idx, kir_e_cast(k, dt, BIN(k, KIR_DIV, LOAD_F64(k, xb, idx), den))));
	return lk_end(&l, rs_finish(&s)) ? LOWER_OK : LOWER_FAILED;
}

lower_result lower_family_norm(lower_cx *cx, const tbc_op *op) {
	switch (op->code) {
	case TBC_OP_LayerNormalization: return lower_trailing(cx, op, false);
	case TBC_OP_RMSNormalization: return lower_trailing(cx, op, true);
	case TBC_OP_BatchNormalization: return lower_batchnorm(cx, op);
	case TBC_OP_InstanceNormalization: return lower_channel_norm(cx, op, 0);
	case TBC_OP_GroupNormalization: {
		int64_t g = tbc_attr_int(op, "num_groups", 0);
		if (g <= 0) return refuse(cx, op, "without num_groups");
		return lower_channel_norm(cx, op, g);
	}
	case TBC_OP_LpNormalization: return lower_lp(cx, op);
	case TBC_OP_MeanVarianceNormalization: return lower_mvn(cx, op);
	case TBC_OP_LRN: return lower_lrn(cx, op);
	default: return LOWER_NOT_MINE;
	}
}
