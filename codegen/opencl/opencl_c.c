/* Kernel IR -> OpenCL C 1.2 (docs/opencl.md).
 *
 * Values keep the evaluator's representation (codegen/kir/kir_eval.c): integers
 * in their C type and wrapped to their width after every operation, bool as
 * int 0/1, f32 and f64 as float and double, narrow floats (f16, bf16,
 * float8, float4) as their bits, decoded to the preamble's tbc_wide (double,
 * or float on a device without fp64) for a cast and encoded back through
 * the preamble's functions, which are ir/dtype.c's.  A kernel that computes
 * float64 is guarded by #error where the device has no fp64.  So a
 * kernel computes what the evaluator and the CPU target compute, up to the
 * device's math functions.
 *
 * Mapping: a grouped kernel (the parallel form) is an NDRange of its
 * work-groups, each grid loop a group-stride loop over get_group_id(d), its
 * local buffers __local arrays and its barriers barrier(); otherwise a body
 * that is one top-level parallel loop (after statements that store nothing)
 * becomes a grid-stride loop over the work-items, and any other body runs
 * on one work-item. */
#include "codegen/opencl/opencl_c.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/dtype.h"
#include "opencl_preamble.h" /* generated from preamble.cl: TBC_OCL_PREAMBLE */

const char *tbc_ocl_preamble(void) { return TBC_OCL_PREAMBLE; }

typedef struct printer {
	const kir_kernel *k;
	FILE *f;
	tbc_diags *d;
	bool failed;
	bool f64;    /* the kernel computes float64 */
	bool demote; /* print float64 values as float (a device without fp64) */
	const tbc_dev_plan *plan; /* how loops map to work-items, the checks' numbers */
} printer;

__attribute__((format(printf, 2, 3))) static void fail(printer *p, const char *fmt, ...) {
	if (p->failed) return;
	p->failed = true;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	tbc_diags_add(p->d, TBC_ERR_UNSUPPORTED, NULL, NULL, NULL, NULL, "kernel %s: %s", p->k->name, msg);
}

static int bits_of(tbc_dtype t) { return t == KIR_INDEX ? 64 : tbc_dtype_bits(t); }

/* The type a value of type t is computed in: float64 as float when
 * demoting. */
static tbc_dtype ty(const printer *p, tbc_dtype t) { return p->demote && t == TBC_DT_F64 ? TBC_DT_F32 : t; }

/* The C type a value of type t is held in. */
static const char *ctype(tbc_dtype t) {
	if (t == KIR_INDEX) return "long";
	switch (t) {
	case TBC_DT_BOOL: return "int";
	case TBC_DT_F32: return "float";
	case TBC_DT_F64: return "double";
	case TBC_DT_I8: case TBC_DT_I4: case TBC_DT_I2: return "char";
	case TBC_DT_U8: case TBC_DT_U4: case TBC_DT_U2: return "uchar";
	case TBC_DT_I16: return "short";
	case TBC_DT_U16: return "ushort";
	case TBC_DT_I32: return "int";
	case TBC_DT_U32: return "uint";
	case TBC_DT_I64: return "long";
	case TBC_DT_U64: return "ulong";
	default: break;
	}
	if (kir_type_is_narrow_float(t)) return tbc_dtype_size(t) == 2 ? "ushort" : "uchar";
	return NULL;
}

/* The element type of a buffer of dtype t in memory. */
static const char *mtype(tbc_dtype t) { return t == TBC_DT_BOOL ? "uchar" : ctype(t); }

/* The preamble's number for a narrow format (its tbc_format). */
static int narrow_id(tbc_dtype t) { return (int)t; }

static void var_name(printer *p, const kir_var *v) {
	fputc('v', p->f);
	for (const char *s = v->name; *s; s++) {
		char c = *s;
		fputc((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c : '_', p->f);
	}
	fprintf(p->f, "_%d", v->id);
}

static void expr(printer *p, const kir_expr *e);

/* The integer result r (a C expression of a wider type) wrapped to type t. */
static void wrap_open(printer *p, tbc_dtype t) {
	switch (t) {
	case TBC_DT_I4: case TBC_DT_I2: fprintf(p->f, "(char)tbc_wrap_s(("); return;
	case TBC_DT_U4: case TBC_DT_U2: fprintf(p->f, "(uchar)tbc_wrap_u(("); return;
	default: fprintf(p->f, "((%s)(", ctype(t)); return;
	}
}
static void wrap_close(printer *p, tbc_dtype t) {
	if (t == TBC_DT_I4 || t == TBC_DT_U4) fprintf(p->f, "), 4)");
	else if (t == TBC_DT_I2 || t == TBC_DT_U2) fprintf(p->f, "), 2)");
	else fprintf(p->f, "))");
}

static void float_const(printer *p, tbc_dtype t, double v) {
	if (kir_type_is_narrow_float(t)) {
		uint64_t bits = 0;
		tbc_store_f64(t, &bits, 0, v);
		fprintf(p->f, "((%s)0x%" PRIx64 ")", ctype(t), tbc_load_bits(t, &bits, 0));
		return;
	}
	bool f32 = t == TBC_DT_F32;
	if (f32) v = (double)(float)v;
	if (isnan(v) && f32) fprintf(p->f, "as_float(0x%xu)", signbit(v) ? 0xffc00000u : 0x7fc00000u);
	else if (isnan(v)) fprintf(p->f, "as_double(0x%sUL)", signbit(v) ? "fff8000000000000" : "7ff8000000000000");
	else if (isinf(v)) fprintf(p->f, "((%s)(%sINFINITY))", ctype(t), v < 0 ? "-" : "");
	else if (f32) fprintf(p->f, "(%af)", v);
	else fprintf(p->f, "(%a)", v);
}

static void int_const(printer *p, tbc_dtype t, int64_t v) {
	if (t == TBC_DT_BOOL) {
		fprintf(p->f, "%d", v != 0);
	} else if (kir_type_is_unsigned(t)) {
		uint64_t u = bits_of(t) >= 64 ? (uint64_t)v : (uint64_t)v & (((uint64_t)1 << bits_of(t)) - 1);
		fprintf(p->f, "((%s)%" PRIu64 "UL)", ctype(t), u);
	} else if (t == KIR_INDEX) { /* index math: plain long literals */
		fprintf(p->f, v < 0 ? "(%" PRId64 "L)" : "%" PRId64 "L", v);
	} else if (v == INT64_MIN) {
		fprintf(p->f, "((%s)(-9223372036854775807L - 1))", ctype(t));
	} else {
		fprintf(p->f, "((%s)%" PRId64 "L)", ctype(t), v);
	}
}

static void load(printer *p, const kir_expr *e) {
	tbc_dtype t = ty(p, e->buf->dtype);
	fprintf(p->f, "((%s)", ctype(t));
	if (t == TBC_DT_BOOL) fputc('(', p->f);
	fprintf(p->f, "%c%d[", e->buf->space == KIR_MEM_LOCAL ? 'l' : 'b', e->buf->id);
	expr(p, e->a);
	fputc(']', p->f);
	if (t == TBC_DT_BOOL) fprintf(p->f, " != 0)");
	else if (t == TBC_DT_U4 || t == TBC_DT_F4E2M1) fprintf(p->f, " & 0xf");
	else if (t == TBC_DT_U2) fprintf(p->f, " & 0x3");
	fputc(')', p->f);
}

static const char *float_unop(kir_unop op) {
	static const char *const names[KIR_UNOP_COUNT] = {
		[KIR_ABS] = "fabs",   [KIR_SQRT] = "sqrt",   [KIR_EXP] = "exp",     [KIR_LOG] = "log",
		[KIR_SIN] = "sin",    [KIR_COS] = "cos",     [KIR_TAN] = "tan",     [KIR_ASIN] = "asin",
		[KIR_ACOS] = "acos",  [KIR_ATAN] = "atan",   [KIR_SINH] = "sinh",   [KIR_COSH] = "cosh",
		[KIR_TANH] = "tanh",  [KIR_ASINH] = "asinh", [KIR_ACOSH] = "acosh", [KIR_ATANH] = "atanh",
		[KIR_ERF] = "erf",    [KIR_FLOOR] = "floor", [KIR_CEIL] = "ceil",   [KIR_ROUND_EVEN] = "rint",
		[KIR_TRUNC] = "trunc", [KIR_EXPM1] = "expm1", [KIR_LOG1P] = "log1p",
	};
	return names[op];
}

static void unary(printer *p, const kir_expr *e) {
	tbc_dtype t = ty(p, e->a->type);
	kir_unop op = (kir_unop)e->op;
	if (op == KIR_ISNAN || op == KIR_ISINF) {
		if (!kir_type_is_float(t) || kir_type_is_narrow_float(t)) return fail(p, "%s of %s", kir_unop_name(op), kir_type_name(t));
		fprintf(p->f, "(%s(", op == KIR_ISNAN ? "isnan" : "isinf");
		expr(p, e->a);
		fprintf(p->f, ") != 0)");
		return;
	}
	if (kir_type_is_float(t)) {
		if (kir_type_is_narrow_float(t)) return fail(p, "%s of %s (narrow floats are cast first)", kir_unop_name(op), kir_type_name(t));
		bool f32 = t == TBC_DT_F32;
		if (op == KIR_NEG) fprintf(p->f, "(-");
		else if (op == KIR_SIGN) fprintf(p->f, "%s(", f32 ? "tbc_signf" : "tbc_sign");
		else if (float_unop(op)) fprintf(p->f, "%s(", float_unop(op));
		else return fail(p, "%s of %s", kir_unop_name(op), kir_type_name(t));
		expr(p, e->a);
		fputc(')', p->f);
		return;
	}
	wrap_open(p, t);
	switch (op) {
	case KIR_NEG: fprintf(p->f, "0UL - (ulong)("); break;
	case KIR_ABS:
		if (kir_type_is_unsigned(t)) fprintf(p->f, "(");
		else fprintf(p->f, "tbc_abs_i((long)(");
		break;
	case KIR_NOT: fprintf(p->f, t == TBC_DT_BOOL ? "!(" : "~("); break;
	case KIR_SIGN: fprintf(p->f, kir_type_is_unsigned(t) ? "0 != (" : "tbc_sign_i((long)("); break;
	default: return fail(p, "%s of %s", kir_unop_name(op), kir_type_name(t));
	}
	expr(p, e->a);
	fputc(')', p->f);
	if ((op == KIR_ABS && !kir_type_is_unsigned(t)) || (op == KIR_SIGN && !kir_type_is_unsigned(t))) fputc(')', p->f);
	wrap_close(p, t);
}

static void binary(printer *p, const kir_expr *e) {
	tbc_dtype t = ty(p, e->a->type);
	kir_binop op = (kir_binop)e->op;
	const kir_expr *a = e->a, *b = e->b;
	if (kir_type_is_float(t)) {
		if (kir_type_is_narrow_float(t)) return fail(p, "%s of %s (narrow floats are cast first)", kir_binop_name(op), kir_type_name(t));
		bool f32 = t == TBC_DT_F32;
		const char *infix = op == KIR_ADD ? "+" : op == KIR_SUB ? "-" : op == KIR_MUL ? "*" : op == KIR_DIV ? "/" : NULL;
		if (infix) {
			fputc('(', p->f);
			expr(p, a);
			fprintf(p->f, " %s ", infix);
			expr(p, b);
			fputc(')', p->f);
			return;
		}
		const char *fn = op == KIR_REM ? "fmod" : op == KIR_POW ? "pow" : op == KIR_ATAN2 ? "atan2"
			: op == KIR_MIN ? (f32 ? "tbc_fminf" : "tbc_fmin") : op == KIR_MAX ? (f32 ? "tbc_fmaxf" : "tbc_fmax") : NULL;
		if (fn) {
			fprintf(p->f, "%s(", fn);
			expr(p, a);
			fprintf(p->f, ", ");
			expr(p, b);
			fputc(')', p->f);
		} else { /* floor division and modulo are index math (kir_verify) */
			return fail(p, "%s of floats", kir_binop_name(op));
		}
		return;
	}
	bool u = kir_type_is_unsigned(t);
	int bits = bits_of(t);
	if (t == KIR_INDEX && (op == KIR_ADD || op == KIR_SUB || op == KIR_MUL)) {
		/* index math stays in range in a kernel that verifies: plain C */
		fputc('(', p->f);
		expr(p, a);
		fprintf(p->f, op == KIR_ADD ? " + " : op == KIR_SUB ? " - " : " * ");
		expr(p, b);
		fputc(')', p->f);
		return;
	}
	wrap_open(p, t);
	const char *wide = u ? "ulong" : "long";
	switch (op) {
	case KIR_ADD: case KIR_SUB: case KIR_MUL: case KIR_AND: case KIR_OR: case KIR_XOR: {
		const char *infix = op == KIR_ADD ? "+" : op == KIR_SUB ? "-" : op == KIR_MUL ? "*" : op == KIR_AND ? "&"
			: op == KIR_OR ? "|" : "^";
		/* in ulong, where overflow wraps */
		fprintf(p->f, "(ulong)(");
		expr(p, a);
		fprintf(p->f, ") %s (ulong)(", infix);
		expr(p, b);
		fputc(')', p->f);
		break;
	}
	case KIR_DIV: case KIR_REM: case KIR_FLOORDIV: case KIR_FLOORMOD: case KIR_POW: case KIR_MIN: case KIR_MAX:
	case KIR_SHL: case KIR_SHR: {
		const char *fn = NULL;
		switch (op) {
		case KIR_DIV: fn = u ? "tbc_udiv" : "tbc_sdiv"; break;
		case KIR_REM: fn = u ? "tbc_urem" : "tbc_srem"; break;
		case KIR_FLOORDIV: fn = "tbc_floordiv"; break;
		case KIR_FLOORMOD: fn = "tbc_floormod"; break;
		case KIR_POW: fn = u ? "tbc_upow" : "tbc_ipow"; break;
		case KIR_MIN: fn = "min"; break;
		case KIR_MAX: fn = "max"; break;
		case KIR_SHL: fn = "tbc_shl"; break;
		default: fn = "tbc_shr"; break;
		}
		bool shift = op == KIR_SHL || op == KIR_SHR;
		if (shift) wide = "long";
		fprintf(p->f, "%s((%s)(", fn, wide);
		expr(p, a);
		fprintf(p->f, "), (%s)(", wide);
		expr(p, b);
		fprintf(p->f, ")");
		if (shift) fprintf(p->f, ", %d, %d", u, bits);
		fputc(')', p->f);
		break;
	}
	default: return fail(p, "%s of %s", kir_binop_name(op), kir_type_name(t));
	}
	wrap_close(p, t);
}

static void compare(printer *p, const kir_expr *e) {
	static const char *const ops[] = {[KIR_EQ] = "==", [KIR_NE] = "!=", [KIR_LT] = "<",
					  [KIR_LE] = "<=", [KIR_GT] = ">",  [KIR_GE] = ">="};
	if (kir_type_is_narrow_float(e->a->type)) return fail(p, "comparison of %s", kir_type_name(e->a->type));
	fputc('(', p->f);
	expr(p, e->a);
	fprintf(p->f, " %s ", ops[e->op]);
	expr(p, e->b);
	fputc(')', p->f);
}

/* A value as the preamble's tbc_wide (a narrow float decoded). */
static void as_wide(printer *p, const kir_expr *a) {
	tbc_dtype t = a->type;
	if (t == TBC_DT_BF16) fprintf(p->f, "tbc_from_bf16(");
	else if (t == TBC_DT_F8E8M0) fprintf(p->f, "tbc_from_e8m0(");
	else if (kir_type_is_narrow_float(t)) fprintf(p->f, "tbc_decode(%d, ", narrow_id(t));
	else fprintf(p->f, "(tbc_wide)(");
	expr(p, a);
	fputc(')', p->f);
}

/* ONNX Cast semantics, as the evaluator: through the target type's store. */
static void cast(printer *p, const kir_expr *e) {
	tbc_dtype from = ty(p, e->a->type), to = ty(p, e->type);
	bool saturate = e->op != KIR_CAST_NO_SATURATE;
	if (kir_type_is_narrow_float(to)) {
		if (to == TBC_DT_BF16) fprintf(p->f, "tbc_to_bf16(");
		else if (to == TBC_DT_F8E8M0) fprintf(p->f, "tbc_to_e8m0(");
		else fprintf(p->f, "((%s)tbc_encode(%d, ", ctype(to), narrow_id(to));
		as_wide(p, e->a);
		if (to == TBC_DT_F8E8M0) fprintf(p->f, ", %d)", saturate);
		/* As ir/dtype.c stores: float16 never saturates, float4e2m1 always does. */
		else if (to != TBC_DT_BF16) fprintf(p->f, ", %d))", to == TBC_DT_F16 ? 0 : saturate || to == TBC_DT_F4E2M1);
		else fputc(')', p->f);
		return;
	}
	if (kir_type_is_float(to)) { /* f32, f64 */
		fprintf(p->f, "((%s)", ctype(to));
		if (kir_type_is_narrow_float(from) || (e->op == KIR_CAST_NO_SATURATE && !kir_type_is_float(from))) as_wide(p, e->a);
		else expr(p, e->a);
		fputc(')', p->f);
		return;
	}
	if (to == TBC_DT_BOOL) { /* NaN is true */
		fprintf(p->f, "(!(");
		if (kir_type_is_narrow_float(from)) as_wide(p, e->a);
		else expr(p, e->a);
		fprintf(p->f, " == 0))");
		return;
	}
	/* to an integer */
	wrap_open(p, to);
	if (kir_type_is_float(from) || (e->op == KIR_CAST_NO_SATURATE)) {
		fprintf(p->f, to == TBC_DT_U64 ? "tbc_f2u(" : "tbc_f2i(trunc(");
		as_wide(p, e->a);
		fprintf(p->f, to == TBC_DT_U64 ? ")" : "))");
	} else {
		fprintf(p->f, "(%s)(", kir_type_is_unsigned(from) ? "ulong" : "long");
		expr(p, e->a);
		fputc(')', p->f);
	}
	wrap_close(p, to);
}

static void expr(printer *p, const kir_expr *e) {
	if (p->failed) return;
	p->f64 |= e->type == TBC_DT_F64;
	switch (e->kind) {
	case KIR_E_INT: int_const(p, e->type, e->i); return;
	case KIR_E_FLOAT: float_const(p, ty(p, e->type), e->f); return;
	case KIR_E_VAR: var_name(p, e->var); return;
	case KIR_E_SIZE: fprintf(p->f, "s%d", e->size); return;
	case KIR_E_LOAD: load(p, e); return;
	case KIR_E_UNARY: unary(p, e); return;
	case KIR_E_BINARY: binary(p, e); return;
	case KIR_E_CMP: compare(p, e); return;
	case KIR_E_SELECT:
		fputc('(', p->f);
		expr(p, e->a);
		fprintf(p->f, " ? ");
		expr(p, e->b);
		fprintf(p->f, " : ");
		expr(p, e->c);
		fputc(')', p->f);
		return;
	case KIR_E_CAST: cast(p, e); return;
	case KIR_E_LOCAL_ID: fprintf(p->f, "((long)get_local_id(%d))", e->size); return;
	}
}

static void indent(printer *p, int depth) {
	for (int i = 0; i < depth; i++) fputc('\t', p->f);
}

static void store_value(printer *p, const kir_stmt *s) {
	tbc_dtype t = ty(p, s->buf->dtype);
	fprintf(p->f, "%c%d[", s->buf->space == KIR_MEM_LOCAL ? 'l' : 'b', s->buf->id);
	expr(p, s->index);
	fprintf(p->f, "] = ");
	if (t == TBC_DT_BOOL) fprintf(p->f, "(uchar)(");
	else if (t == TBC_DT_F4E2M1) fprintf(p->f, "(uchar)(0xf & ");
	else fprintf(p->f, "(%s)(", mtype(t));
	expr(p, s->value);
	fprintf(p->f, t == TBC_DT_BOOL ? " != 0);\n" : ");\n");
}

static void stmts(printer *p, const kir_stmt *s, int depth) {
	for (; s && !p->failed; s = s->next) {
		indent(p, depth);
		switch (s->kind) {
		case KIR_S_FOR: {
			/* the grid loop of dim g: a group-stride loop, so any number of
			 * groups is correct and the host may launch fewer */
			int g = tbc_dev_plan_dim(p->plan, s);
			bool grid = g >= 0 && p->plan->shape == TBC_DEV_GRID;
			if (grid) g = -1;
			fprintf(p->f, "for (");
			var_name(p, s->var);
			fprintf(p->f, " = ");
			expr(p, s->lo);
			if (grid) fprintf(p->f, " + (long)get_global_id(0) * %" PRId64, s->step);
			if (g >= 0) fprintf(p->f, " + (long)get_group_id(%d) * %" PRId64, g, s->step);
			fprintf(p->f, "; ");
			var_name(p, s->var);
			fprintf(p->f, " < ");
			expr(p, s->hi);
			fprintf(p->f, "; ");
			var_name(p, s->var);
			if (grid) fprintf(p->f, " += (long)get_global_size(0) * %" PRId64 ") {\n", s->step);
			else if (g >= 0) fprintf(p->f, " += (long)get_num_groups(%d) * %" PRId64 ") {\n", g, s->step);
			else fprintf(p->f, " += %" PRId64 ") {\n", s->step);
			stmts(p, s->body, depth + 1);
			indent(p, depth);
			fprintf(p->f, "}\n");
			break;
		}
		case KIR_S_STORE:
			store_value(p, s);
			break;
		case KIR_S_SET:
			var_name(p, s->var);
			fprintf(p->f, " = ");
			expr(p, s->value);
			fprintf(p->f, ";\n");
			break;
		case KIR_S_IF:
			fprintf(p->f, "if (");
			expr(p, s->cond);
			fprintf(p->f, ") {\n");
			stmts(p, s->body, depth + 1);
			indent(p, depth);
			if (s->orelse) {
				fprintf(p->f, "} else {\n");
				stmts(p, s->orelse, depth + 1);
				indent(p, depth);
			}
			fprintf(p->f, "}\n");
			break;
		case KIR_S_ERROR: {
			int code = tbc_dev_plan_error(p->plan, s);
			fprintf(p->f, "if (");
			expr(p, s->cond);
			fprintf(p->f, ") { tbc_fail(status, %d); return; }\n", code);
			break;
		}
		case KIR_S_BARRIER: fprintf(p->f, "barrier(CLK_LOCAL_MEM_FENCE);\n"); break;
		case KIR_S_MMA: /* OpenCL's description declares none (kir_fits_target) */
		case KIR_S_DOT2:
		case KIR_S_TILE2:
			fail(p, "a warp matrix multiply-accumulate (mma) or bf16 pair dot product (dot2, tile2), which OpenCL C has not");
			break;
		case KIR_S_DOT4: /* OpenCL's description declares none (kir_fits_target) */
			fail(p, "a byte dot product (dot4), which OpenCL C has not");
			break;
		case KIR_S_FMA_TILE: /* nor this: devices' lowering keeps the scalar GEMM */
			fail(p, "a multiply-add tile (fma), which OpenCL C has not");
			break;
		}
	}
}

/* The kernel's body (its locals, variables and statements) into *out
 * (malloc'd). */
static bool print_body(printer *p, char **out) {
	const kir_kernel *k = p->k;
	size_t size = 0;
	*out = NULL;
	p->f = open_memstream(out, &size);
	if (!p->f) {
		fail(p, "out of memory");
		return false;
	}
	for (int b = 0; b < k->n_locals; b++) { /* OpenCL C 1.2: __local variables at kernel scope */
		const kir_buffer *lb = k->locals[b];
		int64_t n = 1;
		for (int d = 0; d < lb->rank; d++) n *= lb->dims[d]->i;
		p->f64 |= lb->dtype == TBC_DT_F64;
		fprintf(p->f, "\t__local %s l%d[%" PRId64 "]; /* %s */\n", mtype(ty(p, lb->dtype)), b, n, lb->name);
	}
	for (int v = 0; v < k->n_vars; v++) {
		const kir_var *var = k->vars[v];
		const char *ct = ctype(ty(p, var->type));
		p->f64 |= var->type == TBC_DT_F64;
		if (!ct) fail(p, "variable %s of type %s", var->name, kir_type_name(var->type));
		fprintf(p->f, "\t%s ", ct ? ct : "void");
		var_name(p, var);
		fprintf(p->f, ";\n");
	}
	stmts(p, k->body, 1);
	if (fclose(p->f) != 0) fail(p, "out of memory");
	p->f = NULL;
	return !p->failed;
}

/* A kernel whose buffers hold no float64 but that computes in float64 (the
 * sums and intermediate values lowering keeps in double, as the
 * interpreter) is printed twice: as written where the device has fp64, and
 * with those values in float where it has not (docs/opencl.md, "Devices
 * without fp64").  A float64 buffer needs fp64: its kernel is an #error
 * there, which the build log shows with the kernel's name. */
bool tbc_ocl_print_planned(const kir_kernel *k, const char *fn_name, const tbc_dev_plan *plan, char **out_source,
			   tbc_diags *d) {
	*out_source = NULL;
	printer pr = {.k = k, .d = d, .plan = plan};
	printer *p = &pr;
	bool f64_buffers = false;
	for (int b = 0; b < k->n_buffers; b++) {
		const kir_buffer *kb = k->buffers[b];
		if (!mtype(kb->dtype)) fail(p, "buffer %s of type %s", kb->name, kir_type_name(kb->dtype));
		f64_buffers |= kb->dtype == TBC_DT_F64;
	}
	char *body = NULL, *demoted = NULL, *text = NULL;
	if (!p->failed && print_body(p, &body) && p->f64 && !f64_buffers) {
		p->demote = true;
		print_body(p, &demoted);
	}
	size_t size = 0;
	FILE *f = p->failed ? NULL : open_memstream(&text, &size);
	if (f) {
		if (f64_buffers)
			fprintf(f, "#ifndef TBC_HAS_FP64\n#error \"kernel %s computes float64, and this OpenCL device has no "
				   "cl_khr_fp64\"\n#else\n", fn_name);
		fprintf(f, "/* %s */\n__kernel ", k->name);
		if (plan->shape == TBC_DEV_GROUPS)
			fprintf(f, "__attribute__((reqd_work_group_size(%" PRId64 ", %" PRId64 ", %" PRId64 "))) ",
				k->group[0], k->group[1], k->group[2]);
		fprintf(f, "void %s(", fn_name);
		for (int b = 0; b < k->n_buffers; b++) {
			const kir_buffer *kb = k->buffers[b];
			bool ro = kb->role == KIR_BUF_INPUT || kb->role == KIR_BUF_CONST;
			fprintf(f, "%s__global %s%s *b%d /* %s */", b ? ", " : "", ro ? "const " : "", mtype(kb->dtype), b,
				kb->name);
		}
		for (int s = 0; s < k->n_sizes; s++) fprintf(f, "%slong s%d /* %s */", k->n_buffers + s ? ", " : "", s, k->size_names[s]);
		if (plan->can_fail) fprintf(f, "%s__global int *status", k->n_buffers + k->n_sizes ? ", " : "");
		if (!k->n_buffers && !k->n_sizes && !plan->can_fail) fprintf(f, "void");
		fprintf(f, ") {\n");
		if (plan->shape == TBC_DEV_SINGLE) fprintf(f, "\tif (get_global_id(0) != 0) return;\n");
		if (demoted) fprintf(f, "#ifdef TBC_HAS_FP64\n%s#else /* float64 values as float */\n%s#endif\n", body, demoted);
		else fputs(body, f);
		fprintf(f, "}\n");
		if (f64_buffers) fprintf(f, "#endif\n");
	}
	bool ok = f && fclose(f) == 0;
	free(body);
	free(demoted);
	if (!ok) {
		free(text);
		if (!p->failed) fail(p, "out of memory");
		return false;
	}
	*out_source = text;
	return true;
}

bool tbc_ocl_print_kernel(const kir_kernel *k, const char *fn_name, tbc_ocl_kernel *out, tbc_diags *d) {
	memset(out, 0, sizeof *out);
	if (!tbc_dev_plan_make(k, &out->plan, d)) return false;
	if (tbc_ocl_print_planned(k, fn_name, &out->plan, &out->source, d)) return true;
	tbc_dev_plan_free(&out->plan);
	return false;
}

void tbc_ocl_kernel_free(tbc_ocl_kernel *k) {
	free(k->source);
	tbc_dev_plan_free(&k->plan);
	memset(k, 0, sizeof *k);
}
