/* The normalizations: Batch, Layer, Group, Instance, RMS and Lp
 * normalization, LRN and MeanVarianceNormalization.  Statistics are computed
 * in double, two-pass (mean, then the mean squared deviation), whatever the
 * input's dtype; results round on store.  Layer, RMS, Instance and Group
 * normalization all normalize contiguous blocks of the row-major input, so
 * they share block_moments(). */
#include "reduce_common.h"

/* Mean and population variance of x[start .. start+n). */
static void block_moments(const tbc_tensor *x, int64_t start, int64_t n, double *mean, double *var) {
	double s = 0, q = 0;
	for (int64_t i = 0; i < n; i++) s += tbc_get_f64(x, start + i);
	*mean = n ? s / (double)n : NAN;
	for (int64_t i = 0; i < n; i++) {
		double d = tbc_get_f64(x, start + i) - *mean;
		q += d * d;
	}
	*var = n ? q / (double)n : NAN;
}

static bool want(const tbc_op *op, int i) { return op->n_outputs > i && op->outputs[i]; }

/* The float dtype named by stash_type (default float32). */
static bool stash_dtype(const tbc_op *op, tbc_dtype *dt) {
	int64_t s = tbc_attr_int(op, "stash_type", TBC_DT_F32);
	if (s <= 0 || s >= TBC_DT_COUNT || !tbc_dtype_is_float((tbc_dtype)s)) return false;
	*dt = (tbc_dtype)s;
	return true;
}

static bool need_float(tbc_infer *cx, const tbc_op *op) {
	tbc_dtype dt = op->inputs[0]->type.dtype;
	if (!tbc_dtype_is_float(dt)) return tbc_infer_error(cx, op, "input must be a float tensor, not %s", tbc_dtype_name(dt));
	return true;
}

/* ---- BatchNormalization -------------------------------------------------- */

bool tbc_shape_BatchNormalization(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type;
	if (!need_float(cx, op)) return false;
	if (x->rank >= 0 && x->rank < 2) return tbc_infer_error(cx, op, "X must have rank 2 or more (N, C, ...), not %d", x->rank);
	for (int i = 1; i < 5; i++) {
		const tbc_type *t = &op->inputs[i]->type;
		if (t->rank >= 0 && t->rank != 1) return tbc_infer_error(cx, op, "input %d must be 1-D, not rank %d", i, t->rank);
		if (t->rank == 1 && x->rank >= 2 && !t->dims[0].sym && !x->dims[1].sym && t->dims[0].size != x->dims[1].size)
			return tbc_infer_error(cx, op, "input %d has %lld elements for %lld channels", i,
					       (long long)t->dims[0].size, (long long)x->dims[1].size);
	}
	op->outputs[0]->type = *x;
	if (want(op, 1)) op->outputs[1]->type = op->inputs[3]->type;
	if (want(op, 2)) op->outputs[2]->type = op->inputs[4]->type;
	return true;
}

int tbc_interp_BatchNormalization(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	double eps = tbc_attr_float(op, "epsilon", 1e-5), mom = tbc_attr_float(op, "momentum", 0.9);
	bool training = tbc_attr_int(op, "training_mode", 0) != 0;
	if (x->rank < 2) return tbc_interp_error(ip, op, "X must have rank 2 or more");
	int64_t n = x->dims[0], c = x->dims[1], s = x->numel / (n * c != 0 ? n * c : 1);
	for (int i = 1; i < 5; i++)
		if (in[i]->numel != c) return tbc_interp_error(ip, op, "input %d has %lld elements for %lld channels", i, (long long)in[i]->numel, (long long)c);
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, x->dims);
	tbc_tensor *rm = y && want(op, 1) ? tbc_interp_new(ip, op, in[3]->dtype, 1, &c) : NULL;
	tbc_tensor *rv = y && want(op, 2) ? tbc_interp_new(ip, op, in[4]->dtype, 1, &c) : NULL;
	if (!y || (want(op, 1) && !rm) || (want(op, 2) && !rv)) {
		tbc_tensor_destroy(y);
		tbc_tensor_destroy(rm);
		tbc_tensor_destroy(rv);
		return -1;
	}
	for (int64_t ch = 0; ch < c; ch++) {
		double mean = tbc_get_f64(in[3], ch), var = tbc_get_f64(in[4], ch);
		if (training) {
			/* Batch statistics over N and the spatial dims (population variance). */
			double sum = 0, q = 0, cnt = (double)(n * s);
			for (int64_t b = 0; b < n; b++)
				for (int64_t i = 0; i < s; i++) sum += tbc_get_f64(x, (b * c + ch) * s + i);
			double bm = sum / cnt;
			for (int64_t b = 0; b < n; b++)
				for (int64_t i = 0; i < s; i++) {
					double d = tbc_get_f64(x, (b * c + ch) * s + i) - bm;
					q += d * d;
				}
			double bv = q / cnt;
			if (rm) tbc_set_f64(rm, ch, mean * mom + bm * (1 - mom));
			if (rv) tbc_set_f64(rv, ch, var * mom + bv * (1 - mom));
			mean = bm;
			var = bv;
		} else {
			if (rm) tbc_set_f64(rm, ch, mean);
			if (rv) tbc_set_f64(rv, ch, var);
		}
		double scale = tbc_get_f64(in[1], ch), bias = tbc_get_f64(in[2], ch), inv = 1 / sqrt(var + eps);
		for (int64_t b = 0; b < n; b++)
			for (int64_t i = 0; i < s; i++) {
				int64_t e = (b * c + ch) * s + i;
				tbc_set_f64(y, e, scale * (tbc_get_f64(x, e) - mean) * inv + bias);
			}
	}
	out[0] = y;
	if (want(op, 1)) out[1] = rm;
	if (want(op, 2)) out[2] = rv;
	return 0;
}

/* ---- LayerNormalization and RMSNormalization ----------------------------- */

/* Checks axis and that scale (and bias) broadcast to X. */
static bool trailing_norm_shape(tbc_infer *cx, tbc_op *op, int *axis_out) {
	const tbc_type *x = &op->inputs[0]->type;
	if (!need_float(cx, op)) return false;
	int64_t axis = tbc_attr_int(op, "axis", -1);
	*axis_out = -1;
	if (x->rank >= 0 && !tbc_norm_axis(axis, x->rank, axis_out))
		return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
	for (int i = 1; i < op->n_inputs; i++)
		if (op->inputs[i] && !tbc_red_type_broadcasts_to(&op->inputs[i]->type, x))
			return tbc_infer_error(cx, op, "input %d does not broadcast to X", i);
	op->outputs[0]->type = *x;
	return true;
}

bool tbc_shape_LayerNormalization(tbc_infer *cx, tbc_op *op) {
	int a;
	if (!trailing_norm_shape(cx, op, &a)) return false;
	tbc_dtype sd;
	if (!stash_dtype(op, &sd)) return tbc_infer_error(cx, op, "stash_type must name a float type");
	const tbc_type *x = &op->inputs[0]->type;
	tbc_type st = *x;
	st.dtype = sd;
	for (int d = a; x->rank >= 0 && d < x->rank; d++) st.dims[d] = (tbc_dim){1, NULL};
	for (int i = 1; i < 3; i++)
		if (want(op, i)) op->outputs[i]->type = st;
	return true;
}

bool tbc_shape_RMSNormalization(tbc_infer *cx, tbc_op *op) {
	int a;
	return trailing_norm_shape(cx, op, &a);
}

/* rms: RMSNormalization (no centring, no bias). */
static int trailing_norm_run(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out, bool rms) {
	const tbc_tensor *x = in[0], *bt = !rms && op->n_inputs > 2 ? in[2] : NULL;
	int64_t axis = tbc_attr_int(op, "axis", -1);
	double eps = tbc_attr_float(op, "epsilon", 1e-5);
	int a;
	tbc_dtype sd = TBC_DT_F32;
	if (!tbc_norm_axis(axis, x->rank, &a))
		return tbc_interp_error(ip, op, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
	if (!rms && !stash_dtype(op, &sd)) return tbc_interp_error(ip, op, "stash_type must name a float type");
	int64_t rows = 1, cols = 1, sdims[TBC_MAX_RANK];
	for (int d = 0; d < x->rank; d++) {
		if (d < a) rows *= x->dims[d];
		else cols *= x->dims[d];
		sdims[d] = d < a ? x->dims[d] : 1;
	}
	bool bad_s = false, bad_b = false;
	double *sc = tbc_red_expand_f64(in[1], x->rank, x->dims, &bad_s);
	double *bi = bt ? tbc_red_expand_f64(bt, x->rank, x->dims, &bad_b) : NULL;
	if (!sc || (bt && !bi)) {
		free(sc);
		free(bi);
		if (bad_s || bad_b) return tbc_interp_error(ip, op, "%s does not broadcast to X", bad_s ? "scale" : "bias");
		return tbc_interp_error(ip, op, "out of memory");
	}
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, x->dims);
	tbc_tensor *mt = y && !rms && want(op, 1) ? tbc_interp_new(ip, op, sd, x->rank, sdims) : NULL;
	tbc_tensor *it = y && !rms && want(op, 2) ? tbc_interp_new(ip, op, sd, x->rank, sdims) : NULL;
	if (!y || (!rms && want(op, 1) && !mt) || (!rms && want(op, 2) && !it)) {
		free(sc);
		free(bi);
		tbc_tensor_destroy(y);
		tbc_tensor_destroy(mt);
		tbc_tensor_destroy(it);
		return -1;
	}
	for (int64_t r = 0; r < rows; r++) {
		double mean = 0, var;
		if (rms) {
			double q = 0;
			for (int64_t i = 0; i < cols; i++) {
				double v = tbc_get_f64(x, r * cols + i);
				q += v * v;
			}
			var = cols ? q / (double)cols : NAN;
		} else {
			block_moments(x, r * cols, cols, &mean, &var);
		}
		double inv = 1 / sqrt(var + eps);
		for (int64_t i = 0; i < cols; i++) {
			int64_t e = r * cols + i;
			tbc_set_f64(y, e, (tbc_get_f64(x, e) - mean) * inv * sc[e] + (bi ? bi[e] : 0));
		}
		if (mt) tbc_set_f64(mt, r, mean);
		if (it) tbc_set_f64(it, r, inv);
	}
	free(sc);
	free(bi);
	out[0] = y;
	if (mt) out[1] = mt;
	if (it) out[2] = it;
	return 0;
}

int tbc_interp_LayerNormalization(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return trailing_norm_run(ip, op, in, out, false);
}
int tbc_interp_RMSNormalization(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return trailing_norm_run(ip, op, in, out, true);
}

/* ---- InstanceNormalization and GroupNormalization ------------------------ */

static bool channel_norm_shape(tbc_infer *cx, tbc_op *op, int64_t groups) {
	const tbc_type *x = &op->inputs[0]->type;
	if (!need_float(cx, op)) return false;
	if (x->rank >= 0 && x->rank < 2) return tbc_infer_error(cx, op, "X must have rank 2 or more (N, C, ...), not %d", x->rank);
	if (x->rank >= 2 && !x->dims[1].sym && groups > 0 && x->dims[1].size % groups)
		return tbc_infer_error(cx, op, "%lld channels do not split into %lld groups", (long long)x->dims[1].size, (long long)groups);
	for (int i = 1; i < 3; i++) {
		const tbc_type *t = &op->inputs[i]->type;
		if (t->rank >= 0 && t->rank != 1) return tbc_infer_error(cx, op, "input %d must be 1-D, not rank %d", i, t->rank);
	}
	op->outputs[0]->type = *x;
	return true;
}

bool tbc_shape_InstanceNormalization(tbc_infer *cx, tbc_op *op) { return channel_norm_shape(cx, op, 0); }

bool tbc_shape_GroupNormalization(tbc_infer *cx, tbc_op *op) {
	int64_t g = tbc_attr_int(op, "num_groups", 0);
	if (g <= 0) return tbc_infer_error(cx, op, "num_groups must be given and positive");
	return channel_norm_shape(cx, op, g);
}

/* groups 0: one group per channel (InstanceNormalization).  Scale and bias
 * are per channel (opset 21), or per group (GroupNormalization-18). */
static int channel_norm_run(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out, int64_t groups) {
	const tbc_tensor *x = in[0];
	double eps = tbc_attr_float(op, "epsilon", 1e-5);
	if (x->rank < 2) return tbc_interp_error(ip, op, "X must have rank 2 or more");
	int64_t n = x->dims[0], c = x->dims[1], s = 1;
	for (int d = 2; d < x->rank; d++) s *= x->dims[d];
	int64_t g = groups ? groups : c;
	if (g <= 0 || c % g) return tbc_interp_error(ip, op, "%lld channels do not split into %lld groups", (long long)c, (long long)g);
	int64_t per = c / g; /* channels per group */
	for (int i = 1; i < 3; i++)
		if (in[i]->numel != c && !(groups && in[i]->numel == g))
			return tbc_interp_error(ip, op, "%s has %lld elements for %lld channels", i == 1 ? "scale" : "bias",
						(long long)in[i]->numel, (long long)c);
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, x->dims);
	if (!y) return -1;
	for (int64_t b = 0; b < n; b++)
		for (int64_t k = 0; k < g; k++) {
			int64_t start = (b * c + k * per) * s;
			double mean, var;
			block_moments(x, start, per * s, &mean, &var);
			double inv = 1 / sqrt(var + eps);
			for (int64_t j = 0; j < per; j++) {
				int64_t ch = k * per + j;
				double sc = tbc_get_f64(in[1], in[1]->numel == c ? ch : k);
				double bi = tbc_get_f64(in[2], in[2]->numel == c ? ch : k);
				for (int64_t i = 0; i < s; i++) {
					int64_t e = start + j * s + i;
					tbc_set_f64(y, e, (tbc_get_f64(x, e) - mean) * inv * sc + bi);
				}
			}
		}
	out[0] = y;
	return 0;
}

int tbc_interp_InstanceNormalization(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return channel_norm_run(ip, op, in, out, 0);
}
int tbc_interp_GroupNormalization(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	int64_t g = tbc_attr_int(op, "num_groups", 0);
	if (g <= 0) return tbc_interp_error(ip, op, "num_groups must be given and positive");
	return channel_norm_run(ip, op, in, out, g);
}

/* ---- LpNormalization ----------------------------------------------------- */

bool tbc_shape_LpNormalization(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type;
	int64_t axis = tbc_attr_int(op, "axis", -1), p = tbc_attr_int(op, "p", 2);
	int a;
	if (!need_float(cx, op)) return false;
	if (p != 1 && p != 2) return tbc_infer_error(cx, op, "p must be 1 or 2, not %lld", (long long)p);
	if (x->rank >= 0 && !tbc_norm_axis(axis, x->rank, &a))
		return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
	op->outputs[0]->type = *x;
	return true;
}

int tbc_interp_LpNormalization(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	int64_t axis = tbc_attr_int(op, "axis", -1), p = tbc_attr_int(op, "p", 2);
	int a;
	if (p != 1 && p != 2) return tbc_interp_error(ip, op, "p must be 1 or 2, not %lld", (long long)p);
	if (!tbc_norm_axis(axis, x->rank, &a))
		return tbc_interp_error(ip, op, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
	int64_t outer = 1, inner = 1, n = x->dims[a];
	for (int d = 0; d < x->rank; d++) {
		if (d < a) outer *= x->dims[d];
		if (d > a) inner *= x->dims[d];
	}
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, x->dims);
	if (!y) return -1;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t base = o * n * inner + i;
			double norm = 0;
			for (int64_t j = 0; j < n; j++) {
				double v = tbc_get_f64(x, base + j * inner);
				norm += p == 1 ? fabs(v) : v * v;
			}
			if (p == 2) norm = sqrt(norm);
			/* A zero norm gives 0, not 0/0. */
			for (int64_t j = 0; j < n; j++)
				tbc_set_f64(y, base + j * inner, norm == 0 ? 0 : tbc_get_f64(x, base + j * inner) / norm);
		}
	out[0] = y;
	return 0;
}

/* ---- LRN ------------------------------------------------------------------ */

bool tbc_shape_LRN(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type;
	if (!need_float(cx, op)) return false;
	if (tbc_attr_int(op, "size", 0) <= 0) return tbc_infer_error(cx, op, "size must be given and positive");
	if (x->rank >= 0 && x->rank < 2) return tbc_infer_error(cx, op, "X must have rank 2 or more (N, C, ...), not %d", x->rank);
	op->outputs[0]->type = *x;
	return true;
}

int tbc_interp_LRN(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	int64_t size = tbc_attr_int(op, "size", 0);
	double alpha = tbc_attr_float(op, "alpha", 1e-4), beta = tbc_attr_float(op, "beta", 0.75),
	       bias = tbc_attr_float(op, "bias", 1.0);
	if (size <= 0) return tbc_interp_error(ip, op, "size must be given and positive");
	if (x->rank < 2) return tbc_interp_error(ip, op, "X must have rank 2 or more");
	int64_t n = x->dims[0], c = x->dims[1], s = 1;
	for (int d = 2; d < x->rank; d++) s *= x->dims[d];
	int64_t before = (size - 1) / 2, after = size / 2; /* floor and ceil of (size-1)/2 */
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, x->dims);
	if (!y) return -1;
	for (int64_t b = 0; b < n; b++)
		for (int64_t ch = 0; ch < c; ch++)
			for (int64_t i = 0; i < s; i++) {
				int64_t lo = ch - before < 0 ? 0 : ch - before, hi = ch + after >= c ? c - 1 : ch + after;
				double sq = 0;
				for (int64_t k = lo; k <= hi; k++) {
					double v = tbc_get_f64(x, (b * c + k) * s + i);
					sq += v * v;
				}
				int64_t e = (b * c + ch) * s + i;
				tbc_set_f64(y, e, tbc_get_f64(x, e) / pow(bias + alpha / (double)size * sq, beta));
			}
	out[0] = y;
	return 0;
}

/* ---- MeanVarianceNormalization -------------------------------------------- */

static const int64_t mvn_default_axes[] = {0, 2, 3};

static bool mvn_axes(const tbc_op *op, int rank, bool *mask, char *err, size_t errsz) {
	const int64_t *axes;
	int n = tbc_attr_ints(op, "axes", &axes);
	if (n < 0) {
		axes = mvn_default_axes;
		n = 3;
	}
	for (int d = 0; d < rank; d++) mask[d] = false;
	for (int i = 0; i < n; i++) {
		int a;
		if (!tbc_norm_axis(axes[i], rank, &a)) {
			snprintf(err, errsz, "axis %lld is out of range for rank %d", (long long)axes[i], rank);
			return false;
		}
		mask[a] = true;
	}
	return true;
}

bool tbc_shape_MeanVarianceNormalization(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type;
	bool mask[TBC_MAX_RANK];
	char err[128];
	if (!need_float(cx, op)) return false;
	if (x->rank >= 0 && !mvn_axes(op, x->rank, mask, err, sizeof err)) return tbc_infer_error(cx, op, "%s", err);
	op->outputs[0]->type = *x;
	return true;
}

/* Y = (X - E[X]) / (sqrt(Var[X]) + 1e-9) over the axes, as the op's
 * function body defines it. */
int tbc_interp_MeanVarianceNormalization(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	bool mask[TBC_MAX_RANK];
	char err[128];
	if (!mvn_axes(op, x->rank, mask, err, sizeof err)) return tbc_interp_error(ip, op, "%s", err);
	int64_t groups = 1;
	for (int d = 0; d < x->rank; d++)
		if (!mask[d]) groups *= x->dims[d];
	double count = groups ? (double)(x->numel / groups) : 0;
	int64_t *map = tbc_red_output_map(x, mask);
	double *mean = calloc((size_t)(groups ? groups : 1), sizeof *mean);
	double *var = calloc((size_t)(groups ? groups : 1), sizeof *var);
	tbc_tensor *y = map && mean && var ? tbc_interp_new(ip, op, x->dtype, x->rank, x->dims) : NULL;
	if (!y) {
		int rc = map && mean && var ? -1 : tbc_interp_error(ip, op, "out of memory");
		free(map);
		free(mean);
		free(var);
		return rc;
	}
	for (int64_t i = 0; i < x->numel; i++) mean[map[i]] += tbc_get_f64(x, i);
	for (int64_t g = 0; g < groups; g++) mean[g] /= count;
	for (int64_t i = 0; i < x->numel; i++) {
		double d = tbc_get_f64(x, i) - mean[map[i]];
		var[map[i]] += d * d;
	}
	for (int64_t g = 0; g < groups; g++) var[g] /= count;
	for (int64_t i = 0; i < x->numel; i++)
		tbc_set_f64(y, i, (tbc_get_f64(x, i) - mean[map[i]]) / (sqrt(var[map[i]]) + 1e-9));
	free(map);
	free(mean);
	free(var);
	out[0] = y;
	return 0;
}
