/* What the host is (architecture and OS, compared with an artifact's target
 * triple) and which CPU features it has (compared with the artifact's
 * "+feat,..." list, in LLVM's feature names).
 *
 * x86: cpuid and xgetbv, the same bits LLVM's getHostCPUFeatures reads, with
 * the OS's register-state support for AVX, AVX-512, AMX and APX.  AArch64:
 * getauxval(AT_HWCAP/AT_HWCAP2).  A "+feature" the runtime cannot detect is
 * refused (running code that needs it could fault); "-feature" and tuning
 * flags (prefer-*, fast-*, slow-*, tuning-*, outline-atomics) require nothing. */
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "internal.h"

#if defined(__x86_64__)
#define HOST_ARCH "x86_64"
#elif defined(__aarch64__)
#define HOST_ARCH "aarch64"
#else
#define HOST_ARCH "unknown"
#endif

#if defined(__linux__)
#define HOST_OS "linux"
#elif defined(__APPLE__)
#define HOST_OS "darwin"
#else
#define HOST_OS "unknown"
#endif

const char *tbcrt__host_description(void) {
	return HOST_ARCH "-" HOST_OS;
}

/* The triple's architecture in its canonical spelling. */
static const char *canonical_arch(const char *a, size_t n) {
	static const struct {
		const char *spelling, *arch;
	} names[] = {{"x86_64", "x86_64"}, {"amd64", "x86_64"}, {"x86-64", "x86_64"},
		     {"aarch64", "aarch64"}, {"arm64", "aarch64"}};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strlen(names[i].spelling) == n && !memcmp(names[i].spelling, a, n)) return names[i].arch;
	return NULL;
}

tbcrt_status tbcrt__check_triple(const char *triple) {
	if (!*triple) return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "the artifact names no target triple");
	const char *dash = strchr(triple, '-');
	size_t n = dash ? (size_t)(dash - triple) : strlen(triple);
	const char *arch = canonical_arch(triple, n);
	if (!arch || strcmp(arch, HOST_ARCH) != 0)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET, "the artifact is compiled for '%s'; this host is %s", triple,
				  tbcrt__host_description());
	/* arch-vendor-os[-env]: with a vendor, the OS is the third part. */
	const char *os = dash ? strchr(dash + 1, '-') : NULL;
	if (os && strncmp(os + 1, HOST_OS, strlen(HOST_OS)) != 0)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET, "the artifact is compiled for '%s'; this host is %s", triple,
				  tbcrt__host_description());
	return tbcrt__ok();
}

#if defined(__x86_64__)
enum { EAX, EBX, ECX, EDX };
typedef struct {
	const char *name;
	uint8_t leaf; /* index into the leaves below */
	uint8_t reg, bit;
	uint8_t state; /* OS support it needs: 0 none, 1 AVX, 2 AVX-512, 3 AMX, 4 APX */
} x86_feature;

enum { L1, L7, L7_1, LD_1, LE1, LE8, L14, L19, NLEAVES };
static const x86_feature x86_features[] = {
	{"x87", L1, EDX, 0, 0},        {"cx8", L1, EDX, 8, 0},        {"cmov", L1, EDX, 15, 0},
	{"mmx", L1, EDX, 23, 0},       {"fxsr", L1, EDX, 24, 0},      {"sse", L1, EDX, 25, 0},
	{"sse2", L1, EDX, 26, 0},      {"sse3", L1, ECX, 0, 0},       {"pclmul", L1, ECX, 1, 0},
	{"ssse3", L1, ECX, 9, 0},      {"fma", L1, ECX, 12, 1},       {"cx16", L1, ECX, 13, 0},
	{"sse4.1", L1, ECX, 19, 0},    {"sse4.2", L1, ECX, 20, 0},    {"crc32", L1, ECX, 20, 0},
	{"movbe", L1, ECX, 22, 0},     {"popcnt", L1, ECX, 23, 0},    {"aes", L1, ECX, 25, 0},
	{"xsave", L1, ECX, 26, 0},     {"avx", L1, ECX, 28, 1},       {"f16c", L1, ECX, 29, 1},
	{"rdrnd", L1, ECX, 30, 0},
	{"fsgsbase", L7, EBX, 0, 0},   {"sgx", L7, EBX, 2, 0},        {"bmi", L7, EBX, 3, 0},
	{"avx2", L7, EBX, 5, 1},       {"bmi2", L7, EBX, 8, 0},       {"invpcid", L7, EBX, 10, 0},
	{"rtm", L7, EBX, 11, 0},       {"avx512f", L7, EBX, 16, 2},   {"evex512", L7, EBX, 16, 2},
	{"avx512dq", L7, EBX, 17, 2},  {"rdseed", L7, EBX, 18, 0},    {"adx", L7, EBX, 19, 0},
	{"avx512ifma", L7, EBX, 21, 2}, {"clflushopt", L7, EBX, 23, 0}, {"clwb", L7, EBX, 24, 0},
	{"avx512cd", L7, EBX, 28, 2},  {"sha", L7, EBX, 29, 0},       {"avx512bw", L7, EBX, 30, 2},
	{"avx512vl", L7, EBX, 31, 2},
	{"prefetchwt1", L7, ECX, 0, 0}, {"avx512vbmi", L7, ECX, 1, 2}, {"pku", L7, ECX, 4, 0},
	{"waitpkg", L7, ECX, 5, 0},    {"avx512vbmi2", L7, ECX, 6, 2}, {"shstk", L7, ECX, 7, 0},
	{"gfni", L7, ECX, 8, 0},       {"vaes", L7, ECX, 9, 1},       {"vpclmulqdq", L7, ECX, 10, 1},
	{"avx512vnni", L7, ECX, 11, 2}, {"avx512bitalg", L7, ECX, 12, 2}, {"avx512vpopcntdq", L7, ECX, 14, 2},
	{"rdpid", L7, ECX, 22, 0},     {"kl", L7, ECX, 23, 0},        {"cldemote", L7, ECX, 25, 0},
	{"movdiri", L7, ECX, 27, 0},   {"movdir64b", L7, ECX, 28, 0}, {"enqcmd", L7, ECX, 29, 0},
	{"uintr", L7, EDX, 5, 0},      {"avx512vp2intersect", L7, EDX, 8, 2}, {"serialize", L7, EDX, 14, 0},
	{"tsxldtrk", L7, EDX, 16, 0},  {"pconfig", L7, EDX, 18, 0},   {"amx-bf16", L7, EDX, 22, 3},
	{"avx512fp16", L7, EDX, 23, 2}, {"amx-tile", L7, EDX, 24, 3}, {"amx-int8", L7, EDX, 25, 3},
	{"sha512", L7_1, EAX, 0, 1},   {"sm3", L7_1, EAX, 1, 1},      {"sm4", L7_1, EAX, 2, 1},
	{"raoint", L7_1, EAX, 3, 0},   {"avxvnni", L7_1, EAX, 4, 1},  {"avx512bf16", L7_1, EAX, 5, 2},
	{"cmpccxadd", L7_1, EAX, 7, 0}, {"amx-fp16", L7_1, EAX, 21, 3}, {"hreset", L7_1, EAX, 22, 0},
	{"avxifma", L7_1, EAX, 23, 1}, {"avxvnniint8", L7_1, EDX, 4, 1}, {"avxneconvert", L7_1, EDX, 5, 1},
	{"amx-complex", L7_1, EDX, 8, 3}, {"avxvnniint16", L7_1, EDX, 10, 1}, {"prefetchi", L7_1, EDX, 14, 0},
	{"usermsr", L7_1, EDX, 15, 0}, {"egpr", L7_1, EDX, 21, 4},    {"push2pop2", L7_1, EDX, 21, 4},
	{"ppx", L7_1, EDX, 21, 4},     {"ndd", L7_1, EDX, 21, 4},     {"ccmp", L7_1, EDX, 21, 4},
	{"cf", L7_1, EDX, 21, 4},      {"nf", L7_1, EDX, 21, 4},      {"zu", L7_1, EDX, 21, 4},
	{"xsaveopt", LD_1, EAX, 0, 0}, {"xsavec", LD_1, EAX, 1, 0},   {"xsaves", LD_1, EAX, 3, 0},
	{"sahf", LE1, ECX, 0, 0},      {"lzcnt", LE1, ECX, 5, 0},     {"sse4a", LE1, ECX, 6, 0},
	{"prfchw", LE1, ECX, 8, 0},    {"xop", LE1, ECX, 11, 1},      {"lwp", LE1, ECX, 15, 0},
	{"fma4", LE1, ECX, 16, 1},     {"tbm", LE1, ECX, 21, 0},      {"mwaitx", LE1, ECX, 29, 0},
	{"64bit", LE1, EDX, 29, 0},    {"nopl", LE1, EDX, 29, 0},
	{"clzero", LE8, EBX, 0, 0},    {"rdpru", LE8, EBX, 4, 0},     {"wbnoinvd", LE8, EBX, 9, 0},
	{"ptwrite", L14, EBX, 4, 0},   {"widekl", L19, EBX, 2, 0},
};

typedef struct {
	bool ready;
	uint32_t r[NLEAVES][4];
	bool avx_state, avx512_state, amx_state, apx_state;
} x86_host;

static void query(unsigned leaf, unsigned sub, unsigned max, uint32_t out[4]) {
	if (leaf > max) return;
	__cpuid_count(leaf, sub, out[EAX], out[EBX], out[ECX], out[EDX]);
}

static x86_host host;

static void x86_detect_once(void) {
	x86_host t;
	memset(&t, 0, sizeof t);
	unsigned max = __get_cpuid_max(0, NULL), emax = __get_cpuid_max(0x80000000u, NULL);
	query(1, 0, max, t.r[L1]);
	query(7, 0, max, t.r[L7]);
	if (max >= 7 && t.r[L7][EAX] >= 1) query(7, 1, max, t.r[L7_1]);
	query(0xd, 1, max, t.r[LD_1]);
	query(0x14, 0, max, t.r[L14]);
	query(0x19, 0, max, t.r[L19]);
	query(0x80000001u, 0, emax, t.r[LE1]);
	query(0x80000008u, 0, emax, t.r[LE8]);
	if (t.r[L1][ECX] >> 27 & 1) { /* OSXSAVE: xgetbv says which register state the OS saves */
		uint32_t lo, hi;
		__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
		uint64_t xcr0 = (uint64_t)hi << 32 | lo;
		t.avx_state = (xcr0 & 0x6) == 0x6;
		t.avx512_state = t.avx_state && (xcr0 & 0xe0) == 0xe0;
		t.amx_state = (xcr0 & 0x60000) == 0x60000;
		t.apx_state = (xcr0 >> 19 & 1) != 0;
	}
	t.ready = true;
	host = t;
}

static const x86_host *x86_detect(void) {
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, x86_detect_once);
	return &host;
}

int tbcrt__host_has_feature(const char *name) {
	const x86_host *h = x86_detect();
	for (size_t i = 0; i < sizeof x86_features / sizeof *x86_features; i++) {
		const x86_feature *f = &x86_features[i];
		if (strcmp(f->name, name) != 0) continue;
		bool on = (h->r[f->leaf][f->reg] >> f->bit & 1) != 0;
		switch (f->state) {
		case 1: on = on && h->avx_state; break;
		case 2: on = on && h->avx512_state; break;
		case 3: on = on && h->amx_state; break;
		case 4: on = on && h->apx_state; break;
		}
		return on;
	}
	/* AVX10: leaf 7.1 EDX bit 19, version and vector widths in leaf 0x24. */
	if (!strcmp(name, "avx10.1-256") || !strcmp(name, "avx10.1-512")) {
		if (!(h->r[L7_1][EDX] >> 19 & 1) || !h->avx512_state) return 0;
		uint32_t r[4] = {0, 0, 0, 0};
		query(0x24, 0, __get_cpuid_max(0, NULL), r);
		if ((r[EBX] & 0xff) < 1) return 0;
		return name[9] == '2' ? 1 : (int)(r[EBX] >> 18 & 1);
	}
	return -1;
}

#elif defined(__aarch64__)
#ifndef AT_HWCAP2
#define AT_HWCAP2 26
#endif
typedef struct {
	const char *name;
	uint8_t word, bit; /* word 0: AT_HWCAP, 1: AT_HWCAP2 */
} a64_feature;
static const a64_feature a64_features[] = {
	{"fp-armv8", 0, 0},  {"neon", 0, 1},       {"aes", 0, 3},        {"crc", 0, 7},
	{"lse", 0, 8},       {"fullfp16", 0, 9},   {"rdm", 0, 12},       {"jsconv", 0, 13},
	{"complxnum", 0, 14}, {"rcpc", 0, 15},     {"ccpp", 0, 16},      {"sha3", 0, 17},
	{"sm4", 0, 19},      {"dotprod", 0, 20},   {"sve", 0, 22},       {"fp16fml", 0, 23},
	{"dit", 0, 24},      {"rcpc-immo", 0, 26}, {"flagm", 0, 27},     {"ssbs", 0, 28},
	{"sb", 0, 29},       {"pauth", 0, 30},
	{"ccdp", 1, 0},      {"sve2", 1, 1},       {"sve2-aes", 1, 2},   {"sve2-bitperm", 1, 4},
	{"sve2-sha3", 1, 5}, {"sve2-sm4", 1, 6},   {"altnzcv", 1, 7},    {"fptoint", 1, 8},
	{"i8mm", 1, 13},     {"f32mm", 1, 10},     {"f64mm", 1, 11},     {"bf16", 1, 14},
	{"rand", 1, 16},     {"bti", 1, 17},       {"mte", 1, 18},       {"sme", 1, 23},
};

int tbcrt__host_has_feature(const char *name) {
	unsigned long words[2] = {getauxval(AT_HWCAP), getauxval(AT_HWCAP2)};
	if (!strcmp(name, "v8a") || !strcmp(name, "sha2")) /* sha2: HWCAP_SHA1|SHA2 */
		return name[0] == 'v' ? 1 : (int)((words[0] >> 5 & 1) && (words[0] >> 6 & 1));
	for (size_t i = 0; i < sizeof a64_features / sizeof *a64_features; i++)
		if (!strcmp(a64_features[i].name, name))
			return (int)(words[a64_features[i].word] >> a64_features[i].bit & 1);
	return -1;
}

#else
int tbcrt__host_has_feature(const char *name) {
	(void)name;
	return -1;
}
#endif

static bool is_tuning_flag(const char *f, size_t n) {
	static const char *const prefixes[] = {"prefer-", "fast-", "slow-", "tuning-", "false-deps-"};
	for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
		size_t k = strlen(prefixes[i]);
		if (n > k && !memcmp(f, prefixes[i], k)) return true;
	}
	return n == 15 && !memcmp(f, "outline-atomics", 15);
}

tbcrt_status tbcrt__check_features(const char *features) {
	const char *p = features;
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		if (n == 0 || (p[0] != '+' && p[0] != '-') || n == 1)
			return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT,
					  "CPU feature list '%s' is malformed: expected \"+name\" or \"-name\" entries separated by commas",
					  features);
		if (p[0] == '+' && !is_tuning_flag(p + 1, n - 1)) {
			char name[64];
			if (n - 1 >= sizeof name)
				return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET, "the artifact needs an unknown CPU feature '%.*s'",
						  (int)(n - 1 > 100 ? 100 : n - 1), p + 1);
			memcpy(name, p + 1, n - 1);
			name[n - 1] = '\0';
			int has = tbcrt__host_has_feature(name);
			if (has < 0)
				return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET,
						  "the artifact needs CPU feature '%s', which this runtime cannot detect on %s", name,
						  tbcrt__host_description());
			if (!has)
				return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET,
						  "the artifact needs CPU feature '%s', which this %s CPU lacks", name,
						  tbcrt__host_description());
		}
		p += n;
		if (*p == ',') {
			p++;
			if (!*p)
				return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "CPU feature list '%s' ends with a comma", features);
		}
	}
	return tbcrt__ok();
}
