/*
 * double_proc.h - the kube-apiserver test double (tests/double/apiserver.py)
 * for C tests: started on free 127.0.0.1 ports (it picks them and writes
 * them to its ready file), driven through its control port, stopped by PID.
 */
#ifndef YURTHUB_TESTS_DOUBLE_PROC_H
#define YURTHUB_TESTS_DOUBLE_PROC_H

#include <limits.h>
#include <sys/types.h>

#include "util/buf.h"

struct double_proc {
	pid_t pid; /* 0 while not running */
	int port, control_port;
	char base[64];	    /* "http://127.0.0.1:PORT", the API */
	char dir[PATH_MAX]; /* its ready file, and its output in dir/double.log */
};

/* Start the double with the extra arguments args (NULL-terminated; NULL for
 * none) and wait for its ready file (at most 60 s).  The script is
 * $YURTHUB_ROOT/tests/double/apiserver.py, or the one of the source tree
 * this test was built from.  0, or -1 with a message on stderr. */
int double_proc_start(struct double_proc *p, const char *const *args);
/* A request to the control port ("POST", "/objects", a JSON body or NULL).
 * The HTTP status, or -1 when it could not be made; the answer's body goes
 * to out unless out is NULL. */
long double_ctl(const struct double_proc *p, const char *method, const char *path, const char *body,
		struct buf *out);
/* Stop it (SIGTERM, then SIGKILL), reap it and remove its directory. */
void double_proc_stop(struct double_proc *p);

#endif
