package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Instance profiles made for spec.role live under
// /karpenter/<region>/<cluster>/<nodeclass-uid>/, as Karpenter's do, so
// garbage collection can list them by path.

// FormatPath is the IAM path of segments: /a/b/c/ ("/" for none), as
// Karpenter's instanceprofile.FormatPath writes it.
func FormatPath(segments ...string) string {
	if len(segments) == 0 {
		return "/"
	}
	return "/" + strings.Join(segments, "/") + "/"
}

// InstanceProfilePathPrefix is the IAM path of every managed profile of a cluster.
func InstanceProfilePathPrefix(region, cluster string) string {
	return FormatPath("karpenter", region, cluster)
}

// InstanceProfilePath is the IAM path of the profiles of one EC2NodeClass.
func InstanceProfilePath(region, cluster, nodeClassUID string) string {
	return FormatPath("karpenter", region, cluster, nodeClassUID)
}

// InstanceProfileName is the profile spec.role resolves to:
// <cluster>_<decimal FNV-1a-64 of region, class UID and role>.
//
// Karpenter draws a random name each time the role changes; Karpless
// derives it instead, so a Lambda killed between CreateInstanceProfile and
// the status write finds and finishes the same profile next time, and two
// Lambdas racing create one profile, not two. The role is part of the name
// for the reason Karpenter makes a new profile on a role change: swapping
// the role inside a profile would change the credentials, and so the
// cluster identity, of nodes already running with it.
func InstanceProfileName(cluster, region, nodeClassUID, role string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(region + "\x00" + nodeClassUID + "\x00" + role))
	return cluster + "_" + strconv.FormatUint(h.Sum64(), 10)
}

// InstanceProfileTags are the tags of a managed profile: spec.tags plus
// kubernetes.io/cluster/<cluster>=owned, eks:eks-cluster-name,
// karpenter.k8s.aws/ec2nodeclass and topology.kubernetes.io/region (these win).
func InstanceProfileTags(nc *awsv1.EC2NodeClass, cluster, region string) map[string]string {
	tags := make(map[string]string, len(nc.Spec.Tags)+4)
	for k, v := range nc.Spec.Tags {
		tags[k] = v
	}
	tags[wellknown.ClusterTagKey(cluster)] = wellknown.OwnedTagValue
	tags[wellknown.EKSClusterNameTagKey] = cluster
	tags[wellknown.EC2NodeClassTagKey] = nc.Name
	tags[wellknown.RegionLabel] = region
	return tags
}

// ErrRoleNotFound means spec.role names no IAM role.
var ErrRoleNotFound = errors.New("role not found")

// EnsureInstanceProfile makes the profile of spec.role exist, carry the
// managed tags and hold exactly that role, and returns its name.
//
// Every step is checked before it is taken (get, create if missing, tag
// what is missing, remove a foreign role, add the role if missing), so a
// run killed after any call is finished by the next run, and a concurrent
// run's "already exists" or "limit exceeded" is read as its success.
func (r *Resolver) EnsureInstanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass, cluster string) (string, error) {
	if r.IAM == nil {
		return "", errors.New("no IAM client configured")
	}
	role := nc.Spec.Role
	if role == "" {
		return "", errors.New("spec.role is empty")
	}
	roleName := role[strings.LastIndexByte(role, '/')+1:] // AddRoleToInstanceProfile takes a bare name
	name := InstanceProfileName(cluster, r.Region, string(nc.UID), role)
	want := InstanceProfileTags(nc, cluster, r.Region)

	profile, err := r.getProfile(ctx, name)
	if err != nil && !awserr.IsNotFound(err) {
		return "", fmt.Errorf("getting instance profile %s: %w", name, err)
	}
	created := false
	if profile == nil {
		out, err := r.IAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{
			InstanceProfileName: aws.String(name),
			Path:                aws.String(InstanceProfilePath(r.Region, cluster, string(nc.UID))),
			Tags:                iamTags(want),
		})
		switch {
		case err == nil:
			profile, created = out.InstanceProfile, true
		case awserr.IsAlreadyExists(err):
			if profile, err = r.getProfile(ctx, name); err != nil {
				return "", fmt.Errorf("getting instance profile %s after a concurrent create: %w", name, err)
			}
		default:
			return "", fmt.Errorf("creating instance profile %s: %w", name, err)
		}
	}
	if !created {
		if missing := missingTags(want, profile.Tags); len(missing) > 0 {
			if _, err := r.IAM.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: iamTags(missing)}); err != nil {
				return "", fmt.Errorf("tagging instance profile %s: %w", name, err)
			}
		}
	}
	has := false
	for _, ro := range profile.Roles {
		n := aws.ToString(ro.RoleName)
		if n == roleName {
			has = true
			continue
		}
		if _, err := r.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(n)}); err != nil && !awserr.IsNotFound(err) {
			return "", fmt.Errorf("removing role %s from instance profile %s: %w", n, name, err)
		}
	}
	if !has {
		_, err := r.IAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(roleName)})
		switch {
		case err == nil:
		case awserr.Code(err) == "LimitExceeded" || awserr.IsAlreadyExists(err):
			// A profile holds one role: someone added one meanwhile.
			again, gerr := r.getProfile(ctx, name)
			if gerr != nil {
				return "", fmt.Errorf("getting instance profile %s: %w", name, gerr)
			}
			if !holdsRole(again, roleName) {
				return "", fmt.Errorf("instance profile %s holds another role; retrying: %w", name, err)
			}
		case awserr.IsNotFound(err):
			return "", fmt.Errorf("adding role %s to instance profile %s: %w: %v", roleName, name, ErrRoleNotFound, err)
		default:
			return "", fmt.Errorf("adding role %s to instance profile %s: %w", roleName, name, err)
		}
	}
	return name, nil
}

func (r *Resolver) getProfile(ctx context.Context, name string) (*iamtypes.InstanceProfile, error) {
	out, err := r.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		return nil, err
	}
	if out.InstanceProfile == nil {
		return nil, fmt.Errorf("instance profile %s: empty answer", name)
	}
	return out.InstanceProfile, nil
}

func holdsRole(p *iamtypes.InstanceProfile, roleName string) bool {
	for _, ro := range p.Roles {
		if aws.ToString(ro.RoleName) == roleName {
			return true
		}
	}
	return false
}

func missingTags(want map[string]string, have []iamtypes.Tag) map[string]string {
	got := make(map[string]string, len(have))
	for _, t := range have {
		got[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	missing := map[string]string{}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			missing[k] = v
		}
	}
	return missing
}

func iamTags(m map[string]string) []iamtypes.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]iamtypes.Tag, len(keys))
	for i, k := range keys {
		out[i] = iamtypes.Tag{Key: aws.String(k), Value: aws.String(m[k])}
	}
	return out
}

// instanceProfile resolves status.instanceProfile: spec.instanceProfile
// as is (checked to exist), or the managed profile of spec.role.
func (r *Resolver) instanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass, cluster string) (string, outcome) {
	if r.IAM == nil {
		return "", outcome{keep: true, err: errors.New("instance profile: no IAM client configured")}
	}
	if p := aws.ToString(nc.Spec.InstanceProfile); p != "" {
		profile, err := r.getProfile(ctx, p)
		switch {
		case awserr.IsNotFound(err):
			return "", notReady(ReasonInstanceProfileNotFound, "instance profile %q (spec.instanceProfile) does not exist", p)
		case err != nil:
			return "", failed("getting instance profile "+p, err)
		case len(profile.Roles) == 0:
			return "", notReady(ReasonInstanceProfileNotFound, "instance profile %q (spec.instanceProfile) has no role; add the node role to it", p)
		}
		return p, ready()
	}
	if nc.Spec.Role == "" {
		return "", notReady(ReasonInstanceProfileNotFound, "set spec.role or spec.instanceProfile")
	}
	if cluster == "" {
		return "", outcome{keep: true, err: errors.New("instance profile: cluster name unknown")}
	}
	name, err := r.EnsureInstanceProfile(ctx, nc, cluster)
	switch {
	case errors.Is(err, ErrRoleNotFound):
		return "", notReady(ReasonRoleNotFound, "role %q (spec.role) does not exist; create it or fix spec.role", nc.Spec.Role)
	case err != nil:
		return "", failed("ensuring the instance profile of role "+nc.Spec.Role, err)
	}
	return name, ready()
}

// DeleteUnusedInstanceProfiles deletes the managed profiles of cluster
// (under InstanceProfilePathPrefix) that inUse does not claim and that were
// created more than minAge ago, and returns their names. inUse must say
// yes for every profile named by an EC2NodeClass status or by a NodeClaim
// (annotation karpenter.k8s.aws/instance-profile-name) whose instance may
// still run: deleting a profile takes the credentials from its instances.
func (r *Resolver) DeleteUnusedInstanceProfiles(ctx context.Context, cluster string, inUse func(name string) bool, minAge time.Duration) ([]string, error) {
	return r.deleteProfiles(ctx, InstanceProfilePathPrefix(r.Region, cluster), func(p iamtypes.InstanceProfile) bool {
		return !inUse(aws.ToString(p.InstanceProfileName)) && r.now().Sub(aws.ToTime(p.CreateDate)) >= minAge
	})
}

// DeleteInstanceProfiles deletes every managed profile of one EC2NodeClass
// (for its finalizer, once no instance uses them).
func (r *Resolver) DeleteInstanceProfiles(ctx context.Context, cluster string, nc *awsv1.EC2NodeClass) ([]string, error) {
	return r.deleteProfiles(ctx, InstanceProfilePath(r.Region, cluster, string(nc.UID)), func(iamtypes.InstanceProfile) bool { return true })
}

func (r *Resolver) deleteProfiles(ctx context.Context, prefix string, del func(iamtypes.InstanceProfile) bool) ([]string, error) {
	var deleted []string
	var errs []error
	p := iam.NewListInstanceProfilesPaginator(r.IAM, &iam.ListInstanceProfilesInput{PathPrefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return deleted, fmt.Errorf("listing instance profiles under %s: %w", prefix, err)
		}
		for _, prof := range page.InstanceProfiles {
			if !strings.HasPrefix(aws.ToString(prof.Path), prefix) || !del(prof) {
				continue
			}
			name := aws.ToString(prof.InstanceProfileName)
			if err := r.deleteProfile(ctx, name, prof.Roles); err != nil {
				errs = append(errs, err)
				continue
			}
			deleted = append(deleted, name)
		}
	}
	return deleted, errors.Join(errs...)
}

func (r *Resolver) deleteProfile(ctx context.Context, name string, roles []iamtypes.Role) error {
	for _, ro := range roles {
		if _, err := r.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: ro.RoleName}); err != nil && !awserr.IsNotFound(err) {
			return fmt.Errorf("removing role %s from instance profile %s: %w", aws.ToString(ro.RoleName), name, err)
		}
	}
	if _, err := r.IAM.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil && !awserr.IsNotFound(err) {
		return fmt.Errorf("deleting instance profile %s: %w", name, err)
	}
	return nil
}
