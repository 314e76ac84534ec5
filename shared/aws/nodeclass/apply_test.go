package nodeclass

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// fakeClient stores one EC2NodeClass and enforces resourceVersion on updates.
type fakeClient struct {
	obj           *awsv1.EC2NodeClass
	statusWrites  int
	patches       int
	conflictFirst bool
}

func (f *fakeClient) bump() {
	rv, _ := strconv.Atoi(f.obj.ResourceVersion)
	f.obj.ResourceVersion = strconv.Itoa(rv + 1)
}

func (f *fakeClient) Get(_ context.Context, name string, _ metav1.GetOptions) (*awsv1.EC2NodeClass, error) {
	if f.obj == nil || f.obj.Name != name {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "ec2nodeclasses"}, name)
	}
	return f.obj.DeepCopy(), nil
}

func (f *fakeClient) UpdateStatus(_ context.Context, nc *awsv1.EC2NodeClass, _ metav1.UpdateOptions) (*awsv1.EC2NodeClass, error) {
	if f.conflictFirst {
		f.conflictFirst = false
		// Someone else wrote the same status meanwhile, a second earlier.
		f.obj.Status = *nc.Status.DeepCopy()
		for i := range f.obj.Status.Conditions {
			f.obj.Status.Conditions[i].LastTransitionTime = metav1.NewTime(testNow.Add(-time.Second))
		}
		f.bump()
	}
	if nc.ResourceVersion != f.obj.ResourceVersion {
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "ec2nodeclasses"}, nc.Name, nil)
	}
	f.statusWrites++
	f.obj.Status = *nc.Status.DeepCopy()
	f.bump()
	return f.obj.DeepCopy(), nil
}

func (f *fakeClient) Patch(_ context.Context, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions, sub ...string) (*awsv1.EC2NodeClass, error) {
	if pt != types.MergePatchType || len(sub) != 0 {
		panic("unexpected patch")
	}
	var p struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	if f.obj.Annotations == nil {
		f.obj.Annotations = map[string]string{}
	}
	for k, v := range p.Metadata.Annotations {
		f.obj.Annotations[k] = v
	}
	f.patches++
	f.bump()
	return f.obj.DeepCopy(), nil
}

func TestApply(t *testing.T) {
	ec2, ssm, iam := world()
	nc := defaultClass()
	nc.ResourceVersion = "1"
	c := &fakeClient{obj: nc.DeepCopy()}
	st, err := resolver(ec2, ssm, iam).Resolve(context.Background(), nc, cluster)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Apply(context.Background(), c, nc, st, cluster.CABundle, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if c.statusWrites != 1 || c.patches != 1 {
		t.Fatalf("writes %d patches %d", c.statusWrites, c.patches)
	}
	if !IsReady(out) || IsStale(out, testNow.Add(10*time.Second), 0) {
		t.Fatalf("applied class should be ready and fresh: %+v", out.Status.Conditions)
	}
	if out.Annotations[wellknown.EC2NodeClassHashAnnotation] != Hash(nc, cluster.CABundle) || out.Annotations[wellknown.EC2NodeClassHashVersionAnnotation] != HashVersion {
		t.Fatalf("annotations %v", out.Annotations)
	}
	// Unchanged status: only the timestamp moves.
	if _, err := Apply(context.Background(), c, out, st, cluster.CABundle, testNow.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if c.statusWrites != 1 || c.patches != 2 {
		t.Fatalf("unchanged: writes %d patches %d", c.statusWrites, c.patches)
	}
	// A stale copy conflicts; the retry re-reads and keeps the other
	// writer's transition times for conditions that did not change.
	stale := nc.DeepCopy()
	stale.ResourceVersion = "1"
	c2 := &fakeClient{obj: nc.DeepCopy(), conflictFirst: true}
	c2.obj.ResourceVersion = "1"
	out, err = Apply(context.Background(), c2, stale, st, cluster.CABundle, testNow)
	if err != nil {
		t.Fatal(err)
	}
	for _, cd := range out.Status.Conditions {
		if !cd.LastTransitionTime.Time.Equal(testNow.Add(-time.Second)) {
			t.Errorf("condition %s transition %v, want the other writer's", cd.Type, cd.LastTransitionTime)
		}
	}
}
