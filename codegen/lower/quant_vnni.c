/* Integer GEMMs (MatMulInteger, QLinearMatMul) with 8-bit operands made of
 * kernel IR's byte dot product (kir_dot4), for targets declaring it
 * (tbc_target_desc.dot4_u8s8: x86 with AVX-512 VNNI, whose vpdpbusd
 * multiplies 64 unsigned by signed bytes and sums them four at a time into
 * 16 int32 lanes).
 *
 * The instruction multiplies u8 by i8, so both operands are moved into
 * those ranges and the difference is paid back from sums:
 *   a_u = a + ca (ca = 128 for an i8 a: its sign bit flipped as it is
 *         loaded, kir_dot4's rule; 0 for u8),
 *   b_s = b - cb (cb = 128 for a u8 b, 0 for i8; b is a constant, packed
 *         when lowering),
 *   za' = a_zp + ca, zb' = b_zp - cb, and then
 *   y = sum_k (a - a_zp)(b - b_zp)
 *     = sum_k a_u b_s - za' colsum(b_s) - zb' rowsum(a_u) + K za' zb',
 * every term wrapping in int32 like the sum itself, so the result is the
 * exact int32 sum, bit for bit the interpreter's (onnxruntime's MLAS pays
 * back the same way).  colsum(b_s) - K zb' is a constant where zb' is
 * (the common case: i8 weights with zero point 0, or u8 with 128, where
 * zb' = 0 and the row sums are not needed either).
 *
 * B is packed in panels of NC columns (32 by default), each panel's groups
 * of 4 rows contiguous: byte q of column c of group g of panel p at
 * ((p * G + g) * NC + c) * 4 + q, G = ceil(K / 4), zeros past K and N.  A
 * kernel's tile of MR rows x NC columns (8 x 32: 16 zmm accumulators)
 * walks one panel front to back.  K % 4 trailing products are added by
 * scalar kernel IR after the dot4; columns past N of the last panel are
 * computed on zeros and not stored.  A convolution's B, its
 * activations, is packed by a kernel of its own (quant_conv.c) with every
 * column of a group of 4 rows side by side (ldb apart), its column sums
 * beside it.
 *
 * The nest: a parallel loop over (batch, row group, column block), row
 * tiles inside, panels of the block inside those (the tile's A rows stay
 * in L1 while the panels stream from L2), as the float GEMM's chunks
 * (codegen/lower/matmul.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/quant_internal.h"
#include "codegen/lower/quant_vnni.h"

#define VNNI_CHUNKS 16

bool qgemm_vnni_fits(const lower_cx *cx, tbc_dtype a, tbc_dtype b, int64_t K, int64_t N) {
	if (!cx->target->dot4_u8s8) return false;
	const char *e = getenv("TBC_VNNI");
	if (e && e[0] == '0' && !e[1]) return false;
	if ((a != TBC_DT_U8 && a != TBC_DT_I8) || (b != TBC_DT_U8 && b != TBC_DT_I8) || K < 4 || N < 16) return false;
	/* the sums' bound: no overflow matters (int32 wraps as the sum does),
	 * but keep the packed operand's size sane */
	return K <= ((int64_t)1 << 24) && N <= ((int64_t)1 << 24);
}

bool qgemm_vnni_wanted(const lower_cx *cx, const tbc_value *a, const tbc_value *b) {
	const tbc_type *bt = &b->type;
	if (b->kind != TBC_VALUE_CONST || !b->constant || bt->rank != 2 || bt->dims[0].sym || bt->dims[1].sym) return false;
	return qgemm_vnni_fits(cx, a->type.dtype, bt->dtype, bt->dims[0].size, bt->dims[1].size);
}

/* The register tile: TBC_VNNI_TILE=MRxNC (NC 16, 32, 48 or 64; MR x NC / 16
 * at most 24 accumulators), else 8 x 32 with 32 vector registers (16 zmm
 * sums), 4 x 16 with 16 (AVX-VNNI's ymm: 8 sums, 2 of b, a broadcast). */
static void choose_tile(const tbc_target_desc *t, int64_t N, int *mr, int *nc) {
	if (t->vector_regs >= 32) *mr = 8, *nc = 32;
	else *mr = 4, *nc = 16;
	const char *e = getenv("TBC_VNNI_TILE");
	int m = 0, n = 0;
	if (e && sscanf(e, "%dx%d", &m, &n) == 2 && m >= 1 && m <= KIR_DOT4_MAX_MR && n >= 16 && n <= 64 && n % 16 == 0 &&
	    m * n / 16 <= 24)
		*mr = m, *nc = n;
	while (*nc > 16 && *nc > N) *nc -= 16;
}

int qgemm_vnni_tile_cols(const lower_cx *cx, int64_t N) {
	int mr, nc;
	choose_tile(cx->target, N, &mr, &nc);
	return nc;
}

static kir_expr *i32(kir_kernel *k, int64_t v) { return kir_e_int(k, TBC_DT_I32, v); }
static kir_expr *isub(kir_kernel *k, kir_expr *a, kir_expr *b) { return BIN(k, KIR_SUB, a, b); }
static kir_expr *iadd(kir_kernel *k, kir_expr *a, kir_expr *b) { return BIN(k, KIR_ADD, a, b); }
static kir_expr *imul(kir_kernel *k, kir_expr *a, kir_expr *b) { return BIN(k, KIR_MUL, a, b); }

/* Whether the constant zero point zv (NULL: none) minus cb is the same
 * for every column; its value in *out. */
static bool const_zb(const tbc_value *zv, int64_t cb, int64_t *out) {
	int64_t z = 0;
	if (zv && !quant_uniform_const(zv, &z)) return false;
	*out = z - cb;
	return true;
}

/* What the nest of qgemm_vnni_generate reads: B packed (or a kernel's),
 * its column sums, and the shapes and zero-point facts. */
typedef struct vnni_gemm {
	bool runtime_b, m_static, zb_const, zb_zero, cs_final;
	int nc;
	int64_t K, N, G, P, KG, kt, mc, cb, zb_c, ldb;
	kir_buffer *pkb, *csb;
} vnni_gemm;

static kir_stmt *vnni_nest(lk *l, const gemm_spec *s, const qgemm_vnni *q, const vnni_gemm *v, bool tile);

kir_stmt *qgemm_vnni_generate(lk *l, const gemm_spec *s, const qgemm_vnni *q) {
	kir_kernel *k = l->k;
	lower_cx *cx = l->cx;
	bool runtime_b = q->bpk != NULL;
	const tbc_tensor *bt = runtime_b ? NULL : q->b->constant;
	int64_t K = runtime_b ? q->K : q->b->type.dims[0].size, N = runtime_b ? q->N : q->b->type.dims[1].size;
	int mr, nc;
	choose_tile(cx->target, N, &mr, &nc);
	(void)mr;
	int64_t mc = 0;
	bool m_static = kir_e_const_index(s->M, &mc);
	/* AMX tiles (kir_tile2's 8-bit form) where the target has them and
	 * every tile is whole: one 16 x 16 tile (two side by side doubled the
	 * epilogue's straight-line code, and LLVM's time on it: ResNet-50 QDQ
	 * compiled in 32 s instead of 12, for 10% more speed), a static M of
	 * at least 16 (a last row tile overlapping the one before), K at least
	 * 4.  An M known only while running keeps dot4: its nest (one row
	 * tile, every panel) with tiles ran 4x slower than dot4's on 128 x 256
	 * x 1024, its epilogue left scalar by LLVM (docs/performance.md). */
	bool tile = cx->target->tile_i8 && K >= 4 && N >= 16 && m_static && mc >= 16;
	if (tile) nc = 16;
	int64_t G = (K + 3) / 4, P = (N + nc - 1) / nc, KG = K / 4, kt = K % 4;
	int64_t cb = runtime_b ? q->cb : bt->dtype == TBC_DT_U8 ? 128 : 0;
	int64_t zb_c = 0;
	bool zb_const = const_zb(q->bzv, cb, &zb_c);
	bool zb_zero = zb_const && zb_c == 0;

	/* B packed, and its column sums (less K zb' where zb' is a constant;
	 * a kernel's always). */
	int pb = -1, sb = -1;
	if (!runtime_b) {
		void *pdata = NULL, *sdata = NULL;
		int64_t pdims[3] = {P, G, 4 * nc}, sdims[1] = {P * nc};
		pb = lower_const_new(cx, TBC_DT_I8, 3, pdims, "b_vnni", &pdata);
		sb = pb >= 0 ? lower_const_new(cx, TBC_DT_I32, 1, sdims, "b_vnni_colsum", &sdata) : -1;
		if (pb < 0 || sb < 0) return k->failed = true, NULL;
		int8_t *pk = pdata;
		int32_t *cs = sdata;
		for (int64_t col = 0; col < N; col++) {
			int64_t p = col / nc, c = col % nc;
			uint32_t sum = 0;
			for (int64_t kk = 0; kk < K; kk++) {
				int64_t v = tbc_load_i64(bt->dtype, bt->data, (size_t)(kk * N + col)) - cb;
				pk[((p * G + kk / 4) * nc + c) * 4 + kk % 4] = (int8_t)v;
				sum += (uint32_t)v;
			}
			if (zb_const) sum -= (uint32_t)K * (uint32_t)zb_c;
			cs[col] = (int32_t)sum;
		}
	}
	bool cs_final = zb_const || runtime_b; /* the column sums hold - K zb' */
	int64_t ldb = runtime_b ? q->ldb : 4 * nc;
	kir_buffer *pkb = runtime_b ? q->bpk : lk_buf(l, pb), *csb = runtime_b ? q->bcs : lk_buf(l, sb);
	if (!pkb || !csb) return k->failed = true, NULL;

	vnni_gemm v = {.runtime_b = runtime_b, .m_static = m_static, .zb_const = zb_const, .zb_zero = zb_zero,
		       .cs_final = cs_final, .nc = nc, .K = K, .N = N, .G = G, .P = P, .KG = KG, .kt = kt, .mc = mc,
		       .cb = cb, .zb_c = zb_c, .ldb = ldb, .pkb = pkb, .csb = csb};
	return vnni_nest(l, s, q, &v, tile);
}

static kir_stmt *vnni_nest(lk *l, const gemm_spec *s, const qgemm_vnni *q, const vnni_gemm *v, bool tile) {
	kir_kernel *k = l->k;
	lower_cx *cx = l->cx;
	bool runtime_b = v->runtime_b, m_static = v->m_static, zb_const = v->zb_const, zb_zero = v->zb_zero;
	bool cs_final = v->cs_final;
	int nc = v->nc, mr, nc_unused;
	choose_tile(cx->target, v->N, &mr, &nc_unused);
	int64_t K = v->K, N = v->N, G = v->G, P = v->P, KG = v->KG, kt = v->kt, mc = v->mc, cb = v->cb, zb_c = v->zb_c;
	int64_t ldb = v->ldb;
	kir_buffer *pkb = v->pkb, *csb = v->csb;
	(void)G;
	if (tile) mr = 16;
	if (m_static && mc < mr) mr = mc > 0 ? (int)mc : 1;
	/* a's values as the products read them: an i8 a moved up by 128 for
	 * vpdpbusd (unsigned by signed); tiles multiply signed by signed */
	int64_t ca = s->a.buf->dtype == TBC_DT_I8 && !tile ? 128 : 0;
	bool za_zero = !q->az && ca + q->za_add == 0;

	/* Chunks: as the float GEMM's (matmul.c): blocks of 4 panels, as many
	 * row tiles per chunk as leaves about 16 chunks; a symbolic M: one row
	 * tile and every panel per chunk. */
	int64_t tb = P, rg = 1;
	if (m_static) {
		int64_t nbc;
		if (!kir_e_const_index(s->NB, &nbc)) nbc = 1;
		int64_t rtc = (mc + mr - 1) / mr;
		tb = P < 4 ? P : 4;
		int64_t chunks = nbc * ((P + tb - 1) / tb);
		int64_t groups = chunks >= VNNI_CHUNKS ? 1 : (VNNI_CHUNKS + chunks - 1) / chunks;
		if (groups > rtc) groups = rtc > 0 ? rtc : 1;
		rg = (rtc + groups - 1) / groups;
	}
	int64_t CB = (P + tb - 1) / tb;
	kir_expr *RT = DIV(k, ADD(k, s->M, I(k, mr - 1)), I(k, mr));
	kir_expr *RGN = DIV(k, ADD(k, RT, I(k, rg - 1)), I(k, rg));

	kir_var *t = kir_var_new(k, "t", KIR_INDEX);
	kir_block body = {0};
	kir_expr *cbi = LET(k, &body, "cb", MOD(k, V(k, t), I(k, CB)));
	kir_expr *rest = DIV(k, V(k, t), I(k, CB));
	kir_expr *rgi = LET(k, &body, "rg", MOD(k, rest, RGN));
	kir_expr *batch = LET(k, &body, "batch", DIV(k, rest, RGN));
	kir_expr *base[3];
	for (int w = 0; w < 3; w++) {
		kir_expr *b = s->base && w != 1 ? s->base(s->ctx, l, w, batch) : NULL;
		base[w] = b ? LET(k, &body, w == 0 ? "abase" : "ybase", b) : I(k, 0);
	}
	/* A kernel's B: the batch's; a's zero points: the batch's group's. */
	kir_expr *bfirst = runtime_b ? LET(k, &body, "bfirst", MUL(k, batch, I(k, q->bstride))) : I(k, 0);
	kir_expr *csfirst = runtime_b ? LET(k, &body, "csfirst", MUL(k, batch, I(k, q->ncs))) : I(k, 0);
	kir_expr *azfirst = q->a_groups > 1 ? LET(k, &body, "azfirst", MUL(k, MOD(k, batch, I(k, q->a_groups)), s->M)) : NULL;

	/* A row tile. */
	kir_var *rt = kir_var_new(k, "rt", KIR_INDEX);
	kir_block rtb = {0};
	kir_expr *i0 = LET(k, &rtb, "i0", MUL(k, V(k, rt), I(k, mr)));
	kir_expr *mlast = SUB(k, s->M, I(k, 1));
	/* tiles: 16 consecutive rows, the last row tile overlapping the one
	 * before (the same sums stored twice) */
	if (tile) i0 = LET(k, &rtb, "i0", MIN(k, i0, SUB(k, s->M, I(k, mr))));
	kir_expr *rows[16], *a_at[16], *zap[16], *rsum[16];
	for (int r = 0; r < mr; r++) {
		rows[r] = tile ? ADD(k, i0, I(k, r)) : LET(k, &rtb, "row", MIN(k, ADD(k, i0, I(k, r)), mlast));
		a_at[r] = LET(k, &rtb, "arow", ADD(k, base[0], MUL(k, rows[r], s->a.rs)));
		/* za' = a_zp + ca */
		kir_expr *zat = !q->az_row ? I(k, 0) : azfirst ? ADD(k, azfirst, rows[r]) : rows[r];
		kir_expr *za = q->az ? CAST(k, TBC_DT_I32, LOAD(k, q->az, zat)) : i32(k, 0);
		zap[r] = za_zero ? NULL : LET(k, &rtb, "zap", iadd(k, za, i32(k, ca + q->za_add)));
		rsum[r] = NULL;
		if (!zb_zero) { /* rowsum(a_u) */
			kir_var *rs = kir_var_new(k, "rowsum", TBC_DT_I32), *kk = kir_var_new(k, "k", KIR_INDEX);
			kir_block_add(k, &rtb, kir_s_set(k, rs, i32(k, 0)));
			kir_expr *av = CAST(k, TBC_DT_I32, LOAD(k, s->a.buf, ADD(k, a_at[r], V(k, kk))));
			kir_block_add(k, &rtb, kir_s_for(k, kk, I(k, 0), I(k, K), 1, KIR_LOOP_SEQUENTIAL,
							 kir_s_set(k, rs, iadd(k, V(k, rs), av))));
			rsum[r] = LET(k, &rtb, "rowsum_u", iadd(k, V(k, rs), i32(k, K * ca)));
		}
	}

	/* A tile: panel p of B.  The panels whose columns all lie before N, then (when N is not a
	 * multiple of nc) the last one, whose columns past N are computed on
	 * zeros and not stored: apart, so that the others' stores are plain
	 * rows a vector stores (a test per column keeps the epilogue scalar). */
	int variants = N % nc ? 2 : 1;
	int64_t PF = N / nc;
	for (int part = 0; part < variants; part++) {
		bool partial = part == 1;
		kir_var *p = kir_var_new(k, "p", KIR_INDEX);
		kir_block tblk = {0};
		kir_expr *j0 = LET(k, &tblk, "j0", MUL(k, V(k, p), I(k, nc)));
		kir_expr *pbase = LET(k, &tblk, "pbase", runtime_b ? ADD(k, bfirst, MUL(k, j0, I(k, 4))) : MUL(k, V(k, p), I(k, G * 4 * nc)));
		kir_var **acc = calloc((size_t)(mr * nc), sizeof *acc);
		if (!acc) return k->failed = true, NULL;
		for (int i = 0; i < mr * nc; i++) {
			acc[i] = kir_var_new(k, "acc", TBC_DT_I32);
			kir_block_add(k, &tblk, kir_s_set(k, acc[i], i32(k, 0)));
		}
		if (tile) {
			kir_tile2 d = {.mt = 1, .nt = nc / 16, .a = s->a.buf, .b = pkb, .a_at = a_at[0], .lda = s->a.rs,
				       .b_at = pbase, .ldb = I(k, ldb), .kn = 4 * KG, .acc = acc};
			kir_block_add(k, &tblk, kir_s_tile2(k, &d));
		} else {
			kir_dot4 d = {.mr = mr, .nc = nc, .a = s->a.buf, .b = pkb, .b_at = pbase, .groups = I(k, KG), .ldb = ldb, .acc = acc};
			for (int r = 0; r < mr; r++) d.a_at[r] = a_at[r];
			kir_block_add(k, &tblk, kir_s_dot4(k, &d));
		}
		/* The K % 4 trailing products. */
		for (int64_t e = 0; e < kt; e++) {
			int64_t kk = 4 * KG + e;
			kir_expr *au[16];
			for (int r = 0; r < mr; r++)
				au[r] = LET(k, &tblk, "au", iadd(k, CAST(k, TBC_DT_I32, LOAD(k, s->a.buf, ADD(k, a_at[r], I(k, kk)))), i32(k, ca)));
			for (int c = 0; c < nc; c++) {
				kir_expr *bi = ADD(k, pbase, I(k, KG * ldb + 4 * c + e));
				kir_expr *bv = LET(k, &tblk, "bt", CAST(k, TBC_DT_I32, LOAD(k, pkb, bi)));
				for (int r = 0; r < mr; r++) {
					kir_var *x = acc[r * nc + c];
					kir_block_add(k, &tblk, kir_s_set(k, x, iadd(k, V(k, x), imul(k, au[r], bv))));
				}
			}
		}
		/* The epilogue: every value first, then the stores (matmul.c's
		 * micro_tile says why). */
		kir_expr *nlast = I(k, N - 1);
		kir_expr **val = calloc((size_t)(mr * nc), sizeof *val);
		kir_expr *cols[64];
		if (!val) {
			free(acc);
			return k->failed = true, NULL;
		}
		kir_expr *csums[64], *zbps[64];
		for (int c = 0; c < nc; c++) {
			kir_expr *col = ADD(k, j0, I(k, c));
			cols[c] = partial ? LET(k, &tblk, "col", MIN(k, col, nlast)) : col;
			kir_expr *csum = za_zero ? NULL : LOAD(k, csb, ADD(k, csfirst, col));
			kir_expr *zbp = NULL; /* zb', where it is not the constant 0 */
			if (!zb_zero) {
				zbp = zb_const ? i32(k, zb_c)
					       : isub(k, CAST(k, TBC_DT_I32, LOAD(k, q->bz, q->bz_col ? cols[c] : I(k, 0))), i32(k, cb));
				if (!cs_final && csum) csum = isub(k, csum, imul(k, i32(k, K), zbp));
			}
			if (csum) csum = LET(k, &tblk, "csum", csum);
			if (zbp && !zb_const) zbp = LET(k, &tblk, "zbp", zbp);
			csums[c] = csum, zbps[c] = zbp;
		}
		/* row by row, each row's columns side by side (as y stores them:
		 * what the SLP vectorizer packs) */
		for (int r = 0; r < mr; r++)
			for (int c = 0; c < nc; c++) {
				kir_expr *v = V(k, acc[r * nc + c]);
				if (csums[c]) v = isub(k, v, imul(k, zap[r], csums[c]));
				if (zbps[c]) v = isub(k, v, imul(k, zbps[c], rsum[r]));
				v = s->epi ? s->epi(s->ctx, l, v, batch, rows[r], cols[c]) : CAST(k, s->y.buf->dtype, v);
				val[r * nc + c] = LET(k, &tblk, "v", v);
			}
		for (int r = 0; r < mr; r++)
			for (int c = 0; c < nc; c++) {
				kir_expr *yi = ADD(k, ADD(k, base[2], MUL(k, rows[r], s->y.rs)), MUL(k, cols[c], s->y.cs));
				kir_stmt *st = kir_s_store(k, s->y.buf, yi, val[r * nc + c]);
				/* the last panel's columns past N: computed on zeros, not stored */
				if (partial) st = kir_s_if(k, CMP(k, KIR_LT, ADD(k, j0, I(k, c)), I(k, N)), st, NULL);
				kir_block_add(k, &tblk, st);
			}
		free(val);
		free(acc);

		kir_expr *plo = MUL(k, cbi, I(k, tb)), *phi = MIN(k, ADD(k, plo, I(k, tb)), I(k, P));
		if (variants > 1 && !partial) phi = MIN(k, phi, I(k, PF));
		if (partial) plo = MAX(k, plo, I(k, PF));
		kir_block_add(k, &rtb, kir_s_for(k, p, plo, phi, 1, KIR_LOOP_SEQUENTIAL, tblk.first));
	}
	kir_expr *rlo = MUL(k, rgi, I(k, rg)), *rhi = MIN(k, ADD(k, rlo, I(k, rg)), RT);
	kir_block_add(k, &body, kir_s_for(k, rt, rlo, rhi, 1, KIR_LOOP_SEQUENTIAL, rtb.first));
	kir_expr *total = MUL(k, MUL(k, s->NB, RGN), I(k, CB));
	return kir_s_for(k, t, I(k, 0), total, 1, KIR_LOOP_PARALLEL, body.first);
}
