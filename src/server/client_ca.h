/*
 * client_ca.h - the client CA of the secure port and the leader port,
 * reloaded while they serve.
 *
 * libmicrohttpd loads a trust list once, into the daemon's credentials,
 * and keeps it for the daemon's life; a cluster CA that changes (a new
 * --client-ca-file, a CA discovered again by token bootstrap) would then
 * need a restart.  Instead, each connection gets GnuTLS credentials of
 * its own generation here (set on its session before the handshake, from
 * libmicrohttpd's connection-started notification): the newest CA that
 * parsed, with the serving certificate's retrieve callback (tls.h).  A
 * generation is freed when its last connection closes, so a connection
 * verifies its client's certificate against the CA it was accepted with,
 * and new handshakes use the new one.
 *
 * The file is looked at (stat) as each connection starts and whenever the
 * hub says the CA may have changed (client_ca_check); it is read and
 * parsed only when it changed.  A CA that does not parse keeps the previous
 * one, with one error in the log per change of the file.
 */
#ifndef YURTHUB_SERVER_CLIENT_CA_H
#define YURTHUB_SERVER_CLIENT_CA_H

#include <gnutls/gnutls.h>

struct client_ca;
struct client_ca_gen;

/* The CA of path, not read yet; NULL when out of memory. */
struct client_ca *client_ca_new(const char *path);
/* Read the file if it changed since last looked at.  0 a CA is loaded
 * (this one or an earlier one), -ENOENT none yet and the file is not
 * there, another -errno none yet (logged). */
int client_ca_check(struct client_ca *ca);
/* Give session the current credentials (and ask its client for a
 * certificate), after checking the file; the generation returned is held
 * until client_ca_release.  NULL: no CA loaded, or out of memory (the
 * session keeps the daemon's credentials, which trust nobody). */
struct client_ca_gen *client_ca_attach(struct client_ca *ca, gnutls_session_t session);
void client_ca_release(struct client_ca_gen *g);
/* Once no connection holds a generation (every daemon stopped). */
void client_ca_free(struct client_ca *ca);

#endif
