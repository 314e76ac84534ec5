package emulator

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// Pinned AMI releases published by the default world besides the current
// one, so that pinned aliases (al2023@v20240807, bottlerocket@v1.20.0)
// resolve.
var (
	PinnedEKSReleases          = []string{"v20240807", "v20250715"}
	PinnedBottlerocketReleases = []string{"1.20.0", "1.30.0"}
)

// Current releases in a fresh default world; UpdateAMIs moves them.
const (
	CurrentEKSRelease          = "v20260801"
	CurrentBottlerocketRelease = "1.45.0"
)

// eksAMIAccount owns the EKS-optimized and Bottlerocket images in us-west-2.
const eksAMIAccount = "602401143452"

// windowsAMIAccount owns Amazon's Windows images (alias amazon), the
// EKS-optimized ones included.
const windowsAMIAccount = "801119661308"

// windowsServers are the Windows Server releases EKS publishes optimized
// AMIs of, with the first Kubernetes minor each is published for (Karpenter
// refuses windows2025 aliases below 1.35), and the image family, spelled as
// EC2NodeClass spec.amiFamily spells it.
var windowsServers = []struct {
	year, family string
	minMinor     int
}{
	{"2019", "Windows2019", 0},
	{"2022", "Windows2022", 0},
	{"2025", "Windows2025", 35},
}

// lastAL2Version is the last Kubernetes minor EKS publishes AL2 AMIs for.
const lastAL2Version = "1.32"

// seed builds the default world; callers hold no lock (New runs it before
// serving).
func (e *Emulator) seed() {
	e.mu.Lock()
	defer e.mu.Unlock()
	cluster := e.cfg.ClusterName
	e.world.vpcID = e.newID("vpc")
	for i, z := range e.cfg.Zones {
		priv := map[string]string{
			wellknown.DiscoveryTagKey: cluster, "Name": fmt.Sprintf("%s-private-%s", cluster, z.Name),
			"kubernetes.io/role/internal-elb": "1",
		}
		if _, err := e.addSubnet(z, fmt.Sprintf("10.0.%d.0/19", i*32), priv); err != nil {
			panic(err) // fixed CIDRs
		}
	}
	for i, z := range e.cfg.Zones {
		if i >= 8 {
			break
		}
		pub := map[string]string{"Name": fmt.Sprintf("%s-public-%s", cluster, z.Name), "kubernetes.io/role/elb": "1"}
		s, err := e.addSubnet(z, fmt.Sprintf("10.0.%d.0/20", 128+i*16), pub)
		if err != nil {
			panic(err)
		}
		s.MapPublicIP = true
	}
	clusterSG := e.addSG("eks-cluster-sg-"+cluster, "EKS created security group applied to ENI that is attached to EKS Control Plane master nodes, as well as any managed workloads.", map[string]string{
		wellknown.DiscoveryTagKey:        cluster,
		wellknown.ClusterTagKey(cluster): wellknown.OwnedTagValue,
		"aws:eks:cluster-name":           cluster,
		"Name":                           "eks-cluster-sg-" + cluster,
	})
	e.addSG("default", "default VPC security group", nil)

	for _, rel := range PinnedEKSReleases {
		e.publishEKSAMIs(rel, false)
	}
	e.publishEKSAMIs(CurrentEKSRelease, true)
	for _, rel := range PinnedBottlerocketReleases {
		e.publishBottlerocket(rel, false)
	}
	e.publishBottlerocket(CurrentBottlerocketRelease, true)
	e.world.bottlerocketMinor = minorOf(CurrentBottlerocketRelease)
	// After the others, so that their image ids stay what they were.
	e.publishWindowsAMIs(CurrentEKSRelease)

	dlq := e.createQueue(cluster+"-dlq", nil)
	e.createQueue(cluster, map[string]string{
		"MessageRetentionPeriod": "300",
		"RedrivePolicy":          fmt.Sprintf(`{"deadLetterTargetArn":"%s","maxReceiveCount":5}`, dlq.arn),
	})

	var subnetIDs []string
	for _, s := range e.world.subnets {
		subnetIDs = append(subnetIDs, s.ID)
	}
	e.world.clusters[cluster] = &eksCluster{
		Name: cluster, Version: e.cfg.KubernetesVersion, Status: "ACTIVE",
		ARN:         fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", e.cfg.Region, e.cfg.AccountID, cluster),
		RoleARN:     fmt.Sprintf("arn:aws:iam::%s:role/%s-cluster", e.cfg.AccountID, cluster),
		ServiceCIDR: DefaultServiceCIDR, Created: e.now(),
		VPCID: e.world.vpcID, SubnetIDs: subnetIDs, ClusterSG: clusterSG.ID,
		Tags: map[string]string{},
	}
	e.addRole(NodeRoleName(cluster), "/")
	for _, id := range defaultIdentities(e.cfg.AccountID, cluster) {
		e.addRole(roleNameOf(id.RoleARN), "/")
		e.world.identities[id.AccessKeyID] = id
	}
}

// NodeRoleName is the node IAM role of the default world.
func NodeRoleName(cluster string) string { return "KarpenterNodeRole-" + cluster }

type amiFlavor struct {
	arch    string // x86_64 | arm64
	variant string // standard | nvidia | neuron
}

var al2023Flavors = []amiFlavor{{"x86_64", "standard"}, {"arm64", "standard"}, {"x86_64", "nvidia"}, {"arm64", "nvidia"}, {"x86_64", "neuron"}}

// publishEKSAMIs registers AL2023 (for the cluster's version) and AL2 (for
// the last version that has it) images of a release and their SSM
// parameters; current also points recommended at them. Callers hold e.mu.
func (e *Emulator) publishEKSAMIs(release string, current bool) []*Image {
	var out []*Image
	k8s := e.cfg.KubernetesVersion
	created := releaseDate(release, e.now())
	for _, f := range al2023Flavors {
		name := fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", f.arch, f.variant, k8s, release)
		im := e.publicImage(name, "EKS-optimized Kubernetes node based on Amazon Linux 2023, ("+f.variant+")", f.arch, "AL2023", f.variant, k8s, release, created)
		base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/", k8s, f.arch, f.variant)
		e.putParam(base+name+"/image_id", im.ID, "aws:ec2:image")
		if current {
			e.putParam(base+"recommended/image_id", im.ID, "aws:ec2:image")
		}
		out = append(out, im)
	}
	al2 := lastAL2Version
	if versionLess(k8s, al2) {
		al2 = k8s
	}
	for _, f := range []struct{ path, prefix, arch, variant string }{
		{"amazon-linux-2", "amazon-eks-node", "x86_64", "standard"},
		{"amazon-linux-2-arm64", "amazon-eks-arm64-node", "arm64", "standard"},
		{"amazon-linux-2-gpu", "amazon-eks-gpu-node", "x86_64", "nvidia"},
	} {
		name := fmt.Sprintf("%s-%s-%s", f.prefix, al2, release)
		im := e.publicImage(name, "EKS Kubernetes Worker AMI with AmazonLinux2 image", f.arch, "AL2", f.variant, al2, release, created)
		base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/%s/", al2, f.path)
		e.putParam(base+name+"/image_id", im.ID, "aws:ec2:image")
		if current {
			e.putParam(base+"recommended/image_id", im.ID, "aws:ec2:image")
		}
		out = append(out, im)
	}
	return out
}

// publishWindowsAMIs registers the EKS-optimized Windows Server images
// (Core and Full, x86_64 only: EKS publishes no arm64 Windows) of a
// release for the cluster's version, and points their SSM parameters at
// them. Windows has no pinned releases: only
// /aws/service/ami-windows-latest/Windows_Server-<year>-English-<Core|Full>-EKS_Optimized-<k8s>/image_id,
// the path Karpenter's windows<year>@latest alias reads (Core), exists,
// and it always names the newest image. Callers hold e.mu.
func (e *Emulator) publishWindowsAMIs(release string) []*Image {
	var out []*Image
	k8s := e.cfg.KubernetesVersion
	created := releaseDate(release, e.now())
	for _, w := range windowsServers {
		if minorOf(k8s) < w.minMinor {
			continue
		}
		for _, edition := range []string{"Core", "Full"} {
			base := fmt.Sprintf("Windows_Server-%s-English-%s-EKS_Optimized-%s", w.year, edition, k8s)
			im := e.publicImage(base+"-"+created.Format("2006.01.02"),
				fmt.Sprintf("Microsoft Windows Server %s %s optimized for EKS and provided by Amazon", w.year, edition),
				"x86_64", w.family, strings.ToLower(edition), k8s, release, created)
			im.OwnerID = windowsAMIAccount
			e.putParam("/aws/service/ami-windows-latest/"+base+"/image_id", im.ID, "aws:ec2:image")
			out = append(out, im)
		}
	}
	return out
}

// IsWindows reports whether the image is a Windows one (EC2's platform
// "windows").
func (im Image) IsWindows() bool { return strings.HasPrefix(im.Family, "Windows") }

// publishBottlerocket registers Bottlerocket images of a release (x.y.z)
// and their parameters; current also moves latest. Callers hold e.mu.
func (e *Emulator) publishBottlerocket(release string, current bool) []*Image {
	var out []*Image
	k8s := e.cfg.KubernetesVersion
	created := e.now().Add(-time.Duration(50-minorOf(release)) * 24 * time.Hour)
	for _, f := range []struct{ suffix, arch, variant string }{
		{"", "x86_64", "standard"}, {"", "arm64", "standard"}, {"-nvidia", "x86_64", "nvidia"}, {"-nvidia", "arm64", "nvidia"},
	} {
		variant := "aws-k8s-" + k8s + f.suffix
		name := fmt.Sprintf("bottlerocket-%s-%s-v%s-%s", variant, f.arch, release, e.hexID("br", 8))
		im := e.publicImage(name, "Bottlerocket "+variant+" "+release, f.arch, "Bottlerocket", f.variant, k8s, release, created)
		base := fmt.Sprintf("/aws/service/bottlerocket/%s/%s/", variant, f.arch)
		e.putParam(base+release+"/image_id", im.ID, "aws:ec2:image")
		if current {
			e.putParam(base+"latest/image_id", im.ID, "aws:ec2:image")
		}
		out = append(out, im)
	}
	return out
}

func (e *Emulator) publicImage(name, desc, arch, family, variant, k8s, release string, created time.Time) *Image {
	im := &Image{
		ID: e.newID("ami"), Name: name, Description: desc, Arch: arch, Family: family, Variant: variant,
		KubernetesVersion: k8s, Release: release, OwnerID: eksAMIAccount, OwnerAlias: "amazon",
		CreationDate: created, State: "available", Tags: map[string]string{},
	}
	e.world.images = append(e.world.images, im)
	return im
}

// UpdateAMIs publishes a new EKS AMI release (vYYYYMMDD) for every family
// and flavour (Windows included), and the next Bottlerocket minor release,
// and moves the recommended/latest SSM parameters to them: @latest aliases now resolve
// to new images, which is what AMI drift looks like.
func (e *Emulator) UpdateAMIs(release string) []Image {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Image
	for _, im := range e.publishEKSAMIs(release, true) {
		out = append(out, *im)
	}
	e.world.bottlerocketMinor++
	for _, im := range e.publishBottlerocket(fmt.Sprintf("1.%d.0", e.world.bottlerocketMinor), true) {
		out = append(out, *im)
	}
	for _, im := range e.publishWindowsAMIs(release) {
		out = append(out, *im)
	}
	e.log.Info("AMIs updated", "release", release, "images", len(out))
	return out
}

// releaseDate reads vYYYYMMDD; other forms get now.
func releaseDate(release string, now time.Time) time.Time {
	if t, err := time.Parse("20060102", strings.TrimPrefix(release, "v")); err == nil {
		return t.UTC()
	}
	return now
}

func minorOf(v string) int {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(parts[1])
	return n
}

// versionLess compares Kubernetes minor versions "1.32" < "1.37".
func versionLess(a, b string) bool { return minorOf(a) < minorOf(b) }
