/* Compile-only GPU targets of the conformance harness: no GPU here, so a
 * case passes when its model lowers for the GPU's description
 * (tbc_target_desc_cuda / _rocm), the whole device program is made
 * (tbc_nvptx_program_make / tbc_amdgpu_program_make) and the vendor's tool
 * accepts the code: ptxas -arch=sm_XX assembles the PTX, llvm-readelf-19
 * --notes reads a code object whose amdhsa.kernels names every kernel.
 * Outputs are not computed (docs/gpu.md has the column and how to run a
 * GPU's). */
#include "tests/conformance/gpu_target.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/amdgpu/amdgpu.h"
#include "codegen/compile.h"
#include "codegen/nvptx/nvptx.h"
#include "codegen/target_desc.h"

#define PTXAS "/usr/local/cuda/bin/ptxas"
#define READELF "/usr/bin/llvm-readelf-19"

typedef struct gpu_job {
	bool cuda;
	const char *arch;
	const char *model_name;
	int n_ops;
	const char **op_names;
} gpu_job;

__attribute__((format(printf, 2, 3))) static bool fail(tbc_diags *d, const char *fmt, ...) {
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "%s", msg);
	return false;
}

/* Runs cmd (a shell command) with its output in out; its exit status. */
static int run_tool(const char *cmd, char *out, size_t size) {
	char full[8400];
	snprintf(full, sizeof full, "%s 2>&1", cmd);
	FILE *f = popen(full, "r");
	if (!f) return -1;
	size_t n = 0, r;
	char sink[4096];
	out[0] = 0;
	while ((r = fread(sink, 1, sizeof sink, f)) > 0) {
		size_t take = n + r < size - 1 ? r : size - 1 - n;
		memcpy(out + n, sink, take);
		n += take;
		out[n] = 0;
	}
	return pclose(f);
}

/* The readelf output can be long: counts of kernel names in it instead. */
static int count_in_tool_output(const char *cmd, const char *what, char *err, size_t err_size, int *status) {
	char full[8400];
	snprintf(full, sizeof full, "%s 2>&1", cmd);
	FILE *f = popen(full, "r");
	if (!f) return -1;
	char line[4096];
	int n = 0;
	err[0] = 0;
	while (fgets(line, sizeof line, f)) {
		if (strstr(line, what)) n++;
		if (!err[0] && strstr(line, "error")) snprintf(err, err_size, "%.400s", line);
	}
	*status = pclose(f);
	return n;
}

static bool check_code(const gpu_job *job, const tbc_dev_program *dp, int n_kernels, tbc_diags *d) {
	char dir[] = "/tmp/tbc-gpu-XXXXXX";
	if (!mkdtemp(dir)) return fail(d, "mkdtemp failed");
	char path[64], cmd[8300], out[2048];
	snprintf(path, sizeof path, "%s/code", dir);
	FILE *f = fopen(path, "wb");
	bool ok = f && fwrite(dp->code, 1, dp->code_size, f) == dp->code_size;
	if (f) ok = fclose(f) == 0 && ok;
	if (!ok) fail(d, "writing %s", path);
	if (ok && job->cuda) {
		snprintf(cmd, sizeof cmd, "%s -arch=%s -o /dev/null %s", PTXAS, job->arch, path);
		int st = run_tool(cmd, out, sizeof out);
		if (st != 0) ok = fail(d, "ptxas -arch=%s: %.400s", job->arch, out);
	} else if (ok) {
		snprintf(cmd, sizeof cmd, "%s --notes %s", READELF, path);
		char err[512];
		int st = 0;
		int names = count_in_tool_output(cmd, ".symbol:         tbc_", err, sizeof err, &st);
		if (st != 0) ok = fail(d, "llvm-readelf-19: %s", err);
		else if (names != n_kernels) {
			ok = fail(d, "llvm-readelf-19 --notes: %d kernel names, %d kernels", names, n_kernels);
		}
	}
	unlink(path);
	rmdir(dir);
	return ok;
}

static bool with_program(const kir_program *p, void *user, tbc_diags *d) {
	const gpu_job *job = user;
	tbc_dev_program dp;
	bool ok = job->cuda ? tbc_nvptx_program_make(p, job->model_name, job->op_names, job->n_ops, job->arch, &dp, d)
			    : tbc_amdgpu_program_make(p, job->model_name, job->op_names, job->n_ops, job->arch, &dp, d);
	if (!ok) return false;
	/* distinct kernels: as tbc_dev_program_make counts them */
	int n_kernels = 0;
	for (int l = 0; l < p->n_launches; l++) {
		if (p->launches[l].ctl != KIR_CTL_KERNEL) continue;
		bool seen = false;
		for (int e = 0; e < l && !seen; e++) seen = p->launches[e].ctl == KIR_CTL_KERNEL && p->launches[e].kernel == p->launches[l].kernel;
		n_kernels += !seen;
	}
	ok = check_code(job, &dp, n_kernels, d);
	tbc_dev_program_free(&dp);
	return ok;
}

static tbc_code compile_for(bool cuda, const char *arch, const tbc_module *m, tbc_tensor **out, size_t n_out,
			    tbc_diags *d) {
	for (size_t i = 0; i < n_out; i++) out[i] = NULL;
	tbc_target_desc desc = cuda ? tbc_target_desc_cuda(atoi(arch + 3)) : tbc_target_desc_rocm(arch);
	gpu_job job = {cuda, arch, "model", 0, NULL};
	return tbc_codegen_for(m, NULL, &desc, d, with_program, &job);
}

tbc_code tbc_compile_cuda_sm75(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			       tbc_diags *d) {
	(void)in, (void)n_in;
	return compile_for(true, "sm_75", m, out, n_out, d);
}
tbc_code tbc_compile_cuda_sm90(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			       tbc_diags *d) {
	(void)in, (void)n_in;
	return compile_for(true, "sm_90", m, out, n_out, d);
}
tbc_code tbc_compile_rocm_gfx90a(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out,
				 size_t n_out, tbc_diags *d) {
	(void)in, (void)n_in;
	return compile_for(false, "gfx90a", m, out, n_out, d);
}
tbc_code tbc_compile_rocm_gfx942(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out,
				 size_t n_out, tbc_diags *d) {
	(void)in, (void)n_in;
	return compile_for(false, "gfx942", m, out, n_out, d);
}
