/*
 * fuzz_podendpoints.c - the offline rewrite of endpoints that follow a pod
 * (src/kube/podendpoints.c): a cached pod and a cached EndpointSlice or
 * Endpoints, both from the cloud (or a disk that was tampered with).  Any
 * bytes: no crash, no leak; a rewrite is a JSON object carrying the rv it
 * was given, and rewriting it again for the same pod changes nothing.
 *
 * Input: the pod's JSON, a NUL, the endpoints object's JSON.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_common.h"
#include "kube/podendpoints.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef int (*follow_fn)(const char *obj, size_t len, const struct pod_endpoint_state *pod,
			 uint64_t rv, struct buf *out);

static void check_rewrite(follow_fn follow, const char *obj, size_t len,
			  const struct pod_endpoint_state *pod)
{
	struct buf out = BUF_INIT, again = BUF_INIT;
	int r = follow(obj, len, pod, 4242, &out);
	FZ_CHECK(r >= -1 && r <= 1);
	if (r != 1) {
		FZ_CHECK(out.len == 0); /* untouched */
		buf_free(&out);
		return;
	}
	json_t *doc = json_loadb(out.data, out.len, JSON_ALLOW_NUL, NULL);
	FZ_CHECK(json_is_object(doc));
	const char *rv =
	    json_string_value(json_object_get(json_object_get(doc, "metadata"), "resourceVersion"));
	FZ_CHECK(rv && !strcmp(rv, "4242"));
	json_decref(doc);
	/* the rewrite is a fixed point: the same pod changes nothing more */
	FZ_CHECK(follow(out.data, out.len, pod, 4242, &again) == 0);
	buf_free(&again);
	buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	const char *nul = memchr(in, '\0', size);
	if (!nul)
		return 0;
	size_t pod_len = (size_t)(nul - in);
	struct pod_endpoint_state pod;
	if (pod_endpoint_state_parse(in, pod_len, &pod) < 0)
		return 0;
	FZ_CHECK(pod.namespace && pod.name && pod.uid && pod.node_name);
	FZ_CHECK(!pod_endpoint_state_differs(&pod, &pod));
	const char *obj = nul + 1;
	size_t len = size - pod_len - 1;
	check_rewrite(endpointslice_follow_pod, obj, len, &pod);
	check_rewrite(endpoints_follow_pod, obj, len, &pod);
	pod_endpoint_state_free(&pod);
	return 0;
}
