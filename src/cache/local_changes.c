/*
 * local_changes.c - the journal of the hub's own offline changes and their
 * resourceVersions, see local_changes.h for the scheme.
 *
 * Plain data: one array of entries (one per component's object, its latest
 * local rv), one range of issued rvs, one small array of rvs of the range
 * the cloud has used since (those are the cloud's, not ours).  The journal
 * is small (the objects this node changed: its pods, its Node and Lease,
 * the EndpointSlices of its pods), so it is saved whole, as one JSON
 * document, on every change.
 */
#include "cache/local_changes.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/meta.h"
#include "util/clock.h"
#include "util/log.h"

#define JOURNAL_PATH "/yurthub/local-changes"
/* The cloud's rvs inside the issued range that the hub passes on as such;
 * beyond this many, the range is retired. */
#define CLOUD_IN_RANGE_MAX 256
/* How long, once the cloud answers, an issued rv is answered 410: every
 * client's watch ended when the cloud came back, and resumes in seconds. */
#define RANGE_ONLINE_MS (10 * 60 * 1000)

struct local_changes {
	struct store *store;
	pthread_mutex_t lock;
	struct local_change *v;
	size_t n, cap;
	atomic_size_t n_pub;  /* n, for the lock-free "nothing journaled" check */
	uint64_t first, last; /* issued local rvs; first == 0: none in use */
	uint64_t max_seen;    /* the newest rv known: the cloud's, or issued */
	bool list_seen;	      /* a cloud list this run: max_seen covers the store */
	uint64_t cloud_in_range[CLOUD_IN_RANGE_MAX];
	size_t n_cloud_in_range;
	long long online_since_ms; /* first online check since the last claim */
	/* gvrs whose stored rvs were read (an offline start) */
	char **scanned;
	size_t n_scanned;
};

static void change_free(struct local_change *c)
{
	free(c->component);
	free(c->group);
	free(c->version);
	free(c->resource);
	free(c->namespace);
	free(c->name);
	memset(c, 0, sizeof *c);
}

void local_changes_list_free(struct local_change *v, long n)
{
	for (long i = 0; i < n; i++)
		change_free(&v[i]);
	free(v);
}

static int change_set(struct local_change *c, const char *comp, const char *g, const char *v,
		      const char *r, const char *ns, const char *name, uint64_t rv)
{
	c->component = strdup(comp ? comp : "");
	c->group = strdup(g ? g : "");
	c->version = strdup(v ? v : "");
	c->resource = strdup(r ? r : "");
	c->namespace = strdup(ns ? ns : "");
	c->name = strdup(name ? name : "");
	c->rv = rv;
	if (c->component && c->group && c->version && c->resource && c->namespace && c->name)
		return 0;
	change_free(c);
	return -1;
}

static int change_copy(struct local_change *to, const struct local_change *from)
{
	return change_set(to, from->component, from->group, from->version, from->resource,
			  from->namespace, from->name, from->rv);
}

static bool same_key(const struct local_change *c, const struct store_key *k)
{
	return !strcmp(c->component, k->component ? k->component : "") &&
	       !strcmp(c->group, k->group ? k->group : "") &&
	       !strcmp(c->resource, k->resource ? k->resource : "") &&
	       !strcmp(c->namespace, k->namespace ? k->namespace : "") &&
	       !strcmp(c->name, k->name ? k->name : "");
}

static bool of_gvr(const struct local_change *c, const struct store_gvr *gvr)
{
	return !strcmp(c->group, gvr->group ? gvr->group : "") &&
	       !strcmp(c->resource, gvr->resource ? gvr->resource : "");
}

/* ---- the journal in the store ---- */

static json_t *journal_json(const struct local_changes *lc)
{
	json_t *doc = json_pack("{s:I, s:I, s:I, s:[], s:[]}", "first", (json_int_t)lc->first,
				"last", (json_int_t)lc->last, "maxSeen", (json_int_t)lc->max_seen,
				"cloudRvs", "changes");
	json_t *cloud = doc ? json_object_get(doc, "cloudRvs") : NULL;
	for (size_t i = 0; cloud && i < lc->n_cloud_in_range; i++) {
		if (json_array_append_new(cloud, json_integer((json_int_t)lc->cloud_in_range[i])) <
		    0) {
			json_decref(doc);
			return NULL;
		}
	}
	json_t *arr = doc ? json_object_get(doc, "changes") : NULL;
	for (size_t i = 0; arr && i < lc->n; i++) {
		const struct local_change *c = &lc->v[i];
		json_t *e =
		    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I}", "component", c->component,
			      "group", c->group, "version", c->version, "resource", c->resource,
			      "namespace", c->namespace, "name", c->name, "rv", (json_int_t)c->rv);
		if (!e || json_array_append_new(arr, e) < 0) {
			json_decref(doc);
			return NULL;
		}
	}
	return doc;
}

/* Save the journal; 0 or -1.  Called with the lock held. */
static int save_locked(struct local_changes *lc)
{
	json_t *doc = journal_json(lc);
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (!text)
		return -1;
	enum store_err e = store_save_cluster_info(lc->store, JOURNAL_PATH, text, strlen(text));
	free(text);
	if (e != STORE_OK) {
		log_warn("local changes: the journal is not saved: %s", store_strerror(e));
		return -1;
	}
	return 0;
}

static uint64_t json_rv(json_t *o, const char *field)
{
	json_int_t v = json_integer_value(json_object_get(o, field));
	return v > 0 ? (uint64_t)v : 0;
}

/* A new entry at the end of the journal; 0 or -1 (ENOMEM).  Lock held, or
 * the journal not yet shared (load). */
static int append_locked(struct local_changes *lc, const char *comp, const char *g, const char *v,
			 const char *r, const char *ns, const char *name, uint64_t rv)
{
	if (lc->n == lc->cap) {
		size_t cap = lc->cap ? lc->cap * 2 : 16;
		struct local_change *grown = realloc(lc->v, cap * sizeof *grown);
		if (!grown)
			return -1;
		lc->v = grown;
		lc->cap = cap;
	}
	if (change_set(&lc->v[lc->n], comp, g, v, r, ns, name, rv) < 0)
		return -1;
	lc->n++;
	return 0;
}

/* Take entry c out of the journal (the last one takes its place).  Lock
 * held. */
static void remove_locked(struct local_changes *lc, struct local_change *c)
{
	change_free(c);
	*c = lc->v[--lc->n];
	atomic_store(&lc->n_pub, lc->n);
}

static void load_entry(struct local_changes *lc, json_t *e)
{
	const char *f[6] = {"component", "group", "version", "resource", "namespace", "name"};
	const char *s[6];
	for (int i = 0; i < 6; i++)
		if (!(s[i] = json_string_value(json_object_get(e, f[i]))))
			return;
	uint64_t rv = json_rv(e, "rv");
	if (!*s[0] || !*s[3] || !*s[5] || !rv)
		return;
	append_locked(lc, s[0], s[1], s[2], s[3], s[4], s[5], rv);
}

static void load(struct local_changes *lc)
{
	struct buf text = BUF_INIT;
	enum store_err e = store_get_cluster_info(lc->store, JOURNAL_PATH, &text);
	if (e != STORE_OK) {
		if (e != STORE_NOT_FOUND)
			log_warn("local changes: the journal is not read: %s", store_strerror(e));
		buf_free(&text);
		return;
	}
	json_t *doc = json_loadb(buf_cstr(&text), text.len, 0, NULL);
	buf_free(&text);
	json_t *arr = json_object_get(doc, "changes");
	if (!json_is_object(doc) || !json_is_array(arr)) {
		log_warn("local changes: the journal does not parse; starting without it");
		json_decref(doc);
		return;
	}
	lc->first = json_rv(doc, "first");
	lc->last = json_rv(doc, "last");
	if (lc->first > lc->last)
		lc->first = lc->last = 0;
	lc->max_seen = json_rv(doc, "maxSeen");
	if (lc->last > lc->max_seen)
		lc->max_seen = lc->last;
	size_t i;
	json_t *entry;
	json_array_foreach(arr, i, entry) load_entry(lc, entry);
	json_array_foreach(json_object_get(doc, "cloudRvs"), i, entry)
	{
		json_int_t rv = json_integer_value(entry);
		if (lc->first && rv >= (json_int_t)lc->first && rv <= (json_int_t)lc->last &&
		    lc->n_cloud_in_range < CLOUD_IN_RANGE_MAX)
			lc->cloud_in_range[lc->n_cloud_in_range++] = (uint64_t)rv;
	}
	json_decref(doc);
	atomic_store(&lc->n_pub, lc->n);
}

struct local_changes *local_changes_open(struct store *s)
{
	struct local_changes *lc = calloc(1, sizeof *lc);
	if (!lc)
		return NULL;
	lc->store = s;
	if (pthread_mutex_init(&lc->lock, NULL) != 0) {
		free(lc);
		return NULL;
	}
	load(lc);
	return lc;
}

void local_changes_free(struct local_changes *lc)
{
	if (!lc)
		return;
	local_changes_list_free(lc->v, (long)lc->n);
	for (size_t i = 0; i < lc->n_scanned; i++)
		free(lc->scanned[i]);
	free(lc->scanned);
	pthread_mutex_destroy(&lc->lock);
	free(lc);
}

/* No local rv is in use any more.  Lock held. */
static void retire_locked(struct local_changes *lc)
{
	lc->first = lc->last = 0;
	lc->n_cloud_in_range = 0;
	save_locked(lc);
}

/* ---- what the cloud says ---- */

void local_changes_saw_cloud_rv(struct local_changes *lc, uint64_t rv, bool from_list)
{
	if (!lc || !rv)
		return;
	pthread_mutex_lock(&lc->lock);
	if (rv > lc->max_seen)
		lc->max_seen = rv;
	if (from_list)
		lc->list_seen = true;
	/* an rv of the issued range that the cloud uses too is the cloud's */
	if (lc->first && rv >= lc->first && rv <= lc->last) {
		bool known = false;
		for (size_t i = 0; i < lc->n_cloud_in_range && !known; i++)
			known = lc->cloud_in_range[i] == rv;
		if (!known && lc->n_cloud_in_range < CLOUD_IN_RANGE_MAX) {
			lc->cloud_in_range[lc->n_cloud_in_range++] = rv;
			save_locked(lc);
		} else if (!known) {
			retire_locked(lc); /* the cloud has gone through it */
		}
	}
	pthread_mutex_unlock(&lc->lock);
}

bool local_changes_rv_issued(struct local_changes *lc, uint64_t rv)
{
	if (!lc || !rv)
		return false;
	bool issued = false;
	pthread_mutex_lock(&lc->lock);
	if (lc->first) {
		long long now = clock_now_ms();
		if (!lc->online_since_ms)
			lc->online_since_ms = now;
		if (now - lc->online_since_ms > RANGE_ONLINE_MS)
			retire_locked(lc);
	}
	if (lc->first && rv >= lc->first && rv <= lc->last) {
		issued = true;
		for (size_t i = 0; i < lc->n_cloud_in_range && issued; i++)
			issued = lc->cloud_in_range[i] != rv;
	}
	pthread_mutex_unlock(&lc->lock);
	return issued;
}

/* ---- issuing ---- */

static int max_view_rv(void *ctx, const struct store_view_state *v)
{
	uint64_t *max = ctx;
	if (v->rv > *max)
		*max = v->rv;
	return 0;
}

static int max_object_rv(void *ctx, const struct store_key *key, const char *data, size_t len)
{
	(void)key;
	uint64_t *max = ctx, rv = 0;
	if (kube_meta_rv(data, len, &rv) == 0 && rv > *max)
		*max = rv;
	return 0;
}

struct scan {
	struct store *store;
	const struct store_gvr *gvr;
	uint64_t max;
};

static int scan_component(void *ctx, const char *component)
{
	struct scan *sc = ctx;
	store_list_views(sc->store, component, sc->gvr, max_view_rv, &sc->max);
	struct store_key_info info = {
	    component, sc->gvr->group, sc->gvr->version, sc->gvr->resource, "", ""};
	struct store_key root;
	if (store_key_build(sc->store, &info, &root) == STORE_OK) {
		store_list(sc->store, &root, max_object_rv, &sc->max);
		store_key_free(&root);
	}
	return 0;
}

/* Started offline: nothing this run says how far the cloud's rvs went, so
 * read the newest stored of the resource (once per resource and run: a
 * client compares the rvs of one resource). */
static void scan_locked(struct local_changes *lc, const struct store_key *k)
{
	struct buf id = BUF_INIT;
	if (buf_printf(&id, "%s/%s", k->group ? k->group : "", k->resource) < 0) {
		buf_free(&id);
		return;
	}
	for (size_t i = 0; i < lc->n_scanned; i++)
		if (!strcmp(lc->scanned[i], id.data)) {
			buf_free(&id);
			return;
		}
	char **v = realloc(lc->scanned, (lc->n_scanned + 1) * sizeof *v);
	if (!v) {
		buf_free(&id);
		return;
	}
	lc->scanned = v;
	lc->scanned[lc->n_scanned++] = buf_steal(&id);
	struct store_gvr gvr = {k->group, k->version, k->resource};
	struct scan sc = {lc->store, &gvr, 0};
	store_list_components(lc->store, scan_component, &sc);
	if (sc.max > lc->max_seen)
		lc->max_seen = sc.max;
}

static struct local_change *find_locked(struct local_changes *lc, const struct store_key *k)
{
	for (size_t i = 0; i < lc->n; i++)
		if (same_key(&lc->v[i], k))
			return &lc->v[i];
	return NULL;
}

static int journal_locked(struct local_changes *lc, const struct store_key *k, uint64_t rv)
{
	struct local_change *c = find_locked(lc, k);
	if (c) {
		c->rv = rv;
		return 0;
	}
	return append_locked(lc, k->component, k->group, k->version, k->resource, k->namespace,
			     k->name, rv);
}

/* The journal entries for keys at rv; the old rvs in was[] (0: a new
 * entry), for a revert of the first *done.  0 or -1. */
static int journal_all_locked(struct local_changes *lc, const struct store_key *keys, size_t n,
			      uint64_t rv, uint64_t *was, size_t *done)
{
	for (*done = 0; *done < n; (*done)++) {
		struct local_change *c = find_locked(lc, &keys[*done]);
		was[*done] = c ? c->rv : 0;
		if (journal_locked(lc, &keys[*done], rv) < 0)
			return -1;
	}
	return 0;
}

/* Undo journal_all_locked for the first n keys. */
static void unjournal_locked(struct local_changes *lc, const struct store_key *keys, size_t n,
			     const uint64_t *was)
{
	for (size_t i = n; i-- > 0;) {
		struct local_change *c = find_locked(lc, &keys[i]);
		if (c && was[i]) {
			c->rv = was[i];
		} else if (c) {
			remove_locked(lc, c);
		}
	}
}

uint64_t local_changes_claim(struct local_changes *lc, const struct store_key *keys, size_t n)
{
	uint64_t *was = lc && n ? calloc(n, sizeof *was) : NULL;
	if (!was)
		return 0;
	pthread_mutex_lock(&lc->lock);
	if (!lc->list_seen)
		scan_locked(lc, &keys[0]);
	uint64_t rv = lc->max_seen + 1;
	/* the range, to put back on failure */
	uint64_t first = lc->first, last = lc->last;
	size_t n_cloud = lc->n_cloud_in_range, done;
	int rc = journal_all_locked(lc, keys, n, rv, was, &done);
	/* a range the cloud has gone past since is over: a new one starts, so
	 * that the cloud's rvs in between are not taken for local ones */
	if (!lc->first || lc->max_seen > lc->last) {
		lc->first = rv;
		lc->n_cloud_in_range = 0;
	}
	lc->last = rv;
	if (rc == 0)
		rc = save_locked(lc);
	if (rc == 0) {
		lc->max_seen = rv;
		lc->online_since_ms = 0;
	} else {
		/* unsaved: the rv is not issued, and the journal is as it was */
		unjournal_locked(lc, keys, done, was);
		lc->first = first;
		lc->last = last;
		lc->n_cloud_in_range = n_cloud;
		rv = 0;
	}
	atomic_store(&lc->n_pub, lc->n);
	pthread_mutex_unlock(&lc->lock);
	free(was);
	return rv;
}

/* ---- reading the journal ---- */

static int by_rv(const void *a, const void *b)
{
	const struct local_change *x = a, *y = b;
	if (x->rv != y->rv)
		return x->rv < y->rv ? -1 : 1;
	int c = strcmp(x->namespace, y->namespace);
	return c ? c : strcmp(x->name, y->name);
}

typedef bool (*change_pick_fn)(const struct local_change *c, const void *arg);

/* The entries fn picks, copied, sorted by rv; n or -1. */
static long pick(struct local_changes *lc, change_pick_fn fn, const void *arg,
		 struct local_change **out)
{
	*out = NULL;
	if (!lc || !atomic_load(&lc->n_pub))
		return 0;
	long n = 0;
	pthread_mutex_lock(&lc->lock);
	struct local_change *v = lc->n ? calloc(lc->n, sizeof *v) : NULL;
	for (size_t i = 0; v && i < lc->n; i++)
		if (fn(&lc->v[i], arg) && change_copy(&v[n], &lc->v[i]) == 0)
			n++;
	size_t had = lc->n;
	pthread_mutex_unlock(&lc->lock);
	if (!v)
		return had ? -1 : 0;
	qsort(v, (size_t)n, sizeof *v, by_rv);
	*out = v;
	return n;
}

struct since_arg {
	const struct store_gvr *gvr;
	const char *ns;
	uint64_t after;
};

static bool pick_since(const struct local_change *c, const void *p)
{
	const struct since_arg *a = p;
	return c->rv > a->after && of_gvr(c, a->gvr) && (!*a->ns || !strcmp(a->ns, c->namespace));
}

long local_changes_since(struct local_changes *lc, const struct store_gvr *gvr, const char *ns,
			 uint64_t after, struct local_change **out)
{
	struct since_arg a = {gvr, ns ? ns : "", after};
	long n = pick(lc, pick_since, &a, out);
	/* one per object and rv: the components' copies of one change */
	long w = 0;
	for (long r = 0; r < n; r++) {
		struct local_change *c = &(*out)[r];
		if (w && (*out)[w - 1].rv == c->rv &&
		    !strcmp((*out)[w - 1].namespace, c->namespace) &&
		    !strcmp((*out)[w - 1].name, c->name)) {
			change_free(c);
			continue;
		}
		if (w != r) {
			(*out)[w] = *c;
			memset(c, 0, sizeof *c);
		}
		w++;
	}
	return n < 0 ? n : w;
}

struct of_arg {
	const char *component;
	const struct store_gvr *gvr;
	const char *ns;
};

static bool pick_of(const struct local_change *c, const void *p)
{
	const struct of_arg *a = p;
	return !strcmp(c->component, a->component) && of_gvr(c, a->gvr) &&
	       (!*a->ns || !strcmp(a->ns, c->namespace));
}

long local_changes_of(struct local_changes *lc, const char *component, const struct store_gvr *gvr,
		      const char *ns, struct local_change **out)
{
	struct of_arg a = {component, gvr, ns ? ns : ""};
	return pick(lc, pick_of, &a, out);
}

uint64_t local_changes_last_rv(struct local_changes *lc, const struct store_gvr *gvr)
{
	if (!lc || !atomic_load(&lc->n_pub))
		return 0;
	uint64_t max = 0;
	pthread_mutex_lock(&lc->lock);
	for (size_t i = 0; i < lc->n; i++)
		if (of_gvr(&lc->v[i], gvr) && lc->v[i].rv > max)
			max = lc->v[i].rv;
	pthread_mutex_unlock(&lc->lock);
	return max;
}

bool local_changes_is_local(struct local_changes *lc, const struct store_key *key)
{
	if (!lc || !atomic_load(&lc->n_pub))
		return false;
	pthread_mutex_lock(&lc->lock);
	bool found = find_locked(lc, key) != NULL;
	pthread_mutex_unlock(&lc->lock);
	return found;
}

void local_changes_write_failed(struct local_changes *lc, const struct store_key *key,
				uint64_t stored_rv)
{
	if (!lc)
		return;
	pthread_mutex_lock(&lc->lock);
	struct local_change *c = find_locked(lc, key);
	if (c && lc->first && stored_rv >= lc->first && stored_rv <= lc->last) {
		c->rv = stored_rv; /* an earlier local change, still there */
		save_locked(lc);
	} else if (c) {
		remove_locked(lc, c);
		save_locked(lc);
	}
	pthread_mutex_unlock(&lc->lock);
}

void local_changes_settled(struct local_changes *lc, const struct store_key *key)
{
	if (!lc || !atomic_load(&lc->n_pub))
		return;
	pthread_mutex_lock(&lc->lock);
	struct local_change *c = find_locked(lc, key);
	if (c) {
		remove_locked(lc, c);
		save_locked(lc);
	}
	pthread_mutex_unlock(&lc->lock);
}
