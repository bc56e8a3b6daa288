/* Bump allocator owned by a module: IR objects are never freed one by one. */
#ifndef TBC_IR_ARENA_H
#define TBC_IR_ARENA_H
#include <stddef.h>

typedef struct tbc_arena tbc_arena;

tbc_arena *tbc_arena_create(void);
void tbc_arena_destroy(tbc_arena *a);
/* Zeroed, 16-byte aligned; NULL when the size overflows or memory runs out. */
void *tbc_arena_alloc(tbc_arena *a, size_t size);
/* n * size bytes, checked for overflow. */
void *tbc_arena_array(tbc_arena *a, size_t n, size_t size);
char *tbc_arena_strdup(tbc_arena *a, const char *s);
char *tbc_arena_strndup(tbc_arena *a, const char *s, size_t n);
/* The formatted string, whole however long (no truncation); NULL when memory runs out. */
char *tbc_arena_printf(tbc_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Total bytes handed out, for statistics. */
size_t tbc_arena_used(const tbc_arena *a);

#endif
