package emulator

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestParseUserData(t *testing.T) {
	unregistered := corev1.Taint{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}
	i32 := func(n int32) *int32 { return &n }
	for _, tc := range []struct {
		name   string
		ud     string
		family string
		want   bootConfig
	}{
		{
			name: "AL2023 MIME with Karpenter's NodeConfig",
			ud:   al2023UserData,
			want: bootConfig{Family: "AL2023", ClusterName: "karpless-local", MaxPods: i32(29), Taints: []corev1.Taint{unregistered}, Labels: map[string]string{
				"karpenter.k8s.aws/ec2nodeclass": "default", "karpenter.sh/capacity-type": "on-demand",
				"karpenter.sh/do-not-sync-taints": "true", "karpenter.sh/nodepool": "default",
			}},
		},
		{
			name: "AL2023 user NodeConfig part merged before Karpenter's",
			ud: "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: application/node.eks.aws\n\n" +
				"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      kubeReserved:\n        cpu: 200m\n    flags:\n    - --node-labels=team=a\n" +
				"\n--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hi\n" +
				"\n--//\nContent-Type: application/node.eks.aws\n\n" +
				"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: c1\n  kubelet:\n    config:\n      maxPods: 110\n      registerWithTaints:\n      - key: dedicated\n        value: gpu\n        effect: NoSchedule\n    flags:\n    - --node-labels=\"karpenter.sh/nodepool=gpu\"\n" +
				"\n--//--\n",
			want: bootConfig{Family: "AL2023", ClusterName: "c1", MaxPods: i32(110), KubeReserved: map[string]string{"cpu": "200m"},
				Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
				Labels: map[string]string{"team": "a", "karpenter.sh/nodepool": "gpu"}},
		},
		{
			name: "AL2 bootstrap.sh",
			ud: "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n" +
				"#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n" +
				"/etc/eks/bootstrap.sh 'c2' --apiserver-endpoint 'https://x' --b64-cluster-ca 'Y2E=' \\\n--use-max-pods false \\\n" +
				"--kubelet-extra-args '--node-labels=\"karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default\" --register-with-taints=\"karpenter.sh/unregistered=:NoExecute\" --max-pods=58'\n--//--\n",
			want: bootConfig{Family: "AL2", ClusterName: "c2", MaxPods: i32(58), Taints: []corev1.Taint{unregistered},
				Labels: map[string]string{"karpenter.sh/capacity-type": "spot", "karpenter.sh/nodepool": "default"}},
		},
		{
			name:   "Bottlerocket TOML",
			family: "Bottlerocket",
			ud: "[settings]\n[settings.kubernetes]\napi-server = 'https://x'\ncluster-certificate = 'Y2E='\ncluster-name = 'c3'\nmax-pods = 110\n\n" +
				"[settings.kubernetes.node-labels]\n'karpenter.sh/capacity-type' = 'on-demand'\n\"karpenter.sh/nodepool\" = \"br\"\n\n" +
				"[settings.kubernetes.node-taints]\n'karpenter.sh/unregistered' = [':NoExecute']\ndedicated = ['gpu:NoSchedule', 'gpu:NoExecute']\n\n" +
				"[settings.kubernetes.kube-reserved]\nmemory = '1Gi'\n",
			want: bootConfig{Family: "Bottlerocket", ClusterName: "c3", MaxPods: i32(110), KubeReserved: map[string]string{"memory": "1Gi"},
				Taints: []corev1.Taint{unregistered, {Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, {Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute}},
				Labels: map[string]string{"karpenter.sh/capacity-type": "on-demand", "karpenter.sh/nodepool": "br"}},
		},
		{
			name: "Bottlerocket dotted keys",
			ud:   "settings.kubernetes.max-pods = 20\nsettings.kubernetes.node-labels.\"a/b\" = \"c\"\n",
			want: bootConfig{Family: "Bottlerocket", MaxPods: i32(20), Labels: map[string]string{"a/b": "c"}},
		},
		{name: "empty", want: bootConfig{Labels: map[string]string{}}},
		{name: "shell script only", ud: "#!/bin/bash\necho hi\n", want: bootConfig{Labels: map[string]string{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseUserData(tc.ud, tc.family)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"a*", "abc", true}, {"*-private-us-west-2?", "c-private-us-west-2a", true}, {"a?c", "abc", true},
		{"a?c", "ac", false}, {"karpenter.k8s.aws/*", "karpenter.k8s.aws/123", true}, {"x", "y", false}, {"*", "", true},
	} {
		if got := glob(tc.p, tc.s); got != tc.want {
			t.Errorf("glob(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
}
