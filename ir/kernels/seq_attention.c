/* Attention (opset 23-25 form) and RotaryEmbedding (opset 23): shape rules
 * and kernels.  Attention follows onnx/reference/ops/op_attention.py step by
 * step: 3-D inputs are split into heads, the KV cache is concatenated, the
 * causal / sliding-window / padding / user masks become one additive bias,
 * softcap comes before the bias, fully masked rows give zeros.  Values are
 * rounded to Q's dtype where the reference rounds (scaled Q and K, the QK
 * product, the probabilities), so float16 results agree closely. */
#include "seq_common.h"

/* ---- Attention shape rule ---------------------------------------------- */
bool tbc_shape_Attention(tbc_infer *cx, tbc_op *op) {
	const tbc_type *q = seq_in_type(op, 0), *k = seq_in_type(op, 1), *v = seq_in_type(op, 2);
	const tbc_type *mask = seq_in_type(op, 3), *pk = seq_in_type(op, 4), *pv = seq_in_type(op, 5);
	tbc_module *m = cx->module;
	if (q->rank < 0 || k->rank < 0 || v->rank < 0) {
		for (int i = 0; i < op->n_outputs; i++)
			if (op->outputs[i]) {
				op->outputs[i]->type.dtype = i == 1 || i == 2 ? k->dtype : q->dtype;
				op->outputs[i]->type.rank = -1;
			}
		return true;
	}
	if (q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
		return tbc_infer_error(cx, op, "Q, K and V must all have rank 3 or all rank 4");
	if (!tbc_dtype_is_float(q->dtype) || !tbc_dtype_is_float(k->dtype) || k->dtype != v->dtype)
		return tbc_infer_error(cx, op, "Q, K and V must be float tensors, K and V of one type");
	if ((pk == NULL) != (pv == NULL)) return tbc_infer_error(cx, op, "past_key and past_value go together");
	int64_t mode = tbc_attr_int(op, "qk_matmul_output_mode", 0);
	if (mode < 0 || mode > 3) return tbc_infer_error(cx, op, "qk_matmul_output_mode must be 0..3");
	if (mask && mask->dtype != TBC_DT_BOOL && mask->dtype != q->dtype)
		return tbc_infer_error(cx, op, "attn_mask must be bool or of Q's type");
	tbc_dim batch = q->dims[0], hq, hkv, sq, skv, hd, vhd;
	if (q->rank == 3) {
		int64_t nq = tbc_attr_int(op, "q_num_heads", 0), nkv = tbc_attr_int(op, "kv_num_heads", 0);
		if (nq <= 0 || nkv <= 0) return tbc_infer_error(cx, op, "3-D inputs need q_num_heads and kv_num_heads");
		hq = seq_dim(nq);
		hkv = seq_dim(nkv);
		sq = q->dims[1];
		skv = k->dims[1];
		tbc_dim hdk;
		if (!seq_dim_div(m, q->dims[2], nq, &hd) || !seq_dim_div(m, k->dims[2], nkv, &hdk) ||
		    !seq_dim_div(m, v->dims[2], nkv, &vhd))
			return tbc_infer_error(cx, op, "hidden sizes must divide by the head counts");
	} else {
		hq = q->dims[1];
		hkv = k->dims[1];
		sq = q->dims[2];
		skv = k->dims[2];
		hd = q->dims[3];
		vhd = v->dims[3];
	}
	if (seq_dim_known(hq) && seq_dim_known(hkv) && (hkv.size == 0 || hq.size % hkv.size))
		return tbc_infer_error(cx, op, "q heads (%lld) must be a multiple of kv heads (%lld)", (long long)hq.size,
				       (long long)hkv.size);
	tbc_dim total = skv;
	if (pk) {
		if (pk->rank >= 0 && pk->rank != 4) return tbc_infer_error(cx, op, "past_key must have rank 4");
		total = pk->rank == 4 ? seq_dim_add(m, pk->dims[2], skv) : tbc_module_fresh_dim(m);
	}
	tbc_type *y = seq_out_type(op, 0);
	if (y) {
		y->dtype = q->dtype;
		y->rank = q->rank;
		if (q->rank == 3) {
			y->dims[0] = batch;
			y->dims[1] = sq;
			y->dims[2] = seq_dim_known(vhd) ? seq_dim(vhd.size * hq.size) : tbc_module_fresh_dim(m);
		} else {
			y->dims[0] = batch;
			y->dims[1] = hq;
			y->dims[2] = sq;
			y->dims[3] = vhd;
		}
	}
	for (int i = 1; i <= 2; i++) {
		tbc_type *t = seq_out_type(op, i);
		if (!t) continue;
		t->dtype = k->dtype;
		t->rank = 4;
		t->dims[0] = batch;
		t->dims[1] = hkv;
		t->dims[2] = total;
		t->dims[3] = i == 1 ? (q->rank == 3 ? hd : k->dims[3]) : vhd;
	}
	tbc_type *qk = seq_out_type(op, 3);
	if (qk) {
		qk->dtype = q->dtype;
		qk->rank = 4;
		qk->dims[0] = batch;
		qk->dims[1] = hq;
		qk->dims[2] = sq;
		qk->dims[3] = total;
	}
	return true;
}

/* ---- Attention kernel ------------------------------------------------------ */
typedef struct {
	int64_t B, Hq, Hkv, Sq, Skv, P, T, D, Dv; /* T = P + Skv */
} att_dims;

/* Element (b, h, s, d) of a 4-D view of x, which is 4-D or 3-D [B, S, H*D]. */
static int64_t att_index(const tbc_tensor *x, int64_t H, int64_t S, int64_t Dh, int64_t b, int64_t h, int64_t s,
			 int64_t d) {
	if (x->rank == 3) return (b * S + s) * H * Dh + h * Dh + d;
	return ((b * H + h) * S + s) * Dh + d;
}

static int att_run(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *Q = in[0], *K = in[1], *V = in[2];
	const tbc_tensor *M = seq_in(op, in, 3), *PK = seq_in(op, in, 4), *PV = seq_in(op, in, 5);
	const tbc_tensor *NP = seq_in(op, in, 6);
	tbc_dtype qt = Q->dtype, kt = K->dtype;
	att_dims a;
	if (Q->rank != K->rank || Q->rank != V->rank || (Q->rank != 3 && Q->rank != 4))
		return tbc_interp_error(ip, op, "Q, K and V must all have rank 3 or 4");
	a.B = Q->dims[0];
	if (Q->rank == 3) {
		a.Hq = tbc_attr_int(op, "q_num_heads", 0);
		a.Hkv = tbc_attr_int(op, "kv_num_heads", 0);
		if (a.Hq <= 0 || a.Hkv <= 0 || Q->dims[2] % a.Hq || K->dims[2] % a.Hkv || V->dims[2] % a.Hkv)
			return tbc_interp_error(ip, op, "hidden sizes do not divide by the head counts");
		a.Sq = Q->dims[1];
		a.Skv = K->dims[1];
		a.D = Q->dims[2] / a.Hq;
		a.Dv = V->dims[2] / a.Hkv;
		if (K->dims[2] / a.Hkv != a.D) return tbc_interp_error(ip, op, "Q and K head sizes differ");
	} else {
		a.Hq = Q->dims[1];
		a.Hkv = K->dims[1];
		a.Sq = Q->dims[2];
		a.Skv = K->dims[2];
		a.D = Q->dims[3];
		a.Dv = V->dims[3];
		if (K->dims[3] != a.D) return tbc_interp_error(ip, op, "Q and K head sizes differ");
	}
	if (K->dims[0] != a.B || V->dims[0] != a.B || (Q->rank == 4 && V->dims[1] != a.Hkv) ||
	    V->dims[Q->rank == 3 ? 1 : 2] != a.Skv)
		return tbc_interp_error(ip, op, "K and V shapes do not agree");
	if (a.Hkv <= 0 || a.Hq % a.Hkv) return tbc_interp_error(ip, op, "q heads must be a multiple of kv heads");
	if ((PK == NULL) != (PV == NULL)) return tbc_interp_error(ip, op, "past_key and past_value go together");
	if (NP && PK) return tbc_interp_error(ip, op, "nonpad_kv_seqlen cannot be combined with past_key");
	a.P = PK ? PK->dims[2] : 0;
	if (PK && (PK->rank != 4 || PV->rank != 4 || PK->dims[0] != a.B || PK->dims[1] != a.Hkv || PK->dims[3] != a.D ||
		   PV->dims[0] != a.B || PV->dims[1] != a.Hkv || PV->dims[2] != a.P || PV->dims[3] != a.Dv))
		return tbc_interp_error(ip, op, "past_key / past_value have the wrong shape");
	a.T = a.P + a.Skv;
	if (NP && !(NP->numel == a.B)) return tbc_interp_error(ip, op, "nonpad_kv_seqlen must have batch elements");
	if (M) {
		if (M->rank < 1 || M->rank > 4) return tbc_interp_error(ip, op, "attn_mask must have rank 1 to 4");
		if (M->dims[M->rank - 1] > a.T) return tbc_interp_error(ip, op, "attn_mask is longer than the key sequence");
		int64_t full[4] = {a.B, a.Hq, a.Sq, a.T};
		for (int i = 0; i < M->rank - 1; i++) {
			int64_t d = M->dims[i], want = full[4 - M->rank + i];
			if (d != 1 && d != want) return tbc_interp_error(ip, op, "attn_mask does not broadcast to the scores");
		}
	}
	int64_t mode = tbc_attr_int(op, "qk_matmul_output_mode", 0);
	bool causal = tbc_attr_int(op, "is_causal", 0) != 0;
	double softcap = tbc_attr_float(op, "softcap", 0);
	int64_t lw = tbc_attr_int(op, "left_window_size", -1), rw = tbc_attr_int(op, "right_window_size", -1);
	const tbc_attr *sc = tbc_op_attr(op, "scale");
	double scale = sc ? tbc_attr_float(op, "scale", 1) : 1.0 / sqrt((double)a.D);
	double sqs = seq_round(qt, sqrt(scale));

	int rc = -1;
	double *kc = NULL, *vc = NULL, *bias = NULL, *row = NULL, *raw = NULL;
	int64_t *nonpad = NULL;
	tbc_tensor *y = NULL, *pko = NULL, *pvo = NULL, *qko = NULL;
	kc = malloc((size_t)(a.B * a.Hkv * a.T * a.D + 1) * sizeof *kc);
	vc = malloc((size_t)(a.B * a.Hkv * a.T * a.Dv + 1) * sizeof *vc);
	bias = malloc((size_t)(a.T + 1) * sizeof *bias);
	row = malloc((size_t)(a.T + 1) * sizeof *row);
	raw = malloc((size_t)(a.T + 1) * sizeof *raw);
	if (NP) nonpad = tbc_tensor_i64s(NP);
	if (!kc || !vc || !bias || !row || !raw || (NP && !nonpad)) {
		tbc_interp_error(ip, op, "out of memory");
		goto done;
	}
	/* present key / value: past then new, [B, Hkv, T, D]. */
	for (int64_t b = 0; b < a.B; b++)
		for (int64_t h = 0; h < a.Hkv; h++)
			for (int64_t t = 0; t < a.T; t++) {
				double *kd = kc + ((b * a.Hkv + h) * a.T + t) * a.D, *vd = vc + ((b * a.Hkv + h) * a.T + t) * a.Dv;
				for (int64_t d = 0; d < a.D; d++)
					kd[d] = t < a.P ? tbc_get_f64(PK, ((b * a.Hkv + h) * a.P + t) * a.D + d)
							: tbc_get_f64(K, att_index(K, a.Hkv, a.Skv, a.D, b, h, t - a.P, d));
				for (int64_t d = 0; d < a.Dv; d++)
					vd[d] = t < a.P ? tbc_get_f64(PV, ((b * a.Hkv + h) * a.P + t) * a.Dv + d)
							: tbc_get_f64(V, att_index(V, a.Hkv, a.Skv, a.Dv, b, h, t - a.P, d));
			}
	int64_t ydims[4] = {a.B, Q->rank == 3 ? a.Sq : a.Hq, Q->rank == 3 ? a.Hq * a.Dv : a.Sq, a.Dv};
	if (seq_want(op, 0) && !(y = tbc_interp_new(ip, op, qt, Q->rank, ydims))) goto done;
	int64_t kdims[4] = {a.B, a.Hkv, a.T, a.D}, vdims[4] = {a.B, a.Hkv, a.T, a.Dv}, qdims[4] = {a.B, a.Hq, a.Sq, a.T};
	if (seq_want(op, 1) && !(pko = tbc_interp_new(ip, op, kt, 4, kdims))) goto done;
	if (seq_want(op, 2) && !(pvo = tbc_interp_new(ip, op, kt, 4, vdims))) goto done;
	if (seq_want(op, 3) && !(qko = tbc_interp_new(ip, op, qt, 4, qdims))) goto done;
	for (int64_t i = 0; pko && i < pko->numel; i++) tbc_set_f64(pko, i, kc[i]);
	for (int64_t i = 0; pvo && i < pvo->numel; i++) tbc_set_f64(pvo, i, vc[i]);

	int64_t group = a.Hq / a.Hkv;
	for (int64_t b = 0; b < a.B; b++) {
		if (nonpad && (nonpad[b] < 0 || nonpad[b] > a.T)) {
			tbc_interp_error(ip, op, "nonpad_kv_seqlen[%lld] = %lld is outside [0, %lld]", (long long)b,
					 (long long)nonpad[b], (long long)a.T);
			goto done;
		}
		int64_t offset = PK ? a.P : nonpad ? nonpad[b] - a.Sq : 0;
		for (int64_t h = 0; h < a.Hq; h++) {
			int64_t hk = h / group;
			for (int64_t i = 0; i < a.Sq; i++) {
				/* The additive bias of this row. */
				for (int64_t j = 0; j < a.T; j++) {
					double bv = 0;
					if (M) {
						int64_t mi = 0, full[4] = {b, h, i, j}, stride = 1;
						bool pad = j >= M->dims[M->rank - 1];
						for (int r = M->rank - 1; r >= 0 && !pad; r--) {
							int64_t idx = full[4 - M->rank + r];
							if (M->dims[r] == 1) idx = 0;
							mi += idx * stride;
							stride *= M->dims[r];
						}
						if (M->dtype == TBC_DT_BOOL) bv = pad || !tbc_get_i64(M, mi) ? -INFINITY : 0;
						else bv = pad ? -INFINITY : tbc_get_f64(M, mi);
					}
					if (causal && !(j <= i + offset)) bv += -INFINITY;
					if (lw >= 0 || rw >= 0) {
						int64_t diff = i + offset - j;
						if ((lw >= 0 && diff > lw) || (rw >= 0 && -diff > rw)) bv += -INFINITY;
					}
					if (nonpad && j >= nonpad[b]) bv += -INFINITY;
					bias[j] = seq_round(qt, bv);
				}
				bool all_masked = true;
				for (int64_t j = 0; j < a.T; j++) all_masked &= isinf(bias[j]) && bias[j] < 0;
				/* Scores: (Q*sqrt(scale)) . (K*sqrt(scale)), softcap, bias. */
				double mx = -INFINITY;
				bool has_nan = false;
				for (int64_t j = 0; j < a.T; j++) {
					const double *kd = kc + ((b * a.Hkv + hk) * a.T + j) * a.D;
					double s = 0;
					for (int64_t d = 0; d < a.D; d++) {
						double qv = seq_round(qt, tbc_get_f64(Q, att_index(Q, a.Hq, a.Sq, a.D, b, h, i, d)) * sqs);
						s += qv * seq_round(qt, kd[d] * sqs);
					}
					s = seq_round(qt, s);
					if (softcap > 0) s = seq_round(qt, softcap * tanh(s / softcap));
					raw[j] = s;
					row[j] = seq_round(qt, s + bias[j]);
					if (row[j] > mx) mx = row[j];
					has_nan |= isnan(row[j]);
				}
				if (qko && mode <= 2)
					for (int64_t j = 0; j < a.T; j++)
						tbc_set_f64(qko, ((b * a.Hq + h) * a.Sq + i) * a.T + j, mode == 2 ? row[j] : raw[j]);
				/* Softmax; a row with no attendable key is all zeros, a
				 * NaN score poisons its row (numpy's max propagates it). */
				double sum = 0;
				if (has_nan) mx = NAN;
				for (int64_t j = 0; j < a.T; j++) {
					row[j] = isinf(mx) && mx < 0 ? 0 : exp(row[j] - mx);
					sum += row[j];
				}
				for (int64_t j = 0; j < a.T; j++) {
					row[j] = all_masked || sum == 0 ? 0 : row[j] / sum;
					row[j] = seq_round(qt, row[j]);
				}
				if (qko && mode == 3)
					for (int64_t j = 0; j < a.T; j++) tbc_set_f64(qko, ((b * a.Hq + h) * a.Sq + i) * a.T + j, row[j]);
				if (!y) continue;
				for (int64_t d = 0; d < a.Dv; d++) {
					double s = 0;
					for (int64_t j = 0; j < a.T; j++) s += row[j] * vc[((b * a.Hkv + hk) * a.T + j) * a.Dv + d];
					int64_t yi = Q->rank == 3 ? (b * a.Sq + i) * a.Hq * a.Dv + h * a.Dv + d
								  : ((b * a.Hq + h) * a.Sq + i) * a.Dv + d;
					tbc_set_f64(y, yi, s);
				}
			}
		}
	}
	if (seq_want(op, 0)) out[0] = y, y = NULL;
	if (seq_want(op, 1)) out[1] = pko, pko = NULL;
	if (seq_want(op, 2)) out[2] = pvo, pvo = NULL;
	if (seq_want(op, 3)) out[3] = qko, qko = NULL;
	rc = 0;
done:
	tbc_tensor_destroy(y), tbc_tensor_destroy(pko), tbc_tensor_destroy(pvo), tbc_tensor_destroy(qko);
	free(kc), free(vc), free(bias), free(row), free(raw), free(nonpad);
	return rc;
}

int tbc_interp_Attention(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return att_run(ip, op, in, out);
}

/* ---- RotaryEmbedding ------------------------------------------------------- */
bool tbc_shape_RotaryEmbedding(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = seq_in_type(op, 0);
	if (x->rank >= 0 && x->rank != 3 && x->rank != 4)
		return tbc_infer_error(cx, op, "input must have rank 3 or 4, got %d", x->rank);
	if (x->rank == 3 && tbc_attr_int(op, "num_heads", 0) <= 0)
		return tbc_infer_error(cx, op, "a 3-D input needs the num_heads attribute");
	if (!tbc_dtype_is_float(x->dtype)) return tbc_infer_error(cx, op, "input must be a float tensor");
	op->outputs[0]->type = *x;
	return true;
}

int tbc_interp_RotaryEmbedding(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *X = in[0], *C = in[1], *S = in[2], *PI = seq_in(op, in, 3);
	int64_t B, Sq, H, D;
	if (X->rank == 4) {
		B = X->dims[0], H = X->dims[1], Sq = X->dims[2], D = X->dims[3];
	} else if (X->rank == 3) {
		H = tbc_attr_int(op, "num_heads", 0);
		if (H <= 0 || X->dims[2] % H) return tbc_interp_error(ip, op, "hidden size does not divide by num_heads");
		B = X->dims[0], Sq = X->dims[1], D = X->dims[2] / H;
	} else {
		return tbc_interp_error(ip, op, "input must have rank 3 or 4");
	}
	int64_t rd = tbc_attr_int(op, "rotary_embedding_dim", 0);
	if (rd == 0) rd = D;
	if (rd < 0 || rd > D || rd % 2) return tbc_interp_error(ip, op, "rotary_embedding_dim must be even and at most the head size");
	int64_t half = rd / 2;
	bool interleaved = tbc_attr_int(op, "interleaved", 0) != 0;
	if (!tbc_tensor_same_shape(C, S)) return tbc_interp_error(ip, op, "cos_cache and sin_cache shapes differ");
	if (PI) {
		if (C->rank != 2 || C->dims[1] != half || PI->rank != 2 || PI->dims[0] != B || PI->dims[1] != Sq)
			return tbc_interp_error(ip, op, "with position_ids the caches must be [max_pos, %lld] and ids [%lld, %lld]",
						(long long)half, (long long)B, (long long)Sq);
	} else if (C->rank != 3 || C->dims[0] != B || C->dims[1] != Sq || C->dims[2] != half) {
		return tbc_interp_error(ip, op, "without position_ids the caches must be [%lld, %lld, %lld]", (long long)B,
					(long long)Sq, (long long)half);
	}
	tbc_tensor *y = tbc_interp_new(ip, op, X->dtype, X->rank, X->dims);
	if (!y) return -1;
	for (int64_t b = 0; b < B; b++)
		for (int64_t s = 0; s < Sq; s++) {
			int64_t base;
			if (PI) {
				int64_t pos = tbc_get_i64(PI, b * Sq + s);
				if (pos < 0 || pos >= C->dims[0]) {
					tbc_tensor_destroy(y);
					return tbc_interp_error(ip, op, "position id %lld is outside [0, %lld)", (long long)pos,
								(long long)C->dims[0]);
				}
				base = pos * half;
			} else {
				base = (b * Sq + s) * half;
			}
			for (int64_t h = 0; h < H; h++) {
				int64_t off = X->rank == 4 ? ((b * H + h) * Sq + s) * D : (b * Sq + s) * H * D + h * D;
				for (int64_t k = 0; k < half; k++) {
					double c = tbc_get_f64(C, base + k), sn = tbc_get_f64(S, base + k);
					int64_t i1 = interleaved ? 2 * k : k, i2 = interleaved ? 2 * k + 1 : k + half;
					double x1 = tbc_get_f64(X, off + i1), x2 = tbc_get_f64(X, off + i2);
					tbc_set_f64(y, off + i1, c * x1 - sn * x2);
					tbc_set_f64(y, off + i2, sn * x1 + c * x2);
				}
				for (int64_t d = rd; d < D; d++) tbc_set_f64(y, off + d, tbc_get_f64(X, off + d));
			}
		}
	out[0] = y;
	return 0;
}
