/* Decomposition: composite ops become ops the backends already lower.
 *
 *   Attention                   -> Reshape/Transpose, Concat (KV cache), Mul
 *                                  (scale), MatMul, Tanh (softcap), Where/Add
 *                                  (masks), Softmax, MatMul
 *   RotaryEmbedding             -> Gather (position ids), Slice, Mul, Sub/Add,
 *                                  Concat, Reshape
 *   SoftmaxCrossEntropyLoss     -> LogSoftmax + NegativeLogLikelihoodLoss
 *   NegativeLogLikelihoodLoss   -> Equal/Where (ignore_index), Unsqueeze,
 *                                  GatherElements, Squeeze, Neg, Gather and
 *                                  Mul (weights), ReduceSum/ReduceMean, Div
 *   CausalConvWithState         -> Concat/Pad, Conv (depthwise), Swish, Slice
 *   Einsum                      -> ReduceSum, Transpose, Reshape, MatMul,
 *                                  strided Slice (diagonals)
 *   Det (n <= 3)                -> Reshape, Slice, Mul, Sub, Add, Squeeze
 *
 * Requires: a verified, inferred module.  Guarantees: every op it rewrites
 * is replaced by ops computing the same results (up to floating-point
 * rounding: the interpreter's kernels compute composite ops in double), each
 * new op inferred by its own shape rule; the replaced results keep their
 * names and types exactly.  A case it cannot express exactly (a symbolic dim
 * where a constant shape is needed, nonpad_kv_seqlen with a KV cache, Q and
 * K of different types) stays as it is, and lowering reports it.  If the new ops' types
 * differ from the old results' types in any way, the rewrite is undone.
 *
 * The pass runs at every optimization level, first: the CPU backend has no
 * kernels for these ops, so decomposing them is needed for correctness, not
 * only speed.  See docs/passes.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "passes/util.h"

#define DX_MAX_NEW 128

typedef struct dx {
	tbc_module *m;
	tbc_graph *g;
	tbc_op *at;      /* the op being replaced: new ops go before it */
	tbc_infer cx;    /* diagnostics go to a scratch list */
	tbc_op *made[DX_MAX_NEW];
	int n_made;
	bool failed;
} dx;

/* ---- Building ---------------------------------------------------------------- */

static tbc_op *mk(dx *x, tbc_opcode code, int n_in, tbc_value *const *in, int n_out) {
	if (x->failed || x->n_made == DX_MAX_NEW) {
		x->failed = true;
		return NULL;
	}
	for (int i = 0; i < n_in; i++)
		if (!in[i] && i < tbc_ops[code].min_inputs) {
			x->failed = true;
			return NULL;
		}
	tbc_op *op = tbc_op_new(x->g, code, x->at->name, n_in, in, n_out);
	if (!op) {
		x->failed = true;
		return NULL;
	}
	pass_unlink(op);
	pass_insert_before(op, x->at);
	x->made[x->n_made++] = op;
	return op;
}

static void attr_i(dx *x, tbc_op *op, const char *name, int64_t v) {
	if (!op) return;
	tbc_attr *a = tbc_op_add_attr(op, name, TBC_ATTR_INT);
	if (!a) x->failed = true;
	else a->i = v;
}

static void attr_ints(dx *x, tbc_op *op, const char *name, int n, const int64_t *v) {
	if (!op) return;
	tbc_attr *a = tbc_op_add_attr(op, name, TBC_ATTR_INTS);
	int64_t *p = a ? tbc_arena_array(x->m->arena, (size_t)n, sizeof *p) : NULL;
	if (!p) {
		x->failed = true;
		return;
	}
	memcpy(p, v, (size_t)n * sizeof *p);
	a->n = n;
	a->ints = p;
}

/* Infers op; its first result. */
static tbc_value *fin(dx *x, tbc_op *op) {
	if (!op || x->failed) {
		x->failed = true;
		return NULL;
	}
	if (!tbc_infer_op(&x->cx, op)) {
		x->failed = true;
		return NULL;
	}
	return op->outputs[0];
}

static tbc_value *op1(dx *x, tbc_opcode c, tbc_value *a) {
	tbc_value *in[1] = {a};
	return fin(x, mk(x, c, 1, in, 1));
}
static tbc_value *op2(dx *x, tbc_opcode c, tbc_value *a, tbc_value *b) {
	tbc_value *in[2] = {a, b};
	return fin(x, mk(x, c, 2, in, 1));
}
static tbc_value *op3(dx *x, tbc_opcode c, tbc_value *a, tbc_value *b, tbc_value *d) {
	tbc_value *in[3] = {a, b, d};
	return fin(x, mk(x, c, 3, in, 1));
}

static tbc_value *constant(dx *x, tbc_dtype dt, int rank, const int64_t *dims, const double *f, const int64_t *i) {
	if (x->failed) return NULL;
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	if (!t) {
		x->failed = true;
		return NULL;
	}
	for (int64_t k = 0; k < t->numel; k++) {
		if (f) tbc_store_f64(dt, t->data, (size_t)k, f[k]);
		else tbc_store_i64(dt, t->data, (size_t)k, i[k]);
	}
	tbc_value *v = tbc_graph_add_const(x->g, NULL, t);
	tbc_tensor_destroy(t);
	if (!v) x->failed = true;
	return v;
}

static tbc_value *scalar(dx *x, tbc_dtype dt, double v) { return constant(x, dt, 0, NULL, &v, NULL); }
static tbc_value *scalar_i(dx *x, tbc_dtype dt, int64_t v) { return constant(x, dt, 0, NULL, NULL, &v); }
static tbc_value *ints(dx *x, int n, const int64_t *v) {
	int64_t d[1] = {n};
	return constant(x, TBC_DT_I64, 1, d, NULL, v);
}

static tbc_value *reshape(dx *x, tbc_value *a, int n, const int64_t *shape) {
	return op2(x, TBC_OP_Reshape, a, ints(x, n, shape));
}
static tbc_value *transpose(dx *x, tbc_value *a, int n, const int64_t *perm) {
	tbc_value *in[1] = {a};
	tbc_op *op = mk(x, TBC_OP_Transpose, 1, in, 1);
	attr_ints(x, op, "perm", n, perm);
	return fin(x, op);
}
static tbc_value *with_axis(dx *x, tbc_opcode c, int n_in, tbc_value *const *in, const char *name, int64_t axis) {
	tbc_op *op = mk(x, c, n_in, in, 1);
	attr_i(x, op, name, axis);
	return fin(x, op);
}
static tbc_value *unsqueeze(dx *x, tbc_value *a, int64_t axis) { return op2(x, TBC_OP_Unsqueeze, a, ints(x, 1, &axis)); }
static tbc_value *concat(dx *x, tbc_value *a, tbc_value *b, int64_t axis) {
	tbc_value *in[2] = {a, b};
	return with_axis(x, TBC_OP_Concat, 2, in, "axis", axis);
}
/* data[start:end:step] along axis. */
static tbc_value *slice(dx *x, tbc_value *a, int64_t axis, int64_t start, int64_t end, int64_t step) {
	tbc_value *in[5] = {a, ints(x, 1, &start), ints(x, 1, &end), ints(x, 1, &axis), ints(x, 1, &step)};
	return fin(x, mk(x, TBC_OP_Slice, 5, in, 1));
}
/* Reduce over the given axes (NULL/0: all) with keepdims. */
static tbc_value *reduce(dx *x, tbc_opcode c, tbc_value *a, int n_axes, const int64_t *axes, int64_t keepdims) {
	tbc_value *in[2] = {a, n_axes ? ints(x, n_axes, axes) : NULL};
	tbc_op *op = mk(x, c, n_axes ? 2 : 1, in, 1);
	attr_i(x, op, "keepdims", keepdims);
	return fin(x, op);
}

static bool dim_static(tbc_dim d) { return d.sym == NULL && d.size >= 0; }

/* Replaces op's wanted results by new[i] (which must have exactly the same
 * types), removes op; or, when anything failed, removes the new ops and
 * leaves op alone.  Returns false only on a broken invariant. */
static bool commit(dx *x, tbc_value *const *nv) {
	tbc_op *op = x->at;
	bool ok = !x->failed;
	for (int i = 0; ok && i < op->n_outputs; i++)
		if (op->outputs[i]) ok = nv[i] && pass_same_type(&op->outputs[i]->type, &nv[i]->type);
	if (!ok) {
		for (int k = x->n_made - 1; k >= 0; k--) {
			tbc_op *o = x->made[k];
			for (int i = 0; i < o->n_outputs; i++)
				if (o->outputs[i] && o->outputs[i]->uses) return false;
			pass_remove_op(o);
		}
		x->n_made = 0;
		return true;
	}
	const char *names[16] = {0};
	for (int i = 0; i < op->n_outputs && i < 16; i++)
		if (op->outputs[i]) {
			names[i] = op->outputs[i]->name;
			pass_replace_value(x->m, op->outputs[i], nv[i]);
		}
	pass_remove_op(op);
	for (int i = 0; i < 16; i++)
		if (names[i]) nv[i]->name = names[i];
	return true;
}

static tbc_value *in_at(const tbc_op *op, int i) { return i < op->n_inputs ? op->inputs[i] : NULL; }

/* ---- NegativeLogLikelihoodLoss ----------------------------------------------
 * loss[n, d...] = -input[n, t, d...] * w[t] with t = target[n, d...]; 0 where
 * t == ignore_index (t is replaced by 0 there before gathering).  mean divides
 * the sum by the sum of the weights taken (the count without weights). */
static tbc_value *nll(dx *x, tbc_value *X, tbc_value *T, tbc_value *W, const tbc_op *src) {
	tbc_dtype ft = X->type.dtype, it = T->type.dtype;
	const char *red = tbc_attr_string(src, "reduction", "mean");
	bool has_ii = tbc_op_attr(src, "ignore_index") != NULL;
	int64_t ii = tbc_attr_int(src, "ignore_index", 0);
	if (X->type.rank < 2 || !tbc_dtype_is_float(ft) || (W && W->type.dtype != ft)) {
		x->failed = true;
		return NULL;
	}
	tbc_value *mask = NULL, *t = T;
	if (has_ii) {
		mask = op2(x, TBC_OP_Equal, T, scalar_i(x, it, ii));
		t = op3(x, TBC_OP_Where, mask, scalar_i(x, it, 0), T);
	}
	tbc_value *in[2] = {X, unsqueeze(x, t, 1)};
	tbc_value *g = with_axis(x, TBC_OP_GatherElements, 2, in, "axis", 1);
	int64_t one = 1;
	tbc_value *loss = op1(x, TBC_OP_Neg, op2(x, TBC_OP_Squeeze, g, ints(x, 1, &one)));
	tbc_value *w = NULL;
	if (W) {
		tbc_value *gin[2] = {W, t};
		w = with_axis(x, TBC_OP_Gather, 2, gin, "axis", 0);
		if (mask) w = op3(x, TBC_OP_Where, mask, scalar(x, ft, 0), w);
	} else if (mask) {
		tbc_value *zero = scalar(x, ft, 0), *one = scalar(x, ft, 1);
		w = op3(x, TBC_OP_Where, mask, zero, one);
	}
	if (w) loss = op2(x, TBC_OP_Mul, loss, w);
	if (!strcmp(red, "none")) return loss;
	if (!strcmp(red, "sum")) return reduce(x, TBC_OP_ReduceSum, loss, 0, NULL, 0);
	if (strcmp(red, "mean")) {
		x->failed = true;
		return NULL;
	}
	if (!w) return reduce(x, TBC_OP_ReduceMean, loss, 0, NULL, 0);
	tbc_value *num = reduce(x, TBC_OP_ReduceSum, loss, 0, NULL, 0);
	tbc_value *den = reduce(x, TBC_OP_ReduceSum, w, 0, NULL, 0);
	return op2(x, TBC_OP_Div, num, den);
}

static bool decompose_nll(dx *x) {
	const tbc_op *op = x->at;
	tbc_value *nv[1] = {nll(x, op->inputs[0], op->inputs[1], in_at(op, 2), op)};
	return commit(x, nv);
}

static bool decompose_sce(dx *x) {
	const tbc_op *op = x->at;
	tbc_value *in[1] = {op->inputs[0]};
	tbc_value *logp = with_axis(x, TBC_OP_LogSoftmax, 1, in, "axis", 1);
	tbc_value *nv[2] = {logp ? nll(x, logp, op->inputs[1], in_at(op, 2), op) : NULL, logp};
	return commit(x, nv);
}

/* ---- RotaryEmbedding --------------------------------------------------------
 * On a [B, S, H, D] view (3-D input) or [B, H, S, D]: the first rd elements
 * of each head are rotated pairwise by (cos, sin) of the position, as halves
 * (x[:h], x[h:rd]) or interleaved (x[0::2], x[1::2]); the rest pass. */
static bool decompose_rotary(dx *x) {
	const tbc_op *op = x->at;
	tbc_value *X = op->inputs[0], *C = op->inputs[1], *S = op->inputs[2], *PI = in_at(op, 3);
	const tbc_type *xt = &X->type;
	tbc_dtype dt = xt->dtype;
	int64_t H, D;
	if (C->type.dtype != dt || S->type.dtype != dt || (xt->rank != 3 && xt->rank != 4)) return true;
	if (xt->rank == 4) {
		if (!dim_static(xt->dims[1]) || !dim_static(xt->dims[3])) return true;
		H = xt->dims[1].size, D = xt->dims[3].size;
	} else {
		H = tbc_attr_int(op, "num_heads", 0);
		if (!dim_static(xt->dims[2]) || H <= 0 || xt->dims[2].size % H) return true;
		D = xt->dims[2].size / H;
	}
	int64_t rd = tbc_attr_int(op, "rotary_embedding_dim", 0);
	if (rd == 0) rd = D;
	if (rd < 0 || rd > D || rd % 2) return true;
	int64_t half = rd / 2;
	const tbc_type *ct = &C->type;
	if (ct->rank < 1 || !dim_static(ct->dims[ct->rank - 1]) || ct->dims[ct->rank - 1].size != half) return true;
	if (ct->rank != (PI ? 2 : 3)) return true;
	bool inter = tbc_attr_int(op, "interleaved", 0) != 0;

	tbc_value *X4 = X;
	int64_t cax = 1; /* where the cos/sin [B, S, half] gain the head axis */
	if (xt->rank == 3) {
		int64_t shape[4] = {0, 0, H, D};
		X4 = reshape(x, X, 4, shape);
		cax = 2;
	}
	tbc_value *c = C, *s = S;
	if (PI) {
		tbc_value *ci[2] = {C, PI}, *si[2] = {S, PI};
		c = with_axis(x, TBC_OP_Gather, 2, ci, "axis", 0);
		s = with_axis(x, TBC_OP_Gather, 2, si, "axis", 0);
	}
	c = unsqueeze(x, c, cax);
	s = unsqueeze(x, s, cax);
	tbc_value *x1 = inter ? slice(x, X4, 3, 0, rd, 2) : slice(x, X4, 3, 0, half, 1);
	tbc_value *x2 = inter ? slice(x, X4, 3, 1, rd, 2) : slice(x, X4, 3, half, rd, 1);
	tbc_value *cx1 = op2(x, TBC_OP_Mul, c, x1), *sx2 = op2(x, TBC_OP_Mul, s, x2);
	tbc_value *o1 = op2(x, TBC_OP_Sub, cx1, sx2);
	tbc_value *sx1 = op2(x, TBC_OP_Mul, s, x1), *cx2 = op2(x, TBC_OP_Mul, c, x2);
	tbc_value *o2 = op2(x, TBC_OP_Add, sx1, cx2);
	tbc_value *rot;
	if (inter) {
		int64_t shape[4] = {0, 0, 0, rd};
		tbc_value *u1 = unsqueeze(x, o1, 4), *u2 = unsqueeze(x, o2, 4);
		rot = reshape(x, concat(x, u1, u2, 4), 4, shape);
	} else {
		rot = concat(x, o1, o2, 3);
	}
	if (rd < D) rot = concat(x, rot, slice(x, X4, 3, rd, D, 1), 3);
	if (xt->rank == 3) {
		int64_t shape[3] = {0, 0, H * D};
		rot = reshape(x, rot, 3, shape);
	}
	tbc_value *nv[1] = {rot};
	return commit(x, nv);
}

/* The bias of nonpad_kv_seqlen: key j of batch b is padding when
 * j >= nonpad[b]; the causal / window masks then count from the offset
 * nonpad[b] - Sq, so they depend on the data too:
 *   diff[b, i, j] = i + nonpad[b] - Sq - j. */
static tbc_value *nonpad_bias(dx *x, tbc_value *bias, tbc_value *NP, tbc_dtype dt, int64_t Sq, int64_t T, bool causal,
			      int64_t lw, int64_t rw) {
	tbc_dtype it = NP->type.dtype;
	int64_t axes[3] = {1, 2, 3};
	tbc_value *np = op2(x, TBC_OP_Unsqueeze, NP, ints(x, 3, axes)); /* [B, 1, 1, 1] */
	int64_t *iv = malloc((size_t)(Sq * T + 1) * sizeof *iv);
	if (!iv) {
		x->failed = true;
		return NULL;
	}
	for (int64_t j = 0; j < T; j++) iv[j] = j;
	int64_t tdim[1] = {T};
	tbc_value *ok = op2(x, TBC_OP_Less, constant(x, it, 1, tdim, NULL, iv), np); /* [B, 1, 1, T] */
	if (causal || lw >= 0 || rw >= 0) {
		for (int64_t i = 0; i < Sq; i++)
			for (int64_t j = 0; j < T; j++) iv[i * T + j] = j - i;
		int64_t dims[2] = {Sq, T};
		tbc_value *shifted = op2(x, TBC_OP_Sub, np, scalar_i(x, it, Sq));
		tbc_value *offsets = constant(x, it, 2, dims, NULL, iv);
		tbc_value *diff = op2(x, TBC_OP_Sub, shifted, offsets);
		if (causal) ok = op2(x, TBC_OP_And, ok, op2(x, TBC_OP_GreaterOrEqual, diff, scalar_i(x, it, 0)));
		if (lw >= 0) ok = op2(x, TBC_OP_And, ok, op2(x, TBC_OP_LessOrEqual, diff, scalar_i(x, it, lw)));
		if (rw >= 0) ok = op2(x, TBC_OP_And, ok, op2(x, TBC_OP_GreaterOrEqual, diff, scalar_i(x, it, -rw)));
	}
	free(iv);
	tbc_value *zero = scalar(x, dt, 0), *minus_inf = scalar(x, dt, -INFINITY);
	tbc_value *nb = op3(x, TBC_OP_Where, ok, zero, minus_inf);
	return bias ? op2(x, TBC_OP_Add, bias, nb) : nb;
}

/* ---- Attention ----------------------------------------------------------------
 * As onnx/reference/ops/op_attention.py and ir/kernels/seq_attention.c:
 *   K, V      = Concat(past, new) on the sequence axis (present outputs)
 *   scores    = (Q * sqrt(scale)) @ (K * sqrt(scale))^T, GQA by folding the
 *               q heads of one kv head into the rows: [B, Hkv, g*Sq, D]
 *   softcap   = c * tanh(scores / c)
 *   bias      = attn_mask (bool -> 0 / -inf, padded with -inf up to the key
 *               length) + the causal / window mask (a constant [Sq, T])
 *   probs     = Softmax(scores + bias), zero on rows whose bias is all -inf
 *   Y         = probs @ V, heads merged back for 3-D inputs. */
static bool decompose_attention(dx *x) {
	const tbc_op *op = x->at;
	tbc_value *Q = op->inputs[0], *K = op->inputs[1], *V = op->inputs[2];
	tbc_value *M = in_at(op, 3), *PK = in_at(op, 4), *PV = in_at(op, 5);
	tbc_value *NP = in_at(op, 6);
	const tbc_type *qt = &Q->type, *kt = &K->type, *vt = &V->type;
	tbc_dtype dt = qt->dtype;
	int rank = qt->rank;
	if ((rank != 3 && rank != 4) || kt->rank != rank || vt->rank != rank) return true;
	if (kt->dtype != dt || vt->dtype != dt || !tbc_dtype_is_float(dt)) return true;
	if ((PK == NULL) != (PV == NULL) || (NP && PK)) return true;
	if (NP && (NP->type.rank != 1 || (NP->type.dtype != TBC_DT_I64 && NP->type.dtype != TBC_DT_I32))) return true;
	for (int i = 1; i < rank; i++)
		if (!dim_static(qt->dims[i]) || !dim_static(kt->dims[i]) || !dim_static(vt->dims[i])) return true;
	int64_t Hq, Hkv, Sq, Skv, D, Dv, P = 0;
	if (rank == 3) {
		Hq = tbc_attr_int(op, "q_num_heads", 0), Hkv = tbc_attr_int(op, "kv_num_heads", 0);
		if (Hq <= 0 || Hkv <= 0 || qt->dims[2].size % Hq || kt->dims[2].size % Hkv || vt->dims[2].size % Hkv) return true;
		Sq = qt->dims[1].size, Skv = kt->dims[1].size;
		D = qt->dims[2].size / Hq, Dv = vt->dims[2].size / Hkv;
		if (kt->dims[2].size / Hkv != D) return true;
	} else {
		Hq = qt->dims[1].size, Hkv = kt->dims[1].size, Sq = qt->dims[2].size, Skv = kt->dims[2].size;
		D = qt->dims[3].size, Dv = vt->dims[3].size;
		if (kt->dims[3].size != D || vt->dims[1].size != Hkv) return true;
	}
	if (Hkv <= 0 || Hq % Hkv) return true;
	if (PK) {
		const tbc_type *pt = &PK->type;
		if (pt->rank != 4 || PV->type.rank != 4 || pt->dtype != dt || PV->type.dtype != dt) return true;
		if (!dim_static(pt->dims[2])) return true;
		P = pt->dims[2].size;
	}
	int64_t T = P + Skv, g = Hq / Hkv;
	int64_t mode = tbc_attr_int(op, "qk_matmul_output_mode", 0);
	bool causal = tbc_attr_int(op, "is_causal", 0) != 0;
	double softcap = tbc_attr_float(op, "softcap", 0);
	int64_t lw = tbc_attr_int(op, "left_window_size", -1), rw = tbc_attr_int(op, "right_window_size", -1);
	double scale = tbc_op_attr(op, "scale") ? tbc_attr_float(op, "scale", 1) : 1.0 / sqrt((double)D);
	if (mode < 0 || mode > 3) return true;
	if (M) {
		const tbc_type *mt = &M->type;
		if (mt->rank < 1 || mt->rank > 4 || !dim_static(mt->dims[mt->rank - 1]) || mt->dims[mt->rank - 1].size > T)
			return true;
		if (mt->dtype != TBC_DT_BOOL && mt->dtype != dt) return true;
	}

	/* Q, K, V as [B, H, S, D]. */
	static const int64_t swap12[4] = {0, 2, 1, 3};
	tbc_value *q = Q, *k = K, *v = V;
	if (rank == 3) {
		int64_t qs[4] = {0, 0, Hq, D}, ks[4] = {0, 0, Hkv, D}, vs[4] = {0, 0, Hkv, Dv};
		q = transpose(x, reshape(x, Q, 4, qs), 4, swap12);
		k = transpose(x, reshape(x, K, 4, ks), 4, swap12);
		v = transpose(x, reshape(x, V, 4, vs), 4, swap12);
	}
	if (PK) {
		k = concat(x, PK, k, 2);
		v = concat(x, PV, v, 2);
	}
	tbc_value *present_k = k, *present_v = v;
	tbc_value *sqs = scalar(x, dt, sqrt(scale));
	q = op2(x, TBC_OP_Mul, q, sqs);
	static const int64_t swap23[4] = {0, 1, 3, 2};
	tbc_value *kT = transpose(x, op2(x, TBC_OP_Mul, k, sqs), 4, swap23);
	if (g > 1) {
		int64_t s[4] = {0, Hkv, g * Sq, D};
		q = reshape(x, q, 4, s);
	}
	tbc_value *scores = op2(x, TBC_OP_MatMul, q, kT);
	if (g > 1) {
		int64_t s[4] = {0, Hq, Sq, T};
		scores = reshape(x, scores, 4, s);
	}
	if (softcap > 0) {
		tbc_value *c = scalar(x, dt, softcap);
		scores = op2(x, TBC_OP_Mul, op1(x, TBC_OP_Tanh, op2(x, TBC_OP_Div, scores, c)), c);
	}
	tbc_value *raw = scores;

	/* The additive bias. */
	tbc_value *bias = NULL;
	if (M) {
		bias = M;
		if (M->type.dtype == TBC_DT_BOOL) {
			tbc_value *zero = scalar(x, dt, 0), *minus_inf = scalar(x, dt, -INFINITY);
			bias = op3(x, TBC_OP_Where, M, zero, minus_inf);
		}
		int64_t Lm = M->type.dims[M->type.rank - 1].size;
		if (Lm < T) {
			int r = M->type.rank;
			int64_t pads[8] = {0};
			pads[2 * r - 1] = T - Lm;
			tbc_value *in[3] = {bias, ints(x, 2 * r, pads), scalar(x, dt, -INFINITY)};
			bias = fin(x, mk(x, TBC_OP_Pad, 3, in, 1));
		}
	}
	if (NP) {
		bias = nonpad_bias(x, bias, NP, dt, Sq, T, causal, lw, rw);
	} else if (causal || lw >= 0 || rw >= 0) {
		int64_t offset = P, dims[2] = {Sq, T};
		double *mv = malloc((size_t)(Sq * T + 1) * sizeof *mv);
		if (!mv) return false;
		for (int64_t i = 0; i < Sq; i++)
			for (int64_t j = 0; j < T; j++) {
				int64_t diff = i + offset - j;
				bool off = (causal && diff < 0) || (lw >= 0 && diff > lw) || (rw >= 0 && -diff > rw);
				mv[i * T + j] = off ? -INFINITY : 0;
			}
		tbc_value *cm = constant(x, dt, 2, dims, mv, NULL);
		free(mv);
		bias = bias ? op2(x, TBC_OP_Add, bias, cm) : cm;
	}
	if (bias) scores = op2(x, TBC_OP_Add, scores, bias);
	tbc_value *biased = scores;
	tbc_value *sin[1] = {scores};
	tbc_value *probs = with_axis(x, TBC_OP_Softmax, 1, sin, "axis", -1);
	if (M || NP) {
		/* A row with no attendable key gives zeros, not NaN. */
		int64_t last = -1;
		tbc_value *row_max = reduce(x, TBC_OP_ReduceMax, bias, 1, &last, 1);
		tbc_value *none = op2(x, TBC_OP_Equal, row_max, scalar(x, dt, -INFINITY));
		probs = op3(x, TBC_OP_Where, none, scalar(x, dt, 0), probs);
	}
	tbc_value *p = probs;
	if (g > 1) {
		int64_t s[4] = {0, Hkv, g * Sq, T};
		p = reshape(x, p, 4, s);
	}
	tbc_value *y = op2(x, TBC_OP_MatMul, p, v);
	if (g > 1) {
		int64_t s[4] = {0, Hq, Sq, Dv};
		y = reshape(x, y, 4, s);
	}
	if (rank == 3) {
		int64_t s[3] = {0, 0, Hq * Dv};
		y = reshape(x, transpose(x, y, 4, swap12), 3, s);
	}
	/* qk output: modes 0 and 1 the (softcapped) scores, 2 with the bias, 3 the
	 * probabilities (as the interpreter's kernel). */
	tbc_value *nv[4] = {y, present_k, present_v, mode == 3 ? probs : mode == 2 ? biased : raw};
	return commit(x, nv);
}

/* ---- CausalConvWithState --------------------------------------------------
 * seq = [past_state (or k-1 zeros: Pad), input] on the time axis; output =
 * the depthwise Conv (group = channels) of seq, then Swish (silu); present
 * state = the last k-1 steps of seq (Slice).  Needs k and the channel count
 * static. */
static bool decompose_causal_conv(dx *x) {
	const tbc_op *op = x->at;
	tbc_value *X = op->inputs[0], *W = op->inputs[1], *Bv = in_at(op, 2), *P = in_at(op, 3);
	const tbc_type *xt = &X->type, *wt = &W->type;
	const char *act = tbc_attr_string(op, "activation", "none");
	bool silu = !strcmp(act, "silu") || !strcmp(act, "swish");
	if (xt->rank != 3 || wt->rank != 3 || !dim_static(wt->dims[0]) || !dim_static(wt->dims[2]) ||
	    wt->dims[2].size < 1 || (!silu && strcmp(act, "none"))) {
		x->failed = true;
		return commit(x, (tbc_value *[2]){NULL, NULL});
	}
	int64_t C = wt->dims[0].size, K = wt->dims[2].size;
	tbc_value *seq = X;
	if (P) seq = concat(x, P, X, 2);
	else if (K > 1) {
		int64_t pads[6] = {0, 0, K - 1, 0, 0, 0};
		seq = op2(x, TBC_OP_Pad, X, ints(x, 6, pads));
	}
	tbc_value *cin[3] = {seq, W, Bv};
	tbc_op *conv = mk(x, TBC_OP_Conv, Bv ? 3 : 2, cin, 1);
	attr_i(x, conv, "group", C);
	tbc_value *y = fin(x, conv);
	if (silu) y = op1(x, TBC_OP_Swish, y);
	tbc_value *st = NULL;
	if (op->n_outputs > 1 && op->outputs[1])
		st = K > 1 ? slice(x, seq, 2, -(K - 1), INT64_MAX, 1) : slice(x, seq, 2, INT64_MAX, INT64_MAX, 1);
	tbc_value *nv[2] = {y, st};
	return commit(x, nv);
}

/* ---- Einsum ------------------------------------------------------------------
 * Operands are contracted pairwise, left to right.  Before each step, labels
 * no later operand or the output needs are summed out (ReduceSum); a pair
 * becomes one batched MatMul: A as [batch, kept-A, contracted], B as [batch,
 * contracted, kept-B] (Transpose, Reshape), the product split back
 * (Reshape).  The result is transposed to the output's order.  Ellipsis dims
 * are labels of their own (right-aligned, broadcast by MatMul).  A label
 * repeated within one operand takes the diagonal first (strided Slice of
 * the two dims merged).  A group of dims the Reshapes cannot write with
 * constants (two symbolic dims, a symbolic diagonal) is left alone. */
#define EIN_MAX_OPS 8
typedef struct eterm {
	int n;
	int l[TBC_MAX_RANK];   /* label codes: a letter, or 1..E for ellipsis dims */
	tbc_dim d[TBC_MAX_RANK];
} eterm;

static int ein_find(const eterm *t, int lab) {
	for (int i = 0; i < t->n; i++)
		if (t->l[i] == lab) return i;
	return -1;
}

/* Parses [s, e) with rank dims (-1: output); E: ellipsis dims in all. */
static bool ein_term(const char *s, const char *e, int rank, int E, bool dup_ok, eterm *t) {
	int letters = 0;
	bool ell = false;
	for (const char *p = s; p < e; p++) {
		if (*p == '.') {
			if (ell || e - p < 3 || p[1] != '.' || p[2] != '.') return false;
			ell = true;
			p += 2;
		} else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) letters++;
		else return false;
	}
	int ne = rank < 0 ? E : rank - letters;
	if (ne < 0 || (!ell && ne != 0) || letters + ne > TBC_MAX_RANK) return false;
	t->n = 0;
	for (const char *p = s; p < e; p++) {
		if (*p == '.') {
			for (int k = 0; k < ne; k++) t->l[t->n++] = E - ne + 1 + k;
			p += 2;
		} else t->l[t->n++] = *p;
	}
	for (int i = 0; i < t->n && !dup_ok; i++)
		if (ein_find(t, t->l[i]) != i) return false; /* a repeated output label */
	return true;
}

/* Takes the diagonals of the labels repeated in t (static dims n): the two
 * dims moved last (Transpose), merged (Reshape to n*n), every (n+1)-th
 * element (Slice); the label then appears once, last. */
static tbc_value *ein_diagonal(dx *x, tbc_value *v, eterm *t) {
	for (int p = 0; v && p < t->n; p++) {
		int q = -1;
		for (int j = p + 1; j < t->n && q < 0; j++)
			if (t->l[j] == t->l[p]) q = j;
		if (q < 0) continue;
		if (!dim_static(t->d[p]) || !dim_static(t->d[q]) || t->d[p].size != t->d[q].size) {
			x->failed = true;
			return NULL;
		}
		int64_t n = t->d[p].size, perm[TBC_MAX_RANK], shape[TBC_MAX_RANK];
		eterm r = {0};
		int m = 0;
		bool id = true;
		for (int i = 0; i < t->n; i++)
			if (i != p && i != q) {
				id &= i == m;
				perm[m++] = i;
				r.l[r.n] = t->l[i];
				r.d[r.n++] = t->d[i];
			}
		perm[m] = p;
		perm[m + 1] = q;
		id &= p == m && q == m + 1;
		if (!id) v = transpose(x, v, t->n, perm);
		for (int i = 0; i < m; i++) shape[i] = 0;
		shape[m] = n * n;
		v = slice(x, reshape(x, v, m + 1, shape), m, 0, INT64_MAX, n + 1);
		r.l[r.n] = t->l[p];
		r.d[r.n++] = t->d[p];
		*t = r;
		p = -1;
	}
	return v;
}

/* ReduceSum over the labels of t not in keep (n_keep terms). */
static tbc_value *ein_sum_out(dx *x, tbc_value *v, eterm *t, const eterm *const *keep, int n_keep) {
	int64_t axes[TBC_MAX_RANK];
	int na = 0;
	eterm r = {0};
	for (int i = 0; i < t->n; i++) {
		bool kept = false;
		for (int k = 0; k < n_keep && !kept; k++) kept = ein_find(keep[k], t->l[i]) >= 0;
		if (kept) {
			r.l[r.n] = t->l[i];
			r.d[r.n++] = t->d[i];
		} else axes[na++] = i;
	}
	if (!na) return v;
	*t = r;
	return reduce(x, TBC_OP_ReduceSum, v, na, axes, 0);
}

/* The shape entry for a group of dims: their product, or -1 for one
 * symbolic dim (used at most once per shape: *minus). */
static int64_t ein_group(dx *x, const tbc_dim *d, int n, bool *minus) {
	int64_t p = 1;
	for (int i = 0; i < n; i++) {
		if (!dim_static(d[i])) {
			if (n != 1 || *minus) x->failed = true;
			*minus = true;
			return -1;
		}
		p *= d[i].size;
	}
	return p;
}

/* Transposes v (term t) to the labels order[0..n) (a permutation of t). */
static tbc_value *ein_permute(dx *x, tbc_value *v, const eterm *t, const int *order, int n) {
	int64_t perm[TBC_MAX_RANK];
	bool id = true;
	for (int i = 0; i < n; i++) {
		perm[i] = ein_find(t, order[i]);
		id &= perm[i] == i;
	}
	return id ? v : transpose(x, v, n, perm);
}

static tbc_value *ein_pair(dx *x, tbc_value *A, const eterm *ta, tbc_value *B, const eterm *tb, const eterm *const *keep,
			   int nk, eterm *out) {
	int bat[TBC_MAX_RANK], ak[TBC_MAX_RANK], bk[TBC_MAX_RANK], con[TBC_MAX_RANK];
	tbc_dim batd[TBC_MAX_RANK], akd[TBC_MAX_RANK], bkd[TBC_MAX_RANK], cond[TBC_MAX_RANK];
	int nb = 0, na = 0, nbk = 0, nc = 0;
	/* Labels in both are batch when a keep term (the output, a later
	 * operand) holds them, else contracted. */
	for (int i = 0; i < ta->n; i++) {
		int j = ein_find(tb, ta->l[i]);
		if (j < 0) ak[na] = ta->l[i], akd[na++] = ta->d[i];
		else {
			bool kept = false;
			for (int k = 0; k < nk && !kept; k++) kept = ein_find(keep[k], ta->l[i]) >= 0;
			if (kept) bat[nb] = ta->l[i], batd[nb++] = ta->d[i];
			else con[nc] = ta->l[i], cond[nc++] = ta->d[i];
		}
	}
	for (int j = 0; j < tb->n; j++)
		if (ein_find(ta, tb->l[j]) < 0) bk[nbk] = tb->l[j], bkd[nbk++] = tb->d[j];
	int oa[TBC_MAX_RANK], ob[TBC_MAX_RANK], n = 0;
	for (int i = 0; i < nb; i++) oa[n++] = bat[i];
	for (int i = 0; i < na; i++) oa[n++] = ak[i];
	for (int i = 0; i < nc; i++) oa[n++] = con[i];
	n = 0;
	for (int i = 0; i < nb; i++) ob[n++] = bat[i];
	for (int i = 0; i < nc; i++) ob[n++] = con[i];
	for (int i = 0; i < nbk; i++) ob[n++] = bk[i];
	A = ein_permute(x, A, ta, oa, ta->n);
	B = ein_permute(x, B, tb, ob, tb->n);
	int64_t sa[TBC_MAX_RANK + 2], sb[TBC_MAX_RANK + 2], so[2 * TBC_MAX_RANK];
	bool m1 = false, m2 = false, m3 = false;
	for (int i = 0; i < nb; i++) sa[i] = sb[i] = so[i] = 0;
	sa[nb] = ein_group(x, akd, na, &m1);
	sa[nb + 1] = ein_group(x, cond, nc, &m1);
	sb[nb] = ein_group(x, cond, nc, &m2);
	sb[nb + 1] = ein_group(x, bkd, nbk, &m2);
	if (!(na == 1 && nc == 1)) A = reshape(x, A, nb + 2, sa);
	if (!(nbk == 1 && nc == 1)) B = reshape(x, B, nb + 2, sb);
	tbc_value *Y = op2(x, TBC_OP_MatMul, A, B);
	int no = nb;
	for (int i = 0; i < na; i++) so[no++] = ein_group(x, &akd[i], 1, &m3);
	for (int i = 0; i < nbk; i++) so[no++] = ein_group(x, &bkd[i], 1, &m3);
	if (!(na == 1 && nbk == 1)) Y = reshape(x, Y, no, so);
	out->n = 0;
	for (int i = 0; i < nb; i++) out->l[out->n] = bat[i], out->d[out->n++] = batd[i];
	for (int i = 0; i < na; i++) out->l[out->n] = ak[i], out->d[out->n++] = akd[i];
	for (int i = 0; i < nbk; i++) out->l[out->n] = bk[i], out->d[out->n++] = bkd[i];
	if (Y && Y->type.rank == out->n) /* batch dims broadcast by MatMul */
		for (int i = 0; i < nb; i++) out->d[i] = Y->type.dims[i];
	return Y;
}

static bool decompose_einsum(dx *x) {
	const tbc_op *op = x->at;
	const char *eq = tbc_attr_string(op, "equation", NULL);
	int n_ops = op->n_inputs;
	char buf[256];
	size_t len = 0;
	for (const char *p = eq ? eq : ""; *p && len + 1 < sizeof buf; p++)
		if (*p != ' ') buf[len++] = *p;
	buf[len] = 0;
	eterm t[EIN_MAX_OPS], out;
	const char *arrow = strstr(buf, "->"), *lhs_end = arrow ? arrow : buf + len;
	bool ok = eq && len + 1 < sizeof buf && n_ops <= EIN_MAX_OPS;
	/* Ellipsis dims: the most any operand has. */
	int E = 0, k = 0;
	const char *s = buf;
	for (; ok && k < n_ops; k++) {
		const char *e = memchr(s, ',', (size_t)(lhs_end - s));
		if (!e) e = lhs_end;
		const tbc_type *ty = &op->inputs[k]->type;
		int letters = 0;
		for (const char *p = s; p < e; p++) letters += *p != '.';
		ok = ty->rank >= 0 && (k + 1 < n_ops) == (e < lhs_end);
		if (ok && memchr(s, '.', (size_t)(e - s)) && ty->rank - letters > E) E = ty->rank - letters;
		s = e + 1;
	}
	/* Again with the final E (right-aligned ellipsis labels). */
	s = buf;
	for (k = 0; ok && k < n_ops; k++) {
		const char *e = memchr(s, ',', (size_t)(lhs_end - s));
		if (!e) e = lhs_end;
		ok = ein_term(s, e, op->inputs[k]->type.rank, E, true, &t[k]);
		for (int i = 0; ok && i < t[k].n; i++) t[k].d[i] = op->inputs[k]->type.dims[i];
		s = e + 1;
	}
	if (ok && arrow) {
		ok = ein_term(arrow + 2, buf + len, -1, E, false, &out);
		for (int i = 0; ok && i < out.n; i++) {
			bool found = false;
			for (k = 0; k < n_ops && !found; k++) found = ein_find(&t[k], out.l[i]) >= 0;
			ok = found;
		}
	} else if (ok) {
		out.n = 0;
		for (int i = 1; i <= E; i++) out.l[out.n++] = i;
		for (int c = 'A'; c <= 'z' && out.n < TBC_MAX_RANK; c++) {
			int cnt = 0;
			for (k = 0; k < n_ops; k++)
				for (int i = 0; i < t[k].n; i++) cnt += t[k].l[i] == c;
			if (cnt == 1) out.l[out.n++] = c;
		}
	}
	if (!ok) {
		x->failed = true;
		tbc_value *nv[1] = {NULL};
		return commit(x, nv);
	}
	tbc_value *vals[EIN_MAX_OPS] = {NULL};
	for (k = 0; k < n_ops; k++) vals[k] = ein_diagonal(x, op->inputs[k], &t[k]);
	tbc_value *cur = vals[0];
	eterm ct = t[0];
	for (k = 1; k <= n_ops; k++) {
		/* Labels wanted after this step: the output's and the later operands'. */
		const eterm *keep[EIN_MAX_OPS + 1];
		int nk = 0;
		keep[nk++] = &out;
		for (int j = k + 1; j < n_ops; j++) keep[nk++] = &t[j];
		if (k == n_ops) {
			cur = ein_sum_out(x, cur, &ct, keep, nk);
			break;
		}
		eterm tb = t[k];
		keep[nk] = &tb;
		cur = ein_sum_out(x, cur, &ct, keep, nk + 1);
		keep[nk] = &ct;
		tbc_value *B = ein_sum_out(x, vals[k], &tb, keep, nk + 1);
		eterm nt;
		cur = ein_pair(x, cur, &ct, B, &tb, keep, nk, &nt);
		ct = nt;
	}
	cur = ein_permute(x, cur, &ct, out.l, out.n);
	if (x->n_made == 0) cur = op1(x, TBC_OP_Identity, cur);
	tbc_value *nv[1] = {cur};
	return commit(x, nv);
}

/* ---- Det -------------------------------------------------------------------
 * For 1x1, 2x2 and 3x3 matrices (static), the cofactor expansion: the
 * matrices flattened to [..., n*n] (Reshape), element (i, j) a one-wide
 * Slice, ad - bc or a(ei - fh) - b(di - fg) + c(dh - eg), the last axis
 * squeezed.  Larger matrices stay (lowering reports them). */
static bool decompose_det(dx *x) {
	const tbc_op *op = x->at;
	tbc_value *X = op->inputs[0];
	const tbc_type *t = &X->type;
	int r = t->rank;
	if (r < 2 || !dim_static(t->dims[r - 1]) || !dim_static(t->dims[r - 2]) || t->dims[r - 1].size != t->dims[r - 2].size ||
	    t->dims[r - 1].size < 1 || t->dims[r - 1].size > 3 || !tbc_dtype_is_float(t->dtype)) {
		x->failed = true;
		tbc_value *nv[1] = {NULL};
		return commit(x, nv);
	}
	int64_t n = t->dims[r - 1].size, shape[TBC_MAX_RANK];
	for (int d = 0; d < r - 2; d++) shape[d] = 0;
	shape[r - 2] = n * n;
	tbc_value *flat = reshape(x, X, r - 1, shape), *e[9];
	for (int64_t i = 0; i < n * n; i++) e[i] = slice(x, flat, r - 2, i, i + 1, 1);
	tbc_value *det;
#define DM(a, b) op2(x, TBC_OP_Mul, a, b)
#define DS(a, b) op2(x, TBC_OP_Sub, a, b)
	/* One op per statement: C leaves the order of argument evaluation open,
	 * and the order ops are made in is the order they print in. */
	if (n == 1) {
		det = e[0];
	} else if (n == 2) {
		tbc_value *ad = DM(e[0], e[3]), *bc = DM(e[1], e[2]);
		det = DS(ad, bc);
	} else {
		tbc_value *ei = DM(e[4], e[8]), *fh = DM(e[5], e[7]);
		tbc_value *m0 = DS(ei, fh);
		tbc_value *di = DM(e[3], e[8]), *fg = DM(e[5], e[6]);
		tbc_value *m1 = DS(di, fg);
		tbc_value *dh = DM(e[3], e[7]), *eg = DM(e[4], e[6]);
		tbc_value *m2 = DS(dh, eg);
		tbc_value *t0 = DM(e[0], m0), *t1 = DM(e[1], m1), *t2 = DM(e[2], m2);
		det = op2(x, TBC_OP_Add, DS(t0, t1), t2);
	}
#undef DM
#undef DS
	int64_t last = r - 2;
	tbc_value *nv[1] = {op2(x, TBC_OP_Squeeze, det, ints(x, 1, &last))};
	return commit(x, nv);
}

/* ---- Driver ----------------------------------------------------------------- */

static bool decompose_graph(tbc_graph *g, void *ctx) {
	dx *x = ctx;
	for (tbc_op *op = g->first; op;) {
		tbc_op *next = op->next;
		bool (*fn)(dx *) = NULL;
		switch (op->code) {
		case TBC_OP_Attention: fn = decompose_attention; break;
		case TBC_OP_RotaryEmbedding: fn = decompose_rotary; break;
		case TBC_OP_NegativeLogLikelihoodLoss: fn = decompose_nll; break;
		case TBC_OP_SoftmaxCrossEntropyLoss: fn = decompose_sce; break;
		case TBC_OP_CausalConvWithState: fn = decompose_causal_conv; break;
		case TBC_OP_Einsum: fn = decompose_einsum; break;
		case TBC_OP_Det: fn = decompose_det; break;
		default: break;
		}
		if (fn) {
			x->g = g;
			x->at = op;
			x->n_made = 0;
			x->failed = false;
			if (!fn(x)) return false;
		}
		op = next;
	}
	return true;
}

bool tbc_pass_decompose(tbc_module *m, tbc_diags *d) {
	tbc_diags *scratch = tbc_diags_create();
	if (!scratch) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory");
		return false;
	}
	dx x = {.m = m, .cx = {.module = m, .diags = scratch}};
	bool ok = pass_each_graph(m->main, decompose_graph, &x);
	tbc_diags_destroy(scratch);
	if (!ok) tbc_diags_add(d, TBC_ERR_INTERNAL, m->path, NULL, NULL, NULL, "decompose: a rewrite could not be undone (bug in tbc)");
	return ok;
}
