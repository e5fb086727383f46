/* stream_check.c - the checks of stream_check.h. */
#include "stream_check.h"

#include <string.h>

#include "fuzz_common.h"
#include "kube/meta.h"

static void record(struct buf *log, const char *s, size_t len)
{
	if (buf_printf(log, "%zu:", len) < 0 || buf_append(log, s, len) < 0)
		__builtin_trap();
}

static bool same(const char *picked, const char *parsed)
{
	return !strcmp(picked, parsed ? parsed : "");
}

void stream_check_object(struct buf *log, const struct stream_object *o)
{
	record(log, o->data, o->len);
	record(log, o->name, strlen(o->name));
	record(log, o->namespace, strlen(o->namespace));
	record(log, o->resource_version, strlen(o->resource_version));
	record(log, o->kind, strlen(o->kind));
	if (buf_printf(log, "%llu;", (unsigned long long)o->rv) < 0)
		__builtin_trap();

	FZ_CHECK(o->len >= 2 && o->data[0] == '{' && o->data[o->len - 1] == '}');
	struct kube_meta m;
	FZ_CHECK(kube_meta_parse(o->data, o->len, &m) == 0);
	FZ_CHECK(same(o->name, m.name) && same(o->namespace, m.namespace));
	FZ_CHECK(same(o->resource_version, m.resource_version) && o->rv == m.rv);
	FZ_CHECK(same(o->kind, m.kind));
	kube_meta_free(&m);
}
