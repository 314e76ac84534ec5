package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/apis/crds"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/migrate"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/emulator/emulatortest"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// karpenterCRDs are the CRDs a Karpenter v1.0 install has (v1.14 adds
// NodeOverlay and CapacityBuffer, which the check reads the same way).
var karpenterCRDs = []string{"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"}

// crdLayout is how a Karpenter install leaves one CRD.
type crdLayout struct {
	// v1beta1: served beside v1, converted by Karpenter's webhook, and
	// still in storedVersions (Karpenter v1.0 before its storage version
	// migration).
	v1beta1 bool
	// helmNS owns it by Helm release karpenter-crd in that namespace.
	helmNS string
	// liveKeep: helm.sh/resource-policy=keep added with kubectl annotate.
	liveKeep bool
}

// setCRD rewrites the installed CRD (Karpless's, from kubetest) as l
// says; restoreCRD puts Karpless's back.
func setCRD(ctx context.Context, t *testing.T, kc *kube.Clients, want *apiextensionsv1.CustomResourceDefinition, l crdLayout) {
	t.Helper()
	api := kc.APIExtensions.ApiextensionsV1().CustomResourceDefinitions()
	stored := `["v1"]`
	if l.v1beta1 {
		stored = `["v1beta1","v1"]`
	} else if _, err := api.Patch(ctx, want.Name, types.MergePatchType, []byte(`{"status":{"storedVersions":["v1"]}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err) // before v1beta1 leaves spec.versions
	}
	// The API server's own controllers write the status meanwhile.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got.Spec = *want.Spec.DeepCopy()
		got.Annotations, got.Labels = map[string]string{}, map[string]string{}
		if l.v1beta1 {
			beta := *got.Spec.Versions[0].DeepCopy()
			beta.Name, beta.Storage = "v1beta1", false
			got.Spec.Versions = append([]apiextensionsv1.CustomResourceDefinitionVersion{beta}, got.Spec.Versions...)
			port := int32(8443)
			got.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: l.helmNS, Name: "karpenter", Port: &port}},
				ConversionReviewVersions: []string{"v1beta1", "v1"},
			}}
		}
		if l.helmNS != "" {
			got.Labels["app.kubernetes.io/managed-by"] = "Helm"
			got.Annotations[migrate.HelmReleaseNameAnn], got.Annotations[migrate.HelmReleaseNSAnn] = "karpenter-crd", l.helmNS
		}
		if l.liveKeep {
			got.Annotations[migrate.HelmPolicyAnn] = migrate.HelmKeep
		}
		_, err = api.Update(ctx, got, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Patch(ctx, want.Name, types.MergePatchType, []byte(`{"status":{"storedVersions":`+stored+`}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// helmRevision stores a revision of release karpenter-crd as Helm 3 does.
func helmRevision(ctx context.Context, t *testing.T, kc *kube.Clients, ns string, rev int, chartVersion, status string, keep bool) {
	t.Helper()
	var manifest strings.Builder
	for _, name := range karpenterCRDs {
		fmt.Fprintf(&manifest, "---\n# Source: karpenter-crd/templates/%s.yaml\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  annotations:\n", name)
		if keep {
			manifest.WriteString("    helm.sh/resource-policy: keep\n")
		}
		fmt.Fprintf(&manifest, "    controller-gen.kubebuilder.io/version: v0.20.1\n  name: %s\nspec:\n  group: x\n", name)
	}
	data, err := migrate.EncodeHelmRelease(migrate.HelmRelease{Name: "karpenter-crd", Namespace: ns, Revision: rev, Status: status,
		Chart: "karpenter-crd", ChartVersion: chartVersion, Manifest: manifest.String()})
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: migrate.HelmStorageName("karpenter-crd", rev), Namespace: ns,
			Labels: map[string]string{"owner": "helm", "name": "karpenter-crd", "status": status, "version": fmt.Sprint(rev)}},
		Type: migrate.HelmSecretType,
		Data: map[string][]byte{"release": data},
	}
	if _, err := kc.Core.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkLines runs karpless migrate check and returns its exit code and
// output, failing on each wanted line missing; a want is a regexp
// matched line by line against "STATUS check subject" and the text
// under it.
func checkLines(ctx context.Context, t *testing.T, wantCode int, args []string, want ...string) string {
	t.Helper()
	code, out, errs := runCLI(ctx, append([]string{"migrate", "check"}, args...)...)
	if code != wantCode {
		t.Errorf("exit %d, want %d\n%s%s", code, wantCode, out, errs)
	}
	for _, w := range want {
		if !regexp.MustCompile(w).MatchString(out) {
			t.Errorf("output lacks %q:\n%s%s", w, out, errs)
		}
	}
	return out
}

// TestMigrateCheck runs karpless migrate check on a real API server and
// the AWS emulator through the real SDK clients, on a cluster as a
// Karpenter v1.0 install leaves it (FAIL), as a v1.14 install leaves it
// (OK), after the clean-up, and through a rollback.
func TestMigrateCheck(t *testing.T) {
	e := kubetest.Need(t, kenv)
	ctx := context.Background()
	kc := e.Clients
	ns, kns := e.Namespace(t), e.Namespace(t)
	name := kubetest.Name(t)
	kubeconfig := e.Cluster.Kubeconfig
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, c := range all {
		byName[c.Name] = c
	}
	t.Cleanup(func() {
		for _, n := range karpenterCRDs {
			setCRD(context.Background(), t, kc, byName[n], crdLayout{})
		}
	})

	// The AWS account, through the SDK's environment as an operator has it.
	emu := emulatortest.New(t, nil, nil)
	id, _ := emu.Identity("operator")
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": emu.URL(), "AWS_REGION": emu.Region(), "AWS_ACCESS_KEY_ID": id.AccessKeyID, "AWS_SECRET_ACCESS_KEY": id.SecretAccessKey,
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_CA_BUNDLE": "",
		"AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
	// The emulator throttles at random, as AWS does; the check retries,
	// here without the long backoffs.
	defer func(d time.Duration) { cliAWSMaxBackoff = d }(cliAWSMaxBackoff)
	cliAWSMaxBackoff = 20 * time.Millisecond
	cluster := emu.ClusterName()
	nodeRole := emulator.NodeRoleName(cluster)
	nodeRoleARN := fmt.Sprintf("arn:aws:iam::%s:role/%s", emulator.DefaultAccountID, nodeRole)
	queueARN := fmt.Sprintf("arn:aws:sqs:%s:%s:%s", emu.Region(), emulator.DefaultAccountID, cluster)
	rules := []string{"Karpenter-prod-ScheduledChangeRule-1", "Karpenter-prod-SpotInterruptionRule-2", "Karpenter-prod-RebalanceRule-3", "Karpenter-prod-InstanceStateChangeRule-4"}
	for _, r := range rules {
		emu.PutRule(emulator.Rule{Name: r, Targets: map[string]string{"KarpenterInterruptionQueueTarget": queueARN}})
	}
	args := []string{"--kubeconfig", kubeconfig, "--karpless-namespace", kns}

	// What Karpenter's objects look like on either version: a class and
	// two claims with their termination finalizers, the controller.
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{wellknown.AWSTerminationFinalizer}}, Spec: awsv1.EC2NodeClassSpec{
		Role:                       nodeRole,
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
	}}
	if _, err := kc.EC2NodeClasses.Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var claims []string
	for i := range 2 {
		claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Finalizers: []string{wellknown.TerminationFinalizer}}}
		claim.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: name}
		claim.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}}
		if _, err := kc.NodeClaims.Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		claims = append(claims, claim.Name)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		unfinalize := []byte(`{"metadata":{"finalizers":null}}`)
		for _, c := range claims {
			_, _ = kc.NodeClaims.Patch(ctx, c, types.MergePatchType, unfinalize, metav1.PatchOptions{})
			_ = kc.NodeClaims.Delete(ctx, c, metav1.DeleteOptions{})
		}
		_, _ = kc.EC2NodeClasses.Patch(ctx, name, types.MergePatchType, unfinalize, metav1.PatchOptions{})
		_ = kc.EC2NodeClasses.Delete(ctx, name, metav1.DeleteOptions{})
	})
	replicas := int32(2)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "karpenter", Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": "karpenter"},
			Annotations: map[string]string{migrate.HelmReleaseNameAnn: "karpenter", migrate.HelmReleaseNSAnn: ns}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "karpenter"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "karpenter"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "public.ecr.aws/karpenter/controller:1.0.8",
					Env: []corev1.EnvVar{{Name: "CLUSTER_NAME", Value: cluster}, {Name: "INTERRUPTION_QUEUE", Value: cluster}}}}},
			},
		},
	}
	if _, err := kc.Core.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scale := func(n int32) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
		if _, err := kc.Core.AppsV1().Deployments(ns).Patch(ctx, "karpenter", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Karpenter v1.0, as its upgrade guide leaves it before the storage
	// version migration, with the old guide's kubectl annotate done.
	t.Run("v1.0", func(t *testing.T) {
		for _, n := range karpenterCRDs {
			setCRD(ctx, t, kc, byName[n], crdLayout{v1beta1: true, helmNS: ns, liveKeep: true})
		}
		helmRevision(ctx, t, kc, ns, 1, "1.0.8", "deployed", false)
		emu.AddPolicy("KarpenterControllerPolicy-"+cluster, "", 1)
		out := checkLines(ctx, t, 1, args,
			`FAIL  helm-keep +CRD nodeclaims.karpenter.sh\n +`+"`helm uninstall karpenter-crd -n "+ns+"` deletes this CRD, and with it its 2 NodeClaims",
			`The live CRD has the annotation \(kubectl annotate\), which does not protect it`,
			`no additionalAnnotations value \(added in 1.2.0\)`,
			`FAIL  helm-keep +CRD nodepools.karpenter.sh`,
			`FAIL  stored-versions  CRD nodeclaims.karpenter.sh\n +status.storedVersions is \[v1beta1 v1\]`,
			`kubectl patch crd nodeclaims.karpenter.sh --subresource=status`,
			`FAIL  conversion +CRD ec2nodeclasses.karpenter.k8s.aws\n +converts through Service `+ns+`/karpenter`,
			`WARN  karpenter +Deployment `+ns+`/karpenter\n +runs 2 replica\(s\)`,
			`kubectl scale deployment -n `+ns+` karpenter --replicas=0`,
			`OK    finalizers +NodeClaims\n +2 of 2 NodeClaims carry karpenter.sh/termination`,
			`Never run the finalizer-removal script`,
			`WARN  access-entry +node role `+nodeRole+` \(EC2NodeClass `+name+`\)\n +has no access entry \(authentication mode API\)`,
			`WARN  karpenter-iam +KarpenterController\*Policy-`+cluster+`\n +1 policy left: KarpenterControllerPolicy-`+cluster+` \(attached 1\)`,
			`WARN  karpenter-queue +SQS queue `+cluster+`\n +still receives EC2 and AWS Health events from 4 EventBridge rules \(Karpenter-prod-InstanceStateChangeRule-4, `,
			`Deployment `+ns+`/karpenter reads it`,
			`\n[0-9]+ FAIL, [0-9]+ WARN, [0-9]+ OK. Fix every FAIL before you switch`,
		)
		if regexp.MustCompile(`OK    helm-keep +CRD (nodepools|nodeclaims|ec2nodeclasses)`).MatchString(out) {
			t.Errorf("a CRD passed the keep check:\n%s", out)
		}
		if code, _, errs := runCLI(ctx, append([]string{"migrate", "check"}, args...)...); code != 1 || !strings.Contains(errs, "karpless migrate: checks failed:") {
			t.Errorf("exit %d, stderr %s", code, errs)
		}
	})

	// Karpenter v1.14: everything stored as v1, the keep policy in the
	// stored manifest (revision 2, the documented helm upgrade), no
	// webhook, the controller scaled to zero, the node role's access
	// entry, the six policies.
	t.Run("v1.14", func(t *testing.T) {
		for _, n := range karpenterCRDs {
			setCRD(ctx, t, kc, byName[n], crdLayout{helmNS: ns})
		}
		helmRevision(ctx, t, kc, ns, 2, "1.14.1", "deployed", true)
		scale(0)
		emu.RemovePolicy(fmt.Sprintf("arn:aws:iam::%s:policy/KarpenterControllerPolicy-%s", emulator.DefaultAccountID, cluster))
		for _, p := range migrate.ControllerPolicyNames(cluster)[:6] {
			emu.AddPolicy(p, "", 1)
		}
		emu.AddAccessEntry(emulator.AccessEntry{PrincipalARN: nodeRoleARN, Type: "EC2_LINUX"})
		out := checkLines(ctx, t, 0, args,
			`OK    helm-keep +CRD nodeclaims.karpenter.sh\n +in Helm release `+ns+`/karpenter-crd, whose last revision 2 \(chart karpenter-crd 1.14.1\) stores helm.sh/resource-policy: keep`,
			`OK    stored-versions  CRD nodepools.karpenter.sh\n +stored as \[v1\]`,
			`OK    conversion +CRD nodeclaims.karpenter.sh\n +no conversion webhook`,
			`OK    karpenter +Deployment `+ns+`/karpenter\n +scaled to zero`,
			`OK    access-entry +node role `+nodeRole+` \(EC2NodeClass `+name+`\)\n +has an EC2_LINUX access entry: deploy Karpless with -c skipNodeAccessEntry=true`,
			`WARN  karpenter-iam .*\n +6 policies left: KarpenterControllerNodeLifecyclePolicy-`+cluster,
			`No Karpenter Deployment reads it now`,
			`\n0 FAIL, 2 WARN, [0-9]+ OK. Nothing blocks the switch`,
		)
		if strings.Contains(out, "FAIL ") {
			t.Errorf("a check failed:\n%s", out)
		}
		// JSON for scripts.
		code, js, _ := runCLI(ctx, append([]string{"migrate", "check", "-o", "json"}, args...)...)
		if code != 0 || !strings.Contains(js, `"check": "helm-keep"`) || !strings.Contains(js, `"status": "OK"`) {
			t.Errorf("json: exit %d\n%s", code, js)
		}
	})

	// Once Karpless is verified: Karpenter's policies, queue and rules gone.
	t.Run("cleaned up", func(t *testing.T) {
		for _, p := range migrate.ControllerPolicyNames(cluster) {
			emu.RemovePolicy(fmt.Sprintf("arn:aws:iam::%s:policy/%s", emulator.DefaultAccountID, p))
		}
		for _, r := range rules {
			emu.RemoveRule(r)
		}
		emu.RemoveQueue(cluster)
		checkLines(ctx, t, 0, args,
			`OK    karpenter-iam .*\n +none of Karpenter's controller policies is left`,
			`OK    karpenter-queue +SQS queue `+cluster+`\n +no such queue`,
			`\n0 FAIL, 0 WARN, [0-9]+ OK.\n`)
	})

	// Karpless deployed (its pause switch exists), then the rollback:
	// Karpenter scaled up beside a running Karpless fails; karpless
	// pause, then Karpenter up, is the rolled-back state.
	t.Run("rollback", func(t *testing.T) {
		if code, out, errs := runCLI(ctx, "resume", "--kubeconfig", kubeconfig, "--karpless-namespace", kns); code != 0 {
			t.Fatalf("resume: %s%s", out, errs)
		}
		checkLines(ctx, t, 0, args, `OK    karpenter +Deployment `+ns+`/karpenter\n +scaled to zero`)
		scale(2)
		checkLines(ctx, t, 1, args, `FAIL  karpenter +Deployment `+ns+`/karpenter\n +runs 2 replica\(s\) \(0 ready\) while Karpless is installed and not paused`,
			`Rolling back: karpless pause, disable the interruption function's event source mapping`)
		if code, out, errs := runCLI(ctx, "pause", "--kubeconfig", kubeconfig, "--karpless-namespace", kns, "--reason", "rollback"); code != 0 {
			t.Fatalf("pause: %s%s", out, errs)
		}
		checkLines(ctx, t, 0, args, `OK    karpenter +Deployment `+ns+`/karpenter\n +runs 2 replica\(s\) \(0 ready\) and Karpless is paused: rolled back to Karpenter`)
	})

	// Someone who may read everything the check reads but Secrets: the
	// keep policy cannot be verified, so the CRDs Helm owns fail.
	t.Run("secrets forbidden", func(t *testing.T) {
		auditor := kubetest.Name(t)
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: auditor}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{""}, Resources: []string{"nodes", "configmaps"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"karpenter.sh", "karpenter.k8s.aws"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}},
		}}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: auditor},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: auditor}}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: auditor}}
		if _, err := kc.Core.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kc.Core.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = kc.Core.RbacV1().ClusterRoleBindings().Delete(context.Background(), auditor, metav1.DeleteOptions{})
			_ = kc.Core.RbacV1().ClusterRoles().Delete(context.Background(), auditor, metav1.DeleteOptions{})
		})
		admin, err := clientcmd.LoadFromFile(kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range admin.AuthInfos {
			a.Impersonate = auditor
		}
		path := filepath.Join(t.TempDir(), "auditor")
		if err := clientcmd.WriteToFile(*admin, path); err != nil {
			t.Fatal(err)
		}
		checkLines(ctx, t, 1, []string{"--kubeconfig", path, "--karpless-namespace", kns, "--aws=false"},
			`FAIL  helm-keep +CRD nodeclaims.karpenter.sh\n +owned by Helm release `+ns+`/karpenter-crd, whose stored revisions could not be read \(namespace `+ns+`: secrets is forbidden`,
			`list Secrets in namespace `+ns,
			`OK    stored-versions  CRD nodeclaims.karpenter.sh`)
	})

	// Without the cluster, or without AWS.
	t.Run("errors", func(t *testing.T) {
		checkLines(ctx, t, 0, append([]string{"--aws=false"}, args...), `^Switching context`)
		if out := checkLines(ctx, t, 0, append([]string{"--aws=false"}, args...)); strings.Contains(out, "access-entry") {
			t.Errorf("--aws=false checked AWS:\n%s", out)
		}
		t.Setenv("AWS_REGION", "")
		checkLines(ctx, t, 0, append([]string{"--cluster-name", cluster}, args...), `WARN  access-entry +node roles\n +not checked: loading AWS configuration: no region`)
		code, out, errs := runCLI(ctx, "migrate", "check", "--kubeconfig", deadKubeconfig(t), "--request-timeout", "5s")
		if code != 1 || !strings.Contains(errs, "karpless migrate: cannot reach the cluster's API server, context dead (https://127.0.0.1:1)") {
			t.Errorf("unreachable: exit %d\n%s%s", code, out, errs)
		}
		if code, _, errs := runCLI(ctx, "migrate", "check", "extra"); code != 2 || !strings.Contains(errs, "usage: karpless migrate check") {
			t.Errorf("usage: exit %d %s", code, errs)
		}
	})
}

// deadKubeconfig is a kubeconfig whose API server does not answer.
func deadKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dead")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	cfg.AuthInfos["dead"] = &clientcmdapi.AuthInfo{Token: "x"}
	cfg.Contexts["dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: "dead"}
	cfg.CurrentContext = "dead"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
