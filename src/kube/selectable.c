/*
 * selectable.c - picking an object's selectable document, see selectable.h.
 *
 * One pass over the bytes, without building the object: the top level and
 * the objects of the picked paths' first segments are walked key by key,
 * everything else is skipped bracket by bracket.  The values picked are
 * copied verbatim; whether they are valid JSON is for the selector code to
 * find, on this document as it would on the object.  Where this walk could
 * read the object differently from a JSON parser (a key written with
 * escapes, a picked key given twice - a parser keeps the last), it gives up,
 * and the caller reads the whole object instead.
 */
#include "kube/selectable.h"

#include <string.h>

#include "kube/fieldlabels.h"

#define PICK_MAX 24

static const char *const ALWAYS[] = {"metadata.name", "metadata.namespace", "metadata.labels",
				     NULL};

struct pick {
	const char *path; /* "spec.nodeName" or "type" */
	size_t head;	  /* length of the first segment */
	const char *leaf; /* after the dot; NULL for a one-segment path */
	const char *v;	  /* the value's bytes, when seen */
	size_t vlen;
};

struct picker {
	struct pick p[PICK_MAX];
	size_t n;
	const char *s, *end;
};

static void add_paths(struct picker *k, const char *const *paths)
{
	for (; paths && *paths && k->n < PICK_MAX; paths++) {
		const char *dot = strchr(*paths, '.');
		if (dot && strchr(dot + 1, '.'))
			continue; /* deeper paths are read from the object itself */
		bool dup = false;
		for (size_t i = 0; i < k->n && !dup; i++)
			dup = !strcmp(k->p[i].path, *paths);
		if (!dup)
			k->p[k->n++] =
			    (struct pick){*paths, dot ? (size_t)(dot - *paths) : strlen(*paths),
					  dot ? dot + 1 : NULL, NULL, 0};
	}
}

static void skip_ws(struct picker *k)
{
	while (k->s < k->end && (*k->s == ' ' || *k->s == '\t' || *k->s == '\n' || *k->s == '\r'))
		k->s++;
}

/* At a '"': past the closing one.  *escaped says whether a '\' was seen. */
static int skip_string(struct picker *k, bool *escaped)
{
	*escaped = false;
	for (k->s++; k->s < k->end;) {
		char c = *k->s++;
		if (c == '"')
			return 0;
		if (c == '\\') {
			*escaped = true;
			if (k->s == k->end)
				return -1;
			k->s++;
		}
	}
	return -1;
}

/* Past one value: a string, a container (brackets counted outside
 * strings), or a literal or number (up to a delimiter). */
static int skip_value(struct picker *k)
{
	bool esc;
	skip_ws(k);
	if (k->s == k->end)
		return -1;
	if (*k->s == '"')
		return skip_string(k, &esc);
	if (*k->s == '{' || *k->s == '[') {
		size_t depth = 0;
		while (k->s < k->end) {
			char c = *k->s;
			if (c == '"') {
				if (skip_string(k, &esc) < 0)
					return -1;
				continue;
			}
			k->s++;
			if (c == '{' || c == '[')
				depth++;
			else if ((c == '}' || c == ']') && --depth == 0)
				return 0;
		}
		return -1;
	}
	const char *from = k->s;
	while (k->s < k->end && !strchr(",}] \t\n\r", *k->s))
		k->s++;
	return k->s > from ? 0 : -1;
}

/* At a key's '"': the key's bytes (no escapes allowed), then past the ':'. */
static int read_key(struct picker *k, const char **key, size_t *klen)
{
	bool esc;
	const char *from = k->s + 1;
	if (k->s == k->end || *k->s != '"' || skip_string(k, &esc) < 0 || esc)
		return -1;
	*key = from;
	*klen = (size_t)(k->s - 1 - from);
	skip_ws(k);
	if (k->s == k->end || *k->s != ':')
		return -1;
	k->s++;
	skip_ws(k);
	return 0;
}

static bool same(const char *a, size_t alen, const char *b, size_t blen)
{
	return alen == blen && !memcmp(a, b, alen);
}

/* Record the value at k->s for pick p: twice is a give-up. */
static int take(struct picker *k, struct pick *p)
{
	if (p->v)
		return -1;
	const char *from = k->s;
	if (skip_value(k) < 0)
		return -1;
	p->v = from;
	p->vlen = (size_t)(k->s - from);
	return 0;
}

/* Walk the object at k->s.  head (NULL at the top level) is the first
 * segment whose object this is. */
static int walk_object(struct picker *k, const char *head, size_t hlen)
{
	skip_ws(k);
	if (k->s == k->end || *k->s != '{')
		return -1;
	k->s++;
	skip_ws(k);
	if (k->s < k->end && *k->s == '}') {
		k->s++;
		return 0;
	}
	bool descended[PICK_MAX] = {false};
	for (;;) {
		const char *key;
		size_t klen;
		if (read_key(k, &key, &klen) < 0)
			return -1;
		int rc = 0;
		bool done = false;
		for (size_t i = 0; i < k->n && !done && rc == 0; i++) {
			struct pick *p = &k->p[i];
			if (head) {
				if (p->leaf && same(p->path, p->head, head, hlen) &&
				    same(p->leaf, strlen(p->leaf), key, klen))
					rc = take(k, p), done = true;
			} else if (!p->leaf && same(p->path, p->head, key, klen)) {
				rc = take(k, p), done = true;
			} else if (p->leaf && same(p->path, p->head, key, klen)) {
				if (descended[i])
					return -1; /* the same head twice */
				for (size_t j = i; j < k->n; j++)
					descended[j] = descended[j] ||
						       same(k->p[j].path, k->p[j].head, key, klen);
				skip_ws(k);
				rc = k->s < k->end && *k->s == '{' ? walk_object(k, key, klen)
								   : skip_value(k);
				done = true;
			}
		}
		if (rc == 0 && !done)
			rc = skip_value(k);
		if (rc < 0)
			return -1;
		skip_ws(k);
		if (k->s == k->end)
			return -1;
		if (*k->s == '}') {
			k->s++;
			return 0;
		}
		if (*k->s++ != ',')
			return -1;
		skip_ws(k);
	}
}

static int emit(const struct picker *k, struct buf *out)
{
	int rc = buf_append_char(out, '{');
	bool first = true;
	for (size_t i = 0; i < k->n && rc == 0; i++) {
		const struct pick *p = &k->p[i];
		if (!p->v)
			continue;
		/* one object per first segment: emitted with its first seen leaf */
		bool before = false;
		for (size_t j = 0; j < i && !before; j++)
			before = k->p[j].v && k->p[j].leaf && p->leaf &&
				 same(k->p[j].path, k->p[j].head, p->path, p->head);
		if (before)
			continue;
		rc = buf_printf(out, "%s\"%.*s\":", first ? "" : ",", (int)p->head, p->path);
		first = false;
		if (!p->leaf) {
			rc = rc ? rc : buf_append(out, p->v, p->vlen);
			continue;
		}
		rc = rc ? rc : buf_append_char(out, '{');
		bool inner_first = true;
		for (size_t j = i; j < k->n && rc == 0; j++) {
			const struct pick *q = &k->p[j];
			if (!q->v || !q->leaf || !same(q->path, q->head, p->path, p->head))
				continue;
			rc = buf_printf(out, "%s\"%s\":", inner_first ? "" : ",", q->leaf);
			rc = rc ? rc : buf_append(out, q->v, q->vlen);
			inner_first = false;
		}
		rc = rc ? rc : buf_append_char(out, '}');
	}
	return rc ? rc : buf_append_char(out, '}');
}

int selectable_pick(const char *group, const char *resource, const char *json, size_t len,
		    struct buf *out)
{
	struct picker k = {.s = json, .end = json + len};
	add_paths(&k, ALWAYS);
	add_paths(&k, field_labels_of(group, resource));
	size_t was = out->len;
	if (!json || walk_object(&k, NULL, 0) < 0)
		return -1;
	skip_ws(&k);
	if (k.s != k.end || emit(&k, out) < 0) {
		out->len = was;
		if (out->data)
			out->data[was] = '\0';
		return -1;
	}
	return 0;
}

bool selectable_answers(const char *group, const char *resource, const struct selector *fields)
{
	const char *const *table = field_labels_of(group, resource);
	for (size_t i = 0; fields && i < selector_term_count(fields); i++) {
		const char *key = selector_term_key(fields, i);
		bool found = !strcmp(key, "metadata.name") || !strcmp(key, "metadata.namespace");
		if (strchr(key, '.') && strchr(strchr(key, '.') + 1, '.'))
			return false;
		for (size_t j = 0; table && table[j] && !found; j++)
			found = !strcmp(table[j], key);
		if (!found)
			return false;
	}
	return true;
}
