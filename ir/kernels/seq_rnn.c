/* RNN, GRU and LSTM (ONNX opset 22 forms): shape rules and kernels.
 *
 * One kernel walks every (direction, batch) pair on its own: batches are
 * independent, which makes sequence_lens trivial (steps past a batch's
 * length leave Y at zero and Y_h at the last valid state).  Math is in
 * double; results are rounded to X's dtype on store. */
#include <strings.h>

#include "rnn_acts.h"
#include "seq_common.h"

static const char *const rnn_default_acts[3][3] = {
	{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
static const int rnn_n_acts[3] = {1, 2, 3};
static const int rnn_n_gates[3] = {1, 3, 4};

/* ---- Activation functions (the list of the RNN ops' spec) --------------- */
static const struct {
	const char *name;
	act_kind kind;
	bool uses_alpha, uses_beta;
	double alpha, beta; /* defaults */
} act_table[] = {
	{"Relu", ACT_RELU, false, false, 0, 0},
	{"Tanh", ACT_TANH, false, false, 0, 0},
	{"Sigmoid", ACT_SIGMOID, false, false, 0, 0},
	{"Affine", ACT_AFFINE, true, true, 1.0, 0.0},
	{"LeakyRelu", ACT_LEAKYRELU, true, false, 0.01, 0},
	{"ThresholdedRelu", ACT_THRESHOLDEDRELU, true, false, 1.0, 0},
	{"ScaledTanh", ACT_SCALEDTANH, true, true, 1.0, 1.0},
	{"HardSigmoid", ACT_HARDSIGMOID, true, true, 0.2, 0.5},
	{"Elu", ACT_ELU, true, false, 1.0, 0},
	{"Softsign", ACT_SOFTSIGN, false, false, 0, 0},
	{"Softplus", ACT_SOFTPLUS, false, false, 0, 0},
};

static double act_apply(const act_fn *f, double x) {
	switch (f->kind) {
	case ACT_RELU: return x > 0 ? x : 0;
	case ACT_TANH: return tanh(x);
	case ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
	case ACT_AFFINE: return f->alpha * x + f->beta;
	case ACT_LEAKYRELU: return x >= 0 ? x : f->alpha * x;
	case ACT_THRESHOLDEDRELU: return x > f->alpha ? x : 0;
	case ACT_SCALEDTANH: return f->alpha * tanh(f->beta * x);
	case ACT_HARDSIGMOID: return fmax(0.0, fmin(1.0, f->alpha * x + f->beta));
	case ACT_ELU: return x >= 0 ? x : f->alpha * (exp(x) - 1);
	case ACT_SOFTSIGN: return x / (1 + fabs(x));
	case ACT_SOFTPLUS: return log1p(exp(-fabs(x))) + fmax(x, 0.0);
	}
	return x;
}

const char *tbc_rnn_parse_acts(const tbc_op *op, enum rnn_kind kind, int num_dir, act_fn acts[2][3]) {
	int n = rnn_n_acts[kind];
	const tbc_attr *a = tbc_op_attr(op, "activations");
	const char *names[6];
	int count = 0;
	if (a && a->kind == TBC_ATTR_STRINGS && a->n > 0) {
		if (a->n != n * num_dir && a->n != n) return "activations must list one function per gate and direction";
		for (int i = 0; i < n * num_dir; i++) names[i] = a->strings[i % a->n];
		count = n * num_dir;
	} else {
		for (int i = 0; i < n * num_dir; i++) names[i] = rnn_default_acts[kind][i % n];
		count = n * num_dir;
	}
	const double *alphas = NULL, *betas = NULL;
	int n_alpha = tbc_attr_floats(op, "activation_alpha", &alphas);
	int n_beta = tbc_attr_floats(op, "activation_beta", &betas);
	int ia = 0, ib = 0;
	for (int i = 0; i < count; i++) {
		size_t k = 0;
		while (k < sizeof act_table / sizeof act_table[0] && strcasecmp(act_table[k].name, names[i])) k++;
		if (k == sizeof act_table / sizeof act_table[0]) return "unknown activation function";
		act_fn *f = &acts[i / n][i % n];
		f->kind = act_table[k].kind;
		f->alpha = act_table[k].alpha;
		f->beta = act_table[k].beta;
		if (act_table[k].uses_alpha && ia < n_alpha) f->alpha = alphas[ia++];
		if (act_table[k].uses_beta && ib < n_beta) f->beta = betas[ib++];
	}
	return NULL;
}

static int rnn_num_dir(const tbc_op *op) {
	const char *d = tbc_attr_string(op, "direction", "forward");
	if (!strcmp(d, "forward") || !strcmp(d, "reverse")) return 1;
	if (!strcmp(d, "bidirectional")) return 2;
	return 0;
}

/* ---- Shape rule ------------------------------------------------------------ */
static bool rnn_shape(tbc_infer *cx, tbc_op *op, enum rnn_kind kind) {
	const tbc_type *x = seq_in_type(op, 0), *w = seq_in_type(op, 1), *r = seq_in_type(op, 2);
	int num_dir = rnn_num_dir(op);
	if (!num_dir) return tbc_infer_error(cx, op, "direction must be forward, reverse or bidirectional");
	act_fn acts[2][3];
	const char *msg = tbc_rnn_parse_acts(op, kind, num_dir, acts);
	if (msg) return tbc_infer_error(cx, op, "%s", msg);
	int64_t layout = tbc_attr_int(op, "layout", 0);
	if (layout != 0 && layout != 1) return tbc_infer_error(cx, op, "layout must be 0 or 1, got %lld", (long long)layout);
	if (x->rank >= 0 && x->rank != 3) return tbc_infer_error(cx, op, "X must have rank 3, got %d", x->rank);
	if (w->rank >= 0 && w->rank != 3) return tbc_infer_error(cx, op, "W must have rank 3, got %d", w->rank);
	if (r->rank >= 0 && r->rank != 3) return tbc_infer_error(cx, op, "R must have rank 3, got %d", r->rank);
	if (w->dtype != x->dtype || r->dtype != x->dtype)
		return tbc_infer_error(cx, op, "X, W and R must have the same element type");
	if (!tbc_dtype_is_float(x->dtype)) return tbc_infer_error(cx, op, "X must be a float tensor");
	if (w->rank == 3 && seq_dim_known(w->dims[0]) && w->dims[0].size != num_dir)
		return tbc_infer_error(cx, op, "W's first dim is %lld but direction needs %d", (long long)w->dims[0].size, num_dir);
	tbc_dim hidden;
	int64_t hs = tbc_attr_int(op, "hidden_size", -1);
	if (hs > 0) hidden = seq_dim(hs);
	else if (r->rank == 3) hidden = r->dims[2];
	else hidden = tbc_module_fresh_dim(cx->module);
	if (hs > 0 && r->rank == 3 && seq_dim_known(r->dims[2]) && r->dims[2].size != hs)
		return tbc_infer_error(cx, op, "R's last dim %lld differs from hidden_size %lld", (long long)r->dims[2].size, (long long)hs);
	if (seq_dim_known(hidden) && w->rank == 3 && seq_dim_known(w->dims[1]) &&
	    w->dims[1].size != rnn_n_gates[kind] * hidden.size)
		return tbc_infer_error(cx, op, "W's second dim must be %d * hidden_size", rnn_n_gates[kind]);
	tbc_dim seq, batch;
	if (x->rank == 3) {
		seq = x->dims[layout ? 1 : 0];
		batch = x->dims[layout ? 0 : 1];
	} else {
		seq = tbc_module_fresh_dim(cx->module);
		batch = tbc_module_fresh_dim(cx->module);
	}
	tbc_type *y = seq_out_type(op, 0);
	if (y) {
		y->dtype = x->dtype;
		y->rank = 4;
		y->dims[0] = layout ? batch : seq;
		y->dims[1] = layout ? seq : seq_dim(num_dir);
		y->dims[2] = layout ? seq_dim(num_dir) : batch;
		y->dims[3] = hidden;
	}
	for (int i = 1; i < op->n_outputs; i++) {
		tbc_type *t = seq_out_type(op, i);
		if (!t) continue;
		t->dtype = x->dtype;
		t->rank = 3;
		t->dims[0] = layout ? batch : seq_dim(num_dir);
		t->dims[1] = layout ? seq_dim(num_dir) : batch;
		t->dims[2] = hidden;
	}
	return true;
}

bool tbc_shape_RNN(tbc_infer *cx, tbc_op *op) { return rnn_shape(cx, op, RNN_PLAIN); }
bool tbc_shape_GRU(tbc_infer *cx, tbc_op *op) { return rnn_shape(cx, op, RNN_GRU); }
bool tbc_shape_LSTM(tbc_infer *cx, tbc_op *op) { return rnn_shape(cx, op, RNN_LSTM); }

/* ---- Kernel ---------------------------------------------------------------- */
typedef struct {
	enum rnn_kind kind;
	int64_t S, B, I, H, G; /* sequence, batch, input size, hidden size, gates */
	int D, layout;
	bool reverse_only, has_clip, lbr, input_forget;
	double clip;
	act_fn acts[2][3];
	double *x, *w, *r, *bias, *p, *h0, *c0; /* bias, p, h0, c0 may be NULL */
	int64_t *lens;                          /* NULL: every batch runs S steps */
} rnn_run;

static double rnn_act(const rnn_run *rn, int d, int k, double v) {
	if (rn->has_clip) v = fmin(rn->clip, fmax(-rn->clip, v));
	return act_apply(&rn->acts[d][k], v);
}

/* Row g (0-based, of G*H) of (x_t W^T + Wb), (h R^T + Rb) for direction d. */
static double rnn_xw(const rnn_run *rn, int d, int64_t t, int64_t b, int64_t row) {
	const double *w = rn->w + ((int64_t)d * rn->G * rn->H + row) * rn->I;
	const double *x = rn->x + (rn->layout ? (b * rn->S + t) : (t * rn->B + b)) * rn->I;
	double s = rn->bias ? rn->bias[(int64_t)d * 2 * rn->G * rn->H + row] : 0;
	for (int64_t i = 0; i < rn->I; i++) s += x[i] * w[i];
	return s;
}

static double rnn_hr(const rnn_run *rn, int d, const double *h, int64_t row) {
	const double *r = rn->r + ((int64_t)d * rn->G * rn->H + row) * rn->H;
	double s = rn->bias ? rn->bias[(int64_t)d * 2 * rn->G * rn->H + rn->G * rn->H + row] : 0;
	for (int64_t i = 0; i < rn->H; i++) s += h[i] * r[i];
	return s;
}

/* One time step of direction d, batch b: h (and c) updated in place. */
static void rnn_step(const rnn_run *rn, int d, int64_t t, int64_t b, double *h, double *c, double *tmp) {
	int64_t H = rn->H;
	if (rn->kind == RNN_PLAIN) {
		for (int64_t j = 0; j < H; j++) tmp[j] = rnn_act(rn, d, 0, rnn_xw(rn, d, t, b, j) + rnn_hr(rn, d, h, j));
		memcpy(h, tmp, (size_t)H * sizeof *h);
	} else if (rn->kind == RNN_GRU) {
		/* gates z, r, h */
		double *z = tmp, *rg = tmp + H, *hh = tmp + 2 * H, *rh = tmp + 3 * H;
		for (int64_t j = 0; j < H; j++) {
			z[j] = rnn_act(rn, d, 0, rnn_xw(rn, d, t, b, j) + rnn_hr(rn, d, h, j));
			rg[j] = rnn_act(rn, d, 0, rnn_xw(rn, d, t, b, H + j) + rnn_hr(rn, d, h, H + j));
		}
		for (int64_t j = 0; j < H; j++) rh[j] = rg[j] * h[j];
		for (int64_t j = 0; j < H; j++) {
			double v = rnn_xw(rn, d, t, b, 2 * H + j);
			if (rn->lbr) v += rg[j] * rnn_hr(rn, d, h, 2 * H + j);
			else v += rnn_hr(rn, d, rh, 2 * H + j);
			hh[j] = rnn_act(rn, d, 1, v);
		}
		for (int64_t j = 0; j < H; j++) h[j] = (1 - z[j]) * hh[j] + z[j] * h[j];
	} else {
		/* gates i, o, f, c; peepholes i, o, f */
		const double *p = rn->p ? rn->p + (int64_t)d * 3 * H : NULL;
		double *cn = tmp, *hn = tmp + H;
		for (int64_t j = 0; j < H; j++) {
			double gi = rnn_xw(rn, d, t, b, j) + rnn_hr(rn, d, h, j) + (p ? p[j] * c[j] : 0);
			double gf = rnn_xw(rn, d, t, b, 2 * H + j) + rnn_hr(rn, d, h, 2 * H + j) + (p ? p[2 * H + j] * c[j] : 0);
			double gc = rnn_xw(rn, d, t, b, 3 * H + j) + rnn_hr(rn, d, h, 3 * H + j);
			double i = rnn_act(rn, d, 0, gi);
			double f = rn->input_forget ? 1 - i : rnn_act(rn, d, 0, gf);
			cn[j] = f * c[j] + i * rnn_act(rn, d, 1, gc);
			double go = rnn_xw(rn, d, t, b, H + j) + rnn_hr(rn, d, h, H + j) + (p ? p[H + j] * cn[j] : 0);
			/* The cell state is not clipped before h (as onnxruntime does). */
			hn[j] = rnn_act(rn, d, 0, go) * act_apply(&rn->acts[d][2], cn[j]);
		}
		memcpy(c, cn, (size_t)H * sizeof *c);
		memcpy(h, hn, (size_t)H * sizeof *h);
	}
}

static int64_t rnn_y_index(const rnn_run *rn, int64_t t, int d, int64_t b) {
	return rn->layout ? ((b * rn->S + t) * rn->D + d) * rn->H : ((t * rn->D + d) * rn->B + b) * rn->H;
}

static int64_t rnn_state_index(const rnn_run *rn, int d, int64_t b) {
	return rn->layout ? (b * rn->D + d) * rn->H : ((int64_t)d * rn->B + b) * rn->H;
}

static bool rnn_check_shape(const tbc_tensor *t, int rank, int64_t d0, int64_t d1, int64_t d2) {
	int64_t want[3] = {d0, d1, d2};
	if (t->rank != rank) return false;
	for (int i = 0; i < rank; i++)
		if (t->dims[i] != want[i]) return false;
	return true;
}

static int rnn_interp(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out,
		      enum rnn_kind kind) {
	rnn_run rn;
	memset(&rn, 0, sizeof rn);
	rn.kind = kind;
	rn.G = rnn_n_gates[kind];
	rn.D = rnn_num_dir(op);
	rn.layout = (int)tbc_attr_int(op, "layout", 0);
	rn.reverse_only = !strcmp(tbc_attr_string(op, "direction", "forward"), "reverse");
	rn.lbr = tbc_attr_int(op, "linear_before_reset", 0) != 0;
	rn.input_forget = tbc_attr_int(op, "input_forget", 0) != 0;
	const tbc_attr *clip = tbc_op_attr(op, "clip");
	rn.has_clip = clip != NULL;
	rn.clip = clip ? tbc_attr_float(op, "clip", 0) : 0;
	if (!rn.D || tbc_rnn_parse_acts(op, kind, rn.D, rn.acts))
		return tbc_interp_error(ip, op, "bad direction or activations");
	const tbc_tensor *X = in[0], *W = in[1], *R = in[2];
	const tbc_tensor *Bt = seq_in(op, in, 3), *L = seq_in(op, in, 4), *H0 = seq_in(op, in, 5);
	const tbc_tensor *C0 = kind == RNN_LSTM ? seq_in(op, in, 6) : NULL, *P = kind == RNN_LSTM ? seq_in(op, in, 7) : NULL;
	if (X->rank != 3 || W->rank != 3 || R->rank != 3) return tbc_interp_error(ip, op, "X, W and R must have rank 3");
	rn.S = X->dims[rn.layout ? 1 : 0];
	rn.B = X->dims[rn.layout ? 0 : 1];
	rn.I = X->dims[2];
	rn.H = R->dims[2];
	int64_t hb0 = rn.layout ? rn.B : rn.D, hb1 = rn.layout ? rn.D : rn.B;
	if (!rnn_check_shape(W, 3, rn.D, rn.G * rn.H, rn.I) || !rnn_check_shape(R, 3, rn.D, rn.G * rn.H, rn.H))
		return tbc_interp_error(ip, op, "W or R has the wrong shape for %d direction(s), hidden size %lld",
					rn.D, (long long)rn.H);
	if (Bt && !(Bt->rank == 2 && Bt->dims[0] == rn.D && Bt->dims[1] == 2 * rn.G * rn.H))
		return tbc_interp_error(ip, op, "B must have shape [%d, %lld]", rn.D, (long long)(2 * rn.G * rn.H));
	if (L && !(L->rank == 1 && L->dims[0] == rn.B))
		return tbc_interp_error(ip, op, "sequence_lens must have shape [%lld]", (long long)rn.B);
	if ((H0 && !rnn_check_shape(H0, 3, hb0, hb1, rn.H)) || (C0 && !rnn_check_shape(C0, 3, hb0, hb1, rn.H)))
		return tbc_interp_error(ip, op, "initial_h / initial_c have the wrong shape");
	if (P && !(P->rank == 2 && P->dims[0] == rn.D && P->dims[1] == 3 * rn.H))
		return tbc_interp_error(ip, op, "P must have shape [%d, %lld]", rn.D, (long long)(3 * rn.H));

	int rc = -1;
	tbc_tensor *res[3] = {NULL, NULL, NULL};
	double *h = NULL, *c = NULL, *tmp = NULL;
	rn.x = seq_load_f64(X);
	rn.w = seq_load_f64(W);
	rn.r = seq_load_f64(R);
	rn.bias = Bt ? seq_load_f64(Bt) : NULL;
	rn.p = P ? seq_load_f64(P) : NULL;
	rn.h0 = H0 ? seq_load_f64(H0) : NULL;
	rn.c0 = C0 ? seq_load_f64(C0) : NULL;
	rn.lens = L ? tbc_tensor_i64s(L) : NULL;
	h = calloc((size_t)rn.H + 1, sizeof *h);
	c = calloc((size_t)rn.H + 1, sizeof *c);
	tmp = calloc((size_t)rn.H * 4 + 1, sizeof *tmp);
	if (!rn.x || !rn.w || !rn.r || (Bt && !rn.bias) || (P && !rn.p) || (H0 && !rn.h0) || (C0 && !rn.c0) ||
	    (L && !rn.lens) || !h || !c || !tmp) {
		tbc_interp_error(ip, op, "out of memory");
		goto done;
	}
	for (int64_t b = 0; rn.lens && b < rn.B; b++)
		if (rn.lens[b] < 0 || rn.lens[b] > rn.S) {
			tbc_interp_error(ip, op, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
					 (long long)rn.lens[b], (long long)rn.S);
			goto done;
		}
	int64_t ydims[4] = {rn.layout ? rn.B : rn.S, rn.layout ? rn.S : rn.D, rn.layout ? rn.D : rn.B, rn.H};
	int64_t sdims[3] = {hb0, hb1, rn.H};
	for (int i = 0; i < op->n_outputs && i < 3; i++) {
		if (!op->outputs[i]) continue;
		res[i] = i == 0 ? tbc_interp_new(ip, op, X->dtype, 4, ydims) : tbc_interp_new(ip, op, X->dtype, 3, sdims);
		if (!res[i]) goto done;
	}
	for (int d = 0; d < rn.D; d++) {
		bool backward = rn.reverse_only || d == 1;
		for (int64_t b = 0; b < rn.B; b++) {
			int64_t si = rnn_state_index(&rn, d, b);
			for (int64_t j = 0; j < rn.H; j++) {
				h[j] = rn.h0 ? rn.h0[si + j] : 0;
				c[j] = rn.c0 ? rn.c0[si + j] : 0;
			}
			int64_t len = rn.lens ? rn.lens[b] : rn.S;
			for (int64_t s = 0; s < len; s++) {
				int64_t t = backward ? len - 1 - s : s;
				rnn_step(&rn, d, t, b, h, c, tmp);
				if (res[0])
					for (int64_t j = 0; j < rn.H; j++) tbc_set_f64(res[0], rnn_y_index(&rn, t, d, b) + j, h[j]);
			}
			for (int64_t j = 0; j < rn.H; j++) {
				if (res[1]) tbc_set_f64(res[1], si + j, h[j]);
				if (res[2]) tbc_set_f64(res[2], si + j, c[j]);
			}
		}
	}
	for (int i = 0; i < 3; i++) {
		if (i < op->n_outputs) out[i] = res[i];
		res[i] = NULL;
	}
	rc = 0;
done:
	for (int i = 0; i < 3; i++) tbc_tensor_destroy(res[i]);
	free(rn.x), free(rn.w), free(rn.r), free(rn.bias), free(rn.p), free(rn.h0), free(rn.c0), free(rn.lens);
	free(h), free(c), free(tmp);
	return rc;
}

int tbc_interp_RNN(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return rnn_interp(ip, op, in, out, RNN_PLAIN);
}
int tbc_interp_GRU(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return rnn_interp(ip, op, in, out, RNN_GRU);
}
int tbc_interp_LSTM(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return rnn_interp(ip, op, in, out, RNN_LSTM);
}
