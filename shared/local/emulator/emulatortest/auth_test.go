package emulatortest_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/controlplane"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/emulator/emulatortest"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// TestTokenWebhook runs a kube-apiserver that authenticates bearer tokens
// through the emulator, as EKS does: each function's presigned STS token
// maps to the groups its access entry would give, so RBAC is exercised
// exactly as in a cluster.
func TestTokenWebhook(t *testing.T) {
	kubetest.Need(t, env) // binaries built, not -short
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := emulatortest.New(t, nil, nil)
	cluster, err := controlplane.Start(ctx, controlplane.Config{
		TokenWebhookURL: e.TokenWebhookURL(), TokenWebhookCacheTTL: time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		if errors.Is(err, controlplane.ErrNotBuilt) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	admin, err := kube.NewClients(cluster.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ConnectCluster(admin, "", nil); err != nil {
		t.Fatal(err)
	}
	// What the bootstrap function installs, in miniature: the controllers
	// group may read nodes.
	if _, err := admin.Core.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "karpless-test"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Core.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "karpless-test"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "karpless-test"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: emulator.ControllersGroup}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The client a function builds: endpoint and CA from DescribeCluster,
	// a bearer token from the presigned STS URL.
	as := func(identity string) kubernetes.Interface {
		t.Helper()
		token, err := e.Token(ctx, identity)
		if err != nil {
			t.Fatal(err)
		}
		cfg := &rest.Config{Host: cluster.RESTConfig.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAFile: cluster.RESTConfig.CAFile}}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	prov := as("provisioner")
	// The API server's RBAC authorizer reads bindings from an informer, so
	// a binding just created is honoured a moment later (under load, a
	// few seconds).
	var listErr error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, listErr = prov.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return listErr == nil || !apierrors.IsForbidden(listErr), nil
	}); err != nil || listErr != nil {
		t.Errorf("provisioner listing nodes: %v", listErr)
	}
	_, err = prov.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "not-allowed"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("provisioner creating a namespace: %v, want forbidden", err)
	}
	review, err := prov.AuthenticationV1().SelfSubjectReviews().Create(ctx, nil, metav1.CreateOptions{})
	if err == nil {
		id, _ := e.Identity("provisioner")
		if review.Status.UserInfo.Username != id.Username {
			t.Errorf("provisioner is %q, want %q", review.Status.UserInfo.Username, id.Username)
		}
	}
	if _, err := as("bootstrap").CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-may"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("bootstrap (system:masters) creating a namespace: %v", err)
	}
	bad, _ := kubernetes.NewForConfig(&rest.Config{Host: cluster.RESTConfig.Host, BearerToken: emulator.TokenPrefix + "bm90LWEtdXJs", TLSClientConfig: rest.TLSClientConfig{CAFile: cluster.RESTConfig.CAFile}})
	if _, err := bad.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("junk token: %v, want unauthorized", err)
	}
	reviews := 0
	for _, c := range e.Calls() {
		if c.Action == "TokenReview" {
			reviews++
		}
	}
	if reviews < 3 {
		t.Errorf("%d TokenReviews reached the emulator", reviews)
	}
}
