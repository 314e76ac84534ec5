package stack

import (
	"fmt"
	"strings"
	"testing"

	"github.com/karpless/karpless/functions"
)

// readOnlyAction reports whether an IAM action only reads: its verb
// begins with Describe, Get or List.
func readOnlyAction(a string) bool {
	_, verb, _ := strings.Cut(a, ":")
	for _, p := range []string{"Describe", "Get", "List"} {
		if strings.HasPrefix(verb, p) {
			return true
		}
	}
	return false
}

// shadowWrites are the only non-reading actions a shadow stack grants:
// a function's own log lines, and the watcher's start of the provisioner
// (itself in shadow).
var shadowWrites = map[string][]string{
	Provisioner:  {"logs:CreateLogStream", "logs:PutLogEvents"},
	Disruption:   {"logs:CreateLogStream", "logs:PutLogEvents"},
	Interruption: {"logs:CreateLogStream", "logs:PutLogEvents"},
	Bootstrap:    {"logs:CreateLogStream", "logs:PutLogEvents"},
	Watcher:      {"logs:CreateLogStream", "logs:PutLogEvents", "lambda:InvokeFunction"},
}

// TestShadowGrantsNoMutation: with mode shadow every function runs with
// MODE=shadow and its role can read and nothing else (bar its logs and
// the watcher's Invoke), so that even a bug past the transports' refusal
// cannot launch, tag, terminate or delete; no managed policy that
// mutates is defined at all, no queue feeds the interruption function,
// the interruption rules are disabled and the bootstrap is told the mode.
func TestShadowGrantsNoMutation(t *testing.T) {
	p := defaultProps()
	p.Mode = "shadow"
	s, _, d, err := synth(p, true)
	if err != nil {
		t.Fatal(err)
	}
	checkNag(t, s)
	for _, name := range functions.Names() {
		stmts, awsManaged := roleGrants(d, logicalID(s, s.Roles[name]))
		if len(awsManaged) > 0 {
			t.Errorf("%s: AWS managed policies %v", name, awsManaged)
		}
		for _, st := range stmts {
			if st["Effect"] != "Allow" || st["NotAction"] != nil {
				t.Errorf("%s: unexpected statement %s", name, jsonString(st))
			}
			for _, a := range asStrings(st["Action"]) {
				if strings.ContainsAny(a, "*?") {
					t.Errorf("%s: wildcard action %s", name, a)
				}
				if !readOnlyAction(a) && !contains(toAny(shadowWrites[name]), a) {
					t.Errorf("%s: shadow role grants %s (%s)", name, a, jsonString(st))
				}
			}
		}
		env, _ := props(resources(d)[logicalID(s, s.Functions[name])])["Environment"].(map[string]any)
		if v, _ := env["Variables"].(map[string]any); v["MODE"] != "shadow" {
			t.Errorf("%s MODE = %v", name, v["MODE"])
		}
	}
	// Every identity policy of the template, wherever it is attached.
	for _, typ := range []string{"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"} {
		for id, r := range resourcesOfType(d, typ) {
			for _, st := range asList(props(r)["PolicyDocument"].(map[string]any)["Statement"]) {
				for _, a := range asStrings(st.(map[string]any)["Action"]) {
					if !readOnlyAction(a) && a != "logs:CreateLogStream" && a != "logs:PutLogEvents" && a != "lambda:InvokeFunction" {
						t.Errorf("%s %s grants %s", typ, id, a)
					}
				}
			}
		}
	}
	for _, id := range []string{LaunchPolicyID, InstanceProfilePolicyID, InstanceProfileGCPolicyID} {
		if s.ManagedPolicies[id] != nil {
			t.Errorf("shadow stack defines managed policy %s", id)
		}
	}
	if n := len(resourcesOfType(d, "AWS::Lambda::EventSourceMapping")); n != 0 {
		t.Errorf("shadow stack has %d event source mappings", n)
	}
	if got := ruleStates(d); got["ENABLED"] != 0 || got["DISABLED"] != len(s.InterruptionRules) {
		t.Errorf("shadow interruption rules by state: %v", got)
	}
	if _, opts, _ := bootstrapSettings(t, s, d); !opts.Shadow {
		t.Errorf("the shadow stack's bootstrap reads %+v", opts)
	}

	// The default stack acts: MODE active, rules enabled, no Mode property.
	for _, name := range functions.Names() {
		env, _ := props(resources(doc)[logicalID(st, st.Functions[name])])["Environment"].(map[string]any)
		if v, _ := env["Variables"].(map[string]any); v["MODE"] != "active" {
			t.Errorf("default %s MODE = %v", name, v["MODE"])
		}
	}
	if got := ruleStates(doc); got["DISABLED"] != 0 || got["ENABLED"] != len(st.InterruptionRules) {
		t.Errorf("default interruption rules by state: %v", got)
	}
	if _, opts, _ := bootstrapSettings(t, st, doc); opts.Shadow {
		t.Error("the default stack's bootstrap reads shadow mode")
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// ruleStates counts the event-pattern rules (the interruption rules, not
// the schedules) by state.
func ruleStates(d map[string]any) map[string]int {
	out := map[string]int{}
	for _, r := range resourcesOfType(d, "AWS::Events::Rule") {
		if p := props(r); p["EventPattern"] != nil {
			out[fmt.Sprint(p["State"])]++
		}
	}
	return out
}
