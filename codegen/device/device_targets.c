/* The device targets (device_targets.h). */
#include "codegen/device/device_targets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/amdgpu/amdgpu.h"
#include "codegen/device/device_files.h"
#include "codegen/nvptx/nvptx.h"
#include "codegen/opencl/opencl_program.h"
#include "tbc/abi.h"

static bool opencl_describe(const char *arch, tbc_target_desc *out, tbc_diags *d) {
	(void)arch;
	(void)d;
	*out = tbc_target_desc_opencl_default();
	return true;
}

static bool opencl_make(const kir_program *p, const char *model_name, const char *const *op_names, int n_ops,
			const char *arch, tbc_dev_program *out, tbc_diags *d) {
	(void)arch;
	tbc_ocl_program ocl;
	if (!tbc_ocl_program_make(p, model_name, op_names, n_ops, &ocl, d)) return false;
	*out = (tbc_dev_program){ocl.source, strlen(ocl.source), ocl.table, ocl.table_size};
	return true;
}

static bool cuda_describe(const char *arch, tbc_target_desc *out, tbc_diags *d) {
	if (!tbc_nvptx_arch_check(arch, d)) return false;
	*out = tbc_target_desc_cuda(atoi(arch + 3)); /* "sm_90a": 90 */
	return true;
}

static bool rocm_describe(const char *arch, tbc_target_desc *out, tbc_diags *d) {
	if (!tbc_amdgpu_gfx_check(arch, d)) return false;
	*out = tbc_target_desc_rocm(arch);
	return true;
}

/* In the order `tbc doctor` lists what this build compiles for. */
static const tbc_device_target targets[] = {
	{"opencl", TBC_ABI_DEVICE_OPENCL_C, NULL, opencl_describe, opencl_make},
	{"cuda", TBC_ABI_DEVICE_PTX, TBC_NVPTX_DEFAULT_ARCH, cuda_describe, tbc_nvptx_program_make},
	{"rocm", TBC_ABI_DEVICE_AMDGPU_ELF, TBC_AMDGPU_DEFAULT_GFX, rocm_describe, tbc_amdgpu_program_make},
};
#define N_TARGETS (int)(sizeof targets / sizeof *targets)

static const tbc_device_target *find(const char *name, size_t len) {
	for (int i = 0; i < N_TARGETS; i++)
		if (strlen(targets[i].name) == len && !strncmp(targets[i].name, name, len)) return &targets[i];
	return NULL;
}

static bool add(tbc_device_choice *out, int *n, const tbc_device_target *t, const char *arch, size_t arch_len,
		tbc_diags *d) {
	if (*n == TBC_MAX_DEVICE_TARGETS) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "more than %d device targets",
			      TBC_MAX_DEVICE_TARGETS);
		return false;
	}
	tbc_device_choice *c = &out[*n];
	c->target = t;
	if (!arch && t->default_arch) arch = t->default_arch, arch_len = strlen(arch);
	if (arch && !t->default_arch) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "target '%s' takes no architecture (got '%s:%.*s')",
			      t->name, t->name, (int)arch_len, arch);
		return false;
	}
	if (arch_len >= sizeof c->arch) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "target '%s': architecture '%.*s' is too long",
			      t->name, (int)arch_len, arch);
		return false;
	}
	snprintf(c->arch, sizeof c->arch, "%.*s", (int)arch_len, arch ? arch : "");
	for (int i = 0; i < *n; i++)
		if (out[i].target == t && !strcmp(out[i].arch, c->arch)) {
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "target '%s%s%s' is named twice", t->name,
				      c->arch[0] ? ":" : "", c->arch);
			return false;
		}
	tbc_target_desc probe;
	if (!t->describe(c->arch, &probe, d)) return false;
	(*n)++;
	return true;
}

bool tbc_device_choices(const tbc_compile_options *o, tbc_device_choice *out, int *n_out, tbc_diags *d) {
	*n_out = 0;
	if ((o->targets & TBC_TARGETS_OPENCL) && !add(out, n_out, find("opencl", 6), NULL, 0, d)) return false;
	for (const char *p = o->gpu_targets; p && *p;) {
		size_t len = strcspn(p, ",");
		size_t name_len = strcspn(p, ",:");
		const tbc_device_target *t = find(p, name_len);
		if (!t || t->kind == TBC_ABI_DEVICE_OPENCL_C) {
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL,
				      "unknown GPU target '%.*s' (known: cuda[:sm_XX], rocm[:gfxNNN])", (int)len, p);
			return false;
		}
		bool has_arch = name_len < len;
		if (!add(out, n_out, t, has_arch ? p + name_len + 1 : NULL, has_arch ? len - name_len - 1 : 0, d)) return false;
		p += len;
		if (*p == ',') p++;
	}
	return true;
}

bool tbc_device_add_binary(const tbc_compile_options *o, const tbc_device_choice *c, tbc_dev_program *prog,
			   tbc_diags *d) {
	if (c->target->kind != TBC_ABI_DEVICE_PTX || o->no_cubin) return true;
	FILE *stats = o->stats ? (o->stats_file ? o->stats_file : stderr) : NULL;
	char ptxas[4200];
	if (!tbc_nvptx_find_ptxas(o->cuda_path, ptxas, sizeof ptxas)) {
		if (stats)
			fprintf(stats, "cuda:%s: no ptxas at %s: PTX only (the driver JIT-compiles it at first load)\n", c->arch,
				ptxas);
		return true;
	}
	void *cubin = NULL;
	size_t size = 0;
	if (!tbc_nvptx_assemble(ptxas, c->arch, prog->code, prog->code_size, &cubin, &size, d)) return false;
	bool ok = tbc_dev_program_set_binary(prog, cubin, size);
	free(cubin);
	if (!ok) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, NULL, NULL, NULL, NULL, "out of memory");
		return false;
	}
	if (stats) fprintf(stats, "cuda:%s: cubin of %zu bytes (%s) beside %zu bytes of PTX\n", c->arch, size, ptxas,
			   prog->code_size);
	return true;
}

void *tbc_device_code_pack(const tbc_dev_program *progs, int n, size_t *out_size) {
	*out_size = 0;
	if (n == 1) {
		void *one = malloc(progs[0].table_size);
		if (one) memcpy(one, progs[0].table, progs[0].table_size), *out_size = progs[0].table_size;
		return one;
	}
	size_t head = (size_t)(2 + 2 * n) * 8, size = head;
	for (int i = 0; i < n; i++) size += progs[i].table_size; /* whole words already */
	int64_t *w = calloc(1, size);
	if (!w) return NULL;
	w[0] = (int64_t)TBC_ABI_DEVICES_MAGIC;
	w[1] = n;
	size_t at = head;
	for (int i = 0; i < n; i++) {
		w[2 + 2 * i] = (int64_t)at;
		w[3 + 2 * i] = (int64_t)progs[i].table_size;
		memcpy((char *)w + at, progs[i].table, progs[i].table_size);
		at += progs[i].table_size;
	}
	*out_size = size;
	return w;
}

int tbc_target_can_compile(const char *target, char *why, size_t why_size) {
	if (why_size) why[0] = 0;
	if (!strcmp(target, "rocm")) {
		if (tbc_find_lld(why, why_size)) return 1;
		snprintf(why, why_size, "ld.lld-19 not found (apt install lld-19)");
		return 0;
	}
	if (!strcmp(target, "cuda-cubin")) {
		char ptxas[4200];
		int found = tbc_nvptx_find_ptxas(NULL, ptxas, sizeof ptxas);
		snprintf(why, why_size, "%s%s", found ? "" : "no ", ptxas);
		return found;
	}
	if (!strcmp(target, "cpu") || find(target, strlen(target))) return 1;
	snprintf(why, why_size, "no target '%s'", target);
	return 0;
}
