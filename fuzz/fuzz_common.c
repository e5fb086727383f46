/* fuzz_common.c - the helpers of fuzz_common.h. */
#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *fz_strndup(const uint8_t *data, size_t len)
{
	char *s = malloc(len + 1);
	if (!s)
		abort();
	if (len)
		memcpy(s, data, len);
	s[len] = '\0';
	return s;
}

bool fz_field(const uint8_t **data, size_t *size, const uint8_t **field, size_t *len)
{
	if (!*data)
		return false;
	const uint8_t *nul = *size ? memchr(*data, '\0', *size) : NULL;
	*field = *data;
	*len = nul ? (size_t)(nul - *data) : *size;
	if (nul) {
		*size -= *len + 1;
		*data = nul + 1;
	} else {
		*data = NULL; /* the last field was taken */
		*size = 0;
	}
	return true;
}

void fz_chunks_init(struct fz_chunks *c, uint8_t spec)
{
	static const size_t max[8] = {1, 2, 3, 7, 16, 64, 512, 4096};
	c->max = max[spec & 7];
	c->state = 0x9e3779b9u ^ ((uint32_t)spec * 0x85ebca6bu);
}

size_t fz_chunks_next(struct fz_chunks *c, size_t left)
{
	/* xorshift32: the same plan for the same spec byte, every run */
	c->state ^= c->state << 13;
	c->state ^= c->state >> 17;
	c->state ^= c->state << 5;
	size_t n = 1 + c->state % c->max;
	return n < left ? n : left;
}

void fz_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: invariant does not hold: %s\n", file, line, what);
	abort();
}
