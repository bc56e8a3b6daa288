/* TBC_TEST_SANITIZED: 1 in a build with AddressSanitizer (gcc defines
 * __SANITIZE_ADDRESS__, clang answers __has_feature), else 0; for tests
 * that leave out what takes minutes or deadlocks under it. */
#ifndef TBC_TEST_SANITIZED_H
#define TBC_TEST_SANITIZED_H
#if defined(__SANITIZE_ADDRESS__)
#define TBC_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TBC_TEST_SANITIZED 1
#endif
#endif
#ifndef TBC_TEST_SANITIZED
#define TBC_TEST_SANITIZED 0
#endif
#endif
