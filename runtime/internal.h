/* Private to libtbcrt: the objects behind the public handles and the pieces
 * the files share.  Nothing here is visible to applications. */
#ifndef TBCRT_INTERNAL_H
#define TBCRT_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "tbc/runtime.h"

/* Limits on what a descriptor may declare (docs/runtime.md). */
#define TBCRT_MAX_TENSORS 65536       /* inputs, outputs or symbols of one model */
#define TBCRT_MAX_NAME 4096           /* bytes of one name or string, NUL excluded */
#define TBCRT_MAX_TENSOR_BYTES (1ull << 40) /* one input, output or arena: 1 TiB */
#define TBCRT_ARENA_ALIGN 64
#define TBCRT_MAX_SYM_POLY (1 << 20) /* entries of the derived symbols' table */
#define TBCRT_MAX_POLY_TERMS 64      /* terms of one derived symbol's polynomial */
#define TBCRT_MAX_POLY_DEGREE 16     /* symbols in one term */

/* ---- status.c ---- */
tbcrt_status tbcrt__ok(void);
tbcrt_status tbcrt__err(tbcrt_code code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
tbcrt_status tbcrt__verr(tbcrt_code code, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Prefixes "what: " to an error's message. */
tbcrt_status tbcrt__wrap(tbcrt_status s, const char *what);
/* v * w <= limit, without overflow. */
bool tbcrt__mul_within(uint64_t v, uint64_t w, uint64_t limit, uint64_t *out);

/* ---- pool.c: the thread pool behind host->parallel_for ---- */
typedef struct tbcrt_pool tbcrt_pool;
typedef struct tbcrt_context tbcrt_context;
/* threads counts the calling thread: threads - 1 workers are started. */
tbcrt_status tbcrt__pool_create(const tbcrt_context *c, uint32_t threads, tbcrt_pool **out_pool);
void tbcrt__pool_destroy(const tbcrt_context *c, tbcrt_pool *pool);
tbcrt_status tbcrt__pool_resize(const tbcrt_context *c, tbcrt_pool *pool, uint32_t threads);
uint32_t tbcrt__pool_threads(const tbcrt_pool *pool);
void tbcrt__pool_parallel_for(tbcrt_pool *pool, void (*body)(void *, int64_t, int64_t), void *closure, int64_t n,
			      int64_t grain);
uint32_t tbcrt__online_cpus(void);

/* ---- context.c ---- */
struct tbcrt__registry;
struct tbcrt_context {
	atomic_int refs;
	tbcrt_allocator allocator;
	tbcrt_pool *pool;
	/* The devices (device.c), found on first use under devices_lock. */
	pthread_mutex_t devices_lock;
	struct tbcrt__registry *devices;
};
void tbcrt__context_retain(tbcrt_context *c);
void tbcrt__context_release(tbcrt_context *c);
void *tbcrt__alloc(const tbcrt_context *c, size_t bytes, size_t alignment);
void *tbcrt__calloc(const tbcrt_context *c, size_t n, size_t size);
void tbcrt__free(const tbcrt_context *c, void *p);
char *tbcrt__strdup(const tbcrt_context *c, const char *s);

/* ---- cpu.c: what the host is and can do ---- */
/* "x86_64-linux", ... */
const char *tbcrt__host_description(void);
/* TBCRT_OK when code for triple runs here. */
tbcrt_status tbcrt__check_triple(const char *triple);
/* TBCRT_OK when the host has every "+feature" of the list. */
tbcrt_status tbcrt__check_features(const char *features);
/* Whether the host has one feature (LLVM's name); -1 when the runtime does
 * not know the name. */
int tbcrt__host_has_feature(const char *name);

/* ---- memcheck.c: where a loaded object's memory lies ----
 * Pointers in a descriptor are checked against the segments of the object
 * that holds it, so a corrupt descriptor cannot make the runtime read outside
 * the artifact.  When the descriptor lies in no loaded object (built at run
 * time, as the tests and the fuzzer do), nothing can be checked this way. */
#define TBCRT_MAX_SEGMENTS 32
typedef struct tbcrt_segments {
	int count; /* 0: unknown, every range is accepted */
	struct {
		uintptr_t lo, hi;
		bool exec;
	} seg[TBCRT_MAX_SEGMENTS];
} tbcrt_segments;
/* The segments of the loaded object that contains addr; count 0 when none. */
void tbcrt__segments_of(const void *addr, tbcrt_segments *out);
bool tbcrt__range_ok(const tbcrt_segments *s, const void *p, uint64_t bytes);
bool tbcrt__code_ok(const tbcrt_segments *s, const void *fn);
/* A NUL-terminated string of at most max bytes lying in the object. */
bool tbcrt__string_ok(const tbcrt_segments *s, const char *p, size_t max);

/* ---- elf.c: a look at a shared object before dlopen ---- */
tbcrt_status tbcrt__elf_precheck(const char *path);

/* ---- weights.c ---- */
uint64_t tbcrt__fnv1a64(const void *data, uint64_t bytes);
/* The weights hash of a descriptor of abi_version (include/tbc/abi.h):
 * XXH64 from version 7, FNV-1a 64 before; and that hash's name for
 * messages. */
uint64_t tbcrt__weights_hash(uint32_t abi_version, const void *data, uint64_t bytes);
const char *tbcrt__weights_hash_name(uint32_t abi_version);
/* Maps file (relative to dir, inside it) read-only; checks size and hash
 * (the hash of abi_version). */
tbcrt_status tbcrt__weights_map(const char *dir, const char *file, uint64_t bytes, uint32_t abi_version, uint64_t hash,
				void **out_map, size_t *out_map_size);

/* ---- model.c / validate.c ---- */
typedef struct tbcrt__tensor {
	char *name;
	int32_t dtype;
	uint32_t rank;
	int64_t dims[TBCRT_MAX_RANK];   /* -1 where symbolic */
	int32_t sym[TBCRT_MAX_RANK];    /* symbol index where symbolic, else -1 */
	const char *sym_names[TBCRT_MAX_RANK];
	bool data_dependent;
} tbcrt__tensor;

struct tbcrt_model {
	atomic_int refs;
	tbcrt_context *context;
	const tbc_abi_model *desc; /* for run, arena_bytes and embedded weights */
	void *dl;                  /* dlopen handle, or NULL */
	char *name, *target_triple, *cpu_features;
	uint32_t n_inputs, n_outputs, n_syms;
	tbcrt__tensor *inputs, *outputs;
	char **sym_names;
	uint8_t *sym_computed;
	int32_t *sym_derived; /* checked copies of the descriptor's tables (NULL: none derived) */
	int64_t *sym_poly;
	const void *weights; /* embedded or mapped */
	uint64_t weights_size;
	void *weights_map;
	size_t weights_map_size;
	bool weights_external;
	/* ABI 3: the device program tables, checked (device_table.h), one per
	 * device target; none when the artifact holds no device code.  has_cpu_code: run and arena_bytes
	 * are set.  dmodels: what the model holds on each device it ran on (the
	 * built program, its kernels, the uploaded weights), under device_lock. */
	struct tbcrt__dtable **dtables;
	uint32_t n_dtables;
	char device_targets[TBC_ABI_MAX_DEVICE_TABLES * 48];
	bool has_cpu_code;
	/* ABI 5: the load-time values' init (NULL when none, or an older
	 * artifact) and the arena bytes [init_begin, init_end) it fills. */
	int32_t (*init)(const tbc_abi_host *host, void *arena, const void *weights);
	uint64_t init_begin, init_end;
	/* ABI 6: a training step's state, checked (validate.c); state_of_input
	 * and state_of_output give an entry's index, -1 for the others. */
	uint32_t n_state;
	tbc_abi_state *state;
	int32_t *state_of_input, *state_of_output;
	pthread_mutex_t device_lock;
	struct tbcrt__dmodel *dmodels;
};

/* Checks the descriptor and copies what it declares into m (whose context is
 * set).  base_dir: where the external weights file lives, or NULL. */
tbcrt_status tbcrt__model_adopt(tbcrt_model *m, const tbc_abi_model *d, const char *base_dir);
void tbcrt__model_retain(tbcrt_model *m);
void tbcrt__model_release(tbcrt_model *m);

#endif
