/* libFuzzer harness for the runtime's artifact validation and sessions.
 *
 * A descriptor holds pointers, so raw bytes cannot be one; instead the bytes
 * are read as a recipe for a descriptor: its magic and version, strings,
 * counts, tensor tables (dtype, rank, dims, symbol indices, NULL tables),
 * symbols and which are computed, weights (embedded with a right or wrong
 * hash, or a file name from a scratch folder holding a weights file, a
 * subfolder and a symbolic link), and which of a few functions serve as
 * run and arena_bytes.  The descriptor is adopted with
 * tbcrt_model_from_descriptor; when it is accepted, inputs are bound with
 * shapes from the bytes (right or wrong) and the model runs: the run
 * function writes every byte the runtime says an output has, and returns
 * data-dependent outputs through host->alloc, so ASan sees any buffer the
 * runtime sized wrongly.  Failures must come with a message and leave no
 * model behind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/internal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char base_dir[64];
static tbcrt_context *ctx;
static unsigned char file_weights[256];

typedef struct {
	const uint8_t *p;
	size_t n;
} reader;

static uint8_t u8(reader *r) {
	if (!r->n) return 0;
	r->n--;
	return *r->p++;
}

static uint64_t u64(reader *r) {
	uint64_t v = 0;
	for (int i = 0; i < 8; i++) v = v << 8 | u8(r);
	return v;
}

/* Strings the descriptor points to live here for one input. */
static char strings[64][40];
static int n_strings;

static const char *str(reader *r) {
	uint8_t k = u8(r);
	if (k == 0) return NULL;
	if (n_strings == 64) return "s";
	char *s = strings[n_strings++];
	size_t len = k % 8;
	for (size_t i = 0; i < len; i++) {
		uint8_t c = u8(r);
		s[i] = (char)(c ? c : 'a');
	}
	s[len] = '\0';
	return s;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
	(void)argc;
	(void)argv;
	snprintf(base_dir, sizeof base_dir, "/tmp/tbcrt-fuzz-XXXXXX");
	if (!mkdtemp(base_dir)) abort();
	for (size_t i = 0; i < sizeof file_weights; i++) file_weights[i] = (unsigned char)(i * 7);
	char path[128];
	snprintf(path, sizeof path, "%s/w.bin", base_dir);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(file_weights, 1, sizeof file_weights, f) != sizeof file_weights) abort();
	fclose(f);
	snprintf(path, sizeof path, "%s/sub", base_dir);
	mkdir(path, 0700);
	snprintf(path, sizeof path, "%s/link.bin", base_dir);
	if (symlink("w.bin", path) != 0) abort();
	tbcrt_context_options o;
	tbcrt_context_options_init(&o);
	o.thread_count = 2;
	if (tbcrt_context_create(&o, &ctx).code != TBCRT_OK) abort();
	return 0;
}

/* ---- the functions a recipe may pick ---- */

static const tbc_abi_model *current;
static reader *run_bytes;

static uint64_t arena_small(const int64_t *syms) {
	(void)syms;
	return 100;
}

static uint64_t arena_from_syms(const int64_t *syms) {
	uint64_t b = 64;
	for (uint32_t i = 0; i < current->n_syms; i++) b += (uint64_t)(syms[i] & 0xffff);
	return b;
}

static uint64_t arena_huge(const int64_t *syms) {
	(void)syms;
	return UINT64_MAX - 5;
}

static uint64_t bytes_of(const tbc_abi_tensor *t, const int64_t *syms) {
	uint64_t b = tbcrt_dtype_size(t->dtype);
	for (int32_t i = 0; i < t->rank; i++) b *= (uint64_t)(t->dims[i] >= 0 ? t->dims[i] : syms[t->sym[i]]);
	return b;
}

static void touch(void *closure, int64_t begin, int64_t end) {
	unsigned char *p = closure;
	for (int64_t i = begin; i < end; i++) p[i] ^= 0x5a;
}

/* Writes every output byte; computes the computed symbols from the bytes;
 * returns data-dependent outputs through host->alloc (sometimes too small,
 * sometimes not at all); sometimes reports an error. */
static int32_t run_writer(const tbc_abi_host *host, int64_t *syms, void *const *in, void **out, void *arena,
			  const void *weights) {
	(void)in;
	(void)weights;
	const tbc_abi_model *d = current;
	uint8_t mode = u8(run_bytes);
	if (mode == 1) return host->error(host->ctx, 5, "fuzz error");
	if (mode == 2) return 9;
	if (arena) host->parallel_for(host->ctx, touch, arena, 64, 8);
	for (uint32_t k = 0; k < d->n_syms; k++)
		if (d->sym_computed && d->sym_computed[k]) syms[k] = mode == 3 ? -1 : u8(run_bytes) % 4;
	for (uint32_t o = 0; o < d->n_outputs; o++) {
		const tbc_abi_tensor *t = &d->outputs[o];
		bool dd = false;
		for (int32_t i = 0; i < t->rank; i++) dd |= t->dims[i] < 0 && d->sym_computed && d->sym_computed[t->sym[i]];
		uint64_t b = bytes_of(t, syms);
		if (dd) {
			uint64_t give = mode == 4 && b > 0 ? b - 1 : b;
			out[o] = host->alloc(host->ctx, give);
			if (!out[o]) return host->error(host->ctx, 4, "out of memory");
			memset(out[o], 1, give);
		} else if (b) {
			memset(out[o], 2, b);
		}
	}
	return 0;
}

/* ---- building a descriptor from the bytes ---- */

#define MAXT 4

typedef struct {
	tbc_abi_model d;
	tbc_abi_tensor ins[MAXT], outs[MAXT];
	int64_t dims[2 * MAXT][TBCRT_MAX_RANK + 2];
	int32_t sym[2 * MAXT][TBCRT_MAX_RANK + 2];
	const char *sym_names[MAXT];
	uint8_t computed[MAXT];
	unsigned char weights[128] __attribute__((aligned(64)));
} recipe;

static void tensor(reader *r, tbc_abi_tensor *t, int64_t *dims, int32_t *sym) {
	t->name = str(r);
	uint8_t dt = u8(r);
	t->dtype = dt < 240 ? dt % 28 : -(int32_t)(dt - 239);
	uint8_t rk = u8(r);
	t->rank = rk < 250 ? rk % (TBCRT_MAX_RANK + 2) : -1;
	int32_t n = t->rank > 0 ? (t->rank > TBCRT_MAX_RANK + 2 ? TBCRT_MAX_RANK + 2 : t->rank) : 0;
	for (int32_t i = 0; i < n; i++) {
		uint8_t k = u8(r);
		dims[i] = k < 200 ? k % 6 : k < 250 ? -1 : (int64_t)u64(r);
		sym[i] = (int32_t)(u8(r) % (MAXT + 2)) - 1;
	}
	uint8_t tables = u8(r);
	t->dims = tables & 1 ? NULL : dims;
	t->sym = tables & 2 ? NULL : sym;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	reader r = {data, size};
	n_strings = 0;
	recipe *x = calloc(1, sizeof *x); /* on the heap: in no loaded object, like a descriptor built at run time */
	if (!x) return 0;
	tbc_abi_model *d = &x->d;
	uint8_t flags = u8(&r);
	d->magic = flags & 1 ? (uint32_t)u64(&r) : TBC_ABI_MAGIC;
	d->abi_version = flags & 2 ? (uint32_t)u64(&r) : TBC_ABI_VERSION;
	d->name = flags & 4 ? str(&r) : "fuzz";
	static const char *const triples[] = {
#if defined(__x86_64__)
		"x86_64-pc-linux-gnu", "aarch64-unknown-linux-gnu",
#else
		"aarch64-unknown-linux-gnu", "x86_64-pc-linux-gnu",
#endif
		"", NULL};
	uint8_t tr = u8(&r);
	d->target_triple = tr < 4 ? triples[tr] : tr < 200 ? triples[0] : str(&r);
	uint8_t fe = u8(&r);
	d->cpu_features = fe < 200 ? "" : fe < 220 ? "+sse2,-avx512f" : str(&r);
	d->n_syms = u8(&r) % (MAXT + 1);
	d->n_inputs = u8(&r) % (MAXT + 1);
	d->n_outputs = u8(&r) % (MAXT + 1);
	/* A count past the limit (a count past the table but within the limit
	 * cannot be caught in a descriptor that lies in no loaded object). */
	if (u8(&r) == 255) d->n_inputs = TBCRT_MAX_TENSORS + 1 + u8(&r);
	for (uint32_t k = 0; k < d->n_syms; k++) {
		x->sym_names[k] = str(&r);
		x->computed[k] = u8(&r) % 3 == 0;
	}
	uint8_t tables = u8(&r);
	d->sym_names = tables & 1 ? NULL : x->sym_names;
	d->sym_computed = tables & 2 ? NULL : x->computed;
	for (uint32_t i = 0; i < MAXT; i++) tensor(&r, &x->ins[i], x->dims[i], x->sym[i]);
	for (uint32_t i = 0; i < MAXT; i++) tensor(&r, &x->outs[i], x->dims[MAXT + i], x->sym[MAXT + i]);
	d->inputs = tables & 4 ? NULL : x->ins;
	d->outputs = tables & 8 ? NULL : x->outs;
	/* Ranks past the tables' room would make the validator read past them;
	 * it only does so for ranks it accepts (<= 16), which fit. */
	uint8_t fn = u8(&r);
	static uint64_t (*const arenas[])(const int64_t *) = {arena_small, arena_from_syms, arena_huge, NULL};
	d->arena_bytes = arenas[fn % 4];
	d->run = fn & 4 ? NULL : run_writer;
	uint8_t w = u8(&r);
	for (size_t i = 0; i < sizeof x->weights; i++) x->weights[i] = (unsigned char)(i ^ w);
	switch (w % 6) {
	case 0: break;
	case 1:
		d->weights = x->weights;
		d->weights_size = u8(&r) % (sizeof x->weights + 1);
		d->weights_hash = w & 8 ? u64(&r) : tbcrt__weights_hash(d->abi_version, x->weights, d->weights_size);
		break;
	case 2: d->weights_size = u8(&r); break; /* a size without weights */
	default: {
		static const char *const files[] = {"w.bin", "./w.bin", "link.bin", "sub", "../w.bin", "/etc/passwd",
						    "missing", "sub/../w.bin"};
		uint8_t f = u8(&r);
		d->weights_file = f < 240 ? files[f % 8] : str(&r);
		d->weights_size = w & 8 ? u8(&r) * 2u : sizeof file_weights;
		d->weights_hash = w & 16 ? u64(&r) : tbcrt__weights_hash(d->abi_version, file_weights,
									       d->weights_size > sizeof file_weights ? 0 : d->weights_size);
		if ((w & 32) && d->weights_file) d->weights = x->weights; /* both: refused */
	}
	}

	current = d;
	tbcrt_model *m = (tbcrt_model *)x;
	tbcrt_status s = tbcrt_model_from_descriptor(ctx, d, (flags & 8) ? NULL : base_dir, &m);
	if ((s.code == TBCRT_OK) != (m != NULL)) abort();
	if (s.code != TBCRT_OK && !s.message[0]) abort(); /* every failure says why */
	if (m) {
		tbcrt_session *sess = NULL;
		if (tbcrt_session_create(m, &sess).code != TBCRT_OK) abort();
		void *bufs[MAXT] = {0};
		bool ok = true;
		for (uint32_t i = 0; i < d->n_inputs; i++) {
			const tbc_abi_tensor *t = &d->inputs[i];
			int64_t dims[TBCRT_MAX_RANK];
			uint8_t how = u8(&r);
			uint64_t bytes = tbcrt_dtype_size(t->dtype);
			for (int32_t k = 0; k < t->rank; k++) {
				dims[k] = t->dims[k] >= 0 ? t->dims[k] : u8(&r) % 5;
				if (how == 1) dims[k] += 1; /* a wrong static dim, maybe */
				bytes *= (uint64_t)dims[k];
			}
			if (bytes > (1u << 20)) {
				ok = false;
				break;
			}
			bufs[i] = calloc(1, bytes + 1);
			int32_t dtype = how == 2 ? t->dtype + 1 : t->dtype;
			size_t given = how == 3 && bytes ? bytes - 1 : bytes;
			tbcrt_status b = tbcrt_session_bind_input(sess, i, dtype, (uint32_t)t->rank, dims, bufs[i], given);
			if (b.code != TBCRT_OK && !b.message[0]) abort();
		}
		/* Outputs are sized by the model: keep them small enough to run. */
		for (uint32_t o = 0; ok && o < d->n_outputs; o++) {
			const tbc_abi_tensor *t = &d->outputs[o];
			double b = (double)tbcrt_dtype_size(t->dtype);
			for (int32_t k = 0; k < t->rank; k++) b *= t->dims[k] >= 0 ? (double)t->dims[k] : 5.0;
			ok = b <= (double)(1u << 20);
		}
		if (ok) {
			run_bytes = &r;
			for (int rep = 0; rep < 2; rep++) {
				tbcrt_status rs = tbcrt_session_run(sess);
				if (rs.code != TBCRT_OK) {
					if (!rs.message[0]) abort();
					continue;
				}
				for (uint32_t o = 0; o < d->n_outputs; o++) {
					tbcrt_tensor t;
					if (tbcrt_session_output(sess, o, &t).code != TBCRT_OK) abort();
					uint64_t b = tbcrt_dtype_size(t.dtype);
					for (uint32_t k = 0; k < t.rank; k++) b *= (uint64_t)t.dims[k];
					if (b != t.bytes) abort();
					if (b) {
						volatile unsigned char sink = ((unsigned char *)t.data)[b - 1];
						(void)sink;
					}
				}
			}
		}
		tbcrt_session_destroy(sess);
		for (uint32_t i = 0; i < MAXT; i++) free(bufs[i]);
		tbcrt_model_destroy(m);
	}
	free(x);
	return 0;
}
