/* Activations of the elementwise family: Relu and its relatives, the sigmoid
 * family, Gelu, Swish and SwiGLU, Shrink, Clip, PRelu.  Attribute defaults
 * are the ONNX spec's. */
#include "elementwise.h"

/* ---- Relu family ---------------------------------------------------------*/
/* np.maximum(x, 0): NaN propagates. */
static double relu_f(ew_ctx *c, const double *x) { (void)c; return x[0] < 0 ? 0.0 : x[0]; }
static int64_t relu_i(ew_ctx *c, const int64_t *x) { (void)c; return x[0] < 0 ? 0 : x[0]; }
static uint64_t relu_u(ew_ctx *c, const uint64_t *x) { (void)c; return x[0]; }
static const ew_def relu_def = {relu_f, relu_i, relu_u};
EW_UNARY_KERNEL(Relu, relu_def)

static double leaky_relu_f(ew_ctx *c, const double *x) { return x[0] < 0 ? c->a * x[0] : x[0]; }
static const ew_def leaky_relu_def = {leaky_relu_f, NULL, NULL};
int tbc_interp_LeakyRelu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	ew_ctx c = {.a = tbc_attr_float(op, "alpha", 0.01)};
	return ew_unary(ip, op, &leaky_relu_def, &c, in, out);
}

static double elu_f(ew_ctx *c, const double *x) { return x[0] > 0 ? x[0] : c->a * expm1(x[0]); }
static const ew_def elu_def = {elu_f, NULL, NULL};
int tbc_interp_Elu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	ew_ctx c = {.a = tbc_attr_float(op, "alpha", 1.0)};
	return ew_unary(ip, op, &elu_def, &c, in, out);
}

/* max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) */
static double celu_f(ew_ctx *c, const double *x) {
	return fmax(0.0, x[0]) + fmin(0.0, c->a * expm1(x[0] / c->a));
}
static const ew_def celu_def = {celu_f, NULL, NULL};
int tbc_interp_Celu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	ew_ctx c = {.a = tbc_attr_float(op, "alpha", 1.0)};
	if (c.a == 0) return tbc_interp_error(ip, op, "alpha must not be 0");
	return ew_unary(ip, op, &celu_def, &c, in, out);
}

/* gamma * (x > 0 ? x : alpha * (exp(x) - 1)) */
static double selu_f(ew_ctx *c, const double *x) { return c->b * (x[0] > 0 ? x[0] : c->a * expm1(x[0])); }
static const ew_def selu_def = {selu_f, NULL, NULL};
int tbc_interp_Selu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	ew_ctx c = {.a = tbc_attr_float(op, "alpha", 1.67326319217681884765625),
		    .b = tbc_attr_float(op, "gamma", 1.05070102214813232421875)};
	return ew_unary(ip, op, &selu_def, &c, in, out);
}

static double thresholded_relu_f(ew_ctx *c, const double *x) { return x[0] > c->a ? x[0] : 0.0; }
static const ew_def thresholded_relu_def = {thresholded_relu_f, NULL, NULL};
int tbc_interp_ThresholdedRelu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	ew_ctx c = {.a = tbc_attr_float(op, "alpha", 1.0)};
	return ew_unary(ip, op, &thresholded_relu_def, &c, in, out);
}

/* ---- Sigmoid family --------------------------------------------------------*/
/* 1 / (1 + exp(-x)), written so that neither branch overflows. */
static double sigmoid(double x) {
	if (x >= 0) return 1.0 / (1.0 + exp(-x));
	double e = exp(x);
	return e / (1.0 + e);
}
/* log(1 + exp(x)) without overflow (np.logaddexp(0, x)). */
static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

static double sigmoid_f(ew_ctx *c, const double *x) { (void)c; return sigmoid(x[0]); }
static const ew_def sigmoid_def = {sigmoid_f, NULL, NULL};
EW_UNARY_KERNEL(Sigmoid, sigmoid_def)

/* max(0, min(1, alpha * x + beta)) */
static double hard_sigmoid_f(ew_ctx *c, const double *x) { return fmax(0.0, fmin(1.0, c->a * x[0] + c->b)); }
static const ew_def hard_sigmoid_def = {hard_sigmoid_f, NULL, NULL};
int tbc_interp_HardSigmoid(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	ew_ctx c = {.a = tbc_attr_float(op, "alpha", 0.2), .b = tbc_attr_float(op, "beta", 0.5)};
	return ew_unary(ip, op, &hard_sigmoid_def, &c, in, out);
}

/* x * HardSigmoid(x) with alpha = 1/6, beta = 0.5 */
static double hard_swish_f(ew_ctx *c, const double *x) {
	(void)c;
	return x[0] * fmax(0.0, fmin(1.0, x[0] / 6.0 + 0.5));
}
static const ew_def hard_swish_def = {hard_swish_f, NULL, NULL};
EW_UNARY_KERNEL(HardSwish, hard_swish_def)

static double softplus_f(ew_ctx *c, const double *x) { (void)c; return softplus(x[0]); }
static const ew_def softplus_def = {softplus_f, NULL, NULL};
EW_UNARY_KERNEL(Softplus, softplus_def)

static double softsign_f(ew_ctx *c, const double *x) { (void)c; return x[0] / (1.0 + fabs(x[0])); }
static const ew_def softsign_def = {softsign_f, NULL, NULL};
EW_UNARY_KERNEL(Softsign, softsign_def)

/* x * tanh(softplus(x)) */
static double mish_f(ew_ctx *c, const double *x) { (void)c; return x[0] * tanh(softplus(x[0])); }
static const ew_def mish_def = {mish_f, NULL, NULL};
EW_UNARY_KERNEL(Mish, mish_def)

/* flag 0: 0.5 x (1 + erf(x / sqrt 2)); flag 1 ("tanh"):
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) */
static double gelu_f(ew_ctx *c, const double *x) {
	double v = x[0];
	if (c->flag) return 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
	return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
}
static const ew_def gelu_def = {gelu_f, NULL, NULL};

static int gelu_mode(const tbc_op *op) {
	const char *s = tbc_attr_string(op, "approximate", "none");
	return !strcmp(s, "none") ? 0 : !strcmp(s, "tanh") ? 1 : -1;
}
int tbc_interp_Gelu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	ew_ctx c = {.flag = gelu_mode(op)};
	if (c.flag < 0) return tbc_interp_error(ip, op, "approximate must be \"none\" or \"tanh\"");
	return ew_unary(ip, op, &gelu_def, &c, in, out);
}
bool tbc_shape_Gelu(tbc_infer *cx, tbc_op *op) {
	if (gelu_mode(op) < 0)
		return tbc_infer_error(cx, op, "approximate must be \"none\" or \"tanh\", not \"%s\"",
				       tbc_attr_string(op, "approximate", ""));
	return tbc_shape_same_as_input0(cx, op);
}

/* x * sigmoid(alpha * x) */
static double swish_f(ew_ctx *c, const double *x) { return x[0] * sigmoid(c->a * x[0]); }
static const ew_def swish_def = {swish_f, NULL, NULL};
int tbc_interp_Swish(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	ew_ctx c = {.a = tbc_attr_float(op, "alpha", 1.0)};
	return ew_unary(ip, op, &swish_def, &c, in, out);
}

/* Swish_alpha(a) * b; A and B have one shape (no broadcasting). */
static double swiglu_f(ew_ctx *c, const double *x) { return x[0] * sigmoid(c->a * x[0]) * x[1]; }
static const ew_def swiglu_def = {swiglu_f, NULL, NULL};
int tbc_interp_SwiGLU(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	if (!tbc_tensor_same_shape(in[0], in[1])) return tbc_interp_error(ip, op, "A and B must have the same shape");
	ew_ctx c = {.a = tbc_attr_float(op, "alpha", 1.0)};
	return ew_map(ip, op, &swiglu_def, &c, 2, in, 0, in[0]->dtype, out);
}
bool tbc_shape_SwiGLU(tbc_infer *cx, tbc_op *op) {
	const tbc_type *a = &op->inputs[0]->type, *b = &op->inputs[1]->type;
	if (a->dtype != b->dtype)
		return tbc_infer_error(cx, op, "A is %s but B is %s", tbc_dtype_name(a->dtype), tbc_dtype_name(b->dtype));
	if (!tbc_dtype_is_float(a->dtype))
		return tbc_infer_error(cx, op, "inputs must be floating point, not %s", tbc_dtype_name(a->dtype));
	tbc_type t = *a;
	if (a->rank >= 0 && b->rank >= 0) {
		if (a->rank != b->rank) return tbc_infer_error(cx, op, "A has rank %d but B has rank %d", a->rank, b->rank);
		for (int d = 0; d < a->rank; d++) {
			tbc_dim x = a->dims[d], y = b->dims[d];
			if (!x.sym && !y.sym && x.size != y.size)
				return tbc_infer_error(cx, op, "dim %d of A is %lld but of B %lld", d, (long long)x.size,
						       (long long)y.size);
			if (x.sym && !y.sym) t.dims[d] = y;
		}
	} else if (a->rank < 0) {
		t = *b;
	}
	op->outputs[0]->type = t;
	return true;
}

/* ---- Shrink: x < -lambd ? x + bias : x > lambd ? x - bias : 0 -----------*/
static double shrink_f(ew_ctx *c, const double *x) {
	return x[0] < -c->b ? x[0] + c->a : x[0] > c->b ? x[0] - c->a : 0.0;
}
static const ew_def shrink_def = {shrink_f, NULL, NULL};
int tbc_interp_Shrink(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	ew_ctx c = {.a = tbc_attr_float(op, "bias", 0.0), .b = tbc_attr_float(op, "lambd", 0.5)};
	return ew_unary(ip, op, &shrink_def, &c, in, out);
}

/* ---- PRelu: x < 0 ? slope * x : x, slope broadcast to X ----------------*/
static double prelu_f(ew_ctx *c, const double *x) { (void)c; return x[0] < 0 ? x[1] * x[0] : x[0]; }
static int64_t prelu_i(ew_ctx *c, const int64_t *x) {
	(void)c;
	return x[0] < 0 ? (int64_t)((uint64_t)x[1] * (uint64_t)x[0]) : x[0];
}
static uint64_t prelu_u(ew_ctx *c, const uint64_t *x) { (void)c; return x[0]; }
static const ew_def prelu_def = {prelu_f, prelu_i, prelu_u};
EW_NARY_KERNEL(PRelu, prelu_def)

/* Unidirectional: the result has X's type, slope must broadcast to it. */
bool tbc_shape_PRelu(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *s = &op->inputs[1]->type;
	if (x->dtype != s->dtype)
		return tbc_infer_error(cx, op, "X is %s but slope is %s", tbc_dtype_name(x->dtype), tbc_dtype_name(s->dtype));
	if (x->rank >= 0 && s->rank >= 0) {
		if (s->rank > x->rank)
			return tbc_infer_error(cx, op, "slope has rank %d, more than X's %d", s->rank, x->rank);
		for (int d = 0; d < s->rank; d++) {
			tbc_dim sd = s->dims[d], xd = x->dims[d + x->rank - s->rank];
			if (!sd.sym && sd.size != 1 && !xd.sym && sd.size != xd.size)
				return tbc_infer_error(cx, op, "slope dim %d (%lld) does not broadcast to X's %lld", d,
						       (long long)sd.size, (long long)xd.size);
		}
	}
	op->outputs[0]->type = *x;
	return true;
}

/* ---- Clip: min and max are optional scalars -----------------------------*/
static double clip_f(ew_ctx *c, const double *x) {
	if (isnan(x[0])) return x[0];
	return fmin(fmax(x[0], c->a), c->b); /* np.clip: min first, so min > max gives max */
}
static int64_t clip_i(ew_ctx *c, const int64_t *x) {
	int64_t v = x[0] < c->ia ? c->ia : x[0];
	return v > c->ib ? c->ib : v;
}
static uint64_t clip_u(ew_ctx *c, const uint64_t *x) {
	uint64_t v = x[0] < c->ua ? c->ua : x[0];
	return v > c->ub ? c->ub : v;
}
static const ew_def clip_def = {clip_f, clip_i, clip_u};

int tbc_interp_Clip(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	ew_ctx c = {.a = -INFINITY, .b = INFINITY, .ia = INT64_MIN, .ib = INT64_MAX, .ua = 0, .ub = UINT64_MAX};
	for (int k = 1; k < 3 && k < op->n_inputs; k++) {
		const tbc_tensor *t = in[k];
		if (!t) continue;
		if (t->numel != 1)
			return tbc_interp_error(ip, op, "%s must be a scalar, it has %lld elements", k == 1 ? "min" : "max",
						(long long)t->numel);
		double f = tbc_load_f64(t->dtype, t->data, 0);
		int64_t i = tbc_load_i64(t->dtype, t->data, 0);
		uint64_t u = tbc_load_u64(t->dtype, t->data, 0);
		if (k == 1) c.a = f, c.ia = i, c.ua = u;
		else c.b = f, c.ib = i, c.ub = u;
	}
	return ew_unary(ip, op, &clip_def, &c, in, out);
}

bool tbc_shape_Clip(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type;
	for (int k = 1; k < 3 && k < op->n_inputs; k++) {
		const tbc_value *v = op->inputs[k];
		if (!v) continue;
		if (v->type.dtype != x->dtype)
			return tbc_infer_error(cx, op, "%s is %s but input is %s", k == 1 ? "min" : "max",
					       tbc_dtype_name(v->type.dtype), tbc_dtype_name(x->dtype));
		int64_t n = tbc_type_numel(&v->type);
		if (n >= 0 && n != 1)
			return tbc_infer_error(cx, op, "%s must be a scalar, it has %lld elements", k == 1 ? "min" : "max",
					       (long long)n);
	}
	op->outputs[0]->type = *x;
	return true;
}
