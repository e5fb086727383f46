/*
 * cache_etcd.c - `yurthub cache` on an etcd store: the same ls, get and
 * views as on a cache directory, and verify of the ownership records, for
 * one node's view of a pool's shared etcd.
 *
 *   yurthub cache --etcd-servers=URL[,URL] --node-name=NODE [--etcd-prefix=P]
 *                 [--etcd-cafile=F --etcd-certfile=F --etcd-keyfile=F] COMMAND ...
 *
 * Only reads: nothing in etcd is changed.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cache_cmd_internal.h"
#include "storage/etcd.h"
#include "storage/key.h"
#include "util/buf.h"

static const char USAGE[] =
    "usage: yurthub cache --etcd-servers=URL[,URL...] --node-name=NODE [OPTIONS] COMMAND [ARGS]\n"
    "\n"
    "  ls [COMPONENT [RESOURCE.VERSION.GROUP [NAMESPACE]]]\n"
    "        list the node's components, the resources a component listed, or objects\n"
    "  get COMPONENT RESOURCE.VERSION.GROUP [NAMESPACE] NAME\n"
    "        print one stored object\n"
    "  views COMPONENT RESOURCE.VERSION.GROUP\n"
    "        print the list views recorded for a resource, with the id that holdings\n"
    "        name them by\n"
    "  verify\n"
    "        check the ownership records of every node, and that every holding is\n"
    "        explained by a view's membership or a read; exit 1 when problems are found\n"
    "\n"
    "options: --etcd-prefix=P (default /registry), --etcd-cafile=F, --etcd-certfile=F,\n"
    "         --etcd-keyfile=F, --etcd-timeout=SECONDS (default 5)\n";

struct etcd_opts {
	char *servers[16];
	size_t nservers;
	const char *prefix, *node, *ca, *cert, *key;
	long timeout_ms;
};

/* --name=value or --name value; returns the value (or NULL), advancing *i. */
static const char *flag_value(const char *name, int argc, char **argv, int *i)
{
	size_t n = strlen(name);
	const char *a = argv[*i] + 2;
	if (strncmp(a, name, n))
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n] == '\0' && *i + 1 < argc)
		return argv[++*i];
	return NULL;
}

static int parse_servers(struct etcd_opts *o, const char *list, FILE *err)
{
	char *copy = strdup(list), *save = NULL;
	if (!copy)
		return failure(err, NULL, "out of memory");
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (o->nservers == sizeof o->servers / sizeof o->servers[0]) {
			free(copy);
			return usage_error(err, NULL, "--etcd-servers: at most 16 servers");
		}
		if (!(o->servers[o->nservers] = strdup(t))) {
			free(copy);
			return failure(err, NULL, "out of memory");
		}
		o->nservers++;
	}
	free(copy);
	return EXIT_OK;
}

/* The options before COMMAND; *next is the index of COMMAND. */
static int parse_opts(struct etcd_opts *o, int argc, char **argv, int *next, FILE *err)
{
	int i = 0;
	for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
		const char *v;
		int rc = EXIT_OK;
		if ((v = flag_value("etcd-servers", argc, argv, &i)))
			rc = parse_servers(o, v, err);
		else if ((v = flag_value("etcd-prefix", argc, argv, &i)))
			o->prefix = v;
		else if ((v = flag_value("node-name", argc, argv, &i)))
			o->node = v;
		else if ((v = flag_value("etcd-cafile", argc, argv, &i)))
			o->ca = v;
		else if ((v = flag_value("etcd-certfile", argc, argv, &i)))
			o->cert = v;
		else if ((v = flag_value("etcd-keyfile", argc, argv, &i)))
			o->key = v;
		else if ((v = flag_value("etcd-timeout", argc, argv, &i)))
			o->timeout_ms = atol(v) * 1000;
		else
			rc = usage_error(err, NULL, "unknown or incomplete option '%s'", argv[i]);
		if (rc != EXIT_OK)
			return rc;
	}
	*next = i;
	if (!o->nservers)
		return usage_error(err, NULL, "--etcd-servers is required with an etcd store");
	if (!o->node || !*o->node)
		return usage_error(err, NULL, "--node-name is required with an etcd store");
	if (i >= argc)
		return usage_error(err, NULL, "no command (see yurthub cache --help)");
	return EXIT_OK;
}

static int print_name(void *ctx, const char *name)
{
	fprintf(ctx, "%s\n", name);
	return 0;
}

static int ls(struct store *s, char **args, int n, FILE *out, FILE *err)
{
	enum store_err e;
	if (n == 0) {
		e = store_list_components(s, print_name, out);
		return e == STORE_OK ? EXIT_OK : store_failure(err, "ls", "components", e);
	}
	if (!key_component_ok(args[0]))
		return usage_error(err, "ls", "'%s' is not a valid component name", args[0]);
	if (n == 1) {
		e = etcd_store_resources(s, args[0], print_name, out);
		return e == STORE_OK ? EXIT_OK : store_failure(err, "ls", args[0], e);
	}
	if (n == 3 && !key_segment_ok(args[2], KEY_NAME_MAX))
		return usage_error(err, "ls", "'%s' is not a valid namespace", args[2]);
	return cache_ls_objects(s, args[0], args[1], n == 3 ? args[2] : NULL, out, err);
}

static void print_problem(void *ctx, const char *problem, const char *key)
{
	fprintf(ctx, "%s: %s\n", key, problem);
}

static int verify(struct store *s, FILE *out, FILE *err)
{
	long problems = etcd_store_verify(s, print_problem, out);
	if (problems < 0)
		return failure(err, "verify", "cannot read the records from etcd");
	fprintf(out, "%ld problem%s\n", problems, problems == 1 ? "" : "s");
	return problems ? EXIT_PROBLEMS : EXIT_OK;
}

static int run(struct store *s, char **argv, int argc, FILE *out, FILE *err)
{
	const char *cmd = argv[0];
	char **args = argv + 1;
	int n = argc - 1;
	for (int i = 0; i < n; i++)
		if (!*args[i])
			return usage_error(err, cmd, "argument %d is empty", i + 1);
	if (!strcmp(cmd, "ls") && n <= 3)
		return ls(s, args, n, out, err);
	if (!strcmp(cmd, "get") && (n == 3 || n == 4))
		return cache_get_object(s, argv, argc, out, err); /* argv[0] stands for DIR */
	if (!strcmp(cmd, "views") && n == 2)
		return cache_list_views(s, args[0], args[1], out, err);
	if (!strcmp(cmd, "verify") && n == 0)
		return verify(s, out, err);
	if (!strcmp(cmd, "recover"))
		return usage_error(err, cmd,
				   "the hubs recover an etcd store themselves: a list cut "
				   "short is rolled back by its hub (at its start, or when etcd "
				   "takes writes again) or after 10 minutes by any hub of the "
				   "pool; `verify` names it meanwhile");
	if (!strcmp(cmd, "ls") || !strcmp(cmd, "get") || !strcmp(cmd, "views") ||
	    !strcmp(cmd, "verify"))
		return usage_error(err, cmd,
				   "wrong number of arguments (see yurthub cache --help)");
	return usage_error(err, NULL, "unknown command '%s' (see yurthub cache --help)", cmd);
}

int cache_etcd_main(int argc, char **argv, FILE *out, FILE *err)
{
	for (int i = 0; i < argc; i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(USAGE, out);
			return EXIT_OK;
		}
	struct etcd_opts o = {.prefix = "/registry", .timeout_ms = 5000};
	int next = 0;
	int rc = parse_opts(&o, argc, argv, &next, err);
	if (rc == EXIT_OK) {
		struct etcd_store_config cfg = {(const char *const *)o.servers,
						o.nservers,
						o.ca,
						o.cert,
						o.key,
						o.prefix,
						o.node,
						o.timeout_ms};
		char *msg = NULL;
		struct store *s = etcd_store_open(&cfg, &msg);
		if (!s) {
			rc = usage_error(err, NULL, "%s", msg ? msg : "cannot open the etcd store");
		} else {
			rc = run(s, argv + next, argc - next, out, err);
			store_close(s);
		}
		free(msg);
	}
	for (size_t i = 0; i < o.nservers; i++)
		free(o.servers[i]);
	return rc;
}
