/* Symbolic dims that are expressions of other symbols (docs/symbolic-shapes.md).
 *
 * A derived dim is a polynomial with integer coefficients over plain symbols
 * (a graph input's `batch`, a fresh `_d3`): `past_seq + seq`, `batch*seq`,
 * `2*seq - 1`.  Its canonical text is its symbol name, so two paths to one
 * polynomial give one name and tbc_dim_eq holds: the name is the definition,
 * and every layer reads it back with tbc_poly_parse. */
#ifndef TBC_IR_SYMDIM_H
#define TBC_IR_SYMDIM_H

#include "ir.h"

#define TBC_POLY_MAX_TERMS 8
#define TBC_POLY_MAX_DEGREE 4
#define TBC_POLY_MAX_ATOMS 8
#define TBC_POLY_POOL 256

typedef struct tbc_poly_term {
	int64_t coeff; /* never 0 */
	int degree;
	uint8_t atoms[TBC_POLY_MAX_DEGREE]; /* indices into the atom table, sorted by name */
} tbc_poly_term;

/* A value type (copyable): atom names live in its own pool.  Terms are kept
 * canonical: no two with the same atoms, sorted by degree (highest first)
 * then by atom names; the constant last.  No terms: the polynomial 0. */
typedef struct tbc_poly {
	int n_terms;
	tbc_poly_term terms[TBC_POLY_MAX_TERMS];
	int n_atoms;
	uint16_t atom_off[TBC_POLY_MAX_ATOMS];
	int pool_used;
	char pool[TBC_POLY_POOL];
} tbc_poly;

static inline const char *tbc_poly_atom_name(const tbc_poly *p, int i) { return p->pool + p->atom_off[i]; }

void tbc_poly_const(tbc_poly *p, int64_t c);
/* false when the name does not fit. */
bool tbc_poly_atom(tbc_poly *p, const char *name);
/* The polynomial a symbol name stands for: its parse when the name is the
 * canonical text of a compound polynomial, otherwise the name as one atom. */
bool tbc_poly_of_sym(const char *sym, tbc_poly *p);
/* A static dim is its size; a symbolic one tbc_poly_of_sym; false for a dim
 * neither static nor named. */
bool tbc_poly_of_dim(tbc_dim d, tbc_poly *p);
/* Arithmetic; false when the result would overflow int64 or the size limits
 * above (the caller then knows nothing, e.g. makes a fresh dim). */
bool tbc_poly_add(const tbc_poly *a, const tbc_poly *b, int64_t sign, tbc_poly *out);
bool tbc_poly_mul(const tbc_poly *a, const tbc_poly *b, tbc_poly *out);
/* a / b when b divides a exactly as polynomials (b a single term dividing
 * every term of a, or a a constant multiple of b); false otherwise. */
bool tbc_poly_div_exact(const tbc_poly *a, const tbc_poly *b, tbc_poly *out);
bool tbc_poly_is_const(const tbc_poly *p, int64_t *c);
bool tbc_poly_eq(const tbc_poly *a, const tbc_poly *b);
/* Every coefficient >= 0: the value is >= 0 whatever the (non-negative)
 * symbols are. */
bool tbc_poly_nonneg(const tbc_poly *p);
/* The canonical text; false when it does not fit in size bytes. */
bool tbc_poly_print(const tbc_poly *p, char *buf, size_t size);
/* Parses text written as tbc_poly_print writes it (and any sum of products
 * of integers and names); false on anything else. */
bool tbc_poly_parse(const char *text, tbc_poly *p);
/* Whether sym names a compound polynomial (not a plain symbol). */
bool tbc_sym_is_derived(const char *sym);
/* The value given each atom's value from lookup (which returns false for an
 * atom it does not know); false when an atom is unknown or on overflow. */
bool tbc_poly_eval(const tbc_poly *p, bool (*lookup)(void *ctx, const char *atom, int64_t *value), void *ctx,
		   int64_t *out);

/* The dim p is, its name in m's arena: static for a constant >= 0, the atom
 * for a plain symbol, a derived symbol otherwise.  {-1, NULL} for a negative
 * constant or when out of memory. */
tbc_dim tbc_dim_of_poly(tbc_module *m, const tbc_poly *p);
/* a + sign*b, a*b and a/b (exact) as dims; {-1, NULL} when not representable. */
tbc_dim tbc_dim_add(tbc_module *m, tbc_dim a, tbc_dim b, int64_t sign);
tbc_dim tbc_dim_mul(tbc_module *m, tbc_dim a, tbc_dim b);
tbc_dim tbc_dim_div_exact(tbc_module *m, tbc_dim a, tbc_dim b);

#endif
