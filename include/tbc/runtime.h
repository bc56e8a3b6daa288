/* libtbcrt: runs models tbc compiled.  Plain C, no LLVM; links only libc,
 * libm, pthread and dl.
 *
 *   tbcrt_context   an allocator and a thread pool, shared by everything
 *                   created from it
 *   tbcrt_model     one loaded artifact: a shared object loaded by path, or a
 *                   descriptor the application linked in (.o + .h)
 *   tbcrt_session   one invocation's state: bound input and output buffers,
 *                   the scratch arena, outputs the runtime allocated
 *   devices         what this machine can run on: the CPU, OpenCL devices,
 *                   CUDA and HIP drivers (found with dlopen, never linked)
 *
 * An artifact is untrusted input: a corrupt, truncated or mismatched one is
 * refused with a status that says why.  Every function that can fail returns
 * a tbcrt_status; its code is TBCRT_OK on success and its message says what
 * went wrong otherwise.  Handles are reference counted internally, so they
 * may be destroyed in any order; a handle is used by one thread at a time,
 * except a context, which any number of sessions may share across threads.
 * docs/runtime.md describes the design. */
#ifndef TBC_RUNTIME_H
#define TBC_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tbc/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TBCRT_MUST_CHECK __attribute__((warn_unused_result))
#else
#define TBCRT_MUST_CHECK
#endif

#define TBCRT_VERSION_STRING "0.1.0"
#define TBCRT_MAX_RANK 16

/* ---- Status ---------------------------------------------------------------
 * Values are explicit and never renumbered. */
typedef enum tbcrt_code {
	TBCRT_OK = 0,
	TBCRT_ERR_INVALID_ARGUMENT = 1, /* the caller passed something wrong */
	TBCRT_ERR_NO_MEMORY = 2,
	TBCRT_ERR_IO = 3,               /* a file cannot be opened, read or mapped */
	TBCRT_ERR_INVALID_ARTIFACT = 4, /* not an artifact, corrupt, truncated or inconsistent */
	TBCRT_ERR_ABI_VERSION = 5,      /* an artifact of another ABI version */
	TBCRT_ERR_UNSUPPORTED_TARGET = 6, /* another target triple, or CPU features the host lacks */
	TBCRT_ERR_DTYPE_MISMATCH = 7,   /* a bound buffer's dtype is not the model's */
	TBCRT_ERR_SHAPE_MISMATCH = 8,   /* a bound buffer's shape or size does not fit the model */
	TBCRT_ERR_NOT_READY = 9,        /* an input is not bound, or outputs asked before a run */
	TBCRT_ERR_RUN_FAILED = 10,      /* the model reported an error while running */
	TBCRT_ERR_LIMIT = 11,           /* a documented limit of the runtime is exceeded */
	TBCRT_ERR_DEVICE_UNAVAILABLE = 12, /* no such device here, or its driver is missing */
	TBCRT_ERR_BUILD_FAILED = 13,    /* a device program did not build; the message holds the build log */
	TBCRT_ERR_DEVICE = 14           /* a device or driver call failed; the message names it and its error */
} tbcrt_code;

#define TBCRT_STATUS_MESSAGE_SIZE 512

/* Returned by value: nothing to free, and it works when memory runs out.  The
 * message is NUL-terminated (truncated to fit) and empty on success. */
typedef struct tbcrt_status {
	tbcrt_code code;
	char message[TBCRT_STATUS_MESSAGE_SIZE];
} tbcrt_status;

static inline bool tbcrt_status_is_ok(const tbcrt_status *s) { return s->code == TBCRT_OK; }
/* "ok", "invalid argument", ... */
const char *tbcrt_code_name(tbcrt_code code);

/* ---- Element types --------------------------------------------------------
 * dtype values are ONNX's TensorProto.DataType numbers (tbc_dtype).  Sub-byte
 * types (int4, uint4, float4e2m1, int2, uint2) hold one element per byte. */
/* Bytes per element, 0 for a dtype compiled code cannot hold (string, unknown). */
size_t tbcrt_dtype_size(int32_t dtype);
/* "float32", ...; "unknown" for anything else. */
const char *tbcrt_dtype_name(int32_t dtype);

/* ---- Context --------------------------------------------------------------*/
typedef struct tbcrt_context tbcrt_context;

/* Memory the runtime takes for itself, for arenas and for outputs.  alignment
 * is a power of two (at most 4096); free receives what alloc returned, or
 * NULL.  Both NULL: the C library (aligned_alloc and free). */
typedef struct tbcrt_allocator {
	void *user;
	void *(*alloc)(void *user, size_t bytes, size_t alignment);
	void (*free)(void *user, void *ptr);
} tbcrt_allocator;

typedef struct tbcrt_context_options {
	/* Threads that run a model's parallel loops, the calling thread included;
	 * 0: one per online CPU.  At most TBCRT_MAX_THREADS. */
	uint32_t thread_count;
	tbcrt_allocator allocator;
} tbcrt_context_options;

#define TBCRT_MAX_THREADS 1024

/* Defaults: thread_count 0, the C library's allocator. */
void tbcrt_context_options_init(tbcrt_context_options *options);
/* options NULL: the defaults. */
TBCRT_MUST_CHECK tbcrt_status tbcrt_context_create(const tbcrt_context_options *options,
						   tbcrt_context **out_context);
/* Drops the caller's handle; the context lives on while models or sessions
 * created from it do.  NULL is ignored. */
void tbcrt_context_destroy(tbcrt_context *context);
/* Takes effect for the next parallel loop; waits for a loop in progress. */
TBCRT_MUST_CHECK tbcrt_status tbcrt_context_set_thread_count(tbcrt_context *context, uint32_t thread_count);
TBCRT_MUST_CHECK tbcrt_status tbcrt_context_thread_count(const tbcrt_context *context, uint32_t *out_count);

/* ---- Models ---------------------------------------------------------------*/
typedef struct tbcrt_model tbcrt_model;

/* Loads a shared object written by `tbc compile -o model.so`.  Its external
 * weights file, if any, is looked up in the folder of path. */
TBCRT_MUST_CHECK tbcrt_status tbcrt_model_load(tbcrt_context *context, const char *path, tbcrt_model **out_model);
/* Takes a descriptor the application linked in (`tbc compile -o model.o`
 * declares `<prefix>_descriptor` in model.h).  weights_dir is the folder that
 * holds its external weights file; NULL when its weights are embedded.  The
 * descriptor must outlive the model. */
TBCRT_MUST_CHECK tbcrt_status tbcrt_model_from_descriptor(tbcrt_context *context, const tbc_abi_model *descriptor,
							  const char *weights_dir, tbcrt_model **out_model);
/* NULL is ignored; the model lives on while its sessions do. */
void tbcrt_model_destroy(tbcrt_model *model);

typedef struct tbcrt_model_info {
	const char *name;
	const char *target_triple;
	const char *cpu_features; /* "+avx2,+fma,..."; "" when none */
	uint32_t n_inputs, n_outputs, n_symbols;
	uint64_t weights_bytes;
	bool weights_external;
	/* What the artifact holds code for: the host CPU (`tbc compile --target
	 * cpu`, the default) and OpenCL devices (`--target opencl` or
	 * `cpu,opencl`; ABI 3). */
	bool cpu_code;
	bool opencl_code;
	/* ABI 4: every device target it holds code for, in the order compiled:
	 * "opencl,cuda:sm_80,rocm:gfx942" ("" when none). */
	const char *device_targets;
	/* ABI 5: bytes of the values computed once per CPU session from the
	 * weights (tbcrt_session_stats; 0 when none). */
	uint64_t load_time_bytes;
	/* ABI 6: pieces of training state the sessions hold (a training step,
	 * `tbc compile --train`; docs/training.md); 0 for a model. */
	uint32_t n_state;
} tbcrt_model_info;

/* The device code of a model (ABI 3 and later): table `index` of
 * tbcrt_model_info.device_targets, in that order; TBCRT_ERR_INVALID_ARGUMENT
 * past the last.  Strings live as long as the model. */
typedef struct tbcrt_device_code_info {
	const char *target;  /* "opencl", "cuda:sm_80", "rocm:gfx942" */
	const char *format;  /* "OpenCL C source", "PTX", "AMDGPU code object" */
	uint64_t code_bytes; /* of the source text or binary */
	uint32_t n_kernels, n_launches;
	/* Bytes of the PTX's cubin (machine code for the target's architecture,
	 * `ptxas -arch`; device table version 3); 0 when there is none. */
	uint64_t cubin_bytes;
} tbcrt_device_code_info;
TBCRT_MUST_CHECK tbcrt_status tbcrt_model_device_code(const tbcrt_model *model, uint32_t index,
						      tbcrt_device_code_info *out_info);

/* Kernel `kernel` of device code `index`: its name in the code, how it is
 * launched (0: one work-item, 1: a grid-stride loop over work-items, 2:
 * work-groups of group_size), its buffers and the bytes of its code (the
 * text from its entry to the next kernel's for OpenCL C and PTX; 0 where
 * the code is a binary). */
typedef struct tbcrt_kernel_info {
	const char *name;
	uint32_t shape;
	uint32_t group_size[3];
	uint32_t n_buffers;
	uint64_t code_bytes;
} tbcrt_kernel_info;
TBCRT_MUST_CHECK tbcrt_status tbcrt_model_device_kernel(const tbcrt_model *model, uint32_t index, uint32_t kernel,
							tbcrt_kernel_info *out_info);

/* One input or output.  dims[i] >= 0 is a static dim; dims[i] == -1 is the
 * symbolic dim named symbols[i] (NULL where static).  Pointers stay valid
 * while the model does. */
typedef struct tbcrt_tensor_info {
	const char *name;
	int32_t dtype;
	uint32_t rank;
	const int64_t *dims;
	const char *const *symbols;
	/* Outputs only: its size is known only after a run (a dim the model
	 * computes, NonZero's count, ...); the session allocates it. */
	bool data_dependent;
} tbcrt_tensor_info;

TBCRT_MUST_CHECK tbcrt_status tbcrt_model_get_info(const tbcrt_model *model, tbcrt_model_info *out_info);
TBCRT_MUST_CHECK tbcrt_status tbcrt_model_input_info(const tbcrt_model *model, uint32_t index,
						     tbcrt_tensor_info *out_info);
TBCRT_MUST_CHECK tbcrt_status tbcrt_model_output_info(const tbcrt_model *model, uint32_t index,
						      tbcrt_tensor_info *out_info);
/* Index of the input or output of that name; TBCRT_ERR_INVALID_ARGUMENT when none. */
TBCRT_MUST_CHECK tbcrt_status tbcrt_model_find_input(const tbcrt_model *model, const char *name, uint32_t *out_index);
TBCRT_MUST_CHECK tbcrt_status tbcrt_model_find_output(const tbcrt_model *model, const char *name,
						      uint32_t *out_index);

/* One piece of a training step's state: a trainable weight (named as the
 * model's initializer) or an optimizer slot ("<weight>.adam_m", ...).  It is
 * input `input` and output `output` of the step; a session holds it, binds
 * it itself and carries each run's output to the next run's input, so
 * neither can be bound.  Static shape. */
typedef struct tbcrt_state_info {
	const char *name;
	uint32_t input, output;
	int32_t dtype;
	uint32_t rank;
	const int64_t *dims;
	bool weight; /* a trained weight (its name is the initializer's); false: the optimizer's */
} tbcrt_state_info;
TBCRT_MUST_CHECK tbcrt_status tbcrt_model_state_info(const tbcrt_model *model, uint32_t index,
						     tbcrt_state_info *out_info);

/* ---- Sessions -------------------------------------------------------------
 * Bind every input, optionally bind outputs to caller memory, run, read the
 * outputs.  Bindings stay until rebound, so a session runs again with new
 * data in the same buffers.  Symbolic dims take their values from the bound
 * inputs' shapes and must agree across inputs. */
typedef struct tbcrt_session tbcrt_session;

/* The device the session runs on: the CPU when the artifact holds CPU code,
 * else the first available OpenCL device.  Same as tbcrt_session_create_with
 * with options NULL. */
TBCRT_MUST_CHECK tbcrt_status tbcrt_session_create(tbcrt_model *model, tbcrt_session **out_session);

/* Where a session runs.  device is an index of the context's device list
 * (tbcrt_device_count, tbcrt_device_find("opencl:0")), or TBCRT_DEVICE_AUTO.
 * A device the artifact holds no code for is TBCRT_ERR_UNSUPPORTED_TARGET; a
 * device this machine lacks (no OpenCL platform) TBCRT_ERR_DEVICE_UNAVAILABLE,
 * saying why.  On an OpenCL device the first session of a model builds its
 * program (or finds it in the device's cache: loading the same artifact
 * again does not rebuild) and uploads its weights, once per model and
 * device; each session has its own device arena; inputs are copied in and
 * outputs out at every run (docs/opencl.md). */
#define TBCRT_DEVICE_AUTO UINT32_MAX
typedef struct tbcrt_session_options {
	uint32_t device;
} tbcrt_session_options;

/* Defaults: device TBCRT_DEVICE_AUTO. */
void tbcrt_session_options_init(tbcrt_session_options *options);
TBCRT_MUST_CHECK tbcrt_status tbcrt_session_create_with(tbcrt_model *model, const tbcrt_session_options *options,
							tbcrt_session **out_session);
/* The index of the device the session runs on. */
TBCRT_MUST_CHECK tbcrt_status tbcrt_session_device(const tbcrt_session *session, uint32_t *out_device);
/* Frees the arena and the outputs the session allocated.  NULL is ignored. */
void tbcrt_session_destroy(tbcrt_session *session);

/* Caller memory holding the input, at least bytes long, read during runs. */
TBCRT_MUST_CHECK tbcrt_status tbcrt_session_bind_input(tbcrt_session *session, uint32_t index, int32_t dtype,
						       uint32_t rank, const int64_t *dims, const void *data,
						       size_t bytes);
/* Caller memory for an output of known size, at least bytes long; its shape
 * is checked at each run.  An output left unbound (or bound to NULL) is
 * allocated by the session.  A data-dependent output cannot be bound. */
TBCRT_MUST_CHECK tbcrt_status tbcrt_session_bind_output(tbcrt_session *session, uint32_t index, void *data,
							size_t bytes);
TBCRT_MUST_CHECK tbcrt_status tbcrt_session_run(tbcrt_session *session);

/* An output of the last successful run.  data is the bound buffer or memory
 * the session owns until its next run or destroy. */
typedef struct tbcrt_tensor {
	int32_t dtype;
	uint32_t rank;
	int64_t dims[TBCRT_MAX_RANK];
	void *data;
	size_t bytes;
} tbcrt_tensor;

TBCRT_MUST_CHECK tbcrt_status tbcrt_session_output(const tbcrt_session *session, uint32_t index,
						   tbcrt_tensor *out_tensor);
/* A training step's state (tbcrt_state_info) as the session holds it now:
 * its value before the session's first run, then after its last successful
 * run (a failed run leaves it as it was).  data is the session's memory,
 * valid until the next run or destroy; writing it changes the state. */
TBCRT_MUST_CHECK tbcrt_status tbcrt_session_state(tbcrt_session *session, uint32_t index, tbcrt_tensor *out_tensor);
/* Copies bytes (exactly the state's size) into state `index`. */
TBCRT_MUST_CHECK tbcrt_status tbcrt_session_set_state(tbcrt_session *session, uint32_t index, const void *data,
						      size_t bytes);
/* ---- Profiling ------------------------------------------------------------
 * The device time of each kernel, on the device's own clock (CUDA and HIP
 * events, queued around every launch): for finding where a model's time
 * goes, at some cost to the runs it times.  Turning it on clears what was
 * gathered; it stays on until turned off.  A session on the CPU or on an
 * OpenCL device is TBCRT_ERR_UNSUPPORTED_TARGET. */
TBCRT_MUST_CHECK tbcrt_status tbcrt_session_set_profiling(tbcrt_session *session, bool on);

typedef struct tbcrt_session_profile {
	uint64_t runs;     /* successful runs since profiling was turned on */
	double device_ms;  /* their device time, each from its first launch to the end of its last */
	uint32_t n_kernels; /* of the device code: tbcrt_session_kernel_profile's indices */
} tbcrt_session_profile;
TBCRT_MUST_CHECK tbcrt_status tbcrt_session_get_profile(const tbcrt_session *session, tbcrt_session_profile *out);

typedef struct tbcrt_kernel_profile {
	const char *name;  /* in the device code (tbcrt_model_device_kernel); lives as long as the model */
	uint64_t launches; /* over the runs profiled */
	double ms;         /* their device time */
} tbcrt_kernel_profile;
TBCRT_MUST_CHECK tbcrt_status tbcrt_session_kernel_profile(const tbcrt_session *session, uint32_t kernel,
							   tbcrt_kernel_profile *out);

/* The value a symbolic dim took in the last successful run. */
TBCRT_MUST_CHECK tbcrt_status tbcrt_session_symbol(const tbcrt_session *session, const char *name,
						   int64_t *out_value);

/* What a session has done.  Values that depend only on the weights but were
 * too large to fold into the artifact (load-time values, docs/load-time.md)
 * are computed once, when a CPU session is created (init_runs 1), into
 * init_bytes of its arena that runs only read; an artifact without them
 * (or older than ABI 5), and a device session, which computes them in each
 * run, have init_runs 0. */
typedef struct tbcrt_session_stats {
	uint64_t runs;       /* successful runs */
	uint64_t init_runs;  /* times the load-time values were computed */
	uint64_t init_bytes; /* arena bytes that hold them */
	/* What the session's device loaded: "cuda:sm_80 cubin" (machine code
	 * shipped in the artifact), "cuda:sm_80 PTX (JIT)" (compiled by the
	 * driver at the model's first load on the device), "opencl OpenCL C
	 * source", ...; NULL on the CPU.  Lives as long as the model. */
	const char *device_code;
} tbcrt_session_stats;
TBCRT_MUST_CHECK tbcrt_status tbcrt_session_get_stats(const tbcrt_session *session, tbcrt_session_stats *out_stats);

/* ---- Devices ----------------------------------------------------------------
 * The devices of this machine, found the first time a context is asked:
 * "cpu", then "opencl:N" for every device of every OpenCL platform (through
 * the ICD loader, libOpenCL.so.1, loaded with dlopen), then the CUDA and HIP
 * drivers (libcuda.so.1, libamdhip64.so).  A driver that is missing, or not
 * supported yet, is one entry with available false and the reason; never an
 * error.  Indices are stable for the context's lifetime. */
typedef enum tbcrt_device_kind {
	TBCRT_DEVICE_CPU = 0,
	TBCRT_DEVICE_OPENCL = 1,
	TBCRT_DEVICE_CUDA = 2,
	TBCRT_DEVICE_HIP = 3
} tbcrt_device_kind;

typedef struct tbcrt_device_info {
	char name[32];               /* "cpu", "opencl:0", "cuda", ... (what tbcrt_device_find takes) */
	tbcrt_device_kind kind;
	bool available;              /* false: unavailable_reason says why */
	char unavailable_reason[256];
	char device_name[128];       /* "Intel(R) Xeon(R) ...", "pthread-..." */
	char vendor[128];
	char version[128];           /* "OpenCL 3.0 PoCL ...", the driver's version for CUDA and HIP */
	char driver_version[64];
	char platform_name[128];     /* OpenCL: the platform; empty otherwise */
	char platform_version[128];
	uint32_t compute_units;      /* threads of the context's pool for the CPU */
	uint64_t global_memory_bytes;
	uint64_t local_memory_bytes; /* per work-group */
	uint64_t max_alloc_bytes;    /* the largest single buffer */
	uint64_t max_work_group_size;
	bool fp16, fp64;
	/* A GPU's architecture, which picks the artifact's code for it: "sm_90"
	 * (CUDA compute capability 9.0), "gfx942" (HIP); "" otherwise. */
	char arch[32];
	char features[2048];         /* CPU: "+avx2,+fma,..." of the features tbc uses that the host has */
} tbcrt_device_info;

TBCRT_MUST_CHECK tbcrt_status tbcrt_device_count(tbcrt_context *context, uint32_t *out_count);
TBCRT_MUST_CHECK tbcrt_status tbcrt_device_info_get(tbcrt_context *context, uint32_t index,
						    tbcrt_device_info *out_info);
/* Index of the device of that name; TBCRT_ERR_INVALID_ARGUMENT when none. */
TBCRT_MUST_CHECK tbcrt_status tbcrt_device_find(tbcrt_context *context, const char *name, uint32_t *out_index);
/* "cpu", "opencl", "cuda", "hip"; "unknown" for anything else. */
const char *tbcrt_device_kind_name(tbcrt_device_kind kind);

#ifdef __cplusplus
}
#endif
#endif
