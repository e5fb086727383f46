/*
 * certstore.h - the hub's certificates on disk, in client-go's file-store
 * layout, so that YurtHub's files (and tools that know them) work as they
 * are:
 *
 *   <dir>/<prefix>-2024-05-01-10-20-30.pem   certificate (chain), then key; 0600
 *   <dir>/<prefix>-current.pem               symlink to the newest of them
 *
 * (prefix "yurthub" for the client certificate, "yurthub-server" for the
 * serving one, dir <root>/pki).  A new pair is written as a new
 * timestamped file, made durable, and then the link is switched in one
 * rename: a power cut leaves the old pair or the new one current, never a
 * half-written file.  Timestamps are UTC (client-go uses local time; UTC
 * keeps the names in order across DST changes).  Only the newest
 * CERTSTORE_KEEP timestamped files (and the link's target) are kept.
 *
 * Reading accepts what client-go writes too: a link with an absolute
 * target (client-go links to <dir>/<file>), as long as it stays in the
 * directory, or a plain file in place of the link.
 *
 * No state, no locks: one writer per (dir, prefix), which the certificate
 * manager is.
 */
#ifndef YURTHUB_IDENTITY_CERTSTORE_H
#define YURTHUB_IDENTITY_CERTSTORE_H

#include <stddef.h>

#include "identity/x509.h"
#include "util/buf.h"

#define CERTSTORE_KEEP 3
/* No pair file is larger; a bigger one is broken. */
#define CERTSTORE_FILE_MAX (1u << 20)

struct certstore_pair {
	struct buf pem;	       /* the file's bytes: certificate(s) then key */
	struct x509_info info; /* of its leaf; the key is known to match */
};

/* The current pair of dir/prefix into *out: 1.  0 when there is none - no
 * link, a link to nothing or outside dir, a file that does not parse, no
 * key or a key that is not the certificate's - with the reason logged (a
 * warning, or -v 1 when there is simply no file yet), so that the caller
 * asks for a new one.  -1 only when out of memory.  An expired pair is
 * still a pair: the caller judges age.  *out is always safe to free. */
int certstore_load(const char *dir, const char *prefix, struct certstore_pair *out);
void certstore_pair_free(struct certstore_pair *p);

/* Write pem[0..len) as a new timestamped file and make it current (dir is
 * created, 0700, if missing).  Durable when it returns 0; -1 with *err
 * otherwise, the previous pair still current.  Older files beyond the
 * newest CERTSTORE_KEEP are then removed (failures there only logged). */
int certstore_save(const char *dir, const char *prefix, const char *pem, size_t len, char **err);

/* "<dir>/<prefix>-current.pem" (malloc'ed; NULL on ENOMEM): what a
 * kubeconfig's client-certificate and client-key name. */
char *certstore_current_path(const char *dir, const char *prefix);

#endif
