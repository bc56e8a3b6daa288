/* The NVPTX and AMDGPU targets (codegen/nvptx/, codegen/amdgpu/): small
 * graphs lowered for the cuda and rocm descriptions, their device programs
 * made, and the code checked by the vendors' tools where this machine has
 * them: the PTX assembled by ptxas for sm_75 and sm_90, the code objects
 * read by llvm-readelf-19 (kernel descriptors, LDS, registers) for gfx90a,
 * gfx942 and gfx1100.  A missing tool skips a test with a line saying why
 * (tests/unit/support/need.h; CI has them).  What the kernels compute is
 * the shared emitter's (test_llvm_kernel, the CPU's tests); running them
 * needs a GPU (docs/gpu.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/amdgpu/amdgpu.h"
#include "codegen/compile.h"
#include "codegen/nvptx/nvptx.h"
#include "codegen/target_desc.h"
#include "tests/unit/support/codegen_check.h"
#include "tests/unit/support/files.h"
#include "tests/unit/support/need.h"
#include "tests/unit/support/command.h"
#include "tbc/abi.h"

#define PTXAS "/usr/local/cuda/bin/ptxas"

static const char *readelf_path(void) {
	static const char *const paths[] = {"/usr/bin/llvm-readelf-19", "/usr/lib/llvm-19/bin/llvm-readelf"};
	for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
		if (access(paths[i], X_OK) == 0) return paths[i];
	return NULL;
}

/* ---- Graphs -----------------------------------------------------------------*/
typedef enum { G_ADD, G_REDUCE, G_MATMUL, G_CONV, G_INT_DIV, G_F64_MATH, G_MATMUL_F16, G_MATMUL_BF16, G_CONV_F16 } graph_kind;

static void graph(model *md, graph_kind g) {
	tbc_value *out = NULL;
	switch (g) {
	case G_ADD: out = op2(md, TBC_OP_Add, input(md, TBC_DT_F32, "N,16"), input(md, TBC_DT_F32, "N,16")); break;
	case G_REDUCE: {
		double axes = 1;
		int64_t one = 1;
		tbc_op *o = node(md, TBC_OP_ReduceSum, 2, input(md, TBC_DT_F32, "8,1000"),
				 constant(md, TBC_DT_I64, 1, &one, &axes), NULL);
		out = o->outputs[0];
		break;
	}
	case G_MATMUL: out = op2(md, TBC_OP_MatMul, input(md, TBC_DT_F32, "N,96"), input(md, TBC_DT_F32, "96,80")); break;
	case G_MATMUL_F16: /* tensor cores from sm_80 (codegen/lower/gemm_mma.c) */
		out = op2(md, TBC_OP_MatMul, input(md, TBC_DT_F16, "N,100"), input(md, TBC_DT_F16, "100,200"));
		break;
	case G_MATMUL_BF16:
		out = op2(md, TBC_OP_MatMul, input(md, TBC_DT_BF16, "2,300,96"), input(md, TBC_DT_BF16, "96,500"));
		break;
	case G_CONV_F16:
		out = node(md, TBC_OP_Conv, 3, input(md, TBC_DT_F16, "1,64,28,28"), input(md, TBC_DT_F16, "64,64,3,3"),
			   input(md, TBC_DT_F16, "64"))->outputs[0];
		break;
	case G_CONV:
		out = node(md, TBC_OP_Conv, 2, input(md, TBC_DT_F32, "1,8,16,16"), input(md, TBC_DT_F32, "16,8,3,3"), NULL)
			      ->outputs[0];
		break;
	case G_INT_DIV: out = op2(md, TBC_OP_Div, input(md, TBC_DT_I32, "N"), input(md, TBC_DT_I32, "N")); break;
	case G_F64_MATH: {
		/* pow(sin(x), erf(x)) + atan(x) in f64, and tan of f32 */
		tbc_value *x = input(md, TBC_DT_F64, "N");
		tbc_value *v = op2(md, TBC_OP_Pow, op1(md, TBC_OP_Sin, x), op1(md, TBC_OP_Erf, x));
		out = op2(md, TBC_OP_Add, v, op1(md, TBC_OP_Atan, x));
		tbc_graph_add_output(md->m->main, op1(md, TBC_OP_Tan, input(md, TBC_DT_F32, "N")));
		break;
	}
	}
	tbc_graph_add_output(md->m->main, out);
}

/* The graph lowered for desc: the program, in arena. */
static kir_program *lowered(model *md, const tbc_target_desc *desc, tbc_arena *arena) {
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md->m, .diags = d};
	if (!tbc_infer_graph(&cx, md->m->main)) print_diags(d);
	kir_program *p = NULL;
	tbc_code rc = kir_lower(md->m, desc, arena, d, &p);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	tbc_diags_destroy(d);
	return p;
}

static bool grouped(const kir_program *p) {
	for (int l = 0; l < p->n_launches; l++)
		if (p->launches[l].ctl == KIR_CTL_KERNEL && kir_kernel_is_grouped(p->launches[l].kernel)) return true;
	return false;
}

static bool can_fail(const kir_program *p) {
	for (int l = 0; l < p->n_launches; l++)
		if (p->launches[l].ctl == KIR_CTL_KERNEL && kir_kernel_can_fail(p->launches[l].kernel)) return true;
	return false;
}

/* ---- Tools ------------------------------------------------------------------*/
static void write_file(const char *path, const void *data, size_t n) {
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}


/* ptxas -v for arch on the PTX text; its report. */
static char *ptxas(const char *ptx, size_t n, const char *arch) {
	if (access(PTXAS, X_OK) != 0) TBC_TEST_NEEDS("ptxas is not at " PTXAS " (the CUDA toolkit)");
	const char *path = tmp_path("kernels.ptx");
	write_file(path, ptx, n);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "%s -v -arch=%s -o /dev/null %s", PTXAS, arch, path);
	int rc;
	char *out = test_command_output(cmd, &rc);
	if (rc != 0) fail_msg("ptxas -arch=%s: %s", arch, out);
	return out;
}

/* llvm-readelf-19 --notes on the code object. */
static char *notes(const void *code, size_t n) {
	const char *readelf = readelf_path();
	if (!readelf) TBC_TEST_NEEDS("llvm-readelf-19 is missing (Debian: llvm-19)");
	const char *path = tmp_path("kernels.hsaco");
	write_file(path, code, n);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "%s --notes %s", readelf, path);
	int rc;
	char *out = test_command_output(cmd, &rc);
	if (rc != 0) fail_msg("llvm-readelf-19: %s", out);
	return out;
}

/* Every kernel of p, under the name the device program gives it without
 * node names (tbc_<kernel>), appears in text after prefix. */
static void names_in(const kir_program *p, const char *text, const char *prefix) {
	for (int l = 0; l < p->n_launches; l++) {
		if (p->launches[l].ctl != KIR_CTL_KERNEL) continue;
		char name[128];
		int n = snprintf(name, sizeof name, "%stbc_%s", prefix, p->launches[l].kernel->name);
		for (int i = (int)strlen(prefix) + 4; i < n && i < (int)sizeof name; i++)
			if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') || (name[i] >= '0' && name[i] <= '9')))
				name[i] = '_';
		if (!strstr(text, name)) fail_msg("%s is missing", name);
	}
}

/* For check_ptx: a grid-stride kernel's loop issues several loads before
 * its first store (codegen/llvm/llvm_unroll.c), so a work-item keeps that
 * many in flight. */
static const char LOADS_FIRST[] = "(loads first)";

static int loads_before_first_store(const char *ptx) {
	const char *st = strstr(ptx, "st.global");
	int n = 0;
	for (const char *l = strstr(ptx, "ld.global"); l && (!st || l < st); l = strstr(l + 1, "ld.global")) n++;
	return n;
}

/* The graph's PTX for sm_75 and for sm_90, each assembled by ptxas for its
 * architecture; expect_in_ptx and expect_in_report (may be NULL) in the
 * PTX and ptxas -v's report. */
static void check_ptx_for(graph_kind g, const char *const *sms, int n_sms, const char *expect_in_ptx,
			  const char *expect_in_report) {
	for (int i = 0; i < n_sms; i++) {
		model md = model_new();
		graph(&md, g);
		tbc_arena *arena = tbc_arena_create();
		tbc_target_desc desc = tbc_target_desc_cuda(atoi(sms[i] + 3));
		kir_program *p = lowered(&md, &desc, arena);
		tbc_diags *d = tbc_diags_create();
		tbc_dev_program dp;
		if (!tbc_nvptx_program_make(p, "test", NULL, 0, sms[i], &dp, d)) print_diags(d);
		assert_non_null(dp.code);
		const char *ptx = dp.code;
		assert_int_equal(strlen(ptx), dp.code_size);
		assert_non_null(strstr(ptx, ".visible .entry tbc_"));
		assert_null(strstr(ptx, ".extern .func")); /* no call left unresolved (libm) */
		if (getenv("TBC_GPU_DUMP")) fputs(ptx, stderr);
		if (expect_in_ptx == LOADS_FIRST) {
			int n = loads_before_first_store(ptx);
			if (n < 4) fail_msg("%s: %d loads before the first store, not 4", sms[i], n);
		} else if (expect_in_ptx) assert_non_null(strstr(ptx, expect_in_ptx));
		names_in(p, ptx, ".visible .entry ");
		/* the table: magic, version, kind PTX, the code's length */
		const int64_t *w = dp.table;
		assert_int_equal(w[2], TBC_ABI_DEVICE_PTX);
		assert_int_equal(w[3], (int64_t)dp.code_size);
		char *report = ptxas(ptx, dp.code_size, sms[i]);
		if (getenv("TBC_GPU_DUMP")) fputs(report, stderr);
		if (expect_in_report) assert_non_null(strstr(report, expect_in_report));
		free(report);
		tbc_dev_program_free(&dp);
		tbc_diags_destroy(d);
		tbc_arena_destroy(arena);
		for (int j = 0; j < md.n_in; j++) tbc_tensor_destroy(md.in[j]);
		tbc_module_destroy(md.m);
	}
}

static void check_ptx(graph_kind g, const char *expect_in_ptx, const char *expect_in_report) {
	static const char *const sms[] = {"sm_75", "sm_90"};
	check_ptx_for(g, sms, 2, expect_in_ptx, expect_in_report);
}

/* For check_hsaco: some kernel has a nonzero .group_segment_fixed_size. */
static const char LDS_USED[] = "(LDS)";

static bool uses_lds(const char *notes_text) {
	const char *key = ".group_segment_fixed_size:";
	for (const char *s = strstr(notes_text, key); s; s = strstr(s + 1, key))
		if (atol(s + strlen(key)) > 0) return true;
	return false;
}

static void check_hsaco(graph_kind g, const char *expect_in_notes) {
	static const char *const gfxs[] = {"gfx90a", "gfx942", "gfx1100"};
	for (int i = 0; i < 3; i++) {
		model md = model_new();
		graph(&md, g);
		tbc_arena *arena = tbc_arena_create();
		tbc_target_desc desc = tbc_target_desc_rocm(gfxs[i]);
		kir_program *p = lowered(&md, &desc, arena);
		tbc_diags *d = tbc_diags_create();
		tbc_dev_program dp;
		if (!tbc_amdgpu_program_make(p, "test", NULL, 0, gfxs[i], &dp, d)) {
			print_diags(d);
			if (strstr(tbc_diags_get(d, 0)->message, "ld.lld-19 is neither"))
				TBC_TEST_NEEDS("ld.lld-19 is missing (Debian: lld-19)");
		}
		assert_non_null(dp.code);
		assert_memory_equal(dp.code, "\177ELF", 4);
		assert_int_equal(((const int64_t *)dp.table)[2], TBC_ABI_DEVICE_AMDGPU_ELF);
		char *n = notes(dp.code, dp.code_size);
		if (getenv("TBC_GPU_DUMP")) fprintf(stderr, "== %s\n%s", gfxs[i], n);
		names_in(p, n, ".name:           ");
		assert_non_null(strstr(n, "amdhsa.kernels"));
		assert_non_null(strstr(n, ".vgpr_count"));
		assert_non_null(strstr(n, ".name:           tbc_"));
		char target[64];
		snprintf(target, sizeof target, "amdgcn-amd-amdhsa--%s", gfxs[i]);
		assert_non_null(strstr(n, target));
		assert_non_null(strstr(n, "amdhsa.version"));
		if (expect_in_notes == LDS_USED) assert_true(uses_lds(n));
		else if (expect_in_notes) assert_non_null(strstr(n, expect_in_notes));
		free(n);
		tbc_dev_program_free(&dp);
		tbc_diags_destroy(d);
		tbc_arena_destroy(arena);
		for (int j = 0; j < md.n_in; j++) tbc_tensor_destroy(md.in[j]);
		tbc_module_destroy(md.m);
	}
}

/* ---- Tests ------------------------------------------------------------------*/
static void test_elementwise_add_is_a_grid_stride_kernel(void **state) {
	(void)state;
	/* global id and size from the special registers */
	check_ptx(G_ADD, "%nctaid.x", NULL);
	/* four iterations' loads (two each) before their stores */
	check_ptx(G_ADD, LOADS_FIRST, NULL);
	check_hsaco(G_ADD, ".group_segment_fixed_size: 0");
}

static void test_reduction_uses_shared_memory_and_barriers(void **state) {
	(void)state;
	model md = model_new();
	graph(&md, G_REDUCE);
	tbc_arena *arena = tbc_arena_create();
	tbc_target_desc desc = tbc_target_desc_cuda(80);
	assert_true(grouped(lowered(&md, &desc, arena))); /* the parallel form */
	tbc_arena_destroy(arena);
	for (int i = 0; i < md.n_in; i++) tbc_tensor_destroy(md.in[i]);
	tbc_module_destroy(md.m);
	check_ptx(G_REDUCE, "bar.sync", "bytes smem");
	check_hsaco(G_REDUCE, LDS_USED);
}

static void test_gemm_grouped_form_with_local_tiles(void **state) {
	(void)state;
	/* maxntid = the work-group (16 x 16 items), the tiles in shared memory */
	check_ptx(G_MATMUL, ".maxntid 16, 16, 1", "bytes smem");
	check_hsaco(G_MATMUL, ".max_flat_workgroup_size: 256");
	check_hsaco(G_MATMUL, LDS_USED);
}

/* f16 and bf16 GEMMs (MatMul, and Conv after im2col) on sm_80 and later:
 * ldmatrix and mma.sync m16n8k16 with f32 sums, accepted by ptxas; sm_75
 * and the AMD GPUs keep the scalar form.  (What they compute: the
 * evaluator, test_codegen_matmul; on a GPU: docs/gpu.md.) */
static void test_gemm_f16_bf16_use_tensor_cores(void **state) {
	(void)state;
	static const char *const new_sms[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"};
	check_ptx_for(G_MATMUL_F16, new_sms, 5, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "Used");
	check_ptx_for(G_MATMUL_BF16, new_sms, 5, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "Used");
	check_ptx_for(G_CONV_F16, new_sms + 3, 1, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", "Used");
	static const char *const old_sm[] = {"sm_75"};
	check_ptx_for(G_MATMUL_F16, old_sm, 1, NULL, "Used");
	model md = model_new();
	graph(&md, G_MATMUL_F16);
	tbc_arena *arena = tbc_arena_create();
	tbc_target_desc desc = tbc_target_desc_cuda(75);
	tbc_dev_program dp;
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_nvptx_program_make(lowered(&md, &desc, arena), "test", NULL, 0, "sm_75", &dp, d));
	assert_null(strstr(dp.code, "mma.sync"));
	tbc_dev_program_free(&dp);
	tbc_diags_destroy(d);
	tbc_arena_destroy(arena);
	for (int j = 0; j < md.n_in; j++) tbc_tensor_destroy(md.in[j]);
	tbc_module_destroy(md.m);
	check_hsaco(G_MATMUL_BF16, LDS_USED);
}

static void test_convolution_compiles(void **state) {
	(void)state;
	check_ptx(G_CONV, NULL, "Used");
	check_hsaco(G_CONV, NULL);
}

static void test_failed_check_is_an_atomic_cas_on_the_status_word(void **state) {
	(void)state;
	model md = model_new();
	graph(&md, G_INT_DIV);
	tbc_arena *arena = tbc_arena_create();
	tbc_target_desc desc = tbc_target_desc_cuda(80);
	bool fails = can_fail(lowered(&md, &desc, arena));
	tbc_arena_destroy(arena);
	for (int i = 0; i < md.n_in; i++) tbc_tensor_destroy(md.in[i]);
	tbc_module_destroy(md.m);
	if (fails) check_ptx(G_INT_DIV, "atom.global.cas.b32", NULL);
	else check_ptx(G_INT_DIV, NULL, NULL); /* integer division defined by kir_sem.h: no check */
	check_hsaco(G_INT_DIV, NULL);
}

static void test_f64_math_needs_no_libm(void **state) {
	(void)state;
	check_ptx(G_F64_MATH, "sin", NULL);
	check_hsaco(G_F64_MATH, NULL);
}

static void test_unknown_architectures_are_refused_with_the_accepted_list(void **state) {
	(void)state;
	tbc_diags *d = tbc_diags_create();
	assert_false(tbc_nvptx_arch_check("sm_70", d));
	assert_non_null(strstr(tbc_diags_get(d, 0)->message, "sm_75, sm_80"));
	assert_false(tbc_amdgpu_gfx_check("gfx803", d));
	assert_non_null(strstr(tbc_diags_get(d, 1)->message, "gfx90a"));
	assert_true(tbc_nvptx_arch_check("sm_90a", d));
	assert_true(tbc_amdgpu_gfx_check("gfx1100", d));
	tbc_diags_destroy(d);
}

static void test_descriptions(void **state) {
	(void)state;
	tbc_target_desc c = tbc_target_desc_cuda(90), r = tbc_target_desc_rocm("gfx942"), w = tbc_target_desc_rocm("gfx1100");
	assert_int_equal(c.parallel, TBC_PAR_GRID);
	assert_int_equal(c.local_mem_bytes, 48 * 1024);
	assert_int_equal(r.local_mem_bytes, 64 * 1024);
	assert_int_equal(c.subgroup_size, 32);
	assert_int_equal(r.subgroup_size, 64);
	assert_int_equal(w.subgroup_size, 32);
	assert_true(c.native_f64 && r.native_f64);
	/* tensor cores: m16n8k16 from sm_80, none on AMD (yet) */
	assert_true(c.mma_f16 && c.mma_bf16);
	assert_false(tbc_target_desc_cuda(75).mma_f16 || tbc_target_desc_cuda(75).mma_bf16);
	assert_false(r.mma_f16 || r.mma_bf16 || w.mma_f16);
}

static void test_same_program_gives_the_same_bytes(void **state) {
	(void)state;
	void *code[2][2];
	size_t size[2][2];
	for (int t = 0; t < 2; t++) {
		model md = model_new();
		graph(&md, G_MATMUL);
		tbc_arena *arena = tbc_arena_create();
		tbc_target_desc desc = tbc_target_desc_cuda(80);
		kir_program *p = lowered(&md, &desc, arena);
		tbc_diags *d = tbc_diags_create();
		tbc_dev_program a, b;
		assert_true(tbc_nvptx_program_make(p, "m", NULL, 0, NULL, &a, d));
		bool hsaco = tbc_amdgpu_program_make(p, "m", NULL, 0, NULL, &b, d);
		code[t][0] = a.table, size[t][0] = a.table_size, a.table = NULL;
		code[t][1] = hsaco ? b.table : NULL, size[t][1] = hsaco ? b.table_size : 0;
		if (hsaco) b.table = NULL;
		tbc_dev_program_free(&a);
		if (hsaco) tbc_dev_program_free(&b);
		tbc_diags_destroy(d);
		tbc_arena_destroy(arena);
		for (int i = 0; i < md.n_in; i++) tbc_tensor_destroy(md.in[i]);
		tbc_module_destroy(md.m);
	}
	for (int k = 0; k < 2; k++) {
		assert_int_equal(size[0][k], size[1][k]);
		if (size[0][k]) assert_memory_equal(code[0][k], code[1][k], size[0][k]);
		free(code[0][k]);
		free(code[1][k]);
	}
}

/* ---- Whole models ------------------------------------------------------------*/
typedef struct model_job {
	bool cuda;
	const char *arch;
	bool mma; /* the PTX must hold tensor-core instructions */
} model_job;

static bool model_program(const kir_program *p, void *user, tbc_diags *d) {
	const model_job *job = user;
	tbc_dev_program dp;
	bool ok = job->cuda ? tbc_nvptx_program_make(p, "model", NULL, 0, job->arch, &dp, d)
			    : tbc_amdgpu_program_make(p, "model", NULL, 0, job->arch, &dp, d);
	if (!ok) return false;
	if (job->mma && !strstr(dp.code, "mma.sync.aligned.m16n8k16")) fail_msg("no mma.sync in the PTX for %s", job->arch);
	if (job->cuda) free(ptxas(dp.code, dp.code_size, job->arch));
	else {
		char *n = notes(dp.code, dp.code_size);
		names_in(p, n, ".name:           ");
		free(n);
	}
	tbc_dev_program_free(&dp);
	return true;
}

/* Under a sanitizer the bench models take minutes for each GPU: one
 * architecture of each vendor there. */
#include "tests/unit/support/sanitized.h"

/* A model through the passes and lowering for each GPU (sm_75, sm_90,
 * gfx90a, gfx942; all: else sm_90 and gfx942), its code accepted by ptxas /
 * llvm-readelf-19. */
static void compile_model(const char *path, bool all) {
	tbc_module *m = load_onnx(path);
	static const model_job jobs[] = {{true, "sm_90", false}, {false, "gfx942", false}, {true, "sm_75", false}, {false, "gfx90a", false}};
	for (size_t i = 0; i < (all ? 4 : 2); i++) {
		tbc_diags *d = tbc_diags_create();
		tbc_target_desc desc = jobs[i].cuda ? tbc_target_desc_cuda(atoi(jobs[i].arch + 3)) : tbc_target_desc_rocm(jobs[i].arch);
		tbc_code rc = tbc_codegen_for(m, NULL, &desc, d, model_program, (void *)&jobs[i]);
		if (rc != TBC_OK) {
			print_diags(d);
			fail_msg("%s for %s", path, jobs[i].arch);
		}
		tbc_diags_destroy(d);
	}
	tbc_module_destroy(m);
}

/* A model lowered to f16 and to bf16 (--precision) for sm_80 and sm_90: its
 * GEMMs on tensor cores, every kernel accepted by ptxas. */
static void compile_model_low(const char *path) {
	tbc_module *m = load_onnx(path);
	static const model_job jobs[] = {{true, "sm_80", true}, {true, "sm_90", true}};
	static const int types[] = {TBC_DT_F16, TBC_DT_BF16};
	for (size_t t = 0; t < 2; t++)
		for (size_t i = 0; i < 2; i++) {
			tbc_compile_options o;
			tbc_compile_options_init(&o);
			o.precision = types[t];
			tbc_diags *d = tbc_diags_create();
			tbc_target_desc desc = tbc_target_desc_cuda(atoi(jobs[i].arch + 3));
			if (tbc_codegen_for(m, &o, &desc, d, model_program, (void *)&jobs[i]) != TBC_OK) {
				print_diags(d);
				fail_msg("%s for %s in %s", path, jobs[i].arch, t ? "bf16" : "fp16");
			}
			tbc_diags_destroy(d);
		}
	tbc_module_destroy(m);
}

/* The model as one artifact for the CPU and both GPU kinds (tbc compile
 * --target cpu,cuda:sm_90,rocm:gfx942): the device programs share the CPU
 * program's weights, so the CPU's own layouts (matrix-vector panels of a
 * batch-1 fully connected layer, a transformer's MatMuls) must be off for
 * them -- they were not for GPU targets, and such models failed to compile
 * with an internal error. */
static void compile_artifact(const char *path) {
	tbc_module *m = load_onnx(path);
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.gpu_targets = "cuda:sm_90,rocm:gfx942";
	o.no_cubin = 1;
	tbc_diags *d = tbc_diags_create();
	tbc_code rc = tbc_compile_to_file(m, &o, tmp_path("gpus.so"), d);
	if (rc != TBC_OK) {
		print_diags(d);
		fail_msg("%s as an artifact for the CPU and the GPUs", path);
	}
	tbc_diags_destroy(d);
	tbc_module_destroy(m);
}

static void test_models_compile_for_every_gpu(void **state) {
	(void)state;
	compile_model("examples/models/tiny_cnn.onnx", true);
	compile_artifact("examples/models/tiny_cnn.onnx");
	/* the bench models tests/models writes (the bench_models fixture) */
	static const char *const bench[] = {"transformer", "resnet50", "bert_dynamic", "gpt_dynamic"};
	const char *bin = getenv("TBC_BINARY_DIR");
	/* Under a sanitizer (minutes a model) the transformer alone stands for
	 * them: the build without one compiles all four for every GPU. */
	size_t n = TBC_TEST_SANITIZED ? 1 : sizeof bench / sizeof *bench;
	const char *ci = getenv("CI");
	for (size_t i = 0; i < n; i++) {
		char path[1024];
		snprintf(path, sizeof path, "%s/models/%s.onnx", bin ? bin : "build/dev", bench[i]);
		if (access(path, R_OK) != 0) {
			if (ci && !strcmp(ci, "true")) fail_msg("CI=true, but %s is missing (tests/models writes it)", path);
			print_message("skipped %s: the bench models are not built (tests/models)\n", path);
			continue;
		}
		compile_model(path, !TBC_TEST_SANITIZED);
		compile_artifact(path);
		if (i == 0) compile_model_low(path); /* the transformer in fp16 and bf16 */
	}
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_elementwise_add_is_a_grid_stride_kernel),
		cmocka_unit_test(test_reduction_uses_shared_memory_and_barriers),
		cmocka_unit_test(test_gemm_grouped_form_with_local_tiles),
		cmocka_unit_test(test_gemm_f16_bf16_use_tensor_cores),
		cmocka_unit_test(test_convolution_compiles),
		cmocka_unit_test(test_failed_check_is_an_atomic_cas_on_the_status_word),
		cmocka_unit_test(test_f64_math_needs_no_libm),
		cmocka_unit_test(test_unknown_architectures_are_refused_with_the_accepted_list),
		cmocka_unit_test(test_descriptions),
		cmocka_unit_test(test_same_program_gives_the_same_bytes),
		cmocka_unit_test(test_models_compile_for_every_gpu),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
