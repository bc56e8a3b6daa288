/* Cubins in artifacts (docs/gpu.md, "Cubins"): a cuda:sm_XX target's PTX
 * assembled by the CUDA toolkit's ptxas for exactly that architecture and
 * shipped beside the PTX; none with --no-cubin or without ptxas (a line in
 * the stats says so); a ptxas that fails is an error naming the target. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/nvptx/nvptx.h"
#include "runtime/device_table.h"
#include "tbc/abi.h"
#include "tbc/runtime.h"
#include "tbc/tbc.h"
#include "tests/runtime/rt_test.h"
#include "tests/unit/support/files.h"

static const char *tiny_cnn(void) {
	static char path[512];
	const char *src = getenv("TBC_SOURCE_DIR");
	snprintf(path, sizeof path, "%s/examples/models/tiny_cnn.onnx", src ? src : ".");
	return path;
}

static void need_ptxas(void) {
	char ptxas[4200];
	if (!tbc_nvptx_find_ptxas(NULL, ptxas, sizeof ptxas)) {
		printf("skipped: no ptxas at %s (the CUDA toolkit; $CUDA_PATH names another)\n", ptxas);
		skip();
	}
}

static char *read_all(const char *path, size_t *size) {
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*size = (size_t)n;
	return buf;
}

/* The cubins of each table of the artifact at path: cubin_bytes[i] (0: none). */
static uint32_t cubins_of(const char *path, const char *const *want_target, uint64_t *cubin_bytes, uint32_t n) {
	tbcrt_context *ctx = rt_context(1);
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_load(ctx, path, &m));
	uint32_t i = 0;
	for (; i < n; i++) {
		tbcrt_device_code_info dc;
		RT_OK(tbcrt_model_device_code(m, i, &dc));
		assert_string_equal(dc.target, want_target[i]);
		assert_string_equal(dc.format, "PTX");
		cubin_bytes[i] = dc.cubin_bytes;
		if (!dc.cubin_bytes) continue;
		/* An ELF object for NVIDIA's GPUs, its e_flags naming the SM. */
		const tbcrt__dtable *t = m->dtables[i];
		assert_int_equal(t->binary_size, dc.cubin_bytes);
		const char *cubin = tmp_path("table.cubin");
		FILE *f = fopen(cubin, "wb");
		assert_non_null(f);
		assert_int_equal(fwrite(t->binary, 1, t->binary_size, f), t->binary_size);
		fclose(f);
		if (access("/usr/bin/llvm-readelf-19", X_OK)) {
			printf("llvm-readelf-19 missing: the cubin's ELF header is not checked\n");
			continue;
		}
		char cmd[600], line[256];
		snprintf(cmd, sizeof cmd, "/usr/bin/llvm-readelf-19 -h %s", cubin);
		FILE *p = popen(cmd, "r");
		assert_non_null(p);
		bool cuda = false;
		unsigned long flags = 0;
		while (fgets(line, sizeof line, p)) {
			if (strstr(line, "Machine:") && strstr(line, "NVIDIA CUDA")) cuda = true;
			char *fl = strstr(line, "Flags:");
			if (fl) flags = strtoul(fl + 6, NULL, 16);
		}
		assert_int_equal(pclose(p), 0);
		int sm = atoi(strchr(want_target[i], '_') + 1);
		/* ptxas of CUDA 13.0 puts the SM in bits 8-15 of e_flags, older
		 * ones in bits 0-7. */
		unsigned long got = (flags >> 8) & 0xff;
		if (got != (unsigned long)sm) got = flags & 0xff;
		printf("%s: cubin of %llu bytes, e_flags 0x%lx (sm_%lu)\n", want_target[i], (unsigned long long)dc.cubin_bytes,
		       flags, got);
		assert_true(cuda);
		assert_int_equal(got, sm);
	}
	tbcrt_model_destroy(m);
	tbcrt_context_destroy(ctx);
	return i;
}

static void each_cuda_target_ships_a_cubin_for_its_architecture_and_builds_the_same_bytes_twice(void **state) {
	(void)state;
	need_ptxas();
	tbc_module *m = load_onnx(tiny_cnn());
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.gpu_targets = "cuda:sm_80,cuda:sm_90";
	char a[256], b[256];
	snprintf(a, sizeof a, "%s", tmp_path("a.so"));
	snprintf(b, sizeof b, "%s", tmp_path("b.so"));
	compile_to(m, &o, a);
	compile_to(m, &o, b);
	size_t na, nb;
	char *da = read_all(a, &na), *db = read_all(b, &nb);
	assert_true(na == nb && !memcmp(da, db, na));
	free(da);
	free(db);
	const char *targets[] = {"cuda:sm_80", "cuda:sm_90"};
	uint64_t bytes[2];
	cubins_of(a, targets, bytes, 2);
	assert_true(bytes[0] > 0 && bytes[1] > 0);
	tbc_module_destroy(m);
}

static void no_cubin_ships_the_ptx_alone(void **state) {
	(void)state;
	tbc_module *m = load_onnx(tiny_cnn());
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.gpu_targets = "cuda:sm_80";
	o.no_cubin = 1;
	const char *so = tmp_path("no_cubin.so");
	compile_to(m, &o, so);
	const char *targets[] = {"cuda:sm_80"};
	uint64_t bytes[1];
	cubins_of(so, targets, bytes, 1);
	assert_int_equal(bytes[0], 0);
	tbc_module_destroy(m);
}

static void without_ptxas_the_ptx_ships_alone_and_the_stats_say_so(void **state) {
	(void)state;
	tbc_module *m = load_onnx(tiny_cnn());
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.gpu_targets = "cuda:sm_80";
	o.cuda_path = "/nonexistent/cuda";
	o.stats = 1;
	char stats_path[256];
	snprintf(stats_path, sizeof stats_path, "%s", tmp_path("stats.txt"));
	o.stats_file = fopen(stats_path, "w");
	assert_non_null(o.stats_file);
	const char *so = tmp_path("no_ptxas.so");
	compile_to(m, &o, so);
	fclose(o.stats_file);
	size_t n;
	char *stats = read_all(stats_path, &n);
	char *text = calloc(1, n + 1);
	memcpy(text, stats, n);
	assert_non_null(strstr(text, "cuda:sm_80: no ptxas at /nonexistent/cuda/bin/ptxas: PTX only"));
	free(text);
	free(stats);
	const char *targets[] = {"cuda:sm_80"};
	uint64_t bytes[1];
	cubins_of(so, targets, bytes, 1);
	assert_int_equal(bytes[0], 0);
	tbc_module_destroy(m);
}

static void a_ptxas_that_fails_is_an_error_naming_the_target(void **state) {
	(void)state;
	tbc_module *m = load_onnx(tiny_cnn());
	char dir[256], bin[300], ptxas[320];
	snprintf(dir, sizeof dir, "%s", tmp_path("fake-cuda"));
	snprintf(bin, sizeof bin, "%s/bin", dir);
	snprintf(ptxas, sizeof ptxas, "%s/ptxas", bin);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(mkdir(bin, 0700), 0);
	FILE *f = fopen(ptxas, "w");
	assert_non_null(f);
	fputs("#!/bin/sh\necho \"ptxas fatal   : the fake ptxas refuses $1\" >&2\nexit 3\n", f);
	fclose(f);
	assert_int_equal(chmod(ptxas, 0700), 0);
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.gpu_targets = "cuda:sm_80,cuda:sm_90";
	o.cuda_path = dir;
	tbc_diags *d = tbc_diags_create();
	assert_int_not_equal(tbc_compile_to_file(m, &o, tmp_path("fails.so"), d), TBC_OK);
	char msg[1024];
	tbc_diag_format(tbc_diags_get(d, 0), msg, sizeof msg);
	printf("%s\n", msg);
	assert_non_null(strstr(msg, "cuda:sm_80: assembling the PTX into a cubin"));
	assert_non_null(strstr(msg, "exited with status 3"));
	assert_non_null(strstr(msg, "the fake ptxas refuses -arch=sm_80"));
	assert_non_null(strstr(msg, "--no-cubin"));
	tbc_diags_destroy(d);
	/* --no-cubin does not run it. */
	o.no_cubin = 1;
	compile_to(m, &o, tmp_path("fails_not.so"));
	unlink(ptxas);
	rmdir(bin);
	rmdir(dir);
	tbc_module_destroy(m);
}

/* The command line: --no-cubin, --cuda-path, and tbc inspect's line per target. */
static char *run(const char *args) {
	const char *bin = getenv("TBC_BINARY_DIR");
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "'%s/tbc' %s 2>&1", bin ? bin : "build/dev", args);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char *out = calloc(1, 1 << 16);
	assert_non_null(out);
	size_t n = fread(out, 1, (1 << 16) - 1, p);
	out[n] = 0;
	int status = pclose(p);
	if (status) fail_msg("%s: exit status %d:\n%s", cmd, status, out);
	return out;
}

static void tbc_compile_and_inspect_show_the_cubins(void **state) {
	(void)state;
	need_ptxas();
	char so[256], args[1200];
	snprintf(so, sizeof so, "%s", tmp_path("cli.so"));
	snprintf(args, sizeof args, "compile '%s' --target cuda:sm_80,cuda:sm_90 -o '%s' --stats", tiny_cnn(), so);
	char *out = run(args);
	assert_non_null(strstr(out, "cuda:sm_80: cubin of "));
	assert_non_null(strstr(out, "cuda:sm_90: cubin of "));
	free(out);
	snprintf(args, sizeof args, "inspect '%s'", so);
	out = run(args);
	printf("%s", out);
	const char *at = strstr(out, "cuda:sm_80: PTX, ");
	assert_non_null(at);
	assert_non_null(strstr(at, "\n    cubin: "));
	assert_non_null(strstr(at, "bytes (sm_80 machine code"));
	assert_non_null(strstr(at, "bytes (sm_90 machine code"));
	free(out);
	snprintf(args, sizeof args, "compile '%s' --target cuda:sm_80 -o '%s' --no-cubin", tiny_cnn(), so);
	free(run(args));
	snprintf(args, sizeof args, "inspect '%s'", so);
	out = run(args);
	assert_non_null(strstr(out, "cubin: none (the driver JIT-compiles the PTX)"));
	free(out);
	snprintf(args, sizeof args, "compile '%s' --target cuda:sm_80 -o '%s' --cuda-path /nonexistent --stats", tiny_cnn(),
		 so);
	out = run(args);
	assert_non_null(strstr(out, "cuda:sm_80: no ptxas at /nonexistent/bin/ptxas: PTX only"));
	free(out);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(each_cuda_target_ships_a_cubin_for_its_architecture_and_builds_the_same_bytes_twice),
		cmocka_unit_test(no_cubin_ships_the_ptx_alone),
		cmocka_unit_test(without_ptxas_the_ptx_ships_alone_and_the_stats_say_so),
		cmocka_unit_test(a_ptxas_that_fails_is_an_error_naming_the_target),
		cmocka_unit_test(tbc_compile_and_inspect_show_the_cubins),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
