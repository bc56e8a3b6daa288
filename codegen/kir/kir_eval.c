/* A straightforward evaluator of kernel IR over host buffers: the meaning of
 * every node written as plain C, so lowering is tested without LLVM and the
 * LLVM backend is tested against it.  Clarity over speed.
 *
 * Values: floats are held as double (an f32 result is rounded to float after
 * every operation, as f32 hardware does), integers as int64 holding the value
 * sign- or zero-extended from the type's width (every result wraps to the
 * width), bool as 0/1, narrow floats (f16, bf16, float8, f4) as their bit
 * pattern: they are only loaded, stored, selected and cast, so a copy keeps
 * their bits (NaN payloads, float8e8m0's code 0) as the interpreter's copies
 * do, and a cast decodes and encodes through ir/dtype.c. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/kir/kir.h"
#include "codegen/kir/kir_sem.h"

typedef union val {
	double f;
	int64_t i;
} val;

/* Who touched a local element in which phase (the stretch between two
 * barriers of a group): a read of what another item stored in the same
 * phase, or a store to what another item read or stored, is a race. */
typedef struct touch {
	int64_t stored_phase, read_phase; /* -1: never */
	int stored_by, read_by;           /* read_by -2: several items */
} touch;

typedef struct evaluator {
	const kir_kernel *k;
	void *const *bufs;
	const int64_t *sizes;
	int64_t *numel; /* per buffer */
	val *vars;
	tbc_diags *d;
	bool failed;
	/* Grouped kernels: each local buffer's memory and touches, the item
	 * running (-1 outside a group) and the phase. */
	void **locals;
	touch **touches;
	int item;
	int64_t phase;
	val *item_vars; /* the group's items' variables: n_items x n_vars */
	int64_t n_items;
	bool reverse; /* parallel, vector and grid loops from their last iteration */
} evaluator;

__attribute__((format(printf, 2, 3))) static void eerr(evaluator *ev, const char *fmt, ...) {
	if (ev->failed) return;
	ev->failed = true;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (ev->d) tbc_diags_add(ev->d, TBC_ERR_RUNTIME, NULL, NULL, NULL, NULL, "kernel %s: %s", ev->k->name, msg);
}


/* The value v wrapped to the width of integer type t. */
static int64_t wrap(tbc_dtype t, int64_t v) {
	if (t == KIR_INDEX) return v;
	if (t == TBC_DT_BOOL) return v != 0;
	int bits = tbc_dtype_bits(t);
	if (bits >= 64) return v;
	uint64_t mask = ((uint64_t)1 << bits) - 1, u = (uint64_t)v & mask;
	if (!kir_type_is_unsigned(t) && (u >> (bits - 1))) u |= ~mask;
	return (int64_t)u;
}

static double round_to(tbc_dtype t, double v) { return t == TBC_DT_F32 ? (double)(float)v : v; }

static val eval(evaluator *ev, const kir_expr *e);

static int64_t local_numel(const kir_buffer *b) {
	int64_t n = 1;
	for (int d = 0; d < b->rank; d++) n *= b->dims[d]->i; /* constants (kir_verify) */
	return n;
}

/* Element i of b, checked against its size and, for a local buffer, against
 * the other items' touches; -1 after an error. */
static int64_t checked_index(evaluator *ev, const kir_buffer *b, val i, const char *what) {
	bool local = b->space == KIR_MEM_LOCAL;
	if (local && (!ev->locals || ev->item < 0)) {
		eerr(ev, "%s of local buffer %s outside a work-group", what, b->name);
		return -1;
	}
	int64_t n = local ? local_numel(b) : ev->numel[b->id];
	if (i.i < 0 || i.i >= n) {
		eerr(ev, "%s of %s at %" PRId64 ", outside its %" PRId64 " elements", what, b->name, i.i, n);
		return -1;
	}
	if (local) { /* races between the items of a group */
		touch *t = &ev->touches[b->id][i.i];
		bool store = what[0] == 's';
		if (t->stored_phase < 0 && !store) {
			eerr(ev, "work-item %d reads %s[%" PRId64 "], which no item stored", ev->item, b->name, i.i);
		} else if (t->stored_phase == ev->phase && t->stored_by != ev->item) {
			eerr(ev, "work-items %d and %d race on %s[%" PRId64 "] (no barrier between a store and a %s)",
			     t->stored_by, ev->item, b->name, i.i, what);
		} else if (store && t->read_phase == ev->phase && t->read_by != ev->item) {
			eerr(ev, "work-item %d stores %s[%" PRId64 "], which another item read since the last barrier", ev->item,
			     b->name, i.i);
		}
		if (store) {
			t->stored_phase = ev->phase;
			t->stored_by = ev->item;
		} else if (t->read_phase != ev->phase) {
			t->read_phase = ev->phase;
			t->read_by = ev->item;
		} else if (t->read_by != ev->item) {
			t->read_by = -2;
		}
	}
	return i.i;
}

static int64_t index_of(evaluator *ev, const kir_buffer *b, const kir_expr *index, const char *what) {
	val i = eval(ev, index);
	return ev->failed ? -1 : checked_index(ev, b, i, what);
}

static void *memory_of(evaluator *ev, const kir_buffer *b) {
	return b->space == KIR_MEM_LOCAL ? ev->locals[b->id] : ev->bufs[b->id];
}

static val load(evaluator *ev, const kir_buffer *b, int64_t i) {
	val r;
	const void *p = memory_of(ev, b);
	if (kir_type_is_narrow_float(b->dtype)) r.i = (int64_t)tbc_load_bits(b->dtype, p, (size_t)i);
	else if (kir_type_is_float(b->dtype)) r.f = tbc_load_f64(b->dtype, p, (size_t)i);
	else if (kir_type_is_unsigned(b->dtype)) r.i = (int64_t)tbc_load_u64(b->dtype, p, (size_t)i);
	else r.i = tbc_load_i64(b->dtype, p, (size_t)i);
	return r;
}

static void store(evaluator *ev, const kir_buffer *b, int64_t i, val v) {
	void *p = memory_of(ev, b);
	if (kir_type_is_narrow_float(b->dtype)) tbc_store_bits(b->dtype, p, (size_t)i, (uint64_t)v.i);
	else if (kir_type_is_float(b->dtype)) tbc_store_f64(b->dtype, p, (size_t)i, v.f);
	else tbc_store_i64(b->dtype, p, (size_t)i, v.i);
}

static double unary_f(kir_unop op, double x) {
	switch (op) {
	case KIR_NEG: return -x;
	case KIR_ABS: return fabs(x);
	case KIR_SQRT: return sqrt(x);
	case KIR_EXP: return exp(x);
	case KIR_LOG: return log(x);
	case KIR_SIN: return sin(x);
	case KIR_COS: return cos(x);
	case KIR_TAN: return tan(x);
	case KIR_ASIN: return asin(x);
	case KIR_ACOS: return acos(x);
	case KIR_ATAN: return atan(x);
	case KIR_SINH: return sinh(x);
	case KIR_COSH: return cosh(x);
	case KIR_TANH: return tanh(x);
	case KIR_ASINH: return asinh(x);
	case KIR_ACOSH: return acosh(x);
	case KIR_ATANH: return atanh(x);
	case KIR_ERF: return erf(x);
	case KIR_FLOOR: return floor(x);
	case KIR_CEIL: return ceil(x);
	case KIR_ROUND_EVEN: return nearbyint(x);
	case KIR_TRUNC: return trunc(x);
	case KIR_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
	case KIR_EXPM1: return expm1(x);
	case KIR_LOG1P: return log1p(x);
	default: return x;
	}
}

static val unary(evaluator *ev, const kir_expr *e) {
	val a = eval(ev, e->a), r = {0};
	tbc_dtype t = e->a->type;
	kir_unop op = (kir_unop)e->op;
	if (op == KIR_ISNAN) return (val){.i = isnan(a.f)};
	if (op == KIR_ISINF) return (val){.i = isinf(a.f)};
	if (kir_type_is_float(t)) {
		r.f = round_to(t, unary_f(op, a.f));
		return r;
	}
	uint64_t u = (uint64_t)a.i;
	switch (op) {
	case KIR_NEG: r.i = (int64_t)(0u - u); break;
	case KIR_ABS: r.i = (!kir_type_is_unsigned(t) && a.i < 0) ? (int64_t)(0u - u) : a.i; break;
	case KIR_NOT: r.i = t == TBC_DT_BOOL ? !a.i : (int64_t)~u; break;
	case KIR_SIGN: r.i = kir_type_is_unsigned(t) ? u != 0 : (a.i > 0) - (a.i < 0); break;
	default: eerr(ev, "%s of an integer", kir_unop_name(op)); break;
	}
	r.i = wrap(t, r.i);
	return r;
}

static val binary(evaluator *ev, const kir_expr *e) {
	val a = eval(ev, e->a), b = eval(ev, e->b), r = {0};
	tbc_dtype t = e->a->type;
	kir_binop op = (kir_binop)e->op;
	if (kir_type_is_float(t)) {
		double x = a.f, y = b.f;
		switch (op) {
		case KIR_ADD: r.f = x + y; break;
		case KIR_SUB: r.f = x - y; break;
		case KIR_MUL: r.f = x * y; break;
		case KIR_DIV: r.f = x / y; break;
		case KIR_REM: r.f = fmod(x, y); break;
		case KIR_MIN: r.f = kir_sem_fmin(x, y); break;
		case KIR_MAX: r.f = kir_sem_fmax(x, y); break;
		case KIR_POW: r.f = pow(x, y); break;
		case KIR_ATAN2: r.f = atan2(x, y); break;
		case KIR_FLOORDIV: r.f = floor(x / y); break;
		case KIR_FLOORMOD: r.f = x - floor(x / y) * y; break;
		default: eerr(ev, "%s of floats", kir_binop_name(op)); break;
		}
		r.f = round_to(t, r.f);
		return r;
	}
	int bits = t == KIR_INDEX ? 64 : tbc_dtype_bits(t);
	bool u = kir_type_is_unsigned(t);
	uint64_t x = (uint64_t)a.i, y = (uint64_t)b.i;
	switch (op) {
	case KIR_ADD: r.i = (int64_t)(x + y); break;
	case KIR_SUB: r.i = (int64_t)(x - y); break;
	case KIR_MUL: r.i = (int64_t)(x * y); break;
	case KIR_DIV: r.i = u ? (int64_t)kir_sem_udiv(x, y) : kir_sem_sdiv(a.i, b.i); break;
	case KIR_REM: r.i = u ? (int64_t)kir_sem_urem(x, y) : kir_sem_srem(a.i, b.i); break;
	case KIR_FLOORDIV: r.i = kir_sem_floordiv(a.i, b.i); break;
	case KIR_FLOORMOD: r.i = kir_sem_floormod(a.i, b.i); break;
	case KIR_MIN: r.i = u ? (int64_t)(x < y ? x : y) : (a.i < b.i ? a.i : b.i); break;
	case KIR_MAX: r.i = u ? (int64_t)(x > y ? x : y) : (a.i > b.i ? a.i : b.i); break;
	case KIR_POW: r.i = u ? (int64_t)kir_sem_upow(x, y) : kir_sem_ipow(a.i, b.i); break;
	case KIR_AND: r.i = a.i & b.i; break;
	case KIR_OR: r.i = a.i | b.i; break;
	case KIR_XOR: r.i = a.i ^ b.i; break;
	case KIR_SHL: r.i = kir_sem_shl(a.i, b.i, u, bits); break;
	case KIR_SHR: r.i = kir_sem_shr(a.i, b.i, u, bits); break;
	default: eerr(ev, "%s of integers", kir_binop_name(op)); break;
	}
	r.i = wrap(t, r.i);
	return r;
}

static val compare(evaluator *ev, const kir_expr *e) {
	val a = eval(ev, e->a), b = eval(ev, e->b);
	tbc_dtype t = e->a->type;
	int c; /* -1, 0, 1, or 2 for unordered */
	if (kir_type_is_float(t)) c = isnan(a.f) || isnan(b.f) ? 2 : a.f < b.f ? -1 : a.f > b.f;
	else if (kir_type_is_unsigned(t)) c = (uint64_t)a.i < (uint64_t)b.i ? -1 : (uint64_t)a.i > (uint64_t)b.i;
	else c = a.i < b.i ? -1 : a.i > b.i;
	int64_t r = 0;
	switch ((kir_cmp)e->op) {
	case KIR_EQ: r = c == 0; break;
	case KIR_NE: r = c != 0; break; /* unordered is not equal */
	case KIR_LT: r = c == -1; break;
	case KIR_LE: r = c == -1 || c == 0; break;
	case KIR_GT: r = c == 1; break;
	case KIR_GE: r = c == 1 || c == 0; break;
	}
	return (val){.i = r};
}

/* ONNX Cast semantics (docs/kernel-ir.md): through a one-element buffer of
 * the target type, exactly as the interpreter stores. */
static val cast(evaluator *ev, const kir_expr *e) {
	val a = eval(ev, e->a), r = {0};
	tbc_dtype from = e->a->type, to = e->type;
	if (to == KIR_INDEX) to = TBC_DT_I64;
	if (from == KIR_INDEX) from = TBC_DT_I64;
	uint64_t tmp = 0;
	if (kir_type_is_narrow_float(from)) {
		uint64_t bits = (uint64_t)a.i;
		a.f = tbc_load_f64(from, &bits, 0);
	}
	if (e->op == KIR_CAST_NO_SATURATE) /* integers through double, as the interpreter's Cast */
		tbc_store_f64_nosat(to, &tmp, 0, kir_type_is_float(from) ? a.f : kir_type_is_unsigned(from) ? (double)(uint64_t)a.i : (double)a.i);
	else if (kir_type_is_float(from)) tbc_store_f64(to, &tmp, 0, a.f);
	else if (kir_type_is_unsigned(from)) tbc_store_u64(to, &tmp, 0, (uint64_t)a.i);
	else tbc_store_i64(to, &tmp, 0, a.i);
	if (kir_type_is_narrow_float(to)) r.i = (int64_t)tbc_load_bits(to, &tmp, 0);
	else if (kir_type_is_float(to)) r.f = tbc_load_f64(to, &tmp, 0);
	else if (kir_type_is_unsigned(to)) r.i = (int64_t)tbc_load_u64(to, &tmp, 0);
	else r.i = tbc_load_i64(to, &tmp, 0);
	return r;
}

static val eval(evaluator *ev, const kir_expr *e) {
	val z = {0};
	if (ev->failed) return z;
	switch (e->kind) {
	case KIR_E_INT: return (val){.i = wrap(e->type, e->i)};
	case KIR_E_FLOAT:
		if (kir_type_is_narrow_float(e->type)) {
			uint64_t bits = 0;
			tbc_store_f64(e->type, &bits, 0, e->f);
			return (val){.i = (int64_t)tbc_load_bits(e->type, &bits, 0)};
		}
		return (val){.f = round_to(e->type, e->f)};
	case KIR_E_VAR:
		if (!ev->vars) return eerr(ev, "variable %s outside a kernel body", e->var->name), z;
		return ev->vars[e->var->id];
	case KIR_E_SIZE: return (val){.i = ev->sizes[e->size]};
	case KIR_E_LOCAL_ID: {
		if (ev->item < 0) return eerr(ev, "local_id outside a work-group"), z;
		int64_t at = ev->item;
		for (int d = 0; d < e->size; d++) at /= ev->k->group[d];
		return (val){.i = at % ev->k->group[e->size]};
	}
	case KIR_E_LOAD: {
		if (!ev->numel) return eerr(ev, "load of %s outside a kernel body", e->buf->name), z;
		int64_t i = index_of(ev, e->buf, e->a, "load");
		return ev->failed ? z : load(ev, e->buf, i);
	}
	case KIR_E_UNARY: return unary(ev, e);
	case KIR_E_BINARY: return binary(ev, e);
	case KIR_E_CMP: return compare(ev, e);
	case KIR_E_SELECT: {
		val c = eval(ev, e->a);
		return c.i ? eval(ev, e->b) : eval(ev, e->c);
	}
	case KIR_E_CAST: return cast(ev, e);
	}
	return z;
}

static void run_group(evaluator *ev, const kir_stmt *body);

static void run(evaluator *ev, const kir_stmt *s);

/* ---- dot2: vdpbf16ps's arithmetic (kir_dot2 in kir.h) ----------------------*/
static float f32_of_bits(uint32_t u) {
	float x;
	memcpy(&x, &u, sizeof x);
	return x;
}

/* A subnormal read as a zero of its sign (bf16 and f32 share the exponent). */
static float daz(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }

/* A bf16 operand of a dot2 (element i of b), subnormals read as zero. */
static float dot2_operand(evaluator *ev, const kir_buffer *b, int64_t i) {
	i = checked_index(ev, b, (val){.i = i}, "load");
	if (ev->failed) return 0;
	return daz(f32_of_bits((uint32_t)load(ev, b, i).i << 16));
}

/* One step of the instruction: acc + x * y, the product exact, rounded
 * once (fmaf), a subnormal result flushed to a zero of its sign. */
static float dot2_step(float acc, float x, float y) { return daz(fmaf(x, y, daz(acc))); }

static void run_dot2(evaluator *ev, const kir_dot2 *m) {
	int64_t at[8], b_at = eval(ev, m->b_at).i, ldb = eval(ev, m->ldb).i, kn = eval(ev, m->kn).i;
	for (int r = 0; r < m->mr; r++) at[r] = eval(ev, m->a_at[r]).i;
	int nc = 16 * m->nv;
	for (int64_t p = 0; 2 * p < kn && !ev->failed; p++)
		for (int r = 0; r < m->mr; r++) {
			float a0 = dot2_operand(ev, m->a, at[r] + 2 * p);
			float a1 = 2 * p + 1 < kn ? dot2_operand(ev, m->a, at[r] + 2 * p + 1) : 0.0f;
			for (int c = 0; c < nc && !ev->failed; c++) {
				float b0 = dot2_operand(ev, m->b, b_at + p * ldb + 2 * c);
				float b1 = dot2_operand(ev, m->b, b_at + p * ldb + 2 * c + 1);
				val *x = &ev->vars[m->acc[r * nc + c]->id];
				x->f = (double)dot2_step(dot2_step((float)x->f, a1, b1), a0, b0);
			}
		}
}

/* ---- tile2: tdpbf16ps's arithmetic, tdpbusd's (kir_tile2 in kir.h) --------*/
static void run_tile2(evaluator *ev, const kir_tile2 *m) {
	int64_t a_at = eval(ev, m->a_at).i, lda = eval(ev, m->lda).i, b_at = eval(ev, m->b_at).i, ldb = eval(ev, m->ldb).i;
	int rows = 16 * m->mt, cols = 16 * m->nt;
	if (kir_tile2_is_int8(m)) { /* exact int32 sums, wrapping; a signed or not as its dtype */
		for (int r = 0; r < rows && !ev->failed; r++)
			for (int c = 0; c < cols && !ev->failed; c++) {
				int64_t sum = ev->vars[m->acc[r * cols + c]->id].i;
				for (int64_t q = 0; q < m->kn && !ev->failed; q++) {
					int64_t ai = checked_index(ev, m->a, (val){.i = a_at + r * lda + q}, "load");
					int64_t bi = checked_index(ev, m->b, (val){.i = b_at + (q / 4) * ldb + 4 * c + q % 4}, "load");
					if (ev->failed) return;
					sum = wrap(TBC_DT_I32, sum + load(ev, m->a, ai).i * load(ev, m->b, bi).i);
				}
				ev->vars[m->acc[r * cols + c]->id].i = sum;
			}
		return;
	}
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < cols && !ev->failed; c++) {
			float t = 0.0f;
			for (int64_t q0 = 0; q0 < m->kn && !ev->failed; q0 += 32) {
				int64_t w = m->kn - q0 < 32 ? m->kn - q0 : 32;
				float e = 0.0f, o = 0.0f;
				for (int64_t p = 0; 2 * p < w; p++) {
					int64_t q = q0 + 2 * p, arow = a_at + r * lda + q, bpair = b_at + (q / 2) * ldb + 2 * c;
					e = daz(fmaf(dot2_operand(ev, m->a, arow), dot2_operand(ev, m->b, bpair), e));
					o = daz(fmaf(dot2_operand(ev, m->a, arow + 1), dot2_operand(ev, m->b, bpair + 1), o));
				}
				t = daz(t + daz(e + o));
			}
			val *x = &ev->vars[m->acc[r * cols + c]->id];
			x->f = (double)((float)x->f + t);
		}
}

/* A byte dot-product tile (kir_dot4 in kir.h): every load checked, the
 * sums wrapping in int32. */
static void run_dot4(evaluator *ev, const kir_dot4 *m) {
	int64_t a_at[KIR_DOT4_MAX_MR];
	for (int r = 0; r < m->mr; r++) a_at[r] = eval(ev, m->a_at[r]).i;
	int64_t b_at = eval(ev, m->b_at).i, groups = eval(ev, m->groups).i;
	int64_t bias = m->a->dtype == TBC_DT_I8 ? 128 : 0;
	for (int r = 0; r < m->mr && !ev->failed; r++)
		for (int c = 0; c < m->nc && !ev->failed; c++) {
			int64_t sum = ev->vars[m->acc[r * m->nc + c]->id].i;
			for (int64_t g = 0; g < groups && !ev->failed; g++)
				for (int64_t q = 0; q < 4; q++) {
					int64_t ai = checked_index(ev, m->a, (val){.i = a_at[r] + 4 * g + q}, "load");
					int64_t bi = checked_index(ev, m->b, (val){.i = b_at + g * m->ldb + 4 * c + q}, "load");
					if (ev->failed) return;
					sum = wrap(TBC_DT_I32, sum + (load(ev, m->a, ai).i + bias) * load(ev, m->b, bi).i);
				}
			ev->vars[m->acc[r * m->nc + c]->id].i = sum;
		}
}

/* A float multiply-add tile (kir_fma_tile in kir.h): each step one fma,
 * rounded once to the accumulators' type; every load checked. */
static void run_fma_tile(evaluator *ev, const kir_fma_tile *m) {
	int64_t a_at[KIR_FMA_TILE_MAX_MR];
	for (int r = 0; r < m->mr; r++) a_at[r] = eval(ev, m->a_at[r]).i;
	int64_t a_ks = eval(ev, m->a_ks).i, b_at = eval(ev, m->b_at).i, ldb = eval(ev, m->ldb).i;
	int64_t klo = eval(ev, m->klo).i, khi = eval(ev, m->khi).i;
	bool f32 = m->a->dtype == TBC_DT_F32;
	if (m->y && eval(ev, m->resume).i)
		for (int r = 0; r < m->mr && !ev->failed; r++) {
			int64_t y_at = eval(ev, m->y_at[r]).i;
			for (int c = 0; c < m->nc; c++) {
				int64_t yi = checked_index(ev, m->y, (val){.i = y_at + c}, "load");
				if (ev->failed) return;
				ev->vars[m->acc[r * m->nc + c]->id].f = load(ev, m->y, yi).f;
			}
		}
	for (int64_t k = klo; k < khi && !ev->failed; k++)
		for (int r = 0; r < m->mr && !ev->failed; r++) {
			int64_t ai = checked_index(ev, m->a, (val){.i = a_at[r] + k * a_ks}, "load");
			if (ev->failed) return;
			double a = load(ev, m->a, ai).f;
			for (int c = 0; c < m->nc; c++) {
				int64_t bi = checked_index(ev, m->b, (val){.i = b_at + k * ldb + c}, "load");
				if (ev->failed) return;
				double b = load(ev, m->b, bi).f;
				val *x = &ev->vars[m->acc[r * m->nc + c]->id];
				x->f = f32 ? (double)fmaf((float)a, (float)b, (float)x->f) : fma(a, b, x->f);
			}
		}
}

static void run_stmt(evaluator *ev, const kir_stmt *s) {
	switch (s->kind) {
	case KIR_S_FOR: {
		int64_t lo = eval(ev, s->lo).i, hi = eval(ev, s->hi).i;
		bool group = s->loop == KIR_LOOP_GRID && !(s->body && s->body->kind == KIR_S_FOR && s->body->loop == KIR_LOOP_GRID);
		int64_t n = hi > lo ? (hi - lo - 1) / s->step + 1 : 0;
		bool backwards = ev->reverse && s->loop != KIR_LOOP_SEQUENTIAL;
		for (int64_t t = 0; t < n && !ev->failed; t++) {
			ev->vars[s->var->id].i = lo + (backwards ? n - 1 - t : t) * s->step;
			if (group) run_group(ev, s->body);
			else run(ev, s->body);
		}
		break;
	}
	case KIR_S_STORE: {
		int64_t i = index_of(ev, s->buf, s->index, "store");
		val v = eval(ev, s->value);
		if (!ev->failed) store(ev, s->buf, i, v);
		break;
	}
	case KIR_S_SET: ev->vars[s->var->id] = eval(ev, s->value); break;
	case KIR_S_IF:
		if (eval(ev, s->cond).i) run(ev, s->body);
		else run(ev, s->orelse);
		break;
	case KIR_S_ERROR:
		if (eval(ev, s->cond).i) eerr(ev, "%s", s->message);
		break;
	case KIR_S_BARRIER: /* run_phased handles the barriers it may reach */
		eerr(ev, "work-item %d reaches a barrier the others may not", ev->item);
		break;
	case KIR_S_MMA: /* run_phased too: a warp runs it together */
		eerr(ev, "work-item %d reaches an mma the others may not", ev->item);
		break;
	case KIR_S_DOT2: run_dot2(ev, s->dot2); break;
	case KIR_S_TILE2: run_tile2(ev, s->tile2); break;
	case KIR_S_DOT4: run_dot4(ev, s->dot4); break;
	case KIR_S_FMA_TILE: run_fma_tile(ev, s->fma_tile); break;
	}
}

static void run(evaluator *ev, const kir_stmt *s) {
	for (; s && !ev->failed; s = s->next) run_stmt(ev, s);
}

/* ---- Work-groups -------------------------------------------------------------
 * A group's items run statement by statement: a statement holding no
 * barrier runs for item 0, 1, ... in turn; one holding a barrier (a loop or
 * an if around it, or the barrier itself) runs once for the group, its
 * bounds or condition the same for every item (else the items would not
 * all reach the barrier).  That is one order the device may run them in,
 * and the race checks (index_of) make sure no other order gives another
 * result. */
static bool is_collective(const kir_stmt *s) { return s->kind == KIR_S_BARRIER || s->kind == KIR_S_MMA; }

/* Whether s or a statement after it holds a barrier or an mma. */
static bool has_barrier(const kir_stmt *s) {
	for (; s; s = s->next)
		if (is_collective(s) || has_barrier(s->body) || has_barrier(s->orelse)) return true;
	return false;
}

/* Operand element at + row * ld + col of an mma, as f32 (an f16 or bf16). */
static double mma_operand(evaluator *ev, const kir_buffer *b, int64_t at, int64_t row, int64_t ld, int64_t col) {
	int64_t i = checked_index(ev, b, (val){.i = at + row * ld + col}, "load");
	if (ev->failed) return 0;
	uint64_t bits = (uint64_t)load(ev, b, i).i;
	return tbc_load_f64(b->dtype, &bits, 0);
}

/* A warp matrix multiply-accumulate (kir_mma in kir.h): each item's sums,
 * after checking that the items of each warp agree on where the operands
 * are and that those are aligned as the rules say. */
static void run_mma(evaluator *ev, const kir_mma *m) {
	const kir_kernel *k = ev->k;
	int64_t a_at = 0, b_at = 0;
	for (int64_t it = 0; it < ev->n_items && !ev->failed; it++) {
		ev->item = (int)it;
		ev->vars = ev->item_vars + it * k->n_vars;
		int64_t a = eval(ev, m->a_at).i, b = eval(ev, m->b_at).i;
		if (ev->failed) return;
		if (it % 32 == 0) a_at = a, b_at = b;
		else if (a != a_at || b != b_at) {
			eerr(ev, "work-items %" PRId64 " and %" PRId64 " of one warp disagree on an mma's operands", it - it % 32, it);
			return;
		}
		if (a % 8 || b % 8) {
			eerr(ev, "an mma's operands at elements %" PRId64 " and %" PRId64 ", not multiples of 8", a, b);
			return;
		}
		int64_t lane = it % 32, g = lane / 4, t = lane % 4;
		for (int i = 0; i < m->mi; i++)
			for (int j = 0; j < m->ni; j++)
				for (int e = 0; e < 4; e++) {
					int64_t r = 16 * i + g + 8 * (e / 2), c = 8 * j + 2 * t + e % 2;
					/* the products of f16 or bf16 values are exact in double,
					 * and so nearly is their sum: one rounding to f32 */
					double sum = ev->vars[m->acc[(i * m->ni + j) * 4 + e]->id].f;
					for (int64_t q = 0; q < 16; q++)
						sum += mma_operand(ev, m->a, a, r, m->lda, q) * mma_operand(ev, m->b, b, q, m->ldb, c);
					ev->vars[m->acc[(i * m->ni + j) * 4 + e]->id].f = (double)(float)sum;
				}
	}
}

/* The value of e, which every item must agree on. */
static int64_t uniform_value(evaluator *ev, const kir_expr *e, const char *what) {
	int64_t first = 0;
	for (int64_t it = 0; it < ev->n_items && !ev->failed; it++) {
		ev->item = (int)it;
		ev->vars = ev->item_vars + it * ev->k->n_vars;
		int64_t x = eval(ev, e).i;
		if (it == 0) first = x;
		else if (x != first) eerr(ev, "work-items 0 and %" PRId64 " disagree on %s around a barrier", it, what);
	}
	return first;
}

static void run_phased(evaluator *ev, const kir_stmt *s) {
	for (; s && !ev->failed; s = s->next) {
		if (!has_barrier(s->body) && !has_barrier(s->orelse) && !is_collective(s)) {
			for (int64_t it = 0; it < ev->n_items && !ev->failed; it++) {
				ev->item = (int)it;
				ev->vars = ev->item_vars + it * ev->k->n_vars;
				run_stmt(ev, s);
			}
			continue;
		}
		switch (s->kind) {
		case KIR_S_FOR: {
			int64_t lo = uniform_value(ev, s->lo, "a loop's bounds"), hi = uniform_value(ev, s->hi, "a loop's bounds");
			for (int64_t i = lo; i < hi && !ev->failed; i += s->step) {
				for (int64_t it = 0; it < ev->n_items; it++) ev->item_vars[it * ev->k->n_vars + s->var->id].i = i;
				run_phased(ev, s->body);
			}
			break;
		}
		case KIR_S_IF:
			if (uniform_value(ev, s->cond, "an if's condition")) run_phased(ev, s->body);
			else run_phased(ev, s->orelse);
			break;
		case KIR_S_BARRIER: ev->phase++; break;
		case KIR_S_MMA: run_mma(ev, s->mma); break;
		default: /* a parallel or vector loop around a barrier: kir_verify refuses it */
			eerr(ev, "a barrier in a statement that cannot hold one");
			break;
		}
	}
}

/* One work-group: every item starts from the group's variables (the grid
 * loops'), local memory starts unstored. */
static void run_group(evaluator *ev, const kir_stmt *body) {
	const kir_kernel *k = ev->k;
	for (int64_t it = 0; it < ev->n_items; it++) memcpy(ev->item_vars + it * k->n_vars, ev->vars, (size_t)k->n_vars * sizeof(val));
	for (int b = 0; b < k->n_locals; b++)
		for (int64_t i = 0; i < local_numel(k->locals[b]); i++)
			ev->touches[b][i] = (touch){-1, -1, -1, -1};
	val *group_vars = ev->vars;
	ev->phase++;
	run_phased(ev, body);
	ev->phase++;
	ev->vars = group_vars;
	ev->item = -1;
}

static void start_groups(evaluator *ev) {
	const kir_kernel *k = ev->k;
	ev->n_items = kir_group_items(k);
	ev->item_vars = calloc((size_t)(ev->n_items * k->n_vars) + 1, sizeof(val));
	ev->locals = calloc((size_t)k->n_locals + 1, sizeof(void *));
	ev->touches = calloc((size_t)k->n_locals + 1, sizeof(touch *));
	bool ok = ev->item_vars && ev->locals && ev->touches;
	for (int b = 0; ok && b < k->n_locals; b++) {
		size_t n = (size_t)local_numel(k->locals[b]);
		ev->locals[b] = calloc(n, 8);
		ev->touches[b] = calloc(n, sizeof(touch));
		ok = ev->locals[b] && ev->touches[b];
	}
	if (!ok) eerr(ev, "out of memory");
}

bool kir_eval(const kir_kernel *k, void *const *buffers, const int64_t *sizes, tbc_diags *d) {
	return kir_eval_with(k, buffers, sizes, NULL, d);
}

bool kir_eval_with(const kir_kernel *k, void *const *buffers, const int64_t *sizes, const kir_eval_options *o,
		   tbc_diags *d) {
	evaluator ev = {.k = k, .bufs = buffers, .sizes = sizes, .d = d, .item = -1, .reverse = o && o->reverse_parallel};
	ev.numel = calloc((size_t)k->n_buffers + 1, sizeof *ev.numel);
	ev.vars = calloc((size_t)k->n_vars + 1, sizeof *ev.vars);
	if (!ev.numel || !ev.vars) {
		eerr(&ev, "out of memory");
	} else {
		for (int b = 0; b < k->n_buffers && !ev.failed; b++) {
			int64_t n = 1;
			for (int i = 0; i < k->buffers[b]->rank; i++) {
				int64_t dim = eval(&ev, k->buffers[b]->dims[i]).i;
				if (dim < 0 || (dim && n > INT64_MAX / dim)) eerr(&ev, "buffer %s has a bad size", k->buffers[b]->name);
				n *= dim;
			}
			ev.numel[b] = n;
		}
		if (kir_kernel_is_grouped(k) && !ev.failed) start_groups(&ev);
		if (!ev.failed) run(&ev, k->body);
	}
	for (int b = 0; ev.locals && b < k->n_locals; b++) free(ev.locals[b]);
	for (int b = 0; ev.touches && b < k->n_locals; b++) free(ev.touches[b]);
	free(ev.locals);
	free(ev.touches);
	free(ev.item_vars);
	free(ev.numel);
	free(ev.vars);
	return !ev.failed;
}

bool kir_eval_index(const kir_kernel *k, const kir_expr *e, const int64_t *sizes, int64_t *out, tbc_diags *d) {
	evaluator ev = {.k = k, .sizes = sizes, .d = d, .item = -1};
	*out = eval(&ev, e).i;
	return !ev.failed;
}
