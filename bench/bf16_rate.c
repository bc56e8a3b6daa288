/* How many multiply-adds per second one core does with each of the x86
 * instructions a bf16 GEMM could use: f32 FMA (vfmadd231ps zmm, what the
 * scalar GEMM becomes), vdpbf16ps zmm and ymm (kernel IR's dot2), and AMX
 * tdpbf16ps (when the CPU and OS have it).  Independent accumulators, no
 * memory traffic: the instruction's own rate.  docs/precision.md has what
 * it gave on the machine the dot2 path was measured on; run it before
 * turning TBC_GEMM_DOT2=1 on for another CPU.  Not built by CMake (it needs
 * the ISA flags):
 *
 *   gcc -O2 -mavx512f -mavx512vl -mavx512bf16 -mfma -mamx-tile -mamx-bf16 bench/bf16_rate.c -o bf16_rate
 *   ./bf16_rate          # add "amx" to run the AMX part */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define NA 24
#define N 20000000L

static void report(const char *what, double seconds, double macs_per_instr) {
	double ns = seconds / ((double)N * NA) * 1e9;
	printf("%-22s %7.3f ns an instruction, %6.1f G multiply-adds/s\n", what, ns, macs_per_instr / ns);
}

typedef struct {
	uint8_t palette, start, reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} tilecfg;

static void amx(void) {
	/* Linux: a process asks for the AMX tile state first (ARCH_REQ_XCOMP_PERM, XTILEDATA) */
	if (syscall(SYS_arch_prctl, 0x1023, 18)) {
		printf("AMX: the OS refused the tile state\n");
		return;
	}
	tilecfg c;
	memset(&c, 0, sizeof c);
	c.palette = 1;
	for (int t = 0; t < 8; t++) c.rows[t] = 16, c.colsb[t] = 64;
	_tile_loadconfig(&c);
	static uint16_t a[16][32], b[16][32];
	for (int i = 0; i < 16; i++)
		for (int k = 0; k < 32; k++) a[i][k] = b[i][k] = 0x3c00;
	_tile_loadd(4, a, 64);
	_tile_loadd(5, a, 64);
	_tile_loadd(6, b, 64);
	_tile_loadd(7, b, 64);
	_tile_zero(0);
	_tile_zero(1);
	_tile_zero(2);
	_tile_zero(3);
	long n = N / 8;
	double t0 = now();
	for (long i = 0; i < n; i++) {
		_tile_dpbf16ps(0, 4, 6);
		_tile_dpbf16ps(1, 4, 7);
		_tile_dpbf16ps(2, 5, 6);
		_tile_dpbf16ps(3, 5, 7);
	}
	double s = now() - t0, ns = s / ((double)n * 4) * 1e9;
	printf("%-22s %7.3f ns an instruction, %6.1f G multiply-adds/s\n", "tdpbf16ps (AMX)", ns, 16.0 * 16 * 32 / ns);
	_tile_release();
}

int main(int argc, char **argv) {
	__m512 acc[NA];
	__m256 acc8[NA];
	for (int i = 0; i < NA; i++) acc[i] = _mm512_set1_ps(1.0f), acc8[i] = _mm256_set1_ps(1.0f);
	__m512 x = _mm512_set1_ps(1e-3f);
	__m512bh xb = (__m512bh)_mm512_set1_epi32(0x3c003c00);
	__m256bh xh = (__m256bh)_mm256_set1_epi32(0x3c003c00);
	double t0 = now();
	for (long n = 0; n < N; n++) {
#pragma GCC unroll 24
		for (int i = 0; i < NA; i++) acc[i] = _mm512_fmadd_ps(x, x, acc[i]);
		__asm__ volatile("" : "+v"(x));
	}
	double t1 = now();
	for (long n = 0; n < N; n++) {
#pragma GCC unroll 24
		for (int i = 0; i < NA; i++) acc[i] = _mm512_dpbf16_ps(acc[i], xb, xb);
		__asm__ volatile("" : "+v"(xb));
	}
	double t2 = now();
	for (long n = 0; n < N; n++) {
#pragma GCC unroll 24
		for (int i = 0; i < NA; i++) acc8[i] = _mm256_dpbf16_ps(acc8[i], xh, xh);
		__asm__ volatile("" : "+v"(xh));
	}
	double t3 = now();
	float sum = 0;
	for (int i = 0; i < NA; i++) sum += _mm512_reduce_add_ps(acc[i]) + acc8[i][0];
	report("vfmadd231ps zmm (f32)", t1 - t0, 16);
	report("vdpbf16ps zmm", t2 - t1, 32);
	report("vdpbf16ps ymm", t3 - t2, 16);
	if (argc > 1 && !strcmp(argv[1], "amx")) amx();
	return sum == 12345.0f; /* keeps the sums */
}
