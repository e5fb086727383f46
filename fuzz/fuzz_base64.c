/*
 * fuzz_base64.c - base64 (src/util/base64.c), which decodes kubeconfig
 * *-data fields, every key and value of etcd's gateway and the continue
 * tokens of clients: decode any text; what decodes must encode to a text
 * that decodes to the same bytes.
 *
 * Input: the text.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "util/base64.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf dec = BUF_INIT, enc = BUF_INIT, again = BUF_INIT;
	if (base64_decode((const char *)data, size, &dec) == 0) {
		FZ_CHECK(dec.len <= size / 4 * 3 + 3);
		FZ_CHECK(base64_encode(dec.data, dec.len, &enc) == 0);
		FZ_CHECK(enc.len % 4 == 0);
		FZ_CHECK(base64_decode(enc.data ? enc.data : "", enc.len, &again) == 0);
		FZ_CHECK(again.len == dec.len &&
			 (!dec.len || !memcmp(again.data, dec.data, dec.len)));
	}
	buf_free(&dec);
	buf_free(&enc);
	buf_free(&again);
	return 0;
}
