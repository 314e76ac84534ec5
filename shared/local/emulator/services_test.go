package emulator

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"k8s.io/utils/clock"
)

func TestSSM(t *testing.T) {
	e, _ := newTestEmulator(t)
	c := ssm.NewFromConfig(sdkConfig(t, e, carefulAttempts))
	ctx := context.Background()
	get := func(name string) (string, error) {
		out, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
		if err != nil {
			return "", err
		}
		p := out.Parameter
		if aws.ToString(p.Name) != name || p.Version == 0 || p.LastModifiedDate == nil || p.Type != ssmtypes.ParameterTypeString || aws.ToString(p.ARN) == "" {
			t.Errorf("parameter decoded wrong: %+v", p)
		}
		return aws.ToString(p.Value), nil
	}
	// The paths Karpenter resolves aliases with.
	for _, tc := range []struct{ alias, path, family, arch, variant string }{
		{"al2023@latest", "/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/recommended/image_id", "AL2023", "x86_64", "standard"},
		{"al2023@latest arm64", "/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/arm64/standard/recommended/image_id", "AL2023", "arm64", "standard"},
		{"al2023@latest nvidia", "/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/nvidia/recommended/image_id", "AL2023", "x86_64", "nvidia"},
		{"al2023@latest neuron", "/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/neuron/recommended/image_id", "AL2023", "x86_64", "neuron"},
		{"al2023@v20240807", "/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.37-v20240807/image_id", "AL2023", "x86_64", "standard"},
		{"al2@latest (1.32)", "/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id", "AL2", "x86_64", "standard"},
		{"al2@latest gpu", "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id", "AL2", "x86_64", "nvidia"},
		{"al2@v20240807 arm64", "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/amazon-eks-arm64-node-1.32-v20240807/image_id", "AL2", "arm64", "standard"},
		{"bottlerocket@latest", "/aws/service/bottlerocket/aws-k8s-1.37/x86_64/latest/image_id", "Bottlerocket", "x86_64", "standard"},
		{"bottlerocket@v1.20.0 arm64", "/aws/service/bottlerocket/aws-k8s-1.37/arm64/1.20.0/image_id", "Bottlerocket", "arm64", "standard"},
		{"bottlerocket@latest nvidia", "/aws/service/bottlerocket/aws-k8s-1.37-nvidia/x86_64/latest/image_id", "Bottlerocket", "x86_64", "nvidia"},
	} {
		t.Run(tc.alias, func(t *testing.T) {
			id, err := get(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			var im *Image
			for _, x := range e.Images() {
				if x.ID == id {
					im = &x
				}
			}
			if im == nil || im.Family != tc.family || im.Arch != tc.arch || im.Variant != tc.variant {
				t.Errorf("%s -> %s = %+v", tc.path, id, im)
			}
		})
	}
	_, err := get("/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/nope/image_id")
	wantCode(t, err, "ParameterNotFound")
	var nf *ssmtypes.ParameterNotFound
	if !errors.As(err, &nf) {
		t.Errorf("missing parameter: %T, want *types.ParameterNotFound", err)
	}

	// UpdateAMIs moves @latest: the drift a user sees after an AMI release.
	latest := "/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/recommended/image_id"
	before, _ := get(latest)
	v1, _ := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(latest)})
	pinned, _ := get("/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.37-v20240807/image_id")
	brBefore, _ := get("/aws/service/bottlerocket/aws-k8s-1.37/x86_64/latest/image_id")
	if imgs := e.UpdateAMIs("v20261001"); len(imgs) == 0 {
		t.Fatal("no images published")
	}
	after, _ := get(latest)
	v2, _ := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(latest)})
	pinnedAfter, _ := get("/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.37-v20240807/image_id")
	brAfter, _ := get("/aws/service/bottlerocket/aws-k8s-1.37/x86_64/latest/image_id")
	if after == before || pinned != pinnedAfter || v2.Parameter.Version != v1.Parameter.Version+1 || brAfter == brBefore {
		t.Errorf("UpdateAMIs: latest %s -> %s (v%d -> v%d), pinned %s -> %s, bottlerocket %s -> %s", before, after, v1.Parameter.Version, v2.Parameter.Version, pinned, pinnedAfter, brBefore, brAfter)
	}
	if _, err := get("/aws/service/bottlerocket/aws-k8s-1.37/x86_64/1.46.0/image_id"); err != nil {
		t.Errorf("new bottlerocket release not pinnable: %v", err)
	}
	many, err := c.GetParameters(ctx, &ssm.GetParametersInput{Names: []string{latest, "/nope"}})
	if err != nil || len(many.Parameters) != 1 || len(many.InvalidParameters) != 1 {
		t.Errorf("GetParameters: %+v %v", many, err)
	}
	byPath, err := c.GetParametersByPath(ctx, &ssm.GetParametersByPathInput{Path: aws.String("/aws/service/bottlerocket/aws-k8s-1.37/x86_64"), Recursive: aws.Bool(true)})
	if err != nil || len(byPath.Parameters) == 0 {
		t.Errorf("GetParametersByPath: %+v %v", byPath, err)
	}
}

func TestEKS(t *testing.T) {
	e, _ := newTestEmulator(t)
	if err := e.ConnectCluster(nil, "https://127.0.0.1:6443", []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")); err != nil {
		t.Fatal(err)
	}
	c := eks.NewFromConfig(sdkConfig(t, e, 1))
	ctx := context.Background()
	out, err := c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(e.ClusterName())})
	if err != nil {
		t.Fatal(err)
	}
	cl := out.Cluster
	ca, _ := base64.StdEncoding.DecodeString(aws.ToString(cl.CertificateAuthority.Data))
	if aws.ToString(cl.Name) != e.ClusterName() || aws.ToString(cl.Version) != "1.37" || aws.ToString(cl.Endpoint) != "https://127.0.0.1:6443" ||
		cl.Status != ekstypes.ClusterStatusActive || !strings.HasPrefix(string(ca), "-----BEGIN CERTIFICATE-----") ||
		aws.ToString(cl.KubernetesNetworkConfig.ServiceIpv4Cidr) != DefaultServiceCIDR || cl.KubernetesNetworkConfig.IpFamily != "ipv4" ||
		aws.ToString(cl.Arn) == "" || cl.CreatedAt == nil || len(cl.ResourcesVpcConfig.SubnetIds) != 6 || aws.ToString(cl.ResourcesVpcConfig.ClusterSecurityGroupId) == "" ||
		cl.AccessConfig == nil || cl.AccessConfig.AuthenticationMode != "API" {
		t.Errorf("cluster decoded wrong: %+v", cl)
	}
	_, err = c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("other")})
	var rnf *ekstypes.ResourceNotFoundException
	if !errors.As(err, &rnf) {
		t.Errorf("missing cluster: %T %v, want *types.ResourceNotFoundException", err, err)
	}
	list, err := c.ListClusters(ctx, &eks.ListClustersInput{})
	if err != nil || len(list.Clusters) != 1 {
		t.Errorf("ListClusters: %+v %v", list, err)
	}
}

func TestIAMInstanceProfiles(t *testing.T) {
	h := DefaultHostility()
	// The test asserts the outcome of every IAM write; a write whose answer
	// is lost is retried and fails (EntityAlreadyExists, LimitExceeded),
	// which TestLostAnswers covers.
	h.LostAnswerRate = 0
	e, _ := newTestEmulator(t, calm(h))
	c := iam.NewFromConfig(sdkConfig(t, e, carefulAttempts))
	ctx := context.Background()
	// Karpenter's spec.role path: create under the class's path, tag, add the role.
	name := e.ClusterName() + "_1234567890"
	path := "/karpenter/us-west-2/" + e.ClusterName() + "/uid-1/"
	created, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{
		InstanceProfileName: aws.String(name), Path: aws.String(path),
		Tags: []iamtypes.Tag{{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String("default")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := created.InstanceProfile
	if aws.ToString(p.InstanceProfileName) != name || aws.ToString(p.Path) != path || !strings.HasPrefix(aws.ToString(p.InstanceProfileId), "AIPA") ||
		aws.ToString(p.Arn) != "arn:aws:iam::123456789012:instance-profile"+path+name || p.CreateDate == nil || len(p.Tags) != 1 {
		t.Errorf("instance profile decoded wrong: %+v", p)
	}
	_, err = c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var exists *iamtypes.EntityAlreadyExistsException
	if !errors.As(err, &exists) {
		t.Errorf("duplicate: %T %v", err, err)
	}
	_, err = c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String("no-such-role")})
	var nse *iamtypes.NoSuchEntityException
	if !errors.As(err, &nse) {
		t.Errorf("unknown role: %T %v", err, err)
	}
	role := NodeRoleName(e.ClusterName())
	if _, err := c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)})
	var limit *iamtypes.LimitExceededException
	if !errors.As(err, &limit) {
		t.Errorf("second role: %T %v", err, err)
	}
	got, err := c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil || len(got.InstanceProfile.Roles) != 1 || aws.ToString(got.InstanceProfile.Roles[0].RoleName) != role || aws.ToString(got.InstanceProfile.Roles[0].Arn) == "" {
		t.Errorf("GetInstanceProfile: %+v %v", got, err)
	}
	if _, err := c.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: []iamtypes.Tag{{Key: aws.String("a"), Value: aws.String("b")}}}); err != nil {
		t.Fatal(err)
	}
	tags, err := c.ListInstanceProfileTags(ctx, &iam.ListInstanceProfileTagsInput{InstanceProfileName: aws.String(name)})
	if err != nil || len(tags.Tags) != 2 {
		t.Errorf("tags: %+v %v", tags, err)
	}
	for k := range 3 {
		if _, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("other-" + string(rune('a'+k))), Path: aws.String("/other/")}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for p := iam.NewListInstanceProfilesPaginator(c, &iam.ListInstanceProfilesInput{PathPrefix: aws.String("/karpenter/"), MaxItems: aws.Int32(1)}); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(out.InstanceProfiles)
	}
	all, _ := c.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{MaxItems: aws.Int32(2)})
	if n != 1 || len(all.InstanceProfiles) != 2 || !all.IsTruncated || aws.ToString(all.Marker) == "" {
		t.Errorf("ListInstanceProfiles: %d under /karpenter/, first page %d truncated %v", n, len(all.InstanceProfiles), all.IsTruncated)
	}
	_, err = c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var conflict *iamtypes.DeleteConflictException
	if !errors.As(err, &conflict) {
		t.Errorf("delete with a role: %T %v", err, err)
	}
	if _, err := c.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if !errors.As(err, &nse) {
		t.Errorf("deleted profile: %T %v", err, err)
	}
	if _, err := c.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)}); err != nil {
		t.Errorf("GetRole: %v", err)
	}
}

func TestSTSAndTokens(t *testing.T) {
	e, clk := newTestEmulator(t)
	ctx := context.Background()
	for _, name := range IdentityNames {
		cfg, err := e.AWSConfig(name, 1)
		if err != nil {
			t.Fatal(err)
		}
		out, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(out.Account) != DefaultAccountID || !strings.HasSuffix(aws.ToString(out.Arn), "-karpless-"+name+"/"+name) || !strings.HasPrefix(aws.ToString(out.UserId), "AROA") {
			t.Errorf("%s: %s %s %s", name, aws.ToString(out.Account), aws.ToString(out.Arn), aws.ToString(out.UserId))
		}
	}
	bad := sdkConfig(t, e, 1)
	bad.Credentials = aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKIAUNKNOWN", SecretAccessKey: "x"}, nil
	}))
	_, err := sts.NewFromConfig(bad).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	wantCode(t, err, "InvalidClientTokenId")

	token, err := e.Token(ctx, "provisioner")
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.VerifyToken(token)
	if err != nil || id.Name != "provisioner" || id.Groups[0] != ControllersGroup || !strings.HasPrefix(id.Username, "arn:aws:sts::123456789012:assumed-role/") {
		t.Fatalf("VerifyToken: %+v %v", id, err)
	}
	boot, _ := e.Token(ctx, "bootstrap")
	if id, err := e.VerifyToken(boot); err != nil || id.Groups[0] != "system:masters" {
		t.Errorf("bootstrap token: %+v %v", id, err)
	}
	// A token for another cluster carries a signature over another
	// x-k8s-aws-id: rejected.
	cfg, _ := e.AWSConfig("provisioner", 1)
	other, err := PresignEKSToken(ctx, cfg, "someone-else")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.VerifyToken(other); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Errorf("token for another cluster: %v", err)
	}
	// A wrong secret.
	cfg.Credentials = aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		id, _ := e.Identity("provisioner")
		return aws.Credentials{AccessKeyID: id.AccessKeyID, SecretAccessKey: "guess"}, nil
	}))
	forged, _ := PresignEKSToken(ctx, cfg, e.ClusterName())
	if _, err := e.VerifyToken(forged); err == nil {
		t.Error("forged token accepted")
	}
	for _, junk := range []string{"", "k8s-aws-v1.", "k8s-aws-v1.!!!", "Bearer x", TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte("https://evil.example.com/?Action=GetCallerIdentity"))} {
		if _, err := e.VerifyToken(junk); err == nil {
			t.Errorf("junk token %q accepted", junk)
		}
	}
	// Fifteen minutes later on the clock the token is expired.
	clk.Step(16 * time.Minute)
	if _, err := e.VerifyToken(token); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("old token: %v", err)
	}
	// A world whose clock runs ahead judges tokens on the clock they were
	// signed on (TokenClock): the same step leaves a fresh token valid.
	ahead, aheadClk := newTestEmulator(t, func(c *Config) { c.TokenClock = clock.RealClock{} })
	fresh, err := ahead.Token(ctx, "provisioner")
	if err != nil {
		t.Fatal(err)
	}
	aheadClk.Step(16 * time.Minute)
	if _, err := ahead.VerifyToken(fresh); err != nil {
		t.Errorf("token judged on the real clock, world clock 16 minutes ahead: %v", err)
	}
}

func TestAdmin(t *testing.T) {
	e, clk := newTestEmulator(t)
	ctx := context.Background()
	a := Admin{URL: e.URL()}
	c := ec2Client(t, e)
	lt := createLT(t, c, e, "karpenter.k8s.aws/admin")
	id := launchN(t, e, c, lt, 1, "spot")[0]
	got, err := a.Instances(ctx)
	if err != nil || len(got) != 1 || got[0].ID != id || got[0].Tags["karpenter.sh/nodepool"] != "default" {
		t.Fatalf("Instances: %+v %v", got, err)
	}
	if err := a.TerminateAfter(ctx, []string{id}, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	clk.Step(2 * time.Minute)
	_ = e.Step(ctx)
	if i, _ := e.Instance(id); i.State != StateShuttingDown {
		t.Errorf("scheduled termination: %s", i.State)
	}
	if err := a.TerminateAfter(ctx, []string{"i-0000000000000000f"}, time.Minute); err == nil {
		t.Error("unknown instance accepted")
	}
	if err := a.Inject(ctx, ICE("spot", "m5.large", "us-west-2a").Times(2)); err != nil {
		t.Fatal(err)
	}
	if err := a.Inject(ctx, Latency("DescribeImages", time.Second)); err != nil {
		t.Fatal(err)
	}
	fs, err := a.Faults(ctx)
	if err != nil || len(fs) != 2 || fs[0].Kind != FaultFleetError || fs[0].InstanceType != "m5.large" || fs[0].Count != 2 || fs[1].Latency != time.Second {
		t.Errorf("Faults: %+v %v", fs, err)
	}
	if err := a.ClearFaults(ctx); err != nil || len(e.Faults()) != 0 {
		t.Errorf("ClearFaults: %v, %d left", err, len(e.Faults()))
	}
	if err := a.Inject(ctx, Fault{Kind: FaultAPIError}); err == nil {
		t.Error("fault without a code accepted")
	}
	imgs, err := a.UpdateAMIs(ctx, "v20261101")
	if err != nil || len(imgs) == 0 {
		t.Errorf("UpdateAMIs: %d %v", len(imgs), err)
	}
	// createLT waited for its template: at least one lookup missed it.
	events, err := a.HostileEvents(ctx)
	if err != nil || events[EventLaunchTemplateLag] == 0 || events[EventLaunchTemplateLag] != e.HostileEvents()[EventLaunchTemplateLag] {
		t.Errorf("HostileEvents: %v %v, emulator says %v", events, err, e.HostileEvents())
	}
}
