/*
 * fuzz_selectable.c - the selectable document of an object
 * (src/kube/selectable.c) and its 64-bit summary (selector_bloom), which
 * the disk store's index answers offline selectors from.  Whatever the
 * bytes: when the picker accepts an object, every selector of a fixed set
 * matches the picked document exactly when it matches the whole object,
 * and the summary never rules out a document that matches.
 *
 * Input: one JSON document (an object as the disk gives it back).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "kube/selectable.h"
#include "kube/selector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const LABELS[] = {"",     "app=web", "app!=web", "app in (web,db)",
				     "tier", "!tier",	"n>5"};
static const char *const FIELDS[] = {"",
				     "spec.nodeName=node1",
				     "spec.nodeName!=node1",
				     "status.phase=Running",
				     "metadata.name=a",
				     "metadata.namespace=default",
				     "spec.hostNetwork=true"};

#define N(a) (sizeof(a) / sizeof((a)[0]))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *json = (const char *)data;
	struct buf doc = BUF_INIT;
	if (selectable_pick("", "pods", json, size, &doc) < 0) {
		FZ_CHECK(doc.len == 0);
		buf_free(&doc);
		return 0;
	}
	uint64_t bloom = selector_bloom(doc.data, doc.len);
	for (size_t l = 0; l < N(LABELS); l++) {
		for (size_t f = 0; f < N(FIELDS); f++) {
			struct selector *ls = NULL, *fs = NULL;
			char *err = NULL;
			FZ_CHECK(selector_parse(SELECTOR_LABEL, LABELS[l], &ls, &err) == 0);
			FZ_CHECK(selector_parse(SELECTOR_FIELD, FIELDS[f], &fs, &err) == 0);
			int whole = selector_match_json(ls, fs, json, size);
			int picked = selector_match_json(ls, fs, doc.data, doc.len);
			/* malformed values the walk skipped: the whole is -1, the
			 * picked document may still parse; a match must agree */
			if (whole >= 0)
				FZ_CHECK((whole == 1) == (picked == 1));
			if (whole == 1)
				FZ_CHECK(selector_may_match_bloom(ls, bloom) &&
					 selector_may_match_bloom(fs, bloom));
			selector_free(ls);
			selector_free(fs);
		}
	}
	buf_free(&doc);
	return 0;
}
