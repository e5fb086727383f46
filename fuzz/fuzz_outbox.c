/*
 * fuzz_outbox.c - the records of the offline write queue (src/proxy/
 * outbox.c), read back from disk to be sent to the cloud: decode any
 * bytes; a record that decodes becomes a request line and a header, so it
 * must not be able to add lines of its own to the request.
 *
 * Input: the record's bytes.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "proxy/outbox_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* No byte that ends or breaks a line of an HTTP request (a header value
 * may hold tabs). */
static bool one_line(const char *s, bool tab_ok)
{
	for (; *s; s++)
		if (((unsigned char)*s < 0x20 && !(tab_ok && *s == '\t')) || *s == 0x7f)
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outbox_record r;
	if (outbox_record_decode((const char *)data, size, &r) < 0) {
		FZ_CHECK(!r.uri && !r.content_type && !r.body);
		return 0;
	}
	FZ_CHECK(r.uri[0] == '/' && !strchr(r.uri, ' ') && one_line(r.uri, false));
	FZ_CHECK(one_line(r.content_type, true));
	FZ_CHECK(r.body[r.body_len] == '\0');
	outbox_record_free(&r);
	return 0;
}
