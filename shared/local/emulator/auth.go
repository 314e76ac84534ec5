package emulator

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	authenticationv1 "k8s.io/api/authentication/v1"
)

// authenticatePath is where the emulator answers kube-apiserver's
// authentication webhook (TokenReview).
const authenticatePath = "/authenticate"

// TokenPrefix starts an EKS bearer token (aws-iam-authenticator format).
const TokenPrefix = "k8s-aws-v1."

// ClusterIDHeader is the signed header naming the cluster a token is for.
const ClusterIDHeader = "x-k8s-aws-id"

// tokenLifetime is how long EKS accepts a presigned URL after its signing
// time, whatever X-Amz-Expires says (aws-iam-authenticator's rule).
const tokenLifetime = 15 * time.Minute

// TokenWebhookURL is the TokenReview endpoint for kube-apiserver's
// --authentication-token-webhook-config-file.
func (e *Emulator) TokenWebhookURL() string { return e.url + authenticatePath }

// PresignEKSToken builds the bearer token an EKS client sends: a presigned
// STS GetCallerIdentity URL that signs the x-k8s-aws-id header with the
// cluster name, base64url-encoded behind "k8s-aws-v1.". cfg's credentials
// and endpoint decide who signs and where the URL points.
func PresignEKSToken(ctx context.Context, cfg aws.Config, cluster string) (string, error) {
	presigner := sts.NewPresignClient(sts.NewFromConfig(cfg))
	req, err := presigner.PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}, func(po *sts.PresignOptions) {
		po.ClientOptions = append(po.ClientOptions, func(o *sts.Options) {
			o.APIOptions = append(o.APIOptions,
				smithyhttp.AddHeaderValue(ClusterIDHeader, cluster),
				smithyhttp.AddHeaderValue("X-Amz-Expires", "60"))
		})
	})
	if err != nil {
		return "", fmt.Errorf("presigning GetCallerIdentity: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL)), nil
}

// AWSConfig is an SDK configuration that talks to the emulator as a named
// identity (IdentityNames), through HTTPClient, with retries limited to
// maxAttempts (0 = SDK default).
func (e *Emulator) AWSConfig(identity string, maxAttempts int) (aws.Config, error) {
	id, ok := e.Identity(identity)
	if !ok {
		return aws.Config{}, fmt.Errorf("emulator: no identity %q", identity)
	}
	cfg := aws.Config{
		Region:           e.cfg.Region,
		Credentials:      credentials.NewStaticCredentialsProvider(id.AccessKeyID, id.SecretAccessKey, ""),
		BaseEndpoint:     aws.String(e.url),
		RetryMaxAttempts: maxAttempts,
		HTTPClient:       HTTPClient(),
	}
	return cfg, nil
}

// Token is an EKS bearer token for a named identity, signed now.
func (e *Emulator) Token(ctx context.Context, identity string) (string, error) {
	cfg, err := e.AWSConfig(identity, 0)
	if err != nil {
		return "", err
	}
	return PresignEKSToken(ctx, cfg, e.cfg.ClusterName)
}

// VerifyToken checks an EKS bearer token as EKS does: a presigned STS
// GetCallerIdentity URL for this emulator, signed by a known access key
// over the x-k8s-aws-id header naming this cluster, not older than 15
// minutes on the emulator's TokenClock. It returns the signer.
func (e *Emulator) VerifyToken(token string) (Identity, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.verifyToken(token, e.cfg.TokenClock.Now())
}

func (e *Emulator) verifyToken(token string, now time.Time) (Identity, error) {
	rest, ok := strings.CutPrefix(token, TokenPrefix)
	if !ok {
		return Identity{}, errors.New("not an EKS token (missing k8s-aws-v1. prefix)")
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return Identity{}, fmt.Errorf("token is not base64url: %w", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		return Identity{}, fmt.Errorf("token is not a URL: %w", err)
	}
	own, _ := url.Parse(e.url)
	if u.Host != own.Host && u.Host != "sts."+e.cfg.Region+".amazonaws.com" && u.Host != "sts.amazonaws.com" {
		return Identity{}, fmt.Errorf("token URL host %q is not an STS endpoint", u.Host)
	}
	q := u.Query()
	if q.Get("Action") != "GetCallerIdentity" {
		return Identity{}, fmt.Errorf("token action is %q, not GetCallerIdentity", q.Get("Action"))
	}
	if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
		return Identity{}, errors.New("token is not signed with AWS4-HMAC-SHA256")
	}
	signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	if !contains(signed, ClusterIDHeader) || !contains(signed, "host") {
		return Identity{}, fmt.Errorf("token does not sign host and %s (signed: %v)", ClusterIDHeader, signed)
	}
	at, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		return Identity{}, errors.New("token has no valid X-Amz-Date")
	}
	if now.After(at.Add(tokenLifetime)) {
		return Identity{}, fmt.Errorf("token expired (signed %s, now %s)", at.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if at.After(now.Add(5 * time.Minute)) {
		return Identity{}, fmt.Errorf("token signed in the future (%s, now %s)", at.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	scope := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(scope) != 5 || scope[3] != "sts" || scope[4] != "aws4_request" {
		return Identity{}, errors.New("token has a malformed X-Amz-Credential")
	}
	id, ok := e.world.identities[scope[0]]
	if !ok {
		return Identity{}, fmt.Errorf("unknown access key %s", scope[0])
	}
	headers := map[string]string{"host": canonicalHost(u), ClusterIDHeader: e.cfg.ClusterName}
	for _, h := range signed {
		if _, ok := headers[h]; !ok {
			return Identity{}, fmt.Errorf("token signs header %q, which the verifier cannot reproduce", h)
		}
	}
	want := q.Get("X-Amz-Signature")
	for _, payload := range []string{emptySHA256, "UNSIGNED-PAYLOAD"} {
		got := presignSignature(u, q, signed, headers, payload, id.SecretAccessKey, scope)
		if hmac.Equal([]byte(got), []byte(want)) {
			return id, nil
		}
	}
	return Identity{}, errors.New("token signature does not match (wrong secret, or signed for another cluster)")
}

const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func canonicalHost(u *url.URL) string {
	host, port := u.Hostname(), u.Port()
	if port == "" || (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		return host
	}
	return host + ":" + port
}

// presignSignature computes the SigV4 query-string signature of a GET.
func presignSignature(u *url.URL, q url.Values, signed []string, headers map[string]string, payload, secret string, scope []string) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		if k != "X-Amz-Signature" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var cq []string
	for _, k := range keys {
		vals := append([]string(nil), q[k]...)
		sort.Strings(vals)
		for _, v := range vals {
			cq = append(cq, sigEscape(k)+"="+sigEscape(v))
		}
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	sortedSigned := append([]string(nil), signed...)
	sort.Strings(sortedSigned)
	var ch strings.Builder
	for _, h := range sortedSigned {
		ch.WriteString(h + ":" + strings.TrimSpace(headers[h]) + "\n")
	}
	canonical := strings.Join([]string{"GET", path, strings.Join(cq, "&"), ch.String(), strings.Join(sortedSigned, ";"), payload}, "\n")
	sum := sha256.Sum256([]byte(canonical))
	credScope := strings.Join(scope[1:], "/")
	toSign := strings.Join([]string{"AWS4-HMAC-SHA256", q.Get("X-Amz-Date"), credScope, hex.EncodeToString(sum[:])}, "\n")
	key := []byte("AWS4" + secret)
	for _, part := range scope[1:] {
		key = hmacSHA256(key, part)
	}
	return hex.EncodeToString(hmacSHA256(key, toSign))
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// sigEscape is SigV4's URI encoding: everything but A-Z a-z 0-9 - _ . ~.
func sigEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// serveTokenReview answers kube-apiserver's authentication webhook.
func (e *Emulator) serveTokenReview(w http.ResponseWriter, r *http.Request, body []byte) {
	var review authenticationv1.TokenReview
	if err := json.Unmarshal(body, &review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	id, err := e.verifyToken(review.Spec.Token, e.cfg.TokenClock.Now())
	call := Call{Service: "eks", Action: "TokenReview", Params: url.Values{}, Status: http.StatusOK}
	if err != nil {
		call.Code = "Unauthorized"
	} else {
		call.Params.Set("username", id.Username)
	}
	e.record(call)
	e.mu.Unlock()
	review.APIVersion, review.Kind = "authentication.k8s.io/v1", "TokenReview"
	review.Status = authenticationv1.TokenReviewStatus{}
	if err != nil {
		review.Status.Authenticated = false
		review.Status.Error = err.Error()
		e.log.Info("token rejected", "err", err)
	} else {
		review.Status.Authenticated = true
		review.Status.Audiences = review.Spec.Audiences
		review.Status.User = authenticationv1.UserInfo{
			Username: id.Username,
			UID:      "aws-iam-authenticator:" + e.cfg.AccountID + ":" + e.roleID(roleNameOf(id.RoleARN)),
			Groups:   id.Groups,
			Extra: map[string]authenticationv1.ExtraValue{
				"arn":          {id.RoleARN},
				"canonicalArn": {id.RoleARN},
				"sessionName":  {id.Name},
				"accessKeyId":  {id.AccessKeyID},
			},
		}
	}
	review.Spec.Token = ""
	out, _ := json.Marshal(review)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}
