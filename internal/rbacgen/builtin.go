package rbacgen

import "k8s.io/apimachinery/pkg/runtime/schema"

// builtinResource is a built-in kind's resource and scope.
type builtinResource struct {
	Resource   string
	Namespaced bool
}

// builtinResources are the kinds kube-apiserver serves by default, with
// their plural resource and scope, so a config naming a built-in kind
// needs no cluster to generate its RBAC. Only kinds this table does not
// have (CRDs, APIs off by default) need discovery (--kubeconfig).
// TestBuiltinKindsAreTheAPIServers checks it against the control plane the
// tests run (and prints it again when a new Kubernetes changes it).
var builtinResources = map[schema.GroupKind]builtinResource{
	{Group: "", Kind: "Binding"}:                                                      {"bindings", true},
	{Group: "", Kind: "ComponentStatus"}:                                              {"componentstatuses", false},
	{Group: "", Kind: "ConfigMap"}:                                                    {"configmaps", true},
	{Group: "", Kind: "Endpoints"}:                                                    {"endpoints", true},
	{Group: "", Kind: "Event"}:                                                        {"events", true},
	{Group: "", Kind: "LimitRange"}:                                                   {"limitranges", true},
	{Group: "", Kind: "Namespace"}:                                                    {"namespaces", false},
	{Group: "", Kind: "Node"}:                                                         {"nodes", false},
	{Group: "", Kind: "PersistentVolume"}:                                             {"persistentvolumes", false},
	{Group: "", Kind: "PersistentVolumeClaim"}:                                        {"persistentvolumeclaims", true},
	{Group: "", Kind: "Pod"}:                                                          {"pods", true},
	{Group: "", Kind: "PodTemplate"}:                                                  {"podtemplates", true},
	{Group: "", Kind: "ReplicationController"}:                                        {"replicationcontrollers", true},
	{Group: "", Kind: "ResourceQuota"}:                                                {"resourcequotas", true},
	{Group: "", Kind: "Secret"}:                                                       {"secrets", true},
	{Group: "", Kind: "Service"}:                                                      {"services", true},
	{Group: "", Kind: "ServiceAccount"}:                                               {"serviceaccounts", true},
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          {"mutatingadmissionpolicies", false},
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   {"mutatingadmissionpolicybindings", false},
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     {"mutatingwebhookconfigurations", false},
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        {"validatingadmissionpolicies", false},
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: {"validatingadmissionpolicybindings", false},
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   {"validatingwebhookconfigurations", false},
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 {"customresourcedefinitions", false},
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             {"apiservices", false},
	{Group: "apps", Kind: "ControllerRevision"}:                                       {"controllerrevisions", true},
	{Group: "apps", Kind: "DaemonSet"}:                                                {"daemonsets", true},
	{Group: "apps", Kind: "Deployment"}:                                               {"deployments", true},
	{Group: "apps", Kind: "ReplicaSet"}:                                               {"replicasets", true},
	{Group: "apps", Kind: "StatefulSet"}:                                              {"statefulsets", true},
	{Group: "authentication.k8s.io", Kind: "SelfSubjectReview"}:                       {"selfsubjectreviews", false},
	{Group: "authentication.k8s.io", Kind: "TokenReview"}:                             {"tokenreviews", false},
	{Group: "authorization.k8s.io", Kind: "LocalSubjectAccessReview"}:                 {"localsubjectaccessreviews", true},
	{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}:                  {"selfsubjectaccessreviews", false},
	{Group: "authorization.k8s.io", Kind: "SelfSubjectRulesReview"}:                   {"selfsubjectrulesreviews", false},
	{Group: "authorization.k8s.io", Kind: "SubjectAccessReview"}:                      {"subjectaccessreviews", false},
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}:                           {"horizontalpodautoscalers", true},
	{Group: "batch", Kind: "CronJob"}:                                                 {"cronjobs", true},
	{Group: "batch", Kind: "Job"}:                                                     {"jobs", true},
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 {"certificatesigningrequests", false},
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:                        {"clustertrustbundles", false},
	{Group: "certificates.k8s.io", Kind: "PodCertificateRequest"}:                     {"podcertificaterequests", true},
	{Group: "coordination.k8s.io", Kind: "Lease"}:                                     {"leases", true},
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"}:                                {"endpointslices", true},
	{Group: "events.k8s.io", Kind: "Event"}:                                           {"events", true},
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       {"flowschemas", false},
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       {"prioritylevelconfigurations", false},
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                                   {"ipaddresses", false},
	{Group: "networking.k8s.io", Kind: "Ingress"}:                                     {"ingresses", true},
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                {"ingressclasses", false},
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:                               {"networkpolicies", true},
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:                                 {"servicecidrs", false},
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      {"runtimeclasses", false},
	{Group: "policy", Kind: "PodDisruptionBudget"}:                                    {"poddisruptionbudgets", true},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         {"clusterroles", false},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  {"clusterrolebindings", false},
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:                                {"roles", true},
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:                         {"rolebindings", true},
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   {"deviceclasses", false},
	{Group: "resource.k8s.io", Kind: "DeviceTaintRule"}:                               {"devicetaintrules", false},
	{Group: "resource.k8s.io", Kind: "ResourceClaim"}:                                 {"resourceclaims", true},
	{Group: "resource.k8s.io", Kind: "ResourceClaimTemplate"}:                         {"resourceclaimtemplates", true},
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                                 {"resourceslices", false},
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               {"priorityclasses", false},
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      {"csidrivers", false},
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        {"csinodes", false},
	{Group: "storage.k8s.io", Kind: "CSIStorageCapacity"}:                             {"csistoragecapacities", true},
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   {"storageclasses", false},
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               {"volumeattachments", false},
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}:                          {"volumeattributesclasses", false},
	{Group: "storagemigration.k8s.io", Kind: "StorageVersionMigration"}:               {"storageversionmigrations", false},
}

// builtinByResource is builtinResources by group and resource, for the
// scope of a resource a write grant names.
var builtinByResource = func() map[schema.GroupResource]builtinResource {
	out := make(map[schema.GroupResource]builtinResource, len(builtinResources))
	for gk, r := range builtinResources {
		out[schema.GroupResource{Group: gk.Group, Resource: r.Resource}] = r
	}
	return out
}()
