package nodeclass

import (
	"encoding/json"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
)

// Selector terms become EC2 Describe* filter sets: one DescribeX call per
// set, results unioned (terms are ORed), filters within a set ANDed. Terms
// by id (and security groups by name) are batched into one set with one
// multi-valued filter, so ten ids cost one call. Tag values "*" become a
// tag-key filter (the key exists, any value). Within a set, tag filters are
// sorted by key so the calls are deterministic.

// SubnetFilterSets translates subnetSelectorTerms.
func SubnetFilterSets(terms []awsv1.SubnetSelectorTerm) [][]ec2types.Filter {
	var sets [][]ec2types.Filter
	var ids []string
	for _, t := range terms {
		if t.ID != "" {
			ids = append(ids, t.ID)
			continue
		}
		if len(t.Tags) > 0 {
			sets = append(sets, tagFilters(t.Tags))
		}
	}
	if len(ids) > 0 {
		sets = append(sets, []ec2types.Filter{{Name: aws.String("subnet-id"), Values: ids}})
	}
	return sets
}

// SecurityGroupFilterSets translates securityGroupSelectorTerms.
func SecurityGroupFilterSets(terms []awsv1.SecurityGroupSelectorTerm) [][]ec2types.Filter {
	var sets [][]ec2types.Filter
	var ids, names []string
	for _, t := range terms {
		switch {
		case t.ID != "":
			ids = append(ids, t.ID)
		case t.Name != "":
			names = append(names, t.Name)
		case len(t.Tags) > 0:
			sets = append(sets, tagFilters(t.Tags))
		}
	}
	if len(ids) > 0 {
		sets = append(sets, []ec2types.Filter{{Name: aws.String("group-id"), Values: ids}})
	}
	if len(names) > 0 {
		sets = append(sets, []ec2types.Filter{{Name: aws.String("group-name"), Values: names}})
	}
	return sets
}

// ImageQuery is one DescribeImages call of a non-alias AMI selector.
type ImageQuery struct {
	Filters []ec2types.Filter
	// Owners restricts the image owners; nil means any owner (only for
	// queries by id or tags, where the caller named the images already).
	Owners []string
}

// Input is the DescribeImages request of the query: available images
// only, deprecated ones included (they are used when nothing newer
// matches), large pages.
func (q ImageQuery) Input() *ec2.DescribeImagesInput {
	filters := append(append([]ec2types.Filter(nil), q.Filters...), ec2types.Filter{Name: aws.String("state"), Values: []string{string(ec2types.ImageStateAvailable)}})
	in := &ec2.DescribeImagesInput{Filters: filters, IncludeDeprecated: aws.Bool(true), MaxResults: aws.Int32(1000)}
	if len(q.Owners) > 0 {
		in.Owners = q.Owners
	}
	return in
}

// DefaultImageOwners apply to name terms without an owner, so a name
// pattern cannot pick up a look-alike image some stranger made public.
var DefaultImageOwners = []string{"self", "amazon"}

// ImageQueries translates non-alias amiSelectorTerms. ssmIDs are the image
// ids already read from the terms' ssmParameter values; they join the id
// batch.
func ImageQueries(terms []awsv1.AMISelectorTerm, ssmIDs []string) []ImageQuery {
	var qs []ImageQuery
	var ids []string
	for _, t := range terms {
		switch {
		case t.Alias != "", t.SSMParameter != "":
			continue
		case t.ID != "":
			ids = append(ids, t.ID)
		default:
			var q ImageQuery
			if t.Owner != "" {
				q.Owners = []string{t.Owner}
			}
			if t.Name != "" {
				q.Filters = append(q.Filters, ec2types.Filter{Name: aws.String("name"), Values: []string{t.Name}})
				if t.Owner == "" {
					q.Owners = DefaultImageOwners
				}
			}
			q.Filters = append(q.Filters, tagFilters(t.Tags)...)
			if len(q.Filters) == 0 && len(q.Owners) == 0 {
				continue // an empty term would match every public image
			}
			qs = append(qs, q)
		}
	}
	ids = append(ids, ssmIDs...)
	if len(ids) > 0 {
		qs = append(qs, ImageQuery{Filters: []ec2types.Filter{{Name: aws.String("image-id"), Values: uniq(ids)}}})
	}
	return qs
}

func tagFilters(tags map[string]string) []ec2types.Filter {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ec2types.Filter, 0, len(keys))
	for _, k := range keys {
		if v := tags[k]; v == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		} else {
			out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{v}})
		}
	}
	return out
}

func uniq(xs []string) []string {
	seen := make(map[string]bool, len(xs))
	out := xs[:0:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// termsString renders selector terms for condition messages.
func termsString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	if len(b) > 300 {
		return string(b[:297]) + "..."
	}
	return string(b)
}
