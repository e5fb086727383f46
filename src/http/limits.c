/* limits.c - what one client may make the hub hold, see limits.h. */
#include "http/limits.h"

#include <string.h>

bool request_is_long_running(const struct request_info *ri)
{
	static const char *const subs[] = {"attach", "exec", "proxy", "log", "portforward"};
	if (ri->verb == VERB_WATCH || ri->verb == VERB_PROXY)
		return true;
	for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
		if (ri->subresource && !strcmp(ri->subresource, subs[i]))
			return true;
	return false;
}
