/*
 * fuzz_key.c - names read back from the cache directory or from etcd keys
 * (src/storage/key.c): resource directories "<resource>.<version>.<group>"
 * (or a legacy bare "<resource>") must parse back to the same name, and
 * whatever passes the segment checks can never climb out of its directory.
 *
 * Input: one name.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "storage/key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_resource_dir(const char *dir)
{
	char *res, *ver, *grp;
	if (key_parse_resource_dir(dir, &res, &ver, &grp) < 0)
		return;
	FZ_CHECK(!strchr(dir, '/') && strcmp(dir, "..") && strcmp(dir, "."));
	enum key_layout layout = *ver ? KEY_LAYOUT_ENHANCED : KEY_LAYOUT_LEGACY;
	char *again = key_resource_dir(layout, res, ver, grp);
	FZ_CHECK(again && !strcmp(again, dir));
	free(again);
	free(key_etcd_resource_path(grp, res));
	free(res);
	free(ver);
	free(grp);
}

static void check_segment(const char *s)
{
	if (key_segment_ok(s, KEY_NAME_MAX)) {
		FZ_CHECK(*s && strlen(s) <= KEY_NAME_MAX);
		FZ_CHECK(!strchr(s, '/') && strcmp(s, "..") && strcmp(s, "."));
	}
	if (key_component_ok(s))
		FZ_CHECK(s[0] != '.' && s[0] != '_' && strcmp(s, "version") && strcmp(s, "apis"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fz_strndup(data, size);
	check_resource_dir(s);
	check_segment(s);
	char *ci = key_cluster_info_name(s);
	if (ci)
		FZ_CHECK(*ci && !strchr(ci, '/') && strcmp(ci, "..") && strcmp(ci, "."));
	free(ci);
	free(s);
	return 0;
}
