/*
 * filter.h - which objects of a shared cache one client asked for: its
 * namespace (from the URL) and its label and field selectors, as the API
 * server applies them to a list or a watch.
 *
 * Evaluated by the reader's thread, never under the cache's lock: a
 * selector parses the object's JSON.
 */
#ifndef YURTHUB_MUX_FILTER_H
#define YURTHUB_MUX_FILTER_H

#include <stdbool.h>

#include "kube/selector.h"
#include "mux/obj.h"

struct mux_filter {
	const char *namespace;	       /* NULL or "": every namespace */
	const struct selector *labels; /* NULL: every object */
	const struct selector *fields; /* NULL: every object */
};

/* Does o belong to what f asks for?  A NULL f asks for everything.  Objects
 * came in as valid JSON (mux_obj_new), so a selector cannot fail on them. */
bool mux_filter_match(const struct mux_filter *f, const struct mux_obj *o);
/* Does f let every object through (no namespace, empty selectors)?  Then
 * a reader skips evaluating it. */
bool mux_filter_is_all(const struct mux_filter *f);

#endif
