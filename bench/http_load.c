/*
 * http_load.c - a small load generator for the proxy benchmark: N GETs of one
 * URL over C concurrent keep-alive connections (libcurl multi), with a given
 * User-Agent and Accept.  Prints one line:
 *
 *   requests=N ok=K bytes=B seconds=S rps=R mbps=M
 *
 * usage: http_load URL N C USER-AGENT [ACCEPT]
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct slot {
	CURL *e;
	size_t bytes;
};

static size_t count_bytes(char *p, size_t sz, size_t n, void *ctx)
{
	(void)p;
	((struct slot *)ctx)->bytes += sz * n;
	return sz * n;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: http_load URL N C USER-AGENT [ACCEPT]\n");
		return 2;
	}
	const char *url = argv[1];
	long total = atol(argv[2]), conc = atol(argv[3]);
	if (total <= 0 || conc <= 0 || conc > 256) {
		fprintf(stderr, "http_load: bad N or C\n");
		return 2;
	}
	curl_global_init(CURL_GLOBAL_ALL);
	CURLM *m = curl_multi_init();
	struct curl_slist *h = NULL;
	char accept[512];
	snprintf(accept, sizeof accept, "Accept: %s", argc > 5 ? argv[5] : "application/json");
	h = curl_slist_append(h, accept);
	struct slot *slots = calloc((size_t)conc, sizeof *slots);
	long started = 0, done = 0, ok = 0;
	size_t bytes = 0;
	double t0 = now();
	for (long i = 0; i < conc && started < total; i++, started++) {
		CURL *e = curl_easy_init();
		slots[i].e = e;
		curl_easy_setopt(e, CURLOPT_URL, url);
		curl_easy_setopt(e, CURLOPT_USERAGENT, argv[4]);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, count_bytes);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, &slots[i]);
		curl_easy_setopt(e, CURLOPT_PRIVATE, &slots[i]);
		curl_multi_add_handle(m, e);
	}
	int running = 1;
	while (done < total) {
		curl_multi_perform(m, &running);
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(m, &left))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			struct slot *s;
			long code = 0;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
			curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
			done++;
			ok += msg->data.result == CURLE_OK && code == 200;
			bytes += s->bytes;
			s->bytes = 0;
			curl_multi_remove_handle(m, s->e);
			if (started < total) {
				started++;
				curl_multi_add_handle(m, s->e); /* same handle: keep-alive */
			}
		}
		if (done < total)
			curl_multi_poll(m, NULL, 0, 1000, NULL);
	}
	double secs = now() - t0;
	printf("requests=%ld ok=%ld bytes=%zu seconds=%.3f rps=%.1f mbps=%.1f\n", total, ok, bytes,
	       secs, (double)total / secs, (double)bytes / secs / 1e6);
	for (long i = 0; i < conc; i++)
		if (slots[i].e)
			curl_easy_cleanup(slots[i].e);
	free(slots);
	curl_slist_free_all(h);
	curl_multi_cleanup(m);
	curl_global_cleanup();
	return ok == total ? 0 : 1;
}
