/* log.c - leveled one-line logging, see log.h. */
#include "util/log.h"
#include "util/buf.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int verbosity;
static atomic_int format = LOG_TEXT;

void log_set_verbosity(int v)
{
	atomic_store(&verbosity, v);
}

int log_get_verbosity(void)
{
	return atomic_load(&verbosity);
}

void log_set_format(enum log_format f)
{
	atomic_store(&format, (int)f);
}

static const char *level_name(char level)
{
	switch (level) {
	case 'E':
		return "error";
	case 'W':
		return "warning";
	case 'D':
		return "debug";
	default:
		return "info";
	}
}

/* Stamp and write under one lock: lines from several threads then appear
 * in the order of their times. */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;

static void write_line(char level, const struct buf *clean)
{
	struct buf line = BUF_INIT;
	struct timespec ts;
	struct tm tm;
	pthread_mutex_lock(&write_lock);
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	char stamp[96];
	snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
	int r;
	if (atomic_load(&format) == LOG_JSON) {
		r = buf_printf(&line, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":", stamp,
			       level_name(level));
		if (r == 0)
			r = buf_append_json_str(&line, buf_cstr(clean), clean->len);
		if (r == 0)
			r = buf_append_str(&line, "}\n");
	} else {
		r = buf_printf(&line, "%c %s %s\n", level, stamp, buf_cstr(clean));
	}
	if (r == 0) {
		/* Best effort: a log line that cannot be written is dropped. */
		ssize_t n = write(STDERR_FILENO, line.data, line.len);
		(void)n;
	}
	pthread_mutex_unlock(&write_lock);
	buf_free(&line);
}

void log_msg(char level, int v, const char *fmt, ...)
{
	if (v > atomic_load(&verbosity))
		return;
	struct buf msg = BUF_INIT, clean = BUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	int r = buf_vprintf(&msg, fmt, ap);
	va_end(ap);
	if (r < 0)
		goto out;
	/* One event, one line: a message never carries its own newlines nor
	 * other control bytes (a URL or a library message may hold them), and
	 * is valid UTF-8, so that every JSON line parses. */
	for (size_t i = 0; i < msg.len; i++)
		if ((unsigned char)msg.data[i] < 0x20 || msg.data[i] == 0x7f)
			msg.data[i] = ' ';
	while (msg.len && msg.data[msg.len - 1] == ' ')
		msg.data[--msg.len] = '\0';
	if (buf_append_utf8(&clean, msg.data ? msg.data : "", msg.len) == 0)
		write_line(level, &clean);
out:
	buf_free(&msg);
	buf_free(&clean);
}
