/*
 * fuzz_meta.c - the metadata of one object (src/kube/meta.c), read from
 * bytes the cloud sent or the disk gave back at startup, and the kinds a
 * cached discovery document names (src/kube/kinds.c).  kube_meta_rv, the
 * fast path for trusted documents, must accept whatever kube_meta_parse
 * accepts.
 *
 * Input: one JSON document.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "kube/kinds.h"
#include "kube/meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_rv_text(const char *s, size_t len)
{
	uint64_t v;
	if (kube_rv_parse(s, len, &v) == 0) {
		FZ_CHECK(len > 0);
		for (size_t i = 0; i < len; i++)
			FZ_CHECK(s[i] >= '0' && s[i] <= '9');
	} else {
		FZ_CHECK(v == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *json = (const char *)data;
	struct kube_meta m;
	uint64_t rv = 1;
	if (kube_meta_parse(json, size, &m) == 0) {
		FZ_CHECK(kube_meta_rv(json, size, &rv) == 0);
		if (m.resource_version) {
			uint64_t again;
			/* m.rv is parsed from the whole text: "1\u00002" is no
			 * revision, though its C string "1" is one */
			kube_rv_parse(m.resource_version, strlen(m.resource_version), &again);
			FZ_CHECK(again == m.rv || m.rv == 0);
		} else {
			FZ_CHECK(m.rv == 0);
		}
	} else {
		FZ_CHECK(!m.kind && !m.name && !m.namespace && !m.resource_version && !m.uid);
		kube_meta_rv(json, size, &rv);
	}
	kube_meta_free(&m);
	check_rv_text(json, size);

	char *kind = kinds_from_discovery(json, size, "pods");
	FZ_CHECK(!kind || *kind);
	free(kind);
	return 0;
}
