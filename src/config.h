/*
 * config.h - the hub's settings: command-line flags, their defaults and their
 * validation (docs/contracts.md §1).  Flag names are YurtHub's wherever a flag
 * applies; YurtHub flags that have no meaning here are accepted and ignored,
 * so that an existing manifest starts this hub unchanged.
 */
#ifndef YURTHUB_CONFIG_H
#define YURTHUB_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct strlist {
	char **v;
	size_t n;
};

enum lb_mode { LB_RR, LB_PRIORITY };
enum working_mode { MODE_EDGE, MODE_CLOUD };
enum storage_kind { STORAGE_DISK, STORAGE_ETCD };
/* Where the hub's client identity comes from (docs/install.md). */
enum bootstrap_mode {
	BOOTSTRAP_NONE,	   /* the identity flags as given (or none) */
	BOOTSTRAP_TOKEN,   /* its own certificate by CSR, bootstrap token first */
	BOOTSTRAP_KUBELET, /* kubelet's certificate files */
};
#define KUBELET_CLIENT_PEM "/var/lib/kubelet/pki/kubelet-client-current.pem"
#define KUBELET_CA_FILE	   "/etc/kubernetes/pki/ca.crt"

struct config {
	bool init_failed; /* config_init ran out of memory: validation says so */
	struct strlist server_addr;
	char *node_name;
	char *lb_mode_name;
	enum lb_mode lb_mode;

	char *bind_address;
	int serve_port;
	char *bind_proxy_address;
	int proxy_port;
	int proxy_secure_port;
	char *client_ca_file;
	char *tls_cert_file, *tls_private_key_file;

	char *disk_cache_path;
	char *storage_name;
	enum storage_kind storage;
	struct strlist etcd_servers;
	char *etcd_prefix;
	char *etcd_cafile, *etcd_certfile, *etcd_keyfile;

	char *kubeconfig;
	char *client_cert_file, *client_key_file, *ca_file, *token_file;

	struct strlist cache_agents;

	char *bootstrap_mode_name;
	enum bootstrap_mode bootstrap_mode;
	char *bootstrap_file, *join_token;
	struct strlist discovery_ca_hashes;
	bool discovery_unsafe_skip;
	char *root_dir;
	struct strlist hub_cert_organizations;
	char *node_ip;
	struct strlist pool_scope_resources; /* "group/version/resource" */
	int multiplexer_port;
	bool client_cert_may_wait; /* kubelet's files may appear after the start */

	char *working_mode_name;
	enum working_mode working_mode;
	char *nodepool_name;
	char *namespace; /* of the yurt-hub-cfg configmap */
	bool enable_resource_filter;
	struct strlist disabled_resource_filters;
	bool enable_node_pool, enable_pool_service_topology;
	bool enable_dummy_if; /* make the dummy interface, listen and point the filters there */
	char *dummy_if_name;
	char *dummy_if_ip; /* "" until validated: then the default for the address family */

	int heartbeat_interval_seconds;
	int heartbeat_timeout_seconds;
	int heartbeat_failed_retry;
	int heartbeat_healthy_threshold;
	int min_request_timeout; /* seconds */
	int max_requests_in_flight;

	int verbosity;
	char *log_format;

	bool help, version;
	struct strlist ignored; /* YurtHub flags given that do nothing here */
};

/* Defaults of every setting. */
void config_init(struct config *c);
void config_free(struct config *c);

/* Parse argv (without argv[0]).  Returns 0, or -1 with a one-line message in
 * *err (malloc'ed) naming the flag at fault. */
int config_parse(struct config *c, int argc, char **argv, char **err);
/* Checks that need the whole picture (required flags, ranges, files).
 * 0, or -1 with *err. */
int config_validate(struct config *c, char **err);

/* The --help text, generated from the flag table. */
void config_print_help(FILE *out);
/* The flag table as a man page section (roff), for yurthub.8. */
void config_print_man_options(FILE *out);
/* The flags accepted for compatibility only, as a roff list, for yurthub.8. */
void config_print_man_compat(FILE *out);

void strlist_free(struct strlist *l);
/* Split a comma-separated value, dropping empty elements; 0 or -1 (ENOMEM). */
int strlist_split(struct strlist *l, const char *csv);
bool strlist_has(const struct strlist *l, const char *s);
/* "group/version/resource" as --pool-scope-resources and the leader-hub
 * configmap spell a resource (lower case, an empty group for core). */
bool config_gvr_ok(const char *gvr);

/* "1800", "1800s", "30m", "1h30m", "30m0s" -> seconds; -1 if malformed. */
long config_parse_duration(const char *s);

#endif
