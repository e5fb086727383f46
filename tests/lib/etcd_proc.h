/*
 * etcd_proc.h - a throw-away etcd server for tests: /usr/bin/etcd on
 * 127.0.0.1 with two free ports and a temporary data directory, started,
 * stopped and restarted by PID.
 */
#ifndef YURTHUB_TESTS_ETCD_PROC_H
#define YURTHUB_TESTS_ETCD_PROC_H

#include <limits.h>
#include <sys/types.h>

struct etcd_proc {
	pid_t pid;				    /* 0 while not running */
	const char *ca_file, *cert_file, *key_file; /* TLS: set by etcd_proc_start_tls */
	int client_port, peer_port;
	char endpoint[64];  /* "http://127.0.0.1:PORT" */
	char dir[PATH_MAX]; /* data in dir/data, etcd's output in dir/etcd.log */
};

/* Start an etcd and wait until GET /health says {"health":"true"} (at most
 * ~10 s).  0, or -1 with a message on stderr. */
int etcd_proc_start(struct etcd_proc *p);
/* The same with https on the client port and client certificates required:
 * the server uses cert/key, and trusts ca for clients (the strings must
 * outlive p). */
int etcd_proc_start_tls(struct etcd_proc *p, const char *ca, const char *cert, const char *key);
/* Stop the process (SIGTERM, then SIGKILL) and keep the data. */
void etcd_proc_halt(struct etcd_proc *p);
/* Stop it (if running) and start it again on the same ports and data. */
int etcd_proc_restart(struct etcd_proc *p);
/* Stop the process and remove the data directory. */
void etcd_proc_stop(struct etcd_proc *p);

#endif
