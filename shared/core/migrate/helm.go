package migrate

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Helm 3 stores each revision of a release as a Secret (the default
// driver) or a ConfigMap (HELM_DRIVER=configmap) in the release's
// namespace, named sh.helm.release.v1.<release>.v<revision> and labelled
// owner=helm, name=<release>, version=<revision>, status=<status>. Its
// "release" value is base64 of gzip of the release as JSON, whose
// "manifest" holds every object the chart's templates rendered. The
// chart's crds/ directory is not in the manifest: Helm creates those CRDs
// once and never upgrades or deletes them.
//
// helm uninstall deletes every object of the manifest of the release's
// last revision, except those whose annotation helm.sh/resource-policy is
// "keep" *in that manifest*: an annotation added to the live object with
// kubectl is never read.
const (
	HelmSecretType     = "helm.sh/release.v1"
	HelmOwnerLabel     = "owner"
	HelmOwnerValue     = "helm"
	HelmReleaseKey     = "release"
	HelmReleaseNameAnn = "meta.helm.sh/release-name"
	HelmReleaseNSAnn   = "meta.helm.sh/release-namespace"
	HelmPolicyAnn      = "helm.sh/resource-policy"
	HelmKeep           = "keep"
)

// HelmRelease is one stored revision of a Helm release.
type HelmRelease struct {
	Name         string
	Namespace    string
	Revision     int
	Status       string
	Chart        string
	ChartVersion string
	Manifest     string
	// Storage names where it was read, e.g. "Secret karpenter/sh.helm.release.v1.karpenter-crd.v3".
	Storage string
}

// HelmStorageName is the Secret or ConfigMap name of a revision.
func HelmStorageName(release string, revision int) string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, revision)
}

// helmReleaseJSON is the part of Helm's stored release the checks read.
type helmReleaseJSON struct {
	Name string `json:"name"`
	Info struct {
		Status string `json:"status"`
	} `json:"info"`
	Chart struct {
		Metadata struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"metadata"`
	} `json:"chart"`
	Manifest  string `json:"manifest"`
	Version   int    `json:"version"`
	Namespace string `json:"namespace"`
}

var gzipMagic = []byte{0x1f, 0x8b, 0x08}

// DecodeHelmRelease decodes the "release" value of a stored revision (the
// Secret's data as the API returns it, base64 already undone, or the
// ConfigMap's string): base64, then gzip (Helm also reads uncompressed
// JSON), then JSON.
func DecodeHelmRelease(stored []byte) (HelmRelease, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(stored)))
	if err != nil {
		return HelmRelease{}, fmt.Errorf("decoding a Helm release: not base64: %w", err)
	}
	if bytes.HasPrefix(raw, gzipMagic) {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return HelmRelease{}, fmt.Errorf("decoding a Helm release: %w", err)
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return HelmRelease{}, fmt.Errorf("decoding a Helm release: gzip: %w", err)
		}
	}
	var j helmReleaseJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return HelmRelease{}, fmt.Errorf("decoding a Helm release: JSON: %w", err)
	}
	return HelmRelease{Name: j.Name, Namespace: j.Namespace, Revision: j.Version, Status: j.Info.Status,
		Chart: j.Chart.Metadata.Name, ChartVersion: j.Chart.Metadata.Version, Manifest: j.Manifest}, nil
}

// EncodeHelmRelease is DecodeHelmRelease's inverse, as Helm writes it:
// the value to store under "release" (tests build Helm's storage with it).
func EncodeHelmRelease(r HelmRelease) ([]byte, error) {
	var j helmReleaseJSON
	j.Name, j.Namespace, j.Version, j.Manifest = r.Name, r.Namespace, r.Revision, r.Manifest
	j.Info.Status = r.Status
	j.Chart.Metadata.Name, j.Chart.Metadata.Version = r.Chart, r.ChartVersion
	b, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return []byte(base64.StdEncoding.EncodeToString(buf.Bytes())), nil
}

// ManifestObject is one object of a release's manifest.
type ManifestObject struct {
	Kind        string
	Name        string
	Namespace   string
	Annotations map[string]string
}

// Keep reports whether Helm keeps the object on uninstall, upgrade or
// rollback (Helm trims and lowercases the value).
func (o ManifestObject) Keep() bool {
	return strings.ToLower(strings.TrimSpace(o.Annotations[HelmPolicyAnn])) == HelmKeep
}

// documentSeparator splits a manifest as Helm does (releaseutil.SplitManifests).
var documentSeparator = regexp.MustCompile(`(?:^|\s*\n)---\s*`)

// ParseManifest reads the kind, name and annotations of each object of a
// rendered manifest.
func ParseManifest(manifest string) ([]ManifestObject, error) {
	var out []ManifestObject
	for i, doc := range documentSeparator.Split(manifest, -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name        string            `json:"name"`
				Namespace   string            `json:"namespace"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("document %d of the manifest: %w", i+1, err)
		}
		if head.Kind == "" {
			continue // only comments
		}
		out = append(out, ManifestObject{Kind: head.Kind, Name: head.Metadata.Name, Namespace: head.Metadata.Namespace, Annotations: head.Metadata.Annotations})
	}
	return out, nil
}

// LastRevisions keeps the last revision of each release (namespace/name):
// the one helm uninstall acts on, whatever its status.
func LastRevisions(all []HelmRelease) []HelmRelease {
	last := map[string]HelmRelease{}
	for _, r := range all {
		k := r.Namespace + "/" + r.Name
		if cur, ok := last[k]; !ok || r.Revision > cur.Revision {
			last[k] = r
		}
	}
	out := make([]HelmRelease, 0, len(last))
	for _, r := range last {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// HelmInput is what the keep-policy check reads.
type HelmInput struct {
	// CRDs are Karpenter's CRDs found on the cluster.
	CRDs []apiextensionsv1.CustomResourceDefinition
	// Releases are every stored revision found (Secrets and ConfigMaps
	// labelled owner=helm), decoded.
	Releases []HelmRelease
	// ReadError is why Helm's storage could not be read, or a revision
	// decoded (nil if all was read).
	ReadError error
	// Objects counts each CRD's objects (by CRD name), -1 when unknown.
	Objects map[string]int
}

// CheckHelmKeep says, for each of Karpenter's CRDs, whether helm uninstall
// of the release that owns it would delete it, judged from the manifest
// Helm stored, the only place Helm reads the keep policy from.
func CheckHelmKeep(in HelmInput) []Result {
	last := LastRevisions(in.Releases)
	parsed := map[string][]ManifestObject{}
	var parseErrs []string
	for _, r := range last {
		objs, err := ParseManifest(r.Manifest)
		if err != nil {
			parseErrs = append(parseErrs, fmt.Sprintf("%s: %v", r.Storage, err))
		}
		parsed[r.Namespace+"/"+r.Name] = objs
	}
	var out []Result
	for _, crd := range in.CRDs {
		out = append(out, helmKeepOf(crd, last, parsed, in))
	}
	if len(parseErrs) > 0 {
		out = append(out, Result{Check: NameHelmKeep, Status: Warn, Subject: "Helm releases",
			Detail: "some stored manifests could not be read: " + strings.Join(parseErrs, "; ")})
	}
	return out
}

func helmKeepOf(crd apiextensionsv1.CustomResourceDefinition, last []HelmRelease, parsed map[string][]ManifestObject, in HelmInput) Result {
	res := Result{Check: NameHelmKeep, Subject: "CRD " + crd.Name}
	liveKeep := strings.ToLower(strings.TrimSpace(crd.Annotations[HelmPolicyAnn])) == HelmKeep
	relName, relNS := crd.Annotations[HelmReleaseNameAnn], crd.Annotations[HelmReleaseNSAnn]

	// Every last revision whose manifest holds the CRD: helm uninstall of
	// any of them deletes it unless that manifest keeps it.
	type holder struct {
		rel  HelmRelease
		keep bool
	}
	var holders []holder
	for _, r := range last {
		for _, o := range parsed[r.Namespace+"/"+r.Name] {
			if o.Kind == "CustomResourceDefinition" && o.Name == crd.Name {
				holders = append(holders, holder{r, o.Keep()})
			}
		}
	}
	var unkept []holder
	for _, h := range holders {
		if !h.keep {
			unkept = append(unkept, h)
		}
	}
	switch {
	case len(unkept) > 0:
		h := unkept[0]
		res.Status = Fail
		res.Detail = fmt.Sprintf("`helm uninstall %s -n %s` deletes this CRD, and with it %s: revision %d (%s, chart %s %s, %s) has no %s: %s in its stored manifest.",
			h.rel.Name, h.rel.Namespace, objectsOf(crd, in.Objects), h.rel.Revision, h.rel.Status, h.rel.Chart, h.rel.ChartVersion, h.rel.Storage, HelmPolicyAnn, HelmKeep)
		if liveKeep {
			res.Detail += fmt.Sprintf("\nThe live CRD has the annotation (kubectl annotate), which does not protect it: Helm reads the policy only from the stored manifest.")
		}
		res.Detail += "\n" + deletionMeans(crd)
		res.Do = keepFix(h.rel)
		return res
	case len(holders) > 0:
		h := holders[0]
		res.Status = OK
		res.Detail = fmt.Sprintf("in Helm release %s/%s, whose last revision %d (chart %s %s) stores %s: %s: helm uninstall leaves it.",
			h.rel.Namespace, h.rel.Name, h.rel.Revision, h.rel.Chart, h.rel.ChartVersion, HelmPolicyAnn, HelmKeep)
		return res
	case relName != "" && in.ReadError != nil:
		res.Status = Fail
		res.Detail = fmt.Sprintf("owned by Helm release %s/%s, whose stored revisions could not be read (%v), so whether helm uninstall deletes it is unknown.\n%s",
			relNS, relName, in.ReadError, deletionMeans(crd))
		res.Do = []string{fmt.Sprintf("Run the check as someone who may list Secrets in namespace %s (Helm's storage), or read it yourself: helm get manifest %s -n %s, and look for %s: %s on the CRD.", relNS, relName, relNS, HelmPolicyAnn, HelmKeep)}
		return res
	case relName != "":
		res.Status = Warn
		res.Detail = fmt.Sprintf("its annotations name Helm release %s/%s, but no stored revision of it was found (Secrets of type %s or ConfigMaps labelled owner=helm in %s): helm uninstall of a release Helm does not know deletes nothing. If your Helm keeps releases elsewhere (HELM_DRIVER=sql), check `helm get manifest %s -n %s` for %s: %s on the CRD.",
			relNS, relName, HelmSecretType, relNS, relName, relNS, HelmPolicyAnn, HelmKeep)
		return res
	}
	res.Status = OK
	res.Detail = "in no Helm release's manifest (created from a chart's crds/ directory, as the karpenter chart ships them, or by hand): helm uninstall never deletes it."
	if tool := gitOpsOwner(crd); tool != "" {
		res.Status = Warn
		res.Detail = "in no Helm release's manifest, but " + tool + " manages it: pruning or deleting that application deletes the CRD and every object of its kind."
		res.Do = []string{"Turn pruning off for the CRDs before you change the application (Argo CD: the sync option Prune=false or the annotation argocd.argoproj.io/sync-options: Prune=false in the source; Flux: the annotation kustomize.toolkit.fluxcd.io/prune: disabled in the source)."}
	}
	return res
}

// gitOpsOwner names the GitOps tool whose marks the CRD carries.
func gitOpsOwner(crd apiextensionsv1.CustomResourceDefinition) string {
	if _, ok := crd.Annotations["argocd.argoproj.io/tracking-id"]; ok {
		return "Argo CD"
	}
	if _, ok := crd.Labels["kustomize.toolkit.fluxcd.io/name"]; ok {
		return "Flux"
	}
	if _, ok := crd.Labels["helm.toolkit.fluxcd.io/name"]; ok {
		return "Flux (through a HelmRelease)"
	}
	return ""
}

// objectsOf is "its 12 NodeClaims" or "every NodeClaim".
func objectsOf(crd apiextensionsv1.CustomResourceDefinition, counts map[string]int) string {
	kind := crd.Spec.Names.Kind
	if n, ok := counts[crd.Name]; ok && n > 0 {
		return "its " + plural(n, kind)
	}
	return "every " + kind
}

// deletionMeans says what deleting the CRD does to the fleet.
func deletionMeans(crd apiextensionsv1.CustomResourceDefinition) string {
	switch crd.Spec.Names.Kind {
	case "NodeClaim":
		return "Deleting NodeClaims is deleting nodes: whichever controller runs drains every node and terminates its instance; with neither running the deletion hangs on their finalizers until someone removes them, and then the instances are left without NodeClaims, which garbage collection terminates without draining."
	case "NodePool":
		return "Deleting the NodePools deletes their NodeClaims too (owner references): every node they launched is drained and terminated."
	case "EC2NodeClass":
		return "Deleting the EC2NodeClasses leaves the NodePools without a class: nothing can be launched, and their instance profiles are removed."
	}
	return "Deleting it deletes every object of its kind."
}

// keepFix is how to give a release's CRDs the keep policy the way Helm
// honours it.
func keepFix(r HelmRelease) []string {
	if r.Chart == "karpenter-crd" && versionAtLeast(r.ChartVersion, 1, 2, 0) {
		return []string{
			fmt.Sprintf("Store the keep policy in the release, through the chart's additionalAnnotations value (karpenter-crd 1.2.0 and later), at the version you run:\n"+
				"helm upgrade %s oci://public.ecr.aws/karpenter/karpenter-crd --version %s -n %s --reuse-values --set-string 'additionalAnnotations.helm\\.sh/resource-policy=keep'",
				r.Name, r.ChartVersion, r.Namespace),
			fmt.Sprintf("Check it: helm get manifest %s -n %s | grep resource-policy (one line per CRD), then run karpless migrate check again.", r.Name, r.Namespace),
			"Never remove the CRDs from the chart or the release instead: an upgrade without them deletes them, as an uninstall does.",
		}
	}
	if r.Chart == "karpenter-crd" {
		return []string{
			fmt.Sprintf("Chart %s %s has no additionalAnnotations value (added in 1.2.0), so the policy cannot be stored by an upgrade at this version. Do not run helm uninstall or helm rollback on release %s/%s at all: leaving the release in place is safe, it runs nothing.", r.Chart, r.ChartVersion, r.Namespace, r.Name),
			fmt.Sprintf("To store the policy, upgrade the release to karpenter-crd 1.2.0 or later once every CRD's storedVersions is [v1] (the stored-versions check), with --set-string 'additionalAnnotations.helm\\.sh/resource-policy=keep', then run karpless migrate check again."),
		}
	}
	return []string{
		fmt.Sprintf("Add the annotation %s: %s to the CRD in chart %s's template and helm upgrade release %s/%s, so that the stored manifest has it; then run karpless migrate check again.", HelmPolicyAnn, HelmKeep, r.Chart, r.Namespace, r.Name),
		"Until then never run helm uninstall or helm rollback on that release. Do not remove the CRD from the chart instead: an upgrade without it deletes it.",
	}
}

// versionAtLeast compares a semantic version (a leading v and any
// pre-release or build suffix ignored) with major.minor.patch.
func versionAtLeast(v string, major, minor, patch int) bool {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	want := []int{major, minor, patch}
	for i := range 3 {
		n := 0
		if i < len(parts) {
			var err error
			if n, err = strconv.Atoi(parts[i]); err != nil {
				return false
			}
		}
		if n != want[i] {
			return n > want[i]
		}
	}
	return true
}
