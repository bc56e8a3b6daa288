/* Files of the device backends that run a toolchain program (ld.lld-19 for
 * AMDGPU code objects, ptxas for cubins) in a temporary folder. */
#ifndef TBC_CODEGEN_DEVICE_DEVICE_FILES_H
#define TBC_CODEGEN_DEVICE_DEVICE_FILES_H

#include <stdbool.h>
#include <stddef.h>

/* Creates path (it must not exist; mode 0600) holding the n bytes of data. */
bool tbc_dev_write_new_file(const char *path, const void *data, size_t n);

/* The whole file, malloc'd with a NUL after its *size bytes; false when it
 * cannot be read or is longer than limit. */
bool tbc_dev_read_file(const char *path, void **data, size_t *size, size_t limit);

/* Runs the program at path with argv (argv[0] first, NULL-terminated), its
 * stdout and stderr into a new file log_path, and waits for it.  True when
 * it ran and exited 0; *spawn_error is posix_spawn's error (0 when the
 * program ran) and *wait_status waitpid's status. */
bool tbc_dev_run_tool(const char *path, char *const argv[], const char *log_path, int *spawn_error, int *wait_status);

/* LLVM's linker, which links objects of any architecture it targets:
 * ld.lld-19 on PATH, else /usr/bin/ld.lld-19 (its path in out); false when
 * neither is there (tbc doctor says so).  AMDGPU code objects need it; a
 * CPU .o of several objects is merged by it (codegen/artifact.c). */
bool tbc_find_lld(char *out, size_t size);

#endif
