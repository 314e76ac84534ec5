// Package launchtemplate renders user data per AMI family and keeps the EC2
// launch templates of launches: content-named, created on demand, reused, collected.
package launchtemplate

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube/eksauth"
)

// NamePrefix starts the name of every launch template Karpless (and
// Karpenter) creates.
const NamePrefix = "karpenter.k8s.aws/"

// MaxUserDataBytes is EC2's limit on decoded user data.
const MaxUserDataBytes = 16 * 1024

// ErrUserDataTooLarge means the rendered user data exceeds MaxUserDataBytes.
var ErrUserDataTooLarge = fmt.Errorf("user data exceeds EC2's limit of %d bytes", MaxUserDataBytes)

// EC2API is the part of the EC2 client the provider uses.
type EC2API interface {
	CreateLaunchTemplate(ctx context.Context, params *ec2.CreateLaunchTemplateInput, optFns ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DescribeLaunchTemplates(ctx context.Context, params *ec2.DescribeLaunchTemplatesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
	DeleteLaunchTemplate(ctx context.Context, params *ec2.DeleteLaunchTemplateInput, optFns ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error)
}

// Provider ensures and collects launch templates. It keeps no state between
// calls; EC2 is the only record (templates are found by name and tags).
type Provider struct {
	EC2 EC2API
	// Now is the clock for garbage collection; nil is time.Now.
	Now func() time.Time
	// Region is where the templates are made; some regions take no
	// IMDS IPv6 setting (ipv6MetadataUnsupported).
	Region string
}

// Request is one launch's worth of launch templates. Its fields match the
// provisioning tick's TemplateRequest, so that converts to it directly.
type Request struct {
	// NodeClass must have a resolved status (AMIs, security groups,
	// instance profile).
	NodeClass *awsv1.EC2NodeClass
	// NodeClaim gives the node labels, taints, startup taints, the nodepool
	// (label karpenter.sh/nodepool) and whether EFA is requested.
	NodeClaim *karpv1.NodeClaim
	// InstanceTypes the launch may use. Labels decide which AMI each type
	// gets (architecture, GPU, accelerator); Capacity's pods decide the
	// kubelet maxPods and vpc.amazonaws.com/efa the EFA interfaces.
	InstanceTypes []*scheduling.InstanceType
	// CapacityType is spot, on-demand or reserved.
	CapacityType string
	Cluster      eksauth.ClusterInfo
	// Seen, when set, holds the templates this invocation already found or
	// made; Ensure neither describes nor creates them again.
	Seen *Seen
	// CapacityReservationID is the reservation a reserved launch targets
	// and CapacityReservationType its type (default or capacity-block).
	CapacityReservationID, CapacityReservationType string
}

// Seen is one invocation's memory of the templates EC2 has confirmed. A
// name is a hash of the content, so a name seen once is the template asked
// for; the memory is kept for one invocation only, since garbage
// collection in another function may remove a template later (a launch
// that meets InvalidLaunchTemplateName.NotFoundException forgets it).
type Seen struct {
	mu    sync.Mutex
	names map[string]bool
}

func (s *Seen) has(name string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.names[name]
}

func (s *Seen) add(name string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names == nil {
		s.names = map[string]bool{}
	}
	s.names[name] = true
}

// Forget drops names, so that the next Ensure looks them up again.
func (s *Seen) Forget(names ...string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		delete(s.names, n)
	}
}

// LaunchTemplate is one ensured template and the instance types it serves.
type LaunchTemplate struct {
	Name          string
	ImageID       string
	InstanceTypes []string
}

// Ensure returns one launch template per group of instance types sharing
// an AMI, a kubelet maxPods and an EFA interface count, creating the
// templates that do not exist yet. Groups come out in the order of the
// class's AMIs (status.amis), then maxPods.
//
// A template's name is NamePrefix + a hash of everything in it (user data,
// volumes, network, tags, ...), so the same input always names the same
// template and Ensure reuses it: it looks the name up first and creates it
// only when missing. Two Lambdas creating the same name at once are fine:
// the loser's "already exists" is answered by the winner's template, which
// has the same content (it may not be listed yet: only its name is known).
func (p *Provider) Ensure(ctx context.Context, req Request) ([]LaunchTemplate, error) {
	inputs, err := build(req, p.Region)
	if err != nil {
		return nil, err
	}
	out := make([]LaunchTemplate, 0, len(inputs))
	for _, in := range inputs {
		name := aws.ToString(in.Input.LaunchTemplateName)
		if !req.Seen.has(name) {
			lt, err := p.ensure(ctx, in.Input)
			if err != nil {
				return nil, err
			}
			name = aws.ToString(lt.LaunchTemplateName)
			req.Seen.add(name)
		}
		out = append(out, LaunchTemplate{Name: name, ImageID: in.ImageID, InstanceTypes: in.InstanceTypes})
	}
	return out, nil
}

func (p *Provider) ensure(ctx context.Context, in *ec2.CreateLaunchTemplateInput) (*ec2types.LaunchTemplate, error) {
	name := aws.ToString(in.LaunchTemplateName)
	if lt, err := p.describe(ctx, name); err != nil || lt != nil {
		return lt, err
	}
	out, err := p.EC2.CreateLaunchTemplate(ctx, in)
	switch {
	case err == nil && out.LaunchTemplate != nil:
		return out.LaunchTemplate, nil
	case err == nil:
		return nil, fmt.Errorf("creating launch template %s: empty answer", name)
	case awserr.IsAlreadyExists(err):
		lt, derr := p.describe(ctx, name)
		if derr != nil {
			return nil, derr
		}
		if lt == nil {
			// EC2 lists a new template seconds after it exists. The name is
			// a hash of the content, so the template that exists is the one
			// asked for, and launches refer to it by name.
			return &ec2types.LaunchTemplate{LaunchTemplateName: aws.String(name)}, nil
		}
		return lt, nil
	}
	return nil, fmt.Errorf("creating launch template %s: %w", name, err)
}

// describe returns the named template, or nil when it does not exist.
func (p *Provider) describe(ctx context.Context, name string) (*ec2types.LaunchTemplate, error) {
	out, err := p.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err != nil {
		if awserr.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("describing launch template %s: %w", name, err)
	}
	for i := range out.LaunchTemplates {
		if aws.ToString(out.LaunchTemplates[i].LaunchTemplateName) == name {
			return &out.LaunchTemplates[i], nil
		}
	}
	return nil, nil
}

// Resolved is one launch template's request, before it is created.
type Resolved struct {
	Input         *ec2.CreateLaunchTemplateInput
	ImageID       string
	InstanceTypes []string
	MaxPods       int32
	EFA           int32
	// UserData is the decoded user data (Input carries it base64-encoded).
	UserData string
}

// Build computes the launch template requests of req without calling AWS,
// for a region that takes every setting (BuildIn names the region).
func Build(req Request) ([]Resolved, error) { return build(req, "") }

// BuildIn is Build for the templates of a region.
func BuildIn(region string, req Request) ([]Resolved, error) { return build(req, region) }

func build(req Request, region string) ([]Resolved, error) {
	nc, claim := req.NodeClass, req.NodeClaim
	if nc == nil || claim == nil {
		return nil, errors.New("launch template request needs a node class and a node claim")
	}
	st := nc.Status
	switch {
	case len(st.AMIs) == 0:
		return nil, fmt.Errorf("EC2NodeClass %s has no resolved AMIs", nc.Name)
	case len(st.SecurityGroups) == 0:
		return nil, fmt.Errorf("EC2NodeClass %s has no resolved security groups", nc.Name)
	case st.InstanceProfile == "":
		return nil, fmt.Errorf("EC2NodeClass %s has no resolved instance profile", nc.Name)
	case req.Cluster.Name == "":
		return nil, errors.New("launch template request has no cluster name")
	}
	family := nodeclass.Family(nc)
	wantsEFA := false
	if _, ok := claim.Spec.Resources.Requests[wellknown.ResourceEFA]; ok {
		wantsEFA = true
	}

	type groupKey struct {
		ami     int
		maxPods int32
		efa     int32
	}
	groups := map[groupKey][]string{}
	for _, it := range req.InstanceTypes {
		if it == nil {
			continue
		}
		ami := -1
		for i := range st.AMIs {
			if Compatible(it.Labels, st.AMIs[i].Requirements) {
				ami = i
				break
			}
		}
		if ami < 0 {
			continue
		}
		key := groupKey{ami: ami}
		switch {
		case family == catalog.FamilyCustom:
		case nc.Spec.Kubelet != nil && nc.Spec.Kubelet.MaxPods != nil:
			// The kubelet gets the class's maxPods as written, as
			// Karpenter passes it; the types' pod capacity may be lower
			// (podsPerCore), which the kubelet applies itself.
			key.maxPods = *nc.Spec.Kubelet.MaxPods
		default:
			if q, ok := it.Capacity[corev1.ResourcePods]; ok && q.Value() > 0 && q.Value() <= math.MaxInt32 {
				key.maxPods = int32(q.Value())
			}
		}
		if wantsEFA {
			if q, ok := it.Capacity[wellknown.ResourceEFA]; ok && q.Value() > 0 && q.Value() <= 64 {
				key.efa = int32(q.Value())
			}
		}
		groups[key] = append(groups[key], it.Name)
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("none of the %d instance types meets the requirements of the AMIs of EC2NodeClass %s", len(req.InstanceTypes), nc.Name)
	}
	keys := make([]groupKey, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.ami != b.ami {
			return a.ami < b.ami
		}
		if a.maxPods != b.maxPods {
			return a.maxPods < b.maxPods
		}
		return a.efa < b.efa
	})

	labels := nodeLabels(nc, claim, req.CapacityType, family)
	taints := registerTaints(claim)
	tags := Tags(nc, claim, req.Cluster.Name)
	out := make([]Resolved, 0, len(keys))
	for _, k := range keys {
		kubelet := &awsv1.KubeletConfiguration{}
		if nc.Spec.Kubelet != nil {
			kubelet = nc.Spec.Kubelet.DeepCopy()
		}
		if len(kubelet.ClusterDNS) == 0 && req.Cluster.ClusterDNS != "" {
			kubelet.ClusterDNS = []string{req.Cluster.ClusterDNS}
		}
		if k.maxPods > 0 {
			kubelet.MaxPods = aws.Int32(k.maxPods)
		}
		ud, err := UserData(UserDataInput{
			Family: family, Cluster: req.Cluster, Kubelet: kubelet, Labels: labels, Taints: taints,
			Custom: nc.Spec.UserData, InstanceStorePolicy: nc.Spec.InstanceStorePolicy,
			BottlerocketDefaultBind: SupportsDefaultBind(BottlerocketAMIVersion(nc.Spec.AMISelectorTerms, st.AMIs)),
		})
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: user data: %w", nc.Name, err)
		}
		if len(ud) > MaxUserDataBytes {
			return nil, fmt.Errorf("EC2NodeClass %s: user data is %d bytes: %w", nc.Name, len(ud), ErrUserDataTooLarge)
		}
		ami := st.AMIs[k.ami].ID
		in := &ec2.CreateLaunchTemplateInput{
			LaunchTemplateData: templateData(nc, family, req.Cluster, req.CapacityType, ami, ud, k.efa, tags),
			TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: ec2Tags(tags)}},
		}
		in.LaunchTemplateData.Placement = placement(nc, claim)
		capacityReservation(in.LaunchTemplateData, req)
		launchOptions(in.LaunchTemplateData, claim, region)
		in.LaunchTemplateName = aws.String(Name(in))
		out = append(out, Resolved{Input: in, ImageID: ami, InstanceTypes: groups[k], MaxPods: k.maxPods, EFA: k.efa, UserData: ud})
	}
	return out, nil
}

// Name is the content address of a launch template request:
// NamePrefix + the decimal first 8 bytes of SHA-256 over its canonical JSON
// (the request's own name left out).
func Name(in *ec2.CreateLaunchTemplateInput) string {
	c := *in
	c.LaunchTemplateName = nil
	c.ClientToken = nil
	raw, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("launch template input is not JSON: %v", err)) // SDK input types always are
	}
	sum := sha256.Sum256(raw)
	return NamePrefix + strconv.FormatUint(binary.BigEndian.Uint64(sum[:8]), 10)
}

// Tags are the tags of launch templates and of what they launch, as
// Karpenter sets them: spec.tags plus kubernetes.io/cluster/<cluster>=owned,
// karpenter.sh/nodepool, eks:eks-cluster-name and
// karpenter.k8s.aws/ec2nodeclass, which win over spec.tags.
func Tags(nc *awsv1.EC2NodeClass, claim *karpv1.NodeClaim, cluster string) map[string]string {
	tags := make(map[string]string, len(nc.Spec.Tags)+4)
	for k, v := range nc.Spec.Tags {
		tags[k] = v
	}
	tags[wellknown.ClusterTagKey(cluster)] = wellknown.OwnedTagValue
	tags[wellknown.NodePoolTagKey] = claim.Labels[wellknown.NodePoolLabel]
	tags[wellknown.EKSClusterNameTagKey] = cluster
	tags[wellknown.EC2NodeClassTagKey] = nc.Name
	return tags
}

func ec2Tags(m map[string]string) []ec2types.Tag {
	out := make([]ec2types.Tag, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

// nodeLabels are the labels the kubelet registers the node with: the
// NodeClaim's, the capacity type, the nodepool and node class, and
// karpenter.sh/do-not-sync-taints (all families but Custom); minus those
// the NodeRestriction admission plugin would refuse from a kubelet.
func nodeLabels(nc *awsv1.EC2NodeClass, claim *karpv1.NodeClaim, capacityType, family string) map[string]string {
	labels := map[string]string{}
	for k, v := range claim.Labels {
		labels[k] = v
	}
	if capacityType != "" {
		labels[wellknown.CapacityTypeLabel] = capacityType
	}
	if _, ok := labels[wellknown.EC2NodeClassLabel]; !ok {
		labels[wellknown.EC2NodeClassLabel] = nc.Name
	}
	if family != catalog.FamilyCustom {
		labels[wellknown.DoNotSyncTaintsLabel] = "true"
	}
	for k := range labels {
		if forbiddenNodeLabel(k) {
			delete(labels, k)
		}
	}
	return labels
}

// forbiddenNodeLabel reports labels under kubernetes.io, k8s.io (and
// node-restriction.kubernetes.io) that a kubelet may not set on itself.
func forbiddenNodeLabel(key string) bool {
	domain, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}

// registerTaints are the NodeClaim's taints and startup taints, plus
// karpenter.sh/unregistered:NoExecute when absent.
func registerTaints(claim *karpv1.NodeClaim) []corev1.Taint {
	taints := append(append([]corev1.Taint(nil), claim.Spec.Taints...), claim.Spec.StartupTaints...)
	for _, t := range taints {
		if t.MatchTaint(&wellknown.UnregisteredNoExecuteTaint) {
			return taints
		}
	}
	return append(taints, wellknown.UnregisteredNoExecuteTaint)
}

// Compatible reports whether an instance type with these (single-valued)
// labels meets every requirement of an AMI.
func Compatible(labels map[string]string, reqs []corev1.NodeSelectorRequirement) bool {
	for _, r := range reqs {
		v, has := labels[r.Key]
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			if !has || !contains(r.Values, v) {
				return false
			}
		case corev1.NodeSelectorOpNotIn:
			if has && contains(r.Values, v) {
				return false
			}
		case corev1.NodeSelectorOpExists:
			if !has {
				return false
			}
		case corev1.NodeSelectorOpDoesNotExist:
			if has {
				return false
			}
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
			if !has || len(r.Values) != 1 {
				return false
			}
			n, err1 := strconv.ParseInt(v, 10, 64)
			bound, err2 := strconv.ParseInt(r.Values[0], 10, 64)
			if err1 != nil || err2 != nil || (r.Operator == corev1.NodeSelectorOpGt && n <= bound) || (r.Operator == corev1.NodeSelectorOpLt && n >= bound) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// templateData is the launch template content.
func templateData(nc *awsv1.EC2NodeClass, family string, cluster eksauth.ClusterInfo, capacityType, ami, userData string, efa int32, tags map[string]string) *ec2types.RequestLaunchTemplateData {
	groups := make([]string, 0, len(nc.Status.SecurityGroups))
	for _, g := range nc.Status.SecurityGroups {
		groups = append(groups, g.ID)
	}
	dataTags := []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: ec2Tags(tags)}}
	if capacityType == wellknown.CapacityTypeSpot {
		dataTags = append(dataTags, ec2types.LaunchTemplateTagSpecificationRequest{ResourceType: ec2types.ResourceTypeSpotInstancesRequest, Tags: ec2Tags(tags)})
	}
	d := &ec2types.RequestLaunchTemplateData{
		ImageId:             aws.String(ami),
		UserData:            aws.String(base64.StdEncoding.EncodeToString([]byte(userData))),
		IamInstanceProfile:  &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(nc.Status.InstanceProfile)},
		Monitoring:          &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(aws.ToBool(nc.Spec.DetailedMonitoring))},
		MetadataOptions:     metadataOptions(nc.Spec.MetadataOptions, cluster.IPFamily == "ipv6"),
		BlockDeviceMappings: blockDeviceMappings(nc.Spec.BlockDeviceMappings, family),
		TagSpecifications:   dataTags,
	}
	if c := nc.Spec.CPUOptions; c != nil && c.NestedVirtualization != nil {
		d.CpuOptions = &ec2types.LaunchTemplateCpuOptionsRequest{NestedVirtualization: ec2types.NestedVirtualizationSpecification(*c.NestedVirtualization)}
	}
	if nis := networkInterfaces(nc, cluster.IPFamily == "ipv6", efa, groups); nis != nil {
		d.NetworkInterfaces = nis
	} else {
		d.SecurityGroupIds = groups
	}
	return d
}

// capacityReservation sets the template's CapacityReservationSpecification
// as Karpenter v1.14.1 does with its ReservedCapacity gate (on by
// default): a reserved launch targets its reservation, capacity
// reservations only (and a Capacity Block's market type); every other
// launch says none, so an open reservation meant for reserved launches is
// not used up by on-demand ones that would not be labelled reserved.
func capacityReservation(d *ec2types.RequestLaunchTemplateData, req Request) {
	if req.CapacityType != wellknown.CapacityTypeReserved || req.CapacityReservationID == "" {
		d.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{CapacityReservationPreference: ec2types.CapacityReservationPreferenceNone}
		return
	}
	d.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
		CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
		CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(req.CapacityReservationID)},
	}
	switch {
	case req.CapacityReservationType == "capacity-block":
		d.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
	case interruptibleReservation(req):
		// EC2 launches into an interruptible reservation only with its
		// market type, as Karpenter sets it.
		d.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeInterruptibleCapacityReservation}
	}
}

// interruptibleReservation reports whether the reservation req targets is
// one the class's status lists as interruptible.
func interruptibleReservation(req Request) bool {
	if req.NodeClass == nil {
		return false
	}
	for _, cr := range req.NodeClass.Status.CapacityReservations {
		if cr.ID == req.CapacityReservationID {
			return cr.Interruptible
		}
	}
	return false
}

// metadataOptions fills what the class leaves unset with IMDSv2 required,
// hop limit 1 and the IPv6 endpoint on for IPv6 clusters. Instance tags in
// IMDS stay disabled: Karpenter's tag keys (kubernetes.io/cluster/...) are
// not valid IMDS tag names, and an account default could otherwise turn
// them on and break launches.
func metadataOptions(m *awsv1.MetadataOptions, ipv6 bool) *ec2types.LaunchTemplateInstanceMetadataOptionsRequest {
	endpoint, proto6, tokens, hops := "enabled", "disabled", "required", int64(1)
	if ipv6 {
		proto6 = "enabled"
	}
	if m != nil {
		if m.HTTPEndpoint != nil {
			endpoint = *m.HTTPEndpoint
		}
		if m.HTTPProtocolIPv6 != nil {
			proto6 = *m.HTTPProtocolIPv6
		}
		if m.HTTPTokens != nil {
			tokens = *m.HTTPTokens
		}
		if m.HTTPPutResponseHopLimit != nil {
			hops = *m.HTTPPutResponseHopLimit
		}
	}
	return &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
		HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointState(endpoint),
		HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(proto6),
		HttpTokens:              ec2types.LaunchTemplateHttpTokensState(tokens),
		HttpPutResponseHopLimit: aws.Int32(int32(min(max(hops, 1), 64))),
		InstanceMetadataTags:    ec2types.LaunchTemplateInstanceMetadataTagsStateDisabled,
	}
}

// DefaultBlockDeviceMappings are the volumes of a family when the class
// names none: a 20Gi encrypted gp3 root for AL2023 and AL2; a 4Gi OS volume
// and a 20Gi data volume for Bottlerocket; a 50Gi root for Windows; none for
// Custom (the AMI's own mappings apply).
func DefaultBlockDeviceMappings(family string) []*awsv1.BlockDeviceMapping {
	ebs := func(size string) *awsv1.BlockDevice {
		q := resource.MustParse(size)
		return &awsv1.BlockDevice{Encrypted: aws.Bool(true), VolumeType: aws.String("gp3"), VolumeSize: &q}
	}
	switch {
	case family == catalog.FamilyCustom:
		return nil
	case family == catalog.FamilyBottlerocket:
		root := catalog.DefaultRootVolume(family)
		return []*awsv1.BlockDeviceMapping{
			{DeviceName: aws.String("/dev/xvda"), EBS: ebs("4Gi")},
			{DeviceName: aws.String(catalog.EphemeralDevice(family)), EBS: ebs(root.String())},
		}
	default:
		root := catalog.DefaultRootVolume(family)
		return []*awsv1.BlockDeviceMapping{{DeviceName: aws.String(catalog.EphemeralDevice(family)), EBS: ebs(root.String())}}
	}
}

func blockDeviceMappings(spec []*awsv1.BlockDeviceMapping, family string) []ec2types.LaunchTemplateBlockDeviceMappingRequest {
	bdms := spec
	if len(bdms) == 0 {
		bdms = DefaultBlockDeviceMappings(family)
	}
	var out []ec2types.LaunchTemplateBlockDeviceMappingRequest
	for _, b := range bdms {
		if b == nil {
			continue
		}
		m := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: b.DeviceName}
		if e := b.EBS; e != nil {
			m.Ebs = &ec2types.LaunchTemplateEbsBlockDeviceRequest{
				DeleteOnTermination:      e.DeleteOnTermination,
				Encrypted:                e.Encrypted,
				KmsKeyId:                 e.KMSKeyID,
				SnapshotId:               e.SnapshotID,
				VolumeInitializationRate: e.VolumeInitializationRate,
				VolumeType:               ec2types.VolumeType(aws.ToString(e.VolumeType)),
			}
			if e.IOPS != nil && *e.IOPS > 0 {
				m.Ebs.Iops = aws.Int32(int32(*e.IOPS))
			}
			if e.Throughput != nil && *e.Throughput > 0 {
				m.Ebs.Throughput = aws.Int32(int32(*e.Throughput))
			}
			if e.VolumeSize != nil {
				m.Ebs.VolumeSize = aws.Int32(int32(math.Ceil(e.VolumeSize.AsApproximateFloat64() / (1 << 30))))
			}
		}
		out = append(out, m)
	}
	return out
}

// networkInterfaces returns explicit interfaces when the class needs them
// (spec.networkInterfaces, EFA, a public IP choice, prefix delegation, IPv6,
// connection tracking), else nil: then the template carries
// SecurityGroupIds and CreateFleet's subnet override places the primary
// interface, which is simpler and equivalent.
func networkInterfaces(nc *awsv1.EC2NodeClass, ipv6 bool, efa int32, groups []string) []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
	s := nc.Spec
	var ct *ec2types.ConnectionTrackingSpecificationRequest
	if c := s.ConnectionTracking; c != nil && (c.TCPEstablishedTimeout != nil || c.UDPStreamTimeout != nil || c.UDPTimeout != nil) {
		ct = &ec2types.ConnectionTrackingSpecificationRequest{TcpEstablishedTimeout: c.TCPEstablishedTimeout, UdpStreamTimeout: c.UDPStreamTimeout, UdpTimeout: c.UDPTimeout}
	}
	primary := func(ni *ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest) {
		ni.Groups = groups
		ni.AssociatePublicIpAddress = s.AssociatePublicIPAddress
		ni.ConnectionTrackingSpecification = ct
		if ipv6 {
			ni.Ipv6PrefixCount = s.IPPrefixCount
			ni.PrimaryIpv6 = aws.Bool(true)
			ni.Ipv6AddressCount = aws.Int32(1)
		} else {
			ni.Ipv4PrefixCount = s.IPPrefixCount
		}
	}
	switch {
	case len(s.NetworkInterfaces) > 0:
		var out []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest
		for _, n := range s.NetworkInterfaces {
			if n == nil {
				continue
			}
			ni := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
				NetworkCardIndex: aws.Int32(n.NetworkCardIndex), DeviceIndex: aws.Int32(n.DeviceIndex),
				InterfaceType: aws.String(string(n.InterfaceType)), Groups: groups,
			}
			if n.InterfaceType != awsv1.InterfaceTypeEFAOnly {
				primary(&ni)
			}
			out = append(out, ni)
		}
		return out
	case efa > 0:
		out := make([]ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, efa)
		for i := range out {
			device := int32(1)
			if i == 0 {
				device = 0
			}
			out[i] = ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
				NetworkCardIndex: aws.Int32(int32(i)), DeviceIndex: aws.Int32(device), InterfaceType: aws.String("efa"),
			}
			primary(&out[i])
		}
		return out
	case s.AssociatePublicIPAddress != nil, s.IPPrefixCount != nil, ipv6, ct != nil:
		ni := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{DeviceIndex: aws.Int32(0)}
		primary(&ni)
		return []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{ni}
	}
	return nil
}
