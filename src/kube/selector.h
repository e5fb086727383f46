/*
 * selector.h - Kubernetes label and field selectors: parse, print in
 * canonical form, and evaluate on an object's JSON.
 *
 * Label selectors: comma-separated requirements `k=v`, `k==v`, `k!=v`,
 * `k in (a,b)`, `k notin (a,b)`, `k` (exists), `!k` (does not exist), and
 * `k>n`, `k<n` (integer compare) - as k8s.io/apimachinery/pkg/labels parses
 * them, with the same key and value validation.
 * Field selectors: `path=v`, `path==v`, `path!=v`, comma-separated, on any
 * dotted field path (metadata.name, spec.nodeName, status.phase, ...), with
 * the escapes `\,` `\=` `\\` in values - as fields.ParseSelector does.  A
 * missing field has the value "", booleans and numbers compare as their JSON
 * text.
 */
#ifndef YURTHUB_KUBE_SELECTOR_H
#define YURTHUB_KUBE_SELECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum selector_kind { SELECTOR_LABEL, SELECTOR_FIELD };

struct selector;

/* Parse text (NULL or "" = the empty selector, which matches everything).
 * Returns 0 and *out, or -1 with *err set to a malloc'ed one-line message
 * (free it) that says what is wrong and where. */
int selector_parse(enum selector_kind kind, const char *text, struct selector **out, char **err);
void selector_free(struct selector *s);
bool selector_is_empty(const struct selector *s);
/* The requirements' keys (label keys, field paths), in canonical order:
 * what the API server checks against the fields a resource can select on. */
size_t selector_term_count(const struct selector *s);
const char *selector_term_key(const struct selector *s, size_t i);
/* Canonical text: requirements sorted, set values sorted and deduplicated, `==`
 * written `=`.  Equal selectors give equal strings.  malloc'ed; NULL on ENOMEM. */
char *selector_canonical(const struct selector *s);
/* Canonicalise text directly: 0 and *out (malloc'ed), or -1 and *err. */
int selector_canonicalize(enum selector_kind kind, const char *text, char **out, char **err);

/* Does the object (one JSON object) match both selectors (either may be NULL)?
 * Returns 1 match, 0 no match, -1 malformed JSON. */
int selector_match_json(const struct selector *labels, const struct selector *fields,
			const char *json, size_t len);

/* A quick look at the raw bytes, before selector_match_json: false when the
 * object surely does not match (a value that an = or "in" requirement needs
 * appears nowhere in it), true for "maybe".  Serving a filtered list offline,
 * most objects are skipped without being parsed. */
bool selector_may_match(const struct selector *s, const char *json, size_t len);

/* The same quick look, on a 64-bit summary of every string and literal of
 * a document, made once (selector_bloom) and kept: false when the document
 * surely does not match s.  For the disk store's index, which answers
 * selectors over thousands of small documents. */
uint64_t selector_bloom(const char *json, size_t len);
bool selector_may_match_bloom(const struct selector *s, uint64_t bloom);

#endif
