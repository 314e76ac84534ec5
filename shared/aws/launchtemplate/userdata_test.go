package launchtemplate

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube/eksauth"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var testCluster = eksauth.ClusterInfo{
	Name: "test-cluster", Endpoint: "https://test-cluster", CABundle: "Y2EtYnVuZGxlCg==",
	ServiceCIDR: "10.100.0.0/16", IPFamily: "ipv4", KubernetesVersion: "1.33", ClusterDNS: "10.100.0.10",
}

var testLabels = map[string]string{
	wellknown.EC2NodeClassLabel:    "default",
	wellknown.CapacityTypeLabel:    "on-demand",
	wellknown.DoNotSyncTaintsLabel: "true",
	wellknown.NodePoolLabel:        "general",
	"testing/cluster":              "unspecified",
}

var testTaints = []corev1.Taint{
	{Key: "foo", Value: "bar", Effect: corev1.TaintEffectNoExecute},
	{Key: "baz", Value: "bin", Effect: corev1.TaintEffectNoExecute},
	wellknown.UnregisteredNoExecuteTaint,
}

func kubelet110() *awsv1.KubeletConfiguration {
	return &awsv1.KubeletConfiguration{ClusterDNS: []string{"10.100.0.10"}, MaxPods: aws.Int32(110)}
}

func fullKubelet() *awsv1.KubeletConfiguration {
	return &awsv1.KubeletConfiguration{
		ClusterDNS:                  []string{"10.100.0.10"},
		MaxPods:                     aws.Int32(58),
		PodsPerCore:                 aws.Int32(10),
		SystemReserved:              map[string]string{"cpu": "100m", "memory": "100Mi"},
		KubeReserved:                map[string]string{"cpu": "200m", "memory": "200Mi", "ephemeral-storage": "1Gi"},
		EvictionHard:                map[string]string{"memory.available": "5%", "nodefs.available": "10%"},
		EvictionSoft:                map[string]string{"memory.available": "10%"},
		EvictionSoftGracePeriod:     map[string]metav1.Duration{"memory.available": {Duration: time.Minute}},
		EvictionMaxPodGracePeriod:   aws.Int32(60),
		ImageGCHighThresholdPercent: aws.Int32(85),
		ImageGCLowThresholdPercent:  aws.Int32(80),
		CPUCFSQuota:                 aws.Bool(false),
	}
}

var raid0 = func() *awsv1.InstanceStorePolicy { p := awsv1.InstanceStorePolicyRAID0; return &p }()

const (
	shellInput = "#!/bin/bash\necho \"Hello, AL2023!\"\n"
	mimeInput  = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="BOUNDARY"

--BOUNDARY
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      shutdownGracePeriod: 30s
--BOUNDARY
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo "Hello, AL2023!"
--BOUNDARY--
`
	yamlInput = `apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      maxPods: 42
`
	bottlerocketInput = `[settings.kubernetes]
api-server = 'replaceme'
cloud-provider = 'external'
cluster-name = 'replaceme'
max-pods = 9999999999

[settings.kubernetes.eviction-hard]
"memory.available" = "12%"

[settings.kubernetes.node-labels]
"custom-node-label" = "custom"
"karpenter.sh/capacity-type" = "should-be-overridden"

[settings.kubernetes.node-taints]
"replace" = ["me:NoSchedule"]

[settings.network]
hostname = "test.local"
https-proxy = "1.2.3.4:8080"
no-proxy = ["localhost", "127.0.0.1"]

[settings.ntp]
time-servers = ["169.254.169.123"]
`
	windowsInput = "Write-Host \"Running custom user data script\""
)

var userDataCases = []struct {
	name string
	in   UserDataInput
}{
	{"al2023_unmerged", UserDataInput{Family: catalog.FamilyAL2023, Kubelet: kubelet110()}},
	{"al2023_shell_merged", UserDataInput{Family: catalog.FamilyAL2023, Kubelet: kubelet110(), Custom: aws.String(shellInput)}},
	{"al2023_mime_merged", UserDataInput{Family: catalog.FamilyAL2023, Kubelet: kubelet110(), Custom: aws.String(mimeInput)}},
	{"al2023_yaml_merged", UserDataInput{Family: catalog.FamilyAL2023, Kubelet: kubelet110(), Custom: aws.String(yamlInput)}},
	{"al2023_kubelet_raid0", UserDataInput{Family: catalog.FamilyAL2023, Kubelet: fullKubelet(), InstanceStorePolicy: raid0}},
	{"al2_merged", UserDataInput{Family: catalog.FamilyAL2, Kubelet: kubelet110(), Custom: aws.String("#!/bin/bash\necho \"Running custom user data script\"\n")}},
	{"al2_kubelet_raid0", UserDataInput{Family: catalog.FamilyAL2, Kubelet: fullKubelet(), InstanceStorePolicy: raid0}},
	{"bottlerocket_unmerged", UserDataInput{Family: catalog.FamilyBottlerocket, Kubelet: kubelet110()}},
	{"bottlerocket_merged", UserDataInput{Family: catalog.FamilyBottlerocket, Kubelet: kubelet110(), Custom: aws.String(bottlerocketInput)}},
	{"bottlerocket_kubelet_raid0", UserDataInput{Family: catalog.FamilyBottlerocket, Kubelet: fullKubelet(), InstanceStorePolicy: raid0}},
	{"windows_merged", UserDataInput{Family: catalog.FamilyWindows2022, Kubelet: kubelet110(), Custom: aws.String(windowsInput)}},
	{"custom", UserDataInput{Family: catalog.FamilyCustom, Kubelet: kubelet110(), Custom: aws.String("#!/bin/bash\n/opt/my-bootstrap.sh\n")}},
}

func TestUserDataGolden(t *testing.T) {
	for _, tc := range userDataCases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Cluster, in.Labels, in.Taints = testCluster, testLabels, testTaints
			got, err := UserData(in)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := UserData(in)
			if again != got {
				t.Fatal("user data is not deterministic")
			}
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if got != string(want) {
				t.Errorf("user data differs from %s:\n%s", path, got)
			}
			if len(got) > MaxUserDataBytes {
				t.Errorf("%d bytes", len(got))
			}
		})
	}
}

// TestUserDataReadsBack parses every family's output the way a node (or the
// local emulator) would and finds the cluster, labels, taints and max pods.
func TestUserDataReadsBack(t *testing.T) {
	for _, tc := range userDataCases {
		if tc.in.Family == catalog.FamilyCustom {
			continue
		}
		in := tc.in
		in.Cluster, in.Labels, in.Taints = testCluster, testLabels, testTaints
		ud, err := UserData(in)
		if err != nil {
			t.Fatal(err)
		}
		nb, err := ParseUserData(in.Family, ud)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		wantLabels := testLabels
		if tc.name == "bottlerocket_merged" {
			wantLabels = map[string]string{"custom-node-label": "custom"}
			for k, v := range testLabels {
				wantLabels[k] = v
			}
		}
		if nb.ClusterName != "test-cluster" || nb.Endpoint != "https://test-cluster" || !reflect.DeepEqual(nb.Labels, wantLabels) {
			t.Errorf("%s: %+v", tc.name, nb)
		}
		if !sameTaints(nb.Taints, testTaints) {
			t.Errorf("%s: taints %v", tc.name, nb.Taints)
		}
		if want := *in.Kubelet.MaxPods; nb.MaxPods != want {
			t.Errorf("%s: maxPods %d, want %d", tc.name, nb.MaxPods, want)
		}
	}
}

func sameTaints(a, b []corev1.Taint) bool {
	key := func(ts []corev1.Taint) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.ToString())
		}
		sort.Strings(out)
		return out
	}
	return reflect.DeepEqual(key(a), key(b))
}

// TestAL2023MIMEStructure checks the archive the way cloud-init reads it:
// user parts first in their order, then one NodeConfig with the cluster.
func TestAL2023MIMEStructure(t *testing.T) {
	in := UserDataInput{Family: catalog.FamilyAL2023, Cluster: testCluster, Kubelet: kubelet110(), Labels: testLabels, Taints: testTaints, Custom: aws.String(mimeInput)}
	ud, err := UserData(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ud, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\n") || !strings.HasSuffix(ud, "\n--//--\n") || strings.Contains(ud, "\r") {
		t.Fatalf("unexpected framing:\n%s", ud)
	}
	parts, err := parseMIME(ud)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, p := range parts {
		types = append(types, p.ContentType)
	}
	if want := []string{contentTypeNodeCfg, contentTypeShell, contentTypeNodeCfg}; !reflect.DeepEqual(types, want) {
		t.Fatalf("parts %v, want %v", types, want)
	}
	last := parts[2].Body
	for _, want := range []string{NodeConfigHeader, "apiServerEndpoint: https://test-cluster", "certificateAuthority: Y2EtYnVuZGxlCg==", "cidr: 10.100.0.0/16", "name: test-cluster",
		"clusterDNS:\n      - 10.100.0.10", "maxPods: 110", "key: karpenter.sh/unregistered",
		`--node-labels="karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=general,testing/cluster=unspecified"`} {
		if !strings.Contains(last, want) {
			t.Errorf("NodeConfig lacks %q:\n%s", want, last)
		}
	}
}

func TestUserDataErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   UserDataInput
		msg  string
	}{
		{"al2023 without cidr", UserDataInput{Family: catalog.FamilyAL2023, Cluster: eksauth.ClusterInfo{Name: "c", Endpoint: "https://c", CABundle: "Y2E="}}, "service CIDR"},
		{"bad CA", UserDataInput{Family: catalog.FamilyAL2023, Cluster: eksauth.ClusterInfo{Name: "c", CABundle: "%%%", ServiceCIDR: "10.0.0.0/16"}}, "not base64"},
		{"bad MIME", UserDataInput{Family: catalog.FamilyAL2023, Cluster: testCluster, Custom: aws.String("Content-Type: text/plain\n\nhello")}, "want multipart/mixed"},
		{"bad TOML", UserDataInput{Family: catalog.FamilyBottlerocket, Cluster: testCluster, Custom: aws.String("[settings\nx=")}, "not valid TOML"},
		{"TOML settings not a table", UserDataInput{Family: catalog.FamilyBottlerocket, Cluster: testCluster, Custom: aws.String("settings = 1")}, "must be a table"},
		{"unknown family", UserDataInput{Family: "Ubuntu", Cluster: testCluster}, "unknown AMI family"},
	} {
		if _, err := UserData(tc.in); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.msg)
		}
	}
}
