package disruption

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func changeOf(t *testing.T, f *fixture, name string) *ClaimStatus {
	t.Helper()
	for _, ch := range StatusChanges(f.input()) {
		if ch.NodeClaim.Name == name {
			return &ch
		}
	}
	return nil
}

func setCond(ch *ClaimStatus, typ string) *metav1.Condition {
	if ch == nil {
		return nil
	}
	for i := range ch.Set {
		if ch.Set[i].Type == typ {
			return &ch.Set[i]
		}
	}
	return nil
}

func cleared(ch *ClaimStatus, typ string) bool {
	if ch == nil {
		return false
	}
	for _, c := range ch.Clear {
		if c == typ {
			return true
		}
	}
	return false
}

func TestDriftDetection(t *testing.T) {
	cases := []struct {
		name   string
		change func(f *fixture, nc *karpv1.NodeClaim)
		want   string
	}{
		{"nothing changed", func(*fixture, *karpv1.NodeClaim) {}, ""},
		{"nodepool template label", func(f *fixture, _ *karpv1.NodeClaim) {
			f.pool().Spec.Template.Labels = map[string]string{"team": "b"}
		}, NodePoolDrifted},
		{"nodepool expireAfter", func(f *fixture, _ *karpv1.NodeClaim) {
			f.pool().Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("24h")
		}, NodePoolDrifted},
		{"nodepool budgets are not drift", func(f *fixture, _ *karpv1.NodeClaim) {
			f.pool().Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
		}, ""},
		{"older hash version is re-stamped, not drift", func(f *fixture, nc *karpv1.NodeClaim) {
			f.pool().Spec.Template.Labels = map[string]string{"team": "b"}
			nc.Annotations[wellknown.NodePoolHashVersionAnnotation] = "v2"
		}, ""},
		{"requirements exclude the instance type", func(f *fixture, _ *karpv1.NodeClaim) {
			onlyType(f, "m.large")
		}, RequirementsDrifted},
		{"requirements exclude the capacity type", func(f *fixture, _ *karpv1.NodeClaim) {
			f.pool().Spec.Template.Spec.Requirements[0].Values = []string{"spot"}
		}, RequirementsDrifted},
		{"requirements on a label the node lacks", func(f *fixture, _ *karpv1.NodeClaim) {
			f.pool().Spec.Template.Spec.Requirements = append(f.pool().Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}})
		}, RequirementsDrifted},
		{"instance type no longer offered", func(f *fixture, _ *karpv1.NodeClaim) {
			f.types = []*scheduling.InstanceType{f.typeNamed("m.large")}
		}, InstanceTypeNotFound},
		{"ec2nodeclass hash", func(f *fixture, _ *karpv1.NodeClaim) {
			f.class().Annotations[wellknown.EC2NodeClassHashAnnotation] = "222"
		}, NodeClassDrift},
		{"ec2nodeclass hash under another version is re-stamped", func(f *fixture, nc *karpv1.NodeClaim) {
			f.class().Annotations[wellknown.EC2NodeClassHashAnnotation] = "222"
			nc.Annotations[wellknown.EC2NodeClassHashVersionAnnotation] = "v5"
		}, ""},
		{"AMI alias resolved to a new image", func(f *fixture, _ *karpv1.NodeClaim) {
			f.class().Status.AMIs[0].ID = "ami-newer"
		}, AMIDrift},
		{"AMI still resolved, newest first", func(f *fixture, _ *karpv1.NodeClaim) {
			f.class().Status.AMIs = append([]awsv1.AMI{{ID: "ami-arm", Requirements: []corev1.NodeSelectorRequirement{{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}}}, f.class().Status.AMIs...)
		}, ""},
		{"security groups changed", func(f *fixture, _ *karpv1.NodeClaim) {
			f.class().Status.SecurityGroups = append(f.class().Status.SecurityGroups, awsv1.SecurityGroup{ID: "sg-2"})
		}, SecurityGroupDrift},
		{"subnet removed", func(f *fixture, _ *karpv1.NodeClaim) {
			f.class().Status.Subnets = f.class().Status.Subnets[1:]
		}, SubnetDrift},
		{"unknown instance facts skip network drift", func(f *fixture, _ *karpv1.NodeClaim) {
			f.class().Status.Subnets = f.class().Status.Subnets[1:]
			f.facts = nil
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			nc := f.node("a", "m.xlarge", "test-1a", "on-demand")
			c.change(f, nc)
			ch := changeOf(t, f, "a")
			got := setCond(ch, karpv1.ConditionTypeDrifted)
			if c.want == "" {
				if got != nil {
					t.Fatalf("drifted: %s", got.Reason)
				}
				return
			}
			if got == nil || got.Reason != c.want {
				t.Fatalf("drift = %+v, want %s", got, c.want)
			}
		})
	}
}

func TestHashRestamp(t *testing.T) {
	f := newFixture(t)
	nc := f.node("a", "m.xlarge", "test-1a", "on-demand")
	nc.Annotations[wellknown.EC2NodeClassHashVersionAnnotation] = "v5"
	nc.Annotations[wellknown.NodePoolHashVersionAnnotation] = "v2"
	ch := changeOf(t, f, "a")
	if ch.Annotations[wellknown.EC2NodeClassHashVersionAnnotation] != "karpless-v1" || ch.Annotations[wellknown.EC2NodeClassHashAnnotation] != "111" {
		t.Fatalf("class hash not re-stamped: %v", ch.Annotations)
	}
	if ch.Annotations[wellknown.NodePoolHashVersionAnnotation] != wellknown.NodePoolHashVersion || ch.Annotations[wellknown.NodePoolHashAnnotation] != f.pool().Hash() {
		t.Fatalf("pool hash not re-stamped: %v", ch.Annotations)
	}
}

func TestDriftClearedWhenFixed(t *testing.T) {
	f := newFixture(t)
	nc := f.node("a", "m.xlarge", "test-1a", "on-demand")
	nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: AMIDrift})
	if ch := changeOf(t, f, "a"); !cleared(ch, karpv1.ConditionTypeDrifted) {
		t.Fatalf("want Drifted cleared, got %+v", ch)
	}
}

func TestConsolidatableAndPodEvents(t *testing.T) {
	f := newFixture(t)
	f.pool().Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("5m")
	nc := f.node("a", "m.xlarge", "test-1a", "on-demand")
	meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeConsolidatable)
	// Initialized an hour ago, no pods: consolidatable, empty.
	ch := changeOf(t, f, "a")
	if setCond(ch, karpv1.ConditionTypeConsolidatable) == nil || setCond(ch, karpv1.ConditionTypeEmpty) == nil {
		t.Fatalf("want Consolidatable and Empty, got %+v", ch)
	}
	fp := ch.Annotations[PodFingerprintAnnotation]
	if fp == "" {
		t.Fatalf("no fingerprint recorded")
	}
	nc.Annotations[PodFingerprintAnnotation] = fp

	// A pod bound 2 minutes ago: last pod event is its binding time, the
	// node is not consolidatable for 3 more minutes, and not empty.
	p := f.pod("web", "a", "1", "1Gi")
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(f.now.Add(-2 * time.Minute))
	nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeConsolidatable, Status: metav1.ConditionTrue, Reason: "Consolidatable"},
		metav1.Condition{Type: karpv1.ConditionTypeEmpty, Status: metav1.ConditionTrue, Reason: "Empty"})
	ch = changeOf(t, f, "a")
	if !ch.LastPodEventTime.Equal(f.now.Add(-2*time.Minute)) || !cleared(ch, karpv1.ConditionTypeConsolidatable) || !cleared(ch, karpv1.ConditionTypeEmpty) {
		t.Fatalf("got %+v", ch)
	}
	nc.Status.LastPodEventTime = metav1.NewTime(ch.LastPodEventTime)
	nc.Annotations[PodFingerprintAnnotation] = ch.Annotations[PodFingerprintAnnotation]
	meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeConsolidatable)
	meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeEmpty)

	// Six minutes later: consolidatable again.
	f.now = f.now.Add(4 * time.Minute)
	if ch := changeOf(t, f, "a"); setCond(ch, karpv1.ConditionTypeConsolidatable) == nil {
		t.Fatalf("want Consolidatable, got %+v", ch)
	}
	// The pod leaves (gone from the snapshot): the fingerprint changes and
	// the last pod event is now.
	f.snap.Pods = nil
	ch = changeOf(t, f, "a")
	if !ch.LastPodEventTime.Equal(f.now) || setCond(ch, karpv1.ConditionTypeConsolidatable) != nil {
		t.Fatalf("departure not noticed: %+v", ch)
	}
	// consolidateAfter Never clears the condition.
	nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeConsolidatable, Status: metav1.ConditionTrue, Reason: "Consolidatable"})
	f.pool().Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	if ch := changeOf(t, f, "a"); !cleared(ch, karpv1.ConditionTypeConsolidatable) {
		t.Fatalf("want cleared, got %+v", ch)
	}
}

func TestPoolHashes(t *testing.T) {
	f := newFixture(t)
	if got := PoolHashes(f.input()); got["default"] != f.pool().Hash() {
		t.Fatalf("got %v", got)
	}
	f.pool().Annotations = map[string]string{wellknown.NodePoolHashAnnotation: f.pool().Hash(), wellknown.NodePoolHashVersionAnnotation: wellknown.NodePoolHashVersion}
	if got := PoolHashes(f.input()); len(got) != 0 {
		t.Fatalf("got %v", got)
	}
}

func TestRecordsAndCommands(t *testing.T) {
	f := newFixture(t)
	f.node("a", "m.large", "test-1a", "on-demand")
	f.node("b", "m.large", "test-1a", "on-demand")
	f.node("c", "m.large", "test-1a", "on-demand")
	r := &Record{ID: "cmd1", Method: SingleNodeConsolidation, Phase: Proposed, ProposedAt: f.now, Candidates: []string{"a", "b"}}
	f.claim("c").Annotations[CommandAnnotation] = (&Record{ID: "old", Method: Emptiness, Phase: Proposed, ProposedAt: f.now, Candidates: []string{"c"}}).Encode()
	exec := *r
	exec.Phase = Executing
	exec.Replacements = []string{ReplacementName("default", "cmd1", 0)}
	f.claim("b").Annotations[CommandAnnotation] = exec.Encode()
	cmds := Commands(f.snap)
	if len(cmds) != 2 {
		t.Fatalf("want 2 commands, got %d", len(cmds))
	}
	cmds = slices.DeleteFunc(cmds, func(p *Pending) bool { return p.Record.ID != "cmd1" })
	if len(cmds) != 1 || cmds[0].Record.Phase != Executing || len(cmds[0].Unmarked) != 1 || cmds[0].Unmarked[0] != "a" {
		t.Fatalf("got %+v", cmds[0])
	}
	if !Busy(cmds, "")["a"] || Busy(cmds, "cmd1")["a"] || !ExecutingClaims(cmds)["b"] {
		t.Fatal("busy/executing sets wrong")
	}
	if r.Due(f.now.Add(14*time.Second)) || !r.Due(f.now.Add(15*time.Second)) {
		t.Fatal("validation delay is 15s")
	}
	if n := ReplacementName("default", "cmd1", 0); n != ReplacementName("default", "cmd1", 0) || n == ReplacementName("default", "cmd1", 1) || len(n) != len("default-")+5 {
		t.Fatalf("replacement names %s", n)
	}
	now := metav1.NewTime(f.now)
	f.claim("a").DeletionTimestamp = &now
	f.claim("b").DeletionTimestamp = &now
	if Commands(f.snap)[0].Live() && Commands(f.snap)[0].Record.ID == "cmd1" {
		t.Fatal("all candidates deleting: not live")
	}
}
