// Command staticprices writes the static on-demand prices that Karpenter's
// AWS provider compiles in (pkg/providers/pricing/zz_generated.pricing_*.go,
// one Go map per partition) as Karpless's own data files, one per
// partition, which shared/aws/pricing embeds as the fallback where the
// Price List API cannot be read (GovCloud, an isolated VPC, a failed
// read). The prices are facts; this reads them out of the Go source
// without compiling it:
//
//	go run ./hack/staticprices -git <karpenter-provider-aws git dir> -ref v1.14.1
//	go run ./hack/staticprices -dir <folder holding the three files>
//
// Each output file lists its regions, then one line per instance family:
//
//	region us-east-1
//	c5 12xlarge=2.04 18xlarge=3.06 ...
//
// A price is the shortest decimal that reads back as the same float64, so
// the table Karpless reads equals Karpenter's map, value for value.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// source is one partition's Karpenter file and the data file it becomes.
type source struct{ partition, file string }

var sources = []source{
	{"aws", "zz_generated.pricing_aws.go"},
	{"aws-us-gov", "zz_generated.pricing_aws_us_gov.go"},
	{"aws-cn", "zz_generated.pricing_aws_cn.go"},
}

const karpenterDir = "pkg/providers/pricing/"

func main() {
	gitDir := flag.String("git", "", "a git directory of aws/karpenter-provider-aws")
	ref := flag.String("ref", "v1.14.1", "the tag or commit to read (with -git)")
	dir := flag.String("dir", "", "a folder holding the three zz_generated.pricing_*.go files (instead of -git)")
	out := flag.String("out", "shared/aws/pricing/static", "where the data files go")
	flag.Parse()
	if (*gitDir == "") == (*dir == "") {
		fmt.Fprintln(os.Stderr, "staticprices: give one of -git or -dir")
		os.Exit(2)
	}
	for _, s := range sources {
		var src []byte
		var err error
		origin := ""
		if *gitDir != "" {
			src, err = exec.Command("git", "--git-dir="+*gitDir, "show", *ref+":"+karpenterDir+s.file).Output()
			origin = *ref + " " + karpenterDir + s.file
		} else {
			src, err = os.ReadFile(filepath.Join(*dir, s.file))
			origin = karpenterDir + s.file
		}
		if err != nil {
			fail(fmt.Errorf("reading %s: %w", s.file, err))
		}
		regions, err := parse(src)
		if err != nil {
			fail(fmt.Errorf("%s: %w", s.file, err))
		}
		data := render(s.partition, origin, generatedAt(src), regions)
		if err := os.WriteFile(filepath.Join(*out, s.partition+".txt"), data, 0o644); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "staticprices:", err)
	os.Exit(1)
}

var generatedLine = regexp.MustCompile(`(?m)^// generated at (\S+)`)

// generatedAt is when Karpenter's generator read the prices, if it says.
func generatedAt(src []byte) string {
	if m := generatedLine.FindSubmatch(src); m != nil {
		return string(m[1])
	}
	return "unknown"
}

// parse reads the file's one map literal: region -> instance type -> price.
func parse(src []byte) (map[string]map[string]float64, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", src, 0)
	if err != nil {
		return nil, err
	}
	var lit *ast.CompositeLit
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, spec := range g.Specs {
			if vs, ok := spec.(*ast.ValueSpec); ok && len(vs.Values) == 1 {
				if cl, ok := vs.Values[0].(*ast.CompositeLit); ok {
					if lit != nil {
						return nil, errors.New("more than one map literal")
					}
					lit = cl
				}
			}
		}
	}
	if lit == nil {
		return nil, errors.New("no map literal")
	}
	regions := map[string]map[string]float64{}
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			return nil, fmt.Errorf("unexpected element %T", e)
		}
		region, err := stringOf(kv.Key)
		if err != nil {
			return nil, err
		}
		inner, ok := kv.Value.(*ast.CompositeLit)
		if !ok {
			return nil, fmt.Errorf("region %s: not a map literal", region)
		}
		prices := map[string]float64{}
		for _, e := range inner.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				return nil, fmt.Errorf("region %s: unexpected element %T", region, e)
			}
			name, err := stringOf(kv.Key)
			if err != nil {
				return nil, err
			}
			n, ok := kv.Value.(*ast.BasicLit)
			if !ok || (n.Kind != token.FLOAT && n.Kind != token.INT) {
				return nil, fmt.Errorf("%s %s: price is not a number", region, name)
			}
			v, err := strconv.ParseFloat(n.Value, 64)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", region, name, err)
			}
			if !strings.Contains(name, ".") || strings.ContainsAny(name, " =") {
				return nil, fmt.Errorf("%s: odd instance type name %q", region, name)
			}
			prices[name] = v
		}
		regions[region] = prices
	}
	return regions, nil
}

func stringOf(e ast.Expr) (string, error) {
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", fmt.Errorf("key %T is not a string", e)
	}
	return strconv.Unquote(b.Value)
}

// render writes regions in name order, each family on a line of its own,
// its sizes in name order.
func render(partition, origin, at string, regions map[string]map[string]float64) []byte {
	var b bytes.Buffer
	currency := "USD"
	if partition == "aws-cn" {
		currency = "CNY"
	}
	fmt.Fprintf(&b, "# Static Linux on-demand prices per hour (%s) of partition %s, as Karpenter's AWS\n", currency, partition)
	fmt.Fprintf(&b, "# provider compiles them in (aws/karpenter-provider-aws %s,\n# generated at %s).\n", origin, at)
	fmt.Fprintf(&b, "# Written by hack/staticprices. DO NOT EDIT.\n")
	for _, region := range slices.Sorted(maps.Keys(regions)) {
		fmt.Fprintf(&b, "region %s\n", region)
		prices := regions[region]
		family := ""
		for _, name := range slices.Sorted(maps.Keys(prices)) {
			fam, size, _ := strings.Cut(name, ".")
			if fam != family {
				if family != "" {
					b.WriteByte('\n')
				}
				b.WriteString(fam)
				family = fam
			}
			fmt.Fprintf(&b, " %s=%s", size, strconv.FormatFloat(prices[name], 'f', -1, 64))
		}
		if family != "" {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
