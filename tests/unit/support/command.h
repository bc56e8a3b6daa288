/* Running commands from unit tests: the tbc command line as a user types it,
 * and tools such as ptxas or readelf. */
#ifndef TBC_TESTS_UNIT_SUPPORT_COMMAND_H
#define TBC_TESTS_UNIT_SUPPORT_COMMAND_H

#include <stdbool.h>

/* Runs the shell command line cmd with its stderr joined to its stdout; the
 * output in malloc'd memory (all of it), *status the exit status (-1 when a
 * signal ended it).  Fails the test when the command cannot be started. */
char *test_command_output(const char *cmd, int *status);

/* `tbc ARGS` (tbc from $TBC_BINARY_DIR, default ./build) after the
 * environment assignments env ("" for none), run in $TBC_SOURCE_DIR when
 * in_source; as test_command_output. */
char *test_tbc(const char *env, const char *args, bool in_source, int *status);

#endif
