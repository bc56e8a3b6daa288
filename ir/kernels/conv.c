/* Convolution: Conv, ConvInteger, QLinearConv and CausalConvWithState.
 *
 *   y[n][m][o] = b[m] + sum over c of m's group, k in the kernel of
 *                x[n][c][o * stride + k * dilation - pad_begin] * w[m][c][k]
 *
 * with x read as zero outside the input.  Every dtype goes through a plain
 * reference loop in double (exact for the int8 products of ConvInteger and
 * QLinearConv: every partial sum stays far below 2^53).  float32 Conv, which
 * is what real networks run, takes a packed GEMM (conv_gemm.c). */
#include <stdio.h>

#include "conv_util.h"

/* ---- Shape rules ----------------------------------------------------------*/

/* Type of a Conv-like result: [N, M, spatial...] from X (input xi) and W
 * (input wi). */
static bool conv_like_shape(tbc_infer *cx, tbc_op *op, int xi, int wi, tbc_dtype out_dt) {
	const tbc_type *x = &op->inputs[xi]->type, *w = &op->inputs[wi]->type;
	tbc_type y;
	memset(&y, 0, sizeof y);
	y.dtype = out_dt;
	int64_t group = tbc_attr_int(op, "group", 1);
	if (group <= 0) return tbc_infer_error(cx, op, "group must be positive, got %lld", (long long)group);
	if (x->rank < 0) {
		y.rank = -1;
		op->outputs[0]->type = y;
		return true;
	}
	if (x->rank < 3) return tbc_infer_error(cx, op, "X must have rank >= 3 (N, C, spatial...), got rank %d", x->rank);
	if (w->rank >= 0 && w->rank != x->rank)
		return tbc_infer_error(cx, op, "W has rank %d but X has rank %d", w->rank, x->rank);
	int nsp = x->rank - 2;
	y.rank = x->rank;
	y.dims[0] = x->dims[0];
	y.dims[1] = w->rank >= 0 ? w->dims[0] : tbc_module_fresh_dim(cx->module);
	if (w->rank >= 0 && !x->dims[1].sym && !w->dims[1].sym && x->dims[1].size != w->dims[1].size * group)
		return tbc_infer_error(cx, op, "X has %lld channels but W expects %lld x group %lld",
				       (long long)x->dims[1].size, (long long)w->dims[1].size, (long long)group);
	if (w->rank >= 0 && !w->dims[0].sym && w->dims[0].size % group)
		return tbc_infer_error(cx, op, "W's %lld output channels do not divide into %lld groups",
				       (long long)w->dims[0].size, (long long)group);
	int64_t kernel[CONV_MAX_SPATIAL];
	bool known = w->rank >= 0;
	for (int i = 0; i < nsp; i++) {
		kernel[i] = known && !w->dims[2 + i].sym ? w->dims[2 + i].size : -1;
		if (kernel[i] < 0) known = false;
	}
	conv_geom g;
	const char *err = conv_geom_read(&g, op, nsp, known ? kernel : NULL, true, false);
	if (err && !known && !tbc_op_attr(op, "kernel_shape")) {
		/* The kernel is not known yet: the spatial dims are not either. */
		for (int i = 0; i < nsp; i++) y.dims[2 + i] = tbc_module_fresh_dim(cx->module);
		op->outputs[0]->type = y;
		return true;
	}
	if (err) return tbc_infer_error(cx, op, "%s", err);
	for (int i = 0; i < nsp; i++) g.in[i] = x->dims[2 + i].sym ? -1 : x->dims[2 + i].size;
	if ((err = conv_geom_resolve(&g))) return tbc_infer_error(cx, op, "%s", err);
	conv_geom_type_dims(cx, &g, x, &y);
	op->outputs[0]->type = y;
	return true;
}

static bool check_bias(tbc_infer *cx, tbc_op *op, int bi, int wi) {
	if (bi >= op->n_inputs || !op->inputs[bi]) return true;
	const tbc_type *b = &op->inputs[bi]->type, *w = &op->inputs[wi]->type;
	if (b->rank >= 0 && b->rank != 1) return tbc_infer_error(cx, op, "B must be 1-D, got rank %d", b->rank);
	if (b->rank == 1 && w->rank >= 1 && !b->dims[0].sym && !w->dims[0].sym && b->dims[0].size != w->dims[0].size)
		return tbc_infer_error(cx, op, "B has %lld values for %lld output channels", (long long)b->dims[0].size,
				       (long long)w->dims[0].size);
	return true;
}

bool tbc_shape_Conv(tbc_infer *cx, tbc_op *op) {
	tbc_dtype dt = op->inputs[0]->type.dtype;
	if (!conv_is_float_dtype(dt)) return tbc_infer_error(cx, op, "Conv takes float tensors, got %s", tbc_dtype_name(dt));
	if (op->inputs[1]->type.dtype != dt)
		return tbc_infer_error(cx, op, "X is %s but W is %s", tbc_dtype_name(dt),
				       tbc_dtype_name(op->inputs[1]->type.dtype));
	return check_bias(cx, op, 2, 1) && conv_like_shape(cx, op, 0, 1, dt);
}

bool tbc_shape_ConvInteger(tbc_infer *cx, tbc_op *op) {
	if (!conv_is_int8_dtype(op->inputs[0]->type.dtype) || !conv_is_int8_dtype(op->inputs[1]->type.dtype))
		return tbc_infer_error(cx, op, "ConvInteger takes int8 or uint8 X and W");
	return conv_like_shape(cx, op, 0, 1, TBC_DT_I32);
}

bool tbc_shape_QLinearConv(tbc_infer *cx, tbc_op *op) {
	if (!conv_is_int8_dtype(op->inputs[0]->type.dtype) || !conv_is_int8_dtype(op->inputs[3]->type.dtype))
		return tbc_infer_error(cx, op, "QLinearConv takes int8 or uint8 x and w");
	tbc_dtype dt = op->inputs[7] ? op->inputs[7]->type.dtype : op->inputs[0]->type.dtype;
	if (!conv_is_int8_dtype(dt)) return tbc_infer_error(cx, op, "y_zero_point must be int8 or uint8");
	if (op->n_inputs > 8 && op->inputs[8] && op->inputs[8]->type.dtype != TBC_DT_I32)
		return tbc_infer_error(cx, op, "B must be int32");
	return check_bias(cx, op, 8, 3) && conv_like_shape(cx, op, 0, 3, dt);
}

/* ---- The reference loop ---------------------------------------------------*/

/* The problem after validation: shapes, groups and geometry. */
typedef struct conv_problem {
	conv_geom g;
	int rank;
	int64_t N, C, M, group;
	int64_t ydims[TBC_MAX_RANK];
} conv_problem;

/* Validates X and W (and B's length) at run time and resolves the geometry. */
static int conv_prepare(tbc_interp *ip, const tbc_op *op, const tbc_tensor *x, const tbc_tensor *w,
			const tbc_tensor *b, conv_problem *p) {
	if (x->rank < 3) return tbc_interp_error(ip, op, "X must have rank >= 3, got %d", x->rank);
	if (w->rank != x->rank) return tbc_interp_error(ip, op, "W has rank %d but X has rank %d", w->rank, x->rank);
	p->rank = x->rank;
	p->N = x->dims[0];
	p->C = x->dims[1];
	p->M = w->dims[0];
	p->group = tbc_attr_int(op, "group", 1);
	if (p->group <= 0 || p->C != w->dims[1] * p->group || p->M % p->group)
		return tbc_interp_error(ip, op, "X has %lld channels, W is %lld x %lld, group %lld: they do not agree",
					(long long)p->C, (long long)p->M, (long long)w->dims[1], (long long)p->group);
	if (b && (b->rank != 1 || b->dims[0] != p->M))
		return tbc_interp_error(ip, op, "B must hold one value per output channel (%lld)", (long long)p->M);
	const char *err = conv_geom_read(&p->g, op, x->rank - 2, w->dims + 2, true, false);
	for (int i = 0; !err && i < p->g.nsp; i++) p->g.in[i] = x->dims[2 + i];
	if (!err) err = conv_geom_resolve(&p->g);
	if (err) return tbc_interp_error(ip, op, "%s", err);
	p->ydims[0] = p->N;
	p->ydims[1] = p->M;
	for (int i = 0; i < p->g.nsp; i++) p->ydims[2 + i] = p->g.out[i];
	return 0;
}

/* y = conv(x, w) + bias, all dense row-major doubles. */
static void conv_reference(const conv_problem *p, const double *x, const double *w, const double *bias, double *y) {
	const conv_geom *g = &p->g;
	int nsp = g->nsp;
	int64_t Cg = p->C / p->group, Mg = p->M / p->group;
	int64_t in_size = conv_prod(0, nsp, g->in), out_size = conv_prod(0, nsp, g->out);
	int64_t k_size = conv_prod(0, nsp, g->kernel);
	for (int64_t n = 0; n < p->N; n++)
		for (int64_t m = 0; m < p->M; m++) {
			const double *xg = x + (n * p->C + (m / Mg) * Cg) * in_size;
			const double *wm = w + m * Cg * k_size;
			double *ym = y + (n * p->M + m) * out_size;
			int64_t o[CONV_MAX_SPATIAL] = {0};
			for (int64_t ol = 0; ol < out_size; ol++, tbc_index_next(nsp, g->out, o)) {
				double acc = bias ? bias[m] : 0.0;
				int64_t k[CONV_MAX_SPATIAL] = {0};
				for (int64_t kl = 0; kl < k_size; kl++, tbc_index_next(nsp, g->kernel, k)) {
					int64_t il = 0;
					bool inside = true;
					for (int d = 0; d < nsp && inside; d++) {
						int64_t i = o[d] * g->stride[d] + k[d] * g->dil[d] - g->pad_begin[d];
						inside = i >= 0 && i < g->in[d];
						il = il * g->in[d] + i;
					}
					if (!inside) continue;
					for (int64_t c = 0; c < Cg; c++) acc += xg[c * in_size + il] * wm[c * k_size + kl];
				}
				ym[ol] = acc;
			}
		}
}

int tbc_interp_Conv(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *w = in[1], *b = op->n_inputs > 2 ? in[2] : NULL;
	conv_problem p;
	if (conv_prepare(ip, op, x, w, b, &p)) return -1;
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, p.rank, p.ydims);
	if (!y) return -1;
	if (x->dtype == TBC_DT_F32 && w->dtype == TBC_DT_F32 && (!b || b->dtype == TBC_DT_F32)) {
		bool oom = false;
		conv_gemm_f32(&p.g, p.N, p.C, p.M, p.group, x->data, w->data, b ? b->data : NULL, y->data, &oom);
		if (oom) {
			tbc_tensor_destroy(y);
			return tbc_interp_error(ip, op, "out of memory");
		}
		out[0] = y;
		return 0;
	}
	double *xd = conv_load_all(x), *wd = conv_load_all(w), *bd = b ? conv_load_all(b) : NULL;
	double *yd = malloc((size_t)(y->numel ? y->numel : 1) * sizeof *yd);
	int rc = 0;
	if (!xd || !wd || (b && !bd) || !yd) {
		rc = tbc_interp_error(ip, op, "out of memory");
	} else {
		conv_reference(&p, xd, wd, bd, yd);
		for (int64_t i = 0; i < y->numel; i++) tbc_set_f64(y, i, yd[i]);
	}
	free(xd), free(wd), free(bd), free(yd);
	if (rc) {
		tbc_tensor_destroy(y);
		return rc;
	}
	out[0] = y;
	return 0;
}

/* ---- Integer convolutions -------------------------------------------------*/

/* x - zero_point (a scalar or one value per tensor). */
static int load_shifted_x(tbc_interp *ip, const tbc_op *op, const tbc_tensor *x, const tbc_tensor *zp, double **out) {
	if (zp && zp->numel != 1) return tbc_interp_error(ip, op, "the zero point of x must be a scalar");
	if (zp && zp->dtype != x->dtype) return tbc_interp_error(ip, op, "x and its zero point differ in type");
	double *v = conv_load_all(x);
	if (!v) return tbc_interp_error(ip, op, "out of memory");
	double z = zp ? tbc_get_f64(zp, 0) : 0.0;
	for (int64_t i = 0; i < x->numel; i++) v[i] -= z;
	*out = v;
	return 0;
}

/* w - zero_point, the zero point a scalar or one per output channel. */
static int load_shifted_w(tbc_interp *ip, const tbc_op *op, const tbc_tensor *w, const tbc_tensor *zp, double **out) {
	int64_t M = w->dims[0], per = M ? w->numel / M : 0;
	if (zp && zp->numel != 1 && (zp->rank != 1 || zp->numel != M))
		return tbc_interp_error(ip, op, "the zero point of w must be a scalar or hold one value per output channel");
	if (zp && zp->dtype != w->dtype) return tbc_interp_error(ip, op, "w and its zero point differ in type");
	double *v = conv_load_all(w);
	if (!v) return tbc_interp_error(ip, op, "out of memory");
	for (int64_t i = 0; zp && i < w->numel; i++) v[i] -= tbc_get_f64(zp, zp->numel == 1 ? 0 : i / per);
	*out = v;
	return 0;
}

int tbc_interp_ConvInteger(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *w = in[1];
	const tbc_tensor *xzp = op->n_inputs > 2 ? in[2] : NULL, *wzp = op->n_inputs > 3 ? in[3] : NULL;
	conv_problem p;
	if (conv_prepare(ip, op, x, w, NULL, &p)) return -1;
	double *xd = NULL, *wd = NULL, *yd = NULL;
	tbc_tensor *y = NULL;
	int rc = load_shifted_x(ip, op, x, xzp, &xd);
	if (!rc) rc = load_shifted_w(ip, op, w, wzp, &wd);
	if (!rc && !(y = tbc_interp_new(ip, op, TBC_DT_I32, p.rank, p.ydims))) rc = -1;
	if (!rc && !(yd = malloc((size_t)(y->numel ? y->numel : 1) * sizeof *yd))) rc = tbc_interp_error(ip, op, "out of memory");
	if (!rc) {
		conv_reference(&p, xd, wd, NULL, yd);
		for (int64_t i = 0; i < y->numel; i++) tbc_set_i64(y, i, (int64_t)yd[i]);
		out[0] = y;
	} else {
		tbc_tensor_destroy(y);
	}
	free(xd), free(wd), free(yd);
	return rc;
}

/* y = saturate(round_half_even(conv(x - x_zp, w - w_zp) + B) * (x_scale * w_scale / y_scale)) + y_zp) */
int tbc_interp_QLinearConv(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *xs = in[1], *xzp = in[2], *w = in[3], *ws = in[4], *wzp = in[5], *ys = in[6],
			 *yzp = in[7], *b = op->n_inputs > 8 ? in[8] : NULL;
	conv_problem p;
	if (conv_prepare(ip, op, x, w, b, &p)) return -1;
	if (xs->numel != 1 || ys->numel != 1) return tbc_interp_error(ip, op, "x_scale and y_scale must be scalars");
	if (ws->numel != 1 && ws->numel != p.M)
		return tbc_interp_error(ip, op, "w_scale must be a scalar or hold one value per output channel");
	if (yzp && yzp->numel != 1) return tbc_interp_error(ip, op, "y_zero_point must be a scalar");
	tbc_dtype ydt = yzp ? yzp->dtype : x->dtype;
	double *xd = NULL, *wd = NULL, *yd = NULL, *bd = NULL;
	tbc_tensor *y = NULL;
	int rc = load_shifted_x(ip, op, x, xzp, &xd);
	if (!rc) rc = load_shifted_w(ip, op, w, wzp, &wd);
	if (!rc && b && !(bd = conv_load_all(b))) rc = tbc_interp_error(ip, op, "out of memory");
	if (!rc && !(y = tbc_interp_new(ip, op, ydt, p.rank, p.ydims))) rc = -1;
	if (!rc && !(yd = malloc((size_t)(y->numel ? y->numel : 1) * sizeof *yd))) rc = tbc_interp_error(ip, op, "out of memory");
	if (!rc) {
		conv_reference(&p, xd, wd, bd, yd);
		double lo = ydt == TBC_DT_I8 ? -128 : 0, hi = ydt == TBC_DT_I8 ? 127 : 255;
		double z = yzp ? tbc_get_f64(yzp, 0) : 0.0;
		int64_t per = conv_prod(0, p.g.nsp, p.g.out);
		for (int64_t i = 0; i < y->numel; i++) {
			int64_t m = (i / per) % p.M;
			/* The requantization multiplier is float32 arithmetic (as in
			 * the reference); the product with the sum is double. */
			float mul = (float)((float)tbc_get_f64(xs, 0) * (float)tbc_get_f64(ws, ws->numel == 1 ? 0 : m)) /
				    (float)tbc_get_f64(ys, 0);
			double r = yd[i] * (double)mul + z;
			r = r < lo ? lo : r > hi ? hi : r;
			tbc_set_f64(y, i, nearbyint(r));
		}
		out[0] = y;
	} else {
		tbc_tensor_destroy(y);
	}
	free(xd), free(wd), free(bd), free(yd);
	return rc;
}

/* ---- CausalConvWithState --------------------------------------------------
 * A depthwise 1-D conv over [past_state (or k-1 zeros), input], with an
 * optional fused SiLU; present_state is the last k-1 steps of that sequence. */

bool tbc_shape_CausalConvWithState(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *w = &op->inputs[1]->type;
	const char *act = conv_attr_str(op, "activation", "none");
	if (strcmp(act, "none") && strcmp(act, "silu") && strcmp(act, "swish"))
		return tbc_infer_error(cx, op, "activation must be none, silu or swish, got '%s'", act);
	if (!conv_is_float_dtype(x->dtype)) return tbc_infer_error(cx, op, "input must be a float tensor");
	for (int i = 1; i < op->n_inputs; i++)
		if (op->inputs[i] && op->inputs[i]->type.dtype != x->dtype)
			return tbc_infer_error(cx, op, "input %d is %s but input is %s", i,
					       tbc_dtype_name(op->inputs[i]->type.dtype), tbc_dtype_name(x->dtype));
	if (x->rank >= 0 && x->rank != 3) return tbc_infer_error(cx, op, "input must have rank 3 (batch, channels, length)");
	if (w->rank >= 0 && w->rank != 3) return tbc_infer_error(cx, op, "weight must have rank 3 (channels, 1, k)");
	if (w->rank == 3 && !w->dims[1].sym && w->dims[1].size != 1) return tbc_infer_error(cx, op, "weight must be (channels, 1, k)");
	if (w->rank == 3 && !w->dims[2].sym && w->dims[2].size < 1) return tbc_infer_error(cx, op, "kernel size must be >= 1");
	const tbc_type *past = op->n_inputs > 3 && op->inputs[3] ? &op->inputs[3]->type : NULL;
	op->outputs[0]->type = *x;
	if (op->n_outputs > 1 && op->outputs[1]) {
		tbc_type s;
		memset(&s, 0, sizeof s);
		s.dtype = x->dtype;
		s.rank = 3;
		s.dims[0] = x->rank == 3 ? x->dims[0] : tbc_module_fresh_dim(cx->module);
		s.dims[1] = x->rank == 3 ? x->dims[1] : tbc_module_fresh_dim(cx->module);
		if (w->rank == 3 && !w->dims[2].sym) s.dims[2] = (tbc_dim){w->dims[2].size - 1, NULL};
		else if (past && past->rank == 3) s.dims[2] = past->dims[2];
		else s.dims[2] = tbc_module_fresh_dim(cx->module);
		op->outputs[1]->type = s;
	}
	return true;
}

int tbc_interp_CausalConvWithState(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *w = in[1];
	const tbc_tensor *b = op->n_inputs > 2 ? in[2] : NULL, *past = op->n_inputs > 3 ? in[3] : NULL;
	if (x->rank != 3 || w->rank != 3) return tbc_interp_error(ip, op, "input and weight must have rank 3");
	int64_t B = x->dims[0], C = x->dims[1], L = x->dims[2], K = w->dims[2];
	if (w->dims[0] != C || w->dims[1] != 1 || K < 1)
		return tbc_interp_error(ip, op, "weight must be (%lld, 1, k) with k >= 1", (long long)C);
	if (b && (b->rank != 1 || b->dims[0] != C)) return tbc_interp_error(ip, op, "bias must hold %lld values", (long long)C);
	if (past && (past->rank != 3 || past->dims[0] != B || past->dims[1] != C || past->dims[2] != K - 1))
		return tbc_interp_error(ip, op, "past_state must be (%lld, %lld, %lld)", (long long)B, (long long)C,
					(long long)(K - 1));
	bool silu = strcmp(conv_attr_str(op, "activation", "none"), "none") != 0;
	int64_t sdims[3] = {B, C, K - 1};
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, 3, x->dims);
	tbc_tensor *state = op->n_outputs > 1 && op->outputs[1] ? tbc_interp_new(ip, op, x->dtype, 3, sdims) : NULL;
	double *seq = malloc((size_t)(L + K) * sizeof *seq);
	if (!y || (op->n_outputs > 1 && op->outputs[1] && !state) || !seq) {
		tbc_tensor_destroy(y);
		tbc_tensor_destroy(state);
		free(seq);
		return seq ? -1 : tbc_interp_error(ip, op, "out of memory");
	}
	for (int64_t n = 0; n < B; n++)
		for (int64_t c = 0; c < C; c++) {
			int64_t row = n * C + c;
			for (int64_t t = 0; t < K - 1; t++) seq[t] = past ? tbc_get_f64(past, row * (K - 1) + t) : 0.0;
			for (int64_t t = 0; t < L; t++) seq[K - 1 + t] = tbc_get_f64(x, row * L + t);
			for (int64_t t = 0; t < L; t++) {
				double acc = b ? tbc_get_f64(b, c) : 0.0;
				for (int64_t k = 0; k < K; k++) acc += seq[t + k] * tbc_get_f64(w, c * K + k);
				tbc_set_f64(y, row * L + t, acc);
				if (silu) {
					/* The conv result is rounded to T before the activation. */
					double v = tbc_get_f64(y, row * L + t);
					tbc_set_f64(y, row * L + t, v / (1.0 + exp(-v)));
				}
			}
			for (int64_t t = 0; state && t < K - 1; t++) tbc_set_f64(state, row * (K - 1) + t, seq[L + t]);
		}
	free(seq);
	out[0] = y;
	if (op->n_outputs > 1) out[1] = state;
	return 0;
}
