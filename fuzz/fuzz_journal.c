/*
 * fuzz_journal.c - the disk store's journal records (src/storage/
 * disk_recover.c), read at startup to finish or undo a view replace: decode
 * any bytes; a record that decodes may only name paths inside the cache
 * directory, and its views are a set that view_set_encode can write.
 *
 * Input: the record's bytes.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "storage/disk_internal.h"
#include "storage/key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* No segment of p is empty, "." or "..", and p is relative. */
static bool inside(const char *p)
{
	if (!*p || *p == '/')
		return false;
	for (const char *s = p;;) {
		size_t n = strcspn(s, "/");
		if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			return false;
		if (!s[n])
			return true;
		s += n + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct disk_journal_rec r;
	if (disk_journal_decode((const char *)data, size, &r) < 0) {
		FZ_CHECK(!r.tree && !r.target && !r.component && !r.resdir && !r.views.n);
		return 0;
	}
	FZ_CHECK(inside(r.target) && inside(r.resdir) && !strchr(r.resdir, '/'));
	FZ_CHECK(r.tree[0] == 'r' && !strchr(r.tree, '/'));
	FZ_CHECK(key_component_ok(r.component));
	size_t cl = strlen(r.component);
	FZ_CHECK(!strncmp(r.target, r.component, cl) && r.target[cl] == '/');
	struct buf enc = BUF_INIT;
	FZ_CHECK(view_set_encode(&r.views, &enc) == 0);
	buf_free(&enc);
	disk_journal_rec_free(&r);
	return 0;
}
