// Package pricing knows which instance types each zone offers and their spot
// prices, read from EC2 and kept in a ConfigMap so cold ticks reuse them.
package pricing

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/karpless/karpless/shared/core/timing"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"
)

// ConfigMapName holds the book, gzip-compressed JSON under BinaryData.
const ConfigMapName = "karpless-pricing"

// EC2 is what the book reads.
type EC2 interface {
	DescribeInstanceTypeOfferings(ctx context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
	DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, opts ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
}

// Book is the offerings and spot prices of one region at one time.
type Book struct {
	UpdatedAt time.Time `json:"updatedAt"`
	// Zones lists, per instance type, the zones that offer it.
	Zones map[string][]string `json:"zones"`
	// Spot is the current Linux spot price per instance type and zone.
	Spot map[string]map[string]float64 `json:"spot"`
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

// Source reads the book from the ConfigMap and refreshes it from EC2 when it
// is older than MaxAge (or missing, or unreadable).
type Source struct {
	EC2       EC2
	ConfigMap corev1client.ConfigMapsGetter
	Namespace string
	MaxAge    time.Duration
	Clock     clock.PassiveClock
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
		b, derr := decode(cm.BinaryData["book"])
		if derr == nil && s.Clock.Since(b.UpdatedAt) < maxAge {
			return b, nil
		}
		if derr == nil {
			stale = b
		}
	}
	b, err := s.Refresh(ctx)
	if err != nil {
		if stale != nil {
			// Offerings and spot prices move slowly: an older book is
			// better than no pass at all (a throttled call, an outage).
			return stale, nil
		}
		return nil, err
	}
	data, err := encode(b)
	if err != nil {
		return nil, err
	}
	// Saving is an optimisation: a failed or lost write only costs the next
	// tick another refresh, so conflicts are not retried.
	next := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: s.Namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "karpless"}},
		BinaryData: map[string][]byte{"book": data},
	}
	if !found {
		_, _ = s.ConfigMap.ConfigMaps(s.Namespace).Create(ctx, next, metav1.CreateOptions{})
	} else {
		next.ResourceVersion = cm.ResourceVersion
		_, _ = s.ConfigMap.ConfigMaps(s.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	}
	return b, nil
}

// Refresh reads offerings and current spot prices from EC2.
func (s *Source) Refresh(ctx context.Context) (*Book, error) {
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
