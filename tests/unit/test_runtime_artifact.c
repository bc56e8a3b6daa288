/* An artifact is untrusted input: corrupt, truncated or mismatched ones get
 * an error status that says why, never a crash.  Shared objects broken on
 * purpose (tests/runtime/rt_broken.c), files cut short or filled with
 * garbage, and descriptors built here with one field wrong at a time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <elf.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/internal.h"
#include "tbc/abi_hash.h"
#include "tests/runtime/rt_test.h"

const tbc_abi_model *rt_add_descriptor(void);
const tbc_abi_model *rt_nonzero_descriptor(void);

static tbcrt_context *ctx;

static int setup(void **state) {
	(void)state;
	tbcrt_context_options o;
	tbcrt_context_options_init(&o);
	o.thread_count = 1;
	tbcrt_status s = tbcrt_context_create(&o, &ctx);
	return s.code == TBCRT_OK ? 0 : -1;
}

static int teardown(void **state) {
	(void)state;
	tbcrt_context_destroy(ctx);
	return 0;
}

static tbcrt_status load(const char *name) {
	tbcrt_model *m = (tbcrt_model *)&m;
	tbcrt_status s = tbcrt_model_load(ctx, rt_artifact(name), &m);
	if (s.code != TBCRT_OK) assert_null(m);
	tbcrt_model_destroy(m);
	return s;
}

/* ---- shared objects broken on purpose ---- */

static void wrong_magic_is_not_a_tbc_artifact(void **state) {
	(void)state;
	RT_ERR(load("rt_broken_magic.so"), TBCRT_ERR_INVALID_ARTIFACT,
	       "not a tbc artifact: the descriptor's magic is 0xdeadbeef, expected 0x31434254");
}

/* ---- derived symbols (tests/runtime/rt_derived.c: y [2*n - 1] from x [n]) ---- */

static void derived_symbol_sizes_the_output_before_the_run(void **state) {
	(void)state;
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_load(ctx, rt_artifact("rt_derived.so"), &m));
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	float x[3] = {1, 2, 3};
	int64_t dims[1] = {3};
	RT_OK(tbcrt_session_bind_input(s, 0, 1, 1, dims, x, sizeof x));
	RT_OK(tbcrt_session_run(s));
	tbcrt_tensor y;
	RT_OK(tbcrt_session_output(s, 0, &y));
	assert_int_equal(y.rank, 1);
	assert_int_equal(y.dims[0], 5);
	const float *yv = y.data;
	float want[5] = {1, 0, 2, 0, 3};
	for (int i = 0; i < 5; i++) assert_true(yv[i] == want[i]);
	int64_t v = 0;
	RT_OK(tbcrt_session_symbol(s, "2*n - 1", &v));
	assert_int_equal(v, 5);
	/* n = 0 makes 2*n - 1 negative: no shape of the model fits */
	dims[0] = 0;
	RT_OK(tbcrt_session_bind_input(s, 0, 1, 1, dims, x, 0));
	RT_ERR(tbcrt_session_run(s), TBCRT_ERR_SHAPE_MISMATCH, "the inputs' sizes make symbol '2*n - 1' negative");
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(m);
}

static void broken_derived_symbol_tables_are_refused(void **state) {
	(void)state;
	RT_ERR(load("rt_derived_forward.so"), TBCRT_ERR_INVALID_ARTIFACT,
	       "symbol '2*n - 1' is derived from symbol 1, which is not a symbol of lower index");
	RT_ERR(load("rt_derived_degree.so"), TBCRT_ERR_INVALID_ARTIFACT, "a term of degree 99; 0 to 16");
	RT_ERR(load("rt_derived_short.so"), TBCRT_ERR_INVALID_ARTIFACT, "its polynomial runs past the sym_poly table");
	RT_ERR(load("rt_derived_outside.so"), TBCRT_ERR_LIMIT, "sym_poly table has 1099511627776 entries");
	RT_ERR(load("rt_derived_input.so"), TBCRT_ERR_INVALID_ARTIFACT,
	       "input 'z' dim 0 uses symbol '2*n - 1', which the model derives from other symbols");
}

static void other_abi_version_is_refused(void **state) {
	(void)state;
	RT_ERR(load("rt_broken_version.so"), TBCRT_ERR_ABI_VERSION,
	       "the artifact uses ABI version 99; this runtime runs versions 2 to 7");
}

/* ABI 5's load-time values: init must be the artifact's code and its arena
 * bytes a valid range; an ABI 4 artifact's bytes there are not fields (it
 * loads and runs whatever they hold). */
static void load_time_init_is_checked_from_abi_5_on(void **state) {
	(void)state;
	RT_ERR(load("rt_broken_init_not_code.so"), TBCRT_ERR_INVALID_ARTIFACT, "init function is not code of the artifact");
	RT_ERR(load("rt_broken_init_range.so"), TBCRT_ERR_INVALID_ARTIFACT, "[128, 64) of the arena are not a valid");
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_load(ctx, rt_artifact("rt_broken_v4_init.so"), &m));
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	tbcrt_session_stats st;
	RT_OK(tbcrt_session_get_stats(s, &st));
	assert_int_equal(st.init_runs, 0);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(m);
}

/* ABI 6's training state: each entry's input and output must exist (and
 * the rest, validate.c's check_state); an ABI 5 artifact's bytes there are
 * not fields (it loads as a model with no state). */
static void training_state_is_checked_from_abi_6_on(void **state) {
	(void)state;
	RT_ERR(load("rt_broken_state_range.so"), TBCRT_ERR_INVALID_ARTIFACT,
	       "training state 0 names input 3 and output 0: out of range or used twice");
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_load(ctx, rt_artifact("rt_broken_v5_state.so"), &m));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(m, &info));
	assert_int_equal(info.n_state, 0);
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	tbcrt_tensor t;
	RT_ERR(tbcrt_session_state(s, 0, &t), TBCRT_ERR_INVALID_ARGUMENT, "state index 0 is out of range");
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(m);
}

static void other_target_triple_is_refused(void **state) {
	(void)state;
	RT_ERR(load("rt_broken_triple.so"), TBCRT_ERR_UNSUPPORTED_TARGET, "the artifact is compiled for '");
}

static void cpu_feature_the_host_lacks_is_refused(void **state) {
	(void)state;
	RT_ERR(load("rt_broken_features.so"), TBCRT_ERR_UNSUPPORTED_TARGET, "needs CPU feature 'xop'");
}

static void embedded_weights_with_the_wrong_hash_are_refused(void **state) {
	(void)state;
	RT_ERR(load("rt_broken_hash.so"), TBCRT_ERR_INVALID_ARTIFACT, "embedded weights do not match their hash (XXH64)");
}

static void embedded_weights_past_the_end_of_the_object_are_refused(void **state) {
	(void)state;
	RT_ERR(load("rt_broken_weights_size.so"), TBCRT_ERR_INVALID_ARTIFACT, "embedded weights lie outside it");
}

static void null_run_function_is_refused(void **state) {
	(void)state;
	RT_ERR(load("rt_broken_null_run.so"), TBCRT_ERR_INVALID_ARTIFACT, "run function is NULL");
}

static void shared_object_without_a_descriptor_is_refused(void **state) {
	(void)state;
	RT_ERR(load("rt_broken_no_symbol.so"), TBCRT_ERR_INVALID_ARTIFACT, "exports no tbc_model_descriptor");
	RT_ERR(load("rt_broken_null_descriptor.so"), TBCRT_ERR_INVALID_ARTIFACT, "tbc_model_descriptor returned NULL");
}

/* ---- files that are not shared objects, or no longer whole ---- */

static char scratch[64];

static const char *write_file(const char *name, const void *data, size_t bytes) {
	static char path[128];
	if (!scratch[0]) {
		snprintf(scratch, sizeof scratch, "/tmp/tbcrt-art-XXXXXX");
		assert_non_null(mkdtemp(scratch));
	}
	snprintf(path, sizeof path, "%s/%s", scratch, name);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	if (bytes) assert_int_equal(fwrite(data, 1, bytes, f), bytes);
	fclose(f);
	return path;
}

static unsigned char *read_whole(const char *path, size_t *size) {
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*size = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *b = malloc(*size);
	assert_int_equal(fread(b, 1, *size, f), *size);
	fclose(f);
	return b;
}

static tbcrt_status load_path(const char *path) {
	tbcrt_model *m = NULL;
	tbcrt_status s = tbcrt_model_load(ctx, path, &m);
	tbcrt_model_destroy(m);
	return s;
}

static void files_that_are_not_shared_objects_are_refused(void **state) {
	(void)state;
	RT_ERR(load_path(write_file("empty.so", "", 0)), TBCRT_ERR_INVALID_ARTIFACT, "not an ELF shared object (too short)");
	const char text[] = "this is a text file, not a model, but it is long enough to hold an ELF header";
	RT_ERR(load_path(write_file("text.so", text, sizeof text)), TBCRT_ERR_INVALID_ARTIFACT, "is not an ELF shared object");
	unsigned char garbage[4096];
	srand(7);
	for (size_t i = 0; i < sizeof garbage; i++) garbage[i] = (unsigned char)rand();
	RT_ERR(load_path(write_file("garbage.so", garbage, sizeof garbage)), TBCRT_ERR_INVALID_ARTIFACT, "not an ELF");
	memcpy(garbage, ELFMAG, SELFMAG); /* an ELF header with random fields */
	tbcrt_status s = load_path(write_file("elfish.so", garbage, sizeof garbage));
	assert_int_not_equal(s.code, TBCRT_OK);
	RT_ERR(load_path("/nonexistent/model.so"), TBCRT_ERR_IO, "cannot open '/nonexistent/model.so'");
	RT_ERR(load_path(scratch), TBCRT_ERR_IO, "is not a regular file");
	RT_ERR(tbcrt_model_load(ctx, "", &(tbcrt_model *){NULL}), TBCRT_ERR_INVALID_ARGUMENT, "path is empty");
	RT_ERR(tbcrt_model_load(ctx, rt_artifact("rt_add.so"), NULL), TBCRT_ERR_INVALID_ARGUMENT, "out_model is NULL");
}

static void shared_object_for_another_machine_is_refused_before_loading(void **state) {
	(void)state;
	size_t size;
	unsigned char *b = read_whole(rt_artifact("rt_add.so"), &size);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)b;
	eh->e_machine = eh->e_machine == EM_AARCH64 ? EM_X86_64 : EM_AARCH64;
	RT_ERR(load_path(write_file("other.so", b, size)), TBCRT_ERR_UNSUPPORTED_TARGET, "holds code for");
	eh->e_ident[EI_CLASS] = ELFCLASS32;
	RT_ERR(load_path(write_file("class32.so", b, size)), TBCRT_ERR_UNSUPPORTED_TARGET, "32-bit");
	free(b);
	b = read_whole(rt_artifact("rt_add.so"), &size);
	((Elf64_Ehdr *)b)->e_type = ET_REL;
	RT_ERR(load_path(write_file("rel.so", b, size)), TBCRT_ERR_INVALID_ARTIFACT, "relocatable object");
	free(b);
}

static void truncated_shared_object_is_refused_at_every_length(void **state) {
	(void)state;
	size_t size;
	unsigned char *b = read_whole(rt_artifact("rt_add.so"), &size);
	/* Every length below 4 KiB in steps, then every 1/64th of the file. */
	for (size_t len = 0; len < size; len += len < 4096 ? 61 : size / 64) {
		tbcrt_status s = load_path(write_file("cut.so", b, len));
		if (s.code == TBCRT_OK) fail_msg("the first %zu of %zu bytes loaded", len, size);
	}
	/* The whole file still loads from the scratch folder. */
	RT_OK(load_path(write_file("whole.so", b, size)));
	free(b);
}

/* ---- descriptors with one field wrong ---- */

/* A copy of the add artifact's descriptor to break one field at a time. */
static tbc_abi_model add_copy(void) {
	return *rt_add_descriptor();
}

static tbcrt_status adopt(const tbc_abi_model *d) {
	tbcrt_model *m = (tbcrt_model *)&m;
	tbcrt_status s = tbcrt_model_from_descriptor(ctx, d, "/nonexistent-dir", &m);
	if (s.code != TBCRT_OK) assert_null(m);
	tbcrt_model_destroy(m);
	return s;
}

static void descriptor_copy_is_accepted_when_unchanged(void **state) {
	(void)state;
	tbc_abi_model d = add_copy();
	RT_OK(adopt(&d));
	RT_ERR(tbcrt_model_from_descriptor(ctx, NULL, NULL, &(tbcrt_model *){NULL}), TBCRT_ERR_INVALID_ARGUMENT,
	       "descriptor is NULL");
}

static void tensor_tables_are_checked(void **state) {
	(void)state;
	int64_t dims_sym[2] = {-1, 4};
	int32_t sym_bad[2] = {5, -1}, sym_neg[2] = {-3, -1};
	tbc_abi_tensor t[2];
	tbc_abi_model d;
#define WITH_INPUT0(field, value, code, text)              \
	do {                                               \
		d = add_copy();                            \
		memcpy(t, d.inputs, sizeof t);             \
		t[0].field = value;                        \
		d.inputs = t;                              \
		RT_ERR(adopt(&d), code, text);             \
	} while (0)
	WITH_INPUT0(rank, 17, TBCRT_ERR_INVALID_ARTIFACT, "input 'a' has rank 17; ranks go from 0 to 16");
	WITH_INPUT0(rank, -1, TBCRT_ERR_INVALID_ARTIFACT, "input 'a' has rank -1");
	WITH_INPUT0(dtype, 0, TBCRT_ERR_INVALID_ARTIFACT, "input 'a' has dtype 0 (unknown), which compiled code cannot hold");
	WITH_INPUT0(dtype, 8, TBCRT_ERR_INVALID_ARTIFACT, "dtype 8 (string)");
	WITH_INPUT0(dtype, 1000, TBCRT_ERR_INVALID_ARTIFACT, "dtype 1000");
	WITH_INPUT0(name, NULL, TBCRT_ERR_INVALID_ARTIFACT, "input 0 has no name");
	WITH_INPUT0(name, "b", TBCRT_ERR_INVALID_ARTIFACT, "two inputs are named 'b'");
	WITH_INPUT0(dims, NULL, TBCRT_ERR_INVALID_ARTIFACT, "input 'a': its dims table is missing");
	WITH_INPUT0(sym, NULL, TBCRT_ERR_INVALID_ARTIFACT, "input 'a' dim 0 is symbolic but its sym table is missing");
	d = add_copy();
	memcpy(t, d.inputs, sizeof t);
	t[0].dims = dims_sym;
	t[0].sym = sym_bad;
	d.inputs = t;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "input 'a' dim 0 names symbol 5; the artifact has 1 symbols");
	t[0].sym = sym_neg;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "names symbol -3");
	/* Static dims whose product passes the tensor limit. */
	int64_t big[3] = {1 << 20, 1 << 20, 1 << 20};
	d = add_copy();
	memcpy(t, d.inputs, sizeof t);
	t[0].dims = big;
	t[0].rank = 3;
	d.inputs = t;
	RT_ERR(adopt(&d), TBCRT_ERR_LIMIT, "input 'a': its static dims make more than");
#undef WITH_INPUT0
}

static void symbols_are_checked(void **state) {
	(void)state;
	tbc_abi_model d = add_copy();
	const char *names2[2] = {"N", "N"};
	d.n_syms = 2;
	d.sym_names = names2;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "two symbols are named 'N'");
	const char *names_unused[2] = {"N", "M"};
	d.sym_names = names_unused;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "symbol 'M' is neither the dim of an input nor computed by the model");
	const char *names_null[1] = {NULL};
	d = add_copy();
	d.sym_names = names_null;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "symbol 0 has no name");
	d = add_copy();
	d.sym_names = NULL;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "symbol names table of 1 entries is missing");
	/* An input may not use a symbol the model computes. */
	d = add_copy();
	const uint8_t computed[1] = {1};
	d.sym_computed = computed;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "input 'a' dim 0 uses symbol 'N', which the model computes while running");
	d = add_copy();
	d.n_inputs = TBCRT_MAX_TENSORS + 1;
	RT_ERR(adopt(&d), TBCRT_ERR_LIMIT, "the limit is 65536 each");
	d = add_copy();
	d.inputs = NULL;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "the inputs table of 2 entries is missing");
}

static void identity_strings_and_functions_are_checked(void **state) {
	(void)state;
	tbc_abi_model d = add_copy();
	d.name = NULL;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "the model's name is missing");
	d = add_copy();
	d.target_triple = NULL;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "target triple is missing");
	d = add_copy();
	d.target_triple = "";
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "names no target triple");
	d = add_copy();
	d.target_triple = "riscv64-unknown-linux-gnu";
	RT_ERR(adopt(&d), TBCRT_ERR_UNSUPPORTED_TARGET, "compiled for 'riscv64-unknown-linux-gnu'; this host is");
	d = add_copy();
	d.cpu_features = NULL;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "CPU feature list is missing");
	d = add_copy();
	d.arena_bytes = NULL;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "arena_bytes function is NULL");
	d = add_copy();
	d.run = NULL;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "run function is NULL");
	char long_name[TBCRT_MAX_NAME + 2];
	memset(long_name, 'x', sizeof long_name - 1);
	long_name[sizeof long_name - 1] = '\0';
	d = add_copy();
	d.name = long_name;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "at most 4096 bytes");
	long_name[TBCRT_MAX_NAME] = '\0'; /* exactly at the limit */
	RT_OK(adopt(&d));
}

static void cpu_feature_lists_are_parsed_strictly(void **state) {
	(void)state;
	tbc_abi_model d = add_copy();
#if defined(__x86_64__)
	d.cpu_features = "+sse2,+cx8,-avx512f,+prefer-256-bit";
	RT_OK(adopt(&d));
#endif
	d.cpu_features = "-avx512f,-xop";
	RT_OK(adopt(&d)); /* features turned off require nothing */
	d.cpu_features = "sse2";
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "CPU feature list 'sse2' is malformed");
	d.cpu_features = "+sse2,";
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "ends with a comma");
	d.cpu_features = "+sse2,,+avx";
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "is malformed");
	d.cpu_features = "+";
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "is malformed");
	d.cpu_features = "+quantum-entanglement";
	RT_ERR(adopt(&d), TBCRT_ERR_UNSUPPORTED_TARGET, "needs CPU feature 'quantum-entanglement', which this runtime cannot detect");
}

static void weights_fields_must_agree(void **state) {
	(void)state;
	static const unsigned char w[64] = {1, 2, 3};
	tbc_abi_model d = add_copy();
	d.weights = w;
	d.weights_file = "w.bin";
	d.weights_size = sizeof w;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "both embedded weights and a weights file");
	d = add_copy();
	d.weights_size = 64;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "declares 64 bytes of weights but neither embeds them nor names a file");
	d = add_copy();
	d.weights = w;
	d.weights_size = sizeof w;
	d.weights_hash = tbc_abi_xxh64(w, sizeof w);
	RT_OK(adopt(&d));
	d.weights_hash ^= 1;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT,
	       "the embedded weights do not match their hash (XXH64): the artifact is corrupt");
	d.weights_hash = tbcrt__fnv1a64(w, sizeof w);
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "do not match their hash (XXH64)");
}

/* Before ABI 7 the weights hash was FNV-1a 64: an older artifact still
 * loads, checked with the hash of its own version. */
static void weights_hash_is_the_one_of_the_descriptors_version(void **state) {
	(void)state;
	static const unsigned char w[64] = {1, 2, 3};
	tbc_abi_model d = add_copy();
	assert_int_equal(d.abi_version, 7);
	d.weights = w;
	d.weights_size = sizeof w;
	d.weights_hash = tbc_abi_xxh64(w, sizeof w);
	RT_OK(adopt(&d));
	d.abi_version = 6;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "do not match their hash (FNV-1a 64)");
	d.weights_hash = tbcrt__fnv1a64(w, sizeof w);
	RT_OK(adopt(&d));
	d.abi_version = 2;
	RT_OK(adopt(&d));
	d.abi_version = 7;
	RT_ERR(adopt(&d), TBCRT_ERR_INVALID_ARTIFACT, "do not match their hash (XXH64)");
	/* An empty weights file: the hash of no bytes, of the version's kind. */
	d = add_copy();
	d.weights_file = "empty.bin";
	d.weights_hash = tbcrt__fnv1a64(NULL, 0);
	char dir[64];
	snprintf(dir, sizeof dir, "/tmp/tbcrt-e-XXXXXX");
	assert_non_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof path, "%s/empty.bin", dir);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	fclose(f);
	tbcrt_model *m = NULL;
	RT_ERR(tbcrt_model_from_descriptor(ctx, &d, dir, &m), TBCRT_ERR_INVALID_ARTIFACT,
	       "weights hash (XXH64) does not match the artifact's 0 bytes of weights");
	d.weights_hash = tbc_abi_xxh64(NULL, 0);
	RT_OK(tbcrt_model_from_descriptor(ctx, &d, dir, &m));
	tbcrt_model_destroy(m);
	assert_int_equal(remove(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

static void weights_file_may_not_leave_the_artifacts_folder(void **state) {
	(void)state;
	/* A folder with good weights, a subfolder and a link. */
	char dir[64];
	snprintf(dir, sizeof dir, "/tmp/tbcrt-w-XXXXXX");
	assert_non_null(mkdtemp(dir));
	static const unsigned char w[64] = {9, 8, 7};
	char path[128];
	snprintf(path, sizeof path, "%s/sub", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof path, "%s/sub/w.bin", dir);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(w, 1, sizeof w, f), sizeof w);
	fclose(f);
	snprintf(path, sizeof path, "%s/link", dir);
	assert_int_equal(symlink("sub", path), 0);

	tbc_abi_model d = add_copy();
	d.weights_size = sizeof w;
	d.weights_hash = tbc_abi_xxh64(w, sizeof w);
	tbcrt_model *m = NULL;
	const struct {
		const char *file;
		tbcrt_code code;
		const char *text;
	} cases[] = {
		{"sub/w.bin", TBCRT_OK, ""},
		{"./sub/./w.bin", TBCRT_OK, ""},
		{"sub\\w.bin", TBCRT_OK, ""}, /* backslashes separate too */
		{"/etc/passwd", TBCRT_ERR_INVALID_ARTIFACT, "is an absolute path"},
		{"../w.bin", TBCRT_ERR_INVALID_ARTIFACT, "contains '..'"},
		{"sub/../sub/w.bin", TBCRT_ERR_INVALID_ARTIFACT, "contains '..'"},
		{"link/w.bin", TBCRT_ERR_INVALID_ARTIFACT, "'link' is a symbolic link"},
		{"sub", TBCRT_ERR_INVALID_ARTIFACT, "is not a regular file"},
		{"", TBCRT_ERR_INVALID_ARTIFACT, "name is empty"},
		{"./", TBCRT_ERR_INVALID_ARTIFACT, "names no file"},
		{"missing.bin", TBCRT_ERR_INVALID_ARTIFACT, "cannot be opened"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		d.weights_file = cases[i].file;
		tbcrt_status s = tbcrt_model_from_descriptor(ctx, &d, dir, &m);
		if (s.code != cases[i].code || !strstr(s.message, cases[i].text))
			fail_msg("weights file '%s': %s \"%s\", expected %s \"%s\"", cases[i].file, tbcrt_code_name(s.code),
				 s.message, tbcrt_code_name(cases[i].code), cases[i].text);
		tbcrt_model_destroy(m);
	}
	d.weights_file = "sub/w.bin";
	RT_ERR(tbcrt_model_from_descriptor(ctx, &d, "/nonexistent-dir", &m), TBCRT_ERR_IO, "cannot open the artifact's folder");
	/* The file's hash is the descriptor version's: XXH64 from ABI 7, FNV-1a 64 before. */
	d.weights_hash ^= 1;
	RT_ERR(tbcrt_model_from_descriptor(ctx, &d, dir, &m), TBCRT_ERR_INVALID_ARTIFACT,
	       "weights file 'sub/w.bin' does not match the artifact (XXH64 hash differs): it belongs to another build");
	d.abi_version = 6;
	d.weights_hash = tbcrt__fnv1a64(w, sizeof w);
	RT_OK(tbcrt_model_from_descriptor(ctx, &d, dir, &m));
	tbcrt_model_destroy(m);
	d.weights_hash ^= 1;
	RT_ERR(tbcrt_model_from_descriptor(ctx, &d, dir, &m), TBCRT_ERR_INVALID_ARTIFACT,
	       "does not match the artifact (FNV-1a 64 hash differs)");
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* A descriptor inside the test program (a loaded object) whose pointers
 * leave it: the segment checks catch what the heap copies above cannot. */
static tbc_abi_model in_object;

static void pointers_leaving_the_descriptors_object_are_refused(void **state) {
	(void)state;
	in_object = add_copy();
	RT_OK(adopt(&in_object));
	char *heap_name = strdup("add");
	in_object.name = heap_name;
	RT_ERR(adopt(&in_object), TBCRT_ERR_INVALID_ARTIFACT, "the model's name is missing or not a NUL-terminated string");
	free(heap_name);
	in_object = add_copy();
	tbc_abi_tensor *heap_inputs = malloc(2 * sizeof *heap_inputs);
	memcpy(heap_inputs, in_object.inputs, 2 * sizeof *heap_inputs);
	in_object.inputs = heap_inputs;
	RT_ERR(adopt(&in_object), TBCRT_ERR_INVALID_ARTIFACT, "the inputs table of 2 entries is missing or lies outside the artifact");
	free(heap_inputs);
	/* A table of two entries whose first is the last whole entry of the
	 * object's segment: the second lies past its end.  Placing it from where
	 * the segment ends (not a large count from a table inside) keeps it
	 * outside the object whatever this build's segment sizes are; an ASan
	 * build has larger ones. */
	in_object = add_copy();
	tbcrt_segments seg;
	tbcrt__segments_of(&in_object, &seg);
	uintptr_t seg_end = 0;
	for (int i = 0; i < seg.count; i++)
		if (seg.seg[i].lo <= (uintptr_t)&in_object && (uintptr_t)&in_object < seg.seg[i].hi) seg_end = seg.seg[i].hi;
	assert_true(seg_end != 0);
	uintptr_t last = (seg_end - sizeof *in_object.inputs) & ~(uintptr_t)(_Alignof(tbc_abi_tensor) - 1);
	in_object.inputs = (const tbc_abi_tensor *)last;
	RT_ERR(adopt(&in_object), TBCRT_ERR_INVALID_ARTIFACT, "the inputs table of 2 entries is missing or lies outside");
	in_object = add_copy();
	in_object.run = (void *)(uintptr_t)in_object.name; /* data, not code */
	RT_ERR(adopt(&in_object), TBCRT_ERR_INVALID_ARTIFACT, "run function is not code of the artifact");
}

/* ---- what a model does while running ---- */

static int32_t run_forgets_its_symbol(const tbc_abi_host *host, int64_t *syms, void *const *in, void **out,
				      void *arena, const void *weights) {
	(void)host, (void)syms, (void)in, (void)arena, (void)weights;
	out[0] = host->alloc(host->ctx, 0);
	return 0;
}

static int32_t run_returns_foreign_memory(const tbc_abi_host *host, int64_t *syms, void *const *in, void **out,
					  void *arena, const void *weights) {
	(void)host, (void)in, (void)arena, (void)weights;
	static int64_t mine[4];
	syms[1] = 1;
	out[0] = mine;
	return 0;
}

static int32_t run_returns_too_little(const tbc_abi_host *host, int64_t *syms, void *const *in, void **out,
				      void *arena, const void *weights) {
	(void)in, (void)arena, (void)weights;
	syms[1] = 4;
	out[0] = host->alloc(host->ctx, 8);
	return 0;
}

static int32_t run_fails_quietly(const tbc_abi_host *host, int64_t *syms, void *const *in, void **out, void *arena,
				 const void *weights) {
	(void)host, (void)syms, (void)in, (void)out, (void)arena, (void)weights;
	return 7;
}

static void run_that_breaks_the_contract_is_an_error(void **state) {
	(void)state;
	struct {
		int32_t (*run)(const tbc_abi_host *, int64_t *, void *const *, void **, void *, const void *);
		const char *text;
	} cases[] = {
		{run_forgets_its_symbol, "left its computed symbol 'K' unset"},
		{run_returns_foreign_memory, "returned output 'indices' in memory not from host->alloc"},
		{run_returns_too_little, "returned output 'indices' in 8 bytes; its shape needs 32"},
		{run_fails_quietly, "failed with code 7 and reported no error"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		tbc_abi_model d = *rt_nonzero_descriptor();
		d.run = cases[i].run;
		tbcrt_model *m = NULL;
		RT_OK(tbcrt_model_from_descriptor(ctx, &d, NULL, &m));
		tbcrt_session *s = NULL;
		RT_OK(tbcrt_session_create(m, &s));
		float x[2] = {1, 2};
		int64_t dims[1] = {2};
		RT_OK(tbcrt_session_bind_input(s, 0, 1, 1, dims, x, sizeof x));
		RT_ERR(tbcrt_session_run(s), TBCRT_ERR_RUN_FAILED, cases[i].text);
		tbcrt_session_destroy(s);
		tbcrt_model_destroy(m);
	}
}

static uint64_t absurd_arena(const int64_t *syms) {
	(void)syms;
	return UINT64_MAX;
}

static void absurd_arena_size_is_refused(void **state) {
	(void)state;
	tbc_abi_model d = add_copy();
	d.arena_bytes = absurd_arena;
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_from_descriptor(ctx, &d, NULL, &m));
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	float a[4] = {0};
	int64_t dims[2] = {1, 4};
	RT_OK(tbcrt_session_bind_input(s, 0, 1, 2, dims, a, sizeof a));
	RT_OK(tbcrt_session_bind_input(s, 1, 1, 2, dims, a, sizeof a));
	RT_ERR(tbcrt_session_run(s), TBCRT_ERR_LIMIT, "asks for an arena of 18446744073709551615 bytes");
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(m);
}

static int teardown_scratch(void **state) {
	(void)state;
	if (scratch[0]) {
		char cmd[128];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
		if (system(cmd) != 0) return -1;
	}
	return teardown(state);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(wrong_magic_is_not_a_tbc_artifact),
		cmocka_unit_test(other_abi_version_is_refused),
		cmocka_unit_test(load_time_init_is_checked_from_abi_5_on),
		cmocka_unit_test(training_state_is_checked_from_abi_6_on),
		cmocka_unit_test(other_target_triple_is_refused),
		cmocka_unit_test(cpu_feature_the_host_lacks_is_refused),
		cmocka_unit_test(embedded_weights_with_the_wrong_hash_are_refused),
		cmocka_unit_test(embedded_weights_past_the_end_of_the_object_are_refused),
		cmocka_unit_test(null_run_function_is_refused),
		cmocka_unit_test(shared_object_without_a_descriptor_is_refused),
		cmocka_unit_test(files_that_are_not_shared_objects_are_refused),
		cmocka_unit_test(shared_object_for_another_machine_is_refused_before_loading),
		cmocka_unit_test(truncated_shared_object_is_refused_at_every_length),
		cmocka_unit_test(descriptor_copy_is_accepted_when_unchanged),
		cmocka_unit_test(tensor_tables_are_checked),
		cmocka_unit_test(symbols_are_checked),
		cmocka_unit_test(identity_strings_and_functions_are_checked),
		cmocka_unit_test(cpu_feature_lists_are_parsed_strictly),
		cmocka_unit_test(weights_fields_must_agree),
		cmocka_unit_test(weights_hash_is_the_one_of_the_descriptors_version),
		cmocka_unit_test(weights_file_may_not_leave_the_artifacts_folder),
		cmocka_unit_test(pointers_leaving_the_descriptors_object_are_refused),
		cmocka_unit_test(run_that_breaks_the_contract_is_an_error),
		cmocka_unit_test(absurd_arena_size_is_refused),
		cmocka_unit_test(derived_symbol_sizes_the_output_before_the_run),
		cmocka_unit_test(broken_derived_symbol_tables_are_refused),
	};
	(void)teardown;
	return cmocka_run_group_tests(tests, setup, teardown_scratch);
}
