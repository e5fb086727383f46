/*
 * fuzz_x509.c - the reader of the hub's certificate files and of the
 * certificates a signer sends back (src/identity/x509.c): PEM splitting,
 * certificate and key import, the key match, SANs, and the template check
 * and CA pins on whatever parses.
 *
 * Properties: a certificate satisfies the template made of its own CN, O,
 * DNS and IP SANs, and not one that adds an IP it lacks; a key that
 * matches was there; the pin of a bundle's first certificate pins the
 * bundle; a parse that fails leaves nothing behind (ASan sees leaks).
 *
 * Input: the PEM text.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "identity/x509.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void own_template(const struct x509_info *info, struct x509_template *t)
{
	memset(t, 0, sizeof *t);
	t->cn = strdup(info->cn);
	FZ_CHECK(t->cn != NULL);
	for (size_t i = 0; i < info->orgs.n; i++)
		FZ_CHECK(x509_names_add(&t->orgs, info->orgs.v[i]) == 0);
	for (size_t i = 0; i < info->dns.n; i++)
		FZ_CHECK(x509_names_add(&t->dns, info->dns.v[i]) == 0);
	for (size_t i = 0; i < info->ips.n; i++)
		FZ_CHECK(x509_names_add(&t->ips, info->ips.v[i]) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *pem = (const char *)data;
	struct x509_info info;
	char *err = NULL;
	if (x509_parse_pem(pem, size, &info, &err) < 0) {
		FZ_CHECK(err != NULL);
		FZ_CHECK(info.cn == NULL && info.orgs.n == 0 && info.n_certs == 0);
		free(err);
		return 0;
	}
	FZ_CHECK(err == NULL);
	FZ_CHECK(info.n_certs >= 1);
	FZ_CHECK(info.cn != NULL);
	FZ_CHECK(!info.key_matches || info.has_key);

	struct x509_template t;
	own_template(&info, &t);
	char *why = NULL;
	FZ_CHECK(x509_satisfies(&info, &t, &why));
	FZ_CHECK(why == NULL);
	/* an address no certificate of the corpus carries */
	const char *extra = "192.0.2.213";
	FZ_CHECK(x509_names_add(&t.ips, extra) == 0);
	bool has = false;
	for (size_t i = 0; i < info.ips.n; i++)
		has = has || !strcmp(info.ips.v[i], extra);
	FZ_CHECK(x509_satisfies(&info, &t, &why) == has);
	free(why);
	struct x509_template copy;
	FZ_CHECK(x509_template_copy(&copy, &t) == 0);
	FZ_CHECK(x509_template_equal(&copy, &t));
	x509_template_free(&copy);
	x509_template_free(&t);

	/* every certificate GnuTLS took has a pin that pins the bundle */
	struct buf pin = BUF_INIT;
	if (x509_pin_of(pem, size, &pin, &err) == 0) {
		FZ_CHECK(pin.len == 7 + 64);
		const char *pins[] = {pin.data};
		FZ_CHECK(x509_pins_check(pem, size, pins, 1, &err) == 1);
	}
	free(err);
	buf_free(&pin);
	x509_info_free(&info);
	return 0;
}
