/*
 * client.h - an etcd v3 client over etcd's gRPC-JSON gateway (/v3/...), on
 * libcurl.  Keys and values are plain bytes here; the client does the base64
 * of the gateway.  Several endpoints (--etcd-servers) with failover, TLS
 * (--etcd-cafile/--etcd-certfile/--etcd-keyfile), keep-alive connections
 * (one reusable handle per calling thread), a timeout on every call, and
 * etcd's errors turned into etcd_err values with a message.
 *
 * The operations are the few the etcd store needs: range, txn (compares and
 * put/delete/range operations, one level), deleterange, status, watch.
 */
#ifndef YURTHUB_ETCD_CLIENT_H
#define YURTHUB_ETCD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

enum etcd_err {
	ETCD_OK = 0,
	ETCD_UNAVAILABLE,  /* no endpoint answered (refused, timed out, TLS failed) */
	ETCD_TOO_MANY_OPS, /* "too many operations in txn request" (--max-txn-ops) */
	ETCD_TOO_LARGE,    /* "request is too large" (--max-request-bytes) or gRPC 429 */
	ETCD_NOSPACE,      /* "database space exceeded": the NOSPACE alarm (gRPC 8) */
	ETCD_COMPACTED,    /* "required revision has been compacted" */
	ETCD_PROTOCOL,     /* an answer that does not parse */
	ETCD_ERROR,        /* any other error etcd reported */
	ETCD_NOMEM,
};

struct etcd_client;

struct etcd_config {
	const char *const *endpoints; /* "http://127.0.0.1:2379", ... */
	size_t nendpoints;
	const char *ca_file, *cert_file, *key_file; /* NULL when unused */
	long timeout_ms;                            /* each call; 0: 5000 */
	long connect_timeout_ms;                    /* 0: 1000 */
};

struct etcd_client *etcd_client_new(const struct etcd_config *cfg, char **err);
void etcd_client_free(struct etcd_client *c);

/* etcd's NOSPACE alarm as this client meets it.  A full etcd refuses every
 * write with a put (deletes and reads go on) until an operator frees space
 * and disarms the alarm; a store writes on every watch event, so the
 * client says it itself, once a minute, with what to do and how many
 * writes were refused meanwhile (not once per write), and one line when a
 * write with a put succeeds again. */
struct etcd_nospace {
	bool now;              /* the latest write with a put was refused so */
	unsigned long refused; /* writes refused so since the client was made */
	int64_t since_ms;      /* clock_now_ms() of the first refusal of this spell */
};
void etcd_client_nospace(struct etcd_client *c, struct etcd_nospace *out);
/* The last error's message (thread-local), for logs. */
const char *etcd_last_error(void);
const char *etcd_strerror(enum etcd_err e);

/* One key-value as etcd returns it.  key and value are NUL-terminated
 * copies owned by the result that holds them. */
struct etcd_kv {
	char *key;
	size_t key_len;
	char *value;
	size_t value_len;
	int64_t create_revision, mod_revision, version;
};

struct etcd_range_result {
	struct etcd_kv *kvs;
	size_t n;
	bool more;
	int64_t count;
	int64_t revision; /* of the store when it answered */
};

void etcd_range_result_free(struct etcd_range_result *r);

struct etcd_range_opts {
	const char *range_end; /* NULL: the one key; "" (len 0): every key >= key */
	size_t range_end_len;
	int64_t limit;         /* 0: no limit */
	int64_t revision;      /* 0: latest */
	bool keys_only, count_only;
};

enum etcd_err etcd_range(struct etcd_client *c, const char *key, size_t key_len,
			 const struct etcd_range_opts *opts, struct etcd_range_result *out);

/* A prefix's range end: the prefix with its last byte incremented (as
 * etcdctl --prefix).  Appended to out. */
int etcd_prefix_end(const char *prefix, size_t len, struct buf *out);

/* ---- transactions ---- */

enum etcd_cmp_target { ETCD_CMP_VERSION, ETCD_CMP_CREATE, ETCD_CMP_MOD, ETCD_CMP_VALUE };
enum etcd_cmp_result { ETCD_CMP_EQUAL, ETCD_CMP_GREATER, ETCD_CMP_LESS, ETCD_CMP_NOT_EQUAL };

struct etcd_compare {
	enum etcd_cmp_target target;
	enum etcd_cmp_result result;
	const char *key;
	size_t key_len;
	const char *range_end; /* optional: compare over [key, range_end) */
	size_t range_end_len;
	int64_t number;      /* VERSION, CREATE, MOD */
	const char *value;   /* VALUE */
	size_t value_len;
};

enum etcd_op_kind { ETCD_OP_PUT, ETCD_OP_DELETE, ETCD_OP_RANGE };

struct etcd_op {
	enum etcd_op_kind kind;
	const char *key;
	size_t key_len;
	const char *value; /* PUT */
	size_t value_len;
	const char *range_end; /* DELETE, RANGE: optional range */
	size_t range_end_len;
};

struct etcd_txn {
	const struct etcd_compare *compare;
	size_t ncompare;
	const struct etcd_op *success, *failure;
	size_t nsuccess, nfailure;
};

struct etcd_txn_result {
	bool succeeded;
	int64_t revision;
	/* for each RANGE op of the branch that ran, in order */
	struct etcd_range_result *ranges;
	size_t nranges;
};

void etcd_txn_result_free(struct etcd_txn_result *r);

enum etcd_err etcd_txn(struct etcd_client *c, const struct etcd_txn *t,
		       struct etcd_txn_result *out);
/* The size of the request etcd will count against --max-request-bytes
 * (protobuf encoding), estimated from above: for splitting big writes. */
size_t etcd_txn_wire_size(const struct etcd_txn *t);

enum etcd_err etcd_delete_range(struct etcd_client *c, const char *key, size_t key_len,
				const char *range_end, size_t range_end_len, int64_t *deleted);

/* ---- maintenance and watch ---- */

struct etcd_status {
	char version[32];
	int64_t db_size, revision, leader;
};

enum etcd_err etcd_status(struct etcd_client *c, struct etcd_status *out);

/* One watch event: PUT (with the kv) or DELETE. */
struct etcd_event {
	bool is_delete;
	struct etcd_kv kv;
};

/* Called for each batch of events; return non-zero to end the watch. */
typedef int (*etcd_watch_fn)(void *ctx, const struct etcd_event *events, size_t n,
			     int64_t revision);

/* Watch [key, range_end) from start_revision (0: now) until fn returns
 * non-zero, *stop becomes true (checked at least every second), or the
 * watch fails.  Blocks the calling thread. */
enum etcd_err etcd_watch(struct etcd_client *c, const char *key, size_t key_len,
			 const char *range_end, size_t range_end_len, int64_t start_revision,
			 etcd_watch_fn fn, void *ctx, const volatile bool *stop);

#endif
