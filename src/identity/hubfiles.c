/*
 * hubfiles.c - the files under --root-dir, see hubfiles.h.
 */
#include "identity/hubfiles.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kube/kubeconfig.h"
#include "util/base64.h"
#include "util/fsutil.h"
#include "util/log.h"

char *hubfiles_path(const char *root, const char *name)
{
	size_t n = strlen(root);
	while (n > 1 && root[n - 1] == '/')
		n--;
	return str_printf("%.*s/%s", (int)n, root, name);
}

int hubfiles_prepare(const char *root, char **err)
{
	*err = NULL;
	char *pki = hubfiles_path(root, HUBFILES_PKI);
	int rc = pki ? fs_mkdir_p_at(AT_FDCWD, pki, FS_DIR_MODE, NULL) : -ENOMEM;
	if (rc < 0)
		err_printf(err, "cannot create %s: %s", pki ? pki : root, strerror(-rc));
	free(pki);
	return rc < 0 ? -1 : 0;
}

/* The host of "https://host:port/...", "[v6]" without brackets. */
static char *url_host(const char *url)
{
	const char *p = strstr(url, "://");
	p = p ? p + 3 : url;
	if (*p == '[') {
		const char *end = strchr(p, ']');
		return end ? strndup(p + 1, (size_t)(end - p - 1)) : NULL;
	}
	return strndup(p, strcspn(p, ":/?#"));
}

static bool host_among(const char *host, const char *const *servers, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char *h = url_host(servers[i]);
		bool same = h && !strcmp(h, host);
		free(h);
		if (same)
			return true;
	}
	return false;
}

static int set_aside(int rootfd, const char *root, char **err)
{
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	strftime(stamp, sizeof stamp, "replaced-%Y%m%dT%H%M%SZ", gmtime_r(&now, &tm));
	int rc = mkdirat(rootfd, stamp, FS_DIR_MODE) < 0 && errno != EEXIST ? -errno : 0;
	static const char *const moved[] = {HUBFILES_HUB_CONF, HUBFILES_BOOTSTRAP_CONF,
					    HUBFILES_PKI};
	for (size_t i = 0; rc == 0 && i < sizeof moved / sizeof moved[0]; i++) {
		if (fs_exists_at(rootfd, moved[i]) != 1)
			continue;
		struct buf to = BUF_INIT;
		rc = buf_printf(&to, "%s/%s", stamp, moved[i]) < 0 ? -ENOMEM : 0;
		if (rc == 0)
			rc =
			    fs_rename_at(rootfd, moved[i], rootfd, buf_cstr(&to), RENAME_NOREPLACE);
		buf_free(&to);
	}
	if (rc == 0)
		rc = fs_fsync_dir_at(rootfd, ".");
	if (rc < 0)
		err_printf(err, "cannot set the old identity aside in %s/%s: %s", root, stamp,
			   strerror(-rc));
	else
		log_warn("--server-addr names another cluster than %s/%s did: its identity files "
			 "are kept in %s/%s, and the hub bootstraps afresh",
			 root, HUBFILES_HUB_CONF, root, stamp);
	return rc < 0 ? -1 : 0;
}

int hubfiles_set_aside_if_moved(const char *root, const char *const *servers, size_t n, char **err)
{
	*err = NULL;
	char *conf = hubfiles_path(root, HUBFILES_HUB_CONF);
	if (!conf)
		return err_printf(err, "out of memory"), -1;
	struct kubeconfig kc = {0};
	char *why = NULL, *host = NULL;
	int rc = 0;
	if (access(conf, F_OK) == 0) {
		if (kubeconfig_load_names(conf, &kc, &why) < 0)
			log_warn("%s cannot be read (%s); it is replaced when the hub has a "
				 "certificate",
				 conf, why ? why : "out of memory");
		else if (kc.server && (host = url_host(kc.server)) &&
			 !host_among(host, servers, n)) {
			int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0) {
				err_printf(err, "cannot open %s: %s", root, strerror(errno));
				rc = -1;
			} else {
				rc = set_aside(fd, root, err);
				close(fd);
			}
		}
	}
	free(why);
	free(host);
	kubeconfig_free(&kc);
	free(conf);
	return rc;
}

/* fs_write_file_atomic for a path the operator chose: the directory it
 * is in, opened as given, is the one made durable.  0 or -errno. */
static int write_path_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
	if (!dir)
		return -ENOMEM;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (fd < 0)
		return -errno;
	int rc = fs_write_file_atomic(fd, slash ? slash + 1 : path, data, len, mode);
	close(fd);
	return rc;
}

static int yaml_str(struct buf *b, const char *s)
{
	return buf_append_json_str(b, s, strlen(s)); /* a JSON string is a YAML one */
}

int hubfiles_write_kubeconfig(const char *path, const char *server, const struct buf *ca_pem,
			      const char *token, const char *cert_key_path, char **err)
{
	*err = NULL;
	struct buf y = BUF_INIT, ca64 = BUF_INIT;
	int rc = base64_encode(ca_pem->data, ca_pem->len, &ca64);
	rc |= buf_append_str(&y, "apiVersion: v1\nkind: Config\nclusters:\n- name: "
				 "default-cluster\n  cluster:\n    server: ");
	rc |= yaml_str(&y, server);
	rc |= buf_printf(&y, "\n    certificate-authority-data: %s\n", buf_cstr(&ca64));
	rc |= buf_append_str(&y, "users:\n- name: default-auth\n  user:\n");
	if (token) {
		rc |= buf_append_str(&y, "    token: ");
		rc |= yaml_str(&y, token);
		rc |= buf_append_char(&y, '\n');
	}
	if (cert_key_path) {
		rc |= buf_append_str(&y, "    client-certificate: ");
		rc |= yaml_str(&y, cert_key_path);
		rc |= buf_append_str(&y, "\n    client-key: ");
		rc |= yaml_str(&y, cert_key_path);
		rc |= buf_append_char(&y, '\n');
	}
	rc |= buf_append_str(&y, "contexts:\n- name: default-context\n  context:\n    cluster: "
				 "default-cluster\n    namespace: default\n    user: default-auth\n"
				 "current-context: default-context\n");
	if (rc < 0) {
		err_printf(err, "out of memory");
	} else if ((rc = write_path_atomic(path, y.data, y.len, FS_FILE_MODE)) < 0) {
		err_printf(err, "cannot write %s: %s", path, strerror(-rc));
	}
	/* the token is a secret: do not leave it in freed memory */
	if (y.data)
		memset(y.data, 0, y.cap);
	buf_free(&y);
	buf_free(&ca64);
	return rc < 0 ? -1 : 0;
}

int hubfiles_write_ca(const char *root, const struct buf *ca_pem, char **err)
{
	*err = NULL;
	char *path = hubfiles_path(root, HUBFILES_CA);
	if (!path)
		return err_printf(err, "out of memory"), -1;
	struct buf old = BUF_INIT;
	int rc = 0;
	bool same = fs_read_operator_file(path, &old, 1 << 20) == 0 && old.len == ca_pem->len &&
		    !memcmp(old.data, ca_pem->data, old.len);
	if (!same && (rc = write_path_atomic(path, ca_pem->data, ca_pem->len, 0644)) < 0)
		err_printf(err, "cannot write %s: %s", path, strerror(-rc));
	buf_free(&old);
	free(path);
	return rc < 0 ? -1 : 0;
}
