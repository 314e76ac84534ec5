package migrate

import (
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// StoredVersionProblem is a CRD on the cluster whose status.storedVersions
// lists a version Karpless's CRD of that name does not have: the API
// server refuses to apply Karpless's CRD over it ("must appear in
// spec.versions"), because objects may still be stored in that version.
type StoredVersionProblem struct {
	CRD      string
	Stored   []string
	Unserved []string
	// Versions are those Karpless's CRD has.
	Versions []string
}

func (p StoredVersionProblem) Error() string {
	return fmt.Sprintf("CRD %s lists stored version %s in status.storedVersions %v, which Karpless's CRD does not have (it has %s)",
		p.CRD, strings.Join(p.Unserved, ", "), p.Stored, strings.Join(p.Versions, ", "))
}

// Fix is what to do, in one paragraph.
func (p StoredVersionProblem) Fix() string {
	return fmt.Sprintf("Objects may still be stored as %s. While Karpenter still runs (its conversion webhook is needed to read them), upgrade it to v1.0.6 or later: its storage version migration rewrites every object as v1 and sets storedVersions to [v1]. By hand: rewrite every object through the v1 API (kubectl get %s -A -o json | kubectl replace -f -), then kubectl patch crd %s --subresource=status --type=merge -p '{\"status\":{\"storedVersions\":[\"v1\"]}}'. See docs/migration.md.",
		strings.Join(p.Unserved, ", "), strings.SplitN(p.CRD, ".", 2)[0], p.CRD)
}

// versionsOf lists a CRD's versions.
func versionsOf(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		out = append(out, v.Name)
	}
	return out
}

// UnservedStoredVersions compares the CRDs on the cluster (live) with
// Karpless's (want), by name: one problem per live CRD whose stored
// versions are not all among want's versions. CRDs Karpless does not
// install are ignored.
func UnservedStoredVersions(live []apiextensionsv1.CustomResourceDefinition, want []*apiextensionsv1.CustomResourceDefinition) []StoredVersionProblem {
	byName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, w := range want {
		byName[w.Name] = w
	}
	var out []StoredVersionProblem
	for _, l := range live {
		w, ok := byName[l.Name]
		if !ok {
			continue
		}
		versions := versionsOf(w)
		var unserved []string
		for _, s := range l.Status.StoredVersions {
			if !slices.Contains(versions, s) {
				unserved = append(unserved, s)
			}
		}
		if len(unserved) > 0 {
			out = append(out, StoredVersionProblem{CRD: l.Name, Stored: l.Status.StoredVersions, Unserved: unserved, Versions: versions})
		}
	}
	return out
}

// CheckStoredVersions gives one result per live CRD.
func CheckStoredVersions(live []apiextensionsv1.CustomResourceDefinition, want []*apiextensionsv1.CustomResourceDefinition) []Result {
	problems := map[string]StoredVersionProblem{}
	for _, p := range UnservedStoredVersions(live, want) {
		problems[p.CRD] = p
	}
	var out []Result
	for _, l := range live {
		r := Result{Check: NameStoredVersions, Subject: "CRD " + l.Name}
		if p, ok := problems[l.Name]; ok {
			r.Status = Fail
			r.Detail = fmt.Sprintf("status.storedVersions is %v; Karpless's CRD has only %s, so its bootstrap refuses to install (the API server would reject the CRD).",
				p.Stored, strings.Join(p.Versions, ", "))
			r.Do = []string{p.Fix()}
		} else {
			r.Status = OK
			r.Detail = fmt.Sprintf("stored as %v", l.Status.StoredVersions)
		}
		out = append(out, r)
	}
	return out
}

// CheckConversion looks at each live CRD's conversion strategy.
func CheckConversion(live []apiextensionsv1.CustomResourceDefinition, want []*apiextensionsv1.CustomResourceDefinition) []Result {
	problems := map[string]bool{}
	for _, p := range UnservedStoredVersions(live, want) {
		problems[p.CRD] = true
	}
	var out []Result
	for _, l := range live {
		r := Result{Check: NameConversion, Subject: "CRD " + l.Name}
		conv := l.Spec.Conversion
		if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter {
			r.Status = OK
			r.Detail = "no conversion webhook (strategy None)"
			out = append(out, r)
			continue
		}
		target := "a URL"
		if conv.Webhook != nil && conv.Webhook.ClientConfig != nil && conv.Webhook.ClientConfig.Service != nil {
			s := conv.Webhook.ClientConfig.Service
			target = "Service " + s.Namespace + "/" + s.Name
		} else if conv.Webhook != nil && conv.Webhook.ClientConfig != nil && conv.Webhook.ClientConfig.URL != nil {
			target = *conv.Webhook.ClientConfig.URL
		}
		r.Status = Warn
		if problems[l.Name] {
			r.Status = Fail
			r.Detail = fmt.Sprintf("converts through %s (Karpenter v1.0's chart), and objects may be stored in an old version: once Karpenter is scaled to zero or removed, the API server cannot read them. Finish the storage version migration (stored-versions) while Karpenter runs.", target)
		} else {
			r.Detail = fmt.Sprintf("converts through %s (Karpenter v1.0's chart). Every object is stored as v1, so the webhook is never called for v1 requests and scaling Karpenter to zero is harmless. Karpless's bootstrap sets the strategy to None when it applies its CRDs; reinstalling a v1.0 chart on rollback sets the webhook again.", target)
		}
		out = append(out, r)
	}
	return out
}
