package bootstrap

import (
	"slices"
	"testing"

	"github.com/karpless/karpless/shared/disruption/orchestrate"
	"github.com/karpless/karpless/shared/ice"
	"github.com/karpless/karpless/shared/pricing"
)

// The bootstrap creates the ConfigMaps the functions write (they may only
// update them): the names must be the ones the functions use.
func TestStateConfigMapsAreTheFunctionsOnes(t *testing.T) {
	want := []string{ice.ConfigMapName, pricing.ConfigMapName, orchestrate.StateConfigMap}
	got := StateConfigMaps()
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("bootstrap creates %v; the functions use %v", got, want)
	}
}
