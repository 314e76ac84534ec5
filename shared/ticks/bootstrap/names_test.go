package bootstrap

import (
	"slices"
	"testing"

	"github.com/karpless/karpless/functions"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/aws/pricing"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/function/shadow"
	"github.com/karpless/karpless/shared/kube/pause"
	"github.com/karpless/karpless/shared/ticks/disrupt"
	"github.com/karpless/karpless/shared/ticks/provision"
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

// The decision stores the bootstrap creates on a shadow stack, and the
// leases it lets the controllers renew, are the functions' own; and the
// shadow guard lets the functions write exactly what the bootstrap
// creates and grants, nothing else.
func TestLeasesAndShadowStoresAreTheFunctionsOnes(t *testing.T) {
	stores := []string{shadow.StoreName(functions.Provisioner), shadow.StoreName(functions.Disruption)}
	if !slices.Equal(ShadowStores(), stores) || ShadowStoreLabel != shadow.StoreLabel {
		t.Errorf("bootstrap creates stores %v labelled %s; the functions write %v labelled %s", ShadowStores(), ShadowStoreLabel, stores, shadow.StoreLabel)
	}
	if !slices.Equal(ControllerLeases(), []string{provision.LeaseName, disrupt.LeaseName}) {
		t.Errorf("bootstrap grants leases %v; the functions hold %s and %s", ControllerLeases(), provision.LeaseName, disrupt.LeaseName)
	}
	own := app.ShadowOwn()
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	if !slices.Equal(sorted(own.Leases), sorted(ControllerLeases())) {
		t.Errorf("the shadow guard lets the functions write leases %v; the bootstrap grants %v", own.Leases, ControllerLeases())
	}
	if want := append(StateConfigMaps(), ShadowStores()...); !slices.Equal(sorted(own.ConfigMaps), sorted(want)) {
		t.Errorf("the shadow guard lets the functions write configmaps %v; the bootstrap creates %v", own.ConfigMaps, want)
	}
}
