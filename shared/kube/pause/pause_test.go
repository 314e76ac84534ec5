package pause

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestSwitch(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	cms := cs.CoreV1()

	// Absent: not paused, no error.
	st, err := Read(ctx, cms, "ns")
	if err != nil || st.Paused || st.Exists {
		t.Fatalf("absent: %+v, %v", st, err)
	}

	// Ensure creates it not paused, once.
	labels := map[string]string{"app.kubernetes.io/managed-by": "karpless"}
	if created, err := Ensure(ctx, cms, "ns", labels); !created || err != nil {
		t.Fatalf("Ensure: %v %v", created, err)
	}
	if st, err := Read(ctx, cms, "ns"); err != nil || st.Paused || !st.Exists {
		t.Fatalf("after Ensure: %+v, %v", st, err)
	}

	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	before, err := Set(ctx, cms, "ns", Change{Paused: true, By: "alice", Reason: "incident 42", At: at}, labels)
	if err != nil || before.Paused {
		t.Fatalf("Set: before %+v, %v", before, err)
	}
	st, err = Read(ctx, cms, "ns")
	if err != nil || !st.Paused || st.ChangedBy != "alice" || st.Reason != "incident 42" || !st.ChangedAt.Equal(at) {
		t.Fatalf("after pause: %+v, %v", st, err)
	}
	if got := st.String(); got != "paused (by alice, at 2026-12-01T10:00:00Z, reason: incident 42)" {
		t.Errorf("String() = %q", got)
	}

	// Ensure leaves a paused switch alone.
	if created, err := Ensure(ctx, cms, "ns", labels); created || err != nil {
		t.Fatalf("Ensure again: %v %v", created, err)
	}
	if st, _ := Read(ctx, cms, "ns"); !st.Paused {
		t.Fatal("Ensure changed a paused switch")
	}

	before, err = Set(ctx, cms, "ns", Change{Paused: false, By: "bob"}, labels)
	if err != nil || !before.Paused || before.ChangedBy != "alice" {
		t.Fatalf("resume: before %+v, %v", before, err)
	}
	if st, _ := Read(ctx, cms, "ns"); st.Paused || st.ChangedBy != "bob" || st.Reason != "" {
		t.Fatalf("after resume: %+v", st)
	}

	// Set creates the ConfigMap when it is absent, with the labels.
	if _, err := Set(ctx, cms, "other", Change{Paused: true, By: "carol"}, labels); err != nil {
		t.Fatal(err)
	}
	cm, err := cms.ConfigMaps("other").Get(ctx, ConfigMapName, metav1.GetOptions{})
	if err != nil || cm.Labels["app.kubernetes.io/managed-by"] != "karpless" || cm.Data[KeyPaused] != "true" {
		t.Fatalf("created by Set: %+v, %v", cm, err)
	}
}

// A value that is not a boolean is an error: a tick that cannot tell
// must not act. Setting the switch mends it.
func TestMalformedSwitch(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: "ns"},
		Data:       map[string]string{KeyPaused: "yes please", "note": "kept"},
	})
	_, err := Read(ctx, cs.CoreV1(), "ns")
	if err == nil || !strings.Contains(err.Error(), `paused="yes please"`) {
		t.Fatalf("malformed: %v", err)
	}
	if _, err := Set(ctx, cs.CoreV1(), "ns", Change{Paused: false, By: "me"}, nil); err != nil {
		t.Fatal(err)
	}
	st, err := Read(ctx, cs.CoreV1(), "ns")
	if err != nil || st.Paused {
		t.Fatalf("after Set: %+v, %v", st, err)
	}
	cm, _ := cs.CoreV1().ConfigMaps("ns").Get(ctx, ConfigMapName, metav1.GetOptions{})
	if cm.Data["note"] != "kept" {
		t.Errorf("Set dropped another key: %v", cm.Data)
	}
}
