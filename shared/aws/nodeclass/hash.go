package nodeclass

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
)

// HashVersion is written next to the hash (annotation
// karpenter.k8s.aws/ec2nodeclass-hash-version). It differs from Karpenter's
// "v5" on purpose: Karpless computes its own hash, so values never equal
// Karpenter's, and a version mismatch tells the drift check to re-stamp
// NodeClaims launched by Karpenter (or an older Karpless) instead of
// replacing them. v2 added the cluster's CA bundle.
const HashVersion = "karpless-v2"

// Hash is the drift hash of an EC2NodeClass (annotation
// karpenter.k8s.aws/ec2nodeclass-hash on the class and on its NodeClaims).
//
// It covers the same inputs as Karpenter's v5 hash, so it changes under the
// same edits: the spec without subnetSelectorTerms,
// securityGroupSelectorTerms, capacityReservationSelectorTerms,
// amiSelectorTerms, ipPrefixCount and the literal amiFamily, plus the
// resolved family (so setting amiFamily to what the alias implies is not a
// change), and the cluster's CA bundle, which the nodes' user data carries
// (Karpenter v1.14 hashes it too: nodes that trust only a replaced CA
// drift and are replaced). Like Karpenter's it treats lists as sets, and an unset field,
// a nil pointer and a zero value as equal. It is our own function (SHA-256
// of a canonical encoding, first 8 bytes as a decimal), so the values differ
// from Karpenter's; see HashVersion. The result is deterministic across
// processes and Go versions.
func Hash(nc *awsv1.EC2NodeClass, caBundle string) string {
	spec := nc.Spec.DeepCopy()
	spec.SubnetSelectorTerms = nil
	spec.SecurityGroupSelectorTerms = nil
	spec.CapacityReservationSelectorTerms = nil
	spec.AMISelectorTerms = nil
	spec.IPPrefixCount = nil
	spec.AMIFamily = nil
	var b bytes.Buffer
	b.WriteString("family=")
	b.WriteString(strconv.Quote(Family(nc)))
	b.WriteString(";ca=")
	// Whitespace is dropped: the same CA, base64 wrapped or not (from
	// CLUSTER_CA_DATA or eks:DescribeCluster), must not drift every node.
	b.WriteString(strconv.Quote(strings.Join(strings.Fields(caBundle), "")))
	b.WriteString(";spec=")
	canonical(&b, reflect.ValueOf(*spec))
	sum := sha256.Sum256(b.Bytes())
	return strconv.FormatUint(binary.BigEndian.Uint64(sum[:8]), 10)
}

var (
	quantityType = reflect.TypeOf(resource.Quantity{})
	durationType = reflect.TypeOf(metav1.Duration{})
)

// canonical writes a deterministic encoding of v: struct fields by name with
// zero values left out, map entries sorted by key, slice elements sorted
// (lists are sets), quantities and durations as strings.
func canonical(b *bytes.Buffer, v reflect.Value) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		v = v.Elem()
	}
	switch v.Type() {
	case quantityType:
		q := v.Interface().(resource.Quantity)
		b.WriteString(strconv.Quote(q.String()))
		return
	case durationType:
		b.WriteString(strconv.Quote(v.Interface().(metav1.Duration).Duration.String()))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		b.WriteByte('{')
		t := v.Type()
		for i := range t.NumField() {
			f := v.Field(i)
			if !t.Field(i).IsExported() || isZero(f) {
				continue
			}
			b.WriteString(t.Field(i).Name)
			b.WriteByte(':')
			canonical(b, f)
			b.WriteByte(',')
		}
		b.WriteByte('}')
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i].Interface()) < fmt.Sprint(keys[j].Interface()) })
		b.WriteByte('<')
		for _, k := range keys {
			b.WriteString(strconv.Quote(fmt.Sprint(k.Interface())))
			b.WriteByte(':')
			canonical(b, v.MapIndex(k))
			b.WriteByte(',')
		}
		b.WriteByte('>')
	case reflect.Slice, reflect.Array:
		elems := make([]string, 0, v.Len())
		for i := range v.Len() {
			var eb bytes.Buffer
			canonical(&eb, v.Index(i))
			elems = append(elems, eb.String())
		}
		sort.Strings(elems)
		b.WriteByte('[')
		for _, e := range elems {
			b.WriteString(e)
			b.WriteByte(',')
		}
		b.WriteByte(']')
	case reflect.String:
		b.WriteString(strconv.Quote(v.String()))
	default:
		fmt.Fprintf(b, "%v", v.Interface())
	}
}

// isZero treats nil pointers, pointers to zero values, empty collections
// and zero scalars as unset.
func isZero(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return v.IsNil() || isZero(v.Elem())
	case reflect.Map, reflect.Slice:
		return v.Len() == 0
	case reflect.Struct:
		if v.Type() == quantityType {
			q := v.Interface().(resource.Quantity)
			return q.IsZero()
		}
		return v.IsZero()
	}
	return v.IsZero()
}
