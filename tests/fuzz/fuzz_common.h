// Shared helpers of the libFuzzer targets (tests/fuzz/fuzz_*.c): the input as
// a file (memfd), a scratch directory for what our writers produce, and the
// invariants every target checks. A violated invariant aborts (__builtin_trap)
// after printing what broke, so libFuzzer records the input as a crash.
#ifndef OT_FUZZ_COMMON_H
#define OT_FUZZ_COMMON_H
#include "ot/ot.h"
#include <stddef.h>
#include <stdint.h>

// Aborts with the message when cond is false.
#define FZ_CHECK(cond, ...) do { if (!(cond)) fz_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)
void fz_fail(const char *file, int line, const char *fmt, ...) __attribute__((noreturn, format(printf, 3, 4)));

// Bytes tracked by the library's memory counter, all categories together,
// after releasing this thread's scratch block (kept between calls by design).
size_t fz_mem_total(void);
// After an input: the counter is back at `start` (else abort, naming the target).
void fz_mem_back(size_t start, const char *target);
// A refused input: status is not OT_OK and ot_last_error() is non-empty.
void fz_refused(ot_status s, const char *what);

// data[0, n) as an anonymous memory file; *path gets "/proc/self/fd/N" (cap >= 32).
// Returns the fd (close it with fz_close), aborts when memfd fails.
int fz_memfile(const void *data, size_t n, char *path, size_t cap);
void fz_close(int fd);
// A per-process scratch directory (created once, under $TMPDIR or /tmp) and
// path <dir>/<name> in out[cap].
void fz_scratch(char *out, size_t cap, const char *name);
#endif
