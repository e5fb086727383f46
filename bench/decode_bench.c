/*
 * decode_bench.c - what decoding a cached list costs the cache worker: a
 * 10,000-pod list body (pods shaped as the test API server makes them), fed
 * in 64 KiB pieces to
 *   - the list decoder (kube/stream.c), as the cache worker runs it;
 *   - yajl with no callbacks, the parser the decoder ran on before
 *     util/json_scan.c (a floor for that decoder: it also called back for
 *     every token);
 *   - a loop that only counts the quotes (a floor for any reader).
 * Median of 9 runs each, interleaved, with ratios.  A benchmark, not a
 * test: it never fails on a figure.
 *
 * usage: decode_bench [PODS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yajl/yajl_parse.h>

#include "kube/stream.h"
#include "util/buf.h"

#define RUNS  9
#define CHUNK (64u << 10)

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void pod(struct buf *b, int i)
{
	buf_printf(
	    b,
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"api-%08x-%05d\","
	    "\"namespace\":\"bulk-%02d\",\"uid\":\"%08x-8b62-da4f-66a2-2d40718f34bd\","
	    "\"creationTimestamp\":\"2026-12-02T14:22:49Z\",\"labels\":{\"app\":\"api\","
	    "\"pod-template-hash\":\"c8d9907a0c\",\"tier\":\"backend\"},\"ownerReferences\":[{"
	    "\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"api-c8d9907a0c\","
	    "\"uid\":\"590a421e-7674-11ad-ef31-671b05df39fb\",\"controller\":true,"
	    "\"blockOwnerDeletion\":true}],\"resourceVersion\":\"%d\"},\"spec\":{\"containers\":[{"
	    "\"name\":\"api\",\"image\":\"registry.example.com/api:1.6.2\",\"ports\":[{"
	    "\"containerPort\":8080,\"name\":\"http\",\"protocol\":\"TCP\"}],\"env\":[{\"name\":"
	    "\"POD_NAME\",\"valueFrom\":{\"fieldRef\":{\"apiVersion\":\"v1\",\"fieldPath\":"
	    "\"metadata.name\"}}},{\"name\":\"API_SETTING_0\",\"value\":\"value-0\"}],"
	    "\"resources\":{\"limits\":{\"memory\":\"256Mi\"},\"requests\":{\"cpu\":\"100m\","
	    "\"memory\":\"128Mi\"}},\"volumeMounts\":[{\"mountPath\":"
	    "\"/var/run/secrets/kubernetes.io/serviceaccount\",\"name\":\"kube-api-access\","
	    "\"readOnly\":true}]}],\"dnsPolicy\":\"ClusterFirst\",\"nodeName\":\"worker-%03d\","
	    "\"restartPolicy\":\"Always\",\"tolerations\":[{\"effect\":\"NoExecute\",\"key\":"
	    "\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"tolerationSeconds\":300}]},"
	    "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":"
	    "\"True\",\"lastTransitionTime\":\"2026-12-02T14:22:59Z\"}],\"hostIP\":\"10.1.%d.%d\","
	    "\"podIP\":\"10.244.%d.%d\",\"startTime\":\"2026-12-02T14:22:49Z\","
	    "\"containerStatuses\":[{\"name\":\"api\",\"ready\":true,\"restartCount\":0,"
	    "\"image\":\"registry.example.com/api:1.6.2\",\"started\":true,\"state\":{\"running\":"
	    "{\"startedAt\":\"2026-12-02T14:22:55Z\"}}}],\"qosClass\":\"Burstable\"}}",
	    (unsigned)i * 2654435761u, i, i % 40, (unsigned)i, 1000 + i, i % 200, i / 250, i % 250,
	    i / 250, i % 250);
}

static size_t items;

static int count_item(void *ctx, const struct stream_object *o)
{
	(void)ctx;
	items += o->rv != 0;
	return 0;
}

static double run_decoder(const struct buf *body)
{
	double t = now();
	struct list_decoder *d = list_decoder_new(count_item, NULL);

	for (size_t off = 0; off < body->len; off += CHUNK) {
		size_t n = body->len - off < CHUNK ? body->len - off : CHUNK;
		if (list_decoder_feed(d, body->data + off, n) < 0) {
			fprintf(stderr, "decode_bench: %s\n", list_decoder_error(d));
			exit(1);
		}
	}
	if (list_decoder_finish(d, NULL) < 0)
		exit(1);
	list_decoder_free(d);
	return now() - t;
}

static double run_yajl(const struct buf *body)
{
	static const yajl_callbacks none;
	double t = now();
	yajl_handle h = yajl_alloc(&none, NULL, NULL);

	for (size_t off = 0; off < body->len; off += CHUNK) {
		size_t n = body->len - off < CHUNK ? body->len - off : CHUNK;
		if (yajl_parse(h, (const unsigned char *)body->data + off, n) != yajl_status_ok)
			exit(1);
	}
	if (yajl_complete_parse(h) != yajl_status_ok)
		exit(1);
	yajl_free(h);
	return now() - t;
}

static volatile size_t quotes;

static double run_count(const struct buf *body)
{
	double t = now();
	size_t q = 0;

	for (size_t i = 0; i < body->len; i++)
		q += body->data[i] == '"';
	quotes = q;
	return now() - t;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int pods = argc > 1 ? atoi(argv[1]) : 10000;
	struct buf body = BUF_INIT;
	double dec[RUNS], yj[RUNS], cnt[RUNS];
	double mb;

	if (pods < 1)
		return 2;
	buf_append_str(&body, "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{"
			      "\"resourceVersion\":\"11141\"},\"items\":[");
	for (int i = 0; i < pods; i++) {
		if (i)
			buf_append_char(&body, ',');
		pod(&body, i);
	}
	buf_append_str(&body, "]}");
	mb = (double)body.len / 1e6;
	for (int r = 0; r < RUNS; r++) {
		items = 0;
		dec[r] = run_decoder(&body);
		if (items != (size_t)pods)
			return 1;
		yj[r] = run_yajl(&body);
		cnt[r] = run_count(&body);
	}
	qsort(dec, RUNS, sizeof dec[0], cmp);
	qsort(yj, RUNS, sizeof yj[0], cmp);
	qsort(cnt, RUNS, sizeof cnt[0], cmp);
	printf("decode benchmark: a %d-pod list, %.1f MB, 64 KiB pieces, median of %d\n", pods, mb,
	       RUNS);
	printf("list decoder (json_scan): %.1f ms, %.0f MB/s\n", dec[RUNS / 2] * 1e3,
	       mb / dec[RUNS / 2]);
	printf("yajl, no callbacks: %.1f ms, %.0f MB/s\n", yj[RUNS / 2] * 1e3, mb / yj[RUNS / 2]);
	printf("counting quotes: %.1f ms, %.0f MB/s\n", cnt[RUNS / 2] * 1e3, mb / cnt[RUNS / 2]);
	printf("list decoder / yajl time: %.2f x\n", dec[RUNS / 2] / yj[RUNS / 2]);
	printf("list decoder / counting quotes time: %.2f x\n", dec[RUNS / 2] / cnt[RUNS / 2]);
	buf_free(&body);
	return 0;
}
