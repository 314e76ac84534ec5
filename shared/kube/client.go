// Package kube is the Kubernetes edge of Karpless: typed clients for core
// objects (protobuf) and for NodePool, NodeClaim, NodeOverlay and
// EC2NodeClass (JSON).
package kube

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
)

// Scheme knows the core types and the Karpenter types.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, v1alpha1.AddToScheme, awsv1.AddToScheme, cbv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("building scheme: %v", err)) // only on a programming error
		}
	}
	return s
}

// NodePools is the typed client of karpenter.sh/v1 NodePools.
type NodePools = *gentype.ClientWithList[*karpv1.NodePool, *karpv1.NodePoolList]

// NodeClaims is the typed client of karpenter.sh/v1 NodeClaims.
type NodeClaims = *gentype.ClientWithList[*karpv1.NodeClaim, *karpv1.NodeClaimList]

// NodeOverlays is the typed client of karpenter.sh/v1alpha1 NodeOverlays.
type NodeOverlays = *gentype.ClientWithList[*v1alpha1.NodeOverlay, *v1alpha1.NodeOverlayList]

// EC2NodeClasses is the typed client of karpenter.k8s.aws/v1 EC2NodeClasses.
type EC2NodeClasses = *gentype.ClientWithList[*awsv1.EC2NodeClass, *awsv1.EC2NodeClassList]

// Clients bundles what the functions talk to.
type Clients struct {
	// Core uses protobuf, the compact encoding, for built-in types.
	Core           kubernetes.Interface
	NodePools      NodePools
	NodeClaims     NodeClaims
	NodeOverlays   NodeOverlays
	EC2NodeClasses EC2NodeClasses
	APIExtensions  apiextensionsclient.Interface
	Config         *rest.Config
	// Read counts response bytes, to report what a snapshot costs.
	Read *ByteCounter
	// bufferREST serves CapacityBuffers (namespaced: see CapacityBuffers).
	bufferREST   *rest.RESTClient
	bufferParams runtime.ParameterCodec
}

// ByteCounter counts bytes read from the API server.
type ByteCounter struct{ n atomic.Int64 }

// Total is the number of response bytes read so far.
func (c *ByteCounter) Total() int64 { return c.n.Load() }

// CountBytes wraps next so that every answer's body adds to counter as it
// is read.
func CountBytes(next http.RoundTripper, counter *ByteCounter) http.RoundTripper {
	return countingTransport{next: next, counter: counter}
}

type countingTransport struct {
	next    http.RoundTripper
	counter *ByteCounter
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if resp != nil && resp.Body != nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, counter: t.counter}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	counter *ByteCounter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.counter.n.Add(int64(n))
	return n, err
}

// NewClients builds the clients for one cluster. The clients are safe to
// share across invocations of a warm Lambda container.
func NewClients(cfg *rest.Config) (*Clients, error) {
	counter := &ByteCounter{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return CountBytes(rt, counter) })
	core := rest.CopyConfig(cfg)
	core.ContentType = "application/vnd.kubernetes.protobuf"
	core.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	coreClient, err := kubernetes.NewForConfig(core)
	if err != nil {
		return nil, fmt.Errorf("building core client: %w", err)
	}
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building apiextensions client: %w", err)
	}
	scheme := Scheme()
	codecs := serializer.NewCodecFactory(scheme)
	params := runtime.NewParameterCodec(scheme)
	karpREST, err := restClientFor(cfg, karpv1.SchemeGroupVersion, codecs)
	if err != nil {
		return nil, err
	}
	alphaREST, err := restClientFor(cfg, v1alpha1.SchemeGroupVersion, codecs)
	if err != nil {
		return nil, err
	}
	awsREST, err := restClientFor(cfg, awsv1.SchemeGroupVersion, codecs)
	if err != nil {
		return nil, err
	}
	bufferREST, err := restClientFor(cfg, cbv1.SchemeGroupVersion, codecs)
	if err != nil {
		return nil, err
	}
	return &Clients{
		Core:   coreClient,
		Config: cfg,
		Read:   counter,
		NodePools: gentype.NewClientWithList("nodepools", karpREST, params, "",
			func() *karpv1.NodePool { return &karpv1.NodePool{} },
			func() *karpv1.NodePoolList { return &karpv1.NodePoolList{} }),
		NodeClaims: gentype.NewClientWithList("nodeclaims", karpREST, params, "",
			func() *karpv1.NodeClaim { return &karpv1.NodeClaim{} },
			func() *karpv1.NodeClaimList { return &karpv1.NodeClaimList{} }),
		NodeOverlays: gentype.NewClientWithList("nodeoverlays", alphaREST, params, "",
			func() *v1alpha1.NodeOverlay { return &v1alpha1.NodeOverlay{} },
			func() *v1alpha1.NodeOverlayList { return &v1alpha1.NodeOverlayList{} }),
		EC2NodeClasses: gentype.NewClientWithList("ec2nodeclasses", awsREST, params, "",
			func() *awsv1.EC2NodeClass { return &awsv1.EC2NodeClass{} },
			func() *awsv1.EC2NodeClassList { return &awsv1.EC2NodeClassList{} }),
		APIExtensions: ext,
		bufferREST:    bufferREST,
		bufferParams:  params,
	}, nil
}

func restClientFor(cfg *rest.Config, gv schema.GroupVersion, codecs serializer.CodecFactory) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.NegotiatedSerializer = codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("building %s client: %w", gv, err)
	}
	return rc, nil
}
