/*
 * fuzz_common.h - what the fuzz targets of this directory share: copies of
 * the input that parsers can take as C strings, splitting one input into
 * fields, the chunk plans that feed incremental decoders the same bytes in
 * different pieces, and a check that aborts (a finding) when an invariant
 * of the code under test does not hold.
 */
#ifndef YURTHUB_FUZZ_COMMON_H
#define YURTHUB_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The input as a NUL-terminated copy (malloc'ed; aborts on ENOMEM). */
char *fz_strndup(const uint8_t *data, size_t len);

/* The next field of the input, up to a NUL byte or the end: its bytes in
 * *field and *len; the input advances past the NUL.  false at the end. */
bool fz_field(const uint8_t **data, size_t *size, const uint8_t **field, size_t *len);

/* A chunk plan: the sizes of the pieces to feed, from one byte of the
 * input.  Its low 3 bits choose the largest piece (1, 2, 3, 7, 16, 64, 512
 * or 4096 bytes), the rest seed the sizes under it. */
struct fz_chunks {
	uint32_t state;
	size_t max;
};

void fz_chunks_init(struct fz_chunks *c, uint8_t spec);
/* The size of the next piece of `left` remaining bytes (at least 1). */
size_t fz_chunks_next(struct fz_chunks *c, size_t left);

/* Abort with a message when cond is false: the fuzzer reports a crash. */
#define FZ_CHECK(cond) ((cond) ? (void)0 : fz_fail(__FILE__, __LINE__, #cond))
void fz_fail(const char *file, int line, const char *what) __attribute__((noreturn));

#endif
