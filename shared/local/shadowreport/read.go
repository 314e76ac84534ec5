// Package shadowreport is `karpless shadow report`: what Karpless in
// shadow mode would have done beside what Karpenter did, and the $/h of
// each. It reads the decision records (shared/function/shadow: the
// functions' ConfigMap stores, the Events, log files) and the cluster's
// own history (NodeClaims and their creation and deletion times, pods and
// where they run, Karpenter's Events), prices both sides the way Karpless
// prices (shared/local/whatif, with the pricing book), and says what it
// cannot know. It only reads.
package shadowreport

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/function/shadow"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/whatif"
)

// Sources are what a report is built from.
type Sources struct {
	// File is the cluster now (whatif.Read): NodeClaims, nodes, pods,
	// NodePools and EC2NodeClasses, and the pricing book.
	File *whatif.File
	// Stored are the functions' ConfigMap stores (days of decisions).
	Stored []shadow.Entry
	// Recorded are decisions read from Events and log files.
	Recorded []shadow.Decision
	// Events are the cluster's Events about NodeClaims (Karpenter's
	// DisruptionTerminating and others): why and when a claim that is now
	// gone was deleted, for as long as Events live.
	Events []corev1.Event
	// Scheduled are where kube-scheduler bound pods (its Scheduled Events,
	// by namespace/name): where a pod deleted since ran, while they last.
	Scheduled map[string]string
	// Counts say where the decisions came from, for the report's header.
	FromStore, FromEvents, FromLogs int
	// LogLines is how many lines of the log files were not decisions.
	LogLines int
	Notes    []string
}

// Read takes the sources from a live cluster with c (read-only clients),
// namespace being Karpless's.
func Read(ctx context.Context, c *kube.Clients, namespace, source string) (*Sources, error) {
	file, err := whatif.Read(ctx, c, namespace, source)
	if err != nil {
		return nil, err
	}
	src := &Sources{File: file}
	stored, err := shadow.ReadStores(ctx, c.Core.CoreV1(), namespace)
	if err != nil {
		src.Notes = append(src.Notes, fmt.Sprintf("the decision stores (ConfigMaps %s in %s) cannot be read: %v; only Events and log files are used", shadow.StoreName("<function>"), namespace, err))
	}
	src.Stored, src.FromStore = stored, len(stored)
	evs, err := c.Core.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + shadow.EventReason})
	if err != nil {
		src.Notes = append(src.Notes, fmt.Sprintf("the decision Events cannot be read: %v", err))
	} else {
		for _, e := range evs.Items {
			var d shadow.Decision
			if json.Unmarshal([]byte(e.Annotations[shadow.DecisionAnnotation]), &d) == nil && d.Valid() {
				src.Recorded = append(src.Recorded, d)
				src.FromEvents++
			}
		}
	}
	claimEvents, err := c.Core.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=NodeClaim"})
	if err != nil {
		src.Notes = append(src.Notes, fmt.Sprintf("Karpenter's NodeClaim Events cannot be read (%v): why deleted claims went is unknown", err))
	} else {
		for _, e := range claimEvents.Items {
			if e.Reason != shadow.EventReason {
				src.Events = append(src.Events, e)
			}
		}
	}
	src.Scheduled = map[string]string{}
	scheduled, err := c.Core.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reason=Scheduled"})
	if err != nil {
		src.Notes = append(src.Notes, fmt.Sprintf("kube-scheduler's Events cannot be read (%v): where deleted pods ran is unknown", err))
	} else {
		for _, e := range scheduled.Items {
			if node := scheduledNode(e.Message); node != "" && e.InvolvedObject.Kind == "Pod" {
				src.Scheduled[e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name] = node
			}
		}
	}
	return src, nil
}

// scheduledNode reads the node of kube-scheduler's message "Successfully
// assigned ns/pod to node".
func scheduledNode(msg string) string {
	i := strings.LastIndex(msg, " to ")
	if !strings.HasPrefix(msg, "Successfully assigned ") || i < 0 {
		return ""
	}
	return strings.TrimSpace(msg[i+len(" to "):])
}

// AddLogs adds the decisions of a log file (shadow.ParseLogs).
func (s *Sources) AddLogs(ds []shadow.Decision, others int) {
	s.Recorded = append(s.Recorded, ds...)
	s.FromLogs += len(ds)
	s.LogLines += others
}

// Window is the time a report covers.
type Window struct {
	Since, Until time.Time
}

// Contains reports whether t is in the window.
func (w Window) Contains(t time.Time) bool { return !t.Before(w.Since) && !t.After(w.Until) }
