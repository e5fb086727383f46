/* fault_util.c - loading and steering the injector, see fault_util.h. */
#include "fault_util.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inject.h"

#ifndef YH_INJECT_SO
#define YH_INJECT_SO "libyh_inject.so"
#endif

static void *control(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

bool fault_loaded(void)
{
	return control("yh_fault_set") != NULL;
}

/* The path of the ASan runtime mapped into this process, if any. */
static bool asan_runtime(char *out, size_t size)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return false;
	char line[4096];
	bool found = false;
	while (!found && fgets(line, sizeof line, f)) {
		char *path = strchr(line, '/');
		if (!path || !strstr(path, "/libasan.so"))
			continue;
		path[strcspn(path, "\n")] = '\0';
		snprintf(out, size, "%s", path);
		found = true;
	}
	fclose(f);
	return found;
}

bool fault_preload(char **argv)
{
	if (fault_loaded())
		return true;
	if (getenv("YH_FAULT_REEXEC"))
		return false; /* tried once already: do not loop */
	const char *so = getenv("YH_INJECT_SO");
	if (!so || !*so)
		so = YH_INJECT_SO;
	if (access(so, R_OK) < 0) {
		fprintf(stderr, "fault: injector %s not found\n", so);
		return false;
	}
	char asan[4096], preload[8192];
	const char *old = getenv("LD_PRELOAD");
	if (asan_runtime(asan, sizeof asan))
		snprintf(preload, sizeof preload, "%s %s%s%s", asan, so, old ? " " : "",
			 old ? old : "");
	else
		snprintf(preload, sizeof preload, "%s%s%s", so, old ? " " : "", old ? old : "");
	setenv("LD_PRELOAD", preload, 1);
	setenv("YH_FAULT_REEXEC", "1", 1);
	fflush(NULL);
	execv("/proc/self/exe", argv);
	perror("fault: re-exec with the injector");
	return false;
}

int fault_set(const char *spec, const char *filter)
{
	yh_fault_set_fn f = (yh_fault_set_fn)control("yh_fault_set");
	return f ? f(spec, filter) : -1;
}

void fault_clear(void)
{
	fault_set("", NULL);
}

int fault_trace(const char *file)
{
	yh_fault_trace_fn f = (yh_fault_trace_fn)control("yh_fault_trace");
	return f ? f(file) : -1;
}

void fault_mark(const char *fmt, ...)
{
	yh_fault_mark_fn f = (yh_fault_mark_fn)control("yh_fault_mark");
	if (!f)
		return;
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	f(text);
}

unsigned long fault_hits(void)
{
	yh_fault_hits_fn f = (yh_fault_hits_fn)control("yh_fault_hits");
	return f ? f() : 0;
}
