/*
 * fuzz_continue.c - the continue token a client sends back to page through
 * an offline list (src/proxy/local_list.c): decode any token; one that
 * decodes must be re-issued as a token that decodes to the same place.
 *
 * Input: the token's text.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "proxy/local_internal.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *token = fz_strndup(data, size);
	uint64_t rv, rv2;
	char *start = NULL, *start2 = NULL;
	if (local_parse_continue(token, &rv, &start) == 0) {
		FZ_CHECK(start != NULL);
		struct buf again = BUF_INIT;
		FZ_CHECK(local_continue_token(&again, rv, start) == 0);
		FZ_CHECK(local_parse_continue(again.data, &rv2, &start2) == 0);
		FZ_CHECK(rv == rv2 && !strcmp(start, start2));
		buf_free(&again);
	} else {
		FZ_CHECK(start == NULL);
	}
	free(start);
	free(start2);
	free(token);
	return 0;
}
