// Package pricing knows the region's instance types, their on-demand and
// spot prices and which zones offer them, read from EC2 and the Price List
// API and kept in a ConfigMap so cold ticks reuse them.
package pricing

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	smithy "github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"

	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/timing"
)

// ConfigMapName holds the book, gzip-compressed JSON under BinaryData.
const ConfigMapName = "karpless-pricing"

// EC2 is what the book reads.
type EC2 interface {
	TypesEC2
	DescribeInstanceTypeOfferings(ctx context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
	DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, opts ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
}

// Book is the offerings and prices of one region at one time.
type Book struct {
	// Region is the region the book is of: its static on-demand prices
	// stand in for a price list never read.
	Region    string    `json:"region,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Zones lists, per instance type, the zones that offer it.
	Zones map[string][]string `json:"zones"`
	// Spot is the current Linux spot price per instance type and zone.
	Spot map[string]map[string]float64 `json:"spot"`
	// Live is the region's instance types and on-demand prices, read far
	// less often than spot prices.
	Live Live `json:"live"`

	// tried is set on a book whose Live part this invocation tried to read.
	tried bool
	// refreshErr is why a cold start has no offerings and spot prices:
	// every spot offering then carries an estimate, as Karpenter's spot
	// prices start from its static ones until its first read.
	refreshErr string
	memo       *catalogMemo
}

// Live is what was read of the region's instance types and on-demand
// prices. Each part is read a few pages per tick (timing.CatalogPagesPerTick),
// the next tick going on from where the last stopped, and replaces the
// last reading once all its pages are in. A part that could not be read
// keeps its last reading, if any, and says why in its error; with no
// reading the build stands in.
type Live struct {
	Region        string             `json:"region,omitempty"`
	Types         []catalog.Facts    `json:"types,omitempty"`
	TypesAt       time.Time          `json:"typesAt,omitzero"`
	TypesError    string             `json:"typesError,omitempty"`
	OnDemand      map[string]float64 `json:"onDemand,omitempty"`
	OnDemandAt    time.Time          `json:"onDemandAt,omitzero"`
	OnDemandError string             `json:"onDemandError,omitempty"`
	// NextTypes and NextPrices are readings in progress.
	NextTypes  *Progress `json:"nextTypes,omitempty"`
	NextPrices *Progress `json:"nextPrices,omitempty"`
	// TriedAt is the last attempt, Failures the attempts in a row that
	// failed: a failed part is tried again after CatalogRetryMin, doubled
	// with each failure up to PricingMaxAge.
	TriedAt  time.Time `json:"triedAt,omitzero"`
	Failures int       `json:"failures,omitempty"`
	// Traffic is what the last attempt cost.
	Traffic Traffic `json:"traffic"`
}

// Progress is a part read so far: its pages, and where the next begins.
type Progress struct {
	Pages int    `json:"pages"`
	Token string `json:"token,omitempty"`
	// Query is the price list query the token belongs to.
	Query  int                `json:"query,omitempty"`
	Types  []catalog.Facts    `json:"types,omitempty"`
	Prices map[string]float64 `json:"prices,omitempty"`
}

type catalogMemo struct {
	once     sync.Once
	cat      *catalog.Catalog
	fallback []string
}

// Catalog is the region's instance-type catalog as this book read it,
// the build (embedded) standing in for a part that was never read: its
// instance types, and the region's static on-demand prices
// (StaticOnDemand). fallback names each part the build stood in for, and
// why. The result is built once per book and shared: treat it as
// read-only.
func (b *Book) Catalog(embedded *catalog.Catalog) (cat *catalog.Catalog, fallback []string) {
	if b.memo == nil {
		b.memo = &catalogMemo{}
	}
	m := b.memo
	m.once.Do(func() {
		l := b.Live
		region := b.Region
		if region == "" {
			// A book saved before it named its region.
			region = l.Region
		}
		if region == "" {
			region = embedded.Region
		}
		if b.refreshErr != "" {
			m.fallback = append(m.fallback, "offerings and spot prices estimated: "+b.refreshErr)
		}
		if l.Types == nil {
			m.fallback = append(m.fallback, "instance types from the build: "+orUnread(l.TypesError, l.NextTypes))
		}
		onDemand := l.OnDemand
		if onDemand == nil {
			var from string
			onDemand, from = staticPrices(region, embedded)
			m.fallback = append(m.fallback, "on-demand prices from the build ("+from+"): "+orUnread(l.OnDemandError, l.NextPrices))
		}
		if l.Types == nil && region == embedded.Region && pricedAsBuilt(embedded, onDemand) {
			// The build as it is (no copy to make).
			m.cat = embedded
			return
		}
		// Types EC2 describes with unusable facts (no ENI limits) are left
		// out of the catalog: nothing could schedule onto them anyway.
		m.cat, _ = embedded.Live(region, l.Types, onDemand)
	})
	return m.cat, m.fallback
}

// pricedAsBuilt reports whether prices price every type of the build as
// the build does.
func pricedAsBuilt(embedded *catalog.Catalog, prices map[string]float64) bool {
	for _, t := range embedded.All() {
		if prices[t.Name] != t.OnDemandPrice {
			return false
		}
	}
	return true
}

// staticPrices are the on-demand prices that stand in for the region's
// price list: its static table (StaticOnDemand) and, where that table is
// of the build catalog's own region, the catalog's prices of the types
// the table lacks (types newer than Karpenter's table), which are that
// region's too. from names the table's region.
func staticPrices(region string, embedded *catalog.Catalog) (prices map[string]float64, from string) {
	prices, from, err := StaticOnDemand(region)
	if err != nil {
		// Not expected (the tables are compiled in and tested): the
		// build's catalog prices, as before there were tables.
		prices, from = map[string]float64{}, embedded.Region
	}
	if from == embedded.Region {
		for _, t := range embedded.All() {
			if _, ok := prices[t.Name]; !ok && t.OnDemandPrice > 0 {
				prices[t.Name] = t.OnDemandPrice
			}
		}
	}
	return prices, from
}

func orUnread(why string, p *Progress) string {
	switch {
	case why != "":
		return why
	case p != nil:
		return fmt.Sprintf("being read (%d pages so far)", p.Pages)
	}
	return "not read yet"
}

// ReadFailed reports whether this invocation's reading of the Live part
// failed (so a failure is reported once per attempt, not on every tick,
// and a reading in progress is not reported at all).
func (b *Book) ReadFailed() bool {
	return b.refreshErr != "" || b.tried && (b.Live.TypesError != "" || b.Live.OnDemandError != "")
}

// Offered reports whether the zone offers the type.
func (b *Book) Offered(instanceType, zone string) bool {
	for _, z := range b.Zones[instanceType] {
		if z == zone {
			return true
		}
	}
	return false
}

// SpotPrice is the type's spot price in the zone, if known.
func (b *Book) SpotPrice(instanceType, zone string) (float64, bool) {
	p, ok := b.Spot[instanceType][zone]
	return p, ok
}

// Cache is what a warm container remembers of the book between
// invocations: the last one it decoded (or read and could not save).
type Cache struct {
	mu sync.Mutex
	// last is the book of ConfigMap version lastVersion, decoded once
	// (version "": read here, not saved).
	last        *Book
	lastVersion string
}

// Source reads the book from the ConfigMap and refreshes it from EC2 when
// it is older than MaxAge (or missing, or unreadable), and its Live part
// when that is older than CatalogMaxAge. Keep one Source per warm
// container, or give the Sources of one container the same Cache: the
// last book decoded is remembered there.
type Source struct {
	EC2 EC2
	// PriceList reads on-demand prices; nil where the region has no Price
	// List API (GovCloud), and the build's prices stand in.
	PriceList PriceList
	// Region is the region whose types and prices are read.
	Region        string
	ConfigMap     corev1client.ConfigMapsGetter
	Namespace     string
	MaxAge        time.Duration
	CatalogMaxAge time.Duration
	// PagesPerTick bounds the pages of each part one Get reads (0:
	// timing.CatalogPagesPerTick).
	PagesPerTick int
	Clock        clock.PassiveClock
	// Cache is the container's memory of the book (nil: the Source's own).
	Cache *Cache

	own Cache
}

func (s *Source) cache() *Cache {
	if s.Cache != nil {
		return s.Cache
	}
	return &s.own
}

// Get returns a book no older than MaxAge.
func (s *Source) Get(ctx context.Context) (*Book, error) {
	maxAge := s.MaxAge
	if maxAge == 0 {
		maxAge = timing.PricingMaxAge
	}
	cm, err := s.ConfigMap.ConfigMaps(s.Namespace).Get(ctx, ConfigMapName, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading pricing: %w", err)
	}
	found := err == nil
	var stale *Book
	if found {
		stale = s.decoded(cm)
	} else {
		// Without the ConfigMap (deleted; the functions may not create
		// it), a warm container still reuses what it read last.
		stale = s.unsaved()
	}
	spotDue := stale == nil || s.Clock.Since(stale.UpdatedAt) >= maxAge
	// One refresh per tick: the Live part waits for a tick that does not
	// also read the spot prices, so no tick pays for both.
	liveDue := !spotDue && s.liveDue(stale)
	if !spotDue && !liveDue {
		return stale, nil
	}
	next := &Book{Region: s.Region}
	if stale != nil {
		next.UpdatedAt, next.Zones, next.Spot, next.Live = stale.UpdatedAt, stale.Zones, stale.Spot, stale.Live
	}
	if spotDue {
		b, err := s.refresh(ctx)
		switch {
		case err == nil:
			next.UpdatedAt, next.Zones, next.Spot = b.UpdatedAt, b.Zones, keepQuotes(next.Spot, b.Spot)
		case stale == nil:
			// Nothing read yet: the build's catalog and estimated spot
			// prices stand in (not saved, so the next tick reads again)
			// rather than no launch at all.
			return &Book{Region: s.Region, refreshErr: err.Error()}, nil
		default:
			// Offerings and spot prices move slowly: an older book is
			// better than no pass at all (a throttled call, an outage).
			return stale, nil
		}
	}
	if liveDue {
		next.Live = s.readLive(ctx, next.Live)
	}
	data, err := encode(next)
	if err != nil {
		return nil, err
	}
	// Saving is an optimisation: a failed or lost write only costs the next
	// tick another refresh, so conflicts are not retried.
	want := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: s.Namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "karpless"}},
		BinaryData: map[string][]byte{"book": data},
	}
	var saved *corev1.ConfigMap
	if !found {
		saved, err = s.ConfigMap.ConfigMaps(s.Namespace).Create(ctx, want, metav1.CreateOptions{})
	} else {
		want.ResourceVersion = cm.ResourceVersion
		saved, err = s.ConfigMap.ConfigMaps(s.Namespace).Update(ctx, want, metav1.UpdateOptions{})
	}
	if err == nil {
		s.remember(saved.ResourceVersion, next)
	} else {
		s.remember("", next)
	}
	out := *next
	out.tried = liveDue
	return &out, nil
}

// decoded is the book in cm, decoded once per version; nil if it does
// not decode.
func (s *Source) decoded(cm *corev1.ConfigMap) *Book {
	c := s.cache()
	c.mu.Lock()
	if c.last != nil && c.lastVersion == cm.ResourceVersion {
		defer c.mu.Unlock()
		return c.last
	}
	c.mu.Unlock()
	b, err := decode(cm.BinaryData["book"])
	if err != nil {
		return nil
	}
	if b.Region == "" {
		// Saved before books named their region: the ConfigMap is this
		// cluster's, so of this region.
		b.Region = s.Region
	}
	s.remember(cm.ResourceVersion, b)
	return b
}

// unsaved is the book this container read but could not save, if any.
func (s *Source) unsaved() *Book {
	c := s.cache()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastVersion == "" {
		return c.last
	}
	return nil
}

func (s *Source) remember(version string, b *Book) {
	c := s.cache()
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := *b
	keep.tried = false
	c.last, c.lastVersion = &keep, version
}

// liveDue says whether the Live part should be read: never read for this
// region, a reading older than CatalogMaxAge, or one in progress; after a
// failure, only once its backoff (CatalogRetryMin doubled per failure in a
// row, at most PricingMaxAge) has passed.
func (s *Source) liveDue(b *Book) bool {
	if b == nil || b.Live.Region != s.Region {
		return true
	}
	l := b.Live
	if !s.partDue(l.TypesAt, l.NextTypes) && (s.PriceList == nil || !s.partDue(l.OnDemandAt, l.NextPrices)) {
		return false
	}
	if l.Failures == 0 || l.TriedAt.IsZero() {
		return true
	}
	retry := timing.CatalogRetryMin << min(l.Failures-1, 10)
	return s.Clock.Since(l.TriedAt) >= min(retry, timing.PricingMaxAge)
}

// partDue says whether a part is to be read (on): in progress, never
// read, or older than CatalogMaxAge.
func (s *Source) partDue(at time.Time, p *Progress) bool {
	maxAge := s.CatalogMaxAge
	if maxAge == 0 {
		maxAge = timing.CatalogMaxAge
	}
	return p != nil || at.IsZero() || s.Clock.Since(at) >= maxAge
}

// readLive reads the next pages of what is due of the region's types and
// on-demand prices, the two in parallel, at most CatalogPagesPerTick
// each: a tick never spends long on it, and a tick killed midway loses
// only its own pages. A part that fails keeps its progress (or restarts,
// when EC2 or the price list no longer knows its page token) and its last
// complete reading.
func (s *Source) readLive(ctx context.Context, prev Live) Live {
	// The reads must not eat the tick: what is not read in time is read
	// on the next one.
	ctx, cancel := context.WithTimeout(ctx, timing.CatalogReadTimeout)
	defer cancel()
	if prev.Region != s.Region {
		prev = Live{}
	}
	next := prev
	next.Region, next.TriedAt, next.Traffic = s.Region, s.Clock.Now(), Traffic{}
	pages := s.PagesPerTick
	if pages == 0 {
		pages = timing.CatalogPagesPerTick
	}
	var wg sync.WaitGroup
	var typesTraffic, pricesTraffic Traffic
	if s.partDue(prev.TypesAt, prev.NextTypes) {
		wg.Go(func() {
			p := resume(prev.NextTypes)
			facts, token, tr, err := typePages(ctx, s.EC2, p.Token, pages)
			typesTraffic = tr
			p.Types, p.Token, p.Pages = append(p.Types, facts...), token, p.Pages+tr.Calls
			switch {
			case err != nil:
				next.TypesError, next.NextTypes = err.Error(), keepUnlessExpired(p, err)
			case token == "":
				next.Types, next.TypesAt, next.TypesError, next.NextTypes = p.Types, s.Clock.Now(), "", nil
			default:
				next.TypesError, next.NextTypes = "", p
			}
		})
	}
	switch {
	case s.PriceList == nil:
		next.OnDemand, next.OnDemandError, next.NextPrices = nil, "the Price List API does not serve "+s.Region, nil
	case s.partDue(prev.OnDemandAt, prev.NextPrices):
		wg.Go(func() {
			p := resume(prev.NextPrices)
			q, token, tr, err := pricePages(ctx, s.PriceList, s.Region, p.Query, p.Token, pages, p.Prices)
			pricesTraffic = tr
			p.Query, p.Token, p.Pages = q, token, p.Pages+tr.Calls
			switch {
			case err != nil:
				next.OnDemandError, next.NextPrices = err.Error(), keepUnlessExpired(p, err)
			case q < len(priceQueries):
				next.OnDemandError, next.NextPrices = "", p
			case len(p.Prices) == 0:
				next.OnDemandError, next.NextPrices = "reading on-demand prices: the price list has none for "+s.Region, nil
			default:
				// A price the new list lacks keeps its last reading, as
				// Karpenter keeps its previous prices.
				for name, price := range prev.OnDemand {
					if _, ok := p.Prices[name]; !ok {
						p.Prices[name] = price
					}
				}
				next.OnDemand, next.OnDemandAt, next.OnDemandError, next.NextPrices = p.Prices, s.Clock.Now(), "", nil
			}
		})
	}
	wg.Wait()
	next.Traffic = Traffic{Calls: typesTraffic.Calls + pricesTraffic.Calls, Bytes: typesTraffic.Bytes + pricesTraffic.Bytes}
	next.Failures = 0
	if next.TypesError != "" || (s.PriceList != nil && next.OnDemandError != "") {
		next.Failures = prev.Failures + 1
	}
	return next
}

// resume is a copy of a reading in progress that this tick may extend
// without touching the book it came from (or a new one).
func resume(p *Progress) *Progress {
	if p == nil {
		return &Progress{Prices: map[string]float64{}}
	}
	c := *p
	c.Types = slices.Clip(p.Types)
	c.Prices = maps.Clone(p.Prices)
	if c.Prices == nil {
		c.Prices = map[string]float64{}
	}
	return &c
}

// keepUnlessExpired keeps a reading's progress after a failed page, unless
// the failure says its page token is no longer good: then it starts over.
func keepUnlessExpired(p *Progress, err error) *Progress {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "InvalidNextToken", "InvalidNextTokenException", "ExpiredNextTokenException", "InvalidPaginationToken":
			return nil
		}
	}
	return p
}

// refresh reads offerings and current spot prices from EC2 (not the Live
// part).
func (s *Source) refresh(ctx context.Context) (*Book, error) {
	b := &Book{UpdatedAt: s.Clock.Now(), Zones: map[string][]string{}, Spot: map[string]map[string]float64{}}
	offerings := ec2.NewDescribeInstanceTypeOfferingsPaginator(s.EC2, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone, MaxResults: aws.Int32(1000),
	})
	for offerings.HasMorePages() {
		page, err := offerings.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instance type offerings: %w", err)
		}
		for _, o := range page.InstanceTypeOfferings {
			t := string(o.InstanceType)
			b.Zones[t] = append(b.Zones[t], aws.ToString(o.Location))
		}
	}
	for t := range b.Zones {
		sort.Strings(b.Zones[t])
	}
	prices := ec2.NewDescribeSpotPriceHistoryPaginator(s.EC2, &ec2.DescribeSpotPriceHistoryInput{
		StartTime:           aws.Time(s.Clock.Now()),
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"},
		MaxResults:          aws.Int32(1000),
	})
	seen := map[string]time.Time{}
	for prices.HasMorePages() {
		page, err := prices.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing spot price history: %w", err)
		}
		for _, p := range page.SpotPriceHistory {
			t, z := string(p.InstanceType), aws.ToString(p.AvailabilityZone)
			price, err := strconv.ParseFloat(aws.ToString(p.SpotPrice), 64)
			if err != nil {
				continue
			}
			// Keep the newest quote per (type, zone).
			k, at := t+"/"+z, aws.ToTime(p.Timestamp)
			if prev, ok := seen[k]; ok && !at.After(prev) {
				continue
			}
			seen[k] = at
			if b.Spot[t] == nil {
				b.Spot[t] = map[string]float64{}
			}
			b.Spot[t][z] = price
		}
	}
	return b, nil
}

// keepQuotes is fresh with the quotes of old that fresh lacks: a spot
// price EC2 did not quote again keeps its last quote, as Karpenter keeps
// its previous prices (a partial answer must not take spot markets away).
func keepQuotes(old, fresh map[string]map[string]float64) map[string]map[string]float64 {
	for t, zones := range old {
		for z, price := range zones {
			if _, ok := fresh[t][z]; ok {
				continue
			}
			if fresh[t] == nil {
				fresh[t] = map[string]float64{}
			}
			fresh[t][z] = price
		}
	}
	return fresh
}

func encode(b *Book) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func decode(data []byte) (*Book, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 16<<20))
	if err != nil {
		return nil, err
	}
	b := &Book{}
	if err := json.Unmarshal(raw, b); err != nil {
		return nil, err
	}
	return b, nil
}
