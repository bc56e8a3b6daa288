/* The weights hash of ABI 7 (include/tbc/abi_hash.h): XXH64 with seed 0,
 * against the reference implementation's values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "tbc/abi_hash.h"

/* XXH64, seed 0, of the first len bytes of pattern() below, computed on
 * 2026-11-26 with the reference implementation through PyPI's `xxhash`
 * package 4.1.0 (xxHash 0.8.4), in a throwaway venv:
 * `xxhash.xxh64(data, seed=0).intdigest()`.
 * The lengths cover no stripe, one and two stripes of 32 bytes with every
 * kind of tail (8-, 4- and 1-byte steps) and many stripes. */
static const struct {
	size_t len;
	uint64_t hash;
} vectors[] = {
	{0, 0xef46db3751d8e999ull}, /* the specification's value for no input */
	{1, 0xa96c7f0ce858bbb7ull},
	{3, 0x56e6957632a487f9ull},
	{4, 0xc60d15b1e3ff8f04ull},
	{7, 0xafbefc3d6c6f9a8eull},
	{8, 0x3da5c7aa269683e0ull},
	{31, 0x4a74f3a1a39ad4a1ull},
	{32, 0x8d57d6a4671cc43dull},
	{33, 0x62c9fd21ed857664ull},
	{63, 0x5c320a0d2707057full},
	{64, 0x7bbabbc45729d17eull},
	{100, 0xefa0ad2d3e70c151ull},
	{1000, 0x99594f4828043d35ull},
	{4096 + 13, 0x4cb4de5eea111f8full},
};

enum { MAX_LEN = 4096 + 13 };

/* byte i = (i*31 + 7) & 255 */
static void pattern(unsigned char *p, size_t n) {
	for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((i * 31 + 7) & 255);
}

static void xxh64_matches_the_reference_implementation(void **state) {
	(void)state;
	static unsigned char data[MAX_LEN];
	pattern(data, sizeof data);
	for (size_t i = 0; i < sizeof vectors / sizeof *vectors; i++) {
		uint64_t got = tbc_abi_xxh64(data, vectors[i].len);
		if (got != vectors[i].hash)
			fail_msg("XXH64 of %zu bytes: 0x%016llx, expected 0x%016llx", vectors[i].len, (unsigned long long)got,
				 (unsigned long long)vectors[i].hash);
	}
}

static void xxh64_of_no_bytes_reads_nothing(void **state) {
	(void)state;
	assert_true(tbc_abi_xxh64(NULL, 0) == 0xef46db3751d8e999ull);
}

/* Lanes are read with memcpy: any alignment gives the same value. */
static void xxh64_does_not_depend_on_alignment(void **state) {
	(void)state;
	unsigned char *buf = malloc(MAX_LEN + 8);
	assert_non_null(buf);
	for (size_t shift = 0; shift < 8; shift++) {
		pattern(buf + shift, MAX_LEN);
		for (size_t i = 0; i < sizeof vectors / sizeof *vectors; i++)
			assert_true(tbc_abi_xxh64(buf + shift, vectors[i].len) == vectors[i].hash);
	}
	free(buf);
}

/* One flipped bit anywhere changes the hash (every lane and tail step is
 * mixed in). */
static void xxh64_sees_every_byte(void **state) {
	(void)state;
	static unsigned char data[100];
	pattern(data, sizeof data);
	uint64_t h = tbc_abi_xxh64(data, sizeof data);
	for (size_t i = 0; i < sizeof data; i++) {
		data[i] ^= 0x10;
		assert_true(tbc_abi_xxh64(data, sizeof data) != h);
		data[i] ^= 0x10;
	}
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(xxh64_matches_the_reference_implementation),
		cmocka_unit_test(xxh64_of_no_bytes_reads_nothing),
		cmocka_unit_test(xxh64_does_not_depend_on_alignment),
		cmocka_unit_test(xxh64_sees_every_byte),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
