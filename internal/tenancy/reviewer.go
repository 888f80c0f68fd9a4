package tenancy

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Reviewer answers whether user may do what attrs say: allowed, and the
// authorizer's reason when it says no.
type Reviewer interface {
	Allowed(ctx context.Context, user string, attrs authorizationv1.ResourceAttributes) (bool, string, error)
}

// NewReviewer asks the apiserver, by a SubjectAccessReview, with c's
// credentials (the daemon's: it needs create on subjectaccessreviews).
func NewReviewer(c kubernetes.Interface) Reviewer { return sarReviewer{c: c} }

type sarReviewer struct{ c kubernetes.Interface }

func (r sarReviewer) Allowed(ctx context.Context, user string, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs}
	// A token of the ServiceAccount would carry its groups, and RBAC
	// bound to them (system:serviceaccounts:<ns>) must count as well.
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		if ns, _, ok := strings.Cut(rest, ":"); ok {
			spec.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
		}
	}
	res, err := r.c.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("reviewing whether %s may %s %s: %w", user, attrs.Verb, attrs.Resource, err)
	}
	return res.Status.Allowed && !res.Status.Denied, res.Status.Reason, nil
}
