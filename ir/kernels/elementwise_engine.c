/* The broadcasting elementwise engine (see elementwise.h): one loop for every
 * elementwise op, parameterized by a scalar definition per domain. */
#include "elementwise.h"

#include <stdio.h>

typedef enum { DOM_F64, DOM_I64, DOM_U64 } domain;

static domain pick_domain(const ew_def *def, tbc_dtype dt) {
	if (tbc_dtype_is_float(dt) || !def->i) return DOM_F64;
	if (tbc_dtype_is_unsigned(dt) && def->u) return DOM_U64;
	return DOM_I64;
}

int ew_map(tbc_interp *ip, const tbc_op *op, const ew_def *def, ew_ctx *ctx, int n, const tbc_tensor *const *in,
	   int domain_input, tbc_dtype out_dt, tbc_tensor **out) {
	ew_ctx local = {0};
	if (!ctx) ctx = &local;
	ctx->error = NULL;
	for (int k = 0; k < n; k++)
		if (!in[k]) return tbc_interp_error(ip, op, "input %d is missing", k);

	int rank = 0;
	int64_t dims[TBC_MAX_RANK] = {0};
	for (int k = 0; k < n; k++) {
		int64_t next[TBC_MAX_RANK];
		int r;
		if (!tbc_broadcast_dims(rank, dims, in[k]->rank, in[k]->dims, &r, next)) {
			char shape[160] = "";
			size_t used = 0;
			for (int d = 0; d < in[k]->rank && used < sizeof shape; d++)
				used += (size_t)snprintf(shape + used, sizeof shape - used, "%s%lld", d ? "," : "",
							 (long long)in[k]->dims[d]);
			return tbc_interp_error(ip, op, "input %d of shape [%s] does not broadcast with the others", k,
						shape);
		}
		rank = r;
		memcpy(dims, next, sizeof(int64_t) * (size_t)r);
	}
	tbc_dtype dt = in[domain_input]->dtype;
	domain dom = pick_domain(def, dt);
	ctx->bits = tbc_dtype_bits(dt);
	ctx->n = n;

	tbc_tensor *y = tbc_interp_new(ip, op, out_dt, rank, dims);
	if (!y) return -1;
	/* One block: strides[n][rank], offsets[n], and the argument vector. */
	size_t nk = (size_t)n;
	int64_t *strides = malloc(nk * TBC_MAX_RANK * sizeof *strides + nk * sizeof(int64_t) + nk * 8 + 8);
	if (!strides) {
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	int64_t *offs = strides + nk * TBC_MAX_RANK;
	void *args = offs + nk;
	double *xf = args;
	int64_t *xi = args;
	uint64_t *xu = args;
	for (int k = 0; k < n; k++) {
		tbc_broadcast_strides(in[k]->rank, in[k]->dims, rank, strides + (size_t)k * TBC_MAX_RANK);
		offs[k] = 0;
	}

	int64_t idx[TBC_MAX_RANK] = {0};
	for (int64_t e = 0; e < y->numel; e++) {
		switch (dom) {
		case DOM_F64:
			for (int k = 0; k < n; k++) xf[k] = tbc_load_f64(in[k]->dtype, in[k]->data, (size_t)offs[k]);
			tbc_store_f64(out_dt, y->data, (size_t)e, def->f(ctx, xf));
			break;
		case DOM_I64:
			for (int k = 0; k < n; k++) xi[k] = tbc_load_i64(in[k]->dtype, in[k]->data, (size_t)offs[k]);
			tbc_store_i64(out_dt, y->data, (size_t)e, def->i(ctx, xi));
			break;
		case DOM_U64:
			for (int k = 0; k < n; k++) xu[k] = tbc_load_u64(in[k]->dtype, in[k]->data, (size_t)offs[k]);
			tbc_store_u64(out_dt, y->data, (size_t)e, def->u(ctx, xu));
			break;
		}
		if (ctx->error) break;
		/* Next output index; each input's offset follows its strides. */
		for (int d = rank - 1; d >= 0; d--) {
			for (int k = 0; k < n; k++) offs[k] += strides[(size_t)k * TBC_MAX_RANK + d];
			if (++idx[d] < dims[d]) break;
			for (int k = 0; k < n; k++) offs[k] -= strides[(size_t)k * TBC_MAX_RANK + d] * dims[d];
			idx[d] = 0;
		}
	}
	free(strides);
	if (ctx->error) {
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "%s", ctx->error);
	}
	*out = y;
	return 0;
}

int ew_unary(tbc_interp *ip, const tbc_op *op, const ew_def *def, ew_ctx *ctx, const tbc_tensor *const *in,
	     tbc_tensor **out) {
	return ew_map(ip, op, def, ctx, 1, in, 0, in[0]->dtype, out);
}

int ew_nary(tbc_interp *ip, const tbc_op *op, const ew_def *def, ew_ctx *ctx, const tbc_tensor *const *in,
	    tbc_tensor **out) {
	return ew_map(ip, op, def, ctx, op->n_inputs, in, 0, in[0]->dtype, out);
}

int ew_nary_bool(tbc_interp *ip, const tbc_op *op, const ew_def *def, const tbc_tensor *const *in,
		 tbc_tensor **out) {
	return ew_map(ip, op, def, NULL, op->n_inputs, in, 0, TBC_DT_BOOL, out);
}
