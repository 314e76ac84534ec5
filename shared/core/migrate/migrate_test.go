package migrate

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func crd(name, kind string, stored []string, versions ...string) apiextensionsv1.CustomResourceDefinition {
	c := apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}, Labels: map[string]string{}}}
	c.Spec.Names.Kind = kind
	for _, v := range versions {
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: v == "v1"})
	}
	c.Status.StoredVersions = stored
	return c
}

func helmOwned(c apiextensionsv1.CustomResourceDefinition, release, ns string) apiextensionsv1.CustomResourceDefinition {
	c = *c.DeepCopy()
	c.Annotations[HelmReleaseNameAnn], c.Annotations[HelmReleaseNSAnn] = release, ns
	c.Labels["app.kubernetes.io/managed-by"] = "Helm"
	return c
}

// crdManifest renders a CRD document as a chart template would.
func crdManifest(name string, keep bool) string {
	ann := "    controller-gen.kubebuilder.io/version: v0.20.1\n"
	if keep {
		ann = "    helm.sh/resource-policy: keep\n" + ann
	}
	return "---\n# Source: karpenter-crd/templates/" + name + ".yaml\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  annotations:\n" + ann + "  name: " + name + "\nspec:\n  group: karpenter.sh\n  versions:\n  - name: v1\n    description: |\n      text with --- inside\n"
}

func TestHelmReleaseRoundTrip(t *testing.T) {
	in := HelmRelease{Name: "karpenter-crd", Namespace: "karpenter", Revision: 3, Status: "deployed", Chart: "karpenter-crd", ChartVersion: "1.14.1", Manifest: crdManifest("nodeclaims.karpenter.sh", true)}
	b, err := EncodeHelmRelease(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeHelmRelease(b)
	if err != nil || out != in {
		t.Fatalf("round trip: %+v %v", out, err)
	}
	// Helm also reads releases stored without gzip.
	plain := base64.StdEncoding.EncodeToString([]byte(`{"name":"x","version":2,"namespace":"n","info":{"status":"failed"},"manifest":""}`))
	if r, err := DecodeHelmRelease([]byte(plain)); err != nil || r.Revision != 2 || r.Status != "failed" {
		t.Errorf("plain JSON: %+v %v", r, err)
	}
	for _, bad := range []string{"!!!", base64.StdEncoding.EncodeToString([]byte{0x1f, 0x8b, 0x08, 0}), base64.StdEncoding.EncodeToString([]byte("{"))} {
		if _, err := DecodeHelmRelease([]byte(bad)); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func TestParseManifest(t *testing.T) {
	m := crdManifest("nodepools.karpenter.sh", false) + crdManifest("nodeclaims.karpenter.sh", true) +
		"---\n# Source: only a comment\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: karpenter\n  namespace: karpenter\n"
	objs, err := ParseManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 3 || objs[0].Name != "nodepools.karpenter.sh" || objs[0].Keep() || !objs[1].Keep() || objs[2].Kind != "ServiceAccount" || objs[2].Namespace != "karpenter" {
		t.Errorf("objects: %+v", objs)
	}
	if _, err := ParseManifest("---\nkind: [\n"); err == nil {
		t.Error("malformed YAML parsed")
	}
}

func TestLastRevisions(t *testing.T) {
	got := LastRevisions([]HelmRelease{
		{Name: "a", Namespace: "n", Revision: 1, Status: "superseded"},
		{Name: "a", Namespace: "n", Revision: 3, Status: "failed"},
		{Name: "a", Namespace: "n", Revision: 2, Status: "deployed"},
		{Name: "a", Namespace: "m", Revision: 1},
	})
	if len(got) != 2 || got[0].Namespace != "m" || got[1].Revision != 3 {
		t.Errorf("%+v", got)
	}
}

func TestCheckHelmKeep(t *testing.T) {
	nc := crd("nodeclaims.karpenter.sh", "NodeClaim", []string{"v1"}, "v1")
	rel := func(version, chart string, keep bool, rev int) HelmRelease {
		return HelmRelease{Name: "karpenter-crd", Namespace: "karpenter", Revision: rev, Status: "deployed", Chart: chart, ChartVersion: version,
			Manifest: crdManifest("nodeclaims.karpenter.sh", keep), Storage: "Secret karpenter/" + HelmStorageName("karpenter-crd", rev)}
	}
	liveKeep := helmOwned(nc, "karpenter-crd", "karpenter")
	liveKeep.Annotations[HelmPolicyAnn] = "keep"
	argo := *nc.DeepCopy()
	argo.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "karpenter:apiextensions.k8s.io/CustomResourceDefinition:/nodeclaims.karpenter.sh"}
	for _, tc := range []struct {
		name     string
		in       HelmInput
		status   Status
		want     []string
		wantDo   []string
		notWant  string
		nResults int
	}{
		{name: "kept in the stored manifest",
			in:     HelmInput{CRDs: []apiextensionsv1.CustomResourceDefinition{helmOwned(nc, "karpenter-crd", "karpenter")}, Releases: []HelmRelease{rel("1.14.1", "karpenter-crd", true, 1)}},
			status: OK, want: []string{"last revision 1", "helm uninstall leaves it"}},
		{name: "live annotation only: the v1.0 trap",
			in: HelmInput{CRDs: []apiextensionsv1.CustomResourceDefinition{liveKeep}, Releases: []HelmRelease{rel("1.0.8", "karpenter-crd", false, 1)},
				Objects: map[string]int{"nodeclaims.karpenter.sh": 12}},
			status: Fail, want: []string{"`helm uninstall karpenter-crd -n karpenter` deletes this CRD, and with it its 12 NodeClaims", "does not protect it", "drains every node"},
			wantDo: []string{"no additionalAnnotations value (added in 1.2.0)", "Do not run helm uninstall"}},
		{name: "the last revision decides, whatever its status",
			in: HelmInput{CRDs: []apiextensionsv1.CustomResourceDefinition{helmOwned(nc, "karpenter-crd", "karpenter")},
				Releases: []HelmRelease{rel("1.14.1", "karpenter-crd", true, 1), rel("1.14.1", "karpenter-crd", false, 2)}},
			status: Fail, want: []string{"revision 2", "every NodeClaim"},
			wantDo: []string{"helm upgrade karpenter-crd oci://public.ecr.aws/karpenter/karpenter-crd --version 1.14.1 -n karpenter --reuse-values --set-string 'additionalAnnotations.helm\\.sh/resource-policy=keep'"}},
		{name: "a chart of someone else's",
			in: HelmInput{CRDs: []apiextensionsv1.CustomResourceDefinition{helmOwned(nc, "platform", "infra")},
				Releases: []HelmRelease{{Name: "platform", Namespace: "infra", Revision: 7, Chart: "platform", ChartVersion: "3.1.0", Manifest: crdManifest("nodeclaims.karpenter.sh", false)}}},
			status: Fail, wantDo: []string{"to the CRD in chart platform's template"}},
		{name: "from the karpenter chart's crds/ directory",
			in:     HelmInput{CRDs: []apiextensionsv1.CustomResourceDefinition{nc}, Releases: []HelmRelease{{Name: "karpenter", Namespace: "karpenter", Revision: 4, Chart: "karpenter", Manifest: "---\nkind: ServiceAccount\nmetadata:\n  name: karpenter\n"}}},
			status: OK, want: []string{"crds/ directory", "never deletes it"}},
		{name: "Helm's storage unreadable",
			in:     HelmInput{CRDs: []apiextensionsv1.CustomResourceDefinition{helmOwned(nc, "karpenter-crd", "karpenter")}, ReadError: errors.New("secrets is forbidden")},
			status: Fail, want: []string{"could not be read (secrets is forbidden)"}, wantDo: []string{"list Secrets in namespace karpenter"}},
		{name: "release not stored here",
			in:     HelmInput{CRDs: []apiextensionsv1.CustomResourceDefinition{helmOwned(nc, "karpenter-crd", "karpenter")}},
			status: Warn, want: []string{"no stored revision of it was found"}},
		{name: "Argo CD",
			in:     HelmInput{CRDs: []apiextensionsv1.CustomResourceDefinition{argo}},
			status: Warn, want: []string{"Argo CD manages it"}},
		{name: "unreadable manifest",
			in: HelmInput{CRDs: []apiextensionsv1.CustomResourceDefinition{nc},
				Releases: []HelmRelease{{Name: "x", Namespace: "y", Revision: 1, Manifest: "---\nkind: [\n", Storage: "Secret y/x"}}},
			status: OK, nResults: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckHelmKeep(tc.in)
			n := tc.nResults
			if n == 0 {
				n = 1
			}
			if len(got) != n {
				t.Fatalf("%d results: %+v", len(got), got)
			}
			r := got[0]
			if r.Status != tc.status || r.Check != NameHelmKeep || r.Subject != "CRD nodeclaims.karpenter.sh" {
				t.Errorf("status %s, want %s: %+v", r.Status, tc.status, r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Detail, w) {
					t.Errorf("detail lacks %q:\n%s", w, r.Detail)
				}
			}
			do := strings.Join(r.Do, "\n")
			for _, w := range tc.wantDo {
				if !strings.Contains(do, w) {
					t.Errorf("do lacks %q:\n%s", w, do)
				}
			}
			if n == 2 && got[1].Status != Warn {
				t.Errorf("unreadable manifest: %+v", got[1])
			}
		})
	}
}

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{{"1.2.0", true}, {"v1.14.1", true}, {"1.1.9", false}, {"1.0.8", false}, {"2.0.0-rc.1", true}, {"1.2", true}, {"x", false}} {
		if got := versionAtLeast(tc.v, 1, 2, 0); got != tc.want {
			t.Errorf("%s: %v", tc.v, got)
		}
	}
}

func TestStoredVersions(t *testing.T) {
	want := []*apiextensionsv1.CustomResourceDefinition{new(crd("nodeclaims.karpenter.sh", "NodeClaim", nil, "v1")), new(crd("nodeoverlays.karpenter.sh", "NodeOverlay", nil, "v1alpha1"))}
	live := []apiextensionsv1.CustomResourceDefinition{
		crd("nodeclaims.karpenter.sh", "NodeClaim", []string{"v1beta1", "v1"}, "v1beta1", "v1"),
		crd("nodeoverlays.karpenter.sh", "NodeOverlay", []string{"v1alpha1"}, "v1alpha1"),
		crd("other.example.com", "Other", []string{"v0"}, "v0"),
	}
	ps := UnservedStoredVersions(live, want)
	if len(ps) != 1 || ps[0].CRD != "nodeclaims.karpenter.sh" || strings.Join(ps[0].Unserved, ",") != "v1beta1" {
		t.Fatalf("%+v", ps)
	}
	msg := ps[0].Error() + " " + ps[0].Fix()
	for _, w := range []string{"nodeclaims.karpenter.sh", "stored version v1beta1", "[v1beta1 v1]", "has v1", "v1.0.6", "kubectl get nodeclaims -A -o json | kubectl replace -f -", `kubectl patch crd nodeclaims.karpenter.sh --subresource=status --type=merge -p '{"status":{"storedVersions":["v1"]}}'`} {
		if !strings.Contains(msg, w) {
			t.Errorf("message lacks %q: %s", w, msg)
		}
	}
	rs := CheckStoredVersions(live[:2], want)
	if len(rs) != 2 || rs[0].Status != Fail || rs[1].Status != OK || rs[1].Detail != "stored as [v1alpha1]" {
		t.Errorf("%+v", rs)
	}
}

func TestCheckConversion(t *testing.T) {
	want := []*apiextensionsv1.CustomResourceDefinition{new(crd("nodeclaims.karpenter.sh", "NodeClaim", nil, "v1")), new(crd("nodepools.karpenter.sh", "NodePool", nil, "v1"))}
	webhook := func(c apiextensionsv1.CustomResourceDefinition) apiextensionsv1.CustomResourceDefinition {
		c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: "karpenter", Name: "karpenter"}}}}
		return c
	}
	live := []apiextensionsv1.CustomResourceDefinition{
		webhook(crd("nodeclaims.karpenter.sh", "NodeClaim", []string{"v1beta1", "v1"}, "v1beta1", "v1")),
		webhook(crd("nodepools.karpenter.sh", "NodePool", []string{"v1"}, "v1beta1", "v1")),
		crd("ec2nodeclasses.karpenter.k8s.aws", "EC2NodeClass", []string{"v1"}, "v1"),
	}
	rs := CheckConversion(live, want)
	if rs[0].Status != Fail || !strings.Contains(rs[0].Detail, "Service karpenter/karpenter") ||
		rs[1].Status != Warn || !strings.Contains(rs[1].Detail, "sets the strategy to None") || rs[2].Status != OK {
		t.Errorf("%+v", rs)
	}
}

func TestCheckKarpenter(t *testing.T) {
	up := Deployment{Namespace: "karpenter", Name: "karpenter", Replicas: 2, Ready: 2, HelmRelease: "karpenter"}
	down := up
	down.Replicas, down.Ready = 0, 0
	for _, tc := range []struct {
		name string
		deps []Deployment
		k    Karpless
		want Status
		text string
	}{
		{"before the switch", []Deployment{up}, Karpless{}, Warn, "kubectl scale deployment -n karpenter karpenter --replicas=0"},
		{"scaled to zero", []Deployment{down}, Karpless{Installed: true}, OK, "Keep it installed until Karpless is verified"},
		{"both run", []Deployment{up}, Karpless{Installed: true}, Fail, "two controllers"},
		{"rolled back", []Deployment{up}, Karpless{Installed: true, Paused: true}, OK, "rolled back"},
		{"uninstalled", nil, Karpless{Installed: true}, OK, "only controller"},
		{"never there", nil, Karpless{}, Warn, "not installed here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := CheckKarpenter(tc.deps, tc.k)
			text := rs[0].Detail + strings.Join(rs[0].Do, " ")
			if len(rs) != 1 || rs[0].Status != tc.want || !strings.Contains(text, tc.text) {
				t.Errorf("%+v", rs)
			}
		})
	}
	if rs := CheckKarpenter([]Deployment{up}, Karpless{}); !strings.Contains(strings.Join(rs[0].Do, " "), "--set replicas=0") {
		t.Errorf("no chart value: %+v", rs)
	}
}

func TestCheckFinalizers(t *testing.T) {
	objs := []Finalized{
		{Kind: "NodeClaim", Name: "a", Finalizers: []string{"karpenter.sh/termination"}},
		{Kind: "NodeClaim", Name: "b", Finalizers: []string{"karpenter.sh/termination"}, Deleting: true},
		{Kind: "EC2NodeClass", Name: "default", Finalizers: []string{"karpenter.k8s.aws/termination"}},
		{Kind: "Node", Name: "n1", Karpenter: true},
		{Kind: "Node", Name: "mng-1"},
	}
	rs := CheckFinalizers(FinalizerInput{Objects: objs})
	if len(rs) != 3 {
		t.Fatalf("%+v", rs)
	}
	if rs[0].Status != Warn || !strings.Contains(rs[0].Detail, "2 of 2 NodeClaims carry karpenter.sh/termination") || !strings.Contains(rs[0].Detail, "1 NodeClaim being deleted wait") {
		t.Errorf("NodeClaims: %+v", rs[0])
	}
	if rs[1].Status != OK || !strings.Contains(rs[1].Detail, "1 of 1 EC2NodeClass carry karpenter.k8s.aws/termination") || !strings.Contains(rs[1].Detail, "Never run the finalizer-removal script") {
		t.Errorf("EC2NodeClasses: %+v", rs[1])
	}
	if rs[2].Status != Warn || !strings.Contains(rs[2].Detail, "1 Karpenter Node lack it (n1)") {
		t.Errorf("Nodes: %+v", rs[2])
	}
	rs = CheckFinalizers(FinalizerInput{ListErrors: map[string]error{"NodeClaim": errors.New(`conversion webhook for karpenter.sh/v1beta1, Kind=NodeClaim failed: connection refused`)}})
	if rs[0].Status != Fail || rs[1].Detail != "none" {
		t.Errorf("%+v", rs)
	}
}

func TestAWSChecks(t *testing.T) {
	names := ControllerPolicyNames("prod")
	if len(names) != 7 || names[0] != "KarpenterControllerNodeLifecyclePolicy-prod" || names[5] != "KarpenterControllerResourceDiscoveryPolicy-prod" || names[6] != "KarpenterControllerPolicy-prod" {
		t.Errorf("%v", names)
	}
	es := CheckAccessEntries([]NodeRoleEntry{
		{Role: "KarpenterNodeRole-prod", Found: true, Type: "EC2_LINUX", Stack: "eksctl-prod-cluster"},
		{Role: "r2", Found: true, Type: "STANDARD", ARN: "arn:aws:iam::1:role/r2"},
		{Role: "r3", InAWSAuth: true, AuthMode: "API_AND_CONFIG_MAP"},
		{Role: "r4", AuthMode: "API"},
		{Role: "r5", Err: errors.New("AccessDenied")},
	})
	if es[0].Status != OK || !strings.Contains(es[0].Detail, "skipNodeAccessEntry=true") || !strings.Contains(es[0].Detail, "eksctl-prod-cluster") ||
		es[1].Status != Fail || es[2].Status != Warn || !strings.Contains(es[2].Detail, "aws-auth") || es[3].Status != Warn || es[4].Status != Warn {
		t.Errorf("%+v", es)
	}
	if rs := CheckAccessEntries(nil); rs[0].Status != Warn || !strings.Contains(rs[0].Do[0], "--node-role") {
		t.Errorf("%+v", rs)
	}
	if r := CheckControllerPolicies("prod", nil, nil); r.Status != OK {
		t.Errorf("%+v", r)
	}
	r := CheckControllerPolicies("prod", []Policy{{Name: "KarpenterControllerPolicy-prod", Attachments: 1}}, nil)
	if r.Status != Warn || !strings.Contains(r.Detail, "1 policy left: KarpenterControllerPolicy-prod (attached 1)") || !strings.Contains(r.Do[0], "rollback") {
		t.Errorf("%+v", r)
	}
	for _, tc := range []struct {
		q    Queue
		want Status
		text string
	}{
		{Queue{Name: "prod"}, OK, "no such queue"},
		{Queue{Name: "prod", Exists: true}, Warn, "receives nothing"},
		{Queue{Name: "prod", Exists: true, Rules: []string{"r1", "r2"}, ReadBy: "Deployment karpenter/karpenter", Messages: 3}, Warn, "both act on the same event"},
		{Queue{Name: "prod", Err: errors.New("x")}, Warn, "not checked"},
	} {
		if r := CheckQueue(tc.q); r.Status != tc.want || !strings.Contains(r.Detail, tc.text) {
			t.Errorf("%+v: %+v", tc.q, r)
		}
	}
}

func TestWriteText(t *testing.T) {
	r := Report{Source: "context kind (https://x)", Results: []Result{
		{Check: NameStoredVersions, Status: Fail, Subject: "CRD a", Detail: "one\ntwo", Do: []string{"first", "second\nline"}},
		{Check: NameQueue, Status: OK, Subject: "SQS queue prod", Detail: "gone"},
	}}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "Switching context kind (https://x) from Karpenter to Karpless:\n\n" +
		"FAIL  stored-versions  CRD a\n      one\n      two\n      - first\n      - second\n        line\n" +
		"OK    karpenter-queue  SQS queue prod\n      gone\n" +
		"\n1 FAIL, 0 WARN, 1 OK. Fix every FAIL before you switch; run the check again (docs/migration.md).\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	if !r.Failed() {
		t.Error("not failed")
	}
}
