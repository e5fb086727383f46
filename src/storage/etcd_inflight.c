/*
 * etcd_inflight.c - replaces in flight, and what an abandoned one leaves.
 *
 * A replace written in more than one Txn (a list of more than ER_BATCH
 * objects) gives its objects the view's id before the view set that
 * explains the id is written.  Should the hub die, or etcd go away, before
 * the last step, those holdings are explained by nothing.  So such a
 * replace first writes a record, S/r/<node>/<instance>-<seq>, naming the
 * component, the view, its collection and when it started; the commit's
 * last Txn deletes it.  A record whose replace is over without its commit is
 * abandoned, and rolled back: each holding of the component in the view's
 * collection loses the view's id (an object nobody else holds goes, with no
 * tombstone: its copy is true in the cloud and the next list may bring it
 * back at the same resourceVersion).  When the view already exists, its
 * membership explains the id and there is nothing to undo.
 *
 * Who judges a record abandoned: this node's hub, at once, for a record of
 * another instance (its own previous run) or of one of its own replaces that
 * ended without a commit; any hub of the pool for another node's record not
 * refreshed for the stated time (the writer refreshes it as the list streams
 * in).  In the process, a rollback and a replace of the same component's
 * view never run at once (er_inflight_enter waits); see docs/etcd-store.md.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "storage/etcd_internal.h"
#include "util/log.h"
#include "util/strmap.h"

int er_inflight_init(struct etcd_store *es)
{
	uint64_t token = 0;
	if (getrandom(&token, sizeof token, 0) != (ssize_t)sizeof token)
		token = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)(uintptr_t)es;
	snprintf(es->instance, sizeof es->instance, "%016llx", (unsigned long long)token);
	if (pthread_mutex_init(&es->inflight_mu, NULL) != 0)
		return -1;
	if (pthread_cond_init(&es->inflight_cv, NULL) != 0) {
		pthread_mutex_destroy(&es->inflight_mu);
		return -1;
	}
	es->inflight_ready = true;
	return 0;
}

void er_inflight_fini(struct etcd_store *es)
{
	if (!es->inflight_ready)
		return;
	strmap_free(&es->views_busy);
	strmap_free(&es->live_records);
	pthread_cond_destroy(&es->inflight_cv);
	pthread_mutex_destroy(&es->inflight_mu);
	es->inflight_ready = false;
}

/* The slot of a component's view in views_busy: num counts the replaces in
 * flight, value is set while the view's abandoned holdings are rolled
 * back. */
static char *slot_name(const char *component, const char *id)
{
	return str_printf("%s %s", component, id);
}

enum store_err er_inflight_enter(struct etcd_store *es, struct er_inflight *f,
				 const char *component, const char *id)
{
	memset(f, 0, sizeof *f);
	f->slot = slot_name(component, id);
	if (!f->slot)
		return STORE_NOMEM;
	pthread_mutex_lock(&es->inflight_mu);
	struct strmap_entry *e;
	while ((e = strmap_get(&es->views_busy, f->slot)) && e->value)
		pthread_cond_wait(&es->inflight_cv, &es->inflight_mu);
	if (!e)
		e = strmap_put(&es->views_busy, f->slot, NULL);
	if (e)
		e->num++;
	pthread_mutex_unlock(&es->inflight_mu);
	if (!e) {
		free(f->slot);
		f->slot = NULL;
		return STORE_NOMEM;
	}
	return STORE_OK;
}

/* The record's value: what a rollback needs, and the times. */
static char *record_value(const struct er_inflight_view *v, long long since, long long alive)
{
	json_t *o =
	    json_pack("{s:s, s:s, s:s, s:s, s:I, s:I}", "component", v->component, "view", v->id,
		      "resdir", v->resdir, "root", v->root, "since", since, "alive", alive);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

enum etcd_err er_inflight_mark(struct etcd_store *es, struct er_inflight *f,
			       const struct er_inflight_view *v)
{
	long long now = (long long)time(NULL);
	if (f->key && now - f->alive < ER_INFLIGHT_REFRESH_S)
		return ETCD_OK;
	if (!f->key) {
		unsigned long long seq = atomic_fetch_add(&es->inflight_seq, 1);
		f->key = str_printf("%s/r/%s/%s-%llu", es->side, es->node, es->instance, seq);
		if (!f->key)
			return ETCD_NOMEM;
		f->since = now;
		pthread_mutex_lock(&es->inflight_mu);
		bool ok = strmap_put(&es->live_records, f->key, NULL) != NULL;
		pthread_mutex_unlock(&es->inflight_mu);
		if (!ok) {
			free(f->key);
			f->key = NULL;
			return ETCD_NOMEM;
		}
	}
	char *value = record_value(v, f->since, now);
	if (!value)
		return ETCD_NOMEM;
	struct er_plan p = {0};
	er_plan_put(&p, f->key, value, strlen(value));
	bool ok = true;
	enum etcd_err e = er_plan_run(es, &p, &ok);
	er_plan_free(&p);
	free(value);
	if (e == ETCD_OK)
		f->alive = now;
	return e;
}

void er_inflight_plan_done(struct er_plan *p, const struct er_inflight *f)
{
	if (f->key)
		er_plan_delete(p, f->key);
}

/* ---- rolling an abandoned replace back ---- */

/* Does the component's view set over resdir hold the view named id? */
static enum etcd_err view_exists(struct etcd_store *es, const struct er_inflight_view *v, bool *yes,
				 int64_t *mod)
{
	*yes = false;
	*mod = 0;
	char *key = er_views_key(es, v->component, v->resdir);
	if (!key)
		return ETCD_NOMEM;
	struct etcd_range_result r;
	enum etcd_err e = etcd_range(es->c, key, strlen(key), NULL, &r);
	free(key);
	if (e != ETCD_OK)
		return e;
	struct view_set set = {0};
	if (r.n) {
		*mod = r.kvs[0].mod_revision;
		if (view_set_decode(r.kvs[0].value, r.kvs[0].value_len, &set) == 0)
			for (size_t i = 0; i < set.n && !*yes; i++) {
				char id[VIEW_ID_LEN + 1];
				view_rec_id(v->resdir, &set.v[i], id);
				*yes = !strcmp(id, v->id);
			}
	}
	view_set_free(&set);
	etcd_range_result_free(&r);
	return ETCD_OK;
}

/* One batch of holdings loses the view's id, guarded also by the view set
 * as read: a commit of the same view meanwhile stops the rollback. */
static enum etcd_err withdraw_batch(struct etcd_store *es, const struct er_inflight_view *v,
				    char **objkeys, size_t n, const char *views_key,
				    int64_t views_mod, bool *view_changed)
{
	struct er_target t[ER_BATCH];
	enum etcd_err e = ETCD_OK;
	for (int attempt = 0; attempt < ER_RETRIES; attempt++) {
		memset(t, 0, sizeof t);
		for (size_t i = 0; i < n; i++)
			t[i].objkey = objkeys[i];
		struct etcd_range_result vr = {0};
		e = er_read_targets(es, v->component, t, n, views_key, &vr);
		int64_t now_mod = vr.n ? vr.kvs[0].mod_revision : 0;
		etcd_range_result_free(&vr);
		if (e == ETCD_OK && now_mod != views_mod) {
			*view_changed = true;
			er_targets_free(t, n);
			return ETCD_OK;
		}
		struct er_plan p = {0};
		for (size_t i = 0; e == ETCD_OK && i < n; i++)
			if (t[i].hold.present && er_reasons_has(t[i].hold.reasons, v->id))
				er_plan_withdraw(es, &p, v->component, objkeys[i], &t[i], v->id);
		bool ok = true;
		if (e == ETCD_OK && p.nops) {
			er_plan_same(&p, views_key, views_mod);
			e = er_plan_run(es, &p, &ok);
		}
		er_plan_free(&p);
		er_targets_free(t, n);
		if (e != ETCD_OK || ok)
			return e;
		er_backoff(es, attempt);
	}
	return e == ETCD_OK ? ETCD_ERROR : e;
}

enum etcd_err er_inflight_rollback(struct etcd_store *es, const struct er_inflight_view *v)
{
	bool exists;
	int64_t views_mod;
	enum etcd_err e = view_exists(es, v, &exists, &views_mod);
	if (e != ETCD_OK || exists)
		return e; /* the view's membership explains the id */
	char *views_key = er_views_key(es, v->component, v->resdir);
	struct er_keys held = {0};
	e = views_key ? er_held_keys(es, v->component, v->root, &held) : ETCD_NOMEM;
	bool changed = false;
	for (size_t off = 0; e == ETCD_OK && !changed && off < held.n; off += ER_BATCH) {
		size_t cnt = held.n - off < ER_BATCH ? held.n - off : ER_BATCH;
		e = withdraw_batch(es, v, held.v + off, cnt, views_key, views_mod, &changed);
	}
	er_keys_free(&held);
	free(views_key);
	return e;
}

void er_inflight_leave(struct etcd_store *es, struct er_inflight *f,
		       const struct er_inflight_view *v, bool committed)
{
	if (!f->slot)
		return;
	pthread_mutex_lock(&es->inflight_mu);
	struct strmap_entry *e = strmap_get(&es->views_busy, f->slot);
	/* another replace of the same view in flight: its commit or its own
	 * rollback settles the view's id, and the record waits for recovery */
	bool alone = e && e->num == 1;
	if (!committed && f->key && alone)
		e->value = (void *)1; /* nobody else starts meanwhile */
	pthread_mutex_unlock(&es->inflight_mu);
	if (!committed && f->key && alone) {
		enum etcd_err err = er_inflight_rollback(es, v);
		if (err == ETCD_OK) {
			struct er_plan p = {0};
			er_plan_delete(&p, f->key);
			bool ok = true;
			err = er_plan_run(es, &p, &ok);
			er_plan_free(&p);
		}
		if (err != ETCD_OK)
			log_warn("etcd store: the unfinished list of %s's view %s stays in etcd "
				 "(%s); rolled back when etcd takes writes again",
				 v->component, v->id, etcd_strerror(err));
	}
	pthread_mutex_lock(&es->inflight_mu);
	e = strmap_get(&es->views_busy, f->slot);
	if (e) {
		e->value = NULL;
		if (--e->num == 0)
			strmap_del(&es->views_busy, f->slot);
	}
	if (f->key)
		strmap_del(&es->live_records, f->key);
	pthread_cond_broadcast(&es->inflight_cv);
	pthread_mutex_unlock(&es->inflight_mu);
	free(f->slot);
	free(f->key);
	memset(f, 0, sizeof *f);
}

/* ---- reading the records ---- */

static void inflight_view_free(struct er_inflight_view *v)
{
	free(v->component);
	free(v->id);
	free(v->resdir);
	free(v->root);
}

int er_inflight_parse(const struct etcd_kv *kv, size_t side_len, struct er_inflight_record *out)
{
	memset(out, 0, sizeof *out);
	/* <side>/r/<node>/<instance>-<seq> */
	if (kv->key_len <= side_len + 3)
		return -1;
	const char *node = kv->key + side_len + 3;
	const char *slash = strchr(node, '/');
	const char *dash = slash ? strrchr(slash, '-') : NULL;
	if (!slash || slash == node || !dash)
		return -1;
	json_t *o = json_loadb(kv->value ? kv->value : "", kv->value_len, 0, NULL);
	const char *comp = NULL, *id = NULL, *resdir = NULL, *root = NULL;
	json_int_t since = 0, alive = 0;
	int rc = o && json_unpack(o, "{s:s, s:s, s:s, s:s, s:I, s:I}", "component", &comp, "view",
				  &id, "resdir", &resdir, "root", &root, "since", &since, "alive",
				  &alive) == 0
		     ? 0
		     : -1;
	if (rc == 0 && strlen(id) != VIEW_ID_LEN)
		rc = -1;
	if (rc == 0) {
		out->node = strndup(node, (size_t)(slash - node));
		out->instance = strndup(slash + 1, (size_t)(dash - slash - 1));
		out->v.component = strdup(comp);
		out->v.id = strdup(id);
		out->v.resdir = strdup(resdir);
		out->v.root = strdup(root);
		out->since = since;
		out->alive = alive;
		out->mod = kv->mod_revision;
		if (!out->node || !out->instance || !out->v.component || !out->v.id ||
		    !out->v.resdir || !out->v.root)
			rc = -1;
	}
	json_decref(o);
	if (rc < 0)
		er_inflight_record_free(out);
	return rc;
}

void er_inflight_record_free(struct er_inflight_record *r)
{
	free(r->node);
	free(r->instance);
	inflight_view_free(&r->v);
	memset(r, 0, sizeof *r);
}

/* ---- recovery: any hub, now and then ---- */

struct records {
	struct etcd_kv *kv;
	size_t n, cap;
};

static int record_take(void *ctx, const struct etcd_kv *kv)
{
	struct records *r = ctx;
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 8;
		struct etcd_kv *v = realloc(r->kv, cap * sizeof *v);
		if (!v)
			return -1;
		r->kv = v;
		r->cap = cap;
	}
	struct etcd_kv *c = &r->kv[r->n];
	*c = *kv;
	c->key = strndup(kv->key, kv->key_len);
	c->value = strndup(kv->value ? kv->value : "", kv->value_len);
	if (!c->key || !c->value) {
		free(c->key);
		free(c->value);
		return -1;
	}
	r->n++;
	return 0;
}

/* Is this record's replace over without a commit? */
static bool abandoned(struct etcd_store *es, const struct er_inflight_record *rec, const char *key,
		      long abandoned_after_s, long long now)
{
	if (strcmp(rec->node, es->node))
		return now - rec->alive >= abandoned_after_s;
	if (strcmp(rec->instance, es->instance))
		return true; /* this node's previous run */
	pthread_mutex_lock(&es->inflight_mu);
	bool live = strmap_get(&es->live_records, key) != NULL;
	pthread_mutex_unlock(&es->inflight_mu);
	return !live;
}

/* Roll back one abandoned record and delete it; for this node, only while
 * no replace of the same view is in flight (it waits for the next round
 * otherwise).  1 done, 0 left for later, -1 etcd failed. */
static int recover_one(struct etcd_store *es, const struct er_inflight_record *rec, const char *key)
{
	bool own = !strcmp(rec->node, es->node);
	char *slot = own ? slot_name(rec->v.component, rec->v.id) : NULL;
	if (own && !slot)
		return -1;
	bool go = true;
	if (own) {
		pthread_mutex_lock(&es->inflight_mu);
		struct strmap_entry *e = strmap_get(&es->views_busy, slot);
		go = !e;
		if (go && (e = strmap_put(&es->views_busy, slot, (void *)1)) == NULL)
			go = false;
		pthread_mutex_unlock(&es->inflight_mu);
		if (!go) {
			free(slot);
			return 0;
		}
	}
	/* Another node's records are written as that node writes them. */
	struct etcd_store as = {
	    .c = es->c, .prefix = es->prefix, .side = es->side, .node = rec->node};
	enum etcd_err e = er_inflight_rollback(own ? es : &as, &rec->v);
	bool ok = true;
	if (e == ETCD_OK) {
		struct er_plan p = {0};
		er_plan_same(&p, key, rec->mod);
		er_plan_delete(&p, key);
		e = er_plan_run(es, &p, &ok);
		er_plan_free(&p);
	}
	if (own) {
		pthread_mutex_lock(&es->inflight_mu);
		strmap_del(&es->views_busy, slot);
		pthread_cond_broadcast(&es->inflight_cv);
		pthread_mutex_unlock(&es->inflight_mu);
		free(slot);
	}
	if (e != ETCD_OK)
		return -1;
	if (ok)
		log_info("etcd store: rolled back the unfinished list of %s/%s's view %s (%s), "
			 "started %lld",
			 rec->node, rec->v.component, rec->v.id, rec->v.resdir, rec->since);
	return ok ? 1 : 0;
}

long etcd_store_recover(struct store *s, long abandoned_after_s)
{
	struct etcd_store *es = es_of(s);
	char *prefix = str_printf("%s/r/", es->side);
	if (!prefix)
		return -1;
	struct records recs = {0};
	enum etcd_err e = er_range_each(es->c, prefix, strlen(prefix), false, record_take, &recs);
	long done = e == ETCD_OK ? 0 : -1;
	long long now = (long long)time(NULL);
	for (size_t i = 0; i < recs.n; i++) {
		struct er_inflight_record rec;
		if (done >= 0 && er_inflight_parse(&recs.kv[i], strlen(es->side), &rec) == 0) {
			if (abandoned(es, &rec, recs.kv[i].key, abandoned_after_s, now)) {
				int rc = recover_one(es, &rec, recs.kv[i].key);
				done = rc < 0 ? -1 : done + rc;
			}
			er_inflight_record_free(&rec);
		} else if (done >= 0) {
			log_warn("etcd store: unreadable replace record %s left alone",
				 recs.kv[i].key);
		}
		free(recs.kv[i].key);
		free(recs.kv[i].value);
	}
	free(recs.kv);
	free(prefix);
	return done;
}
