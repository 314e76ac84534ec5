// Package pause is Karpless's pause switch: a ConfigMap in Karpless's
// namespace that every tick reads before it acts. It lives in the cluster,
// not in the stack, so a deploy never changes it (except `cdk deploy -c
// paused=true`, through the bootstrap); `karpless pause` and `karpless
// resume` set it.
package pause

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
)

// ConfigMapName is the switch's ConfigMap. The bootstrap creates it (not
// paused) and the controllers may only get it, by this name.
const ConfigMapName = "karpless-pause"

// Keys of the ConfigMap's data. Only KeyPaused is read by the ticks; the
// others say who changed it, when and why, for people.
const (
	KeyPaused    = "paused"
	KeyChangedAt = "changedAt"
	KeyChangedBy = "changedBy"
	KeyReason    = "reason"
)

// State is the switch as read.
type State struct {
	Paused bool
	// Exists is false when the ConfigMap is absent (not paused).
	Exists    bool
	ChangedAt time.Time
	ChangedBy string
	Reason    string
}

// String is a one-line description for logs and the CLI.
func (s State) String() string {
	what := "running"
	if s.Paused {
		what = "paused"
	}
	var more []string
	if s.ChangedBy != "" {
		more = append(more, "by "+s.ChangedBy)
	}
	if !s.ChangedAt.IsZero() {
		more = append(more, "at "+s.ChangedAt.UTC().Format(time.RFC3339))
	}
	if s.Reason != "" {
		more = append(more, "reason: "+s.Reason)
	}
	if len(more) > 0 {
		what += " (" + strings.Join(more, ", ") + ")"
	}
	return what
}

// Read returns the switch in namespace ns. A missing ConfigMap is not
// paused (a cluster bootstrapped before the switch existed); any other
// failure, and a value that is not a boolean, is an error: a tick that
// cannot tell whether it is paused must not act.
func Read(ctx context.Context, cms corev1client.ConfigMapsGetter, ns string) (State, error) {
	cm, err := cms.ConfigMaps(ns).Get(ctx, ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return State{}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("reading the pause switch (ConfigMap %s/%s): %w", ns, ConfigMapName, err)
	}
	return parse(cm)
}

func parse(cm *corev1.ConfigMap) (State, error) {
	st := State{Exists: true, ChangedBy: cm.Data[KeyChangedBy], Reason: cm.Data[KeyReason]}
	if t, err := time.Parse(time.RFC3339, cm.Data[KeyChangedAt]); err == nil {
		st.ChangedAt = t
	}
	v := strings.TrimSpace(cm.Data[KeyPaused])
	if v == "" {
		return st, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return st, fmt.Errorf("the pause switch (ConfigMap %s/%s) has %s=%q, which is not true or false", cm.Namespace, cm.Name, KeyPaused, v)
	}
	st.Paused = b
	return st, nil
}

// Change is what Set writes.
type Change struct {
	Paused bool
	// By names who changed it (a user, "cdk deploy"); At defaults to now.
	By     string
	Reason string
	At     time.Time
}

// Set writes the switch in namespace ns, creating the ConfigMap with
// labels when it is absent, and returns the state it replaced. Other keys
// of the ConfigMap are kept.
func Set(ctx context.Context, cms corev1client.ConfigMapsGetter, ns string, c Change, labels map[string]string) (State, error) {
	if c.At.IsZero() {
		c.At = time.Now()
	}
	data := map[string]string{
		KeyPaused:    strconv.FormatBool(c.Paused),
		KeyChangedAt: c.At.UTC().Format(time.RFC3339),
		KeyChangedBy: c.By,
		KeyReason:    c.Reason,
	}
	api := cms.ConfigMaps(ns)
	var before State
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := api.Get(ctx, ConfigMapName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			before = State{}
			_, err = api.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: ns, Labels: labels},
				Data:       data,
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				// Created meanwhile (the bootstrap): read it again.
				return apierrors.NewConflict(corev1.Resource("configmaps"), ConfigMapName, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		// A malformed value is replaced: that is what setting it is for.
		before, _ = parse(cm)
		next := cm.DeepCopy()
		if next.Data == nil {
			next.Data = map[string]string{}
		}
		maps.Copy(next.Data, data)
		_, err = api.Update(ctx, next, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return before, fmt.Errorf("setting the pause switch (ConfigMap %s/%s): %w", ns, ConfigMapName, err)
	}
	return before, nil
}

// Ensure creates the switch's ConfigMap, not paused, when it is absent,
// and leaves an existing one as it is. It reports whether it created it.
func Ensure(ctx context.Context, cms corev1client.ConfigMapsGetter, ns string, labels map[string]string) (bool, error) {
	_, err := cms.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: ns, Labels: labels},
		Data:       map[string]string{KeyPaused: "false"},
	}, metav1.CreateOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsAlreadyExists(err):
		return false, nil
	}
	return false, err
}
