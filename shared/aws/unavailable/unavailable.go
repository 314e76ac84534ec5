// Package unavailable remembers offerings (capacity type, instance type, zone) that
// recently failed for lack of capacity, and subnets that ran out of
// addresses, in a ConfigMap shared by all invocations.
package unavailable

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
)

// ConfigMapName holds the marks: key "<capacity-type>_<instance-type>_<zone>"
// or "subnet_<subnet-id>" (ConfigMap keys allow only [-._a-zA-Z0-9]), value
// the RFC 3339 time the mark expires.
const ConfigMapName = "karpless-unavailable-offerings"

// Cache is a snapshot of the marks plus the ones added in this invocation.
type Cache struct {
	client corev1client.ConfigMapsGetter
	ns     string
	ttl    time.Duration
	clock  clock.PassiveClock

	mu      sync.Mutex
	marks   map[string]time.Time
	added   map[string]time.Time
	reasons map[string]string
}

// Load reads the marks. A missing ConfigMap is an empty cache.
func Load(ctx context.Context, client corev1client.ConfigMapsGetter, ns string, ttl time.Duration, clk clock.PassiveClock) (*Cache, error) {
	c := &Cache{client: client, ns: ns, ttl: ttl, clock: clk, marks: map[string]time.Time{}, added: map[string]time.Time{}, reasons: map[string]string{}}
	cm, err := client.ConfigMaps(ns).Get(ctx, ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading unavailable offerings: %w", err)
	}
	c.marks = decode(cm.Data, clk.Now())
	return c, nil
}

// Key is the mark of one offering.
func Key(capacityType, instanceType, zone string) string {
	return capacityType + ":" + instanceType + ":" + zone
}

// subnetKey is the mark of a subnet; no capacity type is "subnet".
func subnetKey(id string) string { return "subnet:" + id }

// Unavailable reports whether the offering is marked, or its whole capacity
// type is (MarkCapacityType), and the mark is live.
func (c *Cache) Unavailable(capacityType, instanceType, zone string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for _, k := range []string{Key(capacityType, instanceType, zone), Key(capacityType, "", "")} {
		if until, ok := c.marks[k]; ok && now.Before(until) {
			return true
		}
	}
	return false
}

// MarkSubnet takes a subnet out for the TTL, as Karpenter's
// MarkSubnetUnavailable when a launch into it met
// InsufficientFreeAddressesInSubnet: launches use the zone's other
// subnets, and a zone whose subnets are all marked offers no spot or
// on-demand capacity (instancetype.Unavailable).
func (c *Cache) MarkSubnet(id, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := subnetKey(id)
	until := c.clock.Now().Add(c.ttl)
	c.marks[k] = until
	c.added[k] = until
	c.reasons[k] = reason
}

// SubnetUnavailable reports whether the subnet's mark is live.
func (c *Cache) SubnetUnavailable(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.marks[subnetKey(id)]
	return ok && c.clock.Now().Before(until)
}

// MarkCapacityType takes every offering of a capacity type out for the TTL,
// as Karpenter does when the spot service-linked role is missing: no spot
// launch can succeed, so on-demand is tried at once.
func (c *Cache) MarkCapacityType(capacityType, reason string) {
	c.Mark(capacityType, "", "", reason)
}

// Mark takes an offering out for the TTL. reason is kept for logs.
func (c *Cache) Mark(capacityType, instanceType, zone, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := Key(capacityType, instanceType, zone)
	until := c.clock.Now().Add(c.ttl)
	c.marks[k] = until
	c.added[k] = until
	c.reasons[k] = reason
}

// Pending is the number of marks not yet saved.
func (c *Cache) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.added)
}

// Save merges this invocation's marks into the ConfigMap (keeping the later
// expiry of each key, dropping expired ones) with retries on conflict, so
// concurrent writers never lose each other's marks.
func (c *Cache) Save(ctx context.Context) error {
	c.mu.Lock()
	added := make(map[string]time.Time, len(c.added))
	for k, v := range c.added {
		added[k] = v
	}
	c.mu.Unlock()
	if len(added) == 0 {
		return nil
	}
	cms := c.client.ConfigMaps(c.ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		now := c.clock.Now()
		cm, err := cms.Get(ctx, ConfigMapName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: c.ns, Labels: map[string]string{"app.kubernetes.io/managed-by": "karpless"}},
				Data:       encode(merge(nil, added, now)),
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), ConfigMapName, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		cm = cm.DeepCopy()
		cm.Data = encode(merge(decode(cm.Data, now), added, now))
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("saving unavailable offerings: %w", err)
	}
	c.mu.Lock()
	for k, v := range added {
		if c.added[k].Equal(v) {
			delete(c.added, k)
		}
	}
	c.mu.Unlock()
	return nil
}

// Entries lists the live marks, sorted, for explanations.
func (c *Cache) Entries() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	var out []string
	for k, v := range c.marks {
		if now.Before(v) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func merge(cur, added map[string]time.Time, now time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	for _, m := range []map[string]time.Time{cur, added} {
		for k, v := range m {
			if v.After(now) && v.After(out[k]) {
				out[k] = v
			}
		}
	}
	return out
}

func decode(data map[string]string, now time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	for k, v := range data {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil || !t.After(now) {
			continue
		}
		switch parts := strings.Split(k, "_"); {
		case len(parts) == 3:
			out[Key(parts[0], parts[1], parts[2])] = t
		case len(parts) == 2 && parts[0] == "subnet":
			out[subnetKey(parts[1])] = t
		}
	}
	return out
}

// encode stores marks under ConfigMap-safe keys: no capacity type,
// instance type, zone name or subnet id contains "_".
func encode(m map[string]time.Time) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.ReplaceAll(k, ":", "_")] = v.UTC().Format(time.RFC3339)
	}
	return out
}
