// Package eksauth connects a Lambda to its EKS cluster: bearer tokens from a
// presigned STS GetCallerIdentity URL, and the cluster's endpoint, CA and CIDR.
package eksauth

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/karpless/karpless/shared/core/timing"
)

// Token format, as aws-iam-authenticator writes and EKS verifies it.
const (
	// TokenPrefix starts every EKS bearer token; the rest is the presigned
	// URL, base64url-encoded without padding.
	TokenPrefix = "k8s-aws-v1."
	// ClusterIDHeader is the signed header naming the cluster the token is
	// for, so a token for one cluster cannot be replayed against another.
	ClusterIDHeader = "x-k8s-aws-id"
	// PresignExpirySeconds is the X-Amz-Expires of the presigned URL. EKS
	// itself accepts a token for timing.TokenLifetime after it was signed.
	PresignExpirySeconds = 60
)

// Presigner is the STS presign call Token needs; *sts.PresignClient has it.
type Presigner interface {
	PresignGetCallerIdentity(ctx context.Context, params *sts.GetCallerIdentityInput, optFns ...func(*sts.PresignOptions)) (*v4.PresignedHTTPRequest, error)
}

// NewPresigner wraps an STS client for Token.
func NewPresigner(client *sts.Client) Presigner { return sts.NewPresignClient(client) }

// Token returns a bearer token for clusterName and the time EKS stops
// accepting it. The token is "k8s-aws-v1." followed by the unpadded base64url
// encoding of a presigned GET https://sts.<region>.amazonaws.com/?Action=
// GetCallerIdentity&Version=2011-06-15&X-Amz-Expires=60&... URL whose signed
// headers include x-k8s-aws-id: <clusterName>. No network call is made.
func Token(ctx context.Context, p Presigner, clusterName string) (string, time.Time, error) {
	if clusterName == "" {
		return "", time.Time{}, fmt.Errorf("eks token: cluster name is empty")
	}
	signedAt := time.Now()
	req, err := p.PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}, func(o *sts.PresignOptions) {
		o.ClientOptions = append(o.ClientOptions, sts.WithAPIOptions(addClusterID(clusterName)))
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("eks token: presigning sts:GetCallerIdentity: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL)), signedAt.Add(timing.TokenLifetime), nil
}

// addClusterID adds the cluster header (which the presigner then signs) and
// the URL's expiry, before signing happens in the finalize step.
func addClusterID(clusterName string) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Build.Add(middleware.BuildMiddlewareFunc("KarplessEKSClusterID",
			func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
				req, ok := in.Request.(*smithyhttp.Request)
				if !ok {
					return middleware.BuildOutput{}, middleware.Metadata{}, fmt.Errorf("unexpected request type %T", in.Request)
				}
				req.Header.Set(ClusterIDHeader, clusterName)
				q := req.URL.Query()
				q.Set("X-Amz-Expires", strconv.Itoa(PresignExpirySeconds))
				req.URL.RawQuery = q.Encode()
				return next.HandleBuild(ctx, in)
			}), middleware.After)
	}
}

// ParseToken decodes a token back into its presigned URL, for tests and for
// emulators that verify tokens.
func ParseToken(token string) (*url.URL, error) {
	enc, ok := strings.CutPrefix(token, TokenPrefix)
	if !ok {
		return nil, fmt.Errorf("token does not start with %q", TokenPrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("token is not base64url: %w", err)
	}
	return url.Parse(string(raw))
}
