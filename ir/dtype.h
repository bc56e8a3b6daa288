/* Element types: classification and scalar conversion.  Every dtype can be
 * read as double / int64 / uint64 and written from them, which is how the
 * reference interpreter stays type-generic without a kernel per type. */
#ifndef TBC_IR_DTYPE_H
#define TBC_IR_DTYPE_H
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "tbc/tbc.h"

bool tbc_dtype_valid(int dt);        /* a known ONNX number, numeric or not */
bool tbc_dtype_supported(tbc_dtype dt); /* numeric: everything but string and complex */
bool tbc_dtype_is_float(tbc_dtype dt);
bool tbc_dtype_is_int(tbc_dtype dt);  /* signed or unsigned integer, not bool */
bool tbc_dtype_is_signed(tbc_dtype dt); /* signed integers and floats */
bool tbc_dtype_is_unsigned(tbc_dtype dt); /* unsigned integers */
/* Width of one element in bits: 4 for int4/uint4/float4e2m1, 2 for int2/uint2. */
int tbc_dtype_bits(tbc_dtype dt);
/* Parses a text-form name ("f32"); TBC_DT_UNDEFINED when unknown. */
tbc_dtype tbc_dtype_from_name(const char *name);

/* Element i of a buffer of dtype dt. */
double tbc_load_f64(tbc_dtype dt, const void *base, size_t i);
int64_t tbc_load_i64(tbc_dtype dt, const void *base, size_t i);
uint64_t tbc_load_u64(tbc_dtype dt, const void *base, size_t i);
/* Floats round to nearest even.  float8 saturates to the largest finite value
 * (ONNX Cast's saturate=1); integers convert as C does after truncation,
 * wrapping to the width (int4/uint4 wrap to 4 bits). */
void tbc_store_f64(tbc_dtype dt, void *base, size_t i, double v);
void tbc_store_f64_nosat(tbc_dtype dt, void *base, size_t i, double v); /* float8: out of range -> inf/NaN */
void tbc_store_i64(tbc_dtype dt, void *base, size_t i, int64_t v);
void tbc_store_u64(tbc_dtype dt, void *base, size_t i, uint64_t v);

/* Bit-level conversions of the narrow float formats. */
float tbc_f16_to_f32(uint16_t h);
uint16_t tbc_f32_to_f16(float f);
uint16_t tbc_f64_to_f16(double d);
float tbc_bf16_to_f32(uint16_t h);
uint16_t tbc_f32_to_bf16(float f);
float tbc_f8_to_f32(tbc_dtype dt, uint8_t v);
uint8_t tbc_f32_to_f8(tbc_dtype dt, float f, bool saturate);
float tbc_f4e2m1_to_f32(uint8_t v);
uint8_t tbc_f32_to_f4e2m1(float f);
/* float8e8m0 (a power of two; Cast's round_mode and saturate attributes). */
typedef enum tbc_round_mode { TBC_ROUND_UP, TBC_ROUND_DOWN, TBC_ROUND_NEAREST } tbc_round_mode;
double tbc_e8m0_to_f64(uint8_t v);
uint8_t tbc_f32_to_e8m0(float f, bool saturate, tbc_round_mode mode);

/* Raw bit patterns of element i (BitCast): the low tbc_dtype_bits(dt) bits. */
uint64_t tbc_load_bits(tbc_dtype dt, const void *base, size_t i);
void tbc_store_bits(tbc_dtype dt, void *base, size_t i, uint64_t bits);

#endif
