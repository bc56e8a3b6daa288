/* Ops that only change how a tensor's elements are viewed, or that ask about
 * its shape: Identity, Reshape, Flatten, Squeeze, Unsqueeze, Shape, Size and
 * ConstantOfShape.  The element bytes are copied unchanged. */
#include "data.h"
#include "ir/symdim.h"

/* out = in's bytes with a new shape (same element count). */
static int view_as(tbc_interp *ip, const tbc_op *op, const tbc_tensor *in, int rank, const int64_t *dims,
		   tbc_tensor **out) {
	int64_t n = tbc_shape_numel(rank, dims);
	if (n != in->numel)
		return tbc_interp_error(ip, op, "cannot view %lld elements as a shape of %lld elements",
					(long long)in->numel, (long long)n);
	tbc_tensor *t = tbc_interp_new(ip, op, in->dtype, rank, dims);
	if (!t) return -1;
	memcpy(t->data, in->data, (size_t)in->numel * tbc_dtype_size(in->dtype));
	*out = t;
	return 0;
}

/* ---- Identity ---- */
int tbc_interp_Identity(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return view_as(ip, op, in[0], in[0]->rank, in[0]->dims, &out[0]);
}

/* ---- Reshape ---- */

/* The -1 dim of a Reshape from in to out (out[minus] is the unknown): the
 * element count of in over that of the other dims of out, after cancelling
 * symbolic dims that appear on both sides; with symbols left over, the exact
 * quotient of the two products as polynomials (batch*seq*768 over
 * batch*12*64 is seq), else a fresh dim. */
static tbc_dim reshape_infer_minus1(tbc_infer *cx, const tbc_op *op, const tbc_type *in, const tbc_dim *out, int rank,
				    int minus, bool *bad) {
	bool used[TBC_MAX_RANK] = {false};
	int64_t num = 1, den = 1;
	bool unknown = false;
	for (int i = 0; i < rank; i++) {
		if (i == minus) continue;
		if (out[i].sym) {
			int k = 0;
			while (k < in->rank && (used[k] || !tbc_dim_eq(in->dims[k], out[i]))) k++;
			if (k == in->rank) unknown = true;
			else used[k] = true;
		} else {
			den *= out[i].size;
		}
	}
	for (int k = 0; k < in->rank; k++) {
		if (used[k]) continue;
		if (in->dims[k].sym) unknown = true;
		else num *= in->dims[k].size;
	}
	if (unknown) {
		tbc_dim n = tbc_data_dim_product(cx, in->rank, in->dims), d = {1, NULL};
		for (int i = 0; i < rank && (n.sym || n.size >= 0); i++)
			if (i != minus) d = tbc_dim_mul(cx->module, d, out[i]);
		tbc_dim q = tbc_dim_div_exact(cx->module, n, d);
		return q.sym || q.size >= 0 ? q : tbc_module_fresh_dim(cx->module);
	}
	if (den == 0 || num % den != 0) {
		*bad = true;
		tbc_infer_error(cx, op, "cannot reshape %lld elements: the other dims multiply to %lld", (long long)num,
				(long long)den);
		return (tbc_dim){0, NULL};
	}
	return (tbc_dim){num / den, NULL};
}

bool tbc_shape_Reshape(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	bool allowzero = tbc_attr_int(op, "allowzero", 0) != 0;
	int64_t probe[TBC_MAX_RANK];
	if (tbc_data_const_ints(op, 1, probe, TBC_MAX_RANK) == -2)
		return tbc_infer_error(cx, op, "the shape must be a 1-D integer tensor of at most %d values", TBC_MAX_RANK);
	/* The shape's elements: constants, or symbolic values computed from
	 * other shapes (ir/symval.c). */
	tbc_sval shape[TBC_MAX_RANK];
	int n = tbc_input_svals(op, 1, shape);
	if (n < 0) {
		/* Shape known only when run: rank from the shape's length. */
		int64_t len = tbc_data_static_len(&op->inputs[1]->type);
		int64_t dims[TBC_MAX_RANK];
		for (int i = 0; i < TBC_MAX_RANK; i++) dims[i] = -1;
		if (len > TBC_MAX_RANK) return tbc_infer_error(cx, op, "the shape has more than %d dims", TBC_MAX_RANK);
		tbc_data_set_out(cx, op, 0, in->dtype, (int)len, dims);
		return true;
	}
	tbc_dim out[TBC_MAX_RANK];
	int minus = -1;
	bool has_zero = false;
	for (int i = 0; i < n; i++) {
		if (!shape[i].known) {
			out[i] = tbc_module_fresh_dim(cx->module);
		} else if (shape[i].sym) {
			/* A size: run-time checks hold it to what was derived (a 0 or -1
			 * there would mean something else: docs/symbolic-shapes.md). */
			out[i] = (tbc_dim){-1, shape[i].sym};
		} else if (shape[i].c < -1) {
			return tbc_infer_error(cx, op, "shape[%d] is %lld", i, (long long)shape[i].c);
		} else if (shape[i].c == -1) {
			if (minus >= 0) return tbc_infer_error(cx, op, "the shape has more than one -1");
			minus = i;
			out[i] = (tbc_dim){-1, NULL};
		} else if (shape[i].c == 0 && !allowzero) {
			if (in->rank < 0) out[i] = tbc_module_fresh_dim(cx->module);
			else if (i >= in->rank)
				return tbc_infer_error(cx, op, "shape[%d] is 0 (copy) but the input has rank %d", i, in->rank);
			else out[i] = in->dims[i];
		} else {
			has_zero |= shape[i].c == 0;
			out[i] = (tbc_dim){shape[i].c, NULL};
		}
	}
	if (allowzero && has_zero && minus >= 0)
		return tbc_infer_error(cx, op, "with allowzero, the shape cannot hold both 0 and -1");
	if (minus >= 0) {
		bool bad = false;
		out[minus] = in->rank < 0 ? tbc_module_fresh_dim(cx->module)
					  : reshape_infer_minus1(cx, op, in, out, n, minus, &bad);
		if (bad) return false;
	} else if (tbc_type_is_static(in)) {
		tbc_type o = {.dtype = in->dtype, .rank = n};
		for (int i = 0; i < n; i++) o.dims[i] = out[i];
		int64_t a = tbc_type_numel(in), b = tbc_type_numel(&o);
		if (b >= 0 && a != b)
			return tbc_infer_error(cx, op, "cannot reshape %lld elements into %lld", (long long)a, (long long)b);
	}
	if (op->outputs[0]) {
		tbc_type *t = &op->outputs[0]->type;
		memset(t, 0, sizeof *t);
		t->dtype = in->dtype;
		t->rank = n;
		for (int i = 0; i < n; i++) t->dims[i] = out[i];
	}
	return true;
}

int tbc_interp_Reshape(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *s = in[1];
	bool allowzero = tbc_attr_int(op, "allowzero", 0) != 0;
	if (!tbc_dtype_is_int(s->dtype) || s->rank != 1 || s->numel > TBC_MAX_RANK)
		return tbc_interp_error(ip, op, "the shape must be a 1-D integer tensor of at most %d values", TBC_MAX_RANK);
	int rank = (int)s->numel, minus = -1;
	int64_t dims[TBC_MAX_RANK], known = 1;
	for (int i = 0; i < rank; i++) {
		int64_t v = tbc_get_i64(s, i);
		if (v < -1) return tbc_interp_error(ip, op, "shape[%d] is %lld", i, (long long)v);
		if (v == -1) {
			if (minus >= 0) return tbc_interp_error(ip, op, "the shape has more than one -1");
			minus = i;
			continue;
		}
		if (v == 0 && !allowzero) {
			if (i >= x->rank) return tbc_interp_error(ip, op, "shape[%d] is 0 (copy) but the input has rank %d", i, x->rank);
			v = x->dims[i];
		}
		dims[i] = v;
		if (v && known > INT64_MAX / v) return tbc_interp_error(ip, op, "the shape overflows");
		known *= v;
	}
	if (minus >= 0) {
		if (known == 0 || x->numel % known != 0)
			return tbc_interp_error(ip, op, "cannot infer the -1 dim: %lld elements, other dims multiply to %lld",
						(long long)x->numel, (long long)known);
		dims[minus] = x->numel / known;
	}
	return view_as(ip, op, x, rank, dims, &out[0]);
}

/* ---- Flatten ---- */
bool tbc_shape_Flatten(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	int64_t axis = tbc_attr_int(op, "axis", 1);
	if (in->rank < 0) {
		int64_t dims[2] = {-1, -1};
		tbc_data_set_out(cx, op, 0, in->dtype, 2, dims);
		return true;
	}
	if (axis < -in->rank || axis > in->rank)
		return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d", (long long)axis, in->rank);
	int a = (int)(axis < 0 ? axis + in->rank : axis);
	if (op->outputs[0]) {
		tbc_type t = {.dtype = in->dtype, .rank = 2};
		t.dims[0] = tbc_data_dim_product(cx, a, in->dims);
		t.dims[1] = tbc_data_dim_product(cx, in->rank - a, in->dims + a);
		op->outputs[0]->type = t;
	}
	return true;
}

int tbc_interp_Flatten(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	int64_t axis = tbc_attr_int(op, "axis", 1);
	if (axis < -x->rank || axis > x->rank)
		return tbc_interp_error(ip, op, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
	int a = (int)(axis < 0 ? axis + x->rank : axis);
	int64_t dims[2] = {1, 1};
	for (int i = 0; i < x->rank; i++) dims[i < a ? 0 : 1] *= x->dims[i];
	return view_as(ip, op, x, 2, dims, &out[0]);
}

/* ---- Squeeze / Unsqueeze ---- */

/* Marks the axes (normalized against rank) in mark[]; false on a bad or
 * repeated axis, with the message in err. */
static bool mark_axes(const int64_t *axes, int n, int rank, bool *mark, char *err, size_t err_size) {
	for (int i = 0; i < rank; i++) mark[i] = false;
	for (int i = 0; i < n; i++) {
		int a;
		if (!tbc_norm_axis(axes[i], rank, &a)) {
			snprintf(err, err_size, "axis %lld is out of range for rank %d", (long long)axes[i], rank);
			return false;
		}
		if (mark[a]) {
			snprintf(err, err_size, "axis %lld is repeated", (long long)axes[i]);
			return false;
		}
		mark[a] = true;
	}
	return true;
}

bool tbc_shape_Squeeze(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	int64_t axes[TBC_MAX_RANK];
	bool has_axes = op->n_inputs > 1 && op->inputs[1];
	int n = has_axes ? tbc_data_const_ints(op, 1, axes, TBC_MAX_RANK) : 0;
	if (n == -2) return tbc_infer_error(cx, op, "axes must be a 1-D integer tensor of at most %d values", TBC_MAX_RANK);
	tbc_type t = {.dtype = in->dtype, .rank = -1};
	if (in->rank < 0) {
		/* rank unknown */
	} else if (has_axes && n < 0) {
		int64_t len = tbc_data_static_len(&op->inputs[1]->type);
		if (len >= 0 && len <= in->rank) tbc_type_set_unknown_dims(cx->module, &t, in->dtype, in->rank - (int)len);
	} else if (has_axes) {
		bool mark[TBC_MAX_RANK];
		char err[128];
		if (!mark_axes(axes, n, in->rank, mark, err, sizeof err)) return tbc_infer_error(cx, op, "%s", err);
		t.rank = 0;
		for (int i = 0; i < in->rank; i++) {
			if (!mark[i]) t.dims[t.rank++] = in->dims[i];
			else if (!in->dims[i].sym && in->dims[i].size != 1)
				return tbc_infer_error(cx, op, "cannot squeeze axis %d of size %lld", i, (long long)in->dims[i].size);
		}
	} else {
		/* Every dim of size 1 goes; a symbolic dim might be 1, which
		 * leaves the rank unknown, unless compiled code assumes it is
		 * not (and checks that while running). */
		bool sym = false;
		for (int i = 0; i < in->rank; i++) sym |= in->dims[i].sym != NULL;
		if (!sym || cx->static_ranks) {
			t.rank = 0;
			for (int i = 0; i < in->rank; i++)
				if (in->dims[i].sym || in->dims[i].size != 1) t.dims[t.rank++] = in->dims[i];
		}
	}
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

int tbc_interp_Squeeze(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *ax = op->n_inputs > 1 ? in[1] : NULL;
	bool mark[TBC_MAX_RANK];
	if (ax) {
		if (!tbc_dtype_is_int(ax->dtype) || ax->rank > 1 || ax->numel > TBC_MAX_RANK)
			return tbc_interp_error(ip, op, "axes must be a 1-D integer tensor");
		int64_t axes[TBC_MAX_RANK];
		for (int64_t i = 0; i < ax->numel; i++) axes[i] = tbc_get_i64(ax, i);
		char err[128];
		if (!mark_axes(axes, (int)ax->numel, x->rank, mark, err, sizeof err)) return tbc_interp_error(ip, op, "%s", err);
	} else {
		for (int i = 0; i < x->rank; i++) mark[i] = x->dims[i] == 1;
	}
	int64_t dims[TBC_MAX_RANK];
	int rank = 0;
	for (int i = 0; i < x->rank; i++) {
		if (!mark[i]) dims[rank++] = x->dims[i];
		else if (x->dims[i] != 1)
			return tbc_interp_error(ip, op, "cannot squeeze axis %d of size %lld", i, (long long)x->dims[i]);
	}
	return view_as(ip, op, x, rank, dims, &out[0]);
}

bool tbc_shape_Unsqueeze(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	int64_t axes[TBC_MAX_RANK];
	int n = tbc_data_const_ints(op, 1, axes, TBC_MAX_RANK);
	if (n == -2) return tbc_infer_error(cx, op, "axes must be a 1-D integer tensor of at most %d values", TBC_MAX_RANK);
	tbc_type t = {.dtype = in->dtype, .rank = -1};
	if (in->rank < 0) {
		/* rank unknown */
	} else if (n < 0) {
		int64_t len = tbc_data_static_len(&op->inputs[1]->type);
		if (len >= 0) {
			if (in->rank + len > TBC_MAX_RANK) return tbc_infer_error(cx, op, "the result has more than %d dims", TBC_MAX_RANK);
			tbc_type_set_unknown_dims(cx->module, &t, in->dtype, in->rank + (int)len);
		}
	} else {
		int rank = in->rank + n;
		if (rank > TBC_MAX_RANK) return tbc_infer_error(cx, op, "the result has more than %d dims", TBC_MAX_RANK);
		bool mark[TBC_MAX_RANK];
		char err[128];
		if (!mark_axes(axes, n, rank, mark, err, sizeof err)) return tbc_infer_error(cx, op, "%s", err);
		t.rank = rank;
		for (int i = 0, k = 0; i < rank; i++) t.dims[i] = mark[i] ? (tbc_dim){1, NULL} : in->dims[k++];
	}
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

int tbc_interp_Unsqueeze(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *ax = in[1];
	if (!tbc_dtype_is_int(ax->dtype) || ax->rank > 1 || x->rank + ax->numel > TBC_MAX_RANK)
		return tbc_interp_error(ip, op, "axes must be a 1-D integer tensor and the result at most %d dims", TBC_MAX_RANK);
	int rank = x->rank + (int)ax->numel;
	int64_t axes[TBC_MAX_RANK], dims[TBC_MAX_RANK];
	for (int64_t i = 0; i < ax->numel; i++) axes[i] = tbc_get_i64(ax, i);
	bool mark[TBC_MAX_RANK];
	char err[128];
	if (!mark_axes(axes, (int)ax->numel, rank, mark, err, sizeof err)) return tbc_interp_error(ip, op, "%s", err);
	for (int i = 0, k = 0; i < rank; i++) dims[i] = mark[i] ? 1 : x->dims[k++];
	return view_as(ip, op, x, rank, dims, &out[0]);
}

/* ---- Shape / Size ---- */

/* The [start, end) range of dims Shape returns, clamped as the spec says. */
static void shape_range(const tbc_op *op, int rank, int *start, int *end) {
	int64_t s = tbc_attr_int(op, "start", 0), e = tbc_attr_int(op, "end", rank);
	if (s < 0) s += rank;
	if (e < 0) e += rank;
	s = s < 0 ? 0 : s > rank ? rank : s;
	e = e < 0 ? 0 : e > rank ? rank : e;
	*start = (int)s;
	*end = (int)(e < s ? s : e);
}

bool tbc_shape_Shape(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	int64_t len = -1;
	if (in->rank >= 0) {
		int s, e;
		shape_range(op, in->rank, &s, &e);
		len = e - s;
	}
	tbc_data_set_out(cx, op, 0, TBC_DT_I64, 1, &len);
	return true;
}

int tbc_interp_Shape(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	int s, e;
	shape_range(op, in[0]->rank, &s, &e);
	int64_t len = e - s;
	tbc_tensor *t = tbc_interp_new(ip, op, TBC_DT_I64, 1, &len);
	if (!t) return -1;
	for (int i = s; i < e; i++) ((int64_t *)t->data)[i - s] = in[0]->dims[i];
	out[0] = t;
	return 0;
}

bool tbc_shape_Size(tbc_infer *cx, tbc_op *op) {
	tbc_data_set_out(cx, op, 0, TBC_DT_I64, 0, NULL);
	return true;
}

int tbc_interp_Size(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	tbc_tensor *t = tbc_interp_new(ip, op, TBC_DT_I64, 0, NULL);
	if (!t) return -1;
	((int64_t *)t->data)[0] = in[0]->numel;
	out[0] = t;
	return 0;
}

/* ---- ConstantOfShape ---- */
static bool const_of_shape_value(const tbc_op *op, const tbc_tensor **value) {
	*value = tbc_attr_tensor(op, "value");
	return !*value || (*value)->numel == 1;
}

bool tbc_shape_ConstantOfShape(tbc_infer *cx, tbc_op *op) {
	const tbc_tensor *value;
	if (!const_of_shape_value(op, &value)) return tbc_infer_error(cx, op, "value must hold exactly one element");
	tbc_dtype dt = value ? value->dtype : TBC_DT_F32;
	int64_t dims[TBC_MAX_RANK];
	if (tbc_data_const_ints(op, 0, dims, TBC_MAX_RANK) == -2)
		return tbc_infer_error(cx, op, "the shape must be a 1-D integer tensor of at most %d values", TBC_MAX_RANK);
	tbc_sval shape[TBC_MAX_RANK];
	int n = tbc_input_svals(op, 0, shape);
	if (n >= 0) {
		for (int i = 0; i < n; i++)
			if (shape[i].known && !shape[i].sym && shape[i].c < 0)
				return tbc_infer_error(cx, op, "shape[%d] is negative (%lld)", i, (long long)shape[i].c);
		if (op->outputs[0]) {
			tbc_type *t = &op->outputs[0]->type;
			memset(t, 0, sizeof *t);
			t->dtype = dt;
			t->rank = n;
			for (int i = 0; i < n; i++)
				t->dims[i] = shape[i].known ? tbc_sval_dim(shape[i]) : tbc_module_fresh_dim(cx->module);
		}
		return true;
	}
	int64_t len = tbc_data_static_len(&op->inputs[0]->type);
	if (len > TBC_MAX_RANK) return tbc_infer_error(cx, op, "the shape has more than %d dims", TBC_MAX_RANK);
	for (int i = 0; i < TBC_MAX_RANK; i++) dims[i] = -1;
	tbc_data_set_out(cx, op, 0, dt, (int)len, dims);
	return true;
}

int tbc_interp_ConstantOfShape(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *s = in[0], *value;
	if (!const_of_shape_value(op, &value)) return tbc_interp_error(ip, op, "value must hold exactly one element");
	if (!tbc_dtype_is_int(s->dtype) || s->rank != 1 || s->numel > TBC_MAX_RANK)
		return tbc_interp_error(ip, op, "the shape must be a 1-D integer tensor of at most %d values", TBC_MAX_RANK);
	int64_t dims[TBC_MAX_RANK];
	for (int64_t i = 0; i < s->numel; i++)
		if ((dims[i] = tbc_get_i64(s, i)) < 0)
			return tbc_interp_error(ip, op, "shape[%lld] is negative (%lld)", (long long)i, (long long)dims[i]);
	tbc_tensor *t = tbc_interp_new(ip, op, value ? value->dtype : TBC_DT_F32, (int)s->numel, dims);
	if (!t) return -1;
	if (value) {
		size_t es = tbc_dtype_size(value->dtype);
		for (int64_t i = 0; i < t->numel; i++) memcpy((char *)t->data + (size_t)i * es, value->data, es);
	} /* else zeros: the tensor starts zeroed */
	out[0] = t;
	return 0;
}
