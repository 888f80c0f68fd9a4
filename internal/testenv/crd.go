package testenv

import (
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WidgetCRD is the namespaced Widget (widgets.<group>) with versions: the
// custom resource the tests install when they need one the apiserver does
// not serve until they do. Each test's group is its own, so packages
// sharing nothing share no CRD either.
func WidgetCRD(group string, versions ...apiextv1.CustomResourceDefinitionVersion) *apiextv1.CustomResourceDefinition {
	return &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group:    group,
			Names:    apiextv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope:    apiextv1.NamespaceScoped,
			Versions: versions,
		},
	}
}

// OpenWidgetVersion is a Widget version that takes any object, the
// storage version when it is v1.
func OpenWidgetVersion(name string, served bool) apiextv1.CustomResourceDefinitionVersion {
	return apiextv1.CustomResourceDefinitionVersion{Name: name, Served: served, Storage: name == "v1",
		Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{
			Type: "object", XPreserveUnknownFields: new(true),
		}}}
}
