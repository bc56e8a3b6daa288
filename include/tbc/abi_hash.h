/* The hash of a compiled model's weights (tbc_abi_model.weights_hash from
 * ABI version 7): XXH64 with seed 0, as the xxHash specification defines it
 * (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md).  The
 * compiler computes it when it writes the weights and the runtime again at
 * every load, so both sides share this one definition.
 *
 * Why XXH64 and not the FNV-1a 64 of versions 2-6: FNV-1a multiplies once
 * per byte, each step waiting on the last (about 0.9 GB/s); XXH64 keeps four
 * independent 64-bit lanes over 32-byte stripes (about 10 GB/s), so loading
 * AlexNet's 245 MB no longer spends a quarter of a second on the check
 * (docs/decisions.md).
 *
 * Lanes are read as little-endian 64- and 32-bit words, as the
 * specification says.  The ABI is defined for little-endian targets only
 * (x86-64, AArch64), where the read is a plain load; on a big-endian host
 * the words are swapped so the value is still the specification's. */
#ifndef TBC_ABI_HASH_H
#define TBC_ABI_HASH_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TBC_ABI_XXH64_P1 0x9E3779B185EBCA87ull
#define TBC_ABI_XXH64_P2 0xC2B2AE3D27D4EB4Full
#define TBC_ABI_XXH64_P3 0x165667B19E3779F9ull
#define TBC_ABI_XXH64_P4 0x85EBCA77C2B2AE63ull
#define TBC_ABI_XXH64_P5 0x27D4EB2F165667C5ull

static inline uint64_t tbc_abi_xxh64_rotl(uint64_t x, int r) {
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t tbc_abi_xxh64_read64(const unsigned char *p) {
	uint64_t v;
	memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

static inline uint32_t tbc_abi_xxh64_read32(const unsigned char *p) {
	uint32_t v;
	memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap32(v);
#endif
	return v;
}

static inline uint64_t tbc_abi_xxh64_round(uint64_t acc, uint64_t lane) {
	acc += lane * TBC_ABI_XXH64_P2;
	return tbc_abi_xxh64_rotl(acc, 31) * TBC_ABI_XXH64_P1;
}

static inline uint64_t tbc_abi_xxh64_merge(uint64_t acc, uint64_t v) {
	acc ^= tbc_abi_xxh64_round(0, v);
	return acc * TBC_ABI_XXH64_P1 + TBC_ABI_XXH64_P4;
}

/* XXH64 of size bytes at data, seed 0. */
static inline uint64_t tbc_abi_xxh64(const void *data, uint64_t size) {
	const unsigned char *p = (const unsigned char *)data;
	uint64_t left = size, acc;
	if (left >= 32) {
		uint64_t v1 = TBC_ABI_XXH64_P1 + TBC_ABI_XXH64_P2, v2 = TBC_ABI_XXH64_P2, v3 = 0,
			 v4 = 0 - TBC_ABI_XXH64_P1;
		for (; left >= 32; p += 32, left -= 32) {
			v1 = tbc_abi_xxh64_round(v1, tbc_abi_xxh64_read64(p));
			v2 = tbc_abi_xxh64_round(v2, tbc_abi_xxh64_read64(p + 8));
			v3 = tbc_abi_xxh64_round(v3, tbc_abi_xxh64_read64(p + 16));
			v4 = tbc_abi_xxh64_round(v4, tbc_abi_xxh64_read64(p + 24));
		}
		acc = tbc_abi_xxh64_rotl(v1, 1) + tbc_abi_xxh64_rotl(v2, 7) + tbc_abi_xxh64_rotl(v3, 12) +
		      tbc_abi_xxh64_rotl(v4, 18);
		acc = tbc_abi_xxh64_merge(acc, v1);
		acc = tbc_abi_xxh64_merge(acc, v2);
		acc = tbc_abi_xxh64_merge(acc, v3);
		acc = tbc_abi_xxh64_merge(acc, v4);
	} else {
		acc = TBC_ABI_XXH64_P5;
	}
	acc += size;
	for (; left >= 8; p += 8, left -= 8) {
		acc ^= tbc_abi_xxh64_round(0, tbc_abi_xxh64_read64(p));
		acc = tbc_abi_xxh64_rotl(acc, 27) * TBC_ABI_XXH64_P1 + TBC_ABI_XXH64_P4;
	}
	if (left >= 4) {
		acc ^= (uint64_t)tbc_abi_xxh64_read32(p) * TBC_ABI_XXH64_P1;
		acc = tbc_abi_xxh64_rotl(acc, 23) * TBC_ABI_XXH64_P2 + TBC_ABI_XXH64_P3;
		p += 4;
		left -= 4;
	}
	for (; left > 0; p++, left--) {
		acc ^= (uint64_t)*p * TBC_ABI_XXH64_P5;
		acc = tbc_abi_xxh64_rotl(acc, 11) * TBC_ABI_XXH64_P1;
	}
	acc ^= acc >> 33;
	acc *= TBC_ABI_XXH64_P2;
	acc ^= acc >> 29;
	acc *= TBC_ABI_XXH64_P3;
	acc ^= acc >> 32;
	return acc;
}

#ifdef __cplusplus
}
#endif
#endif
