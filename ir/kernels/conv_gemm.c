/* float32 convolution as a packed GEMM, the one fast path of the reference
 * interpreter (a 224x224 ResNet-50 must run in seconds, not minutes).
 *
 * Per image and group, Y[Mg x P] = W[Mg x K] * cols[K x P] where K = Cg x
 * kernel size and P the output positions.  W is packed once into panels of
 * MR rows, cols are gathered from X straight into panels of NR columns (an
 * implicit im2col, zero where the window hangs over the padding), and a
 * register-blocked MR x NR micro-kernel multiplies them.  GCC/Clang vector
 * extensions keep it portable; the sums are float32 (like onnxruntime's). */
#include <stdint.h>

#include "conv_util.h"

/* The hot loop of the interpreter: optimise it even in -O0 debug builds
 * (GCC; clang has no per-file switch). */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__OPTIMIZE__)
#pragma GCC optimize("O2")
#endif

#define MR 4 /* rows of W per micro-kernel */
#define NR 8 /* output positions per micro-kernel */
#define NB 8 /* column panels gathered per block */

typedef float v8f __attribute__((vector_size(NR * sizeof(float))));

static void micro_kernel(int64_t K, const float *restrict a, const float *restrict b, float c[MR][NR]) {
	v8f c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
	for (int64_t k = 0; k < K; k++) {
		v8f bv = *(const v8f *)(b + NR * k);
		const float *ak = a + MR * k;
		c0 += ak[0] * bv;
		c1 += ak[1] * bv;
		c2 += ak[2] * bv;
		c3 += ak[3] * bv;
	}
	memcpy(c[0], &c0, sizeof c0);
	memcpy(c[1], &c1, sizeof c1);
	memcpy(c[2], &c2, sizeof c2);
	memcpy(c[3], &c3, sizeof c3);
}

static void *alloc_aligned(size_t bytes) {
	size_t n = (bytes + 63) / 64 * 64;
	return aligned_alloc(64, n ? n : 64);
}

/* Gathers the im2col columns p0 .. p0 + NB*NR - 1 of one image and group
 * into NB panels of K x NR.  Columns past P read as zero. */
static void gather_columns(const conv_geom *g, const float *xg, int64_t Cg, int64_t ksz, const int64_t *koff,
			   int64_t P, int64_t p0, int npan, float *bp) {
	int nsp = g->nsp;
	int64_t in_size = conv_prod(0, nsp, g->in), K = Cg * ksz;
	int64_t base[NB * NR][CONV_MAX_SPATIAL];
	for (int j = 0; j < npan * NR; j++) {
		int64_t p = p0 + j;
		for (int d = nsp - 1; d >= 0; d--) {
			if (p0 + j >= P) {
				base[j][d] = INT64_MIN / 4; /* always outside */
				continue;
			}
			base[j][d] = (p % g->out[d]) * g->stride[d] - g->pad_begin[d];
			p /= g->out[d];
		}
	}
	for (int pan = 0; pan < npan; pan++) {
		float *dst = bp + (int64_t)pan * K * NR;
		const int64_t(*bs)[CONV_MAX_SPATIAL] = base + pan * NR;
		for (int64_t c = 0; c < Cg; c++) {
			const float *xc = xg + c * in_size;
			for (int64_t kk = 0; kk < ksz; kk++, dst += NR) {
				const int64_t *ko = koff + kk * nsp;
				if (nsp == 2) {
					int64_t H = g->in[0], W = g->in[1];
					for (int j = 0; j < NR; j++) {
						int64_t ih = bs[j][0] + ko[0], iw = bs[j][1] + ko[1];
						dst[j] = (uint64_t)ih < (uint64_t)H && (uint64_t)iw < (uint64_t)W ? xc[ih * W + iw] : 0.0f;
					}
					continue;
				}
				for (int j = 0; j < NR; j++) {
					int64_t il = 0;
					bool inside = true;
					for (int d = 0; d < nsp && inside; d++) {
						int64_t i = bs[j][d] + ko[d];
						inside = (uint64_t)i < (uint64_t)g->in[d];
						il = il * g->in[d] + i;
					}
					dst[j] = inside ? xc[il] : 0.0f;
				}
			}
		}
	}
}

void conv_gemm_f32(const conv_geom *g, int64_t N, int64_t C, int64_t M, int64_t group, const float *x,
		   const float *w, const float *bias, float *y, bool *oom) {
	int nsp = g->nsp;
	int64_t Cg = C / group, Mg = M / group, ksz = conv_prod(0, nsp, g->kernel), K = Cg * ksz;
	int64_t P = conv_prod(0, nsp, g->out), in_size = conv_prod(0, nsp, g->in);
	int64_t mpanels = (Mg + MR - 1) / MR;
	if (N == 0 || M == 0 || P == 0) return;
	float *apack = alloc_aligned((size_t)(group * mpanels * (K ? K : 1) * MR) * sizeof(float));
	float *bpack = alloc_aligned((size_t)(NB * (K ? K : 1) * NR) * sizeof(float));
	int64_t *koff = malloc((size_t)(ksz * nsp) * sizeof *koff);
	if (!apack || !bpack || !koff) {
		*oom = true;
		goto done;
	}
	/* W as panels of MR rows, k-major inside a panel; rows past Mg are 0. */
	for (int64_t gr = 0; gr < group; gr++)
		for (int64_t mp = 0; mp < mpanels; mp++) {
			float *dst = apack + (gr * mpanels + mp) * K * MR;
			for (int64_t k = 0; k < K; k++)
				for (int i = 0; i < MR; i++) {
					int64_t m = mp * MR + i;
					dst[k * MR + i] = m < Mg ? w[(gr * Mg + m) * K + k] : 0.0f;
				}
		}
	/* Offset of each kernel position from the window's corner. */
	int64_t kidx[CONV_MAX_SPATIAL] = {0};
	for (int64_t kk = 0; kk < ksz; kk++, tbc_index_next(nsp, g->kernel, kidx))
		for (int d = 0; d < nsp; d++) koff[kk * nsp + d] = kidx[d] * g->dil[d];

	for (int64_t n = 0; n < N; n++)
		for (int64_t gr = 0; gr < group; gr++) {
			const float *xg = x + (n * C + gr * Cg) * in_size;
			for (int64_t p0 = 0; p0 < P; p0 += NB * NR) {
				int64_t nc = P - p0 < NB * NR ? P - p0 : NB * NR;
				int npan = (int)((nc + NR - 1) / NR);
				gather_columns(g, xg, Cg, ksz, koff, P, p0, npan, bpack);
				for (int64_t mp = 0; mp < mpanels; mp++)
					for (int pan = 0; pan < npan; pan++) {
						float c[MR][NR];
						micro_kernel(K, apack + (gr * mpanels + mp) * K * MR, bpack + (int64_t)pan * K * NR, c);
						for (int i = 0; i < MR; i++) {
							int64_t m = mp * MR + i;
							if (m >= Mg) break;
							int64_t oc = gr * Mg + m;
							float b = bias ? bias[oc] : 0.0f;
							float *yr = y + (n * M + oc) * P + p0 + pan * NR;
							for (int j = 0; j < NR && p0 + pan * NR + j < P; j++) yr[j] = c[i][j] + b;
						}
					}
			}
		}
done:
	free(apack);
	free(bpack);
	free(koff);
}
