/*
 * kubeconfig.h - the identity a kubelet-style kubeconfig holds: the current
 * context's cluster (server, CA) and user (client certificate and key, or a
 * token).  File references are resolved against the kubeconfig's directory,
 * as kubectl does; *-data fields are base64-decoded.
 */
#ifndef YURTHUB_KUBE_KUBECONFIG_H
#define YURTHUB_KUBE_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

struct kubeconfig {
	char *server;	       /* NULL when absent */
	char *tls_server_name; /* NULL when absent */
	bool insecure_skip_tls_verify;
	char *ca_file;	    /* absolute path, or NULL */
	struct buf ca_data; /* decoded PEM, empty when absent */
	char *client_cert_file, *client_key_file;
	struct buf client_cert_data, client_key_data;
	char *token; /* NULL when absent */
	char *token_file;
};

/* 0, or -1 with *err (malloc'ed, one line: what is wrong and where). */
int kubeconfig_load(const char *path, struct kubeconfig *out, char **err);
/* The same, without opening the files it names (their paths are resolved
 * and given as written): to read what a kubeconfig says, not to use it. */
int kubeconfig_load_names(const char *path, struct kubeconfig *out, char **err);
/* The same from text; base_dir resolves relative file references. */
int kubeconfig_parse(const char *yaml, size_t len, const char *base_dir, struct kubeconfig *out,
		     char **err);
void kubeconfig_free(struct kubeconfig *kc);

#endif
