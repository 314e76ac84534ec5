package disrupt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube"
)

func commandOf(r *disruption.Record, action, why string) Command {
	return Command{
		ID: r.ID, Method: string(r.Method), Reason: string(r.Reason), Decision: r.Decision,
		Candidates: r.Candidates, Replacements: r.Replacements, Action: action, Why: why,
		PriceBefore: r.PriceBefore, PriceAfter: r.PriceAfter,
	}
}

// advance moves every live command one step. It reports when the next pass
// is due, whether the cluster changed (so a new decision should wait for a
// fresh snapshot), and whether a proposal is outstanding.
func (d *Disrupter) advance(ctx context.Context, in *disruption.Input, sess Session, inv *invocation, cmds []*disruption.Pending, sum *Summary) (next time.Time, changed, proposed bool, err error) {
	var errs []error
	now := d.Clock.Now()
	for _, p := range cmds {
		if !p.Live() {
			continue
		}
		rec := p.Record
		switch rec.Phase {
		case disruption.Proposed:
			if len(p.Unmarked) > 0 {
				// A tick died while proposing: start over.
				changed = true
				errs = append(errs, d.dropRecord(ctx, p))
				sum.Commands = append(sum.Commands, commandOf(rec, "rejected", "proposal was only partly written"))
				continue
			}
			if !rec.Due(now) {
				proposed = true
				next = earliest(next, rec.ProposedAt.Add(rec.Method.ValidationDelay()))
				continue
			}
			changed = true
			v := disruption.Revalidate(in, rec)
			cmd, why := v.Command, v.Why
			d.countFailedValidations(rec, v.Failed)
			if cmd == nil {
				d.reject(ctx, p, why, v.Reason, sum)
				errs = append(errs, d.dropRecord(ctx, p))
				if rec.Method == disruption.MultiNodeConsolidation {
					// Karpenter goes on to single-node consolidation when
					// a multi-node command fails its validation.
					inv.state.skipMulti, inv.state.changed = true, true
				}
				continue
			}
			// Candidates validation dropped (emptiness) leave the command.
			if names := cmd.CandidateNames(); len(names) < len(rec.Candidates) {
				for _, name := range rec.Candidates {
					if nc := p.Claims[name]; nc != nil && !slices.Contains(names, name) {
						errs = append(errs, d.patchAnnotations(ctx, nc, map[string]*string{disruption.CommandAnnotation: nil}))
					}
				}
			}
			if err := d.execute(ctx, in, rec, cmd, sess, sum); err != nil {
				errs = append(errs, err)
			}
			next = earliest(next, now.Add(d.PollInterval))
		case disruption.Executing:
			done, abandoned, err := d.progress(ctx, in, sess, p, sum)
			if err != nil {
				errs = append(errs, err)
			}
			if done || abandoned {
				changed = true
				continue
			}
			next = earliest(next, now.Add(d.PollInterval))
		}
	}
	return next, changed, proposed, errors.Join(errs...)
}

// execute starts a validated command. The candidates are tainted first,
// and their pods read again: a pod bound since the snapshot the command was
// validated on would be evicted unexamined, so the command then waits for a
// pass that validates it with that pod (the taints go again, the proposal
// stays). Only then is the record turned Executing, naming the replacements
// before they exist (creating them is idempotent, and a kill before they
// exist abandons the command), and the replacements created and launched.
// A kill after the taints and before the record leaves a proposal whose
// taints the next pass removes before validating it again.
func (d *Disrupter) execute(ctx context.Context, in *disruption.Input, rec *disruption.Record, cmd *disruption.Command, sess Session, sum *Summary) error {
	// The command starts when the budgets are checked on a fresh read:
	// every node deleting before then was counted.
	now := d.Clock.Now().UTC().Truncate(time.Second)
	if why, err := d.budgetsStillAllow(ctx, in, rec, cmd); err != nil || why != "" {
		if err != nil {
			why = err.Error()
		}
		sum.Commands = append(sum.Commands, commandOf(rec, "deferred", why))
		d.Log.Info("disruption deferred: the budgets changed since the snapshot", "id", rec.ID, "why", why)
		return err
	}
	if landed, err := d.taintCandidates(ctx, cmd); err != nil || landed != "" {
		why := landed
		if err != nil {
			why = err.Error()
		}
		if uerr := d.untaintCandidates(ctx, cmd); uerr != nil {
			err = errors.Join(err, uerr)
		}
		sum.Commands = append(sum.Commands, commandOf(rec, "deferred", why))
		d.Log.Info("disruption deferred: the candidates changed since validation", "id", rec.ID, "why", why)
		return err
	}
	rec.Phase = disruption.Executing
	rec.StartedAt = &now
	rec.Decision = cmd.Decision()
	rec.Candidates = cmd.CandidateNames()
	rec.PriceBefore, rec.PriceAfter = cmd.PriceBefore, cmd.PriceAfter
	rec.Replacements = nil
	for i, r := range cmd.Replacements {
		rec.Replacements = append(rec.Replacements, disruption.ReplacementName(r.NodePool, rec.ID, i))
	}
	for _, cn := range cmd.Candidates {
		if err := d.writeRecord(ctx, cn.NodeClaim, rec); err != nil {
			return fmt.Errorf("recording command %s: %w", rec.ID, err)
		}
	}
	reason := strings.ToLower(string(rec.Reason))
	d.Metrics.Count("karpenter_voluntary_disruption_decisions_total", 1, map[string]string{
		"decision": rec.Decision, "reason": reason, "consolidation_type": rec.Method.ConsolidationType(),
	})
	sum.Commands = append(sum.Commands, commandOf(rec, "executed", cmd.Why))
	d.Log.Info("disrupting", "command", cmd.String(), "id", rec.ID, "replacements", rec.Replacements, "why", cmd.Why)
	var errs []error
	for _, cn := range cmd.Candidates {
		if err := d.setDisruptionReason(ctx, cn.NodeClaim, rec.Reason); err != nil {
			errs = append(errs, err)
		}
	}
	if len(cmd.Replacements) > 0 {
		reqs := make([]planning.NewClaim, len(cmd.Replacements))
		for i, r := range cmd.Replacements {
			reqs[i] = planning.NewClaim{Claim: r, Name: rec.Replacements[i], Reason: reason,
				Annotations: map[string]string{disruption.ReplacementAnnotation: rec.ID}}
		}
		created, err := sess.CreateAndLaunch(ctx, reqs)
		if err != nil {
			// The claims that exist launch on a later pass; a missing one
			// abandons the command there.
			errs = append(errs, fmt.Errorf("launching replacements of %s: %w", rec.ID, err))
		}
		for _, c := range created {
			if c != nil {
				d.Events.Normal(record.ObjectOf(nodeClaimGVK, c), "DisruptionLaunching", "Launching NodeClaim: %s", rec.Reason)
			}
		}
	}
	if len(cmd.Replacements) == 0 && len(errs) == 0 {
		errs = append(errs, d.deleteCandidates(ctx, rec, candidateClaims(cmd)))
	}
	return errors.Join(errs...)
}

// budgetsStillAllow re-reads NodePools, NodeClaims and Nodes and checks
// the candidates' budgets on them: the pass's snapshot may be seconds old;
// a NodePool's budgets may have been lowered since (Karpenter reads them
// afresh when it validates), and an interruption may have started deleting
// a node of the same pool.
func (d *Disrupter) budgetsStillAllow(ctx context.Context, in *disruption.Input, rec *disruption.Record, cmd *disruption.Command) (string, error) {
	pools, err := kube.AllNodePools(ctx, d.Kube)
	if err != nil {
		return "", err
	}
	claims, err := kube.AllNodeClaims(ctx, d.Kube)
	if err != nil {
		return "", err
	}
	nodes, err := kube.AllNodes(ctx, d.Kube)
	if err != nil {
		return "", err
	}
	snap := *in.Cluster
	snap.NodePools, snap.NodeClaims, snap.Nodes = pools, claims, nodes
	fresh := *in
	fresh.Cluster, fresh.Now = &snap, d.Clock.Now()
	return disruption.BudgetsAllow(&fresh, rec, cmd.CandidateNames()), nil
}

// taintCandidates taints every candidate's node and then reads what runs
// there. It returns why the command must wait ("" when it may go on): a
// reschedulable pod the validation did not see.
func (d *Disrupter) taintCandidates(ctx context.Context, cmd *disruption.Command) (string, error) {
	for _, cn := range cmd.Candidates {
		if err := d.taint(ctx, cn.Node.Name); err != nil {
			return "", err
		}
	}
	for _, cn := range cmd.Candidates {
		seen := map[types.UID]bool{}
		for _, p := range cn.Pods {
			seen[p.UID] = true
		}
		l, err := d.Kube.Core.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + cn.Node.Name})
		if err != nil {
			return "", fmt.Errorf("listing pods of node %s: %w", cn.Node.Name, err)
		}
		for i := range l.Items {
			p := &l.Items[i]
			if !seen[p.UID] && podutil.IsReschedulable(p) {
				return fmt.Sprintf("pod %s/%s landed on %s after validation", p.Namespace, p.Name, cn.Node.Name), nil
			}
		}
	}
	return "", nil
}

// untaintCandidates takes the taints off again (a command that waits).
func (d *Disrupter) untaintCandidates(ctx context.Context, cmd *disruption.Command) error {
	var errs []error
	for _, cn := range cmd.Candidates {
		errs = append(errs, d.untaint(ctx, cn.Node))
	}
	return errors.Join(errs...)
}

func candidateClaims(cmd *disruption.Command) []*karpv1.NodeClaim {
	out := make([]*karpv1.NodeClaim, len(cmd.Candidates))
	for i, cn := range cmd.Candidates {
		out[i] = cn.NodeClaim
	}
	return out
}

// progress moves an executing command: repair what a dead tick left half
// written, then wait for the replacements, delete the candidates once all
// are initialized, or abandon.
func (d *Disrupter) progress(ctx context.Context, in *disruption.Input, sess Session, p *disruption.Pending, sum *Summary) (done, abandoned bool, err error) {
	rec := p.Record
	claims := map[string]*karpv1.NodeClaim{}
	for _, nc := range in.Cluster.NodeClaims {
		claims[nc.Name] = nc
	}
	var waiting []*karpv1.NodeClaim
	for _, name := range rec.Replacements {
		r := claims[name]
		if r == nil || r.DeletionTimestamp != nil || r.Annotations[disruption.ReplacementAnnotation] != rec.ID {
			return false, true, d.abandon(ctx, in, p, fmt.Sprintf("replacement %s is gone", name), sum)
		}
		if !r.IsTrue(karpv1.ConditionTypeInitialized) {
			waiting = append(waiting, r)
		}
	}
	var errs []error
	// Repair: every candidate still here carries the record, its node the
	// taint, its claim the condition.
	var present []*karpv1.NodeClaim
	for _, name := range rec.Candidates {
		nc := p.Claims[name]
		if nc == nil || nc.DeletionTimestamp != nil {
			continue
		}
		present = append(present, nc)
		if slices.Contains(p.Unmarked, name) {
			errs = append(errs, d.writeRecord(ctx, nc, rec))
		}
		if nc.Status.NodeName != "" {
			if n := nodeNamed(in, nc.Status.NodeName); n != nil && !wellknown.IsDisrupted(n) {
				// Commands taint before they execute: a candidate without
				// the taint had it removed, and what runs there now was
				// never validated.
				return false, true, errors.Join(append(errs, d.abandon(ctx, in, p, fmt.Sprintf("candidate %s lost its disrupted taint", name), sum))...)
			}
		}
		if !nc.IsTrue(karpv1.ConditionTypeDisruptionReason) {
			errs = append(errs, d.setDisruptionReason(ctx, nc, rec.Reason))
		}
	}
	if len(waiting) > 0 {
		if rec.StartedAt != nil && d.Clock.Since(*rec.StartedAt) > d.ReplacementTimeout {
			return false, true, errors.Join(append(errs, d.abandon(ctx, in, p, fmt.Sprintf("replacements not initialized after %s", d.ReplacementTimeout), sum))...)
		}
		if _, err := sess.Advance(ctx, waiting, in.Cluster.Nodes); err != nil {
			errs = append(errs, fmt.Errorf("advancing replacements of %s: %w", rec.ID, err))
		}
		for _, r := range waiting {
			d.Events.Normal(record.ObjectOf(nodeClaimGVK, r), "DisruptionWaitingReadiness", "Waiting on readiness to continue disruption")
		}
		sum.Commands = append(sum.Commands, commandOf(rec, "waiting", fmt.Sprintf("%d of %d replacements not initialized", len(waiting), len(rec.Replacements))))
		return false, false, errors.Join(errs...)
	}
	if err := errors.Join(errs...); err != nil {
		return false, false, err
	}
	if err := d.deleteCandidates(ctx, rec, present); err != nil {
		return false, false, err
	}
	sum.Commands = append(sum.Commands, commandOf(rec, "finished", ""))
	return true, false, nil
}

// deleteCandidates deletes the candidates; shared/ticks/termination drains them.
func (d *Disrupter) deleteCandidates(ctx context.Context, rec *disruption.Record, claims []*karpv1.NodeClaim) error {
	var errs []error
	for _, nc := range claims {
		if nc.DeletionTimestamp != nil {
			continue
		}
		if err := d.Kube.DeleteNodeClaim(ctx, nc); err != nil {
			errs = append(errs, err)
			continue
		}
		d.Events.Normal(record.ObjectOf(nodeClaimGVK, nc), "DisruptionTerminating", "Disrupting NodeClaim: %s", rec.Reason)
		if nc.Status.NodeName != "" {
			d.Events.Normal(record.Object{Kind: nodeGVK.Kind, APIVersion: "v1", Name: nc.Status.NodeName}, "DisruptionTerminating", "Disrupting Node: %s", rec.Reason)
		}
		d.Metrics.Count("karpenter_nodeclaims_disrupted_total", 1, map[string]string{
			"reason": strings.ToLower(string(rec.Reason)), "nodepool": nc.Labels[wellknown.NodePoolLabel], "capacity_type": nc.Labels[wellknown.CapacityTypeLabel],
		})
	}
	if len(errs) == 0 {
		d.Log.Info("disruption command done; candidates deleted", "id", rec.ID, "candidates", rec.Candidates,
			"price_before", rec.PriceBefore, "price_after", rec.PriceAfter)
	}
	return errors.Join(errs...)
}

// abandon gives a command up: replacements that never initialized are
// deleted (initialized ones are ordinary capacity now), the candidates are
// untainted and unmarked, and the record goes last, so a kill halfway
// leaves a command the next pass abandons again.
func (d *Disrupter) abandon(ctx context.Context, in *disruption.Input, p *disruption.Pending, why string, sum *Summary) error {
	rec := p.Record
	var errs []error
	for _, nc := range in.Cluster.NodeClaims {
		if nc.Annotations[disruption.ReplacementAnnotation] == rec.ID && nc.DeletionTimestamp == nil && !nc.IsTrue(karpv1.ConditionTypeInitialized) {
			errs = append(errs, d.Kube.DeleteNodeClaim(ctx, nc))
		}
	}
	for _, name := range rec.Candidates {
		nc := p.Claims[name]
		if nc == nil || nc.DeletionTimestamp != nil {
			continue
		}
		if nc.Status.NodeName != "" {
			if n := nodeNamed(in, nc.Status.NodeName); n != nil && wellknown.IsDisrupted(n) {
				errs = append(errs, d.untaint(ctx, n))
			}
		}
		errs = append(errs, d.clearDisruptionReason(ctx, nc))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := d.dropRecord(ctx, p); err != nil {
		return err
	}
	d.Metrics.Count("karpenter_voluntary_disruption_queue_failures_total", 1, map[string]string{
		"decision": rec.Decision, "reason": strings.ToLower(string(rec.Reason)), "consolidation_type": rec.Method.ConsolidationType(),
	})
	sum.Commands = append(sum.Commands, commandOf(rec, "abandoned", why))
	d.Log.Warn("abandoned disruption command", "id", rec.ID, "candidates", rec.Candidates, "why", why)
	return nil
}

// countFailedValidations counts a validation's failed candidates, as
// Karpenter's failed_validations_total does (Validation.Failed).
func (d *Disrupter) countFailedValidations(rec *disruption.Record, failed int) {
	if failed > 0 {
		d.Metrics.Count("karpenter_voluntary_disruption_failed_validations_total", float64(failed), map[string]string{"consolidation_type": rec.Method.ConsolidationType()})
	}
}

// reject records a proposal that failed validation; reason is Karpenter's
// category of the failure (Validation.Reason), which its
// ConsolidationRejected Events carry.
func (d *Disrupter) reject(ctx context.Context, p *disruption.Pending, why, reason string, sum *Summary) {
	rec := p.Record
	if rec.Method != disruption.Emptiness && rec.Method != disruption.Drift {
		nodeName := func(name string) string {
			if nc := p.Claims[name]; nc != nil && nc.Status.NodeName != "" {
				return nc.Status.NodeName
			}
			return name
		}
		sources := make([]string, len(rec.Candidates))
		for i, name := range rec.Candidates {
			sources[i] = nodeName(name)
		}
		replacements := 0
		if rec.Decision == "replace" {
			replacements = 1 // a consolidation launches one node at most
		}
		for _, name := range rec.Candidates {
			nc := p.Claims[name]
			if nc == nil {
				continue
			}
			msg := disruption.RejectedMessage(disruption.EventCommand(rec.Decision, replacements, sources, nodeName(name)), reason, rec.PriceBefore-rec.PriceAfter)
			if nc.Status.NodeName != "" {
				d.Events.Normal(record.Object{Kind: nodeGVK.Kind, APIVersion: "v1", Name: nc.Status.NodeName}, "ConsolidationRejected", "%s", msg)
			}
			d.Events.Normal(record.ObjectOf(nodeClaimGVK, nc), "ConsolidationRejected", "%s", msg)
		}
	}
	sum.Commands = append(sum.Commands, commandOf(rec, "rejected", why))
	d.Log.Info("disruption proposal no longer valid", "id", rec.ID, "method", rec.Method, "candidates", rec.Candidates, "why", why)
}

// dropRecord removes the record from every candidate that still has it.
func (d *Disrupter) dropRecord(ctx context.Context, p *disruption.Pending) error {
	var errs []error
	for _, name := range p.Record.Candidates {
		nc := p.Claims[name]
		if nc == nil {
			continue
		}
		if _, ok := nc.Annotations[disruption.CommandAnnotation]; !ok {
			continue
		}
		errs = append(errs, d.patchAnnotations(ctx, nc, map[string]*string{disruption.CommandAnnotation: nil}))
	}
	return errors.Join(errs...)
}

func (d *Disrupter) writeRecord(ctx context.Context, nc *karpv1.NodeClaim, rec *disruption.Record) error {
	return d.patchAnnotations(ctx, nc, map[string]*string{disruption.CommandAnnotation: new(rec.Encode())})
}
