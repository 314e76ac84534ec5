package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/nodeclaim/expiration, ported through
// Expirations: the disruption tick deletes each claim it returns, once
// (a claim being deleted is not returned again), and counts it in
// karpenter_nodeclaims_disrupted_total{reason="expired"} as it does.
func TestConformanceExpiration(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/nodeclaim/expiration", File: "pkg/controllers/nodeclaim/expiration/suite_test.go", Spec: "Expiration > " + spec}
	}
	// one is Karpenter's BeforeEach: a claim of the pool expiring after 30s,
	// created now.
	one := func(t *testing.T, expireAfter string) (*fixture, *karpv1.NodeClaim) {
		f := newFixture(t)
		nc := f.node("n", "m.xlarge", zones[0], wellknown.CapacityTypeOnDemand)
		nc.CreationTimestamp = metav1.NewTime(f.now)
		nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration(expireAfter)
		return f, nc
	}
	expired := func(f *fixture) []string {
		var out []string
		for _, e := range Expirations(f.input()) {
			out = append(out, e.NodeClaim.Name)
		}
		return out
	}
	expectExpired := func(t *testing.T, f *fixture, want bool) {
		t.Helper()
		got := len(expired(f)) == 1
		if got != want {
			t.Fatalf("expired %v, want %v", got, want)
		}
	}
	conformance.Run(t, c("Metrics > should fire a karpenter_nodeclaims_disrupted_total metric when expired"), func(t *testing.T) {
		f, _ := one(t, "30s")
		f.now = f.now.Add(60 * time.Second)
		expectExpired(t, f, true)
	})
	conformance.Run(t, c("Metrics > should fire a karpenter_nodeclaims_disrupted_total metric when expired"), func(t *testing.T) {
		f, nc := one(t, "30s")
		nc.Labels[wellknown.CapacityTypeLabel] = wellknown.CapacityTypeSpot
		f.now = f.now.Add(60 * time.Second)
		expectExpired(t, f, true)
	})
	conformance.Run(t, c("Expiration > should remove nodeclaims that are expired"), func(t *testing.T) {
		f, _ := one(t, "30s")
		f.now = f.now.Add(60 * time.Second)
		expectExpired(t, f, true)
	})
	conformance.Run(t, c("Expiration > should ignore expired NodeClaims that are not managed by this Karpenter instance"), func(t *testing.T) {
		f, nc := one(t, "30s")
		unmanaged(nc)
		f.now = f.now.Add(60 * time.Second)
		expectExpired(t, f, false)
	})
	conformance.Run(t, c("should not remove the NodeClaims when expiration is disabled"), func(t *testing.T) {
		f, _ := one(t, "Never")
		f.now = f.now.Add(24 * time.Hour)
		expectExpired(t, f, false)
	})
	conformance.Run(t, c("should not remove non-expired NodeClaims"), func(t *testing.T) {
		f, _ := one(t, "200s")
		expectExpired(t, f, false)
	})
	conformance.Run(t, c("should delete NodeClaims if the nodeClaim is expired but the node isn't"), func(t *testing.T) {
		f, _ := one(t, "30s")
		f.now = f.now.Add(60 * time.Second)
		f.nodeObj("n").CreationTimestamp = metav1.NewTime(f.now) // the node is new
		expectExpired(t, f, true)
	})
	conformance.Run(t, conformance.Case{Suite: "core/nodeclaim/expiration", File: "pkg/controllers/nodeclaim/expiration/suite_test.go",
		Spec:    "Expiration > should return the requeue interval for the time between now and when the nodeClaim expires",
		Differs: "Karpless's disruption tick runs on its schedule and reads every claim each pass; nothing is requeued per claim, so a claim is deleted at the first pass after its expireAfter (at most one tick interval late) rather than at the instant"},
		func(t *testing.T) {})
	conformance.Run(t, c("shouldn't expire the same NodeClaim multiple times"), func(t *testing.T) {
		f, nc := one(t, "30s")
		nc.Finalizers = []string{"test-finalizer"}
		f.now = f.now.Add(60 * time.Second)
		expectExpired(t, f, true)
		// The tick deleted it; held by its finalizer, it is not expired again.
		now := metav1.NewTime(f.now)
		nc.DeletionTimestamp = &now
		expectExpired(t, f, false)
	})
}

// Karpenter v1.14.1 pkg/controllers/nodepool/hash, ported through
// PoolHashes (the NodePool's annotations the disruption tick writes) and
// StatusChanges (the claims' re-stamped hashes).
func TestConformanceNodePoolHash(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/nodepool/hash", File: "pkg/controllers/nodepool/hash/suite_test.go", Spec: "Static Drift Hash > " + spec}
	}
	// pool is Karpenter's BeforeEach: a pool with its static fields set.
	pool := func(t *testing.T) *fixture {
		f := newFixture(t)
		tpl := &f.pool().Spec.Template
		tpl.Annotations = map[string]string{"keyAnnotation": "valueAnnotation", "keyAnnotation2": "valueAnnotation2"}
		tpl.Labels = map[string]string{"keyLabel": "valueLabel"}
		tpl.Spec.Taints = []corev1.Taint{{Key: "key", Effect: corev1.TaintEffectNoExecute}}
		tpl.Spec.StartupTaints = []corev1.Taint{{Key: "key", Effect: corev1.TaintEffectNoExecute}}
		tpl.Spec.ExpireAfter = karpv1.MustParseNillableDuration("5m")
		tpl.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 5 * time.Minute}
		return f
	}
	// stamp writes PoolHashes onto the pool as the tick does and returns
	// the hash written ("" when none).
	stamp := func(f *fixture) string {
		h, ok := PoolHashes(f.input())[f.pool().Name]
		if !ok {
			return ""
		}
		if f.pool().Annotations == nil {
			f.pool().Annotations = map[string]string{}
		}
		f.pool().Annotations[wellknown.NodePoolHashAnnotation] = h
		f.pool().Annotations[wellknown.NodePoolHashVersionAnnotation] = wellknown.NodePoolHashVersion
		return h
	}
	conformance.Run(t, c("should ignore NodePools which aren't managed by this instance of Karpenter"), func(t *testing.T) {
		f := pool(t)
		f.pool().Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "UnmanagedNodeClass", Name: "default"}
		if h := stamp(f); h != "" {
			t.Fatalf("stamped %s", h)
		}
	})
	conformance.Run(t, c("should update the drift hash when NodePool static field is updated"), func(t *testing.T) {
		f := pool(t)
		first := stamp(f)
		if first != f.pool().Hash() {
			t.Fatalf("stamped %q, want %s", first, f.pool().Hash())
		}
		f.pool().Spec.Template.Labels = map[string]string{"keyLabeltest": "valueLabeltest"}
		second := stamp(f)
		if second == "" || second == first || second != f.pool().Hash() {
			t.Fatalf("restamped %q after a label change (was %s)", second, first)
		}
	})
	conformance.Run(t, c("should not update the drift hash when NodePool behavior field is updated"), func(t *testing.T) {
		f := pool(t)
		first := stamp(f)
		np := f.pool()
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("16")}
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("30s")
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: wellknown.ZoneLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"test"}},
			{Key: wellknown.ZoneLabel, Operator: corev1.NodeSelectorOpGt, Values: []string{"1"}},
			{Key: wellknown.ZoneLabel, Operator: corev1.NodeSelectorOpLt, Values: []string{"1"}},
		}
		np.Spec.Weight = new(int32(80))
		if h := stamp(f); h != "" {
			t.Fatalf("restamped %s after behaviour changes", h)
		}
		if np.Annotations[wellknown.NodePoolHashAnnotation] != first {
			t.Fatal("hash changed")
		}
	})
	conformance.Run(t, c("should update nodepool hash version when the nodepool hash version is out of sync with the controller hash version"), func(t *testing.T) {
		f := pool(t)
		f.pool().Annotations = map[string]string{wellknown.NodePoolHashAnnotation: "abceduefed", wellknown.NodePoolHashVersionAnnotation: "test"}
		if h := stamp(f); h != f.pool().Hash() {
			t.Fatalf("stamped %q, want %s", h, f.pool().Hash())
		}
	})
	// claims adds two claims of the pool stamped hash/version.
	claims := func(f *fixture, hash, version string) []*karpv1.NodeClaim {
		var out []*karpv1.NodeClaim
		for _, name := range []string{"one", "two"} {
			nc := f.node(name, "m.xlarge", zones[0], wellknown.CapacityTypeOnDemand)
			nc.Annotations[wellknown.NodePoolHashAnnotation] = hash
			nc.Annotations[wellknown.NodePoolHashVersionAnnotation] = version
			out = append(out, nc)
		}
		return out
	}
	hashes := func(t *testing.T, nc *karpv1.NodeClaim, hash, version string) {
		t.Helper()
		if h, v := nc.Annotations[wellknown.NodePoolHashAnnotation], nc.Annotations[wellknown.NodePoolHashVersionAnnotation]; h != hash || v != version {
			t.Fatalf("%s stamped %s/%s, want %s/%s", nc.Name, h, v, hash, version)
		}
	}
	conformance.Run(t, c("should update nodepool hash versions on all nodeclaims when the hash versions don't match the controller hash version"), func(t *testing.T) {
		f := pool(t)
		f.pool().Annotations = map[string]string{wellknown.NodePoolHashAnnotation: "abceduefed", wellknown.NodePoolHashVersionAnnotation: "test"}
		ncs := claims(f, "123456", "test")
		stamp(f)
		f.settle()
		for _, nc := range ncs {
			hashes(t, nc, f.pool().Hash(), wellknown.NodePoolHashVersion)
		}
	})
	conformance.Run(t, c("should not update nodepool hash on all nodeclaims when the hash versions match the controller hash version"), func(t *testing.T) {
		f := pool(t)
		f.pool().Annotations = map[string]string{wellknown.NodePoolHashAnnotation: "abceduefed", wellknown.NodePoolHashVersionAnnotation: "test-version"}
		ncs := claims(f, "1234564654", wellknown.NodePoolHashVersion)
		if h := stamp(f); h != f.pool().Hash() {
			t.Fatalf("pool stamped %q, want %s", h, f.pool().Hash())
		}
		f.settle()
		for _, nc := range ncs {
			hashes(t, nc, "1234564654", wellknown.NodePoolHashVersion)
		}
	})
	conformance.Run(t, c("should not update nodepool hash on the nodeclaim if it's drifted"), func(t *testing.T) {
		f := pool(t)
		f.pool().Annotations = map[string]string{wellknown.NodePoolHashAnnotation: "abceduefed", wellknown.NodePoolHashVersionAnnotation: "test"}
		nc := claims(f, "123456", "test")[0]
		nc.SetCondition(karpv1.ConditionTypeDrifted, metav1.ConditionTrue, NodePoolDrifted, NodePoolDrifted, metav1.NewTime(f.now))
		stamp(f)
		f.settle()
		hashes(t, nc, "123456", wellknown.NodePoolHashVersion)
		// And, the old hash kept, it stays drifted.
		f.settle()
		if !f.isTrue(nc.Name, karpv1.ConditionTypeDrifted) {
			t.Fatal("no longer drifted")
		}
	})
}
