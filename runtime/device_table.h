/* The device program table of an artifact (include/tbc/abi.h, device_code):
 * read and checked once at load (device_table.c) into the structs below, so
 * the code that runs it (device_session.c) reads checked copies only. */
#ifndef TBCRT_DEVICE_TABLE_H
#define TBCRT_DEVICE_TABLE_H

#include "device.h"

/* Limits on what a table may declare (docs/opencl.md). */
#define TBCRT_MAX_DEVICE_TABLE (1ull << 32) /* bytes of one table */
#define TBCRT_MAX_EXPR_OPS 256              /* operations of one grid expression */

typedef struct tbcrt__dbuf {
	int32_t role, dtype, io_index, alias_of, part;
	uint32_t flags, rank;
	int64_t offset, part_offset;
	int64_t dims[TBCRT_MAX_RANK]; /* >= 0 static, -1 - s: symbol s */
} tbcrt__dbuf;

#define TBCRT__DBUF_DYNAMIC 1u
#define TBCRT__DBUF_KEEP 2u

typedef struct tbcrt__dpart {
	int64_t bytes;
	uint32_t n_syms;
	int32_t syms[TBCRT_MAX_RANK];
} tbcrt__dpart;

typedef struct tbcrt__dexpr {
	uint32_t n;    /* (op, value) pairs */
	int64_t *ops;
} tbcrt__dexpr;

typedef struct tbcrt__dkernel {
	char *name;
	uint32_t n_buffers, n_sizes;
	/* The launch geometry (include/tbc/abi.h): shape 0 one work-item, 1 a
	 * grid-stride loop, 2 work-groups; per dim the loop's step and bounds
	 * and the work-group size (0: any). */
	int32_t shape;
	uint32_t n_dims;
	int64_t step[3];
	tbcrt__dexpr lo[3], hi[3];
	uint32_t local[3];
	uint8_t *stored; /* per buffer */
	/* Per buffer: element bytes, rank and dims as the kernel sees them (the
	 * bytes it may touch, checked against what a launch binds). */
	uint32_t *elem_bytes, *rank;
	tbcrt__dexpr *dims; /* n_buffers * TBCRT_MAX_RANK */
	uint32_t n_messages;
	char **messages;
} tbcrt__dkernel;

typedef struct tbcrt__dlaunch {
	int32_t ctl, ctl_sym[3], kernel;
	int32_t match; /* the matching marker (kir_program_match), -1 for kernels */
	int32_t *args, *syms;
} tbcrt__dlaunch;

typedef struct tbcrt__dtable {
	struct tbcrt__dblock *blocks; /* everything below, freed at once */
	int32_t kind;   /* TBC_ABI_DEVICE_* */
	char target[48]; /* "opencl", "cuda:sm_80", "rocm:gfx942" */
	char *source;
	size_t source_size;
	char *options;
	/* Table version 3: the source assembled for the options' architecture
	 * (a PTX table's cubin: an ELF object); NULL and 0 when none. */
	char *binary;
	size_t binary_size;
	uint32_t n_syms;
	int32_t syms_buf;
	uint32_t n_bufs, n_parts, n_inputs, n_outputs, n_kernels, n_launches;
	tbcrt__dbuf *bufs;
	tbcrt__dpart *parts;
	int32_t *inputs, *outputs;
	tbcrt__dkernel *kernels;
	tbcrt__dlaunch *launches;
	uint64_t source_hash; /* FNV-1a 64 of the source, for messages */
} tbcrt__dtable;

/* Reads and checks the table (bytes of it) against the model m (its inputs,
 * outputs, symbols and weights already checked); TBCRT_ERR_INVALID_ARTIFACT
 * or TBCRT_ERR_LIMIT saying what is wrong. */
tbcrt_status tbcrt__dtable_read(const tbcrt_model *m, const void *bytes, uint64_t size, tbcrt__dtable **out_table);
void tbcrt__dtable_free(const tbcrt_context *c, tbcrt__dtable *t);
/* Reads the artifact's device code (include/tbc/abi.h, device_code: one
 * table or a directory of them) into m->dtables. */
tbcrt_status tbcrt__dcode_read(tbcrt_model *m, const void *bytes, uint64_t size);
/* The table that runs on the device described by info, NULL when the
 * artifact holds none: OpenCL C for an OpenCL device; for a CUDA device the
 * PTX of the newest architecture the device runs (sm_XY runs on compute
 * capability X.Y and later; sm_90a on 9.0 only); for a HIP device the code
 * object of its processor. */
const tbcrt__dtable *tbcrt__dtable_for(const tbcrt_model *m, const tbcrt_device_info *info);
/* Whether table t's cubin (t->binary) runs on the CUDA device described by
 * info: a cubin for sm_XY runs on compute capability X.Y' with the same
 * major X and Y' >= Y, one for sm_XYa on X.Y only.  False when t has
 * none; the device then JIT-compiles the PTX. */
bool tbcrt__dtable_cubin_runs(const tbcrt__dtable *t, const tbcrt_device_info *info);

/* "OpenCL C source", "PTX", "AMDGPU code object"; NULL for a kind the
 * runtime does not run. */
const char *tbcrt__dtable_kind_name(int32_t kind);
/* Bytes of buffer b given the symbols; false when a symbol is negative or
 * the size passes the 1 TiB limit. */
bool tbcrt__dbuf_bytes(const tbcrt__dtable *t, const tbcrt__dbuf *b, const int64_t *syms, uint64_t *out);
/* Frees what the model holds on devices (model.c, at destroy). */
void tbcrt__dmodels_free(tbcrt_model *m);

/* ---- device_session.c: running the table on a device ---- */
typedef struct tbcrt__dsession tbcrt__dsession;
/* Opens what the model needs on device d (the program built or found in the
 * cache, its kernels, the weights uploaded: once per model and device) and a
 * session's state there. */
tbcrt_status tbcrt__dsession_create(tbcrt_model *m, tbcrt__device *d, tbcrt__dsession **out);
void tbcrt__dsession_destroy(tbcrt__dsession *s);
/* What the device loaded, for tbcrt_session_stats.device_code: "cuda:sm_80
 * cubin", "cuda:sm_80 PTX (JIT)", "opencl OpenCL C source", ...; lives as
 * long as the model. */
const char *tbcrt__dsession_loaded(const tbcrt__dsession *s);
/* One run: syms holds the inputs' and the derived symbols (the computed ones
 * -1); in[i] the inputs' bytes; out[i] the host memory of each output of
 * known size, and for a data-dependent one it is set to memory from
 * alloc(alloc_ctx, bytes) holding it. */
tbcrt_status tbcrt__dsession_run(tbcrt__dsession *s, int64_t *syms, const void *const *in, void **out,
				 void *(*alloc)(void *ctx, uint64_t bytes), void *alloc_ctx);
/* A training step's state piece k (tbcrt_state_info), which stays on the
 * device between runs: its value now, read into dst or written from src
 * (the piece's bytes). */
tbcrt_status tbcrt__dsession_state_read(tbcrt__dsession *s, uint32_t k, void *dst);
tbcrt_status tbcrt__dsession_state_write(tbcrt__dsession *s, uint32_t k, const void *src);
/* After a successful run (of the session as a whole): what the run wrote
 * becomes what the next one reads. */
void tbcrt__dsession_state_commit(tbcrt__dsession *s);
/* Profiling (tbcrt_session_set_profiling): on clears the totals; a device
 * without events is TBCRT_ERR_UNSUPPORTED_TARGET. */
tbcrt_status tbcrt__dsession_set_profiling(tbcrt__dsession *s, bool on);
/* The totals: the runs and their device time always; with kernel <
 * n_kernels also that kernel's name, launches and time (UINT32_MAX: none). */
tbcrt_status tbcrt__dsession_profile(const tbcrt__dsession *s, uint32_t kernel, const char **out_name,
				     uint64_t *out_launches, double *out_ms, uint64_t *out_runs, double *out_device_ms,
				     uint32_t *out_n_kernels);

#endif
