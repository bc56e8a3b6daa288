/* A target is a struct of function pointers (QBE's Target, ggml's backend
 * interface): it turns a lowered program into code.  Each lives in its own
 * folder (codegen/cpu/, later codegen/nvptx/, ...). */
#ifndef TBC_CODEGEN_TARGET_H
#define TBC_CODEGEN_TARGET_H

#include <stdbool.h>
#include <stddef.h>

#include "codegen/host/program.h"
#include "codegen/target_desc.h"
#include "tbc/tbc.h"

/* What a target emits, in malloc'd memory: text (LLVM IR, device code) or
 * one object is one part; the CPU target's code is several relocatable
 * objects, one per LLVM module it compiled in parallel (docs/compile-time.md),
 * which the artifact writer links together (a .so, a .o) or the JIT adds
 * one by one. */
#define TBC_MAX_OBJECTS 16
typedef struct tbc_objects {
	int n;
	void *data[TBC_MAX_OBJECTS];
	size_t size[TBC_MAX_OBJECTS];
} tbc_objects;
void tbc_objects_free(tbc_objects *objs);

/* How long LLVM's work took (compile stats): on `threads` threads, the
 * `modules` jobs took compile_seconds (wall time); module_seconds is the
 * sum of their own times, ir_seconds the part of it spent building the IR. */
typedef struct tbc_llvm_times {
	double ir_seconds, compile_seconds, module_seconds;
	int modules, threads;
} tbc_llvm_times;

/* What the artifact writer asks of a target besides the program. */
typedef struct tbc_emit_info {
	const char *prefix;       /* the descriptor is <prefix>_descriptor */
	bool export_generic;      /* also export tbc_model_descriptor (shared objects, JIT) */
	bool external_weights;    /* weights are not embedded ... */
	const char *weights_file; /* ... but in this file, relative to the artifact */
	bool emit_llvm_ir;        /* text LLVM IR instead of an object file */
	/* The descriptor's device_code (include/tbc/abi.h), NULL when none; with
	 * no_cpu_code the module holds the descriptor only (run and arena_bytes
	 * NULL): an artifact for a device. */
	const void *device_code;
	size_t device_code_size;
	bool no_cpu_code;
	/* Instead of an object: the code of the first device target of this
	 * kind (TBC_ABI_DEVICE_*: OpenCL C source, PTX text, an AMDGPU code
	 * object) in out_data; 0: an object. */
	int device_code_of;
	/* The CPU code as one object from one module, its data in it (a .o
	 * where no linker can merge objects). */
	bool one_object;
	/* Non-NULL: where the CPU target writes its LLVM times (--stats). */
	tbc_llvm_times *times;
} tbc_emit_info;

typedef struct tbc_target {
	const char *name;
	/* What lowering needs to know of the machine o compiles for
	 * (codegen/target_desc.h); an error when o names a machine the target
	 * cannot compile for. */
	tbc_code (*describe)(const tbc_compile_options *o, tbc_target_desc *out, tbc_diags *d);
	/* Compiles p, lowered for t, into object files (or text IR). */
	tbc_code (*emit)(const kir_program *p, const tbc_target_desc *t, const tbc_compile_options *o,
			 const tbc_emit_info *info, tbc_diags *d, tbc_objects *out);
} tbc_target;

extern const tbc_target tbc_target_cpu;

#endif
