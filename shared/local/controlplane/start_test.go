package controlplane

import (
	"context"
	"errors"
	"os"
	"testing"
)

// TestOwnEtcdTellsStartsApart: the check Start makes before it gives etcd to
// the API server knows this start's etcd from another start's on the same
// port (two test binaries start control planes at once; CI once had two API
// servers share one store). Run against a real etcd: its JSON gateway's
// member list is what the check reads.
func TestOwnEtcdTellsStartsApart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	c, err := Start(context.Background(), Config{})
	if errors.Is(err, ErrNotBuilt) && os.Getenv("KARPLESS_REQUIRE_KUBE") != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if !ownEtcd(c.etcdURL, c.etcdMember) {
		t.Errorf("etcd at %s is not known as its own member %s", c.etcdURL, c.etcdMember)
	}
	if ownEtcd(c.etcdURL, "karpless-another-start") {
		t.Errorf("etcd at %s taken for another start's", c.etcdURL)
	}
	if ownEtcd("http://127.0.0.1:1", c.etcdMember) {
		t.Error("nothing listening taken for this start's etcd")
	}
}
