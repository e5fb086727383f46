/*
 * etcd_internal.h - what the files of the etcd store share (etcd.c,
 * etcd_records.c, etcd_replace.c).  Not for the rest of the hub.
 *
 * Records, with S = "/yurthub" + prefix (beside, not under, what
 * kube-apiserver reads):
 *
 *   <prefix>/<resource path>/[<ns>/]<name>    the object, as the cloud sent it
 *   S/m<object key>        "<rv, 20 digits> <node>/<component> ... [@s<16 hex>]"
 *                          its resourceVersion, who holds it, and the
 *                          summary of its selectable document (the index
 *                          of offline lists, see er_meta.bloom)
 *   S/h/<node>/<component><object key>       the same holding, indexed by
 *                          holder: what a component holds is one range read;
 *                          the value says why it holds it (its reasons: the
 *                          ids of the views that delivered it, "o" for its
 *                          own reads and writes)
 *   S/v/<node>/<component>/<resource dir>    the component's view set
 *   S/c/<node>/<component>                   the component has records
 *   S/ci<url path>                           cluster info
 *   S/r/<node>/<instance>-<seq>              a replace in flight (etcd_inflight.c)
 *
 * An object, its S/m record and its S/h records change only together, in
 * one Txn guarded by the S/m record's mod_revision as it was read (see
 * docs/etcd-store.md).
 */
#ifndef YURTHUB_STORAGE_ETCD_INTERNAL_H
#define YURTHUB_STORAGE_ETCD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "etcd/client.h"
#include "storage/etcd.h"
#include "storage/view.h"
#include "util/strmap.h"

#define ER_BATCH	 40	    /* objects per write Txn: 3 ops each, +2, under 128 */
#define ER_READS_MAX	 120	    /* range ops in one read-only Txn */
#define ER_TXN_BYTES	 (1u << 20) /* a write Txn's payload, under the 1.5 MiB default */
#define ER_RETRIES	 16
#define ER_RV_WIDTH	 20
#define ER_TOMBSTONE_TTL 600 /* seconds a tombstone is kept */

struct etcd_store {
	struct store base;
	struct etcd_client *c;
	char *prefix; /* "/registry" */
	char *side;   /* "/yurthub/registry" */
	char *node;
	atomic_ulong txns, read_txns, retries, splits;
	/* replaces in flight in this process (etcd_inflight.c) */
	char instance[17]; /* names this run in its replace records */
	atomic_ullong inflight_seq;
	bool inflight_ready;
	pthread_mutex_t inflight_mu;
	pthread_cond_t inflight_cv;
	struct strmap views_busy;   /* "<component> <view id>": replaces, rollback */
	struct strmap live_records; /* the S/r keys of this run's replaces */
};

static inline struct etcd_store *es_of(struct store *s)
{
	return (struct etcd_store *)s;
}

/* etcd's answer as a store error (logged when it is not a plain one). */
enum store_err er_fail(enum etcd_err e);
void er_backoff(struct etcd_store *es, int attempt);

/* ---- record keys (malloc'ed; NULL on ENOMEM) ---- */

char *er_meta_key(struct etcd_store *es, const char *objkey);
char *er_index_prefix(struct etcd_store *es, const char *component); /* S/h/<node>/<comp> */
char *er_index_key(struct etcd_store *es, const char *component, const char *objkey);
char *er_views_key(struct etcd_store *es, const char *component, const char *resdir);
char *er_registry_key(struct etcd_store *es, const char *component);

/* ---- a Txn under construction: compares, ops, the strings they use ---- */

struct er_plan {
	struct etcd_compare *cmp;
	struct etcd_op *ops;
	size_t ncmp, nops, capcmp, capops, bytes;
	char **owned;
	size_t nowned, capowned;
	bool oom;
};

void er_plan_free(struct er_plan *p);
/* Keep s (malloc'ed) for the plan's lifetime; s may be NULL (ENOMEM). */
const char *er_plan_keep(struct er_plan *p, char *s);
void er_plan_put(struct er_plan *p, const char *key, const char *value, size_t len);
void er_plan_delete(struct er_plan *p, const char *key);
/* key's mod_revision is still mod (0: key still absent) */
void er_plan_same(struct er_plan *p, const char *key, int64_t mod);
/* Run it; *ok says whether the compares held. */
enum etcd_err er_plan_run(struct etcd_store *es, struct er_plan *p, bool *ok);

/* ---- an object's S/m record ---- */

struct er_meta {
	char *key; /* S/m<object key> */
	bool present;
	int64_t mod; /* its mod_revision */
	uint64_t rv;
	char *holders; /* " node/comp node/comp" as stored ("" when none) */
	size_t nholders;
	bool ours;	      /* (this node, the component) is among them */
	long long deleted_at; /* a tombstone's time (0: none) */
	/* selector_bloom() of the object's selectable document at rv
	 * (kube/selectable.h), written with every copy of the object and kept
	 * while the copy stays.  An older version's writes drop it (they keep
	 * no '@' token), so a summary present is never stale; absent, the
	 * object may match any selector. */
	bool has_bloom;
	uint64_t bloom;
};

/* No holder left: the object was deleted at rv, and copies not newer than
 * that are stale (tombstones go after ER_TOMBSTONE_TTL, see etcd_store_gc). */
static inline bool er_meta_is_tombstone(const struct er_meta *m)
{
	return m->present && m->nholders == 0;
}

void er_meta_free(struct er_meta *m);
/* An S/m record as read (key not set); 0 or -1 (ENOMEM). */
int er_meta_parse(struct etcd_store *es, const struct etcd_kv *kv, struct er_meta *m);

/* Why a component holds an object: its S/h record's value, tokens
 * separated by spaces - the view ids (view_rec_id) of the views whose last
 * list or whose watch delivered it, and ER_REASON_SINGLE for its own reads
 * and writes.  A record an older version wrote has an empty value, read as
 * ER_REASON_LEGACY: held for every view whose selectors match the stored
 * copy (the rule of that version), until a list settles it. */
#define ER_REASON_SINGLE "o"
#define ER_REASON_LEGACY "*"

struct er_hold {
	char *key; /* S/h/<node>/<component><object key> */
	bool present;
	int64_t mod;
	char *reasons; /* as above, "" when absent */
};

void er_hold_free(struct er_hold *h);
bool er_reasons_has(const char *reasons, const char *token);
/* reasons with token added or removed (malloc'ed; NULL on ENOMEM). */
char *er_reasons_with(const char *reasons, const char *token);
char *er_reasons_without(const char *reasons, const char *token);

/* What one step reads and then writes for one object. */
struct er_target {
	const char *objkey;
	bool want_object;
	struct er_meta meta;
	struct er_hold hold;		 /* the component's S/h record */
	struct etcd_range_result object; /* when want_object */
};

void er_targets_free(struct er_target *t, size_t n);
/* Read the S/m records, the component's S/h records (and objects, where
 * wanted) of n targets, in read-only Txns.  extra_key, when set, is read in
 * the first of them into *extra (for a step that also updates a view set). */
enum etcd_err er_read_targets(struct etcd_store *es, const char *component, struct er_target *t,
			      size_t n, const char *extra_key, struct etcd_range_result *extra);

/* Every plan below compares the S/m record and the component's S/h record
 * as they were read: whatever changed either meanwhile makes the Txn fail,
 * and the step is read and planned again. */

/* A copy of an object to write, and what its summary is picked by. */
struct er_copy {
	const char *data;
	size_t len;
	uint64_t rv;
	const char *group, *resource;
};

/* Plan: the component holds the object, for reason (added to its reasons),
 * and the copy is written when there is one.  Returns whether a holding is
 * added (the component's S/c record is then due). */
bool er_plan_hold(struct etcd_store *es, struct er_plan *p, const char *component,
		  const char *objkey, const struct er_target *t, const struct er_copy *copy,
		  const char *reason);
/* Plan: the component lets go of the object, whatever its reasons; it goes
 * when nobody else holds it, leaving a tombstone at its stored rv. */
void er_plan_release(struct etcd_store *es, struct er_plan *p, const char *component,
		     const char *objkey, const struct er_target *t);
/* Plan: the object leaves one reason of the component's (a view's
 * membership); released when no reason is left. */
void er_plan_drop_reason(struct etcd_store *es, struct er_plan *p, const char *component,
			 const char *objkey, const struct er_target *t, const char *reason);

/* What a list of view V at rv R that lacked an object does to the
 * component's holding of it (store.h): a copy V matches, not newer than R,
 * is stale and released; one newer than R is left alone; otherwise it
 * leaves V's membership.  A legacy holding keeps its wildcard while another
 * of the component's views (others) matches the copy. */
struct er_vanish_rule {
	uint64_t list_rv;
	size_t root_len; /* object keys: resource root, then [<ns>/]<name> */
	const char *view_id;
	const struct view_matcher *self;
	const struct view_matcher *others;
	size_t nothers;
};
void er_plan_vanished(struct etcd_store *es, struct er_plan *p, const char *component,
		      const struct er_vanish_rule *rule, const struct er_target *t);

/* For each object key: release it (rule NULL) or apply the rule, in
 * guarded steps of ER_BATCH objects. */
enum store_err er_release(struct etcd_store *es, const char *component, char **objkeys, size_t n,
			  const struct er_vanish_rule *rule);

/* The rest of kv's key after prefix (plen bytes) and its length in *len:
 * NULL when the key does not start with prefix or nothing follows it.  An
 * answer is checked, never trusted to stay within the range asked for. */
const char *er_key_rest(const struct etcd_kv *kv, const char *prefix, size_t plen, size_t *len);

/* Every key under prefix (and its value, unless keys_only), a page of 1000
 * at a time, in key order, each handed to fn: 0 goes on, 1 stops, -1 stops
 * with ETCD_NOMEM. */
typedef int (*er_kv_fn)(void *ctx, const struct etcd_kv *kv);
enum etcd_err er_range_each(struct etcd_client *c, const char *prefix, size_t len, bool keys_only,
			    er_kv_fn fn, void *ctx);
/* The same, as etcd was at revision (0: now). */
enum etcd_err er_range_each_at(struct etcd_client *c, const char *prefix, size_t len,
			       bool keys_only, int64_t revision, er_kv_fn fn, void *ctx);

/* The object keys (node, component) holds under objprefix (which may be
 * ""), in key order; a list of malloc'ed strings. */
struct er_keys {
	char **v;
	size_t n, cap;
};
void er_keys_free(struct er_keys *k);
int er_keys_add(struct er_keys *k, const char *s, size_t len);
enum etcd_err er_held_keys(struct etcd_store *es, const char *component, const char *objprefix,
			   struct er_keys *out);

/* The id of a view (view_rec_id), as holdings name it.  STORE_OK, or the
 * view's error (a bad selector or name). */
enum store_err er_view_id(const struct store_view *view, char id[VIEW_ID_LEN + 1]);

/* Plan: the holding loses reason, as er_plan_drop_reason; when none is
 * left and nobody else holds the object, it goes without a tombstone (a
 * rollback of a list that did not finish: its copy is true in the cloud,
 * and a tombstone would refuse it at the next list). */
void er_plan_withdraw(struct etcd_store *es, struct er_plan *p, const char *component,
		      const char *objkey, const struct er_target *t, const char *reason);

/* ---- replaces in flight (etcd_inflight.c) ---- */

#define ER_INFLIGHT_REFRESH_S 30 /* a record's "alive" time is kept this fresh */

/* What a rollback of a replace needs. */
struct er_inflight_view {
	char *component;
	char *id;     /* the view's id in holdings */
	char *resdir; /* its S/v record's resource directory */
	char *root;   /* its collection: the object keys it covers */
};

/* A replace's registration, and its record once written. */
struct er_inflight {
	char *slot; /* in views_busy */
	char *key;  /* S/r/<node>/<instance>-<seq>, once written */
	long long since, alive;
};

/* A record as read. */
struct er_inflight_record {
	char *node, *instance;
	struct er_inflight_view v;
	long long since, alive;
	int64_t mod;
};

int er_inflight_init(struct etcd_store *es);
void er_inflight_fini(struct etcd_store *es);
/* Register a replace of the component's view (waiting while that view's
 * abandoned holdings are rolled back). */
enum store_err er_inflight_enter(struct etcd_store *es, struct er_inflight *f,
				 const char *component, const char *id);
/* Before a step that is not the replace's last: write the record, or
 * refresh it when older than ER_INFLIGHT_REFRESH_S. */
enum etcd_err er_inflight_mark(struct etcd_store *es, struct er_inflight *f,
			       const struct er_inflight_view *v);
/* Plan the record's deletion in the commit's last Txn. */
void er_inflight_plan_done(struct er_plan *p, const struct er_inflight *f);
/* The replace is over: not committed, its holdings are rolled back and its
 * record deleted (left for etcd_store_recover when etcd fails). */
void er_inflight_leave(struct etcd_store *es, struct er_inflight *f,
		       const struct er_inflight_view *v, bool committed);
/* Every holding of the view's component in its collection loses the view's
 * id, unless the view exists (its membership explains the id). */
enum etcd_err er_inflight_rollback(struct etcd_store *es, const struct er_inflight_view *v);
/* An S/r record (side_len: strlen(es->side)); 0, or -1 when unreadable. */
int er_inflight_parse(const struct etcd_kv *kv, size_t side_len, struct er_inflight_record *out);
void er_inflight_record_free(struct er_inflight_record *r);

/* The replace session (etcd_replace.c). */
enum store_err er_replace_begin(struct store *s, const struct store_view *view,
				struct store_replace **out);
enum store_err er_replace_add(struct store_replace *r, const struct store_item *item);
enum store_err er_replace_commit(struct store_replace *r, uint64_t list_rv);
void er_replace_abort(struct store_replace *r);

#endif
