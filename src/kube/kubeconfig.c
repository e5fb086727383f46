/*
 * kubeconfig.c - read the identity out of a kubelet-style kubeconfig: the
 * current context's cluster (server, CA, TLS options) and user (client
 * certificate and key, or a token), validated as client-go's clientcmd does
 * before kubelet uses it.
 *
 * The YAML is loaded with libyaml's document API, after a first event pass
 * that bounds what a hostile file can make libyaml do: nesting depth (the
 * scanner is quadratic in it), and the number of anchors and aliases (the
 * loader looks anchors up linearly).  Aliases stay shared nodes and only a
 * fixed path of keys is ever followed, so alias bombs and cycles cost
 * nothing.
 */
#include "kube/kubeconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "util/base64.h"
#include "util/fsutil.h"

#define KUBECONFIG_MAX_SIZE (4u << 20)
#define MAX_DEPTH	    64
#define MAX_ANCHORS	    1000

struct kc {
	yaml_document_t doc;
	bool have_doc;
	const char *path; /* for messages; NULL for text */
	const char *base_dir;
	char **err;
	bool names_only; /* file references are taken as written, not opened */
};

/* ---- errors ---- */

#define MAX_MESSAGE 1024

/* Keep a message one line of bounded length, whatever the file held. */
static void tidy_message(struct buf *b)
{
	if (b->len > MAX_MESSAGE) {
		b->len = MAX_MESSAGE - 3;
		buf_append_str(b, "..."); /* cannot fail: the room is there */
	}
	for (size_t i = 0; i < b->len; i++)
		if ((unsigned char)b->data[i] < 0x20 || b->data[i] == 0x7f)
			b->data[i] = '?';
}

/* "kubeconfig <path>: <where>.<key>: <message>"; where and key may be ""
 * or NULL. */
static int kc_fail(struct kc *k, const char *where, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int kc_fail(struct kc *k, const char *where, const char *key, const char *fmt, ...)
{
	if (!k->err)
		return -1;
	free(*k->err);
	struct buf b = BUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	int rc = buf_printf(&b, "kubeconfig%s%s: ", k->path ? " " : "", k->path ? k->path : "");
	bool w = where && *where, kk = key && *key;
	if (rc == 0 && (w || kk))
		rc = buf_printf(&b, "%s%s%s: ", w ? where : "", w && kk ? "." : "", kk ? key : "");
	if (rc == 0)
		rc = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (rc < 0) {
		buf_free(&b);
		*k->err = NULL;
		return -1;
	}
	tidy_message(&b);
	*k->err = buf_steal(&b);
	return -1;
}

static int kc_oom(struct kc *k)
{
	return kc_fail(k, NULL, NULL, "out of memory");
}

static int yaml_fail(struct kc *k, const yaml_parser_t *p)
{
	const char *problem = p->problem ? p->problem : "malformed YAML";
	if (p->error == YAML_READER_ERROR)
		return kc_fail(k, NULL, NULL, "invalid YAML at byte %zu: %s", p->problem_offset,
			       problem);
	return kc_fail(k, NULL, NULL, "invalid YAML at line %zu, column %zu: %s",
		       p->problem_mark.line + 1, p->problem_mark.column + 1, problem);
}

/* ---- loading ---- */

static void parser_init(yaml_parser_t *p, const char *text, size_t len)
{
	yaml_parser_initialize(p);
	yaml_parser_set_input_string(p, (const unsigned char *)text, len);
	yaml_parser_set_encoding(p, YAML_UTF8_ENCODING);
}

/* What one event does to the limits; 1 at the end of the first document. */
static int check_event(struct kc *k, const yaml_event_t *e, int *depth, int *anchors)
{
	const yaml_char_t *anchor = NULL;
	switch (e->type) {
	case YAML_DOCUMENT_END_EVENT:
	case YAML_STREAM_END_EVENT:
		return 1;
	case YAML_SEQUENCE_START_EVENT:
		anchor = e->data.sequence_start.anchor;
		++*depth;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = e->data.mapping_start.anchor;
		++*depth;
		break;
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		--*depth;
		break;
	case YAML_SCALAR_EVENT:
		anchor = e->data.scalar.anchor;
		break;
	case YAML_ALIAS_EVENT:
		anchor = e->data.alias.anchor;
		break;
	default:
		break;
	}
	if (*depth > MAX_DEPTH)
		return kc_fail(k, NULL, NULL, "YAML nested deeper than %d levels", MAX_DEPTH);
	if (anchor && ++*anchors > MAX_ANCHORS)
		return kc_fail(k, NULL, NULL, "more than %d YAML anchors and aliases", MAX_ANCHORS);
	return 0;
}

/* The event pass over the first document. */
static int check_limits(struct kc *k, const char *text, size_t len)
{
	yaml_parser_t p;
	int depth = 0, anchors = 0, rc = 0;
	parser_init(&p, text, len);
	while (rc == 0) {
		yaml_event_t e;
		if (!yaml_parser_parse(&p, &e)) {
			rc = yaml_fail(k, &p);
			break;
		}
		rc = check_event(k, &e, &depth, &anchors);
		yaml_event_delete(&e);
	}
	yaml_parser_delete(&p);
	return rc < 0 ? -1 : 0;
}

static int load_document(struct kc *k, const char *text, size_t len)
{
	if (len > KUBECONFIG_MAX_SIZE)
		return kc_fail(k, NULL, NULL, "larger than %u bytes", KUBECONFIG_MAX_SIZE);
	if (check_limits(k, text, len) < 0)
		return -1;
	yaml_parser_t p;
	parser_init(&p, text, len);
	int ok = yaml_parser_load(&p, &k->doc);
	if (!ok)
		yaml_fail(k, &p);
	yaml_parser_delete(&p);
	if (!ok)
		return -1;
	k->have_doc = true;
	return 0;
}

/* ---- reading nodes ---- */

static yaml_node_t *node_at(struct kc *k, int index)
{
	return yaml_document_get_node(&k->doc, index);
}

static bool is_null(const yaml_node_t *n)
{
	static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
	if (!n || n->type != YAML_SCALAR_NODE)
		return n == NULL;
	if (n->tag && !strcmp((const char *)n->tag, YAML_NULL_TAG))
		return true;
	if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
		if (!strcmp((const char *)n->data.scalar.value, nulls[i]))
			return true;
	return false;
}

static bool scalar_is(const yaml_node_t *n, const char *s)
{
	return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == strlen(s) &&
	       !memcmp(n->data.scalar.value, s, n->data.scalar.length);
}

/* The value of key in a mapping: *val NULL when absent or null; a key given
 * twice is an error. */
static int map_lookup(struct kc *k, yaml_node_t *map, const char *where, const char *key,
		      yaml_node_t **val)
{
	*val = NULL;
	if (!map)
		return 0;
	bool found = false;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		if (!scalar_is(node_at(k, p->key), key))
			continue;
		if (found)
			return kc_fail(k, where, key, "given more than once");
		found = true;
		*val = node_at(k, p->value);
	}
	if (is_null(*val))
		*val = NULL;
	return 0;
}

static int expect_type(struct kc *k, yaml_node_t *n, yaml_node_type_t type, const char *where,
		       const char *key)
{
	static const char *const names[] = {
	    [YAML_SCALAR_NODE] = "a string",
	    [YAML_SEQUENCE_NODE] = "a list",
	    [YAML_MAPPING_NODE] = "a mapping",
	};
	if (!n || n->type == type)
		return 0;
	return kc_fail(k, where, key, "expected %s", names[type]);
}

/* A mapping or list under key: NULL when absent. */
static int get_node(struct kc *k, yaml_node_t *map, const char *where, const char *key,
		    yaml_node_type_t type, yaml_node_t **out)
{
	if (map_lookup(k, map, where, key, out) < 0)
		return -1;
	return expect_type(k, *out, type, where, key);
}

/* A string under key: NULL when absent, null or empty (as in Go). */
static int get_string(struct kc *k, yaml_node_t *map, const char *where, const char *key,
		      char **out)
{
	yaml_node_t *n;
	*out = NULL;
	if (get_node(k, map, where, key, YAML_SCALAR_NODE, &n) < 0)
		return -1;
	if (!n || n->data.scalar.length == 0)
		return 0;
	const char *v = (const char *)n->data.scalar.value;
	if (strlen(v) != n->data.scalar.length)
		return kc_fail(k, where, key, "contains a NUL byte");
	*out = strdup(v);
	return *out ? 0 : kc_oom(k);
}

/* YAML 1.1 booleans, as sigs.k8s.io/yaml reads them. */
static int get_bool(struct kc *k, yaml_node_t *map, const char *where, const char *key, bool *out)
{
	static const char *const yes[] = {"y",	  "Y",	  "yes", "Yes", "YES", "true",
					  "True", "TRUE", "on",	 "On",	"ON"};
	static const char *const no[] = {"n",	  "N",	   "no",  "No",	 "NO", "false",
					 "False", "FALSE", "off", "Off", "OFF"};
	yaml_node_t *n;
	*out = false;
	if (get_node(k, map, where, key, YAML_SCALAR_NODE, &n) < 0)
		return -1;
	if (!n)
		return 0;
	for (size_t i = 0; n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && i < 11; i++) {
		if (scalar_is(n, yes[i]) || scalar_is(n, no[i])) {
			*out = scalar_is(n, yes[i]);
			return 0;
		}
	}
	return kc_fail(k, where, key, "expected true or false");
}

/* ---- named entries: contexts, clusters, users ---- */

static size_t list_len(yaml_node_t *list)
{
	return list ? (size_t)(list->data.sequence.items.top - list->data.sequence.items.start) : 0;
}

/* Item i of a list, which must be a mapping; *where becomes "list[i]". */
static int list_item(struct kc *k, yaml_node_t *list, const char *list_name, size_t i,
		     yaml_node_t **item, char **where)
{
	*item = node_at(k, list->data.sequence.items.start[i]);
	if (asprintf(where, "%s[%zu]", list_name, i) < 0) {
		*where = NULL;
		return kc_oom(k);
	}
	if (!*item || (*item)->type != YAML_MAPPING_NODE)
		return kc_fail(k, *where, NULL, "expected a mapping");
	return 0;
}

/* The entry of list_name whose name is name: its index, or -1 when there is
 * none (not an error here), or -2 on error. */
static long find_named(struct kc *k, yaml_node_t *list, const char *list_name, const char *name)
{
	long found = -1;
	for (size_t i = 0; i < list_len(list); i++) {
		yaml_node_t *item;
		char *where = NULL, *n = NULL;
		int rc = list_item(k, list, list_name, i, &item, &where);
		if (rc == 0)
			rc = get_string(k, item, where, "name", &n);
		if (rc == 0 && n && !strcmp(n, name) && found >= 0)
			rc = kc_fail(k, where, "name", "\"%s\" given more than once", name);
		if (rc == 0 && n && !strcmp(n, name))
			found = (long)i;
		free(n);
		free(where);
		if (rc < 0)
			return -2;
	}
	return found;
}

/* The inner mapping ("cluster", "user", "context") of entry i, and the
 * malloc'ed path naming it for messages. */
static int entry_body(struct kc *k, yaml_node_t *list, const char *list_name, size_t i,
		      const char *inner, yaml_node_t **body, char **where)
{
	yaml_node_t *item;
	char *w = NULL;
	int rc = list_item(k, list, list_name, i, &item, &w);
	if (rc == 0)
		rc = get_node(k, item, w, inner, YAML_MAPPING_NODE, body);
	if (rc == 0 && asprintf(where, "%s.%s", w, inner) < 0)
		rc = kc_oom(k);
	free(w);
	return rc;
}

/* ---- files and data ---- */

/* An absolute path for a file reference: rel as is when absolute, else
 * joined to base_dir (itself joined to the working directory if relative). */
static char *resolve_path(const char *base_dir, const char *rel)
{
	char *out = NULL, *cwd = NULL;
	if (rel[0] == '/')
		return strdup(rel);
	const char *base = base_dir && *base_dir ? base_dir : ".";
	if (base[0] != '/') {
		cwd = get_current_dir_name();
		if (!cwd)
			return NULL;
	}
	if (!strcmp(base, "."))
		base = NULL;
	if (asprintf(&out, "%s%s%s%s%s", cwd ? cwd : "", cwd && base ? "/" : "", base ? base : "",
		     "/", rel) < 0)
		out = NULL;
	free(cwd);
	return out;
}

/* Can the file be opened for reading (links followed, as kubectl does)? */
static int check_readable(struct kc *k, const char *where, const char *key, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return kc_fail(k, where, key, "cannot read %s: %s", path, strerror(errno));
	struct stat st;
	int rc = fstat(fd, &st);
	int e = errno;
	close(fd);
	if (rc < 0)
		return kc_fail(k, where, key, "cannot read %s: %s", path, strerror(e));
	if (S_ISDIR(st.st_mode))
		return kc_fail(k, where, key, "cannot read %s: %s", path, strerror(EISDIR));
	return 0;
}

static int get_file(struct kc *k, yaml_node_t *map, const char *where, const char *key, char **out)
{
	char *rel = NULL;
	*out = NULL;
	if (get_string(k, map, where, key, &rel) < 0)
		return -1;
	if (!rel)
		return 0;
	*out = resolve_path(k->base_dir, rel);
	free(rel);
	if (!*out)
		return kc_oom(k);
	return k->names_only ? 0 : check_readable(k, where, key, *out);
}

static int get_data(struct kc *k, yaml_node_t *map, const char *where, const char *key,
		    struct buf *out, bool *present)
{
	char *text = NULL;
	*present = false;
	if (get_string(k, map, where, key, &text) < 0)
		return -1;
	if (!text)
		return 0;
	*present = true;
	int rc = base64_decode(text, strlen(text), out);
	free(text);
	if (rc < 0)
		return kc_fail(k, where, key, "invalid base64");
	return 0;
}

/* A file reference and its *-data twin, which may not both be given. */
static int get_file_or_data(struct kc *k, yaml_node_t *map, const char *where, const char *key,
			    char **file, struct buf *data)
{
	bool have_data;
	char *dkey = NULL;
	if (asprintf(&dkey, "%s-data", key) < 0)
		return kc_oom(k);
	int rc = get_file(k, map, where, key, file);
	if (rc == 0)
		rc = get_data(k, map, where, dkey, data, &have_data);
	if (rc == 0 && *file && have_data)
		rc = kc_fail(k, where, NULL, "both %s and %s are given; use only one", key, dkey);
	free(dkey);
	return rc;
}

/* ---- the cluster and the user ---- */

static int read_cluster(struct kc *k, yaml_node_t *c, const char *where, struct kubeconfig *out)
{
	if (get_string(k, c, where, "server", &out->server) < 0)
		return -1;
	if (!out->server)
		return kc_fail(k, where, "server", "missing");
	if (get_string(k, c, where, "tls-server-name", &out->tls_server_name) < 0 ||
	    get_bool(k, c, where, "insecure-skip-tls-verify", &out->insecure_skip_tls_verify) < 0)
		return -1;
	return get_file_or_data(k, c, where, "certificate-authority", &out->ca_file, &out->ca_data);
}

static int read_user(struct kc *k, yaml_node_t *u, const char *where, struct kubeconfig *out)
{
	if (get_file_or_data(k, u, where, "client-certificate", &out->client_cert_file,
			     &out->client_cert_data) < 0 ||
	    get_file_or_data(k, u, where, "client-key", &out->client_key_file,
			     &out->client_key_data) < 0 ||
	    get_string(k, u, where, "token", &out->token) < 0 ||
	    get_file(k, u, where, "tokenFile", &out->token_file) < 0)
		return -1;
	bool cert = out->client_cert_file || out->client_cert_data.len;
	bool key = out->client_key_file || out->client_key_data.len;
	if (cert && !key)
		return kc_fail(k, where, NULL, "client-certificate given without client-key");
	if (key && !cert)
		return kc_fail(k, where, NULL, "client-key given without client-certificate");
	return 0;
}

/* ---- choosing the context ---- */

/* Which clusters[] and users[] entries to use (-1: no user). */
struct choice {
	long cluster, user;
};

/* The named entry of list, or an error naming the context field. */
static int pick_named(struct kc *k, yaml_node_t *list, const char *list_name, const char *name,
		      const char *ctx_where, const char *ctx_key, long *index)
{
	*index = find_named(k, list, list_name, name);
	if (*index == -2)
		return -1;
	if (*index < 0)
		return kc_fail(k, ctx_where, ctx_key, "no %s entry named \"%s\"", list_name, name);
	return 0;
}

static int use_context(struct kc *k, yaml_node_t *root, yaml_node_t *contexts, size_t i,
		       struct choice *ch)
{
	yaml_node_t *body, *clusters, *users;
	char *where = NULL, *cname = NULL, *uname = NULL;
	int rc = entry_body(k, contexts, "contexts", i, "context", &body, &where);
	if (rc == 0)
		rc = get_string(k, body, where, "cluster", &cname);
	if (rc == 0)
		rc = get_string(k, body, where, "user", &uname);
	if (rc == 0 && !cname)
		rc = kc_fail(k, where ? where : "contexts", "cluster", "missing");
	if (rc == 0)
		rc = get_node(k, root, NULL, "clusters", YAML_SEQUENCE_NODE, &clusters);
	if (rc == 0)
		rc = get_node(k, root, NULL, "users", YAML_SEQUENCE_NODE, &users);
	if (rc == 0)
		rc = pick_named(k, clusters, "clusters", cname, where, "cluster", &ch->cluster);
	ch->user = -1;
	if (rc == 0 && uname)
		rc = pick_named(k, users, "users", uname, where, "user", &ch->user);
	free(where);
	free(cname);
	free(uname);
	return rc;
}

/* No usable current-context: the only context, or the only cluster and
 * user of a file that has no contexts at all. */
static int fallback_context(struct kc *k, yaml_node_t *root, yaml_node_t *contexts,
			    struct choice *ch)
{
	yaml_node_t *clusters, *users;
	size_t n = list_len(contexts);
	if (n == 1)
		return use_context(k, root, contexts, 0, ch);
	if (n > 1)
		return kc_fail(k, NULL, "current-context",
			       "missing, and there are %zu contexts to choose from", n);
	if (get_node(k, root, NULL, "clusters", YAML_SEQUENCE_NODE, &clusters) < 0 ||
	    get_node(k, root, NULL, "users", YAML_SEQUENCE_NODE, &users) < 0)
		return -1;
	/* one cluster and no user: kube-public/cluster-info's kubeconfig */
	if (list_len(clusters) != 1 || list_len(users) > 1)
		return kc_fail(k, NULL, "contexts",
			       "missing (needed unless there is exactly one cluster and at most "
			       "one user)");
	ch->cluster = 0;
	ch->user = list_len(users) ? 0 : -1;
	return 0;
}

static int choose(struct kc *k, yaml_node_t *root, struct choice *ch)
{
	yaml_node_t *contexts;
	char *current = NULL;
	if (get_string(k, root, NULL, "current-context", &current) < 0 ||
	    get_node(k, root, NULL, "contexts", YAML_SEQUENCE_NODE, &contexts) < 0) {
		free(current);
		return -1;
	}
	if (!current)
		return fallback_context(k, root, contexts, ch);
	long i;
	int rc = pick_named(k, contexts, "contexts", current, NULL, "current-context", &i);
	if (rc == 0)
		rc = use_context(k, root, contexts, (size_t)i, ch);
	free(current);
	return rc;
}

/* ---- putting it together ---- */

typedef int (*entry_reader)(struct kc *k, yaml_node_t *body, const char *where,
			    struct kubeconfig *out);

static int read_entry(struct kc *k, yaml_node_t *root, const char *list_name, const char *inner,
		      long index, entry_reader read, struct kubeconfig *out)
{
	yaml_node_t *list, *body;
	char *where = NULL;
	if (get_node(k, root, NULL, list_name, YAML_SEQUENCE_NODE, &list) < 0)
		return -1;
	int rc = entry_body(k, list, list_name, (size_t)index, inner, &body, &where);
	if (rc == 0)
		rc = read(k, body, where, out);
	free(where);
	return rc;
}

static int read_config(struct kc *k, struct kubeconfig *out)
{
	yaml_node_t *root = yaml_document_get_root_node(&k->doc);
	struct choice ch = {-1, -1};
	if (!root || is_null(root))
		return kc_fail(k, NULL, NULL, "empty document");
	if (root->type != YAML_MAPPING_NODE)
		return kc_fail(k, NULL, NULL, "the top level is not a mapping");
	if (choose(k, root, &ch) < 0 ||
	    read_entry(k, root, "clusters", "cluster", ch.cluster, read_cluster, out) < 0)
		return -1;
	if (ch.user < 0)
		return 0;
	return read_entry(k, root, "users", "user", ch.user, read_user, out);
}

static int parse_with(struct kc *k, const char *yaml, size_t len, struct kubeconfig *out)
{
	memset(out, 0, sizeof *out);
	if (k->err)
		*k->err = NULL;
	int rc = load_document(k, yaml, len);
	if (rc == 0)
		rc = read_config(k, out);
	if (k->have_doc)
		yaml_document_delete(&k->doc);
	if (rc < 0)
		kubeconfig_free(out);
	return rc;
}

int kubeconfig_parse(const char *yaml, size_t len, const char *base_dir, struct kubeconfig *out,
		     char **err)
{
	struct kc k = {.base_dir = base_dir, .err = err};
	return parse_with(&k, yaml, len, out);
}

/* The directory of path, for resolving the file references in it. */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

/* The whole file (links followed: kubeconfigs are often links). */
static int read_kubeconfig(struct kc *k, const char *path, struct buf *text)
{
	char *real = realpath(path, NULL);
	if (!real)
		return kc_fail(k, NULL, NULL, "cannot read: %s", strerror(errno));
	int rc = fs_read_file_at(AT_FDCWD, real, text, KUBECONFIG_MAX_SIZE);
	free(real);
	if (rc == -EFBIG)
		return kc_fail(k, NULL, NULL, "larger than %u bytes", KUBECONFIG_MAX_SIZE);
	if (rc < 0)
		return kc_fail(k, NULL, NULL, "cannot read: %s", strerror(-rc));
	return 0;
}

static int load(const char *path, bool names_only, struct kubeconfig *out, char **err)
{
	struct buf text = BUF_INIT;
	struct kc k = {.path = path, .err = err, .names_only = names_only};
	memset(out, 0, sizeof *out);
	if (err)
		*err = NULL;
	char *dir = dir_of(path);
	if (!dir)
		return kc_oom(&k);
	k.base_dir = dir;
	int rc = read_kubeconfig(&k, path, &text);
	if (rc == 0)
		rc = parse_with(&k, buf_cstr(&text), text.len, out);
	buf_free(&text);
	free(dir);
	return rc;
}

int kubeconfig_load(const char *path, struct kubeconfig *out, char **err)
{
	return load(path, false, out, err);
}

int kubeconfig_load_names(const char *path, struct kubeconfig *out, char **err)
{
	return load(path, true, out, err);
}

void kubeconfig_free(struct kubeconfig *kc)
{
	free(kc->server);
	free(kc->tls_server_name);
	free(kc->ca_file);
	free(kc->client_cert_file);
	free(kc->client_key_file);
	free(kc->token);
	free(kc->token_file);
	buf_free(&kc->ca_data);
	buf_free(&kc->client_cert_data);
	buf_free(&kc->client_key_data);
	memset(kc, 0, sizeof *kc);
}
