/*
 * fuzz_kubeconfig.c - the kubeconfig reader (src/kube/kubeconfig.c) on any
 * text: YAML limits, the current context, file references (resolved
 * against a directory made at start that holds the usual file names, so
 * that references can also succeed) and the base64 of the *-data fields.
 *
 * Input: the kubeconfig's text.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"
#include "kube/kubeconfig.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char base_dir[64];

/* The files a kubeconfig usually names, so that its references resolve. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const names[] = {"ca.crt", "client.crt", "client.key", "token",
					    "kubelet.conf"};
	/* one fixed directory, shared by runs: its content is always the same */
	snprintf(base_dir, sizeof base_dir, "/tmp/yurthub-fuzz-kubeconfig");
	if (mkdir(base_dir, 0700) < 0 && errno != EEXIST)
		abort();
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		char path[128];
		snprintf(path, sizeof path, "%s/%s", base_dir, names[i]);
		FILE *f = fopen(path, "w");
		if (!f)
			abort();
		fputs("x\n", f);
		fclose(f);
	}
	return 0;
}

static void check(const struct kubeconfig *kc)
{
	FZ_CHECK(!kc->ca_file || kc->ca_file[0] == '/');
	FZ_CHECK(!kc->client_cert_file || kc->client_cert_file[0] == '/');
	FZ_CHECK(!kc->client_key_file || kc->client_key_file[0] == '/');
	FZ_CHECK(!kc->token_file || kc->token_file[0] == '/');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kubeconfig kc;
	char *err = NULL;
	if (kubeconfig_parse((const char *)data, size, base_dir, &kc, &err) == 0) {
		FZ_CHECK(err == NULL);
		check(&kc);
	} else {
		FZ_CHECK(err != NULL && !strchr(err, '\n'));
	}
	kubeconfig_free(&kc);
	free(err);
	return 0;
}
