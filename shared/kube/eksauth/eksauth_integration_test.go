package eksauth_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/karpless/karpless/shared/kube/eksauth"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/emulator/emulatortest"
)

// TestIntegrationTokenAcceptedByEmulator signs tokens with the real SDK
// against the emulator's STS and has the emulator verify them as EKS would,
// directly and through an API server that authenticates with the
// emulator's TokenReview webhook.
func TestIntegrationTokenAcceptedByEmulator(t *testing.T) {
	emu, c := emulatortest.SDKClients(t, 3, "provisioner")
	ctx := context.Background()
	presigner := eksauth.NewPresigner(c.STS)

	tok, _, err := eksauth.Token(ctx, presigner, emu.ClusterName())
	if err != nil {
		t.Fatal(err)
	}
	who, err := emu.VerifyToken(tok)
	if err != nil || who.Name != "provisioner" {
		t.Fatalf("emulator rejected the token: %v (%+v)", err, who)
	}
	other, _, _ := eksauth.Token(ctx, presigner, "another-cluster")
	if _, err := emu.VerifyToken(other); err == nil {
		t.Fatal("a token for another cluster was accepted")
	}

	// An API server that asks the emulator's webhook who the caller is.
	apiserver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		body, _ := json.Marshal(authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: bearer}})
		resp, err := http.Post(emu.TokenWebhookURL(), "application/json", bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer resp.Body.Close()
		var review authenticationv1.TokenReview
		if err := json.NewDecoder(resp.Body).Decode(&review); err != nil || !review.Status.Authenticated {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.0"}`))
	}))
	t.Cleanup(apiserver.Close)
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: apiserver.Certificate().Raw}))
	cluster := eksauth.New(eksauth.ClusterSource{Name: emu.ClusterName(), Endpoint: apiserver.URL, CAData: ca, EKS: c.EKS, STS: presigner})
	cfg, err := cluster.RESTConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil || v.Minor != "37" {
		t.Fatalf("authenticated call failed: %v %+v", err, v)
	}
	if n := emu.CallCount("TokenReview"); n != 1 {
		t.Errorf("TokenReview calls %d", n)
	}
	// The service CIDR and version come from the emulator's EKS.
	info, err := cluster.Info(ctx)
	if err != nil || info.ServiceCIDR != emulator.DefaultServiceCIDR || info.KubernetesVersion != emulator.DefaultKubernetesVersion {
		t.Fatalf("info %+v %v", info, err)
	}
}
