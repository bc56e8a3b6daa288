/* Shorthands for building kernel IR in the lowering files: one letter or
 * word per constructor of codegen/kir/kir.h, so that an index expression
 * reads like the formula it implements (ADD(k, MUL(k, n, C), c)).  Every
 * lowering file uses these; a file keeps a helper of its own only for what
 * is particular to it (a load widened to f64, ...). */
#ifndef TBC_CODEGEN_LOWER_KIR_SHORT_H
#define TBC_CODEGEN_LOWER_KIR_SHORT_H

#include "codegen/kir/kir.h"

/* Constants and variables. */
static inline kir_expr *I(kir_kernel *k, int64_t v) { return kir_e_index(k, v); }
static inline kir_expr *F(kir_kernel *k, tbc_dtype t, double v) { return kir_e_float(k, t, v); }
static inline kir_expr *V(kir_kernel *k, kir_var *v) { return kir_e_var(k, v); }

/* Arithmetic in the operands' type.  DIV and MOD are the floor division and
 * remainder of index arithmetic; FDIV is a float division. */
static inline kir_expr *BIN(kir_kernel *k, kir_binop op, kir_expr *a, kir_expr *b) { return kir_e_binary(k, op, a, b); }
static inline kir_expr *ADD(kir_kernel *k, kir_expr *a, kir_expr *b) { return kir_e_add(k, a, b); }
static inline kir_expr *SUB(kir_kernel *k, kir_expr *a, kir_expr *b) { return kir_e_binary(k, KIR_SUB, a, b); }
static inline kir_expr *MUL(kir_kernel *k, kir_expr *a, kir_expr *b) { return kir_e_mul(k, a, b); }
static inline kir_expr *DIV(kir_kernel *k, kir_expr *a, kir_expr *b) { return kir_e_binary(k, KIR_FLOORDIV, a, b); }
static inline kir_expr *MOD(kir_kernel *k, kir_expr *a, kir_expr *b) { return kir_e_binary(k, KIR_FLOORMOD, a, b); }
static inline kir_expr *FDIV(kir_kernel *k, kir_expr *a, kir_expr *b) { return kir_e_binary(k, KIR_DIV, a, b); }
static inline kir_expr *MIN(kir_kernel *k, kir_expr *a, kir_expr *b) { return kir_e_binary(k, KIR_MIN, a, b); }
static inline kir_expr *MAX(kir_kernel *k, kir_expr *a, kir_expr *b) { return kir_e_binary(k, KIR_MAX, a, b); }
static inline kir_expr *UN(kir_kernel *k, kir_unop op, kir_expr *a) { return kir_e_unary(k, op, a); }

/* An index clamped to [0, hi): a tap's position read where it may fall in
 * the padding (the value then unused, or a repeat of a valid one). */
static inline kir_expr *CLAMP(kir_kernel *k, kir_expr *x, int64_t hi) { return MIN(k, MAX(k, x, I(k, 0)), I(k, hi - 1)); }

/* Logic: AND, OR and NOT of bools (and bitwise of integers). */
static inline kir_expr *AND(kir_kernel *k, kir_expr *a, kir_expr *b) { return kir_e_binary(k, KIR_AND, a, b); }
static inline kir_expr *OR(kir_kernel *k, kir_expr *a, kir_expr *b) { return kir_e_binary(k, KIR_OR, a, b); }
static inline kir_expr *NOT(kir_kernel *k, kir_expr *a) { return kir_e_unary(k, KIR_NOT, a); }
static inline kir_expr *CMP(kir_kernel *k, kir_cmp c, kir_expr *a, kir_expr *b) { return kir_e_cmp(k, c, a, b); }
static inline kir_expr *SEL(kir_kernel *k, kir_expr *c, kir_expr *a, kir_expr *b) { return kir_e_select(k, c, a, b); }

/* A local variable of the kernel set to e in block b, read back: a value
 * used more than once is computed once. */
static inline kir_expr *LET(kir_kernel *k, kir_block *b, const char *name, kir_expr *e) {
	if (!e) {
		k->failed = true;
		return NULL;
	}
	kir_var *v = kir_var_new(k, name, e->type);
	kir_block_add(k, b, kir_s_set(k, v, e));
	return kir_e_var(k, v);
}

/* Types and memory. */
static inline kir_expr *CAST(kir_kernel *k, tbc_dtype t, kir_expr *a) { return kir_e_cast(k, t, a); }
static inline kir_expr *LOAD(kir_kernel *k, kir_buffer *b, kir_expr *i) { return kir_e_load(k, b, i); }
/* An element widened to f64, where a kernel computes in double. */
static inline kir_expr *LOAD_F64(kir_kernel *k, kir_buffer *b, kir_expr *i) {
	return kir_e_cast(k, TBC_DT_F64, kir_e_load(k, b, i));
}

#endif
