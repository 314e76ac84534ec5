package pricing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	smithy "github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/core/catalog"
)

func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// fakePriceList answers with m5.large at price, or fails with err.
type fakePriceList struct {
	calls   int
	price   string
	err     error
	filters []string
}

func (f *fakePriceList) GetProducts(_ context.Context, in *pricing.GetProductsInput, _ ...func(*pricing.Options)) (*pricing.GetProductsOutput, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	f.filters = f.filters[:0]
	for _, fl := range in.Filters {
		f.filters = append(f.filters, aws.ToString(fl.Field)+"="+aws.ToString(fl.Value))
	}
	return &pricing.GetProductsOutput{PriceList: []string{priceItem("m5.large", f.price), `{"product":{}}`, `not json`}}, nil
}

func priceItem(name, usd string) string {
	return fmt.Sprintf(`{"product":{"productFamily":"Compute Instance","attributes":{"instanceType":%q,"operatingSystem":"Linux"}},"terms":{"OnDemand":{"SKU.JRTCKXETXF":{"priceDimensions":{"SKU.JRTCKXETXF.6YS6EN2CT7":{"unit":"Hrs","pricePerUnit":{"USD":%q}}}}}}}`, name, usd)
}

type failingTypes struct{ *fakeEC2 }

func (failingTypes) DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	return nil, errors.New("UnauthorizedOperation: not authorized to perform ec2:DescribeInstanceTypes")
}

func TestLiveCatalog(t *testing.T) {
	ctx := context.Background()
	embedded, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	built, _ := embedded.Get("m5.large")
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	cms := fake.NewClientset().CoreV1()
	api := &fakeEC2{now: clk.Now()}
	prices := &fakePriceList{price: "0.1150000000"}
	src := func(e EC2, p PriceList) *Source {
		return &Source{EC2: e, PriceList: p, Region: "eu-central-1", ConfigMap: cms, Namespace: "kube-system", Clock: clk}
	}
	// quiet keeps the spot part fresh for the rest of the test, so that
	// every Get may read the live part (one refresh per tick).
	quiet := func(e EC2, p PriceList) *Source {
		q := src(e, p)
		q.MaxAge = 100 * time.Hour
		return q
	}

	// The first tick reads the spot prices, the next the live part.
	b, err := src(api, prices).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.tried || b.Live.Types != nil {
		t.Fatalf("the first tick read both the spot prices and the live part")
	}
	if b, err = src(api, prices).Get(ctx); err != nil {
		t.Fatal(err)
	}
	cat, fallback := b.Catalog(embedded)
	if len(fallback) != 0 || !b.tried || b.ReadFailed() {
		t.Fatalf("fallback %v tried %v failed %v", fallback, b.tried, b.ReadFailed())
	}
	got, ok := cat.Get("m5.large")
	if !ok || got.OnDemandPrice != 0.115 || cat.Len() != 1 || cat.Region != "eu-central-1" {
		t.Fatalf("live catalog: %d types in %s, m5.large %v", cat.Len(), cat.Region, got)
	}
	a1, _ := got.Allocatable(catalog.NodeConfig{})
	a2, _ := built.Allocatable(catalog.NodeConfig{})
	if !equalLists(a1, a2) {
		t.Fatalf("allocatable from the live facts %v, from the build %v", a1, a2)
	}
	if want := "regionCode=eu-central-1"; !strings.Contains(strings.Join(prices.filters, ","), want) {
		t.Fatalf("filters %v lack %s", prices.filters, want)
	}
	if b.Live.Traffic.Calls != 3 {
		t.Fatalf("traffic %+v: want 1 DescribeInstanceTypes + 2 GetProducts", b.Live.Traffic)
	}

	// Warm and cold ticks inside CatalogMaxAge read neither API again.
	calls, pcalls := api.calls, prices.calls
	clk.Step(11 * time.Minute) // spot due, live not
	b2, err := src(api, prices).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if prices.calls != pcalls || b2.tried || b2.Live.TypesAt != b.Live.TypesAt {
		t.Fatalf("live part read again inside its max age (tried %v)", b2.tried)
	}
	if api.calls == calls {
		t.Fatal("spot part not refreshed")
	}

	// After CatalogMaxAge both parts fail: the last readings stay.
	clk.Step(13 * time.Hour)
	broken := quiet(failingTypes{api}, &fakePriceList{err: errors.New("AccessDeniedException: pricing:GetProducts")})
	b3, err := broken.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cat3, fb := b3.Catalog(embedded); len(fb) != 0 || cat3.Len() != 1 {
		t.Fatalf("a failed refresh dropped the last reading: fallback %v, %d types", fb, cat3.Len())
	}
	if b3.Live.TypesError == "" || b3.Live.OnDemandError == "" || !b3.ReadFailed() {
		t.Fatalf("errors not recorded: %+v", b3.Live)
	}
	// The failed parts are retried after a minute, then two, four, ...
	// (CatalogRetryMin doubled per failure in a row), not on every tick.
	denied := &fakePriceList{err: errors.New("AccessDeniedException: pricing:GetProducts")}
	for i, wait := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute} {
		clk.Step(wait - 30*time.Second)
		before := denied.calls
		if b, err := quiet(failingTypes{api}, denied).Get(ctx); err != nil || denied.calls != before || b.tried {
			t.Fatalf("failure %d: retried after %s: calls %d err %v", i+1, wait-30*time.Second, denied.calls-before, err)
		}
		clk.Step(30 * time.Second)
		b, err := quiet(failingTypes{api}, denied).Get(ctx)
		if err != nil || denied.calls == before || !b.ReadFailed() || b.Live.Failures != i+2 {
			t.Fatalf("failure %d: not retried after %s (failures %d)", i+1, wait, b.Live.Failures)
		}
	}
	clk.Step(10 * time.Minute)
	if _, err := quiet(api, prices).Get(ctx); err != nil {
		t.Fatal(err)
	}
	b5, _ := quiet(api, prices).Get(ctx)
	if b5.Live.TypesError != "" || b5.Live.OnDemandError != "" {
		t.Fatalf("not recovered: %+v", b5.Live)
	}
}

func TestLiveCatalogFallback(t *testing.T) {
	ctx := context.Background()
	embedded, _ := catalog.Load()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	for name, tc := range map[string]struct {
		ec2    EC2
		prices PriceList
		region string
		want   []string
		types  int
		// m5 is m5.large's price (0: the build's).
		m5 float64
	}{
		"types fail": {failingTypes{&fakeEC2{now: clk.Now()}}, &fakePriceList{price: "0.2"}, "eu-central-1",
			[]string{"instance types from the build: describing instance types: UnauthorizedOperation"}, embedded.Len(), 0},
		"prices fail": {&fakeEC2{now: clk.Now()}, &fakePriceList{err: errors.New("ThrottlingException: Rate exceeded")}, "eu-central-1",
			[]string{"on-demand prices from the build (us-east-1): reading on-demand prices (Compute Instance): ThrottlingException"}, 1, 0},
		"GovCloud": {&fakeEC2{now: clk.Now()}, nil, "us-gov-west-1",
			[]string{"on-demand prices from the build (us-gov-west-1): the Price List API does not serve us-gov-west-1"}, 1, 0.121},
		"no prices in the list": {&fakeEC2{now: clk.Now()}, &fakePriceList{price: "0"}, "eu-central-1",
			[]string{"on-demand prices from the build (us-east-1): reading on-demand prices: the price list has none for eu-central-1"}, 1, 0},
	} {
		t.Run(name, func(t *testing.T) {
			src := &Source{EC2: tc.ec2, PriceList: tc.prices, Region: tc.region, ConfigMap: fake.NewClientset().CoreV1(), Namespace: "kube-system", Clock: clk}
			if _, err := src.Get(ctx); err != nil { // the spot part
				t.Fatal(err)
			}
			b, err := src.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cat, fb := b.Catalog(embedded)
			if len(fb) != len(tc.want) {
				t.Fatalf("fallback %q, want %q", fb, tc.want)
			}
			for i := range fb {
				if !strings.HasPrefix(fb[i], tc.want[i]) {
					t.Fatalf("fallback %q, want prefix %q", fb[i], tc.want[i])
				}
			}
			if cat.Len() != tc.types {
				t.Fatalf("%d types, want %d", cat.Len(), tc.types)
			}
			m5, _ := cat.Get("m5.large")
			want := tc.m5
			if built, _ := embedded.Get("m5.large"); want == 0 {
				want = built.OnDemandPrice
			}
			if name != "types fail" && m5.OnDemandPrice != want {
				t.Fatalf("m5.large at %v, want the static %v", m5.OnDemandPrice, want)
			}
		})
	}
}

func TestParseProduct(t *testing.T) {
	for _, tc := range []struct {
		item, currency string
		name           string
		price          float64
		ok             bool
	}{
		{priceItem("m5.large", "0.0960000000"), "USD", "m5.large", 0.096, true},
		{priceItem("m5.large", "0.0000000000"), "USD", "m5.large", 0, false},
		{priceItem("m5.large", "0.096"), "CNY", "m5.large", 0, false},
		{strings.Replace(priceItem("m5.large", "0.096"), `"Hrs"`, `"Quantity"`, 1), "USD", "m5.large", 0, false},
		{`{"product":{"attributes":{}}}`, "USD", "", 0, false},
		{`[]`, "USD", "", 0, false},
		{``, "USD", "", 0, false},
	} {
		name, price, ok := parseProduct(tc.item, tc.currency)
		if ok != tc.ok || (ok && (name != tc.name || price != tc.price)) {
			t.Errorf("%.60s: %q %v %v, want %q %v %v", tc.item, name, price, ok, tc.name, tc.price, tc.ok)
		}
	}
}

// FuzzParseProduct: any price list entry is parsed or skipped, never a
// panic, and a parsed price is positive and finite.
func FuzzParseProduct(f *testing.F) {
	f.Add(priceItem("m5.large", "0.096"), "USD")
	f.Add(`{"terms":{"OnDemand":{"x":{"priceDimensions":{"y":{"pricePerUnit":{"USD":"NaN"}}}}}},"product":{"attributes":{"instanceType":"a"}}}`, "USD")
	f.Fuzz(func(t *testing.T, item, currency string) {
		_, price, ok := parseProduct(item, currency)
		if ok && !(price > 0 && price < 1e12) {
			t.Fatalf("price %v accepted", price)
		}
	})
}

// TestUnsavedBookIsReused: where the book cannot be saved (the ConfigMap
// was deleted and the functions may not create it), a warm container
// reads AWS once per max age, not on every tick.
func TestUnsavedBookIsReused(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	cs := fake.NewClientset()
	cs.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, ConfigMapName, errors.New("RBAC"))
	})
	api, prices := &fakeEC2{now: clk.Now()}, &fakePriceList{price: "0.1"}
	src := &Source{EC2: api, PriceList: prices, Region: "eu-central-1", ConfigMap: cs.CoreV1(), Namespace: "kube-system", Clock: clk}
	for range 2 { // the spot part, then the live part
		if _, err := src.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	calls, pcalls := api.calls, prices.calls
	clk.Step(time.Minute)
	b, err := src.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if api.calls != calls || prices.calls != pcalls || b.Live.OnDemand["m5.large"] != 0.1 {
		t.Fatalf("read AWS again a minute later: %d -> %d EC2 calls, %d -> %d price calls", calls, api.calls, pcalls, prices.calls)
	}
}

// pagedEC2 lists n instance types, one per page, failing once with err at
// page failAt (1-based; 0 never).
type pagedEC2 struct {
	*fakeEC2
	n, failAt, pages int
	err              error
}

func (p *pagedEC2) DescribeInstanceTypes(_ context.Context, in *ec2.DescribeInstanceTypesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	p.pages++
	if p.pages == p.failAt {
		return nil, p.err
	}
	i := 0
	if t := aws.ToString(in.NextToken); t != "" {
		fmt.Sscanf(t, "page-%d", &i)
	}
	info := m5large
	info.InstanceType = ec2types.InstanceType(fmt.Sprintf("m5.%dxlarge", i+2))
	out := &ec2.DescribeInstanceTypesOutput{InstanceTypes: []ec2types.InstanceTypeInfo{info}}
	if i+1 < p.n {
		out.NextToken = aws.String(fmt.Sprintf("page-%d", i+1))
	}
	return out, nil
}

// TestLiveCatalogIsReadAFewPagesATick: a tick reads at most PagesPerTick
// pages of a part and the next goes on from its token; the part replaces
// the last reading only when complete; a page that fails keeps the
// progress, and one whose token EC2 no longer knows starts over.
func TestLiveCatalogIsReadAFewPagesATick(t *testing.T) {
	ctx := context.Background()
	embedded, _ := catalog.Load()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	cms := fake.NewClientset().CoreV1()
	api := &pagedEC2{fakeEC2: &fakeEC2{now: clk.Now()}, n: 7}
	src := func() *Source {
		return &Source{EC2: api, PriceList: &fakePriceList{price: "0.1"}, Region: "eu-central-1", ConfigMap: cms, Namespace: "kube-system", Clock: clk, PagesPerTick: 3, MaxAge: 100 * time.Hour}
	}
	if _, err := src().Get(ctx); err != nil { // the spot part
		t.Fatal(err)
	}
	b, err := src().Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.Live.Types != nil || b.Live.NextTypes == nil || b.Live.NextTypes.Pages != 3 || b.ReadFailed() {
		t.Fatalf("after one tick: types %d, progress %+v", len(b.Live.Types), b.Live.NextTypes)
	}
	if _, fb := b.Catalog(embedded); len(fb) != 1 || !strings.Contains(fb[0], "being read (3 pages so far)") {
		t.Fatalf("fallback %q", fb)
	}
	// A page that fails (throttled) keeps what the earlier ticks read.
	clk.Step(time.Minute)
	api.failAt = api.pages + 1
	api.err = errors.New("RequestLimitExceeded: Request limit exceeded")
	b, _ = src().Get(ctx)
	if !b.ReadFailed() || b.Live.NextTypes == nil || b.Live.NextTypes.Pages != 3 {
		t.Fatalf("a throttled page lost the progress: %+v", b.Live.NextTypes)
	}
	clk.Step(time.Minute)
	b, _ = src().Get(ctx)
	if b.Live.NextTypes == nil || b.Live.NextTypes.Pages != 6 {
		t.Fatalf("not resumed: %+v", b.Live.NextTypes)
	}
	clk.Step(time.Minute)
	b, _ = src().Get(ctx)
	if b.Live.NextTypes != nil || len(b.Live.Types) != 7 || b.Live.TypesAt.IsZero() {
		t.Fatalf("not complete after 7 pages: %d types, progress %+v", len(b.Live.Types), b.Live.NextTypes)
	}
	// Twelve hours on, a token EC2 no longer knows starts the reading over.
	clk.Step(13 * time.Hour)
	b, _ = src().Get(ctx)
	if b.Live.NextTypes == nil || len(b.Live.Types) != 7 {
		t.Fatalf("a new reading replaced the last before it was complete: %d types", len(b.Live.Types))
	}
	clk.Step(time.Minute)
	api.failAt = api.pages + 1
	api.err = &smithy.GenericAPIError{Code: "InvalidNextToken", Message: "The token is invalid"}
	b, _ = src().Get(ctx)
	if b.Live.NextTypes != nil || len(b.Live.Types) != 7 {
		t.Fatalf("an expired token kept its progress: %+v", b.Live.NextTypes)
	}
}
