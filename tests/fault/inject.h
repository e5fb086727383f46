/*
 * inject.h - the control interface of the fault injector (inject.c).
 *
 * The injector is LD_PRELOADed; a test program that wants to steer it from
 * inside finds these functions with dlsym(RTLD_DEFAULT, ...) (see
 * fault_util.h), so that it still links and runs, and can say "skipped",
 * when the injector is not there.  From outside the process the same is done
 * with environment variables:
 *
 *   YH_FAULT="fsync:3:EIO,rename:*:ENOSPC"   the rules (syntax below)
 *   YH_FAULT_PATH=<substring>                only calls touching such a path
 *   YH_FAULT_TRACE=<file>                    append one line per call
 *   YH_FAULT_CTL=<file>                      rules re-read from this file
 *                                            whenever it changes (line 1:
 *                                            rules, line 2: path filter)
 *
 * A rule is CALL:WHEN:ERRNO[:PATH]
 *   CALL   write (write, pwrite, writev, pwritev), fsync, fdatasync, syncfs,
 *          sync (the three), rename (rename, renameat, renameat2), exchange
 *          (renameat2 with RENAME_EXCHANGE only), open (opens with O_CREAT),
 *          mkdir, unlink (unlink, unlinkat, rmdir), link, ftruncate, close,
 *          any (all of them)
 *   WHEN   N (the Nth matching call only), N+ (the Nth and every later
 *          one), * (every one)
 *   ERRNO  a name (EIO, ENOSPC, EDQUOT, EROFS, ...) or a number
 *   PATH   optional: this rule only counts calls touching such a path
 * Each rule counts the calls it matches on its own; the first rule that
 * fires decides the error.  A failed call does nothing (close is the
 * exception: the descriptor is closed, as Linux does, and -1 returned).
 */
#ifndef YURTHUB_TESTS_FAULT_INJECT_H
#define YURTHUB_TESTS_FAULT_INJECT_H

/* Replace the rules (and the path filter, NULL for none) and zero the
 * counters.  0, or -1 when spec does not parse (the old rules stay). */
typedef int (*yh_fault_set_fn)(const char *spec, const char *path_filter);
/* Start tracing to file (appended to), or stop with NULL.  0 or -1. */
typedef int (*yh_fault_trace_fn)(const char *file);
/* A "mark" line in the trace: the test's own events (begin/end of a call). */
typedef void (*yh_fault_mark_fn)(const char *text);
/* How many calls have been failed on purpose since the last set. */
typedef unsigned long (*yh_fault_hits_fn)(void);

#endif
