/* Scalar operations: unary, binary, compare and cast, each computing what
 * the evaluator (codegen/kir/kir_eval.c, codegen/kir/kir_sem.h) computes,
 * including its defined results for division by zero, INT_MIN / -1,
 * oversized shifts, integer pow and NaN in min/max, so that no target
 * traps and every target agrees with the interpreter.  Math without an
 * inline form calls LLVM intrinsics and libm where the target has libm
 * (llvm_hooks.libm). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codegen/llvm/llvm_emit.h"

/* ---- Calls -----------------------------------------------------------------*/
static LLVMValueRef call_intrinsic(llvm_fn *f, const char *name, LLVMTypeRef *types, unsigned n_types,
				   LLVMValueRef *args, unsigned n_args) {
	llvm_cx *c = f->c;
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, types, n_types);
	LLVMTypeRef ty = LLVMIntrinsicGetType(c->ctx, id, types, n_types);
	return LLVMBuildCall2(c->b, ty, fn, args, n_args, "");
}

static LLVMValueRef call_intrinsic1(llvm_fn *f, const char *name, LLVMValueRef x) {
	LLVMTypeRef t = LLVMTypeOf(x);
	return call_intrinsic(f, name, &t, 1, &x, 1);
}

static LLVMValueRef call_intrinsic2(llvm_fn *f, const char *name, LLVMValueRef x, LLVMValueRef y) {
	LLVMTypeRef t = LLVMTypeOf(x);
	LLVMValueRef args[2] = {x, y};
	return call_intrinsic(f, name, &t, 1, args, 2);
}

/* Whether the target lets math call libm (llvm_hooks.libm); a diagnostic
 * naming the function if not, rather than a symbol nothing resolves. */
static bool libm_allowed(llvm_fn *f, const char *function) {
	if (f->c->hooks->libm) return true;
	return llvm_fail(f->c, TBC_ERR_UNSUPPORTED, "%s needs libm, which this target does not have", function);
}

/* An intrinsic that LLVM lowers to a libm call where the target has no
 * instruction for it (llvm.exp, llvm.sin, ...; llvm.pow). */
static LLVMValueRef libm_intrinsic1(llvm_fn *f, const char *name, LLVMValueRef x) {
	if (!f->c->hooks->libm && f->c->hooks->soft_math) return llvm_soft_math(f->c, name + 5, x, NULL);
	return libm_allowed(f, name + 5) ? call_intrinsic1(f, name, x) : NULL;
}

static LLVMValueRef libm_intrinsic2(llvm_fn *f, const char *name, LLVMValueRef x, LLVMValueRef y) {
	if (!f->c->hooks->libm && f->c->hooks->soft_math) return llvm_soft_math(f->c, name + 5, x, y);
	return libm_allowed(f, name + 5) ? call_intrinsic2(f, name, x, y) : NULL;
}

/* A libm function of one or two float arguments (sinf / sin, ...). */
static LLVMValueRef call_libm(llvm_fn *f, const char *base, LLVMValueRef x, LLVMValueRef y) {
	llvm_cx *c = f->c;
	if (!c->hooks->libm && c->hooks->soft_math) return llvm_soft_math(c, base, x, y);
	if (!libm_allowed(f, base)) return NULL;
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
static LLVMValueRef ipow_fn(llvm_cx *c, bool is_unsigned, LLVMTypeRef *out_ty) {
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

LLVMValueRef llvm_unary(llvm_fn *f, const kir_expr *e) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMValueRef x = llvm_expr(f, e->a);
	if (!x) return NULL;
	tbc_dtype t = e->a->type;
	LLVMTypeRef ty = LLVMTypeOf(x);
	kir_unop op = (kir_unop)e->op;
	if (llvm_is_float(t)) {
		LLVMValueRef zero = LLVMConstReal(ty, 0.0), one = LLVMConstReal(ty, 1.0);
		/* f32 exp, log, tanh, erf: inline polynomials the vectorizer widens. */
		if (ty == c->f32 && (op == KIR_EXP || op == KIR_LOG || op == KIR_TANH || op == KIR_ERF))
			return llvm_math_f32(c, op, x);
		switch (op) {
		case KIR_NEG: return LLVMBuildFNeg(b, x, "");
		case KIR_ABS: return call_intrinsic1(f, "llvm.fabs", x);
		case KIR_SQRT: return call_intrinsic1(f, "llvm.sqrt", x);
		case KIR_EXP: return libm_intrinsic1(f, "llvm.exp", x);
		case KIR_LOG: return libm_intrinsic1(f, "llvm.log", x);
		case KIR_SIN: return libm_intrinsic1(f, "llvm.sin", x);
		case KIR_COS: return libm_intrinsic1(f, "llvm.cos", x);
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
			if (llvm_is_unsigned(t)) return x;
			return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, x, zero, ""), LLVMBuildSub(b, zero, x, ""), x, "");
		case KIR_NOT: return LLVMBuildNot(b, x, "");
		case KIR_SIGN:
			if (llvm_is_unsigned(t)) return LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntNE, x, zero, ""), ty, "");
			return LLVMBuildSub(b, LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntSGT, x, zero, ""), ty, ""),
					    LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntSLT, x, zero, ""), ty, ""), "");
		default: break;
		}
	}
	llvm_fail(c, TBC_ERR_INTERNAL, "unary %s of %s", kir_unop_name(op), kir_type_name(t));
	return NULL;
}

/* Integer division with kir_sem's results for 0 and -1 divisors. */
static LLVMValueRef safe_div(llvm_fn *f, LLVMValueRef x, LLVMValueRef y, bool u, bool rem) {
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

/* x^n for a constant exponent n of 2, 3 or 4 by products, on every LLVM
 * target (GELU's tanh form cubes, normalizations square): in f64 for an f32
 * x, where x*x is exact and one more product rounds once, so the result is
 * the correctly rounded power, as the interpreter's pow() gives, rounded
 * to f32; for an f64 x only the square, which is exact to one rounding.
 * Vectorizable, where powf is a libcall per element.  NULL otherwise. */
static LLVMValueRef pow_by_products(llvm_cx *c, LLVMValueRef x, LLVMValueRef y) {
	if (!LLVMIsAConstantFP(y)) return NULL;
	LLVMBool loses = 0;
	double n = LLVMConstRealGetDouble(y, &loses);
	LLVMTypeRef t = LLVMTypeOf(x);
	if (loses || !(n == 2 || ((n == 3 || n == 4) && t == c->f32))) return NULL;
	LLVMBuilderRef b = c->b;
	LLVMValueRef xd = t == c->f32 ? LLVMBuildFPExt(b, x, c->f64, "") : x;
	LLVMValueRef sq = LLVMBuildFMul(b, xd, xd, "");
	LLVMValueRef r = n == 2 ? sq : n == 3 ? LLVMBuildFMul(b, sq, xd, "") : LLVMBuildFMul(b, sq, sq, "");
	return t == c->f32 ? LLVMBuildFPTrunc(b, r, c->f32, "") : r;
}

LLVMValueRef llvm_float_arith(llvm_fn *f, kir_binop op, LLVMValueRef x, LLVMValueRef y) {
	LLVMBuilderRef b = f->c->b;
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
	default: return NULL;
	}
}

LLVMValueRef llvm_binary(llvm_fn *f, const kir_expr *e) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMValueRef x = llvm_expr(f, e->a), y = llvm_expr(f, e->b);
	if (!x || !y) return NULL;
	tbc_dtype t = e->a->type;
	LLVMTypeRef ty = LLVMTypeOf(x);
	kir_binop op = (kir_binop)e->op;
	if (llvm_is_float(t)) {
		LLVMValueRef v = llvm_float_arith(f, op, x, y);
		if (v) return v;
		switch (op) {
		case KIR_POW: {
			LLVMValueRef p = pow_by_products(c, x, y);
			return p ? p : libm_intrinsic2(f, "llvm.pow", x, y);
		}
		case KIR_ATAN2: return call_libm(f, "atan2", x, y);
		case KIR_FLOORDIV: return call_intrinsic1(f, "llvm.floor", LLVMBuildFDiv(b, x, y, ""));
		case KIR_FLOORMOD: {
			LLVMValueRef q = call_intrinsic1(f, "llvm.floor", LLVMBuildFDiv(b, x, y, ""));
			return LLVMBuildFSub(b, x, LLVMBuildFMul(b, q, y, ""), "");
		}
		default: break;
		}
	} else {
		bool u = llvm_is_unsigned(t);
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
			int bits = llvm_bits_of(t);
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
	llvm_fail(c, TBC_ERR_INTERNAL, "binary %s of %s", kir_binop_name(op), kir_type_name(t));
	return NULL;
}

LLVMValueRef llvm_compare(llvm_fn *f, const kir_expr *e) {
	LLVMBuilderRef b = f->c->b;
	LLVMValueRef x = llvm_expr(f, e->a), y = llvm_expr(f, e->b);
	if (!x || !y) return NULL;
	tbc_dtype t = e->a->type;
	if (llvm_is_float(t)) {
		static const LLVMRealPredicate p[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
						      LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
		return LLVMBuildFCmp(b, p[e->op], x, y, "");
	}
	static const LLVMIntPredicate s[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
	static const LLVMIntPredicate u[] = {LLVMIntEQ, LLVMIntNE, LLVMIntULT, LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
	return LLVMBuildICmp(b, llvm_is_unsigned(t) ? u[e->op] : s[e->op], x, y, "");
}

/* A clamp with NaN made a constant, the form quantization writes
 * (codegen/lower/quant.c): select(isnan(u), z, min(max(v, lo), hi)) or
 * select(isnan(u), z, max(min(v, hi), lo)), z, lo and hi constants. */
typedef struct {
	const kir_expr *u, *v; /* the value tested for NaN, the value clamped */
	double z, lo, hi;
} nan_clamp_form;

static bool nan_clamp_parse(const kir_expr *e, nan_clamp_form *out) {
	if (!e || e->kind != KIR_E_SELECT) return false;
	const kir_expr *nan = e->a, *z = e->b, *m = e->c;
	if (!nan || nan->kind != KIR_E_UNARY || nan->op != KIR_ISNAN || !z || z->kind != KIR_E_FLOAT) return false;
	if (!m || m->kind != KIR_E_BINARY || (m->op != KIR_MIN && m->op != KIR_MAX)) return false;
	const kir_expr *in = m->a, *k1 = m->b;
	int other = m->op == KIR_MIN ? KIR_MAX : KIR_MIN;
	if (!in || !k1 || in->kind != KIR_E_BINARY || in->op != other || k1->kind != KIR_E_FLOAT) return false;
	const kir_expr *k2 = in->b;
	if (!in->a || !k2 || k2->kind != KIR_E_FLOAT) return false;
	*out = (nan_clamp_form){.u = nan->a, .v = in->a, .z = z->f,
				.lo = m->op == KIR_MIN ? k2->f : k1->f, .hi = m->op == KIR_MIN ? k1->f : k2->f};
	return true;
}

/* Whether float e is NaN-free and within [lo, hi] by its form: the clamp
 * above with z and its bounds inside [lo, hi]. */
static bool clamped_within(const kir_expr *e, double lo, double hi) {
	nan_clamp_form c;
	if (!nan_clamp_parse(e, &c)) return false;
	return c.z >= lo && c.z <= hi && c.lo >= lo && c.lo <= hi && c.hi >= lo && c.hi <= hi;
}

/* The clamp above, with u the value clamped, lo <= hi, lo not -0.0 and hi
 * not +0.0: as compares and selects, which x86 does in one max and one min
 * each (where llvm.maximum / llvm.minimum, NaN-propagating, cost a compare
 * and masked ops more), and the NaN test only where z is not lo (a NaN v
 * takes lo from the first compare).  Equal to the kernel IR's meaning for
 * every v: on numbers the two clamps agree (lo's and hi's signs excluded
 * above are the only signed-zero ties that differ), and NaN gives z.
 * NULL: not this form. */
LLVMValueRef llvm_nan_clamp(llvm_fn *f, const kir_expr *e) {
	nan_clamp_form c;
	if ((e->type != TBC_DT_F32 && e->type != TBC_DT_F64) || !nan_clamp_parse(e, &c) || c.u != c.v) return NULL;
	double lo = c.lo, hi = c.hi;
	if (!(lo <= hi) || (lo == 0 && signbit(lo)) || (hi == 0 && !signbit(hi))) return NULL;
	LLVMValueRef x = llvm_expr(f, c.v);
	if (!x) return NULL;
	LLVMBuilderRef b = f->c->b;
	LLVMTypeRef t = LLVMTypeOf(x);
	LLVMValueRef clo = LLVMConstReal(t, lo), chi = LLVMConstReal(t, hi);
	LLVMValueRef r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, clo, ""), x, clo, "");
	r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, r, chi, ""), r, chi, "");
	if (c.z == lo && signbit(c.z) == signbit(lo)) return r;
	return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), LLVMConstReal(t, c.z), r, "");
}

/* ONNX Cast semantics (docs/kernel-ir.md): floats to integers truncate,
 * NaN is 0, out of range clamps to 64 bits and then wraps to the width. */
LLVMValueRef llvm_cast(llvm_fn *f, const kir_expr *e) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMValueRef x = llvm_expr(f, e->a);
	if (!x) return NULL;
	tbc_dtype from = e->a->type, to = e->type;
	LLVMTypeRef fty = LLVMTypeOf(x), tty = llvm_type(c, to);
	if (!tty) return NULL;
	if (from == to) return x;
	/* Narrow floats: decode to f32 (exact), then cast as from f32; to one:
	 * integers and bool go through f64 (tbc_store_i64 rounds (double)v),
	 * floats encode from their own value. */
	if (kir_type_is_narrow_float(from)) {
		x = e->op == KIR_CAST_ANY_NAN ? llvm_narrow_to_f32_any_nan(c, from, x) : llvm_narrow_to_f32(c, from, x);
		if (!x) return NULL;
		from = TBC_DT_F32;
		fty = c->f32;
		if (to == TBC_DT_F32) return x;
	}
	if (kir_type_is_narrow_float(to)) {
		if (!llvm_is_float(from)) {
			x = llvm_is_unsigned(from) ? LLVMBuildUIToFP(b, x, c->f64, "") : LLVMBuildSIToFP(b, x, c->f64, "");
		}
		return llvm_float_to_narrow(c, to, x, e->op != KIR_CAST_NO_SATURATE);
	}
	if (fty == tty && llvm_is_float(from) == llvm_is_float(to)) return x;
	if (to == TBC_DT_BOOL) {
		if (llvm_is_float(from)) return LLVMBuildFCmp(b, LLVMRealUNE, x, LLVMConstReal(fty, 0.0), "");
		return LLVMBuildICmp(b, LLVMIntNE, x, LLVMConstInt(fty, 0, 0), "");
	}
	if (llvm_is_float(from) && llvm_is_float(to))
		return llvm_bits_of(from) < llvm_bits_of(to) ? LLVMBuildFPExt(b, x, tty, "") : LLVMBuildFPTrunc(b, x, tty, "");
	if (!llvm_is_float(from) && llvm_is_float(to))
		return llvm_is_unsigned(from) ? LLVMBuildUIToFP(b, x, tty, "") : LLVMBuildSIToFP(b, x, tty, "");
	if (!llvm_is_float(from) && !llvm_is_float(to)) {
		if (from == TBC_DT_BOOL) return LLVMBuildZExt(b, x, tty, ""); /* an i1, however wide bool's storage */
		int fb = llvm_bits_of(from), tb = llvm_bits_of(to);
		if (fb == tb) return x;
		if (fb > tb) return LLVMBuildTrunc(b, x, tty, "");
		return llvm_is_unsigned(from) ? LLVMBuildZExt(b, x, tty, "") : LLVMBuildSExt(b, x, tty, "");
	}
	/* float -> integer */
	if (llvm_bits_of(to) <= 32 && to != TBC_DT_U32 && clamped_within(e->a, -2147483648.0, 2147483647.0)) {
		/* NaN-free and within int32 by its form (a quantized value): no
		 * saturation to pay for, and the conversion vectorizes
		 * (vcvttps2dq where the saturating one ran lane by lane) */
		LLVMValueRef r = LLVMBuildFPToSI(b, x, c->i32, "");
		return tty == c->i32 ? r : LLVMBuildTrunc(b, r, tty, "");
	}
	LLVMValueRef d = fty == c->f64 ? x : LLVMBuildFPExt(b, x, c->f64, "");
	LLVMTypeRef types[2] = {c->i64, c->f64};
	LLVMValueRef r = call_intrinsic(f, "llvm.fptosi.sat", types, 2, &d, 1);
	if (to == TBC_DT_U64) {
		LLVMValueRef big = LLVMBuildFCmp(b, LLVMRealOGE, d, LLVMConstReal(c->f64, 9223372036854775808.0), "");
		r = LLVMBuildSelect(b, big, call_intrinsic(f, "llvm.fptoui.sat", types, 2, &d, 1), r, "");
	}
	return tty == c->i64 ? r : LLVMBuildTrunc(b, r, tty, "");
}
