/*
 * fuzz_selector.c - label and field selectors (src/kube/selector.c): the
 * parser on any text, the canonical form (it must parse back to itself),
 * and evaluation on any object, where the quick look at the raw bytes may
 * never rule out an object that the full evaluation matches.
 *
 * Input: one byte (bit 0: field selector, else label), the selector text,
 * NUL, the object's JSON.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "kube/selector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_canonical(enum selector_kind kind, const struct selector *s)
{
	char *canon = selector_canonical(s), *again = NULL, *err = NULL;
	FZ_CHECK(canon != NULL);
	FZ_CHECK(selector_canonicalize(kind, canon, &again, &err) == 0);
	FZ_CHECK(strcmp(canon, again) == 0);
	FZ_CHECK(selector_is_empty(s) == (*canon == '\0'));
	free(canon);
	free(again);
}

static void check_match(enum selector_kind kind, const struct selector *s, const char *json,
			size_t len)
{
	const struct selector *ls = kind == SELECTOR_LABEL ? s : NULL;
	const struct selector *fs = kind == SELECTOR_FIELD ? s : NULL;
	int m = selector_match_json(ls, fs, json, len);
	FZ_CHECK(m == 1 || m == 0 || m == -1);
	if (m == 1)
		FZ_CHECK(selector_may_match(s, json, len));
	/* the empty selector matches every well-formed object */
	if (selector_is_empty(s) && m >= 0)
		FZ_CHECK(m == 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	enum selector_kind kind = data[0] & 1 ? SELECTOR_FIELD : SELECTOR_LABEL;
	data++, size--;
	const uint8_t *text, *obj = NULL;
	size_t text_len, obj_len = 0;
	fz_field(&data, &size, &text, &text_len);
	fz_field(&data, &size, &obj, &obj_len);
	char *t = fz_strndup(text, text_len);
	char *json = fz_strndup(obj ? obj : (const uint8_t *)"", obj_len);

	struct selector *s = NULL;
	char *err = NULL;
	if (selector_parse(kind, t, &s, &err) == 0) {
		FZ_CHECK(err == NULL || *err == '\0');
		check_canonical(kind, s);
		check_match(kind, s, json, obj_len);
		selector_free(s);
	} else {
		FZ_CHECK(err != NULL && !strchr(err, '\n'));
	}
	free(err);
	free(t);
	free(json);
	return 0;
}
