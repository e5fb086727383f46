/*
 * hubfiles.h - what the hub keeps under --root-dir (/var/lib/yurthub), in
 * YurtHub's layout so that either hub can take over a node from the other:
 *
 *   bootstrap-hub.conf          kubeconfig with the bootstrap token and the
 *                               cluster CA (token discovery writes it)
 *   yurthub.conf                kubeconfig of the hub's own identity: the
 *                               server, the CA, and pki/yurthub-current.pem
 *                               as client certificate and key
 *   pki/ca.crt                  the cluster CA
 *   pki/yurthub-current.pem     client certificate and key (certstore.h)
 *   pki/yurthub-server-current.pem   serving certificate and key
 *   replaced-<UTC time>/        what the above were when --server-addr
 *                               moved to another cluster (kept, not wiped)
 *
 * Every file is written whole or not at all (a temporary file renamed).
 */
#ifndef YURTHUB_IDENTITY_HUBFILES_H
#define YURTHUB_IDENTITY_HUBFILES_H

#include <stddef.h>

#include "util/buf.h"

#define HUBFILES_BOOTSTRAP_CONF "bootstrap-hub.conf"
#define HUBFILES_HUB_CONF	"yurthub.conf"
#define HUBFILES_PKI		"pki"
#define HUBFILES_CA		"pki/ca.crt"
#define HUBFILES_CLIENT_PREFIX	"yurthub"
#define HUBFILES_SERVER_PREFIX	"yurthub-server"

/* "<root>/<name>", malloc'ed; NULL on ENOMEM. */
char *hubfiles_path(const char *root, const char *name);

/* Create root and root/pki (0700) if missing.  0, or -1 with *err. */
int hubfiles_prepare(const char *root, char **err);

/* yurthub.conf names a server whose host is none of servers' hosts: the
 * node was moved to another cluster.  Then the identity files go to
 * root/replaced-<time>/ (a warning says so) so that the hub starts afresh
 * without destroying what an operator may want back.  0 (moved or not),
 * or -1 with *err. */
int hubfiles_set_aside_if_moved(const char *root, const char *const *servers, size_t n, char **err);

/* Write a kubeconfig to path (0600): one cluster (server, the CA inline),
 * one user with a bearer token, or with the client certificate and key in
 * the file cert_key_path.  0, or -1 with *err. */
int hubfiles_write_kubeconfig(const char *path, const char *server, const struct buf *ca_pem,
			      const char *token, const char *cert_key_path, char **err);

/* Write root/pki/ca.crt when it does not hold ca_pem already. */
int hubfiles_write_ca(const char *root, const struct buf *ca_pem, char **err);

#endif
