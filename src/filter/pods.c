/*
 * pods.c - serviceenvupdater (filter.h): a pod whose spec sets
 * KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT itself (a webhook
 * pointing it at a public API server name, say) still reaches the API
 * through the hub: kubelet is shown the hub's address in those entries.
 * Called by filter.c for pods only.
 *
 * Only the containers of spec.containers (YurtHub leaves init and ephemeral
 * containers alone), only entries that exist (none is added: kubelet adds
 * the variables from the services it sees, masterservice's business), and
 * every entry of that name (a spec may repeat one; kubelet uses the last).
 * An entry with valueFrom gets a value and keeps its valueFrom: kubelet
 * takes a non-empty value before it looks at valueFrom, so the container
 * gets the hub, and kubelet neither validates nor writes back the spec it
 * is shown.
 */
#include "filter/filter_internal.h"

#define HOST_VAR "KUBERNETES_SERVICE_HOST"
#define PORT_VAR "KUBERNETES_SERVICE_PORT"

/* 1 when some entry of env changed, else 0. */
static int update_env(json_t *env_list, const char *host, const char *port)
{
	json_t *var;
	size_t i;
	int changed = 0;

	json_array_foreach(env_list, i, var)
	{
		json_t *name = fj_string(var, "name");

		if (fj_is(name, HOST_VAR))
			changed |= fj_set_string(var, "value", host) > 0;
		else if (port && fj_is(name, PORT_VAR))
			changed |= fj_set_string(var, "value", port) > 0;
	}
	return changed;
}

/* Are spec.containers[].env[] of the types Kubernetes gives them? */
static bool pod_readable(const json_t *pod)
{
	json_t *spec = fj_object(pod, "spec"), *c, *var;
	size_t i, j;

	if (fj_bad(pod, "spec", JSON_OBJECT) || fj_bad(spec, "containers", JSON_ARRAY) ||
	    fj_bad_items(fj_array(spec, "containers"), JSON_OBJECT))
		return false;
	json_array_foreach(fj_array(spec, "containers"), i, c)
	{
		if (fj_bad(c, "env", JSON_ARRAY) || fj_bad_items(fj_array(c, "env"), JSON_OBJECT))
			return false;
		json_array_foreach(fj_array(c, "env"), j, var)
		{
			if (fj_bad(var, "name", JSON_STRING) || fj_bad(var, "value", JSON_STRING))
				return false;
		}
	}
	return true;
}

enum filter_result filter_serviceenvupdater(const struct filter_env *env, enum filter_res res,
					    json_t *pod)
{
	const char *host = filter_hub_host(env);
	const char *port = env->hub_port && *env->hub_port ? env->hub_port : NULL;
	json_t *containers = fj_array(fj_object(pod, "spec"), "containers"), *c;
	size_t i;
	int changed = 0;

	(void)res;
	if (!host)
		return FILTER_UNCHANGED;
	if (!pod_readable(pod))
		return FILTER_UNPARSABLE;
	json_array_foreach(containers, i, c)
	{
		changed |= update_env(fj_array(c, "env"), host, port);
	}
	return changed ? FILTER_CHANGED : FILTER_UNCHANGED;
}

bool filter_serviceenvupdater_wants(const struct filter_env *env, enum filter_res res,
				    const struct stream_object *meta)
{
	(void)res;
	return filter_hub_host(env) && filter_bytes_may_hold(meta, "KUBERNETES_SERVICE_");
}
