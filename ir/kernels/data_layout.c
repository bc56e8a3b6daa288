/* Ops that rearrange elements by index arithmetic alone: Transpose, Concat,
 * Split, Slice, Tile, Expand, DepthToSpace and SpaceToDepth.  Most are one
 * strided copy (tbc_data_copy_strided) over the output. */
#include "data.h"
#include "ir/symdim.h"

/* ---- Transpose ---- */

/* perm of op for rank (default: reversed); false with a message on error. */
static bool transpose_perm(const tbc_op *op, int rank, int *perm, char *err, size_t err_size) {
	const int64_t *p;
	int n = tbc_attr_ints(op, "perm", &p);
	if (n < 0) {
		for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
		return true;
	}
	if (n != rank) {
		snprintf(err, err_size, "perm has %d entries for an input of rank %d", n, rank);
		return false;
	}
	bool seen[TBC_MAX_RANK] = {false};
	for (int i = 0; i < n; i++) {
		if (p[i] < 0 || p[i] >= rank || seen[p[i]]) {
			snprintf(err, err_size, "perm is not a permutation of 0..%d (entry %d is %lld)", rank - 1, i,
				 (long long)p[i]);
			return false;
		}
		seen[p[i]] = true;
		perm[i] = (int)p[i];
	}
	return true;
}

bool tbc_shape_Transpose(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	tbc_type t = {.dtype = in->dtype, .rank = in->rank};
	if (in->rank >= 0) {
		int perm[TBC_MAX_RANK];
		char err[128];
		if (!transpose_perm(op, in->rank, perm, err, sizeof err)) return tbc_infer_error(cx, op, "%s", err);
		for (int i = 0; i < in->rank; i++) t.dims[i] = in->dims[perm[i]];
	}
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

int tbc_interp_Transpose(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	int perm[TBC_MAX_RANK];
	char err[128];
	if (!transpose_perm(op, x->rank, perm, err, sizeof err)) return tbc_interp_error(ip, op, "%s", err);
	int64_t dims[TBC_MAX_RANK], xs[TBC_MAX_RANK], strides[TBC_MAX_RANK];
	tbc_strides(x->rank, x->dims, xs);
	for (int i = 0; i < x->rank; i++) {
		dims[i] = x->dims[perm[i]];
		strides[i] = xs[perm[i]];
	}
	tbc_tensor *t = tbc_interp_new(ip, op, x->dtype, x->rank, dims);
	if (!t) return -1;
	tbc_data_copy_strided(t->data, x->data, tbc_dtype_size(x->dtype), x->rank, dims, 0, strides);
	out[0] = t;
	return 0;
}

/* ---- Concat ---- */
bool tbc_shape_Concat(tbc_infer *cx, tbc_op *op) {
	const tbc_type *first = &op->inputs[0]->type;
	int rank = -1;
	for (int k = 0; k < op->n_inputs; k++) {
		const tbc_type *t = &op->inputs[k]->type;
		if (t->dtype != first->dtype)
			return tbc_infer_error(cx, op, "input %d is %s, input 0 is %s", k, tbc_dtype_name(t->dtype),
					       tbc_dtype_name(first->dtype));
		if (t->rank < 0) continue;
		if (rank >= 0 && t->rank != rank)
			return tbc_infer_error(cx, op, "input %d has rank %d, another input has rank %d", k, t->rank, rank);
		rank = t->rank;
	}
	tbc_type out = {.dtype = first->dtype, .rank = rank};
	if (rank >= 0) {
		int a;
		if (rank == 0) return tbc_infer_error(cx, op, "cannot concatenate scalars");
		if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), rank, &a))
			return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d",
					       (long long)tbc_attr_int(op, "axis", 0), rank);
		bool unknown = false;
		tbc_dim sum = {0, NULL};
		for (int d = 0; d < rank; d++) {
			out.dims[d] = (tbc_dim){-1, NULL};
			for (int k = 0; k < op->n_inputs; k++) {
				const tbc_type *t = &op->inputs[k]->type;
				if (t->rank < 0) {
					if (d == a) unknown = true;
					continue;
				}
				tbc_dim x = t->dims[d];
				if (d == a) {
					/* past_seq + seq: a derived dim when the lengths are symbolic. */
					if (!unknown) sum = tbc_dim_add(cx->module, sum, x, 1);
					if (!sum.sym && sum.size < 0) unknown = true;
				} else if (!out.dims[d].sym && out.dims[d].size < 0) {
					out.dims[d] = x;
				} else if (!x.sym && !out.dims[d].sym && x.size != out.dims[d].size) {
					return tbc_infer_error(cx, op, "inputs disagree on dim %d: %lld and %lld", d,
							       (long long)out.dims[d].size, (long long)x.size);
				} else if (!x.sym) {
					out.dims[d] = x; /* a static size beats a symbolic one */
				}
			}
			if (!out.dims[d].sym && out.dims[d].size < 0) out.dims[d] = tbc_module_fresh_dim(cx->module);
		}
		out.dims[a] = unknown ? tbc_module_fresh_dim(cx->module) : sum;
	}
	if (op->outputs[0]) op->outputs[0]->type = out;
	return true;
}

int tbc_interp_Concat(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x0 = in[0];
	int a;
	if (x0->rank == 0) return tbc_interp_error(ip, op, "cannot concatenate scalars");
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), x0->rank, &a))
		return tbc_interp_error(ip, op, "axis is out of range for rank %d", x0->rank);
	int64_t dims[TBC_MAX_RANK];
	memcpy(dims, x0->dims, sizeof dims);
	dims[a] = 0;
	for (int k = 0; k < op->n_inputs; k++) {
		const tbc_tensor *x = in[k];
		if (x->dtype != x0->dtype || x->rank != x0->rank)
			return tbc_interp_error(ip, op, "input %d differs in dtype or rank from input 0", k);
		for (int d = 0; d < x->rank; d++)
			if (d != a && x->dims[d] != x0->dims[d])
				return tbc_interp_error(ip, op, "input %d has %lld in dim %d, input 0 has %lld", k,
							(long long)x->dims[d], d, (long long)x0->dims[d]);
		dims[a] += x->dims[a];
	}
	tbc_tensor *t = tbc_interp_new(ip, op, x0->dtype, x0->rank, dims);
	if (!t) return -1;
	size_t es = tbc_dtype_size(x0->dtype);
	int64_t outer = 1, inner = 1;
	for (int d = 0; d < a; d++) outer *= dims[d];
	for (int d = a + 1; d < x0->rank; d++) inner *= dims[d];
	char *dst = t->data;
	for (int64_t o = 0; o < outer; o++)
		for (int k = 0; k < op->n_inputs; k++) {
			size_t chunk = (size_t)(in[k]->dims[a] * inner) * es;
			memcpy(dst, (const char *)in[k]->data + (size_t)o * chunk, chunk);
			dst += chunk;
		}
	out[0] = t;
	return 0;
}

/* ---- Split ---- */

/* Sizes of the n parts of a dim of size dim when no split input is given:
 * equal parts, or with num_outputs (opset 18) ceil-sized parts and a smaller
 * last one.  False with a message when that does not work out. */
static bool split_sizes_default(const tbc_op *op, int64_t dim, int n, int64_t *sizes, char *err, size_t err_size) {
	int64_t num = tbc_attr_int(op, "num_outputs", 0);
	if (num && num != n) {
		snprintf(err, err_size, "num_outputs is %lld but the node has %d outputs", (long long)num, n);
		return false;
	}
	if (dim % n == 0) {
		for (int i = 0; i < n; i++) sizes[i] = dim / n;
		return true;
	}
	if (!num) {
		snprintf(err, err_size, "a dim of %lld does not split into %d equal parts", (long long)dim, n);
		return false;
	}
	int64_t chunk = dim / n + 1;
	for (int i = 0; i < n - 1; i++) sizes[i] = chunk;
	sizes[n - 1] = dim - chunk * (n - 1);
	if (sizes[n - 1] < 0) {
		snprintf(err, err_size, "a dim of %lld does not split into %d parts of %lld", (long long)dim, n,
			 (long long)chunk);
		return false;
	}
	return true;
}

bool tbc_shape_Split(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	int n = op->n_outputs;
	if (in->rank < 0) {
		for (int i = 0; i < n; i++) tbc_data_set_out(cx, op, i, in->dtype, -1, NULL);
		return true;
	}
	int a;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), in->rank, &a))
		return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d", (long long)tbc_attr_int(op, "axis", 0),
				       in->rank);
	int64_t *sizes = calloc((size_t)n, sizeof *sizes);
	if (!sizes) return tbc_infer_error(cx, op, "out of memory");
	tbc_dim dim = in->dims[a];
	bool known = false, ok = true;
	char err[160] = "";
	if (op->n_inputs > 1 && op->inputs[1]) {
		int k = tbc_data_const_ints(op, 1, sizes, n);
		if (k == -2 || (k >= 0 && k != n)) {
			snprintf(err, sizeof err, "split must be a 1-D integer tensor of %d values (one per output)", n);
			ok = false;
		} else if (k == n) {
			int64_t sum = 0;
			for (int i = 0; i < n && ok; i++) {
				if (sizes[i] < 0) {
					snprintf(err, sizeof err, "split[%d] is negative", i);
					ok = false;
				}
				sum += sizes[i];
			}
			if (ok && !dim.sym && sum != dim.size) {
				snprintf(err, sizeof err, "split sums to %lld but the dim is %lld", (long long)sum, (long long)dim.size);
				ok = false;
			}
			known = ok;
		}
	} else if (!dim.sym) {
		known = split_sizes_default(op, dim.size, n, sizes, err, sizeof err);
		/* num_outputs that cannot cut the dim (5 into 4) is left to the
		 * kernel: such a Split sits in untaken If branches of valid models. */
		ok = known || tbc_attr_int(op, "num_outputs", 0) != 0;
	}
	/* Equal parts of a symbolic dim are all the same unknown size. */
	tbc_dim equal = tbc_module_fresh_dim(cx->module);
	bool all_equal = !(op->n_inputs > 1 && op->inputs[1]) && !tbc_attr_int(op, "num_outputs", 0);
	for (int i = 0; ok && i < n; i++) {
		if (!op->outputs[i]) continue;
		tbc_type t = *in;
		t.dims[a] = known ? (tbc_dim){sizes[i], NULL} : all_equal ? equal : tbc_module_fresh_dim(cx->module);
		op->outputs[i]->type = t;
	}
	free(sizes);
	return ok ? true : tbc_infer_error(cx, op, "%s", err);
}

int tbc_interp_Split(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *sp = op->n_inputs > 1 ? in[1] : NULL;
	int n = op->n_outputs, a;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), x->rank, &a))
		return tbc_interp_error(ip, op, "axis is out of range for rank %d", x->rank);
	int64_t *sizes = calloc((size_t)n, sizeof *sizes);
	if (!sizes) return tbc_interp_error(ip, op, "out of memory");
	char err[160] = "";
	bool ok = true;
	if (sp) {
		if (!tbc_dtype_is_int(sp->dtype) || sp->rank > 1 || sp->numel != n) {
			snprintf(err, sizeof err, "split must be a 1-D integer tensor of %d values (one per output)", n);
			ok = false;
		}
		int64_t sum = 0;
		for (int i = 0; ok && i < n; i++) {
			sizes[i] = tbc_get_i64(sp, i);
			if (sizes[i] < 0) {
				snprintf(err, sizeof err, "split[%d] is negative", i);
				ok = false;
			}
			sum += sizes[i];
		}
		if (ok && sum != x->dims[a]) {
			snprintf(err, sizeof err, "split sums to %lld but the dim is %lld", (long long)sum, (long long)x->dims[a]);
			ok = false;
		}
	} else {
		ok = split_sizes_default(op, x->dims[a], n, sizes, err, sizeof err);
	}
	if (!ok) {
		free(sizes);
		return tbc_interp_error(ip, op, "%s", err);
	}
	int64_t xs[TBC_MAX_RANK], dims[TBC_MAX_RANK], pos = 0;
	tbc_strides(x->rank, x->dims, xs);
	int rc = 0;
	for (int i = 0; i < n && rc == 0; i++) {
		memcpy(dims, x->dims, sizeof dims);
		dims[a] = sizes[i];
		if (op->outputs[i]) {
			tbc_tensor *t = tbc_interp_new(ip, op, x->dtype, x->rank, dims);
			if (!t) {
				rc = -1;
				break;
			}
			tbc_data_copy_strided(t->data, x->data, tbc_dtype_size(x->dtype), x->rank, dims, pos * xs[a], xs);
			out[i] = t;
		}
		pos += sizes[i];
	}
	free(sizes);
	return rc;
}

/* ---- Slice ---- */

/* Clamps a slice of a dim of size dim as the spec does; gives the first index
 * and the element count. */
static void slice_dim(int64_t start, int64_t end, int64_t step, int64_t dim, int64_t *first, int64_t *count) {
	if (start < 0) start += dim;
	if (end < 0) end += dim;
	if (step > 0) {
		start = start < 0 ? 0 : start > dim ? dim : start;
		end = end < 0 ? 0 : end > dim ? dim : end;
		*count = end > start ? (int64_t)((uint64_t)(end - start - 1) / (uint64_t)step) + 1 : 0;
	} else {
		start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
		end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
		*count = start > end ? (int64_t)((uint64_t)(start - end - 1) / ((uint64_t)0 - (uint64_t)step)) + 1 : 0;
	}
	*first = start;
}

/* Normalized slice parameters per axis of x: for sliced axes starts/ends/steps,
 * the others whole.  False with a message on bad parameters. */
typedef struct slice_args {
	int n;
	int64_t starts[TBC_MAX_RANK], ends[TBC_MAX_RANK], steps[TBC_MAX_RANK];
	int axes[TBC_MAX_RANK];
} slice_args;

static bool slice_parse(int rank, int n, const int64_t *starts, const int64_t *ends, const int64_t *axes, int n_axes,
			const int64_t *steps, int n_steps, slice_args *sa, char *err, size_t err_size) {
	if (n > rank || (axes && n_axes != n) || (steps && n_steps != n)) {
		snprintf(err, err_size, "starts, ends, axes and steps must have the same length, at most the rank %d", rank);
		return false;
	}
	bool seen[TBC_MAX_RANK] = {false};
	sa->n = n;
	for (int i = 0; i < n; i++) {
		int a = i;
		if (axes && !tbc_norm_axis(axes[i], rank, &a)) {
			snprintf(err, err_size, "axis %lld is out of range for rank %d", (long long)axes[i], rank);
			return false;
		}
		if (seen[a]) {
			snprintf(err, err_size, "axis %d is sliced twice", a);
			return false;
		}
		seen[a] = true;
		sa->axes[i] = a;
		sa->starts[i] = starts[i];
		sa->ends[i] = ends[i];
		sa->steps[i] = steps ? steps[i] : 1;
		if (sa->steps[i] == 0) {
			snprintf(err, err_size, "step %d is 0", i);
			return false;
		}
	}
	return true;
}

/* The length of a step-1 slice [start, end) of a dim d when start or end is
 * symbolic (a size computed from shapes): end - start as a polynomial,
 * assuming both lie within [0, d] once negative constants count from the
 * end, which is what exported models slice with (a causal mask's rows
 * ns - nd .. ns).  The compiled code computes the slice as the interpreter
 * does and checks its length against this dim (docs/symbolic-shapes.md), so
 * a run where the assumption fails stops with an error.  {-1, NULL} when the
 * length cannot be written. */
static tbc_dim slice_symbolic_len(tbc_module *m, tbc_sval start, tbc_sval end, tbc_dim d) {
	if (!start.known || !end.known) return (tbc_dim){-1, NULL};
	tbc_dim s = tbc_sval_dim(start), e = tbc_sval_dim(end);
	if (!start.sym && start.c < 0) s = tbc_dim_add(m, d, (tbc_dim){-start.c, NULL}, -1);
	if (!end.sym && end.c < 0) e = tbc_dim_add(m, d, (tbc_dim){-end.c, NULL}, -1);
	if (!end.sym && end.c >= INT32_MAX) e = d;
	if (!d.sym && !s.sym && s.size > d.size) s = d;
	if (!d.sym && !e.sym && e.size > d.size) e = d;
	if ((!s.sym && s.size < 0) || (!e.sym && e.size < 0)) return (tbc_dim){-1, NULL};
	tbc_dim len = tbc_dim_add(m, e, s, -1);
	if (!len.sym && len.size < 0 && !e.sym && !s.sym) return (tbc_dim){0, NULL}; /* empty */
	return len;
}

bool tbc_shape_Slice(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	tbc_type t = *in;
	if (in->rank < 0) {
		if (op->outputs[0]) op->outputs[0]->type = t;
		return true;
	}
	int64_t starts[TBC_MAX_RANK], ends[TBC_MAX_RANK], axes[TBC_MAX_RANK], steps[TBC_MAX_RANK];
	int ns = tbc_data_const_ints(op, 1, starts, TBC_MAX_RANK);
	int ne = tbc_data_const_ints(op, 2, ends, TBC_MAX_RANK);
	bool has_axes = op->n_inputs > 3 && op->inputs[3], has_steps = op->n_inputs > 4 && op->inputs[4];
	int na = has_axes ? tbc_data_const_ints(op, 3, axes, TBC_MAX_RANK) : 0;
	int nt = has_steps ? tbc_data_const_ints(op, 4, steps, TBC_MAX_RANK) : 0;
	if (ns == -2 || ne == -2 || na == -2 || nt == -2)
		return tbc_infer_error(cx, op, "starts, ends, axes and steps must be 1-D integer tensors of at most %d values",
				       TBC_MAX_RANK);
	tbc_sval sstart[TBC_MAX_RANK], send[TBC_MAX_RANK];
	int nss = ns < 0 ? tbc_input_svals(op, 1, sstart) : -1, nse = ne < 0 ? tbc_input_svals(op, 2, send) : -1;
	if (na < 0) {
		/* Unknown axes: any dim may change. */
		tbc_type_set_unknown_dims(cx->module, &t, in->dtype, in->rank);
	} else if ((ns < 0 || ne < 0) && nt >= 0 && (ns >= 0 || nss >= 0) && (ne >= 0 || nse >= 0)) {
		/* Bounds computed from shapes: symbolic lengths where the step is 1. */
		int n = ns >= 0 ? ns : nss;
		if (n != (ne >= 0 ? ne : nse)) return tbc_infer_error(cx, op, "starts and ends differ in length");
		for (int i = 0; i < n; i++) {
			if (ns >= 0) sstart[i] = (tbc_sval){true, NULL, starts[i]};
			if (ne >= 0) send[i] = (tbc_sval){true, NULL, ends[i]};
			starts[i] = ends[i] = 0;
		}
		slice_args sa;
		char err[160];
		if (!slice_parse(in->rank, n, starts, ends, has_axes ? axes : NULL, na, has_steps ? steps : NULL, nt, &sa, err,
				 sizeof err))
			return tbc_infer_error(cx, op, "%s", err);
		for (int i = 0; i < n; i++) {
			tbc_dim len = sa.steps[i] == 1 ? slice_symbolic_len(cx->module, sstart[i], send[i], in->dims[sa.axes[i]])
						       : (tbc_dim){-1, NULL};
			t.dims[sa.axes[i]] = len.sym || len.size >= 0 ? len : tbc_module_fresh_dim(cx->module);
		}
	} else if (ns < 0 || ne < 0 || nt < 0) {
		/* Known axes, unknown bounds: those dims become unknown. */
		if (!has_axes) {
			tbc_type_set_unknown_dims(cx->module, &t, in->dtype, in->rank);
		} else {
			slice_args sa;
			char err[160];
			for (int i = 0; i < na; i++) starts[i] = ends[i] = 0;
			if (!slice_parse(in->rank, na, starts, ends, axes, na, NULL, 0, &sa, err, sizeof err))
				return tbc_infer_error(cx, op, "%s", err);
			for (int i = 0; i < na; i++) t.dims[sa.axes[i]] = tbc_module_fresh_dim(cx->module);
		}
	} else {
		if (ne != ns) return tbc_infer_error(cx, op, "starts has %d values, ends %d", ns, ne);
		slice_args sa;
		char err[160];
		if (!slice_parse(in->rank, ns, starts, ends, has_axes ? axes : NULL, na, has_steps ? steps : NULL, nt, &sa,
				 err, sizeof err))
			return tbc_infer_error(cx, op, "%s", err);
		for (int i = 0; i < sa.n; i++) {
			tbc_dim d = in->dims[sa.axes[i]];
			int64_t first, count;
			if (!d.sym) {
				slice_dim(sa.starts[i], sa.ends[i], sa.steps[i], d.size, &first, &count);
				t.dims[sa.axes[i]] = (tbc_dim){count, NULL};
			} else if (!(sa.steps[i] == 1 && sa.starts[i] == 0 && sa.ends[i] >= INT32_MAX)) {
				/* Only the whole-dim slice keeps a symbolic size. */
				t.dims[sa.axes[i]] = tbc_module_fresh_dim(cx->module);
			}
		}
	}
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

int tbc_interp_Slice(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	const tbc_tensor *args[4] = {in[1], in[2], op->n_inputs > 3 ? in[3] : NULL, op->n_inputs > 4 ? in[4] : NULL};
	int64_t vals[4][TBC_MAX_RANK];
	int cnt[4] = {0, 0, 0, 0};
	for (int k = 0; k < 4; k++) {
		if (!args[k]) continue;
		if (!tbc_dtype_is_int(args[k]->dtype) || args[k]->rank > 1 || args[k]->numel > TBC_MAX_RANK)
			return tbc_interp_error(ip, op, "starts, ends, axes and steps must be 1-D integer tensors");
		cnt[k] = (int)args[k]->numel;
		for (int i = 0; i < cnt[k]; i++) vals[k][i] = tbc_get_i64(args[k], i);
	}
	if (cnt[0] != cnt[1]) return tbc_interp_error(ip, op, "starts has %d values, ends %d", cnt[0], cnt[1]);
	slice_args sa;
	char err[160];
	if (!slice_parse(x->rank, cnt[0], vals[0], vals[1], args[2] ? vals[2] : NULL, cnt[2], args[3] ? vals[3] : NULL,
			 cnt[3], &sa, err, sizeof err))
		return tbc_interp_error(ip, op, "%s", err);
	int64_t dims[TBC_MAX_RANK], xs[TBC_MAX_RANK], strides[TBC_MAX_RANK], offset = 0;
	tbc_strides(x->rank, x->dims, xs);
	for (int d = 0; d < x->rank; d++) {
		dims[d] = x->dims[d];
		strides[d] = xs[d];
	}
	for (int i = 0; i < sa.n; i++) {
		int a = sa.axes[i];
		int64_t first, count;
		slice_dim(sa.starts[i], sa.ends[i], sa.steps[i], x->dims[a], &first, &count);
		dims[a] = count;
		strides[a] = xs[a] * sa.steps[i];
		if (count) offset += first * xs[a];
	}
	tbc_tensor *t = tbc_interp_new(ip, op, x->dtype, x->rank, dims);
	if (!t) return -1;
	tbc_data_copy_strided(t->data, x->data, tbc_dtype_size(x->dtype), x->rank, dims, offset, strides);
	out[0] = t;
	return 0;
}

/* ---- Tile ---- */
bool tbc_shape_Tile(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	tbc_type t = *in;
	if (in->rank >= 0) {
		int64_t reps[TBC_MAX_RANK];
		int n = tbc_data_const_ints(op, 1, reps, TBC_MAX_RANK);
		if (n == -2 || (n >= 0 && n != in->rank))
			return tbc_infer_error(cx, op, "repeats must be a 1-D integer tensor of %d values", in->rank);
		for (int d = 0; d < in->rank; d++) {
			if (n < 0) {
				if (in->dims[d].sym || in->dims[d].size) t.dims[d] = tbc_module_fresh_dim(cx->module);
				continue;
			}
			if (reps[d] < 0) return tbc_infer_error(cx, op, "repeats[%d] is negative", d);
			if (!in->dims[d].sym) t.dims[d].size = in->dims[d].size * reps[d];
			else if (reps[d] == 0) t.dims[d] = (tbc_dim){0, NULL};
			else if (reps[d] != 1) t.dims[d] = tbc_module_fresh_dim(cx->module);
		}
	}
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

int tbc_interp_Tile(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *r = in[1];
	if (!tbc_dtype_is_int(r->dtype) || r->rank != 1 || r->numel != x->rank)
		return tbc_interp_error(ip, op, "repeats must be a 1-D integer tensor of %d values", x->rank);
	int64_t dims[TBC_MAX_RANK], xs[TBC_MAX_RANK];
	for (int d = 0; d < x->rank; d++) {
		int64_t rep = tbc_get_i64(r, d);
		if (rep < 0) return tbc_interp_error(ip, op, "repeats[%d] is negative", d);
		if (rep && x->dims[d] > INT64_MAX / rep) return tbc_interp_error(ip, op, "the result is too large");
		dims[d] = x->dims[d] * rep;
	}
	tbc_tensor *t = tbc_interp_new(ip, op, x->dtype, x->rank, dims);
	if (!t) return -1;
	tbc_strides(x->rank, x->dims, xs);
	size_t es = tbc_dtype_size(x->dtype);
	int64_t idx[TBC_MAX_RANK] = {0};
	for (int64_t k = 0; k < t->numel; k++) {
		int64_t src = 0;
		for (int d = 0; d < x->rank; d++) src += (idx[d] % x->dims[d]) * xs[d];
		memcpy((char *)t->data + (size_t)k * es, (const char *)x->data + (size_t)src * es, es);
		tbc_index_next(x->rank, dims, idx);
	}
	out[0] = t;
	return 0;
}

/* ---- Expand ---- */
bool tbc_shape_Expand(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	int64_t probe[TBC_MAX_RANK];
	if (tbc_data_const_ints(op, 1, probe, TBC_MAX_RANK) == -2)
		return tbc_infer_error(cx, op, "the shape must be a 1-D integer tensor of at most %d values", TBC_MAX_RANK);
	tbc_sval shape[TBC_MAX_RANK];
	int n = tbc_input_svals(op, 1, shape);
	tbc_type t = {.dtype = in->dtype, .rank = -1};
	if (in->rank < 0) {
		/* rank unknown */
	} else if (n >= 0) {
		/* Constant or symbolic (ir/symval.c) elements; an unknown one is a
		 * fresh dim, which broadcasting against a static dim other than 1
		 * resolves to that dim. */
		tbc_type s = {.dtype = in->dtype, .rank = n};
		for (int i = 0; i < n; i++) {
			if (shape[i].known && !shape[i].sym && shape[i].c < 0)
				return tbc_infer_error(cx, op, "shape[%d] is negative", i);
			s.dims[i] = shape[i].known ? tbc_sval_dim(shape[i]) : tbc_module_fresh_dim(cx->module);
		}
		const tbc_type *both[2] = {in, &s};
		if (!tbc_broadcast_types(cx, op, 2, both, &t)) return false;
		t.dtype = in->dtype;
	} else {
		int64_t len = tbc_data_static_len(&op->inputs[1]->type);
		if (len > TBC_MAX_RANK) return tbc_infer_error(cx, op, "the shape has more than %d dims", TBC_MAX_RANK);
		if (len >= 0) {
			t.rank = in->rank > len ? in->rank : (int)len;
			for (int d = 0; d < t.rank; d++) {
				int k = d - (t.rank - in->rank);
				/* A static input dim other than 1 is what the shape must broadcast to. */
				if (k >= 0 && !in->dims[k].sym && in->dims[k].size != 1) t.dims[d] = in->dims[k];
				else t.dims[d] = tbc_module_fresh_dim(cx->module);
			}
		}
	}
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

int tbc_interp_Expand(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *s = in[1];
	if (!tbc_dtype_is_int(s->dtype) || s->rank != 1 || s->numel > TBC_MAX_RANK)
		return tbc_interp_error(ip, op, "the shape must be a 1-D integer tensor of at most %d values", TBC_MAX_RANK);
	int64_t shape[TBC_MAX_RANK], dims[TBC_MAX_RANK], strides[TBC_MAX_RANK];
	for (int i = 0; i < s->numel; i++)
		if ((shape[i] = tbc_get_i64(s, i)) < 0) return tbc_interp_error(ip, op, "shape[%d] is negative", i);
	int rank;
	if (!tbc_broadcast_dims(x->rank, x->dims, (int)s->numel, shape, &rank, dims))
		return tbc_interp_error(ip, op, "the input does not broadcast to the shape");
	tbc_tensor *t = tbc_interp_new(ip, op, x->dtype, rank, dims);
	if (!t) return -1;
	tbc_broadcast_strides(x->rank, x->dims, rank, strides);
	tbc_data_copy_strided(t->data, x->data, tbc_dtype_size(x->dtype), rank, dims, 0, strides);
	out[0] = t;
	return 0;
}

/* ---- DepthToSpace / SpaceToDepth ---- */

/* Checks rank 4 and the blocksize; false with a message. */
static bool block_args(const tbc_op *op, int rank, int64_t *b, bool *crd, char *err, size_t err_size) {
	*b = tbc_attr_int(op, "blocksize", 0);
	const char *mode = tbc_attr_string(op, "mode", "DCR");
	*crd = !strcmp(mode, "CRD");
	if (rank >= 0 && rank != 4) {
		snprintf(err, err_size, "the input must have rank 4, not %d", rank);
		return false;
	}
	if (*b <= 0 || *b > (1 << 20)) {
		snprintf(err, err_size, "blocksize must be positive, not %lld", (long long)*b);
		return false;
	}
	if (!*crd && strcmp(mode, "DCR")) {
		snprintf(err, err_size, "mode must be DCR or CRD, not '%s'", mode);
		return false;
	}
	return true;
}

/* to_space: DepthToSpace (C/b^2, H*b, W*b), else SpaceToDepth. */
static bool block_shape(tbc_infer *cx, tbc_op *op, bool to_space) {
	const tbc_type *in = &op->inputs[0]->type;
	int64_t b;
	bool crd;
	char err[128];
	if (!block_args(op, in->rank, &b, &crd, err, sizeof err)) return tbc_infer_error(cx, op, "%s", err);
	tbc_type t = *in;
	if (in->rank == 4) {
		tbc_dim c = in->dims[1];
		if (to_space && !c.sym && c.size % (b * b))
			return tbc_infer_error(cx, op, "channels (%lld) are not a multiple of blocksize^2", (long long)c.size);
		for (int d = 2; d < 4; d++)
			if (!to_space && !in->dims[d].sym && in->dims[d].size % b)
				return tbc_infer_error(cx, op, "dim %d (%lld) is not a multiple of the blocksize", d,
						       (long long)in->dims[d].size);
		for (int d = 1; d < 4; d++) {
			if (in->dims[d].sym) {
				t.dims[d] = tbc_module_fresh_dim(cx->module);
				continue;
			}
			int64_t v = in->dims[d].size;
			if (d == 1) t.dims[d].size = to_space ? v / (b * b) : v * b * b;
			else t.dims[d].size = to_space ? v * b : v / b;
		}
	}
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

bool tbc_shape_DepthToSpace(tbc_infer *cx, tbc_op *op) { return block_shape(cx, op, true); }
bool tbc_shape_SpaceToDepth(tbc_infer *cx, tbc_op *op) { return block_shape(cx, op, false); }

/* Both ops are a reshape to 6-D, a transpose and a reshape back (the spec's
 * definition), done as one strided copy. */
static int block_run(tbc_interp *ip, const tbc_op *op, const tbc_tensor *x, bool to_space, tbc_tensor **out) {
	int64_t b;
	bool crd;
	char err[128];
	if (!block_args(op, x->rank, &b, &crd, err, sizeof err)) return tbc_interp_error(ip, op, "%s", err);
	int64_t n = x->dims[0], c = x->dims[1], h = x->dims[2], w = x->dims[3];
	int64_t v6[6], perm[6], odims[4];
	if (to_space) {
		if (c % (b * b)) return tbc_interp_error(ip, op, "channels (%lld) are not a multiple of blocksize^2", (long long)c);
		int64_t cc = c / (b * b);
		if (crd) {
			int64_t v[6] = {n, cc, b, b, h, w}, p[6] = {0, 1, 4, 2, 5, 3};
			memcpy(v6, v, sizeof v6);
			memcpy(perm, p, sizeof perm);
		} else {
			int64_t v[6] = {n, b, b, cc, h, w}, p[6] = {0, 3, 4, 1, 5, 2};
			memcpy(v6, v, sizeof v6);
			memcpy(perm, p, sizeof perm);
		}
		int64_t o[4] = {n, cc, h * b, w * b};
		memcpy(odims, o, sizeof odims);
	} else {
		if (h % b || w % b) return tbc_interp_error(ip, op, "height and width must be multiples of the blocksize");
		int64_t v[6] = {n, c, h / b, b, w / b, b};
		int64_t p_dcr[6] = {0, 3, 5, 1, 2, 4}, p_crd[6] = {0, 1, 3, 5, 2, 4};
		memcpy(v6, v, sizeof v6);
		memcpy(perm, crd ? p_crd : p_dcr, sizeof perm);
		int64_t o[4] = {n, c * b * b, h / b, w / b};
		memcpy(odims, o, sizeof odims);
	}
	int64_t vs[6], dims[6], strides[6];
	tbc_strides(6, v6, vs);
	for (int i = 0; i < 6; i++) {
		dims[i] = v6[perm[i]];
		strides[i] = vs[perm[i]];
	}
	tbc_tensor *t = tbc_interp_new(ip, op, x->dtype, 4, odims);
	if (!t) return -1;
	tbc_data_copy_strided(t->data, x->data, tbc_dtype_size(x->dtype), 6, dims, 0, strides);
	*out = t;
	return 0;
}

int tbc_interp_DepthToSpace(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return block_run(ip, op, in[0], true, &out[0]);
}
int tbc_interp_SpaceToDepth(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return block_run(ip, op, in[0], false, &out[0]);
}
