/*
 * log.h - one line per event on stderr, with a level.
 *
 * Errors and warnings always print, and so do the few lifecycle lines
 * (log_msg('I', 0, ...): starting, ready, an upstream's health changing,
 * stopping); info lines print from verbosity 1 (-v 1, events), more detail
 * from -v 2, one line per request and debug lines from -v 4.  Each line is
 * written with a single write(2) so that lines of concurrent threads never
 * interleave.  Text: "<E|W|I|D> <RFC 3339 UTC time> <message>"; JSON (LOG_JSON):
 * {"ts":"...","level":"error|warning|info|debug","msg":"..."}.  Messages lose
 * their control bytes and invalid UTF-8, so a record is always one line.
 * Never pass secrets (tokens, keys) to these functions: nothing here redacts.
 */
#ifndef YURTHUB_UTIL_LOG_H
#define YURTHUB_UTIL_LOG_H

enum log_format { LOG_TEXT, LOG_JSON };

void log_set_verbosity(int v);
int log_get_verbosity(void);
void log_set_format(enum log_format f);

void log_msg(char level, int v, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define log_error(...) log_msg('E', 0, __VA_ARGS__)
#define log_warn(...)  log_msg('W', 0, __VA_ARGS__)
#define log_info(...)  log_msg('I', 1, __VA_ARGS__)
#define log_v(n, ...)  log_msg('I', (n), __VA_ARGS__)
#define log_debug(...) log_msg('D', 4, __VA_ARGS__)

#endif
