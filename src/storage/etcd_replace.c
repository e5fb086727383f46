/*
 * etcd_replace.c - replacing a list view in etcd.
 *
 * Objects are added as the list streams in and written in steps of up to
 * ER_BATCH objects.  A step reads the S/m records of its objects in one
 * read-only Txn, then writes in one Txn whose compares check that those
 * records did not change meanwhile; if one did, the step is read and
 * planned again.  In a step an object is written only when it is new or
 * listed newer than stored (so a relist of unchanged objects writes
 * nothing), and the component's holding is recorded beside it.
 *
 * At commit, the objects the component holds in the view's collection but
 * that the list did not have are judged by the rule of store.h
 * (er_plan_vanished): a copy the view matches and not newer than the list is
 * stale and released; otherwise the object leaves the view's membership and
 * is released when no other reason holds it.  The view set is written last.  When
 * the pending objects, the releases and the view set fit in one Txn (small
 * lists, the common case), all of it is that one Txn.
 *
 * Every step is whole on its own, so a crash between steps leaves objects
 * at real resourceVersions with complete records.  A replace of more than
 * one Txn writes a record of itself before its first step, deleted by its
 * last: one that ends without its commit (an abort, a failure, a crash) is
 * rolled back, by itself or later by etcd_store_recover (etcd_inflight.c,
 * docs/etcd-store.md).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storage/etcd_internal.h"
#include "storage/key.h"
#include "util/log.h"
#include "util/strmap.h"

struct pending {
	char *objkey, *data;
	size_t len;
	uint64_t rv;
	bool damaged; /* read damaged since it was stored: rewritten whatever its rv */
};

/* A big list is written by ER_WRITERS threads, each taking a full batch
 * while the list keeps streaming in: while one step's Txn is applied, the
 * next step's records are read.  Batches touch different objects, and each
 * is guarded on its own, so their order does not matter. */
#define ER_WRITERS 2

struct batch {
	struct batch *next;
	struct pending *items;
	size_t n;
};

struct writers {
	pthread_t th[ER_WRITERS];
	int nthreads;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct batch *head, *tail;
	size_t queued, busy;
	bool closing;
	enum etcd_err err; /* the first failure */
};

struct er_replace {
	struct store_replace base; /* first: the session handle callers hold */
	struct etcd_store *es;
	char *component;
	struct store_gvr gvr;
	char *group, *version, *resource;
	struct view_rec rec;
	char id[VIEW_ID_LEN + 1]; /* the view's name in holdings */
	char *views_key;
	char *root;	     /* the view's collection: resource root [+ "<ns>/"] */
	size_t res_root_len; /* the resource root's length */
	bool is_ns_resource;
	struct strmap listed; /* object keys added; num: rv, value: pending slot + 1 */
	struct pending *pending;
	size_t npending, cap_pending, pending_bytes;
	struct writers w;
	bool writing; /* the writer threads run */
	char *resdir;
	struct er_inflight flight;
	struct er_inflight_view fv; /* the strings above, not owned */
	bool committed;
};

static void batch_free(struct batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->items[i].objkey);
		free(b->items[i].data);
	}
	free(b->items);
	free(b);
}

static enum etcd_err write_objects(struct er_replace *r, struct pending *w, size_t n);
static void writers_stop(struct er_replace *r);

static void pending_clear(struct er_replace *r)
{
	for (size_t i = 0; i < r->npending; i++) {
		struct strmap_entry *e = strmap_get(&r->listed, r->pending[i].objkey);
		if (e)
			e->value = NULL;
		free(r->pending[i].objkey);
		free(r->pending[i].data);
	}
	r->npending = 0;
	r->pending_bytes = 0;
}

static void replace_free(struct er_replace *r)
{
	writers_stop(r);
	er_inflight_leave(r->es, &r->flight, &r->fv, r->committed);
	pending_clear(r);
	free(r->pending);
	strmap_free(&r->listed);
	view_rec_free(&r->rec);
	free(r->component);
	free(r->group);
	free(r->version);
	free(r->resource);
	free(r->views_key);
	free(r->root);
	free(r->resdir);
	free(r);
}

/* ---- one step: writes, releases and (at the end) the view set ---- */

struct view_update {
	const struct view_rec *rec;
	uint64_t rv;
};

struct step {
	struct pending *writes;
	size_t nwrites;
	char **releases;
	size_t nreleases;
	const struct er_vanish_rule *rule;
	const struct view_update *view; /* NULL: not in this step */
};

/* Plan the view set's new value, guarded by the record as read. */
static int plan_view(struct er_replace *r, struct er_plan *p, const struct view_update *v,
		     const struct etcd_range_result *read)
{
	struct view_set set = {0};
	if (read->n && view_set_decode(read->kvs[0].value, read->kvs[0].value_len, &set) < 0)
		log_warn("etcd store: view set %s unreadable: rewritten", r->views_key);
	struct buf value = BUF_INIT;
	int rc = view_set_put(&set, v->rec, v->rv);
	if (rc == 0)
		rc = view_set_encode(&set, &value);
	view_set_free(&set);
	if (rc < 0) {
		buf_free(&value);
		return -1;
	}
	er_plan_same(p, r->views_key, read->n ? read->kvs[0].mod_revision : 0);
	size_t len = value.len;
	const char *kept = er_plan_keep(p, buf_steal(&value));
	er_plan_put(p, r->views_key, kept, p->oom ? 0 : len);
	return 0;
}

static enum etcd_err step_try(struct er_replace *r, const struct step *st, struct er_target *t,
			      bool *ok)
{
	struct etcd_store *es = r->es;
	size_t n = st->nwrites + st->nreleases;
	for (size_t i = 0; i < n; i++) {
		bool w = i < st->nwrites;
		t[i].objkey = w ? st->writes[i].objkey : st->releases[i - st->nwrites];
		t[i].want_object = !w && st->rule;
	}
	struct etcd_range_result view = {0};
	enum etcd_err e =
	    er_read_targets(es, r->component, t, n, st->view ? r->views_key : NULL, &view);
	struct er_plan p = {0};
	bool held = false;
	for (size_t i = 0; e == ETCD_OK && i < st->nwrites; i++) {
		const struct pending *w = &st->writes[i];
		const struct er_meta *m = &t[i].meta;
		struct er_copy copy = {w->data, w->len, w->rv, r->group, r->resource};
		bool write = !m->present || w->rv > m->rv || w->damaged;
		held |= er_plan_hold(es, &p, r->component, w->objkey, &t[i], write ? &copy : NULL,
				     r->id);
	}
	for (size_t i = st->nwrites; e == ETCD_OK && i < n; i++)
		er_plan_vanished(es, &p, r->component, st->rule, &t[i]);
	if (e == ETCD_OK && st->view && plan_view(r, &p, st->view, &view) < 0)
		e = ETCD_NOMEM;
	if (e == ETCD_OK && st->view)
		er_inflight_plan_done(&p, &r->flight);
	if (e == ETCD_OK && (held || st->view))
		er_plan_put(&p, er_plan_keep(&p, er_registry_key(es, r->component)), "", 0);
	*ok = true;
	if (e == ETCD_OK && p.nops)
		e = er_plan_run(es, &p, ok);
	er_plan_free(&p);
	etcd_range_result_free(&view);
	er_targets_free(t, n);
	memset(t, 0, n * sizeof *t);
	return e;
}

/* Run a step until its compares hold; etcd's size errors are returned for
 * the caller to split on. */
static enum etcd_err step_run(struct er_replace *r, const struct step *st)
{
	size_t n = st->nwrites + st->nreleases;
	struct er_target *t = calloc(n ? n : 1, sizeof *t);
	if (!t)
		return ETCD_NOMEM;
	enum etcd_err e = ETCD_OK;
	bool ok = false;
	for (int attempt = 0; attempt < ER_RETRIES; attempt++) {
		e = step_try(r, st, t, &ok);
		if (e != ETCD_OK || ok)
			break;
		er_backoff(r->es, attempt);
	}
	free(t);
	if (e == ETCD_OK && !ok) {
		log_warn("etcd store: %s: records kept changing under a replace; gave up",
			 r->views_key);
		return ETCD_ERROR;
	}
	return e;
}

static bool too_big(enum etcd_err e)
{
	return e == ETCD_TOO_MANY_OPS || e == ETCD_TOO_LARGE;
}

/* Write objects, halving the step while etcd finds it too big (a cluster
 * run with limits below the defaults). */
static enum etcd_err write_objects(struct er_replace *r, struct pending *w, size_t n)
{
	struct step st = {w, n, NULL, 0, NULL, NULL};
	enum etcd_err e = step_run(r, &st);
	if (!too_big(e) || n < 2)
		return e;
	atomic_fetch_add(&r->es->splits, 1);
	e = write_objects(r, w, n / 2);
	return e == ETCD_OK ? write_objects(r, w + n / 2, n - n / 2) : e;
}

/* ---- the writer threads ---- */

static void *writer_main(void *arg)
{
	struct er_replace *r = arg;
	struct writers *w = &r->w;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->head && !w->closing)
			pthread_cond_wait(&w->cv, &w->mu);
		struct batch *b = w->head;
		if (!b)
			break;
		w->head = b->next;
		if (!w->head)
			w->tail = NULL;
		w->queued--;
		w->busy++;
		bool failed = w->err != ETCD_OK;
		pthread_mutex_unlock(&w->mu);
		enum etcd_err e = failed ? ETCD_OK : write_objects(r, b->items, b->n);
		batch_free(b);
		pthread_mutex_lock(&w->mu);
		w->busy--;
		if (e != ETCD_OK && w->err == ETCD_OK)
			w->err = e;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static bool writers_start(struct er_replace *r)
{
	struct writers *w = &r->w;
	memset(w, 0, sizeof *w);
	if (pthread_mutex_init(&w->mu, NULL) != 0)
		return false;
	if (pthread_cond_init(&w->cv, NULL) != 0) {
		pthread_mutex_destroy(&w->mu);
		return false;
	}
	while (w->nthreads < ER_WRITERS &&
	       pthread_create(&w->th[w->nthreads], NULL, writer_main, r) == 0)
		w->nthreads++;
	r->writing = true;
	if (w->nthreads == 0) {
		writers_stop(r);
		return false;
	}
	return true;
}

/* Wait for every queued batch to be written; the first failure. */
static enum etcd_err writers_drain(struct er_replace *r)
{
	if (!r->writing)
		return ETCD_OK;
	struct writers *w = &r->w;
	pthread_mutex_lock(&w->mu);
	while (w->head || w->busy)
		pthread_cond_wait(&w->cv, &w->mu);
	enum etcd_err e = w->err;
	pthread_mutex_unlock(&w->mu);
	return e;
}

static void writers_stop(struct er_replace *r)
{
	if (!r->writing)
		return;
	struct writers *w = &r->w;
	pthread_mutex_lock(&w->mu);
	w->closing = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	for (int i = 0; i < w->nthreads; i++)
		pthread_join(w->th[i], NULL);
	while (w->head) {
		struct batch *b = w->head;
		w->head = b->next;
		batch_free(b);
	}
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	r->writing = false;
}

/* Give the pending objects to the writers (waiting while ER_WRITERS
 * batches are queued already).  ETCD_OK, or a writer's failure. */
static enum etcd_err hand_off(struct er_replace *r)
{
	struct batch *b = calloc(1, sizeof *b);
	struct pending *fresh = calloc(ER_BATCH, sizeof *fresh);
	if (!b || !fresh) {
		free(b);
		free(fresh);
		return ETCD_NOMEM;
	}
	for (size_t i = 0; i < r->npending; i++) {
		struct strmap_entry *e = strmap_get(&r->listed, r->pending[i].objkey);
		if (e)
			e->value = NULL; /* a later copy goes in a later batch */
	}
	b->items = r->pending;
	b->n = r->npending;
	r->pending = fresh;
	r->cap_pending = ER_BATCH;
	r->npending = 0;
	r->pending_bytes = 0;
	struct writers *w = &r->w;
	pthread_mutex_lock(&w->mu);
	while (w->queued >= ER_WRITERS && w->err == ETCD_OK)
		pthread_cond_wait(&w->cv, &w->mu);
	enum etcd_err e = w->err;
	if (e == ETCD_OK) {
		if (w->tail)
			w->tail->next = b;
		else
			w->head = b;
		w->tail = b;
		w->queued++;
		pthread_cond_signal(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	if (e != ETCD_OK)
		batch_free(b);
	return e;
}

static enum store_err flush(struct er_replace *r)
{
	enum etcd_err e = r->npending ? write_objects(r, r->pending, r->npending) : ETCD_OK;
	pending_clear(r);
	return er_fail(e);
}

/* ---- the session ---- */

enum store_err er_replace_begin(struct store *s, const struct store_view *view,
				struct store_replace **out)
{
	struct etcd_store *es = es_of(s);
	*out = NULL;
	struct er_replace *r = calloc(1, sizeof *r);
	if (!r)
		return STORE_NOMEM;
	r->base.store = s;
	r->es = es;
	char *resdir = NULL;
	enum store_err e = view_identity(view, KEY_LAYOUT_ENHANCED, &r->rec, &resdir);
	if (e == STORE_OK) {
		view_rec_id(resdir, &r->rec, r->id);
		r->component = strdup(view->component);
		r->group = strdup(view->gvr.group ? view->gvr.group : "");
		r->version = strdup(view->gvr.version ? view->gvr.version : "");
		r->resource = strdup(view->gvr.resource);
		r->views_key = er_views_key(es, view->component, resdir);
		r->is_ns_resource = !strcmp(view->gvr.resource, "namespaces");
		struct store_key_info info = {view->component,
					      view->gvr.group,
					      view->gvr.version,
					      view->gvr.resource,
					      "",
					      ""};
		struct store_key k;
		e = key_build_etcd(es->prefix, &info, &k);
		if (e == STORE_OK) {
			r->res_root_len = strlen(k.path);
			struct buf root = BUF_INIT;
			if (buf_printf(&root, "%s%s%s", k.path, r->rec.namespace,
				       *r->rec.namespace && !r->is_ns_resource ? "/" : "") == 0)
				r->root = buf_steal(&root);
			store_key_free(&k);
		}
		if (e == STORE_OK && (!r->component || !r->group || !r->version || !r->resource ||
				      !r->views_key || !r->root))
			e = STORE_NOMEM;
	}
	r->resdir = resdir;
	r->fv = (struct er_inflight_view){r->component, r->id, r->resdir, r->root};
	if (e == STORE_OK)
		e = er_inflight_enter(es, &r->flight, r->component, r->id);
	if (e != STORE_OK) {
		replace_free(r);
		return e;
	}
	r->gvr = (struct store_gvr){r->group, r->version, r->resource};
	*out = &r->base;
	return STORE_OK;
}

enum store_err er_replace_add(struct store_replace *sr, const struct store_item *it)
{
	struct er_replace *r = (struct er_replace *)sr;
	enum store_err e = store_item_check(it, r->rec.namespace, r->is_ns_resource);
	if (e != STORE_OK)
		return e;
	struct store_key_info info = {
	    r->component, r->group, r->version, r->resource, r->is_ns_resource ? "" : it->namespace,
	    it->name};
	struct store_key k;
	if ((e = key_build_etcd(r->es->prefix, &info, &k)) != STORE_OK)
		return e;
	char *data = malloc(it->len);
	struct strmap_entry *l = strmap_get(&r->listed, k.path);
	if (!l && data)
		l = strmap_put(&r->listed, k.path, NULL);
	if (!l || !data) {
		free(data);
		store_key_free(&k);
		return STORE_NOMEM;
	}
	memcpy(data, it->data, it->len);
	l->num = it->rv;
	struct pending *p;
	if (l->value) { /* listed twice in this step: the later copy wins */
		p = &r->pending[(uintptr_t)l->value - 1];
		r->pending_bytes -= p->len;
		free(p->data);
		store_key_free(&k);
	} else {
		if (r->npending == r->cap_pending) {
			size_t cap = r->cap_pending ? r->cap_pending * 2 : ER_BATCH;
			struct pending *v = realloc(r->pending, cap * sizeof *v);
			if (!v) {
				free(data);
				store_key_free(&k);
				return STORE_NOMEM;
			}
			r->pending = v;
			r->cap_pending = cap;
		}
		p = &r->pending[r->npending++];
		p->objkey = k.path;
		k.path = NULL;
		store_key_free(&k);
		l->value = (void *)(uintptr_t)r->npending;
	}
	p->data = data;
	p->len = it->len;
	p->rv = it->rv;
	p->damaged = store_damage_take(&r->es->base, r->component, r->group, r->resource,
				       info.namespace, it->name);
	r->pending_bytes += it->len;
	if (r->npending < ER_BATCH && r->pending_bytes < ER_TXN_BYTES)
		return STORE_OK;
	/* not the last step: the record of the replace in flight comes first */
	enum etcd_err me = er_inflight_mark(r->es, &r->flight, &r->fv);
	if (me != ETCD_OK)
		return er_fail(me);
	if (r->writing || writers_start(r))
		return er_fail(hand_off(r));
	return flush(r);
}

void er_replace_abort(struct store_replace *sr)
{
	if (sr)
		replace_free((struct er_replace *)sr);
}

/* ---- commit ---- */

struct matchers {
	struct view_matcher self, *others;
	size_t nothers, cap;
	struct view_set *sets;
	size_t nsets;
};

static void matchers_free(struct matchers *m)
{
	view_matcher_free(&m->self);
	for (size_t i = 0; i < m->nothers; i++)
		view_matcher_free(&m->others[i]);
	free(m->others);
	for (size_t i = 0; i < m->nsets; i++)
		view_set_free(&m->sets[i]);
	free(m->sets);
	memset(m, 0, sizeof *m);
}

static bool same_view(const struct view_rec *a, const struct view_rec *b)
{
	return !strcmp(a->namespace, b->namespace) &&
	       !strcmp(a->label_selector, b->label_selector) &&
	       !strcmp(a->field_selector, b->field_selector);
}

/* Does the view record at key (S/v/<node>/<comp>/<resource dir>) cover the
 * same etcd collection as this replace?  Another version of the resource
 * (endpointslices v1 and v1beta1), or a group kube-apiserver stores in the
 * same place (events and events.k8s.io), does. */
static bool same_collection(const struct er_replace *r, const char *resdir)
{
	char *res, *ver, *grp;
	if (key_parse_resource_dir(resdir, &res, &ver, &grp) < 0)
		return false;
	char *path = key_etcd_resource_path(grp, res);
	char *ours = key_etcd_resource_path(r->group, r->resource);
	bool same = path && ours && !strcmp(path, ours);
	free(path);
	free(ours);
	free(res);
	free(ver);
	free(grp);
	return same;
}

static int matchers_add_set(struct er_replace *r, struct matchers *m, const struct etcd_kv *kv)
{
	struct view_set *sets = realloc(m->sets, (m->nsets + 1) * sizeof *sets);
	if (!sets)
		return -1;
	m->sets = sets;
	struct view_set *set = &m->sets[m->nsets];
	memset(set, 0, sizeof *set);
	if (view_set_decode(kv->value, kv->value_len, set) < 0)
		return 0; /* unreadable: covers nothing (it is rewritten at its next list) */
	m->nsets++;
	bool own = !strcmp(kv->key, r->views_key);
	for (size_t i = 0; i < set->n; i++) {
		if (own && same_view(&set->v[i], &r->rec))
			continue;
		if (m->nothers == m->cap) {
			size_t cap = m->cap ? m->cap * 2 : 8;
			struct view_matcher *v = realloc(m->others, cap * sizeof *v);
			if (!v)
				return -1;
			m->others = v;
			m->cap = cap;
		}
		if (view_matcher_init(&m->others[m->nothers], &set->v[i]) < 0)
			return -1;
		m->nothers++;
	}
	return 0;
}

struct matchers_scan {
	struct er_replace *r;
	struct matchers *m;
	const char *prefix; /* S/v/<node>/<comp>/ */
	size_t plen;
};

static int matchers_scan_set(void *ctx, const struct etcd_kv *kv)
{
	struct matchers_scan *sc = ctx;
	size_t len;
	const char *resdir = er_key_rest(kv, sc->prefix, sc->plen, &len);
	if (!resdir || !same_collection(sc->r, resdir))
		return 0;
	return matchers_add_set(sc->r, sc->m, kv) < 0 ? -1 : 0;
}

/* The views the release rule needs: this one, and the component's others
 * over the same etcd collection. */
static enum store_err matchers_load(struct er_replace *r, struct matchers *m)
{
	memset(m, 0, sizeof *m);
	if (view_matcher_init(&m->self, &r->rec) < 0)
		return STORE_NOMEM;
	char *prefix = str_printf("%s/v/%s/%s/", r->es->side, r->es->node, r->component);
	if (!prefix)
		return STORE_NOMEM;
	struct matchers_scan sc = {r, m, prefix, strlen(prefix)};
	enum etcd_err e = er_range_each(r->es->c, prefix, sc.plen, false, matchers_scan_set, &sc);
	free(prefix);
	return er_fail(e);
}

/* What the component holds in the view's collection that the list lacked. */
static enum store_err vanished(struct er_replace *r, struct er_keys *out)
{
	struct er_keys held = {0};
	enum etcd_err e = er_held_keys(r->es, r->component, r->root, &held);
	size_t root_len = strlen(r->root);
	for (size_t i = 0; e == ETCD_OK && i < held.n; i++) {
		if (strmap_get(&r->listed, held.v[i]))
			continue;
		/* keep only objects of this collection (an answer is not trusted
		 * to stay in the range asked for), not of deeper paths */
		if (strncmp(held.v[i], r->root, root_len) ||
		    (strchr(held.v[i] + root_len, '/') && *r->rec.namespace))
			continue;
		if (er_keys_add(out, held.v[i], strlen(held.v[i])) < 0)
			e = ETCD_NOMEM;
	}
	er_keys_free(&held);
	return er_fail(e);
}

static enum store_err commit(struct er_replace *r, uint64_t list_rv)
{
	struct er_keys gone = {0};
	struct matchers m = {0};
	enum store_err se = er_fail(writers_drain(r));
	if (se == STORE_OK)
		se = matchers_load(r, &m);
	if (se == STORE_OK)
		se = vanished(r, &gone);
	struct er_vanish_rule rule = {list_rv, r->res_root_len, r->id,
				      &m.self, m.others,	m.nothers};
	struct view_update vu = {&r->rec, list_rv};
	enum etcd_err e = ETCD_OK;
	bool done = false;
	if (se == STORE_OK && r->npending + gone.n <= ER_BATCH) {
		/* all in one Txn */
		struct step st = {r->pending, r->npending, gone.v, gone.n, &rule, &vu};
		e = step_run(r, &st);
		done = !too_big(e);
	}
	if (se == STORE_OK && !done) {
		se = er_fail(er_inflight_mark(r->es, &r->flight, &r->fv));
		if (se == STORE_OK)
			se = flush(r);
		if (se == STORE_OK)
			se = er_release(r->es, r->component, gone.v, gone.n, &rule);
		if (se == STORE_OK) {
			struct step st = {NULL, 0, NULL, 0, NULL, &vu};
			e = step_run(r, &st);
		}
	}
	if (se == STORE_OK)
		se = er_fail(e);
	er_keys_free(&gone);
	matchers_free(&m);
	return se;
}

enum store_err er_replace_commit(struct store_replace *sr, uint64_t list_rv)
{
	struct er_replace *r = (struct er_replace *)sr;
	enum store_err e = commit(r, list_rv);
	r->committed = e == STORE_OK;
	replace_free(r);
	return e;
}
