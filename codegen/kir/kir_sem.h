/* The scalar semantics of kernel IR operations where C (and LLVM) leave a
 * case undefined: division by zero, INT_MIN / -1, shifts by the width or
 * more, NaN in min/max.  The evaluator calls these; every backend emits code
 * that computes the same (docs/kernel-ir.md, "Semantics"). */
#ifndef TBC_CODEGEN_KIR_SEM_H
#define TBC_CODEGEN_KIR_SEM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* Integer division truncates; x / 0 is 0 and INT_MIN / -1 wraps. */
static inline int64_t kir_sem_sdiv(int64_t a, int64_t b) {
	if (b == 0) return 0;
	if (b == -1) return (int64_t)(0u - (uint64_t)a);
	return a / b;
}
static inline uint64_t kir_sem_udiv(uint64_t a, uint64_t b) { return b ? a / b : 0; }
/* The remainder has the sign of a; x % 0 is 0. */
static inline int64_t kir_sem_srem(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }
static inline uint64_t kir_sem_urem(uint64_t a, uint64_t b) { return b ? a % b : 0; }
/* Floor division and modulo (index math): the remainder has the sign of b. */
static inline int64_t kir_sem_floordiv(int64_t a, int64_t b) {
	int64_t q = kir_sem_sdiv(a, b), r = kir_sem_srem(a, b);
	return r != 0 && ((r < 0) != (b < 0)) ? q - 1 : q;
}
static inline int64_t kir_sem_floormod(int64_t a, int64_t b) {
	int64_t r = kir_sem_srem(a, b);
	return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
/* Exact wrapping power; a negative exponent gives the truncated real result. */
static inline int64_t kir_sem_ipow(int64_t base, int64_t e) {
	if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
	uint64_t r = 1, b = (uint64_t)base;
	while (e) {
		if (e & 1) r *= b;
		b *= b;
		e >>= 1;
	}
	return (int64_t)r;
}
static inline uint64_t kir_sem_upow(uint64_t b, uint64_t e) {
	uint64_t r = 1;
	while (e) {
		if (e & 1) r *= b;
		b *= b;
		e >>= 1;
	}
	return r;
}
/* Shifts by a negative amount or by bits or more give what the sign
 * extension alone gives.  a holds the value extended from bits. */
static inline int64_t kir_sem_shl(int64_t a, int64_t s, bool is_unsigned, int bits) {
	if ((is_unsigned ? (uint64_t)s >= (uint64_t)bits : (s < 0 || s >= bits))) return 0;
	return (int64_t)((uint64_t)a << s);
}
static inline int64_t kir_sem_shr(int64_t a, int64_t s, bool is_unsigned, int bits) {
	if ((is_unsigned ? (uint64_t)s >= (uint64_t)bits : (s < 0 || s >= bits))) return !is_unsigned && a < 0 ? -1 : 0;
	if (is_unsigned) return (int64_t)((uint64_t)a >> s);
	return a < 0 ? ~(~a >> s) : a >> s;
}
/* Float min/max propagate NaN and order -0 below +0 (LLVM's minimum and
 * maximum, numpy's minimum and maximum). */
static inline double kir_sem_fmin(double x, double y) {
	if (isnan(x) || isnan(y)) return NAN;
	if (x == y) return signbit(x) ? x : y;
	return x < y ? x : y;
}
static inline double kir_sem_fmax(double x, double y) {
	if (isnan(x) || isnan(y)) return NAN;
	if (x == y) return signbit(x) ? y : x;
	return x > y ? x : y;
}

#endif
