package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

var snapshotCommand = command{
	name:    "snapshot",
	summary: "save what decisions read (redacted: no Secrets, env, commands or images) for karpless simulate/explain --snapshot (read-only)",
	run:     snapshotSave,
}

func snapshotSave(ctx context.Context, c *cli, args []string) error {
	fs := flags(c, "karpless snapshot", "-o <file.json|file.json.gz|-> [flags]")
	cf := addClusterFlags(fs)
	out := fs.String("o", "", "the file to write; a name ending in .gz is gzip-compressed; - writes to stdout")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 || *out == "" {
		return badUsage(fs, "")
	}
	file, err := cf.readFile(ctx)
	if err != nil {
		return err
	}
	compress := strings.HasSuffix(*out, ".gz")
	if *out == "-" {
		return file.Write(c.out, false)
	}
	// Write next to the target and rename, so a failure leaves no half file.
	tmp, err := os.CreateTemp(filepath.Dir(*out), filepath.Base(*out)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := file.Write(tmp, compress); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return err
	}
	o := file.Objects
	fmt.Fprintf(c.err, "wrote %s: %d pods, %d nodes, %d NodeClaims, %d NodePools, %d EC2NodeClasses, pricing book: %v, %d unavailable-offering marks (from %s)\n",
		*out, len(o.Pods), len(o.Nodes), len(o.NodeClaims), len(o.NodePools), len(o.EC2NodeClasses), file.Market.Book != nil, len(file.Market.Unavailable), file.Source)
	return nil
}
