package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// Every command that reads takes -o text|json|yaml, as kubectl's -o does:
// text for people, json and yaml for scripts (the same fields, named as
// in the JSON).

const (
	outputText = "text"
	outputJSON = "json"
	outputYAML = "yaml"
)

// outputFlag adds -o to a command that reads.
func outputFlag(fs *flag.FlagSet) *string {
	return fs.String("o", outputText, "output format: text, json or yaml")
}

// checkOutput refuses an unknown -o, as a usage error.
func checkOutput(fs *flag.FlagSet, format string) error {
	switch format {
	case outputText, outputJSON, outputYAML:
		return nil
	}
	return badUsage(fs, "-o %q: want text, json or yaml", format)
}

// parseNoArgs parses a reading command that takes flags and no
// arguments, and checks its -o (output, read once parsed).
func parseNoArgs(fs *flag.FlagSet, args []string, output *string) error {
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) != 0 {
		return badUsage(fs, "")
	}
	return checkOutput(fs, *output)
}

// write prints v as format asks: text through v's own writer, json
// indented, yaml from the same JSON field names.
func write(w io.Writer, format string, v any, text func(io.Writer) error) error {
	switch format {
	case outputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case outputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("writing YAML: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	return text(w)
}
