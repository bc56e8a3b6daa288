/* Shared by the hand-written artifacts the runtime is tested with: what
 * `tbc compile` will emit, written by hand so the runtime is tested without
 * the code generator.  Built twice by runtime/CMakeLists.txt: as a shared
 * object exporting tbc_model_descriptor (the .so path), and as an object
 * linked into the tests, exporting RT_DESCRIPTOR (the .o + .h path). */
#ifndef RT_ARTIFACT_H
#define RT_ARTIFACT_H

#include "tbc/abi.h"

#ifndef RT_DESCRIPTOR
#define RT_DESCRIPTOR tbc_model_descriptor
#endif
#define RT_EXPORT __attribute__((visibility("default")))

#if defined(__x86_64__)
#define RT_TRIPLE "x86_64-pc-linux-gnu"
#define RT_OTHER_TRIPLE "aarch64-unknown-linux-gnu"
#elif defined(__aarch64__)
#define RT_TRIPLE "aarch64-unknown-linux-gnu"
#define RT_OTHER_TRIPLE "x86_64-pc-linux-gnu"
#else
#define RT_TRIPLE "unknown"
#define RT_OTHER_TRIPLE "unknown"
#endif

/* The weights hash of no bytes: XXH64 from ABI 7, FNV-1a 64 before. */
#define RT_XXH64_EMPTY 0xef46db3751d8e999ull
#define RT_FNV_EMPTY 0xcbf29ce484222325ull
#define RT_F32 1
#define RT_I64 7

RT_EXPORT const tbc_abi_model *RT_DESCRIPTOR(void);

#endif
