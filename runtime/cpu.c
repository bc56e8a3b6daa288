/* What the host is (architecture and OS, compared with an artifact's target
 * triple) and which CPU features it has (compared with the artifact's
 * "+feat,..." list, in LLVM's feature names).
 *
 * x86: cpuid and xgetbv, the same bits LLVM's getHostCPUFeatures reads, with
 * the OS's register-state support for AVX, AVX-512, AMX and APX.  AArch64:
 * getauxval(AT_HWCAP/AT_HWCAP2).  A "+feature" the runtime cannot detect is
 * refused (running code that needs it could fault); "-feature" and tuning
 * flags (prefer-*, fast-*, slow-*, tuning-*, outline-atomics) require nothing. */
#include <errno.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
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
#define X86_FEATURE(name, leaf, reg, bit, state) {name, leaf, reg, bit, state},
#include "cpu_features.def"
#undef X86_FEATURE
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

/* AMX's tile data is state Linux gives a process only when asked
 * (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, 18): without it
 * the first tile instruction faults.  Asked once, for the whole process. */
static int amx_errno = -1;
static void amx_request_once(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
	amx_errno = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18) == 0 ? 0 : errno;
#else
	amx_errno = ENOSYS;
#endif
}

/* 0 when this process may use AMX tiles, else the errno of the request. */
static int amx_request(void) {
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, amx_request_once);
	return amx_errno;
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
#define A64_FEATURE(name, word, bit) {name, word, bit},
#include "cpu_features.def"
#undef A64_FEATURE
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
#if defined(__x86_64__)
			int e = strcmp(name, "amx-tile") == 0 ? amx_request() : 0;
			if (e)
				return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET,
						  "the artifact uses AMX tiles, and the kernel refused this process the tile state "
						  "(arch_prctl ARCH_REQ_XCOMP_PERM): %s",
						  strerror(e));
#endif
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
