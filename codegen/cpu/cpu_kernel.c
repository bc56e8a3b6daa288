/* Kernel IR -> LLVM IR.
 *
 * A kernel becomes an internal function over its buffers and sizes.  The
 * outermost parallel loop is outlined into a function of (closure, begin,
 * end) called through the host's parallel_for; innermost loops carry
 * llvm.loop metadata asking for vectorization, and LLVM's loop vectorizer
 * does the rest.  Every scalar operation computes what the evaluator
 * (codegen/kir/kir_eval.c, codegen/kir/kir_sem.h) computes, including its defined
 * results for division by zero, oversized shifts and NaN in min/max. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/DebugInfo.h>
#include <llvm-c/IRReader.h>

#include "codegen/cpu/cpu.h"

#define PAR_GRAIN_WORK 16384 /* elements of work a parallel chunk should hold at least */

bool cpu_fail(cpu_cx *c, tbc_code code, const char *fmt, ...) {
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (!c->failed) tbc_diags_add(c->d, code, NULL, NULL, NULL, NULL, "cpu backend: %s", msg);
	c->failed = true;
	return false;
}

LLVMTypeRef cpu_type(cpu_cx *c, tbc_dtype t) {
	switch ((int)t) {
	case KIR_INDEX:
	case TBC_DT_I64:
	case TBC_DT_U64: return c->i64;
	case TBC_DT_I32:
	case TBC_DT_U32: return c->i32;
	case TBC_DT_I16:
	case TBC_DT_U16: return c->i16;
	case TBC_DT_I8:
	case TBC_DT_U8: return c->i8;
	case TBC_DT_BOOL: return c->i1;
	case TBC_DT_F32: return c->f32;
	case TBC_DT_F64: return c->f64;
	/* Narrow floats are their bits (codegen/cpu/cpu_narrow.c); sub-byte
	 * integers compute in their own width (LLVM wraps i4 as kernel IR does)
	 * and are one per byte in memory. */
	case TBC_DT_F16:
	case TBC_DT_BF16: return c->i16;
	case TBC_DT_F8E4M3FN:
	case TBC_DT_F8E4M3FNUZ:
	case TBC_DT_F8E5M2:
	case TBC_DT_F8E5M2FNUZ:
	case TBC_DT_F8E8M0:
	case TBC_DT_F4E2M1: return c->i8;
	case TBC_DT_I4:
	case TBC_DT_U4: return LLVMIntTypeInContext(c->ctx, 4);
	case TBC_DT_I2:
	case TBC_DT_U2: return LLVMIntTypeInContext(c->ctx, 2);
	default:
		cpu_fail(c, TBC_ERR_UNSUPPORTED, "%s has no CPU code generation yet", tbc_dtype_name(t));
		return NULL;
	}
}

static bool is_sub_byte_int(tbc_dtype t) {
	return t == TBC_DT_I4 || t == TBC_DT_U4 || t == TBC_DT_I2 || t == TBC_DT_U2;
}

/* The type a value of t has in memory (bool and sub-byte integers are a
 * byte each). */
static LLVMTypeRef mem_type(cpu_cx *c, tbc_dtype t) {
	return t == TBC_DT_BOOL || is_sub_byte_int(t) ? c->i8 : cpu_type(c, t);
}

/* Floats the backend computes with; narrow floats are bits. */
static bool is_float(tbc_dtype t) { return t != KIR_INDEX && tbc_dtype_is_float(t) && !kir_type_is_narrow_float(t); }
static bool is_unsigned(tbc_dtype t) { return t != KIR_INDEX && (tbc_dtype_is_unsigned(t) || t == TBC_DT_BOOL); }
static int bits_of(tbc_dtype t) { return t == KIR_INDEX ? 64 : tbc_dtype_bits(t); }

/* ---- Per-function state --------------------------------------------------- */
typedef struct memo_entry {
	const kir_expr *e;
	LLVMValueRef v;
} memo_entry;

typedef struct fn_cx {
	cpu_cx *c;
	const kir_kernel *k;
	int index;
	LLVMValueRef fn, host;
	LLVMValueRef status; /* i32 *: the run's error status; NULL when the kernel cannot fail */
	LLVMValueRef *bufs, *sizes, *vars;
	LLVMTypeRef closure_t;
	bool outlined; /* inside an outlined parallel body */
	/* The access group (a distinct empty node) of every buffer load and
	 * store inside an innermost parallel or vector loop, and whether the
	 * builder is inside one: such loops carry llvm.loop.parallel_accesses,
	 * so LLVM vectorizes them without run-time alias checks (an in-place
	 * elementwise kernel would fail those checks and stay scalar). */
	LLVMMetadataRef group;
	bool in_parallel;
	int n_outlined;
	memo_entry *memo;
	size_t memo_cap, memo_n;
} fn_cx;

static void memo_clear(fn_cx *f) {
	if (f->memo_n) memset(f->memo, 0, f->memo_cap * sizeof *f->memo);
	f->memo_n = 0;
}

static size_t memo_slot(const fn_cx *f, const kir_expr *e) {
	size_t h = (size_t)(uintptr_t)e;
	h ^= h >> 17;
	h *= 0x9E3779B97F4A7C15ull;
	return h & (f->memo_cap - 1);
}

static LLVMValueRef memo_get(const fn_cx *f, const kir_expr *e) {
	if (!f->memo_cap) return NULL;
	for (size_t i = memo_slot(f, e);; i = (i + 1) & (f->memo_cap - 1)) {
		if (!f->memo[i].e) return NULL;
		if (f->memo[i].e == e) return f->memo[i].v;
	}
}

static void memo_put(fn_cx *f, const kir_expr *e, LLVMValueRef v) {
	if ((f->memo_n + 1) * 2 > f->memo_cap) {
		size_t cap = f->memo_cap ? f->memo_cap * 2 : 256;
		memo_entry *old = f->memo;
		size_t old_cap = f->memo_cap;
		f->memo = calloc(cap, sizeof *f->memo);
		if (!f->memo) {
			f->memo = old;
			return;
		}
		f->memo_cap = cap;
		f->memo_n = 0;
		for (size_t i = 0; i < old_cap; i++)
			if (old[i].e) memo_put(f, old[i].e, old[i].v);
		free(old);
	}
	size_t i = memo_slot(f, e);
	while (f->memo[i].e) i = (i + 1) & (f->memo_cap - 1);
	f->memo[i] = (memo_entry){e, v};
	f->memo_n++;
}

/* ---- Calls -----------------------------------------------------------------*/
static LLVMValueRef call_intrinsic(fn_cx *f, const char *name, LLVMTypeRef *types, unsigned n_types,
				   LLVMValueRef *args, unsigned n_args) {
	cpu_cx *c = f->c;
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, types, n_types);
	LLVMTypeRef ty = LLVMIntrinsicGetType(c->ctx, id, types, n_types);
	return LLVMBuildCall2(c->b, ty, fn, args, n_args, "");
}

static LLVMValueRef call_intrinsic1(fn_cx *f, const char *name, LLVMValueRef x) {
	LLVMTypeRef t = LLVMTypeOf(x);
	return call_intrinsic(f, name, &t, 1, &x, 1);
}

static LLVMValueRef call_intrinsic2(fn_cx *f, const char *name, LLVMValueRef x, LLVMValueRef y) {
	LLVMTypeRef t = LLVMTypeOf(x);
	LLVMValueRef args[2] = {x, y};
	return call_intrinsic(f, name, &t, 1, args, 2);
}

/* A libm function of one or two float arguments (sinf / sin, ...). */
static LLVMValueRef call_libm(fn_cx *f, const char *base, LLVMValueRef x, LLVMValueRef y) {
	cpu_cx *c = f->c;
	LLVMTypeRef t = LLVMTypeOf(x);
	char name[32];
	snprintf(name, sizeof name, "%s%s", base, t == c->f32 ? "f" : "");
	LLVMTypeRef params[2] = {t, t};
	unsigned n = y ? 2 : 1;
	LLVMTypeRef fty = LLVMFunctionType(t, params, n, 0);
	LLVMValueRef fn = LLVMGetNamedFunction(c->mod, name);
	if (!fn) {
		fn = LLVMAddFunction(c->mod, name, fty);
		LLVMSetLinkage(fn, LLVMExternalLinkage);
	}
	LLVMValueRef args[2] = {x, y};
	LLVMValueRef call = LLVMBuildCall2(c->b, fty, fn, args, n, "");
	return call;
}

/* Exact wrapping integer power in 64 bits (kir_sem_ipow / kir_sem_upow),
 * one helper function per signedness. */
static LLVMValueRef ipow_fn(cpu_cx *c, bool is_unsigned, LLVMTypeRef *out_ty) {
	const char *name = is_unsigned ? "tbc.upow" : "tbc.ipow";
	LLVMTypeRef params[2] = {c->i64, c->i64};
	LLVMTypeRef fty = LLVMFunctionType(c->i64, params, 2, 0);
	*out_ty = fty;
	LLVMValueRef fn = LLVMGetNamedFunction(c->mod, name);
	if (fn) return fn;
	fn = LLVMAddFunction(c->mod, name, fty);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	LLVMBuilderRef saved = c->b;
	LLVMBuilderRef b = LLVMCreateBuilderInContext(c->ctx);
	LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c->ctx, fn, "entry");
	LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(c->ctx, fn, "loop");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->ctx, fn, "done");
	LLVMValueRef base = LLVMGetParam(fn, 0), e = LLVMGetParam(fn, 1);
	LLVMValueRef zero = LLVMConstInt(c->i64, 0, 0), one = LLVMConstInt(c->i64, 1, 0);
	LLVMPositionBuilderAtEnd(b, entry);
	LLVMValueRef neg_result = zero;
	if (!is_unsigned) {
		/* e < 0: 1 for base 1, +-1 for base -1, else 0 */
		LLVMValueRef m1 = LLVMConstInt(c->i64, (unsigned long long)-1, 1);
		LLVMValueRef odd = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, e, one, ""), zero, "");
		LLVMValueRef r_m1 = LLVMBuildSelect(b, odd, m1, one, "");
		neg_result = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, base, one, ""), one,
					     LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, base, m1, ""), r_m1, zero, ""),
					     "");
	}
	LLVMValueRef is_neg = is_unsigned ? LLVMConstInt(c->i1, 0, 0) : LLVMBuildICmp(b, LLVMIntSLT, e, zero, "");
	LLVMValueRef entry_res = LLVMBuildSelect(b, is_neg, neg_result, one, "");
	LLVMBuildCondBr(b, LLVMBuildOr(b, is_neg, LLVMBuildICmp(b, LLVMIntEQ, e, zero, ""), ""), done, loop);
	LLVMPositionBuilderAtEnd(b, loop);
	LLVMValueRef r = LLVMBuildPhi(b, c->i64, "r"), bb = LLVMBuildPhi(b, c->i64, "b"), ee = LLVMBuildPhi(b, c->i64, "e");
	LLVMValueRef odd = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, ee, one, ""), zero, "");
	LLVMValueRef r2 = LLVMBuildSelect(b, odd, LLVMBuildMul(b, r, bb, ""), r, "");
	LLVMValueRef b2 = LLVMBuildMul(b, bb, bb, "");
	LLVMValueRef e2 = LLVMBuildLShr(b, ee, one, "");
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, e2, zero, ""), done, loop);
	LLVMValueRef in_r[2] = {one, r2}, in_b[2] = {base, b2}, in_e[2] = {e, e2};
	LLVMBasicBlockRef from[2] = {entry, loop};
	LLVMAddIncoming(r, in_r, from, 2);
	LLVMAddIncoming(bb, in_b, from, 2);
	LLVMAddIncoming(ee, in_e, from, 2);
	LLVMPositionBuilderAtEnd(b, done);
	LLVMValueRef res = LLVMBuildPhi(b, c->i64, "res");
	LLVMValueRef in_res[2] = {entry_res, r2};
	LLVMAddIncoming(res, in_res, from, 2);
	LLVMBuildRet(b, res);
	LLVMDisposeBuilder(b);
	c->b = saved;
	return fn;
}

/* ---- Expressions -----------------------------------------------------------*/
static LLVMValueRef expr(fn_cx *f, const kir_expr *e);

static LLVMValueRef cint(cpu_cx *c, LLVMTypeRef t, int64_t v) { return LLVMConstInt(t, (unsigned long long)v, 1); }

static LLVMValueRef unary(fn_cx *f, const kir_expr *e) {
	cpu_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMValueRef x = expr(f, e->a);
	if (!x) return NULL;
	tbc_dtype t = e->a->type;
	LLVMTypeRef ty = LLVMTypeOf(x);
	kir_unop op = (kir_unop)e->op;
	if (is_float(t)) {
		LLVMValueRef zero = LLVMConstReal(ty, 0.0), one = LLVMConstReal(ty, 1.0);
		/* f32 exp, log, tanh, erf: inline polynomials the vectorizer widens. */
		if (ty == c->f32 && (op == KIR_EXP || op == KIR_LOG || op == KIR_TANH || op == KIR_ERF))
			return cpu_math_f32(c, op, x);
		switch (op) {
		case KIR_NEG: return LLVMBuildFNeg(b, x, "");
		case KIR_ABS: return call_intrinsic1(f, "llvm.fabs", x);
		case KIR_SQRT: return call_intrinsic1(f, "llvm.sqrt", x);
		case KIR_EXP: return call_intrinsic1(f, "llvm.exp", x);
		case KIR_LOG: return call_intrinsic1(f, "llvm.log", x);
		case KIR_SIN: return call_intrinsic1(f, "llvm.sin", x);
		case KIR_COS: return call_intrinsic1(f, "llvm.cos", x);
		case KIR_FLOOR: return call_intrinsic1(f, "llvm.floor", x);
		case KIR_CEIL: return call_intrinsic1(f, "llvm.ceil", x);
		case KIR_ROUND_EVEN: return call_intrinsic1(f, "llvm.roundeven", x);
		case KIR_TRUNC: return call_intrinsic1(f, "llvm.trunc", x);
		case KIR_TAN: return call_libm(f, "tan", x, NULL);
		case KIR_ASIN: return call_libm(f, "asin", x, NULL);
		case KIR_ACOS: return call_libm(f, "acos", x, NULL);
		case KIR_ATAN: return call_libm(f, "atan", x, NULL);
		case KIR_SINH: return call_libm(f, "sinh", x, NULL);
		case KIR_COSH: return call_libm(f, "cosh", x, NULL);
		case KIR_TANH: return call_libm(f, "tanh", x, NULL);
		case KIR_ASINH: return call_libm(f, "asinh", x, NULL);
		case KIR_ACOSH: return call_libm(f, "acosh", x, NULL);
		case KIR_ATANH: return call_libm(f, "atanh", x, NULL);
		case KIR_ERF: return call_libm(f, "erf", x, NULL);
		case KIR_EXPM1: return call_libm(f, "expm1", x, NULL);
		case KIR_LOG1P: return call_libm(f, "log1p", x, NULL);
		case KIR_ISNAN: return LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
		case KIR_ISINF:
			return LLVMBuildFCmp(b, LLVMRealOEQ, call_intrinsic1(f, "llvm.fabs", x), LLVMConstReal(ty, INFINITY), "");
		case KIR_SIGN: {
			LLVMValueRef neg = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, x, zero, ""),
							   LLVMConstReal(ty, -1.0), x, "");
			return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, zero, ""), one, neg, "");
		}
		default: break;
		}
	} else {
		LLVMValueRef zero = LLVMConstInt(ty, 0, 0);
		switch (op) {
		case KIR_NEG: return LLVMBuildSub(b, zero, x, "");
		case KIR_ABS:
			if (is_unsigned(t)) return x;
			return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, x, zero, ""), LLVMBuildSub(b, zero, x, ""), x, "");
		case KIR_NOT: return LLVMBuildNot(b, x, "");
		case KIR_SIGN:
			if (is_unsigned(t)) return LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntNE, x, zero, ""), ty, "");
			return LLVMBuildSub(b, LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntSGT, x, zero, ""), ty, ""),
					    LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntSLT, x, zero, ""), ty, ""), "");
		default: break;
		}
	}
	cpu_fail(c, TBC_ERR_INTERNAL, "unary %s of %s", kir_unop_name(op), kir_type_name(t));
	return NULL;
}

/* Integer division with kir_sem's results for 0 and -1 divisors. */
static LLVMValueRef safe_div(fn_cx *f, LLVMValueRef x, LLVMValueRef y, bool u, bool rem) {
	LLVMBuilderRef b = f->c->b;
	LLVMTypeRef ty = LLVMTypeOf(x);
	LLVMValueRef zero = LLVMConstInt(ty, 0, 0), one = LLVMConstInt(ty, 1, 0);
	LLVMValueRef is0 = LLVMBuildICmp(b, LLVMIntEQ, y, zero, "");
	if (u) {
		LLVMValueRef d = LLVMBuildSelect(b, is0, one, y, "");
		LLVMValueRef q = rem ? LLVMBuildURem(b, x, d, "") : LLVMBuildUDiv(b, x, d, "");
		return rem ? q : LLVMBuildSelect(b, is0, zero, q, "");
	}
	LLVMValueRef ism1 = LLVMBuildICmp(b, LLVMIntEQ, y, LLVMConstAllOnes(ty), "");
	LLVMValueRef d = LLVMBuildSelect(b, LLVMBuildOr(b, is0, ism1, ""), one, y, "");
	if (rem) return LLVMBuildSRem(b, x, d, "");
	LLVMValueRef q = LLVMBuildSDiv(b, x, d, "");
	q = LLVMBuildSelect(b, ism1, LLVMBuildSub(b, zero, x, ""), q, "");
	return LLVMBuildSelect(b, is0, zero, q, "");
}

static LLVMValueRef binary(fn_cx *f, const kir_expr *e) {
	cpu_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMValueRef x = expr(f, e->a), y = expr(f, e->b);
	if (!x || !y) return NULL;
	tbc_dtype t = e->a->type;
	LLVMTypeRef ty = LLVMTypeOf(x);
	kir_binop op = (kir_binop)e->op;
	if (is_float(t)) {
		if (f->k->contract && (op == KIR_ADD || op == KIR_SUB || op == KIR_MUL)) {
			LLVMValueRef v = op == KIR_ADD ? LLVMBuildFAdd(b, x, y, "") : op == KIR_SUB ? LLVMBuildFSub(b, x, y, "")
											 : LLVMBuildFMul(b, x, y, "");
			LLVMSetFastMathFlags(v, LLVMFastMathAllowContract);
			return v;
		}
		switch (op) {
		case KIR_ADD: return LLVMBuildFAdd(b, x, y, "");
		case KIR_SUB: return LLVMBuildFSub(b, x, y, "");
		case KIR_MUL: return LLVMBuildFMul(b, x, y, "");
		case KIR_DIV: return LLVMBuildFDiv(b, x, y, "");
		case KIR_REM: return LLVMBuildFRem(b, x, y, "");
		case KIR_MIN: return call_intrinsic2(f, "llvm.minimum", x, y);
		case KIR_MAX: return call_intrinsic2(f, "llvm.maximum", x, y);
		case KIR_POW: return call_intrinsic2(f, "llvm.pow", x, y);
		case KIR_ATAN2: return call_libm(f, "atan2", x, y);
		case KIR_FLOORDIV: return call_intrinsic1(f, "llvm.floor", LLVMBuildFDiv(b, x, y, ""));
		case KIR_FLOORMOD: {
			LLVMValueRef q = call_intrinsic1(f, "llvm.floor", LLVMBuildFDiv(b, x, y, ""));
			return LLVMBuildFSub(b, x, LLVMBuildFMul(b, q, y, ""), "");
		}
		default: break;
		}
	} else {
		bool u = is_unsigned(t);
		LLVMValueRef zero = LLVMConstInt(ty, 0, 0);
		switch (op) {
		case KIR_ADD: return LLVMBuildAdd(b, x, y, "");
		case KIR_SUB: return LLVMBuildSub(b, x, y, "");
		case KIR_MUL: return LLVMBuildMul(b, x, y, "");
		case KIR_DIV: return safe_div(f, x, y, u, false);
		case KIR_REM: return safe_div(f, x, y, u, true);
		case KIR_FLOORDIV:
		case KIR_FLOORMOD: {
			LLVMValueRef q = safe_div(f, x, y, false, false), r = safe_div(f, x, y, false, true);
			LLVMValueRef adj = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntNE, r, zero, ""),
							LLVMBuildICmp(b, LLVMIntNE, LLVMBuildICmp(b, LLVMIntSLT, r, zero, ""),
								      LLVMBuildICmp(b, LLVMIntSLT, y, zero, ""), ""),
							"");
			if (op == KIR_FLOORDIV) return LLVMBuildSub(b, q, LLVMBuildZExt(b, adj, ty, ""), "");
			return LLVMBuildSelect(b, adj, LLVMBuildAdd(b, r, y, ""), r, "");
		}
		case KIR_MIN: return call_intrinsic2(f, u ? "llvm.umin" : "llvm.smin", x, y);
		case KIR_MAX: return call_intrinsic2(f, u ? "llvm.umax" : "llvm.smax", x, y);
		case KIR_AND: return LLVMBuildAnd(b, x, y, "");
		case KIR_OR: return LLVMBuildOr(b, x, y, "");
		case KIR_XOR: return LLVMBuildXor(b, x, y, "");
		case KIR_SHL:
		case KIR_SHR: {
			int bits = bits_of(t);
			LLVMValueRef in_range = LLVMBuildICmp(b, LLVMIntULT, y, LLVMConstInt(ty, (unsigned)bits, 0), "");
			LLVMValueRef s = LLVMBuildSelect(b, in_range, y, zero, "");
			if (op == KIR_SHL) return LLVMBuildSelect(b, in_range, LLVMBuildShl(b, x, s, ""), zero, "");
			if (u) return LLVMBuildSelect(b, in_range, LLVMBuildLShr(b, x, s, ""), zero, "");
			return LLVMBuildAShr(b, x, LLVMBuildSelect(b, in_range, s, LLVMConstInt(ty, (unsigned)bits - 1, 0), ""),
					     "");
		}
		case KIR_POW: {
			LLVMTypeRef fty;
			LLVMValueRef fn = ipow_fn(c, u, &fty);
			LLVMValueRef a64 = u ? LLVMBuildZExt(b, x, c->i64, "") : LLVMBuildSExt(b, x, c->i64, "");
			LLVMValueRef b64 = u ? LLVMBuildZExt(b, y, c->i64, "") : LLVMBuildSExt(b, y, c->i64, "");
			if (ty == c->i64) a64 = x, b64 = y;
			LLVMValueRef args[2] = {a64, b64};
			LLVMValueRef r = LLVMBuildCall2(b, fty, fn, args, 2, "");
			return ty == c->i64 ? r : LLVMBuildTrunc(b, r, ty, "");
		}
		default: break;
		}
	}
	cpu_fail(c, TBC_ERR_INTERNAL, "binary %s of %s", kir_binop_name(op), kir_type_name(t));
	return NULL;
}

static LLVMValueRef compare(fn_cx *f, const kir_expr *e) {
	LLVMBuilderRef b = f->c->b;
	LLVMValueRef x = expr(f, e->a), y = expr(f, e->b);
	if (!x || !y) return NULL;
	tbc_dtype t = e->a->type;
	if (is_float(t)) {
		static const LLVMRealPredicate p[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
						      LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
		return LLVMBuildFCmp(b, p[e->op], x, y, "");
	}
	static const LLVMIntPredicate s[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
	static const LLVMIntPredicate u[] = {LLVMIntEQ, LLVMIntNE, LLVMIntULT, LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
	return LLVMBuildICmp(b, is_unsigned(t) ? u[e->op] : s[e->op], x, y, "");
}

/* ONNX Cast semantics (docs/kernel-ir.md): floats to integers truncate,
 * NaN is 0, out of range clamps to 64 bits and then wraps to the width. */
static LLVMValueRef cast(fn_cx *f, const kir_expr *e) {
	cpu_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMValueRef x = expr(f, e->a);
	if (!x) return NULL;
	tbc_dtype from = e->a->type, to = e->type;
	LLVMTypeRef fty = LLVMTypeOf(x), tty = cpu_type(c, to);
	if (!tty) return NULL;
	if (from == to) return x;
	/* Narrow floats: decode to f32 (exact), then cast as from f32; to one:
	 * integers and bool go through f64 (tbc_store_i64 rounds (double)v),
	 * floats encode from their own value. */
	if (kir_type_is_narrow_float(from)) {
		x = cpu_narrow_to_f32(c, from, x);
		if (!x) return NULL;
		from = TBC_DT_F32;
		fty = c->f32;
		if (to == TBC_DT_F32) return x;
	}
	if (kir_type_is_narrow_float(to)) {
		if (!is_float(from)) {
			x = is_unsigned(from) ? LLVMBuildUIToFP(b, x, c->f64, "") : LLVMBuildSIToFP(b, x, c->f64, "");
		}
		return cpu_float_to_narrow(c, to, x, e->op != KIR_CAST_NO_SATURATE);
	}
	if (fty == tty && is_float(from) == is_float(to)) return x;
	if (to == TBC_DT_BOOL) {
		if (is_float(from)) return LLVMBuildFCmp(b, LLVMRealUNE, x, LLVMConstReal(fty, 0.0), "");
		return LLVMBuildICmp(b, LLVMIntNE, x, LLVMConstInt(fty, 0, 0), "");
	}
	if (is_float(from) && is_float(to))
		return bits_of(from) < bits_of(to) ? LLVMBuildFPExt(b, x, tty, "") : LLVMBuildFPTrunc(b, x, tty, "");
	if (!is_float(from) && is_float(to))
		return is_unsigned(from) ? LLVMBuildUIToFP(b, x, tty, "") : LLVMBuildSIToFP(b, x, tty, "");
	if (!is_float(from) && !is_float(to)) {
		if (from == TBC_DT_BOOL) return LLVMBuildZExt(b, x, tty, ""); /* an i1, however wide bool's storage */
		int fb = bits_of(from), tb = bits_of(to);
		if (fb == tb) return x;
		if (fb > tb) return LLVMBuildTrunc(b, x, tty, "");
		return is_unsigned(from) ? LLVMBuildZExt(b, x, tty, "") : LLVMBuildSExt(b, x, tty, "");
	}
	/* float -> integer */
	LLVMValueRef d = fty == c->f64 ? x : LLVMBuildFPExt(b, x, c->f64, "");
	LLVMTypeRef types[2] = {c->i64, c->f64};
	LLVMValueRef r = call_intrinsic(f, "llvm.fptosi.sat", types, 2, &d, 1);
	if (to == TBC_DT_U64) {
		LLVMValueRef big = LLVMBuildFCmp(b, LLVMRealOGE, d, LLVMConstReal(c->f64, 9223372036854775808.0), "");
		r = LLVMBuildSelect(b, big, call_intrinsic(f, "llvm.fptoui.sat", types, 2, &d, 1), r, "");
	}
	return tty == c->i64 ? r : LLVMBuildTrunc(b, r, tty, "");
}

static void mark_access(fn_cx *f, LLVMValueRef inst) {
	if (!f->in_parallel || !f->group) return;
	cpu_cx *c = f->c;
	LLVMSetMetadata(inst, LLVMGetMDKindIDInContext(c->ctx, "llvm.access.group", 17),
			LLVMMetadataAsValue(c->ctx, f->group));
}

/* A distinct empty metadata node (an access group).  The C API makes only
 * uniqued nodes, so it comes from parsing a one-line module; metadata nodes
 * belong to the context and outlive that module.  NULL when parsing fails
 * (the loops then just keep LLVM's own checks). */
static LLVMMetadataRef distinct_node(cpu_cx *c) {
	static const char ir[] = "!tbc.group = !{!0}\n!0 = distinct !{}\n";
	LLVMMemoryBufferRef mb = LLVMCreateMemoryBufferWithMemoryRangeCopy(ir, sizeof ir - 1, "tbc.group");
	LLVMModuleRef m = NULL;
	char *err = NULL;
	if (!mb) return NULL;
	if (LLVMParseIRInContext(c->ctx, mb, &m, &err)) { /* takes mb either way */
		LLVMDisposeMessage(err);
		return NULL;
	}
	LLVMMetadataRef md = NULL;
	if (LLVMGetNamedMetadataNumOperands(m, "tbc.group") == 1) {
		LLVMValueRef op;
		LLVMGetNamedMetadataOperands(m, "tbc.group", &op);
		md = LLVMValueAsMetadata(op);
	}
	LLVMDisposeModule(m);
	return md;
}

static LLVMValueRef load(fn_cx *f, const kir_expr *e) {
	cpu_cx *c = f->c;
	LLVMValueRef i = expr(f, e->a);
	tbc_dtype dt = e->buf->dtype;
	LLVMTypeRef mt = mem_type(c, dt);
	if (!i || !mt) return NULL;
	LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, mt, f->bufs[e->buf->id], &i, 1, "");
	LLVMValueRef v = LLVMBuildLoad2(c->b, mt, p, "");
	LLVMSetAlignment(v, (unsigned)tbc_dtype_size(dt));
	mark_access(f, v);
	if (dt == TBC_DT_BOOL) v = LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(c->i8, 0, 0), "");
	/* A sub-byte integer is the low bits of its byte (a signed one keeps
	 * its sign in the whole byte, but only the low bits count, as
	 * tbc_load_i64 reads them); f4e2m1 is the low nibble. */
	if (is_sub_byte_int(dt)) v = LLVMBuildTrunc(c->b, v, cpu_type(c, dt), "");
	if (dt == TBC_DT_F4E2M1) v = LLVMBuildAnd(c->b, v, LLVMConstInt(c->i8, 0xf, 0), "");
	return v;
}

static LLVMValueRef expr(fn_cx *f, const kir_expr *e) {
	cpu_cx *c = f->c;
	if (c->failed) return NULL;
	LLVMValueRef v = memo_get(f, e);
	if (v) return v;
	switch (e->kind) {
	case KIR_E_INT: {
		LLVMTypeRef t = cpu_type(c, e->type);
		v = t ? cint(c, t, e->i) : NULL;
		break;
	}
	case KIR_E_FLOAT: {
		LLVMTypeRef t = cpu_type(c, e->type);
		if (t && kir_type_is_narrow_float(e->type)) v = cpu_narrow_const(c, e->type, e->f);
		else v = t ? LLVMConstReal(t, e->f) : NULL;
		break;
	}
	case KIR_E_VAR: {
		LLVMTypeRef t = cpu_type(c, e->var->type);
		v = t ? LLVMBuildLoad2(c->b, t, f->vars[e->var->id], "") : NULL;
		break;
	}
	case KIR_E_SIZE: v = f->sizes[e->size]; break;
	case KIR_E_LOAD: v = load(f, e); break;
	case KIR_E_UNARY: v = unary(f, e); break;
	case KIR_E_BINARY: v = binary(f, e); break;
	case KIR_E_CMP: v = compare(f, e); break;
	case KIR_E_SELECT: {
		LLVMValueRef cond = expr(f, e->a), a = expr(f, e->b), b = expr(f, e->c);
		v = cond && a && b ? LLVMBuildSelect(c->b, cond, a, b, "") : NULL;
		break;
	}
	case KIR_E_CAST: v = cast(f, e); break;
	case KIR_E_LOCAL_ID: break; /* grouped kernels are refused (cpu_emit_kernel) */
	}
	if (v) memo_put(f, e, v);
	return v;
}

/* ---- Statements ------------------------------------------------------------*/
static void stmts(fn_cx *f, const kir_stmt *s);

static bool has_loop(const kir_stmt *s) {
	for (; s; s = s->next) {
		if (s->kind == KIR_S_FOR) return true;
		if (s->kind == KIR_S_IF && (has_loop(s->body) || has_loop(s->orelse))) return true;
	}
	return false;
}

/* Iterations of the loops inside s whose trip counts are constants. */
static int64_t inner_work(const kir_stmt *s) {
	int64_t w = 1;
	for (; s; s = s->next) {
		if (s->kind != KIR_S_FOR) continue;
		int64_t lo, hi, n = 1;
		if (kir_e_const_index(s->lo, &lo) && kir_e_const_index(s->hi, &hi) && hi > lo) n = (hi - lo + s->step - 1) / s->step;
		int64_t inner = inner_work(s->body);
		if (n > 0 && inner > 0 && n < INT64_MAX / inner) {
			int64_t t = n * inner;
			if (t > w) w = t;
		}
	}
	return w;
}

/* llvm.loop metadata: a distinct self-referencing node with the hints. */
static void mark_loop(fn_cx *f, LLVMValueRef latch_br, bool vectorize) {
	cpu_cx *c = f->c;
	LLVMMetadataRef tmp = LLVMTemporaryMDNode(c->ctx, NULL, 0);
	LLVMMetadataRef ops[4];
	unsigned n = 0;
	ops[n++] = tmp;
	LLVMMetadataRef mp = LLVMMDStringInContext2(c->ctx, "llvm.loop.mustprogress", 22);
	ops[n++] = LLVMMDNodeInContext2(c->ctx, &mp, 1);
	if (vectorize) {
		LLVMMetadataRef v[2] = {LLVMMDStringInContext2(c->ctx, "llvm.loop.vectorize.enable", 26),
					LLVMValueAsMetadata(LLVMConstInt(c->i1, 1, 0))};
		ops[n++] = LLVMMDNodeInContext2(c->ctx, v, 2);
		if (f->group) {
			LLVMMetadataRef pa[2] = {LLVMMDStringInContext2(c->ctx, "llvm.loop.parallel_accesses", 27), f->group};
			ops[n++] = LLVMMDNodeInContext2(c->ctx, pa, 2);
		}
	}
	LLVMMetadataRef node = LLVMMDNodeInContext2(c->ctx, ops, n);
	LLVMMetadataReplaceAllUsesWith(tmp, node);
	LLVMSetMetadata(latch_br, c->loop_md_kind, LLVMMetadataAsValue(c->ctx, node));
}

/* for var = lo .. hi step: body, with the bounds evaluated once. */
static void emit_loop(fn_cx *f, const kir_var *var, LLVMValueRef lo, LLVMValueRef hi, int64_t step,
		      const kir_stmt *body, bool vectorize) {
	cpu_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMValueRef slot = f->vars[var->id];
	LLVMBuildStore(b, lo, slot);
	LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "loop");
	LLVMBasicBlockRef bodyb = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "body");
	LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "exit");
	LLVMBuildBr(b, head);
	LLVMPositionBuilderAtEnd(b, head);
	LLVMValueRef i = LLVMBuildLoad2(b, c->i64, slot, "");
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i, hi, ""), bodyb, exit);
	LLVMPositionBuilderAtEnd(b, bodyb);
	bool was = f->in_parallel;
	f->in_parallel = vectorize; /* vectorize: an innermost parallel or vector loop */
	stmts(f, body);
	f->in_parallel = was;
	LLVMValueRef i2 = LLVMBuildLoad2(b, c->i64, slot, "");
	LLVMBuildStore(b, LLVMBuildNSWAdd(b, i2, LLVMConstInt(c->i64, (unsigned long long)step, 0), ""), slot);
	LLVMValueRef br = LLVMBuildBr(b, head);
	mark_loop(f, br, vectorize);
	LLVMPositionBuilderAtEnd(b, exit);
}

static LLVMValueRef new_function(cpu_cx *c, const char *name, LLVMTypeRef ty) {
	LLVMValueRef fn = LLVMAddFunction(c->mod, name, ty);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	unsigned kind = LLVMGetEnumAttributeKindForName("nounwind", 8);
	LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c->ctx, kind, 0));
	return fn;
}

static void set_prefer_width(cpu_cx *c, LLVMValueRef fn, int bits) {
	char v[16];
	snprintf(v, sizeof v, "%d", bits);
	LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
				LLVMCreateStringAttribute(c->ctx, "prefer-vector-width", 19, v, (unsigned)strlen(v)));
}

/* Allocas for every variable, at the top of the entry block. */
static void make_var_slots(fn_cx *f) {
	for (int i = 0; i < f->k->n_vars; i++) {
		LLVMTypeRef t = cpu_type(f->c, f->k->vars[i]->type);
		f->vars[i] = t ? LLVMBuildAlloca(f->c->b, t, f->k->vars[i]->name) : NULL;
	}
}

/* The closure of a parallel loop: host, buffers, sizes, every variable, lo. */
static LLVMTypeRef closure_type(fn_cx *f) {
	if (f->closure_t) return f->closure_t;
	cpu_cx *c = f->c;
	const kir_kernel *k = f->k;
	int n = 1 + k->n_buffers + k->n_sizes + k->n_vars + 2;
	LLVMTypeRef *fields = calloc((size_t)n, sizeof *fields);
	if (!fields) return NULL;
	int j = 0;
	fields[j++] = c->ptr;
	for (int i = 0; i < k->n_buffers; i++) fields[j++] = c->ptr;
	for (int i = 0; i < k->n_sizes; i++) fields[j++] = c->i64;
	for (int i = 0; i < k->n_vars; i++) fields[j++] = cpu_type(c, k->vars[i]->type);
	fields[j++] = c->i64;
	fields[j++] = c->ptr; /* status */
	f->closure_t = LLVMStructTypeInContext(c->ctx, fields, (unsigned)n, 0);
	free(fields);
	return f->closure_t;
}

static void emit_parallel(fn_cx *f, const kir_stmt *s) {
	cpu_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	const kir_kernel *k = f->k;
	LLVMValueRef lo = expr(f, s->lo), hi = expr(f, s->hi);
	if (!lo || !hi) return;
	LLVMTypeRef ct = closure_type(f);
	/* Trip count; nothing to run when it is not positive. */
	LLVMValueRef step = LLVMConstInt(c->i64, (unsigned long long)s->step, 0);
	LLVMValueRef n = LLVMBuildSDiv(
		b, LLVMBuildAdd(b, LLVMBuildSub(b, hi, lo, ""), LLVMConstInt(c->i64, (unsigned long long)s->step - 1, 0), ""),
		step, "");
	/* The closure lives in the entry block's frame. */
	LLVMBasicBlockRef cur = LLVMGetInsertBlock(b);
	LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(f->fn);
	LLVMPositionBuilderBefore(b, LLVMGetFirstInstruction(entry));
	LLVMValueRef clo = LLVMBuildAlloca(b, ct, "closure");
	LLVMPositionBuilderAtEnd(b, cur);
	int j = 0;
	LLVMBuildStore(b, f->host, LLVMBuildStructGEP2(b, ct, clo, (unsigned)j++, ""));
	for (int i = 0; i < k->n_buffers; i++) LLVMBuildStore(b, f->bufs[i], LLVMBuildStructGEP2(b, ct, clo, (unsigned)j++, ""));
	for (int i = 0; i < k->n_sizes; i++) LLVMBuildStore(b, f->sizes[i], LLVMBuildStructGEP2(b, ct, clo, (unsigned)j++, ""));
	for (int i = 0; i < k->n_vars; i++) {
		LLVMTypeRef t = cpu_type(c, k->vars[i]->type);
		LLVMBuildStore(b, LLVMBuildLoad2(b, t, f->vars[i], ""), LLVMBuildStructGEP2(b, ct, clo, (unsigned)j++, ""));
	}
	LLVMBuildStore(b, lo, LLVMBuildStructGEP2(b, ct, clo, (unsigned)j++, ""));
	LLVMBuildStore(b, f->status ? f->status : LLVMConstNull(c->ptr), LLVMBuildStructGEP2(b, ct, clo, (unsigned)j++, ""));

	/* The outlined body. */
	char name[128];
	snprintf(name, sizeof name, "tbc.k%d.%s.par%d", f->index, k->name, f->n_outlined++);
	LLVMValueRef body_fn = new_function(c, name, c->par_body_t);
	if (k->contract && c->vector_bytes >= 64) set_prefer_width(c, body_fn, c->vector_bytes * 8);
	fn_cx g = *f;
	g.fn = body_fn;
	g.outlined = true;
	g.memo = NULL;
	g.memo_cap = g.memo_n = 0;
	g.bufs = calloc((size_t)k->n_buffers + 1, sizeof *g.bufs);
	g.sizes = calloc((size_t)k->n_sizes + 1, sizeof *g.sizes);
	g.vars = calloc((size_t)k->n_vars + 1, sizeof *g.vars);
	if (!g.bufs || !g.sizes || !g.vars) {
		cpu_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
	} else {
		LLVMBasicBlockRef saved = LLVMGetInsertBlock(b);
		LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(c->ctx, body_fn, "entry"));
		make_var_slots(&g);
		LLVMValueRef cl = LLVMGetParam(body_fn, 0);
		j = 0;
		g.host = LLVMBuildLoad2(b, c->ptr, LLVMBuildStructGEP2(b, ct, cl, (unsigned)j++, ""), "host");
		for (int i = 0; i < k->n_buffers; i++)
			g.bufs[i] = LLVMBuildLoad2(b, c->ptr, LLVMBuildStructGEP2(b, ct, cl, (unsigned)j++, ""), k->buffers[i]->name);
		for (int i = 0; i < k->n_sizes; i++)
			g.sizes[i] = LLVMBuildLoad2(b, c->i64, LLVMBuildStructGEP2(b, ct, cl, (unsigned)j++, ""), k->size_names[i]);
		for (int i = 0; i < k->n_vars; i++) {
			LLVMTypeRef t = cpu_type(c, k->vars[i]->type);
			LLVMBuildStore(b, LLVMBuildLoad2(b, t, LLVMBuildStructGEP2(b, ct, cl, (unsigned)j++, ""), ""), g.vars[i]);
		}
		LLVMValueRef glo = LLVMBuildLoad2(b, c->i64, LLVMBuildStructGEP2(b, ct, cl, (unsigned)j++, ""), "lo");
		if (f->status) g.status = LLVMBuildLoad2(b, c->ptr, LLVMBuildStructGEP2(b, ct, cl, (unsigned)j, ""), "status");
		j++;
		/* t in [begin, end): var = lo + t * step */
		LLVMValueRef tslot = LLVMBuildAlloca(b, c->i64, "t");
		LLVMValueRef begin = LLVMGetParam(body_fn, 1), end = LLVMGetParam(body_fn, 2);
		LLVMBuildStore(b, begin, tslot);
		LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(c->ctx, body_fn, "loop");
		LLVMBasicBlockRef bodyb = LLVMAppendBasicBlockInContext(c->ctx, body_fn, "body");
		LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(c->ctx, body_fn, "exit");
		LLVMBuildBr(b, head);
		LLVMPositionBuilderAtEnd(b, head);
		LLVMValueRef t = LLVMBuildLoad2(b, c->i64, tslot, "");
		LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, t, end, ""), bodyb, exit);
		LLVMPositionBuilderAtEnd(b, bodyb);
		LLVMBuildStore(b, LLVMBuildNSWAdd(b, glo, LLVMBuildNSWMul(b, t, step, ""), ""), g.vars[s->var->id]);
		g.in_parallel = !has_loop(s->body);
		stmts(&g, s->body);
		g.in_parallel = false;
		LLVMValueRef t2 = LLVMBuildLoad2(b, c->i64, tslot, "");
		LLVMBuildStore(b, LLVMBuildNSWAdd(b, t2, LLVMConstInt(c->i64, 1, 0), ""), tslot);
		LLVMValueRef br = LLVMBuildBr(b, head);
		mark_loop(&g, br, !has_loop(s->body));
		LLVMPositionBuilderAtEnd(b, exit);
		LLVMBuildRetVoid(b);
		LLVMPositionBuilderAtEnd(b, saved);
	}
	free(g.bufs);
	free(g.sizes);
	free(g.vars);
	free(g.memo);
	f->n_outlined = g.n_outlined;

	/* host->parallel_for(host->ctx, body, closure, n, grain) when n > 0 */
	int64_t work = inner_work(s->body);
	int64_t grain = work >= PAR_GRAIN_WORK ? 1 : (PAR_GRAIN_WORK + work - 1) / work;
	/* GEMM and convolution kernels (the contracting ones) size their chunks
	 * themselves (row tiles x column blocks x K, about 16 of them): the
	 * estimate above sees only the K loop (the tile loops have run-time
	 * bounds) and would hand every chunk to one thread. */
	if (k->contract) grain = 1;
	LLVMBasicBlockRef call_b = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "par");
	LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "after");
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, LLVMConstInt(c->i64, 0, 0), ""), call_b, after);
	LLVMPositionBuilderAtEnd(b, call_b);
	LLVMValueRef ctx = LLVMBuildLoad2(b, c->ptr, LLVMBuildStructGEP2(b, c->host_t, f->host, 0, ""), "ctx");
	LLVMValueRef pf = LLVMBuildLoad2(b, c->ptr, LLVMBuildStructGEP2(b, c->host_t, f->host, 1, ""), "parallel_for");
	LLVMValueRef args[5] = {ctx, body_fn, clo, n, LLVMConstInt(c->i64, (unsigned long long)grain, 0)};
	LLVMBuildCall2(b, c->par_for_t, pf, args, 5, "");
	LLVMBuildBr(b, after);
	LLVMPositionBuilderAtEnd(b, after);
}

/* Branch weights: the first successor is almost never taken. */
static void set_unlikely(cpu_cx *c, LLVMValueRef br) {
	LLVMMetadataRef ops[3] = {LLVMMDStringInContext2(c->ctx, "branch_weights", 14),
				  LLVMValueAsMetadata(LLVMConstInt(c->i32, 1, 0)),
				  LLVMValueAsMetadata(LLVMConstInt(c->i32, 1048575, 0))};
	LLVMSetMetadata(br, LLVMGetMDKindIDInContext(c->ctx, "prof", 4),
			LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, ops, 3)));
}

/* void tbc.fail(host, i32 *status, message): the first failure of a run
 * (status 0 -> TBC_ERR_RUNTIME, atomically: parallel chunks may race)
 * reports its message through host->error; run() returns the status after
 * the kernel. */
static LLVMValueRef fail_fn(cpu_cx *c, LLVMTypeRef *out_ty) {
	LLVMTypeRef params[3] = {c->ptr, c->ptr, c->ptr};
	LLVMTypeRef fty = LLVMFunctionType(c->void_t, params, 3, 0);
	*out_ty = fty;
	LLVMValueRef fn = LLVMGetNamedFunction(c->mod, "tbc.fail");
	if (fn) return fn;
	fn = LLVMAddFunction(c->mod, "tbc.fail", fty);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	const char *attrs[] = {"noinline", "cold", "nounwind"};
	for (int i = 0; i < 3; i++)
		LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
					LLVMCreateEnumAttribute(c->ctx, LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i])), 0));
	LLVMBuilderRef b = LLVMCreateBuilderInContext(c->ctx);
	LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c->ctx, fn, "entry");
	LLVMBasicBlockRef report = LLVMAppendBasicBlockInContext(c->ctx, fn, "report");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->ctx, fn, "done");
	LLVMPositionBuilderAtEnd(b, entry);
	LLVMValueRef host = LLVMGetParam(fn, 0), status = LLVMGetParam(fn, 1), msg = LLVMGetParam(fn, 2);
	LLVMValueRef code = LLVMConstInt(c->i32, TBC_ERR_RUNTIME, 0);
	LLVMValueRef x = LLVMBuildAtomicCmpXchg(b, status, LLVMConstInt(c->i32, 0, 0), code, LLVMAtomicOrderingMonotonic,
						LLVMAtomicOrderingMonotonic, 0);
	LLVMBuildCondBr(b, LLVMBuildExtractValue(b, x, 1, ""), report, done);
	LLVMPositionBuilderAtEnd(b, report);
	LLVMValueRef ctx = LLVMBuildLoad2(b, c->ptr, LLVMBuildStructGEP2(b, c->host_t, host, 0, ""), "ctx");
	LLVMValueRef err = LLVMBuildLoad2(b, c->ptr, LLVMBuildStructGEP2(b, c->host_t, host, 3, ""), "error");
	LLVMTypeRef eparams[3] = {c->ptr, c->i32, c->ptr};
	LLVMValueRef args[3] = {ctx, code, msg};
	LLVMBuildCall2(b, LLVMFunctionType(c->i32, eparams, 3, 0), err, args, 3, "");
	LLVMBuildBr(b, done);
	LLVMPositionBuilderAtEnd(b, done);
	LLVMBuildRetVoid(b);
	LLVMDisposeBuilder(b);
	return fn;
}

LLVMValueRef cpu_message(cpu_cx *c, const char *text) {
	char name[64];
	snprintf(name, sizeof name, "tbc.msg.%d", c->n_messages++);
	LLVMValueRef init = LLVMConstStringInContext2(c->ctx, text, strlen(text), 0);
	LLVMValueRef g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), name);
	LLVMSetInitializer(g, init);
	LLVMSetGlobalConstant(g, 1);
	LLVMSetLinkage(g, LLVMPrivateLinkage);
	LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
	return g;
}

static void report_error(fn_cx *f, const char *message) {
	cpu_cx *c = f->c;
	LLVMTypeRef fty;
	LLVMValueRef fn = fail_fn(c, &fty);
	LLVMValueRef args[3] = {f->host, f->status, cpu_message(c, message)};
	LLVMBuildCall2(c->b, fty, fn, args, 3, "");
}

static void stmts(fn_cx *f, const kir_stmt *s) {
	cpu_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	for (; s && !c->failed; s = s->next) {
		memo_clear(f);
		switch (s->kind) {
		case KIR_S_FOR: {
			if (s->loop == KIR_LOOP_PARALLEL && !f->outlined) {
				emit_parallel(f, s);
				break;
			}
			LLVMValueRef lo = expr(f, s->lo), hi = expr(f, s->hi);
			if (!lo || !hi) return;
			emit_loop(f, s->var, lo, hi, s->step, s->body, s->loop != KIR_LOOP_SEQUENTIAL && !has_loop(s->body));
			break;
		}
		case KIR_S_STORE: {
			LLVMValueRef i = expr(f, s->index), v = expr(f, s->value);
			LLVMTypeRef mt = mem_type(c, s->buf->dtype);
			if (!i || !v || !mt) return;
			if (s->buf->dtype == TBC_DT_BOOL) v = LLVMBuildZExt(b, v, c->i8, "");
			/* tbc_store_i64: a signed sub-byte integer fills its byte with its sign. */
			if (is_sub_byte_int(s->buf->dtype))
				v = tbc_dtype_is_unsigned(s->buf->dtype) ? LLVMBuildZExt(b, v, c->i8, "") : LLVMBuildSExt(b, v, c->i8, "");
			LLVMValueRef p = LLVMBuildInBoundsGEP2(b, mt, f->bufs[s->buf->id], &i, 1, "");
			LLVMValueRef st = LLVMBuildStore(b, v, p);
			LLVMSetAlignment(st, (unsigned)tbc_dtype_size(s->buf->dtype));
			mark_access(f, st);
			break;
		}
		case KIR_S_SET: {
			LLVMValueRef v = expr(f, s->value);
			if (!v) return;
			if (s->var->reassoc && LLVMIsAInstruction(v) && LLVMGetInstructionOpcode(v) == LLVMFAdd)
				LLVMSetFastMathFlags(v, LLVMGetFastMathFlags(v) | LLVMFastMathAllowReassoc);
			LLVMBuildStore(b, v, f->vars[s->var->id]);
			break;
		}
		case KIR_S_ERROR: {
			LLVMValueRef cond = expr(f, s->cond);
			if (!cond || !f->status) {
				if (cond) cpu_fail(c, TBC_ERR_INTERNAL, "an error statement in a kernel without status");
				return;
			}
			LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "fail");
			LLVMBasicBlockRef cont = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "cont");
			LLVMValueRef br = LLVMBuildCondBr(b, cond, fail, cont);
			set_unlikely(c, br);
			LLVMPositionBuilderAtEnd(b, fail);
			report_error(f, s->message);
			LLVMBuildBr(b, cont);
			LLVMPositionBuilderAtEnd(b, cont);
			memo_clear(f);
			break;
		}
		case KIR_S_IF: {
			LLVMValueRef cond = expr(f, s->cond);
			if (!cond) return;
			LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "then");
			LLVMBasicBlockRef els = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "else");
			LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "join");
			LLVMBuildCondBr(b, cond, then, els);
			LLVMPositionBuilderAtEnd(b, then);
			stmts(f, s->body);
			memo_clear(f);
			LLVMBuildBr(b, join);
			LLVMPositionBuilderAtEnd(b, els);
			stmts(f, s->orelse);
			memo_clear(f);
			LLVMBuildBr(b, join);
			LLVMPositionBuilderAtEnd(b, join);
			break;
		}
		case KIR_S_BARRIER: break; /* grouped kernels are refused (cpu_emit_kernel) */
		}
	}
	memo_clear(f);
}

LLVMValueRef cpu_emit_kernel(cpu_cx *c, const kir_kernel *k, int index) {
	bool can_fail = kir_kernel_can_fail(k);
	int n_params = 1 + k->n_buffers + k->n_sizes + (can_fail ? 1 : 0);
	LLVMTypeRef *params = calloc((size_t)n_params, sizeof *params);
	fn_cx f = {.c = c, .k = k, .index = index};
	f.bufs = calloc((size_t)k->n_buffers + 1, sizeof *f.bufs);
	f.sizes = calloc((size_t)k->n_sizes + 1, sizeof *f.sizes);
	f.vars = calloc((size_t)k->n_vars + 1, sizeof *f.vars);
	LLVMValueRef fn = NULL;
	if (!params || !f.bufs || !f.sizes || !f.vars) {
		cpu_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
		goto done;
	}
	for (int i = 0; i < k->n_buffers; i++)
		if (!mem_type(c, k->buffers[i]->dtype)) goto done;
	if (kir_kernel_is_grouped(k)) { /* the parallel form is lowered for devices only */
		cpu_fail(c, TBC_ERR_UNSUPPORTED, "kernel %s has work-groups, which the CPU target does not run", k->name);
		goto done;
	}
	params[0] = c->ptr;
	for (int i = 0; i < k->n_buffers; i++) params[1 + i] = c->ptr;
	for (int i = 0; i < k->n_sizes; i++) params[1 + k->n_buffers + i] = c->i64;
	if (can_fail) params[n_params - 1] = c->ptr;
	char name[128];
	snprintf(name, sizeof name, "tbc.k%d.%s", index, k->name);
	fn = new_function(c, name, LLVMFunctionType(c->void_t, params, (unsigned)n_params, 0));
	f.fn = fn;
	f.group = distinct_node(c);
	/* GEMM and convolution kernels (the contracting ones) are register-tiled
	 * for the tuning's vector width; a CPU whose LLVM tuning prefers
	 * narrower vectors (skylake-avx512 prefers 256 bits) would spill. */
	if (k->contract && c->vector_bytes >= 64) set_prefer_width(c, fn, c->vector_bytes * 8);
	f.host = LLVMGetParam(fn, 0);
	for (int i = 0; i < k->n_buffers; i++) {
		f.bufs[i] = LLVMGetParam(fn, (unsigned)(1 + i));
		LLVMSetValueName2(f.bufs[i], k->buffers[i]->name, strlen(k->buffers[i]->name));
	}
	for (int i = 0; i < k->n_sizes; i++) f.sizes[i] = LLVMGetParam(fn, (unsigned)(1 + k->n_buffers + i));
	if (can_fail) f.status = LLVMGetParam(fn, (unsigned)(n_params - 1));
	LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
	make_var_slots(&f);
	stmts(&f, k->body);
	LLVMBuildRetVoid(c->b);
done:
	free(params);
	free(f.bufs);
	free(f.sizes);
	free(f.vars);
	free(f.memo);
	return c->failed ? NULL : fn;
}
