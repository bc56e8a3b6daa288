/* How many multiply-adds per second one core does with each of the x86
 * instructions a bf16 GEMM could use: f32 FMA (vfmadd231ps zmm, what the
 * scalar GEMM becomes), vdpbf16ps zmm and ymm (kernel IR's dot2), and AMX
 * tdpbf16ps (when the CPU and OS have it).  Independent accumulators, no
 * memory traffic: the instruction's own rate.  With "amx", also a plain AMX
 * GEMM (2 x 2 tiles of 16 x 16 sums, B in the k pairs dot2 packs, checked
 * against a double sum) on the transformer block's three large shapes: what
 * an AMX path could reach.  docs/precision.md has what
 * it gave on the machine the dot2 path was measured on; run it before
 * turning TBC_GEMM_DOT2=1 on for another CPU.  Not built by CMake (it needs
 * the ISA flags):
 *
 *   gcc -O2 -mavx512f -mavx512vl -mavx512bf16 -mfma -mamx-tile -mamx-bf16 bench/bf16_rate.c -o bf16_rate -lm
 *   ./bf16_rate          # add "amx" to run the AMX part */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
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
#define REPS 20000000L

static void report(const char *what, double seconds, double macs_per_instr) {
	double ns = seconds / ((double)REPS * NA) * 1e9;
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
	long n = REPS / 8;
	double t0 = now();
	for (long i = 0; i < n; i++) {
		_tile_dpbf16ps(0, 4, 6);
		_tile_dpbf16ps(1, 4, 7);
		_tile_dpbf16ps(2, 5, 6);
		_tile_dpbf16ps(3, 5, 7);
	}
	double s = now() - t0, ns = s / ((double)n * 4) * 1e9;
	printf("%-22s %7.3f ns an instruction, %6.1f G multiply-adds/s\n", "tdpbf16ps (AMX)", ns, 16.0 * 16 * 32 / ns);
	/* y (M x N f32) = A (M x K bf16) * B (K x N bf16 in k pairs: [K/2][N][2]) */
	static const int shapes[3][3] = {{128, 512, 1536}, {128, 512, 2048}, {128, 2048, 512}};
	double total = 0;
	for (int sh = 0; sh < 3; sh++) {
		int M = shapes[sh][0], K = shapes[sh][1], N = shapes[sh][2];
		uint16_t *A = aligned_alloc(64, (size_t)M * K * 2), *B = aligned_alloc(64, (size_t)K * N * 2);
		float *Y = aligned_alloc(64, (size_t)M * N * 4);
		for (size_t i = 0; i < (size_t)M * K; i++) A[i] = (uint16_t)(0x3c00 + i % 7);
		for (size_t i = 0; i < (size_t)K * N; i++) B[i] = (uint16_t)(0x3c00 + i % 5);
		double best = 1e9;
		for (int r = 0; r < 50; r++) {
			double t0 = now();
			for (int i = 0; i < M; i += 32)
				for (int j = 0; j < N; j += 32) {
					_tile_zero(0);
					_tile_zero(1);
					_tile_zero(2);
					_tile_zero(3);
					for (int k = 0; k < K; k += 32) {
						_tile_loadd(4, A + (size_t)i * K + k, K * 2);
						_tile_loadd(5, A + (size_t)(i + 16) * K + k, K * 2);
						_tile_loadd(6, B + (size_t)(k / 2) * N * 2 + j * 2, N * 4);
						_tile_loadd(7, B + (size_t)(k / 2) * N * 2 + (j + 16) * 2, N * 4);
						_tile_dpbf16ps(0, 4, 6);
						_tile_dpbf16ps(1, 4, 7);
						_tile_dpbf16ps(2, 5, 6);
						_tile_dpbf16ps(3, 5, 7);
					}
					_tile_stored(0, Y + (size_t)i * N + j, N * 4);
					_tile_stored(1, Y + (size_t)i * N + j + 16, N * 4);
					_tile_stored(2, Y + (size_t)(i + 16) * N + j, N * 4);
					_tile_stored(3, Y + (size_t)(i + 16) * N + j + 16, N * 4);
				}
			double t = now() - t0;
			if (t < best) best = t;
		}
		double maxerr = 0;
		for (int i = 0; i < M; i += 37)
			for (int j = 0; j < N; j += 29) {
				double ref = 0;
				for (int k = 0; k < K; k++) {
					uint32_t a = (uint32_t)A[(size_t)i * K + k] << 16, b = (uint32_t)B[(size_t)(k / 2) * N * 2 + j * 2 + k % 2] << 16;
					float fa, fb;
					memcpy(&fa, &a, 4);
					memcpy(&fb, &b, 4);
					ref += (double)fa * fb;
				}
				double e = fabs((Y[(size_t)i * N + j] - ref) / ref);
				if (e > maxerr) maxerr = e;
			}
		printf("AMX GEMM %dx%dx%d: fastest of 50 %.3f ms, %.0f G multiply-adds/s (max relative error %.1e)\n", M, K, N,
		       best * 1e3, (double)M * N * K / best / 1e9, maxerr);
		total += best;
		free(A);
		free(B);
		free(Y);
	}
	printf("the three together: %.3f ms\n", total * 1e3);
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
	for (long n = 0; n < REPS; n++) {
#pragma GCC unroll 24
		for (int i = 0; i < NA; i++) acc[i] = _mm512_fmadd_ps(x, x, acc[i]);
		__asm__ volatile("" : "+v"(x));
	}
	double t1 = now();
	for (long n = 0; n < REPS; n++) {
#pragma GCC unroll 24
		for (int i = 0; i < NA; i++) acc[i] = _mm512_dpbf16_ps(acc[i], xb, xb);
		__asm__ volatile("" : "+v"(xb));
	}
	double t2 = now();
	for (long n = 0; n < REPS; n++) {
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
