/*
 * etcd_proc.c - a throw-away etcd for tests, see etcd_proc.h.  Free ports
 * come from binding port 0; readiness from GET /health; the child dies with
 * the test process (PR_SET_PDEATHSIG).
 */
#include "etcd_proc.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ETCD_BIN     "/usr/bin/etcd"
#define READY_MS     10000
#define STOP_MS	     5000
#define START_TRIES  3
#define LOG_TAIL_MAX 4096
#define N_ELEMS(a)   (sizeof(a) / sizeof((a)[0]))

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

/* Bind a socket to 127.0.0.1:0; its fd and port, or -1. */
static int bind_any(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

/* Two different free ports (both held while the second is found). */
static int free_ports(struct etcd_proc *p)
{
	int a = bind_any(&p->client_port);
	int b = a < 0 ? -1 : bind_any(&p->peer_port);
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	return b < 0 ? -1 : 0;
}

static int make_dir(struct etcd_proc *p)
{
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp)
		tmp = "/tmp";
	int n = snprintf(p->dir, sizeof p->dir, "%s/etcd-test-XXXXXX", tmp);
	if (n < 0 || (size_t)n >= sizeof p->dir || !mkdtemp(p->dir)) {
		fprintf(stderr, "etcd_proc: cannot make a directory under %s: %s\n", tmp,
			strerror(errno));
		p->dir[0] = '\0';
		return -1;
	}
	return 0;
}

struct reply {
	char text[256];
	size_t len;
};

static size_t collect(char *data, size_t size, size_t n, void *ud)
{
	struct reply *r = ud;
	size_t len = size * n, room = sizeof r->text - 1 - r->len;
	size_t take = len < room ? len : room;
	memcpy(r->text + r->len, data, take);
	r->len += take;
	r->text[r->len] = '\0';
	return len;
}

static bool healthy(const struct etcd_proc *p)
{
	char url[96];
	struct reply reply = {"", 0};
	snprintf(url, sizeof url, "%s/health", p->endpoint);
	CURL *h = curl_easy_init();
	if (!h)
		return false;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 1000L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &reply);
	if (p->ca_file) {
		curl_easy_setopt(h, CURLOPT_CAINFO, p->ca_file);
		curl_easy_setopt(h, CURLOPT_SSLCERT, p->cert_file);
		curl_easy_setopt(h, CURLOPT_SSLKEY, p->key_file);
	}
	CURLcode rc = curl_easy_perform(h);
	curl_easy_cleanup(h);
	return rc == CURLE_OK && strstr(reply.text, "\"health\":\"true\"") != NULL;
}

/* In the child: never returns. */
static void exec_etcd(int logfd, char **argv, pid_t parent)
{
	static char *envp[] = {"PATH=/usr/bin:/bin", NULL};
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

struct etcd_args {
	char data[PATH_MAX + 8], log[PATH_MAX + 16];
	char client[64], peer[64], cluster[80];
};

static int fill_args(const struct etcd_proc *p, struct etcd_args *a)
{
	int n1 = snprintf(a->data, sizeof a->data, "%s/data", p->dir);
	int n2 = snprintf(a->log, sizeof a->log, "%s/etcd.log", p->dir);
	snprintf(a->client, sizeof a->client, "%s://127.0.0.1:%d", p->ca_file ? "https" : "http",
		 p->client_port);
	snprintf(a->peer, sizeof a->peer, "http://127.0.0.1:%d", p->peer_port);
	snprintf(a->cluster, sizeof a->cluster, "test=%s", a->peer);
	if (n1 < 0 || (size_t)n1 >= sizeof a->data || n2 < 0 || (size_t)n2 >= sizeof a->log)
		return -1;
	return 0;
}

static int spawn(struct etcd_proc *p)
{
	struct etcd_args a;
	if (fill_args(p, &a) < 0)
		return -1;
	char *base[] = {ETCD_BIN,  "--name",
			"test",	   "--data-dir",
			a.data,	   "--listen-client-urls",
			a.client,  "--advertise-client-urls",
			a.client,  "--listen-peer-urls",
			a.peer,	   "--initial-advertise-peer-urls",
			a.peer,	   "--initial-cluster",
			a.cluster, "--logger",
			"zap"};
	char *tls[] = {"--client-cert-auth", "--trusted-ca-file", (char *)p->ca_file, "--cert-file",
		       (char *)p->cert_file, "--key-file",	  (char *)p->key_file};
	char *argv[N_ELEMS(base) + N_ELEMS(tls) + 1];
	size_t n = 0;
	for (size_t i = 0; i < N_ELEMS(base); i++)
		argv[n++] = base[i];
	for (size_t i = 0; p->ca_file && i < N_ELEMS(tls); i++)
		argv[n++] = tls[i];
	argv[n] = NULL;
	snprintf(p->endpoint, sizeof p->endpoint, "%s", a.client);
	int logfd = open(a.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (logfd < 0) {
		fprintf(stderr, "etcd_proc: %s: %s\n", a.log, strerror(errno));
		return -1;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0)
		exec_etcd(logfd, argv, parent);
	close(logfd);
	if (pid < 0) {
		fprintf(stderr, "etcd_proc: fork: %s\n", strerror(errno));
		return -1;
	}
	p->pid = pid;
	return 0;
}

/* Until healthy; -1 when etcd exits or the time is up. */
static int wait_ready(struct etcd_proc *p)
{
	long deadline = now_ms() + READY_MS;
	while (now_ms() < deadline) {
		int st;
		if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
			fprintf(stderr, "etcd_proc: etcd exited (status %d)\n", st);
			p->pid = 0;
			return -1;
		}
		if (healthy(p))
			return 0;
		sleep_ms(50);
	}
	fprintf(stderr, "etcd_proc: etcd not healthy after %d ms\n", READY_MS);
	return -1;
}

static void print_log_tail(const struct etcd_proc *p)
{
	char path[PATH_MAX + 16], tail[LOG_TAIL_MAX + 1];
	snprintf(path, sizeof path, "%s/etcd.log", p->dir);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	if (fseek(f, -LOG_TAIL_MAX, SEEK_END) < 0)
		rewind(f);
	size_t n = fread(tail, 1, LOG_TAIL_MAX, f);
	tail[n] = '\0';
	fclose(f);
	fprintf(stderr, "etcd_proc: end of %s:\n%s\n", path, tail);
}

static int start_here(struct etcd_proc *p)
{
	if (spawn(p) == 0 && wait_ready(p) == 0)
		return 0;
	print_log_tail(p);
	etcd_proc_halt(p);
	return -1;
}

int etcd_proc_start(struct etcd_proc *p)
{
	return etcd_proc_start_tls(p, NULL, NULL, NULL);
}

int etcd_proc_start_tls(struct etcd_proc *p, const char *ca, const char *cert, const char *key)
{
	for (int i = 0; i < START_TRIES; i++) {
		memset(p, 0, sizeof *p);
		p->ca_file = ca;
		p->cert_file = cert;
		p->key_file = key;
		if (make_dir(p) < 0)
			return -1;
		if (free_ports(p) == 0 && start_here(p) == 0)
			return 0;
		etcd_proc_stop(p); /* maybe a port was taken meanwhile: new ones */
	}
	return -1;
}

void etcd_proc_halt(struct etcd_proc *p)
{
	if (p->pid <= 0)
		return;
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

int etcd_proc_restart(struct etcd_proc *p)
{
	etcd_proc_halt(p);
	return start_here(p);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	remove(path);
	return 0;
}

void etcd_proc_stop(struct etcd_proc *p)
{
	etcd_proc_halt(p);
	if (p->dir[0])
		nftw(p->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	p->dir[0] = '\0';
}
