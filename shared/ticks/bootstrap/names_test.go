package bootstrap

import (
	"slices"
	"testing"

	"github.com/karpless/karpless/shared/aws/pricing"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/kube/pause"
	"github.com/karpless/karpless/shared/ticks/disrupt"
)

// The bootstrap creates the ConfigMaps the functions write (they may only
// update them): the names must be the ones the functions use.
func TestStateConfigMapsAreTheFunctionsOnes(t *testing.T) {
	want := []string{unavailable.ConfigMapName, pricing.ConfigMapName, disrupt.StateConfigMap}
	got := StateConfigMaps()
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("bootstrap creates %v; the functions use %v", got, want)
	}
}

// The switch the bootstrap creates and grants is the one the ticks read.
func TestPauseConfigMapIsTheTicksOne(t *testing.T) {
	if PauseConfigMap != pause.ConfigMapName {
		t.Fatalf("bootstrap creates %s; the ticks read %s", PauseConfigMap, pause.ConfigMapName)
	}
}
