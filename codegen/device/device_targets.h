/* The device targets an artifact can hold code for, one entry each: a
 * name ("opencl", "cuda", "rocm"), its architectures and default, the
 * description lowering reads, and the device program it makes (the table
 * of include/tbc/abi.h around its code).  A new device target is a new
 * folder under codegen/ and one entry here. */
#ifndef TBC_CODEGEN_DEVICE_DEVICE_TARGETS_H
#define TBC_CODEGEN_DEVICE_DEVICE_TARGETS_H

#include "codegen/device/device_program.h"
#include "codegen/target_desc.h"
#include "tbc/tbc.h"

typedef struct tbc_device_target {
	const char *name;         /* as --target names it */
	int kind;                 /* TBC_ABI_DEVICE_* */
	const char *default_arch; /* NULL: the target takes no architecture */
	/* The description to lower for (arch checked: an error names the ones
	 * accepted). */
	bool (*describe)(const char *arch, tbc_target_desc *out, tbc_diags *d);
	bool (*make)(const kir_program *p, const char *model_name, const char *const *op_names, int n_ops, const char *arch,
		     tbc_dev_program *out, tbc_diags *d);
} tbc_device_target;

/* One device target of a compile: the entry and its architecture. */
typedef struct tbc_device_choice {
	const tbc_device_target *target;
	char arch[24]; /* "" when the target takes none */
} tbc_device_choice;

#define TBC_MAX_DEVICE_TARGETS 16

/* The device targets o asks for, in order: opencl (o->targets), then each
 * entry of o->gpu_targets.  False after a diagnostic naming the bad one. */
bool tbc_device_choices(const tbc_compile_options *o, tbc_device_choice *out, int *n_out, tbc_diags *d);

/* The binary an artifact's table of choice c also holds (include/tbc/abi.h,
 * device table version 3), set into prog: for cuda:sm_XX the PTX assembled
 * into a cubin by ptxas (tbc_nvptx_find_ptxas on o->cuda_path), unless
 * o->no_cubin; nothing for other targets, or without ptxas (o->stats: a
 * line to o->stats_file saying so).  False after a diagnostic naming the
 * target when ptxas fails. */
bool tbc_device_add_binary(const tbc_compile_options *o, const tbc_device_choice *c, tbc_dev_program *prog,
			   tbc_diags *d);

/* The descriptor's device code for n tables: the table itself when n is 1,
 * else the directory of include/tbc/abi.h (TBC_ABI_DEVICES_MAGIC) holding
 * them in order.  malloc'd; NULL when out of memory. */
void *tbc_device_code_pack(const tbc_dev_program *progs, int n, size_t *out_size);

#endif
