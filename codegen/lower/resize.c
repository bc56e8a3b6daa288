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
#include "codegen/lower/kir_short.h"
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
/* An index as f64, and a (finite, integral or truncated) f64 as an index. */
static kir_expr *FIDX(lk *l, kir_expr *i) { return CAST(l->k, D, CAST(l->k, TBC_DT_I64, i)); }
static kir_expr *IDXF(lk *l, kir_expr *f) { return CAST(l->k, KIR_INDEX, CAST(l->k, TBC_DT_I64, f)); }
static kir_expr *LOADF(lk *l, kir_buffer *b, kir_expr *i) { return CAST(l->k, D, kir_e_load(l->k, b, i)); }

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

static kir_expr *taps_of(lk *l, const rz_axis *A) { return A->n >= 0 ? I(l->k, A->n) : lk_dim(l, (tbc_dim){0, A->n_sym}); }
static kir_expr *resized_of(lk *l, const rz_axis *A) {
	if (A->resized >= 0) return kir_e_int(l->k, TBC_DT_BOOL, A->resized);
	return CMP(l->k, KIR_NE, lk_dim(l, (tbc_dim){0, A->r_sym}), I(l->k, 0));
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
	for (int i = 0; i < n; i++) in[i] = LET(l.k, &b, "in", lk_dim(&l, xt->dims[c->axes[i]]));
	if (r->sizes) {
		kir_expr *ratio[TBC_MAX_RANK];
		for (int i = 0; i < n; i++) {
			kir_expr *s = LET(l.k, &b, "size", CAST(l.k, KIR_INDEX, kir_e_load(k, vb, I(l.k, i))));
			fail_if(r, &l, &b, CMP(l.k, KIR_LT, s, I(l.k, 0)), "sizes must not be negative");
			fail_if(r, &l, &b, AND(l.k, CMP(l.k, KIR_EQ, in[i], I(l.k, 0)), CMP(l.k, KIR_NE, s, I(l.k, 0))),
				"cannot resize an empty dim");
			out[i] = s;
			ratio[i] = LET(l.k, &b, "ratio", SEL(l.k, CMP(l.k, KIR_EQ, in[i], I(l.k, 0)), F(l.k, D, 1.0), FDIV(l.k, FIDX(&l, s), FIDX(&l, in[i]))));
		}
		if (c->policy == KA_STRETCH) {
			for (int i = 0; i < n; i++) scale[i] = ratio[i];
		} else {
			kir_expr *s = F(l.k, D, c->policy == KA_NOT_LARGER ? INFINITY : -INFINITY);
			for (int i = 0; i < n; i++) s = LET(l.k, &b, "keep", BIN(l.k, c->policy == KA_NOT_LARGER ? KIR_MIN : KIR_MAX, s, ratio[i]));
			for (int i = 0; i < n; i++) {
				scale[i] = s;
				out[i] = LET(l.k, &b, "out", IDXF(&l, ADD(l.k, MUL(l.k, s, FIDX(&l, in[i])), F(l.k, D, 0.5))));
			}
		}
	} else {
		for (int i = 0; i < n; i++) {
			kir_expr *s = LET(l.k, &b, "scale", LOADF(&l, vb, I(l.k, i)));
			kir_expr *prod = LET(l.k, &b, "prod", MUL(l.k, s, FIDX(&l, in[i])));
			fail_if(r, &l, &b, OR(l.k, NOT(l.k, CMP(l.k, KIR_GT, s, F(l.k, D, 0))), CMP(l.k, KIR_GT, prod, F(l.k, D, 9.0e15))),
				"scales must be positive and finite");
			scale[i] = s;
			out[i] = LET(l.k, &b, "out", IDXF(&l, UN(l.k, KIR_FLOOR, prod)));
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
		for (int i = 0; i < n; i++) kir_block_add(k, &b, kir_s_store(k, pb, I(l.k, i), scale[i]));
	}
	kir_buffer *roib = r->roi ? lk_value(&l, r->roi) : NULL;
	if (r->roi && !roib) return false;
	for (int i = 0; i < n; i++) {
		const rz_axis *A = &r->ax[i];
		if (A->resized != -1 && A->n >= 0) continue;
		kir_expr *id = kir_e_int(k, TBC_DT_BOOL, 1);
		if (roib) {
			kir_expr *r0 = LOADF(&l, roib, I(l.k, i)), *r1 = LOADF(&l, roib, I(l.k, n + i));
			id = AND(l.k, CMP(l.k, KIR_LT, UN(l.k, KIR_ABS, r0), F(l.k, D, 1e-9)),
				 CMP(l.k, KIR_LT, UN(l.k, KIR_ABS, ADD(l.k, r1, F(l.k, D, -1.0))), F(l.k, D, 1e-9)));
		}
		kir_expr *same = AND(l.k, CMP(l.k, KIR_LE, UN(l.k, KIR_ABS, ADD(l.k, scale[i], F(l.k, D, -1.0))), F(l.k, D, 1e-9)),
				     AND(l.k, CMP(l.k, KIR_EQ, out[i], in[i]), id));
		kir_expr *res = LET(l.k, &b, "resized", NOT(l.k, same));
		kir_buffer *syms = lk_syms(&l);
		if (!syms) return false;
		if (A->resized == -1) {
			int s = lower_sym_computed(r->cx, A->r_sym);
			if (s < 0) return false;
			kir_block_add(k, &b, kir_s_store(k, syms, I(l.k, s), SEL(l.k, res, kir_e_int(k, TBC_DT_I64, 1), kir_e_int(k, TBC_DT_I64, 0))));
		}
		if (A->n < 0) {
			kir_expr *sc = scale[i];
			kir_expr *s = SEL(l.k, CMP(l.k, KIR_LT, sc, F(l.k, D, 1.0)), sc, F(l.k, D, 1.0));
			kir_expr *start = ADD(l.k, UN(l.k, KIR_FLOOR, FDIV(l.k, F(l.k, D, c->mode == MODE_LINEAR ? -1.0 : -2.0), s)), F(l.k, D, 1));
			kir_expr *nn = LET(l.k, &b, "taps", MUL(l.k, F(l.k, D, 2), ADD(l.k, F(l.k, D, 1), UN(l.k, KIR_NEG, start))));
			kir_expr *used = LET(l.k, &b, "used", AND(l.k, res, CMP(l.k, KIR_GT, out[i], I(l.k, 0))));
			fail_if(r, &l, &b,
				AND(l.k, used, NOT(l.k, AND(l.k, CMP(l.k, KIR_GE, nn, F(l.k, D, 1)), CMP(l.k, KIR_LE, nn, F(l.k, D, MAX_TAPS))))),
				"out of memory");
			int si = lower_sym_computed(r->cx, A->n_sym);
			if (si < 0) return false;
			kir_block_add(k, &b, kir_s_store(k, syms, I(l.k, si), SEL(l.k, used, CAST(l.k, TBC_DT_I64, nn), kir_e_int(k, TBC_DT_I64, 2))));
		}
	}
	return lk_end(&l, b.first);
}

/* ---- 2. Map kernel: taps and weights per output coordinate -----------------------------*/
static kir_expr *scale_of(rz *r, lk *l, int i) {
	const rz_axis *A = &r->ax[i];
	if (A->scale_known) return F(l->k, D, A->scale);
	kir_buffer *pb = lk_buf(l, r->params_buf);
	return pb ? kir_e_load(l->k, pb, I(l->k, i)) : NULL;
}

/* The cubic kernel of the interpreter (cubic_weight), on |x|. */
static kir_expr *cubic_weight(lk *l, kir_expr *x, double A) {
	kir_expr *near = ADD(l->k, MUL(l->k, MUL(l->k, ADD(l->k, MUL(l->k, F(l->k, D, A + 2), x), F(l->k, D, -(A + 3))), x), x), F(l->k, D, 1));
	kir_expr *far = ADD(l->k, MUL(l->k, ADD(l->k, MUL(l->k, ADD(l->k, MUL(l->k, F(l->k, D, A), x), F(l->k, D, -(5 * A))), x), F(l->k, D, 8 * A)), x), F(l->k, D, -(4 * A)));
	return SEL(l->k, CMP(l->k, KIR_LE, x, F(l->k, D, 1)), near, SEL(l->k, CMP(l->k, KIR_LT, x, F(l->k, D, 2)), far, F(l->k, D, 0)));
}

/* ((A * u - 5A) * u + 8A) * u - 4A and ((A + 2) * u - (A + 3)) * u * u + 1,
 * the interpreter's non-antialias cubic weights. */
static kir_expr *cubic_far(lk *l, kir_expr *u, double A) {
	return ADD(l->k, MUL(l->k, ADD(l->k, MUL(l->k, ADD(l->k, MUL(l->k, F(l->k, D, A), u), F(l->k, D, -(5 * A))), u), F(l->k, D, 8 * A)), u), F(l->k, D, -(4 * A)));
}
static kir_expr *cubic_near(lk *l, kir_expr *u, double A) {
	return ADD(l->k, MUL(l->k, MUL(l->k, ADD(l->k, MUL(l->k, F(l->k, D, A + 2), u), F(l->k, D, -(A + 3))), u), u), F(l->k, D, 1));
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
	kir_expr *in_w = LET(l->k, b, "in_w", lk_dim(l, r->x->type.dims[A->a]));
	kir_expr *out_w = lk_dim(l, r->y->type.dims[A->a]);
	kir_expr *scale = LET(l->k, b, "scale", scale_of(r, l, i));
	kir_expr *n = taps_of(l, A);
	kir_expr *in_f = LET(l->k, b, "in_f", FIDX(l, in_w));
	kir_expr *out_f = LET(l->k, b, "out_f", MUL(l->k, scale, in_f));
	kir_expr *last_f = LET(l->k, b, "last_f", FIDX(l, ADD(l->k, in_w, I(l->k, -1))));
	kir_expr *r0 = F(l->k, D, 0.0), *r1 = F(l->k, D, 1.0), *s_aa = NULL, *st_aa = NULL;
	if (c->ctm == CT_TF_CROP && r->roi) {
		kir_buffer *roib = lk_value(l, r->roi);
		if (!roib) return false;
		r0 = LET(l->k, b, "roi0", LOADF(l, roib, I(l->k, i)));
		r1 = LET(l->k, b, "roi1", LOADF(l, roib, I(l->k, n_axes + i)));
	}
	if (c->antialias) {
		s_aa = LET(l->k, b, "s", SEL(l->k, CMP(l->k, KIR_LT, scale, F(l->k, D, 1.0)), scale, F(l->k, D, 1.0)));
		st_aa = LET(l->k, b, "first",
			      ADD(l->k, IDXF(l, UN(l->k, KIR_FLOOR, FDIV(l->k, F(l->k, D, c->mode == MODE_LINEAR ? -1.0 : -2.0), s_aa))), I(l->k, 1)));
	}

	kir_var *j = kir_var_new(k, "j", KIR_INDEX);
	kir_block body = {0};
	kir_expr *y = LET(l->k, &body, "y", FIDX(l, V(l->k, j)));
	kir_expr *yh = ADD(l->k, y, F(l->k, D, 0.5));
	kir_expr *x;
	switch (c->ctm) {
	case CT_ALIGN_CORNERS:
		x = SEL(l->k, CMP(l->k, KIR_EQ, out_f, F(l->k, D, 1)), F(l->k, D, 0.0), FDIV(l->k, MUL(l->k, y, last_f), ADD(l->k, out_f, F(l->k, D, -1))));
		break;
	case CT_ASYMMETRIC: x = FDIV(l->k, y, scale); break;
	case CT_PYTORCH_HALF_PIXEL:
		x = SEL(l->k, CMP(l->k, KIR_EQ, out_f, F(l->k, D, 1)), F(l->k, D, -0.5), ADD(l->k, FDIV(l->k, yh, scale), F(l->k, D, -0.5)));
		break;
	case CT_HALF_PIXEL_SYMMETRIC: {
		kir_expr *adj = FDIV(l->k, FIDX(l, out_w), out_f), *center = FDIV(l->k, in_f, F(l->k, D, 2));
		x = ADD(l->k, ADD(l->k, MUL(l->k, center, SUB(l->k, F(l->k, D, 1), adj)), FDIV(l->k, yh, scale)), F(l->k, D, -0.5));
		break;
	}
	case CT_TF_CROP: {
		kir_expr *span = SUB(l->k, r1, r0), *base;
		if (r->roi_f32) {
			span = CAST(l->k, D, CAST(l->k, TBC_DT_F32, span));
			base = CAST(l->k, D, MUL(l->k, CAST(l->k, TBC_DT_F32, r0), CAST(l->k, TBC_DT_F32, CAST(l->k, TBC_DT_I64, ADD(l->k, in_w, I(l->k, -1))))));
		} else {
			base = MUL(l->k, r0, last_f);
		}
		span = LET(l->k, b, "span", span);
		base = LET(l->k, b, "base", base);
		x = SEL(l->k, CMP(l->k, KIR_EQ, out_f, F(l->k, D, 1)), FDIV(l->k, MUL(l->k, span, last_f), F(l->k, D, 2)),
			FDIV(l->k, MUL(l->k, MUL(l->k, y, span), last_f), ADD(l->k, out_f, F(l->k, D, -1))));
		x = LET(l->k, &body, "x", ADD(l->k, x, base));
		break;
	}
	default: x = ADD(l->k, FDIV(l->k, yh, scale), F(l->k, D, -0.5)); break;
	}
	x = LET(l->k, &body, "x", x);
	if (eb) {
		kir_expr *ex = OR(l->k, CMP(l->k, KIR_LT, x, F(l->k, D, 0)), CMP(l->k, KIR_GT, x, last_f));
		kir_block_add(k, &body, kir_s_store(k, eb, V(l->k, j), ex));
	}
	x = LET(l->k, &body, "x", SEL(l->k, NOT(l->k, CMP(l->k, KIR_GT, x, F(l->k, D, -1e15))), F(l->k, D, -1e15), x));
	x = LET(l->k, &body, "x", SEL(l->k, CMP(l->k, KIR_GT, x, F(l->k, D, 1e15)), F(l->k, D, 1e15), x));
	kir_expr *xf = LET(l->k, &body, "xf", UN(l->k, KIR_FLOOR, x));
	kir_expr *ratio = LET(l->k, &body, "ratio", SEL(l->k, CMP(l->k, KIR_EQ, x, xf), F(l->k, D, 1.0), SUB(l->k, x, xf)));

	/* The first tap: x + pad floored, less n / 2 (or n / 2 - 1 past a whole
	 * number), less pad; n is even. */
	int64_t nn = c->mode == MODE_NEAREST ? 2 : A->n;
	kir_expr *nt = c->mode == MODE_NEAREST ? I(l->k, 2) : n;
	kir_expr *pad = nn >= 0 ? I(l->k, (nn + 1) / 2) : BIN(l->k, KIR_FLOORDIV, ADD(l->k, nt, I(l->k, 1)), I(l->k, 2));
	kir_expr *half = nn >= 0 ? I(l->k, nn / 2) : BIN(l->k, KIR_FLOORDIV, nt, I(l->k, 2));
	kir_expr *xp = LET(l->k, &body, "xp", ADD(l->k, x, FIDX(l, pad)));
	kir_expr *pf = LET(l->k, &body, "pf", UN(l->k, KIR_FLOOR, xp));
	kir_expr *off = SEL(l->k, CMP(l->k, KIR_EQ, SUB(l->k, xp, pf), F(l->k, D, 0)), SUB(l->k, I(l->k, 0), half), SUB(l->k, I(l->k, 1), half));
	kir_expr *start = LET(l->k, &body, "start", SUB(l->k, ADD(l->k, IDXF(l, pf), off), pad));
	kir_expr *top = ADD(l->k, in_w, I(l->k, -1));

	if (c->mode == MODE_NEAREST) {
		kir_expr *up;
		switch (c->nearest_mode) {
		case NM_ROUND_PREFER_FLOOR: up = CMP(l->k, KIR_GT, ratio, F(l->k, D, 0.5)); break;
		case NM_ROUND_PREFER_CEIL: up = CMP(l->k, KIR_GE, ratio, F(l->k, D, 0.5)); break;
		case NM_FLOOR: up = kir_e_int(k, TBC_DT_BOOL, 0); break;
		default: up = kir_e_int(k, TBC_DT_BOOL, 1); break;
		}
		kir_expr *first = NOT(l->k, OR(l->k, CMP(l->k, KIR_EQ, ratio, F(l->k, D, 1.0)), up)); /* w[0] is 1 */
		if (c->exclude_outside)
			first = AND(l->k, first, NOT(l->k, OR(l->k, CMP(l->k, KIR_LT, start, I(l->k, 0)), CMP(l->k, KIR_GE, start, in_w))));
		kir_expr *k0 = MIN(l->k, MAX(l->k, start, I(l->k, 0)), top), *k1 = MIN(l->k, MAX(l->k, ADD(l->k, start, I(l->k, 1)), I(l->k, 0)), top);
		kir_block_add(k, &body, kir_s_store(k, ib, V(l->k, j), CAST(l->k, TBC_DT_I64, SEL(l->k, first, k0, k1))));
	} else {
		kir_expr *row = LET(l->k, &body, "row", MUL(l->k, V(l->k, j), n));
		double Ac = c->cubic_a;
		if (!c->antialias && c->mode == MODE_LINEAR) {
			kir_block_add(k, &body, kir_s_store(k, wb, row, SUB(l->k, F(l->k, D, 1), ratio)));
			kir_block_add(k, &body, kir_s_store(k, wb, ADD(l->k, row, I(l->k, 1)), ratio));
		} else if (!c->antialias) {
			kir_expr *om = LET(l->k, &body, "om", SUB(l->k, F(l->k, D, 1), ratio));
			kir_expr *w[4] = {cubic_far(l, ADD(l->k, ratio, F(l->k, D, 1)), Ac), cubic_near(l, ratio, Ac), cubic_near(l, om, Ac),
					  cubic_far(l, ADD(l->k, om, F(l->k, D, 1)), Ac)};
			for (int t = 0; t < 4; t++) kir_block_add(k, &body, kir_s_store(k, wb, ADD(l->k, row, I(l->k, t)), w[t]));
		} else {
			/* The kernel stretched by 1/scale, normalised to sum 1. */
			kir_var *sum = kir_var_new(k, "wsum", D), *t = kir_var_new(k, "t", KIR_INDEX);
			kir_block_add(k, &body, kir_s_set(k, sum, F(l->k, D, 0)));
			kir_block tb = {0};
			kir_expr *a = LET(l->k, &tb, "a", MUL(l->k, SUB(l->k, FIDX(l, ADD(l->k, st_aa, V(l->k, t))), ratio), s_aa));
			kir_expr *w = c->mode == MODE_LINEAR ? MIN(l->k, MAX(l->k, SUB(l->k, F(l->k, D, 1), UN(l->k, KIR_ABS, a)), F(l->k, D, 0)), F(l->k, D, 1))
							     : cubic_weight(l, UN(l->k, KIR_ABS, a), Ac);
			w = LET(l->k, &tb, "w", w);
			kir_block_add(k, &tb, kir_s_store(k, wb, ADD(l->k, row, V(l->k, t)), w));
			kir_block_add(k, &tb, kir_s_set(k, sum, ADD(l->k, V(l->k, sum), w)));
			kir_block_add(k, &body, kir_s_for(k, t, I(l->k, 0), n, 1, KIR_LOOP_SEQUENTIAL, tb.first));
			kir_var *t2 = kir_var_new(k, "t", KIR_INDEX);
			kir_expr *at = ADD(l->k, row, V(l->k, t2));
			kir_stmt *div = kir_s_store(k, wb, at, FDIV(l->k, kir_e_load(k, wb, at), V(l->k, sum)));
			kir_block_add(k, &body, kir_s_for(k, t2, I(l->k, 0), n, 1, KIR_LOOP_SEQUENTIAL, div));
		}
		/* Indices clamped; exclude_outside zeroes taps outside and renormalises. */
		kir_var *t = kir_var_new(k, "t", KIR_INDEX), *sum = NULL;
		kir_block tb = {0};
		kir_expr *kk = LET(l->k, &tb, "k", ADD(l->k, start, V(l->k, t)));
		kir_expr *at = ADD(l->k, row, V(l->k, t));
		kir_block_add(k, &tb, kir_s_store(k, ib, at, CAST(l->k, TBC_DT_I64, MIN(l->k, MAX(l->k, kk, I(l->k, 0)), top))));
		if (c->exclude_outside) {
			sum = kir_var_new(k, "esum", D);
			kir_block_add(k, &body, kir_s_set(k, sum, F(l->k, D, 0)));
			kir_expr *outside = OR(l->k, CMP(l->k, KIR_LT, kk, I(l->k, 0)), CMP(l->k, KIR_GE, kk, in_w));
			kir_expr *w = LET(l->k, &tb, "w", SEL(l->k, outside, F(l->k, D, 0), kir_e_load(k, wb, at)));
			kir_block_add(k, &tb, kir_s_store(k, wb, at, w));
			kir_block_add(k, &tb, kir_s_set(k, sum, ADD(l->k, V(l->k, sum), w)));
		}
		kir_block_add(k, &body, kir_s_for(k, t, I(l->k, 0), n, 1, KIR_LOOP_SEQUENTIAL, tb.first));
		if (c->exclude_outside) {
			kir_var *t2 = kir_var_new(k, "t", KIR_INDEX);
			kir_expr *at2 = ADD(l->k, row, V(l->k, t2));
			kir_expr *den = SEL(l->k, CMP(l->k, KIR_EQ, V(l->k, sum), F(l->k, D, 0)), F(l->k, D, 1), V(l->k, sum));
			kir_stmt *div = kir_s_store(k, wb, at2, FDIV(l->k, kir_e_load(k, wb, at2), den));
			kir_block_add(k, &body, kir_s_for(k, t2, I(l->k, 0), n, 1, KIR_LOOP_SEQUENTIAL, div));
		}
	}
	kir_stmt *work = body.first;
	if (A->resized == -1) {
		/* Not resized after all: the identity, one tap of weight 1. */
		kir_block id = {0};
		kir_expr *row = c->mode == MODE_NEAREST ? V(l->k, j) : MUL(l->k, V(l->k, j), n);
		kir_block_add(k, &id, kir_s_store(k, ib, row, CAST(l->k, TBC_DT_I64, V(l->k, j))));
		if (wb) kir_block_add(k, &id, kir_s_store(k, wb, row, F(l->k, D, 1.0)));
		if (eb) kir_block_add(k, &id, kir_s_store(k, eb, V(l->k, j), kir_e_int(k, TBC_DT_BOOL, 0)));
		work = kir_s_if(k, resized_of(l, A), body.first, id.first);
	}
	kir_block_add(k, b, kir_s_for(k, j, I(l->k, 0), out_w, 1, KIR_LOOP_SEQUENTIAL, work));
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
		v = UN(l->k, KIR_ROUND_EVEN, v);
		v = SEL(l->k, UN(l->k, KIR_ISNAN, v), F(l->k, D, 0), v);
		return CAST(l->k, dt, MIN(l->k, MAX(l->k, v, F(l->k, D, lo)), F(l->k, D, hi)));
	}
	double max = conv_dtype_float_max(dt);
	if (max > 0) v = MAX(l->k, MIN(l->k, v, F(l->k, D, max)), F(l->k, D, -max));
	return CAST(l->k, dt, v);
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
	kir_expr *row = LET(l->k, b, "row", MUL(l->k, d->o[A->a], I(l->k, A->n)));
	for (int t = 0; t < A->n; t++) {
		kir_expr *at = ADD(l->k, row, I(l->k, t));
		d->so[lev][t] = LET(l->k, b, "so", MUL(l->k, CAST(l->k, KIR_INDEX, kir_e_load(k, ib, at)), d->xs[A->a]));
		d->w[lev][t] = LET(l->k, b, "wt", kir_e_load(k, wb, at));
	}
	return !k->failed;
}

/* The value of X resized along order[0..lev] at the output point, the
 * other axes' contribution to the source offset being off: the taps of
 * order[lev] summed from 0.0 over the value one level down. */
static kir_expr *level(rz_data *d, int lev, kir_expr *off, kir_block *b) {
	lk *l = d->l;
	kir_kernel *k = l->k;
	if (lev < 0) return CAST(l->k, D, kir_e_load(k, d->x, off));
	rz *r = d->r;
	const rz_axis *A = &r->ax[d->order[lev]];
	if (d->unrolled[lev]) {
		kir_expr *acc = F(l->k, D, 0);
		for (int t = 0; t < A->n; t++) {
			kir_expr *inner = level(d, lev - 1, ADD(l->k, off, d->so[lev][t]), b);
			acc = ADD(l->k, acc, MUL(l->k, d->w[lev][t], inner));
		}
		if (A->ex_buf >= 0) {
			kir_buffer *eb = lk_buf(l, A->ex_buf);
			if (!eb) return NULL;
			acc = SEL(l->k, kir_e_load(k, eb, d->o[A->a]), F(l->k, D, r->c.extrapolation), acc);
		}
		return acc;
	}
	kir_buffer *ib = lk_buf(l, A->idx_buf), *wb = lk_buf(l, A->w_buf);
	if (!ib || !wb) return NULL;
	kir_expr *n = taps_of(l, A);
	kir_expr *taps = A->resized == 1 ? n : SEL(l->k, resized_of(l, A), n, I(l->k, 1));
	kir_var *acc = kir_var_new(k, "acc", D), *t = kir_var_new(k, "t", KIR_INDEX);
	kir_block_add(k, b, kir_s_set(k, acc, F(l->k, D, 0)));
	kir_expr *row = LET(l->k, b, "row", MUL(l->k, d->o[A->a], n));
	kir_block tb = {0};
	kir_expr *at = ADD(l->k, row, V(l->k, t));
	kir_expr *src = CAST(l->k, KIR_INDEX, kir_e_load(k, ib, at));
	kir_expr *inner = level(d, lev - 1, ADD(l->k, off, MUL(l->k, src, d->xs[A->a])), &tb);
	kir_block_add(k, &tb, kir_s_set(k, acc, ADD(l->k, V(l->k, acc), MUL(l->k, kir_e_load(k, wb, at), inner))));
	kir_block_add(k, b, kir_s_for(k, t, I(l->k, 0), taps, 1, KIR_LOOP_SEQUENTIAL, tb.first));
	kir_expr *v = V(l->k, acc);
	if (A->ex_buf >= 0) {
		kir_buffer *eb = lk_buf(l, A->ex_buf);
		if (!eb) return NULL;
		v = SEL(l->k, kir_e_load(k, eb, d->o[A->a]), F(l->k, D, r->c.extrapolation), v);
	}
	return LET(l->k, b, "v", v);
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
	kir_expr *stride = I(l.k, 1);
	for (int a = R - 1; a >= 0; a--) {
		d.xs[a] = stride;
		stride = MUL(l.k, stride, lk_dim(&l, xt->dims[a]));
	}
	/* Rows: every output dim but the last, flattened (parallel); the last
	 * dim inside. */
	kir_var *p = kir_var_new(k, "p", KIR_INDEX), *w = kir_var_new(k, "w", KIR_INDEX);
	kir_block rowb = {0}, body = {0};
	kir_expr *rows = I(l.k, 1);
	for (int a = 0; a + 1 < R; a++) rows = MUL(l.k, rows, lk_dim(&l, yt->dims[a]));
	kir_expr *width = R ? lk_dim(&l, yt->dims[R - 1]) : I(l.k, 1);
	kir_expr *rem = V(l.k, p);
	for (int a = R - 2; a >= 0; a--) {
		if (a == 0) {
			d.o[a] = rem;
			break;
		}
		kir_expr *ya = lk_dim(&l, yt->dims[a]);
		d.o[a] = LET(l.k, &rowb, "o", BIN(l.k, KIR_FLOORMOD, rem, ya));
		rem = LET(l.k, &rowb, "q", BIN(l.k, KIR_FLOORDIV, rem, ya));
	}
	if (R) d.o[R - 1] = V(l.k, w);
	/* The part of the source offset (and of the extrapolation test) fixed
	 * by the row, and the last dim's; linear and cubic add the resized
	 * axes' taps in level(). */
	kir_expr *roff = I(l.k, 0), *rex = NULL, *loff = I(l.k, 0), *ex = NULL;
	bool nearest = c->mode == MODE_NEAREST;
	for (int a = 0; a < R; a++) {
		const rz_axis *A = pos[a] >= 0 ? &r->ax[pos[a]] : NULL;
		bool last = a + 1 == R;
		if (A && !nearest) continue;
		kir_expr *coord = d.o[a];
		if (A) {
			kir_buffer *ib = lk_buf(&l, A->idx_buf);
			if (!ib) return false;
			coord = CAST(l.k, KIR_INDEX, kir_e_load(k, ib, d.o[a]));
		}
		if (last) loff = MUL(l.k, coord, d.xs[a]);
		else roff = ADD(l.k, roff, MUL(l.k, coord, d.xs[a]));
		if (A && A->ex_buf >= 0) {
			kir_buffer *eb = lk_buf(&l, A->ex_buf);
			if (!eb) return false;
			kir_expr *e = kir_e_load(k, eb, d.o[a]);
			if (last) ex = e;
			else rex = rex ? OR(l.k, rex, e) : e;
		}
	}
	roff = LET(l.k, &rowb, "roff", roff);
	if (rex) rex = LET(l.k, &rowb, "rex", rex);
	kir_expr *off = ADD(l.k, roff, loff);
	if (rex) ex = ex ? OR(l.k, rex, ex) : rex;
	kir_expr *yidx = ADD(l.k, MUL(l.k, V(l.k, p), width), V(l.k, w));
	kir_expr *value;
	if (nearest) {
		value = kir_e_load(k, d.x, off);
		if (ex) value = SEL(l.k, ex, saturate(&l, F(l.k, D, c->extrapolation), yt->dtype), value);
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
	kir_stmt *inner = kir_s_for(k, w, I(l.k, 0), width, 1, KIR_LOOP_VECTOR, body.first);
	kir_block_add(k, &rowb, inner);
	return lk_end(&l, kir_s_for(k, p, I(l.k, 0), rows, 1, KIR_LOOP_PARALLEL, rowb.first));
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
