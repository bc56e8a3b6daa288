/* Between the files of codegen/llvm/; targets use llvm_kernel.h. */
#ifndef TBC_CODEGEN_LLVM_LLVM_EMIT_H
#define TBC_CODEGEN_LLVM_LLVM_EMIT_H

#include "codegen/llvm/llvm_kernel.h"

/* Floats the emitter computes with; narrow floats are their bits. */
static inline bool llvm_is_float(tbc_dtype t) {
	return t != KIR_INDEX && tbc_dtype_is_float(t) && !kir_type_is_narrow_float(t);
}
static inline bool llvm_is_unsigned(tbc_dtype t) {
	return t != KIR_INDEX && (tbc_dtype_is_unsigned(t) || t == TBC_DT_BOOL);
}
static inline int llvm_bits_of(tbc_dtype t) { return t == KIR_INDEX ? 64 : tbc_dtype_bits(t); }
static inline bool llvm_is_sub_byte_int(tbc_dtype t) {
	return t == TBC_DT_I4 || t == TBC_DT_U4 || t == TBC_DT_I2 || t == TBC_DT_U2;
}

/* The type a value of t has in memory (bool and sub-byte integers are a
 * byte each). */
LLVMTypeRef llvm_mem_type(llvm_cx *c, tbc_dtype t);
/* Forgets the expressions emitted so far (llvm_expr.c's memo): at the end
 * of a statement. */
void llvm_memo_clear(llvm_fn *f);
/* Puts a buffer load or store into f's access group when inside an
 * innermost parallel or vector loop. */
void llvm_mark_access(llvm_fn *f, LLVMValueRef inst);

/* A store statement s in two halves: its address and value (loads and
 * arithmetic; false after a diagnostic), then the store itself, so that
 * llvm_unroll.c can compute several iterations' values before storing any. */
bool llvm_store_operands(llvm_fn *f, const kir_stmt *s, LLVMValueRef *ptr, LLVMValueRef *value);
void llvm_store_emit(llvm_fn *f, const kir_stmt *s, LLVMValueRef ptr, LLVMValueRef value);

/* Loops of independent iterations unrolled with their loads first
 * (llvm_unroll.c).  Whether body can be: straight-line and small. */
#define LLVM_MAX_INTERLEAVE 8
bool llvm_can_interleave(const kir_stmt *body);
/* At the builder's position: while var + (n - 1) stride < hi, runs the n
 * iterations var, var + stride, ... with each statement of body emitted for
 * all n before the next (a store's loads and value for all n before its
 * stores), then var += n stride.  var's slot holds the first iteration
 * before and the first one not run after: the caller's loop runs the rest.
 * The iterations must be independent (a parallel loop's). */
void llvm_interleaved_loop(llvm_fn *f, const kir_var *var, LLVMValueRef hi, LLVMValueRef stride, int n,
			   const kir_stmt *body);

/* Scalar operations with kir_sem.h's results (llvm_arith.c). */
LLVMValueRef llvm_unary(llvm_fn *f, const kir_expr *e);
LLVMValueRef llvm_binary(llvm_fn *f, const kir_expr *e);
/* A float x op y of scalars or vectors alike, as llvm_binary emits it, for
 * + - * / % min max; NULL for other ops. */
LLVMValueRef llvm_float_arith(llvm_fn *f, kir_binop op, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef llvm_compare(llvm_fn *f, const kir_expr *e);
LLVMValueRef llvm_cast(llvm_fn *f, const kir_expr *e);
/* A NaN-to-constant clamp select(isnan(v), z, min(max(v, lo), hi)) as two
 * compare-selects (llvm_arith.c); NULL when e is not of that form. */
LLVMValueRef llvm_nan_clamp(llvm_fn *f, const kir_expr *e);

/* Narrow floats (llvm_narrow.c): held as their bits (i16 / i8); converted
 * exactly as ir/dtype.c converts. */
LLVMValueRef llvm_narrow_to_f32(llvm_cx *c, tbc_dtype t, LLVMValueRef bits);
/* The same value, a NaN with any payload and sign (KIR_CAST_ANY_NAN). */
LLVMValueRef llvm_narrow_to_f32_any_nan(llvm_cx *c, tbc_dtype t, LLVMValueRef bits);
/* x an f32 or f64 value; rounds once to nearest even.  saturate: float8
 * out of range gives the largest finite value (else infinity or NaN). */
LLVMValueRef llvm_float_to_narrow(llvm_cx *c, tbc_dtype t, LLVMValueRef x, bool saturate);
LLVMValueRef llvm_narrow_const(llvm_cx *c, tbc_dtype t, double v);

/* f32 exp, log, tanh and erf as inline polynomials (llvm_math.c); NULL for
 * other ops. */
LLVMValueRef llvm_math_f32(llvm_cx *c, kir_unop op, LLVMValueRef x);

/* libm's function fn ("sin", "pow", ...; y NULL for one argument) of an
 * f32 or f64 x, computed without libm (llvm_soft_math.c): for targets with
 * llvm_hooks.soft_math.  NULL after a diagnostic for a function it lacks. */
LLVMValueRef llvm_soft_math(llvm_cx *c, const char *fn, LLVMValueRef x, LLVMValueRef y);

#endif
