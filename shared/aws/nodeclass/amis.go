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
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube/eksauth"
)

// foundImage is an image a selector query found, as DescribeImages gave
// it; arch is the Kubernetes architecture.
type foundImage struct {
	id, name, arch, created, deprecation string
}

// candidate is an image for one requirement set.
type candidate struct {
	ami     awsv1.AMI
	created time.Time
}

// amis resolves amiSelectorTerms. For each distinct requirement set (arch
// plus accelerator variant) it keeps one image: a non-deprecated one over a
// deprecated one, then the newest, then the greatest name. The result is
// sorted newest first, then by id; launch templates pick, per instance
// type, the first image whose requirements the type meets.
func (r *Resolver) amis(ctx context.Context, nc *awsv1.EC2NodeClass, cluster eksauth.ClusterInfo, now time.Time) ([]awsv1.AMI, outcome) {
	alias, hasAlias, err := AliasOf(nc)
	if err != nil {
		return nil, notReady(ReasonUnsupportedAlias, "%v", err)
	}
	var queries []ImageQuery
	// known maps image ids found through SSM to the requirement sets their
	// parameter says they serve (without the architecture).
	known := map[string][][]corev1.NodeSelectorRequirement{}
	if hasAlias {
		if cluster.KubernetesVersion == "" {
			return nil, notReady(ReasonKubernetesVersion, "alias %s needs the cluster's Kubernetes version, which is unknown", alias)
		}
		params, err := AliasParameters(alias, cluster.KubernetesVersion)
		if err != nil {
			var ua *UnsupportedAliasError
			if errors.As(err, &ua) {
				return nil, notReady(ReasonUnsupportedAlias, "%s", ua.Reason)
			}
			return nil, notReady(ReasonUnsupportedAlias, "%v", err)
		}
		var ids []string
		for _, p := range params {
			id, found, err := r.parameter(ctx, p.Path)
			if err != nil {
				return nil, failed("reading SSM parameter "+p.Path, err)
			}
			if !found {
				continue
			}
			if _, seen := known[id]; !seen {
				ids = append(ids, id)
			}
			known[id] = append(known[id], p.Requirements...)
		}
		if len(ids) == 0 {
			return nil, notReady(ReasonAMINotFound, "alias %s: no AMI is published for Kubernetes %s (no SSM parameter found, e.g. %s)", alias, cluster.KubernetesVersion, params[0].Path)
		}
		queries = []ImageQuery{{Filters: []ec2types.Filter{{Name: aws.String("image-id"), Values: ids}}}}
	} else {
		var ssmIDs []string
		for _, t := range nc.Spec.AMISelectorTerms {
			if t.SSMParameter == "" {
				continue
			}
			id, found, err := r.parameter(ctx, t.SSMParameter)
			if err != nil {
				return nil, failed("reading SSM parameter "+t.SSMParameter, err)
			}
			if found && strings.HasPrefix(id, "ami-") {
				ssmIDs = append(ssmIDs, id)
			}
		}
		queries = ImageQueries(nc.Spec.AMISelectorTerms, ssmIDs)
	}

	images, err := cached(r.Selectors, queryKey("images", queries), now, func() ([]foundImage, error) {
		var images []foundImage
		for _, q := range queries {
			p := ec2.NewDescribeImagesPaginator(r.EC2, q.Input())
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					return nil, err
				}
				for _, img := range page.Images {
					arch, ok := kubeArch(string(img.Architecture))
					if !ok {
						continue
					}
					images = append(images, foundImage{id: aws.ToString(img.ImageId), name: aws.ToString(img.Name), arch: arch,
						created: aws.ToString(img.CreationDate), deprecation: aws.ToString(img.DeprecationTime)})
				}
			}
		}
		return images, nil
	})
	if err != nil {
		return nil, failed("describing images", err)
	}
	best := map[string]candidate{}
	for _, img := range images {
		sets, isKnown := known[img.id]
		if !isKnown {
			sets = [][]corev1.NodeSelectorRequirement{nil}
		}
		created, _ := time.Parse(time.RFC3339, img.created)
		// Deprecation is judged now, not when the images were described:
		// an image remembered past its deprecation time is deprecated.
		deprecated := false
		if img.deprecation != "" {
			if t, err := time.Parse(time.RFC3339, img.deprecation); err == nil && !t.After(now) {
				deprecated = true
			}
		}
		for _, set := range sets {
			reqs := append([]corev1.NodeSelectorRequirement{{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{img.arch}}}, set...)
			sortRequirements(reqs)
			c := candidate{ami: awsv1.AMI{ID: img.id, Name: img.name, Deprecated: deprecated, Requirements: reqs}, created: created}
			key := requirementsKey(reqs)
			if prev, ok := best[key]; !ok || better(c, prev) {
				best[key] = c
			}
		}
	}
	if len(best) == 0 {
		if hasAlias {
			return nil, notReady(ReasonAMINotFound, "alias %s: the AMIs named by SSM are not visible to DescribeImages", alias)
		}
		return nil, notReady(ReasonAMINotFound, "no available AMIs match amiSelectorTerms %s (names default to owners self and amazon)", termsString(nc.Spec.AMISelectorTerms))
	}
	list := make([]candidate, 0, len(best))
	for _, c := range best {
		list = append(list, c)
	}
	sortCandidates(list)
	out := make([]awsv1.AMI, len(list))
	for i := range list {
		out[i] = list[i].ami
	}
	return out, ready()
}

// sortCandidates orders images as Karpenter's AMIs.Sort: newest first (an
// unknown creation date last), then by id; then by requirements, so an
// image serving two requirement sets lists them in a fixed order.
func sortCandidates(list []candidate) {
	sort.Slice(list, func(i, j int) bool {
		if !list[i].created.Equal(list[j].created) {
			return list[i].created.After(list[j].created)
		}
		if list[i].ami.ID != list[j].ami.ID {
			return list[i].ami.ID < list[j].ami.ID
		}
		return requirementsKey(list[i].ami.Requirements) < requirementsKey(list[j].ami.Requirements)
	})
}

// better reports whether a should replace b for the same requirements.
func better(a, b candidate) bool {
	if a.ami.Deprecated != b.ami.Deprecated {
		return !a.ami.Deprecated
	}
	if !a.created.Equal(b.created) {
		return a.created.After(b.created)
	}
	if a.ami.Name != b.ami.Name {
		return a.ami.Name > b.ami.Name
	}
	return a.ami.ID < b.ami.ID
}

// parameter reads an SSM parameter; found is false when it does not exist.
func (r *Resolver) parameter(ctx context.Context, name string) (string, bool, error) {
	if r.SSM == nil {
		return "", false, fmt.Errorf("no SSM client configured")
	}
	out, err := r.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	if err != nil {
		if awserr.IsNotFound(err) || awserr.Code(err) == "ParameterVersionNotFound" {
			return "", false, nil
		}
		return "", false, err
	}
	if out.Parameter == nil || aws.ToString(out.Parameter.Value) == "" {
		return "", false, nil
	}
	return strings.TrimSpace(aws.ToString(out.Parameter.Value)), true, nil
}

// sortRequirements orders requirements as Karpenter writes them in
// status.amis: shorter keys first, then by key.
func sortRequirements(reqs []corev1.NodeSelectorRequirement) {
	sort.SliceStable(reqs, func(i, j int) bool {
		if len(reqs[i].Key) != len(reqs[j].Key) {
			return len(reqs[i].Key) < len(reqs[j].Key)
		}
		return reqs[i].Key < reqs[j].Key
	})
}

func requirementsKey(reqs []corev1.NodeSelectorRequirement) string {
	var b strings.Builder
	for _, r := range reqs {
		vals := append([]string(nil), r.Values...)
		sort.Strings(vals)
		fmt.Fprintf(&b, "%s %s %s;", r.Key, r.Operator, strings.Join(vals, ","))
	}
	return b.String()
}
