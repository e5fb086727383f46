/*
 * fault_util.h - what the C fault tests share: loading the injector into
 * the test program itself, and steering it from inside.
 *
 * The test binaries are ordinary executables that meson and
 * scripts/run-tests.sh start without any environment; fault_preload()
 * re-executes the program with the injector in LD_PRELOAD (after ASan's
 * runtime when the program has one: ASan must come first).  The other
 * calls go to the injector's control functions (inject.h) when it is
 * loaded, and do nothing otherwise.
 */
#ifndef YURTHUB_TESTS_FAULT_UTIL_H
#define YURTHUB_TESTS_FAULT_UTIL_H

#include <stdbool.h>

/* true when the injector is in this process; otherwise re-exec with it
 * (does not return on success) and false only if that cannot be done. */
bool fault_preload(char **argv);
bool fault_loaded(void);
/* The injector's rules, for calls touching paths containing filter. */
int fault_set(const char *spec, const char *filter);
void fault_clear(void);
int fault_trace(const char *file);
void fault_mark(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
unsigned long fault_hits(void);

#endif
