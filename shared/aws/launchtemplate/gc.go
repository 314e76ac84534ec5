package launchtemplate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube/eksauth"
)

func (p *Provider) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// DeleteUnused deletes the cluster's launch templates (tag
// eks:eks-cluster-name=<cluster>, name under NamePrefix) that are older than
// minAge and that inUse does not claim, and returns their names.
//
// Instances do not need their launch template once launched, so "in use"
// only has to cover launches that may still happen: templates created
// within minAge (a tick between Ensure and CreateFleet) and those inUse
// names. A CreateFleet that still loses the race gets
// InvalidLaunchTemplateName.NotFoundException; cloud.Launch then waits a
// moment, calls Ensure again (which recreates the template) and retries.
// Templates of an earlier Karpenter installation of the cluster carry the
// same tags and prefix and are collected too.
func (p *Provider) DeleteUnused(ctx context.Context, clusterName string, inUse func(name string) bool, minAge time.Duration) ([]string, error) {
	now := p.now()
	return p.deleteWhere(ctx, []ec2types.Filter{{Name: aws.String("tag:" + wellknown.EKSClusterNameTagKey), Values: []string{clusterName}}},
		func(lt ec2types.LaunchTemplate) bool {
			created := aws.ToTime(lt.CreateTime)
			return !created.IsZero() && now.Sub(created) >= minAge && !inUse(aws.ToString(lt.LaunchTemplateName))
		})
}

// DeleteForNodeClass deletes every launch template of one EC2NodeClass
// (for its finalizer).
func (p *Provider) DeleteForNodeClass(ctx context.Context, clusterName, nodeClassName string) ([]string, error) {
	return p.deleteWhere(ctx, []ec2types.Filter{
		{Name: aws.String("tag:" + wellknown.EKSClusterNameTagKey), Values: []string{clusterName}},
		{Name: aws.String("tag:" + wellknown.EC2NodeClassTagKey), Values: []string{nodeClassName}},
	}, func(ec2types.LaunchTemplate) bool { return true })
}

func (p *Provider) deleteWhere(ctx context.Context, filters []ec2types.Filter, del func(ec2types.LaunchTemplate) bool) ([]string, error) {
	var victims []ec2types.LaunchTemplate
	pages := ec2.NewDescribeLaunchTemplatesPaginator(p.EC2, &ec2.DescribeLaunchTemplatesInput{Filters: filters, MaxResults: aws.Int32(200)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing launch templates: %w", err)
		}
		for _, lt := range page.LaunchTemplates {
			if strings.HasPrefix(aws.ToString(lt.LaunchTemplateName), NamePrefix) && del(lt) {
				victims = append(victims, lt)
			}
		}
	}
	var deleted []string
	var errs []error
	for _, lt := range victims {
		name := aws.ToString(lt.LaunchTemplateName)
		_, err := p.EC2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplateId})
		if err != nil && !awserr.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting launch template %s: %w", name, err))
			continue
		}
		deleted = append(deleted, name)
	}
	return deleted, errors.Join(errs...)
}

// Validate renders the class's launch template for a typical instance
// type of each of its AMIs, as the EC2NodeClass resolver's Validate hook:
// user data that does not parse, is too large or lacks cluster facts makes
// ValidationSucceeded false with a reason a person can act on.
func Validate(_ context.Context, nc *awsv1.EC2NodeClass, status awsv1.EC2NodeClassStatus, cluster eksauth.ClusterInfo) error {
	probe := nc.DeepCopy()
	probe.Status = status
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{wellknown.NodePoolLabel: "validation"}}}
	var types []*scheduling.InstanceType
	for i, ami := range status.AMIs {
		labels := map[string]string{}
		for _, r := range ami.Requirements {
			if (r.Operator == corev1.NodeSelectorOpIn || r.Operator == corev1.NodeSelectorOpExists) && len(r.Values) > 0 {
				labels[r.Key] = r.Values[0]
			} else if r.Operator == corev1.NodeSelectorOpExists {
				labels[r.Key] = "1"
			}
		}
		types = append(types, &scheduling.InstanceType{
			Name: fmt.Sprintf("probe-%d", i), Labels: labels,
			Capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")},
		})
	}
	if _, err := Build(Request{NodeClass: probe, NodeClaim: claim, InstanceTypes: types, CapacityType: wellknown.CapacityTypeOnDemand, Cluster: cluster}); err != nil {
		reason := "UserDataInvalid"
		switch {
		case errors.Is(err, ErrUserDataTooLarge):
			reason = "UserDataSizeLimitExceeded"
		case errors.Is(err, ErrServiceCIDRUnknown):
			reason = "ClusterCIDRUnknown"
		}
		return &nodeclass.ValidationError{Reason: reason, Message: err.Error()}
	}
	return nil
}
