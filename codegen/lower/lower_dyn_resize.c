/* Resize (and Upsample, which the frontend turns into Resize with scales as
 * input 2, asymmetric coordinates and floor rounding): the CPU lowering, for
 * roi, scales and sizes given as constants or while running.
 *
 * The interpreter (ir/kernels/conv_resize.c) is the oracle.  It maps every
 * output coordinate of each resized axis back to the input (x_ori, in
 * double), gives it n taps (nearest 2 with 0/1 weights, linear 2, cubic 4,
 * antialias a footprint widened by 1/scale) with clamped indices, then
 * resizes one axis after the other in double.  The lowering keeps its
 * arithmetic and splits it in up to three kernels:
 *
 *  1. a shape kernel, only when something is known only while running (a
 *     scale, a size, a dim, the roi): reads sizes or scales, checks them with
 *     the interpreter's wording, stores the output dims (computed symbols),
 *     each axis' scale (f64, into a small scratch) and, where they depend on
 *     the data, whether an axis is resized at all and its tap count
 *     (computed symbols);
 *  2. a map kernel: per resized axis and output coordinate, the taps' source
 *     indices and weights (axis_map_make's arithmetic, exactly), in small
 *     tables; O(sum of output dims x taps);
 *  3. the data kernel, parallel over output rows: nearest copies the chosen
 *     source element (bits exact, any dtype); linear and cubic sum the taps
 *     in nested loops ordered as the interpreter's separable passes add them
 *     (the first-resized axis innermost, each level from 0.0), in double, then
 *     round and saturate as store_saturated.
 *
 * With constant scales (or sizes) and the input dims they need known, the
 * scales, tap counts and resized flags are compile-time constants: no shape
 * kernel, and the tap loops have constant bounds. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "codegen/lower/lower_internal.h"
#include "ir/kernels/conv_util.h"

enum { MODE_NEAREST, MODE_LINEAR, MODE_CUBIC };
enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL };
enum { CT_HALF_PIXEL, CT_HALF_PIXEL_SYMMETRIC, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC, CT_TF_CROP };
enum { KA_STRETCH, KA_NOT_LARGER, KA_NOT_SMALLER };

#define D TBC_DT_F64
#define MAX_TAPS (1 << 24) /* the interpreter's limit on a footprint */

typedef struct rz_cfg {
	int mode, nearest_mode, ctm, policy;
	bool antialias, exclude_outside;
	double cubic_a, extrapolation;
	int n_axes;
	int axes[TBC_MAX_RANK];
} rz_cfg;

/* One axis of the axes list. */
typedef struct rz_axis {
	int a;            /* the dim of X */
	int resized;      /* 1, 0, or -1: decided while running (symbol r_sym, 0 or 1) */
	bool scale_known; /* else params[i], stored by the shape kernel */
	double scale;
	int64_t n;        /* taps per output coordinate (a table row); -1: symbol n_sym */
	const char *r_sym, *n_sym;
	int idx_buf, w_buf, ex_buf; /* tables (idx [out, n] or [out] for nearest; w [out, n]; ex [out]) */
} rz_axis;

typedef struct rz {
	lower_cx *cx;
	const tbc_op *op;
	rz_cfg c;
	const tbc_value *x, *y, *v, *roi; /* roi: NULL when absent or not used */
	bool sizes, roi_f32;
	const tbc_tensor *vc, *roic; /* the constant values, or NULL */
	int roi_len;
	rz_axis ax[TBC_MAX_RANK];
	int params_buf; /* f64[n_axes]: the scales computed while running; -1 if none */
	int out_buf;
	char where[160];
} rz;

/* ---- Expression shorthands -------------------------------------------------------*/
static kir_expr *I(lk *l, int64_t v) { return kir_e_index(l->k, v); }
static kir_expr *F(lk *l, double v) { return kir_e_float(l->k, D, v); }
static kir_expr *ADD(lk *l, kir_expr *a, kir_expr *b) { return kir_e_add(l->k, a, b); }
static kir_expr *MUL(lk *l, kir_expr *a, kir_expr *b) { return kir_e_mul(l->k, a, b); }
static kir_expr *BIN(lk *l, kir_binop op, kir_expr *a, kir_expr *b) { return kir_e_binary(l->k, op, a, b); }
static kir_expr *SUB(lk *l, kir_expr *a, kir_expr *b) { return BIN(l, KIR_SUB, a, b); }
static kir_expr *FADD(lk *l, kir_expr *a, kir_expr *b) { return BIN(l, KIR_ADD, a, b); }
static kir_expr *FMUL(lk *l, kir_expr *a, kir_expr *b) { return BIN(l, KIR_MUL, a, b); }
static kir_expr *FDIV(lk *l, kir_expr *a, kir_expr *b) { return BIN(l, KIR_DIV, a, b); }
static kir_expr *MIN(lk *l, kir_expr *a, kir_expr *b) { return BIN(l, KIR_MIN, a, b); }
static kir_expr *MAX(lk *l, kir_expr *a, kir_expr *b) { return BIN(l, KIR_MAX, a, b); }
static kir_expr *AND(lk *l, kir_expr *a, kir_expr *b) { return BIN(l, KIR_AND, a, b); }
static kir_expr *OR(lk *l, kir_expr *a, kir_expr *b) { return BIN(l, KIR_OR, a, b); }
static kir_expr *NOT(lk *l, kir_expr *a) { return kir_e_unary(l->k, KIR_NOT, a); }
static kir_expr *UN(lk *l, kir_unop op, kir_expr *a) { return kir_e_unary(l->k, op, a); }
static kir_expr *CMP(lk *l, kir_cmp op, kir_expr *a, kir_expr *b) { return kir_e_cmp(l->k, op, a, b); }
static kir_expr *SEL(lk *l, kir_expr *c, kir_expr *a, kir_expr *b) { return kir_e_select(l->k, c, a, b); }
static kir_expr *CAST(lk *l, tbc_dtype t, kir_expr *a) { return kir_e_cast(l->k, t, a); }
static kir_expr *V(lk *l, kir_var *v) { return kir_e_var(l->k, v); }
/* An index as f64, and a (finite, integral or truncated) f64 as an index. */
static kir_expr *FIDX(lk *l, kir_expr *i) { return CAST(l, D, CAST(l, TBC_DT_I64, i)); }
static kir_expr *IDXF(lk *l, kir_expr *f) { return CAST(l, KIR_INDEX, CAST(l, TBC_DT_I64, f)); }
static kir_expr *LOADF(lk *l, kir_buffer *b, kir_expr *i) { return CAST(l, D, kir_e_load(l->k, b, i)); }

static kir_expr *local(lk *l, kir_block *b, const char *name, kir_expr *e) {
	if (!e) {
		l->k->failed = true;
		return NULL;
	}
	kir_var *v = kir_var_new(l->k, name, e->type);
	kir_block_add(l->k, b, kir_s_set(l->k, v, e));
	return V(l, v);
}

static void fail_if(rz *r, lk *l, kir_block *b, kir_expr *cond, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void fail_if(rz *r, lk *l, kir_block *b, kir_expr *cond, const char *fmt, ...) {
	char msg[256], full[448];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(full, sizeof full, "%s: %s", r->where, msg);
	kir_block_add(l->k, b, kir_s_error(l->k, cond, full));
}

/* ---- Attributes (resize_read_cfg of the interpreter) --------------------------------*/
static int pick(const char *s, const char *const *names, int n) {
	for (int i = 0; i < n; i++)
		if (!strcmp(s, names[i])) return i;
	return -1;
}

static const char *read_cfg(const tbc_op *op, int rank, rz_cfg *c) {
	static const char *const modes[] = {"nearest", "linear", "cubic"};
	static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
	static const char *const ctms[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
					   "asymmetric", "tf_crop_and_resize"};
	static const char *const pols[] = {"stretch", "not_larger", "not_smaller"};
	memset(c, 0, sizeof *c);
	if ((c->mode = pick(conv_attr_str(op, "mode", "nearest"), modes, 3)) < 0) return "mode must be nearest, linear or cubic";
	if ((c->nearest_mode = pick(conv_attr_str(op, "nearest_mode", "round_prefer_floor"), nms, 4)) < 0)
		return "nearest_mode must be round_prefer_floor, round_prefer_ceil, floor or ceil";
	if ((c->ctm = pick(conv_attr_str(op, "coordinate_transformation_mode", "half_pixel"), ctms, 6)) < 0)
		return "unknown coordinate_transformation_mode";
	if ((c->policy = pick(conv_attr_str(op, "keep_aspect_ratio_policy", "stretch"), pols, 3)) < 0)
		return "keep_aspect_ratio_policy must be stretch, not_larger or not_smaller";
	c->antialias = tbc_attr_int(op, "antialias", 0) != 0;
	c->exclude_outside = tbc_attr_int(op, "exclude_outside", 0) != 0;
	c->cubic_a = tbc_attr_float(op, "cubic_coeff_a", -0.75);
	c->extrapolation = tbc_attr_float(op, "extrapolation_value", 0.0);
	if (c->antialias && c->mode == MODE_NEAREST) return "antialias is not supported with mode nearest";
	const int64_t *axes;
	int n = tbc_attr_ints(op, "axes", &axes);
	if (n < 0) {
		c->n_axes = rank;
		for (int i = 0; i < rank; i++) c->axes[i] = i;
		return NULL;
	}
	if (n > rank) return "axes has more values than X has dims";
	c->n_axes = n;
	for (int i = 0; i < n; i++) {
		if (!tbc_norm_axis(axes[i], rank, &c->axes[i])) return "axes value out of range";
		for (int k = 0; k < i; k++)
			if (c->axes[k] == c->axes[i]) return "axes must not repeat";
	}
	return NULL;
}

/* The length of an optional 1-D input: 0 when absent or empty, -1 when not
 * known at compile time. */
static int64_t input_len(const tbc_op *op, int i) {
	if (i >= op->n_inputs || !op->inputs[i]) return 0;
	const tbc_type *t = &op->inputs[i]->type;
	if (t->rank != 1 || t->dims[0].sym) return -1;
	return t->dims[0].size;
}

/* The footprint of antialias for a scale (footprint() of the interpreter). */
static double footprint_f(const rz_cfg *c, double scale) {
	double s = scale < 1.0 ? scale : 1.0;
	double start = floor((c->mode == MODE_LINEAR ? -1.0 : -2.0) / s) + 1;
	return 2 - 2 * start;
}

/* ---- What is known at compile time ---------------------------------------------------*/
static bool plan(rz *r) {
	lower_cx *cx = r->cx;
	const tbc_op *op = r->op;
	const rz_cfg *c = &r->c;
	const tbc_type *xt = &r->x->type, *yt = &r->y->type;
	int n = c->n_axes;
	double sc[TBC_MAX_RANK];
	int64_t sz[TBC_MAX_RANK];
	bool all_in = true;
	for (int i = 0; i < n; i++) all_in = all_in && !xt->dims[c->axes[i]].sym;
	for (int i = 0; r->vc && i < n; i++) {
		sc[i] = tbc_get_f64(r->vc, i);
		sz[i] = tbc_get_i64(r->vc, i);
	}
	/* keep_aspect_ratio_policy: one scale over every axis */
	bool pol_known = false;
	double pol = 0;
	if (r->vc && r->sizes && c->policy != KA_STRETCH && all_in) {
		pol_known = true;
		pol = c->policy == KA_NOT_LARGER ? INFINITY : -INFINITY;
		for (int i = 0; i < n; i++) {
			int64_t in = xt->dims[c->axes[i]].size;
			double q = in ? (double)sz[i] / (double)in : 1.0;
			pol = c->policy == KA_NOT_LARGER ? fmin(pol, q) : fmax(pol, q);
		}
	}
	char name[64];
	for (int i = 0; i < n; i++) {
		rz_axis *A = &r->ax[i];
		A->a = c->axes[i];
		A->idx_buf = A->w_buf = A->ex_buf = -1;
		tbc_dim in = xt->dims[A->a], out = yt->dims[A->a];
		if (r->vc && !r->sizes) A->scale_known = true, A->scale = sc[i];
		else if (r->vc && c->policy == KA_STRETCH && !in.sym)
			A->scale_known = true, A->scale = in.size ? (double)sz[i] / (double)in.size : 1.0;
		else if (pol_known) A->scale_known = true, A->scale = pol;
		int roi_id = 1; /* 1 identity, 0 not, -1 known while running */
		if (r->roi && r->roic) {
			double r0 = tbc_get_f64(r->roic, i), r1 = tbc_get_f64(r->roic, n + i);
			roi_id = fabs(r0) < 1e-9 && fabs(r1 - 1.0) < 1e-9;
		} else if (r->roi) {
			roi_id = -1;
		}
		int same = tbc_dim_eq(out, in) ? 1 : !out.sym && !in.sym ? 0 : -1;
		if ((A->scale_known && !(fabs(A->scale - 1.0) <= 1e-9)) || same == 0 || roi_id == 0) A->resized = 1;
		else if (A->scale_known && same == 1 && roi_id == 1) A->resized = 0;
		else A->resized = -1;
		if (c->mode == MODE_NEAREST) A->n = 1;
		else if (!c->antialias) A->n = c->mode == MODE_LINEAR ? 2 : 4;
		else if (A->scale_known && !(A->scale > 0)) A->n = 2; /* an empty output: no taps */
		else if (A->scale_known) {
			double f = footprint_f(c, A->scale);
			if (!(f >= 1 && f <= MAX_TAPS))
				return lower_error(cx, op, "Resize: an antialias footprint of %g taps has no lowering", f);
			A->n = (int64_t)f;
		} else A->n = -1;
		if (A->resized == -1) {
			snprintf(name, sizeof name, "_rz%u.resized%d", (unsigned)r->y->id, A->a);
			int s = lower_sym_computed(cx, name);
			if (s < 0) return false;
			A->r_sym = cx->p->sym_names[s];
		}
		if (A->n < 0) {
			snprintf(name, sizeof name, "_rz%u.taps%d", (unsigned)r->y->id, A->a);
			int s = lower_sym_computed(cx, name);
			if (s < 0) return false;
			A->n_sym = cx->p->sym_names[s];
		}
	}
	return true;
}

static bool need_shape_kernel(rz *r) {
	if (!lower_type_known(r->cx, &r->y->type)) return true;
	for (int i = 0; i < r->c.n_axes; i++) {
		const rz_axis *A = &r->ax[i];
		if (A->resized == -1 || A->n < 0 || (A->resized && !A->scale_known)) return true;
	}
	return false;
}

static kir_expr *taps_of(lk *l, const rz_axis *A) { return A->n >= 0 ? I(l, A->n) : lk_dim(l, (tbc_dim){0, A->n_sym}); }
static kir_expr *resized_of(lk *l, const rz_axis *A) {
	if (A->resized >= 0) return kir_e_int(l->k, TBC_DT_BOOL, A->resized);
	return CMP(l, KIR_NE, lk_dim(l, (tbc_dim){0, A->r_sym}), I(l, 0));
}

/* ---- 1. Shape kernel -------------------------------------------------------------------*/
static bool shape_kernel(rz *r) {
	const rz_cfg *c = &r->c;
	const tbc_type *xt = &r->x->type, *yt = &r->y->type;
	int n = c->n_axes;
	lk l;
	if (!lk_begin(&l, r->cx, "shape_Resize")) return false;
	kir_kernel *k = l.k;
	kir_block b = {0};
	kir_buffer *vb = lk_value(&l, r->v);
	if (!vb) return false;
	kir_expr *in[TBC_MAX_RANK], *out[TBC_MAX_RANK], *scale[TBC_MAX_RANK];
	for (int i = 0; i < n; i++) in[i] = local(&l, &b, "in", lk_dim(&l, xt->dims[c->axes[i]]));
	if (r->sizes) {
		kir_expr *ratio[TBC_MAX_RANK];
		for (int i = 0; i < n; i++) {
			kir_expr *s = local(&l, &b, "size", CAST(&l, KIR_INDEX, kir_e_load(k, vb, I(&l, i))));
			fail_if(r, &l, &b, CMP(&l, KIR_LT, s, I(&l, 0)), "sizes must not be negative");
			fail_if(r, &l, &b, AND(&l, CMP(&l, KIR_EQ, in[i], I(&l, 0)), CMP(&l, KIR_NE, s, I(&l, 0))),
				"cannot resize an empty dim");
			out[i] = s;
			ratio[i] = local(&l, &b, "ratio", SEL(&l, CMP(&l, KIR_EQ, in[i], I(&l, 0)), F(&l, 1.0), FDIV(&l, FIDX(&l, s), FIDX(&l, in[i]))));
		}
		if (c->policy == KA_STRETCH) {
			for (int i = 0; i < n; i++) scale[i] = ratio[i];
		} else {
			kir_expr *s = F(&l, c->policy == KA_NOT_LARGER ? INFINITY : -INFINITY);
			for (int i = 0; i < n; i++) s = local(&l, &b, "keep", BIN(&l, c->policy == KA_NOT_LARGER ? KIR_MIN : KIR_MAX, s, ratio[i]));
			for (int i = 0; i < n; i++) {
				scale[i] = s;
				out[i] = local(&l, &b, "out", IDXF(&l, FADD(&l, FMUL(&l, s, FIDX(&l, in[i])), F(&l, 0.5))));
			}
		}
	} else {
		for (int i = 0; i < n; i++) {
			kir_expr *s = local(&l, &b, "scale", LOADF(&l, vb, I(&l, i)));
			kir_expr *prod = local(&l, &b, "prod", FMUL(&l, s, FIDX(&l, in[i])));
			fail_if(r, &l, &b, OR(&l, NOT(&l, CMP(&l, KIR_GT, s, F(&l, 0))), CMP(&l, KIR_GT, prod, F(&l, 9.0e15))),
				"scales must be positive and finite");
			scale[i] = s;
			out[i] = local(&l, &b, "out", IDXF(&l, UN(&l, KIR_FLOOR, prod)));
		}
	}
	for (int i = 0; i < n; i++) {
		char what[64];
		snprintf(what, sizeof what, "output dim %d of Resize", c->axes[i]);
		if (!lower_shape_dim(&l, &b, r->op, yt->dims[c->axes[i]], what, out[i])) return false;
	}
	if (r->params_buf >= 0) {
		kir_buffer *pb = lk_buf(&l, r->params_buf);
		if (!pb) return false;
		for (int i = 0; i < n; i++) kir_block_add(k, &b, kir_s_store(k, pb, I(&l, i), scale[i]));
	}
	kir_buffer *roib = r->roi ? lk_value(&l, r->roi) : NULL;
	if (r->roi && !roib) return false;
	for (int i = 0; i < n; i++) {
		const rz_axis *A = &r->ax[i];
		if (A->resized != -1 && A->n >= 0) continue;
		kir_expr *id = kir_e_int(k, TBC_DT_BOOL, 1);
		if (roib) {
			kir_expr *r0 = LOADF(&l, roib, I(&l, i)), *r1 = LOADF(&l, roib, I(&l, n + i));
			id = AND(&l, CMP(&l, KIR_LT, UN(&l, KIR_ABS, r0), F(&l, 1e-9)),
				 CMP(&l, KIR_LT, UN(&l, KIR_ABS, FADD(&l, r1, F(&l, -1.0))), F(&l, 1e-9)));
		}
		kir_expr *same = AND(&l, CMP(&l, KIR_LE, UN(&l, KIR_ABS, FADD(&l, scale[i], F(&l, -1.0))), F(&l, 1e-9)),
				     AND(&l, CMP(&l, KIR_EQ, out[i], in[i]), id));
		kir_expr *res = local(&l, &b, "resized", NOT(&l, same));
		kir_buffer *syms = lk_syms(&l);
		if (!syms) return false;
		if (A->resized == -1) {
			int s = lower_sym_computed(r->cx, A->r_sym);
			if (s < 0) return false;
			kir_block_add(k, &b, kir_s_store(k, syms, I(&l, s), SEL(&l, res, kir_e_int(k, TBC_DT_I64, 1), kir_e_int(k, TBC_DT_I64, 0))));
		}
		if (A->n < 0) {
			kir_expr *sc = scale[i];
			kir_expr *s = SEL(&l, CMP(&l, KIR_LT, sc, F(&l, 1.0)), sc, F(&l, 1.0));
			kir_expr *start = FADD(&l, UN(&l, KIR_FLOOR, FDIV(&l, F(&l, c->mode == MODE_LINEAR ? -1.0 : -2.0), s)), F(&l, 1));
			kir_expr *nn = local(&l, &b, "taps", FMUL(&l, F(&l, 2), FADD(&l, F(&l, 1), UN(&l, KIR_NEG, start))));
			kir_expr *used = local(&l, &b, "used", AND(&l, res, CMP(&l, KIR_GT, out[i], I(&l, 0))));
			fail_if(r, &l, &b,
				AND(&l, used, NOT(&l, AND(&l, CMP(&l, KIR_GE, nn, F(&l, 1)), CMP(&l, KIR_LE, nn, F(&l, MAX_TAPS))))),
				"out of memory");
			int si = lower_sym_computed(r->cx, A->n_sym);
			if (si < 0) return false;
			kir_block_add(k, &b, kir_s_store(k, syms, I(&l, si), SEL(&l, used, CAST(&l, TBC_DT_I64, nn), kir_e_int(k, TBC_DT_I64, 2))));
		}
	}
	return lk_end(&l, b.first);
}

/* ---- 2. Map kernel: taps and weights per output coordinate -----------------------------*/
static kir_expr *scale_of(rz *r, lk *l, int i) {
	const rz_axis *A = &r->ax[i];
	if (A->scale_known) return F(l, A->scale);
	kir_buffer *pb = lk_buf(l, r->params_buf);
	return pb ? kir_e_load(l->k, pb, I(l, i)) : NULL;
}

/* The cubic kernel of the interpreter (cubic_weight), on |x|. */
static kir_expr *cubic_weight(lk *l, kir_expr *x, double A) {
	kir_expr *near = FADD(l, FMUL(l, FMUL(l, FADD(l, FMUL(l, F(l, A + 2), x), F(l, -(A + 3))), x), x), F(l, 1));
	kir_expr *far = FADD(l, FMUL(l, FADD(l, FMUL(l, FADD(l, FMUL(l, F(l, A), x), F(l, -(5 * A))), x), F(l, 8 * A)), x), F(l, -(4 * A)));
	return SEL(l, CMP(l, KIR_LE, x, F(l, 1)), near, SEL(l, CMP(l, KIR_LT, x, F(l, 2)), far, F(l, 0)));
}

/* ((A * u - 5A) * u + 8A) * u - 4A and ((A + 2) * u - (A + 3)) * u * u + 1,
 * the interpreter's non-antialias cubic weights. */
static kir_expr *cubic_far(lk *l, kir_expr *u, double A) {
	return FADD(l, FMUL(l, FADD(l, FMUL(l, FADD(l, FMUL(l, F(l, A), u), F(l, -(5 * A))), u), F(l, 8 * A)), u), F(l, -(4 * A)));
}
static kir_expr *cubic_near(lk *l, kir_expr *u, double A) {
	return FADD(l, FMUL(l, FMUL(l, FADD(l, FMUL(l, F(l, A + 2), u), F(l, -(A + 3))), u), u), F(l, 1));
}

/* Appends to b the loop over the output coordinates of axis i filling its
 * tables (axis_map_make, exactly). */
static bool map_axis(rz *r, lk *l, kir_block *b, int i) {
	const rz_cfg *c = &r->c;
	const rz_axis *A = &r->ax[i];
	kir_kernel *k = l->k;
	int n_axes = c->n_axes;
	kir_buffer *ib = lk_buf(l, A->idx_buf), *wb = A->w_buf >= 0 ? lk_buf(l, A->w_buf) : NULL;
	kir_buffer *eb = A->ex_buf >= 0 ? lk_buf(l, A->ex_buf) : NULL;
	if (!ib || (A->w_buf >= 0 && !wb) || (A->ex_buf >= 0 && !eb)) return false;
	kir_expr *in_w = local(l, b, "in_w", lk_dim(l, r->x->type.dims[A->a]));
	kir_expr *out_w = lk_dim(l, r->y->type.dims[A->a]);
	kir_expr *scale = local(l, b, "scale", scale_of(r, l, i));
	kir_expr *n = taps_of(l, A);
	kir_expr *in_f = local(l, b, "in_f", FIDX(l, in_w));
	kir_expr *out_f = local(l, b, "out_f", FMUL(l, scale, in_f));
	kir_expr *last_f = local(l, b, "last_f", FIDX(l, ADD(l, in_w, I(l, -1))));
	kir_expr *r0 = F(l, 0.0), *r1 = F(l, 1.0), *s_aa = NULL, *st_aa = NULL;
	if (c->ctm == CT_TF_CROP && r->roi) {
		kir_buffer *roib = lk_value(l, r->roi);
		if (!roib) return false;
		r0 = local(l, b, "roi0", LOADF(l, roib, I(l, i)));
		r1 = local(l, b, "roi1", LOADF(l, roib, I(l, n_axes + i)));
	}
	if (c->antialias) {
		s_aa = local(l, b, "s", SEL(l, CMP(l, KIR_LT, scale, F(l, 1.0)), scale, F(l, 1.0)));
		st_aa = local(l, b, "first",
			      ADD(l, IDXF(l, UN(l, KIR_FLOOR, FDIV(l, F(l, c->mode == MODE_LINEAR ? -1.0 : -2.0), s_aa))), I(l, 1)));
	}

	kir_var *j = kir_var_new(k, "j", KIR_INDEX);
	kir_block body = {0};
	kir_expr *y = local(l, &body, "y", FIDX(l, V(l, j)));
	kir_expr *yh = FADD(l, y, F(l, 0.5));
	kir_expr *x;
	switch (c->ctm) {
	case CT_ALIGN_CORNERS:
		x = SEL(l, CMP(l, KIR_EQ, out_f, F(l, 1)), F(l, 0.0), FDIV(l, FMUL(l, y, last_f), FADD(l, out_f, F(l, -1))));
		break;
	case CT_ASYMMETRIC: x = FDIV(l, y, scale); break;
	case CT_PYTORCH_HALF_PIXEL:
		x = SEL(l, CMP(l, KIR_EQ, out_f, F(l, 1)), F(l, -0.5), FADD(l, FDIV(l, yh, scale), F(l, -0.5)));
		break;
	case CT_HALF_PIXEL_SYMMETRIC: {
		kir_expr *adj = FDIV(l, FIDX(l, out_w), out_f), *center = FDIV(l, in_f, F(l, 2));
		x = FADD(l, FADD(l, FMUL(l, center, SUB(l, F(l, 1), adj)), FDIV(l, yh, scale)), F(l, -0.5));
		break;
	}
	case CT_TF_CROP: {
		kir_expr *span = SUB(l, r1, r0), *base;
		if (r->roi_f32) {
			span = CAST(l, D, CAST(l, TBC_DT_F32, span));
			base = CAST(l, D, FMUL(l, CAST(l, TBC_DT_F32, r0), CAST(l, TBC_DT_F32, CAST(l, TBC_DT_I64, ADD(l, in_w, I(l, -1))))));
		} else {
			base = FMUL(l, r0, last_f);
		}
		span = local(l, b, "span", span);
		base = local(l, b, "base", base);
		x = SEL(l, CMP(l, KIR_EQ, out_f, F(l, 1)), FDIV(l, FMUL(l, span, last_f), F(l, 2)),
			FDIV(l, FMUL(l, FMUL(l, y, span), last_f), FADD(l, out_f, F(l, -1))));
		x = local(l, &body, "x", FADD(l, x, base));
		break;
	}
	default: x = FADD(l, FDIV(l, yh, scale), F(l, -0.5)); break;
	}
	x = local(l, &body, "x", x);
	if (eb) {
		kir_expr *ex = OR(l, CMP(l, KIR_LT, x, F(l, 0)), CMP(l, KIR_GT, x, last_f));
		kir_block_add(k, &body, kir_s_store(k, eb, V(l, j), ex));
	}
	x = local(l, &body, "x", SEL(l, NOT(l, CMP(l, KIR_GT, x, F(l, -1e15))), F(l, -1e15), x));
	x = local(l, &body, "x", SEL(l, CMP(l, KIR_GT, x, F(l, 1e15)), F(l, 1e15), x));
	kir_expr *xf = local(l, &body, "xf", UN(l, KIR_FLOOR, x));
	kir_expr *ratio = local(l, &body, "ratio", SEL(l, CMP(l, KIR_EQ, x, xf), F(l, 1.0), SUB(l, x, xf)));

	/* The first tap: x + pad floored, less n / 2 (or n / 2 - 1 past a whole
	 * number), less pad; n is even. */
	int64_t nn = c->mode == MODE_NEAREST ? 2 : A->n;
	kir_expr *nt = c->mode == MODE_NEAREST ? I(l, 2) : n;
	kir_expr *pad = nn >= 0 ? I(l, (nn + 1) / 2) : BIN(l, KIR_FLOORDIV, ADD(l, nt, I(l, 1)), I(l, 2));
	kir_expr *half = nn >= 0 ? I(l, nn / 2) : BIN(l, KIR_FLOORDIV, nt, I(l, 2));
	kir_expr *xp = local(l, &body, "xp", FADD(l, x, FIDX(l, pad)));
	kir_expr *pf = local(l, &body, "pf", UN(l, KIR_FLOOR, xp));
	kir_expr *off = SEL(l, CMP(l, KIR_EQ, SUB(l, xp, pf), F(l, 0)), SUB(l, I(l, 0), half), SUB(l, I(l, 1), half));
	kir_expr *start = local(l, &body, "start", SUB(l, ADD(l, IDXF(l, pf), off), pad));
	kir_expr *top = ADD(l, in_w, I(l, -1));

	if (c->mode == MODE_NEAREST) {
		kir_expr *up;
		switch (c->nearest_mode) {
		case NM_ROUND_PREFER_FLOOR: up = CMP(l, KIR_GT, ratio, F(l, 0.5)); break;
		case NM_ROUND_PREFER_CEIL: up = CMP(l, KIR_GE, ratio, F(l, 0.5)); break;
		case NM_FLOOR: up = kir_e_int(k, TBC_DT_BOOL, 0); break;
		default: up = kir_e_int(k, TBC_DT_BOOL, 1); break;
		}
		kir_expr *first = NOT(l, OR(l, CMP(l, KIR_EQ, ratio, F(l, 1.0)), up)); /* w[0] is 1 */
		if (c->exclude_outside)
			first = AND(l, first, NOT(l, OR(l, CMP(l, KIR_LT, start, I(l, 0)), CMP(l, KIR_GE, start, in_w))));
		kir_expr *k0 = MIN(l, MAX(l, start, I(l, 0)), top), *k1 = MIN(l, MAX(l, ADD(l, start, I(l, 1)), I(l, 0)), top);
		kir_block_add(k, &body, kir_s_store(k, ib, V(l, j), CAST(l, TBC_DT_I64, SEL(l, first, k0, k1))));
	} else {
		kir_expr *row = local(l, &body, "row", MUL(l, V(l, j), n));
		double Ac = c->cubic_a;
		if (!c->antialias && c->mode == MODE_LINEAR) {
			kir_block_add(k, &body, kir_s_store(k, wb, row, SUB(l, F(l, 1), ratio)));
			kir_block_add(k, &body, kir_s_store(k, wb, ADD(l, row, I(l, 1)), ratio));
		} else if (!c->antialias) {
			kir_expr *om = local(l, &body, "om", SUB(l, F(l, 1), ratio));
			kir_expr *w[4] = {cubic_far(l, FADD(l, ratio, F(l, 1)), Ac), cubic_near(l, ratio, Ac), cubic_near(l, om, Ac),
					  cubic_far(l, FADD(l, om, F(l, 1)), Ac)};
			for (int t = 0; t < 4; t++) kir_block_add(k, &body, kir_s_store(k, wb, ADD(l, row, I(l, t)), w[t]));
		} else {
			/* The kernel stretched by 1/scale, normalised to sum 1. */
			kir_var *sum = kir_var_new(k, "wsum", D), *t = kir_var_new(k, "t", KIR_INDEX);
			kir_block_add(k, &body, kir_s_set(k, sum, F(l, 0)));
			kir_block tb = {0};
			kir_expr *a = local(l, &tb, "a", FMUL(l, SUB(l, FIDX(l, ADD(l, st_aa, V(l, t))), ratio), s_aa));
			kir_expr *w = c->mode == MODE_LINEAR ? MIN(l, MAX(l, SUB(l, F(l, 1), UN(l, KIR_ABS, a)), F(l, 0)), F(l, 1))
							     : cubic_weight(l, UN(l, KIR_ABS, a), Ac);
			w = local(l, &tb, "w", w);
			kir_block_add(k, &tb, kir_s_store(k, wb, ADD(l, row, V(l, t)), w));
			kir_block_add(k, &tb, kir_s_set(k, sum, FADD(l, V(l, sum), w)));
			kir_block_add(k, &body, kir_s_for(k, t, I(l, 0), n, 1, KIR_LOOP_SEQUENTIAL, tb.first));
			kir_var *t2 = kir_var_new(k, "t", KIR_INDEX);
			kir_expr *at = ADD(l, row, V(l, t2));
			kir_stmt *div = kir_s_store(k, wb, at, FDIV(l, kir_e_load(k, wb, at), V(l, sum)));
			kir_block_add(k, &body, kir_s_for(k, t2, I(l, 0), n, 1, KIR_LOOP_SEQUENTIAL, div));
		}
		/* Indices clamped; exclude_outside zeroes taps outside and renormalises. */
		kir_var *t = kir_var_new(k, "t", KIR_INDEX), *sum = NULL;
		kir_block tb = {0};
		kir_expr *kk = local(l, &tb, "k", ADD(l, start, V(l, t)));
		kir_expr *at = ADD(l, row, V(l, t));
		kir_block_add(k, &tb, kir_s_store(k, ib, at, CAST(l, TBC_DT_I64, MIN(l, MAX(l, kk, I(l, 0)), top))));
		if (c->exclude_outside) {
			sum = kir_var_new(k, "esum", D);
			kir_block_add(k, &body, kir_s_set(k, sum, F(l, 0)));
			kir_expr *outside = OR(l, CMP(l, KIR_LT, kk, I(l, 0)), CMP(l, KIR_GE, kk, in_w));
			kir_expr *w = local(l, &tb, "w", SEL(l, outside, F(l, 0), kir_e_load(k, wb, at)));
			kir_block_add(k, &tb, kir_s_store(k, wb, at, w));
			kir_block_add(k, &tb, kir_s_set(k, sum, FADD(l, V(l, sum), w)));
		}
		kir_block_add(k, &body, kir_s_for(k, t, I(l, 0), n, 1, KIR_LOOP_SEQUENTIAL, tb.first));
		if (c->exclude_outside) {
			kir_var *t2 = kir_var_new(k, "t", KIR_INDEX);
			kir_expr *at2 = ADD(l, row, V(l, t2));
			kir_expr *den = SEL(l, CMP(l, KIR_EQ, V(l, sum), F(l, 0)), F(l, 1), V(l, sum));
			kir_stmt *div = kir_s_store(k, wb, at2, FDIV(l, kir_e_load(k, wb, at2), den));
			kir_block_add(k, &body, kir_s_for(k, t2, I(l, 0), n, 1, KIR_LOOP_SEQUENTIAL, div));
		}
	}
	kir_stmt *work = body.first;
	if (A->resized == -1) {
		/* Not resized after all: the identity, one tap of weight 1. */
		kir_block id = {0};
		kir_expr *row = c->mode == MODE_NEAREST ? V(l, j) : MUL(l, V(l, j), n);
		kir_block_add(k, &id, kir_s_store(k, ib, row, CAST(l, TBC_DT_I64, V(l, j))));
		if (wb) kir_block_add(k, &id, kir_s_store(k, wb, row, F(l, 1.0)));
		if (eb) kir_block_add(k, &id, kir_s_store(k, eb, V(l, j), kir_e_int(k, TBC_DT_BOOL, 0)));
		work = kir_s_if(k, resized_of(l, A), body.first, id.first);
	}
	kir_block_add(k, b, kir_s_for(k, j, I(l, 0), out_w, 1, KIR_LOOP_SEQUENTIAL, work));
	return !k->failed;
}

static bool map_kernel(rz *r) {
	lk l;
	if (!lk_begin(&l, r->cx, "resize_map")) return false;
	kir_block b = {0};
	for (int i = 0; i < r->c.n_axes; i++)
		if (r->ax[i].resized != 0 && !map_axis(r, &l, &b, i)) return false;
	return lk_end(&l, b.first);
}

/* ---- 3. Data kernel ------------------------------------------------------------------------*/
/* A double stored to dt as store_saturated: integers round half to even,
 * NaN gives 0, clamp to the type's range; floats clamp to the finite range
 * of types narrower than double. */
static kir_expr *saturate(lk *l, kir_expr *v, tbc_dtype dt) {
	if (tbc_dtype_is_int(dt) || dt == TBC_DT_BOOL) {
		double lo, hi;
		int bits = tbc_dtype_bits(dt);
		if (dt == TBC_DT_BOOL) lo = 0, hi = 1;
		else if (tbc_dtype_is_signed(dt)) lo = -ldexp(1.0, bits - 1), hi = ldexp(1.0, bits - 1) - 1;
		else lo = 0, hi = ldexp(1.0, bits) - 1;
		v = UN(l, KIR_ROUND_EVEN, v);
		v = SEL(l, UN(l, KIR_ISNAN, v), F(l, 0), v);
		return CAST(l, dt, MIN(l, MAX(l, v, F(l, lo)), F(l, hi)));
	}
	double max = conv_dtype_float_max(dt);
	if (max > 0) v = MAX(l, MIN(l, v, F(l, max)), F(l, -max));
	return CAST(l, dt, v);
}

typedef struct rz_data {
	rz *r;
	lk *l;
	kir_buffer *x;
	kir_expr *o[TBC_MAX_RANK];  /* output coordinates */
	kir_expr *xs[TBC_MAX_RANK]; /* X's strides */
	int order[TBC_MAX_RANK];    /* resized axes (positions in axes), in the interpreter's order */
	int m;
	/* Levels with a constant tap count of at most UNROLL, unrolled: each
	 * tap's source offset (index times stride) and weight, loaded once per
	 * row for the axes before the last dim (the tables are not reloaded
	 * per element: stores to Y might alias them for LLVM). */
	bool unrolled[TBC_MAX_RANK];
	kir_expr *so[TBC_MAX_RANK][4], *w[TBC_MAX_RANK][4];
} rz_data;

#define UNROLL 4

/* Loads the taps of level lev at the current point into locals of b. */
static bool preload_taps(rz_data *d, int lev, kir_block *b) {
	lk *l = d->l;
	kir_kernel *k = l->k;
	const rz_axis *A = &d->r->ax[d->order[lev]];
	kir_buffer *ib = lk_buf(l, A->idx_buf), *wb = lk_buf(l, A->w_buf);
	if (!ib || !wb) return false;
	kir_expr *row = local(l, b, "row", MUL(l, d->o[A->a], I(l, A->n)));
	for (int t = 0; t < A->n; t++) {
		kir_expr *at = ADD(l, row, I(l, t));
		d->so[lev][t] = local(l, b, "so", MUL(l, CAST(l, KIR_INDEX, kir_e_load(k, ib, at)), d->xs[A->a]));
		d->w[lev][t] = local(l, b, "wt", kir_e_load(k, wb, at));
	}
	return !k->failed;
}

/* The value of X resized along order[0..lev] at the output point, the
 * other axes' contribution to the source offset being off: the taps of
 * order[lev] summed from 0.0 over the value one level down. */
static kir_expr *level(rz_data *d, int lev, kir_expr *off, kir_block *b) {
	lk *l = d->l;
	kir_kernel *k = l->k;
	if (lev < 0) return CAST(l, D, kir_e_load(k, d->x, off));
	rz *r = d->r;
	const rz_axis *A = &r->ax[d->order[lev]];
	if (d->unrolled[lev]) {
		kir_expr *acc = F(l, 0);
		for (int t = 0; t < A->n; t++) {
			kir_expr *inner = level(d, lev - 1, ADD(l, off, d->so[lev][t]), b);
			acc = FADD(l, acc, FMUL(l, d->w[lev][t], inner));
		}
		if (A->ex_buf >= 0) {
			kir_buffer *eb = lk_buf(l, A->ex_buf);
			if (!eb) return NULL;
			acc = SEL(l, kir_e_load(k, eb, d->o[A->a]), F(l, r->c.extrapolation), acc);
		}
		return acc;
	}
	kir_buffer *ib = lk_buf(l, A->idx_buf), *wb = lk_buf(l, A->w_buf);
	if (!ib || !wb) return NULL;
	kir_expr *n = taps_of(l, A);
	kir_expr *taps = A->resized == 1 ? n : SEL(l, resized_of(l, A), n, I(l, 1));
	kir_var *acc = kir_var_new(k, "acc", D), *t = kir_var_new(k, "t", KIR_INDEX);
	kir_block_add(k, b, kir_s_set(k, acc, F(l, 0)));
	kir_expr *row = local(l, b, "row", MUL(l, d->o[A->a], n));
	kir_block tb = {0};
	kir_expr *at = ADD(l, row, V(l, t));
	kir_expr *src = CAST(l, KIR_INDEX, kir_e_load(k, ib, at));
	kir_expr *inner = level(d, lev - 1, ADD(l, off, MUL(l, src, d->xs[A->a])), &tb);
	kir_block_add(k, &tb, kir_s_set(k, acc, FADD(l, V(l, acc), FMUL(l, kir_e_load(k, wb, at), inner))));
	kir_block_add(k, b, kir_s_for(k, t, I(l, 0), taps, 1, KIR_LOOP_SEQUENTIAL, tb.first));
	kir_expr *v = V(l, acc);
	if (A->ex_buf >= 0) {
		kir_buffer *eb = lk_buf(l, A->ex_buf);
		if (!eb) return NULL;
		v = SEL(l, kir_e_load(k, eb, d->o[A->a]), F(l, r->c.extrapolation), v);
	}
	return local(l, b, "v", v);
}

static bool data_kernel(rz *r) {
	const rz_cfg *c = &r->c;
	const tbc_type *xt = &r->x->type, *yt = &r->y->type;
	int R = xt->rank;
	lk l;
	if (!lk_begin(&l, r->cx, "resize")) return false;
	kir_kernel *k = l.k;
	rz_data d;
	memset(&d, 0, sizeof d);
	d.r = r;
	d.l = &l;
	d.x = lk_value(&l, r->x);
	kir_buffer *yb = lk_buf(&l, r->out_buf);
	if (!d.x || !yb) return false;
	int pos[TBC_MAX_RANK]; /* dim -> position in axes of a resized axis, or -1 */
	for (int a = 0; a < R; a++) pos[a] = -1;
	for (int i = 0; i < c->n_axes; i++)
		if (r->ax[i].resized != 0) pos[r->ax[i].a] = i, d.order[d.m++] = i;
	kir_expr *stride = I(&l, 1);
	for (int a = R - 1; a >= 0; a--) {
		d.xs[a] = stride;
		stride = MUL(&l, stride, lk_dim(&l, xt->dims[a]));
	}
	/* Rows: every output dim but the last, flattened (parallel); the last
	 * dim inside. */
	kir_var *p = kir_var_new(k, "p", KIR_INDEX), *w = kir_var_new(k, "w", KIR_INDEX);
	kir_block rowb = {0}, body = {0};
	kir_expr *rows = I(&l, 1);
	for (int a = 0; a + 1 < R; a++) rows = MUL(&l, rows, lk_dim(&l, yt->dims[a]));
	kir_expr *width = R ? lk_dim(&l, yt->dims[R - 1]) : I(&l, 1);
	kir_expr *rem = V(&l, p);
	for (int a = R - 2; a >= 0; a--) {
		if (a == 0) {
			d.o[a] = rem;
			break;
		}
		kir_expr *ya = lk_dim(&l, yt->dims[a]);
		d.o[a] = local(&l, &rowb, "o", BIN(&l, KIR_FLOORMOD, rem, ya));
		rem = local(&l, &rowb, "q", BIN(&l, KIR_FLOORDIV, rem, ya));
	}
	if (R) d.o[R - 1] = V(&l, w);
	/* The part of the source offset (and of the extrapolation test) fixed
	 * by the row, and the last dim's; linear and cubic add the resized
	 * axes' taps in level(). */
	kir_expr *roff = I(&l, 0), *rex = NULL, *loff = I(&l, 0), *ex = NULL;
	bool nearest = c->mode == MODE_NEAREST;
	for (int a = 0; a < R; a++) {
		const rz_axis *A = pos[a] >= 0 ? &r->ax[pos[a]] : NULL;
		bool last = a + 1 == R;
		if (A && !nearest) continue;
		kir_expr *coord = d.o[a];
		if (A) {
			kir_buffer *ib = lk_buf(&l, A->idx_buf);
			if (!ib) return false;
			coord = CAST(&l, KIR_INDEX, kir_e_load(k, ib, d.o[a]));
		}
		if (last) loff = MUL(&l, coord, d.xs[a]);
		else roff = ADD(&l, roff, MUL(&l, coord, d.xs[a]));
		if (A && A->ex_buf >= 0) {
			kir_buffer *eb = lk_buf(&l, A->ex_buf);
			if (!eb) return false;
			kir_expr *e = kir_e_load(k, eb, d.o[a]);
			if (last) ex = e;
			else rex = rex ? OR(&l, rex, e) : e;
		}
	}
	roff = local(&l, &rowb, "roff", roff);
	if (rex) rex = local(&l, &rowb, "rex", rex);
	kir_expr *off = ADD(&l, roff, loff);
	if (rex) ex = ex ? OR(&l, rex, ex) : rex;
	kir_expr *yidx = ADD(&l, MUL(&l, V(&l, p), width), V(&l, w));
	kir_expr *value;
	if (nearest) {
		value = kir_e_load(k, d.x, off);
		if (ex) value = SEL(&l, ex, saturate(&l, F(&l, c->extrapolation), yt->dtype), value);
	} else {
		for (int lev = 0; lev < d.m; lev++) {
			const rz_axis *A = &r->ax[d.order[lev]];
			d.unrolled[lev] = A->resized == 1 && A->n >= 1 && A->n <= UNROLL;
			if (d.unrolled[lev] && !preload_taps(&d, lev, A->a + 1 < R ? &rowb : &body)) return false;
		}
		kir_expr *v = level(&d, d.m - 1, off, &body);
		if (!v) return false;
		value = saturate(&l, v, yt->dtype);
	}
	kir_block_add(k, &body, kir_s_store(k, yb, yidx, value));
	kir_stmt *inner = kir_s_for(k, w, I(&l, 0), width, 1, KIR_LOOP_VECTOR, body.first);
	kir_block_add(k, &rowb, inner);
	return lk_end(&l, kir_s_for(k, p, I(&l, 0), rows, 1, KIR_LOOP_PARALLEL, rowb.first));
}

/* ---- Entry ----------------------------------------------------------------------------------*/
static lower_result refuse(lower_cx *cx, const tbc_op *op, const char *why) {
	lower_error(cx, op, "op Resize %s has no lowering yet", why);
	return LOWER_FAILED;
}

static int table(lower_cx *cx, tbc_dtype dt, tbc_dim out, const rz_axis *A, bool rows, const char *name) {
	tbc_type t;
	memset(&t, 0, sizeof t);
	t.dtype = dt;
	t.rank = rows ? 2 : 1;
	t.dims[0] = out;
	if (rows) t.dims[1] = A->n >= 0 ? (tbc_dim){A->n, NULL} : (tbc_dim){0, A->n_sym};
	return lower_temp_buf(cx, &t, name);
}

lower_result lower_dyn_resize(lower_cx *cx, const tbc_op *op) {
	if (op->code != TBC_OP_Resize) return LOWER_NOT_MINE;
	rz r;
	memset(&r, 0, sizeof r);
	r.cx = cx;
	r.op = op;
	r.params_buf = -1;
	snprintf(r.where, sizeof r.where, "node '%s' (Resize)", op->name ? op->name : "");
	r.x = op->inputs[0];
	r.y = op->outputs[0];
	if (!r.x || !r.y || r.x->type.rank < 0 || r.y->type.rank != r.x->type.rank) return refuse(cx, op, "of unknown rank");
	tbc_dtype dt = r.x->type.dtype;
	if (!tbc_dtype_is_float(dt) && !tbc_dtype_is_int(dt) && dt != TBC_DT_BOOL) return refuse(cx, op, "on this dtype");
	const char *err = read_cfg(op, r.x->type.rank, &r.c);
	if (err) return lower_error(cx, op, "%s", err) ? LOWER_FAILED : LOWER_FAILED;
	const rz_cfg *c = &r.c;
	int64_t lsc = input_len(op, 2), lsz = input_len(op, 3);
	if (lsc < 0 || lsz < 0) return refuse(cx, op, "with scales or sizes of a length unknown at compile time");
	if ((lsc > 0) == (lsz > 0)) return refuse(cx, op, "without exactly one of scales and sizes");
	r.sizes = lsz > 0;
	r.v = op->inputs[r.sizes ? 3 : 2];
	if ((r.sizes ? lsz : lsc) != c->n_axes) return refuse(cx, op, "with scales/sizes not one per axis");
	if (r.sizes && r.v->type.dtype != TBC_DT_I64) return refuse(cx, op, "with sizes not int64");
	if (!r.sizes && !tbc_dtype_is_float(r.v->type.dtype)) return refuse(cx, op, "with scales not float");
	r.vc = tbc_input_const(op, r.sizes ? 3 : 2);
	if (c->ctm == CT_TF_CROP) {
		int64_t lr = input_len(op, 1);
		if (lr < 0) return refuse(cx, op, "with a roi of a length unknown at compile time");
		if (lr > 0) {
			if (lr != 2 * c->n_axes)
				return lower_error(cx, op, "roi must hold 2 values per axis (%d)", 2 * c->n_axes) ? LOWER_FAILED : LOWER_FAILED;
			r.roi = op->inputs[1];
			r.roi_len = (int)lr;
			r.roi_f32 = r.roi->type.dtype == TBC_DT_F32;
			r.roic = tbc_input_const(op, 1);
			if (!tbc_dtype_is_float(r.roi->type.dtype)) return refuse(cx, op, "with a roi not float");
		}
	}
	if (!plan(&r)) return LOWER_FAILED;
	if (need_shape_kernel(&r)) {
		bool scratch = false;
		for (int i = 0; i < c->n_axes; i++) scratch = scratch || (r.ax[i].resized != 0 && !r.ax[i].scale_known);
		if (scratch) {
			tbc_type t;
			memset(&t, 0, sizeof t);
			t.dtype = D;
			t.rank = 1;
			t.dims[0] = (tbc_dim){c->n_axes, NULL};
			if ((r.params_buf = lower_temp_buf(cx, &t, "resize_scales")) < 0) return LOWER_FAILED;
		}
		if (!shape_kernel(&r)) return LOWER_FAILED;
	}
	if (!lower_type_known(cx, &r.y->type)) return refuse(cx, op, "with an output dim left unknown");
	if ((r.out_buf = lower_result_buf(cx, r.y)) < 0) return LOWER_FAILED;
	bool maps = false;
	for (int i = 0; i < c->n_axes; i++) {
		rz_axis *A = &r.ax[i];
		if (A->resized == 0) continue;
		tbc_dim out = r.y->type.dims[A->a];
		bool nearest = c->mode == MODE_NEAREST;
		if ((A->idx_buf = table(cx, TBC_DT_I64, out, A, !nearest, "resize_idx")) < 0) return LOWER_FAILED;
		if (!nearest && (A->w_buf = table(cx, D, out, A, true, "resize_w")) < 0) return LOWER_FAILED;
		if (c->ctm == CT_TF_CROP && (A->ex_buf = table(cx, TBC_DT_BOOL, out, A, false, "resize_ex")) < 0) return LOWER_FAILED;
		maps = true;
	}
	if (maps && !map_kernel(&r)) return LOWER_FAILED;
	return data_kernel(&r) ? LOWER_OK : LOWER_FAILED;
}
