package bootstrap

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/apis/crds"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// fingerprint is what a request may change in the cluster: the CRDs
// (UID and labels), the user's and default NodePools and EC2NodeClasses,
// the controllers' RBAC and whom it binds, the FlowSchemas, the
// ConfigMaps of the namespace and the pause switch.
func fingerprint(t *testing.T, ctx context.Context, c *kube.Clients) string {
	t.Helper()
	var out []string
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range all {
		got, err := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			out = append(out, "crd "+crd.Name+" "+err.Error())
			continue
		}
		out = append(out, fmt.Sprintf("crd %s %s %v deleting=%v", crd.Name, got.UID, got.Labels, got.DeletionTimestamp != nil))
	}
	if l, err := c.NodePools.List(ctx, metav1.ListOptions{}); err == nil {
		for _, np := range l.Items {
			out = append(out, fmt.Sprintf("nodepool %s %s deleting=%v", np.Name, np.UID, np.DeletionTimestamp != nil))
		}
	}
	if l, err := c.EC2NodeClasses.List(ctx, metav1.ListOptions{}); err == nil {
		for _, nc := range l.Items {
			out = append(out, fmt.Sprintf("ec2nodeclass %s %s deleting=%v", nc.Name, nc.UID, nc.DeletionTimestamp != nil))
		}
	}
	if crb, err := c.Core.RbacV1().ClusterRoleBindings().Get(ctx, ClusterRoleName, metav1.GetOptions{}); err == nil {
		out = append(out, fmt.Sprintf("clusterrolebinding %s %v", crb.UID, crb.Subjects))
	} else {
		out = append(out, "clusterrolebinding "+err.Error())
	}
	if cr, err := c.Core.RbacV1().ClusterRoles().Get(ctx, ClusterRoleName, metav1.GetOptions{}); err == nil {
		out = append(out, fmt.Sprintf("clusterrole %s %d rules", cr.UID, len(cr.Rules)))
	} else {
		out = append(out, "clusterrole "+err.Error())
	}
	if rb, err := c.Core.RbacV1().RoleBindings(DefaultNamespace).Get(ctx, RoleName, metav1.GetOptions{}); err == nil {
		out = append(out, fmt.Sprintf("rolebinding %s %v", rb.UID, rb.Subjects))
	} else {
		out = append(out, "rolebinding "+err.Error())
	}
	for _, name := range FlowSchemas() {
		if fs, err := c.Core.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{}); err == nil {
			out = append(out, fmt.Sprintf("flowschema %s %s", name, fs.UID))
		} else {
			out = append(out, "flowschema "+name+" "+err.Error())
		}
	}
	cms, err := c.Core.CoreV1().ConfigMaps(DefaultNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		out = append(out, fmt.Sprintf("configmap %s %s %v", cm.Name, cm.UID, cm.Data))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// TestForgedRequestsChangeNothing is an attacker with the right to invoke
// the bootstrap function, on a real API server, with CloudFormation read
// through the real SDK from the emulator. The stack deletes user objects
// when it is deleted, and Karpenter's Helm chart (and a cluster
// autoscaler) installed four of the CRDs before it. Every forged request
// (a Delete of the installation asking for its user objects, one with no
// properties, an Update binding the controllers' grants to another group,
// answers to another host or stack, and the same during a genuine update
// of the stack) changes nothing in the cluster and sends nothing to the
// attacker. Then CloudFormation really deletes the stack: everything the
// bootstrap installed goes, the user's objects go as configured, the CRD
// it created goes, and the CRDs it found stay.
func TestForgedRequestsChangeNothing(t *testing.T) {
	e := kubetest.Need(t, env)
	c := e.Clients
	reset(t, c)
	ctx := testCtx(t)

	emu, err := emulator.New(emulator.Config{ClusterName: testCluster}) // hostile: CloudFormation throttles too
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	awsCfg, err := emu.AWSConfig("bootstrap", 0)
	if err != nil {
		t.Fatal(err)
	}
	stackID := emu.AddStack("Karpless-" + testCluster)

	// Karpenter's CRDs as its chart installs them, and CapacityBuffer as
	// a cluster autoscaler does; NodeOverlay is left for Karpless.
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, crd := range all {
		if crd.Name == "nodeoverlays.karpenter.sh" {
			continue
		}
		k := crd.DeepCopy()
		k.Labels = map[string]string{ManagedByLabel: "Helm"}
		if _, err := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, k, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
			t.Fatal(err)
		}
		found[crd.Name] = true
	}
	waitStorage(t, c)

	settings := Options{ClusterName: testCluster, NodeRoleName: "KarpenterNodeRole-" + testCluster, DefaultNodePool: true, RemoveUserObjects: true}
	s3 := &answers{}
	handler := func(o Options) cfn.CustomResourceLambdaFunction {
		return Handler(HandlerConfig{
			Options: o, StackID: stackID, Region: emu.Region(), Stacks: cloudformation.NewFromConfig(awsCfg), HTTP: s3,
			Connect: func(context.Context) (*kube.Clients, error) { return c, nil }, RetryDelay: 50e6,
		})
	}
	h := handler(settings)
	request := func(typ cfn.RequestType, hashOf Options, kv ...string) cfn.Event {
		ev := cfnEvent(typ, PhysicalID(testCluster), hashOf, kv...)
		ev.StackID = stackID
		return ev
	}
	answered := func(what string, ev cfn.Event, want string) {
		t.Helper()
		if reason, err := h(ctx, ev); err != nil || reason != "" {
			t.Fatalf("%s: %q %v", what, reason, err)
		}
		got := s3.take()
		if len(got) != 1 || got[0].Status != want || got[0].URL != ev.ResponseURL {
			t.Fatalf("%s: answers %+v, want one %s to CloudFormation", what, got, want)
		}
	}

	// The genuine deploy.
	answered("Create", request(cfn.RequestCreate, settings), "SUCCESS")
	emu.SetStackStatus(stackID, emulator.StackCreateComplete)
	team := DefaultNodePool()
	team.Name, team.Labels = "team", nil
	if _, err := c.NodePools.Create(ctx, team, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := fingerprint(t, ctx, c)
	for _, want := range []string{"nodepool team", "nodepool default", "ec2nodeclass default", "crd nodeoverlays.karpenter.sh", "configmap karpless-pause"} {
		if !strings.Contains(before, want) {
			t.Fatalf("the install lacks %s:\n%s", want, before)
		}
	}
	attackers := settings
	attackers.ControllersGroup = "attackers"
	var stolen atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { stolen.Add(1) }))
	t.Cleanup(collector.Close)

	forged := func(stackStatus string) {
		t.Helper()
		emu.SetStackStatus(stackID, stackStatus)
		for _, tc := range []struct {
			name   string
			ev     cfn.Event
			answer string // "" for refused, without an answer
		}{
			{"Delete removing user objects, no Mode", request(cfn.RequestDelete, settings, "RemoveUserObjectsOnDelete", "true", "Mode", ""), "SUCCESS"},
			{"Delete without properties", func() cfn.Event { ev := request(cfn.RequestDelete, settings); ev.ResourceProperties = nil; return ev }(), "SUCCESS"},
			{"Update binding the controllers to another group", request(cfn.RequestUpdate, attackers, "ControllersGroup", "attackers"), "FAILED"},
			{"Create with another namespace", request(cfn.RequestCreate, Options{ClusterName: testCluster, Namespace: "default"}, "Namespace", "default"), "FAILED"},
			{"Delete answered to the attacker", func() cfn.Event {
				ev := request(cfn.RequestDelete, settings)
				ev.ResponseURL = collector.URL
				return ev
			}(), ""},
			{"Delete of another stack", func() cfn.Event {
				ev := request(cfn.RequestDelete, settings)
				ev.StackID = strings.Replace(stackID, "Karpless-", "Attacker-", 1)
				return ev
			}(), ""},
		} {
			if tc.answer == "" {
				if _, err := h(ctx, tc.ev); err == nil || len(s3.take()) > 0 {
					t.Errorf("%s (%s): not refused: %v", tc.name, stackStatus, err)
				}
			} else {
				answered(tc.name+" ("+stackStatus+")", tc.ev, tc.answer)
			}
			if after := fingerprint(t, ctx, c); after != before {
				t.Fatalf("%s (%s) changed the cluster:\nbefore:\n%s\nafter:\n%s", tc.name, stackStatus, before, after)
			}
		}
	}
	forged(emulator.StackCreateComplete)
	// During a genuine update of the stack, too.
	forged(emulator.StackUpdateInProgress)
	if n := stolen.Load(); n > 0 {
		t.Errorf("%d answers went to the attacker's host", n)
	}

	// CloudFormation really deletes the stack.
	emu.SetStackStatus(stackID, emulator.StackDeleteInProgress)
	answered("the stack's Delete", request(cfn.RequestDelete, settings), "SUCCESS")
	gone := func(what string, err error) {
		t.Helper()
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s after the stack's deletion: %v", what, err)
		}
	}
	_, err = c.Core.RbacV1().ClusterRoles().Get(ctx, ClusterRoleName, metav1.GetOptions{})
	gone("the ClusterRole", err)
	_, err = c.Core.RbacV1().ClusterRoleBindings().Get(ctx, ClusterRoleName, metav1.GetOptions{})
	gone("the ClusterRoleBinding", err)
	_, err = c.Core.RbacV1().RoleBindings(DefaultNamespace).Get(ctx, RoleName, metav1.GetOptions{})
	gone("the RoleBinding", err)
	for _, name := range FlowSchemas() {
		_, err = c.Core.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
		gone("FlowSchema "+name, err)
	}
	for _, name := range append(StateConfigMaps(), PauseConfigMap) {
		_, err = c.Core.CoreV1().ConfigMaps(DefaultNamespace).Get(ctx, name, metav1.GetOptions{})
		gone("ConfigMap "+name, err)
	}
	for _, crd := range all {
		got, err := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		deleting := apierrors.IsNotFound(err) || (err == nil && got.DeletionTimestamp != nil)
		switch {
		case found[crd.Name] && (err != nil || deleting):
			t.Errorf("CRD %s, installed before Karpless, was deleted (%v)", crd.Name, err)
		case !found[crd.Name] && !deleting:
			t.Errorf("CRD %s, created by Karpless, was not deleted", crd.Name)
		}
	}
	// The user's objects go, as the stack asked (their kinds stay served:
	// their CRDs were Karpenter's).
	pools, err := c.NodePools.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range pools.Items {
		if np.DeletionTimestamp == nil && slices.Contains([]string{"team", DefaultName}, np.Name) {
			t.Errorf("NodePool %s was not deleted with the stack", np.Name)
		}
	}
}
