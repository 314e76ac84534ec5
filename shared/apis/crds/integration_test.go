package crds_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/apis/crds"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env, kubetest.Options{})) }

var (
	nodePoolGVR     = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	nodeClaimGVR    = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	ec2NodeClassGVR = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}
)

func dyn(t *testing.T, e *kubetest.Env) dynamic.Interface {
	d, err := dynamic.NewForConfig(e.Cluster.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCRDsEstablishedAndReapplyIsANoOp(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]string{}
	for _, c := range all {
		got, err := e.Clients.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("CRD %s not installed: %v", c.Name, err)
		}
		established := false
		for _, cond := range got.Status.Conditions {
			established = established || (cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue)
		}
		if !established {
			t.Errorf("CRD %s not Established", c.Name)
		}
		before[c.Name] = got.ResourceVersion
	}
	if err := kube.ApplyCRDs(ctx, e.Clients.APIExtensions, all); err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		got, _ := e.Clients.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.Name, metav1.GetOptions{})
		if got.ResourceVersion != before[c.Name] {
			t.Errorf("re-applying CRD %s changed it (resourceVersion %s -> %s)", c.Name, before[c.Name], got.ResourceVersion)
		}
	}
}

func readManifests(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// presentPaths records every schema property path that has a value in obj.
func presentPaths(s *apiextensionsv1.JSONSchemaProps, obj any, prefix string, out map[string]bool) {
	if s == nil || obj == nil {
		return
	}
	switch v := obj.(type) {
	case map[string]any:
		if len(s.Properties) > 0 {
			for name, val := range v {
				p, ok := s.Properties[name]
				if !ok {
					continue
				}
				out[prefix+"."+name] = true
				presentPaths(&p, val, prefix+"."+name, out)
			}
		} else if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			for _, val := range v {
				presentPaths(s.AdditionalProperties.Schema, val, prefix, out)
			}
		}
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for _, item := range v {
				presentPaths(s.Items.Schema, item, prefix+"[]", out)
			}
		}
	}
}

func schemaPaths(s *apiextensionsv1.JSONSchemaProps, prefix string, out map[string]bool) {
	for name, p := range s.Properties {
		out[prefix+"."+name] = true
		schemaPaths(&p, prefix+"."+name, out)
	}
	if s.Items != nil && s.Items.Schema != nil {
		schemaPaths(s.Items.Schema, prefix+"[]", out)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		schemaPaths(s.AdditionalProperties.Schema, prefix, out)
	}
}

func crdSchema(t *testing.T, name string) *apiextensionsv1.JSONSchemaProps {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if c.Name == name {
			return c.Spec.Versions[0].Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("no CRD %s", name)
	return nil
}

func toRL(m map[string]resource.Quantity) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range m {
		out[corev1.ResourceName(k)] = v
	}
	return out
}

func fullStatuses() (karpv1.NodePoolStatus, karpv1.NodeClaimStatus, awsv1.EC2NodeClassStatus) {
	now := metav1.Now()
	cond := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "", LastTransitionTime: now, ObservedGeneration: 1}}
	res := map[string]resource.Quantity{"cpu": resource.MustParse("4"), "memory": resource.MustParse("16Gi")}
	nodes := int64(2)
	np := karpv1.NodePoolStatus{Resources: toRL(res), NodeClassObservedGeneration: 1, Conditions: cond, Nodes: &nodes}
	nc := karpv1.NodeClaimStatus{
		NodeName: "ip-10-0-0-1.ec2.internal", ProviderID: "aws:///us-west-2a/i-0123456789abcdef0", ImageID: "ami-0123456789abcdef0",
		Capacity: toRL(res), Allocatable: toRL(res), Conditions: cond, LastPodEventTime: now,
	}
	end := metav1.Now()
	ec2 := awsv1.EC2NodeClassStatus{
		Subnets:        []awsv1.Subnet{{ID: "subnet-0123", Zone: "us-west-2a", ZoneID: "usw2-az1"}},
		SecurityGroups: []awsv1.SecurityGroup{{ID: "sg-0123", Name: "nodes"}},
		CapacityReservations: []awsv1.CapacityReservation{{
			AvailabilityZone: "us-west-2a", EndTime: &end, ID: "cr-0123", InstanceMatchCriteria: "targeted", InstanceType: "p5.48xlarge",
			OwnerID: "123456789012", ReservationType: "capacity-block", Interruptible: true, State: "expiring",
		}},
		AMIs:            []awsv1.AMI{{ID: "ami-0123", Name: "al2023", Deprecated: true, Requirements: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/arch", Operator: "In", Values: []string{"amd64"}}}}},
		InstanceProfile: "demo_123",
		PlacementGroups: []awsv1.PlacementGroup{{ID: "pg-0123", Name: "training", Strategy: "partition", PartitionCount: 3, SpreadLevel: "rack"}},
		Conditions:      cond,
	}
	return np, nc, ec2
}

// TestFullManifestsCoverEveryField applies manifests using every spec field,
// writes a status using every status field, and checks that each field path
// of each CRD came back from the API server.
func TestFullManifestsCoverEveryField(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	d := dyn(t, e)
	npStatus, ncStatus, ecStatus := fullStatuses()
	for _, tc := range []struct {
		file, crd string
		gvr       schema.GroupVersionResource
		status    func(name string) error
	}{
		{"testdata/nodepool-full.yaml", "nodepools.karpenter.sh", nodePoolGVR, func(name string) error {
			o, err := e.Clients.NodePools.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			o.Status = npStatus
			_, err = e.Clients.NodePools.UpdateStatus(ctx, o, metav1.UpdateOptions{})
			return err
		}},
		{"testdata/nodeclaim-full.yaml", "nodeclaims.karpenter.sh", nodeClaimGVR, func(name string) error {
			o, err := e.Clients.NodeClaims.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			o.Status = ncStatus
			_, err = e.Clients.NodeClaims.UpdateStatus(ctx, o, metav1.UpdateOptions{})
			return err
		}},
		{"testdata/ec2nodeclass-full.yaml", "ec2nodeclasses.karpenter.k8s.aws", ec2NodeClassGVR, func(name string) error {
			o, err := e.Clients.EC2NodeClasses.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			o.Status = ecStatus
			_, err = e.Clients.EC2NodeClasses.UpdateStatus(ctx, o, metav1.UpdateOptions{})
			return err
		}},
	} {
		t.Run(tc.crd, func(t *testing.T) {
			root := crdSchema(t, tc.crd)
			want := map[string]bool{}
			spec, status := root.Properties["spec"], root.Properties["status"]
			schemaPaths(&spec, ".spec", want)
			schemaPaths(&status, ".status", want)
			got := map[string]bool{}
			for i, u := range readManifests(t, tc.file) {
				name := kubetest.Name(t) + "-" + string(rune('a'+i))
				u.SetName(name)
				if _, err := d.Resource(tc.gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
					t.Fatalf("applying %s document %d: %v", tc.file, i, err)
				}
				t.Cleanup(func() { _ = d.Resource(tc.gvr).Delete(context.Background(), name, metav1.DeleteOptions{}) })
				if err := tc.status(name); err != nil {
					t.Fatalf("writing status of %s: %v", name, err)
				}
				back, err := d.Resource(tc.gvr).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				presentPaths(&spec, back.Object["spec"], ".spec", got)
				presentPaths(&status, back.Object["status"], ".status", got)
			}
			var missing []string
			for p := range want {
				if !got[p] {
					missing = append(missing, p)
				}
			}
			sort.Strings(missing)
			if len(missing) > 0 {
				t.Errorf("%d of %d field paths not exercised: %v", len(missing), len(want), missing)
			}
			t.Logf("%d field paths exercised", len(want)-len(missing))
		})
	}
}

func TestDefaultsAreFilled(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	name := kubetest.Name(t)
	np, err := e.Clients.NodePools.Create(ctx, &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: "kubernetes.io/arch", Operator: "In", Values: []string{"amd64"}}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Clients.NodePools.Delete(ctx, name, metav1.DeleteOptions{})
	d := np.Spec.Disruption
	if d.ConsolidateAfter.IsNever() || *d.ConsolidateAfter.Duration != 0 {
		t.Errorf("consolidateAfter = %s, want 0s", d.ConsolidateAfter)
	}
	if d.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("consolidationPolicy = %q", d.ConsolidationPolicy)
	}
	if len(d.Budgets) != 1 || d.Budgets[0].Nodes != "10%" {
		t.Errorf("budgets = %+v, want [{nodes: 10%%}]", d.Budgets)
	}
	if exp := np.Spec.Template.Spec.ExpireAfter; exp.IsNever() || exp.Duration.String() != "720h0m0s" {
		t.Errorf("expireAfter = %s, want 720h", exp)
	}

	nc, err := e.Clients.NodeClaims.Create(ctx, &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: "kubernetes.io/arch", Operator: "In", Values: []string{"amd64"}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Clients.NodeClaims.Delete(ctx, name, metav1.DeleteOptions{})
	if nc.Spec.ExpireAfter.String() != "720h0m0s" {
		t.Errorf("NodeClaim expireAfter = %s, want 720h", nc.Spec.ExpireAfter)
	}

	ec, err := e.Clients.EC2NodeClasses.Create(ctx, &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: awsv1.EC2NodeClassSpec{
			Role:                       "KarpenterNodeRole-demo",
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Clients.EC2NodeClasses.Delete(ctx, name, metav1.DeleteOptions{})
	mo := ec.Spec.MetadataOptions
	if mo == nil || *mo.HTTPEndpoint != "enabled" || *mo.HTTPProtocolIPv6 != "disabled" || *mo.HTTPPutResponseHopLimit != 1 || *mo.HTTPTokens != "required" {
		t.Errorf("metadataOptions default = %+v", mo)
	}
}

// obj is a JSON-shaped object; set walks/creates maps along a path.
type obj = map[string]any

func set(o obj, v any, path ...string) obj {
	m := o
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(obj)
		if !ok {
			next = obj{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
	return o
}

func del(o obj, path ...string) obj {
	m := o
	for _, p := range path[:len(path)-1] {
		m = m[p].(obj)
	}
	delete(m, path[len(path)-1])
	return o
}

func req(key, op string, values ...string) obj {
	r := obj{"key": key, "operator": op}
	if len(values) > 0 {
		vs := make([]any, len(values))
		for i, v := range values {
			vs[i] = v
		}
		r["values"] = vs
	}
	return r
}

func list(items ...any) []any { return append([]any{}, items...) }

func nodePool() obj {
	return obj{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": obj{}, "spec": obj{
		"template": obj{"spec": obj{
			"nodeClassRef": obj{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
			"requirements": list(req("kubernetes.io/arch", "In", "amd64")),
		}},
	}}
}

func nodeClaim() obj {
	return obj{"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": obj{}, "spec": obj{
		"nodeClassRef": obj{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
		"requirements": list(req("kubernetes.io/arch", "In", "amd64")),
	}}
}

func nodeClass() obj {
	return obj{"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": obj{}, "spec": obj{
		"role":                       "KarpenterNodeRole-demo",
		"amiSelectorTerms":           list(obj{"alias": "al2023@latest"}),
		"subnetSelectorTerms":        list(obj{"tags": obj{"karpenter.sh/discovery": "demo"}}),
		"securityGroupSelectorTerms": list(obj{"tags": obj{"karpenter.sh/discovery": "demo"}}),
	}}
}

func withFamily(family string, alias string) obj {
	o := nodeClass()
	set(o, family, "spec", "amiFamily")
	return set(o, list(obj{"alias": alias}), "spec", "amiSelectorTerms")
}

func npReq(r obj) obj { return set(nodePool(), list(r), "spec", "template", "spec", "requirements") }
func ncReq(r obj) obj { return set(nodeClaim(), list(r), "spec", "requirements") }

// TestValidationRules breaks each of Karpenter's 84 CEL rules once and
// expects the API server to refuse with Karpenter's message.
func TestValidationRules(t *testing.T) {
	e := kubetest.Need(t, env)
	d := dyn(t, e)
	ctx := context.Background()
	type tc struct {
		name   string
		gvr    schema.GroupVersionResource
		create obj
		update func(obj) obj // when set, create must succeed and the update must fail
		want   string
	}
	np, nc, ec := nodePoolGVR, nodeClaimGVR, ec2NodeClassGVR
	cases := []tc{
		// NodePool (20)
		{"static to dynamic", np, set(nodePool(), int64(2), "spec", "replicas"), func(o obj) obj { return del(o, "spec", "replicas") }, "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"},
		{"static with cpu limit", np, set(set(nodePool(), int64(2), "spec", "replicas"), obj{"cpu": "10"}, "spec", "limits"), nil, "only 'limits.nodes' is supported on static NodePools"},
		{"static with weight", np, set(set(nodePool(), int64(2), "spec", "replicas"), int64(10), "spec", "weight"), nil, "'weight' is not supported on static NodePools"},
		{"budget schedule without duration", np, set(nodePool(), obj{"consolidateAfter": "0s", "budgets": list(obj{"nodes": "1", "schedule": "@daily"})}, "spec", "disruption"), nil, "'schedule' must be set with 'duration'"},
		{"template label karpenter.sh domain", np, set(nodePool(), obj{"karpenter.sh/custom": "x"}, "spec", "template", "metadata", "labels"), nil, `label domain "karpenter.sh" is restricted`},
		{"template label nodepool", np, set(nodePool(), obj{"karpenter.sh/nodepool": "x"}, "spec", "template", "metadata", "labels"), nil, `label "karpenter.sh/nodepool" is restricted`},
		{"template label hostname", np, set(nodePool(), obj{"kubernetes.io/hostname": "x"}, "spec", "template", "metadata", "labels"), nil, `label "kubernetes.io/hostname" is restricted`},
		{"template label karpenter.k8s.aws domain", np, set(nodePool(), obj{"karpenter.k8s.aws/custom": "x"}, "spec", "template", "metadata", "labels"), nil, `label domain "karpenter.k8s.aws" is restricted`},
		{"nodeClassRef group immutable", np, nodePool(), func(o obj) obj { return set(o, "example.com", "spec", "template", "spec", "nodeClassRef", "group") }, "nodeClassRef.group is immutable"},
		{"nodeClassRef kind immutable", np, nodePool(), func(o obj) obj { return set(o, "OtherClass", "spec", "template", "spec", "nodeClassRef", "kind") }, "nodeClassRef.kind is immutable"},
		{"empty group", np, set(nodePool(), "", "spec", "template", "spec", "nodeClassRef", "group"), nil, "group may not be empty"},
		{"empty kind", np, set(nodePool(), "", "spec", "template", "spec", "nodeClassRef", "kind"), nil, "kind may not be empty"},
		{"empty name", np, set(nodePool(), "", "spec", "template", "spec", "nodeClassRef", "name"), nil, "name may not be empty"},
		{"In without values", np, npReq(req("karpenter.k8s.aws/instance-family", "In")), nil, "requirements with operator 'In' must have a value defined"},
		{"Gt with two values", np, npReq(req("karpenter.k8s.aws/instance-cpu", "Gt", "1", "2")), nil, "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"},
		{"minValues above values", np, npReq(obj{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": list("m5", "c5"), "minValues": int64(3)}), nil, "requirements with 'minValues' must have at least that many values specified in the 'values' field"},
		{"requirement karpenter.sh domain", np, npReq(req("karpenter.sh/custom", "Exists")), nil, `label domain "karpenter.sh" is restricted`},
		{"requirement nodepool", np, npReq(req("karpenter.sh/nodepool", "In", "a")), nil, `label "karpenter.sh/nodepool" is restricted`},
		{"requirement hostname", np, npReq(req("kubernetes.io/hostname", "In", "a")), nil, `label "kubernetes.io/hostname" is restricted`},
		{"requirement karpenter.k8s.aws domain", np, npReq(req("karpenter.k8s.aws/custom", "Exists")), nil, `label domain "karpenter.k8s.aws" is restricted`},
		// NodeClaim (10)
		{"spec immutable", nc, nodeClaim(), func(o obj) obj { return set(o, "1h", "spec", "expireAfter") }, "spec is immutable"},
		{"claim empty group", nc, set(nodeClaim(), "", "spec", "nodeClassRef", "group"), nil, "group may not be empty"},
		{"claim empty kind", nc, set(nodeClaim(), "", "spec", "nodeClassRef", "kind"), nil, "kind may not be empty"},
		{"claim empty name", nc, set(nodeClaim(), "", "spec", "nodeClassRef", "name"), nil, "name may not be empty"},
		{"claim In without values", nc, ncReq(req("karpenter.k8s.aws/instance-family", "In")), nil, "requirements with operator 'In' must have a value defined"},
		{"claim Lt negative", nc, ncReq(req("karpenter.k8s.aws/instance-cpu", "Lt", "-1")), nil, "must have a single positive integer value"},
		{"claim minValues above values", nc, ncReq(obj{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": list("m5"), "minValues": int64(2)}), nil, "requirements with 'minValues' must have at least that many values"},
		{"claim requirement karpenter.sh domain", nc, ncReq(req("karpenter.sh/custom", "Exists")), nil, `label domain "karpenter.sh" is restricted`},
		{"claim requirement hostname", nc, ncReq(req("kubernetes.io/hostname", "In", "a")), nil, `label "kubernetes.io/hostname" is restricted`},
		{"claim requirement karpenter.k8s.aws domain", nc, ncReq(req("karpenter.k8s.aws/custom", "Exists")), nil, `label domain "karpenter.k8s.aws" is restricted`},
		// EC2NodeClass (54)
		{"role and instanceProfile", ec, set(nodeClass(), "profile", "spec", "instanceProfile"), nil, "must specify exactly one of ['role', 'instanceProfile']"},
		{"al2 alias with AL2023 family", ec, withFamily("AL2023", "al2@latest"), nil, "if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias"},
		{"al2023 alias with AL2 family", ec, withFamily("AL2", "al2023@latest"), nil, "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias"},
		{"bottlerocket alias with AL2023 family", ec, withFamily("AL2023", "bottlerocket@latest"), nil, "if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias"},
		{"windows2019 alias with AL2023 family", ec, withFamily("AL2023", "windows2019@latest"), nil, "if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias"},
		{"windows2022 alias with AL2023 family", ec, withFamily("AL2023", "windows2022@latest"), nil, "if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias"},
		{"windows2025 alias with AL2023 family", ec, withFamily("AL2023", "windows2025@latest"), nil, "if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias"},
		{"no alias and no family", ec, set(nodeClass(), list(obj{"id": "ami-0123"}), "spec", "amiSelectorTerms"), nil, "must specify amiFamily if amiSelectorTerms does not contain an alias"},
		{"ami term with owner only", ec, set(set(nodeClass(), "AL2023", "spec", "amiFamily"), list(obj{"owner": "self"}), "spec", "amiSelectorTerms"), nil, "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"},
		{"ami id with name", ec, set(set(nodeClass(), "AL2023", "spec", "amiFamily"), list(obj{"id": "ami-0123", "name": "x"}), "spec", "amiSelectorTerms"), nil, "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
		{"alias with tags", ec, set(nodeClass(), list(obj{"alias": "al2023@latest", "tags": obj{"a": "b"}}), "spec", "amiSelectorTerms"), nil, "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
		{"alias with another term", ec, set(nodeClass(), list(obj{"alias": "al2023@latest"}, obj{"name": "x"}), "spec", "amiSelectorTerms"), nil, "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"},
		{"alias without version", ec, set(nodeClass(), list(obj{"alias": "al2023"}), "spec", "amiSelectorTerms"), nil, "'alias' is improperly formatted, must match the format 'family@version'"},
		{"alias family unknown", ec, set(nodeClass(), list(obj{"alias": "ubuntu@latest"}), "spec", "amiSelectorTerms"), nil, "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"},
		{"windows alias pinned", ec, set(nodeClass(), list(obj{"alias": "windows2022@v1"}), "spec", "amiSelectorTerms"), nil, "windows families may only specify version 'latest'"},
		{"ami tags empty value", ec, set(set(nodeClass(), "AL2023", "spec", "amiFamily"), list(obj{"tags": obj{"a": ""}}), "spec", "amiSelectorTerms"), nil, "empty tag keys or values aren't supported"},
		{"two root volumes", ec, set(nodeClass(), list(obj{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": obj{"volumeSize": "20Gi"}}, obj{"deviceName": "/dev/xvdb", "rootVolume": true, "ebs": obj{"volumeSize": "20Gi"}}), "spec", "blockDeviceMappings"), nil, "must have only one blockDeviceMappings with rootVolume"},
		{"ebs without size or snapshot", ec, set(nodeClass(), list(obj{"deviceName": "/dev/xvda", "ebs": obj{"volumeType": "gp3"}}), "spec", "blockDeviceMappings"), nil, "snapshotID or volumeSize must be defined"},
		{"initialization rate without snapshot", ec, set(nodeClass(), list(obj{"deviceName": "/dev/xvda", "ebs": obj{"volumeSize": "20Gi", "volumeInitializationRate": int64(200)}}), "spec", "blockDeviceMappings"), nil, "snapshotID must be set when volumeInitializationRate is set"},
		{"reservation term with owner only", ec, set(nodeClass(), list(obj{"ownerID": "123456789012"}), "spec", "capacityReservationSelectorTerms"), nil, "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"},
		{"reservation id with tags", ec, set(nodeClass(), list(obj{"id": "cr-0123", "tags": obj{"a": "b"}}), "spec", "capacityReservationSelectorTerms"), nil, "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"},
		{"reservation tags empty", ec, set(nodeClass(), list(obj{"tags": obj{"": "b"}}), "spec", "capacityReservationSelectorTerms"), nil, "empty tag keys or values aren't supported"},
		{"connection tracking empty", ec, set(nodeClass(), obj{}, "spec", "connectionTracking"), nil, "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"},
		{"empty instanceProfile", ec, set(del(nodeClass(), "spec", "role"), "", "spec", "instanceProfile"), nil, "instanceProfile cannot be empty"},
		{"image GC thresholds", ec, set(nodeClass(), obj{"imageGCHighThresholdPercent": int64(50), "imageGCLowThresholdPercent": int64(60)}, "spec", "kubelet"), nil, "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"},
		{"evictionSoft without grace", ec, set(nodeClass(), obj{"evictionSoft": obj{"memory.available": "1Gi"}}, "spec", "kubelet"), nil, "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"},
		{"grace without evictionSoft", ec, set(nodeClass(), obj{"evictionSoftGracePeriod": obj{"memory.available": "1m"}}, "spec", "kubelet"), nil, "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"},
		{"evictionHard key", ec, set(nodeClass(), obj{"evictionHard": obj{"cpu.available": "1"}}, "spec", "kubelet"), nil, "valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']"},
		{"evictionSoft key", ec, set(nodeClass(), obj{"evictionSoft": obj{"cpu.available": "1"}, "evictionSoftGracePeriod": obj{"cpu.available": "1m"}}, "spec", "kubelet"), nil, "valid keys for evictionSoft are"},
		{"evictionSoftGracePeriod key", ec, set(nodeClass(), obj{"evictionSoft": obj{"cpu.available": "1"}, "evictionSoftGracePeriod": obj{"cpu.available": "1m"}}, "spec", "kubelet"), nil, "valid keys for evictionSoftGracePeriod are"},
		{"kubeReserved key", ec, set(nodeClass(), obj{"kubeReserved": obj{"gpu": "1"}}, "spec", "kubelet"), nil, "valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']"},
		{"kubeReserved negative", ec, set(nodeClass(), obj{"kubeReserved": obj{"cpu": "-1"}}, "spec", "kubelet"), nil, "kubeReserved value cannot be a negative resource quantity"},
		{"systemReserved key", ec, set(nodeClass(), obj{"systemReserved": obj{"gpu": "1"}}, "spec", "kubelet"), nil, "valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']"},
		{"systemReserved negative", ec, set(nodeClass(), obj{"systemReserved": obj{"memory": "-1Gi"}}, "spec", "kubelet"), nil, "systemReserved value cannot be a negative resource quantity"},
		{"no primary interface", ec, set(nodeClass(), list(obj{"networkCardIndex": int64(0), "deviceIndex": int64(1), "interfaceType": "interface"}), "spec", "networkInterfaces"), nil, "networkInterfaces must include a primary interface with interfaceType='interface'"},
		{"duplicate interface", ec, set(nodeClass(), list(obj{"networkCardIndex": int64(0), "deviceIndex": int64(0), "interfaceType": "interface"}, obj{"networkCardIndex": int64(0), "deviceIndex": int64(0), "interfaceType": "efa-only"}), "spec", "networkInterfaces"), nil, "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card"},
		{"placement group empty", ec, set(nodeClass(), obj{}, "spec", "placementGroupSelector"), nil, "expected at least one, got none, ['name', 'id']"},
		{"placement group name and id", ec, set(nodeClass(), obj{"name": "a", "id": "pg-0123"}, "spec", "placementGroupSelector"), nil, "'name' and 'id' are mutually exclusive"},
		{"empty role", ec, set(nodeClass(), "", "spec", "role"), nil, "role cannot be empty"},
		{"no security group terms", ec, set(nodeClass(), list(), "spec", "securityGroupSelectorTerms"), nil, "securityGroupSelectorTerms cannot be empty"},
		{"empty security group term", ec, set(nodeClass(), list(obj{}), "spec", "securityGroupSelectorTerms"), nil, "expected at least one, got none, ['tags', 'id', 'name']"},
		{"security group id with tags", ec, set(nodeClass(), list(obj{"id": "sg-0123", "tags": obj{"a": "b"}}), "spec", "securityGroupSelectorTerms"), nil, "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
		{"security group name with tags", ec, set(nodeClass(), list(obj{"name": "x", "tags": obj{"a": "b"}}), "spec", "securityGroupSelectorTerms"), nil, "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
		{"security group tags empty", ec, set(nodeClass(), list(obj{"tags": obj{"a": ""}}), "spec", "securityGroupSelectorTerms"), nil, "empty tag keys or values aren't supported"},
		{"no subnet terms", ec, set(nodeClass(), list(), "spec", "subnetSelectorTerms"), nil, "subnetSelectorTerms cannot be empty"},
		{"empty subnet term", ec, set(nodeClass(), list(obj{}), "spec", "subnetSelectorTerms"), nil, "expected at least one, got none, ['tags', 'id']"},
		{"subnet id with tags", ec, set(nodeClass(), list(obj{"id": "subnet-0123", "tags": obj{"a": "b"}}), "spec", "subnetSelectorTerms"), nil, "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"},
		{"subnet tags empty", ec, set(nodeClass(), list(obj{"tags": obj{"": "b"}}), "spec", "subnetSelectorTerms"), nil, "empty tag keys or values aren't supported"},
		{"empty tag key", ec, set(nodeClass(), obj{"": "x"}, "spec", "tags"), nil, "empty tag keys aren't supported"},
		{"tag eks cluster name", ec, set(nodeClass(), obj{"eks:eks-cluster-name": "x"}, "spec", "tags"), nil, "tag contains a restricted tag matching eks:eks-cluster-name"},
		{"tag cluster", ec, set(nodeClass(), obj{"kubernetes.io/cluster/demo": "owned"}, "spec", "tags"), nil, "tag contains a restricted tag matching kubernetes.io/cluster/"},
		{"tag nodepool", ec, set(nodeClass(), obj{"karpenter.sh/nodepool": "x"}, "spec", "tags"), nil, "tag contains a restricted tag matching karpenter.sh/nodepool"},
		{"tag nodeclaim", ec, set(nodeClass(), obj{"karpenter.sh/nodeclaim": "x"}, "spec", "tags"), nil, "tag contains a restricted tag matching karpenter.sh/nodeclaim"},
		{"tag ec2nodeclass", ec, set(nodeClass(), obj{"karpenter.k8s.aws/ec2nodeclass": "x"}, "spec", "tags"), nil, "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass"},
	}
	if len(cases) != 84 {
		t.Fatalf("%d cases, want one per CEL rule (84)", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: c.create}
			name := kubetest.Name(t)
			u.SetName(name)
			client := d.Resource(c.gvr)
			_, err := client.Create(ctx, u, metav1.CreateOptions{})
			if c.update != nil {
				if err != nil {
					t.Fatalf("create before update: %v", err)
				}
				defer client.Delete(ctx, name, metav1.DeleteOptions{})
				cur, err := client.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				cur.Object = c.update(cur.Object)
				_, err = client.Update(ctx, cur, metav1.UpdateOptions{})
				checkRejected(t, err, c.want)
				return
			}
			if err == nil {
				_ = client.Delete(ctx, name, metav1.DeleteOptions{})
			}
			checkRejected(t, err, c.want)
		})
	}
}

func checkRejected(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want rejection %q", want)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("rejected with %v; want an Invalid error", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("rejected with %q; want the message %q", err.Error(), want)
	}
}

// TestValidManifestsWithEveryOperator makes sure the rules do not reject
// legitimate manifests, e.g. Karpenter's own examples.
func TestKarpenterExampleManifestsApply(t *testing.T) {
	e := kubetest.Need(t, env)
	d := dyn(t, e)
	ctx := context.Background()
	for _, path := range []string{"testdata/karpenter-examples.yaml"} {
		for i, u := range readManifests(t, path) {
			gvr := nodePoolGVR
			if u.GetKind() == "EC2NodeClass" {
				gvr = ec2NodeClassGVR
			}
			name := kubetest.Name(t) + "-" + strings.ToLower(u.GetKind()) + string(rune('a'+i%26))
			u.SetName(name)
			if _, err := d.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
				t.Errorf("%s document %d (%s): %v", path, i, u.GetKind(), err)
				continue
			}
			_ = d.Resource(gvr).Delete(ctx, name, metav1.DeleteOptions{})
		}
	}
}
