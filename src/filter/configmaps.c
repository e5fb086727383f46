/*
 * configmaps.c - inclusterconfig (filter.h): the kube-system/kube-proxy
 * ConfigMap that kubelet mounts into kube-proxy's pod has its kubeconfig
 * line commented out, so that kube-proxy uses the in-cluster address
 * (KUBERNETES_SERVICE_HOST/PORT, the hub through masterservice).  The text
 * is changed line by line exactly as YurtHub does, so both write the same
 * bytes.  Called by filter.c for configmaps only.
 */
#include "filter/filter_internal.h"

#include <string.h>

#include "util/buf.h"

#define KUBECONFIG "kubeconfig"

/* Is line[0..n) a "kubeconfig: <path>" line?  Spaces (not tabs) around it
 * are ignored; it must hold exactly one ':' (a path with a colon is left as
 * it is, as YurtHub leaves it) with exactly "kubeconfig" before it. */
static bool kubeconfig_line(const char *line, size_t n, size_t *indent)
{
	const char *colon;
	size_t k = strlen(KUBECONFIG);

	*indent = 0;
	while (*indent < n && line[*indent] == ' ')
		(*indent)++;
	while (n > *indent && line[n - 1] == ' ')
		n--;
	line += *indent;
	n -= *indent;
	colon = memchr(line, ':', n);
	if (!colon || memchr(colon + 1, ':', n - (size_t)(colon - line) - 1))
		return false;
	return (size_t)(colon - line) == k && memcmp(line, KUBECONFIG, k) == 0;
}

/* text with '#' before "kubeconfig" on every such line; false when there
 * is none (out is then untouched) or out of memory. */
static bool comment_out(const char *text, size_t len, struct buf *out)
{
	const char *end = text + len, *line = text;
	bool found = false;
	int rc = 0;

	for (;;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t n = (size_t)((nl ? nl : end) - line), indent;

		if (kubeconfig_line(line, n, &indent)) {
			found = true;
			rc = rc ? rc : buf_append(out, line, indent);
			rc = rc ? rc : buf_append_char(out, '#');
			rc = rc ? rc : buf_append(out, line + indent, n - indent);
		} else {
			rc = rc ? rc : buf_append(out, line, n);
		}
		if (!nl)
			break;
		rc = rc ? rc : buf_append_char(out, '\n');
		line = nl + 1;
	}
	return found && rc == 0;
}

enum filter_result filter_inclusterconfig(const struct filter_env *env, enum filter_res res,
					  json_t *cm)
{
	json_t *data = fj_object(cm, "data");
	json_t *conf = fj_string(data, "config.conf");
	struct buf out = BUF_INIT;
	enum filter_result r = FILTER_UNCHANGED;

	(void)env;
	(void)res;
	if (!fj_named(cm, "kube-system", "kube-proxy"))
		return FILTER_UNCHANGED;
	if (fj_bad(cm, "data", JSON_OBJECT) || fj_bad(data, "config.conf", JSON_STRING))
		return FILTER_UNPARSABLE;
	if (!conf)
		return FILTER_UNCHANGED;
	if (comment_out(json_string_value(conf), json_string_length(conf), &out) &&
	    json_object_set_new(data, "config.conf", json_stringn(out.data, out.len)) == 0)
		r = FILTER_CHANGED;
	buf_free(&out);
	return r;
}

bool filter_inclusterconfig_wants(const struct filter_env *env, enum filter_res res,
				  const struct stream_object *meta)
{
	(void)env;
	(void)res;
	return filter_meta_named(meta, "kube-system", "kube-proxy") &&
	       filter_bytes_may_hold(meta, KUBECONFIG);
}
