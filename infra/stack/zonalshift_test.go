package stack

import (
	"slices"
	"testing"
)

// TestZonalShift: enableZonalShift gives the three controllers
// ENABLE_ZONAL_SHIFT=true, the cluster's ARN, and
// arc-zonal-shift:GetManagedResource on this cluster alone (Karpenter's
// statement); without it, no function may call ARC at all.
func TestZonalShift(t *testing.T) {
	const action = "arc-zonal-shift:GetManagedResource"
	controllers := []string{Provisioner, Disruption, Interruption}
	arn := map[string]any{"Fn::Sub": "arn:${AWS::Partition}:eks:${AWS::Region}:${AWS::AccountId}:cluster/" + testCluster}
	grants := func(s *Stack, d map[string]any, name string) []map[string]any {
		stmts, _ := roleGrants(d, logicalID(s, s.Roles[name]))
		var out []map[string]any
		for _, st := range stmts {
			for _, a := range asStrings(st["Action"]) {
				if a == action || actionMatches(a, action) {
					out = append(out, st)
				}
			}
		}
		return out
	}
	env := func(d map[string]any, s *Stack, name string) map[string]any {
		fn := resources(d)[logicalID(s, s.Functions[name])]
		vars, _ := props(fn)["Environment"].(map[string]any)["Variables"].(map[string]any)
		return vars
	}
	for _, enabled := range []bool{false, true} {
		p := defaultProps()
		p.EnableZonalShift = enabled
		s, _, d, err := synth(p, false)
		if err != nil {
			t.Fatal(err)
		}
		for name := range s.Functions {
			got := grants(s, d, name)
			vars := env(d, s, name)
			if !enabled || !slices.Contains(controllers, name) {
				if len(got) > 0 {
					t.Errorf("enableZonalShift=%v: %s may call %s: %s", enabled, name, action, jsonString(got))
				}
				if _, has := vars["CLUSTER_ARN"]; has {
					t.Errorf("enableZonalShift=%v: %s has CLUSTER_ARN", enabled, name)
				}
				if v, has := vars["ENABLE_ZONAL_SHIFT"]; has && (v != "false" || !slices.Contains(controllers, name)) {
					t.Errorf("enableZonalShift=%v: %s has ENABLE_ZONAL_SHIFT=%v", enabled, name, v)
				}
				continue
			}
			want := map[string]any{
				"Sid": "AllowZonalShiftStatusReadOnly", "Effect": "Allow", "Action": action, "Resource": "*",
				"Condition": map[string]any{"StringEquals": map[string]any{"arc-zonal-shift:ResourceIdentifier": arn}},
			}
			if len(got) != 1 || jsonString(got[0]) != jsonString(want) {
				t.Errorf("%s's %s grants: %s\nwant exactly %s", name, action, jsonString(got), jsonString(want))
			}
			if vars["ENABLE_ZONAL_SHIFT"] != "true" || jsonString(vars["CLUSTER_ARN"]) != jsonString(arn) {
				t.Errorf("%s: ENABLE_ZONAL_SHIFT=%v CLUSTER_ARN=%s, want true and the cluster's ARN", name, vars["ENABLE_ZONAL_SHIFT"], jsonString(vars["CLUSTER_ARN"]))
			}
		}
		if v := guardViolations(d); len(v) > 0 {
			t.Errorf("enableZonalShift=%v: %v", enabled, v)
		}
	}
}
