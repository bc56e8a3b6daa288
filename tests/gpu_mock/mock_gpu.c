/* A fake GPU driver for libtbcrt's cuda and hip devices, built twice: with
 * MOCK_CUDA as libcuda.so.1 and with MOCK_HIP as libamdhip64.so
 * (tests/CMakeLists.txt).  It exports the entry points libtbcrt resolves,
 * and checks what the runtime does with them rather than running anything:
 *
 * - memory is host memory (a device pointer is a host address), and every
 *   copy must lie inside a live allocation, so views and offsets are
 *   checked and round trips really carry the bytes;
 * - a module is text: each kernel is a PTX-style `.entry NAME (.param .u64
 *   a, .param .s64 n, ...)` with an optional `.maxntid N` and `.shared ...
 *   .b8 x[N];` (static shared bytes); "MOCK_JIT_ERROR" in it fails the load
 *   with a log, "MOCK_OTHER_GPU" as built for another GPU, "MOCK_PTX_TOO_NEW"
 *   as PTX newer than the driver;
 * - a launch does nothing but log its kernel, grid, block, dynamic shared
 *   bytes and arguments (decoded with the kernel's parameter list: a value
 *   inside an allocation as aK+OFFSET, else SIZE:VALUE);
 * - CUDA calls need a context pushed on the calling thread, and the thread
 *   must be left as found (mock_cuda_context_depth);
 * - mock_*_fail(call, code) makes the next call of that entry point fail.
 *
 * The log (mock_*_log) has one line per allocation, free, copy, module
 * load, launch and synchronization. */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(MOCK_CUDA)
#define MOCK(name) mock_cuda_##name
#define E_INVALID_VALUE 1
#define E_OUT_OF_MEMORY 2
#define E_NOT_INITIALIZED 3
#define E_INVALID_IMAGE 200
#define E_INVALID_CONTEXT 201
#define E_NO_BINARY_FOR_GPU 209
#define E_INVALID_PTX 218
#define E_UNSUPPORTED_PTX_VERSION 222
#define E_NOT_FOUND 500
#define E_LAUNCH_OUT_OF_RESOURCES 701
#define E_LAUNCH_FAILED 719
#elif defined(MOCK_HIP)
#define MOCK(name) mock_hip_##name
#define E_INVALID_VALUE 1
#define E_OUT_OF_MEMORY 2
#define E_NOT_INITIALIZED 3
#define E_INVALID_IMAGE 200
#define E_INVALID_CONTEXT 201
#define E_NO_BINARY_FOR_GPU 209
#define E_INVALID_PTX 218
#define E_UNSUPPORTED_PTX_VERSION 222
#define E_NOT_FOUND 500
#define E_LAUNCH_OUT_OF_RESOURCES 701
#define E_LAUNCH_FAILED 719
#else
#error "build with MOCK_CUDA or MOCK_HIP"
#endif

/* The handle types carry the struct tags the runtime declares, so a call
 * through its pointers has the function's exact type (UBSan checks it). */
#if defined(MOCK_CUDA)
#define MODULE CUmod_st
#define FUNCTION CUfunc_st
#define STREAM CUstream_st
#define EVENT CUevent_st
#else
#define MODULE ihipModule_t
#define FUNCTION ihipModuleSymbol_t
#define STREAM ihipStream_t
#define EVENT ihipEvent_t
#endif

static const struct {
	int code;
	const char *cuda, *hip, *text;
} errors[] = {
	{0, "CUDA_SUCCESS", "hipSuccess", "no error"},
	{E_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "hipErrorInvalidValue", "invalid argument"},
	{E_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "hipErrorOutOfMemory", "out of memory"},
	{E_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "hipErrorNotInitialized", "initialization error"},
	{E_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "hipErrorInvalidImage", "device kernel image is invalid"},
	{E_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "hipErrorInvalidContext", "invalid device context"},
	{E_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "hipErrorNoBinaryForGpu",
	 "no kernel image is available for execution on the device"},
	{E_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "hipErrorInvalidKernelFile", "a PTX JIT compilation failed"},
	{E_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "hipErrorUnknown",
	 "the provided PTX was compiled with an unsupported toolchain."},
	{E_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "hipErrorNotFound", "named symbol not found"},
	{E_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "hipErrorLaunchOutOfResources",
	 "too many resources requested for launch"},
	{E_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "hipErrorLaunchFailure", "unspecified launch failure"},
};

static int error_index(int code) {
	for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
		if (errors[i].code == code) return (int)i;
	return -1;
}

/* ---- State ---- */
#define MAX_ALLOCS 65536
#define MAX_FAILS 16

typedef struct alloc {
	char *p;
	size_t n;
	bool live;
} alloc;

typedef struct FUNCTION function;
typedef struct MODULE {
	char *text;
	function *functions; /* the driver's handles, freed with the module */
} module;

struct FUNCTION {
	function *next;
	module *m;
	char name[128];
	int n_params, sizes[64];
	int max_threads, static_shared, max_dynamic;
};

static struct {
	pthread_mutex_t mu;
	char *log;
	size_t log_len, log_cap;
	alloc allocs[MAX_ALLOCS];
	int n_allocs;
	size_t live_bytes, memory;
	struct {
		char call[64];
		int code;
	} fails[MAX_FAILS];
	int n_fails;
	int devices, major, minor;
	bool initialized;
	int streams, modules, contexts, events;
} st = {.mu = PTHREAD_MUTEX_INITIALIZER, .devices = 1};
static _Thread_local int depth; /* CUDA contexts pushed on this thread */
static int launches;             /* logged so far, for the events' clock */

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n < 0) return;
	size_t len = strlen(line);
	if (st.log_len + len + 2 > st.log_cap) {
		size_t cap = st.log_cap ? st.log_cap * 2 : 4096;
		while (cap < st.log_len + len + 2) cap *= 2;
		char *grown = realloc(st.log, cap);
		if (!grown) abort();
		st.log = grown;
		st.log_cap = cap;
	}
	memcpy(st.log + st.log_len, line, len);
	st.log_len += len;
	st.log[st.log_len++] = '\n';
	st.log[st.log_len] = '\0';
}

/* The code an injected failure gives the call, or 0. */
static int injected(const char *call) {
	for (int i = 0; i < st.n_fails; i++)
		if (!strcmp(st.fails[i].call, call)) {
			int code = st.fails[i].code;
			st.fails[i] = st.fails[--st.n_fails];
			logf_("%s fails with %d", call, code);
			return code;
		}
	return 0;
}

/* The live allocation holding [p, p + n), its index; -1 when none. */
static int find_alloc(uintptr_t p, size_t n) {
	for (int i = 0; i < st.n_allocs; i++) {
		const alloc *a = &st.allocs[i];
		if (a->live && p >= (uintptr_t)a->p && p - (uintptr_t)a->p <= a->n && n <= a->n - (p - (uintptr_t)a->p))
			return i;
	}
	return -1;
}

/* "aK+OFF" for a device address. */
static void where(char *buf, size_t size, uintptr_t p) {
	int i = find_alloc(p, 0);
	if (i < 0) snprintf(buf, size, "?%#lx", (unsigned long)p);
	else snprintf(buf, size, "a%d+%lu", i + 1, (unsigned long)(p - (uintptr_t)st.allocs[i].p));
}

/* ---- Controls the tests call ---- */
const char *MOCK(log)(void) { return st.log ? st.log : ""; }

void MOCK(reset)(void) {
	for (int i = 0; i < st.n_allocs; i++)
		if (st.allocs[i].live) free(st.allocs[i].p);
	free(st.log);
	st.log = NULL;
	st.log_len = st.log_cap = 0;
	st.n_allocs = 0;
	st.live_bytes = 0;
	st.memory = 1ull << 30;
	st.n_fails = 0;
	st.devices = 1;
#if defined(MOCK_CUDA)
	st.major = 9, st.minor = 0;
#else
	st.major = 9, st.minor = 4;
#endif
}

/* A process that loads the mock without the tests' controls (tbc doctor)
 * sees the same device. */
__attribute__((constructor)) static void mock_start(void) { MOCK(reset)(); }

void MOCK(fail)(const char *call, int code) {
	if (st.n_fails == MAX_FAILS) abort();
	snprintf(st.fails[st.n_fails].call, sizeof st.fails[st.n_fails].call, "%s", call);
	st.fails[st.n_fails++].code = code;
}

/* "devices", "memory", "major", "minor". */
void MOCK(set)(const char *what, long value) {
	if (!strcmp(what, "devices")) st.devices = (int)value;
	else if (!strcmp(what, "memory")) st.memory = (size_t)value;
	else if (!strcmp(what, "major")) st.major = (int)value;
	else if (!strcmp(what, "minor")) st.minor = (int)value;
	else abort();
}

/* What is still held: allocations, streams, modules, contexts. */
int MOCK(live)(const char *what) {
	if (!strcmp(what, "allocations")) {
		int n = 0;
		for (int i = 0; i < st.n_allocs; i++) n += st.allocs[i].live;
		return n;
	}
	if (!strcmp(what, "streams")) return st.streams;
	if (!strcmp(what, "modules")) return st.modules;
	if (!strcmp(what, "contexts")) return st.contexts;
	if (!strcmp(what, "events")) return st.events;
	abort();
}

int MOCK(context_depth)(void) { return depth; }

/* ---- What both drivers share ---- */
static int mem_alloc(uintptr_t *out, size_t n) {
	if (n == 0) return E_INVALID_VALUE;
	if (n > st.memory - st.live_bytes || st.n_allocs == MAX_ALLOCS) {
		logf_("alloc %zu: out of memory", n);
		return E_OUT_OF_MEMORY;
	}
	char *p = malloc(n);
	if (!p) return E_OUT_OF_MEMORY;
	memset(p, 0xA5, n);
	st.allocs[st.n_allocs++] = (alloc){p, n, true};
	st.live_bytes += n;
	*out = (uintptr_t)p;
	logf_("alloc a%d %zu", st.n_allocs, n);
	return 0;
}

static int mem_free(uintptr_t p) {
	for (int i = 0; i < st.n_allocs; i++)
		if (st.allocs[i].live && (uintptr_t)st.allocs[i].p == p) {
			free(st.allocs[i].p);
			st.allocs[i].live = false;
			st.live_bytes -= st.allocs[i].n;
			logf_("free a%d", i + 1);
			return 0;
		}
	logf_("free of %#lx, which is no allocation", (unsigned long)p);
	return E_INVALID_VALUE;
}

/* dir: "htod", "dtoh", "dtod". */
static int mem_copy(const char *dir, uintptr_t dst, uintptr_t src, size_t n) {
	bool d_dev = strcmp(dir, "dtoh") != 0, s_dev = strcmp(dir, "htod") != 0;
	if ((d_dev && find_alloc(dst, n) < 0) || (s_dev && find_alloc(src, n) < 0)) {
		logf_("%s of %zu bytes outside any allocation", dir, n);
		return E_INVALID_VALUE;
	}
	char a[64] = "host", b[64] = "host";
	if (d_dev) where(a, sizeof a, dst);
	if (s_dev) where(b, sizeof b, src);
	memmove((void *)dst, (const void *)src, n);
	if (!strcmp(dir, "dtod")) logf_("dtod %s <- %s %zu", a, b, n);
	else logf_("%s %s %zu", dir, d_dev ? a : b, n);
	return 0;
}

static size_t param_size(const char *type) {
	if (strstr(type, "64")) return 8;
	if (strstr(type, "32")) return 4;
	if (strstr(type, "16")) return 2;
	return 1;
}

static int module_load(module **out, const char *text) {
	if (strstr(text, "MOCK_OTHER_GPU")) return E_NO_BINARY_FOR_GPU;
	if (strstr(text, "MOCK_JIT_ERROR")) return E_INVALID_PTX;
	if (strstr(text, "MOCK_PTX_TOO_NEW")) return E_UNSUPPORTED_PTX_VERSION;
	module *m = calloc(1, sizeof *m);
	if (!m || !(m->text = strdup(text))) abort();
	st.modules++;
	/* A mock cubin: "\177ELF " and a tag line, then entries as in PTX. */
	if (!strncmp(text, "\177ELF ", 5)) logf_("load cubin %.*s", (int)strcspn(text + 5, "\n"), text + 5);
	else logf_("load %zu bytes", strlen(text));
	*out = m;
	return 0;
}

static void module_unload(module *m) {
	for (function *f = m->functions, *next; f; f = next) {
		next = f->next;
		free(f);
	}
	free(m->text);
	free(m);
	st.modules--;
	logf_("unload");
}

/* Finds ".entry NAME (" in the module and reads its parameters. */
static int get_function(function **out, module *m, const char *name) {
	for (function *f = m->functions; f; f = f->next)
		if (!strcmp(f->name, name)) {
			*out = f;
			return 0;
		}
	const char *at = m->text;
	size_t n = strlen(name);
	for (;;) {
		at = strstr(at, ".entry ");
		if (!at) return E_NOT_FOUND;
		at += 7;
		while (*at == ' ') at++;
		if (!strncmp(at, name, n) && (at[n] == ' ' || at[n] == '(')) break;
	}
	function *f = calloc(1, sizeof *f);
	if (!f) abort();
	f->m = m;
	snprintf(f->name, sizeof f->name, "%s", name);
	const char *open = strchr(at, '('), *close = open ? strchr(open, ')') : NULL;
	for (const char *p = open; p && p < close && f->n_params < 64; p++) {
		p = strstr(p, ".param");
		if (!p || p > close) break;
		p += 6;
		while (*p == ' ') p++;
		const char *bracket = strchr(p, '[');
		const char *end = strpbrk(p, ",)");
		f->sizes[f->n_params++] =
			bracket && bracket < end ? atoi(bracket + 1) : (int)param_size((char[8]){p[0], p[1], p[2], p[3], 0});
	}
	const char *body = strchr(close ? close : at, '{');
	const char *maxntid = strstr(close ? close : at, ".maxntid");
	f->max_threads = maxntid && (!body || maxntid < body) ? atoi(maxntid + 8) : 1024;
	const char *end = body ? strchr(body, '}') : NULL;
	for (const char *p = body; p && end && (p = strstr(p, ".shared")) && p < end; p++) {
		const char *bracket = strchr(p, '[');
		if (bracket && bracket < end) f->static_shared += atoi(bracket + 1);
	}
	f->max_dynamic = 48 * 1024 - f->static_shared;
	f->next = m->functions;
	m->functions = f;
	*out = f;
	return 0;
}

/* Logs a launch; args: CUDA's kernelParams or HIP's parameter block. */
static int launch(function *f, const unsigned g[3], const unsigned b[3], unsigned shared, void **params,
		  const unsigned char *packed, size_t packed_size) {
	if (shared > (unsigned)f->max_dynamic && shared > 0) {
		logf_("launch %s: %u dynamic shared bytes past the kernel's %d", f->name, shared, f->max_dynamic);
		return E_LAUNCH_OUT_OF_RESOURCES;
	}
	if ((unsigned long)b[0] * b[1] * b[2] > (unsigned long)f->max_threads) {
		logf_("launch %s: block past the kernel's %d threads", f->name, f->max_threads);
		return E_LAUNCH_OUT_OF_RESOURCES;
	}
	char args[2048] = "";
	size_t at = 0, off = 0;
	for (int i = 0; i < f->n_params; i++) {
		size_t n = (size_t)f->sizes[i];
		const unsigned char *v;
		if (params) {
			v = params[i];
		} else {
			size_t align = n >= 8 ? 8 : n >= 4 ? 4 : n >= 2 ? 2 : 1;
			off = (off + align - 1) / align * align;
			if (off + n > packed_size) {
				logf_("launch %s: the parameter block of %zu bytes is short", f->name, packed_size);
				return E_INVALID_VALUE;
			}
			v = packed + off;
			off += n;
		}
		uint64_t value = 0;
		memcpy(&value, v, n < 8 ? n : 8);
		char one[96];
		if (n == 8 && find_alloc((uintptr_t)value, 0) >= 0) where(one, sizeof one, (uintptr_t)value);
		else snprintf(one, sizeof one, "%zu:%llu", n, (unsigned long long)value);
		at += (size_t)snprintf(args + at, sizeof args - at, "%s%s", i ? "," : "", one);
		if (at >= sizeof args) break;
	}
	if (!params && off != packed_size) {
		logf_("launch %s: %zu bytes of parameters, the kernel takes %zu", f->name, packed_size, off);
		return E_INVALID_VALUE;
	}
	launches++;
	logf_("launch %s grid=%u,%u,%u block=%u,%u,%u shared=%u args=%s", f->name, g[0], g[1], g[2], b[0], b[1], b[2],
	      shared, args);
	return 0;
}

/* An event: the launches logged before it; the mock's device takes 0.25 ms
 * a launch. */
typedef struct EVENT {
	int launches;
} event;

static int event_create(event **out) {
	*out = calloc(1, sizeof **out);
	if (!*out) abort();
	st.events++;
	return 0;
}
static int event_record(event *e) {
	e->launches = launches;
	logf_("event record after %d launches", launches);
	return 0;
}
static int event_elapsed(float *ms, const event *a, const event *b) {
	*ms = 0.25f * (float)(b->launches - a->launches);
	return 0;
}
static int event_destroy(event *e) {
	free(e);
	st.events--;
	return 0;
}

#define FAIL_IF_INJECTED(call)                \
	do {                                  \
		int e_ = injected(call);      \
		if (e_) return e_;            \
	} while (0)

/* ---- CUDA ---- */
#if defined(MOCK_CUDA)
typedef int CUresult;
typedef struct STREAM *CUstream;
struct CUctx_st;
#define NEED_CONTEXT()                                               \
	do {                                                         \
		if (!st.initialized) return E_NOT_INITIALIZED;       \
		if (depth <= 0) {                                    \
			logf_("%s without a current context", __func__); \
			return E_INVALID_CONTEXT;                    \
		}                                                    \
	} while (0)

CUresult cuInit(unsigned flags) {
	FAIL_IF_INJECTED("cuInit");
	st.initialized = flags == 0;
	return flags ? E_INVALID_VALUE : 0;
}
CUresult cuDriverGetVersion(int *v) {
	*v = 12040;
	return 0;
}
CUresult cuDeviceGetCount(int *n) {
	if (!st.initialized) return E_NOT_INITIALIZED;
	*n = st.devices;
	return 0;
}
CUresult cuDeviceGet(int *dev, int ordinal) {
	if (ordinal < 0 || ordinal >= st.devices) return E_INVALID_VALUE;
	*dev = ordinal;
	return 0;
}
CUresult cuDeviceGetName(char *name, int len, int dev) {
	snprintf(name, (size_t)len, "Mock H100 %d", dev);
	return 0;
}
CUresult cuDeviceGetAttribute(int *v, int attrib, int dev) {
	switch (attrib) {
	case 1: *v = 1024; break;                      /* threads per block */
	case 2: case 3: *v = 1024; break;              /* block x, y */
	case 4: *v = 64; break;                        /* block z */
	case 5: *v = 2147483647; break;                /* grid x */
	case 6: case 7: *v = 65535; break;             /* grid y, z */
	case 8: *v = 48 * 1024; break;                 /* shared per block */
	case 16: *v = 132; break;                      /* SMs */
	case 75: *v = st.major; break;
	case 76: *v = st.minor; break;
	case 97: *v = 227 * 1024; break;               /* shared per block, opt-in */
	default: return E_INVALID_VALUE;
	}
	return 0;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev) {
	*bytes = st.memory;
	return 0;
}
CUresult cuDevicePrimaryCtxRetain(struct CUctx_st **ctx, int dev) {
	FAIL_IF_INJECTED("cuDevicePrimaryCtxRetain");
	*ctx = (struct CUctx_st *)(uintptr_t)(0x1000 + dev);
	st.contexts++;
	logf_("retain context %d", dev);
	return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
	st.contexts--;
	logf_("release context %d", dev);
	return 0;
}
CUresult cuCtxPushCurrent_v2(struct CUctx_st *ctx) {
	if (!ctx) return E_INVALID_CONTEXT;
	depth++;
	return 0;
}
CUresult cuCtxPopCurrent_v2(struct CUctx_st **ctx) {
	if (depth <= 0) return E_INVALID_CONTEXT;
	depth--;
	if (ctx) *ctx = NULL;
	return 0;
}
CUresult cuStreamCreate(CUstream *s, unsigned flags) {
	NEED_CONTEXT();
	FAIL_IF_INJECTED("cuStreamCreate");
	*s = malloc(1);
	st.streams++;
	logf_("stream create %u", flags);
	return 0;
}
CUresult cuStreamDestroy_v2(CUstream s) {
	NEED_CONTEXT();
	free(s);
	st.streams--;
	logf_("stream destroy");
	return 0;
}
CUresult cuStreamSynchronize(CUstream s) {
	NEED_CONTEXT();
	FAIL_IF_INJECTED("cuStreamSynchronize");
	logf_("sync");
	return 0;
}
CUresult cuMemAlloc_v2(unsigned long long *p, size_t n) {
	NEED_CONTEXT();
	FAIL_IF_INJECTED("cuMemAlloc_v2");
	uintptr_t a = 0;
	int e = mem_alloc(&a, n);
	*p = a;
	return e;
}
CUresult cuMemFree_v2(unsigned long long p) {
	NEED_CONTEXT();
	return mem_free((uintptr_t)p);
}
CUresult cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src, size_t n, CUstream s) {
	NEED_CONTEXT();
	FAIL_IF_INJECTED("cuMemcpyHtoDAsync_v2");
	return mem_copy("htod", (uintptr_t)dst, (uintptr_t)src, n);
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src, size_t n, CUstream s) {
	NEED_CONTEXT();
	FAIL_IF_INJECTED("cuMemcpyDtoHAsync_v2");
	return mem_copy("dtoh", (uintptr_t)dst, (uintptr_t)src, n);
}
CUresult cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, size_t n, CUstream s) {
	NEED_CONTEXT();
	return mem_copy("dtod", (uintptr_t)dst, (uintptr_t)src, n);
}
CUresult cuModuleLoadDataEx(module **m, const void *image, unsigned n, int *options, void **values) {
	NEED_CONTEXT();
	int e = module_load(m, image);
	if (e == E_INVALID_PTX) {
		for (unsigned i = 0; i + 1 < n; i++)
			if (options[i] == 5 && options[i + 1] == 6) /* the error log and its size */
				snprintf(values[i], (size_t)(uintptr_t)values[i + 1],
					 "ptxas application ptx input, line 3; error   : MOCK_JIT_ERROR is not a PTX "
					 "instruction\nptxas fatal   : Ptx assembly aborted due to errors");
		logf_("load fails: JIT error");
	}
	return e;
}
CUresult cuModuleUnload(module *m) {
	NEED_CONTEXT();
	module_unload(m);
	return 0;
}
CUresult cuModuleGetFunction(function **f, module *m, const char *name) {
	NEED_CONTEXT();
	return get_function(f, m, name);
}
CUresult cuFuncGetAttribute(int *v, int attrib, function *f) {
	NEED_CONTEXT();
	switch (attrib) {
	case 0: *v = f->max_threads; break;
	case 1: *v = f->static_shared; break;
	case 8: *v = f->max_dynamic; break;
	default: return E_INVALID_VALUE;
	}
	return 0;
}
CUresult cuFuncSetAttribute(function *f, int attrib, int value) {
	NEED_CONTEXT();
	if (attrib != 8 || value + f->static_shared > 227 * 1024) return E_INVALID_VALUE;
	f->max_dynamic = value;
	logf_("%s: max dynamic shared %d", f->name, value);
	return 0;
}
CUresult cuLaunchKernel(function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			unsigned shared, CUstream s, void **params, void **extra) {
	NEED_CONTEXT();
	FAIL_IF_INJECTED("cuLaunchKernel");
	if (!params || extra) return E_INVALID_VALUE;
	const unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
	return launch(f, g, b, shared, params, NULL, 0);
}
CUresult cuEventCreate(event **e, unsigned flags) {
	NEED_CONTEXT();
	return event_create(e);
}
CUresult cuEventRecord(event *e, CUstream s) {
	NEED_CONTEXT();
	return event_record(e);
}
CUresult cuEventSynchronize(event *e) {
	NEED_CONTEXT();
	FAIL_IF_INJECTED("cuEventSynchronize");
	return 0;
}
CUresult cuEventElapsedTime(float *ms, event *a, event *b) {
	NEED_CONTEXT();
	return event_elapsed(ms, a, b);
}
CUresult cuEventDestroy_v2(event *e) {
	NEED_CONTEXT();
	return event_destroy(e);
}
CUresult cuGetErrorName(CUresult e, const char **name) {
	int i = error_index(e);
	if (i < 0) return E_INVALID_VALUE;
	*name = errors[i].cuda;
	return 0;
}
CUresult cuGetErrorString(CUresult e, const char **text) {
	int i = error_index(e);
	if (i < 0) return E_INVALID_VALUE;
	*text = errors[i].text;
	return 0;
}
#endif

/* ---- HIP ---- */
#if defined(MOCK_HIP)
typedef int hipError_t;
typedef struct STREAM *hipStream_t;
static _Thread_local int current = -1; /* hipSetDevice's, per thread */

#define NEED_INIT()                                          \
	do {                                                 \
		if (!st.initialized) return E_NOT_INITIALIZED; \
	} while (0)
/* Stricter than HIP, whose threads start on device 0: the runtime must set
 * the device on each thread it calls from. */
#define NEED_DEVICE()                                                      \
	do {                                                               \
		NEED_INIT();                                               \
		if (current < 0) {                                         \
			logf_("%s on a thread without hipSetDevice", __func__); \
			return 101;                                        \
		}                                                          \
	} while (0)

hipError_t hipInit(unsigned flags) {
	FAIL_IF_INJECTED("hipInit");
	st.initialized = true;
	return 0;
}
hipError_t hipDriverGetVersion(int *v) {
	*v = 60241;
	return 0;
}
hipError_t hipGetDeviceCount(int *n) {
	NEED_INIT();
	*n = st.devices;
	return 0;
}
hipError_t hipDeviceGetName(char *name, int len, int dev) {
	snprintf(name, (size_t)len, "Mock MI300X %d", dev);
	return 0;
}
hipError_t hipDeviceGetAttribute(int *v, int attrib, int dev) {
	switch (attrib) {
	case 23: *v = st.major; break;
	case 26: case 27: case 28: *v = 1024; break;    /* block dims */
	case 29: case 30: case 31: *v = 2147483647; break; /* grid dims */
	case 56: *v = 1024; break;                      /* threads per block */
	case 61: *v = st.minor; break;
	case 63: *v = 304; break;                       /* CUs */
	case 74: *v = 64 * 1024; break;                 /* LDS per block */
	default: return E_INVALID_VALUE;
	}
	return 0;
}
hipError_t hipDeviceTotalMem(size_t *bytes, int dev) {
	*bytes = st.memory;
	return 0;
}
hipError_t hipSetDevice(int dev) {
	if (dev < 0 || dev >= st.devices) return 101; /* hipErrorInvalidDevice */
	current = dev;
	return 0;
}
int MOCK(current_device)(void) { return current; }
hipError_t hipStreamCreate(hipStream_t *s) {
	NEED_DEVICE();
	FAIL_IF_INJECTED("hipStreamCreate");
	*s = malloc(1);
	st.streams++;
	logf_("stream create on %d", current);
	return 0;
}
hipError_t hipStreamDestroy(hipStream_t s) {
	free(s);
	st.streams--;
	logf_("stream destroy");
	return 0;
}
hipError_t hipStreamSynchronize(hipStream_t s) {
	FAIL_IF_INJECTED("hipStreamSynchronize");
	logf_("sync");
	return 0;
}
hipError_t hipMalloc(void **p, size_t n) {
	NEED_DEVICE();
	FAIL_IF_INJECTED("hipMalloc");
	uintptr_t a = 0;
	int e = mem_alloc(&a, n);
	*p = (void *)a;
	return e;
}
hipError_t hipFree(void *p) { return mem_free((uintptr_t)p); }
hipError_t hipMemcpyHtoDAsync(void *dst, const void *src, size_t n, hipStream_t s) {
	NEED_DEVICE();
	FAIL_IF_INJECTED("hipMemcpyHtoDAsync");
	return mem_copy("htod", (uintptr_t)dst, (uintptr_t)src, n);
}
hipError_t hipMemcpyDtoHAsync(void *dst, const void *src, size_t n, hipStream_t s) {
	NEED_DEVICE();
	FAIL_IF_INJECTED("hipMemcpyDtoHAsync");
	return mem_copy("dtoh", (uintptr_t)dst, (uintptr_t)src, n);
}
hipError_t hipMemcpyDtoDAsync(void *dst, const void *src, size_t n, hipStream_t s) {
	return mem_copy("dtod", (uintptr_t)dst, (uintptr_t)src, n);
}
hipError_t hipModuleLoadData(module **m, const void *image) {
	NEED_DEVICE();
	return module_load(m, image);
}
hipError_t hipModuleUnload(module *m) {
	module_unload(m);
	return 0;
}
hipError_t hipModuleGetFunction(function **f, module *m, const char *name) { return get_function(f, m, name); }
hipError_t hipFuncGetAttribute(int *v, int attrib, function *f) {
	switch (attrib) {
	case 0: *v = f->max_threads; break;
	case 1: *v = f->static_shared; break;
	default: return E_INVALID_VALUE;
	}
	return 0;
}
hipError_t hipModuleLaunchKernel(function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
				 unsigned bz, unsigned shared, hipStream_t s, void **params, void **extra) {
	NEED_DEVICE();
	FAIL_IF_INJECTED("hipModuleLaunchKernel");
	/* extra: BUFFER_POINTER (1), the block, BUFFER_SIZE (2), &its size, END (3) */
	if (params || !extra || extra[0] != (void *)1 || extra[2] != (void *)2 || extra[4] != (void *)3)
		return E_INVALID_VALUE;
	f->max_dynamic = 64 * 1024 - f->static_shared;
	const unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
	return launch(f, g, b, shared, NULL, extra[1], *(size_t *)extra[3]);
}
hipError_t hipEventCreate(event **e) { return event_create(e); }
hipError_t hipEventRecord(event *e, hipStream_t s) { return event_record(e); }
hipError_t hipEventSynchronize(event *e) {
	FAIL_IF_INJECTED("hipEventSynchronize");
	return 0;
}
hipError_t hipEventElapsedTime(float *ms, event *a, event *b) { return event_elapsed(ms, a, b); }
hipError_t hipEventDestroy(event *e) { return event_destroy(e); }
const char *hipGetErrorName(hipError_t e) {
	int i = error_index(e);
	return i < 0 ? "hipErrorUnknown" : errors[i].hip;
}
const char *hipGetErrorString(hipError_t e) {
	int i = error_index(e);
	return i < 0 ? "unknown error" : errors[i].text;
}
#endif
