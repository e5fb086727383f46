/*
 * filter.c - a client's namespace and selectors applied to a shared
 * object, see filter.h.
 */
#include "mux/filter.h"

#include <string.h>

static bool selector_empty(const struct selector *s)
{
	return !s || selector_is_empty(s);
}

bool mux_filter_is_all(const struct mux_filter *f)
{
	return !f || ((!f->namespace || !*f->namespace) && selector_empty(f->labels) &&
		      selector_empty(f->fields));
}

bool mux_filter_match(const struct mux_filter *f, const struct mux_obj *o)
{
	if (mux_filter_is_all(f))
		return true;
	if (f->namespace && *f->namespace && strcmp(f->namespace, o->namespace) != 0)
		return false;
	if (selector_empty(f->labels) && selector_empty(f->fields))
		return true;
	/* the quick look at the bytes rules most non-matching objects out
	 * without a parse */
	if (!selector_may_match(f->labels, o->data, o->len) ||
	    !selector_may_match(f->fields, o->data, o->len))
		return false;
	return selector_match_json(f->labels, f->fields, o->data, o->len) == 1;
}
