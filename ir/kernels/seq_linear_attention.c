/* LinearAttention (opset 27): a recurrent state S[b, h] of shape
 * [d_k, d_v] per kv head, updated one token at a time by one of four rules
 * (onnx/reference/ops/op_linear_attention.py):
 *   gated:  S *= exp(decay_t)             (per head or per key dim)
 *   delta:  v_t <- beta_t * (v_t - S^T k_t)
 *   write:  S += k_t (x) v_t
 *   read:   o_t = scale * q_t S           (a query head reads kv head h / group)
 * "linear" is write+read only; "gated_delta" (the default) uses all. */
#include "seq_common.h"

typedef struct {
	bool gating, delta;
} la_rule;

static bool la_parse_rule(const tbc_op *op, la_rule *r) {
	const char *s = tbc_attr_string(op, "update_rule", "gated_delta");
	r->gating = !strcmp(s, "gated") || !strcmp(s, "gated_delta");
	r->delta = !strcmp(s, "delta") || !strcmp(s, "gated_delta");
	return r->gating || r->delta || !strcmp(s, "linear");
}

bool tbc_shape_LinearAttention(tbc_infer *cx, tbc_op *op) {
	const tbc_type *q = seq_in_type(op, 0), *k = seq_in_type(op, 1), *v = seq_in_type(op, 2);
	const tbc_type *past = seq_in_type(op, 3), *decay = seq_in_type(op, 4), *beta = seq_in_type(op, 5);
	tbc_module *m = cx->module;
	la_rule r;
	if (!la_parse_rule(op, &r)) return tbc_infer_error(cx, op, "update_rule must be linear, gated, delta or gated_delta");
	int64_t hq = tbc_attr_int(op, "q_num_heads", 0), hkv = tbc_attr_int(op, "kv_num_heads", 0);
	if (hq <= 0 || hkv <= 0 || hq % hkv)
		return tbc_infer_error(cx, op, "q_num_heads (%lld) must be a positive multiple of kv_num_heads (%lld)",
				       (long long)hq, (long long)hkv);
	if (r.gating != (decay != NULL)) return tbc_infer_error(cx, op, "decay is required exactly by the gated rules");
	if (r.delta != (beta != NULL)) return tbc_infer_error(cx, op, "beta is required exactly by the delta rules");
	if (!tbc_dtype_is_float(q->dtype)) return tbc_infer_error(cx, op, "query must be a float tensor");
	if ((q->rank >= 0 && q->rank != 3) || (k->rank >= 0 && k->rank != 3) || (v->rank >= 0 && v->rank != 3))
		return tbc_infer_error(cx, op, "query, key and value must have rank 3");
	tbc_dim dk = tbc_module_fresh_dim(m), dv = tbc_module_fresh_dim(m), b = tbc_module_fresh_dim(m),
		t = tbc_module_fresh_dim(m);
	if (q->rank == 3) {
		b = q->dims[0];
		t = q->dims[1];
		if (!seq_dim_div(m, q->dims[2], hq, &dk)) return tbc_infer_error(cx, op, "query's last dim must divide by q_num_heads");
	}
	if (v->rank == 3 && !seq_dim_div(m, v->dims[2], hkv, &dv))
		return tbc_infer_error(cx, op, "value's last dim must divide by kv_num_heads");
	tbc_type *o = seq_out_type(op, 0), *st = seq_out_type(op, 1);
	if (o) {
		o->dtype = q->dtype;
		o->rank = 3;
		o->dims[0] = b;
		o->dims[1] = t;
		o->dims[2] = seq_dim_mul(m, dv, hq);
	}
	if (st) {
		st->dtype = past ? past->dtype : q->dtype;
		st->rank = 4;
		st->dims[0] = b;
		st->dims[1] = seq_dim(hkv);
		st->dims[2] = dk;
		st->dims[3] = dv;
	}
	return true;
}

int tbc_interp_LinearAttention(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *Q = in[0], *K = in[1], *V = in[2];
	const tbc_tensor *PS = seq_in(op, in, 3), *G = seq_in(op, in, 4), *BT = seq_in(op, in, 5);
	la_rule r;
	if (!la_parse_rule(op, &r)) return tbc_interp_error(ip, op, "bad update_rule");
	int64_t Hq = tbc_attr_int(op, "q_num_heads", 0), Hkv = tbc_attr_int(op, "kv_num_heads", 0);
	if (Hq <= 0 || Hkv <= 0 || Hq % Hkv) return tbc_interp_error(ip, op, "bad head counts");
	if (Q->rank != 3 || K->rank != 3 || V->rank != 3) return tbc_interp_error(ip, op, "query, key and value must have rank 3");
	int64_t B = Q->dims[0], T = Q->dims[1];
	if (Q->dims[2] % Hq || V->dims[2] % Hkv) return tbc_interp_error(ip, op, "hidden sizes do not divide by the head counts");
	int64_t dk = Q->dims[2] / Hq, dv = V->dims[2] / Hkv, group = Hq / Hkv;
	if (K->dims[0] != B || K->dims[1] != T || K->dims[2] != Hkv * dk || V->dims[0] != B || V->dims[1] != T)
		return tbc_interp_error(ip, op, "key / value shapes do not match query");
	if (PS && !(PS->rank == 4 && PS->dims[0] == B && PS->dims[1] == Hkv && PS->dims[2] == dk && PS->dims[3] == dv))
		return tbc_interp_error(ip, op, "past_state must have shape [%lld, %lld, %lld, %lld]", (long long)B,
					(long long)Hkv, (long long)dk, (long long)dv);
	if (r.gating != (G != NULL) || r.delta != (BT != NULL))
		return tbc_interp_error(ip, op, "decay / beta do not match update_rule");
	bool decay_per_head = false;
	if (G) {
		if (G->rank != 3 || G->dims[0] != B || G->dims[1] != T || (G->dims[2] != Hkv && G->dims[2] != Hkv * dk))
			return tbc_interp_error(ip, op, "decay must have shape [B, T, kv_num_heads] or [B, T, kv_num_heads*d_k]");
		decay_per_head = G->dims[2] == Hkv;
	}
	if (BT && (BT->rank != 3 || BT->dims[0] != B || BT->dims[1] != T || (BT->dims[2] != Hkv && BT->dims[2] != 1)))
		return tbc_interp_error(ip, op, "beta must have shape [B, T, kv_num_heads] or [B, T, 1]");
	double scale = tbc_attr_float(op, "scale", 0);
	if (scale == 0) scale = 1.0 / sqrt((double)dk);

	int rc = -1;
	tbc_tensor *o = NULL, *st = NULL;
	double *S = calloc((size_t)(B * Hkv * dk * dv + 1), sizeof *S);
	double *vt = malloc((size_t)(dv + 1) * sizeof *vt);
	if (!S || !vt) {
		tbc_interp_error(ip, op, "out of memory");
		goto done;
	}
	for (int64_t i = 0; PS && i < PS->numel; i++) S[i] = tbc_get_f64(PS, i);
	int64_t odims[3] = {B, T, Hq * dv}, sdims[4] = {B, Hkv, dk, dv};
	if (seq_want(op, 0) && !(o = tbc_interp_new(ip, op, Q->dtype, 3, odims))) goto done;
	if (seq_want(op, 1) && !(st = tbc_interp_new(ip, op, PS ? PS->dtype : Q->dtype, 4, sdims))) goto done;
	for (int64_t b = 0; b < B; b++)
		for (int64_t t = 0; t < T; t++) {
			for (int64_t h = 0; h < Hkv; h++) {
				double *s = S + (b * Hkv + h) * dk * dv;
				int64_t kx = (b * T + t) * Hkv * dk + h * dk, vx = (b * T + t) * Hkv * dv + h * dv;
				if (r.gating)
					for (int64_t d = 0; d < dk; d++) {
						double g = decay_per_head ? tbc_get_f64(G, (b * T + t) * Hkv + h)
									  : tbc_get_f64(G, (b * T + t) * Hkv * dk + h * dk + d);
						double e = exp(g);
						for (int64_t mm = 0; mm < dv; mm++) s[d * dv + mm] *= e;
					}
				for (int64_t mm = 0; mm < dv; mm++) vt[mm] = tbc_get_f64(V, vx + mm);
				if (r.delta) {
					double bt = tbc_get_f64(BT, (b * T + t) * BT->dims[2] + (BT->dims[2] == 1 ? 0 : h));
					for (int64_t mm = 0; mm < dv; mm++) {
						double got = 0;
						for (int64_t d = 0; d < dk; d++) got += s[d * dv + mm] * tbc_get_f64(K, kx + d);
						vt[mm] = bt * (vt[mm] - got);
					}
				}
				for (int64_t d = 0; d < dk; d++) {
					double kd = tbc_get_f64(K, kx + d);
					for (int64_t mm = 0; mm < dv; mm++) s[d * dv + mm] += kd * vt[mm];
				}
			}
			for (int64_t h = 0; o && h < Hq; h++) {
				const double *s = S + (b * Hkv + h / group) * dk * dv;
				int64_t qx = (b * T + t) * Hq * dk + h * dk;
				for (int64_t mm = 0; mm < dv; mm++) {
					double acc = 0;
					for (int64_t d = 0; d < dk; d++) acc += tbc_get_f64(Q, qx + d) * s[d * dv + mm];
					tbc_set_f64(o, (b * T + t) * Hq * dv + h * dv + mm, scale * acc);
				}
			}
		}
	for (int64_t i = 0; st && i < st->numel; i++) tbc_set_f64(st, i, S[i]);
	if (seq_want(op, 0)) out[0] = o, o = NULL;
	if (seq_want(op, 1)) out[1] = st, st = NULL;
	rc = 0;
done:
	tbc_tensor_destroy(o), tbc_tensor_destroy(st);
	free(S), free(vt);
	return rc;
}
