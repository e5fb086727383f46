/*
 * unparsable.c - the objects a filter could not read and passed on as they
 * came (filter.h, filter_unparsable_note): one odd object in the cloud
 * must not cut a whole list, but the operator should hear of it - once, not
 * every time kubelet relists.
 *
 * What was logged is remembered by util/once.h, in bounded memory.
 */
#include "filter/filter.h"

#include <stdatomic.h>

#include "util/log.h"
#include "util/once.h"

static _Atomic unsigned long long unparsable[FILTER_COUNT];
static struct once_table logged = ONCE_TABLE_INIT;

void filter_unparsable_note(enum filter_id by, const char *resource, const char *ns,
			    const char *name, const char *data, size_t len, const char *why)
{
	if ((unsigned)by >= FILTER_COUNT)
		return;
	atomic_fetch_add(&unparsable[by], 1);
	if (!once_first(&logged, data, len))
		return;
	/* name and namespace are what the decoder could read ("" when the odd
	 * thing is the name itself); the log escapes what is not printable */
	log_warn("filter %s: %s %s%s%s (%zu bytes) passed unfiltered, as the cloud sent it: %s "
		 "(yurthub_filter_unparsable_total; logged once per object)",
		 filter_name(by), resource ? resource : "", ns ? ns : "", ns && *ns ? "/" : "",
		 name && *name ? name : "<unreadable name>", len, why ? why : "");
}

unsigned long long filter_unparsable_total(enum filter_id id)
{
	return (unsigned)id < FILTER_COUNT ? atomic_load(&unparsable[id]) : 0;
}
