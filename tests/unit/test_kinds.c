/*
 * test_kinds.c - kube/kinds: the built-in table, and kinds read from
 * discovery documents (/api/v1 and a CRD group), subresources ignored,
 * documents of another kind and malformed ones refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kinds.h"

static const char core_v1[] =
    "{\"kind\":\"APIResourceList\",\"groupVersion\":\"v1\",\"resources\":["
    "{\"name\":\"bindings\",\"singularName\":\"binding\",\"namespaced\":true,\"kind\":"
    "\"Binding\",\"verbs\":[\"create\"]},"
    "{\"name\":\"configmaps\",\"singularName\":\"configmap\",\"namespaced\":true,\"kind\":"
    "\"ConfigMap\",\"verbs\":[\"create\",\"delete\",\"deletecollection\",\"get\",\"list\","
    "\"patch\",\"update\",\"watch\"],\"shortNames\":[\"cm\"],\"storageVersionHash\":"
    "\"qFsyl6wFWjQ=\"},"
    "{\"name\":\"nodes\",\"singularName\":\"node\",\"namespaced\":false,\"kind\":\"Node\","
    "\"verbs\":[\"create\",\"delete\",\"get\",\"list\",\"patch\",\"update\",\"watch\"],"
    "\"shortNames\":[\"no\"]},"
    "{\"name\":\"nodes/proxy\",\"singularName\":\"\",\"namespaced\":false,\"kind\":"
    "\"NodeProxyOptions\",\"verbs\":[\"create\",\"get\"]},"
    "{\"name\":\"nodes/status\",\"singularName\":\"\",\"namespaced\":false,\"kind\":\"Node\","
    "\"verbs\":[\"get\",\"patch\",\"update\"]},"
    "{\"name\":\"pods/binding\",\"singularName\":\"\",\"namespaced\":true,\"kind\":"
    "\"Binding\",\"verbs\":[\"create\"]},"
    "{\"name\":\"pods/eviction\",\"singularName\":\"\",\"namespaced\":true,\"group\":"
    "\"policy\",\"version\":\"v1\",\"kind\":\"Eviction\",\"verbs\":[\"create\"]},"
    "{\"name\":\"pods\",\"singularName\":\"pod\",\"namespaced\":true,\"kind\":\"Pod\","
    "\"verbs\":[\"create\",\"delete\",\"deletecollection\",\"get\",\"list\",\"patch\","
    "\"update\",\"watch\"],\"shortNames\":[\"po\"],\"categories\":[\"all\"]},"
    "{\"name\":\"pods/log\",\"singularName\":\"\",\"namespaced\":true,\"kind\":\"Pod\","
    "\"verbs\":[\"get\"]},"
    "{\"name\":\"services\",\"singularName\":\"service\",\"namespaced\":true,\"kind\":"
    "\"Service\",\"verbs\":[\"create\",\"delete\",\"get\",\"list\",\"patch\",\"update\","
    "\"watch\"],\"shortNames\":[\"svc\"]}]}";

static const char crd_group[] =
    "{\n  \"kind\": \"APIResourceList\",\n  \"apiVersion\": \"v1\",\n"
    "  \"groupVersion\": \"apps.openyurt.io/v1beta1\",\n  \"resources\": [\n"
    "    {\"name\": \"nodepools/status\", \"singularName\": \"\", \"namespaced\": false,\n"
    "     \"kind\": \"NodePoolStatusKind\", \"verbs\": [\"get\", \"patch\", \"update\"]},\n"
    "    {\"name\": \"nodepools\", \"singularName\": \"nodepool\", \"namespaced\": false,\n"
    "     \"kind\": \"NodePool\", \"verbs\": [\"delete\", \"deletecollection\", \"get\",\n"
    "     \"list\", \"patch\", \"create\", \"update\", \"watch\"], \"shortNames\": [\"np\"],\n"
    "     \"storageVersionHash\": \"EpUMMzw2Zwo=\"},\n"
    "    {\"name\": \"widgets/status\", \"singularName\": \"\", \"namespaced\": true,\n"
    "     \"kind\": \"Widget\", \"verbs\": [\"get\"]}\n  ]\n}\n";

static void expect_kind(const char *doc, size_t len, const char *resource, const char *want)
{
	char *got = kinds_from_discovery(doc, len, resource);
	char copy[128] = "(null)";
	if (got)
		strncpy(copy, got, sizeof copy - 1);
	bool is_null = got == NULL;
	free(got);
	if (!want) {
		if (!is_null)
			fail_msg("%s: expected NULL, got %s", resource ? resource : "(null)", copy);
		return;
	}
	assert_false(is_null);
	assert_string_equal(copy, want);
}

static void test_builtin_core(void **state)
{
	(void)state;
	static const char *const pairs[][2] = {
	    {"pods", "Pod"},
	    {"nodes", "Node"},
	    {"services", "Service"},
	    {"endpoints", "Endpoints"},
	    {"configmaps", "ConfigMap"},
	    {"secrets", "Secret"},
	    {"namespaces", "Namespace"},
	    {"events", "Event"},
	    {"serviceaccounts", "ServiceAccount"},
	    {"persistentvolumes", "PersistentVolume"},
	    {"persistentvolumeclaims", "PersistentVolumeClaim"},
	    {"limitranges", "LimitRange"},
	    {"resourcequotas", "ResourceQuota"},
	    {"replicationcontrollers", "ReplicationController"},
	    {"podtemplates", "PodTemplate"},
	    {"componentstatuses", "ComponentStatus"},
	    {"bindings", "Binding"},
	};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		const char *k = kinds_builtin("", pairs[i][0]);
		assert_non_null(k);
		assert_string_equal(k, pairs[i][1]);
	}
	assert_string_equal(kinds_builtin(NULL, "pods"), "Pod");
}

static void test_builtin_groups(void **state)
{
	(void)state;
	static const char *const rows[][3] = {
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
	    {"node.k8s.io", "runtimeclasses", "RuntimeClass"},
	    {"storage.k8s.io", "storageclasses", "StorageClass"},
	    {"storage.k8s.io", "csidrivers", "CSIDriver"},
	    {"storage.k8s.io", "csinodes", "CSINode"},
	    {"storage.k8s.io", "csistoragecapacities", "CSIStorageCapacity"},
	    {"storage.k8s.io", "volumeattachments", "VolumeAttachment"},
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
	    {"admissionregistration.k8s.io", "validatingadmissionpolicies",
	     "ValidatingAdmissionPolicy"},
	    {"autoscaling", "horizontalpodautoscalers", "HorizontalPodAutoscaler"},
	    {"certificates.k8s.io", "certificatesigningrequests", "CertificateSigningRequest"},
	    {"flowcontrol.apiserver.k8s.io", "flowschemas", "FlowSchema"},
	    {"flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations",
	     "PriorityLevelConfiguration"},
	    {"apiregistration.k8s.io", "apiservices", "APIService"},
	};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const char *k = kinds_builtin(rows[i][0], rows[i][1]);
		if (!k)
			fail_msg("%s/%s: no kind", rows[i][0], rows[i][1]);
		assert_string_equal(k, rows[i][2]);
	}
}

static void test_builtin_unknown(void **state)
{
	(void)state;
	assert_null(kinds_builtin("", "widgets"));
	assert_null(kinds_builtin("apps", "pods")); /* right resource, wrong group */
	assert_null(kinds_builtin("", "deployments"));
	assert_null(kinds_builtin("", "pods/status"));
	assert_null(kinds_builtin("", "Pods"));
	assert_null(kinds_builtin("", ""));
	assert_null(kinds_builtin("", NULL));
	assert_null(kinds_builtin("apps.openyurt.io", "nodepools"));
}

static void test_discovery_core(void **state)
{
	(void)state;
	size_t n = strlen(core_v1);
	expect_kind(core_v1, n, "pods", "Pod");
	expect_kind(core_v1, n, "nodes", "Node");
	expect_kind(core_v1, n, "configmaps", "ConfigMap");
	expect_kind(core_v1, n, "services", "Service");
	expect_kind(core_v1, n, "bindings", "Binding");
	expect_kind(core_v1, n, "secrets", NULL);
	expect_kind(core_v1, n - 10, "pods", NULL); /* truncated */
}

static void test_discovery_crd(void **state)
{
	(void)state;
	size_t n = strlen(crd_group);
	expect_kind(crd_group, n, "nodepools", "NodePool");
	expect_kind(crd_group, n, "widgets", NULL);
	expect_kind(crd_group, n, "nodepool", NULL);
	expect_kind(crd_group, n, "NodePools", NULL);
}

static void test_discovery_subresources(void **state)
{
	(void)state;
	size_t n = strlen(core_v1);
	expect_kind(core_v1, n, "pods/eviction", NULL);
	expect_kind(core_v1, n, "pods/log", NULL);
	expect_kind(core_v1, n, "nodes/status", NULL);
	expect_kind(core_v1, n, "pods/", NULL);
	expect_kind(crd_group, strlen(crd_group), "widgets/status", NULL);
}

static void test_discovery_wrong_kind(void **state)
{
	(void)state;
	static const char group_doc[] =
	    "{\"kind\":\"APIGroup\",\"name\":\"apps\",\"resources\":[{\"name\":\"pods\",\"kind\":"
	    "\"Pod\"}]}";
	static const char no_kind[] = "{\"resources\":[{\"name\":\"pods\",\"kind\":\"Pod\"}]}";
	static const char kind_num[] = "{\"kind\":1,\"resources\":[{\"name\":\"pods\",\"kind\":"
				       "\"Pod\"}]}";
	expect_kind(group_doc, strlen(group_doc), "pods", NULL);
	expect_kind(no_kind, strlen(no_kind), "pods", NULL);
	expect_kind(kind_num, strlen(kind_num), "pods", NULL);
}

static void test_discovery_odd_entries(void **state)
{
	(void)state;
	static const char doc[] =
	    "{\"kind\":\"APIResourceList\",\"resources\":[1,null,{\"name\":5},{\"kind\":\"X\"},"
	    "{\"name\":\"a\"},{\"name\":\"b\",\"kind\":\"\"},{\"name\":\"c\",\"kind\":7},"
	    "{\"name\":\"d\",\"kind\":\"Dee\"}]}";
	static const char not_list[] = "{\"kind\":\"APIResourceList\",\"resources\":{\"name\":"
				       "\"d\",\"kind\":\"Dee\"}}";
	size_t n = strlen(doc);
	expect_kind(doc, n, "a", NULL);
	expect_kind(doc, n, "b", NULL);
	expect_kind(doc, n, "c", NULL);
	expect_kind(doc, n, "d", "Dee");
	expect_kind(not_list, strlen(not_list), "d", NULL);
	expect_kind(doc, n, "", NULL);
	expect_kind(doc, n, NULL, NULL);
}

static void test_discovery_malformed(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "",
	    "{",
	    "[]",
	    "null",
	    "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":\"pods\",\"kind\":\"Pod\"}]} x",
	    "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":\"pods\",\"kind\":\"Pod\"]}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		expect_kind(bad[i], strlen(bad[i]), "pods", NULL);
	expect_kind(NULL, 0, "pods", NULL);
	char *deep = malloc(200001);
	assert_non_null(deep);
	memset(deep, '[', 100000);
	memset(deep + 100000, ']', 100000);
	deep[200000] = '\0';
	char *got = kinds_from_discovery(deep, 200000, "pods");
	free(deep);
	assert_null(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_builtin_core),
	    cmocka_unit_test(test_builtin_groups),
	    cmocka_unit_test(test_builtin_unknown),
	    cmocka_unit_test(test_discovery_core),
	    cmocka_unit_test(test_discovery_crd),
	    cmocka_unit_test(test_discovery_subresources),
	    cmocka_unit_test(test_discovery_wrong_kind),
	    cmocka_unit_test(test_discovery_odd_entries),
	    cmocka_unit_test(test_discovery_malformed),
	};
	return cmocka_run_group_tests_name("kinds", tests, NULL, NULL);
}
