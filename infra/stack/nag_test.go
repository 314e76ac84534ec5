package stack

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// checkNag fails on any AwsSolutions finding of a stack synthesized with
// AddAwsSolutionsChecks that is not suppressed (with its reason, in nag.go).
func checkNag(t *testing.T, s *Stack) {
	t.Helper()
	a := assertions.Annotations_FromStack(s.Stack)
	re := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
	for kind, msgs := range map[string]int{
		"error":   len(*a.FindError(jsii.String("*"), re)),
		"warning": len(*a.FindWarning(jsii.String("*"), re)),
	} {
		if msgs == 0 {
			continue
		}
		var list []string
		var found = a.FindError(jsii.String("*"), re)
		if kind == "warning" {
			found = a.FindWarning(jsii.String("*"), re)
		}
		for _, m := range *found {
			list = append(list, *m.Id+": "+jsonString(m.Entry.Data))
		}
		t.Errorf("cdk-nag AwsSolutions %ss:\n%s", kind, strings.Join(list, "\n"))
	}
}

func TestNagAwsSolutions(t *testing.T) {
	s, _, _, err := synth(defaultProps(), true)
	if err != nil {
		t.Fatal(err)
	}
	checkNag(t, s)
}

// TestNagSuppressionsHaveReasons: every suppression in the template names
// the findings it covers and explains itself.
func TestNagSuppressionsHaveReasons(t *testing.T) {
	n := 0
	for id, r := range resources(doc) {
		md, _ := r["Metadata"].(map[string]any)
		nag, _ := md["cdk_nag"].(map[string]any)
		for _, rule := range asList(nag["rules_to_suppress"]) {
			rule := rule.(map[string]any)
			n++
			if reason, _ := rule["reason"].(string); len(reason) < 60 {
				t.Errorf("%s: suppression of %v has a short reason %q", id, rule["id"], reason)
			}
			if len(asList(rule["applies_to"])) == 0 {
				t.Errorf("%s: suppression of %v applies to every finding; name them", id, rule["id"])
			}
		}
	}
	if n == 0 {
		t.Error("no cdk-nag suppressions found in the template metadata")
	}
}
