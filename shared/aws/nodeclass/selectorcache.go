package nodeclass

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpless/karpless/shared/core/timing"
)

// SelectorCache is a warm container's memory of what selector queries
// found: the union of the Describe calls of one EC2NodeClass's subnet,
// security group or AMI terms, for timing.SelectorCacheTTL. Karpenter keeps
// the same (its subnet, security group and AMI providers cache a class's
// results for DefaultTTL), so that resolving a class again, or several
// classes with the same terms, costs no EC2 call.
//
// Entries are keyed by the queries themselves (kind, filters, owners), not
// by the class: a changed selector, or an alias whose SSM parameter now
// names another image, is a different key and reads EC2 again. Errors are
// never remembered. Keep one per warm container (app.Warm), never one per
// package: a cold start must start empty. A nil *SelectorCache remembers
// nothing. Safe for concurrent use.
type SelectorCache struct {
	mu      sync.Mutex
	entries map[string]selectorEntry
	// swept is when expired entries were last dropped.
	swept time.Time
}

type selectorEntry struct {
	value   any
	expires time.Time
}

// get returns the value stored under key unless it has expired at now.
func (c *SelectorCache) get(key string, now time.Time) (any, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.expires) {
		return nil, false
	}
	return e.value, true
}

// put stores v under key until now plus the TTL. The caller gives up v:
// readers get copies of the slice, so v is never written again.
func (c *SelectorCache) put(key string, v any, now time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]selectorEntry{}
	}
	// A container lives for hours: drop what expired, at most once a TTL,
	// so classes deleted or edited long ago do not pile up.
	if now.Sub(c.swept) >= timing.SelectorCacheTTL {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		c.swept = now
	}
	c.entries[key] = selectorEntry{value: v, expires: now.Add(timing.SelectorCacheTTL)}
}

// len counts the entries alive at now.
func (c *SelectorCache) len(now time.Time) int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.entries {
		if now.Before(e.expires) {
			n++
		}
	}
	return n
}

// cached answers a query from c when it can, else runs describe and
// remembers a successful answer. The returned slice is the caller's own.
func cached[T any](c *SelectorCache, key string, now time.Time, describe func() ([]T, error)) ([]T, error) {
	if v, ok := c.get(key, now); ok {
		if found, ok := v.([]T); ok {
			return append([]T(nil), found...), nil
		}
	}
	found, err := describe()
	if err != nil {
		return nil, err
	}
	c.put(key, found, now)
	return append([]T(nil), found...), nil
}

// queryKey names a set of Describe calls: what kind of resource, and each
// call's owners and filters, in order. Every string is quoted, so no two
// sets of calls share a key.
func queryKey(kind string, queries []ImageQuery) string {
	var b strings.Builder
	b.WriteString(kind)
	for _, q := range queries {
		b.WriteString(" {owners")
		for _, o := range q.Owners {
			b.WriteString(" " + strconv.Quote(o))
		}
		for _, f := range q.Filters {
			b.WriteString("; " + strconv.Quote(aws.ToString(f.Name)))
			for _, v := range f.Values {
				b.WriteString(" " + strconv.Quote(v))
			}
		}
		b.WriteString("}")
	}
	return b.String()
}

// filterSetsKey names the Describe calls of subnet or security group
// filter sets.
func filterSetsKey(kind string, sets [][]ec2types.Filter) string {
	qs := make([]ImageQuery, len(sets))
	for i, s := range sets {
		qs[i].Filters = s
	}
	return queryKey(kind, qs)
}
