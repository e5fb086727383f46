/*
 * kinds.c - resource -> Kind, see kinds.h.
 *
 * The table holds the built-in resources of Kubernetes 1.30-era API groups
 * (core is group ""); subresources are not in it.  Discovery documents are
 * parsed with jansson (which bounds nesting itself).
 */
#include "kube/kinds.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *group, *resource, *kind;
} builtin[] = {
    {"", "pods", "Pod"},
    {"", "nodes", "Node"},
    {"", "services", "Service"},
    {"", "endpoints", "Endpoints"},
    {"", "configmaps", "ConfigMap"},
    {"", "secrets", "Secret"},
    {"", "namespaces", "Namespace"},
    {"", "events", "Event"},
    {"", "serviceaccounts", "ServiceAccount"},
    {"", "persistentvolumes", "PersistentVolume"},
    {"", "persistentvolumeclaims", "PersistentVolumeClaim"},
    {"", "limitranges", "LimitRange"},
    {"", "resourcequotas", "ResourceQuota"},
    {"", "replicationcontrollers", "ReplicationController"},
    {"", "podtemplates", "PodTemplate"},
    {"", "componentstatuses", "ComponentStatus"},
    {"", "bindings", "Binding"},
    {"apps", "deployments", "Deployment"},
    {"apps", "replicasets", "ReplicaSet"},
    {"apps", "daemonsets", "DaemonSet"},
    {"apps", "statefulsets", "StatefulSet"},
    {"apps", "controllerrevisions", "ControllerRevision"},
    {"batch", "jobs", "Job"},
    {"batch", "cronjobs", "CronJob"},
    {"coordination.k8s.io", "leases", "Lease"},
    {"discovery.k8s.io", "endpointslices", "EndpointSlice"},
    {"events.k8s.io", "events", "Event"},
    {"networking.k8s.io", "ingresses", "Ingress"},
    {"networking.k8s.io", "ingressclasses", "IngressClass"},
    {"networking.k8s.io", "networkpolicies", "NetworkPolicy"},
    {"networking.k8s.io", "ipaddresses", "IPAddress"},
    {"networking.k8s.io", "servicecidrs", "ServiceCIDR"},
    {"node.k8s.io", "runtimeclasses", "RuntimeClass"},
    {"storage.k8s.io", "storageclasses", "StorageClass"},
    {"storage.k8s.io", "csidrivers", "CSIDriver"},
    {"storage.k8s.io", "csinodes", "CSINode"},
    {"storage.k8s.io", "csistoragecapacities", "CSIStorageCapacity"},
    {"storage.k8s.io", "volumeattachments", "VolumeAttachment"},
    {"storage.k8s.io", "volumeattributesclasses", "VolumeAttributesClass"},
    {"scheduling.k8s.io", "priorityclasses", "PriorityClass"},
    {"policy", "poddisruptionbudgets", "PodDisruptionBudget"},
    {"rbac.authorization.k8s.io", "roles", "Role"},
    {"rbac.authorization.k8s.io", "rolebindings", "RoleBinding"},
    {"rbac.authorization.k8s.io", "clusterroles", "ClusterRole"},
    {"rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding"},
    {"apiextensions.k8s.io", "customresourcedefinitions", "CustomResourceDefinition"},
    {"admissionregistration.k8s.io", "mutatingwebhookconfigurations",
     "MutatingWebhookConfiguration"},
    {"admissionregistration.k8s.io", "validatingwebhookconfigurations",
     "ValidatingWebhookConfiguration"},
    {"admissionregistration.k8s.io", "validatingadmissionpolicies", "ValidatingAdmissionPolicy"},
    {"admissionregistration.k8s.io", "validatingadmissionpolicybindings",
     "ValidatingAdmissionPolicyBinding"},
    {"autoscaling", "horizontalpodautoscalers", "HorizontalPodAutoscaler"},
    {"certificates.k8s.io", "certificatesigningrequests", "CertificateSigningRequest"},
    {"flowcontrol.apiserver.k8s.io", "flowschemas", "FlowSchema"},
    {"flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations", "PriorityLevelConfiguration"},
    {"apiregistration.k8s.io", "apiservices", "APIService"},
    {"authentication.k8s.io", "tokenreviews", "TokenReview"},
    {"authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview"},
    {"authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview"},
    {"authorization.k8s.io", "localsubjectaccessreviews", "LocalSubjectAccessReview"},
    {"authorization.k8s.io", "selfsubjectrulesreviews", "SelfSubjectRulesReview"},
};

const char *kinds_builtin(const char *group, const char *resource)
{
	if (!resource)
		return NULL;
	if (!group)
		group = "";
	for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
		if (strcmp(builtin[i].resource, resource) == 0 &&
		    strcmp(builtin[i].group, group) == 0)
			return builtin[i].kind;
	return NULL;
}

/* The kind of the resources[] entry named resource, or NULL. */
static const char *find_kind(const json_t *list, const char *resource)
{
	const json_t *resources = json_object_get(list, "resources");
	for (size_t i = 0; i < json_array_size(resources); i++) {
		const json_t *r = json_array_get(resources, i);
		const char *name = json_string_value(json_object_get(r, "name"));
		if (!name || strcmp(name, resource) != 0)
			continue;
		const char *kind = json_string_value(json_object_get(r, "kind"));
		return kind && *kind ? kind : NULL;
	}
	return NULL;
}

char *kinds_from_discovery(const char *json, size_t len, const char *resource)
{
	if (!json || !resource || !*resource || strchr(resource, '/'))
		return NULL;
	json_error_t e;
	json_t *doc = json_loadb(json, len, 0, &e);
	const char *doc_kind = json_string_value(json_object_get(doc, "kind"));
	const char *kind = NULL;
	if (doc_kind && strcmp(doc_kind, "APIResourceList") == 0)
		kind = find_kind(doc, resource);
	char *out = kind ? strdup(kind) : NULL;
	json_decref(doc);
	return out;
}
