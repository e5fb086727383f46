/*
 * fault_fx.h - objects and store calls the fault tests share: ConfigMaps of
 * a known resourceVersion, the writes a watch stream causes (as the cache
 * manager makes them), a list replace, and checks of what the store holds.
 * Every view is (component "agent", configmaps v1, one namespace).
 */
#ifndef YURTHUB_TESTS_FAULT_FX_H
#define YURTHUB_TESTS_FAULT_FX_H

#include <stddef.h>
#include <stdint.h>

#include "storage/store.h"

/* A ConfigMap ns/name at rv with a value of pad bytes; malloc'ed. */
char *fx_cm(const char *ns, const char *name, uint64_t rv, size_t pad);
/* Open a disk store, NULL with the reason on stderr. */
struct store *fx_open(const char *dir);

/* A watch ADDED/MODIFIED: update, or create when absent (cache manager's
 * put_object).  An older rv than the stored one is not an error. */
enum store_err fx_put(struct store *s, const char *ns, const char *name, uint64_t rv, size_t pad);
/* A watch DELETED. */
enum store_err fx_del(struct store *s, const char *ns, const char *name);

/* One object of a list or of an expected state: rv 0 means "absent". */
struct fx_obj {
	const char *name;
	uint64_t rv;
};

/* Replace the view of ns with the objects of `list` (rv 0 entries are
 * skipped), each padded to pad bytes. */
enum store_err fx_replace(struct store *s, const char *ns, uint64_t list_rv,
			  const struct fx_obj *list, size_t n, size_t pad);

/* Does the store hold exactly this?  The view of ns at view_rv (0: never
 * listed), each listed object at its rv with the content fx_cm made (rv 0:
 * absent), and - when exact - nothing else in the namespace.  Returns NULL,
 * or what differs (static text). */
const char *fx_differs(struct store *s, const char *ns, uint64_t view_rv, const struct fx_obj *objs,
		       size_t n, size_t pad, int exact);

#endif
