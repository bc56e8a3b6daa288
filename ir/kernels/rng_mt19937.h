/* MT19937 as numpy's legacy numpy.random.RandomState draws it, bit for bit.
 *
 * The reference implementation of ONNX (onnx/reference/ops/op_dropout.py)
 * seeds numpy.random.RandomState(seed) and takes uniform(0, 1, shape); the
 * expected outputs of the ONNX node tests come from that stream.  For an
 * integer seed numpy seeds with Matsumoto & Nishimura's init_genrand(seed)
 * (numpy: mt19937_seed), and random_sample()/uniform(0, 1) builds each double
 * from two 32-bit draws: ((a >> 5) * 2^26 + (b >> 6)) / 2^53. */
#ifndef TBC_RNG_MT19937_H
#define TBC_RNG_MT19937_H

#include <stdint.h>

#define TBC_MT19937_N 624

typedef struct tbc_mt19937 {
	uint32_t key[TBC_MT19937_N];
	int pos;
} tbc_mt19937;

/* numpy.random.RandomState(seed) for 0 <= seed < 2^32 (init_genrand). */
void tbc_mt19937_seed(tbc_mt19937 *st, uint32_t seed);
/* The next 32-bit output (numpy: mt19937_next32, random_raw). */
uint32_t tbc_mt19937_next32(tbc_mt19937 *st);
/* The next double in [0, 1) with 53 random bits (numpy: random_sample). */
double tbc_mt19937_next_double(tbc_mt19937 *st);

#endif
