// Package nodeclass resolves an EC2NodeClass against AWS (subnets, security
// groups, AMIs, instance profile, placement group, capacity reservations) into the status and
// conditions the tick writes back.
package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/kube/eksauth"
)

// EC2API is the part of the EC2 client the resolver uses; *ec2.Client has it.
type EC2API interface {
	DescribeSubnets(ctx context.Context, params *ec2.DescribeSubnetsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeSecurityGroups(ctx context.Context, params *ec2.DescribeSecurityGroupsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	DescribeImages(ctx context.Context, params *ec2.DescribeImagesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
	DescribePlacementGroups(ctx context.Context, params *ec2.DescribePlacementGroupsInput, optFns ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error)
	DescribeCapacityReservations(ctx context.Context, params *ec2.DescribeCapacityReservationsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
}

// SSMAPI is the part of the SSM client the resolver uses.
type SSMAPI interface {
	GetParameter(ctx context.Context, params *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// IAMAPI is the part of the IAM client the resolver and the instance
// profile garbage collection use.
type IAMAPI interface {
	GetInstanceProfile(ctx context.Context, params *iam.GetInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error)
	CreateInstanceProfile(ctx context.Context, params *iam.CreateInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error)
	TagInstanceProfile(ctx context.Context, params *iam.TagInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.TagInstanceProfileOutput, error)
	AddRoleToInstanceProfile(ctx context.Context, params *iam.AddRoleToInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error)
	RemoveRoleFromInstanceProfile(ctx context.Context, params *iam.RemoveRoleFromInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error)
	ListInstanceProfiles(ctx context.Context, params *iam.ListInstanceProfilesInput, optFns ...func(*iam.Options)) (*iam.ListInstanceProfilesOutput, error)
	DeleteInstanceProfile(ctx context.Context, params *iam.DeleteInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error)
}

// Resolver computes EC2NodeClass status from AWS. It keeps no state between
// calls but what Selectors remembers: build one per call or per container,
// with the container's SelectorCache.
type Resolver struct {
	EC2 EC2API
	SSM SSMAPI
	IAM IAMAPI
	// Region is the cluster's region; it scopes instance profile names.
	Region string
	// Now is the clock for conditions and AMI deprecation; nil is time.Now.
	Now func() time.Time
	// Validate, when set, is one more check run once every dependency is
	// ready (the launch template package offers one that renders the user
	// data). A *ValidationError sets its reason; other errors are
	// reported as "ValidationFailed".
	Validate func(ctx context.Context, nc *awsv1.EC2NodeClass, status awsv1.EC2NodeClassStatus, cluster eksauth.ClusterInfo) error
	// Selectors is the warm container's memory of selector queries: a
	// resolution within timing.SelectorCacheTTL of another with the same
	// subnet, security group or AMI queries describes nothing again. Nil
	// remembers nothing (a cold start, or an engine made by hand).
	Selectors *SelectorCache
}

// ValidationError is a configuration problem a person must fix; Reason
// becomes the ValidationSucceeded condition's reason.
type ValidationError struct {
	Reason  string
	Message string
}

func (e *ValidationError) Error() string { return e.Message }

// Condition reasons written by Resolve.
const (
	ReasonReady                   = "Ready"
	ReasonSubnetsNotFound         = "SubnetsNotFound"
	ReasonSecurityGroupsNotFound  = "SecurityGroupsNotFound"
	ReasonAMINotFound             = "AMINotFound"
	ReasonUnsupportedAlias        = "UnsupportedAlias"
	ReasonKubernetesVersion       = "KubernetesVersionUnknown"
	ReasonInstanceProfileNotFound = "InstanceProfileNotFound"
	ReasonRoleNotFound            = "RoleNotFound"
	ReasonAccessDenied            = "AccessDenied"
	ReasonResolutionFailed        = "ResolutionFailed"
	ReasonDependenciesNotReady    = "DependenciesNotReady"
	ReasonTagValidationFailed     = "TagValidationFailed"
	ReasonValidationFailed        = "ValidationFailed"
	// ReasonUnhealthyDependents and ReasonReconcilingDependents are Ready's
	// reasons when a part is False, or none is False but some is Unknown
	// (operatorpkg's root condition, which Karpenter's Ready is).
	ReasonUnhealthyDependents   = "UnhealthyDependents"
	ReasonReconcilingDependents = "ReconcilingDependents"
)

// partConditions are the conditions Ready depends on, in message order.
var partConditions = []string{
	awsv1.ConditionTypeSubnetsReady,
	awsv1.ConditionTypeSecurityGroupsReady,
	awsv1.ConditionTypeAMIsReady,
	awsv1.ConditionTypeInstanceProfileReady,
	awsv1.ConditionTypeValidationSucceeded,
	awsv1.ConditionTypePlacementGroupReady,
	// Karpenter v1.14.1 adds it with its ReservedCapacity feature gate,
	// which is on by default; Karpless has no gate and always resolves.
	awsv1.ConditionTypeCapacityReservationsReady,
}

// outcome is the result of resolving one part of the status.
type outcome struct {
	ok bool
	// unknown sets the condition Unknown rather than False: what it
	// waits for has not been resolved yet (nor failed).
	unknown bool
	reason  string
	message string
	// keep means a transient failure: keep the previous value and condition.
	keep bool
	err  error
}

func ready() outcome { return outcome{ok: true, reason: ReasonReady} }

func notReady(reason, format string, args ...any) outcome {
	return outcome{reason: reason, message: fmt.Sprintf(format, args...)}
}

// failed classifies an AWS error: denied calls become a condition a person
// can act on (and are reported); anything else keeps the previous value.
func failed(what string, err error) outcome {
	if awserr.IsUnauthorized(err) {
		return outcome{reason: ReasonAccessDenied, message: fmt.Sprintf("%s: access denied, grant the Karpless role this call: %v", what, err), err: fmt.Errorf("%s: %w", what, err)}
	}
	return outcome{keep: true, err: fmt.Errorf("%s: %w", what, err)}
}

// Resolve computes the whole status of nc: the resolved subnets, security
// groups, AMIs, instance profile, placement group and capacity
// reservations, and the conditions SubnetsReady, SecurityGroupsReady,
// AMIsReady, InstanceProfileReady, ValidationSucceeded, PlacementGroupReady,
// CapacityReservationsReady and Ready (all of them true), each with ObservedGeneration = the class's
// generation and a message naming what to fix.
//
// The returned status is always fit to write back. A non-nil error reports
// transient failures (throttling, timeouts): the parts they hit keep their
// previous values and conditions from nc.Status. What the Describe calls
// of subnets, security groups and AMIs found may come from r.Selectors, as
// Karpenter's providers answer from their caches: at most
// timing.SelectorCacheTTL old; SSM parameters, the instance profile,
// placement groups and capacity reservations are read every time.
//
// Resolve is idempotent and safe to run twice at once: its only writes are
// the instance profile of spec.role (see EnsureInstanceProfile).
func (r *Resolver) Resolve(ctx context.Context, nc *awsv1.EC2NodeClass, cluster eksauth.ClusterInfo) (awsv1.EC2NodeClassStatus, error) {
	prev := nc.Status
	st := awsv1.EC2NodeClassStatus{
		Conditions: append([]metav1.Condition(nil), prev.Conditions...),
	}
	now := r.now()
	var errs []error
	set := func(condType string, o outcome, apply func()) {
		if o.err != nil {
			errs = append(errs, o.err)
		}
		if o.keep {
			return
		}
		apply()
		r.setCondition(&st, nc, condType, o, now)
	}

	subnets, o := r.subnets(ctx, nc)
	set(awsv1.ConditionTypeSubnetsReady, o, func() { st.Subnets = subnets })
	if o.keep {
		st.Subnets = prev.Subnets
	}

	groups, o := r.securityGroups(ctx, nc)
	set(awsv1.ConditionTypeSecurityGroupsReady, o, func() { st.SecurityGroups = groups })
	if o.keep {
		st.SecurityGroups = prev.SecurityGroups
	}

	amis, o := r.amis(ctx, nc, cluster, now)
	set(awsv1.ConditionTypeAMIsReady, o, func() { st.AMIs = amis })
	if o.keep {
		st.AMIs = prev.AMIs
	}

	profile, o := r.instanceProfile(ctx, nc, cluster.Name)
	set(awsv1.ConditionTypeInstanceProfileReady, o, func() { st.InstanceProfile = profile })
	if o.keep {
		st.InstanceProfile = prev.InstanceProfile
	}

	set(awsv1.ConditionTypeValidationSucceeded, r.validate(ctx, nc, st, cluster), func() {})

	pgs, o := r.placementGroups(ctx, nc)
	set(awsv1.ConditionTypePlacementGroupReady, o, func() { st.PlacementGroups = pgs })
	if o.keep {
		st.PlacementGroups = prev.PlacementGroups
	}

	crs, o := r.capacityReservations(ctx, nc, now)
	set(awsv1.ConditionTypeCapacityReservationsReady, o, func() { st.CapacityReservations = crs })
	if o.keep {
		st.CapacityReservations = prev.CapacityReservations
	}

	r.setCondition(&st, nc, awsv1.ConditionTypeReady, readiness(st.Conditions), now)
	sortConditions(st.Conditions)
	return st, errors.Join(errs...)
}

// readiness is Ready as Karpenter's (operatorpkg's root condition) sets
// it: true when every part is; else False (UnhealthyDependents) when a part
// is False, Unknown (ReconcilingDependents) when none is but some part is
// Unknown or unset; the message names the parts that are not true,
// "SubnetsReady=False, AMIsReady=Unknown", the latest transition first
// (each part's own condition says why).
func readiness(conds []metav1.Condition) outcome {
	type part struct {
		typ    string
		status metav1.ConditionStatus
		at     time.Time
	}
	var bad []part
	anyFalse := false
	for _, t := range partConditions {
		c := meta.FindStatusCondition(conds, t)
		switch {
		case c == nil:
			bad = append(bad, part{typ: t, status: metav1.ConditionUnknown})
		case c.Status != metav1.ConditionTrue:
			bad = append(bad, part{typ: t, status: c.Status, at: c.LastTransitionTime.Time})
			anyFalse = anyFalse || c.Status == metav1.ConditionFalse
		}
	}
	if len(bad) == 0 {
		return ready()
	}
	sort.SliceStable(bad, func(i, j int) bool { return bad[i].at.After(bad[j].at) })
	names := make([]string, len(bad))
	for i, b := range bad {
		names[i] = fmt.Sprintf("%s=%s", b.typ, b.status)
	}
	if anyFalse {
		return notReady(ReasonUnhealthyDependents, "%s", strings.Join(names, ", "))
	}
	o := notReady(ReasonReconcilingDependents, "%s", strings.Join(names, ", "))
	o.unknown = true
	return o
}

func (r *Resolver) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Resolver) setCondition(st *awsv1.EC2NodeClassStatus, nc *awsv1.EC2NodeClass, condType string, o outcome, now time.Time) {
	status, msg := metav1.ConditionFalse, o.message
	switch {
	case o.ok:
		status, msg = metav1.ConditionTrue, ""
	case o.unknown:
		status = metav1.ConditionUnknown
	}
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	c := metav1.Condition{Type: condType, Status: status, Reason: o.reason, Message: msg, ObservedGeneration: nc.Generation}
	if existing := meta.FindStatusCondition(st.Conditions, condType); existing == nil || existing.Status != status {
		c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

func sortConditions(cs []metav1.Condition) {
	order := map[string]int{}
	for i, t := range append(append([]string(nil), partConditions...), awsv1.ConditionTypeReady) {
		order[t] = i + 1
	}
	sort.SliceStable(cs, func(i, j int) bool {
		oi, oj := order[cs[i].Type], order[cs[j].Type]
		if oi == 0 {
			oi = len(order) + 1
		}
		if oj == 0 {
			oj = len(order) + 1
		}
		if oi != oj {
			return oi < oj
		}
		return cs[i].Type < cs[j].Type
	})
}

// subnets resolves subnetSelectorTerms; the result is sorted by free IP
// addresses (most first), then id, as Karpenter orders it, so the first
// subnet of each zone is the roomiest at the time of resolution (or of the
// cached answer, as Karpenter's).
func (r *Resolver) subnets(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.Subnet, outcome) {
	sets := SubnetFilterSets(nc.Spec.SubnetSelectorTerms)
	list, err := cached(r.Selectors, filterSetsKey("subnets", sets), r.now(), func() ([]foundSubnet, error) {
		byID := map[string]foundSubnet{}
		for _, filters := range sets {
			p := ec2.NewDescribeSubnetsPaginator(r.EC2, &ec2.DescribeSubnetsInput{Filters: filters, MaxResults: aws.Int32(500)})
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					return nil, err
				}
				for _, s := range page.Subnets {
					id := aws.ToString(s.SubnetId)
					byID[id] = foundSubnet{awsv1.Subnet{ID: id, Zone: aws.ToString(s.AvailabilityZone), ZoneID: aws.ToString(s.AvailabilityZoneId)}, aws.ToInt32(s.AvailableIpAddressCount)}
				}
			}
		}
		list := make([]foundSubnet, 0, len(byID))
		for _, f := range byID {
			list = append(list, f)
		}
		return list, nil
	})
	if err != nil {
		return nil, failed("describing subnets", err)
	}
	if len(list) == 0 {
		return nil, notReady(ReasonSubnetsNotFound, "no subnets match subnetSelectorTerms %s; tag the cluster's subnets or fix the terms", termsString(nc.Spec.SubnetSelectorTerms))
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].free != list[j].free {
			return list[i].free > list[j].free
		}
		return list[i].s.ID < list[j].s.ID
	})
	out := make([]awsv1.Subnet, len(list))
	for i := range list {
		out[i] = list[i].s
	}
	return out, ready()
}

// foundSubnet is a subnet a selector query found, with its free addresses
// then.
type foundSubnet struct {
	s    awsv1.Subnet
	free int32
}

// securityGroups resolves securityGroupSelectorTerms, sorted by id.
func (r *Resolver) securityGroups(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.SecurityGroup, outcome) {
	sets := SecurityGroupFilterSets(nc.Spec.SecurityGroupSelectorTerms)
	out, err := cached(r.Selectors, filterSetsKey("security-groups", sets), r.now(), func() ([]awsv1.SecurityGroup, error) {
		byID := map[string]awsv1.SecurityGroup{}
		for _, filters := range sets {
			p := ec2.NewDescribeSecurityGroupsPaginator(r.EC2, &ec2.DescribeSecurityGroupsInput{Filters: filters, MaxResults: aws.Int32(1000)})
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					return nil, err
				}
				for _, g := range page.SecurityGroups {
					id := aws.ToString(g.GroupId)
					byID[id] = awsv1.SecurityGroup{ID: id, Name: aws.ToString(g.GroupName)}
				}
			}
		}
		out := make([]awsv1.SecurityGroup, 0, len(byID))
		for _, g := range byID {
			out = append(out, g)
		}
		return out, nil
	})
	if err != nil {
		return nil, failed("describing security groups", err)
	}
	if len(out) == 0 {
		return nil, notReady(ReasonSecurityGroupsNotFound, "no security groups match securityGroupSelectorTerms %s; tag the node security group or fix the terms", termsString(nc.Spec.SecurityGroupSelectorTerms))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, ready()
}

// validate checks what can be checked without launching: dependencies,
// restricted tags, and the optional Validate hook.
func (r *Resolver) validate(ctx context.Context, nc *awsv1.EC2NodeClass, st awsv1.EC2NodeClassStatus, cluster eksauth.ClusterInfo) outcome {
	// As Karpenter: False when a dependency is False (validation would
	// fail whatever the rest), Unknown when none is but some has not been
	// resolved yet (a transient failure before the first resolution).
	var pending []string
	anyFalse := false
	for _, t := range partConditions[:4] {
		if c := meta.FindStatusCondition(st.Conditions, t); c == nil || c.Status != metav1.ConditionTrue {
			pending = append(pending, t)
			anyFalse = anyFalse || c != nil && c.Status == metav1.ConditionFalse
		}
	}
	if len(pending) > 0 {
		o := notReady(ReasonDependenciesNotReady, "waiting for %s", strings.Join(pending, ", "))
		o.unknown = !anyFalse
		return o
	}
	if bad := RestrictedTags(nc.Spec.Tags); len(bad) > 0 {
		return notReady(ReasonTagValidationFailed, "spec.tags may not set %s: Karpless sets these itself", strings.Join(bad, ", "))
	}
	if r.Validate != nil {
		if err := r.Validate(ctx, nc, st, cluster); err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) {
				return notReady(ve.Reason, "%s", ve.Message)
			}
			return notReady(ReasonValidationFailed, "%v", err)
		}
	}
	return ready()
}

// RestrictedTags returns the keys of tags that Karpenter reserves for
// itself (the CRD rejects them too; this catches objects written before).
func RestrictedTags(tags map[string]string) []string {
	var bad []string
	for k := range tags {
		switch {
		case k == "", strings.HasPrefix(k, "kubernetes.io/cluster/"), k == "karpenter.sh/nodepool",
			k == "karpenter.sh/nodeclaim", k == "karpenter.k8s.aws/ec2nodeclass", k == "eks:eks-cluster-name":
			bad = append(bad, fmt.Sprintf("%q", k))
		}
	}
	sort.Strings(bad)
	return bad
}
