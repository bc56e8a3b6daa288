/* Type conversions of the elementwise family: Cast, CastLike, BitCast, and
 * Dropout (an identity at inference).  The scalar conversions themselves are
 * in ir/dtype.c; here is which one applies to a pair of types. */
#include "elementwise.h"
#include "rng_mt19937.h"

/* ---- Cast ------------------------------------------------------------------*/
typedef struct cast_mode {
	bool saturate;        /* float8 targets: the Cast tables */
	tbc_round_mode round; /* float8e8m0 targets */
} cast_mode;

/* Element i of x converted into element i of y.  Integer to integer goes
 * through 64 bits exactly and wraps; integer to float rounds once; float to
 * integer truncates (and wraps to the width, as numpy's astype). */
static void cast_element(const tbc_tensor *x, tbc_tensor *y, size_t i, cast_mode m) {
	tbc_dtype from = x->dtype, to = y->dtype;
	double v;
	if (!tbc_dtype_is_float(from)) {
		bool u = tbc_dtype_is_unsigned(from);
		if (!tbc_dtype_is_float(to) || to == TBC_DT_F32 || to == TBC_DT_F64) {
			if (u)
				tbc_store_u64(to, y->data, i, tbc_load_u64(from, x->data, i));
			else
				tbc_store_i64(to, y->data, i, tbc_load_i64(from, x->data, i));
			return;
		}
		/* Narrow floats: magnitudes past 2^53 overflow them anyway. */
		v = u ? (double)tbc_load_u64(from, x->data, i) : (double)tbc_load_i64(from, x->data, i);
	} else {
		v = tbc_load_f64(from, x->data, i);
	}
	if (to == TBC_DT_F8E8M0)
		((uint8_t *)y->data)[i] = tbc_f32_to_e8m0((float)v, m.saturate, m.round);
	else if (m.saturate)
		tbc_store_f64(to, y->data, i, v);
	else
		tbc_store_f64_nosat(to, y->data, i, v);
}

static bool round_mode(const tbc_op *op, tbc_round_mode *out) {
	const char *s = tbc_attr_string(op, "round_mode", "up");
	if (!strcmp(s, "up")) *out = TBC_ROUND_UP;
	else if (!strcmp(s, "down")) *out = TBC_ROUND_DOWN;
	else if (!strcmp(s, "nearest")) *out = TBC_ROUND_NEAREST;
	else return false;
	return true;
}

static int cast_to(tbc_interp *ip, const tbc_op *op, const tbc_tensor *x, tbc_dtype to, tbc_tensor **out) {
	cast_mode m = {tbc_attr_int(op, "saturate", 1) != 0, TBC_ROUND_UP};
	if (!round_mode(op, &m.round)) return tbc_interp_error(ip, op, "round_mode must be up, down or nearest");
	tbc_tensor *y = tbc_interp_new(ip, op, to, x->rank, x->dims);
	if (!y) return -1;
	for (int64_t i = 0; i < x->numel; i++) cast_element(x, y, (size_t)i, m);
	*out = y;
	return 0;
}

int tbc_interp_Cast(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	int64_t to = tbc_attr_int(op, "to", 0);
	if (!tbc_dtype_supported((tbc_dtype)to)) return tbc_interp_error(ip, op, "cannot cast to type %lld", (long long)to);
	return cast_to(ip, op, in[0], (tbc_dtype)to, out);
}

int tbc_interp_CastLike(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return cast_to(ip, op, in[0], in[1]->dtype, out);
}

static bool check_cast_attrs(tbc_infer *cx, tbc_op *op) {
	tbc_round_mode m;
	if (!round_mode(op, &m))
		return tbc_infer_error(cx, op, "round_mode must be \"up\", \"down\" or \"nearest\", not \"%s\"",
				       tbc_attr_string(op, "round_mode", ""));
	int64_t sat = tbc_attr_int(op, "saturate", 1);
	if (sat != 0 && sat != 1) return tbc_infer_error(cx, op, "saturate must be 0 or 1, not %lld", (long long)sat);
	return true;
}

static bool target_dtype(tbc_infer *cx, tbc_op *op, const char *attr, tbc_dtype *out) {
	if (!tbc_op_attr(op, attr)) return tbc_infer_error(cx, op, "attribute '%s' is required", attr);
	int64_t to = tbc_attr_int(op, attr, 0);
	if (to < 0 || to >= TBC_DT_COUNT || !tbc_dtype_valid((int)to))
		return tbc_infer_error(cx, op, "'%s' is not a known data type (%lld)", attr, (long long)to);
	if (!tbc_dtype_supported((tbc_dtype)to))
		return tbc_infer_error(cx, op, "'%s' type %s is not supported", attr, tbc_dtype_name((tbc_dtype)to));
	*out = (tbc_dtype)to;
	return true;
}

bool tbc_shape_Cast(tbc_infer *cx, tbc_op *op) {
	tbc_dtype to = TBC_DT_UNDEFINED;
	if (!target_dtype(cx, op, "to", &to) || !check_cast_attrs(cx, op)) return false;
	op->outputs[0]->type = op->inputs[0]->type;
	op->outputs[0]->type.dtype = to;
	return true;
}

bool tbc_shape_CastLike(tbc_infer *cx, tbc_op *op) {
	if (!check_cast_attrs(cx, op)) return false;
	op->outputs[0]->type = op->inputs[0]->type;
	op->outputs[0]->type.dtype = op->inputs[1]->type.dtype;
	return true;
}

/* ---- BitCast: the same bits read as another type of the same width -----*/
int tbc_interp_BitCast(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	tbc_dtype to = (tbc_dtype)tbc_attr_int(op, "to", 0);
	if (!tbc_dtype_supported(to) || tbc_dtype_bits(to) != tbc_dtype_bits(x->dtype))
		return tbc_interp_error(ip, op, "cannot bit-cast %s to type %d", tbc_dtype_name(x->dtype), (int)to);
	tbc_tensor *y = tbc_interp_new(ip, op, to, x->rank, x->dims);
	if (!y) return -1;
	for (int64_t i = 0; i < x->numel; i++)
		tbc_store_bits(to, y->data, (size_t)i, tbc_load_bits(x->dtype, x->data, (size_t)i));
	*out = y;
	return 0;
}

bool tbc_shape_BitCast(tbc_infer *cx, tbc_op *op) {
	tbc_dtype to = TBC_DT_UNDEFINED;
	if (!target_dtype(cx, op, "to", &to)) return false;
	tbc_dtype from = op->inputs[0]->type.dtype;
	if (tbc_dtype_bits(to) != tbc_dtype_bits(from))
		return tbc_infer_error(cx, op, "cannot bit-cast %s (%d bits) to %s (%d bits): the widths differ",
				       tbc_dtype_name(from), tbc_dtype_bits(from), tbc_dtype_name(to), tbc_dtype_bits(to));
	op->outputs[0]->type = op->inputs[0]->type;
	op->outputs[0]->type.dtype = to;
	return true;
}

/* ---- Dropout(data, ratio, training_mode) -> (output, mask) ----------------
 * At inference (training_mode absent or false) and with ratio 0 it is the
 * identity with an all-true mask.  In training it does what ONNX's reference
 * implementation does (onnx/reference/ops/op_dropout.py):
 *   mask = RandomState(seed).uniform(0, 1, shape) >= ratio
 *   output = mask * data * (1 / (1 - ratio))
 * with numpy's legacy MT19937 reproduced bit for bit (rng_mt19937.c), elements
 * drawn in row-major order.  Without a seed attribute the seed is 0, so runs
 * are reproducible (docs/decisions.md); a seed outside [0, 2^32) is taken
 * modulo 2^32 (numpy refuses such seeds).  The scale is rounded to the ratio's
 * type, as numpy computes it in that type.
 * A fourth input is tbc's own, never ONNX's (the frontend refuses it): an
 * integer scalar added to the seed, modulo 2^32 -- a training step passes
 * a number that changes every step, so each step draws another mask
 * (passes/train.c). */
static double round_to(tbc_dtype dt, double v) {
	uint64_t buf = 0;
	tbc_store_f64(dt, &buf, 0, v);
	return tbc_load_f64(dt, &buf, 0);
}

int tbc_interp_Dropout(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	const tbc_tensor *ratio = op->n_inputs > 1 ? in[1] : NULL;
	const tbc_tensor *training = op->n_inputs > 2 ? in[2] : NULL;
	double r = 0.5;
	if (ratio) {
		if (ratio->numel != 1) return tbc_interp_error(ip, op, "ratio must be a scalar");
		r = tbc_get_f64(ratio, 0);
	}
	if (training && training->numel != 1) return tbc_interp_error(ip, op, "training_mode must be a scalar");
	bool train = training && tbc_get_i64(training, 0) != 0;
	if (train && !(r >= 0 && r < 1)) return tbc_interp_error(ip, op, "ratio must be in [0, 1), it is %g", r);
	bool want_mask = op->n_outputs > 1 && op->outputs[1];
	if (!train || r == 0) {
		tbc_tensor *y = tbc_tensor_clone(x);
		if (!y) return tbc_interp_error(ip, op, "out of memory");
		if (want_mask) {
			tbc_tensor *mask = tbc_interp_new(ip, op, TBC_DT_BOOL, x->rank, x->dims);
			if (!mask) {
				tbc_tensor_destroy(y);
				return -1;
			}
			memset(mask->data, 1, (size_t)mask->numel);
			out[1] = mask;
		}
		out[0] = y;
		return 0;
	}
	double scale = ratio ? round_to(ratio->dtype, 1.0 / round_to(ratio->dtype, 1.0 - r)) : 1.0 / (1.0 - r);
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, x->dims);
	if (!y) return -1;
	tbc_tensor *mask = NULL;
	if (want_mask) {
		mask = tbc_interp_new(ip, op, TBC_DT_BOOL, x->rank, x->dims);
		if (!mask) {
			tbc_tensor_destroy(y);
			return -1;
		}
	}
	uint32_t seed = (uint32_t)tbc_attr_int(op, "seed", 0);
	if (op->n_inputs > 3 && in[3]) {
		if (in[3]->numel != 1) return tbc_interp_error(ip, op, "the seed offset must be a scalar");
		seed += (uint32_t)tbc_get_i64(in[3], 0);
	}
	tbc_mt19937 mt;
	tbc_mt19937_seed(&mt, seed);
	for (int64_t i = 0; i < x->numel; i++) {
		bool keep = tbc_mt19937_next_double(&mt) >= r;
		/* numpy multiplies by the mask (0 * -x = -0, 0 * inf = NaN), then scales. */
		tbc_set_f64(y, i, tbc_get_f64(x, i) * (keep ? 1.0 : 0.0) * scale);
		if (mask) ((uint8_t *)mask->data)[i] = keep;
	}
	if (mask) out[1] = mask;
	out[0] = y;
	return 0;
}

bool tbc_shape_Dropout(tbc_infer *cx, tbc_op *op) {
	if (op->n_inputs > 3 && op->inputs[3] &&
	    (tbc_dtype_is_float(op->inputs[3]->type.dtype) || op->inputs[3]->type.dtype == TBC_DT_BOOL ||
	     op->inputs[3]->type.rank > 0))
		return tbc_infer_error(cx, op, "the seed offset (input 3) must be an integer scalar");
	const tbc_tensor *ratio = tbc_input_const(op, 1);
	if (ratio) {
		if (ratio->numel != 1) return tbc_infer_error(cx, op, "ratio must be a scalar");
		double r = tbc_get_f64(ratio, 0);
		if (!(r >= 0 && r < 1)) return tbc_infer_error(cx, op, "ratio must be in [0, 1), it is %g", r);
	}
	if (op->outputs[0]) op->outputs[0]->type = op->inputs[0]->type;
	if (op->n_outputs > 1 && op->outputs[1]) {
		op->outputs[1]->type = op->inputs[0]->type;
		op->outputs[1]->type.dtype = TBC_DT_BOOL;
	}
	return true;
}
