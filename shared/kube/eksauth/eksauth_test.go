package eksauth

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/karpless/karpless/shared/core/timing"
	"k8s.io/client-go/kubernetes"
)

func testSTS(region string) *sts.Client {
	return sts.New(sts.Options{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "SECRETEXAMPLE", "SESSIONTOKEN"),
	})
}

func TestTokenFormat(t *testing.T) {
	before := time.Now()
	tok, expiry, err := Token(context.Background(), NewPresigner(testSTS("eu-west-1")), "prod-cluster")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, TokenPrefix) {
		t.Fatalf("token %q lacks the prefix", tok)
	}
	if strings.ContainsAny(tok[len(TokenPrefix):], "=+/") {
		t.Fatalf("token is not unpadded base64url: %q", tok)
	}
	if d := expiry.Sub(before); d < timing.TokenLifetime || d > timing.TokenLifetime+time.Minute {
		t.Fatalf("expiry %v after signing, want about %v", d, timing.TokenLifetime)
	}
	u, err := ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "https" || u.Host != "sts.eu-west-1.amazonaws.com" || (u.Path != "/" && u.Path != "") {
		t.Fatalf("url %s: want https://sts.eu-west-1.amazonaws.com/", u)
	}
	q := u.Query()
	for k, want := range map[string]string{
		"Action":               "GetCallerIdentity",
		"Version":              "2011-06-15",
		"X-Amz-Expires":        "60",
		"X-Amz-Algorithm":      "AWS4-HMAC-SHA256",
		"X-Amz-Security-Token": "SESSIONTOKEN",
	} {
		if got := q.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	if !contains(signed, "host") || !contains(signed, ClusterIDHeader) {
		t.Errorf("X-Amz-SignedHeaders = %v, want host and %s", signed, ClusterIDHeader)
	}
	if cred := q.Get("X-Amz-Credential"); !strings.HasPrefix(cred, "AKIDEXAMPLE/") || !strings.HasSuffix(cred, "/eu-west-1/sts/aws4_request") {
		t.Errorf("X-Amz-Credential = %q", cred)
	}
	if len(q.Get("X-Amz-Signature")) != 64 {
		t.Errorf("X-Amz-Signature = %q", q.Get("X-Amz-Signature"))
	}

	// The signature covers the cluster header: re-signing the same URL with
	// the same header reproduces it, another cluster name does not.
	if got := resign(t, u, "prod-cluster"); got != q.Get("X-Amz-Signature") {
		t.Errorf("re-signed with the same cluster: %s, want %s", got, q.Get("X-Amz-Signature"))
	}
	if got := resign(t, u, "other-cluster"); got == q.Get("X-Amz-Signature") {
		t.Error("signature does not depend on the cluster header")
	}
}

// resign recomputes the presigned signature of u as if its request carried
// x-k8s-aws-id: cluster, the way STS verifies it.
func resign(t *testing.T, u *url.URL, cluster string) string {
	t.Helper()
	q := u.Query()
	signingTime, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"X-Amz-Signature", "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Security-Token"} {
		q.Del(k)
	}
	bare := *u
	bare.RawQuery = q.Encode()
	req, _ := http.NewRequest(http.MethodGet, bare.String(), nil)
	req.Header.Set(ClusterIDHeader, cluster)
	const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	signedURL, _, err := v4.NewSigner().PresignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "SECRETEXAMPLE", SessionToken: "SESSIONTOKEN"},
		req, emptySHA256, "sts", "eu-west-1", signingTime)
	if err != nil {
		t.Fatal(err)
	}
	su, _ := url.Parse(signedURL)
	return su.Query().Get("X-Amz-Signature")
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestTokenNeedsCluster(t *testing.T) {
	if _, _, err := Token(context.Background(), NewPresigner(testSTS("us-east-1")), ""); err == nil {
		t.Fatal("want an error for an empty cluster name")
	}
}

func TestClusterDNS(t *testing.T) {
	for _, tc := range []struct{ cidr, dns, family string }{
		{"10.100.0.0/16", "10.100.0.10", "ipv4"},
		{"172.20.0.0/16", "172.20.0.10", "ipv4"},
		{"10.0.0.0/24", "10.0.0.10", "ipv4"},
		{"192.168.128.0/17", "192.168.128.10", "ipv4"},
		{"fd12:3456:789a::/108", "fd12:3456:789a::a", "ipv6"},
	} {
		dns, family, err := ClusterDNS(tc.cidr)
		if err != nil || dns != tc.dns || family != tc.family {
			t.Errorf("ClusterDNS(%s) = %s %s %v, want %s %s", tc.cidr, dns, family, err, tc.dns, tc.family)
		}
	}
	if _, _, err := ClusterDNS("nonsense"); err == nil {
		t.Error("want an error for a bad CIDR")
	}
}

type fakeEKS struct {
	mu    sync.Mutex
	calls int
	err   error
	out   *eks.DescribeClusterOutput
}

func (f *fakeEKS) DescribeCluster(_ context.Context, in *eks.DescribeClusterInput, _ ...func(*eks.Options)) (*eks.DescribeClusterOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	if aws.ToString(in.Name) != aws.ToString(f.out.Cluster.Name) {
		return nil, errors.New("ResourceNotFoundException")
	}
	return f.out, nil
}

func describeOutput(name, endpoint, ca, version, cidr string) *eks.DescribeClusterOutput {
	return &eks.DescribeClusterOutput{Cluster: &ekstypes.Cluster{
		Name:                 aws.String(name),
		Endpoint:             aws.String(endpoint),
		Version:              aws.String(version),
		CertificateAuthority: &ekstypes.Certificate{Data: aws.String(ca)},
		KubernetesNetworkConfig: &ekstypes.KubernetesNetworkConfigResponse{
			IpFamily:        ekstypes.IpFamilyIpv4,
			ServiceIpv4Cidr: aws.String(cidr),
		},
	}}
}

func TestInfoFromEKSIsCachedAndRefreshed(t *testing.T) {
	f := &fakeEKS{out: describeOutput("c1", "https://ABC.gr7.eu-west-1.eks.amazonaws.com", "Y2EtYnVuZGxl", "1.33", "10.100.0.0/16")}
	c := New(ClusterSource{Name: "c1", EKS: f, STS: NewPresigner(testSTS("eu-west-1"))})
	now := time.Unix(1_700_000_000, 0)
	c.now = func() time.Time { return now }
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := ClusterInfo{Name: "c1", Endpoint: "https://ABC.gr7.eu-west-1.eks.amazonaws.com", CABundle: "Y2EtYnVuZGxl",
		ServiceCIDR: "10.100.0.0/16", IPFamily: "ipv4", KubernetesVersion: "1.33", ClusterDNS: "10.100.0.10"}
	if info != want {
		t.Fatalf("info = %+v\nwant %+v", info, want)
	}
	if _, err := c.Info(context.Background()); err != nil || f.calls != 1 {
		t.Fatalf("second Info: calls=%d err=%v, want a cached answer", f.calls, err)
	}
	// After the TTL the version is re-read (a cluster upgrade).
	now = now.Add(timing.ClusterInfoTTL + time.Second)
	f.out = describeOutput("c1", "https://ABC.gr7.eu-west-1.eks.amazonaws.com", "Y2EtYnVuZGxl", "1.34", "10.100.0.0/16")
	if info, _ := c.Info(context.Background()); info.KubernetesVersion != "1.34" || f.calls != 2 {
		t.Fatalf("after TTL: version %s calls %d", info.KubernetesVersion, f.calls)
	}
	// A failing refresh keeps serving the last good facts.
	now = now.Add(timing.ClusterInfoTTL + time.Second)
	f.err = errors.New("throttled")
	if info, err := c.Info(context.Background()); err != nil || info.KubernetesVersion != "1.34" {
		t.Fatalf("failed refresh: %+v %v", info, err)
	}
}

func TestInfoFromConfigurationMakesNoCall(t *testing.T) {
	f := &fakeEKS{err: errors.New("must not be called")}
	c := New(ClusterSource{Name: "c1", Endpoint: "https://x", CAData: "Y2E=", ServiceCIDR: "fd00:10::/108",
		KubernetesVersion: "1.32", EKS: f})
	info, err := c.Info(context.Background())
	if err != nil || f.calls != 0 {
		t.Fatalf("err=%v calls=%d", err, f.calls)
	}
	if info.ClusterDNS != "fd00:10::a" || info.IPFamily != "ipv6" {
		t.Fatalf("info = %+v", info)
	}
}

func TestInfoWithoutSourcesExplainsWhatToSet(t *testing.T) {
	_, err := New(ClusterSource{Name: "c1"}).Info(context.Background())
	if err == nil || !strings.Contains(err.Error(), "CLUSTER_ENDPOINT") {
		t.Fatalf("err = %v", err)
	}
	if _, err := New(ClusterSource{}).Info(context.Background()); err == nil || !strings.Contains(err.Error(), "CLUSTER_NAME") {
		t.Fatalf("err = %v", err)
	}
}

// apiServer is a TLS server that answers /version and records the bearer
// tokens it sees.
func apiServer(t *testing.T) (*httptest.Server, *[]string, string) {
	t.Helper()
	var mu sync.Mutex
	tokens := []string{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokens = append(tokens, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"33+","gitVersion":"v1.33.2-eks-1"}`))
	}))
	t.Cleanup(srv.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, &tokens, base64.StdEncoding.EncodeToString(caPEM)
}

func TestRESTConfigSendsCachedEKSToken(t *testing.T) {
	srv, tokens, ca := apiServer(t)
	c := New(ClusterSource{Name: "c1", Endpoint: srv.URL, CAData: ca, ServiceCIDR: "10.100.0.0/16",
		STS: NewPresigner(testSTS("us-west-2"))})
	cfg, err := c.RESTConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := cs.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		}
	}
	// The version comes from the API server when nothing else says it.
	info, err := c.Info(context.Background())
	if err != nil || info.KubernetesVersion != "1.33" {
		t.Fatalf("info=%+v err=%v", info, err)
	}
	if len(*tokens) < 2 {
		t.Fatalf("saw %d requests", len(*tokens))
	}
	first := (*tokens)[0]
	tok, ok := strings.CutPrefix(first, "Bearer ")
	if !ok {
		t.Fatalf("Authorization = %q", first)
	}
	if _, err := ParseToken(tok); err != nil {
		t.Fatal(err)
	}
	for _, got := range *tokens {
		if got != first {
			t.Fatal("token was not reused between requests")
		}
	}
	// A second RESTConfig shares the token cache.
	cfg2, _ := c.RESTConfig(context.Background())
	cs2, _ := kubernetes.NewForConfig(cfg2)
	if _, err := cs2.Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}
	if last := (*tokens)[len(*tokens)-1]; last != first {
		t.Fatal("second config minted a new token")
	}
}

func TestTokenSourceExpiresBeforeEKSDoes(t *testing.T) {
	ts := &tokenSource{presigner: NewPresigner(testSTS("us-west-2")), cluster: "c1"}
	tok, err := ts.Token()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(tok.Expiry); d > timing.TokenLifetime-timing.TokenRefreshBefore || d < timing.TokenLifetime-timing.TokenRefreshBefore-time.Minute {
		t.Fatalf("token source expiry in %v, want about %v", d, timing.TokenLifetime-timing.TokenRefreshBefore)
	}
}

func TestKubeconfigMode(t *testing.T) {
	srv, tokens, ca := apiServer(t)
	caPEM, _ := base64.StdEncoding.DecodeString(ca)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: `+srv.URL+`
    certificate-authority-data: `+ca+`
users:
- name: admin
  user:
    token: local-admin
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
`), 0o600); err != nil {
		t.Fatal(err)
	}
	src := SourceFromEnv(func(k string) (string, bool) {
		v, ok := map[string]string{"CLUSTER_NAME": "local", "KUBECONFIG": kubeconfig, "CLUSTER_SERVICE_CIDR": "10.0.0.0/24"}[k]
		return v, ok
	})
	c := New(src)
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Endpoint != srv.URL || info.CABundle != ca || info.KubernetesVersion != "1.33" || info.ClusterDNS != "10.0.0.10" {
		t.Fatalf("info = %+v", info)
	}
	if (*tokens)[0] != "Bearer local-admin" {
		t.Fatalf("Authorization = %q, want the kubeconfig's token", (*tokens)[0])
	}
}
