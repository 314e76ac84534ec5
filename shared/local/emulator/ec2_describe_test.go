package emulator

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestDescribeInstanceTypes(t *testing.T) {
	e, _ := newTestEmulator(t)
	c := ec2Client(t, e)
	ctx := context.Background()

	// Without MaxResults EC2 pages at 100: the paginator must follow NextToken.
	first, err := c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.InstanceTypes) != 100 || first.NextToken == nil {
		t.Fatalf("first page: %d types, next token %v; want 100 and a token", len(first.InstanceTypes), first.NextToken)
	}
	all := map[string]ec2types.InstanceTypeInfo{}
	pages := 0
	for p := ec2.NewDescribeInstanceTypesPaginator(c, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)}); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, it := range out.InstanceTypes {
			all[string(it.InstanceType)] = it
		}
	}
	if len(all) != e.cfg.Catalog.Len() || pages != (e.cfg.Catalog.Len()+99)/100 {
		t.Fatalf("paginated %d types in %d pages, want %d", len(all), pages, e.cfg.Catalog.Len())
	}
	m5 := all["m5.large"]
	if aws.ToInt32(m5.VCpuInfo.DefaultVCpus) != 2 || aws.ToInt64(m5.MemoryInfo.SizeInMiB) != 8192 ||
		!slices.Equal(m5.ProcessorInfo.SupportedArchitectures, []ec2types.ArchitectureType{"x86_64"}) ||
		aws.ToInt32(m5.NetworkInfo.MaximumNetworkInterfaces) != 3 || aws.ToInt32(m5.NetworkInfo.Ipv4AddressesPerInterface) != 10 ||
		len(m5.NetworkInfo.NetworkCards) != 1 || aws.ToInt32(m5.NetworkInfo.NetworkCards[0].MaximumNetworkInterfaces) != 3 ||
		aws.ToInt32(m5.NetworkInfo.DefaultNetworkCardIndex) != 0 || m5.Hypervisor != "nitro" || aws.ToBool(m5.BareMetal) ||
		!slices.Contains(m5.SupportedUsageClasses, "spot") || m5.EbsInfo == nil || m5.EbsInfo.EbsOptimizedInfo == nil ||
		aws.ToInt32(m5.EbsInfo.EbsOptimizedInfo.BaselineBandwidthInMbps) == 0 || m5.ProcessorInfo.Manufacturer == nil ||
		aws.ToFloat64(m5.ProcessorInfo.SustainedClockSpeedInGhz) == 0 || aws.ToInt32(m5.VCpuInfo.DefaultCores) != 1 {
		t.Errorf("m5.large decoded wrong: %+v %+v %+v %+v", m5.VCpuInfo, m5.MemoryInfo, m5.NetworkInfo, m5.ProcessorInfo)
	}
	// The ENI facts reproduce the catalog's pod arithmetic for every type.
	for _, it := range e.cfg.Catalog.All() {
		x := all[it.Name]
		ifaces, ipv4 := int64(aws.ToInt32(x.NetworkInfo.MaximumNetworkInterfaces)), int64(aws.ToInt32(x.NetworkInfo.Ipv4AddressesPerInterface))
		if got, want := ifaces*(ipv4-1)+2, it.ENILimitedPods(0); got != want {
			t.Errorf("%s: %d x (%d-1) + 2 = %d pods, catalog says %d", it.Name, ifaces, ipv4, got, want)
		}
	}
	gpu := all["g5.xlarge"]
	if gpu.GpuInfo == nil || len(gpu.GpuInfo.Gpus) != 1 || aws.ToInt32(gpu.GpuInfo.Gpus[0].Count) != 1 ||
		aws.ToString(gpu.GpuInfo.Gpus[0].Manufacturer) != "NVIDIA" || aws.ToInt32(gpu.GpuInfo.Gpus[0].MemoryInfo.SizeInMiB) != 22888 || aws.ToString(gpu.GpuInfo.Gpus[0].Name) != "A10G" {
		t.Errorf("g5.xlarge GPU info: %+v", gpu.GpuInfo)
	}
	if metal := all["m5.metal"]; !aws.ToBool(metal.BareMetal) {
		t.Error("m5.metal is not bare metal")
	}
	if d := all["m5d.large"]; d.InstanceStorageInfo == nil || aws.ToInt64(d.InstanceStorageInfo.TotalSizeInGB) != 75 || d.InstanceStorageInfo.NvmeSupport != "required" {
		t.Errorf("m5d.large storage: %+v", d.InstanceStorageInfo)
	}
	if g := all["m6g.large"]; !slices.Equal(g.ProcessorInfo.SupportedArchitectures, []ec2types.ArchitectureType{"arm64"}) {
		t.Errorf("m6g.large architectures: %v", g.ProcessorInfo.SupportedArchitectures)
	}
	if inf := all["inf2.xlarge"]; inf.NeuronInfo == nil || len(inf.NeuronInfo.NeuronDevices) != 1 {
		t.Errorf("inf2.xlarge neuron info: %+v", inf.NeuronInfo)
	}

	for _, tc := range []struct {
		name  string
		in    ec2.DescribeInstanceTypesInput
		count int
		code  string
	}{
		{name: "by name", in: ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.large", "c6g.xlarge"}}, count: 2},
		{name: "unknown name", in: ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.huge"}}, code: "InvalidInstanceType"},
		{name: "max results too big", in: ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(1000)}, code: "InvalidParameterValue"},
		{name: "unknown filter", in: ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{{Name: aws.String("color"), Values: []string{"red"}}}}, code: "InvalidParameterValue"},
		{name: "wildcard", in: ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"m5.*"}}}}, count: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.DescribeInstanceTypes(ctx, &tc.in)
			if tc.code != "" {
				wantCode(t, err, tc.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(out.InstanceTypes) != tc.count {
				t.Errorf("got %d types, want %d", len(out.InstanceTypes), tc.count)
			}
		})
	}
	// Karpenter's own filter: hvm, both architectures.
	n := 0
	for p := ec2.NewDescribeInstanceTypesPaginator(c, &ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{
		{Name: aws.String("supported-virtualization-type"), Values: []string{"hvm"}},
		{Name: aws.String("processor-info.supported-architecture"), Values: []string{"arm64"}},
	}}); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.InstanceTypes {
			if it.ProcessorInfo.SupportedArchitectures[0] != "arm64" {
				t.Fatalf("%s is not arm64", it.InstanceType)
			}
			n++
		}
	}
	if n == 0 || n >= len(all) {
		t.Errorf("arm64 filter kept %d of %d", n, len(all))
	}
}

func TestDescribeInstanceTypeOfferings(t *testing.T) {
	e, _ := newTestEmulator(t)
	c := ec2Client(t, e)
	ctx := context.Background()
	byZone := map[string]int{}
	pages := 0
	for p := ec2.NewDescribeInstanceTypeOfferingsPaginator(c, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone}); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, o := range out.InstanceTypeOfferings {
			if o.LocationType != ec2types.LocationTypeAvailabilityZone || o.InstanceType == "" {
				t.Fatalf("bad offering %+v", o)
			}
			byZone[aws.ToString(o.Location)]++
		}
	}
	n := e.cfg.Catalog.Len()
	if pages < 2 || byZone["us-west-2a"] != n || byZone["us-west-2b"] != n || byZone["us-west-2c"] >= n || byZone["us-west-2c"] < n*8/10 {
		t.Errorf("offerings per zone %v in %d pages; want every type in a and b, most in c", byZone, pages)
	}
	out, err := c.DescribeInstanceTypeOfferings(ctx, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZoneId,
		Filters:      []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"m5.large"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.InstanceTypeOfferings) < 2 || aws.ToString(out.InstanceTypeOfferings[0].Location) != "usw2-az1" {
		t.Errorf("m5.large by zone id: %+v", out.InstanceTypeOfferings)
	}
	region, err := c.DescribeInstanceTypeOfferings(ctx, &ec2.DescribeInstanceTypeOfferingsInput{Filters: []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"m5.large"}}}})
	if err != nil || len(region.InstanceTypeOfferings) != 1 || aws.ToString(region.InstanceTypeOfferings[0].Location) != "us-west-2" {
		t.Errorf("region offerings: %+v %v", region, err)
	}
}

func TestDescribeAvailabilityZones(t *testing.T) {
	e, _ := newTestEmulator(t)
	c := ec2Client(t, e)
	out, err := c.DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.AvailabilityZones) != 3 {
		t.Fatalf("%d zones", len(out.AvailabilityZones))
	}
	z := out.AvailabilityZones[1]
	if aws.ToString(z.ZoneName) != "us-west-2b" || aws.ToString(z.ZoneId) != "usw2-az2" || z.State != "available" || aws.ToString(z.RegionName) != "us-west-2" || aws.ToString(z.ZoneType) != "availability-zone" {
		t.Errorf("zone decoded wrong: %+v", z)
	}
	one, err := c.DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{Filters: []ec2types.Filter{{Name: aws.String("zone-id"), Values: []string{"usw2-az3"}}}})
	if err != nil || len(one.AvailabilityZones) != 1 || aws.ToString(one.AvailabilityZones[0].ZoneName) != "us-west-2c" {
		t.Errorf("zone-id filter: %+v %v", one, err)
	}
	_, err = c.DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{"us-west-2z"}})
	wantCode(t, err, "InvalidParameterValue")
}

func TestDescribeSpotPriceHistory(t *testing.T) {
	h := DefaultHostility()
	// The test pins the rows of given types and zones; TestSpotMarketGaps
	// covers the pairs without a spot market, which have none.
	h.NoSpotMarketFraction = 0
	e, clk := newTestEmulator(t, calm(h))
	c := ec2Client(t, e)
	ctx := context.Background()
	now := clk.Now()
	in := &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes:       []ec2types.InstanceType{"m5.large", "c5.xlarge"},
		ProductDescriptions: []string{"Linux/UNIX"},
		StartTime:           aws.Time(now),
	}
	out, err := c.DescribeSpotPriceHistory(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.SpotPriceHistory) != 6 {
		t.Fatalf("%d prices, want 2 types x 3 zones", len(out.SpotPriceHistory))
	}
	first := map[string]string{}
	for _, sp := range out.SpotPriceHistory {
		od, _ := e.OnDemandPrice(string(sp.InstanceType))
		price, _ := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
		if price < od*0.3*0.95 || price > od*0.7*1.05 || aws.ToString(sp.AvailabilityZone) == "" || sp.ProductDescription != "Linux/UNIX" || sp.Timestamp == nil {
			t.Errorf("bad spot price %+v (on-demand %g)", sp, od)
		}
		if price != e.SpotPrice(string(sp.InstanceType), aws.ToString(sp.AvailabilityZone)) {
			t.Errorf("SpotPrice() disagrees with the API for %s", sp.InstanceType)
		}
		first[string(sp.InstanceType)+aws.ToString(sp.AvailabilityZone)] = aws.ToString(sp.SpotPrice)
	}
	// Prices move with the clock.
	clk.Step(3 * SpotPriceInterval)
	in.StartTime = aws.Time(clk.Now())
	later, err := c.DescribeSpotPriceHistory(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, sp := range later.SpotPriceHistory {
		if first[string(sp.InstanceType)+aws.ToString(sp.AvailabilityZone)] != aws.ToString(sp.SpotPrice) {
			moved++
		}
	}
	if moved == 0 {
		t.Error("no spot price moved in three hours")
	}
	// History: the price in effect at StartTime and every change since, newest first.
	hist, err := c.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []ec2types.InstanceType{"m5.large"}, AvailabilityZone: aws.String("us-west-2a"),
		ProductDescriptions: []string{"Linux/UNIX"}, StartTime: aws.Time(now),
	})
	if err != nil || len(hist.SpotPriceHistory) != 4 || !hist.SpotPriceHistory[0].Timestamp.After(*hist.SpotPriceHistory[3].Timestamp) {
		t.Errorf("history: %d records, err %v", len(hist.SpotPriceHistory), err)
	}
	// Every current price of a region, paginated as Karpenter reads them.
	total := 0
	for p := ec2.NewDescribeSpotPriceHistoryPaginator(c, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}, StartTime: aws.Time(clk.Now()), MaxResults: aws.Int32(1000),
	}); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total += len(out.SpotPriceHistory)
	}
	if total < 2*2*e.cfg.Catalog.Len() {
		t.Errorf("only %d prices for the region", total)
	}
	_, err = c.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{Filters: []ec2types.Filter{{Name: aws.String("nope"), Values: []string{"x"}}}})
	wantCode(t, err, "InvalidParameterValue")
}

func TestDescribeSubnetsSecurityGroupsImages(t *testing.T) {
	e, clk := newTestEmulator(t)
	c := ec2Client(t, e)
	ctx := context.Background()
	discovery := ec2types.Filter{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{e.ClusterName()}}

	subnets, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{discovery}})
	if err != nil {
		t.Fatal(err)
	}
	if len(subnets.Subnets) != 3 {
		t.Fatalf("%d discovery subnets, want 3", len(subnets.Subnets))
	}
	s := subnets.Subnets[0]
	if aws.ToString(s.SubnetId) == "" || aws.ToString(s.AvailabilityZone) != "us-west-2a" || aws.ToString(s.AvailabilityZoneId) != "usw2-az1" ||
		aws.ToInt32(s.AvailableIpAddressCount) != 8187 || aws.ToString(s.VpcId) == "" || aws.ToString(s.CidrBlock) != "10.0.0.0/19" || len(s.Tags) != 3 {
		t.Errorf("subnet decoded wrong: %+v", s)
	}
	all, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil || len(all.Subnets) != 6 {
		t.Errorf("all subnets: %d %v", len(all.Subnets), err)
	}
	for _, tc := range []struct {
		name  string
		in    ec2.DescribeSubnetsInput
		count int
		code  string
	}{
		{"by id", ec2.DescribeSubnetsInput{SubnetIds: []string{aws.ToString(s.SubnetId)}}, 1, ""},
		{"missing id", ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0000000000000000f"}}, 0, "InvalidSubnetID.NotFound"},
		{"tag key exists", ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("tag-key"), Values: []string{"kubernetes.io/role/elb"}}}}, 3, ""},
		{"name wildcard", ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:Name"), Values: []string{"*-private-us-west-2?"}}}}, 3, ""},
		{"zone and tag", ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{discovery, {Name: aws.String("availability-zone"), Values: []string{"us-west-2b", "us-west-2c"}}}}, 2, ""},
		{"paged", ec2.DescribeSubnetsInput{MaxResults: aws.Int32(5)}, 5, ""},
		{"bad page size", ec2.DescribeSubnetsInput{MaxResults: aws.Int32(2)}, 0, "InvalidParameterValue"},
	} {
		t.Run("subnets/"+tc.name, func(t *testing.T) {
			out, err := c.DescribeSubnets(ctx, &tc.in)
			if tc.code != "" {
				wantCode(t, err, tc.code)
				return
			}
			if err != nil || len(out.Subnets) != tc.count {
				t.Errorf("got %d subnets (%v), want %d", len(out.Subnets), err, tc.count)
			}
		})
	}

	sgs, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{discovery}})
	if err != nil || len(sgs.SecurityGroups) != 1 {
		t.Fatalf("discovery security groups: %+v %v", sgs, err)
	}
	g := sgs.SecurityGroups[0]
	if aws.ToString(g.GroupId) == "" || aws.ToString(g.GroupName) != "eks-cluster-sg-"+e.ClusterName() || aws.ToString(g.VpcId) == "" || len(g.Tags) == 0 {
		t.Errorf("security group decoded wrong: %+v", g)
	}
	byName, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{"default"}}}})
	if err != nil || len(byName.SecurityGroups) != 1 {
		t.Errorf("group-name filter: %+v %v", byName, err)
	}
	_, err = c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-0000000000000000f"}})
	wantCode(t, err, "InvalidGroup.NotFound")

	// Images as Karpenter resolves an alias: by id from SSM, then by name pattern and owner.
	id := imageFor(t, e, "AL2023", "arm64", "standard")
	imgs, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{
		Filters:           []ec2types.Filter{{Name: aws.String("image-id"), Values: []string{id}}, {Name: aws.String("state"), Values: []string{"available"}}},
		IncludeDeprecated: aws.Bool(true), MaxResults: aws.Int32(1000),
	})
	if err != nil || len(imgs.Images) != 1 {
		t.Fatalf("image by id: %+v %v", imgs, err)
	}
	im := imgs.Images[0]
	if aws.ToString(im.ImageId) != id || im.Architecture != "arm64" || aws.ToString(im.Name) == "" || aws.ToString(im.CreationDate) == "" ||
		aws.ToString(im.OwnerId) != eksAMIAccount || im.State != "available" || !aws.ToBool(im.Public) {
		t.Errorf("image decoded wrong: %+v", im)
	}
	named, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"}, Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-x86_64-standard-1.37-*"}}}})
	if err != nil || len(named.Images) != 3 {
		t.Errorf("images by name pattern: %d %v, want 3 releases", len(named.Images), err)
	}
	custom := e.AddImage(Image{Name: "team-ami", Tags: map[string]string{"team": "a"}})
	tagged, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"self"}, Filters: []ec2types.Filter{{Name: aws.String("tag:team"), Values: []string{"a"}}}})
	if err != nil || len(tagged.Images) != 1 || aws.ToString(tagged.Images[0].ImageId) != custom || len(tagged.Images[0].Tags) != 1 {
		t.Errorf("images by tag: %+v %v", tagged, err)
	}
	// Deprecated images vanish from listings unless asked for.
	if err := e.DeprecateImage(custom, clk.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	gone, _ := c.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"self"}})
	kept, _ := c.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"self"}, IncludeDeprecated: aws.Bool(true)})
	if len(gone.Images) != 0 || len(kept.Images) != 1 || kept.Images[0].DeprecationTime == nil {
		t.Errorf("deprecated image: listed %d, with IncludeDeprecated %d", len(gone.Images), len(kept.Images))
	}
}

func TestLaunchTemplates(t *testing.T) {
	e, _ := newTestEmulator(t)
	c := ec2Client(t, e)
	ctx := context.Background()
	for i := range 5 {
		createLT(t, c, e, "karpenter.k8s.aws/"+strconv.Itoa(1000+i))
	}
	for _, tc := range []struct {
		name string
		in   ec2.CreateLaunchTemplateInput
		code string
	}{
		{"duplicate", ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("karpenter.k8s.aws/1000"), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-1")}}, "InvalidLaunchTemplateName.AlreadyExistsException"},
		{"malformed", ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("bad name!"), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-1")}}, "InvalidLaunchTemplateName.MalformedException"},
		{"bad user data", ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("udata"), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{UserData: aws.String("!!!")}}, "InvalidUserData.Malformed"},
		{"reserved tag", ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("tags"), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-1")},
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: "launch-template", Tags: []ec2types.Tag{{Key: aws.String("aws:x"), Value: aws.String("y")}}}}}, "InvalidParameterValue"},
		{"dry run", ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("dry"), DryRun: aws.Bool(true), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-1")}}, "DryRunOperation"},
	} {
		t.Run("create/"+tc.name, func(t *testing.T) {
			_, err := c.CreateLaunchTemplate(ctx, &tc.in)
			wantCode(t, err, tc.code)
		})
	}
	// Idempotent create: the same token returns the same template.
	in := &ec2.CreateLaunchTemplateInput{ClientToken: aws.String("tok-1"), LaunchTemplateName: aws.String("idem"), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-1")}}
	a, err := c.CreateLaunchTemplate(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateLaunchTemplate(ctx, in)
	if err != nil || aws.ToString(b.LaunchTemplate.LaunchTemplateId) != aws.ToString(a.LaunchTemplate.LaunchTemplateId) {
		t.Fatalf("replay: %+v %v", b, err)
	}
	lt := a.LaunchTemplate
	if aws.ToString(lt.LaunchTemplateId) == "" || aws.ToString(lt.LaunchTemplateName) != "idem" || lt.CreateTime == nil ||
		aws.ToInt64(lt.DefaultVersionNumber) != 1 || aws.ToInt64(lt.LatestVersionNumber) != 1 || aws.ToString(lt.CreatedBy) == "" {
		t.Errorf("launch template decoded wrong: %+v", lt)
	}
	in.LaunchTemplateName = aws.String("idem-2")
	_, err = c.CreateLaunchTemplate(ctx, in)
	wantCode(t, err, "IdempotentParameterMismatch")
	// The lists below count "idem" too, once DescribeLaunchTemplates knows it.
	settle(t, e)

	clusterTag := ec2types.Filter{Name: aws.String("tag:eks:eks-cluster-name"), Values: []string{e.ClusterName()}}
	for _, tc := range []struct {
		name  string
		in    ec2.DescribeLaunchTemplatesInput
		count int
		code  string
	}{
		{"by name", ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"karpenter.k8s.aws/1002"}}, 1, ""},
		{"missing name", ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"karpenter.k8s.aws/none"}}, 0, "InvalidLaunchTemplateName.NotFoundException"},
		{"missing id", ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{"lt-0000000000000000f"}}, 0, "InvalidLaunchTemplateId.NotFound"},
		{"cluster tag", ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{clusterTag}}, 5, ""},
		{"name filter", ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{{Name: aws.String("launch-template-name"), Values: []string{"karpenter.k8s.aws/*"}}}}, 5, ""},
		{"no match", ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:eks:eks-cluster-name"), Values: []string{"other"}}}}, 0, ""},
	} {
		t.Run("describe/"+tc.name, func(t *testing.T) {
			out, err := c.DescribeLaunchTemplates(ctx, &tc.in)
			if tc.code != "" {
				wantCode(t, err, tc.code)
				return
			}
			if err != nil || len(out.LaunchTemplates) != tc.count {
				t.Errorf("got %d (%v), want %d", len(out.LaunchTemplates), err, tc.count)
			}
			for _, lt := range out.LaunchTemplates {
				if len(lt.Tags) == 0 && aws.ToString(lt.LaunchTemplateName) != "idem" {
					t.Errorf("%s lost its tags", aws.ToString(lt.LaunchTemplateName))
				}
			}
		})
	}
	pages := 0
	n := 0
	for p := ec2.NewDescribeLaunchTemplatesPaginator(c, &ec2.DescribeLaunchTemplatesInput{MaxResults: aws.Int32(2)}); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		n += len(out.LaunchTemplates)
	}
	if n != 6 || pages != 3 {
		t.Errorf("paginated %d templates in %d pages", n, pages)
	}
	del, err := c.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String("karpenter.k8s.aws/1000")})
	if err != nil || aws.ToString(del.LaunchTemplate.LaunchTemplateName) != "karpenter.k8s.aws/1000" {
		t.Fatalf("delete: %+v %v", del, err)
	}
	_, err = c.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String("karpenter.k8s.aws/1000")})
	wantCode(t, err, "InvalidLaunchTemplateName.NotFoundException")
	_, err = c.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String("lt-0000000000000000f")})
	wantCode(t, err, "InvalidLaunchTemplateId.NotFound")
	if got := len(e.LaunchTemplates()); got != 5 {
		t.Errorf("%d templates left, want 5", got)
	}
}
