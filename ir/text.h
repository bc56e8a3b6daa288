/* Pieces the text-form printer and parser share: what a bare name is, and
 * how one tensor element is written and read.  The printer uses the
 * parser's element reader to check that every element it writes in
 * readable form reads back to the same bytes; when one would not, it writes
 * the whole tensor as hex, so constants always round-trip bit-exactly. */
#ifndef TBC_IR_TEXT_H
#define TBC_IR_TEXT_H
#include <stdbool.h>
#include <stddef.h>

#include "ir.h"

/* Tensors with at most this many elements print readable; larger ones as hex. */
#define TBC_TEXT_READABLE_MAX 32

/* [A-Za-z_][A-Za-z0-9_./-]* : printed without quotes. */
bool tbc_text_is_bare(const char *s, size_t n);
bool tbc_text_is_bare_start(int c);
bool tbc_text_is_bare_char(int c);

/* Reads the literal tok (n bytes: a decimal integer or float, inf, -inf, nan,
 * true, false) as element i of a dtype buffer.  False (with *why set) when
 * it is malformed or out of range for dt. */
bool tbc_text_store_elem(tbc_dtype dt, void *base, size_t i, const char *tok, size_t n, const char **why);

#endif
