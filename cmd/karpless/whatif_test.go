package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/clock"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/pricing"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/local/whatif"
)

var kenv *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &kenv, kubetest.Options{Scheduler: true})) }

// fakeEC2 answers the pricing book's two calls: m5.large and m5.xlarge in
// two zones, with spot prices.
type fakeEC2 struct{}

func (fakeEC2) DescribeInstanceTypeOfferings(ctx context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	var out ec2.DescribeInstanceTypeOfferingsOutput
	for _, t := range []string{"m5.large", "m5.xlarge"} {
		for _, z := range []string{"us-east-1a", "us-east-1b"} {
			out.InstanceTypeOfferings = append(out.InstanceTypeOfferings, ec2types.InstanceTypeOffering{InstanceType: ec2types.InstanceType(t), Location: aws.String(z)})
		}
	}
	return &out, nil
}

// DescribeInstanceTypes fails: the build's catalog stands in.
func (fakeEC2) DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	return nil, errors.New("not answered by this fake")
}

func (fakeEC2) DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, _ ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	now := time.Now()
	q := func(t, z, p string) ec2types.SpotPrice {
		return ec2types.SpotPrice{InstanceType: ec2types.InstanceType(t), AvailabilityZone: aws.String(z), SpotPrice: aws.String(p), Timestamp: &now}
	}
	return &ec2.DescribeSpotPriceHistoryOutput{SpotPriceHistory: []ec2types.SpotPrice{
		q("m5.large", "us-east-1a", "0.0500"), q("m5.large", "us-east-1b", "0.0300"),
		q("m5.xlarge", "us-east-1a", "0.0900"), q("m5.xlarge", "us-east-1b", "0.0800"),
	}}, nil
}

func cond(t string, at time.Time) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t, LastTransitionTime: metav1.NewTime(at)}
}

// TestWhatIfCommands drives explain, simulate and snapshot against a real
// API server: a ready-looking EC2NodeClass, a NodePool, a pending pod the
// scheduler marked Unschedulable, a managed node with a NodeClaim and a
// pod that must not be disrupted, and the functions' pricing and
// capacity-mark ConfigMaps as the functions' own code writes them.
func TestWhatIfCommands(t *testing.T) {
	e := kubetest.Need(t, kenv)
	ctx := context.Background()
	kc := e.Clients
	ns, kns, name := e.Namespace(t), e.Namespace(t), kubetest.Name(t)
	kubeconfig := e.Cluster.Kubeconfig

	// EC2NodeClass, resolved-looking.
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: awsv1.EC2NodeClassSpec{
		Role:                       "KarpenterNodeRole-test",
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
		UserData:                   aws.String("echo secret-user-data"),
	}}
	class, err := kc.EC2NodeClasses.Create(ctx, class, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.EC2NodeClasses.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	now := time.Now()
	class.Status = awsv1.EC2NodeClassStatus{
		Subnets:         []awsv1.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}, {ID: "subnet-b", Zone: "us-east-1b"}},
		SecurityGroups:  []awsv1.SecurityGroup{{ID: "sg-1"}},
		AMIs:            []awsv1.AMI{{ID: "ami-1", Requirements: []corev1.NodeSelectorRequirement{{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}},
		InstanceProfile: "profile-test",
		Conditions:      []metav1.Condition{{Type: awsv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: class.Generation, LastTransitionTime: metav1.NewTime(now)}},
	}
	if _, err := kc.EC2NodeClasses.UpdateStatus(ctx, class, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// NodePool of m5.large and m5.xlarge, spot and on-demand.
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	pool.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: name}
	pool.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge"}},
		{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}},
	}
	if _, err := kc.NodePools.Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.NodePools.Delete(context.Background(), name, metav1.DeleteOptions{}) })

	// The functions' ConfigMaps, written by their own code: the book, and
	// a capacity mark on the cheapest spot offering.
	src := &pricing.Source{EC2: fakeEC2{}, ConfigMap: kc.Core.CoreV1(), Namespace: kns, Clock: clock.RealClock{}}
	if _, err := src.Get(ctx); err != nil {
		t.Fatal(err)
	}
	marks, err := unavailable.Load(ctx, kc.Core.CoreV1(), kns, 3*time.Minute, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	marks.Mark("spot", "m5.large", "us-east-1b", "InsufficientInstanceCapacity")
	if err := marks.Save(ctx); err != nil {
		t.Fatal(err)
	}

	// A managed node (tainted so the scheduler keeps off it), its claim,
	// and a pod on it that must not be disrupted.
	node := "ip-10-0-0-1-" + name[len(name)-6:]
	pid := wellknown.ProviderID("us-east-1a", "i-0123456789abcdef0")
	labels := map[string]string{
		wellknown.NodePoolLabel: name, wellknown.InstanceTypeLabel: "m5.xlarge", wellknown.ZoneLabel: "us-east-1a",
		wellknown.CapacityTypeLabel: "on-demand", wellknown.ArchLabel: "amd64", wellknown.OSLabel: "linux", corev1.LabelHostname: node,
	}
	n, err := kc.Core.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: pid, Taints: []corev1.Taint{{Key: "example.com/reserved", Effect: corev1.TaintEffectNoSchedule}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.Core.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3920m"), corev1.ResourceMemory: resource.MustParse("14Gi"), corev1.ResourcePods: resource.MustParse("58")}
	n.Status = corev1.NodeStatus{Allocatable: alloc, Capacity: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}}}
	if _, err := kc.Core.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	claimName := name + "-abcde"
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: claimName, Labels: labels}}
	claim.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: name}
	claim.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{name}},
		{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge"}},
		{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}},
	}
	claim, err = kc.NodeClaims.Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.NodeClaims.Delete(context.Background(), claimName, metav1.DeleteOptions{}) })
	claim.Status.ProviderID, claim.Status.NodeName, claim.Status.Allocatable, claim.Status.Capacity = pid, node, alloc, alloc
	claim.Status.Conditions = []metav1.Condition{cond(karpv1.ConditionTypeLaunched, now), cond(karpv1.ConditionTypeRegistered, now), cond(karpv1.ConditionTypeInitialized, now)}
	if _, err := kc.NodeClaims.UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mkPod := func(pod, onNode string, ann map[string]string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns, Annotations: ann, Labels: map[string]string{"app": pod}},
			Spec: corev1.PodSpec{NodeName: onNode, Containers: []corev1.Container{{
				Name: "c", Image: "registry.example.com/app:1", Env: []corev1.EnvVar{{Name: "PASSWORD", Value: "hunter2"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
			}}},
		}
		if _, err := kc.Core.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mkPod("bound", node, map[string]string{wellknown.DoNotDisruptAnnotation: "true"})
	mkPod("pending", "", nil)
	deadline := time.Now().Add(time.Minute)
	for {
		p, err := kc.Core.CoreV1().Pods(ns).Get(ctx, "pending", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Status.Conditions) > 0 && p.Status.Conditions[0].Reason == corev1.PodReasonUnschedulable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler did not mark the pod Unschedulable: %+v", p.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}

	live := []string{"--kubeconfig", kubeconfig, "--karpless-namespace", kns}
	cli := func(want int, args ...string) (string, string) {
		t.Helper()
		code, out, errs := runCLI(ctx, args...)
		if code != want {
			t.Fatalf("karpless %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errs)
		}
		return out, errs
	}
	contains := func(what, s string, wants ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(s, w) {
				t.Errorf("%s lacks %q:\n%s", what, w, s)
			}
		}
	}

	// explain pod: the book's spot price, without the marked offering.
	out, _ := cli(0, append([]string{"explain", "pod", ns + "/pending"}, live...)...)
	contains("explain pod", out,
		"Pod "+ns+"/pending (pending): needs a new NodeClaim of NodePool "+name+": 2 instance type(s) fit; the launch would pick m5.large spot in us-east-1a at $0.0500/h",
		"taint example.com/reserved", "1 offering(s) marked unavailable")
	out, _ = cli(0, append([]string{"explain", "pod", "-o", "json", "-n", ns, "pending"}, live...)...)
	var pr whatif.PodReport
	if err := json.Unmarshal([]byte(out), &pr); err != nil || pr.Placement == nil || pr.Placement.Kind != whatif.OnNewClaim || pr.Placement.New.Launch.PricePerHour != 0.05 {
		t.Errorf("explain pod -o json: %v\n%s", err, out)
	}
	_, errs := cli(1, append([]string{"explain", "pod", ns + "/ghost"}, live...)...)
	contains("explain missing pod", errs, "pod "+ns+"/ghost not found")
	// A pod that runs: where, and its node's NodeClaim explained.
	out, _ = cli(0, append([]string{"explain", "pod", ns + "/bound"}, live...)...)
	contains("explain running pod", out, "Pod "+ns+"/bound (running): runs on node "+node+", NodeClaim "+claimName+" of NodePool "+name+", m5.xlarge on-demand in us-east-1a at $0.1920/h",
		"NodeClaim "+claimName+" (NodePool "+name+", EC2NodeClass "+name+"), node "+node)
	out, _ = cli(0, append([]string{"explain", "po", "-o", "json", "-n", ns, "bound"}, live...)...)
	var rp runningPodReport
	if err := json.Unmarshal([]byte(out), &rp); err != nil || rp.State != "running" || rp.Node != node || !rp.Managed || rp.NodeClaim == nil || rp.NodeClaim.NodeClaim != claimName {
		t.Errorf("explain po -o json of a running pod: %v\n%s", err, out)
	}
	out, _ = cli(0, append([]string{"explain", "Pods", ns + "/pending", "-o", "yaml"}, live...)...)
	contains("explain Pods -o yaml", out, "pod: "+ns+"/pending\n", "kind: new-nodeclaim\n")

	// explain nodeclaim, by claim and by node, under kubectl's names.
	for _, args := range [][]string{{"nodeclaim", claimName}, {"nodeclaims", node}, {"node", node}, {"nodes", node}, {"no", node}} {
		id := args[1]
		out, _ = cli(0, append([]string{"explain", args[0], id}, live...)...)
		contains("explain nodeclaim "+id, out, "NodeClaim "+claimName+" (NodePool "+name+", EC2NodeClass "+name+"), node "+node+", instance i-0123456789abcdef0",
			"runs as: m5.xlarge on-demand in us-east-1a, $0.1920/h", `Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=`+ns+`/bound)`)
	}
	_, errs = cli(1, append([]string{"explain", "nodeclaim", "nope"}, live...)...)
	contains("explain missing nodeclaim", errs, "no NodeClaim or node named nope")

	// simulate live, then from a snapshot file, offline.
	out, _ = cli(0, append([]string{"simulate"}, live...)...)
	contains("simulate", out, "create a NodeClaim of NodePool "+name+" for 1 pod(s): m5.large spot in us-east-1a at $0.0500/h",
		"Cost of Karpless-managed capacity: $0.1920/h now, $0.2420/h after provisioning")
	liveJSON, _ := cli(0, append([]string{"simulate", "-o", "json"}, live...)...)
	file := filepath.Join(t.TempDir(), "snap.json.gz")
	_, errs = cli(0, append([]string{"snapshot", "-o", file}, live...)...)
	contains("snapshot", errs, "wrote "+file)
	plain := filepath.Join(t.TempDir(), "snap.json")
	cli(0, append([]string{"snapshot", "-o", plain}, live...)...)
	raw, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"hunter2", "registry.example.com", "secret-user-data"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the snapshot file contains %q", secret)
		}
	}
	offline := []string{"--snapshot", file, "--kubeconfig", filepath.Join(t.TempDir(), "none")}
	fileJSON, _ := cli(0, append([]string{"simulate", "-o", "json"}, offline...)...)
	var a, b whatif.SimulationReport
	if json.Unmarshal([]byte(liveJSON), &a) != nil || json.Unmarshal([]byte(fileJSON), &b) != nil {
		t.Fatalf("simulate -o json:\n%s\n%s", liveJSON, fileJSON)
	}
	if a.Cost.Before != b.Cost.Before || a.Cost.AfterProvisioning != b.Cost.AfterProvisioning || len(b.Provisioning.NewNodeClaims) != 1 ||
		*a.Provisioning.NewNodeClaims[0].Launch != *b.Provisioning.NewNodeClaims[0].Launch {
		t.Errorf("offline simulate differs from live:\n%s\n%s", liveJSON, fileJSON)
	}
	out, _ = cli(0, append([]string{"explain", "pod", ns + "/pending"}, offline...)...)
	contains("offline explain", out, "m5.large spot in us-east-1a at $0.0500/h", "answered offline from "+file)

	// Nothing was written by any of it: the objects are as created.
	if cm, err := kc.Core.CoreV1().ConfigMaps(kns).Get(ctx, unavailable.ConfigMapName, metav1.GetOptions{}); err != nil || len(cm.Data) != 1 {
		t.Errorf("unavailable offerings changed: %v %v", cm, err)
	}
	if got, err := kc.NodeClaims.Get(ctx, claimName, metav1.GetOptions{}); err != nil || len(got.Status.Conditions) != 3 {
		t.Errorf("nodeclaim changed: %v", err)
	}
}

// TestWhatIfErrors covers what goes wrong before any question is asked.
func TestWhatIfErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dead := filepath.Join(dir, "dead")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	cfg.AuthInfos["dead"] = &clientcmdapi.AuthInfo{Token: "x"}
	cfg.Contexts["dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: "dead"}
	cfg.CurrentContext = "dead"
	if err := clientcmd.WriteToFile(*cfg, dead); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"simulate", "--kubeconfig", dead, "--request-timeout", "5s"}, 1, "cannot reach the cluster's API server https://127.0.0.1:1"},
		{[]string{"simulate", "--kubeconfig", dead, "--context", "nope"}, 1, `context "nope" does not exist`},
		{[]string{"simulate", "--kubeconfig", empty}, 1, "no kubeconfig found"},
		{[]string{"simulate", "--snapshot", filepath.Join(dir, "missing.json")}, 1, "no such file"},
		{[]string{"simulate", "--snapshot", empty}, 1, "not a snapshot file"},
		{[]string{"simulate", "-o", "xml"}, 2, `-o "xml": want text, json or yaml`},
		{[]string{"simulate", "--reservations", "x"}, 2, "--reservations \"x\": want cr-id=N"},
		{[]string{"explain", "pod"}, 2, "usage: karpless explain pod"},
		{[]string{"explain", "pod", "a/b", "c"}, 2, "usage: karpless explain pod"},
		{[]string{"explain", "pod", "-n", "x", "y/z"}, 2, "-n x disagrees with y/z"},
		{[]string{"explain", "frob"}, 2, `unknown subcommand "frob"`},
		{[]string{"snapshot"}, 2, "usage: karpless snapshot"},
		{[]string{"help"}, 0, "simulate"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := runCLI(ctx, tc.args...)
			if code != tc.code || !strings.Contains(out+errs, tc.want) {
				t.Errorf("exit %d, want %d; output:\n%s%s\nwant it to contain %q", code, tc.code, out, errs, tc.want)
			}
		})
	}
}

func TestReadOnlyTransport(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = append(got, r.Method) }))
	defer srv.Close()
	c := &http.Client{Transport: readOnly(http.DefaultTransport)}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		req, _ := http.NewRequest(m, srv.URL+"/api/v1/pods", strings.NewReader("{}"))
		resp, err := c.Do(req)
		if resp != nil {
			resp.Body.Close()
		}
		if m == http.MethodGet {
			if err != nil {
				t.Errorf("GET: %v", err)
			}
		} else if !errors.Is(err, errReadOnly) {
			t.Errorf("%s: %v", m, err)
		}
	}
	if strings.Join(got, ",") != "GET" {
		t.Errorf("the server saw %v", got)
	}
}

// TestReadOnlyAgainstAPIServer checks that the clients the commands build
// cannot write, whatever is called on them.
func TestReadOnlyAgainstAPIServer(t *testing.T) {
	e := kubetest.Need(t, kenv)
	ns := e.Namespace(t)
	cf := &clusterFlags{kubeconfig: e.Cluster.Kubeconfig, timeout: 10 * time.Second}
	c, source, err := cf.clients()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(source, "context ") {
		t.Errorf("source %q", source)
	}
	ctx := context.Background()
	if _, err := c.Core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list: %v", err)
	}
	_, err = c.Core.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !errors.Is(err, errReadOnly) {
		t.Errorf("create went through: %v", err)
	}
	if err := c.NodePools.Delete(ctx, "anything", metav1.DeleteOptions{}); !errors.Is(err, errReadOnly) {
		t.Errorf("delete went through: %v", err)
	}
}
