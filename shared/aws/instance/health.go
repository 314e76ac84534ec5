package instance

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpless/karpless/shared/core/repair"
)

// healthFilters select the instances with something to report, one call
// each: DescribeInstanceStatus ANDs filters of different names, and an
// instance may be impaired in one way only. The event codes are those
// Karpenter v1.14.1 acts on; EBS checks are not asked for (ignored, as
// Karpenter ignores them).
var healthFilters = [][]ec2types.Filter{
	{{Name: aws.String("instance-status.status"), Values: []string{string(ec2types.SummaryStatusImpaired)}}},
	{{Name: aws.String("system-status.status"), Values: []string{string(ec2types.SummaryStatusImpaired)}}},
	{{Name: aws.String("event.code"), Values: []string{
		string(ec2types.EventCodeInstanceReboot), string(ec2types.EventCodeSystemReboot),
		string(ec2types.EventCodeSystemMaintenance), string(ec2types.EventCodeInstanceRetirement),
		string(ec2types.EventCodeInstanceStop),
	}}},
}

// Health lists the region's instances that EC2 reports impaired or with a
// scheduled event, each once, as plain data. DescribeInstanceStatus takes
// no tag filter, so the list is not this cluster's alone: callers match it
// against their NodeClaims. The answer is eventually consistent, like
// DescribeInstances': an instance just terminated may still be listed, one
// just impaired may not be yet.
func (p *Provider) Health(ctx context.Context) ([]repair.InstanceStatus, error) {
	seen := map[string]bool{}
	var out []repair.InstanceStatus
	for _, filters := range healthFilters {
		pages := ec2.NewDescribeInstanceStatusPaginator(p.ec2, &ec2.DescribeInstanceStatusInput{Filters: filters, MaxResults: aws.Int32(1000)})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing instance status (%s): %w", aws.ToString(filters[0].Name), err)
			}
			for _, s := range page.InstanceStatuses {
				id := aws.ToString(s.InstanceId)
				if id == "" || seen[id] {
					continue
				}
				seen[id] = true
				out = append(out, healthOf(s))
			}
		}
	}
	return out, nil
}

// healthOf converts one DescribeInstanceStatus item.
func healthOf(s ec2types.InstanceStatus) repair.InstanceStatus {
	out := repair.InstanceStatus{InstanceID: aws.ToString(s.InstanceId)}
	summary := func(c repair.Category, sum *ec2types.InstanceStatusSummary) {
		if sum == nil {
			return
		}
		for _, d := range sum.Details {
			out.Checks = append(out.Checks, repair.Check{
				Category: c, Name: string(d.Name), Failed: d.Status == ec2types.StatusTypeFailed, ImpairedSince: aws.ToTime(d.ImpairedSince),
			})
		}
	}
	summary(repair.CategoryInstance, s.InstanceStatus)
	summary(repair.CategorySystem, s.SystemStatus)
	// Events are failures by nature: the host is to be retired, rebooted
	// or stopped. An event done or called off stays listed for a while,
	// its description starting "[Completed]" or "[Canceled]"; it no longer
	// matters (Karpenter counts it still).
	for _, e := range s.Events {
		if d := aws.ToString(e.Description); strings.HasPrefix(d, "[Completed]") || strings.HasPrefix(d, "[Canceled]") {
			continue
		}
		out.Checks = append(out.Checks, repair.Check{Category: repair.CategoryEvent, Name: string(e.Code), Failed: true})
	}
	return out
}
