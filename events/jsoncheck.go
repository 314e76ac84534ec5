package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// maxDepth bounds nesting. The deepest object Parse decodes is the fourth level (envelope, detail,
// affectedEntities, entity) and nothing AWS sends goes much further, while encoding/json alone would
// follow 10,000 levels.
const maxDepth = 32

// shape says how strictly an object's keys are compared. encoding/json matches struct fields
// case-insensitively and lets the last duplicate win, so {"instance-id": a, "Instance-Id": b} decodes to
// b. In objects Parse decodes into structs, keys that fold to the same field are rejected; elsewhere
// (tags, metadata) only exact duplicates are, since case-distinct keys are legitimate there.
type shape int

const (
	opaque   shape = iota // not decoded into a struct
	envelope              // the top-level event
	detail                // envelope.detail
	list                  // detail.affectedEntities, detail.eventDescription
	item                  // an element of list
)

func (s shape) child(key string) shape {
	switch {
	case s == envelope && strings.EqualFold(key, "detail"):
		return detail
	case s == detail && (strings.EqualFold(key, "affectedEntities") || strings.EqualFold(key, "eventDescription")):
		return list
	}
	return opaque
}

// checkJSON walks body once before it is decoded and rejects what encoding/json would take silently:
// ambiguous keys, nesting beyond maxDepth, and anything but a single JSON object.
func checkJSON(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers are only skipped; do not fail on ones a float64 cannot hold
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return errors.New("body is not a JSON object")
	}
	if err := walkObject(dec, 1, envelope); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

func walkValue(dec *json.Decoder, depth int, s shape) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return walkObject(dec, depth+1, s)
	case json.Delim('['):
		return walkArray(dec, depth+1, s)
	}
	return nil
}

func walkObject(dec *json.Decoder, depth int, s shape) error {
	if depth > maxDepth {
		return fmt.Errorf("JSON nested deeper than %d levels", maxDepth)
	}
	var seen map[string]bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("object key is %T, not a string", tok)
		}
		name := key
		if s != opaque {
			name = foldKey(key)
		}
		if seen[name] {
			return fmt.Errorf("duplicate key %s", quote(key))
		}
		if seen == nil {
			seen = make(map[string]bool)
		}
		seen[name] = true
		if err := walkValue(dec, depth, s.child(key)); err != nil {
			return err
		}
	}
	_, err := dec.Token() // the closing brace
	return err
}

func walkArray(dec *json.Decoder, depth int, s shape) error {
	if depth > maxDepth {
		return fmt.Errorf("JSON nested deeper than %d levels", maxDepth)
	}
	elem := opaque
	if s == list {
		elem = item
	}
	for dec.More() {
		if err := walkValue(dec, depth, elem); err != nil {
			return err
		}
	}
	_, err := dec.Token() // the closing bracket
	return err
}

// foldKey maps every key that strings.EqualFold (and so encoding/json's field matching) treats as equal
// to one string: each rune becomes the smallest rune of its Unicode simple-folding orbit.
func foldKey(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for _, r := range key {
		low := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			low = min(low, f)
		}
		b.WriteRune(low)
	}
	return b.String()
}
