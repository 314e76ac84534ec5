package migrate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// KarpenterLabel selects Karpenter's Deployment (the chart's
// app.kubernetes.io/name), in any namespace.
const KarpenterLabel = "app.kubernetes.io/name=karpenter"

// Deployment is what the checks read of a Deployment of Karpenter.
type Deployment struct {
	Namespace, Name string
	// Replicas is spec.replicas; Ready is status.readyReplicas.
	Replicas, Ready int32
	// Env holds the controller container's plain environment values
	// (CLUSTER_NAME, INTERRUPTION_QUEUE, ...).
	Env map[string]string
	// HelmRelease names the release that owns it ("" if none).
	HelmRelease string
}

// Karpless is what the cluster says of Karpless itself.
type Karpless struct {
	// Installed: its bootstrap has run (its CRDs carry its label, or its
	// pause switch exists).
	Installed bool
	// Paused: its pause switch is on.
	Paused bool
}

// CheckKarpenter judges Karpenter's Deployments: running before the
// switch is expected (scale it to zero, do not uninstall it), running
// beside an active Karpless is two controllers acting on the same nodes.
func CheckKarpenter(deps []Deployment, k Karpless) []Result {
	if len(deps) == 0 {
		r := Result{Check: NameKarpenter, Subject: "Deployment " + KarpenterLabel}
		if k.Installed {
			r.Status, r.Detail = OK, "no Karpenter Deployment: Karpless is the only controller. A rollback needs Karpenter reinstalled with helm install."
		} else {
			r.Status, r.Detail = Warn, "no Deployment labelled "+KarpenterLabel+" in any namespace: Karpenter is not installed here, or was uninstalled. Nothing to scale down; a rollback would need a helm install."
		}
		return []Result{r}
	}
	var out []Result
	for _, d := range deps {
		r := Result{Check: NameKarpenter, Subject: fmt.Sprintf("Deployment %s/%s", d.Namespace, d.Name)}
		scale := fmt.Sprintf("kubectl scale deployment -n %s %s --replicas=0", d.Namespace, d.Name)
		keep := "Keep it at zero through chart upgrades and GitOps syncs: set the chart's value replicas: 0 (helm upgrade ... --reuse-values --set replicas=0), or a sync would scale it up again."
		if d.HelmRelease == "" {
			keep = "If a GitOps tool or a chart manages it, set replicas to 0 there too, or a sync scales it up again."
		}
		running := d.Replicas > 0 || d.Ready > 0
		switch {
		case running && k.Installed && !k.Paused:
			r.Status = Fail
			r.Detail = fmt.Sprintf("runs %d replica(s) (%d ready) while Karpless is installed and not paused: two controllers launch for the same pending pods and disrupt the same nodes.", d.Replicas, d.Ready)
			r.Do = []string{"Going forward: " + scale + ". " + keep,
				"Rolling back: karpless pause, disable the interruption function's event source mapping, then leave Karpenter running (docs/migration.md, Rolling back)."}
		case running && k.Installed:
			r.Status = OK
			r.Detail = fmt.Sprintf("runs %d replica(s) (%d ready) and Karpless is paused: rolled back to Karpenter. Make sure the Karpless interruption function's event source mapping is disabled too (docs/migration.md, Rolling back).", d.Replicas, d.Ready)
		case running:
			r.Status = Warn
			r.Detail = fmt.Sprintf("runs %d replica(s) (%d ready). Scale it to zero just before you deploy Karpless, and do not helm uninstall it until Karpless is verified: the Deployment at zero is the quickest rollback (scale it back up), and an uninstall of the wrong release can delete the CRDs (helm-keep).", d.Replicas, d.Ready)
			r.Do = []string{scale, keep}
		default:
			r.Status = OK
			r.Detail = fmt.Sprintf("scaled to zero. Keep it installed until Karpless is verified; roll back with kubectl scale deployment -n %s %s --replicas=<as before> after karpless pause.", d.Namespace, d.Name)
		}
		out = append(out, r)
	}
	return out
}

// Finalized is an object that may carry a termination finalizer.
type Finalized struct {
	// Kind is Node, NodeClaim or EC2NodeClass.
	Kind       string
	Name       string
	Finalizers []string
	// Deleting: its deletionTimestamp is set.
	Deleting bool
	// Karpenter: a Node launched by Karpenter (karpenter.sh/nodepool label).
	Karpenter bool
}

// FinalizerInput is what the finalizer check reads.
type FinalizerInput struct {
	Objects []Finalized
	// ListErrors are the kinds that could not be listed, with why.
	ListErrors map[string]error
}

// finalizerOf is the termination finalizer each kind carries.
var finalizerOf = map[string]string{
	"Node":         wellknown.TerminationFinalizer,
	"NodeClaim":    wellknown.TerminationFinalizer,
	"EC2NodeClass": wellknown.AWSTerminationFinalizer,
}

// neverRemove is the warning every finalizer result carries.
const neverRemove = "Never run the finalizer-removal script from Karpenter's troubleshooting page (kubectl patch ... remove /metadata/finalizers) while you switch: a Node without it is deleted without a drain and its instance keeps running; a NodeClaim without it goes without its instance being terminated, and garbage collection then terminates that instance without a drain."

// CheckFinalizers counts the termination finalizers: expected on every
// NodeClaim, EC2NodeClass and Karpenter-launched Node, and honoured by
// Karpless. Objects being deleted while no controller runs wait for one.
func CheckFinalizers(in FinalizerInput) []Result {
	var out []Result
	for _, kind := range []string{"NodeClaim", "EC2NodeClass", "Node"} {
		r := Result{Check: NameFinalizers, Subject: plurals(kind)}
		if err := in.ListErrors[kind]; err != nil {
			r.Status = Warn
			r.Detail = fmt.Sprintf("could not list them: %v", err)
			if strings.Contains(err.Error(), "conversion webhook") {
				r.Status = Fail
				r.Detail += "\nThe API server needs Karpenter's conversion webhook to read these objects: some are stored in an old version (stored-versions). Scale Karpenter back up and finish the storage version migration."
			}
			out = append(out, r)
			continue
		}
		fin := finalizerOf[kind]
		var with, without, deleting []string
		total := 0
		for _, o := range in.Objects {
			if o.Kind != kind || (kind == "Node" && !o.Karpenter) {
				continue
			}
			total++
			has := slices.Contains(o.Finalizers, fin)
			switch {
			case has && o.Deleting:
				deleting = append(deleting, o.Name)
				with = append(with, o.Name)
			case has:
				with = append(with, o.Name)
			default:
				without = append(without, o.Name)
			}
		}
		noun := kind
		if kind == "Node" {
			noun = "Karpenter Node"
		}
		r.Status = OK
		if total == 0 {
			r.Detail = "none"
			out = append(out, r)
			continue
		}
		r.Detail = fmt.Sprintf("%d of %s carry %s, as expected: Karpless honours it.", len(with), plural(total, noun), fin)
		if len(deleting) > 0 {
			r.Status = Warn
			r.Detail += fmt.Sprintf("\n%s being deleted wait for a controller to finish (%s): they finish once Karpless (or Karpenter) runs. Do not remove their finalizers.", plural(len(deleting), noun), names(deleting))
		}
		if len(without) > 0 && kind != "EC2NodeClass" {
			r.Status = Warn
			r.Detail += fmt.Sprintf("\n%s lack it (%s): someone removed it, so deleting them skips the drain and the instance's termination.", plural(len(without), noun), names(without))
		}
		r.Detail += "\n" + neverRemove
		out = append(out, r)
	}
	return out
}

// names lists at most five names, and how many more.
func names(n []string) string {
	if len(n) <= 5 {
		return strings.Join(n, ", ")
	}
	return strings.Join(n[:5], ", ") + fmt.Sprintf(" and %d more", len(n)-5)
}
