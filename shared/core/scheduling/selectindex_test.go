package scheduling

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestCandidatePods checks the label index used by initTopology against
// matching every pod: an indexed group's candidates must include every pod
// its selector selects.
func TestCandidatePods(t *testing.T) {
	pods := []map[string]string{
		{"app": "a", "tier": "web"},
		{"app": "b", "tier": "web"},
		{"app": "a"},
		{"tier": "db"},
		{},
	}
	byLabel := map[string]map[string][]int{}
	for i, l := range pods {
		for k, v := range l {
			if byLabel[k] == nil {
				byLabel[k] = map[string][]int{}
			}
			byLabel[k][v] = append(byLabel[k][v], i)
		}
	}
	for _, c := range []struct {
		name     string
		selector labels.Selector
		want     []int
		indexed  bool
	}{
		{"equals", mustSelector(t, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}), []int{0, 2}, true},
		{"two labels, first required value", mustSelector(t, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a", "tier": "web"}}), []int{0, 2}, true},
		{"in", mustSelector(t, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"b", "a"}}}}), []int{0, 1, 2}, true},
		{"no such value", mustSelector(t, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "z"}}), nil, true},
		{"exists: not indexed", mustSelector(t, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}}), nil, false},
		{"empty selector: not indexed", mustSelector(t, &metav1.LabelSelector{}), nil, false},
		{"nothing", labels.Nothing(), nil, true},
	} {
		got, indexed := candidatePods(&group{selector: c.selector}, byLabel)
		if indexed != c.indexed || !slices.Equal(got, c.want) {
			t.Errorf("%s: candidates %v indexed %v, want %v %v", c.name, got, indexed, c.want, c.indexed)
		}
		if !indexed {
			continue
		}
		for i, l := range pods {
			if c.selector.Matches(labels.Set(l)) && !slices.Contains(got, i) {
				t.Errorf("%s: pod %d is selected but not a candidate", c.name, i)
			}
		}
	}
}

func mustSelector(t *testing.T, ls *metav1.LabelSelector) labels.Selector {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
