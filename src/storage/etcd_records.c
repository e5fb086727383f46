/*
 * etcd_records.c - the etcd store's records and guarded steps: the keys of
 * the S/m, S/h, S/v and S/c records, building a Txn, reading the records an
 * object's write depends on, and the plans that hold or release an object
 * with its records in one Txn.  See etcd_internal.h for the layout.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/meta.h"
#include "kube/selectable.h"
#include "storage/etcd_internal.h"
#include "storage/key.h"
#include "util/buf.h"
#include "util/log.h"

enum store_err er_fail(enum etcd_err e)
{
	switch (e) {
	case ETCD_OK:
		return STORE_OK;
	case ETCD_UNAVAILABLE:
		return STORE_UNAVAILABLE;
	case ETCD_NOMEM:
		return STORE_NOMEM;
	case ETCD_TOO_LARGE:
		log_warn("etcd store: %s: %s", etcd_strerror(e), etcd_last_error());
		return store_fail_errno(EFBIG);
	case ETCD_NOSPACE: /* the client says it, once a minute */
		return store_fail_errno(ENOSPC);
	default:
		log_warn("etcd store: %s: %s", etcd_strerror(e), etcd_last_error());
		return store_fail_errno(EIO);
	}
}

/* A few milliseconds, growing and jittered, so that two writers that keep
 * colliding on the same records fall out of step. */
void er_backoff(struct etcd_store *es, int attempt)
{
	atomic_fetch_add(&es->retries, 1);
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)&attempt;
	long ms = (long)(1 + attempt) * 2 + (long)(rand_r(&seed) % 5);
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* ---- record keys ---- */

char *er_meta_key(struct etcd_store *es, const char *objkey)
{
	return str_printf("%s/m%s", es->side, objkey);
}

char *er_index_prefix(struct etcd_store *es, const char *component)
{
	return str_printf("%s/h/%s/%s", es->side, es->node, component);
}

char *er_index_key(struct etcd_store *es, const char *component, const char *objkey)
{
	return str_printf("%s/h/%s/%s%s", es->side, es->node, component, objkey);
}

char *er_views_key(struct etcd_store *es, const char *component, const char *resdir)
{
	return str_printf("%s/v/%s/%s/%s", es->side, es->node, component, resdir);
}

char *er_registry_key(struct etcd_store *es, const char *component)
{
	return str_printf("%s/c/%s/%s", es->side, es->node, component);
}

enum store_err er_view_id(const struct store_view *view, char id[VIEW_ID_LEN + 1])
{
	struct view_rec rec;
	char *resdir = NULL;
	enum store_err e = view_identity(view, KEY_LAYOUT_ENHANCED, &rec, &resdir);
	if (e != STORE_OK)
		return e;
	view_rec_id(resdir, &rec, id);
	view_rec_free(&rec);
	free(resdir);
	return STORE_OK;
}

/* ---- plans ---- */

void er_plan_free(struct er_plan *p)
{
	for (size_t i = 0; i < p->nowned; i++)
		free(p->owned[i]);
	free(p->owned);
	free(p->cmp);
	free(p->ops);
	memset(p, 0, sizeof *p);
}

const char *er_plan_keep(struct er_plan *p, char *s)
{
	if (!s) {
		p->oom = true;
		return "";
	}
	if (p->nowned == p->capowned) {
		size_t cap = p->capowned ? p->capowned * 2 : 64;
		char **v = realloc(p->owned, cap * sizeof *v);
		if (!v) {
			free(s);
			p->oom = true;
			return "";
		}
		p->owned = v;
		p->capowned = cap;
	}
	p->owned[p->nowned++] = s;
	return s;
}

static void *grow(void *v, size_t *cap, size_t n, size_t size, bool *oom)
{
	if (n < *cap)
		return v;
	size_t ncap = *cap ? *cap * 2 : 64;
	void *nv = realloc(v, ncap * size);
	if (!nv) {
		*oom = true;
		return NULL;
	}
	*cap = ncap;
	return nv;
}

static struct etcd_op *plan_op(struct er_plan *p)
{
	struct etcd_op *v = grow(p->ops, &p->capops, p->nops, sizeof *v, &p->oom);
	if (!v)
		return NULL;
	p->ops = v;
	struct etcd_op *op = &p->ops[p->nops++];
	memset(op, 0, sizeof *op);
	return op;
}

void er_plan_put(struct er_plan *p, const char *key, const char *value, size_t len)
{
	struct etcd_op *op = plan_op(p);
	if (!op)
		return;
	*op = (struct etcd_op){ETCD_OP_PUT, key, strlen(key), value, len, NULL, 0};
	p->bytes += strlen(key) + len + 16;
}

void er_plan_delete(struct er_plan *p, const char *key)
{
	struct etcd_op *op = plan_op(p);
	if (!op)
		return;
	*op = (struct etcd_op){ETCD_OP_DELETE, key, strlen(key), NULL, 0, NULL, 0};
	p->bytes += strlen(key) + 16;
}

void er_plan_same(struct er_plan *p, const char *key, int64_t mod)
{
	struct etcd_compare *v = grow(p->cmp, &p->capcmp, p->ncmp, sizeof *v, &p->oom);
	if (!v)
		return;
	p->cmp = v;
	p->cmp[p->ncmp++] = (struct etcd_compare){mod ? ETCD_CMP_MOD : ETCD_CMP_CREATE,
						  ETCD_CMP_EQUAL,
						  key,
						  strlen(key),
						  NULL,
						  0,
						  mod,
						  NULL,
						  0};
	p->bytes += strlen(key) + 16;
}

enum etcd_err er_plan_run(struct etcd_store *es, struct er_plan *p, bool *ok)
{
	*ok = false;
	if (p->oom)
		return ETCD_NOMEM;
	struct etcd_txn t = {p->cmp, p->ncmp, p->ops, NULL, p->nops, 0};
	struct etcd_txn_result r;
	enum etcd_err e = etcd_txn(es->c, &t, &r);
	atomic_fetch_add(&es->txns, 1);
	if (e == ETCD_OK) {
		*ok = r.succeeded;
		etcd_txn_result_free(&r);
	}
	return e;
}

/* ---- S/m records ---- */

void er_meta_free(struct er_meta *m)
{
	free(m->key);
	free(m->holders);
	memset(m, 0, sizeof *m);
}

/* Is the holder token at s (up to a space or the end) node/component? */
static bool token_is(const char *s, size_t len, const char *node, const char *component)
{
	size_t nl = strlen(node), cl = strlen(component);
	return len == nl + 1 + cl && !memcmp(s, node, nl) && s[nl] == '/' &&
	       !memcmp(s + nl + 1, component, cl);
}

/* 16 hex digits, as meta_value writes them. */
static int parse_bloom(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n != 16)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return -1;
		v = v << 4 | (uint64_t)d;
	}
	*out = v;
	return 0;
}

/* Parse "<rv> <holder> <holder>... [@s<summary>]" (or "<rv> @<time>", a
 * tombstone) into m, whose key is set. */
static int meta_take(struct etcd_store *es, const char *component, struct er_meta *m,
		     const struct etcd_kv *kv)
{
	m->present = true;
	m->mod = kv->mod_revision;
	const char *v = kv->value;
	size_t len = kv->value_len;
	size_t rvlen = 0;
	while (rvlen < len && v[rvlen] != ' ')
		rvlen++;
	if (kube_rv_parse(v, rvlen, &m->rv) < 0)
		m->rv = 0; /* unreadable: any listed copy replaces it */
	m->holders = strndup(v + rvlen, len - rvlen);
	if (!m->holders)
		return -1;
	for (const char *t = m->holders; *t;) {
		while (*t == ' ')
			t++;
		size_t n = strcspn(t, " ");
		if (!n)
			break;
		if (*t == '@' && t[1] == 's')
			m->has_bloom = parse_bloom(t + 2, n - 2, &m->bloom) == 0;
		else if (*t == '@')
			m->deleted_at = strtoll(t + 1, NULL, 10);
		else
			m->nholders++;
		if (token_is(t, n, es->node, component))
			m->ours = true;
		t += n;
	}
	return 0;
}

int er_meta_parse(struct etcd_store *es, const struct etcd_kv *kv, struct er_meta *m)
{
	return meta_take(es, "", m, kv);
}

/* The record's new value: rv and the holders, with (node, component) added
 * or removed, and the summary of the copy at rv (NULL: none known); with no
 * holder left, a tombstone stamped with the time. */
static char *meta_value(struct etcd_store *es, const char *component, const struct er_meta *m,
			uint64_t rv, bool add, const uint64_t *bloom)
{
	struct buf b = BUF_INIT;
	int rc = buf_printf(&b, "%0*llu", ER_RV_WIDTH, (unsigned long long)rv);
	size_t kept = 0;
	const char *t = m->holders ? m->holders : "";
	while (rc == 0 && *t) {
		while (*t == ' ')
			t++;
		size_t n = strcspn(t, " ");
		if (n && *t != '@' && !token_is(t, n, es->node, component)) {
			rc = buf_printf(&b, " %.*s", (int)n, t);
			kept++;
		}
		t += n;
	}
	if (rc == 0 && add)
		rc = buf_printf(&b, " %s/%s", es->node, component);
	else if (rc == 0 && !kept)
		rc = buf_printf(&b, " @%lld", (long long)time(NULL));
	if (rc == 0 && (add || kept) && bloom)
		rc = buf_printf(&b, " @s%016llx", (unsigned long long)*bloom);
	if (rc < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b);
}

void er_targets_free(struct er_target *t, size_t n)
{
	for (size_t i = 0; t && i < n; i++) {
		er_meta_free(&t[i].meta);
		er_hold_free(&t[i].hold);
		etcd_range_result_free(&t[i].object);
	}
}

/* ---- S/h records: the reasons of a holding ---- */

void er_hold_free(struct er_hold *h)
{
	free(h->key);
	free(h->reasons);
	memset(h, 0, sizeof *h);
}

static bool token_eq(const char *t, size_t n, const char *token)
{
	return strlen(token) == n && !memcmp(t, token, n);
}

bool er_reasons_has(const char *reasons, const char *token)
{
	for (const char *t = reasons ? reasons : ""; *t;) {
		while (*t == ' ')
			t++;
		size_t n = strcspn(t, " ");
		if (n && token_eq(t, n, token))
			return true;
		t += n;
	}
	return false;
}

/* The tokens of reasons but token, then token when add is set. */
static char *reasons_edit(const char *reasons, const char *token, bool add)
{
	struct buf b = BUF_INIT;
	int rc = 0;
	for (const char *t = reasons ? reasons : ""; rc == 0 && *t;) {
		while (*t == ' ')
			t++;
		size_t n = strcspn(t, " ");
		if (n && !token_eq(t, n, token))
			rc = buf_printf(&b, "%s%.*s", b.len ? " " : "", (int)n, t);
		t += n;
	}
	if (rc == 0 && add)
		rc = buf_printf(&b, "%s%s", b.len ? " " : "", token);
	if (rc < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b);
}

char *er_reasons_with(const char *reasons, const char *token)
{
	return reasons_edit(reasons, token, true);
}

char *er_reasons_without(const char *reasons, const char *token)
{
	return reasons_edit(reasons, token, false);
}

static void hold_reset(struct er_hold *h)
{
	free(h->reasons);
	h->reasons = NULL;
	h->present = false;
	h->mod = 0;
}

/* An S/h record as read (key set): an empty value is an older version's. */
static int hold_take(struct er_hold *h, const struct etcd_kv *kv)
{
	hold_reset(h);
	h->present = true;
	h->mod = kv->mod_revision;
	h->reasons = kv->value_len ? strndup(kv->value, kv->value_len) : strdup(ER_REASON_LEGACY);
	return h->reasons ? 0 : -1;
}

static void meta_reset(struct er_meta *m)
{
	free(m->holders);
	m->holders = NULL;
	m->present = m->ours = false;
	m->nholders = 0;
	m->deleted_at = 0;
	m->mod = 0;
	m->rv = 0;
}

/* The S/m and S/h keys of a target, made once. */
static int target_keys(struct etcd_store *es, const char *component, struct er_target *t)
{
	if (!t->meta.key)
		t->meta.key = er_meta_key(es, t->objkey);
	if (!t->hold.key)
		t->hold.key = er_index_key(es, component, t->objkey);
	return t->meta.key && t->hold.key ? 0 : -1;
}

/* One read-only Txn over targets [from, to); ranges in order: (extra,)
 * then per target its S/m record, its S/h record (and object). */
static enum etcd_err read_chunk(struct etcd_store *es, const char *component, struct er_target *t,
				size_t from, size_t to, const char *extra_key,
				struct etcd_range_result *extra)
{
	struct er_plan p = {0};
	if (extra_key) {
		struct etcd_op *op = plan_op(&p);
		if (op)
			*op = (struct etcd_op){ETCD_OP_RANGE, extra_key, strlen(extra_key), NULL, 0,
					       NULL,	      0};
	}
	for (size_t i = from; i < to; i++) {
		if (target_keys(es, component, &t[i]) < 0) {
			p.oom = true;
			break;
		}
		struct etcd_op *op = plan_op(&p);
		if (op)
			*op = (struct etcd_op){
			    ETCD_OP_RANGE, t[i].meta.key, strlen(t[i].meta.key), NULL, 0, NULL, 0};
		if ((op = plan_op(&p)))
			*op = (struct etcd_op){
			    ETCD_OP_RANGE, t[i].hold.key, strlen(t[i].hold.key), NULL, 0, NULL, 0};
		if (t[i].want_object && (op = plan_op(&p)))
			*op = (struct etcd_op){
			    ETCD_OP_RANGE, t[i].objkey, strlen(t[i].objkey), NULL, 0, NULL, 0};
	}
	if (p.oom) {
		er_plan_free(&p);
		return ETCD_NOMEM;
	}
	struct etcd_txn txn = {NULL, 0, p.ops, NULL, p.nops, 0};
	struct etcd_txn_result r;
	enum etcd_err e = etcd_txn(es->c, &txn, &r);
	atomic_fetch_add(&es->read_txns, 1);
	size_t nops = p.nops;
	er_plan_free(&p);
	if (e != ETCD_OK)
		return e;
	if (r.nranges != nops) {
		etcd_txn_result_free(&r);
		return ETCD_PROTOCOL;
	}
	size_t k = 0;
	if (extra_key) {
		*extra = r.ranges[k];
		memset(&r.ranges[k++], 0, sizeof r.ranges[0]);
	}
	for (size_t i = from; i < to && e == ETCD_OK; i++) {
		struct etcd_range_result *mr = &r.ranges[k++];
		struct etcd_range_result *hr = &r.ranges[k++];
		meta_reset(&t[i].meta);
		hold_reset(&t[i].hold);
		if (mr->n && meta_take(es, component, &t[i].meta, &mr->kvs[0]) < 0)
			e = ETCD_NOMEM;
		if (hr->n && hold_take(&t[i].hold, &hr->kvs[0]) < 0)
			e = ETCD_NOMEM;
		if (t[i].want_object) {
			etcd_range_result_free(&t[i].object);
			t[i].object = r.ranges[k];
			memset(&r.ranges[k++], 0, sizeof r.ranges[0]);
		}
	}
	etcd_txn_result_free(&r);
	return e;
}

static int cmp_kv_key(const void *key, const void *kv)
{
	return strcmp(key, ((const struct etcd_kv *)kv)->key);
}

/* One range from the smallest to the largest of the targets' S/m keys (or
 * S/h keys), at most 2n + 8 records; *fits false (and nothing in out) when
 * the span holds too much else. */
static enum etcd_err span_range(struct etcd_store *es, const struct er_target *t, size_t n,
				bool holds, struct etcd_range_result *out, bool *fits)
{
	const char *lo = NULL, *hi = NULL;
	for (size_t i = 0; i < n; i++) {
		const char *k = holds ? t[i].hold.key : t[i].meta.key;
		if (!lo || strcmp(k, lo) < 0)
			lo = k;
		if (!hi || strcmp(k, hi) > 0)
			hi = k;
	}
	struct buf end = BUF_INIT;
	if (buf_append_str(&end, hi) < 0 || buf_append_char(&end, '\0') < 0) {
		buf_free(&end);
		return ETCD_NOMEM;
	}
	struct etcd_range_opts o = {end.data, end.len, (int64_t)(2 * n + 8), 0, false, false};
	enum etcd_err e = etcd_range(es->c, lo, strlen(lo), &o, out);
	atomic_fetch_add(&es->read_txns, 1);
	buf_free(&end);
	*fits = e == ETCD_OK && !out->more;
	if (e == ETCD_OK && out->more)
		etcd_range_result_free(out);
	return e;
}

static const struct etcd_kv *find_kv(const struct etcd_range_result *r, const char *key)
{
	return r->n ? bsearch(key, r->kvs, r->n, sizeof *r->kvs, cmp_kv_key) : NULL;
}

/* The S/m and S/h records of targets that lie close together in key order
 * (a list comes sorted) with one range over each span: 1 if done, 0 if a
 * span holds too much else and the records must be read one by one.  (Two
 * ranges, two moments: the write's compares catch a change in between.) */
static int read_span(struct etcd_store *es, const char *component, struct er_target *t, size_t n,
		     enum etcd_err *err)
{
	for (size_t i = 0; i < n; i++)
		if (target_keys(es, component, &t[i]) < 0) {
			*err = ETCD_NOMEM;
			return 1;
		}
	struct etcd_range_result mr = {0}, hr = {0};
	bool fits = false;
	*err = span_range(es, t, n, false, &mr, &fits);
	if (*err != ETCD_OK || !fits)
		return *err != ETCD_OK;
	*err = span_range(es, t, n, true, &hr, &fits);
	if (*err != ETCD_OK || !fits) {
		etcd_range_result_free(&mr);
		return *err != ETCD_OK;
	}
	for (size_t i = 0; i < n && *err == ETCD_OK; i++) {
		meta_reset(&t[i].meta);
		hold_reset(&t[i].hold);
		const struct etcd_kv *kv = find_kv(&mr, t[i].meta.key);
		if (kv && meta_take(es, component, &t[i].meta, kv) < 0)
			*err = ETCD_NOMEM;
		if ((kv = find_kv(&hr, t[i].hold.key)) && hold_take(&t[i].hold, kv) < 0)
			*err = ETCD_NOMEM;
	}
	etcd_range_result_free(&mr);
	etcd_range_result_free(&hr);
	return 1;
}

enum etcd_err er_read_targets(struct etcd_store *es, const char *component, struct er_target *t,
			      size_t n, const char *extra_key, struct etcd_range_result *extra)
{
	if (!n && !extra_key)
		return ETCD_OK;
	bool objects = false;
	for (size_t i = 0; i < n; i++)
		objects |= t[i].want_object;
	enum etcd_err span_err;
	if (!extra_key && !objects && n >= 8 && read_span(es, component, t, n, &span_err))
		return span_err;
	size_t from = 0;
	bool first = true;
	do {
		size_t ops = first && extra_key ? 1 : 0, to = from;
		while (to < n && ops + (t[to].want_object ? 3 : 2) <= ER_READS_MAX)
			ops += t[to++].want_object ? 3 : 2;
		enum etcd_err e =
		    read_chunk(es, component, t, from, to, first ? extra_key : NULL, extra);
		if (e != ETCD_OK)
			return e;
		first = false;
		from = to;
	} while (from < n);
	return ETCD_OK;
}

/* ---- plans for one object ---- */

/* The compares every plan of one object carries. */
static void plan_guard(struct er_plan *p, const struct er_target *t)
{
	er_plan_same(p, t->meta.key, t->meta.present ? t->meta.mod : 0);
	er_plan_same(p, t->hold.key, t->hold.present ? t->hold.mod : 0);
}

static bool er_bloom_of(const char *group, const char *resource, const char *data, size_t len,
			uint64_t *out)
{
	struct buf doc = BUF_INIT;
	bool ok = selectable_pick(group, resource, data, len, &doc) == 0;

	if (ok)
		*out = selector_bloom(buf_cstr(&doc), doc.len);
	buf_free(&doc);
	return ok;
}

/* The summary the S/m record carries after the plan: the new copy's, or
 * the stored one's while that copy stays. */
static const uint64_t *plan_bloom(const struct er_meta *m, const struct er_copy *copy,
				  uint64_t *room)
{
	if (copy)
		return er_bloom_of(copy->group, copy->resource, copy->data, copy->len, room) ? room
											     : NULL;
	return m->has_bloom ? &m->bloom : NULL;
}

bool er_plan_hold(struct etcd_store *es, struct er_plan *p, const char *component,
		  const char *objkey, const struct er_target *t, const struct er_copy *copy,
		  const char *reason)
{
	const struct er_meta *m = &t->meta;
	const struct er_hold *h = &t->hold;
	bool write = copy != NULL;
	uint64_t room;
	if (!write && er_meta_is_tombstone(m))
		return false; /* a copy older than its deletion */
	char *reasons = er_reasons_with(h->present ? h->reasons : "", reason);
	if (!reasons) {
		p->oom = true;
		return false;
	}
	bool new_reasons = !h->present || strcmp(reasons, h->reasons);
	if (!write && m->ours && !new_reasons) {
		free(reasons);
		return false; /* nothing to change */
	}
	plan_guard(p, t);
	if (write)
		er_plan_put(p, objkey, copy->data, copy->len);
	if (write || !m->ours) {
		const char *value =
		    er_plan_keep(p, meta_value(es, component, m, write ? copy->rv : m->rv, true,
					       plan_bloom(m, copy, &room)));
		er_plan_put(p, m->key, value, strlen(value));
	}
	if (new_reasons) {
		const char *kept = er_plan_keep(p, reasons);
		er_plan_put(p, h->key, kept, strlen(kept));
	} else {
		free(reasons);
	}
	return !m->ours;
}

void er_plan_release(struct etcd_store *es, struct er_plan *p, const char *component,
		     const char *objkey, const struct er_target *t)
{
	const struct er_meta *m = &t->meta;
	plan_guard(p, t);
	if (m->ours) {
		/* The last holder leaves a tombstone at the stored rv: no copy as
		 * old as the one we held may bring the object back.  (Not at the
		 * list's or the event's rv: an object that left a filtered view
		 * may live on, at an rv in between, in another view.) */
		const char *value = er_plan_keep(
		    p, meta_value(es, component, m, m->rv, false, m->has_bloom ? &m->bloom : NULL));
		er_plan_put(p, m->key, value, strlen(value));
		if (m->nholders <= 1)
			er_plan_delete(p, objkey);
	}
	/* an S/h record without its S/m mention (an interrupted cleanup of an
	 * older version) goes too */
	er_plan_delete(p, t->hold.key);
}

/* Plan the holding with these reasons (malloc'ed, taken): released when
 * none is left, rewritten when they changed. */
static void plan_reasons(struct etcd_store *es, struct er_plan *p, const char *component,
			 const char *objkey, const struct er_target *t, char *reasons)
{
	if (!reasons) {
		p->oom = true;
		return;
	}
	if (!*reasons || !t->hold.present) {
		free(reasons);
		er_plan_release(es, p, component, objkey, t);
		return;
	}
	if (!strcmp(reasons, t->hold.reasons)) {
		free(reasons);
		return;
	}
	plan_guard(p, t);
	const char *kept = er_plan_keep(p, reasons);
	er_plan_put(p, t->hold.key, kept, strlen(kept));
}

void er_plan_drop_reason(struct etcd_store *es, struct er_plan *p, const char *component,
			 const char *objkey, const struct er_target *t, const char *reason)
{
	if (!t->meta.ours && !t->hold.present)
		return; /* not held */
	plan_reasons(es, p, component, objkey, t, er_reasons_without(t->hold.reasons, reason));
}

void er_plan_withdraw(struct etcd_store *es, struct er_plan *p, const char *component,
		      const char *objkey, const struct er_target *t, const char *reason)
{
	const struct er_meta *m = &t->meta;
	if (!m->ours || m->nholders > 1 || !t->hold.present) {
		er_plan_drop_reason(es, p, component, objkey, t, reason);
		return;
	}
	char *reasons = er_reasons_without(t->hold.reasons, reason);
	if (!reasons) {
		p->oom = true;
		return;
	}
	bool last = !*reasons;
	free(reasons);
	if (!last) {
		er_plan_drop_reason(es, p, component, objkey, t, reason);
		return;
	}
	plan_guard(p, t);
	er_plan_delete(p, objkey);
	er_plan_delete(p, m->key);
	er_plan_delete(p, t->hold.key);
}

/* ---- a list that lacked an object ---- */

/* The namespace of an object key under a resource root ("" when none);
 * false when it does not fit. */
static bool objkey_namespace(const char *objkey, size_t root_len, char *ns, size_t size)
{
	const char *rest = objkey + root_len;
	const char *slash = strchr(rest, '/');
	ns[0] = '\0';
	if (!slash)
		return true;
	size_t nl = (size_t)(slash - rest);
	if (nl >= size)
		return false;
	memcpy(ns, rest, nl);
	ns[nl] = '\0';
	return true;
}

void er_plan_vanished(struct etcd_store *es, struct er_plan *p, const char *component,
		      const struct er_vanish_rule *rule, const struct er_target *t)
{
	const struct er_meta *m = &t->meta;
	if (!m->ours && !t->hold.present)
		return; /* not held */
	if (!m->ours || !t->object.n) {
		/* a stray S/h record, or the object is gone: the records go */
		er_plan_release(es, p, component, t->objkey, t);
		return;
	}
	if (m->present && m->rv > rule->list_rv)
		return; /* written after the list was taken: not the list's to judge */
	char ns[KEY_NAME_MAX + 1];
	if (!objkey_namespace(t->objkey, rule->root_len, ns, sizeof ns))
		return;
	const struct etcd_kv *kv = &t->object.kvs[0];
	if (view_matcher_covers(rule->self, ns, kv->value, kv->value_len) == 1) {
		er_plan_release(es, p, component, t->objkey, t); /* stale */
		return;
	}
	char *reasons = er_reasons_without(t->hold.reasons, rule->view_id);
	if (reasons && er_reasons_has(reasons, ER_REASON_LEGACY)) {
		bool covered = false;
		for (size_t i = 0; i < rule->nothers && !covered; i++)
			covered = view_matcher_covers(&rule->others[i], ns, kv->value,
						      kv->value_len) != 0;
		if (!covered) {
			char *settled = er_reasons_without(reasons, ER_REASON_LEGACY);
			free(reasons);
			reasons = settled;
		}
	}
	plan_reasons(es, p, component, t->objkey, t, reasons);
}

static enum store_err release_batch(struct etcd_store *es, const char *component, char **objkeys,
				    size_t n, const struct er_vanish_rule *rule)
{
	struct er_target *t = calloc(n, sizeof *t);
	if (!t)
		return STORE_NOMEM;
	enum store_err se = STORE_CONFLICT;
	for (int attempt = 0; attempt < ER_RETRIES; attempt++) {
		for (size_t i = 0; i < n; i++) {
			t[i].objkey = objkeys[i];
			t[i].want_object = rule != NULL;
		}
		enum etcd_err e = er_read_targets(es, component, t, n, NULL, NULL);
		struct er_plan p = {0};
		for (size_t i = 0; e == ETCD_OK && i < n; i++) {
			if (rule)
				er_plan_vanished(es, &p, component, rule, &t[i]);
			else if (t[i].meta.ours || t[i].hold.present)
				er_plan_release(es, &p, component, objkeys[i], &t[i]);
		}
		bool ok = true;
		if (e == ETCD_OK && p.nops)
			e = er_plan_run(es, &p, &ok);
		er_plan_free(&p);
		if (e != ETCD_OK || ok) {
			se = er_fail(e);
			break;
		}
		er_backoff(es, attempt);
	}
	er_targets_free(t, n);
	free(t);
	return se;
}

enum store_err er_release(struct etcd_store *es, const char *component, char **objkeys, size_t n,
			  const struct er_vanish_rule *rule)
{
	for (size_t off = 0; off < n; off += ER_BATCH) {
		size_t cnt = n - off < ER_BATCH ? n - off : ER_BATCH;
		enum store_err e = release_batch(es, component, objkeys + off, cnt, rule);
		if (e != STORE_OK)
			return e;
	}
	return STORE_OK;
}

/* ---- what a component holds ---- */

void er_keys_free(struct er_keys *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->v[i]);
	free(k->v);
	memset(k, 0, sizeof *k);
}

int er_keys_add(struct er_keys *k, const char *s, size_t len)
{
	bool oom = false;
	char **v = grow(k->v, &k->cap, k->n, sizeof *v, &oom);
	if (!v)
		return -1;
	k->v = v;
	if (!(k->v[k->n] = strndup(s, len)))
		return -1;
	k->n++;
	return 0;
}

enum etcd_err er_range_each(struct etcd_client *c, const char *prefix, size_t len, bool keys_only,
			    er_kv_fn fn, void *ctx)
{
	return er_range_each_at(c, prefix, len, keys_only, 0, fn, ctx);
}

enum etcd_err er_range_each_at(struct etcd_client *c, const char *prefix, size_t len,
			       bool keys_only, int64_t revision, er_kv_fn fn, void *ctx)
{
	struct buf from = BUF_INIT, end = BUF_INIT;
	enum etcd_err e = ETCD_NOMEM;
	if (buf_append(&from, prefix, len) == 0 && etcd_prefix_end(prefix, len, &end) == 0)
		e = ETCD_OK;
	bool more = e == ETCD_OK;
	while (more) {
		struct etcd_range_opts o = {end.data, end.len, 1000, revision, keys_only, false};
		struct etcd_range_result r;
		if ((e = etcd_range(c, from.data, from.len, &o, &r)) != ETCD_OK)
			break;
		int rc = 0;
		for (size_t i = 0; i < r.n && rc == 0; i++)
			rc = fn(ctx, &r.kvs[i]);
		if (rc < 0)
			e = ETCD_NOMEM;
		more = rc == 0 && r.more && r.n;
		if (more) {
			/* the next page starts just after the last key: key + NUL */
			buf_reset(&from);
			if (buf_append(&from, r.kvs[r.n - 1].key, r.kvs[r.n - 1].key_len) < 0 ||
			    buf_append_char(&from, '\0') < 0)
				e = ETCD_NOMEM, more = false;
		}
		etcd_range_result_free(&r);
	}
	buf_free(&from);
	buf_free(&end);
	return e;
}

const char *er_key_rest(const struct etcd_kv *kv, const char *prefix, size_t plen, size_t *len)
{
	*len = 0;
	if (!kv->key || kv->key_len <= plen || memcmp(kv->key, prefix, plen))
		return NULL;
	*len = kv->key_len - plen;
	return kv->key + plen;
}

struct held_keys {
	struct er_keys *out;
	const char *prefix; /* the index prefix S/h/<node>/<comp> */
	size_t plen;
};

static int held_key_add(void *ctx, const struct etcd_kv *kv)
{
	struct held_keys *h = ctx;
	size_t len;
	const char *rest = er_key_rest(kv, h->prefix, h->plen, &len);
	return rest && er_keys_add(h->out, rest, len) < 0 ? -1 : 0;
}

enum etcd_err er_held_keys(struct etcd_store *es, const char *component, const char *objprefix,
			   struct er_keys *out)
{
	char *ip = er_index_prefix(es, component);
	char *from = ip ? str_printf("%s%s", ip, objprefix) : NULL;
	struct held_keys h = {out, ip, ip ? strlen(ip) : 0};
	enum etcd_err e =
	    from ? er_range_each(es->c, from, strlen(from), true, held_key_add, &h) : ETCD_NOMEM;
	free(ip);
	free(from);
	return e;
}
