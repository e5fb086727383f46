/*
 * satoken.c - service-account token claims, see satoken.h.  The signature
 * is jws.c's; what is here are the rules of kube-apiserver's service-account
 * authenticator (its legacy-token branch aside, which binds no pod).
 */
#include "identity/satoken.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

void satoken_free(struct sa_token *t)
{
	free(t->namespace);
	free(t->service_account);
	free(t->pod_name);
	free(t->pod_uid);
	memset(t, 0, sizeof *t);
}

/* A non-empty string member of o, or NULL. */
static const char *str_member(json_t *o, const char *name)
{
	json_t *v = json_object_get(o, name);
	return json_is_string(v) && json_string_length(v) &&
		       strlen(json_string_value(v)) == json_string_length(v)
		   ? json_string_value(v)
		   : NULL;
}

/* aud: one string or an array of them; does it hold want? */
static bool audience_has(json_t *aud, const char *want)
{
	if (json_is_string(aud))
		return !strcmp(json_string_value(aud), want);
	size_t i;
	json_t *v;
	json_array_foreach(aud, i, v)
	{
		if (json_is_string(v) && !strcmp(json_string_value(v), want))
			return true;
	}
	return false;
}

/* The time claims, as go-jose's ValidateWithLeeway: exp required here
 * (every bound token has one). */
static bool times_ok(json_t *claims, time_t now, char **why)
{
	json_t *exp = json_object_get(claims, "exp"), *nbf = json_object_get(claims, "nbf"),
	       *iat = json_object_get(claims, "iat");
	double t = (double)now;
	if (!json_is_number(exp) || (nbf && !json_is_number(nbf)) ||
	    (iat && !json_is_number(iat))) {
		err_printf(why, "the token's exp, nbf or iat is missing or not a number");
		return false;
	}
	if (t - SATOKEN_LEEWAY_S > json_number_value(exp)) {
		err_printf(why, "the token has expired");
		return false;
	}
	if (nbf && t + SATOKEN_LEEWAY_S < json_number_value(nbf)) {
		err_printf(why, "the token is not valid yet (nbf)");
		return false;
	}
	if (iat && t + SATOKEN_LEEWAY_S < json_number_value(iat)) {
		err_printf(why, "the token was issued in the future (iat)");
		return false;
	}
	return true;
}

/* The "kubernetes.io" claim and sub, into *out.  true, or false with *why. */
static bool binding_ok(json_t *claims, struct sa_token *out, char **why)
{
	json_t *k8s = json_object_get(claims, "kubernetes.io");
	json_t *pod = json_object_get(k8s, "pod"), *sa = json_object_get(k8s, "serviceaccount");
	const char *ns = str_member(k8s, "namespace"), *pname = str_member(pod, "name"),
		   *puid = str_member(pod, "uid"), *sname = str_member(sa, "name"),
		   *sub = str_member(claims, "sub");
	if (!ns || !sname) {
		err_printf(why, "the token names no service account (a legacy token?)");
		return false;
	}
	if (!pname || !puid) {
		err_printf(why, "the token is bound to no pod");
		return false;
	}
	struct buf want = BUF_INIT;
	bool same = buf_printf(&want, "system:serviceaccount:%s:%s", ns, sname) == 0 && sub &&
		    !strcmp(sub, want.data);
	buf_free(&want);
	if (!same) {
		err_printf(why, "the token's sub is not its service account");
		return false;
	}
	out->namespace = strdup(ns);
	out->service_account = strdup(sname);
	out->pod_name = strdup(pname);
	out->pod_uid = strdup(puid);
	if (!out->namespace || !out->service_account || !out->pod_name || !out->pod_uid) {
		satoken_free(out);
		err_printf(why, "out of memory");
		return false;
	}
	return true;
}

enum satoken_result satoken_verify(const struct jwk_set *keys, const char *issuer,
				   const char *token, size_t len, time_t now, struct sa_token *out,
				   char **why)
{
	memset(out, 0, sizeof *out);
	if (!keys || !issuer || !*issuer) {
		err_printf(why, "the cluster's service-account keys were never fetched");
		return SATOKEN_REFUSED;
	}
	struct buf payload = BUF_INIT;
	enum jws_result jr = jws_verify_signed(token, len, keys, &payload, why);
	if (jr != JWS_OK) {
		buf_free(&payload);
		return jr == JWS_UNKNOWN_KEY ? SATOKEN_UNKNOWN_KEY : SATOKEN_REFUSED;
	}
	json_error_t jerr;
	json_t *claims = json_loadb(payload.data, payload.len, JSON_REJECT_DUPLICATES, &jerr);
	buf_free(&payload);
	enum satoken_result res = SATOKEN_REFUSED;
	const char *iss = str_member(claims, "iss");
	if (!json_is_object(claims))
		err_printf(why, "the token's claims are not a JSON object");
	else if (!iss || strcmp(iss, issuer))
		err_printf(why, "the token's issuer is not the cluster's");
	else if (!audience_has(json_object_get(claims, "aud"), issuer))
		err_printf(why, "the token's audience does not include the cluster's issuer");
	else if (times_ok(claims, now, why) && binding_ok(claims, out, why))
		res = SATOKEN_OK;
	json_decref(claims);
	return res;
}
