package eksauth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/karpless/karpless/shared/core/timing"
	"golang.org/x/oauth2"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"
)

// ClusterInfo is what the user data of a node needs to know about its
// cluster, and what AMI aliases need (the Kubernetes version).
type ClusterInfo struct {
	Name string
	// Endpoint is the API server URL (https://...).
	Endpoint string
	// CABundle is the cluster CA, PEM, base64-encoded (as EKS returns it).
	CABundle string
	// ServiceCIDR is the Kubernetes service range (IPv4 or IPv6).
	ServiceCIDR string
	// IPFamily is "ipv4" or "ipv6".
	IPFamily string
	// KubernetesVersion is major.minor, e.g. "1.33".
	KubernetesVersion string
	// ClusterDNS is the kube-dns service IP the EKS AMIs derive from the
	// service CIDR: the network address with its last byte set to 10
	// (10.100.0.0/16 -> 10.100.0.10, fd00:1::/108 -> fd00:1::a).
	ClusterDNS string
}

// EKSAPI is the EKS call this package makes.
type EKSAPI interface {
	DescribeCluster(ctx context.Context, params *eks.DescribeClusterInput, optFns ...func(*eks.Options)) (*eks.DescribeClusterOutput, error)
}

// ClusterSource says where the cluster facts come from. Fields left empty
// are looked up with EKS DescribeCluster (when EKS is set); the Kubernetes
// version, if still unknown, is read from the API server's /version.
//
// Environment variables (see SourceFromEnv): CLUSTER_NAME, CLUSTER_ENDPOINT,
// CLUSTER_CA_DATA, CLUSTER_SERVICE_CIDR, CLUSTER_KUBERNETES_VERSION and
// KUBECONFIG.
type ClusterSource struct {
	Name string
	// Endpoint and CAData (base64 PEM) skip DescribeCluster for the
	// connection when both are set.
	Endpoint string
	CAData   string
	// ServiceCIDR and KubernetesVersion skip DescribeCluster for user data
	// and AMI aliases when set.
	ServiceCIDR       string
	KubernetesVersion string
	// Kubeconfig, when set, is local mode: the API server, its CA and the
	// credentials come from this kubeconfig file (current context) and no
	// EKS token is minted. Used by `karpless local` and tests against a
	// local control plane.
	Kubeconfig string
	// EKS answers DescribeCluster; nil means every fact must be configured.
	EKS EKSAPI
	// STS presigns tokens; required unless Kubeconfig is set.
	STS Presigner
	// QPS and Burst of the Kubernetes client; 0 means DefaultQPS and
	// DefaultBurst.
	QPS   float32
	Burst int
}

// The Kubernetes client's rate limit: Karpenter's (KUBE_CLIENT_QPS 200,
// KUBE_CLIENT_BURST 300). The requests go to the workload-high priority
// level (the bootstrap's FlowSchemas), as Karpenter's do, where API
// Priority and Fairness protects the API server. At client-go's usual 25
// a second, a tick on a cluster of thousands of nodes spends its minute
// waiting on its own limiter: its snapshot alone is over a hundred pages,
// and a pass writes a status per changed claim and evicts pod by pod
// (shared/local/scale BenchmarkScale).
const (
	DefaultQPS   = 200
	DefaultBurst = 300
)

// SourceFromEnv reads the ClusterSource fields from the environment (pass
// os.LookupEnv). The AWS clients are left for the caller to set.
func SourceFromEnv(lookup func(string) (string, bool)) ClusterSource {
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	return ClusterSource{
		Name:              get("CLUSTER_NAME"),
		Endpoint:          get("CLUSTER_ENDPOINT"),
		CAData:            get("CLUSTER_CA_DATA"),
		ServiceCIDR:       get("CLUSTER_SERVICE_CIDR"),
		KubernetesVersion: get("CLUSTER_KUBERNETES_VERSION"),
		Kubeconfig:        get("KUBECONFIG"),
	}
}

// Cluster caches the connection and the facts of one cluster for the life
// of a warm Lambda container. Build it once in main and share it; it is safe
// for concurrent use. Nothing is cached at package level.
type Cluster struct {
	src ClusterSource
	now func() time.Time

	mu        sync.Mutex
	info      *ClusterInfo
	fetchedAt time.Time
	restCfg   *rest.Config
}

// New returns a Cluster for src. No call is made until Info or RESTConfig.
func New(src ClusterSource) *Cluster {
	return &Cluster{src: src, now: time.Now}
}

// RESTConfig returns the client configuration of the cluster, built once:
// its bearer token is minted on demand and replaced timing.TokenRefreshBefore its
// expiry (or at once after a 401), so the config stays valid for the life
// of the container. Callers get a copy they may modify.
func (c *Cluster) RESTConfig(ctx context.Context) (*rest.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.restCfg == nil {
		endpoint, ca := c.src.Endpoint, c.src.CAData
		if c.src.Kubeconfig == "" && (endpoint == "" || ca == "") {
			info, err := c.infoLocked(ctx)
			if err != nil {
				return nil, err
			}
			endpoint, ca = info.Endpoint, info.CABundle
		}
		cfg, err := c.newRESTConfig(endpoint, ca)
		if err != nil {
			return nil, err
		}
		c.restCfg = cfg
	}
	return rest.CopyConfig(c.restCfg), nil
}

// Info returns the cluster facts, fetching missing ones at most every timing.ClusterInfoTTL.
// When a refresh fails after an earlier success, the earlier facts are kept.
func (c *Cluster) Info(ctx context.Context) (ClusterInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.infoLocked(ctx)
}

func (c *Cluster) infoLocked(ctx context.Context) (ClusterInfo, error) {
	if c.info != nil && (c.fetchedAt.IsZero() || c.now().Sub(c.fetchedAt) < timing.ClusterInfoTTL) {
		return *c.info, nil
	}
	info, fetched, err := c.resolveInfo(ctx)
	if err != nil {
		if c.info != nil {
			c.fetchedAt = c.now() // keep serving the old facts, retry after another TTL
			return *c.info, nil
		}
		return ClusterInfo{}, err
	}
	c.info = &info
	c.fetchedAt = time.Time{}
	if fetched {
		c.fetchedAt = c.now()
	}
	return info, nil
}

// resolveInfo fills ClusterInfo from configuration, then the kubeconfig,
// then EKS, then the API server. fetched reports whether anything came from
// a remote call (and so may change).
func (c *Cluster) resolveInfo(ctx context.Context) (ClusterInfo, bool, error) {
	src := c.src
	info := ClusterInfo{
		Name: src.Name, Endpoint: src.Endpoint, CABundle: src.CAData,
		ServiceCIDR: src.ServiceCIDR, KubernetesVersion: src.KubernetesVersion,
	}
	if info.Name == "" {
		return ClusterInfo{}, false, errors.New("cluster name is not configured (CLUSTER_NAME)")
	}
	fetched := false
	if src.Kubeconfig != "" {
		cfg, err := loadKubeconfig(src.Kubeconfig)
		if err != nil {
			return ClusterInfo{}, false, err
		}
		fill(&info.Endpoint, cfg.Host)
		if len(cfg.CAData) > 0 {
			fill(&info.CABundle, base64.StdEncoding.EncodeToString(cfg.CAData))
		}
	}
	if (info.Endpoint == "" || info.CABundle == "" || info.ServiceCIDR == "" || info.KubernetesVersion == "") && src.EKS != nil {
		out, err := src.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(info.Name)})
		if err != nil {
			return ClusterInfo{}, false, fmt.Errorf("describing EKS cluster %s: %w", info.Name, err)
		}
		fetched = true
		if cl := out.Cluster; cl != nil {
			fill(&info.Endpoint, aws.ToString(cl.Endpoint))
			if cl.CertificateAuthority != nil {
				fill(&info.CABundle, aws.ToString(cl.CertificateAuthority.Data))
			}
			fill(&info.KubernetesVersion, aws.ToString(cl.Version))
			if n := cl.KubernetesNetworkConfig; n != nil {
				fill(&info.IPFamily, string(n.IpFamily))
				fill(&info.ServiceCIDR, aws.ToString(n.ServiceIpv4Cidr))
				fill(&info.ServiceCIDR, aws.ToString(n.ServiceIpv6Cidr))
			}
		}
	}
	if info.Endpoint == "" || (info.CABundle == "" && src.Kubeconfig == "") {
		return ClusterInfo{}, false, fmt.Errorf("cluster %s: endpoint and CA are unknown: set CLUSTER_ENDPOINT and CLUSTER_CA_DATA, or allow eks:DescribeCluster", info.Name)
	}
	if info.KubernetesVersion == "" {
		cfg := c.restCfg
		if cfg == nil {
			var err error
			if cfg, err = c.newRESTConfig(info.Endpoint, info.CABundle); err != nil {
				return ClusterInfo{}, false, err
			}
		}
		v, err := serverVersion(cfg)
		if err != nil {
			return ClusterInfo{}, false, err
		}
		info.KubernetesVersion, fetched = v, true
	}
	if info.ServiceCIDR != "" {
		dns, family, err := ClusterDNS(info.ServiceCIDR)
		if err != nil {
			return ClusterInfo{}, false, err
		}
		info.ClusterDNS = dns
		fill(&info.IPFamily, family)
	}
	return info, fetched, nil
}

func fill(dst *string, v string) {
	if *dst == "" {
		*dst = v
	}
}

// serverVersion reads major.minor from the API server's /version.
func serverVersion(cfg *rest.Config) (string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return "", fmt.Errorf("building discovery client: %w", err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("reading the Kubernetes version from the API server: %w", err)
	}
	minor := strings.TrimRight(v.Minor, "+")
	if v.Major == "" || minor == "" {
		return "", fmt.Errorf("API server reports an unparseable version %q", v.GitVersion)
	}
	return v.Major + "." + minor, nil
}

func loadKubeconfig(path string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// newRESTConfig is the kubeconfig in local mode, else endpoint + CA with
// EKS tokens.
func (c *Cluster) newRESTConfig(endpoint, caData string) (*rest.Config, error) {
	src := c.src
	var cfg *rest.Config
	if src.Kubeconfig != "" {
		var err error
		if cfg, err = loadKubeconfig(src.Kubeconfig); err != nil {
			return nil, err
		}
	} else {
		if src.STS == nil {
			return nil, errors.New("cluster connection needs an STS client to mint EKS tokens (or KUBECONFIG for local mode)")
		}
		if src.Name == "" {
			return nil, errors.New("cluster name is not configured (CLUSTER_NAME)")
		}
		pem, err := base64.StdEncoding.DecodeString(caData)
		if err != nil {
			return nil, fmt.Errorf("cluster CA is not base64: %w", err)
		}
		cfg = &rest.Config{Host: endpoint, TLSClientConfig: rest.TLSClientConfig{CAData: pem}}
		cfg.WrapTransport = transport.ResettableTokenSourceWrapTransport(
			transport.NewCachedTokenSource(&tokenSource{presigner: src.STS, cluster: src.Name}))
	}
	cfg.QPS, cfg.Burst = src.QPS, src.Burst
	if cfg.QPS == 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultBurst
	}
	return cfg, nil
}

// tokenSource mints EKS tokens for client-go's caching token source. The
// reported expiry is timing.TokenRefreshBefore the real one, so the cache replaces a
// token well before EKS would reject it.
type tokenSource struct {
	presigner Presigner
	cluster   string
}

func (t *tokenSource) Token() (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, expiry, err := Token(ctx, t.presigner, t.cluster)
	if err != nil {
		return nil, err
	}
	return &oauth2.Token{AccessToken: tok, TokenType: "Bearer", Expiry: expiry.Add(-timing.TokenRefreshBefore)}, nil
}

// ClusterDNS returns the cluster DNS address the EKS AMIs derive from a
// service CIDR, and the IP family ("ipv4" or "ipv6").
func ClusterDNS(serviceCIDR string) (string, string, error) {
	_, n, err := net.ParseCIDR(strings.TrimSpace(serviceCIDR))
	if err != nil {
		return "", "", fmt.Errorf("service CIDR %q: %w", serviceCIDR, err)
	}
	if v4 := n.IP.To4(); v4 != nil {
		ip := append(net.IP(nil), v4...)
		ip[3] = 10
		return ip.String(), "ipv4", nil
	}
	ip := append(net.IP(nil), n.IP.To16()...)
	ip[15] = 10
	return ip.String(), "ipv6", nil
}
