/* MT19937 (Matsumoto & Nishimura 1998) with numpy's legacy seeding and
 * double construction; see rng_mt19937.h. */
#include "ir/kernels/rng_mt19937.h"

#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

void tbc_mt19937_seed(tbc_mt19937 *st, uint32_t seed) {
	st->key[0] = seed;
	for (int i = 1; i < TBC_MT19937_N; i++) {
		uint32_t prev = st->key[i - 1];
		st->key[i] = 1812433253u * (prev ^ (prev >> 30)) + (uint32_t)i;
	}
	st->pos = TBC_MT19937_N; /* the first draw regenerates the whole block */
}

static void mt_generate(tbc_mt19937 *st) {
	for (int i = 0; i < TBC_MT19937_N; i++) {
		uint32_t y = (st->key[i] & MT_UPPER) | (st->key[(i + 1) % TBC_MT19937_N] & MT_LOWER);
		uint32_t v = st->key[(i + MT_M) % TBC_MT19937_N] ^ (y >> 1);
		if (y & 1u) v ^= MT_MATRIX_A;
		st->key[i] = v;
	}
	st->pos = 0;
}

uint32_t tbc_mt19937_next32(tbc_mt19937 *st) {
	if (st->pos >= TBC_MT19937_N) mt_generate(st);
	uint32_t y = st->key[st->pos++];
	y ^= y >> 11;
	y ^= (y << 7) & 0x9d2c5680u;
	y ^= (y << 15) & 0xefc60000u;
	y ^= y >> 18;
	return y;
}

double tbc_mt19937_next_double(tbc_mt19937 *st) {
	uint32_t a = tbc_mt19937_next32(st) >> 5;
	uint32_t b = tbc_mt19937_next32(st) >> 6;
	return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}
