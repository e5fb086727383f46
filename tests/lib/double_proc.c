/*
 * double_proc.c - the kube-apiserver test double for C tests, see
 * double_proc.h.  The double picks free ports itself (--port 0) and names
 * them in its ready file, written with a rename once both listen, so there
 * is no window in which another process can take them.  The child dies with
 * the test process (PR_SET_PDEATHSIG).
 */
#include "double_proc.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define PYTHON	     "/usr/bin/python3"
#define READY_MS     60000 /* seeding 10k pods on a loaded machine takes a while */
#define STOP_MS	     5000
#define ARGS_MAX     32
#define LOG_TAIL_MAX 4096

#ifndef YH_SOURCE_ROOT
#define YH_SOURCE_ROOT "."
#endif

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void print_log_tail(const struct double_proc *p)
{
	char path[PATH_MAX + 16], tail[LOG_TAIL_MAX + 1];
	snprintf(path, sizeof path, "%s/double.log", p->dir);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	if (fseek(f, -LOG_TAIL_MAX, SEEK_END) < 0)
		rewind(f);
	size_t n = fread(tail, 1, LOG_TAIL_MAX, f);
	tail[n] = '\0';
	fclose(f);
	fprintf(stderr, "double_proc: end of %s:\n%s\n", path, tail);
}

/* In the child: never returns. */
static void exec_double(int logfd, char **argv, pid_t parent)
{
	static char *envp[] = {"PATH=/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE=1", NULL};
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(126);
	int nul = open("/dev/null", O_RDONLY);
	if (nul < 0 || dup2(nul, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
		_exit(126);
	close_range(3, ~0U, 0);
	execve(argv[0], argv, envp);
	_exit(127);
}

static int spawn(struct double_proc *p, const char *ready, const char *const *args)
{
	const char *root = getenv("YURTHUB_ROOT");
	char script[PATH_MAX], logpath[PATH_MAX + 16];
	int n = snprintf(script, sizeof script, "%s/tests/double/apiserver.py",
			 root && *root ? root : YH_SOURCE_ROOT);
	if (n < 0 || (size_t)n >= sizeof script)
		return -1;
	char *argv[ARGS_MAX + 10];
	size_t k = 0;
	char *fixed[] = {PYTHON,	   script, "--port",	   "0",
			 "--control-port", "0",	   "--ready-file", (char *)ready};
	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
		argv[k++] = fixed[i];
	for (size_t i = 0; args && args[i]; i++) {
		if (i >= ARGS_MAX) {
			fprintf(stderr, "double_proc: more than %d arguments\n", ARGS_MAX);
			return -1;
		}
		argv[k++] = (char *)args[i];
	}
	argv[k] = NULL;
	snprintf(logpath, sizeof logpath, "%s/double.log", p->dir);
	int logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (logfd < 0) {
		fprintf(stderr, "double_proc: %s: %s\n", logpath, strerror(errno));
		return -1;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0)
		exec_double(logfd, argv, parent);
	close(logfd);
	if (pid < 0) {
		fprintf(stderr, "double_proc: fork: %s\n", strerror(errno));
		return -1;
	}
	p->pid = pid;
	return 0;
}

/* Until the ready file names the ports; -1 when the double exits or the
 * time is up. */
static int wait_ready(struct double_proc *p, const char *ready)
{
	long deadline = now_ms() + READY_MS;
	while (now_ms() < deadline) {
		int st;
		if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
			fprintf(stderr, "double_proc: the double exited (status %d)\n", st);
			p->pid = 0;
			return -1;
		}
		json_t *j = json_load_file(ready, 0, NULL);
		if (j) {
			json_int_t port = json_integer_value(json_object_get(j, "port"));
			json_int_t cport = json_integer_value(json_object_get(j, "control_port"));
			json_int_t pid = json_integer_value(json_object_get(j, "pid"));
			json_decref(j);
			if (port <= 0 || port > 65535 || cport <= 0 || cport > 65535 ||
			    pid != p->pid) {
				fprintf(stderr, "double_proc: a ready file that does not fit\n");
				return -1;
			}
			p->port = (int)port;
			p->control_port = (int)cport;
			snprintf(p->base, sizeof p->base, "http://127.0.0.1:%d", p->port);
			return 0;
		}
		sleep_ms(20);
	}
	fprintf(stderr, "double_proc: no ready file after %d ms\n", READY_MS);
	return -1;
}

int double_proc_start(struct double_proc *p, const char *const *args)
{
	memset(p, 0, sizeof *p);
	if (test_mkdtemp(p->dir, sizeof p->dir, "double") < 0) {
		fprintf(stderr, "double_proc: no temporary directory: %s\n", strerror(errno));
		p->dir[0] = '\0';
		return -1;
	}
	char ready[PATH_MAX + 16];
	snprintf(ready, sizeof ready, "%s/ready.json", p->dir);
	if (spawn(p, ready, args) == 0 && wait_ready(p, ready) == 0)
		return 0;
	print_log_tail(p);
	double_proc_stop(p);
	return -1;
}

static size_t collect(char *data, size_t size, size_t n, void *ud)
{
	struct buf *out = ud;
	size_t len = size * n;
	if (out && buf_append(out, data, len) < 0)
		return 0;
	return len;
}

long double_ctl(const struct double_proc *p, const char *method, const char *path, const char *body,
		struct buf *out)
{
	char url[PATH_MAX];
	int n = snprintf(url, sizeof url, "http://127.0.0.1:%d%s", p->control_port, path);
	if (n < 0 || (size_t)n >= sizeof url)
		return -1;
	CURL *h = curl_easy_init();
	if (!h)
		return -1;
	long code = -1;
	bool ok = curl_easy_setopt(h, CURLOPT_URL, url) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_WRITEDATA, out) == CURLE_OK;
	if (ok && body)
		ok = curl_easy_setopt(h, CURLOPT_POSTFIELDS, body) == CURLE_OK;
	if (ok && curl_easy_perform(h) == CURLE_OK) {
		if (curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK)
			code = -1;
	}
	curl_easy_cleanup(h);
	return code;
}

void double_proc_stop(struct double_proc *p)
{
	if (p->pid > 0) {
		kill(p->pid, SIGTERM);
		long deadline = now_ms() + STOP_MS;
		while (waitpid(p->pid, NULL, WNOHANG) == 0) {
			if (now_ms() >= deadline) {
				kill(p->pid, SIGKILL);
				while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
					;
				break;
			}
			sleep_ms(20);
		}
		p->pid = 0;
	}
	if (p->dir[0])
		test_rm_rf(p->dir);
	p->dir[0] = '\0';
}
