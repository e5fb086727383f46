/*
 * selector.c - label and field selectors as Kubernetes parses and applies
 * them, so that the hub answers filtered lists and watches from its cache
 * exactly as the API server would.  Parsing mirrors
 * k8s.io/apimachinery/pkg/labels (lexer, parser, validation) and
 * pkg/fields.ParseSelector; evaluation is one streaming yajl pass per object.
 */
#include "kube/selector.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

/* The order here is the order of requirements on one key in canonical text. */
enum req_op {
	OP_EXISTS,
	OP_NOT_EXISTS,
	OP_EQ,
	OP_NE,
	OP_IN,
	OP_NOTIN,
	OP_GT,
	OP_LT,
};

struct path_part {
	const char *name;
	size_t len;
};

struct requirement {
	enum req_op op;
	char *key;	/* label key, or field path */
	char **values;	/* sorted and unique; exactly one for =, != */
	size_t nvalues; /* zero for exists, does-not-exist, > and < */
	int64_t bound;	/* for > and < */
	/* Where the compared value sits in the object: metadata.labels.<key>
	 * for labels, the dotted path for fields.  Points into key. */
	struct path_part *path;
	size_t path_len;
};

struct selector {
	enum selector_kind kind;
	struct requirement *reqs;
	size_t n;
};

/* ---- growable strings, for messages and canonical text ---- */

struct strbuf {
	char *s;
	size_t len, cap;
	bool failed; /* out of memory: every later append is a no-op */
};

static void sb_putn(struct strbuf *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		char *grown;

		while (cap < b->len + n + 1)
			cap *= 2;
		grown = realloc(b->s, cap);
		if (!grown) {
			b->failed = true;
			return;
		}
		b->s = grown;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void sb_puts(struct strbuf *b, const char *s)
{
	sb_putn(b, s, strlen(s));
}

/* Bytes with control characters escaped as Go's strconv.Quote writes them
 * (\n, \t, \x01, ...), and also quote and backslash when quoting: a
 * message stays on one line whatever the input holds. */
static void sb_put_escaped(struct strbuf *b, const char *s, size_t n, bool quoting)
{
	static const char named[] = "\a\b\t\n\v\f\r";
	static const char letters[] = "abtnvfr";

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *nm = c ? memchr(named, c, sizeof(named) - 1) : NULL;
		char esc[8];

		if (quoting && (c == '"' || c == '\\')) {
			esc[0] = '\\';
			esc[1] = (char)c;
			sb_putn(b, esc, 2);
		} else if (nm) {
			esc[0] = '\\';
			esc[1] = letters[nm - named];
			sb_putn(b, esc, 2);
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(esc, sizeof(esc), "\\x%02x", c);
			sb_puts(b, esc);
		} else {
			sb_putn(b, s + i, 1);
		}
	}
}

/* As Go's %q: double-quoted, escaped. */
static void sb_put_quoted(struct strbuf *b, const char *s, size_t n)
{
	sb_putn(b, "\"", 1);
	sb_put_escaped(b, s, n, true);
	sb_putn(b, "\"", 1);
}

/* The text, or NULL when any append ran out of memory. */
static char *sb_take(struct strbuf *b)
{
	if (b->failed || !b->s) {
		free(b->s);
		return b->failed ? NULL : strdup("");
	}
	return b->s;
}

/* ---- label lexer: k8s.io/apimachinery/pkg/labels.Lexer ---- */

enum tok_type {
	TOK_EOS,
	TOK_IDENT,
	TOK_BANG,
	TOK_EQ,
	TOK_DEQ,
	TOK_NEQ,
	TOK_IN,
	TOK_NOTIN,
	TOK_LPAREN,
	TOK_RPAREN,
	TOK_COMMA,
	TOK_GT,
	TOK_LT,
};

struct token {
	enum tok_type type;
	const char *lit;
	size_t len;
};

/* Where a token is read: in Values, `in` and `notin` are plain identifiers
 * (so `x in (in)` and a key named `in` parse), as in labels.ParserContext. */
enum lex_context { CTX_KEY_AND_OPERATOR, CTX_VALUES };

static bool is_label_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_special(char c)
{
	return c != '\0' && strchr("=!(),><", c) != NULL;
}

static enum tok_type symbol_type(char c)
{
	switch (c) {
	case '!':
		return TOK_BANG;
	case '=':
		return TOK_EQ;
	case '(':
		return TOK_LPAREN;
	case ')':
		return TOK_RPAREN;
	case ',':
		return TOK_COMMA;
	case '>':
		return TOK_GT;
	default:
		return TOK_LT;
	}
}

static enum tok_type word_type(const char *s, size_t n)
{
	if (n == 2 && memcmp(s, "in", 2) == 0)
		return TOK_IN;
	if (n == 5 && memcmp(s, "notin", 5) == 0)
		return TOK_NOTIN;
	return TOK_IDENT;
}

/* Symbols are matched longest first; the only two-byte ones are == and !=. */
static struct token lex(const char *text, size_t *pos)
{
	size_t i = *pos;
	struct token t;

	while (is_label_space(text[i]))
		i++;
	t.lit = text + i;
	t.len = 0;
	if (text[i] == '\0') {
		t.type = TOK_EOS;
	} else if (is_special(text[i])) {
		t.len = 1;
		t.type = symbol_type(text[i]);
		if ((text[i] == '=' || text[i] == '!') && text[i + 1] == '=') {
			t.len = 2;
			t.type = text[i] == '=' ? TOK_DEQ : TOK_NEQ;
		}
	} else {
		while (text[i + t.len] != '\0' && !is_special(text[i + t.len]) &&
		       !is_label_space(text[i + t.len]))
			t.len++;
		t.type = word_type(t.lit, t.len);
	}
	*pos = i + t.len;
	return t;
}

/* ---- parse state and messages ---- */

struct parser {
	enum selector_kind kind;
	const char *text;
	size_t pos;
	char **err;
	bool in_requirement; /* messages get labels.Parse's "unable to parse requirement: " */
};

static struct token next_token(struct parser *p, enum lex_context ctx)
{
	struct token t = lex(p->text, &p->pos);

	if (ctx == CTX_VALUES && (t.type == TOK_IN || t.type == TOK_NOTIN))
		t.type = TOK_IDENT;
	return t;
}

static struct token peek_token(struct parser *p, enum lex_context ctx)
{
	size_t saved = p->pos;
	struct token t = next_token(p, ctx);

	p->pos = saved;
	return t;
}

/* Appends fmt, where %s is a C string, %e one escaped as the message's
 * other text, %q a (pointer, length) pair quoted as Go's %q, and %t a
 * token's literal in single quotes as the API server prints it ('' for
 * the end of the string). */
static void sb_vformat(struct strbuf *b, const char *fmt, va_list ap)
{
	for (const char *f = fmt; *f; f++) {
		if (*f != '%' || f[1] == '\0') {
			sb_putn(b, f, 1);
			continue;
		}
		f++;
		if (*f == 's') {
			sb_puts(b, va_arg(ap, const char *));
		} else if (*f == 'q') {
			const char *s = va_arg(ap, const char *);

			sb_put_quoted(b, s, va_arg(ap, size_t));
		} else if (*f == 'e') {
			const char *s = va_arg(ap, const char *);

			sb_put_escaped(b, s, strlen(s), false);
		} else if (*f == 't') {
			const struct token *t = va_arg(ap, const struct token *);

			sb_putn(b, "'", 1);
			sb_put_escaped(b, t->lit, t->len, false);
			sb_putn(b, "'", 1);
		} else {
			sb_putn(b, f, 1);
		}
	}
}

/* Sets *p->err to the message kube-apiserver gives for the same selector
 * (k8s.io/apimachinery's labels.Parse and fields.ParseSelector); -1. */
static int fail(struct parser *p, const char *fmt, ...)
{
	struct strbuf b = {0};
	va_list ap;

	if (!p->err)
		return -1;
	if (p->in_requirement)
		sb_puts(&b, "unable to parse requirement: ");
	va_start(ap, fmt);
	sb_vformat(&b, fmt, ap);
	va_end(ap);
	*p->err = sb_take(&b);
	return -1;
}

/* ---- requirements ---- */

static void requirement_free(struct requirement *r)
{
	for (size_t i = 0; i < r->nvalues; i++)
		free(r->values[i]);
	free(r->values);
	free(r->key);
	free(r->path);
	memset(r, 0, sizeof(*r));
}

/* Room for element n of an array that grows only by appending: the
 * capacity doubles at each power of two, so that a selector of thousands of
 * terms costs O(n) copies, not O(n^2).  The array only ever shrinks below
 * what it had, so the capacity this implies is never more than it has. */
static void *grow_for(void *array, size_t n, size_t size)
{
	if (n >= 4 && (n & (n - 1)))
		return array;
	size_t cap = n < 4 ? 4 : 2 * n;
	return cap > SIZE_MAX / size ? NULL : realloc(array, cap * size);
}

static int add_value(struct requirement *r, const char *s, size_t n)
{
	char **grown = grow_for(r->values, r->nvalues, sizeof(*grown));

	if (!grown)
		return -1;
	r->values = grown;
	r->values[r->nvalues] = strndup(s, n);
	if (!r->values[r->nvalues])
		return -1;
	r->nvalues++;
	return 0;
}

static int compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void sort_unique_values(struct requirement *r)
{
	size_t kept = 0;

	if (r->nvalues == 0)
		return;
	qsort(r->values, r->nvalues, sizeof(*r->values), compare_strings);
	for (size_t i = 1; i < r->nvalues; i++) {
		if (strcmp(r->values[i], r->values[kept]) == 0)
			free(r->values[i]);
		else
			r->values[++kept] = r->values[i];
	}
	r->nvalues = kept + 1;
}

static int compare_requirements(const void *pa, const void *pb)
{
	const struct requirement *a = pa, *b = pb;
	int c = strcmp(a->key, b->key);

	if (c != 0)
		return c;
	if (a->op != b->op)
		return a->op < b->op ? -1 : 1;
	if (a->bound != b->bound)
		return a->bound < b->bound ? -1 : 1;
	for (size_t i = 0; i < a->nvalues && i < b->nvalues; i++) {
		c = strcmp(a->values[i], b->values[i]);
		if (c != 0)
			return c;
	}
	if (a->nvalues != b->nvalues)
		return a->nvalues < b->nvalues ? -1 : 1;
	return 0;
}

/* Requirements sorted and without repeats: the order and repetition of
 * terms never change what a selector means, so they must not change its
 * canonical text. */
static void sort_unique_requirements(struct selector *s)
{
	size_t kept = 0;

	if (s->n == 0)
		return;
	qsort(s->reqs, s->n, sizeof(*s->reqs), compare_requirements);
	for (size_t i = 1; i < s->n; i++) {
		if (compare_requirements(&s->reqs[i], &s->reqs[kept]) == 0)
			requirement_free(&s->reqs[i]);
		else
			s->reqs[++kept] = s->reqs[i];
	}
	s->n = kept + 1;
}

/* Takes ownership of *r, also on failure. */
static int add_requirement(struct selector *s, struct requirement *r)
{
	struct requirement *grown = grow_for(s->reqs, s->n, sizeof(*grown));

	if (!grown) {
		requirement_free(r);
		return -1;
	}
	s->reqs = grown;
	s->reqs[s->n++] = *r;
	memset(r, 0, sizeof(*r));
	return 0;
}

/* ---- label key and value validation: k8s.io/apimachinery/pkg/util/validation ---- */

enum {
	QUALIFIED_NAME_MAX = 63,
	LABEL_VALUE_MAX = 63,
	DNS1123_SUBDOMAIN_MAX = 253,
};

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]: a label name part or a
 * non-empty label value. */
static bool is_qualified_part(const char *s, size_t n)
{
	if (n == 0 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
		return false;
	for (size_t i = 1; i + 1 < n; i++) {
		if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	}
	return true;
}

/* [a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)* */
static bool is_dns1123_subdomain(const char *s, size_t n)
{
	size_t label_start = 0;

	for (size_t i = 0; i <= n; i++) {
		if (i == n || s[i] == '.') {
			if (i == label_start || !is_lower_alnum(s[label_start]) ||
			    !is_lower_alnum(s[i - 1]))
				return false;
			label_start = i + 1;
		} else if (!is_lower_alnum(s[i]) && s[i] != '-') {
			return false;
		}
	}
	return true;
}

/* validation's messages, as kube-apiserver words them (RegexError writes
 * its examples with two spaces before "or"). */
#define QUALIFIED_NAME_MSG                                                                         \
	"must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "   \
	"an "                                                                                      \
	"alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "     \
	"validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
#define DNS1123_SUBDOMAIN_MSG                                                                      \
	"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "  \
	"or "                                                                                      \
	"'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "   \
	"used for validation is "                                                                  \
	"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
#define LABEL_VALUE_MSG                                                                            \
	"a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "   \
	"or "                                                                                      \
	"'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "         \
	"'my_value',  or '12345', regex used for validation is "                                   \
	"'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"

/* One more message of a list that validation joins with "; ". */
static void add_msg(struct strbuf *b, size_t start, const char *msg)
{
	if (b->len > start)
		sb_puts(b, "; ");
	sb_puts(b, msg);
}

/* validation.IsLabelKey: what is wrong with a label key, appended to b;
 * false when nothing is. */
static bool label_key_errors(const char *key, size_t n, struct strbuf *b)
{
	const char *slash = memchr(key, '/', n);
	const char *name = slash ? slash + 1 : key;
	size_t name_len = n - (size_t)(name - key);
	size_t prefix_len = slash ? (size_t)(slash - key) : 0;
	size_t start = b->len;

	if (slash && memchr(name, '/', name_len)) {
		sb_puts(b,
			"a valid label key " QUALIFIED_NAME_MSG " with an optional DNS subdomain "
			"prefix and '/' (e.g. 'example.com/MyName')");
		return true;
	}
	if (slash && prefix_len == 0) {
		add_msg(b, start, "prefix part must be non-empty");
	} else if (slash) {
		if (prefix_len > DNS1123_SUBDOMAIN_MAX)
			add_msg(b, start, "prefix part must be no more than 253 characters");
		if (!is_dns1123_subdomain(key, prefix_len))
			add_msg(b, start, "prefix part " DNS1123_SUBDOMAIN_MSG);
	}
	if (name_len == 0)
		add_msg(b, start, "name part must be non-empty");
	else if (name_len > QUALIFIED_NAME_MAX)
		add_msg(b, start, "name part must be no more than 63 characters");
	if (!is_qualified_part(name, name_len))
		add_msg(b, start, "name part " QUALIFIED_NAME_MSG);
	return b->len > start;
}

/* validation.IsValidLabelValue, the same way. */
static bool label_value_errors(const char *value, struct strbuf *b)
{
	size_t n = strlen(value), start = b->len;

	if (n > LABEL_VALUE_MAX)
		add_msg(b, start, "must be no more than 63 characters");
	if (n > 0 && !is_qualified_part(value, n))
		add_msg(b, start, LABEL_VALUE_MSG);
	return b->len > start;
}

/* A field.Invalid error's text: `<path>: Invalid value: "<value>": <detail>`. */
static void put_invalid(struct strbuf *b, const char *path, const char *value, size_t n,
			const char *detail)
{
	sb_puts(b, path);
	sb_puts(b, ": Invalid value: ");
	sb_put_quoted(b, value, n);
	sb_puts(b, ": ");
	sb_puts(b, detail);
}

static int check_label_key(struct parser *p, const char *key, size_t n)
{
	struct strbuf why = {0};

	if (!label_key_errors(key, n, &why))
		return 0;
	struct strbuf msg = {0};
	put_invalid(&msg, "<nil>", key, n, why.s ? why.s : "");
	free(why.s);
	int rc = fail(p, "%s", msg.s ? msg.s : "invalid label key");
	free(msg.s);
	return rc;
}

/* strconv.ParseInt(s, 10, 64): optional sign, decimal digits, int64 range. */
static bool parse_int64(const char *s, size_t n, int64_t *out)
{
	bool negative = n > 0 && s[0] == '-';
	size_t i = n > 0 && (s[0] == '-' || s[0] == '+') ? 1 : 0;
	uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	uint64_t v = 0;

	if (i == n)
		return false;
	for (; i < n; i++) {
		unsigned digit = (unsigned char)s[i] - '0';

		if (digit > 9 || v > (limit - digit) / 10)
			return false;
		v = v * 10 + digit;
	}
	*out = negative ? (int64_t)(0 - v) : (int64_t)v;
	return true;
}

/* ---- label selector parser: labels.Parser ---- */

static const char *op_text(enum req_op op)
{
	static const char *const text[] = {
	    [OP_EXISTS] = "", [OP_NOT_EXISTS] = "",   [OP_EQ] = "=", [OP_NE] = "!=",
	    [OP_IN] = " in ", [OP_NOTIN] = " notin ", [OP_GT] = ">", [OP_LT] = "<",
	};
	return text[op];
}

static int parse_operator(struct parser *p, enum req_op *op)
{
	struct token t = next_token(p, CTX_KEY_AND_OPERATOR);

	switch (t.type) {
	case TOK_EQ:
	case TOK_DEQ:
		*op = OP_EQ;
		return 0;
	case TOK_NEQ:
		*op = OP_NE;
		return 0;
	case TOK_IN:
		*op = OP_IN;
		return 0;
	case TOK_NOTIN:
		*op = OP_NOTIN;
		return 0;
	case TOK_GT:
		*op = OP_GT;
		return 0;
	case TOK_LT:
		*op = OP_LT;
		return 0;
	default:
		return fail(p, "found %t, expected: in, notin, =, ==, !=, gt, lt", &t);
	}
}

static int oom(struct parser *p)
{
	return fail(p, "out of memory");
}

/* `(a,b)`; empty members are the value "", and `()` is the set {""}. */
static int parse_value_set(struct parser *p, struct requirement *r)
{
	struct token t = next_token(p, CTX_VALUES);

	if (t.type != TOK_LPAREN)
		return fail(p, "found %t expected: '('", &t);
	t = peek_token(p, CTX_VALUES);
	if (t.type == TOK_RPAREN) {
		next_token(p, CTX_VALUES);
		return add_value(r, "", 0) < 0 ? oom(p) : 0;
	}
	if (t.type != TOK_IDENT && t.type != TOK_COMMA)
		return fail(p, "found %t, expected: ',', ')' or identifier", &t);
	for (;;) {
		t = next_token(p, CTX_VALUES);
		if (t.type == TOK_IDENT) {
			if (add_value(r, t.lit, t.len) < 0)
				return oom(p);
			t = peek_token(p, CTX_VALUES);
			if (t.type == TOK_RPAREN)
				break;
			if (t.type != TOK_COMMA)
				return fail(p, "found %t, expected: ',' or ')'", &t);
		} else if (t.type == TOK_COMMA) {
			bool empty_member = r->nvalues == 0;

			t = peek_token(p, CTX_VALUES);
			if (t.type == TOK_RPAREN || t.type == TOK_COMMA)
				empty_member = true;
			if (empty_member && add_value(r, "", 0) < 0)
				return oom(p);
			if (t.type == TOK_RPAREN)
				break;
			if (t.type == TOK_COMMA)
				next_token(p, CTX_VALUES);
		} else {
			return fail(p, "found %t, expected: ',', or identifier", &t);
		}
	}
	next_token(p, CTX_VALUES); /* the ')' */
	return 0;
}

/* The one value after =, ==, !=, >, <; nothing before ',' or the end is "". */
static int parse_exact_value(struct parser *p, struct requirement *r)
{
	struct token t = peek_token(p, CTX_VALUES);

	if (t.type == TOK_EOS || t.type == TOK_COMMA)
		return add_value(r, "", 0) < 0 ? oom(p) : 0;
	t = next_token(p, CTX_VALUES);
	if (t.type != TOK_IDENT)
		return fail(p, "found %t, expected: identifier", &t);
	return add_value(r, t.lit, t.len) < 0 ? oom(p) : 0;
}

/* As labels.NewRequirement: > and < take one integer (kept as the bound),
 * and every value (sorted, as it numbers them) must be a valid label value.
 * All that is wrong is told, as an aggregate: one message, or "[a, b]". */
static int check_label_values(struct parser *p, struct requirement *r)
{
	struct strbuf all = {0}, why = {0};
	size_t count = 0;
	char path[64];

	if ((r->op == OP_GT || r->op == OP_LT) &&
	    !parse_int64(r->values[0], strlen(r->values[0]), &r->bound)) {
		put_invalid(&all, "values[0]", r->values[0], strlen(r->values[0]),
			    "for 'Gt', 'Lt' operators, the value must be an integer");
		count++;
	}
	for (size_t i = 0; i < r->nvalues; i++) {
		why.len = 0;
		if (!label_value_errors(r->values[i], &why))
			continue;
		if (count++)
			sb_puts(&all, ", ");
		snprintf(path, sizeof(path), "values[%zu][", i);
		sb_puts(&all, path);
		sb_puts(&all, r->key);
		put_invalid(&all, "]", r->values[i], strlen(r->values[i]), why.s ? why.s : "");
	}
	free(why.s);
	int rc = 0;
	if (count)
		rc = fail(p, count > 1 ? "[%s]" : "%s", all.s ? all.s : "invalid value");
	free(all.s);
	return rc;
}

/* A one-value set matches exactly as = or != does, so it is kept as that:
 * `a in (x)` and `a=x` then print alike.  The bound replaces the text of
 * a > or < value, so `a>05` and `a>5` print alike too. */
static void normalize_label_requirement(struct requirement *r)
{
	if (r->op == OP_IN && r->nvalues == 1)
		r->op = OP_EQ;
	else if (r->op == OP_NOTIN && r->nvalues == 1)
		r->op = OP_NE;
	if (r->op == OP_GT || r->op == OP_LT) {
		free(r->values[0]);
		free(r->values);
		r->values = NULL;
		r->nvalues = 0;
	}
}

static int set_label_path(struct requirement *r)
{
	r->path = malloc(3 * sizeof(*r->path));
	if (!r->path)
		return -1;
	r->path[0] = (struct path_part){"metadata", 8};
	r->path[1] = (struct path_part){"labels", 6};
	r->path[2] = (struct path_part){r->key, strlen(r->key)};
	r->path_len = 3;
	return 0;
}

/* After the key: the operator and its values, or nothing for exists. */
static int parse_label_operation(struct parser *p, struct requirement *r)
{
	struct token t = peek_token(p, CTX_VALUES);

	if (r->op == OP_NOT_EXISTS)
		return 0;
	if (t.type == TOK_EOS || t.type == TOK_COMMA) {
		r->op = OP_EXISTS;
		return 0;
	}
	if (parse_operator(p, &r->op) < 0)
		return -1;
	if (r->op == OP_IN || r->op == OP_NOTIN) {
		if (parse_value_set(p, r) < 0)
			return -1;
	} else if (parse_exact_value(p, r) < 0) {
		return -1;
	}
	sort_unique_values(r);
	if (check_label_values(p, r) < 0)
		return -1;
	normalize_label_requirement(r);
	return 0;
}

static int parse_label_requirement(struct parser *p, struct selector *s)
{
	struct requirement r = {0};
	struct token t = next_token(p, CTX_VALUES);

	if (t.type == TOK_BANG) {
		r.op = OP_NOT_EXISTS;
		t = next_token(p, CTX_VALUES);
	}
	p->in_requirement = true;
	if (t.type != TOK_IDENT)
		return fail(p, "found %t, expected: identifier", &t);
	if (check_label_key(p, t.lit, t.len) < 0)
		return -1;
	r.key = strndup(t.lit, t.len);
	if (!r.key)
		return oom(p);
	if (parse_label_operation(p, &r) < 0) {
		requirement_free(&r);
		return -1;
	}
	p->in_requirement = false;
	if (set_label_path(&r) < 0) {
		requirement_free(&r);
		return oom(p);
	}
	return add_requirement(s, &r) < 0 ? oom(p) : 0;
}

static int parse_labels(struct parser *p, struct selector *s)
{
	for (;;) {
		struct token t = peek_token(p, CTX_VALUES);

		if (t.type == TOK_EOS)
			return 0;
		if (t.type != TOK_IDENT && t.type != TOK_BANG)
			return fail(p, "found %t, expected: !, identifier, or 'end of string'", &t);
		if (parse_label_requirement(p, s) < 0)
			return -1;
		t = next_token(p, CTX_VALUES);
		if (t.type == TOK_EOS)
			return 0;
		if (t.type != TOK_COMMA)
			return fail(p, "found %t, expected: ',' or 'end of string'", &t);
		t = peek_token(p, CTX_VALUES);
		if (t.type != TOK_IDENT && t.type != TOK_BANG)
			return fail(p, "found %t, expected: identifier after ','", &t);
	}
}

/* ---- field selector parser: fields.ParseSelector ---- */

/* The first operator in the term splits it; at one position != and == are
 * preferred to =, so `a==b` has the value "b", not "=b". */
static bool split_field_term(const char *term, size_t n, size_t *op_at, size_t *op_len,
			     enum req_op *op)
{
	for (size_t i = 0; i < n; i++) {
		if (term[i] == '!' && i + 1 < n && term[i + 1] == '=') {
			*op = OP_NE;
			*op_len = 2;
		} else if (term[i] == '=') {
			*op = OP_EQ;
			*op_len = i + 1 < n && term[i + 1] == '=' ? 2 : 1;
		} else {
			continue;
		}
		*op_at = i;
		return true;
	}
	return false;
}

/* fields.UnescapeValue: only \\ \, \= are escapes; a bare , or = is an
 * error (which the API server reports by the character's code). */
static int unescape_field_value(struct parser *p, const char *s, size_t n, struct requirement *r)
{
	char *out = malloc(n + 1);
	size_t len = 0;

	if (!out)
		return oom(p);
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '\\' && (i + 1 == n || !strchr("\\,=", s[i + 1]))) {
			char seq[3] = {'\\', i + 1 < n ? s[i + 1] : '\0', '\0'};

			free(out);
			return fail(p, "invalid field selector: invalid escape sequence: %e", seq);
		}
		if (c == ',' || c == '=') {
			free(out);
			return fail(p, "invalid field selector: unescaped character in value: %s",
				    c == '=' ? "61" : "44");
		}
		if (c == '\\')
			c = s[++i];
		out[len++] = c;
	}
	out[len] = '\0';
	r->values = malloc(sizeof(*r->values));
	if (!r->values) {
		free(out);
		return oom(p);
	}
	r->values[0] = out;
	r->nvalues = 1;
	return 0;
}

static int set_field_path(struct requirement *r)
{
	size_t parts = 1, start = 0, k = 0;
	size_t n = strlen(r->key);

	for (size_t i = 0; i < n; i++)
		parts += r->key[i] == '.';
	r->path = malloc(parts * sizeof(*r->path));
	if (!r->path)
		return -1;
	for (size_t i = 0; i <= n; i++) {
		if (i == n || r->key[i] == '.') {
			r->path[k++] = (struct path_part){r->key + start, i - start};
			start = i + 1;
		}
	}
	r->path_len = parts;
	return 0;
}

static int parse_field_term(struct parser *p, struct selector *s, const char *term, size_t n)
{
	struct requirement r = {0};
	size_t op_at, op_len;

	if (!split_field_term(term, n, &op_at, &op_len, &r.op)) {
		char *part = strndup(term, n);
		int rc =
		    part ? fail(p, "invalid selector: '%e'; can't understand '%e'", p->text, part)
			 : oom(p);
		free(part);
		return rc;
	}
	/* An empty path parses; the field-label check refuses it, as the API
	 * server's conversion does. */
	r.key = strndup(term, op_at);
	if (!r.key)
		return oom(p);
	if (unescape_field_value(p, term + op_at + op_len, n - op_at - op_len, &r) < 0) {
		requirement_free(&r);
		return -1;
	}
	if (set_field_path(&r) < 0) {
		requirement_free(&r);
		return oom(p);
	}
	return add_requirement(s, &r) < 0 ? oom(p) : 0;
}

struct span {
	const char *s;
	size_t n;
};

static int compare_spans(const void *pa, const void *pb)
{
	const struct span *a = pa, *b = pb;
	int c = memcmp(a->s, b->s, a->n < b->n ? a->n : b->n);

	return c ? c : (a->n > b->n) - (a->n < b->n);
}

/* Terms split at commas that no backslash escapes; empty terms are skipped.
 * They are parsed in sorted order, as fields.ParseSelector does, so that a
 * selector with two bad terms is refused for the same one. */
static int parse_fields(struct parser *p, struct selector *s)
{
	const char *text = p->text;
	struct span *terms = NULL;
	size_t n = 0, start = 0;
	bool escaped = false;
	int rc = 0;

	for (size_t i = 0; rc == 0; i++) {
		if (text[i] != '\0' && (escaped || text[i] == '\\')) {
			escaped = !escaped;
			continue;
		}
		if (text[i] != '\0' && text[i] != ',')
			continue;
		if (i > start) {
			struct span *grown = grow_for(terms, n, sizeof(*grown));
			if (!grown)
				rc = oom(p);
			else
				terms = grown, terms[n++] = (struct span){text + start, i - start};
		}
		if (text[i] == '\0')
			break;
		start = i + 1;
	}
	if (rc == 0 && n > 1)
		qsort(terms, n, sizeof(*terms), compare_spans);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = parse_field_term(p, s, terms[i].s, terms[i].n);
	free(terms);
	return rc;
}

/* ---- public API ---- */

void selector_free(struct selector *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		requirement_free(&s->reqs[i]);
	free(s->reqs);
	free(s);
}

int selector_parse(enum selector_kind kind, const char *text, struct selector **out, char **err)
{
	struct parser p = {.kind = kind, .text = text ? text : "", .err = err};
	struct selector *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (err)
		*err = NULL;
	if (!s)
		return oom(&p);
	s->kind = kind;
	rc = kind == SELECTOR_LABEL ? parse_labels(&p, s) : parse_fields(&p, s);
	if (rc < 0) {
		selector_free(s);
		return -1;
	}
	sort_unique_requirements(s);
	*out = s;
	return 0;
}

bool selector_is_empty(const struct selector *s)
{
	return !s || s->n == 0;
}

size_t selector_term_count(const struct selector *s)
{
	return s ? s->n : 0;
}

const char *selector_term_key(const struct selector *s, size_t i)
{
	return s && i < s->n ? s->reqs[i].key : NULL;
}

static void put_field_value(struct strbuf *b, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == ',' || *v == '=')
			sb_putn(b, "\\", 1);
		sb_putn(b, v, 1);
	}
}

static void put_requirement(struct strbuf *b, enum selector_kind kind, const struct requirement *r)
{
	char bound[32];

	if (r->op == OP_NOT_EXISTS)
		sb_puts(b, "!");
	sb_puts(b, r->key);
	sb_puts(b, op_text(r->op));
	if (r->op == OP_GT || r->op == OP_LT) {
		snprintf(bound, sizeof(bound), "%" PRId64, r->bound);
		sb_puts(b, bound);
	} else if (kind == SELECTOR_FIELD) {
		put_field_value(b, r->values[0]);
	} else if (r->op == OP_IN || r->op == OP_NOTIN) {
		sb_puts(b, "(");
		for (size_t i = 0; i < r->nvalues; i++) {
			if (i > 0)
				sb_puts(b, ",");
			sb_puts(b, r->values[i]);
		}
		sb_puts(b, ")");
	} else if (r->nvalues == 1) {
		sb_puts(b, r->values[0]);
	}
}

char *selector_canonical(const struct selector *s)
{
	struct strbuf b = {0};

	for (size_t i = 0; s && i < s->n; i++) {
		if (i > 0)
			sb_puts(&b, ",");
		put_requirement(&b, s->kind, &s->reqs[i]);
	}
	return sb_take(&b);
}

int selector_canonicalize(enum selector_kind kind, const char *text, char **out, char **err)
{
	struct selector *s;

	*out = NULL;
	if (selector_parse(kind, text, &s, err) < 0)
		return -1;
	*out = selector_canonical(s);
	selector_free(s);
	if (!*out) {
		if (err)
			*err = strdup("out of memory");
		return -1;
	}
	return 0;
}

/* ---- evaluation ---- */

static bool has_value(const struct requirement *r, const char *v, size_t n)
{
	for (size_t i = 0; i < r->nvalues; i++) {
		if (strlen(r->values[i]) == n && memcmp(r->values[i], v, n) == 0)
			return true;
	}
	return false;
}

/* labels.Requirement.Matches; a field is always "present" (missing is ""). */
static bool requirement_matches(const struct requirement *r, bool present, const char *v, size_t n)
{
	int64_t number;

	switch (r->op) {
	case OP_EXISTS:
		return present;
	case OP_NOT_EXISTS:
		return !present;
	case OP_EQ:
	case OP_IN:
		return present && has_value(r, v, n);
	case OP_NE:
	case OP_NOTIN:
		return !present || !has_value(r, v, n);
	case OP_GT:
		return present && parse_int64(v, n, &number) && number > r->bound;
	case OP_LT:
		return present && parse_int64(v, n, &number) && number < r->bound;
	}
	return false;
}

/* One requirement's view of the parse.  `matched` counts the leading path
 * parts equal to the keys of the objects currently open, depth by depth;
 * a key at depth d can only extend a match of d-1 parts, so values inside
 * arrays (which have no keys) never reach a dotted path. */
struct watch {
	const struct requirement *req;
	bool is_label;
	size_t matched;
	bool seen;
	bool result;
};

struct match_state {
	struct watch *watches;
	size_t nwatches;
	size_t depth; /* open containers; the top-level object is depth 1 */
	bool not_an_object;
	bool saw_top_object;
};

/* A value at the end of a watched path: evaluate now, as the bytes are only
 * valid during the callback.  A repeated key overrides, as in encoding/json. */
static int on_value(struct match_state *st, const char *v, size_t n)
{
	if (st->depth == 0) {
		st->not_an_object = true;
		return 0;
	}
	for (size_t i = 0; i < st->nwatches; i++) {
		struct watch *w = &st->watches[i];

		if (w->matched == st->depth && w->req->path_len == st->depth) {
			w->seen = true;
			w->result = requirement_matches(w->req, true, v, n);
		}
	}
	return 1;
}

static int on_null(void *ctx)
{
	return on_value(ctx, "", 0);
}

static int on_boolean(void *ctx, int value)
{
	return value ? on_value(ctx, "true", 4) : on_value(ctx, "false", 5);
}

static int on_number(void *ctx, const char *text, size_t len)
{
	return on_value(ctx, text, len);
}

static int on_string(void *ctx, const unsigned char *s, size_t len)
{
	return on_value(ctx, (const char *)s, len);
}

static int on_map_key(void *ctx, const unsigned char *key, size_t len)
{
	struct match_state *st = ctx;
	size_t d = st->depth;

	for (size_t i = 0; i < st->nwatches; i++) {
		struct watch *w = &st->watches[i];

		if (w->matched >= d)
			w->matched = d - 1;
		if (w->matched == d - 1 && d <= w->req->path_len &&
		    w->req->path[d - 1].len == len &&
		    memcmp(w->req->path[d - 1].name, key, len) == 0)
			w->matched = d;
	}
	return 1;
}

/* An object or array at the end of a watched path counts as "". */
static int on_start_container(struct match_state *st, bool is_array)
{
	if (st->depth == 0 && is_array) {
		st->not_an_object = true;
		return 0;
	}
	if (st->depth > 0)
		on_value(st, "", 0);
	st->depth++;
	return 1;
}

static int on_start_map(void *ctx)
{
	return on_start_container(ctx, false);
}

static int on_start_array(void *ctx)
{
	return on_start_container(ctx, true);
}

static int on_end_container(void *ctx)
{
	struct match_state *st = ctx;

	st->depth--;
	for (size_t i = 0; i < st->nwatches; i++) {
		if (st->watches[i].matched > st->depth)
			st->watches[i].matched = st->depth;
	}
	if (st->depth == 0)
		st->saw_top_object = true;
	return 1;
}

static const yajl_callbacks match_callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_boolean,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_map_key,
    .yajl_end_map = on_end_container,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end_container,
};

static size_t add_watches(struct watch *w, const struct selector *s)
{
	for (size_t i = 0; s && i < s->n; i++)
		w[i] = (struct watch){.req = &s->reqs[i], .is_label = s->kind == SELECTOR_LABEL};
	return s ? s->n : 0;
}

static bool parse_object(struct match_state *st, const char *json, size_t len)
{
	yajl_handle h = yajl_alloc(&match_callbacks, NULL, st);
	yajl_status status;

	if (!h)
		return false;
	status = yajl_parse(h, (const unsigned char *)json, len);
	if (status == yajl_status_ok)
		status = yajl_complete_parse(h);
	yajl_free(h);
	return status == yajl_status_ok && st->saw_top_object && !st->not_an_object;
}

/* An unseen label is absent; an unseen field is "". */
static bool all_watches_match(const struct match_state *st)
{
	for (size_t i = 0; i < st->nwatches; i++) {
		const struct watch *w = &st->watches[i];
		bool ok = w->seen ? w->result : requirement_matches(w->req, !w->is_label, "", 0);

		if (!ok)
			return false;
	}
	return true;
}

int selector_match_json(const struct selector *labels, const struct selector *fields,
			const char *json, size_t len)
{
	enum { ON_STACK = 16 };
	struct watch stack_watches[ON_STACK];
	struct match_state st = {0};
	size_t n = (labels ? labels->n : 0) + (fields ? fields->n : 0);
	int rc;

	if (!json)
		return -1;
	st.watches = n <= ON_STACK ? stack_watches : malloc(n * sizeof(*st.watches));
	if (!st.watches)
		return -1;
	st.nwatches = add_watches(st.watches, labels);
	st.nwatches += add_watches(st.watches + st.nwatches, fields);
	if (!parse_object(&st, json, len))
		rc = -1;
	else
		rc = all_watches_match(&st) ? 1 : 0;
	if (st.watches != stack_watches)
		free(st.watches);
	return rc;
}

/* ---- a quick look at the raw bytes ---- */

/* Values that, when present, appear verbatim in the JSON: the characters of
 * label values plus those of names and IPs (no escapes possible). */
static bool verbatim(const char *v)
{
	if (!*v)
		return false;
	for (; *v; v++) {
		unsigned char c = (unsigned char)*v;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == ':';
		if (!ok)
			return false;
	}
	return true;
}

/* memmem for the short haystacks and needles of the quick look: glibc's
 * memmem prepares a shift table on each call, which costs more than the
 * search when it runs over ten thousand small documents of an index. */
static const char *find_bytes(const char *hay, size_t len, const char *needle, size_t n)
{
	if (!n)
		return hay;
	const char *end = hay + len;
	for (const char *p = hay; (size_t)(end - p) >= n;) {
		p = memchr(p, needle[0], (size_t)(end - p) - n + 1);
		if (!p)
			return NULL;
		if (!memcmp(p + 1, needle + 1, n - 1))
			return p;
		p++;
	}
	return NULL;
}

static bool requirement_may_match(const struct requirement *r, const char *json, size_t len)
{
	if (r->op != OP_EQ && r->op != OP_IN)
		return true;
	for (size_t i = 0; i < r->nvalues; i++) {
		if (!verbatim(r->values[i]))
			return true; /* cannot tell from the bytes */
		if (find_bytes(json, len, r->values[i], strlen(r->values[i])))
			return true;
	}
	return false;
}

/* Is a character that verbatim() allows written as a \u escape somewhere in
 * json ("\u0077eb" is "web")?  Then the raw bytes cannot rule a value out.
 * The API server escapes only <, > and & that way, so in practice the quick
 * look keeps working. */
static bool escapes_verbatim(const char *json, size_t len)
{
	static const char hex[] = "0123456789abcdef0123456789ABCDEF";
	const char *end = json + len, *p = json;

	while ((p = find_bytes(p, (size_t)(end - p), "\\u00", 4)) && end - p >= 6) {
		const char *hi = memchr(hex, p[4], sizeof(hex) - 1);
		const char *lo = memchr(hex, p[5], sizeof(hex) - 1);
		char c[2] = {0, 0};

		if (hi && lo) {
			c[0] = (char)(((hi - hex) % 16) << 4 | (lo - hex) % 16);
			if (verbatim(c))
				return true;
		}
		p += 4;
	}
	return false;
}

bool selector_may_match(const struct selector *s, const char *json, size_t len)
{
	if (!s || !json)
		return true;
	for (size_t i = 0; i < s->n; i++)
		if (!requirement_may_match(&s->reqs[i], json, len))
			return escapes_verbatim(json, len);
	return true;
}

/* ---- a 64-bit summary of the values in a document ---- */

static uint64_t bloom_bits(const char *v, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)v[i]) * 1099511628211ull;
	return (1ull << (h & 63)) | (1ull << ((h >> 6) & 63));
}

uint64_t selector_bloom(const char *json, size_t len)
{
	if (!json || escapes_verbatim(json, len))
		return ~0ull; /* a value may hide behind an escape: "anything" */
	uint64_t b = 0;
	const char *p = json, *end = json + len;
	while (p < end) {
		if (*p == '"') {
			const char *from = ++p;
			while (p < end && *p != '"')
				p += *p == '\\' ? 2 : 1;
			if (p > end)
				p = end;
			b |= bloom_bits(from, (size_t)(p - from));
			p++;
		} else if ((*p >= '0' && *p <= '9') || *p == '-' || (*p >= 'a' && *p <= 'z')) {
			const char *from = p;
			while (p < end && !strchr(",:}] \t\n\r", *p))
				p++;
			b |= bloom_bits(from, (size_t)(p - from));
		} else {
			p++;
		}
	}
	return b;
}

bool selector_may_match_bloom(const struct selector *s, uint64_t bloom)
{
	if (!s || bloom == ~0ull)
		return true;
	for (size_t i = 0; i < s->n; i++) {
		const struct requirement *r = &s->reqs[i];
		if (r->op != OP_EQ && r->op != OP_IN)
			continue;
		bool any = false;
		for (size_t v = 0; v < r->nvalues && !any; v++) {
			uint64_t bits = bloom_bits(r->values[v], strlen(r->values[v]));
			any = !verbatim(r->values[v]) || (bloom & bits) == bits;
		}
		if (!any)
			return false;
	}
	return true;
}
