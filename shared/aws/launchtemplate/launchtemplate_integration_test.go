package launchtemplate_test

import (
	"context"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/launchtemplate"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube/eksauth"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/emulator/emulatortest"
)

// TestIntegrationEnsureAndCollect resolves a class and ensures its launch
// templates against the emulator through the real SDK, then checks what EC2
// holds: names, tags, the user data a node reads, reuse and collection.
func TestIntegrationEnsureAndCollect(t *testing.T) {
	emu, c := emulatortest.SDKClients(t, 11, "provisioner")
	ctx := context.Background()
	cl := emu.ClusterName()
	info, err := eksauth.New(eksauth.ClusterSource{Name: cl, Endpoint: "https://" + cl + ".example", CAData: "Y2EtYnVuZGxlCg==", EKS: c.EKS}).Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nc := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-2", Generation: 1},
		Spec: awsv1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{wellknown.DiscoveryTagKey: cl}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{wellknown.DiscoveryTagKey: cl}}},
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       emulator.NodeRoleName(cl),
			Tags:                       map[string]string{"team": "platform"},
		},
	}
	r := &nodeclass.Resolver{EC2: c.EC2, SSM: c.SSM, IAM: c.IAM, Region: emu.Region(), Validate: launchtemplate.Validate}
	st, err := r.Resolve(ctx, nc, info)
	if err != nil {
		t.Fatal(err)
	}
	if !isTrue(st, awsv1.ConditionTypeReady) {
		t.Fatalf("class not ready: %+v", st.Conditions)
	}
	nc.Status = st

	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	var types []*scheduling.InstanceType
	for _, name := range []string{"m5.large", "m5.xlarge", "m6g.large", "g5.xlarge"} {
		it, ok := cat.Get(name)
		if !ok {
			t.Fatalf("no %s in the catalog", name)
		}
		pods := it.Pods(catalog.NodeConfigFor(nc, nodeclass.Family(nc)))
		types = append(types, &scheduling.InstanceType{Name: name, Labels: it.Labels(),
			Capacity: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}})
	}
	claim := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "general-x1", Labels: map[string]string{wellknown.NodePoolLabel: "general", wellknown.EC2NodeClassLabel: "default"}},
		Spec:       karpv1.NodeClaimSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}},
	}
	req := launchtemplate.Request{NodeClass: nc, NodeClaim: claim, InstanceTypes: types, CapacityType: wellknown.CapacityTypeSpot, Cluster: info}
	p := &launchtemplate.Provider{EC2: c.EC2}

	// Concurrent ensures (two Lambdas) create each template once.
	var wg sync.WaitGroup
	results := make([][]launchtemplate.LaunchTemplate, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := p.Ensure(ctx, req)
			if err != nil {
				t.Error(err)
			}
			results[i] = out
		}()
	}
	wg.Wait()
	lts := results[0]
	for _, r := range results[1:] {
		if !reflect.DeepEqual(r, lts) {
			t.Fatalf("concurrent ensures disagree:\n%+v\n%+v", r, lts)
		}
	}
	// m5.large (29 pods), m5.xlarge (58), m6g.large (arm64), g5.xlarge (GPU AMI).
	if len(lts) != 4 {
		t.Fatalf("templates %+v", lts)
	}
	held := emu.LaunchTemplates()
	if len(held) != 4 {
		t.Fatalf("emulator holds %d templates", len(held))
	}
	byName := map[string]emulator.LaunchTemplate{}
	for _, lt := range held {
		byName[lt.Name] = lt
	}
	for _, lt := range lts {
		h, ok := byName[lt.Name]
		if !ok || h.ImageID != lt.ImageID || h.InstanceProfile != st.InstanceProfile {
			t.Fatalf("%s: held %+v", lt.Name, h)
		}
		for k, v := range map[string]string{"team": "platform", wellknown.ClusterTagKey(cl): "owned", wellknown.NodePoolTagKey: "general",
			wellknown.EKSClusterNameTagKey: cl, wellknown.EC2NodeClassTagKey: "default"} {
			if h.Tags[k] != v || h.TagSpecs["network-interface"][k] != v || h.TagSpecs["spot-instances-request"][k] != v {
				t.Errorf("%s: tag %s missing (%v, %v)", lt.Name, k, h.Tags, h.TagSpecs)
			}
		}
		if !reflect.DeepEqual(h.SecurityGroupIDs, []string{st.SecurityGroups[0].ID}) {
			t.Errorf("%s: security groups %v", lt.Name, h.SecurityGroupIDs)
		}
		nb, err := launchtemplate.ParseUserData(catalog.FamilyAL2023, h.UserData)
		if err != nil {
			t.Fatal(err)
		}
		if nb.ClusterName != cl || nb.Labels[wellknown.CapacityTypeLabel] != "spot" || nb.Labels[wellknown.NodePoolLabel] != "general" || len(nb.Taints) != 2 || nb.MaxPods == 0 {
			t.Errorf("%s: node bootstrap %+v", lt.Name, nb)
		}
	}
	if n := emu.CallCount("CreateLaunchTemplate"); n < 4 {
		t.Fatalf("CreateLaunchTemplate called %d times", n)
	}
	// Reuse creates nothing new (a template EC2 does not list yet may be
	// asked for again and answer "already exists", which is reuse too).
	if again, err := p.Ensure(ctx, req); err != nil || !reflect.DeepEqual(again, lts) || len(emu.LaunchTemplates()) != 4 {
		t.Fatalf("reuse: %v %+v, %d templates held", err, again, len(emu.LaunchTemplates()))
	}

	// Collection keeps what is in use, deletes the rest, and Ensure
	// recreates a collected template under the same name.
	p.Now = func() time.Time { return time.Now().Add(time.Hour) }
	keep := lts[0].Name
	// EC2 lists new templates a few seconds late; collection runs every
	// two minutes and catches what an earlier run could not see yet.
	var deleted []string
	for start := time.Now(); len(deleted) < 3 && time.Since(start) < 10*time.Second; time.Sleep(200 * time.Millisecond) {
		more, err := p.DeleteUnused(ctx, cl, func(n string) bool { return n == keep }, 30*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, more...)
	}
	sort.Strings(deleted)
	if len(deleted) != 3 || len(emu.LaunchTemplates()) != 1 || emu.LaunchTemplates()[0].Name != keep {
		t.Fatalf("deleted %v, left %+v", deleted, emu.LaunchTemplates())
	}
	again, err := p.Ensure(ctx, req)
	if err != nil || len(again) != 4 || again[1].Name != lts[1].Name || len(emu.LaunchTemplates()) != 4 {
		t.Fatalf("recreate: %v %+v", err, again)
	}
	// Templates made seconds ago may not be listed yet: a later pass (or
	// the hourly collection) removes them.
	deleted = nil
	for start := time.Now(); len(deleted) < 4 && time.Since(start) < 10*time.Second; time.Sleep(200 * time.Millisecond) {
		more, err := p.DeleteForNodeClass(ctx, cl, "default")
		if err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, more...)
	}
	if len(deleted) != 4 || len(emu.LaunchTemplates()) != 0 {
		t.Fatalf("class deletion: %v, %d templates left", deleted, len(emu.LaunchTemplates()))
	}

	// One invocation's launches ensure each template once: a second Ensure
	// with the same memory calls EC2 for nothing, and one it was told to
	// forget (a launch met NotFound: collected meanwhile) is made again.
	seen := &launchtemplate.Seen{}
	req.Seen = seen
	first, err := p.Ensure(ctx, req)
	if err != nil || len(first) != 4 {
		t.Fatalf("ensure with memory: %v %+v", err, first)
	}
	calls := func() int { return emu.CallCount("DescribeLaunchTemplates") + emu.CallCount("CreateLaunchTemplate") }
	before := calls()
	if again, err := p.Ensure(ctx, req); err != nil || !reflect.DeepEqual(again, first) || calls() != before {
		t.Fatalf("remembered ensure: %v %+v, %d EC2 calls", err, again, calls()-before)
	}
	for start := time.Now(); len(emu.LaunchTemplates()) > 0 && time.Since(start) < 10*time.Second; time.Sleep(200 * time.Millisecond) {
		if _, err := p.DeleteForNodeClass(ctx, cl, "default"); err != nil {
			t.Fatal(err)
		}
	}
	seen.Forget(first[0].Name)
	if again, err := p.Ensure(ctx, req); err != nil || !reflect.DeepEqual(again, first) {
		t.Fatalf("ensure after forgetting: %v %+v", err, again)
	}
	if held := emu.LaunchTemplates(); len(held) != 1 || held[0].Name != first[0].Name {
		t.Fatalf("after forgetting one template, EC2 holds %+v; want only %s made again", held, first[0].Name)
	}
}

func isTrue(st awsv1.EC2NodeClassStatus, typ string) bool {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
