package workload

import (
	"math"
	"testing"

	"github.com/karpless/karpless/shared/core/wellknown"
)

func TestHasSpotMarket(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		{"m5.large", true},
		{"t4g.micro", true},
		{"g5.xlarge", true},
		{"u-6tb1.112xlarge", false},
		{"u7i-12tb.224xlarge", false},
		{"u7in-16tb.224xlarge", false},
		{"hpc7g.16xlarge", false},
	} {
		if got := HasSpotMarket(c.name); got != c.want {
			t.Errorf("HasSpotMarket(%s) = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestCreditHourly(t *testing.T) {
	labels := func(family, size string) map[string]string {
		return map[string]string{wellknown.InstanceFamilyLabel: family, wellknown.InstanceSizeLabel: size}
	}
	for _, c := range []struct {
		name      string
		labels    map[string]string
		vcpus     int
		requested int64
		want      float64
	}{
		{"not burstable", labels("m5", "large"), 2, 2000, 0},
		{"below baseline", labels("t3", "large"), 2, 500, 0},
		{"at baseline", labels("t3a", "large"), 2, 600, 0},
		// micro: 10% baseline of 2 vCPUs; 1.5 vCPU requested is 75%, 65
		// points above: 1.3 vCPU-hours an hour at T4g's $0.04.
		{"t4g.micro at 75%", labels("t4g", "micro"), 2, 1500, 0.052},
		{"capped at 100%", labels("t4g", "nano"), 2, 4000, 0.076},
		{"xlarge 40% baseline", labels("t3", "xlarge"), 4, 2000, 0.02},
		{"unknown size", labels("t3", "huge"), 4, 4000, 0},
	} {
		if got := CreditHourly(c.labels, c.vcpus, c.requested); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: CreditHourly = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRootVolumeHourly(t *testing.T) {
	if math.Abs(RootVolumeHourly-0.0022) > 0.0001 {
		t.Fatalf("RootVolumeHourly = %v, want about $0.0022", RootVolumeHourly)
	}
}

func TestBuildMixes(t *testing.T) {
	for _, mix := range Mixes {
		w, err := Build(mix, 1000, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Pods) != 1000 {
			t.Errorf("%s: %d pods, want 1000", mix, len(w.Pods))
		}
		uids := map[string]bool{}
		for _, p := range w.Pods {
			if len(p.OwnerReferences) != 1 {
				t.Fatalf("%s: pod %s without a controller owner", mix, p.Name)
			}
			if uids[string(p.UID)] {
				t.Fatalf("%s: duplicate UID %s", mix, p.UID)
			}
			uids[string(p.UID)] = true
			if mix == NoAntiMix && p.Spec.Affinity != nil && p.Spec.Affinity.PodAntiAffinity != nil {
				t.Fatalf("%s: pod %s has anti-affinity", mix, p.Name)
			}
		}
		if (mix == MicroservicesMix) != (len(w.PDBs) > 0) {
			t.Errorf("%s: %d PDBs", mix, len(w.PDBs))
		}
	}
}

func TestDaemonOverhead(t *testing.T) {
	o := DaemonOverhead()
	if o.Cpu().MilliValue() != 230 || o.Memory().Value() != 170<<20 || o.Pods().Value() != 5 {
		t.Fatalf("overhead %v, want 230m cpu, 170Mi, 5 pods", o)
	}
}
