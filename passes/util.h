/* What several passes need: moving ops in a graph's list, finding which
 * values graphs return, replacing a value everywhere it is read, and telling
 * which ops have effects beyond their results.  Internal to passes/. */
#ifndef TBC_PASSES_UTIL_H
#define TBC_PASSES_UTIL_H

#include "ir/ir.h"

/* Takes op out of its graph's list, leaving its inputs' use lists alone. */
void pass_unlink(tbc_op *op);
/* Removes op (whose results nobody reads) and drops every use that it and
 * the ops of its subgraphs make. */
void pass_remove_op(tbc_op *op);
/* Puts an unlinked op into before's graph, just before / after it. */
void pass_insert_before(tbc_op *op, tbc_op *before);
void pass_insert_after(tbc_op *op, tbc_op *after);

/* The op of g that is op or holds op in one of its subgraphs; NULL when op
 * is not inside g. */
tbc_op *pass_top_op(const tbc_graph *g, tbc_op *op);

/* Calls fn on g and every graph nested in it, inner graphs before the op
 * that owns them is visited by the caller's own walk (pre-order: g first). */
typedef bool (*pass_graph_fn)(tbc_graph *g, void *ctx);
bool pass_each_graph(tbc_graph *g, pass_graph_fn fn, void *ctx);

/* true when some graph of the module returns v (graph outputs are not uses). */
bool pass_is_returned(const tbc_module *m, const tbc_value *v);
/* true when v is an output of the main graph: its name is the model's
 * interface and must not change. */
bool pass_is_model_output(const tbc_module *m, const tbc_value *v);

/* Makes every reader of from (ops, and graphs returning it) read to. */
void pass_replace_value(tbc_module *m, tbc_value *from, tbc_value *to);

/* true when op (or an op in its subgraphs) must run even if its results are
 * unused, or may give different results run twice: Dropout in training mode. */
bool pass_has_effects(const tbc_op *op);
bool pass_has_graph_attr(const tbc_op *op);

/* true for a QuantizeLinear or DequantizeLinear that is elementwise: one
 * scale and at most one zero point for the whole tensor (static, one
 * element), no blocks, between f32 and an 8- or 16-bit integer type (or
 * int32, dequantized), the quotient in f32.  Fusion merges such ops into
 * loop nests; codegen/lower/elementwise.c computes them per element. */
bool pass_qdq_elementwise(const tbc_op *op);

/* Bytes of v's data when its shape is static (sub-byte types take one byte
 * per element, as tbc stores them); -1 otherwise. */
int64_t pass_value_bytes(const tbc_value *v);

bool pass_same_type(const tbc_type *a, const tbc_type *b);

/* A growable bitset over value ids. */
typedef struct pass_bits {
	uint8_t *bits;
	uint32_t n;
} pass_bits;
bool pass_bits_get(const pass_bits *b, uint32_t i);
bool pass_bits_set(pass_bits *b, uint32_t i); /* false when out of memory */
void pass_bits_free(pass_bits *b);

/* A map from pointers (ops) to ints. */
typedef struct pass_ptrmap {
	const void **keys;
	int *vals;
	size_t cap;
} pass_ptrmap;
bool pass_map_init(pass_ptrmap *mp, size_t n); /* room for n keys; false when out of memory */
void pass_map_put(pass_ptrmap *mp, const void *k, int v);
int pass_map_get(const pass_ptrmap *mp, const void *k); /* -1 when absent */
void pass_map_free(pass_ptrmap *mp);

#endif
