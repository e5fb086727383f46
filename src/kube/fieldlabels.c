/*
 * fieldlabels.c - which fields kube-apiserver lets clients select on, see
 * fieldlabels.h.  The tables are those of kube-apiserver's core/v1 field
 * label conversions; a resource without one gets the default conversion,
 * which knows metadata.name and metadata.namespace only.
 */
#include "kube/fieldlabels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

struct field_table {
	const char *resource;
	const char *const *labels; /* NULL-terminated */
};

static const char *const POD[] = {"metadata.name",
				  "metadata.namespace",
				  "spec.nodeName",
				  "spec.restartPolicy",
				  "spec.schedulerName",
				  "spec.serviceAccountName",
				  "spec.hostNetwork",
				  "status.phase",
				  "status.podIP",
				  "status.podIPs",
				  "status.nominatedNodeName",
				  NULL};
static const char *const NODE[] = {"metadata.name", "spec.unschedulable", NULL};
static const char *const RC[] = {"metadata.name", "metadata.namespace", "status.replicas", NULL};
static const char *const EVENT[] = {"involvedObject.kind",
				    "involvedObject.namespace",
				    "involvedObject.name",
				    "involvedObject.uid",
				    "involvedObject.apiVersion",
				    "involvedObject.resourceVersion",
				    "involvedObject.fieldPath",
				    "reason",
				    "reportingComponent",
				    "source",
				    "type",
				    "metadata.namespace",
				    "metadata.name",
				    NULL};
static const char *const NAMESPACE[] = {"status.phase", "metadata.name", NULL};
static const char *const SECRET[] = {"type", "metadata.namespace", "metadata.name", NULL};
static const char *const SERVICE[] = {"metadata.namespace", "metadata.name", "spec.clusterIP",
				      "spec.type", NULL};

static const struct field_table CORE[] = {
    {"pods", POD},	   {"nodes", NODE},	      {"replicationcontrollers", RC},
    {"events", EVENT},	   {"namespaces", NAMESPACE}, {"secrets", SECRET},
    {"services", SERVICE},
};

static bool listed(const char *const *labels, const char *label)
{
	for (; *labels; labels++)
		if (!strcmp(*labels, label))
			return true;
	return false;
}

static const struct field_table *core_table(const char *resource)
{
	for (size_t i = 0; i < sizeof CORE / sizeof CORE[0]; i++)
		if (!strcmp(CORE[i].resource, resource))
			return &CORE[i];
	return NULL;
}

static const char *const DEFAULT[] = {"metadata.name", "metadata.namespace", NULL};

const char *const *field_labels_of(const char *group, const char *resource)
{
	if ((group && *group) || !resource)
		return NULL;
	const struct field_table *t = core_table(resource);
	return t ? t->labels : DEFAULT;
}

int field_labels_check(const char *group, const char *resource, const struct selector *fields,
		       char **why)
{
	*why = NULL;
	if ((group && *group) || !resource)
		return 0;
	const struct field_table *t = core_table(resource);
	for (size_t i = 0; i < selector_term_count(fields); i++) {
		const char *label = selector_term_key(fields, i);
		if (listed(t ? t->labels : DEFAULT, label))
			continue;
		struct buf msg = BUF_INIT;
		int rc;
		if (t) {
			rc = buf_printf(&msg, "field label not supported: %s", label);
		} else {
			rc = buf_append_json_str(&msg, label, strlen(label));
			rc = rc ? rc
				: buf_append_str(&msg, " is not a known field selector: only "
						       "\"metadata.name\", \"metadata.namespace\"");
		}
		*why = rc < 0 ? (buf_free(&msg), NULL) : buf_steal(&msg);
		return -1;
	}
	return 0;
}
